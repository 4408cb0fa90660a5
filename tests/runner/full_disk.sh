#!/usr/bin/env bash
# pipescope-run on a nearly full disk: a small tmpfs in a private mount namespace. Needs root and
# unshare (exit 77 without them).
#   tests/runner/full_disk.sh BUILD_DIR
# 1. Too little room for the trace as it is written: refused before the file is made (exit 2),
#    both sizes given in one unit.
# 2. Room for the trace but not for copying its write-ahead log into it at the end: exit 4, and
#    the message says where the rest of the trace is; the two files read as one complete trace.
# 3. An export, a merge and a report file that fill the disk: exit 4, the file they were to
#    replace as it was, no partial file beside it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${1:-build/ci}
run="$build/bin/pipescope-run"
trace="$build/bin/pipescope-trace"
preset=resources/presets/default.json

if [ "${2:-}" = --inside ]; then
    dir=$(mktemp -d)
    status=0
    check() {  # NAME RC WANTED_RC PATTERN FILE
        if [ "$2" -ne "$3" ] || ! grep -q "$4" "$5"; then
            echo "FAIL: $1: exit $2 (wanted $3), output:"
            cat "$5"
            status=1
        else
            echo "ok: $1: exit $2, $(grep -m1 "$4" "$5")"
        fi
    }
    mount -t tmpfs -o size=1800k tmpfs "$dir" || exit 77
    "$run" "$preset" --out "$dir/t.db" > "$dir.log" 2>&1
    check "1.8 MiB free" $? 2 "while it is written) and $dir has 1.8 MiB free" "$dir.log"
    [ ! -e "$dir/t.db" ] || { echo "FAIL: a refused run made $dir/t.db"; status=1; }
    umount "$dir"

    mount -t tmpfs -o size=3000k tmpfs "$dir" || exit 77
    "$run" "$preset" --out "$dir/t.db" > "$dir.log" 2>&1
    check "2.9 MiB free" $? 4 "could not be moved out of $dir/t.db-wal (SQLite: database or disk is full)" "$dir.log"
    "$trace" stats "$dir/t.db" > "$dir.stats" 2>&1
    check "the trace with its log" $? 0 "status: complete" "$dir.stats"
    umount "$dir"

    # 3. Outputs that replace a file on a disk that fills up: exit 4 naming the file, the old file
    #    as it was, nothing left beside it.
    "$run" "$preset" --out "$dir.db" --iterations 4 > /dev/null 2>&1 || status=1
    mount -t tmpfs -o size=64k tmpfs "$dir" || exit 77
    kept() {  # NAME FILE: FILE still holds the old text, and no hidden file is left
        if [ "$(cat "$2")" != "old" ] || [ -n "$(find "$dir" -name '.*' -type f)" ]; then
            echo "FAIL: $1: $2 holds \"$(head -c 40 "$2")\"; beside it: $(ls -A "$dir")"
            status=1
        fi
    }
    echo old > "$dir/t.csv"
    echo old > "$dir/m.db"
    echo old > "$dir/s.json"
    dd if=/dev/zero of="$dir/filler" bs=4k > /dev/null 2>&1  # until the disk is full
    "$trace" export-csv "$dir.db" "$dir/t.csv" --force > "$dir.log" 2>&1
    check "export-csv" $? 4 "$dir/t.csv: writing failed: No space left on device" "$dir.log"
    kept "export-csv" "$dir/t.csv"
    "$trace" merge "$dir.db" -o "$dir/m.db" --force > "$dir.log" 2>&1
    check "merge" $? 4 "$dir/m.db" "$dir.log"
    kept "merge" "$dir/m.db"
    "$run" "$preset" --save-schedule "$dir/s.json" > "$dir.log" 2>&1
    check "--save-schedule" $? 4 "cannot write $dir/s.json: No space left on device" "$dir.log"
    kept "--save-schedule" "$dir/s.json"
    umount "$dir"
    rm -f "$dir.db"
    rm -rf "$dir" "$dir.log" "$dir.stats"
    exit $status
fi

if [ "$(id -u)" -ne 0 ] || ! command -v unshare > /dev/null; then
    echo "SKIP: needs root and unshare (a tmpfs in a private mount namespace)"
    exit 77
fi
[ -x "$run" ] && [ -x "$trace" ] || { echo "build $build first (pipescope-run, pipescope-trace)"; exit 1; }
if ! why=$(unshare -m --propagation private true 2>&1); then
    echo "SKIP: cannot make a mount namespace here: $why"
    exit 77
fi
unshare -m --propagation private bash "$0" "$build" --inside
