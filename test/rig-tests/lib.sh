#!/bin/bash
# Helpers for rig tests (sourced).
set -u -o pipefail

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

# Waiting without starting a process (harness_nap, harness_port_used): in
# the rig's emulated guest a poll loop of sleep, ss and grep took more CPU
# than the programs it waited for
. "${HIPOWER_SRC:-$(dirname "${BASH_SOURCE[0]}")/../..}/contrib/harness.sh"

read -r -a RIG_DEVICES <<< "${HIPOWER_RIG_DEVICES:-}"
[ ${#RIG_DEVICES[@]} -gt 0 ] || fail "HIPOWER_RIG_DEVICES is empty: run under test/rig/hipower-rig"

# Packets a verbs device has sent on port 1 (rxe and most RoCE NICs).
sent_packets() {
    local f=/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts
    [ -r "$f" ] && cat "$f" || echo -1
}
