/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Shared setup of the transport tests (test/uct/check_*.c): two hipower
 * interfaces in one process on the first two devices of
 * $HIPOWER_RIG_DEVICES (A sends, B receives, each on its own worker so a
 * test can stop one side), endpoint pairs between them, checksummed
 * messages, and helpers for RMA and wakeup.
 */
#ifndef HIPOWER_TEST_FIXTURE_H_
#define HIPOWER_TEST_FIXTURE_H_

#include <check.h>
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>

#define NUM_AM_IDS      4
#define MAX_PAIRS       4096 /* check_many.c: endpoints per interface */
#define MAX_HELD        64
#define ZCOPY_BUFS      16
#define MSG_HDR_SIZE    sizeof(msg_hdr_t)
#define RX_HEADROOM     80  /* What UCP 1.13 asks for: its descriptor + 32 */


typedef struct {
    uint32_t pair;
    uint32_t seq;
    uint32_t length;   /* Whole AM data, header included */
    uint32_t checksum; /* Of the bytes after the header */
    uint8_t  am_id;
    uint8_t  pad[7];
} msg_hdr_t;

typedef struct {
    uct_component_h    component;
    uct_md_h           md;
    uct_worker_h       worker;
    ucs_async_context_t *async;
    uct_iface_h        iface;
    uct_iface_attr_t   attr;
    uct_device_addr_t  *dev_addr;
    char               dev[64];
} side_t;

typedef struct {
    uct_ep_h  ep_a;         /* A -> B */
    uct_ep_h  ep_b;         /* B -> A, only to connect */
    uint32_t  next_seq;     /* Sender */
    uint32_t  expected_seq; /* Receiver */
} pair_t;

typedef struct {
    uct_completion_t comp;
    void             *buffer;
    uct_mem_h        memh;
    int              busy;
} zbuf_t;

typedef struct {
    uint8_t  *buf;
    size_t   length;
} pack_arg_t;

typedef struct {
    uct_pending_req_t req;
    pair_t            *pair;
    int               pair_idx;
    size_t            length;
    int               done;
} pending_send_t;

#define RMA_MAX     (4 * 1024 * 1024)
#define RMA_GUARD   0xEE

typedef struct {
    uint8_t          *local;      /* On A */
    uint8_t          *remote;     /* On B: the RMA target */
    uct_mem_h        local_memh, remote_memh;
    uct_rkey_bundle_t rkey;
} rma_bufs_t;

typedef struct {
    const void *src;
    size_t     length;
} rma_pack_arg_t;


extern side_t         side_a, side_b;
extern pair_t         pairs[MAX_PAIRS];
extern int            num_pairs;
extern void           *held[MAX_HELD];
extern int            num_held;
extern double         hold_probability;
/* UCX_HIPOWER_HOLD_SLOTS of the interfaces: most tests check that kept
 * descriptors stay intact, so they let handlers keep them */
extern const char     *hold_slots;
/* check_connect.c: the handshake's settings for open_side(), NULL: the
 * environment's */
extern const char     *cm_connect_to_iface;
extern const char     *cm_timeout;
extern const char     *cm_max_conns;
extern uint64_t       desc_offered;   /* Messages offered with FLAG_DESC */
extern int            errors;
extern uint64_t       received, rx_bytes;
extern zbuf_t         zbufs[ZCOPY_BUFS];
extern unsigned       ep_errors_a;    /* Interface A's error handler calls */
extern ucs_status_t   ep_error_status;
extern unsigned       ep_errors_b;    /* Interface B's error handler calls */
/* The error handler purges the endpoint's pending requests first, as
 * UCP's does; and how many times it returned */
extern int            error_handler_purges;
extern unsigned       error_handler_returns;
extern pthread_t      error_handler_thread; /* Of its last call */
extern ucs_status_t   ep_error_status_b;

ucs_status_t fixture_config_modify(void *config, const char *name,
                                   const char *value);
unsigned next_rand(void);
uint32_t checksum(const uint8_t *p, size_t n);
void fill_message(void *buf, uint32_t pair, uint32_t seq, uint8_t am_id,
                  size_t length);
/* Whether a received message is intact; does not check its order */
int message_intact(const void *data, size_t length, uint8_t am_id);
ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags);
/* Releases kept descriptors after checking they were not overwritten */
void release_held(int keep);
void progress(int a, int b);
ucs_status_t ep_error_handler(void *arg, uct_ep_h ep, ucs_status_t status);
/* The transport under test (HIPOWER_TEST_TL, default hipower) and its
 * UCT component */
const char *fixture_tl(void);
const char *fixture_component(void);
void open_side(side_t *side, const char *dev);
void close_side(side_t *side);
void connect_pair(pair_t *pair);
/* A pair whose sending end is on @a from instead of A */
void connect_pair_from(pair_t *pair, side_t *from);
void setup_pairs(int n);
void flush_comp_cb(uct_completion_t *self);
/* Flushes every endpoint and waits, progressing only the sender side */
void flush_all(void);
void iface_flush_a(void);
void teardown_pairs(void);
size_t pack_cb(void *dest, void *arg);
void zbuf_comp_cb(uct_completion_t *self);
/* One message of @a length bytes with layout 0 (short), 1 (bcopy) or 2
 * (zcopy); UCS_ERR_NO_RESOURCE if the transport has no room right now */
ucs_status_t send_one(pair_t *pair, int pair_idx, uint8_t am_id,
                      size_t length, int layout);
void alloc_zbufs(void);
void free_zbufs(void);
uint64_t total_sent(void);
void wait_all_received(void);
size_t random_length(int layout);
/* @a length, within what layout @a layout of send_one() takes */
size_t fit_length(size_t length, int layout);
ucs_status_t pending_cb(uct_pending_req_t *self);
void purge_cb(uct_pending_req_t *req, void *arg);

size_t rma_pack_cb(void *dest, void *arg);
void rma_unpack_cb(void *arg, const void *data, size_t length);
void fill_pattern(uint8_t *p, size_t n, unsigned seed);
void rma_setup(rma_bufs_t *b);
void rma_cleanup(rma_bufs_t *b);
void rma_wait(ucs_status_t status, uct_completion_t *comp, const char *what,
              size_t length);
void rma_check(const uint8_t *got, const uint8_t *want, size_t length,
               const char *what);
void rma_comp_init(uct_completion_t *comp);

/* Progresses B alone for @a seconds (its own reads complete meanwhile) */
void progress_b_for(double seconds);
/* B arms until the interface lets it sleep */
void arm_b_until_ok(const char *what);
/* Progresses B until it has received one message more than @a before */
void wait_received_one(uint64_t before);
/* Sets up @a num pairs for a wakeup test and @a pfd to poll B's event fd;
 * returns 0 (pairs torn down) in a mode without one, which must say so */
int wakeup_setup(int num, struct pollfd *pfd);

/* Seconds on the monotonic clock */
double now_sec(void);

/*
 * tcase_set_timeout(), bounded on the simulated device: there a case takes
 * seconds (the longest, about 11 s), and one that hangs must fail at its
 * own timeout, reported by Check with its name, and not hold the mode for
 * the rig's allowance (up to 1,800 s) until run-sim's own limit ends
 * everything. The bound is HIPOWER_SIM_CASE_TIMEOUT seconds (run-sim sets
 * it; 120 if unset).
 */
void case_timeout(TCase *tcase, double seconds);

/* The test cases of each file */
void add_transport_tests(Suite *suite);
/* hipower, self mode (check_conformance.c): pair 0's peer writes
 * @a image, a frame and its trailer, as B's message @a seq + 1 and sends
 * message @a seq; B must deliver it and @a delivered more, then fail that
 * endpoint once, while pair 1 goes on */
struct uct_hipower_ep_addr;
void hostile_frame_fails(const struct uct_hipower_ep_addr *addr, uint32_t seq,
                         const void *image, size_t length, unsigned delivered,
                         const char *what);

/* hipower: the number of slots B's endpoint of pair @a p gives its peer */
unsigned b_slots(int p);

void add_conformance_tests(Suite *suite);
/* check_reentry.c: handlers that cancel their endpoint or progress again */
void add_reentry_tests(Suite *suite);
void add_bundle_tests(Suite *suite);
/* check_bundling.c: A sends pair 0's messages @a first.. + @a n without
 * progress, then progresses alone until no bundle is open */
void bundle_burst(unsigned first, unsigned n);
void add_port_down_test(Suite *suite);
/* check_connect.c: its cases that set a link down, into port_down */
void add_connect_port_down_tests(TCase *tcase);
void add_many_peers_test(Suite *suite);
void add_connect_tests(Suite *suite);

#endif
