#!/bin/bash
# hipower alone (issue 27): UCP with no auxiliary transport, and on a device
# without SRQ and UD.
#
#  1. In one run, side by side, the UCP consumer program (test/ucp/
#     ucp_consumer: tag, stream, am, rma, checksummed both ways) with
#     UCX_TLS=rc_verbs,self -- which UCX refuses, having no transport to
#     carry its wire-up -- and with UCX_TLS=hipower,self, which connects
#     through hipower's own handshake (UCX_HIPOWER_CONNECT_TO_IFACE) and
#     passes every phase.
#  2. The same device made SRQ-less and UD-less by test/interpose/nosrq.c
#     (LD_PRELOAD; what devices such as eRDMA look like to UCX): ibv_devinfo
#     reports max_srq 0, UCX's rc_verbs and ud_verbs cannot open an
#     interface (their errors shown), and hipower alone passes the consumer
#     program there too.
# The other consumer tests (ucp_peer_failure, ucp_wakeup, mpi_*, wireup's
# ucx_perftest) run over UCX_TLS=hipower,self as well.
. "$(dirname "$0")/lib.sh"
. "$HIPOWER_SRC/test/ucp/ucp-rig-lib.sh"

NOSRQ=$HIPOWER_BUILD/test/interpose/.libs/libhipower-nosrq.so
[ -r "$NOSRQ" ] || fail "$NOSRQ is not built (make check)"

# Runs the consumer pair over $1 with $2 preloaded too (may be empty);
# sets PAIR_RC (0: both sides passed)
run_pair() {
    local tls=$1 preload=$2
    UCX_TLS=$tls LD_PRELOAD=$preload ucp_start_server --timeout 300
    UCX_TLS=$tls LD_PRELOAD=$preload ucp_start_client --timeout 300
    ucp_wait "$CLIENT_PID" client 330; local crc=$WAIT_RC; CLIENT_PID=
    ucp_wait "$SERVER_PID" server 60; local src=$WAIT_RC; SERVER_PID=
    ucp_check_clean client
    ucp_check_clean server
    PAIR_RC=$((crc != 0 || src != 0))
}

# The phases a passing run shows on both sides
check_phases() {
    local phase side
    for phase in 'tag blocking' 'tag non-blocking' 'tag unexpected burst' \
                 stream am 'rma put and get'; do
        for side in client server; do
            grep -q "^ok: $phase " "$UCP_LOGS/$side" ||
                fail "$1: $side: no 'ok: $phase' line"
        done
    done
}

# UCX's error lines of a run that must fail
show_errors() {
    grep -hE 'UCX  (ERROR|WARN)|^FAIL|failed' "$UCP_LOGS/client" \
        "$UCP_LOGS/server" | sort -u | head -4 | sed "s/^/    $1: /"
}

echo "== 1. no auxiliary transport: UCX's rc_verbs alone, then hipower alone"
run_pair rc_verbs,self ""
[ "$PAIR_RC" != 0 ] ||
    fail "UCX_TLS=rc_verbs,self passed: UCX connects rc without an auxiliary transport now; this test's premise is gone"
show_errors rc_verbs
echo "ok: UCX_TLS=rc_verbs,self fails, as UCX says it does"

UCX_LOG_LEVEL=info run_pair hipower,self ""
[ "$PAIR_RC" = 0 ] || { ucp_show client | tail -20; ucp_show server | tail -20
                        fail "UCX_TLS=hipower,self: the consumer failed"; }
check_phases "UCX_TLS=hipower,self"
grep -hE '(ep_cfg\[[0-9]+\]: |cfg#[0-9]+ )tag\(' "$UCP_LOGS/client" | head -1 |
    sed 's/^.*\(tag(\)/    lanes: \1/'
grep -qE 'tag\(hipower/' "$UCP_LOGS/client" || fail "the tag lane is not on hipower"
grep -E 'ud_|rc_verbs' "$UCP_LOGS/client" | grep -E 'cfg' &&
    fail "another verbs transport in UCP's lanes"
echo "ok: UCX_TLS=hipower,self passes every phase (tag, stream, am, rma), its lanes on hipower alone"

echo "== 2. a device without SRQ and UD (LD_PRELOAD $(basename "$NOSRQ"))"
srq=$(LD_PRELOAD=$NOSRQ ibv_devinfo -v -d "${RIG_DEVICES[0]}" 2>&1 |
      awk '$1 == "max_srq:" { print $2 }')
[ "$srq" = 0 ] || fail "ibv_devinfo under the interposer: max_srq '$srq', not 0"
echo "    ibv_devinfo -v -d ${RIG_DEVICES[0]}: max_srq: $srq"
for tl in rc_verbs ud_verbs; do
    # Without the interposer UCX lists and opens it on this device ...
    out=$(UCX_TLS=$tl UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 60 \
          ucx_info -d 2>&1)
    echo "$out" | grep -A5 "Transport: $tl" | grep -q 'failed to open interface' &&
        fail "$tl does not open an interface on ${RIG_DEVICES[0]} even without the interposer"
    echo "$out" | grep -qE "Transport: $tl" ||
        fail "ucx_info does not list $tl on ${RIG_DEVICES[0]} even without the interposer"
    # ... with it, not
    out=$(LD_PRELOAD=$NOSRQ HIPOWER_NOSRQ_LOG=1 UCX_TLS=$tl \
          UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 60 ucx_info -d 2>&1)
    if echo "$out" | grep -qE "Transport: $tl"; then
        echo "$out" | grep -A5 "Transport: $tl" |
            grep -q 'failed to open interface' ||
            fail "$tl opened an interface on the SRQ-less, UD-less device"
        how="its interface fails to open"
    else
        how="UCX no longer offers it on the device"
    fi
    echo "$out" | grep -E 'hipower-nosrq: refused|failed to open|UCX  (ERROR|WARN)' |
        sort -u | head -3 | sed "s/^/    $tl: /"
    echo "ok: $tl opens on ${RIG_DEVICES[0]}, and on the SRQ-less, UD-less device $how"
done
run_pair rc_verbs,ud_verbs:aux,self "$NOSRQ"
[ "$PAIR_RC" != 0 ] || fail "rc_verbs with ud_verbs passed on a device without SRQ and UD"
show_errors "rc_verbs,ud_verbs:aux"
echo "ok: UCX_TLS=rc_verbs,ud_verbs:aux,self fails there"

HIPOWER_NOSRQ_LOG=1 run_pair hipower,self "$NOSRQ"
[ "$PAIR_RC" = 0 ] || { ucp_show client | tail -20; ucp_show server | tail -20
                        fail "UCX_TLS=hipower,self failed on the SRQ-less, UD-less device"; }
check_phases "hipower on the SRQ-less, UD-less device"
grep -q 'hipower-nosrq: refused' "$UCP_LOGS/client" "$UCP_LOGS/server" &&
    fail "hipower asked for an SRQ or a UD QP"
echo "ok: UCX_TLS=hipower,self passes every phase on a device without SRQ and UD"
