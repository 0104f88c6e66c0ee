# Shared helpers of the benchmark sections (sourced by contrib/bench/*.sh).
#
# A section is a script contrib/bench/<section>.sh run inside the rig by
# contrib/bench/run-sections. It measures, and records every single
# measurement with bench_sample; contrib/bench/report turns the samples into
# the Markdown report (median, spread, ratio to rc_verbs) and the plots.
#
# Environment given to a section:
#   HIPOWER_BENCH_OUT    output directory (samples.tsv, metrics.tsv, notes/, raw/)
#   HIPOWER_BENCH_REPS   interleaved repetitions (default 3)
#   HIPOWER_BENCH_QUICK  1: a few small points only (smoke run of the suite)
#   HIPOWER_BUILD, HIPOWER_SRC, HIPOWER_RIG_DEVICES, PATH with hipower-run
set -u -o pipefail

BENCH_OUT=${HIPOWER_BENCH_OUT:?HIPOWER_BENCH_OUT is not set: run through contrib/hipower-bench}
BENCH_REPS=${HIPOWER_BENCH_REPS:-3}
BENCH_QUICK=${HIPOWER_BENCH_QUICK:-0}
# Counted figures (sections wire and cpu) are the same in every repetition:
# two show that, more only cost time
BENCH_COUNT_REPS=${HIPOWER_BENCH_COUNT_REPS:-2}
[ "$BENCH_COUNT_REPS" -gt "$BENCH_REPS" ] && BENCH_COUNT_REPS=$BENCH_REPS
mkdir -p "$BENCH_OUT/notes" "$BENCH_OUT/raw"
read -r -a BENCH_DEVICES <<< "${HIPOWER_RIG_DEVICES:-}"

# Table columns are transport names: rc_verbs, hipower (UCX_HIPOWER_NOTIFY=
# self, the default settings), hipower-nobundle (self with
# UCX_HIPOWER_BUNDLE=n: what bundling changes), hipower-nowindow (self with
# UCX_HIPOWER_BUNDLE_WINDOW=0, the default since d459a50), hipower-window
# (the window, flushed on completion by UCX's async thread), hipower-noevent
# (the window without that flush), hipower-push (the strict mode), hipower-pull (the
# paper's), ud_verbs, or "device" for the raw verbs ceiling (perftest, no
# UCX); the report orders them and takes every ratio to rc_verbs.

# bench_metric SECTION METRIC TITLE UNIT lower|higher XLABEL [plot|noplot]
# Declares how the report shows a metric (one table, and a plot with a log
# x axis when "plot" and there are at least 3 sizes).
bench_metric() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
        "${7:-plot}" >> "$BENCH_OUT/metrics.tsv"
}

# bench_sample SECTION METRIC X TRANSPORT REP VALUE
# One measurement; VALUE "fail" when the transport's run failed, "harness"
# when the benchmark's own machinery did (bench_fail_word tells which; the
# report says so and lists both).
bench_sample() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
        >> "$BENCH_OUT/samples.tsv"
}

# bench_note SECTION TEXT: Markdown printed under the section's heading.
bench_note() {
    printf '%s\n' "$2" >> "$BENCH_OUT/notes/$1.md"
}

# bench_log TEXT: progress on stderr, with the suite's elapsed time.
BENCH_T0=${HIPOWER_BENCH_T0:-$(date +%s)}
bench_log() {
    local t=$(( $(date +%s) - BENCH_T0 ))
    printf '[bench %2d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&2
}

# The hipower-window column's UCX_HIPOWER_BUNDLE_WINDOW (HIPOWER_BENCH_WINDOW):
# 1, which beat 2 in every am_bw size the rig measured (8 B to 4 KB)
bench_window=${HIPOWER_BENCH_WINDOW:-1}

# bench_ucp_env TRANSPORT: the environment (NAME=VALUE words) that makes a
# UCP program use TRANSPORT between verbs devices; for use with env(1).
# Every UCP run names its device with UCX_NET_DEVICES itself.
bench_ucp_env() {
    case "$1" in
        rc_verbs)     echo "UCX_TLS=rc_verbs,ud_verbs:aux,self" ;;
        hipower|hipower-nobundle|hipower-nowindow|hipower-noevent|hipower-window|hipower-window[0-9]*|hipower-push|hipower-pull)
                      echo "UCX_TLS=hipower,self $(bench_notify_env "$1")" ;;
        # hipower wired up by UCP through UD, without its own handshake
        hipower-ud)   echo "UCX_TLS=hipower,ud_verbs:aux,self UCX_HIPOWER_CONNECT_TO_IFACE=n $(bench_notify_env "$1")" ;;
        ud_verbs)     echo "UCX_TLS=ud_verbs,self" ;;
        tcp)          echo "UCX_TLS=tcp,self" ;;
        *) echo "bench_ucp_env: unknown transport '$1'" >&2; return 1 ;;
    esac
}

# bench_sizes FROM TO: powers of 4 from FROM to TO, plus TO.
bench_sizes() {
    local s=$1
    while [ "$s" -lt "$2" ]; do echo "$s"; s=$((s * 4)); done
    echo "$2"
}

# bench_iters SIZE MAX_ITERS BYTES_BUDGET: iterations so that one run moves
# about BYTES_BUDGET bytes (rxe moves ~10-20 MB/s), at least 8.
bench_iters() {
    local n=$(( $3 / $1 ))
    [ "$n" -gt "$2" ] && n=$2
    [ "$n" -lt 8 ] && n=8
    echo "$n"
}

# UCT transport name and environment of a table column
bench_uct_tl() {
    case "$1" in hipower|hipower-*) echo hipower ;; *) echo "$1" ;; esac
}
bench_notify_env() {
    case "$1" in
        hipower-push) echo UCX_HIPOWER_NOTIFY=push ;;
        hipower-pull) echo UCX_HIPOWER_NOTIFY=pull ;;
        hipower-nobundle) echo UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_BUNDLE=n ;;
        # Bundling only what cannot be posted: the default before issue 51
        hipower-nowindow) echo UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_BUNDLE_WINDOW=0 ;;
        # The window without the async thread's flush on completion (what
        # the events cost or give; the window is off by default, so named)
        hipower-noevent) echo UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_BUNDLE_WINDOW=$bench_window UCX_HIPOWER_BUNDLE_EVENT=n ;;
        # The window of docs/protocol.md 2.1 named (default: 0, off)
        hipower-window) echo UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_BUNDLE_WINDOW=$bench_window ;;
        # A window size of its own: hipower-window4 (fewer frames, so
        # fewer completion events, each flushing a larger bundle)
        hipower-window[0-9]*) echo UCX_HIPOWER_NOTIFY=self UCX_HIPOWER_BUNDLE_WINDOW=${1#hipower-window} ;;
        *)            echo UCX_HIPOWER_NOTIFY=self ;;
    esac
}

# bench_uct_max TL OP: the largest size ucx_info reports for OP (am_bcopy,
# am_short, put_zcopy...) of UCT transport TL on the first device, or 0.
bench_uct_max() {
    hipower-run ucx_info -d -t "$1" 2>/dev/null |
        sed -n "s/.* $2: <= \([0-9.]*\)\([KMG]*\).*/\1 \2/p" | head -1 |
        awk '{ m = ($2 == "K") ? 1024 : ($2 == "M") ? 1048576 : ($2 == "G") ? 1073741824 : 1
               printf "%d\n", $1 * m }' | grep . || echo 0
}

# bench_pair COLUMN TEST SIZE ITERS [ucx_perftest options]: one UCT or UCP
# ucx_perftest run of table column COLUMN (rc_verbs, hipower, ...) between
# the first two devices; prints its Final: line, or fails (output kept in
# raw/). UCP tests get the column's UCX_TLS.
bench_pair() {
    local col=$1 test=$2 size=$3 iters=$4 log
    shift 4
    log=$BENCH_OUT/raw/pair-$col-$test-$size-$(date +%s%N).log
    # shellcheck disable=SC2046
    env $(bench_notify_env "$col") $(case "$test" in tag_*|ucp_*|stream_*) bench_ucp_env "$col" ;; esac) \
        hipower-run perftest-pair -q "$(bench_uct_tl "$col")" "$test" "$size" "$iters" "$@" 2> "$log"
    bench_done $? "$log"
}

# bench_done RC LOG: keeps LOG only for a failed run and remembers RC for
# bench_fail_word (a file: the runs are called in command substitutions)
bench_done() {
    echo "$1" > "$BENCH_OUT/.last-rc"
    [ "$1" = 0 ] && rm -f "$2"
    return "$1"
}

# bench_fail_word: the sample value of the last failed bench_pair/bench_raw:
# "harness" for exit 3 (contrib/harness.sh: no free port, server never
# listened), "fail" for everything else
bench_fail_word() {
    [ "$(cat "$BENCH_OUT/.last-rc" 2>/dev/null)" = 3 ] && echo harness || echo fail
}

# bench_raw TEST SIZE ITERS: perftest between the first two devices.
bench_raw() {
    local log=$BENCH_OUT/raw/raw-$1-$2-$(date +%s%N).log
    perftest-raw "$@" 2> "$log"
    bench_done $? "$log"
}

# bench_field LINE N: the Nth (0-based) word of LINE
bench_field() {
    local -a f
    read -r -a f <<< "$1"
    echo "${f[$2]:-}"
}
