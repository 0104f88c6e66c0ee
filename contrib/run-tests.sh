#!/bin/bash
# The test command: installs every dependency, builds hipower with -Werror,
# builds UCX's own UCT gtest suite once (contrib/ucx-gtest.sh), runs the
# Check unit tests (make check) and the tests on a real verbs stack (make
# rig-check: Soft-RoCE in a QEMU guest, or RDMA hardware if present; UCX's
# gtest suite among them).
# Exits non-zero if anything fails; ends with "total: N passed, N failed".
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
start=$SECONDS
stage() { echo; echo "==== $* [$((SECONDS - start))s]"; }

stage "install dependencies"
contrib/install-deps.sh || exit 1
stage "build"
contrib/build.sh || exit 1
stage "UCX's UCT gtest suite (built once per machine, about 12 minutes)"
# A failed build is not the end: the other tests still run and the gtest
# rig test reports the suite as failed
gtest_build_rc=0
contrib/ucx-gtest.sh > /dev/null || gtest_build_rc=$?

stage "unit tests (make check)"
make -s check 2>&1 | tee unit-tests.log
unit_rc=${PIPESTATUS[0]}

stage "rig tests (make rig-check)"
make -s rig-check 2>&1 | tee rig-tests.log
rig_rc=${PIPESTATUS[0]}

# Check prints "NN%: Checks: T, Failures: F, Errors: E"
read -r u_total u_bad < <(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' unit-tests.log |
                          awk '{ t += $1; b += $2 + $3 } END { print t + 0, b + 0 }')
# rig self-test and guest tests each print "N passed, N failed"
read -r r_pass r_fail < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' rig-tests.log |
                          awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }')
r_pass=${r_pass:-0} r_fail=${r_fail:-0}
# A suite that could not run at all counts as one failure
[ "$unit_rc" != 0 ] && [ "$u_bad" = 0 ] && u_bad=1
[ "$rig_rc" != 0 ] && [ "$r_fail" = 0 ] && r_fail=1

stage "summary"
echo "unit tests: $((u_total - u_bad)) of $u_total passed (make check exit $unit_rc)"
echo "rig tests:  $r_pass passed, $r_fail failed (make rig-check exit $rig_rc)"
# UCX's own UCT suite (one of the rig tests), in gtest's counts
gtest_line=$(sed -n 's/^ *\(gtest: [0-9]* passed, .*\)/\1/p' rig-tests.log | tail -1)
echo "UCX UCT ${gtest_line:-gtest: did not run}"
[ "$gtest_build_rc" != 0 ] && echo "UCX's gtest suite could not be built (contrib/ucx-gtest.sh exit $gtest_build_rc; see above)"
echo "total: $((u_total - u_bad + r_pass)) passed, $((u_bad + r_fail)) failed"
[ "$unit_rc" = 0 ] && [ "$rig_rc" = 0 ] && [ "$gtest_build_rc" = 0 ]
