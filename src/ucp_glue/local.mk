# UCP glue programs (included from Makefile.am)

# hipower-lanes: which transport UCP puts on the eager and rendezvous lanes
# between two local devices (ucp_ep_print_info of a checked A->B connection).
# "=": Makefile.am defines no other bin_PROGRAMS (automake refuses "+=" first)
bin_PROGRAMS = src/ucp_glue/hipower-lanes
src_ucp_glue_hipower_lanes_SOURCES  = src/ucp_glue/hipower-lanes.c
src_ucp_glue_hipower_lanes_CPPFLAGS = $(UCP_CFLAGS)
src_ucp_glue_hipower_lanes_CFLAGS   = $(HIPOWER_CFLAGS)
src_ucp_glue_hipower_lanes_LDADD    = $(UCP_LIBS)
