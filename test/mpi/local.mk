# MPI consumer programs (included from Makefile.am)
#
# Each program is built once per MPI (Debian installs Open MPI and MPICH side
# by side) into test/mpi/openmpi/ and test/mpi/mpich/; the rig tests
# t_mpi_openmpi.sh and t_mpi_mpich.sh run them. Not automake programs (one
# compiler per MPI), so they hang off RIG_CHECK_DEPS.
MPI_TEST_PROGS = mpi_pingpong mpi_alltoall mpi_collectives mpi_onesided \
	mpi_intercomm mpi_busy
MPI_TEST_SRCS = \
	$(srcdir)/test/mpi/mpi_pingpong.c \
	$(srcdir)/test/mpi/mpi_alltoall.c \
	$(srcdir)/test/mpi/mpi_collectives.c \
	$(srcdir)/test/mpi/mpi_onesided.c \
	$(srcdir)/test/mpi/mpi_intercomm.c \
	$(srcdir)/test/mpi/mpi_busy.c
MPI_TEST_OPENMPI = \
	test/mpi/openmpi/mpi_pingpong \
	test/mpi/openmpi/mpi_alltoall \
	test/mpi/openmpi/mpi_collectives \
	test/mpi/openmpi/mpi_onesided \
	test/mpi/openmpi/mpi_intercomm \
	test/mpi/openmpi/mpi_busy
MPI_TEST_MPICH = \
	test/mpi/mpich/mpi_pingpong \
	test/mpi/mpich/mpi_alltoall \
	test/mpi/mpich/mpi_collectives \
	test/mpi/mpich/mpi_onesided \
	test/mpi/mpich/mpi_intercomm \
	test/mpi/mpich/mpi_busy
MPI_TEST_CFLAGS = -O2 -g $(HIPOWER_CFLAGS)

# Distributed sources. Not EXTRA_DIST: Makefile.am sets that with '=' after
# including this fragment, and automake refuses '+=' before '='.
dist_check_DATA = test/mpi/local.mk test/mpi/mpi_check.h test/mpi/mpi-rank-env \
	test/mpi/mpi-rig-lib.sh $(MPI_TEST_SRCS)
RIG_CHECK_DEPS += $(MPI_TEST_OPENMPI) $(MPI_TEST_MPICH)
CLEANFILES += $(MPI_TEST_OPENMPI) $(MPI_TEST_MPICH)

mpi-tests: $(MPI_TEST_OPENMPI) $(MPI_TEST_MPICH)
mpi-tests-openmpi: $(MPI_TEST_OPENMPI)
mpi-tests-mpich: $(MPI_TEST_MPICH)
.PHONY: mpi-tests mpi-tests-openmpi mpi-tests-mpich

# One rule per MPI for all its programs: the source is named after the target
$(MPI_TEST_OPENMPI): $(MPI_TEST_SRCS) $(srcdir)/test/mpi/mpi_check.h
	@if test -z "$(MPICC_OPENMPI)"; then \
		echo "error: mpicc.openmpi not found, cannot build $@: install the Debian package libopenmpi-dev and re-run configure" >&2; \
		exit 1; \
	fi
	$(AM_V_CC)$(MKDIR_P) test/mpi/openmpi && \
	{ $(MPICC_OPENMPI) $(MPI_TEST_CFLAGS) \
		-o $@ $(srcdir)/test/mpi/`basename $@`.c || \
	  { echo "error: $(MPICC_OPENMPI) failed to build $@ (is the Debian package libopenmpi-dev installed?)" >&2; \
	    exit 1; }; }

$(MPI_TEST_MPICH): $(MPI_TEST_SRCS) $(srcdir)/test/mpi/mpi_check.h
	@if test -z "$(MPICC_MPICH)"; then \
		echo "error: mpicc.mpich not found, cannot build $@: install the Debian package libmpich-dev and re-run configure" >&2; \
		exit 1; \
	fi
	$(AM_V_CC)$(MKDIR_P) test/mpi/mpich && \
	{ $(MPICC_MPICH) $(MPI_TEST_CFLAGS) \
		-o $@ $(srcdir)/test/mpi/`basename $@`.c || \
	  { echo "error: $(MPICC_MPICH) failed to build $@ (is the Debian package libmpich-dev installed?)" >&2; \
	    exit 1; }; }
