# UCP consumer programs (included from Makefile.am)

# Checksummed tag, stream, AM and RMA traffic between two processes, peer
# failure and wakeup modes: run by test/rig-tests/t_ucp_*.sh
check_PROGRAMS += test/ucp/ucp_consumer
test_ucp_ucp_consumer_SOURCES  = test/ucp/ucp_consumer.c
test_ucp_ucp_consumer_CPPFLAGS = $(UCP_CFLAGS)
test_ucp_ucp_consumer_CFLAGS   = $(HIPOWER_CFLAGS)
test_ucp_ucp_consumer_LDADD    = $(UCP_LIBS)
