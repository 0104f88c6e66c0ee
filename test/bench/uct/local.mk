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

# Counts the verbs work (work requests, completions) of any process it is
# preloaded into: run by contrib/bench/wire.sh. A plain shared object, not a
# libtool library: it is only ever LD_PRELOADed from the build tree.
test/bench/uct/libverbs_count.so: $(srcdir)/test/bench/uct/verbs_count.c
	$(AM_V_CC)$(CC) $(CPPFLAGS) $(HIPOWER_CFLAGS) $(CFLAGS) -shared -fPIC \
		-o $@ $< $(VERBS_LIBS) $(DL_LIBS)
BENCH_DEPS += test/bench/uct/libverbs_count.so
CLEANFILES += test/bench/uct/libverbs_count.so
