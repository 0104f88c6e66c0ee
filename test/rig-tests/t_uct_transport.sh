# The hipower transport through UCT's public API (test/uct/check_transport):
# 200,000 random messages over several endpoints in order, none lost,
# duplicated or corrupted; slot exhaustion falls back to pending and resumes;
# flush means delivered; 16 endpoints; the memory budget; endpoint destroy
# with traffic in flight -- in both notification modes.
. "$(dirname "$0")/lib.sh"

[ ${#RIG_DEVICES[@]} -ge 1 ] || skip "needs a verbs device"
export HIPOWER_TEST_MSGS=${HIPOWER_TEST_MSGS:-200000}
for mode in push pull; do
    echo "--- UCX_HIPOWER_NOTIFY=$mode"
    out=$(UCX_HIPOWER_NOTIFY=$mode UCX_HIPOWER_STATS=y \
          hipower-run "$HIPOWER_BUILD/test/uct/check_transport" 2>&1)
    rc=$?
    echo "$out" | grep -v '^hipower-stats' | grep -v 'P:.*Passed$'
    echo "$out" | grep -c 'Passed$' | sed 's/^/passed tests: /'
    [ $rc = 0 ] || fail "check_transport failed with NOTIFY=$mode"
    # Receiving never polls a completion, in either mode
    echo "$out" | grep '^hipower-stats' | grep -v ' rx_completions=0 ' &&
        fail "receive completions were polled"
    grep -q '100%: Checks: 12, Failures: 0, Errors: 0' <<< "$out" ||
        fail "not all 12 transport tests passed"
    # rxe does RC atomics, so hipower must offer and pass them
    grep -q '^atomics: fetch-add, add, compare-swap ok' <<< "$out" ||
        fail "remote atomics were not advertised or not checked"
done
echo "ok: both notification modes"
