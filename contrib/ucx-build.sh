#!/bin/bash
# ucx-build.sh: builds an upstream UCX release from its source archive into
# the clone's cache, once per machine, for building and testing hipower
# against a UCX other than the system's (issue 13). Never installs anything
# outside the cache: Debian's Open MPI and MPICH keep the system UCX.
#
#   contrib/ucx-build.sh VERSION        # 1.18.1 or 1.22.0
#   contrib/ucx-build.sh --check VERSION
#
# Prints the prefix (.cache/ucx-VERSION/prefix: lib/libuc{s,t,p}.so*,
# lib/ucx/ modules, bin/ucx_info, bin/ucx_perftest) on stdout; the configured
# source tree hipower's configure needs (--with-ucx-src) is
# .cache/ucx-VERSION/ucx-VERSION. --check prints the prefix if it is built
# and exits 1 otherwise.
#
# The archive is taken from $HIPOWER_UCX_ARCHIVES (default: ../shared/ucx-src
# next to the clone) and checked against its SHA-256; without it the script
# says what to download. Configured like Debian's own package (debian/rules
# of ucx 1.13.1: --enable-mt --with-verbs --disable-logging --enable-cma;
# its --disable-backtrace-detail is gone in 1.18) with rdmacm, and without
# what hipower's tests never load: the GPU, Java and Go parts, the mlx5 and
# EFA transports (no such device; mlx5 alone is a third of UCT), FUSE, static
# libraries (libtool would compile everything twice); no gtest. About 4
# minutes per version on 2 cores.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
version=${1:-}

# Releases this project is tested with: tag, commit, archive SHA-256
case "$version" in
    1.18.1) commit=d9aa5650d4cbcbb00d61af980614dbe9dd27a1f2
            sha=b3cf2e1f77fc927e83f93af452eac58bf65c4106953a906e6c0ed590262600d8 ;;
    1.22.0) commit=8a6b06fb880accbb933a79cda893883872c68d9d
            sha=d2ae32e86c463b77997369bc62caf49dc165338075056a46fc81434abcbcb8e6 ;;
    *) echo "usage: $(basename "$0") [--check] 1.18.1|1.22.0" >&2; exit 2 ;;
esac

cache=$ROOT/.cache/ucx-$version
src=$cache/ucx-$version
prefix=$cache/prefix
stamp=$cache/built
# Changing the flags below: bump FLAGS_VERSION, so caches are rebuilt
FLAGS_VERSION=2
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha flags $FLAGS_VERSION" ] &&
   [ -x "$prefix/bin/ucx_info" ]; then
    echo "$prefix"
    exit 0
fi
[ "$check" = 1 ] && exit 1

archives=${HIPOWER_UCX_ARCHIVES:-$ROOT/../shared/ucx-src}
archive=$archives/ucx-$version.tar.gz
if [ ! -r "$archive" ]; then
    cat >&2 <<EOF
ucx-build: no archive $archive
  Download UCX $version (tag v$version, commit $commit) from
  https://github.com/openucx/ucx/releases/tag/v$version (the source, or
  'git archive --prefix=ucx-$version/ v$version | gzip > ucx-$version.tar.gz'
  in a clone) and put it there, or set HIPOWER_UCX_ARCHIVES to its directory.
  Expected SHA-256 of the git archive: $sha
EOF
    exit 1
fi
got=$(sha256sum "$archive" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    echo "ucx-build: $archive has SHA-256 $got, expected $sha (tag v$version): not building from it" >&2
    exit 1
fi

log=$cache/build.log
rm -rf "$cache"
mkdir -p "$cache" || exit 1
step() {
    echo "ucx-build: UCX $version: $1" >&2
    shift
    "$@" >> "$log" 2>&1 || {
        tail -30 "$log" >&2
        echo "ucx-build: UCX $version failed (full log: $log)" >&2
        exit 1
    }
}
step "unpacking $archive" tar -xzf "$archive" -C "$cache"
[ -d "$src" ] || { echo "ucx-build: the archive has no ucx-$version/ directory" >&2; exit 1; }
cd "$src" || exit 1
step "autogen" ./autogen.sh
# EFA is new in 1.22 (configure warns about options it does not know)
only_122=
[ "$version" = 1.22.0 ] && only_122=--without-efa
step "configure (log: $log)" ./configure --prefix="$prefix" \
    --enable-mt --with-verbs --with-rdmacm --enable-cma \
    --disable-logging --enable-devel-headers \
    --without-cuda --without-rocm --without-ze --without-gdrcopy \
    --without-knem --without-xpmem --without-ugni --without-java --without-go \
    --disable-doxygen-doc --disable-examples \
    --disable-static --without-mlx5 --without-fuse3 $only_122
step "make -j$(nproc)" make -j"$(nproc)"
step "make install" make install
echo "$sha flags $FLAGS_VERSION" > "$stamp"
echo "ucx-build: UCX $version built into $prefix in $SECONDS s" >&2
echo "$prefix"
