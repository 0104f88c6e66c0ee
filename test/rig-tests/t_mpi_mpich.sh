#!/bin/bash
# MPICH (ch4:ucx) over hipower: 4 ranks spread over two devices, the
# plugin loaded in every rank (hipower-run's way), UCX_TLS=hipower,self (no
# auxiliary transport), and
# MPIR_CVAR_NOLOCAL=1 so that ch4's shared memory does not carry local
# ranks' messages. Runs test/mpi's ping-pong, alltoall, bcast/gather and
# one-sided programs (each verifies its data) and checks that every rank's
# traffic went through hipower.
# Among them mpi_busy (issue 50): ranks that compute for 7 s, right after
# MPI_Init and between phases, while others connect and send to them, with
# UCX_HIPOWER_CONNECT_TIMEOUT and UCX_HIPOWER_GRANT_TIMEOUT lowered to 2 s:
# a busy rank is a live rank. See test/mpi/mpi-rig-lib.sh.
. "$(dirname "$0")/lib.sh"
. "$HIPOWER_SRC/test/mpi/mpi-rig-lib.sh"

[ ${#RIG_DEVICES[@]} -ge 2 ] || skip "needs two verbs devices"
command -v mpiexec.hydra > /dev/null ||
    fail "mpiexec.hydra not found: install mpich (and libmpich-dev)"

mpi_setup mpich
mpi_run_all
