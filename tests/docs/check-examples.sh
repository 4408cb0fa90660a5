#!/usr/bin/env bash
# Runs the simulator examples of the docs and compares what they print with what the docs show,
# so that an example cannot drift from the program unnoticed.
#
#   check-examples.sh BIN_DIR SOURCE_DIR
#
# An example is a fenced block line "$ pipescope-run ..." followed by its output (up to the next
# "$ " line or the end of the block). Checked: simulated runs whose inputs are the presets.
# A line of the output that starts with "..." (`    ... (ranks 1 to 3)`) stands for any number of
# lines, so an example that leaves part of its output out is still checked on the rest.
# Skipped, and listed: examples whose output the doc elides inside a line ("..."), that run a real
# backend or list devices (machine-dependent), pipe into another program, or read a file the doc
# made by hand. Examples run in order in one scratch folder, so one may see the files of the one
# before.
set -euo pipefail

bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$src/resources" "$work/resources"

checked=0
skipped=0
failed=0

# Splits every doc's examples into numbered command and expected-output files.
for doc in "$src"/docs/*.md "$src/README.md"; do
    awk -v out="$work/ex" -v doc="$(basename "$doc")" '
        function finish() {
            if (n > 0) { close(out "." n ".out") }
            inex = 0
        }
        /^```/ { finish(); fence = !fence; next }
        fence && /^\$ pipescope-run / {
            finish()
            n = ++count[doc]
            file = out "." doc "." n
            print substr($0, 3) > (file ".cmd")
            close(file ".cmd")
            printf "" > (file ".out")
            print FNR > (file ".line")
            close(file ".line")
            print file >> (out ".list")
            inex = 1
            next
        }
        fence && /^\$ / { finish(); next }
        fence && inex { print >> (file ".out") }
    ' "$doc"
done

# Whether the output ($2) is what the doc shows ($1), where a doc line that starts with "..."
# matches any number of output lines (none included).
matches() {
    # Through the environment: awk -v would read backslashes in the text as escapes.
    expected="$1" actual="$2" awk '
        BEGIN {
            n = split(ENVIRON["expected"], e, "\n")
            m = split(ENVIRON["actual"], a, "\n")
            # ok[i, j]: doc lines i..n match output lines j..m.
            for (i = n + 1; i >= 1; i--) {
                for (j = m + 1; j >= 1; j--) {
                    if (i > n) {
                        ok[i, j] = (j > m)
                    } else if (e[i] ~ /^[[:space:]]*(\.\.\.|…)/) {
                        ok[i, j] = ok[i + 1, j] || (j <= m && ok[i, j + 1])
                    } else {
                        ok[i, j] = j <= m && e[i] == a[j] && ok[i + 1, j + 1]
                    }
                }
            }
            exit !ok[1, 1]
        }'
}

[ -e "$work/ex.list" ] || { echo "docs examples: none found" >&2; exit 1; }
while read -r base; do
    cmd_file=$base.cmd
    name=${base#"$work"/ex.}
    doc=${name%.*}
    line=$(cat "$base.line")
    cmd=$(cat "$cmd_file")
    why=""
    if grep -vE '^[[:space:]]*(\.\.\.|…)' "$base.out" | grep -qE '(\.\.\.|…)'; then
        why="output elided inside a line"
    elif grep -qE -- '--backend (cpu|cuda)|--list-devices' <<<"$cmd"; then
        why="machine-dependent"
    elif grep -q '|' <<<"$cmd"; then
        why="pipes into another program"
    else
        for arg in $cmd; do
            case "$arg" in
                resources/*) ;;
                *.json)
                    [ -e "$work/$arg" ] || why="reads $arg, which the doc makes by hand"
                    ;;
            esac
        done
    fi
    if [ -n "$why" ]; then
        echo "skip  $doc:$line  ($why)"
        skipped=$((skipped + 1))
        continue
    fi
    # What the terminal shows (stdout and stderr together), or stdout alone where the doc
    # says the rest went to stderr. A CSV's CRLF line ends read as the doc's plain ones.
    actual=$(cd "$work" && PATH="$bin:$PATH" bash -c "$cmd" 2>&1 | tr -d '\r' || true)
    expected=$(cat "$base.out")
    if ! matches "$expected" "$actual"; then
        rm -f "$work"/*.db "$work"/*.db-* 2>/dev/null || true
        stdout_only=$(cd "$work" && PATH="$bin:$PATH" bash -c "$cmd" 2>/dev/null | tr -d '\r' || true)
        matches "$expected" "$stdout_only" && actual=$stdout_only
    fi
    if matches "$expected" "$actual"; then
        echo "ok    $doc:$line  $cmd"
        checked=$((checked + 1))
    else
        echo "FAIL  $doc:$line  $cmd"
        diff <(cat "$base.out") <(printf '%s\n' "$actual") | sed 's/^/      /' || true
        failed=$((failed + 1))
    fi
done <"$work/ex.list"

echo "docs examples: $checked match, $failed differ, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$checked" -gt 0 ]
