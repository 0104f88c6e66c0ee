#!/bin/bash
# Line and branch coverage of the transport (src/uct/hipower/*.c) reached
# by the simulated device alone (issue 25, docs/sim.md "Coverage"): a copy
# of this build tree's plugin is built with gcov instrumentation, the
# simulator's tests run over it (test/sim/run-sim: every transport test in
# self, push and pull modes; test/sim/run-schedules: the random schedules),
# and gcov (part of gcc) counts. Prints a line per file and the total:
#   "simulator coverage: NN.N% of N lines, NN.N% of N branches (...)"
# Exits 1 if the runs fail or lines are under HIPOWER_COVERAGE_MIN (85).
#
# usage: contrib/sim-coverage.sh   (from a built tree, after make check
# built the test programs). HIPOWER_SCHED_COUNT: schedules (10000).
set -u
top=$(pwd)
min=${HIPOWER_COVERAGE_MIN:-85}
work=$(mktemp -d "${TMPDIR:-/tmp}/hipower-coverage.XXXXXX")
[ -n "${HIPOWER_COVERAGE_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree"
tar -C "$top" --exclude=./.git --exclude=./.cache -cf - . | tar -C "$tree" -xf -

# The plugin again, instrumented, not optimized (lines map to the source)
rm -f "$tree"/src/uct/hipower/libuct_hipower_la-*.lo \
      "$tree"/src/uct/hipower/.libs/libuct_hipower_la-* \
      "$tree"/libuct_hipower.la "$tree"/.libs/libuct_hipower.*
if ! make -s -C "$tree" libuct_hipower.la CFLAGS="-O0 -g --coverage" \
        LDFLAGS="--coverage" > "$work/build.log" 2>&1; then
    echo "simulator coverage: the instrumented plugin did not build"
    tail -20 "$work/build.log"
    exit 1
fi
plugin=$tree/.libs/libuct_hipower.so

rc=0
echo "simulator coverage: the simulator's tests over an instrumented plugin"
# A failed run shows what failed: Check's failure lines and the run's end
show_failure() {
    echo "simulator coverage: $1 failed (exit $2); its failures:"
    grep -a -E ":[FE]:|FAIL|Assertion|signal|timeout" "$3" | head -40
    echo "simulator coverage: the end of its output:"
    tail -30 "$3"
}
run_rc=0
# Under -O0 and gcov, beside the rig, a case takes several times longer
# than in make check's run: a larger bound for a case that hangs
export HIPOWER_SIM_CASE_TIMEOUT=${HIPOWER_SIM_CASE_TIMEOUT:-300}
HIPOWER_PLUGIN=$plugin test/sim/run-sim > "$work/run-sim.log" 2>&1 || run_rc=$?
grep -a -E "^sim " "$work/run-sim.log"
if [ "$run_rc" != 0 ]; then
    show_failure test/sim/run-sim "$run_rc" "$work/run-sim.log"
    # make check ran these tests over the plugin itself and judged them;
    # here they run for the lines they reach, under -O0 and gcov. A test
    # case that failed runs again alone, in its mode: if it passes, the
    # failure is reported as a flaky one (the test command's summary
    # repeats it) and its lines are counted; if not, this run fails.
    # "MODE-PLACEMENT TCASE" per failed case; "MODE-PLACEMENT -" for a mode
    # that failed without a Check failure line (a crash, no verdict)
    awk '/^[^ ]*:[0-9]+:[FE]:[^:]+:/ { split($0, f, ":"); pending[f[4]] = 1; n++; next }
         /^sim [a-z-]+: / {
             name = substr($2, 1, length($2) - 1)
             if (n) for (c in pending) print name, c
             else if ($0 !~ /Failures: 0, Errors: 0/) print name, "-"
             delete pending; n = 0 }
         /^sim [a-z]+ [a-z_]+, seeds / && !/Failures: 0, Errors: 0/ {
             print "seeds", $2 ":" substr($3, 1, length($3) - 1) }' \
        "$work/run-sim.log" | sort -u > "$work/rerun.list"
    [ -s "$work/rerun.list" ] || rc=1
    while read -r name what; do
        mode=${name%%-*} placement=in-order
        case $name in *-*) placement=${name#*-} ;; esac
        if [ "$name" = seeds ]; then
            spec="$what:${HIPOWER_COVERAGE_RERUN_SEEDS:-20}" label="seeds of $what"
            runs=" " cases=$spec case_env=
            first="^sim ${what%%:*} ${what#*:}, seeds"
        elif [ "$what" = - ]; then
            runs=$mode:$placement cases=" " label="$name (all cases)" case_env=
            first="^sim $name: "
        else
            runs=$mode:$placement cases=" " label="$name $what" case_env=$what
            first=":[FE]:$what:"
        fi
        if env HIPOWER_PLUGIN="$plugin" HIPOWER_SIM_RUNS="$runs" \
               HIPOWER_SIM_SEED_CASES="$cases" ${case_env:+CK_RUN_CASE=$case_env} \
               test/sim/run-sim > "$work/rerun.log" 2>&1; then
            echo "simulator coverage: flaky: $label failed in the first run, passed when run again alone (first: $(grep -a -m1 -E "$first" "$work/run-sim.log" | cut -c1-300))"
        else
            rc=1
            echo "simulator coverage: $label failed again when run alone:"
            grep -a -E ":[FE]:|^sim " "$work/rerun.log" | head -20
        fi
    done < "$work/rerun.list"
fi
run_rc=0
HIPOWER_PLUGIN=$plugin HIPOWER_SCHED_COUNT=${HIPOWER_SCHED_COUNT:-10000} \
    HIPOWER_SCHED_RECORD=$work/gcov-seeds.log \
    test/sim/run-schedules > "$work/run-schedules.log" 2>&1 || run_rc=$?
grep -a -E "^hipower-sched: [0-9]+ schedules|^hipower-sched: per-seed|^sim schedules" "$work/run-schedules.log"
[ "$run_rc" = 0 ] || { rc=1; show_failure test/sim/run-schedules "$run_rc" "$work/run-schedules.log"; }
# A schedule is a function of its seed alone (docs/sim.md): the same seeds
# over this -O0, gcov plugin must do what make check's run did over the
# plain one, seed by seed (issue 52 saw the totals of the two differ).
# Reported, not judged yet.
plain_seeds=$top/test/sim/sched-seeds.log
if [ "$run_rc" = 0 ] && [ -s "$plain_seeds" ] && [ -s "$work/gcov-seeds.log" ]; then
    n=$(wc -l < "$work/gcov-seeds.log")
    if head -n "$n" "$plain_seeds" | cmp -s - "$work/gcov-seeds.log"; then
        echo "simulator coverage: the schedules' per-seed record is make check's, seed for seed (seeds 1-$n, plain plugin and gcov plugin)"
    else
        first=$(head -n "$n" "$plain_seeds" | diff - "$work/gcov-seeds.log" | grep -m1 '^<' | cut -c3-)
        echo "simulator coverage: the schedules' per-seed record differs from make check's: first at seed ${first%%:*} (plain plugin, then gcov plugin; totals in sim_schedules.c's SCHED_TOTALS order):"
        echo "    $first"
        grep -m1 "^${first%%:*}:" "$work/gcov-seeds.log" | sed 's/^/    /'
    fi
fi

# gcov per unit: "Lines executed:P% of N", "Taken at least once:P% of N"
cd "$tree" || exit 1
total_l=0 hit_l=0 total_b=0 hit_b=0
printf '%-24s %8s %8s\n' "file" "lines" "branches"
for src in src/uct/hipower/hipower_*.c; do
    base=$(basename "$src" .c)
    obj=src/uct/hipower/.libs/libuct_hipower_la-$base.o
    [ -r "${obj%.o}.gcno" ] || continue
    # The unit's own figures (gcov also lists the headers it inlined)
    read -r lp ln bp bn < <(gcov -b -n -o "$obj" "$src" 2> /dev/null |
        awk -v f="$base.c'" '
            /^File / { on = (substr($0, length($0) - length(f) + 1) == f) }
            on && /^Lines executed:/ { sub(/.*:/, "", $2); l = $2 + 0; ln = $4 }
            on && /^Taken at least once:/ { sub(/.*:/, "", $4); b = $4 + 0; bn = $6 }
            END { print l + 0, ln + 0, b + 0, bn + 0 }')
    total_l=$((total_l + ln)); hit_l=$(awk -v h="$hit_l" -v p="$lp" -v n="$ln" 'BEGIN { printf "%d", h + p * n / 100 + 0.5 }')
    total_b=$((total_b + bn)); hit_b=$(awk -v h="$hit_b" -v p="$bp" -v n="$bn" 'BEGIN { printf "%d", h + p * n / 100 + 0.5 }')
    printf '%-24s %7.1f%% %7.1f%%   (%d lines, %d branches)\n' "$base.c" "$lp" "$bp" "$ln" "$bn"
done
pct_l=$(awk -v h="$hit_l" -v t="$total_l" 'BEGIN { printf "%.1f", t ? 100 * h / t : 0 }')
pct_b=$(awk -v h="$hit_b" -v t="$total_b" 'BEGIN { printf "%.1f", t ? 100 * h / t : 0 }')
echo "simulator coverage: $pct_l% of $total_l lines, $pct_b% of $total_b branches of src/uct/hipower/*.c (gcov; the simulator's tests alone, no rig)"
if awk -v p="$pct_l" -v m="$min" 'BEGIN { exit !(p < m) }'; then
    echo "simulator coverage: under the $min% of lines the simulator must reach"
    rc=1
fi
[ "$rc" = 0 ] || echo "simulator coverage: FAILED (see above)"
exit $rc
