#!/bin/bash
# The benchmark harness itself (contrib/perftest-pair, contrib/harness.sh):
# 8 back-to-back runs (HARNESS_RUNS) alternating transports and
# notification modes (am_lat 8 B, then am_bw 1 KB), with no pause between
# them, must all succeed. Each server gets a port no socket
# uses in any state, and the client waits for *this* run's server to listen,
# so a previous server still holding its port (listening or in TIME_WAIT)
# cannot make a run fail: that collision is what made the main job exit 1.
# Then the retry: a first port held by another process is given up for a
# fresh one; with no retries left the failure is a harness error (exit 3),
# never a transport failure (exit 1).
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
command -v python3 > /dev/null || skip "needs python3 to hold a port"

# transport, notification mode (hipower only)
cols=("rc_verbs -" "hipower self" "hipower push" "hipower pull")
points=("am_lat 8" "am_bw 1024")
t0=$(date +%s)
runs=${HARNESS_RUNS:-8}
for ((i = 0; i < runs; ++i)); do
    read -r tl mode <<< "${cols[i % 4]}"
    read -r test size <<< "${points[(i / 4) % 2]}"
    layout=$([ "$size" -le 64 ] && echo short || echo bcopy)
    if [ "$mode" = - ]; then what="run $((i + 1))/$runs: $tl $test $size B"; mode=self
    else what="run $((i + 1))/$runs: $tl ($mode) $test $size B"; fi
    final=$(UCX_HIPOWER_NOTIFY=$mode hipower-run perftest-pair -q "$tl" "$test" "$size" 300 \
            -D "$layout" 2> "/tmp/harness.$i.err")
    rc=$?
    if [ "$rc" != 0 ]; then
        cat "/tmp/harness.$i.err" >&2
        fail "$what: exit $rc ($([ "$rc" = 3 ] && echo "harness error" || echo "transport failure"))"
    fi
    read -r -a f <<< "$final"
    [ "${f[0]:-}" = Final: ] && [ "${f[1]:-}" = 300 ] || fail "$what: bad result line '$final'"
    # A retry is allowed (and says so): the test is that nothing failed
    grep -h 'retrying' "/tmp/harness.$i.err" || true
    printf '%-40s ok: %s\n' "$what" "$final"
    rm -f "/tmp/harness.$i.err"
done
echo "$runs back-to-back runs in $(( $(date +%s) - t0 )) s, all ok"

# A port held by someone else: the first attempt must see its server fail
# to bind, retry on another port and succeed
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(600)' > /tmp/harness.port &
holder=$!
trap 'kill $holder 2>/dev/null' EXIT
# Bound by the work, not the clock (a loaded host starts python3 slowly):
# until the holder printed its port, or it is gone
while [ ! -s /tmp/harness.port ] && kill -0 $holder 2> /dev/null; do
    harness_nap 0.1
done
held=$(cat /tmp/harness.port)
[ -n "$held" ] || fail "could not hold a port (the holder exited before it said which)"
echo "holding port $held"
final=$(HARNESS_TEST_PORT=$held hipower-run perftest-pair -q hipower am_lat 8 300 -D short 2> /tmp/harness.err)
rc=$?
cat /tmp/harness.err
[ "$rc" = 0 ] || fail "a held first port made the run fail (exit $rc) instead of retrying"
grep -q "port $held was taken, retrying" /tmp/harness.err || fail "no retry was reported for the held port $held"
echo "held port: retried and succeeded: $final"

# No retries left: a harness error (exit 3 and its message), not a failure
HARNESS_TEST_PORT=$held HARNESS_ATTEMPTS=1 hipower-run perftest-pair -q hipower am_lat 8 300 \
    -D short > /dev/null 2> /tmp/harness.err
rc=$?
cat /tmp/harness.err
[ "$rc" = 3 ] || fail "with no retry left, want exit 3 (harness error), got $rc"
grep -q '^harness error: perftest-pair: port taken' /tmp/harness.err ||
    fail "the harness error does not say so"
rm -f /tmp/harness.err /tmp/harness.port
echo "ok"
