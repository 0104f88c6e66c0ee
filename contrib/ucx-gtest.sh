#!/bin/bash
# Builds UCX's own UCT conformance suite (test/gtest of the UCX source that
# hipower builds against) with hipower added to its transport lists, into
# the cache (never into git). Prints the gtest binary's path. Runs once per
# UCX version, configure flags and patch. Only the suites hipower runs are
# compiled: gtest's common code and its UCT suites, not its UCP, UCS and
# UCM suites nor those of UCX's ib transports, which made most of the
# binary's compile time and are never run for hipower
# (test/rig-tests/t_uct_gtest.sh checks how many tests ran).
#
#   contrib/ucx-gtest.sh            # build if missing, print the binary
#   contrib/ucx-gtest.sh --check    # print it if built and current, else exit 1
#
# The patch is the smallest that makes gtest know hipower: one token in the
# list of transports every generic UCT suite is instantiated for
# (UCT_TEST_NO_SELF_TLS in test/gtest/uct/uct_test.h; not the IB list, whose
# suites cast to UCX's own ib interfaces) and one in test_md's component
# list. It is applied by sed to the cached copy and checked afterwards.
# UCX's Java and Go bindings are left out (Maven would try the network).
set -eu -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${HIPOWER_CACHE:-$ROOT/.cache}
PATCH_VERSION=6
check_only=0
[ "${1:-}" = --check ] && check_only=1

log() { echo "ucx-gtest: $*" >&2; }

src=$("$ROOT/contrib/ucx-source.sh")
flags=$(cat "$src/.hipower-configured")
dir=$CACHE/ucx-gtest/$(basename "$src")
binary=$dir/test/gtest/gtest
stamp="patch $PATCH_VERSION; $flags"
if [ -x "$binary" ] && [ -r "$dir/.hipower-gtest" ] &&
   [ "$(cat "$dir/.hipower-gtest")" = "$stamp" ]; then
    echo "$binary"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    log "no current build in $dir"
    exit 1
fi

buildlog=$CACHE/ucx-gtest.log
log "building UCX's gtest in $dir (log: $buildlog)"
start=$SECONDS
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
# The configured source of the installed UCX, copied: the hipower build
# keeps using the original with the packaged library's config.h
cp -a "$src" "$dir"
rm -f "$dir/.hipower-configured"

# hipower after tcp in the list of transports (no-self list, so also the
# suites that exclude 'self'), and after ib in test_md's component list
sed -i 's/^\(    tcp,\) *\\$/\1 hipower, \\/' "$dir/test/gtest/uct/uct_test.h"
sed -i 's/^\(                   ib,\) *\\$/\1 hipower, \\/' \
    "$dir/test/gtest/uct/test_md.cc"
grep -q '^    tcp, hipower, \\$' "$dir/test/gtest/uct/uct_test.h" &&
grep -q '^                   ib, hipower, \\$' "$dir/test/gtest/uct/test_md.cc" || {
    log "the transport lists in $dir/test/gtest/uct are not where this UCX version had them"
    exit 1
}

read -r -a args <<< "$flags"
args=("${args[@]:1}")   # the stamp starts with the Debian version
# gcc 12 warns about UCX 1.13's own gtest sources (-Wuse-after-free in
# ucm/malloc_hook.cc, a test that uses freed memory on purpose), which UCX
# builds with -Werror. GTEST_CXXFLAGS, which UCX's configure adds to for
# the gtest sources only: a CXXFLAGS on make's command line would also
# replace the flags UCX's perftest library sets for itself (-nostdlib, no
# exceptions, so that ucx_perftest no longer links), and one given to
# configure is dropped by it.
# Left out as well, to halve the build: static libraries (libtool would
# compile every UCX source twice), the mlx5 transports and their tests (no
# such device; the suite instantiates its generic tests for the devices it
# finds), FUSE, the examples.
(cd "$dir" && GTEST_CXXFLAGS="-Wno-error=use-after-free" \
     ./configure "${args[@]}" --enable-gtest --without-java --without-go \
         --disable-static --with-mlx5-dv=no --without-fuse3 --disable-examples) \
    > "$buildlog" 2>&1 || {
    tail -30 "$buildlog" >&2
    log "configure --enable-gtest failed (log: $buildlog)"
    exit 1
}
jobs=$(nproc)
configured_lines=$(wc -l < "$buildlog")
# The gtest binary's objects as configured, less the suites not run for
# hipower. Given on make's command line, the list reaches test/gtest's
# make through MAKEFLAGS and replaces automake's there.
all_objects=$(printf 'hipower-print-objects:\n\t@echo $(am_gtest_OBJECTS)\n' |
    make -s -C "$dir/test/gtest" -f Makefile -f - hipower-print-objects) || {
    log "test/gtest/Makefile in $dir has no am_gtest_OBJECTS"; exit 1; }
uct_objects=$(tr ' ' '\n' <<< "$all_objects" | awk '
    /^uct\/ib\// { next }
    /^(common|uct)\// || /^ucs\/gtest-test_(event_set|stats_filter)\.o$/ { print }' |
    tr '\n' ' ')
grep -q 'uct/gtest-test_p2p_am\.o' <<< "$uct_objects" || {
    log "no UCT suite among gtest's objects in $dir: $all_objects"; exit 1; }
log "compiling $(wc -w <<< "$uct_objects") of gtest's $(wc -w <<< "$all_objects") objects (its common code and UCT suites)"
# Only what the gtest binary links (test/gtest/Makefile.am's gtest_LDADD),
# each in its own directory: not UCX's transport modules (ib, sm, ...: the
# suite runs hipower alone, loaded by LD_PRELOAD), tools, test programs nor
# gtest's helper modules, which the UCT suites do not load
build_gtest() {
    local d
    for d in src/ucm:libucm.la src/ucs/vfs/sock: src/ucs:libucs.la \
             src/uct:libuct.la src/uct/ib:libuct_ib.la src/ucp:libucp.la \
             src/tools/perf/lib: \
             test/gtest/common/googletest:; do
        make -j"$jobs" -C "$dir/${d%%:*}" ${d#*:} || return 1
    done
    make -j"$jobs" -C "$dir/test/gtest" gtest am_gtest_OBJECTS="$uct_objects"
}
build_gtest >> "$buildlog" 2>&1 || {
    # the compiler's, linker's and make's own failure lines (UCX compiles
    # with -Werror, so a plain 'error' would match every command line)
    tail -n +"$((configured_lines + 1))" "$buildlog" |
        grep -E -m20 -A3 'error:|Error [0-9]+|undefined reference|No space left|not found|Killed|fatal' |
        cut -c1-400 >&2 || true
    tail -15 "$buildlog" | cut -c1-400 >&2
    df -h "$CACHE" >&2 || true
    log "building UCX's gtest failed (log: $buildlog)"
    exit 1
}
[ -x "$binary" ] || { log "no $binary after the build"; exit 1; }
echo "$stamp" > "$dir/.hipower-gtest"
log "built in $((SECONDS - start)) s"
echo "$binary"
