#!/bin/bash
# The hipower transport through UCT's public API (test/uct/check_transport):
# 100,000 random messages over several endpoints in order, none lost,
# duplicated or corrupted; slot exhaustion falls back to pending and resumes;
# flush means delivered; 16 endpoints; the memory budget; RMA and atomics;
# failures; wakeup; the arrival check (messages polled while they land);
# the conformance cases (check_conformance.c) and the connection handshake
# (check_connect.c) -- in all three notification modes (RMA and the
# handshake, which do not depend on it, only in the default one). Passes
# when the program exits 0 with no failed check (Check's own verdict),
# whatever the number of checks.
#
# One case by hand (names: check_transport.c, check_conformance.c):
#   HIPOWER_CK_CASE=flush_cancel test/rig/hipower-rig -n 2 -- \
#       test/rig-tests/run-rig-tests . uct_transport
# The three modes take about 6 minutes on the 2-core rig (RMA to 4 MB
# once, 100,000 messages per mode), within the default 900 s but not by
# much
# rig-timeout: 1800
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 1 ] || skip "needs a verbs device"
export HIPOWER_TEST_MSGS=${HIPOWER_TEST_MSGS:-100000}
# Check's own selector (the rig passes only HIPOWER_* and UCX_* inside)
one_case=${HIPOWER_CK_CASE:-}
[ -n "$one_case" ] && export CK_RUN_CASE=$one_case
# HIPOWER_TEST_MODES: fewer modes (run-other-ucx: self and pull)
for mode in ${HIPOWER_TEST_MODES:-self push pull}; do
    echo "--- UCX_HIPOWER_NOTIFY=$mode"
    skip_rma=y
    [ $mode = self ] && skip_rma=
    out=$(UCX_HIPOWER_NOTIFY=$mode UCX_HIPOWER_STATS=y \
          HIPOWER_TEST_SKIP_RMA=$skip_rma HIPOWER_TEST_SKIP_CONNECT=$skip_rma \
          hipower-run "$HIPOWER_BUILD/test/uct/check_transport" 2>&1)
    rc=$?
    echo "$out" | grep -v '^hipower-stats' | grep -v 'P:.*Passed$'
    echo "$out" | grep -c 'Passed$' | sed 's/^/passed tests: /'
    [ $rc = 0 ] || fail "check_transport failed with NOTIFY=$mode"
    grep -q '^100%: Checks: [0-9]*, Failures: 0, Errors: 0' <<< "$out" ||
        fail "not all transport tests passed"
    # The figures below are those of the whole program
    [ -n "$one_case" ] && continue
    # rxe does RC atomics, so hipower must offer and pass them
    [ -n "$skip_rma" ] ||
        grep -q '^atomics: fetch-add, add, compare-swap ok' <<< "$out" ||
        fail "remote atomics were not advertised or not checked"
    grep -q '^arrival while landing: [0-9]* messages' <<< "$out" ||
        fail "the arrival check did not run"
    # Receiving polls no completion per message: the interface that took
    # the random messages polled at most its endpoints' first
    # wake-ups and flushed receives (4 endpoints), and one wake-up per
    # sleep handshake (a demotion tried after an idle spell, or a sleep);
    # and in self and push modes some
    # interface did poll receive completions (wake-ups), so the counter
    # counts what the receiver polls
    echo "$out" | grep -o 'hipower-stats .*' | awk -v mode=$mode -v n="$HIPOWER_TEST_MSGS" '
        { delete v; for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        v["rx_msgs"] >= n / 2 { seen = 1 }
        v["rx_msgs"] >= n / 2 && v["rx_completions"] - v["handshakes"] > 40 {
            print "receive completions per message: " $0; bad = 1 }
        v["rx_completions"] > 0 { polled = 1 }
        END { if (!seen) print "no interface took the random messages";
              if (bad || !seen || (mode != "pull" && !polled)) exit 1 }' ||
        fail "receive completions counted wrong or polled per message"
    # The switch storm (self mode, the shared pool) ran the transport's
    # own grant, adopt, switch, release and ask code under its checked
    # traffic: the receiving interface's statistics, printed after the
    # test's line, show grants, switches, releases and waits
    if [ $mode = self ]; then
        echo "$out" | awk '
            /^switch storm:/ { s = 1; print; next }
            s && /hipower-stats/ {
                delete v; line = substr($0, index($0, "hipower-stats"))
                n = split(line, f, " ")
                for (i = 1; i <= n; ++i) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
                if (v["rx_msgs"] > 0) {
                    print "  receiver: grants=" v["grants"] " run_switches=" v["run_switches"] \
                          " reclaims=" v["reclaims"] " run_waits=" v["run_waits"]
                    ok = (v["grants"] > 0 && v["run_switches"] > 0 &&
                          v["reclaims"] > 0 && v["run_waits"] > 0)
                    s = 0
                }
            }
            END { exit !ok }' ||
            fail "the switch storm did not grant, switch, release and wait (or did not run)"
    fi
    # The fence test's interface fences 5 puts after 5 gets. rxe orders a
    # write after a read on one QP by itself (its unacked-PSN window), so
    # the data cannot show a missing fence here: the counter of requests
    # posted with IBV_SEND_FENCE does. (The stats line is one write, but
    # a log line another thread of the process was writing to stdout may
    # come before it on the same line: hence grep -o, not ^. Not grep -q:
    # it stops reading at the match, the writer before it may get SIGPIPE,
    # and pipefail then fails the check that matched)
    echo "$out" | grep -o 'hipower-stats .*' | grep ' fenced_wrs=5 ' >/dev/null ||
        fail "uct_iface_fence() did not fence the next request of each get/put (fenced_wrs per interface: $(echo "$out" | grep -o 'fenced_wrs=[0-9]*' | tr '\n' ' '); lines with stats: $(echo "$out" | grep -c 'hipower-stats'))"
done
echo "ok: notification modes ${HIPOWER_TEST_MODES:-self push pull}, $HIPOWER_TEST_MSGS random messages each${one_case:+ (case $one_case only)}"
