#!/bin/bash
# The Check unit tests again, now with verbs devices present, so the tests
# that open every device really open them.
. "$(dirname "$0")/lib.sh"

"$HIPOWER_BUILD/test/unit/check_hipower" || fail "unit tests failed on the rig"
