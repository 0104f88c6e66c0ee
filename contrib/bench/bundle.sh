#!/bin/bash
# Bundling section (issue 26): when hipower's bundles form, and what they
# give. ucx_perftest am_bw (8 and 64 B am_short, 1 KB am_bcopy) between the
# first two devices: the device (perftest ib_write_bw), rc_verbs, and
# hipower (self mode) with bundling on and off (UCX_HIPOWER_BUNDLE), at the
# default 64 receive slots per peer and at 8 (UCX_HIPOWER_SLOTS=8: what each
# of many peers gets from a shared pool, UCX_HIPOWER_MIN_SLOTS). Per run:
# the message rate, the wire packets per message and, from hipower's own
# counters (UCX_HIPOWER_STATS=y), the work requests, doorbells and receive
# memory per message and the share of messages that went in bundles.
. "$(dirname "$0")/lib.sh"
S=bundle

if [ "$BENCH_QUICK" = 1 ]; then sizes="8" n=5000
else sizes="8 64 1024" n=20000; fi
columns="rc_verbs hipower hipower-nobundle hipower-window hipower-window-nofill hipower-8slots hipower-8slots-nobundle"
dev_s=${BENCH_DEVICES[0]:-rxe0} dev_c=${BENCH_DEVICES[1]:-rxe1}
# rc_verbs posts one receive buffer of this size per message
rc_seg=$(hipower-run ucx_info -c 2>/dev/null | sed -n 's/^UCX_RC_VERBS_SEG_SIZE=//p' | head -1)
case $rc_seg in
    *k|*K) rc_seg=$(( ${rc_seg%?} * 1024 )) ;;
    ''|*[!0-9]*) rc_seg=$(hipower-run ucx_info -c 2>/dev/null | sed -n 's/^UCX_IB_SEG_SIZE=//p' | head -1)
                 case $rc_seg in *k|*K) rc_seg=$(( ${rc_seg%?} * 1024 )) ;; esac ;;
esac

bench_metric $S am_rate "AM message rate (am_bw, $n messages)" msg/s higher "message size (B)" noplot
bench_metric $S pkts "wire packets per message (am_bw; both devices, ACKs and reads included)" pkts lower "message size (B)" noplot
bench_metric $S rx_mem "receive memory a message occupies (am_bw; slot bytes x slots used / messages)" B lower "message size (B)" noplot
bench_metric $S wrs "sender: work requests per message (am_bw; hipower's counters)" WRs lower "message size (B)" noplot
bench_metric $S doorbells "sender: doorbells (ibv_post_send calls) per message (am_bw; hipower's counters)" calls lower "message size (B)" noplot
bench_metric $S bundled "messages that went in bundles (am_bw)" % higher "message size (B)" noplot

bench_note $S "ucx_perftest am_bw, $n messages, server (receiver) $dev_s, client (sender) $dev_c; 8 and 64 B as am_short, 1 KB as am_bcopy. Columns: **device** = perftest ib_write_bw on the same pair; **hipower** / **hipower-nobundle** = self mode with UCX_HIPOWER_BUNDLE=y / n at the default 64 slots per peer; **hipower-window** = bundling with UCX_HIPOWER_BUNDLE_WINDOW=$bench_window (at most $bench_window frame(s) in flight per endpoint, the next messages wait in the bundle: docs/protocol.md 2.1; off by default); **hipower-window** also fills slots (UCX_HIPOWER_BUNDLE_FILL=y, off by default); **hipower-window-nofill** = the same with UCX_HIPOWER_BUNDLE_FILL=n (every bundle a slot of its own; docs/protocol.md 2.2: with fill, bundles that follow one another go into the same slot until it is full); **hipower-8slots** / **hipower-8slots-nobundle** = the same with UCX_HIPOWER_SLOTS=8, the run each of many peers gets from a shared pool (UCX_HIPOWER_MIN_SLOTS). **Packets** are rxe's \`sent_pkts\` of both devices over the run, divided by the messages (start-up included, a few dozen packets). **Work requests, doorbells, receive memory and the bundled share** are hipower's counters (UCX_HIPOWER_STATS=y, both processes): work requests = (rdma_writes + bitmap_reads) / tx_msgs, doorbells = ibv_post_send() calls / tx_msgs, receive memory = slot_bytes x slots received into / messages received, at the receiver (the server; slots = rx_msgs - rx_bundled + rx_bundles - rx_fill_batches: a bundle occupies one slot for all its messages until released, and with filled slots the bundles that followed it in the same slot take none of their own; the sender receives only ucx_perftest's flow-control messages, one per 64 sent, each alone in a slot, which are not counted). For rc_verbs the receive memory is its receive buffer per message (UCX_RC_VERBS_SEG_SIZE = ${rc_seg:-?} B), which every message consumes whatever its size. A bundle forms only when a message cannot be posted (no free slot of the peer, no send queue room): at 64 slots on Soft-RoCE the sender is the bottleneck (every ibv_post_send() is a system call in which rxe sends the packet) and none forms; at 8 slots the sender runs out of slots and bundles do."

pkts() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }
layout() { [ "$1" -le 64 ] && echo short || echo bcopy; }
col_env() {
    case $1 in
        hipower)                 echo UCX_HIPOWER_BUNDLE=y ;;
        hipower-nobundle)        echo UCX_HIPOWER_BUNDLE=n ;;
        hipower-window)          echo UCX_HIPOWER_BUNDLE=y UCX_HIPOWER_BUNDLE_WINDOW=$bench_window UCX_HIPOWER_BUNDLE_FILL=y ;;
        hipower-window-nofill)   echo UCX_HIPOWER_BUNDLE=y UCX_HIPOWER_BUNDLE_WINDOW=$bench_window UCX_HIPOWER_BUNDLE_FILL=n ;;
        hipower-8slots)          echo UCX_HIPOWER_BUNDLE=y UCX_HIPOWER_SLOTS=8 ;;
        hipower-8slots-nobundle) echo UCX_HIPOWER_BUNDLE=n UCX_HIPOWER_SLOTS=8 ;;
    esac
}

keep=$BENCH_OUT/raw/bundle.keep.$$
for rep in $(seq "$BENCH_REPS"); do
    for size in $sizes; do
        bench_log "bundle rep $rep/$BENCH_REPS: am_bw $size B"
        r=$(bench_raw ib_write_bw "$size" "$n") &&
            bench_sample $S am_rate "$size" device "$rep" \
                "$(awk -v m="$(bench_field "$r" 4)" 'BEGIN { printf "%.0f", m * 1e6 }')" ||
            bench_sample $S am_rate "$size" device "$rep" "$(bench_fail_word)"
        for col in $columns; do
            tl=$([ "$col" = rc_verbs ] && echo rc_verbs || echo hipower)
            rm -rf "$keep" && mkdir -p "$keep"
            log=$BENCH_OUT/raw/bundle-$col-$size-$rep.log
            p0=$(( $(pkts "$dev_s") + $(pkts "$dev_c") ))
            # shellcheck disable=SC2046
            f=$(env $(col_env "$col") UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_STATS=y \
                    PERFTEST_PAIR_KEEP="$keep" hipower-run perftest-pair -q "$tl" \
                    am_bw "$size" "$n" -D "$(layout "$size")" 2> "$log")
            rc=$?
            p1=$(( $(pkts "$dev_s") + $(pkts "$dev_c") ))
            bench_done $rc "$log"
            if [ "$rc" != 0 ]; then
                for m in am_rate pkts rx_mem wrs doorbells bundled; do
                    [ "$tl" = rc_verbs ] && [[ " wrs doorbells bundled " = *" $m "* ]] && continue
                    bench_sample $S "$m" "$size" "$col" "$rep" "$(bench_fail_word)"
                done
                continue
            fi
            bench_sample $S am_rate "$size" "$col" "$rep" "$(bench_field "$f" 8)"
            bench_sample $S pkts "$size" "$col" "$rep" \
                "$(awk -v a="$p0" -v b="$p1" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')"
            if [ "$tl" = rc_verbs ]; then
                bench_sample $S rx_mem "$size" "$col" "$rep" "${rc_seg:-fail}"
                continue
            fi
            # Both processes' stats lines, each once; receive memory is the
            # receiver's (the server's device): the sender receives only
            # ucx_perftest's flow-control messages, one per 64 sent, each
            # alone in a slot of its own, which are not the load
            read -r mem wrs bells share <<< "$(grep -h '^hipower-stats' "$keep"/* 2>/dev/null |
                sort -u | awk -v dev="$dev_s" '
                { rx = (index($2, dev ":") == 1)
                  for (i = 3; i <= NF; ++i) { split($i, kv, "="); s[kv[1]] += kv[2]
                      if (rx) { r[kv[1]] += kv[2] }
                      if (kv[1] == "slot_bytes" && kv[2] > slot) slot = kv[2] } }
                END { if (s["tx_msgs"] == 0 || r["rx_msgs"] == 0) { print "fail fail fail fail"; exit }
                      frames = r["rx_msgs"] - r["rx_bundled"] + r["rx_bundles"] - r["rx_fill_batches"]
                      printf "%.1f %.3f %.3f %.1f\n", slot * frames / r["rx_msgs"],
                             (s["rdma_writes"] + s["bitmap_reads"]) / s["tx_msgs"],
                             s["doorbells"] / s["tx_msgs"], 100 * s["tx_bundled"] / s["tx_msgs"] }')"
            bench_sample $S rx_mem "$size" "$col" "$rep" "${mem:-fail}"
            bench_sample $S wrs "$size" "$col" "$rep" "${wrs:-fail}"
            bench_sample $S doorbells "$size" "$col" "$rep" "${bells:-fail}"
            bench_sample $S bundled "$size" "$col" "$rep" "${share:-fail}"
        done
    done
done
rm -rf "$keep"
exit 0
