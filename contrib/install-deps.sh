#!/bin/bash
# Installs every Debian package hipower's build, tests and rig need, and
# enables deb-src for the suites already configured (UCX's internal headers
# come from its source package). Idempotent; needs root or sudo.
set -eu -o pipefail

PACKAGES=(
    # build (g++ for UCX's gtest suite and perftest library)
    gcc g++ make autoconf automake libtool pkg-config file
    # the UCX that Debian's Open MPI and MPICH use, its tools, its source
    libucx0 libucx-dev ucx-utils dpkg-dev
    # UCX's configure needs what Debian built it with (debian/control)
    libibverbs-dev librdmacm-dev libnuma-dev libfuse3-dev
    # verbs userspace: rxe provider, ibv_devices, perftest
    ibverbs-providers ibverbs-utils perftest
    # unit tests, and valgrind for the endpoint-destroy test
    check valgrind
    # the Soft-RoCE rig: Debian's kernel under QEMU, a static busybox initramfs
    # (the guest kernel itself is downloaded into the rig's cache by
    # test/rig/hipower-rig, never installed on the host)
    qemu-system-x86 busybox-static kmod cpio iproute2 procps
    # consumer tests: Open MPI and MPICH as Debian builds them (over UCX)
    openmpi-bin libopenmpi-dev mpich libmpich-dev
    # benchmark suite (contrib/hipower-bench): NetPIPE over Open MPI, plots,
    # the report generator
    netpipe-openmpi gnuplot-nox python3
    # the Debian package (contrib/deb-build.sh), its lint and its
    # autopkgtest (run in the rig: test/rig-tests/t_debian_package.sh)
    debhelper fakeroot lintian autopkgtest
)

SUDO=
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive

# deb-src lines mirroring the configured deb lines (deb822 and one-line).
enable_deb_src() {
    local f out=/etc/apt/sources.list.d/hipower-deb-src.sources
    local list=/etc/apt/sources.list.d/hipower-deb-src.list
    if grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 1
    fi
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        grep -q '^Types:.*\bdeb\b' "$f" || continue
        sed 's/^Types:.*/Types: deb-src/' "$f"
        echo
    done | $SUDO tee "$out" > /dev/null
    [ -s "$out" ] || $SUDO rm -f "$out"
    if [ -r /etc/apt/sources.list ]; then
        sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list | $SUDO tee "$list" > /dev/null
        [ -s "$list" ] || $SUDO rm -f "$list"
    fi
    return 0
}

echo "install-deps: apt-get update"
enable_deb_src || true
$SUDO apt-get update -qq
echo "install-deps: installing ${#PACKAGES[@]} packages"
$SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" > /tmp/hipower-apt.log 2>&1 || {
    tail -30 /tmp/hipower-apt.log >&2
    echo "install-deps: apt-get install failed (full log: /tmp/hipower-apt.log)" >&2
    exit 1
}
echo "install-deps: done (UCX $(dpkg-query -W -f='${Version}' libucx0))"
