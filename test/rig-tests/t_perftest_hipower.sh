#!/bin/bash
# ucx_perftest, an unmodified UCX tool, runs hipower between two devices:
# am_lat and am_bw with short, bcopy and zcopy messages at 8 B, 64 B, 1 KB,
# 4 KB and the largest slot payload in the default notification mode
# (8 B and the largest in the other two). Under
# sustained am_bcopy 1 KB load the counters must show the batching the
# design exists for: >= 8 slots recycled per bitmap read, no receive
# completions; under an 8 B ping-pong, slots come back by the
# acknowledgements in the replies' trailers, with no bitmap read at all.
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
iters=${PERFTEST_ITERS:-500}
max=$(hipower-run ucx_info -d -t hipower | sed -n 's/.*am_bcopy: <= \([0-9]*\).*/\1/p' | head -1)
[ -n "$max" ] || fail "cannot read hipower's am_bcopy limit from ucx_info"
short_max=$(hipower-run ucx_info -d -t hipower | sed -n 's/.*am_short: <= \([0-9]*\).*/\1/p' | head -1)
echo "limits: am_short <= $short_max, am_bcopy/zcopy <= $max"

check_final() {
    local what=$1 final=$2 f
    read -r -a f <<< "$final"
    [ "${f[0]}" = "Final:" ] && [ "${f[1]}" = "$iters" ] ||
        fail "$what: bad result line '$final'"
    awk -v v="${f[3]}" -v r="${f[8]}" 'BEGIN { exit !(v > 0 && r > 0) }' ||
        fail "$what: latency or rate not positive: $final"
    printf '%-34s lat %8s us  rate %8s msg/s\n' "$what" "${f[2]}" "${f[8]}"
}

# Lighter runs (run-other-ucx): HIPOWER_PERFTEST_MODES (or
# HIPOWER_TEST_MODES): fewer modes; HIPOWER_PERFTEST_SIZES: these sizes
# ("max" = the largest slot payload) in every mode; HIPOWER_PERFTEST_TESTS:
# these ucx_perftest tests (default am_lat am_bw);
# HIPOWER_PERFTEST_COUNTERS=n: not the two counter runs below
for mode in ${HIPOWER_PERFTEST_MODES:-${HIPOWER_TEST_MODES:-self push pull}}; do
    export UCX_HIPOWER_NOTIFY=$mode
    # Every size in the default mode; the others share its frame and are
    # covered message by message by t_uct_transport: fewer sizes
    sizes="8 64 1024 4096 $max"
    [ $mode = self ] || sizes="8 $max"
    [ -n "${HIPOWER_PERFTEST_SIZES:-}" ] && sizes=${HIPOWER_PERFTEST_SIZES//max/$max}
    for test in ${HIPOWER_PERFTEST_TESTS:-am_lat am_bw}; do
        for size in $sizes; do
            for layout in short bcopy zcopy; do
                [ "$layout" = short ] && [ "$size" -gt "$short_max" ] && continue
                [ "$layout" = zcopy ] && [ "$size" -lt 64 ] && continue
                final=$(hipower-run perftest-pair -q hipower "$test" "$size" \
                        "$iters" -D "$layout") ||
                    fail "$mode $test $size $layout failed"
                check_final "$mode $test $layout $size B" "$final"
            done
        done
    done
done

if [ "${HIPOWER_PERFTEST_COUNTERS:-y}" = n ]; then
    echo "ok (counter runs left out: HIPOWER_PERFTEST_COUNTERS=n)"
    exit 0
fi

# The batching, from the counters of a sustained am_bcopy 1 KB stream in
# the default mode, without the bundle window: with it, bundles of 7 such
# messages a slot leave the sender so many slots that the receiver's
# acknowledgements give them all back and no READ is ever due (seen: 0
# reads, 4,220 slots acked), so there would be no READ batching to check
export UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_STATS=y UCX_HIPOWER_BUNDLE_WINDOW=0
work=$(mktemp -d)
PERFTEST_PAIR_KEEP="$work" hipower-run perftest-pair -q hipower am_bw 1024 20000 \
    -D bcopy > "$work/final" 2> "$work/stderr" || {
    cat "$work/stderr"; fail "sustained am_bw 1 KB failed"; }
grep '^hipower-stats' "$work"/*.out "$work/stderr" 2>/dev/null | sed 's/^[^:]*://' | sort -u > "$work/stats"
cat "$work/stats"
# am_bw's receiver sends flow-control messages back: pick by volume
by_counter() {
    awk -v key="$1" '{ for (i = 1; i <= NF; ++i) if (index($i, key "=") == 1)
                           { split($i, kv, "="); print kv[2], $0 } }' \
        "$work/stats" | sort -n | tail -1 | cut -d' ' -f2-
}
sender=$(by_counter tx_msgs)
receiver=$(by_counter rx_msgs)
[ -n "$sender" ] && [ -n "$receiver" ] || fail "no counters printed"
per_read=$(echo "$sender" | sed -n 's/.*slots_per_read=\([0-9.]*\).*/\1/p')
rx_msgs=$(echo "$receiver" | sed -n 's/.* rx_msgs=\([0-9]*\).*/\1/p')
rx_comp=$(echo "$receiver" | sed -n 's/.* rx_completions=\([0-9]*\).*/\1/p')
rx_side_cqes=$(echo "$receiver" | sed -n 's/.* tx_completions=\([0-9]*\).*/\1/p')
rx_handshakes=$(echo "$receiver" | sed -n 's/.* handshakes=\([0-9]*\).*/\1/p')
echo "slots recycled per bitmap read: $per_read; receiver: $rx_msgs messages," \
     "$rx_comp receive completions, $rx_side_cqes completions of its own"
awk -v v="$per_read" 'BEGIN { exit !(v >= 8) }' ||
    fail "only $per_read slots recycled per bitmap read (want >= 8)"
# Receive completions: the peer's first write wakes (one per connection),
# and its first write after each sleep handshake (a demotion tried after a
# pause of the harness longer than UCX_HIPOWER_IDLE_TIME), none per message
[ -n "$rx_handshakes" ] || fail "no handshakes counter"
[ "$rx_comp" -le $((4 + rx_handshakes)) ] ||
    fail "$rx_comp receive completions for $rx_msgs messages ($rx_handshakes handshakes)"
# Everything the receiver polled is its own few flow-control sends: far
# fewer completions than messages received (rc_verbs polls one per message)
[ "$rx_side_cqes" -lt $((rx_msgs / 8)) ] ||
    fail "the receiver polled $rx_side_cqes completions for $rx_msgs messages"
rm -rf "$work"

# Two-way traffic: every reply's trailer acknowledges the request before it
# (docs/protocol.md), so a ping-pong recycles its slots without a single
# bitmap read, on both sides
work=$(mktemp -d)
PERFTEST_PAIR_KEEP="$work" hipower-run perftest-pair -q hipower am_lat 8 20000 \
    -D short > "$work/final" 2> "$work/stderr" || {
    cat "$work/stderr"; fail "am_lat 8 B with counters failed"; }
grep -h '^hipower-stats' "$work"/*.out "$work/stderr" 2>/dev/null | sort -u > "$work/stats"
cat "$work/stats"
[ "$(grep -c ' tx_msgs=' "$work/stats")" = 2 ] || fail "want the counters of both sides"
counter() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<< "$2"; }
while read -r line; do
    tx=$(counter tx_msgs "$line") acked=$(counter slots_acked "$line")
    reads=$(counter bitmap_reads "$line")
    echo "ping-pong side: $tx messages sent, $acked slots acknowledged back, $reads bitmap reads"
    [ "$tx" -ge 20000 ] || fail "only $tx messages sent"
    # All but the last ring's worth (the peer's last reply carries the rest)
    [ "$acked" -ge $((tx - 64)) ] || fail "only $acked of $tx slots came back by acknowledgement"
    [ "$reads" = 0 ] || fail "$reads bitmap reads in a ping-pong (want 0)"
done < "$work/stats"
rm -rf "$work"
echo "ok"
