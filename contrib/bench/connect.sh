#!/bin/bash
# Connection setup at scale (issue 27): one process opens N endpoints to
# another's worker address over UCP, one message on each, then closes them;
# the time per endpoint with hipower's own handshake (UCX_TLS=hipower,self),
# with hipower wired up by UCP through ud_verbs:aux instead
# (UCX_HIPOWER_CONNECT_TO_IFACE=n), and with rc_verbs (always through UD).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../../test/bench/ucp/wl-lib.sh"
S=connect

eps_list=${HIPOWER_BENCH_CONNECT_EPS:-1024}
[ "$BENCH_QUICK" = 1 ] && eps_list=${HIPOWER_BENCH_CONNECT_EPS:-128}

bench_metric $S connect_time "Connect time per endpoint: ucp_ep_create to the endpoint's first message delivered, N endpoints to one peer worker, divided by N" us lower eps noplot
bench_metric $S close_time "Close time per endpoint: ucp_ep_close_nbx (flush) of all N, divided by N" us lower eps noplot

bench_note $S "Two processes of \`test/bench/ucp/ucp_workloads connect\`, on two rxe devices (one interface each). Rank 1 creates N endpoints to rank 0's worker address, one after the other, and sends on each, as soon as it exists, one 8-byte tag message holding its index (at most 64 unfinished at once); rank 0 receives them all and checks that every index came once. **Connect time** runs at rank 1 from the first \`ucp_ep_create()\` until every send completed and rank 0 has every message, divided by N. Columns: **hipower** is \`UCX_TLS=hipower,self\`: each endpoint's first send opens one TCP handshake with the peer's interface (docs/protocol.md §10); **hipower-ud** is \`UCX_TLS=hipower,ud_verbs:aux,self\` with \`UCX_HIPOWER_CONNECT_TO_IFACE=n\`: UCP's wire-up over UD, endpoint to endpoint, as before issue 27; **rc_verbs** is \`UCX_TLS=rc_verbs,ud_verbs:aux,self\`: UCX's RC, wired up over UD. Busy polling; the columns interleaved in each repetition."

for rep in $(seq "$BENCH_REPS"); do
    for n in $eps_list; do
        for col in rc_verbs hipower hipower-ud; do
            bench_log "connect rep $rep/$BENCH_REPS: $n endpoints, $col"
            wl_launch "connect-$n-$col-rep$rep" "$col" 2 connect --eps "$n" \
                --timeout 600
            wl_find pattern=connect
            wl_record $S connect_time "$n" "$col" "$rep" connect_us_per_ep
            wl_record $S close_time "$n" "$col" "$rep" close_us_per_ep
        done
    done
done
exit 0
