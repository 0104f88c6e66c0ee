# UCT benchmark programs (included from Makefile.am; "make bench-programs")

# Instructions per message on each side of any UCT transport, for callgrind:
# run by contrib/bench/cpu.sh
EXTRA_PROGRAMS += test/bench/uct/uct_msgcost
test_bench_uct_uct_msgcost_SOURCES  = test/bench/uct/uct_msgcost.c
test_bench_uct_uct_msgcost_CPPFLAGS = $(UCX_CFLAGS)
test_bench_uct_uct_msgcost_CFLAGS   = $(HIPOWER_CFLAGS)
test_bench_uct_uct_msgcost_LDADD    = $(UCX_LIBS)
BENCH_DEPS += test/bench/uct/uct_msgcost
CLEANFILES += test/bench/uct/uct_msgcost
