#!/bin/sh
# Writes the transport's unit table into docs/development.md, between the
# "units:begin" and "units:end" markers, from test/layers/unit-graph
# --markdown: the floors, files, sizes and what each unit names are read
# from the sources, not written by hand; and who writes each section of
# the state, between "writers:begin" and "writers:end" (--owners).
# test/layers/check-units (make check) fails while either table in the
# docs differs from the sources'.
#
# usage: contrib/gen-layout.sh   (from the source tree)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
doc=$top/docs/development.md
table=$(mktemp "${TMPDIR:-/tmp}/hipower-layout.XXXXXX")
trap 'rm -f "$table" "$table.new"' EXIT
# Between the MARKER:begin and MARKER:end lines of the document, the output
# of unit-graph with FLAG
fill() { # <marker> <flag>
    python3 "$top/test/layers/unit-graph" "$2" "$top/src/uct/hipower" > "$table"
    awk -v table="$table" -v begin="<!-- $1:begin" -v end="<!-- $1:end" '
        index($0, begin) == 1 { print; while ((getline l < table) > 0) print l; skip = 1; next }
        index($0, end) == 1   { skip = 0 }
        !skip' "$doc" > "$table.new"
    grep -q "<!-- $1:begin" "$table.new" || { echo "gen-layout: no $1:begin marker in $doc" >&2; exit 1; }
    cat "$table.new" > "$doc"
}
fill writers --owners
echo "gen-layout: $(grep -c '^| `' "$table") sections of state and their writers written into docs/development.md"
fill units --markdown
echo "gen-layout: $(grep -c '^| [0-9]' "$table") units written into docs/development.md"
