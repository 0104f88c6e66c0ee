# Shared part of the MPI rig tests (t_mpi_openmpi.sh, t_mpi_mpich.sh),
# sourced after test/rig-tests/lib.sh.
#
# Runs each MPI program of test/mpi with MPI_RANKS ranks (default 4) spread
# over the rig's devices (test/mpi/mpi-rank-env), the hipower plugin
# loaded in every rank (hipower-run --print's settings: LD_PRELOAD, or
# UCX_PLUGIN_PATH and that UCX's libraries first) and UCX limited to
# hipower alone (UCX_TLS=hipower,self: no auxiliary transport, hipower's
# own handshake connects, no shared memory, no rc_verbs), then proves from
# each
# rank's output that hipower carried its traffic:
#   - a "hipower-stats <dev>:" line (UCX_HIPOWER_STATS=y) from every rank,
#     on the rank's own device, with tx_msgs > 0 and rx_msgs > 0;
#   - an "ep_cfg[N]: tag(... hipower/...)" line (UCX_LOG_LEVEL=info) from
#     every rank;
#   - mpi_pingpong: each rank's tx_msgs >= the messages it sent;
#   - mpi_onesided: if the stats line has put_ops=/get_ops=, their totals
#     over the ranks are > 0.
#
# HIPOWER_MPI_TLS overrides UCX_TLS (e.g. rc_verbs,ud_verbs:aux,self, to
# debug the test itself); without hipower in it the hipower checks
# are skipped and only the programs' own verification counts.
# HIPOWER_MPI_TIMEOUT (default 300) bounds each launch, HIPOWER_MPI_PROGS
# selects programs, HIPOWER_MPI_LOGS is where the logs go,
# HIPOWER_MPI_INTERCOMM_ARGS are mpi_intercomm's arguments,
# HIPOWER_MPI_BUSY_ARGS mpi_busy's.

MPI_RANKS=${MPI_RANKS:-4}
MPI_TIMEOUT=${HIPOWER_MPI_TIMEOUT:-300}
MPI_PROGS=${HIPOWER_MPI_PROGS:-mpi_pingpong mpi_alltoall mpi_collectives mpi_onesided mpi_intercomm mpi_busy}
# Arguments of mpi_intercomm (iterations, largest message, longest pause):
# with 4 ranks each iteration costs seconds of wireup in the guest, and 30
# make about 60 endpoints per interface, enough for runs to be reused
MPI_INTERCOMM_ARGS=${HIPOWER_MPI_INTERCOMM_ARGS:-30 100000 50}
# mpi_busy (issue 50: a busy rank is a live rank): ranks compute with no
# MPI call for 7 s while others connect and send to them. The handshake's
# and the shared pool's deadlines are lowered to 2 s for it, so that 7 s is
# past 3x both and the job stays short; a transport that fails a computing
# peer on either deadline fails it. 120 s bound the launch: its two compute
# phases take 14 s, and a failing job that hangs must not take MPI_TIMEOUT.
MPI_BUSY_ARGS=${HIPOWER_MPI_BUSY_ARGS:-7}
MPI_BUSY_ENV="UCX_HIPOWER_CONNECT_TIMEOUT=2s UCX_HIPOWER_GRANT_TIMEOUT=2s"
MPI_BUSY_TIMEOUT=120
MPI_DIR=$HIPOWER_SRC/test/mpi

export UCX_TLS=${HIPOWER_MPI_TLS:-hipower,self}
export UCX_HIPOWER_STATS=y
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-info}
export HIPOWER_MPI_DEVICES="${RIG_DEVICES[*]:0:2}"
case ",$UCX_TLS," in
    *,hipower,*) MPI_CHECK_HIPOWER=1 ;;
    *)           MPI_CHECK_HIPOWER=0 ;;
esac

mpi_fail_count=0

# mpi_setup FLAVOR: FLAVOR is openmpi or mpich
mpi_setup() {
    MPI_FLAVOR=$1
    MPI_BIN=$HIPOWER_BUILD/test/mpi/$MPI_FLAVOR
    MPI_LOGS=${HIPOWER_MPI_LOGS:-$HIPOWER_BUILD/.cache/mpi-logs/$MPI_FLAVOR}
    local p
    for p in $MPI_PROGS; do
        [ -x "$MPI_BIN/$p" ] ||
            fail "$MPI_BIN/$p not built: run 'make rig-check' or 'make mpi-tests' in $HIPOWER_BUILD"
    done
    # How every rank loads hipower, as the launcher's own arguments (-x or
    # -genv): LD_PRELOAD with UCX 1.13; with UCX >= 1.22 UCX_PLUGIN_PATH,
    # and that UCX's libraries first in LD_LIBRARY_PATH (the MPI, built
    # against the system's UCX, then runs on the other one: same ABI)
    local load
    load=$(hipower-run --print "$([ "$MPI_FLAVOR" = openmpi ] && echo ompi || echo mpich)") ||
        fail "hipower-run --print failed"
    eval "MPI_LOAD_ARGS=($load)"
    MPI_PATH_ARGS=(-x PATH)
    case " ${MPI_LOAD_ARGS[*]} " in *" PATH="*) MPI_PATH_ARGS=() ;; esac
    mkdir -p "$MPI_LOGS" || fail "cannot create $MPI_LOGS"
    echo "$MPI_FLAVOR: $MPI_RANKS ranks over ${HIPOWER_MPI_DEVICES// /,}," \
         "UCX_TLS=$UCX_TLS, logs in $MPI_LOGS"
}

# The launcher's output with its rank tag turned into "<rank> <line>"
mpi_untag() {
    case $MPI_FLAVOR in
        openmpi) sed -n -E 's/^\[[0-9]+,([0-9]+)\]<std(out|err)>: ?(.*)$/\1 \3/p' "$1" ;;
        mpich)   sed -n -E 's/^\[([0-9]+)\] ?(.*)$/\1 \2/p' "$1" ;;
    esac
}

# stats_add VAR NAME LINE: adds the value of field NAME= in a stats line
# to VAR (nothing if absent). Shell builtins only, like the rest of this
# loop: it ran a sed per field and rank, seconds of CPU in the rig's
# emulated guest per program
stats_add() {
    local re=" $2=([0-9]+)"
    [[ $3 =~ $re ]] && printf -v "$1" '%d' $((${!1} + BASH_REMATCH[1]))
    return 0
}

# mpi_check_hipower PROG LOG RANKDIR: the traffic checks, from the tagged
# output (ep_cfg lines, message counts) and each rank's stderr (stats)
mpi_check_hipower() {
    local prog=$1 log=$2 rankdir=$3 tagged r lines dev want tx rx put get
    local line sent nif tot_put=0 tot_get=0 have_rma=0 ok=1 ndev
    local -a devs
    read -r -a devs <<< "$HIPOWER_MPI_DEVICES"
    ndev=${#devs[@]}
    tagged=$(mpi_untag "$log")
    for ((r = 0; r < MPI_RANKS; r++)); do
        want=${devs[$((r % ndev))]}
        lines=$(grep -E "^hipower-stats " "$rankdir/rank$r.err" 2>/dev/null)
        if [ -z "$lines" ]; then
            echo "  $prog rank $r: no hipower-stats line (plugin not loaded, or hipower not used)" >&2
            ok=0
            continue
        fi
        tx=0 rx=0 put=0 get=0 nif=0
        while IFS= read -r line; do
            nif=$((nif + 1))
            dev=
            [[ $line =~ ^hipower-stats\ ([^:\ ]*)(:[0-9]+)?: ]] && dev=${BASH_REMATCH[1]}
            if [ "$dev" != "$want" ]; then
                echo "  $prog rank $r: hipower interface on '$dev', expected $want: $line" >&2
                ok=0
            fi
            stats_add tx tx_msgs "$line"
            stats_add rx rx_msgs "$line"
            if [[ $line == *" put_ops="* ]]; then
                have_rma=1
                stats_add put put_ops "$line"
                stats_add get get_ops "$line"
            fi
        done <<< "$lines"
        tot_put=$((tot_put + put))
        tot_get=$((tot_get + get))
        echo "    $prog rank $r: hipower on $want ($nif interface(s)): tx_msgs=$tx rx_msgs=$rx$( ((have_rma)) && echo " put_ops=$put get_ops=$get")"
        if [ "$tx" -le 0 ] || [ "$rx" -le 0 ]; then
            echo "  $prog rank $r: hipower carried no traffic (tx_msgs=$tx rx_msgs=$rx)" >&2
            ok=0
        fi
        if ! grep -q -E "^$r .*(ep_cfg\[[0-9]+\]: |(inter|intra)-node cfg#[0-9]+ )tag\([^)]*hipower/" <<< "$tagged"; then
            echo "  $prog rank $r: no 'ep_cfg[N]: tag(... hipower/...)' (or 'cfg#N tag(...)') line: UCP did not put its tag lane on hipower" >&2
            ok=0
        fi
        sent=$(sed -n -E "s/^$r mpi_pingpong: rank $r sent ([0-9]+) messages.*/\\1/p" <<< "$tagged")
        if [ -n "$sent" ] && [ "$tx" -lt "$sent" ]; then
            echo "  $prog rank $r: sent $sent MPI messages but hipower only tx_msgs=$tx: another path carried some" >&2
            ok=0
        fi
    done
    if [ "$prog" = mpi_onesided ] && ((have_rma)); then
        echo "    $prog: hipower RMA over all ranks: put_ops=$tot_put get_ops=$tot_get"
        if [ "$tot_put" -le 0 ] || [ "$tot_get" -le 0 ]; then
            echo "  $prog: MPI_Put/MPI_Get did not use hipower's put/get (put_ops=$tot_put get_ops=$tot_get)" >&2
            ok=0
        fi
    fi
    ((ok))
}

# mpi_run PROG [ARG...]: launch, check the program's verdict and the
# transport evidence; failures are counted, the next program still runs.
# MPI_RUN_ENV: NAME=VALUE words set in every rank of this launch only.
mpi_run() {
    local prog=$1 log rankdir rc start summary f tmp kv
    local -a env_args=()
    shift
    for kv in ${MPI_RUN_ENV:-}; do
        case $MPI_FLAVOR in
            openmpi) env_args+=(-x "$kv") ;;
            mpich)   env_args+=(-genv "${kv%%=*}" "${kv#*=}") ;;
        esac
    done
    log=$MPI_LOGS/$prog.log
    rankdir=$MPI_LOGS/$prog.ranks
    rm -rf "$rankdir" && mkdir -p "$rankdir" || fail "cannot create $rankdir"
    export HIPOWER_MPI_STDERR_DIR=$rankdir
    start=$SECONDS
    case $MPI_FLAVOR in
        openmpi)
            # a session directory of its own: a killed job leaves its
            # PMIx files behind
            tmp=$(mktemp -d /tmp/hipower-ompi.XXXXXX) || fail "mktemp failed"
            timeout -k 15 "$MPI_TIMEOUT" mpirun.openmpi -n "$MPI_RANKS" \
                --oversubscribe --bind-to none --tag-output \
                --mca orte_tmpdir_base "$tmp" \
                --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
                --mca osc ucx --mca btl self \
                "${MPI_LOAD_ARGS[@]}" "${MPI_PATH_ARGS[@]}" -x UCX_TLS \
                -x UCX_HIPOWER_STATS -x UCX_LOG_LEVEL -x HIPOWER_MPI_DEVICES \
                -x HIPOWER_MPI_STDERR_DIR "${env_args[@]}" \
                "$MPI_DIR/mpi-rank-env" "$MPI_BIN/$prog" "$@" > "$log" 2>&1
            rc=$?
            rm -rf "$tmp" ;;
        mpich)
            timeout -k 15 "$MPI_TIMEOUT" mpiexec.hydra -launcher fork \
                -n "$MPI_RANKS" -prepend-rank \
                "${MPI_LOAD_ARGS[@]}" -genv MPIR_CVAR_NOLOCAL 1 \
                "${env_args[@]}" "$MPI_DIR/mpi-rank-env" "$MPI_BIN/$prog" "$@" > "$log" 2>&1
            rc=$? ;;
    esac
    summary=$(mpi_untag "$log" | sed -n -E "s/^0 ($prog: OK: .*)/\\1/p")
    if [ "$rc" != 0 ] || [ -z "$summary" ]; then
        echo "FAIL: $MPI_FLAVOR $prog: exit $rc$([ "$rc" = 124 ] && echo " (timed out after ${MPI_TIMEOUT}s)") after $((SECONDS - start))s; $log:" >&2
        grep -v -E 'UCX +INFO' "$log" | tail -15 | sed 's/^/  | /' >&2
        for f in "$rankdir"/rank*.err; do
            [ -s "$f" ] || continue
            echo "  $(basename "$f"):" >&2
            grep -v -E '^hipower-stats|UCX +INFO' "$f" | tail -8 | sed 's/^/  | /' >&2
        done
        mpi_fail_count=$((mpi_fail_count + 1))
        return 1
    fi
    echo "ok: $MPI_FLAVOR $summary ($((SECONDS - start))s)"
    if ((MPI_CHECK_HIPOWER)); then
        if ! mpi_check_hipower "$prog" "$log" "$rankdir"; then
            echo "FAIL: $MPI_FLAVOR $prog: hipower did not carry every rank's traffic (logs $log, $rankdir)" >&2
            mpi_fail_count=$((mpi_fail_count + 1))
            return 1
        fi
    fi
    return 0
}

mpi_run_all() {
    local p
    for p in $MPI_PROGS; do
        case $p in
            mpi_intercomm) mpi_run "$p" $MPI_INTERCOMM_ARGS ;;
            mpi_busy)      MPI_RUN_ENV=$MPI_BUSY_ENV MPI_TIMEOUT=$MPI_BUSY_TIMEOUT \
                               mpi_run "$p" $MPI_BUSY_ARGS ;;
            *)             mpi_run "$p" ;;
        esac
    done
    if ! ((MPI_CHECK_HIPOWER)); then
        echo "NOTE: UCX_TLS=$UCX_TLS has no hipower: transport checks skipped"
    fi
    [ "$mpi_fail_count" = 0 ] ||
        fail "$MPI_FLAVOR: $mpi_fail_count of $(wc -w <<< "$MPI_PROGS") programs failed"
    echo "ok: $MPI_FLAVOR: all programs passed$( ((MPI_CHECK_HIPOWER)) && echo ", over hipower in every rank")"
}
