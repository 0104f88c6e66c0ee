#!/bin/bash
# The device ceiling: perftest (no UCX) between the first two devices,
# RDMA WRITE, SEND and READ, latency and bandwidth.
. "$(dirname "$0")/lib.sh"
S=ceiling

if [ "$BENCH_QUICK" = 1 ]; then lat_sizes="8" bw_sizes="65536"
else lat_sizes="8 4096" bw_sizes="65536 1048576"; fi

bench_metric $S lat "perftest one-way latency (t_typical)" usec lower "message size (B)"
bench_metric $S bw "perftest bandwidth (BW average)" MB/s higher "message size (B)"
bench_note $S "perftest between ${BENCH_DEVICES[0]:-?} and ${BENCH_DEVICES[1]:-?}, GID index 0, columns are the perftest programs. This is what the verbs device itself does with one work request per message and no UCX: the ceiling for the UCT and UCP tables."

for rep in $(seq "$BENCH_REPS"); do
    for size in $lat_sizes; do
        bench_log "ceiling rep $rep/$BENCH_REPS: latency $size B"
        for t in ib_write_lat ib_send_lat ib_read_lat; do
            r=$(bench_raw "$t" "$size" 1000) &&
                bench_sample $S lat "$size" "${t%_lat}" "$rep" "$(bench_field "$r" 4)" ||
                bench_sample $S lat "$size" "${t%_lat}" "$rep" "$(bench_fail_word)"
        done
    done
    for size in $bw_sizes; do
        bench_log "ceiling rep $rep/$BENCH_REPS: bandwidth $size B"
        for t in ib_write_bw ib_send_bw ib_read_bw; do
            r=$(bench_raw "$t" "$size" "$(bench_iters "$size" 5000 25165824)") &&
                bench_sample $S bw "$size" "${t%_bw}" "$rep" "$(bench_field "$r" 3)" ||
                bench_sample $S bw "$size" "${t%_bw}" "$rep" "$(bench_fail_word)"
        done
    done
done
exit 0
