#!/bin/bash
# The test command: installs every dependency, builds hipower with -Werror,
# runs the Check unit tests (make check, the simulated device's tests and random
# schedules among them) and the tests on a real verbs stack (make
# rig-check: Soft-RoCE in a QEMU guest, or RDMA hardware if present; UCX's
# gtest suite among them). Against UCX 1.22.0 as well: in a second lane,
# from the build on, hipower builds for it (contrib/build-for-ucx.sh, which
# builds that UCX release from its source archive once per machine) and so
# does UCX's own UCT gtest suite (once per machine, contrib/ucx-gtest.sh),
# at the lowest priority; then that version's rig tests that go through
# UCX's API (test/rig-tests/run-other-ucx), its unit tests, the simulator's
# coverage of the transport (contrib/sim-coverage.sh) and UCX's gtest suite
# run beside the main rig. HIPOWER_OTHER_UCX="1.18.1 1.22.0" picks
# versions, "" skips them.
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

# The newest UCX this project supports beside the system's (the oldest):
# what changes between them is UCX's API glue, which these two bracket.
# UCX 1.18.1 builds and passes too (HIPOWER_OTHER_UCX="1.18.1 1.22.0"),
# left out by default for the test command's time (README)
other_versions=${HIPOWER_OTHER_UCX-1.22.0}
# The second lane, in the background from here on: hipower for the other
# UCX versions (and those UCX releases, once per machine) and UCX's own
# UCT gtest suite (once per machine) build at the lowest priority, on the
# core the unit tests and then the main rig leave; then, at normal
# priority, the other versions' rig tests (beside the gtest suite's
# build), their unit tests, the simulator's coverage (off the main lane's
# path to its rig, which is the run's longest), and UCX's gtest suite in a
# rig. Its rigs start
# once the main lane has built what they run (lane2.go), and each runs
# beside the main rig: two rigs of about one core each. A failed build is
# not the end: the other tests still run, the gtest rig test reports the
# suite as failed. Its output follows the main lane's.
rm -f other-ucx-build-* other-ucx-check-* other-ucx-rig.rc gtest-build.rc \
      gtest-rig.rc lane2.go sim-coverage.rc
: > sim-coverage.log
: > other-ucx-tests.log
(other_builds=()
 for v in $other_versions; do
     nice -n 19 contrib/build-for-ucx.sh "$v" \
         > "other-ucx-build-$v.out" 2> "other-ucx-build-$v.log"
     rc=$?
     echo $rc > "other-ucx-build-$v.rc"
     [ "$rc" = 0 ] && other_builds+=("$(cat "other-ucx-build-$v.out")")
 done
 (nice -n 19 contrib/ucx-gtest.sh > /dev/null 2> gtest-build.log
  echo $? > gtest-build.rc) &
 gtest_build_pid=$!
 while [ ! -e lane2.go ]; do sleep 5; done
 if [ ${#other_builds[@]} -gt 0 ]; then
     make -s rig-check-other-ucx OTHER_UCX_BUILDS="${other_builds[*]}" \
         > other-ucx-tests.log 2>&1
     echo $? > other-ucx-rig.rc
 fi
 # Their unit tests: the same programs as this version's make check, on
 # the simulator in the default mode only and 2,000 random schedules (the
 # protocol does not change with the UCX version; its API glue does)
 for v in $other_versions; do
     [ "$(cat "other-ucx-build-$v.rc")" = 0 ] || continue
     HIPOWER_SIM_RUNS=${HIPOWER_OTHER_SIM_RUNS:-self:torn} \
     HIPOWER_SCHED_COUNT=${HIPOWER_OTHER_SCHED_COUNT:-2000} \
     HIPOWER_SIM_SEED_CASES=${HIPOWER_OTHER_SIM_SEED_CASES:-pull:orderly_close_is_quiet:5} \
         contrib/build-for-ucx.sh "$v" --check-only > /dev/null \
         2> "other-ucx-check-$v.log"
     echo $? > "other-ucx-check-$v.rc"
 done
 # How much of the transport the simulated device reaches alone: the
 # simulator's tests again over a gcov-instrumented plugin (docs/sim.md);
 # 2,000 random schedules (make check ran 10,000 over the plugin itself)
 HIPOWER_SCHED_COUNT=${HIPOWER_COVERAGE_SCHED_COUNT:-2000} \
     contrib/sim-coverage.sh > sim-coverage.log 2>&1
 echo $? > sim-coverage.rc
 wait "$gtest_build_pid"
 make -s rig-check-gtest > gtest-rig.log 2>&1
 echo $? > gtest-rig.rc) &
lane2_pid=$!
# Whatever happens to the main lane, the second one is not left waiting
trap 'touch "$ROOT/lane2.go"' EXIT

# The Debian package, as a distribution builds it (make dist,
# dpkg-buildpackage, lintian with no error or warning); the rig test
# t_debian_package installs it in the guest and runs its autopkgtest and a
# consumer over it. A package that could not be built fails that test.
stage "Debian package (contrib/deb-build.sh)"
deb_rc=0
deb=$(contrib/deb-build.sh 2> >(tee deb-build.log >&2)) || deb_rc=$?
[ "$deb_rc" = 0 ] || deb=$ROOT/build/deb/ucx-hipower-not-built.deb
export HIPOWER_DEB=$deb

stage "unit tests (make check)"
make -s check 2>&1 | tee unit-tests.log
unit_rc=${PIPESTATUS[0]}

stage "rig tests (make rig-check-main; beside it the second lane: UCX ${other_versions:-(none)}, the simulator's coverage and UCX's gtest suite)"
make -s rig-check-deps > rig-deps.log 2>&1 || cat rig-deps.log
touch lane2.go
make -s rig-check-main 2>&1 | tee rig-tests.log
rig_rc=${PIPESTATUS[0]}

stage "the second lane: other UCX versions (${other_versions:-none: HIPOWER_OTHER_UCX is empty}) and UCX's UCT gtest suite"
wait "$lane2_pid"
other_builds=() other_built=() other_bad=0 other_summary=() other_rig_rc=0
for v in $other_versions; do
    cat "other-ucx-build-$v.log"
    if [ "$(cat "other-ucx-build-$v.rc" 2> /dev/null || echo 1)" = 0 ]; then
        other_built+=("$v")
        other_builds+=("$(cat "other-ucx-build-$v.out")")
    else
        other_bad=$((other_bad + 1))
        other_summary+=("UCX $v: could not build hipower (see above); its unit and rig tests did not run")
    fi
done
cat gtest-build.log
gtest_build_rc=$(cat gtest-build.rc 2> /dev/null || echo 1)
echo "--- the simulator's coverage of the transport (contrib/sim-coverage.sh)"
cat sim-coverage.log
coverage_rc=$(cat sim-coverage.rc 2> /dev/null || echo 1)
echo "--- other UCX versions' rig tests"
cat other-ucx-tests.log
if [ ${#other_builds[@]} -gt 0 ]; then
    other_rig_rc=$(cat other-ucx-rig.rc 2> /dev/null || echo 1)
fi

echo "--- other UCX versions' unit tests"
: > other-ucx-unit.log
for v in "${other_built[@]}"; do
    cat "other-ucx-check-$v.log"
    rc=$(cat "other-ucx-check-$v.rc" 2> /dev/null || echo 1)
    check_log=.cache/hipower-ucx-$v/check.log
    checks=
    [ -r "$check_log" ] && checks=$(sed -n "s/^\(.*Checks:.*\)/UCX $v \1/p" "$check_log")
    [ -n "$checks" ] && echo "$checks" >> other-ucx-unit.log
    # A failure the Check counts do not show counts as one
    if [ "$rc" != 0 ] && { [ -z "$checks" ] || grep -q 'Failures: 0, Errors: 0' <<< "$checks"; }; then
        other_bad=$((other_bad + 1))
        other_summary+=("UCX $v: make check failed (exit $rc, see above)")
    fi
done
echo "--- UCX's UCT gtest suite"
cat gtest-rig.log
cat gtest-rig.log >> rig-tests.log
[ "$(cat gtest-rig.rc 2> /dev/null || echo 1)" = 0 ] || rig_rc=1

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
# Other UCX versions: their unit tests' and rig tests' counts, per version
read -r o_total o_bad < <(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' other-ucx-unit.log |
                          awk '{ t += $1; b += $2 + $3 } END { print t + 0, b + 0 }')
read -r o_pass o_fail < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' other-ucx-tests.log |
                          awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }')
while read -r line; do other_summary+=("$line"); done < <(
    awk '/^==== UCX / { v = $3 }
         /^(PASS|FAIL|SKIP)[ :(].* t_[a-z0-9_]+/ && v != "" {
             match($0, / t_[a-z0-9_]+/); t = substr($0, RSTART + 3, RLENGTH - 3)
             n[v] = n[v] (n[v] == "" ? "" : ", ") t }
         /^[0-9]+ passed, [0-9]+ failed/ && v != "" { r[v] = $1 " passed, " $3 " failed" }
         END { for (v in r) print "UCX " v " rig tests (" n[v] "): " r[v] }' other-ucx-tests.log)
while read -r v rest; do other_summary+=("UCX $v unit tests: $rest"); done < <(sed 's/^UCX //' other-ucx-unit.log)
[ "$other_rig_rc" != 0 ] && [ "$o_fail" = 0 ] && o_fail=1
o_fail=$((o_fail + o_bad + other_bad))

# The package went into the guest only: the host (whose root the guest
# overlays) must not have it
if dpkg-query -W -f='${Status}' ucx-hipower 2> /dev/null | grep -q 'ok installed'; then
    echo "FAIL: ucx-hipower is installed on the host; the test command installs it only in the rig's guest"
    rig_rc=1
fi

stage "summary"
echo "unit tests: $((u_total - u_bad)) of $u_total passed (make check exit $unit_rc)"
sched_line=$(sed -n 's/^hipower-sched: \([0-9]* schedules, .*\)/\1/p' unit-tests.log | tail -1)
echo "simulated device: ${sched_line:-no schedules ran} (random schedules, oracle after every operation)"
layers_line=$(sed -n 's/^hipower layers: \(.*\)/\1/p' unit-tests.log | tail -1)
echo "layout: ${layers_line:-not checked} (test/layers/check-layers)"
units_line=$(sed -n 's/^hipower units: \([0-9]* circle(s).*\)/\1/p' unit-tests.log | head -1)
echo "units: ${units_line:-not checked} (test/layers/check-units)"
coverage_line=$(sed -n 's/^simulator coverage: \([0-9.]*% of .*\)/\1/p' sim-coverage.log | tail -1)
echo "simulator coverage: ${coverage_line:-not measured} (exit $coverage_rc)"
# CI keeps only the end of what this prints: a failure's own lines go here
why() { grep -a -E "$1" "$2" 2> /dev/null | grep -a -vE "$3" | head -12 | sed 's/^/    why: /'; }
# a test that failed there and passed when run again alone, named (rc 0)
grep -a '^simulator coverage: flaky: ' sim-coverage.log | cut -c1-600 | sed 's/^/    /'
[ "$coverage_rc" = 0 ] || why ':[FE]:|failed \(exit|printed no summary|no verdict|Failures: [1-9]|Errors: [1-9]|did not build|under the|failed again' \
    sim-coverage.log 'flaky: '
[ "$unit_rc" = 0 ] || why ':[FE]:|^FAIL|^ERROR|Failures: [1-9]|Errors: [1-9]' unit-tests.log '^$'
echo "Debian package: $([ "$deb_rc" = 0 ] && echo "$(basename "$deb"), lintian: $(sed -n 's/^deb-build: lintian: //p' deb-build.log)" || echo "contrib/deb-build.sh failed (exit $deb_rc)")"
echo "rig tests:  $r_pass passed, $r_fail failed (make rig-check exit $rig_rc)"
[ "$rig_rc" = 0 ] || why '^(FAIL|ERROR)[: ]|:[FE]:|  FAIL|not ok' rig-tests.log '^$'
# UCX's own UCT suite (one of the rig tests), in gtest's counts
gtest_line=$(sed -n 's/^ *\(gtest: [0-9]* passed, .*\)/\1/p' rig-tests.log | tail -1)
echo "UCX UCT ${gtest_line:-gtest: did not run}"
[ "$gtest_build_rc" != 0 ] && echo "UCX's gtest suite could not be built (contrib/ucx-gtest.sh exit $gtest_build_rc; see above)"
for line in "${other_summary[@]}"; do echo "$line"; done | sort
# The coverage gate counts as one check
c_pass=$(( coverage_rc == 0 )) c_fail=$(( coverage_rc != 0 ))
echo "total: $((u_total - u_bad + r_pass + o_total - o_bad + o_pass + c_pass)) passed, $((u_bad + r_fail + o_fail + c_fail)) failed"
[ "$unit_rc" = 0 ] && [ "$rig_rc" = 0 ] && [ "$deb_rc" = 0 ] && [ "$gtest_build_rc" = 0 ] && [ "$o_fail" = 0 ] && [ "$coverage_rc" = 0 ]
