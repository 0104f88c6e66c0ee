#!/bin/bash
# A device event with no completion behind it: the port under two idle
# endpoints goes down (its netdev set down). Both fail with
# UCS_ERR_UNREACHABLE, and the error names the device and port. The link
# is set up again before the next test.
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
[ "${HIPOWER_RIG:-}" = guest ] || skip "sets a link down: only in the rig's guest"
out=$(HIPOWER_TEST_PORT_DOWN=1 CK_RUN_CASE=port_down \
      hipower-run "$HIPOWER_BUILD/test/uct/check_transport" 2>&1)
rc=$?
echo "$out" | grep -v 'Passed$'
[ $rc = 0 ] || fail "check_transport port_down failed"
grep -q "hipower ${RIG_DEVICES[0]}:1: device event 'port error': port 1 is down" <<< "$out" ||
    fail "no error naming the device and port"
echo "ok: a port that went down failed its endpoints"
