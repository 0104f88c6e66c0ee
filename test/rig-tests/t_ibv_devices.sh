#!/bin/bash
# The rig is a real verbs stack: every device is listed and its port is up.
. "$(dirname "$0")/lib.sh"

out=$(ibv_devices) || fail "ibv_devices failed"
echo "$out"
for dev in "${RIG_DEVICES[@]}"; do
    echo "$out" | awk 'NR > 2 { print $1 }' | grep -x "$dev" >/dev/null ||
        fail "ibv_devices does not list $dev"
    info=$(ibv_devinfo -d "$dev") || fail "ibv_devinfo -d $dev failed"
    grep -q 'state:[[:space:]]*PORT_ACTIVE' <<< "$info" ||
        fail "$dev port 1 is not PORT_ACTIVE: $info"
done
if [ "${HIPOWER_RIG:-}" = guest ]; then
    [ ${#RIG_DEVICES[@]} -ge 2 ] || fail "the guest rig should have at least 2 rxe devices"
    for dev in "${RIG_DEVICES[@]}"; do
        ibv_devinfo -d "$dev" | grep 'transport:[[:space:]]*InfiniBand' >/dev/null ||
            fail "$dev: unexpected transport"
        rdma link show "$dev/1" | grep 'state ACTIVE' >/dev/null ||
            fail "rdma link does not show $dev/1 ACTIVE"
    done
fi
echo "ok: ${#RIG_DEVICES[@]} active device(s): ${RIG_DEVICES[*]}"
