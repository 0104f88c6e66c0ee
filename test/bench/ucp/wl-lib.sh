# shellcheck shell=bash
# Helpers of the UCP workload sections (contrib/bench/incast.sh, resnet.sh,
# shuffle.sh), sourced after contrib/bench/lib.sh: run ucp_workloads through
# contrib/bench/ucp-launch with a column's UCX_TLS, keep its output under
# $BENCH_OUT/raw/, pick values out of its "bench-result" lines.

WL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WL_PROG=${HIPOWER_BUILD:-$WL_ROOT}/test/bench/ucp/ucp_workloads
WL_LAUNCH=$WL_ROOT/contrib/bench/ucp-launch
WL_OUT=

# wl_launch NAME COLUMN NRANKS ARG...: one run of ucp_workloads on NRANKS
# ranks over COLUMN (rc_verbs, hipower, hipower-pull). Rank 0's stdout
# goes to $BENCH_OUT/raw/NAME.out (also $WL_OUT), everything else to
# NAME.log; returns the launcher's exit status (and logs a failure).
wl_launch() {
    local name=$1 col=$2 n=$3 rc t0=$SECONDS
    shift 3
    WL_OUT=$BENCH_OUT/raw/$name.out
    if [ ! -x "$WL_PROG" ]; then
        echo "$WL_PROG is not built (make bench-programs)" > "$BENCH_OUT/raw/$name.log"
        bench_log "$name: $WL_PROG is not built (make bench-programs)"
        : > "$WL_OUT"
        return 1
    fi
    # shellcheck disable=SC2046
    env $(bench_ucp_env "$col") HIPOWER_LAUNCH_TIMEOUT="${WL_LAUNCH_TIMEOUT:-600}" \
        "$WL_LAUNCH" "$n" "$WL_PROG" "$@" > "$WL_OUT" 2> "$BENCH_OUT/raw/$name.log"
    rc=$?
    if [ "$rc" != 0 ]; then
        bench_log "$name: FAILED (exit $rc after $((SECONDS - t0)) s): $(grep -m1 -E 'FAIL|ERROR|ucp-launch' "$BENCH_OUT/raw/$name.log")"
    else
        bench_log "$name: $((SECONDS - t0)) s"
    fi
    return "$rc"
}

# wl_line KEY=VALUE...: the first bench-result line of the last run that
# has all these KEY=VALUE words (nothing if none)
wl_line() {
    local line w ok
    while IFS= read -r line; do
        ok=1
        for w in "$@"; do
            [[ " $line " == *" $w "* ]] || { ok=0; break; }
        done
        [ "$ok" = 1 ] && { echo "$line"; return 0; }
    done <<< "$(grep '^bench-result ' "$WL_OUT" 2> /dev/null)"   # no /dev/fd in the guest
    return 1
}

# wl_key LINE KEY: the value of KEY=... in LINE ("fail" if absent)
wl_key() {
    local w
    for w in $1; do
        [ "${w%%=*}" = "$2" ] && { echo "${w#*=}"; return 0; }
    done
    echo fail
}

# wl_record SECTION METRIC X COLUMN REP LINE KEY: bench_sample of KEY's
# value in LINE, "fail" when the line (or the key) is missing
wl_record() {
    local v=fail
    [ -n "$6" ] && v=$(wl_key "$6" "$7")
    bench_sample "$1" "$2" "$3" "$4" "$5" "$v"
}
