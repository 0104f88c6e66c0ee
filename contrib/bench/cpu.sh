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
# Under load (-L): bursts of 256, four times the 64 slots a receiver gives
# a peer by default, to a receiver that catches up only when the sender has
# to wait: the load at which hipower bundles (issue 26)
load_burst=256 load_rounds=10
load_columns="rc_verbs hipower hipower-nobundle hipower-window"
[ "$BENCH_QUICK" = 1 ] && load_rounds=2

bench_metric $S rx_instr "receiver: user-space instructions per message (callgrind)" instr lower "message size (B)" noplot
bench_metric $S tx_instr "sender: user-space instructions per message (callgrind)" instr lower "message size (B)" noplot
bench_metric $S rx_instr_load "receiver under load: user-space instructions per message (callgrind, bursts of $load_burst)" instr lower "message size (B)" noplot
bench_metric $S tx_instr_load "sender under load: user-space instructions per message (callgrind, bursts of $load_burst)" instr lower "message size (B)" noplot
bench_note $S "**Instructions per message** (rx_instr, tx_instr) come from \`test/bench/uct/uct_msgcost\` under \`valgrind --tool=callgrind --collect-atstart=no\`: one process with interface A on ${BENCH_DEVICES[0]:-?} sending and interface B on ${BENCH_DEVICES[1]:-?} receiving, $rounds rounds of $burst messages; A sends the burst and flushes, a 20 ms pause lets the network deliver (not counted), then A completes the flush and B drains. Only those steps are collected; progress calls that found nothing are subtracted at the measured cost of an idle progress call of that side. So the figure is the user-space work of sending or receiving one message - UCT, the transport and the verbs provider (rxe's queues live in user memory) - without waiting, start-up or kernel time. 8 B goes as am_short, 1 KB as am_bcopy. The same binary and input give the same count whatever the load, which makes this the repeatable CPU figure on this rig."

bench_note $S "**Under load** (rx_instr_load, tx_instr_load): the same program with \`-L\`, $load_rounds rounds of $load_burst messages, four times the 64 slots a hipower receiver gives a peer by default. B does not progress while A can still send: when a send (or the flush) is refused, A progresses once, then B, and B's call counts as B's. So the sender meets a receiver that is behind, which is where hipower's bundles form (\`hipower\`: the messages after the first 64 go into bundles, one frame each; \`hipower-nobundle\`: UCX_HIPOWER_BUNDLE=n, every message is a frame and the sender waits for slots; \`hipower-window\`: UCX_HIPOWER_BUNDLE_WINDOW=$bench_window, messages bundle whenever $bench_window frame(s) are in flight). rc_verbs takes the whole burst (its receive queue holds it)."

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

# msgcost_run COLUMN REP SUFFIX METRIC_SUFFIX ARGS...: one callgrind run of
# uct_msgcost, its per-message figures recorded as tx_instr/rx_instr plus
# METRIC_SUFFIX
msgcost_run() {
    local col=$1 rep=$2 sfx=$3 msfx=$4 base size tx rx
    shift 4
    bench_log "cpu rep $rep/$BENCH_COUNT_REPS: $col instructions per message${sfx:+ ($sfx)}"
    base=$BENCH_OUT/raw/msgcost$sfx.$col.$rep
    # shellcheck disable=SC2046
    if env $(bench_notify_env "$col") hipower-run valgrind -q --tool=callgrind \
           --collect-atstart=no --callgrind-out-file="$base.cg" \
           "$MSGCOST" -t "$(bench_uct_tl "$col")" -a "${BENCH_DEVICES[0]}" \
           -b "${BENCH_DEVICES[1]:-${BENCH_DEVICES[0]}}" -s "$(echo $sizes | tr ' ' ,)" \
           "$@" > "$base.txt" 2> "$base.err"; then
        msgcost_parse "$base.cg" "$base.txt" > "$base.result"
    else
        : > "$base.result"
    fi
    for size in $sizes; do
        read -r _ tx rx <<< "$(awk -v s="$size" '$1 == s' "$base.result")"
        bench_sample $S "tx_instr$msfx" "$size" "$col" "$rep" "${tx:-fail}"
        bench_sample $S "rx_instr$msfx" "$size" "$col" "$rep" "${rx:-fail}"
    done
    [ -s "$base.result" ] && rm -f "$base.cg"* "$base.err"
}

for rep in $(seq "$BENCH_COUNT_REPS"); do
    for col in $columns; do
        msgcost_run "$col" "$rep" "" "" -B "$burst" -R "$rounds"
    done
    for col in $load_columns; do
        msgcost_run "$col" "$rep" ".load" "_load" -B "$load_burst" \
            -R "$load_rounds" -L
    done
done
exit 0
