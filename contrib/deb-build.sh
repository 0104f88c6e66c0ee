#!/bin/bash
# Builds the Debian package ucx-hipower the way a distribution would: from
# the "make dist" tarball as hipower_VERSION.orig.tar.gz with this tree's
# debian/ added (the tarball carries no debian/ of its own), with
# dpkg-buildpackage (source and binary, unsigned), then lints the
# result with lintian, failing on any error or warning that
# debian/*lintian-overrides does not justify.
#
#   contrib/deb-build.sh [OUTDIR]     (default: build/deb)
#
# Needs a configured tree (contrib/build.sh) for "make dist", and the UCX
# source the build uses (HIPOWER_UCX_SRC, default: contrib/ucx-source.sh).
# DEB_BUILD_OPTIONS is passed on; unset, it is "nocheck": the test command
# ran the same unit tests on the same source just before (set it to "" to
# run "make check" inside the package build too, about 5 minutes).
# Prints the path of the .deb last.
set -eu -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
out=${1:-$ROOT/build/deb}

log() { echo "deb-build: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ -r Makefile ] || die "no configured tree here: run contrib/build.sh first"
for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" > /dev/null || die "$tool is missing (contrib/install-deps.sh installs it)"
done

version=$(sed -n 's/^PACKAGE_VERSION = //p' Makefile)
deb_version=$(dpkg-parsechangelog -l debian/changelog -S Version)
# debian/changelog follows the project's version: UPSTREAM-REVISION
[ "${deb_version%-*}" = "$version" ] ||
    die "debian/changelog is at $deb_version, the project (configure.ac) at $version: add a changelog entry for $version-1 (dch -v $version-1)"

ucx_src=${HIPOWER_UCX_SRC:-$(contrib/ucx-source.sh)}

log "make dist (hipower $version)"
make -s dist > /dev/null
tarball=hipower-$version.tar.gz
[ -r "$tarball" ] || die "make dist did not produce $tarball"

rm -rf "$out"
mkdir -p "$out"
cp "$tarball" "$out/hipower_$version.orig.tar.gz"
tar -C "$out" -xzf "$tarball"
[ ! -e "$out/hipower-$version/debian" ] || die "$tarball carries a debian/ of its own (EXTRA_DIST)"
cp -a debian "$out/hipower-$version/debian"

log "dpkg-buildpackage -us -uc in $out/hipower-$version (DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-nocheck}; log: $out/build.log)"
(cd "$out/hipower-$version" &&
 HIPOWER_UCX_SRC=$ucx_src DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-nocheck} \
     dpkg-buildpackage -us -uc) > "$out/build.log" 2>&1 || {
    tail -40 "$out/build.log" >&2
    die "dpkg-buildpackage failed (log: $out/build.log)"
}
changes=$(ls "$out"/hipower_*.changes)
deb=$(ls "$out"/ucx-hipower_*.deb)

log "dpkg -c $(basename "$deb")"
dpkg -c "$deb" >&2
log "dpkg -I $(basename "$deb") (control)"
dpkg -f "$deb" Package Version Architecture Depends Recommends >&2

# -I: informational tags too. Errors and warnings fail the build. A second
# run shows the overridden tags with their reasons (lintian 2.116 exits 2
# with --show-overrides even when every tag shown is overridden).
log "lintian $(basename "$changes")"
if ! lintian -I --fail-on error,warning "$changes" > "$out/lintian.log" 2>&1; then
    cat "$out/lintian.log" >&2
    die "lintian found errors or warnings (above)"
fi
lintian -I --show-overrides "$changes" > "$out/lintian-overrides.log" 2>&1 || true
grep -v '^running with root' "$out/lintian-overrides.log" >&2 || true
log "lintian: $(grep -c '^E:' "$out/lintian.log" || true) errors, $(grep -c '^W:' "$out/lintian.log" || true) warnings, $(grep -c '^I:' "$out/lintian.log" || true) info, $(grep -c '^O:' "$out/lintian-overrides.log" || true) overridden (each with its reason above)"
echo "$deb"
