#!/bin/bash
# hipower alone (issue 27): UCP with no auxiliary transport, and on a device
# without SRQ and UD.
#
#  1. In one run, side by side, the UCP consumer program (test/ucp/
#     ucp_consumer: tag, stream, am, rma, checksummed both ways) with
#     UCX_TLS=rc_verbs -- which UCX refuses, having no transport to carry
#     its wire-up -- and with UCX_TLS=hipower, nothing else, which connects
#     through hipower's own handshake (UCX_HIPOWER_CONNECT_TO_IFACE) and
#     passes every phase.
#  2. ucx_perftest over UCX_TLS=hipower: UCP tag, stream, am, put and get,
#     and UCT put and get (UCT's am is t_perftest_hipower's); the same UCP
#     test over UCX_TLS=rc_verbs fails.
#  3. The same device made SRQ-less and UD-less by test/interpose/nosrq.c
#     (LD_PRELOAD; what devices such as eRDMA look like to UCX): ibv_devinfo
#     reports max_srq 0, UCX's rc_verbs and ud_verbs cannot open an
#     interface (their errors shown), and hipower alone passes the consumer
#     program there too.
# The other consumer tests (ucp_peer_failure, ucp_wakeup, mpi_*, wireup's
# ucx_perftest) run over UCX_TLS=hipower,self (self: a rank's messages to
# itself, as users write it); run-other-ucx runs this one on the other
# UCX versions too.
. "$(dirname "$0")/lib.sh"
. "$HIPOWER_SRC/test/ucp/ucp-rig-lib.sh" > /dev/null  # (its default UCX_TLS)
echo "server on $SERVER_DEV, client on $CLIENT_DEV; UCX_TLS as each part says"

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
run_pair rc_verbs ""
[ "$PAIR_RC" != 0 ] ||
    fail "UCX_TLS=rc_verbs passed: UCX connects rc without an auxiliary transport now; this test's premise is gone"
show_errors rc_verbs
echo "ok: UCX_TLS=rc_verbs fails, as UCX says it does"

UCX_LOG_LEVEL=info run_pair hipower ""
[ "$PAIR_RC" = 0 ] || { ucp_show client | tail -20; ucp_show server | tail -20
                        fail "UCX_TLS=hipower: the consumer failed"; }
check_phases "UCX_TLS=hipower"
grep -hE '(ep_cfg\[[0-9]+\]: |cfg#[0-9]+ )tag\(' "$UCP_LOGS/client" | head -1 |
    sed 's/^.*\(tag(\)/    lanes: \1/'
grep -qE 'tag\(hipower/' "$UCP_LOGS/client" || fail "the tag lane is not on hipower"
grep -E 'ud_|rc_verbs' "$UCP_LOGS/client" | grep -E 'cfg' &&
    fail "another verbs transport in UCP's lanes"
echo "ok: UCX_TLS=hipower passes every phase (tag, stream, am, rma), its lanes on hipower alone"

echo "== 2. ucx_perftest over UCX_TLS=hipower"
perf_iters=${PERFTEST_ITERS:-500}
# UCP: the transports come from UCX_TLS (perftest-pair's TL is a label)
perf_run() {
    local tl=$1 test=$2 size=$3 layout=$4 final
    shift 4
    final=$(hipower-run perftest-pair -q "$tl" "$test" "$size" \
            "$perf_iters" ${layout:+-D "$layout"} "$@" 2>&1) || {
        echo "$final" | tail -5 | sed 's/^/    /'; return 1; }
    set -- $final
    [ "$1" = Final: ] && [ "$2" = "$perf_iters" ] || {
        echo "    bad result line: $final"; return 1; }
    printf '    %-6s %-11s %-6s %7s B  lat %9s us  rate %9s msg/s\n' \
        "$tl" "$test" "${layout:--}" "$size" "$3" "$9"
}
export UCX_TLS=hipower
# Eager at 8 B, rendezvous (or zero-copy) at 64 KB and 1 MB
for spec in "tag_lat 8" "tag_bw 1048576" "stream_lat 8" "stream_bw 65536" \
            "ucp_am_lat 8" "ucp_am_bw 65536" "ucp_put_lat 8" \
            "ucp_put_bw 65536" "ucp_get 65536"; do
    read -r test size <<< "$spec"
    perf_run ucp "$test" "$size" "" || fail "UCX_TLS=hipower: ucx_perftest $test $size failed"
done
unset UCX_TLS
# UCT, endpoint to endpoint (UCX_TLS plays no part)
for spec in "put_lat 8 short" "put_bw 65536 zcopy" "get 4096 bcopy" \
            "get 65536 zcopy"; do
    read -r test size layout <<< "$spec"
    perf_run hipower "$test" "$size" "$layout" ||
        fail "ucx_perftest -x hipower -t $test -D $layout $size failed"
done
UCX_TLS=rc_verbs PERFTEST_PAIR_TIMEOUT=60 perf_run ucp tag_lat 8 "" > "$UCP_LOGS/perf-rc" 2>&1 &&
    fail "UCX_TLS=rc_verbs: ucx_perftest tag_lat passed without an auxiliary transport"
grep -hE 'UCX  (ERROR|WARN)|unreachable' "$UCP_LOGS/perf-rc" | sort -u | head -2 |
    sed 's/^ */    rc_verbs: /'
echo "ok: ucx_perftest UCP tag, stream, am, put, get and UCT put, get over hipower alone; UCX_TLS=rc_verbs fails"

echo "== 3. a device without SRQ and UD (LD_PRELOAD $(basename "$NOSRQ"))"
srq=$(LD_PRELOAD=$NOSRQ ibv_devinfo -v -d "${RIG_DEVICES[0]}" 2>&1 |
      awk '$1 == "max_srq:" { print $2 }')
[ "$srq" = 0 ] || fail "ibv_devinfo under the interposer: max_srq '$srq', not 0"
echo "    ibv_devinfo -v -d ${RIG_DEVICES[0]}: max_srq: $srq"
# ucx_info's lines of transport $1 on the device (stderr interleaved): from
# its "Transport:" line to the blank one after it
tl_block() {
    awk -v tl="$1" '/^# *Transport: / { on = ($3 == tl) }
                    on { print } on && /^# *$/ { on = 0 }'
}
for tl in rc_verbs ud_verbs; do
    # Without the interposer UCX lists and opens it on this device ... (the
    # UCX version under test: hipower-run puts its tools first)
    out=$(UCX_TLS=$tl UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 60 \
          hipower-run ucx_info -d 2>&1 | tl_block $tl)
    [ -n "$out" ] ||
        fail "ucx_info does not list $tl on ${RIG_DEVICES[0]} even without the interposer"
    echo "$out" | grep -q 'failed to open interface' &&
        fail "$tl does not open an interface on ${RIG_DEVICES[0]} even without the interposer"
    # ... with it, not (and ucx_info itself runs: an interposer that
    # aborted it would pass for a device that has no such transport)
    all=$(LD_PRELOAD=$NOSRQ HIPOWER_NOSRQ_LOG=1 UCX_TLS=$tl \
          UCX_NET_DEVICES=${RIG_DEVICES[0]}:1 timeout 60 hipower-run ucx_info -d 2>&1)
    info_rc=$?
    [ $info_rc = 0 ] && grep -q 'Transport: hipower' <<< "$all" || {
        echo "$all" | tail -5; fail "ucx_info under the interposer: exit $info_rc, or no hipower listed"; }
    out=$(tl_block $tl <<< "$all")
    if [ -n "$out" ]; then
        echo "$out" | grep -q 'failed to open interface' ||
            fail "$tl opened an interface on the SRQ-less, UD-less device"
        how="its interface fails to open"
    else
        how="UCX no longer offers it on the device"
    fi
    echo "$all" | grep -E '^hipower-nosrq: refused|^# *< failed to open|UCX  (ERROR|WARN)' |
        sort -u | head -3 | sed "s/^/    $tl: /"
    echo "ok: $tl opens on ${RIG_DEVICES[0]}, and on the SRQ-less, UD-less device $how"
done
run_pair rc_verbs,ud_verbs:aux,self "$NOSRQ"
[ "$PAIR_RC" != 0 ] || fail "rc_verbs with ud_verbs passed on a device without SRQ and UD"
show_errors "rc_verbs,ud_verbs:aux"
echo "ok: UCX_TLS=rc_verbs,ud_verbs:aux,self fails there"

HIPOWER_NOSRQ_LOG=1 run_pair hipower "$NOSRQ"
[ "$PAIR_RC" = 0 ] || { ucp_show client | tail -20; ucp_show server | tail -20
                        fail "UCX_TLS=hipower failed on the SRQ-less, UD-less device"; }
check_phases "hipower on the SRQ-less, UD-less device"
grep -q 'hipower-nosrq: refused' "$UCP_LOGS/client" "$UCP_LOGS/server" &&
    fail "hipower asked for an SRQ or a UD QP"
echo "ok: UCX_TLS=hipower passes every phase on a device without SRQ and UD"
