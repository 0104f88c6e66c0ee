#!/bin/bash
# UCP wires hipower up through ud_verbs:aux and puts its tag lane on it:
# ucx_perftest's UCP tag tests run between two devices with
# UCX_TLS=hipower,ud_verbs:aux,self (no rc_verbs), eager and large sizes.
# (Data integrity over UCP is the consumer work's checksummed test.)
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
export UCX_TLS=hipower,ud_verbs:aux,self

run_ucp() {
    local test=$1 size=$2 iters=$3 port=$((20000 + RANDOM % 20000)) out
    UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 120 hipower-run \
        ucx_perftest -t "$test" -n "$iters" -p "$port" > /tmp/ucp-server.$$ 2>&1 &
    for _ in $(seq 100); do
        ss -Hltn "sport = :$port" | grep -q . && break
        sleep 0.1
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
echo "ok: UCP tag traffic over hipower"

# With rc_verbs offered too, UCP keeps hipower (lower overhead per message,
# same link estimates) for the tag lane rather than closing it as dominated
export UCX_TLS=rc_verbs,hipower,ud_verbs:aux,self
run_ucp tag_lat 64 200
echo "ok: UCP picks hipower over rc_verbs for tag messages"
