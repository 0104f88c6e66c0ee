#!/bin/bash
# The Debian package in use. contrib/deb-build.sh built ucx-hipower
# (dpkg-buildpackage from the "make dist" tarball, lintian-clean); here it is
# installed into the rig's guest -- never the host: the guest's root is the
# host's, read-only under a tmpfs overlay that goes with the guest -- by the
# package's own autopkgtest (debian/tests, autopkgtest's null runner on the
# rig's two rxe devices: the installed hipower-run, plugin and
# hipower-lanes; ucx_info lists hipower, UCP's lanes are on it, a UCP tag
# ping-pong runs), then the UCP consumer test runs over the installed plugin
# instead of the build tree's. The package is purged at the end.
# HIPOWER_DEB names the .deb (the test command sets it: a missing package is
# then a failure); unset, build/deb's is used, and the test is skipped
# without one.
# rig-timeout: 1200
. "$(dirname "$0")/lib.sh"

[ "${HIPOWER_RIG:-}" = guest ] ||
    skip "installs a package: runs only in the rig's guest, not on a host (HIPOWER_RIG=${HIPOWER_RIG:-})"
deb=${HIPOWER_DEB:-}
if [ -z "$deb" ]; then
    deb=$(ls "$HIPOWER_BUILD"/build/deb/ucx-hipower_*.deb 2> /dev/null | grep -v dbgsym | head -1)
    [ -n "$deb" ] || skip "no package built (contrib/deb-build.sh; the test command builds it)"
fi
[ -r "$deb" ] || fail "HIPOWER_DEB=$deb: no such package"
dir=$(cd "$(dirname "$deb")" && pwd)
dsc=$(ls "$dir"/hipower_*.dsc 2> /dev/null | head -1)
[ -n "$dsc" ] || fail "no source package (.dsc) beside $deb: its autopkgtest comes from there"
[ "$(id -u)" = 0 ] || fail "the guest runs tests as root; here uid $(id -u)"
command -v autopkgtest > /dev/null || fail "autopkgtest is not installed (contrib/install-deps.sh)"
dpkg-query -W -f='${Status}' ucx-hipower 2> /dev/null | grep -q 'ok installed' &&
    fail "ucx-hipower is already installed in the guest, i.e. on the host (its root): remove it there"

echo "package: $(basename "$deb") ($(dpkg-deb -f "$deb" Depends))"
out_dir=$(mktemp -d)
trap 'dpkg --purge ucx-hipower > /dev/null 2>&1 || true; rm -rf "$out_dir"' EXIT

# 1. The package's autopkgtest. The null runner installs the .deb (apt, from
# the binaries given) and runs debian/tests on this machine, as root: both
# variants, on the rig's rxe devices and on two it creates itself.
# The guest's apt reaches no archive (the rig has no network): its downloads
# go to a closed port on loopback and fail at once, rather than after name
# lookups of the archive's host time out. All that the tests depend on is
# installed already (the host's packages are the guest's).
printf 'Acquire::http::Proxy "http://127.0.0.1:9/";\nAcquire::https::Proxy "http://127.0.0.1:9/";\n' \
    > "$out_dir/apt.conf"
export APT_CONFIG=$out_dir/apt.conf
# man-db's trigger would rebuild the whole host's manual page index, twice
# (minutes under TCG): off in the guest, whose /var is an overlay
rm -f /var/lib/man-db/auto-update
timeout 900 autopkgtest --output-dir "$out_dir/out" "$dsc" "$deb" -- null > "$out_dir/log" 2>&1
rc=$?
grep -E '^installed-plugin|^command[0-9]|installed-plugin: |blame|^autopkgtest \[.*(ERROR|error)' "$out_dir/log" | sed 's/^/autopkgtest: /'
summary=$(cat "$out_dir/out/summary" 2> /dev/null || true)
echo "$summary" | sed 's/^/summary: /'
# A failed test's own messages (its stderr, which autopkgtest keeps apart)
show_failure() {
    local f
    for f in "$out_dir"/out/*-stderr; do
        [ -s "$f" ] && sed "s|^|$(basename "$f"): |" "$f"
    done
    grep -E 'badpkg|blame|ERROR' "$out_dir/log" | head -10
}
[ "$rc" = 0 ] || { show_failure; fail "autopkgtest exit $rc"; }
for t in installed-plugin command1; do
    grep -q "^$t  *PASS" <<< "$summary" || { show_failure; fail "autopkgtest: $t did not pass"; }
done
# The variant that made its own devices removed them: the tests after this
# one see the rig's devices only
left=
for d in /sys/class/infiniband/*; do
    d=${d##*/}
    [[ " ${RIG_DEVICES[*]} " == *" $d "* ]] || left="$left $d"
done
[ -z "$left" ] || fail "devices left behind by the autopkgtest:$left"
dpkg-query -W -f='${Status} ${Version}\n' ucx-hipower | grep -q 'ok installed' ||
    fail "ucx-hipower is not installed after autopkgtest"
plugin=$(dpkg -L ucx-hipower | grep '/ucx/libuct_hipower\.so$')
echo "ok: autopkgtest installed-plugin and command1 (--make-devices) PASS; installed: $(dpkg-query -W -f='${Package} ${Version}' ucx-hipower), $plugin"

# 2. A consumer test over the installed plugin: the package's hipower-run
# first in PATH, no HIPOWER_PLUGIN (hipower-run's default is the installed
# file); the dynamic loader shows which file was loaded
unset HIPOWER_PLUGIN
export PATH=/usr/bin:$PATH
loaded=$(LD_DEBUG=files hipower-run ucx_info -v 2>&1 | grep -o 'file=[^ ]*libuct_hipower[^ ]*' | sort -u)
[ "$loaded" = "file=$plugin" ] || fail "hipower-run loads '$loaded', not the package's $plugin"
bash "$HIPOWER_SRC/test/rig-tests/t_ucp_consumer.sh" 2>&1 | sed 's/^/ucp_consumer: /'
[ "${PIPESTATUS[0]}" = 0 ] || fail "the UCP consumer test over the installed plugin failed"
echo "ok: the UCP consumer test passed over the installed package ($plugin)"
