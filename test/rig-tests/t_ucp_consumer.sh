#!/bin/bash
# UCP as an application uses it, over hipower alone (UCX_TLS=hipower,self:
# no auxiliary transport, hipower's handshake connects): test/ucp/ucp_consumer moves
# checksummed data both ways with tag messages (1 B..8 MB blocking, 64 in
# flight out of order, a burst of 256 unexpected ones of which the last is
# received first), stream, active messages (eager and rendezvous) and RMA
# put/get (mem_map, rkeys, worker flush); then hipower-lanes shows that UCP
# puts both its eager and its rendezvous lanes on hipower.
. "$(dirname "$0")/lib.sh"
. "$HIPOWER_SRC/test/ucp/ucp-rig-lib.sh"

ucp_start_server --timeout 600
UCX_LOG_LEVEL=info ucp_start_client --timeout 600
ucp_wait "$CLIENT_PID" client 660; client_rc=$WAIT_RC; CLIENT_PID=
ucp_wait "$SERVER_PID" server 60; server_rc=$WAIT_RC; SERVER_PID=
# UCP's info line naming each endpoint configuration's lanes: "ep_cfg[N]:
# tag(...)" up to UCX 1.17, "<context> inter-node cfg#N tag(...)" since
lanes_line='(ep_cfg\[[0-9]+\]: |cfg#[0-9]+ )tag\('
grep -E "^(ok|FAIL)|$lanes_line|UCX  (ERROR|WARN)" "$UCP_LOGS/client" | sed 's/^/client: /'
grep -E '^(ok|FAIL)|UCX  (ERROR|WARN)' "$UCP_LOGS/server" | sed 's/^/server: /'
ucp_check_clean client
ucp_check_clean server
if [ "$client_rc" != 0 ] || [ "$server_rc" != 0 ]; then
    tail -5 "$UCP_LOGS/client" | sed 's/^/client: /'
    tail -5 "$UCP_LOGS/server" | sed 's/^/server: /'
    fail "ucp_consumer over $UCX_TLS: client exit $client_rc, server exit $server_rc"
fi
for phase in 'tag blocking' 'tag non-blocking' 'tag unexpected burst' stream am 'rma put and get'; do
    for side in client server; do
        grep -q "^ok: $phase " "$UCP_LOGS/$side" || fail "$side: no 'ok: $phase' line"
    done
done
grep -q -E "${lanes_line}$UCP_TL/" "$UCP_LOGS/client" ||
    fail "UCP did not put its tag lane on $UCP_TL"
echo "ok: all ucp_consumer phases over $UCX_TLS"

out=$(hipower-run hipower-lanes -a "$SERVER_DEV" -b "$CLIENT_DEV" --expect "$UCP_TL" 2>&1)
rc=$?
echo "$out" | grep -E 'lane\[|^hipower-lanes|rndv|UCX  (ERROR|WARN)'
[ $rc = 0 ] || fail "hipower-lanes --expect $UCP_TL: exit $rc"
echo "ok: UCP's eager and rendezvous lanes are on $UCP_TL"
