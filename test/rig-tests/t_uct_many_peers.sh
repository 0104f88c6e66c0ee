#!/bin/bash
# Many peers on one interface (Check case "many", test/uct/check_many.c):
# HIPOWER_TEST_PEERS endpoints (default 4096: what the interface serves at
# default settings, UCX_HIPOWER_SHARED_MAX_EPS) connect and each carries a
# checksummed message; they go idle and progress stops visiting them (and,
# the pool being short, idle ones give their runs back); then 64 of them
# stream at once, every byte checked, in order per endpoint. The same over
# rc_verbs, for its figures beside. Then, under callgrind, the receiver's
# user-space instructions per empty progress call and per delivered
# message, with one endpoint and with HIPOWER_TEST_CG_PEERS (default 256:
# valgrind makes thousands slow), for both: idle endpoints may not make
# hipower's empty progress call cost more than twice as much. And the
# sender's instructions per message (its send calls and progress), for
# both, reported.
# rig-timeout: 1800
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 1 ] || skip "needs a verbs device"
peers=${HIPOWER_TEST_PEERS:-4096}
cg_peers=${HIPOWER_TEST_CG_PEERS:-256}
prog=$HIPOWER_BUILD/test/uct/check_transport

echo "--- hipower: $peers endpoints, default settings"
out=$(CK_RUN_CASE=many HIPOWER_TEST_PEERS=$peers UCX_HIPOWER_STATS=y \
      hipower-run "$prog" 2>&1)
rc=$?
echo "$out" | grep -v '^hipower-stats' | grep -v 'P:.*Passed$'
[ $rc = 0 ] || fail "the many-peers case failed with $peers endpoints"
grep -q '^100%: Checks: 1, Failures: 0, Errors: 0' <<< "$out" ||
    fail "the many-peers case did not pass"

# The receiving interface: every endpoint went idle at least once, woke
# for its message, and its pinned receive memory stayed within the budget
# plus one page of control words per endpoint
echo "$out" | grep -o 'hipower-stats .*' | awk -v n=$peers '
    { delete v; for (i = 3; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    v["rx_msgs"] >= n {
        seen = 1
        mem = v["pool_bytes"] + v["peak_eps"] * v["ep_ctrl_bytes"]
        printf "receiver: %d endpoints, receive memory %.1f MiB = pool %.1f MiB + %d x %d B control; %d demotions, %d wake-ups, %d endpoint visits by progress\n",
               v["peak_eps"], mem / 1048576, v["pool_bytes"] / 1048576,
               v["peak_eps"], v["ep_ctrl_bytes"], v["demotions"],
               v["promotions"], v["ep_visits"]
        if (v["peak_eps"] < n) { print "FAIL: fewer endpoints than asked for"; bad = 1 }
        if (v["demotions"] < n) { print "FAIL: not every endpoint went idle"; bad = 1 }
        if (v["ep_ctrl_bytes"] > 4096) { print "FAIL: more than 4 KB of control words per endpoint"; bad = 1 }
    }
    END { if (!seen) print "FAIL: no interface took a message per endpoint"
          exit (bad || !seen) }' || fail "receiver figures"


# The same case over UCX's rc_verbs (its shared receive queue), for the
# figures beside hipower's
echo "--- rc_verbs: $peers endpoints, default settings"
out=$(CK_RUN_CASE=many HIPOWER_TEST_TL=rc_verbs HIPOWER_TEST_PEERS=$peers \
      hipower-run "$prog" 2>&1)
rc=$?
echo "$out" | grep -v 'P:.*Passed$'
[ $rc = 0 ] || fail "the many-peers case failed over rc_verbs"

command -v valgrind >/dev/null || skip "valgrind is not installed (instruction counts)"
cgdir=$(mktemp -d)
# Instructions of the receiver's progress alone (many_progress_b), per phase
count_phase() { # <transport> <peers> <streamers> <messages each> [a: sender]
    "$(dirname "$0")"/many-callgrind "$prog" "$1" "$2" "$3" "$4" "$cgdir" "${5:-b}" ||
        { tail -20 "$cgdir/log"; fail "callgrind run of $1 with $2 endpoints failed"; }
}
phase_ir() { sed -n "s/^$2|//p" <<< "$1" | head -1; }

# Per run: 1 x 12800, or 64 x 200. With the shared pool an endpoint that
# went idle keeps MIN_SLOTS and grows again when it streams: 200 messages
# each make the figure the streaming cost, not the growth (at 64 x 50:
# 1.22x; at 64 x 200: 1.09x, measured on the rig)
msgs=12800
bad=0
for tl in hipower rc_verbs; do
    echo "--- callgrind, $tl: 1 endpoint streaming alone; $cg_peers endpoints, 64 streaming"
    one=$(count_phase $tl 1 1 $msgs)
    many=$(count_phase $tl $cg_peers 64 $((msgs / 64)))
    for v in "$one" "$many"; do
        [ -n "$(phase_ir "$v" 'empty progress calls')" ] ||
            fail "no callgrind figures (valgrind headers missing at build?)"
    done
    awk -v tl=$tl -v e1="$(phase_ir "$one" 'empty progress calls')" \
        -v en="$(phase_ir "$many" 'empty progress calls')" \
        -v s1="$(phase_ir "$one" 'streaming')" \
        -v sn="$(phase_ir "$many" 'streaming')" -v n=$cg_peers -v m=$msgs 'BEGIN {
        printf "%s: empty progress call: %.0f instructions with 1 endpoint, %.0f with %d idle endpoints (%.2fx)\n",
               tl, e1 / 10000, en / 10000, n, en / e1
        printf "%s: receive progress per delivered message: %.0f instructions with 1 endpoint streaming, %.0f with 64 of %d (%.2fx)\n",
               tl, s1 / m, sn / m, n, sn / s1
        exit (en > 2 * e1) }' || { [ $tl = hipower ] && bad=1; }
    # The sender's side of the same streams: its send calls and progress
    # (completions, recycling) per message sent; reported, not judged
    one=$(count_phase $tl 1 1 $msgs a)
    many=$(count_phase $tl $cg_peers 64 $((msgs / 64)) a)
    awk -v tl=$tl -v s1="$(phase_ir "$one" 'streaming')" \
        -v sn="$(phase_ir "$many" 'streaming')" -v n=$cg_peers -v m=$msgs 'BEGIN {
        if (s1 == "" || sn == "") exit 1
        printf "%s: sender per message (send calls and progress): %.0f instructions with 1 endpoint streaming, %.0f with 64 of %d (%.2fx)\n",
               tl, s1 / m, sn / m, n, sn / s1 }' ||
        fail "no callgrind figures of the sender"
done
rm -rf "$cgdir"
[ $bad = 0 ] ||
    fail "idle endpoints make hipower's empty progress call cost more than twice as much"
echo "ok: $peers endpoints; with $cg_peers, idle ones cost hipower's progress nothing"
