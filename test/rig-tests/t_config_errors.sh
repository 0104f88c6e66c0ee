#!/bin/bash
# Invalid UCX_HIPOWER_* values fail interface open with a message that names
# the variable and the allowed range -- never a crash, never a silent default.
. "$(dirname "$0")/lib.sh"

dev=${RIG_DEVICES[0]}:1
check_rejected() {
    local setting=$1 expect=$2 out
    out=$(env "$setting" hipower-run ucx_info -d -t hipower 2>&1)
    grep -q -e "$expect" <<< "$out" ||
        fail "$setting: expected '$expect', got: $(echo "$out" | grep -i 'error\|fail' | head -3)"
    grep -q '< failed to open interface >' <<< "$out" ||
        fail "$setting: the interface opened anyway"
    echo "ok: $setting -> $(echo "$out" | grep -o -e "$expect.*" | head -1)"
}

check_rejected UCX_HIPOWER_SLOTS=5000 'UCX_HIPOWER_SLOTS=5000 is out of range \[1, 4096\]'
check_rejected UCX_HIPOWER_MIN_SLOTS=100 'UCX_HIPOWER_MIN_SLOTS=100 is out of range \[1, 64\]'
check_rejected UCX_HIPOWER_SLOT_SIZE=100 'UCX_HIPOWER_SLOT_SIZE=100 is out of range'
check_rejected UCX_HIPOWER_SLOT_SIZE=1000 'UCX_HIPOWER_SLOT_SIZE=1000 is not a multiple of 64'
check_rejected UCX_HIPOWER_RECYCLE_THRESHOLD=1.5 'UCX_HIPOWER_RECYCLE_THRESHOLD=1.5 is out of range (0, 1\]'
check_rejected UCX_HIPOWER_SIGNAL_INTERVAL=200 'UCX_HIPOWER_SIGNAL_INTERVAL=200 is out of range \[1, 128\]'
check_rejected UCX_HIPOWER_MEM_BUDGET=4k 'UCX_HIPOWER_MEM_BUDGET=4096 is out of range'
check_rejected UCX_HIPOWER_GID_INDEX=200 'no GID at UCX_HIPOWER_GID_INDEX=200'

# A value UCX's parser cannot read at all is refused by UCX itself
out=$(UCX_HIPOWER_NOTIFY=sideways hipower-run ucx_info -d -t hipower 2>&1)
grep -q "Invalid value for NOTIFY: 'sideways'" <<< "$out" ||
    fail "UCX_HIPOWER_NOTIFY=sideways was not refused: $(echo "$out" | head -3)"
echo "ok: UCX_HIPOWER_NOTIFY=sideways refused by UCX's parser"

# The documented defaults are what ucx_info shows
config=$(hipower-run ucx_info -c -f) || fail "ucx_info -c -f failed"
grep -q '^UCX_HIPOWER_NOTIFY=self$' <<< "$config" ||
    fail "ucx_info -c does not list UCX_HIPOWER_NOTIFY=self (the default)"
grep -q '^UCX_HIPOWER_RECYCLE_THRESHOLD=0.5' <<< "$config" ||
    fail "ucx_info -c does not list UCX_HIPOWER_RECYCLE_THRESHOLD"
echo "ok: defaults listed by ucx_info -c -f"
