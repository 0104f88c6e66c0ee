# MPI benchmark programs (included from Makefile.am; built by
# "make bench-programs", run by contrib/bench/mpi.sh in the rig).
#
# Open MPI only (the MPI section runs Open MPI over UCX). Not automake
# programs (their own compiler), like test/mpi/local.mk; they reuse
# test/mpi/mpi_check.h (data patterns, verification, error reporting).
BENCH_MPI_OPENMPI = test/bench/mpi/openmpi/bench_mpi
BENCH_MPI_SRCS = $(srcdir)/test/bench/mpi/bench_mpi.c

dist_check_DATA += test/bench/mpi/local.mk $(BENCH_MPI_SRCS)
BENCH_DEPS += $(BENCH_MPI_OPENMPI)
CLEANFILES += $(BENCH_MPI_OPENMPI)

$(BENCH_MPI_OPENMPI): $(BENCH_MPI_SRCS) $(srcdir)/test/mpi/mpi_check.h
	@if test -z "$(MPICC_OPENMPI)"; then \
		echo "error: mpicc.openmpi not found, cannot build $@: install the Debian package libopenmpi-dev and re-run configure" >&2; \
		exit 1; \
	fi
	$(AM_V_CC)$(MKDIR_P) test/bench/mpi/openmpi && \
	$(MPICC_OPENMPI) -O2 -g $(HIPOWER_CFLAGS) -I$(srcdir)/test/mpi \
		-o $@ $(srcdir)/test/bench/mpi/`basename $@`.c
