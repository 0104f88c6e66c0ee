#!/bin/bash
# MPI section of the benchmark suite (run inside the rig by
# contrib/bench/run-sections; see contrib/bench/lib.sh for the contract).
#
# Open MPI over UCX (pml ucx), each rank on its own verbs device
# (test/mpi/mpi-rank-env), the hipower plugin preloaded in every rank of
# every run; the transport is chosen with UCX_TLS (bench_ucp_env). One
# 8-rank job of test/bench/mpi/bench_mpi per transport and repetition
# measures:
#   - MPI ping-pong latency and bandwidth between ranks 0 and 1, 1 B .. 8 MiB;
#   - MPI_Alltoall throughput (the RoCE full-mesh paper's workload) over
#     2, 4 and 8 ranks with 64 KiB per peer, and 2 ranks with 1 MiB;
#   - MPI small-message rate (issue 26): 1, 2 and 4 pairs, each sender a
#     window of 64 MPI_Isend of 8 B per iteration (osu_mbw_mr's pattern);
# every message's data is verified. Optionally (HIPOWER_BENCH_MPI_NETPIPE=1)
# NetPIPE's NPopenmpi too, in 2-rank jobs of its own.
# Each repetition runs every transport in turn. A run that fails or times
# out records "fail" and the section goes on; the measurement that was
# running when a job timed out is left out of that transport's later jobs
# (recorded "fail"), so that a hang costs one timeout, not one per
# repetition.
#
# Knobs: HIPOWER_BENCH_MPI_TIMEOUT (seconds per mpirun, default 240),
# HIPOWER_BENCH_MPI_TRANSPORTS (default: all five columns),
# HIPOWER_BENCH_MPI_PP_BYTES, HIPOWER_BENCH_MPI_A2A_BYTES (bytes per
# measurement), HIPOWER_BENCH_MPI_NETPIPE=1.
set -u -o pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_DIR/lib.sh"

SEC=mpi
SRC=${HIPOWER_SRC:-$(cd "$BENCH_DIR/../.." && pwd)}
BUILD=${HIPOWER_BUILD:-$SRC}
BENCH_BIN=$BUILD/test/bench/mpi/openmpi/bench_mpi
RANK_ENV=$SRC/test/mpi/mpi-rank-env
MPI_TIMEOUT=${HIPOWER_BENCH_MPI_TIMEOUT:-240}
TRANSPORTS=${HIPOWER_BENCH_MPI_TRANSPORTS:-rc_verbs hipower hipower-nobundle hipower-window hipower-pull}
RAW=$BENCH_OUT/raw/mpi
mkdir -p "$RAW"

# What runs, in one 8-rank mpirun per transport and repetition (MPI_Init
# of 8 ranks alone takes 15-65 s in the 2-vCPU guest): ping-pong sizes,
# then alltoall configurations "RANKS:BLOCK".
# Message rate: job sizes (ranks, half of them sending), message size,
# window; about MR_MSGS messages per pair and measurement.
MR_SIZE=8 MR_WINDOW=64
MR_MSGS=${HIPOWER_BENCH_MPI_MR_MSGS:-20000}
if [ "$BENCH_QUICK" = 1 ]; then
    PP_SIZES="1 4096"
    A2A_CONFIGS="2:65536"
    MR_RANKS="2"
else
    MR_RANKS="2 4 8"

    # powers of 4 to 1 MiB, and 8 MiB (4 MiB would cost ~10 s per job)
    PP_SIZES="$(bench_sizes 1 1048576 | paste -sd' ' -) 8388608"
    A2A_CONFIGS="2:65536 2:1048576 4:65536 8:65536"
fi
# Ping-pong round trips per size: about PP_BYTES bytes each way, 2..10.
PP_BYTES=${HIPOWER_BENCH_MPI_PP_BYTES:-2000000}
# Alltoall iterations: about A2A_BYTES bytes between distinct ranks per
# measurement, 3..20 alltoalls.
A2A_BYTES=${HIPOWER_BENCH_MPI_A2A_BYTES:-4000000}
# No repetition starts after the section has run this long (seconds): a
# guard against a machine so loaded (or a transport so slow) that the
# suite would never end; the note says when it cut repetitions.
MPI_BUDGET=${HIPOWER_BENCH_MPI_BUDGET:-1200}
# Optional: NetPIPE (NPopenmpi, 1 B .. NP_MAX) in a 2-rank mpirun of its
# own per transport and repetition.
NP_ENABLE=${HIPOWER_BENCH_MPI_NETPIPE:-0}
NP_MAX=8388608
[ "$BENCH_QUICK" = 1 ] && NP_MAX=4096
NP_REPEATS=${HIPOWER_BENCH_MPI_NP_REPEATS:-2}

if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPI_PRELOAD=$(eval "$(hipower-run --print sh)" && printf '%s' "$LD_PRELOAD") || {
    bench_log "mpi: hipower-run --print sh failed: hipower runs will fail"
    MPI_PRELOAD=
}

# ---- declarations and the method note -------------------------------------

size_label() {
    local b=$1
    if [ $((b % 1048576)) = 0 ]; then echo "$((b / 1048576))m"
    elif [ $((b % 1024)) = 0 ]; then echo "$((b / 1024))k"
    else echo "$b"; fi
}

# Job size: the largest group any configuration uses
JOB_RANKS=2
A2A_BLOCKS=
for cfg in $A2A_CONFIGS; do
    [ "${cfg%%:*}" -gt "$JOB_RANKS" ] && JOB_RANKS=${cfg%%:*}
    case " $A2A_BLOCKS " in *" ${cfg#*:} "*) ;; *) A2A_BLOCKS="$A2A_BLOCKS ${cfg#*:}" ;; esac
done
for n in $MR_RANKS; do
    [ "$n" -gt "$JOB_RANKS" ] && JOB_RANKS=$n
done
bench_metric $SEC msgrate_$MR_SIZE \
    "MPI message rate, $MR_SIZE B, window of $MR_WINDOW MPI_Isend (all pairs together)" \
    "msg/s" higher "pairs (ranks per side)" noplot
for b in $A2A_BLOCKS; do
    bench_metric $SEC "alltoall_$(size_label "$b")" \
        "MPI_Alltoall throughput, $(size_label "$b" | tr km KM)iB per peer (Open MPI over UCX, all ranks together)" \
        "MB/s" higher "ranks" noplot
done
bench_metric $SEC pingpong_lat "MPI ping-pong one-way latency (median, 2 ranks)" \
    "usec" lower "message size (B)" plot
bench_metric $SEC pingpong_lat_min "MPI ping-pong one-way latency, best round trip (2 ranks)" \
    "usec" lower "message size (B)" plot
bench_metric $SEC pingpong_bw "MPI ping-pong bandwidth (size / median one-way time, 2 ranks)" \
    "MB/s" higher "message size (B)" plot
if [ "$NP_ENABLE" = 1 ]; then
    bench_metric $SEC netpipe_lat "NetPIPE NPopenmpi one-way latency (best of 3 trials)" \
        "usec" lower "message size (B)" plot
    bench_metric $SEC netpipe_bw "NetPIPE NPopenmpi bandwidth" \
        "MB/s" higher "message size (B)" plot
fi

ndev=${#BENCH_DEVICES[@]}
bench_note $SEC "Open MPI $(mpirun.openmpi --version 2>/dev/null | sed -n '1s/.*) //p')
over UCX (\`--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
--mca btl self\`), one rank per verbs device (\`UCX_NET_DEVICES=<dev>:1\`,
devices ${BENCH_DEVICES[*]:-rxe0 rxe1}; with more ranks than devices they
share them round robin), no shared memory transport: every byte between
two ranks crosses rxe. The hipower plugin is preloaded in every rank of
every run; \`UCX_TLS\` picks the transport (\`rc_verbs,ud_verbs:aux,self\`,
or \`hipower,self\` with push or pull notification). For the
hipower rows every rank's \`hipower-stats\` line (UCX_HIPOWER_STATS=y)
must show messages sent and received on hipower, or the run counts as
failed.

One \`mpirun\` of $JOB_RANKS ranks per transport and repetition
(\`test/bench/mpi/bench_mpi\`) runs every measurement below, because MPI_Init
of 8 ranks alone takes 15-65 s on the rig; $BENCH_REPS repetitions, the
transports interleaved in each, at most ${MPI_TIMEOUT} s per launch. The
measurements go from the smallest group to the largest; a rank joins when
its first group starts and sleeps until then (no CPU, and with
\`--mca mpi_add_procs_cutoff 0\` no UCX endpoint either), so a 2-rank figure
is taken with the other 6 processes idle, not absent.

- **Ping-pong** (ranks 0 and 1), sizes ${PP_SIZES// /, } B:
  one warm-up round trip, then 2..10 round trips (about
  $((PP_BYTES / 1000000)) MB each way), each timed alone; latency = median
  round trip / 2 (and the best round trip / 2, which the 4 ms mode below
  disturbs less), bandwidth = size / median one-way time. Both messages of every round
  trip are checked byte for byte after the clock stops, and the next
  round trip starts when the far side says it is ready again.
- **MPI_Alltoall** (the RoCE full-mesh paper's workload), RANKS:BYTES PER
  PEER ${A2A_CONFIGS// /, }: one warm-up alltoall, a
  barrier, then K back-to-back alltoalls timed together (K: about
  $((A2A_BYTES / 1000000)) MB between ranks, 3..20); the time is the slowest
  rank's. Throughput = N·(N-1)·B·K / time, all ranks together (the
  self-block is not counted). Every iteration has its own buffers (their
  first-use registration is inside the time), and the data of every
  iteration (a pattern seeded by source rank, destination rank, size and
  iteration) is checked after the clock stops; a mismatch fails the run.
- **Message rate** (issue 26's MPI small-message-rate benchmark, after
  OSU's osu_mbw_mr), pairs ${MR_RANKS// /, } ranks / 2: ranks 0..P-1 each
  send to rank + P; per iteration every sender posts $MR_WINDOW
  \`MPI_Isend\` of $MR_SIZE B and waits for them, its partner posts
  $MR_WINDOW \`MPI_Irecv\` and waits, then sends an empty message that starts
  the sender's next iteration. One warm-up iteration, a barrier, then about
  $MR_MSGS messages per pair timed together (the slowest rank's time);
  rate = pairs x window x iterations / time. Every message has its own
  receive buffer and a pattern seeded by sender, receiver and index,
  checked after the clock stops. (8 pairs, 16 ranks, are not run: the rig
  has 8 devices and 2 vCPUs.)
$( [ "$NP_ENABLE" = 1 ] && echo "- **NetPIPE** (\`NPopenmpi -l 1 -u $NP_MAX -p 0 -n $NP_REPEATS\`), a 2-rank
  mpirun of its own: per size the best of 3 trials of $NP_REPEATS round trips;
  data not checked. Full output in \`raw/mpi/\`.")

Caveats: on the rig all processes share the guest's 2 vCPUs with the rxe
\"NICs\" (kernel work). With 8 ranks, 8 busy-polling processes and 8 soft
devices compete for 2 CPUs, so the 8-rank figure measures CPU contention
at least as much as the transport, and alltoall throughput does not grow
with ranks as it does on a real fabric. Startup and wireup are not in any
figure. Rig timing is noisy (the \"4 ms mode\": round trips lock to a
guest timer tick in part of the runs): compare medians and spreads, not
single runs. NetPIPE (Debian's netpipe-openmpi) is not the default
ping-pong because it needs a launch of its own (20-50 s each on the rig,
9 more per suite run) and does not check the data; set
HIPOWER_BENCH_MPI_NETPIPE=1 to add it."

# ---- running ---------------------------------------------------------------

# mpi_devices N: the devices for N ranks (one each while there are enough)
mpi_devices() {
    if [ "$ndev" = 0 ]; then
        echo "rxe0 rxe1"
    elif [ "$1" -le "$ndev" ]; then
        echo "${BENCH_DEVICES[*]:0:$1}"
    else
        echo "${BENCH_DEVICES[*]}"
    fi
}

# a2a_iters RANKS BLOCK: alltoalls per measurement
a2a_iters() {
    local k=$(( A2A_BYTES / ($1 * ($1 - 1) * $2) ))
    [ "$k" -lt 3 ] && k=3
    [ "$k" -gt 20 ] && k=20
    echo "$k"
}

# pp_iters SIZE: ping-pong round trips for one size
pp_iters() {
    local k=$(( PP_BYTES / $1 ))
    [ "$k" -lt 2 ] && k=2
    [ "$k" -gt 10 ] && k=10
    echo "$k"
}

# hipower_carried RUN NRANKS: every rank's stats line shows hipower
# traffic both ways
hipower_carried() {
    local r line
    for ((r = 0; r < $2; r++)); do
        line=$(grep -m1 '^hipower-stats ' "$RAW/$1.ranks/rank$r.err" 2>/dev/null)
        if ! [[ $line =~ \ tx_msgs=[1-9] && $line =~ \ rx_msgs=[1-9] ]]; then
            echo "rank $r: ${line:-no hipower-stats line}"
            return 1
        fi
    done
}

# mpi_launch RUN NRANKS TRANSPORT COMMAND [ARG...]: one mpirun, output in
# $RAW/RUN.log, each rank's stderr in $RAW/RUN.ranks/. Returns 0 if it
# exited 0 and (hipower transports) hipower carried every rank's traffic;
# otherwise logs why and returns non-zero (124: timed out).
mpi_launch() {
    local run=$1 n=$2 tr=$3 tmp rc start why w
    local -a xenv=()
    shift 3
    for w in $(bench_ucp_env "$tr") \
             $([ "$tr" != "${tr#hipower}" ] && echo UCX_HIPOWER_STATS=y) \
             "HIPOWER_MPI_DEVICES=$(mpi_devices "$n")" \
             "HIPOWER_MPI_STDERR_DIR=$RAW/$run.ranks"; do
        xenv+=(-x "$w")
    done
    rm -rf "$RAW/$run.ranks" && mkdir -p "$RAW/$run.ranks"
    # a session directory of its own: a killed job leaves its files behind
    tmp=$(mktemp -d /tmp/bench-ompi.XXXXXX) || return 1
    start=$SECONDS
    timeout -k 10 "$MPI_TIMEOUT" mpirun.openmpi -n "$n" --oversubscribe \
        --bind-to none --mca orte_tmpdir_base "$tmp" --mca mpi_add_procs_cutoff 0 \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca btl self -x LD_PRELOAD="$MPI_PRELOAD" -x PATH "${xenv[@]}" \
        "$RANK_ENV" "$@" > "$RAW/$run.log" 2>&1
    rc=$?
    rm -rf "$tmp"
    echo "# exit $rc after $((SECONDS - start)) s" >> "$RAW/$run.log"
    if [ "$rc" = 0 ] && [ "$tr" != "${tr#hipower}" ]; then
        why=$(hipower_carried "$run" "$n") || {
            bench_log "mpi: FAIL $run: hipower did not carry the traffic: $why"
            return 1
        }
    fi
    if [ "$rc" != 0 ]; then
        bench_log "mpi: FAIL $run: exit $rc$([ "$rc" = 124 ] && echo " (timed out after ${MPI_TIMEOUT} s)") after $((SECONDS - start)) s; last lines:"
        { grep -v '^#' "$RAW/$run.log" | tail -6
          cat "$RAW/$run.ranks"/rank*.err 2>/dev/null | grep -v '^hipower-stats' | tail -6
        } | sed 's/^/    | /' >&2
    fi
    return "$rc"
}

declare -A HUNG=() NP_TIMED_OUT=()

# bench_run REP TRANSPORT: one bench_mpi job, every ping-pong size and
# alltoall configuration. (The log is parsed by bash itself: every process
# started in the TCG guest costs tens of milliseconds.)
bench_run() {
    local rep=$1 tr=$2 run="bench_mpi-$2-rep$1" rc=0 s cfg n b line summary=
    local start=$SECONDS
    local -a cmds=() f
    local -A got=() finished=()
    for s in $PP_SIZES; do
        [[ " ${HUNG[$tr]:-} " = *" pp:$s "* ]] ||
            cmds+=("pp:$s:$(pp_iters "$s")")
    done
    # By group size (a job's commands must not shrink it): each size's
    # message rate, then its alltoalls
    for n in $(for cfg in $MR_RANKS $A2A_CONFIGS; do echo "${cfg%%:*}"; done |
               sort -nu); do
        if [[ " $MR_RANKS " = *" $n "* ]] &&
           ! [[ " ${HUNG[$tr]:-} " = *" mr:$n "* ]]; then
            cmds+=("mr:$n:$MR_SIZE:$(( (MR_MSGS + MR_WINDOW - 1) / MR_WINDOW )):$MR_WINDOW")
        fi
        for cfg in $A2A_CONFIGS; do
            [ "${cfg%%:*}" = "$n" ] || continue
            b=${cfg#*:}
            [[ " ${HUNG[$tr]:-} " = *" a2a:$n:$b "* ]] ||
                cmds+=("a2a:$n:$(a2a_iters "$n" "$b"):$b")
        done
    done
    [ -n "${HUNG[$tr]:-}" ] &&
        bench_log "mpi: $run without${HUNG[$tr]} (timed out in an earlier repetition)"
    if [ ${#cmds[@]} = 0 ]; then
        rc=1
    else
        mpi_launch "$run" "$JOB_RANKS" "$tr" "$BENCH_BIN" "${cmds[@]}" || rc=$?
    fi
    if [ "$rc" = 124 ] && grep -q '^bench_mpi: started' "$RAW/$run.log"; then
        # the command that was running when time ran out ("took" lines
        # mark the finished ones) is left out of later repetitions; a job
        # that timed out in its startup is simply run again
        while read -r -a f; do
            [ "${f[2]:-}" = took ] && finished[${f[1]}]=1
        done < "$RAW/$run.log"
        for s in "${cmds[@]}"; do
            if [ -z "${finished[$s]:-}" ]; then
                IFS=: read -r -a f <<< "$s"     # pp:S:K, a2a:N:K:B or mr:N:S:K:W
                case ${f[0]} in
                    mr) s=mr:${f[1]} ;;
                    *)  s=${f[0]}:${f[1]}${f[3]:+:${f[3]}} ;;
                esac
                HUNG[$tr]="${HUNG[$tr]:-} $s"
                bench_log "mpi: $run: '$s' was running when the job timed out; left out of later repetitions"
                break
            fi
        done
    fi
    # A job that failed half way has some result lines, but a failed run's
    # numbers are not trusted: all of it is "fail".
    if [ "$rc" = 0 ]; then
        # bench_mpi: pingpong size=S iters=K lat_us=L lat_min_us=M MBps=X
        # bench_mpi: alltoall ranks=N block=B iters=K time_s=T MBps=X
        while read -r -a f; do
            case "${f[0]} ${f[1]:-}" in
                "bench_mpi: pingpong")
                    s=${f[2]#size=}
                    got[lat:$s]=${f[4]#lat_us=}
                    got[lmin:$s]=${f[5]#lat_min_us=}
                    got[bw:$s]=${f[6]#MBps=}
                    case $s in 1|1048576)
                        summary+="pp $s B ${got[lat:$s]} us ${got[bw:$s]} MB/s; " ;;
                    esac ;;
                "bench_mpi: msgrate")
                    # bench_mpi: msgrate ranks=N pairs=P size=S window=W
                    #   iters=K time_s=T msgs_per_s=X
                    got[mr:${f[2]#ranks=}]=${f[8]#msgs_per_s=}
                    summary+="msgrate ${f[3]#pairs=} pair(s) ${f[8]#msgs_per_s=} msg/s; " ;;
                "bench_mpi: alltoall")
                    got[a2a:${f[2]#ranks=}:${f[3]#block=}]=${f[6]#MBps=}
                    summary+="a2a ${f[2]#ranks=}x${f[3]#block=} B ${f[6]#MBps=} MB/s; " ;;
            esac
        done < "$RAW/$run.log"
    fi
    for s in $PP_SIZES; do
        bench_sample $SEC pingpong_lat "$s" "$tr" "$rep" "${got[lat:$s]:-fail}"
        bench_sample $SEC pingpong_lat_min "$s" "$tr" "$rep" "${got[lmin:$s]:-fail}"
        bench_sample $SEC pingpong_bw "$s" "$tr" "$rep" "${got[bw:$s]:-fail}"
    done
    for n in $MR_RANKS; do
        bench_sample $SEC msgrate_$MR_SIZE "$((n / 2))" "$tr" "$rep" \
            "${got[mr:$n]:-fail}"
    done
    for cfg in $A2A_CONFIGS; do
        n=${cfg%%:*} b=${cfg#*:}
        bench_sample $SEC "alltoall_$(size_label "$b")" "$n" "$tr" "$rep" \
            "${got[a2a:$n:$b]:-fail}"
    done
    [ "$rc" = 0 ] && bench_log "mpi: $run ($((SECONDS - start)) s): ${summary%; }"
}

# np_run REP TRANSPORT: NetPIPE ping-pong between 2 ranks
np_run() {
    local rep=$1 tr=$2 run="netpipe-$2-rep$1" out s lat bw rc=0
    local start=$SECONDS
    out=$RAW/$run.np
    rm -f "$out"
    if [ -n "${NP_TIMED_OUT[$tr]:-}" ]; then
        bench_log "mpi: $run skipped (timed out in an earlier repetition)"
        rc=1
    else
        mpi_launch "$run" 2 "$tr" NPopenmpi -l 1 -u "$NP_MAX" -p 0 \
            -n "$NP_REPEATS" -o "$out" || rc=$?
        [ "$rc" = 124 ] && NP_TIMED_OUT[$tr]=1
    fi
    for s in $(bench_sizes 1 "$NP_MAX"); do
        lat=fail bw=fail
        if [ "$rc" = 0 ]; then
            # NPopenmpi -o: "bytes Mbps seconds" (one-way time)
            # (no process substitution: the guest has no /dev/fd)
            read -r lat bw <<< "$(awk -v s="$s" '$1 == s && $3 > 0 {
                printf "%.3f %.3f\n", $3 * 1e6, $2 / 8; exit }' "$out" 2>/dev/null)"
            [ -n "$lat" ] || { lat=fail bw=fail; bench_log "mpi: $run: no NetPIPE line for $s B"; }
        fi
        bench_sample $SEC netpipe_lat "$s" "$tr" "$rep" "${lat:-fail}"
        bench_sample $SEC netpipe_bw "$s" "$tr" "$rep" "${bw:-fail}"
    done
    [ "$rc" = 0 ] && bench_log "mpi: $run: $(awk '$1 == 1 { printf "1 B %.1f us", $3 * 1e6 }
        $1 == '"$NP_MAX"' { printf ", %d B %.2f MB/s", $1, $2 / 8 }' "$out") ($((SECONDS - start)) s)"
}

if ! [ -x "$BENCH_BIN" ]; then
    bench_log "mpi: $BENCH_BIN not built (make bench-programs): its runs fail"
fi
SECTION_T0=$SECONDS
reps_run=0
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
    if [ $((SECONDS - SECTION_T0)) -gt "$MPI_BUDGET" ]; then
        bench_log "mpi: $((SECONDS - SECTION_T0)) s > HIPOWER_BENCH_MPI_BUDGET=$MPI_BUDGET s: repetitions $rep..$BENCH_REPS not run"
        bench_note $SEC "
**Cut short**: only $reps_run of $BENCH_REPS repetitions ran; the section had
taken $((SECONDS - SECTION_T0)) s, more than its budget (HIPOWER_BENCH_MPI_BUDGET=$MPI_BUDGET s)."
        break
    fi
    reps_run=$rep
    for tr in $TRANSPORTS; do
        bench_run "$rep" "$tr"
    done
    if [ "$NP_ENABLE" = 1 ]; then
        for tr in $TRANSPORTS; do
            np_run "$rep" "$tr"
        done
    fi
done

for tr in "${!HUNG[@]}"; do
    bench_note $SEC "
**Timed out** (a job of more than ${MPI_TIMEOUT} s): $tr while running${HUNG[$tr]}
(left out of later repetitions, recorded as failed). Logs in \`raw/mpi/\`."
done
for tr in "${!NP_TIMED_OUT[@]}"; do
    bench_note $SEC "
**Timed out**: NetPIPE over $tr (later repetitions not run)."
done
init_s=$(sed -n -E 's/^bench_mpi: MPI_Init returned ([0-9.]+) s .*/\1/p' \
             "$RAW"/bench_mpi-*.log 2>/dev/null | sort -n | sed -n '1p;$p' | paste -sd/ -)
bench_note $SEC "
This run of the section took $((SECONDS - SECTION_T0)) s${init_s:+; MPI_Init took
${init_s%/*} to ${init_s#*/} s per $JOB_RANKS-rank job (not in any figure)}."
bench_log "mpi: done in $((SECONDS - SECTION_T0)) s"
exit 0
