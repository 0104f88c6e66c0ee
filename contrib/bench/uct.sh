#!/bin/bash
# UCT level (ucx_perftest between the first two devices): active-message
# latency, message rate and bandwidth from 8 B to the largest AM size, and
# put/get zero-copy bandwidth up to 4 MB; the raw device (perftest
# ib_write/ib_read) measured in the same loop as the "device" column.
# The am_bw runs also give CPU seconds per message (section "cpu").
. "$(dirname "$0")/lib.sh"
S=uct

hp_max=$(bench_uct_max hipower am_bcopy)
rc_max=$(bench_uct_max rc_verbs am_bcopy)
ud_max=$(bench_uct_max ud_verbs am_bcopy)
am_max=$(( hp_max < rc_max ? hp_max : rc_max ))
[ "$am_max" -gt 0 ] || { bench_log "uct: cannot read the AM size limits from ucx_info"; exit 1; }

if [ "$BENCH_QUICK" = 1 ]; then
    am_sizes="8 1024" rma_sizes="65536"
else
    am_sizes="8 64 1024 4096 $am_max" rma_sizes="65536 1048576 4194304"
fi
# HIPOWER_BENCH_UCT_SIZES, HIPOWER_BENCH_UCT_TESTS (am_lat am_bw): fewer
# points, for a question about those only
am_sizes=${HIPOWER_BENCH_UCT_SIZES:-$am_sizes}
# A shorter run for a question about some columns only:
# HIPOWER_BENCH_UCT_COLUMNS (default all), HIPOWER_BENCH_UCT_RMA=n skips
# put/get. The report says which columns were measured.
columns=${HIPOWER_BENCH_UCT_COLUMNS:-rc_verbs hipower hipower-nowindow hipower-nobundle hipower-push hipower-pull ud_verbs}
[ "${HIPOWER_BENCH_UCT_RMA:-y}" = n ] && rma_sizes=

bench_metric $S am_lat "AM one-way latency (am_lat, 50th percentile)" usec lower "message size (B)"
bench_metric $S am_rate "AM message rate (am_bw)" msg/s higher "message size (B)"
bench_metric $S am_bw "AM bandwidth (am_bw)" MB/s higher "message size (B)"
bench_metric $S put_bw "put zero-copy bandwidth (put_bw)" MB/s higher "message size (B)"
bench_metric $S get_bw "get zero-copy bandwidth (get)" MB/s higher "message size (B)"
bench_metric cpu tx_cpu "sender CPU per message (process user+sys, am_bw)" usec lower "message size (B)" noplot
bench_metric cpu rx_cpu "receiver CPU per message (process user+sys, am_bw)" usec lower "message size (B)" noplot
bench_metric cpu guest_cpu "whole-guest CPU per message (/proc/stat, am_bw)" usec lower "message size (B)" noplot
bench_metric cpu wakeups "sender's async-thread wake-ups (send CQ events) per second (am_bw; HIPOWER_BENCH_KEEP=y with UCX_HIPOWER_STATS=y)" "1/s" lower "message size (B)" noplot
bench_metric cpu wakeups_per_msg "sender's async-thread wake-ups per 1,000 messages (am_bw; as above)" "1/1000 msgs" lower "message size (B)" noplot

bench_note $S "ucx_perftest UCT tests between ${BENCH_DEVICES[0]:-?} (server, receiver) and ${BENCH_DEVICES[1]:-?} (client, sender), each side with its own batch file. Sizes up to 64 B use am_short, larger ones am_bcopy; put/get use zcopy. The **device** column is perftest on the same pair in the same loop: ib_write_lat (t_typical) for am_lat, ib_write_bw for am_rate/am_bw/put_bw, ib_read_bw for get_bw. Largest AM size: $am_max B (hipower am_bcopy <= $hp_max, rc_verbs <= $rc_max); ud_verbs only up to its am_bcopy limit ($ud_max B). tcp is not measured: on this rig it runs over loopback, not over the rxe links (see docs)."
bench_note cpu "**Process CPU per message** (tx_cpu, rx_cpu) is user+sys time of each ucx_perftest process of the UCT am_bw runs divided by the messages, start-up included; both sides busy-poll, so it mostly follows wall time. **guest_cpu** is the busy time of the whole guest (/proc/stat, both processes plus the kernel's rxe work) per message."

layout() { [ "$1" -le 64 ] && echo short || echo bcopy; }

for rep in $(seq "$BENCH_REPS"); do
    for size in $am_sizes; do
        for test in ${HIPOWER_BENCH_UCT_TESTS:-am_lat am_bw}; do
            # Latency: 2000 round trips per run (~1 s; 300 until stop 48).
            # The rig's runs of every transport still sit at ~25 or ~50 us
            # by run and by boot (docs/bench/rerun-01809db); in its "4 ms
            # mode" (see docs), where a round trip can take a timer tick, a
            # run takes ~16 s
            if [ "$test" = am_lat ]; then iters=2000
            else iters=$(bench_iters "$size" 5000 8388608); fi
            # HIPOWER_BENCH_UCT_LAT_SIZES / _BW_SIZES: each test's own
            # subset of the sizes
            sub=$([ "$test" = am_lat ] && echo "${HIPOWER_BENCH_UCT_LAT_SIZES:-}" ||
                  echo "${HIPOWER_BENCH_UCT_BW_SIZES:-}")
            [ -n "$sub" ] && [[ " $sub " != *" $size "* ]] && continue
            bench_log "uct rep $rep/$BENCH_REPS: $test $size B"
            if [ "$test" = am_lat ]; then
                r=$(bench_raw ib_write_lat "$size" "$iters") &&
                    bench_sample $S am_lat "$size" device "$rep" "$(bench_field "$r" 4)" ||
                    bench_sample $S am_lat "$size" device "$rep" "$(bench_fail_word)"
            else
                r=$(bench_raw ib_write_bw "$size" "$iters") && {
                    bench_sample $S am_bw "$size" device "$rep" "$(bench_field "$r" 3)"
                    bench_sample $S am_rate "$size" device "$rep" \
                        "$(awk -v m="$(bench_field "$r" 4)" 'BEGIN { printf "%.0f", m * 1e6 }')"
                } || { bench_sample $S am_bw "$size" device "$rep" "$(bench_fail_word)"
                       bench_sample $S am_rate "$size" device "$rep" "$(bench_fail_word)"; }
            fi
            for col in $columns; do
                [ "$col" = ud_verbs ] && [ "$size" -gt "$ud_max" ] && continue
                cpu=$BENCH_OUT/raw/cpu.$$
                # HIPOWER_BENCH_KEEP=y: both sides' output of each run kept
                # (with UCX_HIPOWER_STATS=y: the counters of every run)
                keep=
                if [ "${HIPOWER_BENCH_KEEP:-n}" = y ]; then
                    keep=$BENCH_OUT/raw/keep-$col-$test-$size-rep$rep
                    mkdir -p "$keep"
                fi
                if f=$(PERFTEST_PAIR_CPU=$cpu PERFTEST_PAIR_KEEP=$keep \
                       bench_pair "$col" "$test" "$size" "$iters" \
                       -D "$(layout "$size")"); then
                    [ -n "$keep" ] && echo "$f" > "$keep/final"
                    if [ "$test" = am_lat ]; then
                        bench_sample $S am_lat "$size" "$col" "$rep" "$(bench_field "$f" 2)"
                    else
                        rate=$(bench_field "$f" 8)
                        bench_sample $S am_rate "$size" "$col" "$rep" "$rate"
                        bench_sample $S am_bw "$size" "$col" "$rep" "$(bench_field "$f" 6)"
                        read -r rx_s tx_s guest_s < "$cpu"
                        # The flush on completion's cost: the send CQ's
                        # events the sender's async thread took (its
                        # counters, printed at close with STATS=y)
                        ev=$([ -n "$keep" ] && sed -n 's/^hipower-stats .* tx_cq_events=\([0-9]*\) .*/\1/p' \
                                 "$keep/client.out" 2>/dev/null | head -1)
                        if [ -n "$ev" ] && [ -n "$rate" ]; then
                            bench_sample cpu wakeups "$size" "$col" "$rep" \
                                "$(awk -v e="$ev" -v n="$iters" -v r="$rate" 'BEGIN { printf "%.0f", (r > 0) ? e * r / n : 0 }')"
                            bench_sample cpu wakeups_per_msg "$size" "$col" "$rep" \
                                "$(awk -v e="$ev" -v n="$iters" 'BEGIN { printf "%.1f", e * 1000 / n }')"
                        fi
                        for m in "tx_cpu $tx_s" "rx_cpu $rx_s" "guest_cpu $guest_s"; do
                            set -- $m
                            bench_sample cpu "$1" "$size" "$col" "$rep" \
                                "$(awk -v s="$2" -v n="$iters" 'BEGIN { printf "%.1f", s * 1e6 / n }')"
                        done
                    fi
                else
                    for m in $([ "$test" = am_lat ] && echo am_lat || echo "am_rate am_bw"); do
                        bench_sample $S "$m" "$size" "$col" "$rep" "$(bench_fail_word)"
                    done
                fi
                rm -f "$cpu"
            done
        done
    done

    for size in $rma_sizes; do
        iters=$(bench_iters "$size" 2000 16777216)
        bench_log "uct rep $rep/$BENCH_REPS: put/get zcopy $size B"
        for test in put_bw get; do
            metric=$([ "$test" = put_bw ] && echo put_bw || echo get_bw)
            raw=$([ "$test" = put_bw ] && echo ib_write_bw || echo ib_read_bw)
            r=$(bench_raw "$raw" "$size" "$iters") &&
                bench_sample $S "$metric" "$size" device "$rep" "$(bench_field "$r" 3)" ||
                bench_sample $S "$metric" "$size" device "$rep" "$(bench_fail_word)"
            for col in rc_verbs hipower; do
                f=$(bench_pair "$col" "$test" "$size" "$iters" -D zcopy) &&
                    bench_sample $S "$metric" "$size" "$col" "$rep" "$(bench_field "$f" 6)" ||
                    bench_sample $S "$metric" "$size" "$col" "$rep" "$(bench_fail_word)"
            done
        done
    done
done
exit 0
