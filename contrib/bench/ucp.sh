#!/bin/bash
# UCP level: ucx_perftest tag_lat and tag_bw between the first two devices,
# eager and rendezvous sizes up to 8 MB, with each column's UCX_TLS.
. "$(dirname "$0")/lib.sh"
S=ucp

# tag_bw at 8 B: the small-message rate (issue 26's UCP target)
if [ "$BENCH_QUICK" = 1 ]; then lat_sizes="8" bw_sizes="8 65536"
else lat_sizes="8 65536 1048576" bw_sizes="8 65536 1048576 8388608"; fi
# A shorter run for a question about some points only
lat_sizes=${HIPOWER_BENCH_UCP_LAT_SIZES:-$lat_sizes}
bw_sizes=${HIPOWER_BENCH_UCP_BW_SIZES:-$bw_sizes}

bench_metric $S tag_lat "UCP tag one-way latency (tag_lat, 50th percentile)" usec lower "message size (B)"
bench_metric $S tag_bw "UCP tag bandwidth (tag_bw)" MB/s higher "message size (B)"
bench_metric $S tag_rate "UCP tag message rate (tag_bw)" msg/s higher "message size (B)" noplot
bench_note $S "ucx_perftest UCP tests, server (receiver) with UCX_NET_DEVICES=${BENCH_DEVICES[0]:-?}:1, client with ${BENCH_DEVICES[1]:-?}:1. UCX_TLS per column: rc_verbs = \`$(bench_ucp_env rc_verbs)\`, hipower = \`$(bench_ucp_env hipower)\`, hipower-pull = \`$(bench_ucp_env hipower-pull)\` (UD only carries the wireup). UCP's own protocol selection picks eager or rendezvous per size (with hipower: short <= 105 B, bcopy <= 247693 B, rendezvous get_zcopy above)."

for rep in $(seq "$BENCH_REPS"); do
    for test in tag_lat tag_bw; do
        sizes=$([ "$test" = tag_lat ] && echo "$lat_sizes" || echo "$bw_sizes")
        for size in $sizes; do
            if [ "$test" = tag_lat ]; then iters=$(bench_iters "$size" 300 4194304) field=2
            else iters=$(bench_iters "$size" 5000 16777216) field=6; fi
            bench_log "ucp rep $rep/$BENCH_REPS: $test $size B"
            for col in ${HIPOWER_BENCH_UCP_COLUMNS:-rc_verbs hipower hipower-nowindow hipower-nobundle hipower-pull}; do
                if f=$(bench_pair "$col" "$test" "$size" "$iters"); then
                    bench_sample $S "$test" "$size" "$col" "$rep" "$(bench_field "$f" "$field")"
                    [ "$test" = tag_bw ] &&
                        bench_sample $S tag_rate "$size" "$col" "$rep" "$(bench_field "$f" 8)"
                else
                    bench_sample $S "$test" "$size" "$col" "$rep" "$(bench_fail_word)"
                    [ "$test" = tag_bw ] &&
                        bench_sample $S tag_rate "$size" "$col" "$rep" "$(bench_fail_word)"
                fi
            done
        done
    done
done
exit 0
