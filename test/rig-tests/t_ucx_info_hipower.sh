# ucx_info, an unmodified UCX tool, sees the hipower component once the
# plugin is loaded with hipower-run: one memory domain per verbs device.
. "$(dirname "$0")/lib.sh"

out=$(hipower-run ucx_info -d) || fail "hipower-run ucx_info -d failed"
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | grep -A1 -x "# Memory domain: $dev" |
        grep -q '^#     Component: hipower$' ||
        fail "ucx_info -d does not show a hipower memory domain for $dev"
done
echo "$out" | grep -B1 -A2 'Component: hipower'

# without the plugin, no hipower
out=$(env -u LD_PRELOAD ucx_info -d) || fail "ucx_info -d failed"
! echo "$out" | grep -q 'Component: hipower' || fail "hipower listed without the plugin"
echo "ok: hipower listed for ${RIG_DEVICES[*]}"
