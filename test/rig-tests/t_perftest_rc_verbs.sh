#!/bin/bash
# UCX's own rc_verbs runs between two devices of the rig and the traffic
# really crosses them: the result lines are complete and both devices' packet
# counters move.
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
dev_a=${RIG_DEVICES[0]} dev_b=${RIG_DEVICES[1]}
iters=2000

check_final() {
    local what=$1 final=$2 field
    echo "$what: $final"
    read -r -a field <<< "$final"
    [ "${field[0]}" = "Final:" ] || fail "$what: no Final line"
    [ "${field[1]}" = "$iters" ] || fail "$what: ran ${field[1]} iterations, not $iters"
    # latency average, bandwidth average, message rate average are positive
    for i in 3 5 7; do
        awk -v v="${field[$i]}" 'BEGIN { exit !(v > 0) }' ||
            fail "$what: column $i is '${field[$i]}', not a positive number"
    done
}

before_a=$(sent_packets "$dev_a") before_b=$(sent_packets "$dev_b")
final=$(perftest-pair rc_verbs am_lat 64 "$iters") || fail "rc_verbs am_lat failed"
check_final "rc_verbs am_lat 64B" "$final"
final=$(perftest-pair rc_verbs am_bw 1024 "$iters" -D bcopy) ||
    fail "rc_verbs am_bw failed"
check_final "rc_verbs am_bw 1KB bcopy" "$final"
after_a=$(sent_packets "$dev_a") after_b=$(sent_packets "$dev_b")

if [ "$before_a" -ge 0 ] && [ "$before_b" -ge 0 ]; then
    echo "packets sent: $dev_a $((after_a - before_a)), $dev_b $((after_b - before_b))"
    # a latency ping-pong alone makes each side send >= iters packets
    [ $((after_a - before_a)) -ge "$iters" ] || fail "$dev_a sent too few packets"
    [ $((after_b - before_b)) -ge "$iters" ] || fail "$dev_b sent too few packets"
fi
