# harness.sh: what perftest-pair and perftest-raw share to start a server
# and its client on loopback TCP without colliding with an earlier run.
# Sourced, not run.
#
# A failure here is the harness's, not the transport's: the scripts exit
# with HARNESS_RC and a message starting "harness error:", so tables can
# tell it from a transport failure (exit 1).
#
# Environment:
#   HARNESS_ATTEMPTS   server starts tried on fresh ports before giving up (5)
#   HARNESS_TEST_PORT  the first attempt's port (for testing the retry)

HARNESS_RC=3
HARNESS_ATTEMPTS=${HARNESS_ATTEMPTS:-5}

# harness_pick_port ATTEMPT: a port no socket uses in any state (listening,
# connected or TIME_WAIT: a server's port lingers after it exits and a new
# bind() on it fails). Taken below the ephemeral range so that no outgoing
# connection can be handed it between the check and the bind.
harness_pick_port() {
    local attempt=$1 lo hi port i
    if [ "$attempt" = 1 ] && [ -n "${HARNESS_TEST_PORT:-}" ]; then
        echo "$HARNESS_TEST_PORT"
        return 0
    fi
    read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
    [ "$lo" -gt 11000 ] || lo=32768
    for ((i = 0; i < 100; ++i)); do
        port=$(( 10000 + (RANDOM * 32768 + RANDOM) % (lo - 10000) ))
        harness_port_used "$port" any || { echo "$port"; return 0; }
    done
    return 1
}

# harness_port_used PORT [listen|any]: a TCP socket (IPv4 or IPv6) listens
# on PORT, or (any) has it at either end in any state. Read from /proc with
# shell builtins only: in the rig's emulated guest each process started
# costs a good part of a second of CPU, and a wait that ran ss, grep and
# sleep ten times a second took more of it than the server it waited for.
harness_port_used() {
    local hex f l r st
    printf -v hex ':%04X' "$1"
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        while read -r _ l r st _; do
            if [ "${2:-listen}" = any ]; then
                [[ $l == *"$hex" || $r == *"$hex" ]] && return 0
            else
                [[ $st == 0A && $l == *"$hex" ]] && return 0
            fi
        done < "$f"
    done
    return 1
}

# harness_nap [SECONDS]: sleeps (0.1 s) without starting a process: a read
# with a timeout on a FIFO no one writes
harness_nap() {
    local fifo
    if [ -z "${HARNESS_NAP_FD:-}" ]; then
        fifo=$(mktemp -u "${TMPDIR:-/tmp}/harness-nap.XXXXXX") &&
            mkfifo "$fifo" && exec {HARNESS_NAP_FD}<> "$fifo" || { sleep "${1:-0.1}"; return; }
        rm -f "$fifo"
    fi
    read -r -t "${1:-0.1}" -u "$HARNESS_NAP_FD" _ || true
}

# harness_is_descendant PID ANCESTOR: PID is ANCESTOR or below it
harness_is_descendant() {
    local pid=$1 anc=$2
    while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
        [ "$pid" = "$anc" ] && return 0
        pid=$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    done
    return 1
}

# harness_wait_listen PORT PID [SECONDS]: waits until a process started by
# PID (the server's shell) listens on PORT. Someone else's listener does not
# count: that was the old fixed-sleep harness's collision.
# Returns 0 listening, 1 the server exited first, 2 timed out (default 30 s).
harness_wait_listen() {
    local port=$1 spid=$2 secs=${3:-30} pids p i
    for ((i = 0; i < secs * 10; ++i)); do
        # whose listener it is only once something listens (ss -p reads
        # every process's file descriptors)
        if harness_port_used "$port" listen; then
            pids=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2)
            for p in $pids; do
                harness_is_descendant "$p" "$spid" && return 0
            done
        fi
        kill -0 "$spid" 2>/dev/null || return 1
        harness_nap 0.1
    done
    return 2
}

# harness_kill_tree PID: PID and everything it started (the server runs
# under timeout and a shell: killing only PID would leave the listener)
harness_kill_tree() {
    local pid=$1 child
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
        harness_kill_tree "$child"
    done
    kill "$pid" 2>/dev/null
}

# harness_bind_failed FILE: the server's output says its port was taken
harness_bind_failed() {
    grep -qiE 'bind\(\) failed|address already in use' "$1" 2>/dev/null
}

# harness_error MESSAGE...: reports a harness failure and exits HARNESS_RC
harness_error() {
    echo "harness error: $*" >&2
    exit "$HARNESS_RC"
}
