# UCP-level multi-process workloads of the benchmark suite (included from
# Makefile.am): incast broadcast/gather, the ResNet-152 parameter-server
# flow and a TeraSort-style shuffle, run by contrib/bench/{incast,resnet,
# shuffle}.sh through contrib/bench/ucp-launch. Built by "make bench-programs".
# (Makefile.am does not define EXTRA_PROGRAMS, and automake refuses "+=" on
# an unset variable: this file, included first, sets it.)
EXTRA_PROGRAMS  = test/bench/ucp/ucp_workloads
BENCH_DEPS     += test/bench/ucp/ucp_workloads
test_bench_ucp_ucp_workloads_SOURCES  = \
	test/bench/ucp/wl.h \
	test/bench/ucp/wl_util.c \
	test/bench/ucp/wl_ctl.c \
	test/bench/ucp/wl_ucp.c \
	test/bench/ucp/wl_incast.c \
	test/bench/ucp/wl_resnet.c \
	test/bench/ucp/wl_shuffle.c \
	test/bench/ucp/wl_connect.c \
	test/bench/ucp/wl_main.c
test_bench_ucp_ucp_workloads_CPPFLAGS = $(UCP_CFLAGS)
test_bench_ucp_ucp_workloads_CFLAGS   = $(HIPOWER_CFLAGS)
test_bench_ucp_ucp_workloads_LDADD    = $(UCP_LIBS)
