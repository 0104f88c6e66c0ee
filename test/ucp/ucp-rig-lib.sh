# Helpers for the UCP consumer rig tests (test/rig-tests/t_ucp_*.sh), sourced
# after test/rig-tests/lib.sh. The server runs on the first rig device, the
# client on the second, both in this guest, talking over UCP with
#   UCX_TLS=${HIPOWER_UCP_TLS:-hipower,self}
# (hipower alone: no auxiliary transport, its own handshake connects it)
# (HIPOWER_UCP_TLS=rc_verbs,ud_verbs:aux,self runs the same test over UCX's
# own RC transport: what proves the test itself right;
# HIPOWER_UCP_SERVER_DEV/HIPOWER_UCP_CLIENT_DEV override the devices).

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"

export UCX_TLS=${HIPOWER_UCP_TLS:-hipower,self}
UCP_TL=${UCX_TLS%%,*}
SERVER_DEV=${HIPOWER_UCP_SERVER_DEV:-${RIG_DEVICES[0]}:1}
CLIENT_DEV=${HIPOWER_UCP_CLIENT_DEV:-${RIG_DEVICES[1]}:1}
CONSUMER=$HIPOWER_BUILD/test/ucp/ucp_consumer
[ -x "$CONSUMER" ] || fail "$CONSUMER is not built (make check)"
UCP_LOGS=$(mktemp -d /tmp/ucp-test.XXXXXX)
echo "UCX_TLS=$UCX_TLS, server on $SERVER_DEV, client on $CLIENT_DEV"

UCP_PORT=
SERVER_PID=
CLIENT_PID=

# Starts the server in the background (log $UCP_LOGS/server) and waits
# until it listens.
ucp_start_server() {
    local i
    UCP_PORT=$((20000 + RANDOM % 20000))
    UCX_NET_DEVICES=$SERVER_DEV hipower-run "$CONSUMER" -l "$UCP_PORT" "$@" \
        > "$UCP_LOGS/server" 2>&1 &
    SERVER_PID=$!
    for ((i = 0; i < 200; ++i)); do
        harness_port_used "$UCP_PORT" listen && return 0
        kill -0 "$SERVER_PID" 2> /dev/null || break
        harness_nap 0.1
    done
    cat "$UCP_LOGS/server"
    fail "the server did not listen on port $UCP_PORT"
}

# Starts the client in the background (log $UCP_LOGS/client).
ucp_start_client() {
    UCX_NET_DEVICES=$CLIENT_DEV hipower-run "$CONSUMER" 127.0.0.1 -p "$UCP_PORT" \
        "$@" > "$UCP_LOGS/client" 2>&1 &
    CLIENT_PID=$!
}

# Waits for process $1 (named $2) at most $3 seconds; sets WAIT_RC (124 if
# it was still running: then it is killed).
ucp_wait() {
    local pid=$1 name=$2 limit=$3 start=$SECONDS
    while kill -0 "$pid" 2> /dev/null; do
        if [ $((SECONDS - start)) -ge "$limit" ]; then
            echo "$name still running after $limit s: killing it"
            kill -TERM "$pid" 2> /dev/null # prints where it is stuck
            sleep 3
            kill -9 "$pid" 2> /dev/null
            wait "$pid" 2> /dev/null
            WAIT_RC=124
            return
        fi
        harness_nap 0.2
    done
    wait "$pid"
    WAIT_RC=$?
}

# Fails if a log shows a crash or an assertion
UCP_CRASH_PATTERN='Segmentation fault|Assertion|assert|Caught signal|Bus error|double free|corrupted'
ucp_check_clean() {
    local name=$1 log=$UCP_LOGS/$1
    if grep -Eq "$UCP_CRASH_PATTERN" "$log"; then
        sed "s/^/  $name: /" "$log" | tail -40
        fail "$name crashed or hit an assertion"
    fi
}

ucp_show() {
    sed "s/^/$1: /" "$UCP_LOGS/$1"
}

ucp_cleanup() {
    [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2> /dev/null
    [ -n "$CLIENT_PID" ] && kill -9 "$CLIENT_PID" 2> /dev/null
    rm -rf "$UCP_LOGS"
}
trap ucp_cleanup EXIT
