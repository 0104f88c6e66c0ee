#!/bin/bash
# ucx_info, an unmodified UCX tool, sees the hipower component once the
# plugin is loaded with hipower-run: one memory domain per verbs device, one
# hipower transport resource per active port, with its capabilities. The
# loading is the mechanism of the UCX hipower was built against (UCX >= 1.22:
# UCX_PLUGIN_PATH, nothing preloaded; before: LD_PRELOAD), and that
# variable alone makes the difference.
. "$(dirname "$0")/lib.sh"

version=$(hipower-run ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9][0-9.]*\).*/\2/p')
[ -n "$version" ] || fail "hipower-run ucx_info -v printed no version"
if [ "$(printf '%s\n' 1.22 "$version" | sort -V | head -1)" = 1.22 ]; then
    want=UCX_PLUGIN_PATH not=LD_PRELOAD
else
    want=LD_PRELOAD not=UCX_PLUGIN_PATH
fi
settings=$(env -u LD_PRELOAD -u UCX_PLUGIN_PATH -u HIPOWER_LOAD hipower-run --print sh) ||
    fail "hipower-run --print failed"
grep -q "^export $want=" <<< "$settings" && ! grep -q "^export $not=" <<< "$settings" ||
    fail "UCX $version: hipower-run should load by $want alone; it sets: $settings"
echo "UCX $version: hipower-run loads the plugin by $want"

out=$(hipower-run ucx_info -d) || fail "hipower-run ucx_info -d failed"
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | grep -A1 -x "# Memory domain: $dev" |
        grep -q '^#     Component: hipower$' ||
        fail "ucx_info -d does not show a hipower memory domain for $dev"
done
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | grep -A1 -x "#      Transport: hipower" | grep "Device: $dev:1\$" >/dev/null ||
        fail "ucx_info -d does not list the hipower transport on $dev:1"
done
tl=$(hipower-run ucx_info -d -t hipower)
for cap in 'am_short: <=' 'am_bcopy: <=' 'am_zcopy: <=' 'connection: to ep' \
           'overhead: 50 nsec'; do
    grep -q "$cap" <<< "$tl" || fail "hipower does not report '$cap'"
done
echo "$tl" | grep -A22 -m1 'Transport: hipower'

# In a clean environment with hipower-run's settings only: listed, with the
# other variable unset; the dynamic loader shows where the plugin came from
clean() { env -u LD_PRELOAD -u UCX_PLUGIN_PATH sh -c "$settings; $1"; }
out=$(clean "echo \"$not=\${$not-unset}\"; LD_DEBUG=files ucx_info -d 2>&1") ||
    fail "ucx_info -d with $want failed"
grep -q "^$not=unset\$" <<< "$out" || fail "$not was set: $(head -1 <<< "$out")"
grep -q 'Component: hipower' <<< "$out" || fail "hipower not listed with $want alone"
loaded=$(grep -o 'file=[^ ]*libuct_hipower[^ ]*' <<< "$out" | sort -u | sed 's/^file=//')
[ -n "$loaded" ] || fail "the dynamic loader did not report the plugin"
echo "loaded by $want ($not unset): $loaded"
if [ "$want" = UCX_PLUGIN_PATH ]; then
    # UCX's loader opens lib<framework>_<name> with libucs's extension
    grep -q 'libuct_hipower\.so\.0$' <<< "$loaded" ||
        fail "UCX's loader should have opened libuct_hipower.so.0, not $loaded"
fi

# ...and without that variable (same environment otherwise), no hipower
out=$(clean "unset $want; ucx_info -d") || fail "ucx_info -d failed"
! grep -q 'Component: hipower' <<< "$out" || fail "hipower listed without $want"
echo "ok: hipower listed for ${RIG_DEVICES[*]} on UCX $version, by $want"
