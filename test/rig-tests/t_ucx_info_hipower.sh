#!/bin/bash
# ucx_info, an unmodified UCX tool, sees the hipower component once the
# plugin is loaded with hipower-run: one memory domain per verbs device, one
# hipower transport resource per active port, with its capabilities.
. "$(dirname "$0")/lib.sh"

out=$(hipower-run ucx_info -d) || fail "hipower-run ucx_info -d failed"
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | grep -A1 -x "# Memory domain: $dev" |
        grep -q '^#     Component: hipower$' ||
        fail "ucx_info -d does not show a hipower memory domain for $dev"
done
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | grep -A1 -x "#      Transport: hipower" | grep -q "Device: $dev:1\$" ||
        fail "ucx_info -d does not list the hipower transport on $dev:1"
done
tl=$(hipower-run ucx_info -d -t hipower)
for cap in 'am_short: <=' 'am_bcopy: <=' 'am_zcopy: <=' 'connection: to ep' \
           'overhead: 50 nsec'; do
    grep -q "$cap" <<< "$tl" || fail "hipower does not report '$cap'"
done
echo "$tl" | grep -A22 -m1 'Transport: hipower'

# without the plugin, no hipower
out=$(env -u LD_PRELOAD ucx_info -d) || fail "ucx_info -d failed"
! grep -q 'Component: hipower' <<< "$out" || fail "hipower listed without the plugin"
echo "ok: hipower listed for ${RIG_DEVICES[*]}"
