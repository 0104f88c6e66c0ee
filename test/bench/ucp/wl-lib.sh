# shellcheck shell=bash
# Helpers of the UCP workload sections (contrib/bench/incast.sh, resnet.sh,
# shuffle.sh), sourced after contrib/bench/lib.sh: run ucp_workloads through
# contrib/bench/ucp-launch with a column's UCX_TLS, keep its output under
# $BENCH_OUT/raw/, record values of its "bench-result" lines.

WL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WL_PROG=${HIPOWER_BUILD:-$WL_ROOT}/test/bench/ucp/ucp_workloads
WL_LAUNCH=$WL_ROOT/contrib/bench/ucp-launch
WL_OUT=
WL_LINES=()
WL_LINE=

# wl_launch NAME COLUMN NRANKS ARG...: one run of ucp_workloads on NRANKS
# ranks over COLUMN (rc_verbs, hipower, hipower-pull). Rank 0's stdout
# goes to $BENCH_OUT/raw/NAME.out (also $WL_OUT; its lines in WL_LINES),
# everything else to NAME.log; returns the launcher's exit status (and logs
# a failure).
wl_launch() {
    local name=$1 col=$2 n=$3 rc t0=$SECONDS
    shift 3
    WL_OUT=$BENCH_OUT/raw/$name.out
    if [ ! -x "$WL_PROG" ]; then
        echo "$WL_PROG is not built (make bench-programs)" > "$BENCH_OUT/raw/$name.log"
        bench_log "$name: $WL_PROG is not built (make bench-programs)"
        : > "$WL_OUT"
        WL_LINES=()
        return 1
    fi
    # shellcheck disable=SC2046
    env $(bench_ucp_env "$col") HIPOWER_LAUNCH_TIMEOUT="${WL_LAUNCH_TIMEOUT:-600}" \
        "$WL_LAUNCH" "$n" "$WL_PROG" "$@" > "$WL_OUT" 2> "$BENCH_OUT/raw/$name.log"
    rc=$?
    mapfile -t WL_LINES < "$WL_OUT"
    if [ "$rc" != 0 ]; then
        bench_log "$name: FAILED (exit $rc after $((SECONDS - t0)) s): $(grep -m1 -E 'FAIL|ERROR|ucp-launch' "$BENCH_OUT/raw/$name.log")"
    else
        bench_log "$name: $((SECONDS - t0)) s"
    fi
    return "$rc"
}

# wl_find KEY=VALUE...: sets WL_LINE to the first bench-result line of the
# last run that has all these KEY=VALUE words ("" and status 1 if none).
# Pure bash: a fork costs ~50 ms in the guest.
wl_find() {
    local line w ok
    WL_LINE=
    for line in "${WL_LINES[@]}"; do
        [[ $line == "bench-result "* ]] || continue
        ok=1
        for w in "$@"; do
            [[ " $line " == *" $w "* ]] || { ok=0; break; }
        done
        [ "$ok" = 1 ] && { WL_LINE=$line; return 0; }
    done
    return 1
}

# wl_record SECTION METRIC X COLUMN REP KEY: bench_sample of KEY's value in
# WL_LINE (see wl_find), "fail" when the line or the key is missing
wl_record() {
    local v=fail w
    for w in $WL_LINE; do
        [ "${w%%=*}" = "$6" ] && v=${w#*=}
    done
    bench_sample "$1" "$2" "$3" "$4" "$5" "$v"
}
