#!/bin/bash
# Under valgrind: destroying endpoints with traffic in flight and messages
# held (Check case "destroy"), and closing interfaces with endpoints still
# open (case "close"): no invalid access, nothing of hipower's leaked.
. "$(dirname "$0")/lib.sh"

command -v valgrind >/dev/null || skip "valgrind is not installed"
log=$(mktemp)
for tcase in destroy close; do
    echo "--- Check case $tcase"
    CK_RUN_CASE=$tcase CK_FORK=no HIPOWER_TEST_MSGS=1000 \
        hipower-run valgrind --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite --show-leak-kinds=definite \
            --track-origins=no --log-file="$log" \
            "$HIPOWER_BUILD/test/uct/check_transport" 2>&1 | tail -5
    rc=${PIPESTATUS[0]}
    grep -E 'ERROR SUMMARY|definitely lost' "$log"
    if [ "$rc" != 0 ]; then
        grep -B2 -A25 -m3 'Invalid\|uninitialised\|definitely lost in' "$log" | head -80
        rm -f "$log"
        fail "valgrind reported errors in case $tcase (exit $rc)"
    fi
done
rm -f "$log"
echo "ok: clean under valgrind"
