#!/bin/bash
# The main job: installs everything, builds hipower, and compares it with
# UCX's rc_verbs side by side (ucx_perftest am_lat / am_bw) on a real verbs
# stack: Soft-RoCE in a QEMU guest, or natively on RDMA hardware.
# Arguments go to contrib/perftest-compare (-r REPS -n ITERS -s "SIZES").
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

contrib/install-deps.sh || exit 1
contrib/build.sh || exit 1
export HIPOWER_PLUGIN=$ROOT/.libs/libuct_hipower.so
export PATH=$ROOT/src/ucp_glue:$ROOT/contrib:$PATH
exec test/rig/hipower-rig -- contrib/perftest-compare "$@"
