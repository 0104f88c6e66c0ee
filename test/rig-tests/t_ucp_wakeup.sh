#!/bin/bash
# Wakeup over hipower: with UCP_FEATURE_WAKEUP the server arms its worker and
# sleeps in poll() on the worker's event fd; the client sends N messages at
# random intervals of 0-200 ms (ucp_consumer --wakeup N). The server must be
# woken for the messages (at least 3/4 of them arrive while it sleeps; a
# message found after a 5 s poll timeout without an event fails), verify
# all N, and its CPU time must stay far below the wall time (it slept, it
# did not poll the network).
. "$(dirname "$0")/lib.sh"
. "$HIPOWER_SRC/test/ucp/ucp-rig-lib.sh"

N=${HIPOWER_WAKEUP_MSGS:-60}
ucp_start_server --wakeup "$N" --timeout 300
ucp_start_client --wakeup "$N" --timeout 300
ucp_wait "$CLIENT_PID" client 330; client_rc=$WAIT_RC; CLIENT_PID=
ucp_wait "$SERVER_PID" server 60; server_rc=$WAIT_RC; SERVER_PID=
ucp_show server
ucp_show client
ucp_check_clean server
ucp_check_clean client
[ "$client_rc" = 0 ] && [ "$server_rc" = 0 ] ||
    fail "ucp_consumer --wakeup $N over $UCX_TLS: client exit $client_rc, server exit $server_rc"

line=$(grep '^wakeup: msgs=' "$UCP_LOGS/server") || fail "no wakeup summary from the server"
declare -A v
for kv in ${line#wakeup: }; do
    v[${kv%%=*}]=${kv#*=}
done
[ "${v[verified]}" = "$N" ] || fail "the server verified ${v[verified]} of $N messages"
[ "${v[woken_msgs]}" -ge $((N * 3 / 4)) ] ||
    fail "only ${v[woken_msgs]} of $N messages woke the sleeping server (want >= $((N * 3 / 4)))"
[ "${v[wakeups]}" -ge "${v[woken_msgs]}" ] || fail "fewer wakeups than woken messages"
[ "${v[cpu_ms]}" -lt $((v[wall_ms] / 4)) ] ||
    fail "the server used ${v[cpu_ms]} ms of CPU in ${v[wall_ms]} ms: it did not sleep"
echo "ok: $N messages over $UCP_TL, ${v[wakeups]} wakeups (${v[woken_msgs]} messages arrived while the server slept), server CPU ${v[cpu_ms]} ms in ${v[wall_ms]} ms wall"
