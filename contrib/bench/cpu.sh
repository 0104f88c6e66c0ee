#!/bin/bash
# User-space instructions per message on the sender and on the receiver,
# counted with callgrind by test/bench/uct/uct_msgcost (see its header):
# one process, interface A on the first device sends bursts, interface B on
# the second receives; only the send, flush-completion and receive steps
# are collected, and idle progress calls are taken out at their measured
# cost, so the figure is the work per message, not the waiting.
. "$(dirname "$0")/lib.sh"
S=cpu

MSGCOST=${HIPOWER_BUILD:-.}/test/bench/uct/uct_msgcost
command -v valgrind > /dev/null || { bench_log "cpu: valgrind is not installed"; exit 1; }
[ -x "$MSGCOST" ] || { bench_log "cpu: $MSGCOST is not built (make bench-programs)"; exit 1; }
if [ "$BENCH_QUICK" = 1 ]; then sizes="8" rounds=4
else sizes="8 1024" rounds=20; fi
burst=32
columns="rc_verbs hipower hipower-push hipower-pull"

bench_metric $S rx_instr "receiver: user-space instructions per message (callgrind)" instr lower "message size (B)" noplot
bench_metric $S tx_instr "sender: user-space instructions per message (callgrind)" instr lower "message size (B)" noplot
bench_note $S "**Instructions per message** (rx_instr, tx_instr) come from \`test/bench/uct/uct_msgcost\` under \`valgrind --tool=callgrind --collect-atstart=no\`: one process with interface A on ${BENCH_DEVICES[0]:-?} sending and interface B on ${BENCH_DEVICES[1]:-?} receiving, $rounds rounds of $burst messages; A sends the burst and flushes, a 20 ms pause lets the network deliver (not counted), then A completes the flush and B drains. Only those steps are collected; progress calls that found nothing are subtracted at the measured cost of an idle progress call of that side. So the figure is the user-space work of sending or receiving one message - UCT, the transport and the verbs provider (rxe's queues live in user memory) - without waiting, start-up or kernel time. 8 B goes as am_short, 1 KB as am_bcopy. The same binary and input give the same count whatever the load, which makes this the repeatable CPU figure on this rig."

# Per-message instructions from one run's callgrind dumps and its summary
# lines: "SIZE TX RX" lines
msgcost_parse() {
    local cg=$1 txt=$2
    for f in "$cg".*; do
        awk '/^desc: Trigger: Client Request: / { label = $NF }
             /^(totals|summary):/ { if (label != "") print label, $2; exit }' "$f"
    done | awk -v txt="$txt" '
        { ir[$1] += $2 }
        END {
            while ((getline line < txt) > 0) {
                if (line !~ /^msgcost /) continue
                n = split(line, kv, /[ =]/)
                for (i = 2; i < n; i += 2) v[kv[i]] = kv[i + 1]
                s = v["size"]; m = v["msgs"]
                tx_idle = ir["txidle"] / v["idle_calls"]
                rx_idle = ir["rxidle"] / v["idle_calls"]
                if (!(("tx:" s) in ir) || !(("rx:" s) in ir) || m == 0) continue
                printf "%s %.0f %.0f\n", s, (ir["tx:" s] - v["tx_idle"] * tx_idle) / m,
                       (ir["rx:" s] - v["rx_idle"] * rx_idle) / m
            }
        }'
}

for rep in $(seq "$BENCH_COUNT_REPS"); do
    for col in $columns; do
        bench_log "cpu rep $rep/$BENCH_COUNT_REPS: $col instructions per message"
        base=$BENCH_OUT/raw/msgcost.$col.$rep
        # shellcheck disable=SC2046
        if env $(bench_notify_env "$col") hipower-run valgrind -q --tool=callgrind \
               --collect-atstart=no --callgrind-out-file="$base.cg" \
               "$MSGCOST" -t "$(bench_uct_tl "$col")" -a "${BENCH_DEVICES[0]}" \
               -b "${BENCH_DEVICES[1]:-${BENCH_DEVICES[0]}}" -s "$(echo $sizes | tr ' ' ,)" \
               -B "$burst" -R "$rounds" > "$base.txt" 2> "$base.err"; then
            msgcost_parse "$base.cg" "$base.txt" > "$base.result"
        else
            : > "$base.result"
        fi
        for size in $sizes; do
            read -r _ tx rx <<< "$(awk -v s="$size" '$1 == s' "$base.result")"
            bench_sample $S tx_instr "$size" "$col" "$rep" "${tx:-fail}"
            bench_sample $S rx_instr "$size" "$col" "$rep" "${rx:-fail}"
        done
        [ -s "$base.result" ] && rm -f "$base.cg"* "$base.err"
    done
done
exit 0
