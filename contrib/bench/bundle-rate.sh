#!/bin/bash
# bundle-rate.sh: when bundling engages, and what it gives (issue 26).
# Run inside the rig:  test/rig/hipower-rig -t 2400 contrib/bench/bundle-rate.sh
#
# ucx_perftest am_bw (20,000 messages; 8 and 64 B am_short, 1 KB am_bcopy)
# between the rig's first two devices, REPS interleaved repetitions (default
# 5) of: the device (perftest ib_write_bw), rc_verbs, and hipower (self mode)
# with bundling on and off (UCX_HIPOWER_BUNDLE), at the default 64 receive
# slots per peer and at 8 (UCX_HIPOWER_SLOTS=8: what each of many peers gets
# from a shared pool, UCX_HIPOWER_MIN_SLOTS). Per run: the message rate, the
# wire packets per message (sent_pkts of both devices, ACKs and READs
# included) and hipower's counters (bundles, messages bundled, sends that
# found no slot, RDMA writes). Writes the samples to OUT (default
# bench-results/bundle-rate.tsv) and prints medians and ratios to rc_verbs.
set -u
cd "$(dirname "$0")/../.."
export PATH=$PWD/contrib:$PWD/src/ucp_glue:$PATH
export HIPOWER_PLUGIN=${HIPOWER_PLUGIN:-$PWD/.libs/libuct_hipower.so}
read -r -a devs <<< "${HIPOWER_RIG_DEVICES:-rxe0 rxe1}"
reps=${REPS:-5} n=20000
out=${OUT:-$PWD/bench-results/bundle-rate.tsv}
mkdir -p "$(dirname "$out")"; : > "$out"
keep=$(mktemp -d "$PWD/.bundle-rate.XXXXXX")
trap 'rm -rf "$keep"' EXIT
pkts() {
    echo $(( $(cat /sys/class/infiniband/${devs[0]}/ports/1/hw_counters/sent_pkts) +
             $(cat /sys/class/infiniband/${devs[1]}/ports/1/hw_counters/sent_pkts) ))
}
for rep in $(seq "$reps"); do
    for size in 8 64 1024; do
        layout=$([ "$size" -le 64 ] && echo short || echo bcopy)
        r=$(perftest-raw ib_write_bw "$size" "$n" 2>/dev/null | tail -1)
        printf '%s\t%s\tdevice\t%s\t-\t-\n' "$rep" "$size" \
            "$(echo "$r" | awk '{ printf "%.0f", $5 * 1e6 }')" >> "$out"
        for col in rc_verbs hipower hipower-nobundle hipower-8slots hipower-8slots-nobundle; do
            tl=hipower env=
            case $col in
                rc_verbs)                tl=rc_verbs ;;
                hipower)                 env="UCX_HIPOWER_BUNDLE=y" ;;
                hipower-nobundle)        env="UCX_HIPOWER_BUNDLE=n" ;;
                hipower-8slots)          env="UCX_HIPOWER_BUNDLE=y UCX_HIPOWER_SLOTS=8" ;;
                hipower-8slots-nobundle) env="UCX_HIPOWER_BUNDLE=n UCX_HIPOWER_SLOTS=8" ;;
            esac
            rm -f "$keep"/*
            p0=$(pkts)
            # shellcheck disable=SC2086
            f=$(env $env UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_STATS=y PERFTEST_PAIR_KEEP="$keep" \
                hipower-run perftest-pair -q "$tl" am_bw "$size" "$n" -D "$layout" 2>/dev/null | tail -1)
            p1=$(pkts)
            counters=$(grep -h '^hipower-stats' "$keep"/* 2>/dev/null | sort -u | awk '
                { for (i = 2; i <= NF; ++i) { split($i, kv, "="); s[kv[1]] += kv[2] } }
                END { printf "bundles=%d bundled=%d pool_empty=%d tx_queue_full=%d rdma_writes=%d",
                      s["tx_bundles"], s["tx_bundled"], s["pool_empty"], s["tx_queue_full"], s["rdma_writes"] }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$size" "$col" \
                "$(echo "$f" | awk '{ print $9 }')" \
                "$(awk -v a="$p0" -v b="$p1" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')" \
                "$counters" >> "$out"
            echo "bundle-rate rep $rep/$reps: $size B $col" >&2
        done
    done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
rate, pk, ctr = collections.defaultdict(list), collections.defaultdict(list), {}
for line in open(sys.argv[1]):
    rep, size, col, r, p, c = line.rstrip("\n").split("\t")
    key = (int(size), col)
    if r:
        rate[key].append(float(r))
    if p != "-":
        pk[key].append(float(p))
    ctr[key] = c
cols = ["device", "rc_verbs", "hipower", "hipower-nobundle", "hipower-8slots",
        "hipower-8slots-nobundle"]
print("| size | column | msg/s (median, min..max) | / rc_verbs | / device | packets/msg | / rc_verbs | counters (last rep) |")
print("|---:|---|---:|---:|---:|---:|---:|---|")
for size in (8, 64, 1024):
    rc, dev = statistics.median(rate[(size, "rc_verbs")]), statistics.median(rate[(size, "device")])
    rcp = statistics.median(pk[(size, "rc_verbs")])
    for col in cols:
        v = rate.get((size, col))
        if not v:
            continue
        m = statistics.median(v)
        p = statistics.median(pk[(size, col)]) if pk.get((size, col)) else None
        print("| %d | %s | %.0f (%.0f..%.0f) | %.2f | %.2f | %s | %s | %s |" % (
            size, col, m, min(v), max(v), m / rc, m / dev,
            "-" if p is None else "%.3f" % p, "-" if p is None else "%.2f" % (p / rcp),
            ctr[(size, col)] if col.startswith("hipower") else "-"))
PY
