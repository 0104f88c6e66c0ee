#!/bin/bash
# The HiPower paper's incast patterns (its Figure 6): broadcast 1->4 and
# gather 4->1 over UCP tag messages, 5 ranks on 5 rxe devices, throughput
# and round latency at the master, and the master's CPU per message while
# every rank sleeps in the worker's event fd when idle (--wait).
# One ucp_workloads run per repetition and transport measures every size,
# both patterns and (rc_verbs, hipower) both modes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../../test/bench/ucp/wl-lib.sh"
S=incast
RANKS=5

if [ "$BENCH_QUICK" = 1 ]; then sizes="1024" lat_rounds=5
else sizes="64 4096" lat_rounds=6; fi
# Throughput phase: budget/size messages per worker, at least 16, at most
# max_msgs. With 200 and 128 KB (until stop 48) a phase lasted 16-40 ms,
# a few of the guest scheduler's slices, and one transport's samples
# spread 2-3x; 2000 messages of 64 B and 1024 of 4 KB take 0.3-1.2 s
# (--quick: the old short phase, it only checks that the section runs)
if [ "$BENCH_QUICK" = 1 ]; then budget=131072 max_msgs=200
else budget=4194304 max_msgs=2000; fi
budget=${HIPOWER_BENCH_INCAST_BUDGET:-$budget} max_msgs=${HIPOWER_BENCH_INCAST_MSGS:-$max_msgs}
# Columns (HIPOWER_BENCH_INCAST_COLUMNS: a subset, for trying things)
columns=${HIPOWER_BENCH_INCAST_COLUMNS:-rc_verbs hipower hipower-nobundle hipower-window hipower-pull}

for p in bcast gather; do
    P=$([ $p = bcast ] && echo "Broadcast 1->4" || echo "Gather 4->1")
    bench_metric $S ${p}_tput "$P: throughput at the master, busy polling" MB/s higher "message size (B)"
    bench_metric $S ${p}_lat "$P: round latency at the master (median), busy polling" usec lower "message size (B)"
    bench_metric $S ${p}_tput_wait "$P: throughput at the master, ranks sleep when idle (--wait)" MB/s higher "message size (B)"
    bench_metric $S ${p}_lat_wait "$P: round latency at the master (median), --wait" usec lower "message size (B)"
    bench_metric $S ${p}_master_cpu "$P: master CPU (user+sys) per message, --wait" usec/msg lower "message size (B)"
done

bench_note $S "UCP tag messages between 5 processes of \`test/bench/ucp/ucp_workloads\` (started by \`contrib/bench/ucp-launch\`), each on its own rxe device (\`UCX_NET_DEVICES\`: rank K on device K of ${HIPOWER_RIG_DEVICES:-the rig}); rank 0 is the master, ranks 1-4 the workers. UCX_TLS per column as in the UCP section (rc_verbs wired up over \`ud_verbs\`, hipower alone). Every message is checked byte for byte."
bench_note $S ""
bench_note $S "- **Throughput**: broadcast: the master keeps 16 sends in flight to every worker; gather: every worker keeps 16 sends to the master in flight and the master 16 receives per worker. Each worker handles $budget bytes / size messages (at least 16, at most $max_msgs); MB/s = 10^6 bytes/s of all messages handled at the master, from a barrier until the last worker has everything (broadcast: until each worker's 8-byte \"done\")."
bench_note $S "- **Round latency**: broadcast: the master sends one message to every worker and waits for each 8-byte ack; gather: the master sends an 8-byte go to every worker and waits for each worker's message. Median of $lat_rounds rounds (after 1 untimed one)."
bench_note $S "- **Master CPU per message** (the paper's Figure 6 b/e): getrusage user+sys of the master process over the throughput phase / messages it handled, in \`--wait\` mode, where every rank arms its worker and sleeps in poll() on the worker's event fd when it has nothing to do (with busy polling CPU time is just wall time). It includes filling (broadcast) or checking (gather) each message's pattern, the same for every transport: the program measures that cost and prints it as \`pattern_cpu_us_per_msg\` in the raw output."
bench_note $S "- **hipower-pull has no wakeup support**, so the \`--wait\` tables have rc_verbs and hipower only; rc_verbs and hipower runs request UCP_FEATURE_WAKEUP for both modes (it only matters when a rank arms its worker)."
bench_note $S "- Caveats: on the rig, 5 busy-polling processes share the guest's $(nproc) vCPUs with rxe's kernel work, which makes busy-polling rates low and spiky; \`--wait\` runs are often faster. In \`--wait\` mode a rank progresses its worker once more after ucp_worker_arm() returned OK and sleeps only if that found nothing (UCX 1.13's verbs CQ arm does not look at the CQ again, so a completion that landed just before the arm raises no event; \`arm_races\` in raw/ counts how often this mattered); a rank whose 1-s poll on the event fd still timed out although its worker had work counts a lost wakeup (\`lost_wakeups\` in raw/), and each one adds up to 1 s to a round or a throughput phase. Sizes, patterns and modes of one transport run in one launch (process start-up and wireup take ~20 s in the guest); transports are interleaved in each repetition."

sizes_csv=${sizes// /,}
for rep in $(seq "$BENCH_REPS"); do
    for col in $columns; do
        modes=busy,wait
        [ "$col" = hipower-pull ] && modes=busy
        bench_log "incast rep $rep/$BENCH_REPS: $col, sizes $sizes, modes $modes"
        wl_launch "incast-$col-rep$rep" "$col" "$RANKS" incast --size "$sizes_csv" \
            --budget "$budget" --msgs "$max_msgs" --window 16 --modes "$modes" --lat-rounds "$lat_rounds" \
            --warmup 1 --timeout 400
        for size in $sizes; do
            for p in bcast gather; do
                wl_find "pattern=incast-$p" "size=$size" wait=0
                wl_record $S ${p}_tput "$size" "$col" "$rep" mb_s
                wl_record $S ${p}_lat "$size" "$col" "$rep" lat_us_median
                [ "$col" = hipower-pull ] && continue
                wl_find "pattern=incast-$p" "size=$size" wait=1
                wl_record $S ${p}_tput_wait "$size" "$col" "$rep" mb_s
                wl_record $S ${p}_lat_wait "$size" "$col" "$rep" lat_us_median
                wl_record $S ${p}_master_cpu "$size" "$col" "$rep" master_cpu_us_per_msg
            done
        done
    done
done
exit 0
