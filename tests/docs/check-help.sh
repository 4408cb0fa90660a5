#!/usr/bin/env bash
# Compares what each program's --help lists with what its doc lists, so that an option or a
# command cannot be added to one and forgotten in the other.
#
#   check-help.sh BIN_DIR SOURCE_DIR
#
# - pipescope-run: the options of --help against the first column of the options table of
#   docs/runner-cli.md ("## Options").
# - pipescope-trace: each command line of --help ("  pipescope-trace stats RUN.db ...") must be
#   a line of the synopsis of docs/trace-cli.md, and the other way round.
# - pipescope --export: the options of its usage lines against those of the command in
#   docs/app.md ("Headless").
# The app's options other than --export (--show) are the GUI's and are not compared.
set -euo pipefail
# The C collation: in Turkish, [a-z] leaves out the letter i (grep missed "import-nsys"), and
# sort and comm must order alike.
export LC_ALL=C

bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
failed=0

# Every "--option" token in the text on stdin, sorted and unique.
options() { grep -oE -- '--[a-z][a-z-]*' | sort -u; }

# Reports the difference of two sorted lists ($3: what they are).
compare() {
    local what=$1 help=$2 doc=$3
    local only_help only_doc
    only_help=$(comm -23 <(printf '%s\n' "$help") <(printf '%s\n' "$doc") | sed '/^$/d')
    only_doc=$(comm -13 <(printf '%s\n' "$help") <(printf '%s\n' "$doc") | sed '/^$/d')
    if [ -n "$only_help$only_doc" ]; then
        echo "FAIL  $what"
        [ -z "$only_help" ] || echo "$only_help" | sed 's/^/      only in --help: /'
        [ -z "$only_doc" ] || echo "$only_doc" | sed 's/^/      only in the doc: /'
        failed=$((failed + 1))
    else
        echo "ok    $what ($(printf '%s\n' "$help" | wc -l) entries)"
    fi
}

# pipescope-run: help lines "  --opt VALUE   text" (the option column ends at two spaces).
run_help=$("$bin/pipescope-run" --help | grep -E '^  -' | sed -E 's/^  //; s/  .*//' | options)
run_doc=$(awk '/^## Options/ { on = 1; next } /^## / { on = 0 } on && /^\| `-/' \
    "$src/docs/runner-cli.md" | cut -d'|' -f2 | options)
compare "pipescope-run --help against runner-cli.md's options table" "$run_help" "$run_doc"

# pipescope-trace: the command lines, word for word.
trace_help=$("$bin/pipescope-trace" --help | grep -E '^  pipescope-trace [a-z]' |
    grep -vE '^  pipescope-trace help' | sed -E 's/^  //' | sort -u)
trace_doc=$(awk '/^```/ { n++; next } n == 1 && /^pipescope-trace [a-z]/' \
    "$src/docs/trace-cli.md" | grep -vE '^pipescope-trace help' | sort -u)
compare "pipescope-trace --help against trace-cli.md's synopsis" "$trace_help" "$trace_doc"

# pipescope --export: the options of the usage lines from the one that starts the export (a
# build without the app has no pipescope).
if [ -x "$bin/pipescope" ]; then
    app_help=$("$bin/pipescope" --help 2>/dev/null |
        awk '/--export/ { on = 1 } /^VIEW/ { on = 0 } on' | options)
    app_doc=$(awk '/^pipescope --export/ { on = 1 } on && /^```/ { on = 0 } on' \
        "$src/docs/app.md" | options)
    compare "pipescope --export's usage against app.md's" "$app_help" "$app_doc"
else
    echo "skip  pipescope --export (this build has no app)"
fi

[ "$failed" -eq 0 ]
