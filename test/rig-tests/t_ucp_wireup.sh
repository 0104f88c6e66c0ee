#!/bin/bash
# How UCP wires hipower up, and which lanes it gives it:
#  - through ud_verbs:aux with UCX_HIPOWER_CONNECT_TO_IFACE=n (endpoint to
#    endpoint, the path of an interface without its handshake listener),
#    and through hipower's own handshake (the default): ucx_perftest's UCP
#    tag tests between two devices, eager and large sizes, tag lane on
#    hipower;
#  - with rc_verbs offered too, the lanes UCP picks for 64 and for 1,024
#    expected peers (UCX_NUM_EPS, what Open MPI passes as its world size):
#    rc serves at most 256 endpoints per interface (its max_num_eps), so
#    above that UCP must pick hipower, which serves the interface's whole
#    pool (issue 27).
# (Data integrity over UCP is the consumer work's checksummed test.)
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
export UCX_TLS=hipower,ud_verbs:aux,self
export UCX_HIPOWER_CONNECT_TO_IFACE=n

run_ucp() {
    local test=$1 size=$2 iters=$3 port=$((20000 + RANDOM % 20000)) out i
    UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 120 hipower-run \
        ucx_perftest -t "$test" -n "$iters" -p "$port" > /tmp/ucp-server.$$ 2>&1 &
    for ((i = 0; i < 100; ++i)); do
        harness_port_used "$port" listen && break
        harness_nap 0.1
    done
    out=$(UCX_NET_DEVICES=${RIG_DEVICES[1]}:1 UCX_LOG_LEVEL=info timeout 120 \
          hipower-run ucx_perftest -t "$test" -n "$iters" -p "$port" -s "$size" \
          127.0.0.1 2>&1)
    local rc=$?
    wait $!
    local server_rc=$?
    echo "$out" | grep -E 'ep_cfg|^Final'
    [ $rc = 0 ] && [ $server_rc = 0 ] ||
        { tail -5 /tmp/ucp-server.$$; fail "$test $size: client $rc server $server_rc"; }
    grep -q 'ep_cfg\[[0-9]*\]: tag(hipower/' <<< "$out" ||
        fail "$test $size: UCP did not put its tag lane on hipower"
    grep -q "^Final: *$iters " <<< "$out" || fail "$test $size: no result line"
    rm -f /tmp/ucp-server.$$
}

run_ucp tag_lat 64 1000
run_ucp tag_bw 100000 100
echo "ok: UCP tag traffic over hipower, wired up through ud_verbs:aux"

export UCX_TLS=hipower,self
unset UCX_HIPOWER_CONNECT_TO_IFACE
run_ucp tag_lat 64 1000
run_ucp tag_bw 100000 100
echo "ok: UCP tag traffic over hipower alone, connected by its handshake"

# With rc_verbs offered too, UCP keeps hipower (lower overhead per message,
# same link estimates) for the tag lane rather than closing it as dominated
export UCX_TLS=rc_verbs,hipower,ud_verbs:aux,self
run_ucp tag_lat 64 200
echo "ok: UCP picks hipower over rc_verbs for tag messages"

# The lanes for 64 and for 1,024 expected peers
for peers in 64 1024; do
    out=$(UCX_NUM_EPS=$peers timeout 120 hipower-run hipower-lanes \
          -a "${RIG_DEVICES[0]}:1" -b "${RIG_DEVICES[1]}:1" 2>&1)
    rc=$?
    echo "    UCX_NUM_EPS=$peers, UCX_TLS=$UCX_TLS:"
    echo "$out" | grep -E 'lane\[|^hipower-lanes' | sed 's/^/      /'
    [ $rc = 0 ] || fail "hipower-lanes with UCX_NUM_EPS=$peers: exit $rc"
    if [ "$peers" -gt 256 ]; then
        echo "$out" | grep -E 'lane\[' | grep -q 'rc_verbs' &&
            fail "UCX_NUM_EPS=$peers: UCP put a lane on rc_verbs (256 endpoints at most)"
        echo "$out" | grep -qE '^hipower-lanes: eager: hipower/.*rendezvous: hipower/' ||
            fail "UCX_NUM_EPS=$peers: eager and rendezvous lanes not on hipower"
        echo "ok: $peers expected peers: no lane on rc_verbs, eager and rendezvous on hipower"
    fi
done
