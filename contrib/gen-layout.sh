#!/bin/sh
# Writes the transport's unit table into docs/development.md, between the
# "units:begin" and "units:end" markers, from test/layers/unit-graph
# --markdown: the floors, files, sizes and what each unit names are read
# from the sources, not written by hand. test/layers/check-units (make
# check) fails while the table in the docs differs from the sources'.
#
# usage: contrib/gen-layout.sh   (from the source tree)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
doc=$top/docs/development.md
table=$(mktemp "${TMPDIR:-/tmp}/hipower-layout.XXXXXX")
trap 'rm -f "$table" "$table.new"' EXIT
python3 "$top/test/layers/unit-graph" --markdown "$top/src/uct/hipower" > "$table"
awk -v table="$table" '
    /<!-- units:begin/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
    /<!-- units:end/   { skip = 0 }
    !skip' "$doc" > "$table.new"
grep -q '<!-- units:begin' "$table.new" || { echo "gen-layout: no units:begin marker in $doc" >&2; exit 1; }
cat "$table.new" > "$doc"
echo "gen-layout: $(grep -c '^| [0-9]' "$table") units written into docs/development.md"
