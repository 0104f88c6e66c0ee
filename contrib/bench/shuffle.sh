#!/bin/bash
# A TeraSort-style shuffle over UCP (the RoCE fullmesh seed's workload):
# N ranks on N rxe devices generate 100-byte records, partition them by
# sampled key ranges, exchange them all-to-all, sort and validate.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../../test/bench/ucp/wl-lib.sh"
S=shuffle

# Rank counts (x axis) and records per rank (100 bytes each)
ranks_list=${HIPOWER_BENCH_SHUFFLE_RANKS:-4} records=41943      # 4 MiB per rank
[ "$BENCH_QUICK" = 1 ] && ranks_list=${HIPOWER_BENCH_SHUFFLE_RANKS:-2} records=10486
chunk=65536

bench_metric $S shuffle_bw "Shuffle throughput: bytes exchanged between ranks / exchange time" MB/s higher ranks noplot
bench_metric $S shuffle_time "Shuffle total time: sampling, partitioning, exchange and sort" s lower ranks noplot

bench_note $S "N processes of \`test/bench/ucp/ucp_workloads shuffle\`, each on its own rxe device, over UCP tag messages. Each rank generates $records records of 100 bytes (a 10-byte random key; a PRNG seeded per rank), sends 256 sample keys to rank 0, which picks N-1 splitters and sends them back; each rank partitions its records by key range, sends every other rank its record count and then its records in messages of $chunk bytes (every message's checksum travels in its tag and is checked on arrival), and sorts what it received. Then it is validated: every rank's output sorted and inside its key range, rank i's largest key <= rank i+1's smallest, and the total record count and an order-independent checksum of all records unchanged."
bench_note $S ""
bench_note $S "**Shuffle throughput** = bytes sent to other ranks (all ranks together, ~(N-1)/N of the data) / exchange time (rank 0, from a barrier after partitioning to a barrier after the last rank has everything). **Total time** adds sampling, partitioning and sorting. Busy polling; the three transports interleaved in each repetition. Rank counts: $ranks_list (each run costs ~20 s of process start-up and wireup in the guest, so more rank counts do not fit the section's time budget; \`HIPOWER_BENCH_SHUFFLE_RANKS=\"2 4 8\"\` runs more)."

for rep in $(seq "$BENCH_REPS"); do
    for n in $ranks_list; do
        for col in rc_verbs hipower hipower-pull; do
            bench_log "shuffle rep $rep/$BENCH_REPS: $n ranks, $col"
            wl_launch "shuffle-$n-$col-rep$rep" "$col" "$n" shuffle --records "$records" \
                --chunk "$chunk" --timeout 400
            wl_find pattern=shuffle validated=1
            wl_record $S shuffle_bw "$n" "$col" "$rep" shuffle_mb_s
            wl_record $S shuffle_time "$n" "$col" "$rep" total_seconds
        done
    done
done
exit 0
