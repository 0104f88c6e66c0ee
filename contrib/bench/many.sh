#!/bin/bash
# Many peers on one interface: what endpoints cost in pinned memory and in
# progress work, and how evenly an incast shares the receiver, for hipower
# and rc_verbs, with 1, 64, 256 and 4,096 endpoints (what the interface
# serves at default settings; 1 and 64 with BENCH_QUICK). Uses the many-peers case of
# the transport test program (test/uct/check_many.c; the rig test
# t_uct_many_peers.sh runs the same with pass/fail checks): one process,
# interface A on the first device, B on the second, N endpoint pairs.
. "$(dirname "$0")/lib.sh"
S=many

PROG=${HIPOWER_BUILD:-.}/test/uct/check_transport
[ -x "$PROG" ] || { bench_log "many: $PROG is not built (make check_PROGRAMS)"; exit 1; }
command -v valgrind > /dev/null || { bench_log "many: valgrind is not installed"; exit 1; }
if [ "$BENCH_QUICK" = 1 ]; then points="1 64"
else points="1 64 256 4096"; fi
columns="rc_verbs hipower"
msgs=12800 # messages per instruction count: 1 x 12800, or 64 x 200 (an idle
           # endpoint's run grows again from MIN_SLOTS, see t_uct_many_peers)

bench_metric $S pinned "pinned memory per interface (VmPin) with N endpoints" MiB lower "endpoints on the interface"
bench_metric $S empty_instr "user-space instructions per empty progress call, N idle endpoints (callgrind)" instr lower "endpoints on the interface"
bench_metric $S rx_instr "receive progress instructions per delivered message, min(N, 64) endpoints streaming (callgrind)" instr lower "endpoints on the interface"
bench_metric $S incast_min "incast 16->1: the least served sender's part of the delivered messages / its fair share" share higher "endpoints on the interface" noplot
bench_note $S "One process, interface A on ${BENCH_DEVICES[0]:-?} sending and B on ${BENCH_DEVICES[1]:-?} receiving, N endpoint pairs between them at default settings (\`test/uct/check_many.c\`, Check case \`many\`): every endpoint carries one checksummed message, all go idle, then min(N, 64) endpoints spread over the N stream at once, then 16 of them send greedily (an incast). Every byte is checked."
bench_note $S ""
bench_note $S "- **Pinned memory**: the process's \`VmPin\` (the kernel's pinned-memory accounting, what \`RLIMIT_MEMLOCK\` limits) after connecting, before any traffic, halved (two symmetric interfaces). hipower pins the runs of slots its peers hold (at most \`UCX_HIPOWER_MEM_BUDGET\`) and each endpoint's 4 KB control page, registered as three regions and so counted three times; rc_verbs pins its shared receive queue's buffers."
bench_note $S "- **Instructions** (counted, the same on any load): \`valgrind --tool=callgrind --toggle-collect=many_progress_b\`, i.e. B's \`uct_iface_progress()\` calls only, dumped per phase. Empty progress: 10,000 calls after every endpoint went idle (hipower: after \`UCX_HIPOWER_IDLE_TIME\`), divided by 10,000. Per delivered message: the streaming phase ($msgs messages) divided by $msgs; it includes the test's handler, which checksums each message (the same for both transports)."
bench_note $S "- **Incast share**: 16 senders spread over the N endpoints each send in turn until the transport refuses (at most 64 at a time) while B delivers; once B delivered 16,000 messages of the phase, each sender's part of them / 1,000. 1.0 is a fair share; the table shows the least served sender."

# Per-phase instructions of B's progress: "PHASE|IR" lines
count_phase() { # <transport> <peers> <streamers> <messages each> <dir>
    "$(dirname "$0")"/../../test/rig-tests/many-callgrind "$PROG" "$@"
}
phase_ir() { sed -n "s/^$2|//p" <<< "$1" | head -1; }

cgdir=$(mktemp -d)
for rep in $(seq "$BENCH_COUNT_REPS"); do
    for n in $points; do
        streamers=$(( n < 64 ? n : 64 ))
        for col in $columns; do
            bench_log "many rep $rep/$BENCH_COUNT_REPS: $col, $n endpoints, instructions"
            if out=$(count_phase "$col" "$n" "$streamers" $((msgs / streamers)) "$cgdir"); then
                e=$(phase_ir "$out" 'empty progress calls')
                m=$(phase_ir "$out" 'streaming')
                bench_sample $S empty_instr "$n" "$col" "$rep" "$(awk -v v="$e" 'BEGIN { printf "%.0f", v / 10000 }')"
                bench_sample $S rx_instr "$n" "$col" "$rep" "$(awk -v v="$m" -v n=$msgs 'BEGIN { printf "%.0f", v / n }')"
            else
                cp "$cgdir/log" "$BENCH_OUT/raw/many-cg-$col-$n-$rep.log"
                bench_sample $S empty_instr "$n" "$col" "$rep" fail
                bench_sample $S rx_instr "$n" "$col" "$rep" fail
            fi
        done
    done
done
rm -rf "$cgdir"

for rep in $(seq "$BENCH_REPS"); do
    for n in $points; do
        for col in $columns; do
            bench_log "many rep $rep/$BENCH_REPS: $col, $n endpoints, memory and incast"
            log=$BENCH_OUT/raw/many-$col-$n-$rep.log
            # The share is measured here, not judged (the test judges it)
            CK_RUN_CASE=many HIPOWER_TEST_TL=$col HIPOWER_TEST_PEERS=$n \
            HIPOWER_TEST_EMPTY_CALLS=1000 HIPOWER_TEST_INCAST_MIN_PCT=0 \
                hipower-run "$PROG" > "$log" 2>&1
            rc=$?
            pinned=$(sed -n 's/.*pinned memory (VmPin) .*: \([0-9.]*\) MiB$/\1/p' "$log")
            share=$(sed -n 's/.*incast .*min \([0-9.]*\), max.*/\1/p' "$log")
            if [ $rc = 0 ] && [ -n "$pinned" ]; then
                bench_sample $S pinned "$n" "$col" "$rep" "$(awk -v v="$pinned" 'BEGIN { printf "%.1f", v / 2 }')"
                [ -n "$share" ] && bench_sample $S incast_min "$n" "$col" "$rep" "$share"
                rm -f "$log"
            else
                bench_sample $S pinned "$n" "$col" "$rep" fail
                [ "$n" -ge 16 ] && bench_sample $S incast_min "$n" "$col" "$rep" fail
            fi
        done
    done
done
exit 0
