#!/bin/bash
# build-for-ucx.sh: builds hipower, with -Werror, against a UCX other than
# the system's (1.18.1 or 1.22.0, built by contrib/ucx-build.sh into the
# cache first if needed), in a build directory of its own in the cache:
# the plugin, the unit tests and the programs the rig tests run.
#
#   contrib/build-for-ucx.sh VERSION [--check | --check-only]
#
# Prints the build directory (.cache/hipower-ucx-VERSION/build) when the
# build succeeded. With --check, also runs the unit tests there (make
# check; log: .cache/hipower-ucx-VERSION/check.log) and prints their Check
# verdict line on stderr; --check-only runs them in an existing build
# without rebuilding (the test command builds in the background at low
# priority, where Check's timeouts would not hold, and tests afterwards).
# Exit status: 0 ok, 1 no build, 3 built but the unit tests failed (the
# build directory is printed all the same).
#
# The main build is made in the source tree, and autotools refuse to build
# out of a configured tree; so the sources are copied to
# .cache/hipower-ucx-VERSION/src first and built from there: git's tracked
# and untracked (not ignored) files in a checkout, the distribution
# (make distdir) of a configured tree without git; an unconfigured tree
# without git is built from in place.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${1:-}
check=0 build_it=1
case "${2:-}" in
    "") ;;
    --check) check=1 ;;
    --check-only) check=1 build_it=0 ;;
    *) version= ;;
esac
case "$version" in
    1.18.1|1.22.0) ;;
    *) echo "usage: $(basename "$0") 1.18.1|1.22.0 [--check | --check-only]" >&2; exit 2 ;;
esac
log() { echo "build-for-ucx: UCX $version: $*" >&2; }

top=$ROOT/.cache/hipower-ucx-$version
build=$top/build
# No verdict of an earlier run may survive a failure of this one
rm -f "$top/check.log"
if [ "$build_it" = 0 ]; then
    prefix=$("$ROOT/contrib/ucx-build.sh" --check "$version") &&
        [ -x "$build/test/unit/check_hipower" ] || {
        log "no build in $build to test: run without --check-only first"; exit 1; }
    cd "$build" || exit 1
else
    prefix=$("$ROOT/contrib/ucx-build.sh" "$version") || exit 1
    ucx_src=$ROOT/.cache/ucx-$version/ucx-$version
    mkdir -p "$build" || exit 1

    if git -C "$ROOT" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        # Files that left the tree would linger in the copy: start afresh
        rm -rf "$top/src"
        mkdir -p "$top/src"
        (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
             xargs -0 -r sh -c 'for f; do [ ! -e "$f" ] || printf "%s\0" "$f"; done' sh |
             tar --null -T - -cf -) | tar -xf - -C "$top/src" || {
            log "copying the sources to $top/src failed"; exit 1; }
        srcdir=$top/src
        (cd "$srcdir" && ./autogen.sh > "$top/autogen.log" 2>&1) || {
            cat "$top/autogen.log" >&2; log "autogen failed"; exit 1; }
    elif [ -e "$ROOT/config.status" ]; then
        rm -rf "$top/src"
        make -s -C "$ROOT" distdir distdir="$top/src" > "$top/distdir.log" 2>&1 || {
            cat "$top/distdir.log" >&2; log "make distdir in $ROOT failed"; exit 1; }
        srcdir=$top/src
    else
        srcdir=$ROOT
        [ -x "$srcdir/configure" ] || (cd "$srcdir" && ./autogen.sh >&2) || exit 1
    fi

    cd "$build" || exit 1
    log "configure against $prefix (source $ucx_src)"
    PKG_CONFIG_PATH=$prefix/lib/pkgconfig "$srcdir/configure" -q \
        --with-ucx-src="$ucx_src" --enable-werror > "$top/configure.log" 2>&1 || {
        tail -20 "$top/configure.log" >&2; log "configure failed (log: $top/configure.log)"; exit 1; }
    log "make"
    make -s -j"$(nproc)" rig-check-programs > "$top/make.log" 2>&1 || {
        tail -30 "$top/make.log" >&2; log "make failed (log: $top/make.log)"; exit 1; }
fi
if [ "$check" = 1 ]; then
    log "make check (unit tests, against UCX $version's libraries)"
    # The test binary links that UCX's libraries (hipower-run does the
    # same for the programs the rig tests start). The random schedules
    # drive the protocol through UCT calls that do not change between
    # versions: 2,000 of them here (HIPOWER_SCHED_COUNT overrides), the
    # system UCX's make check runs 10,000
    LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    HIPOWER_SCHED_COUNT=${HIPOWER_SCHED_COUNT:-2000} \
        make -s -j"$(nproc)" check > "$top/check.log" 2>&1
    rc=$?
    grep -E '^[0-9]+%: Checks' "$top/check.log" >&2 ||
        tail -30 "$top/check.log" >&2
    grep -E '^ *[^ ]*:[0-9]+:[EF]:' "$top/check.log" | head -20 >&2
    if [ "$rc" != 0 ]; then
        log "make check failed (log: $top/check.log)"
        echo "$build"
        exit 3
    fi
fi
echo "$build"
