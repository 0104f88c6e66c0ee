/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * What UCT's contract asks of every transport, and resource handling as
 * careful as UCX's RC transport, through UCT's public API (fixture.c). Each
 * test failed against the transport before the change it checks.
 *  - a message is seen by the receiver with no further call of the sender;
 *  - am_short is bounded by the slot as well as by the inline size;
 *  - an interface fence orders a put after a get that fills its source;
 *  - flush(CANCEL) completes what is outstanding at once, canceled, and
 *    leaves the endpoint in error without calling the error handler;
 *  - endpoints failing together with full send queues do not overrun the
 *    completion queue: every one of them reports, and the interface works
 *    afterwards;
 *  - a peer that scribbles over its slots and control words corrupts only
 *    its own messages, never what the receiver keeps or its control flow;
 *  - nothing of the transport's own goes to a peer whose QP is not ready
 *    yet, or that closed its endpoint in order: no error for either;
 *  - an interface closed with endpoints open neither crashes nor leaks;
 *  - a process that exits with endpoints open is gone at once;
 *  - endpoints created, connected and destroyed in UCX's async thread (as
 *    UCP's wire-up does) while the user's thread sends and progresses;
 *  - at default settings one interface serves at least the max_num_eps it
 *    reports, 256 or more, and refuses an endpoint only when out of room;
 *  - the data handed to AM handlers is aligned as the interface asked;
 *  - a peer waiting for a run is not tried again on every progress call
 *    while nothing changed, and is served as soon as slots come back;
 *  - the credit recall looks at the endpoints that hold credits, not at
 *    every endpoint of the interface;
 *  - a port that goes down fails the endpoints on it (device event).
 */
#include "fixture.h"

#include <hipower_wire.h>
#include <hipower_slot.h>
#include <hipower_bitmap.h>
#include <hipower_iface.h>
#include <hipower_ep.h>
#include <hipower_grant.h>

#include <ucs/async/async.h>

#include <inttypes.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>


/* A's transport counters (hipower_stats.h) */
static const uct_hipower_stats_t *a_stats(void)
{
    return &ucs_derived_of(side_a.iface, uct_hipower_iface_t)->stats;
}

/*
 * Once a send returned UCS_OK the sender calls nothing more: B's progress
 * alone must deliver the message (one announced only by the sender's next
 * call would never arrive). Three times: with the window 'auto' (1:
 * the sender, which never progresses, has its frame in flight and the
 * window holds the next message), where the completion event of the frame
 * ahead of it must post it -- UCX's async thread -- and never the safety
 * timer, set to 1 s here; with a window of 2; and with the event off
 * (UCX_HIPOWER_BUNDLE_EVENT=n), where the timer (BUNDLE_HOLD_TIME) has to.
 */
START_TEST(test_delivery_needs_no_sender_call)
{
    ucs_status_t status;
    unsigned n, spins;
    uint64_t before;

    if (!strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "push", "pull")) {
        /* The paper's mode: the receiver reads the sender's published
         * bitmap, which the sender updates when its writes have completed
         * -- in its own progress. Not the default, for comparison only. */
        printf("delivery without a sender call: not in pull mode\n");
        return;
    }

    /* 'auto': 1 where the async context has a thread (not the default
     * yet: docs/protocol.md 2.1) */
    setenv("UCX_HIPOWER_BUNDLE_WINDOW", (_i == 1) ? "2" : "auto", 1);
    if (_i < 2) {
        setenv("UCX_HIPOWER_BUNDLE_HOLD_TIME", "1s", 1);
    } else {
        setenv("UCX_HIPOWER_BUNDLE_EVENT", "n", 1);
    }
    setup_pairs(2);
    alloc_zbufs();
    hold_probability = 0;
    for (n = 0; n < 64; ++n) {
        /* Before a send, the sender may progress to find room */
        before = received;
        while ((status = send_one(&pairs[n % 2], n % 2, n % NUM_AM_IDS,
                                  fit_length(24 + (n * 97) % 2000, n % 3),
                                  n % 3)) == UCS_ERR_NO_RESOURCE) {
            progress(1, 0);
        }
        ck_assert_int_eq(status, UCS_OK);
        for (spins = 0; (received == before) && (spins < 2000000); ++spins) {
            progress(0, 1);
        }
        ck_assert_msg(received == before + 1, "message %u was not delivered "
                      "without a call of the sender", n);
    }
    printf("delivery without a sender call (%s): %" PRIu64 " sends held "
           "by the window, %" PRIu64 " CQ arms, %" PRIu64 " events, %"
           PRIu64 " bundles posted on them, %" PRIu64 " by the safety "
           "timer\n", (_i == 0) ? "window auto" : (_i == 1) ? "window 2" :
           "no event", a_stats()->tx_window, a_stats()->tx_hold_arms,
           a_stats()->tx_cq_events, a_stats()->tx_event_posts,
           a_stats()->hold_timer_posts);
    if (_i < 2) {
        /* The window held messages (the first refusals, tx_window) and
         * only the completion event could post them: the 1 s timer never
         * had to */
        ck_assert_uint_gt(a_stats()->tx_window, 0);
        ck_assert_uint_gt(a_stats()->tx_event_posts, 0);
        ck_assert_uint_eq(a_stats()->hold_timer_posts, 0);
    } else {
        ck_assert_uint_gt(a_stats()->hold_timer_posts, 0);
        ck_assert_uint_eq(a_stats()->tx_event_posts, 0);
    }
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * Slots of 256 bytes and inline writes up to 384 bytes: am_short must stay
 * within the slot (240 bytes of header and data), not the inline size.
 */
START_TEST(test_am_short_bounded_by_slot)
{
    static uint8_t buf[1024];
    size_t max;
    unsigned spins;

    setenv("UCX_HIPOWER_SLOT_SIZE", "256", 1);
    setenv("UCX_HIPOWER_TX_MAX_INLINE", "384", 1);
    setup_pairs(1);
    max = side_a.attr.cap.am.max_short;
    printf("am_short limit with 256-byte slots, 384-byte inline: %zu\n", max);
    /* The frame: the message and its 8-byte trailer (hipower_slot.h) */
    ck_assert_uint_le(max + 8, 256);
    ck_assert_uint_le(side_a.attr.cap.am.max_bcopy + 8, 256);

    /* The largest one arrives intact */
    ck_assert_int_eq(send_one(&pairs[0], 0, 1, max, 0), UCS_OK);
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received == 0) && (spins < 2000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 1);
    ck_assert_int_eq(errors, 0);

    /* One byte more is refused */
    memset(buf, 0, sizeof(buf));
    ck_assert_int_eq(uct_ep_am_short(pairs[0].ep_a, 1, 0, buf, max - 8 + 1),
                     UCS_ERR_INVALID_PARAM);
    teardown_pairs();
}
END_TEST

/*
 * Bad input to the active-message sends: an AM id out of range (am_short,
 * am_bcopy, am_zcopy), a zero-copy header, gather list or length over the
 * limits the interface reports. Each is refused with
 * UCS_ERR_INVALID_PARAM, nothing is sent, no packer runs, and the endpoint
 * stays usable: the next valid message arrives intact and nothing else
 * does.
 */
START_TEST(test_am_bad_input)
{
    static uint8_t buf[256];
    uct_iov_t iov[UCT_HIPOWER_MAX_IOV + 1];
    uct_mem_h memh;
    pack_arg_t pack;
    unsigned i, spins;
    uct_hipower_iface_t *ia;
    uint64_t tx_msgs;
    void *zbuf;
    size_t max_hdr;

    setup_pairs(1);
    ia      = ucs_derived_of(side_a.iface, uct_hipower_iface_t);
    tx_msgs = ia->stats.tx_msgs;
    memset(buf, 0, sizeof(buf));
    ck_assert_int_eq(uct_ep_am_short(pairs[0].ep_a, UCT_AM_ID_MAX, 0, buf, 8),
                     UCS_ERR_INVALID_PARAM);
    pack.buf    = buf;
    pack.length = 16;
    ck_assert_int_eq(uct_ep_am_bcopy(pairs[0].ep_a, UCT_AM_ID_MAX, pack_cb,
                                     &pack, 0), UCS_ERR_INVALID_PARAM);

    zbuf = malloc(side_a.attr.cap.am.max_zcopy);
    ck_assert_ptr_ne(zbuf, NULL);
    ck_assert_int_eq(uct_md_mem_reg(side_a.md, zbuf,
                                    side_a.attr.cap.am.max_zcopy,
                                    UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    for (i = 0; i <= UCT_HIPOWER_MAX_IOV; ++i) {
        iov[i].buffer = zbuf;
        iov[i].length = 8;
        iov[i].memh   = memh;
        iov[i].stride = 0;
        iov[i].count  = 1;
    }
    ck_assert_int_eq(uct_ep_am_zcopy(pairs[0].ep_a, UCT_AM_ID_MAX, buf, 8,
                                     iov, 1, 0, NULL), UCS_ERR_INVALID_PARAM);
    /* Past each limit the interface reports */
    max_hdr = side_a.attr.cap.am.max_hdr;
    ck_assert_uint_lt(max_hdr, sizeof(buf));
    ck_assert_int_eq(uct_ep_am_zcopy(pairs[0].ep_a, 1, buf, max_hdr + 1,
                                     iov, 1, 0, NULL), UCS_ERR_INVALID_PARAM);
    ck_assert_uint_le(side_a.attr.cap.am.max_iov, UCT_HIPOWER_MAX_IOV);
    ck_assert_int_eq(uct_ep_am_zcopy(pairs[0].ep_a, 1, buf, 8, iov,
                                     side_a.attr.cap.am.max_iov + 1, 0, NULL),
                     UCS_ERR_INVALID_PARAM);
    iov[0].length = side_a.attr.cap.am.max_zcopy;
    ck_assert_int_eq(uct_ep_am_zcopy(pairs[0].ep_a, 1, buf, 8, iov, 1, 0,
                                     NULL), UCS_ERR_INVALID_PARAM);

    /* Nothing went; the endpoint still works */
    ck_assert_uint_eq(ia->stats.tx_msgs, tx_msgs);
    ck_assert_int_eq(send_one(&pairs[0], 0, 1, fit_length(64, 1), 1), UCS_OK);
    flush_all();
    for (spins = 0; (received == 0) && (spins < 2000000); ++spins) {
        progress(1, 1);
    }
    for (spins = 0; spins < 10000; ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 1);
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(ep_errors_a + ep_errors_b, 0);
    ck_assert_int_eq(uct_md_mem_dereg(side_a.md, memh), UCS_OK);
    free(zbuf);
    teardown_pairs();
}
END_TEST

/*
 * get_zcopy of B's buffer X into A's buffer L, uct_iface_fence(), then
 * put_zcopy of L into B's buffer Y: the put must send what the get
 * brought. Without the fence a device may read L for the put before the
 * get's data has landed in it. (rxe holds a write back behind a large read
 * by itself, so there the rig test also checks that the puts went out with
 * IBV_SEND_FENCE, by the fenced_wrs counter.)
 */
START_TEST(test_iface_fence_orders_get_then_put)
{
    /* Large: the get's data is still coming when the put is posted */
    const size_t size = 4 * 1024 * 1024;
    uct_mem_h x_memh, y_memh, l_memh;
    uint8_t *x, *y, *l;
    uct_rkey_bundle_t x_rkey, y_rkey;
    uct_completion_t comp;
    void *rkey_buf;
    ucs_status_t status;
    unsigned round, stale = 0;
    uct_iov_t iov;

    setup_pairs(1);
    x = malloc(size);
    y = malloc(size);
    l = malloc(size);
    ck_assert_int_eq(uct_md_mem_reg(side_b.md, x, size, UCT_MD_MEM_ACCESS_ALL,
                                    &x_memh), UCS_OK);
    ck_assert_int_eq(uct_md_mem_reg(side_b.md, y, size, UCT_MD_MEM_ACCESS_ALL,
                                    &y_memh), UCS_OK);
    ck_assert_int_eq(uct_md_mem_reg(side_a.md, l, size, UCT_MD_MEM_ACCESS_ALL,
                                    &l_memh), UCS_OK);
    rkey_buf = malloc(64);
    ck_assert_int_eq(uct_md_mkey_pack(side_b.md, x_memh, rkey_buf), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(side_b.component, rkey_buf, &x_rkey),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(side_b.md, y_memh, rkey_buf), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(side_b.component, rkey_buf, &y_rkey),
                     UCS_OK);

    iov.buffer = l;
    iov.length = size;
    iov.memh   = l_memh;
    iov.stride = 0;
    iov.count  = 1;
    for (round = 0; round < 5; ++round) {
        fill_pattern(x, size, 2 * round + 1);
        fill_pattern(l, size, 2 * round + 2);  /* Stale until the get */
        memset(y, 0, size);

        rma_comp_init(&comp);
        status = uct_ep_get_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)x,
                                  x_rkey.rkey, &comp);
        ck_assert_int_eq(status, UCS_INPROGRESS);
        ck_assert_int_eq(uct_iface_fence(side_a.iface, 0), UCS_OK);
        status = uct_ep_put_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)y,
                                  y_rkey.rkey, NULL);
        ck_assert(!UCS_STATUS_IS_ERR(status));
        flush_all();
        ck_assert_int_eq(comp.count, 0);
        stale += (memcmp(y, x, size) != 0);
    }
    printf("fence: %u of 5 puts sent stale data\n", stale);
    ck_assert_uint_eq(stale, 0);

    uct_rkey_release(side_b.component, &x_rkey);
    uct_rkey_release(side_b.component, &y_rkey);
    free(rkey_buf);
    uct_md_mem_dereg(side_b.md, x_memh);
    uct_md_mem_dereg(side_b.md, y_memh);
    uct_md_mem_dereg(side_a.md, l_memh);
    free(x);
    free(y);
    free(l);
    teardown_pairs();
}
END_TEST

static unsigned canceled_comps;

static void cancel_comp_cb(uct_completion_t *self)
{
    if (self->status == UCS_ERR_CANCELED) {
        ++canceled_comps;
    } else {
        fprintf(stderr, "canceled operation completed with %s\n",
                ucs_status_string(self->status));
        ++errors;
    }
}

static unsigned ended_comps;

static void ended_comp_cb(uct_completion_t *self)
{
    if ((self->status == UCS_OK) || (self->status == UCS_ERR_CANCELED)) {
        ++ended_comps;
    } else {
        fprintf(stderr, "write of a destroyed endpoint ended with %s\n",
                ucs_status_string(self->status));
        ++errors;
    }
}

/* Posts 4 KB writes on pair 0 until the send queue is full */
static unsigned fill_send_queue(rma_bufs_t *b, uct_completion_t *comps,
                                unsigned max)
{
    ucs_status_t status;
    uct_iov_t iov;
    unsigned i;

    iov.buffer = b->local;
    iov.length = 4096;
    iov.memh   = b->local_memh;
    iov.stride = 0;
    iov.count  = 1;
    for (i = 0; i < max; ++i) {
        comps[i].func   = ended_comp_cb;
        comps[i].count  = 1;
        comps[i].status = UCS_OK;
        status = uct_ep_put_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)b->remote,
                                  b->rkey.rkey, &comps[i]);
        if (status != UCS_INPROGRESS) {
            ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
            break;
        }
    }
    ck_assert_uint_lt(i, max);
    return i;
}

/*
 * An endpoint destroyed with a full send queue: its operations end at
 * once, and its QP is moved to error and drained before the completion
 * queue credits its requests hold are given to anyone else. Forty rounds
 * of "fill, destroy at once" on one pair of interfaces (ten times what the
 * completion queue holds) leave them able to post as many requests as at
 * the start, and the last endpoint's messages all arrive intact: credits
 * lost with a destroyed QP would stall the interface, a stale completion
 * taken for a new endpoint's would end its requests early.
 */
START_TEST(test_destroy_drains_qp)
{
    static uct_completion_t comps[1024];
    const unsigned max = sizeof(comps) / sizeof(comps[0]);
    unsigned round, posted, first = 0, total = 0, i;
    ucs_status_t status;
    double start;
    rma_bufs_t b;

    setup_pairs(1);
    rma_setup(&b);
    ended_comps = 0;
    for (round = 0; round < 40; ++round) {
        if (round > 0) {
            connect_pair(&pairs[0]);
        }
        /* Both sides progressed once: the first contact settles */
        progress(1, 1);
        posted = fill_send_queue(&b, comps, max);
        if (round == 0) {
            first = posted;
            ck_assert_uint_gt(first, 0);
        }
        ck_assert_msg(posted == first, "round %u: %u writes posted before the "
                      "send queue was full, %u in the first round", round,
                      posted, first);
        total += posted;
        uct_ep_destroy(pairs[0].ep_a);
        uct_ep_destroy(pairs[0].ep_b);
        pairs[0].ep_a = pairs[0].ep_b = NULL;
        ck_assert_msg(ended_comps == total, "round %u: %u of %u writes of "
                      "destroyed endpoints ended", round, ended_comps, total);
        /* Their QPs drain while the interfaces are progressed */
        for (start = now_sec(); now_sec() - start < 0.05;) {
            progress(1, 1);
        }
    }

    /* Messages on a new endpoint, every one checked */
    connect_pair(&pairs[0]);
    for (i = 0; i < 2000; ++i) {
        start = now_sec();
        while ((status = send_one(&pairs[0], 0, i % NUM_AM_IDS,
                                  64 + (i * 131) % 2000, 1)) ==
               UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
            ck_assert_msg(now_sec() - start < 10, "message %u: no send "
                          "resources for 10 s", i);
        }
        ck_assert_int_eq(status, UCS_OK);
    }
    flush_all();

    for (start = now_sec(); (received < 2000) && (now_sec() - start < 10);) {
        progress(1, 1);
    }
    printf("destroy: 40 endpoints destroyed with %u writes out; then 2000 "
           "messages, %lu received\n", total, (unsigned long)received);
    ck_assert_uint_eq(received, 2000);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_int_eq(errors, 0);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/*
 * flush(CANCEL) on an endpoint whose peer is gone, with writes outstanding
 * that would only fail after the transport's whole retry time (7 s here):
 * every one completes at once with UCS_ERR_CANCELED, the flush returns,
 * the endpoint is in error, the error handler is not called (the user
 * asked for it), and pending requests stay for the user's purge.
 */
START_TEST(test_flush_cancel)
{
    static uct_completion_t comps[1024];
    static pending_send_t req;
    unsigned posted = 0, purged = 0, i;
    uct_completion_t flush_comp;
    ucs_status_t status;
    double start;
    uct_iov_t iov;
    rma_bufs_t b;

    setup_pairs(1);
    rma_setup(&b);
    uct_ep_destroy(pairs[0].ep_b);
    pairs[0].ep_b = NULL;

    iov.buffer = b.local;
    iov.length = 4096;
    iov.memh   = b.local_memh;
    iov.stride = 0;
    iov.count  = 1;
    for (i = 0; i < sizeof(comps) / sizeof(comps[0]); ++i) {
        comps[i].func   = cancel_comp_cb;
        comps[i].count  = 1;
        comps[i].status = UCS_OK;
        status = uct_ep_put_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)b.remote,
                                  b.rkey.rkey, &comps[i]);
        if (status != UCS_INPROGRESS) {
            ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
            break;
        }
        ++posted;
    }
    /* Until the send queue is full: the next request waits pending */
    ck_assert_uint_gt(posted, 0);
    ck_assert_uint_lt(posted, sizeof(comps) / sizeof(comps[0]));
    req.req.func = pending_cb;
    req.pair     = &pairs[0];
    req.pair_idx = 0;
    req.length   = 64;
    req.done     = 0;
    ck_assert_int_eq(uct_ep_pending_add(pairs[0].ep_a, &req.req, 0), UCS_OK);

    start = now_sec();
    canceled_comps = 0;
    flush_comp.func   = flush_comp_cb;
    flush_comp.count  = 1;
    flush_comp.status = UCS_OK;
    status = uct_ep_flush(pairs[0].ep_a, UCT_FLUSH_FLAG_CANCEL, &flush_comp);
    ck_assert_msg((status == UCS_OK) || (status == UCS_INPROGRESS),
                  "flush(CANCEL): %s", ucs_status_string(status));
    while (((status == UCS_INPROGRESS) && (flush_comp.count > 0)) ||
           (canceled_comps < posted)) {
        progress(1, 0);
        ck_assert_msg(now_sec() - start < 2.0, "flush(CANCEL) did not "
                      "complete within 2 s: %u of %u canceled",
                      canceled_comps, posted);
    }
    printf("flush(CANCEL): %u writes canceled in %.3f s\n", canceled_comps,
           now_sec() - start);
    ck_assert_uint_eq(canceled_comps, posted);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_int_eq(req.done, 0);

    /* In error now: nothing more goes out */
    status = uct_ep_put_short(pairs[0].ep_a, b.local, 8, (uintptr_t)b.remote,
                              b.rkey.rkey);
    ck_assert_msg(UCS_STATUS_IS_ERR(status), "put after flush(CANCEL): %s",
                  ucs_status_string(status));
    uct_ep_pending_purge(pairs[0].ep_a, purge_cb, &purged);
    ck_assert_uint_eq(purged, 1);
    ck_assert_int_eq(errors, 0);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/*
 * 32 endpoints whose peer dies while each has as many writes out as the
 * transport takes, with a completion queue far smaller than all of them:
 * when the QPs fail, every request completes (flushed), signaled or not.
 * None may be lost to a CQ overrun: every endpoint reports its failure,
 * and the interface carries new traffic afterwards.
 */
START_TEST(test_mass_failure_cq)
{
    const int n = 32;
    unsigned outstanding = 0, spins, with_writes;
    int busy[32], more;
    ucs_status_t status;
    rma_bufs_t b;
    double start;
    int p, i;

    setenv("UCX_HIPOWER_TIMEOUT", "50ms", 1);
    setenv("UCX_HIPOWER_RETRY_COUNT", "3", 1);
    setenv("UCX_HIPOWER_TX_CQ_LEN", "256", 1);
    setenv("UCX_HIPOWER_TX_QUEUE_LEN", "256", 1);
    setup_pairs(n);
    rma_setup(&b);

    /* The peers die first, so nothing completes before the failure */
    for (p = 0; p < n; ++p) {
        uct_ep_destroy(pairs[p].ep_b);
        pairs[p].ep_b = NULL;
    }

    /* Round robin until no endpoint takes more: every one has writes out,
     * together as many as the interface lets out */
    memset(busy, 0, sizeof(busy));
    do {
        more = 0;
        for (p = 0; p < n; ++p) {
            status = uct_ep_put_short(pairs[p].ep_a, b.local, 8,
                                      (uintptr_t)b.remote, b.rkey.rkey);
            if (status == UCS_OK) {
                ++outstanding;
                busy[p] = more = 1;
            } else {
                ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
            }
        }
    } while (more && (outstanding < 100000));
    for (p = 0, with_writes = 0; p < n; ++p) {
        with_writes += busy[p];
    }
    printf("mass failure: %u writes out on %u endpoints, CQ for 256 "
           "requests\n", outstanding, with_writes);
    ck_assert_uint_eq(with_writes, n);

    start = now_sec();
    while ((ep_errors_a < (unsigned)n) && (now_sec() - start < 30)) {
        progress(1, 1);
    }
    printf("mass failure: %u of %d endpoints reported in %.2f s\n",
           ep_errors_a, n, now_sec() - start);
    ck_assert_uint_eq(ep_errors_a, n);

    /* The flushed completions went somewhere: the interface is healthy */
    for (p = 0; p < n; ++p) {
        uct_ep_destroy(pairs[p].ep_a);
        pairs[p].ep_a = NULL;
    }
    for (spins = 0; spins < 10000; ++spins) {
        progress(1, 1);
    }
    connect_pair(&pairs[0]);
    num_pairs = 1;
    alloc_zbufs();
    for (i = 0; i < 1000; ++i) {
        while (send_one(&pairs[0], 0, 1, fit_length(64 + i % 512, i % 3),
                        i % 3) ==
               UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    wait_all_received();
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/* A test peer's raw write of @a length bytes at @a addr/@a rkey, over the
 * endpoint, as hostile as it likes */
static void raw_write(uct_ep_h ep, uint64_t addr, uint32_t rkey,
                      const void *data, size_t length)
{
    rma_pack_arg_t pack = {data, length};
    ssize_t ret;

    do {
        ret = uct_ep_put_bcopy(ep, rma_pack_cb, &pack, addr, rkey);
        progress(1, 0);
    } while (ret == UCS_ERR_NO_RESOURCE);
    ck_assert_int_eq(ret, length);
}

/* The control words a peer may write (uct_hipower_ep_ctrl_t, from
 * written_view up to run_req's end): the written bitmap view, the sleep
 * and state words, the grant record and the run request word */
#define HOSTILE_CTRL_WRITABLE  (512 + 8 + 8 + 24 + 8)

/* Pair @a p carries 200 messages of every kind, checksummed, each once
 * and in order, with no error */
static void carries_traffic(int p)
{
    unsigned i, spins;

    received              = 0;
    pairs[p].expected_seq = pairs[p].next_seq;
    alloc_zbufs();
    for (i = 0; i < 200; ++i) {
        while (send_one(&pairs[p], p, i % NUM_AM_IDS,
                        fit_length(24 + i * 13, i % 3), i % 3) ==
               UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < 200) && (spins < 20000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 200);
    free_zbufs();
    ck_assert_int_eq(errors, 0);
}

/*
 * A hostile peer: A writes garbage over every one of its slots at B and
 * over every control word it may write (bitmap view, sleep and state
 * words, grant record, run request), while B keeps messages it got
 * (HOLD_SLOTS=y) and B's second endpoint carries traffic. The kept
 * messages stay intact and release cleanly (no pointer of B's lives where
 * A writes), B never delivers what A scribbled, and the other endpoint is
 * untouched. Then (self mode) A writes a frame for B's next message whose
 * key is right and whose length no slot holds: B's endpoint fails through
 * the error handler (UCS_ERR_IO_ERROR) instead of dropping such frames
 * one error line each for ever (review M6), and the other endpoint still
 * carries traffic.
 */
/* Self mode: A writes @a image (@a length bytes: a frame and its trailer,
 * which ends the slot) as B's message @a seq + 1, then sends message
 * @a seq (which wakes B's endpoint if it went idle). B's endpoint for
 * pair 0 must deliver that one and then @a delivered more, then fail,
 * once, and pair 1 must go on. */
void hostile_frame_fails(const uct_hipower_ep_addr_t *addr, uint32_t seq,
                         const void *image, size_t length, unsigned delivered,
                         const char *what)
{
    unsigned spins, i;

    raw_write(pairs[0].ep_a, addr->slots_addr +
              (uint64_t)((seq + 1) % addr->num_slots) * addr->slot_stride +
              addr->trailer_offset + HIPOWER_SLOT_TRAILER_SIZE - length,
              addr->slots_rkey, image, length);
    flush_all();
    ck_assert_uint_eq(pairs[0].next_seq, seq);
    received = 0;
    while (send_one(&pairs[0], 0, 1, 64, 1) == UCS_ERR_NO_RESOURCE) {
        progress(1, 1);
    }
    flush_all();
    for (spins = 0; (ep_errors_b == 0) && (spins < 2000000); ++spins) {
        progress(0, 1);
    }
    ck_assert_msg(ep_errors_b == 1, "B's endpoint of a peer that wrote %s "
                  "got %u error callbacks", what, ep_errors_b);
    ck_assert_int_eq(ep_error_status_b, UCS_ERR_IO_ERROR);
    ck_assert_uint_eq(received, 1 + delivered);
    printf("hostile peer: %s failed its endpoint (%s) after %u message(s) "
           "before it\n", what, ucs_status_string(ep_error_status_b),
           1 + delivered);

    /* The other endpoint goes on */
    received = 0;
    for (i = 0; i < 50; ++i) {
        while (send_one(&pairs[1], 1, 1, 64, i % 2) == UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    flush_all();
    for (spins = 0; (received < 50) && (spins < 20000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 50);
    ck_assert_uint_eq(ep_errors_b, 1);
    ck_assert_int_eq(errors, 0);
}

/* A trailer with the right key and a length longer than a slot */
static void hostile_bad_frame(const uct_hipower_ep_addr_t *addr, uint32_t seq)
{
    uint8_t trailer[16];

    hipower_slot_trailer_store(trailer, 1, addr->slot_stride, seq + 1, 0);
    hostile_frame_fails(addr, seq, trailer, sizeof(trailer), 0,
                        "a frame too long for its slot");
}

START_TEST(test_hostile_peer_scribbles)
{
    uct_hipower_ep_addr_t addr;
    uint8_t garbage[8192];
    unsigned i, spins, held_before;
    size_t off, total, chunk;

    /* One frame per message: the hostile frame's slot is known */
    setenv("UCX_HIPOWER_BUNDLE_WINDOW", "0", 1);
    setup_pairs(2);
    hold_probability = 1.0;
    for (i = 0; i < 16; ++i) {
        ck_assert_int_eq(send_one(&pairs[0], 0, 1, 200 + i, 1), UCS_OK);
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < 16) && (spins < 2000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 16);
    held_before = num_held;
    ck_assert_uint_gt(held_before, 0);
    hold_probability = 0;

    /* B's address for A: where A may write, as a peer learns it */
    ck_assert_uint_eq(side_b.attr.ep_addr_len, sizeof(addr));
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_b,
                                        (uct_ep_addr_t*)&addr), UCS_OK);
    for (i = 0; i < sizeof(garbage); ++i) {
        garbage[i] = (uint8_t)(next_rand() | 1);
    }
    total = (size_t)addr.num_slots * addr.slot_stride;
    for (off = 0; off < total; off += chunk) {
        chunk = sizeof(garbage) / 2;
        if (chunk > total - off) {
            chunk = total - off;
        }
        raw_write(pairs[0].ep_a, addr.slots_addr + off, addr.slots_rkey,
                  garbage, chunk);
    }
    /* The written-bitmap view and every word after it that A may write */
    raw_write(pairs[0].ep_a, addr.ctrl_write_addr, addr.ctrl_write_rkey,
              garbage, HOSTILE_CTRL_WRITABLE);
    flush_all();
    printf("hostile peer: %zu bytes of slots and %d of control words "
           "scribbled, %u messages held\n", total, HOSTILE_CTRL_WRITABLE,
           held_before);

    /* B goes on: it may reject garbage, never crash or hurt the others */
    for (spins = 0; spins < 200000; ++spins) {
        progress(0, 1);
    }
    release_held(0);
    ck_assert_int_eq(errors, 0);

    /* The second endpoint is untouched */
    carries_traffic(1);
    ck_assert_uint_eq(ep_errors_b, 0);

    if (!strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "self")) {
        hostile_bad_frame(&addr, 16);
    }
    teardown_pairs();
}
END_TEST

static int deliver_one(int p, unsigned ms);

/* Progresses A only until its error handler was called @a n times or
 * @a ms passed; whether it was */
static int a_errors_reach(unsigned n, unsigned ms)
{
    double start = now_sec();

    while ((ep_errors_a < n) && (now_sec() - start < ms / 1000.0)) {
        progress(1, 0);
    }
    return ep_errors_a >= n;
}

/*
 * Another peer's rkeys (review H2): a peer that learns or guesses the
 * rkeys of another peer's slots and control words -- here it is simply
 * given them -- and uses them on its own connection. Each region a peer
 * may reach is a type-2 memory window bound to that peer's QP alone
 * (UCX_HIPOWER_MEM_WINDOWS), so the device refuses: the attacker's
 * endpoint fails (its error handler, on its own side), the victim's slots
 * and control words keep every byte, B reads nothing of the victim's
 * bitmaps for the attacker, and the victim's endpoint carries traffic as
 * before, checksummed. Endpoints 1-3 attack endpoint 0's regions at B:
 * writes into its slots, writes into its control words ("closed" in its
 * state word, a grant record, a run request), a read of its bitmaps.
 */
START_TEST(test_foreign_rkey_refused)
{
    uct_hipower_ep_addr_t victim;
    uint8_t garbage[HOSTILE_CTRL_WRITABLE], *slots_copy, *ctrl_copy;
    uint8_t stolen[64];
    size_t slots_len;
    unsigned i;
    ssize_t ret;

    setup_pairs(4);
    hold_probability = 0;
    for (i = 0; i < 8; ++i) {
        ck_assert_msg(deliver_one(0, 5000), "victim: message %u", i);
    }
    ck_assert_uint_eq(side_b.attr.ep_addr_len, sizeof(victim));
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_b,
                                        (uct_ep_addr_t*)&victim), UCS_OK);
    ck_assert_uint_gt(victim.num_slots, 0);
    slots_len  = (size_t)victim.num_slots * victim.slot_stride;
    slots_copy = malloc(slots_len);
    ctrl_copy  = malloc(HOSTILE_CTRL_WRITABLE);
    ck_assert_ptr_nonnull(slots_copy);
    ck_assert_ptr_nonnull(ctrl_copy);
    /* B is in this process: its regions can be compared byte by byte */
    memcpy(slots_copy, (void*)(uintptr_t)victim.slots_addr, slots_len);
    memcpy(ctrl_copy, (void*)(uintptr_t)victim.ctrl_write_addr,
           HOSTILE_CTRL_WRITABLE);
    for (i = 0; i < sizeof(garbage); ++i) {
        garbage[i] = (uint8_t)(next_rand() | 1);
    }
    memcpy(garbage + 512 + 8, "CLOS\0\0\0\0", 8); /* The state word */

    /* Into the victim's slots, over endpoint 1 */
    raw_write(pairs[1].ep_a, victim.slots_addr, victim.slots_rkey, garbage,
              256);
    ck_assert_msg(a_errors_reach(1, 10000), "a write with another peer's "
                  "slots rkey did not fail the writer's endpoint");
    printf("foreign rkey: write into another peer's slots: %s on the "
           "writer's endpoint\n", ucs_status_string(ep_error_status));

    /* Into the victim's control words, over endpoint 2 */
    raw_write(pairs[2].ep_a, victim.ctrl_write_addr, victim.ctrl_write_rkey,
              garbage, HOSTILE_CTRL_WRITABLE);
    ck_assert_msg(a_errors_reach(2, 10000), "a write with another peer's "
                  "control rkey did not fail the writer's endpoint");

    /* A read of the victim's bitmaps, over endpoint 3 */
    memset(stolen, 0, sizeof(stolen));
    do {
        ret = uct_ep_get_bcopy(pairs[3].ep_a, rma_unpack_cb, stolen,
                               sizeof(stolen), victim.ctrl_read_addr,
                               victim.ctrl_read_rkey, NULL);
        progress(1, 0);
    } while (ret == UCS_ERR_NO_RESOURCE);
    ck_assert_msg((ret == UCS_OK) || (ret == UCS_INPROGRESS),
                  "get_bcopy: %s", ucs_status_string((ucs_status_t)ret));
    ck_assert_msg(a_errors_reach(3, 10000), "a read with another peer's "
                  "bitmap rkey did not fail the reader's endpoint");

    ck_assert_msg(!memcmp(slots_copy, (void*)(uintptr_t)victim.slots_addr,
                          slots_len), "the victim's slots were written");
    ck_assert_msg(!memcmp(ctrl_copy, (void*)(uintptr_t)victim.ctrl_write_addr,
                          HOSTILE_CTRL_WRITABLE),
                  "the victim's control words were written");
    printf("foreign rkey: %zu bytes of slots and %d of control words of "
           "the victim unchanged, 3 attacking endpoints failed (%s)\n",
           slots_len, HOSTILE_CTRL_WRITABLE,
           ucs_status_string(ep_error_status));

    /* The victim's connection goes on (B's attacked ends may fail) */
    num_pairs = 1; /* flush_all(): the victim's endpoint only */
    carries_traffic(0);
    num_pairs = 4;
    ck_assert_uint_eq(ep_errors_a, 3);
    free(slots_copy);
    free(ctrl_copy);
    teardown_pairs();
}
END_TEST

/* One pair, connected on A's side only; B connects with *addr_a later
 * (the caller frees both addresses) */
/* Every one of @a sent messages arrived intact and in order, no endpoint
 * failed; then the pairs go */
static void all_arrived_cleanly(uint64_t sent)
{
    ck_assert_uint_eq(received, sent);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_uint_eq(ep_errors_b, 0);
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}

static void connect_a_only(void **addr_a, void **addr_b)
{
    uct_ep_params_t params;

    setup_pairs(0);
    num_pairs = 1;
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_a.iface;
    ck_assert_int_eq(uct_ep_create(&params, &pairs[0].ep_a), UCS_OK);
    params.iface      = side_b.iface;
    ck_assert_int_eq(uct_ep_create(&params, &pairs[0].ep_b), UCS_OK);
    *addr_a = malloc(side_a.attr.ep_addr_len);
    *addr_b = malloc(side_b.attr.ep_addr_len);
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_a, *addr_a), UCS_OK);
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_b, *addr_b), UCS_OK);
    ck_assert_int_eq(uct_ep_connect_to_ep(pairs[0].ep_a, side_b.dev_addr,
                                          *addr_b), UCS_OK);
}

/*
 * A sends before B has connected (UCT allows it: RC sends again until the
 * peer's QP is up, as rc_verbs does). A's hello and first messages reach
 * B's QP before it exists as far as RC is concerned, then while B binds
 * its windows in connect_to_ep: none may hit a window not bound yet (the
 * hello meets "receiver not ready" until B's receives are posted, after
 * the binds). Every message arrives, checksummed, and no endpoint fails.
 */
START_TEST(test_send_before_peer_connects)
{
    void *addr_a, *addr_b;
    unsigned i, sent, spins;
    ucs_status_t status;
    double start;

    setenv("UCX_HIPOWER_TIMEOUT", "50ms", 1);
    setenv("UCX_HIPOWER_RETRY_COUNT", "6", 1);
    connect_a_only(&addr_a, &addr_b);
    pairs[0].next_seq = pairs[0].expected_seq = 0;
    alloc_zbufs();
    /* What A can send at once, B's QP not connected */
    for (sent = 0; sent < 16; ++sent) {
        status = send_one(&pairs[0], 0, 1, fit_length(64 + sent, sent % 3),
                          sent % 3);
        if (status != UCS_OK) {
            ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
            break;
        }
    }
    ck_assert_uint_gt(sent, 0);
    start = now_sec();
    while (now_sec() - start < 0.1) {
        progress(1, 0);
    }
    ck_assert_int_eq(uct_ep_connect_to_ep(pairs[0].ep_b, side_a.dev_addr,
                                          addr_a), UCS_OK);
    free(addr_a);
    free(addr_b);
    for (i = sent; i < sent + 100; ++i) {
        while (send_one(&pairs[0], 0, 1, fit_length(64 + i, i % 3),
                        i % 3) == UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < sent + 100) && (spins < 20000000); ++spins) {
        progress(1, 1);
    }
    printf("send before the peer connects: %u messages sent before, all "
           "%"PRIu64" arrived\n", sent, received);
    all_arrived_cleanly(sent + 100);
}
END_TEST

/*
 * A connects to B, B connects back only after longer than A's whole retry
 * time (0.27 s here). In pull mode A would read B's bitmap at once, in
 * push mode a sleeping A would handshake with B: either to a QP that drops
 * it, until A's endpoint failed. Nothing may go out before B is ready: no
 * error, and traffic works once B is connected.
 */
START_TEST(test_nothing_to_unready_peer)
{
    void *addr_a, *addr_b;
    unsigned i, spins;
    double start;

    setenv("UCX_HIPOWER_TIMEOUT", "50ms", 1);
    setenv("UCX_HIPOWER_RETRY_COUNT", "3", 1);
    connect_a_only(&addr_a, &addr_b);

    /* A progresses, and tries to sleep where it can, for 1 s */
    start = now_sec();
    while (now_sec() - start < 1.0) {
        progress(1, 0);
        if (side_a.attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV) {
            uct_iface_event_arm(side_a.iface, UCT_EVENT_RECV);
        }
    }
    ck_assert_msg(ep_errors_a == 0, "A's endpoint failed before its peer "
                  "was connected: %s", ucs_status_string(ep_error_status));

    ck_assert_int_eq(uct_ep_connect_to_ep(pairs[0].ep_b, side_a.dev_addr,
                                          addr_a), UCS_OK);
    free(addr_a);
    free(addr_b);
    pairs[0].next_seq = pairs[0].expected_seq = 0;
    alloc_zbufs();
    for (i = 0; i < 100; ++i) {
        while (send_one(&pairs[0], 0, 1, fit_length(64 + i, i % 3),
                        i % 3) ==
               UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < 100) && (spins < 20000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 100);
    ck_assert_uint_eq(ep_errors_a, 0);
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * B destroys its endpoint in order (idle, flushed) while A's stays: A may
 * not go on sending of its own accord (pull reads, sleep handshakes), or
 * they would fail after A's retry time and report an error for an orderly
 * close. A's endpoint stays quiet for 1 s.
 */
START_TEST(test_orderly_close_is_quiet)
{
    unsigned i, spins;
    double start;

    setenv("UCX_HIPOWER_TIMEOUT", "50ms", 1);
    setenv("UCX_HIPOWER_RETRY_COUNT", "3", 1);
    setup_pairs(1);
    /* Traffic both ways, so that both know each other ready */
    for (i = 0; i < 20; ++i) {
        while (send_one(&pairs[0], 0, 1, 64 + i, 1) == UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < 20) && (spins < 2000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 20);
    flush_all();

    uct_ep_destroy(pairs[0].ep_b);
    pairs[0].ep_b = NULL;
    start = now_sec();
    while (now_sec() - start < 1.0) {
        progress(1, 1);
        if (side_a.attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV) {
            uct_iface_event_arm(side_a.iface, UCT_EVENT_RECV);
        }
    }
    ck_assert_msg(ep_errors_a == 0, "an orderly close of the peer reported "
                  "%s", ucs_status_string(ep_error_status));
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * Interfaces closed with endpoints still open and traffic just sent (run
 * under valgrind by the rig test): no crash, no leak.
 */
START_TEST(test_close)
{
    unsigned i;

    setup_pairs(4);
    hold_probability = 0;
    for (i = 0; i < 100; ++i) {
        if (send_one(&pairs[i % 4], i % 4, 1, 64 + i, i % 2) ==
            UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
    }
    progress(1, 1);
    close_side(&side_a);
    close_side(&side_b);
}
END_TEST

/*
 * At default settings: endpoints on one interface until it refuses one
 * (UCS_ERR_NO_MEMORY), which must not happen before the max_num_eps it
 * reports, at least 256 (a budget split in runs of 64 slots held 64); each
 * endpoint carries a message. With the shared pool (self mode) the
 * interface reports thousands: 1024 are created, most of them without a
 * run of slots, and their messages go by asking for one (runs of idle
 * endpoints come back meanwhile: the pool is short).
 */
START_TEST(test_many_endpoints_default)
{
    enum { MAX = 1024 };
    static uct_ep_h eps_a[MAX], eps_b[MAX];
    void *addr_a, *addr_b;
    uct_ep_params_t params;
    ucs_status_t status = UCS_OK;
    int n, p, i;

    setup_pairs(0);
    printf("max_num_eps: %zu\n", side_b.attr.max_num_eps);
    ck_assert_uint_ge(side_b.attr.max_num_eps, 256);

    addr_a = malloc(side_a.attr.ep_addr_len);
    addr_b = malloc(side_b.attr.ep_addr_len);
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    for (n = 0; n < MAX; ++n) {
        params.iface = side_a.iface;
        status       = uct_ep_create(&params, &eps_a[n]);
        if (status != UCS_OK) {
            break;
        }
        params.iface = side_b.iface;
        status       = uct_ep_create(&params, &eps_b[n]);
        if (status != UCS_OK) {
            uct_ep_destroy(eps_a[n]);
            break;
        }
        ck_assert_int_eq(uct_ep_get_address(eps_a[n], addr_a), UCS_OK);
        ck_assert_int_eq(uct_ep_get_address(eps_b[n], addr_b), UCS_OK);
        ck_assert_int_eq(uct_ep_connect_to_ep(eps_a[n], side_b.dev_addr,
                                              addr_b), UCS_OK);
        ck_assert_int_eq(uct_ep_connect_to_ep(eps_b[n], side_a.dev_addr,
                                              addr_a), UCS_OK);
    }
    printf("endpoints: %d created, then %s\n", n,
           (n < MAX) ? ucs_status_string(status) : "stopped");
    if (side_b.attr.max_num_eps < MAX) {
        ck_assert_int_eq(status, UCS_ERR_NO_MEMORY);
        ck_assert_uint_ge(n, side_b.attr.max_num_eps);
    } else {
        ck_assert_int_eq(n, MAX); /* None refused below max_num_eps */
    }

    /* One message per endpoint, checked (as pair 0, sequence 0 each) */
    num_pairs = 1;
    for (p = 0; p < n; ++p) {
        pairs[0].ep_a     = eps_a[p];
        pairs[0].next_seq = pairs[0].expected_seq = 0;
        while (send_one(&pairs[0], 0, 1, 100, 1) == UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
        flush_all();  /* Pull mode: the sender publishes on completion */
        for (i = 0; (received < (uint64_t)p + 1) && (i < 2000000); ++i) {
            progress(1, 1);
        }
        ck_assert_msg(received == (uint64_t)p + 1, "endpoint %d: no message",
                      p + 1);
    }
    ck_assert_int_eq(errors, 0);

    for (p = 0; p < n; ++p) {
        uct_ep_destroy(eps_a[p]);
        uct_ep_destroy(eps_b[p]);
    }
    pairs[0].ep_a = pairs[0].ep_b = NULL;
    num_pairs     = 0;
    free(addr_a);
    free(addr_b);
    close_side(&side_a);
    close_side(&side_b);
}
END_TEST

/* Progress both sides for @a ms milliseconds of wall-clock time */
static void progress_for_ms(unsigned ms)
{
    struct timespec start, now;

    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        progress(1, 1);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 +
             (now.tv_nsec - start.tv_nsec) / 1000000 < (long)ms);
}

/* Sends one message on pair @a p and progresses until B has it, at most
 * @a ms milliseconds; returns whether it arrived */
static int deliver_one(int p, unsigned ms)
{
    uint64_t before = received;
    struct timespec start, now;
    ucs_status_t status;

    clock_gettime(CLOCK_MONOTONIC, &start);
    now = start;
    do {
        status = send_one(&pairs[p], p, 1, 100, 1);
        if (status == UCS_OK) {
            break;
        }
        ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
        progress(1, 1);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 +
             (now.tv_nsec - start.tv_nsec) / 1000000 < (long)ms);
    while ((received == before) &&
           ((now.tv_sec - start.tv_sec) * 1000 +
            (now.tv_nsec - start.tv_nsec) / 1000000 < (long)ms)) {
        progress(1, 1);
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
    return received == before + 1;
}

/* Self mode only (elsewhere runs are fixed; says so for @a what and
 * returns 0): a 64-slot pool, runs of 16 slots at creation, 8 at least,
 * room kept for one endpoint */
static int small_shared_pool(const char *what)
{
    if (strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "self")) {
        printf("%s: runs are fixed in this mode\n", what);
        return 0;
    }
    setenv("UCX_HIPOWER_SLOT_SIZE", "8192", 1);
    setenv("UCX_HIPOWER_MEM_BUDGET", "512k", 1);
    setenv("UCX_HIPOWER_SLOTS", "16", 1);
    setenv("UCX_HIPOWER_MIN_SLOTS", "8", 1);
    setenv("UCX_HIPOWER_MAX_EPS", "1", 1);
    return 1;
}

/*
 * Shared pool (self mode): endpoints that went idle while the pool was not
 * short keep their runs, and may never go idle again; a peer that asks for
 * a run when none is free must get one of theirs, not wait for ever. A
 * 64-slot pool: three endpoints take 16 slots each, carry a message and go
 * idle with a quarter of the pool free (not short); a fourth takes what is
 * left beyond the reserve and never hears from its peer; a fifth starts
 * without a run. Its message must arrive.
 */
START_TEST(test_idle_runs_come_back)
{
    int p;

    if (!small_shared_pool("idle runs come back")) {
        return;
    }
    setup_pairs(3);
    hold_probability = 0;
    for (p = 0; p < 3; ++p) {
        ck_assert_uint_eq(b_slots(p), 16);
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message", p);
    }
    /* IDLE_TIME (10 ms) and the demotion handshakes */
    progress_for_ms(200);

    num_pairs = 5;
    connect_pair(&pairs[3]);
    connect_pair(&pairs[4]);
    printf("idle runs come back: new endpoints with %u and %u slots\n",
           b_slots(3), b_slots(4));
    ck_assert_uint_ge(b_slots(3), 8);
    ck_assert_uint_eq(b_slots(4), 0);
    ck_assert_msg(deliver_one(4, 10000), "an endpoint without a run got "
                  "none while idle endpoints held the pool");
    /* And the ones whose runs were taken back still deliver */
    for (p = 0; p < 3; ++p) {
        ck_assert_msg(deliver_one(p, 10000), "pair %d: no message after its "
                      "run was taken back", p);
    }
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

static unsigned a_received;

static ucs_status_t count_on_a(void *arg, void *data, size_t length,
                               unsigned flags)
{
    ++a_received;
    return UCS_OK;
}

/*
 * A peer's release must be answered by an endpoint whose user never sends
 * (a server that only receives on it, a UCP lane kept for the other
 * direction): B's pool is full of runs held by A's endpoints that never
 * sent anything (B sent one message the other way on each, so it may
 * initiate); a new endpoint of A without a run asks, B releases one of
 * them, and A's endpoint must answer at once with where its messages end
 * (it says its hello first), not leave the request due and B's waiter
 * waiting until UCX_HIPOWER_GRANT_TIMEOUT fails a healthy endpoint.
 */
START_TEST(test_release_to_silent_sender)
{
    double start;
    int p;

    if (!small_shared_pool("release to a silent sender")) {
        return;
    }
    setenv("UCX_HIPOWER_GRANT_TIMEOUT", "30s", 1);
    setup_pairs(3);
    hold_probability = 0;
    a_received       = 0;
    ck_assert_int_eq(uct_iface_set_am_handler(side_a.iface, 0, count_on_a,
                                              NULL, 0), UCS_OK);
    start = now_sec();
    for (p = 0; p < 3; ++p) {
        ck_assert_uint_eq(b_slots(p), 16);
        while (uct_ep_am_short(pairs[p].ep_b, 0, 0, NULL, 0) != UCS_OK) {
            progress(1, 1);
            ck_assert_msg(now_sec() - start < 10, "B cannot send to A");
        }
    }
    while (a_received < 3) {
        progress(1, 1);
        ck_assert_msg(now_sec() - start < 10, "A got %u of B's 3 messages",
                      a_received);
    }
    /* A completion after B's hello: B knows A's windows are bound, so it
     * may take back what A holds */
    for (p = 0; p < 3; ++p) {
        while (uct_ep_flush(pairs[p].ep_b, 0, NULL) != UCS_OK) {
            progress(1, 1);
            ck_assert_msg(now_sec() - start < 10, "B's flush of pair %d", p);
        }
    }
    /* IDLE_TIME (10 ms) and the demotion handshakes */
    progress_for_ms(200);

    num_pairs = 5;
    connect_pair(&pairs[3]);
    connect_pair(&pairs[4]);
    ck_assert_uint_eq(b_slots(4), 0);
    ck_assert_msg(deliver_one(4, 5000), "an endpoint without a run got none "
                  "within 5 s: the silent senders did not answer B's "
                  "release");
    for (p = 0; p < 3; ++p) {
        ck_assert_msg(deliver_one(p, 10000), "pair %d: no message after its "
                      "run was taken back", p);
    }
    printf("release to a silent sender: answered, %u messages B->A, "
           "%"PRIu64" A->B\n", a_received, received);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_uint_eq(ep_errors_b, 0);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/* B's interface, for its counters (UCX_HIPOWER_STATS' fields) and pool */
static uct_hipower_iface_t *iface_b(void)
{
    return ucs_derived_of(side_b.iface, uct_hipower_iface_t);
}

/*
 * The small shared pool with IDLE_TIME=inf (nothing goes idle, so no run
 * is taken back): three pairs that carried a message hold 16 slots each,
 * a fourth what is left beyond the reserve, a fifth nothing at B. Says so
 * and returns 0 outside self mode (runs are fixed there).
 */
static int pool_full_nothing_idle(const char *what)
{
    int p;

    if (!small_shared_pool(what)) {
        return 0;
    }
    setenv("UCX_HIPOWER_IDLE_TIME", "inf", 1);
    /* A send that finds no run is refused (not bundled): the cases look
     * at the waiter it makes */
    setenv("UCX_HIPOWER_BUNDLE", "n", 1);
    setup_pairs(3);
    hold_probability = 0;
    for (p = 0; p < 3; ++p) {
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message", p);
    }
    num_pairs = 5;
    connect_pair(&pairs[3]);
    connect_pair(&pairs[4]);
    ck_assert_uint_eq(b_slots(4), 0);
    return 1;
}

/*
 * A peer that closed in order gives its runs back at once (docs/protocol.md
 * 9.2): B's endpoint of a pair whose A side was destroyed frees its run
 * once it has delivered all its peer sent, though B's user keeps the
 * endpoint. With IDLE_TIME=inf nothing goes idle, so nothing else can
 * serve a peer that waits for a run. Found by the simulator's schedules
 * (docs/sim.md); contrib/sim-defects.sh's closed-peer-keeps-runs undoes it.
 */
START_TEST(test_closed_peer_runs_come_back)
{
    uint64_t returns;
    double start;
    int p;

    if (!pool_full_nothing_idle("closed peer's runs come back")) {
        return;
    }

    /* A's side of pair 0 goes, in order (flushed, then destroyed: it says
     * goodbye); B's user keeps its endpoint */
    start = now_sec();
    while (uct_ep_flush(pairs[0].ep_a, 0, NULL) != UCS_OK) {
        progress(1, 1);
        ck_assert_msg(now_sec() - start < 10, "A's flush of pair 0");
    }
    returns = iface_b()->stats.closed_returns;
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    ck_assert_msg(deliver_one(4, 5000), "a peer waiting for a run got none "
                  "within 5 s: B kept the run of a peer that closed");
    ck_assert_uint_gt(iface_b()->stats.closed_returns, returns);
    ck_assert_uint_eq(b_slots(0), 0);
    for (p = 1; p < 5; ++p) {
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message after "
                      "pair 0's peer closed", p);
    }
    printf("closed peer's runs come back: %"PRIu64" run(s) returned, a "
           "waiter served, %"PRIu64" messages A->B\n",
           iface_b()->stats.closed_returns - returns, received);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_uint_eq(ep_errors_b, 0);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * Review P2: a peer that waits for a run when none is free, and nothing
 * changes (no endpoint idle, IDLE_TIME=inf, so no run to take back). The
 * receiver tries again when slots come back, else once per clock tick (64
 * progress calls), not on every progress call, which scanned the arena's
 * free runs and the idle holders each time. When slots do come back (an
 * endpoint destroyed), the waiter gets them at once.
 */
START_TEST(test_waiter_tried_on_change)
{
    const unsigned calls = 64000;
    uint64_t tries, grants;
    ucs_status_t status;
    double start;
    unsigned i;

    if (!pool_full_nothing_idle("waiter tried on change")) {
        return;
    }

    /* A's endpoint 4 has no run at B: its send asks for one */
    status = send_one(&pairs[4], 4, 1, 100, 1);
    ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
    start = now_sec();
    while (iface_b()->pool.num_waiting == 0) {
        progress(1, 1);
        ck_assert_msg(now_sec() - start < 5, "B never listed the waiter");
    }

    tries = iface_b()->stats.waiter_tries;
    for (i = 0; i < calls; ++i) {
        progress(0, 1);
    }
    tries = iface_b()->stats.waiter_tries - tries;
    printf("waiter tried on change: %"PRIu64" tries in %u progress calls "
           "with nothing changed\n", tries, calls);
    ck_assert_uint_eq(iface_b()->pool.num_waiting, 1);
    ck_assert_msg(tries <= calls / UCT_HIPOWER_CLOCK_CALLS + 1,
                  "%"PRIu64" tries to serve the waiter in %u progress calls: "
                  "more than once per clock tick", tries, calls);

    /* Slots come back: the next progress call grants them */
    grants = iface_b()->stats.grants;
    uct_ep_destroy(pairs[0].ep_b);
    pairs[0].ep_b = NULL;
    for (i = 0; (i < 4) && (iface_b()->stats.grants == grants); ++i) {
        progress(0, 1);
    }
    printf("waiter tried on change: granted %u progress calls after a run "
           "came back\n", i);
    ck_assert_msg(iface_b()->stats.grants > grants, "no grant within %u "
                  "progress calls after a run came back", i);
    ck_assert_msg(deliver_one(4, 5000), "the waiter's message");
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    ck_assert_uint_eq(ep_errors_b, 0);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
    unsetenv("UCX_HIPOWER_IDLE_TIME");
}
END_TEST

/*
 * Review P3: with a small completion queue, a stream of writes on one of
 * 64 endpoints runs out of CQ credits again and again; each time the
 * recall looks for endpoints whose unsignaled requests hold credits. It
 * must look at those (each endpoint once after it posted), not walk all 64
 * every time. The writes land, and every endpoint still carries messages.
 */
START_TEST(test_recall_walks_trailing)
{
    const int n = 64, writes = 20000;
    uint64_t runs, visits;
    ucs_status_t status;
    uint64_t value;
    rma_bufs_t b;
    int p, i;

    /* Room for exactly 64 endpoints: the CQ has no entries of endpoints
     * that could be and are not, only TX_CQ_LEN for traffic */
    setenv("UCX_HIPOWER_TX_CQ_LEN", "64", 1);
    /* Unsignaled messages: the bundle window signals every frame */
    setenv("UCX_HIPOWER_BUNDLE_WINDOW", "0", 1);
    setenv("UCX_HIPOWER_SLOT_SIZE", "8192", 1);
    setenv("UCX_HIPOWER_SLOTS", "8", 1);
    setenv("UCX_HIPOWER_MIN_SLOTS", "8", 1);
    setenv("UCX_HIPOWER_MEM_BUDGET", "4m", 1);
    setenv("UCX_HIPOWER_MAX_EPS", "64", 1);
    setenv("UCX_HIPOWER_SHARED_MAX_EPS", "64", 1);
    setup_pairs(n);
    rma_setup(&b);
    hold_probability = 0;
    /* Every endpoint of A has unsignaled requests (its hello, a message) */
    for (p = 0; p < n; ++p) {
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message", p);
    }

    runs   = ucs_derived_of(side_a.iface, uct_hipower_iface_t)->stats.recall_runs;
    visits = ucs_derived_of(side_a.iface, uct_hipower_iface_t)->stats.recall_visits;
    for (i = 0; i < writes; ++i) {
        value = i;
        do {
            status = uct_ep_put_short(pairs[0].ep_a, &value, sizeof(value),
                                      (uintptr_t)b.remote, b.rkey.rkey);
            if (status == UCS_ERR_NO_RESOURCE) {
                progress(1, 1);
            }
        } while (status == UCS_ERR_NO_RESOURCE);
        ck_assert_int_eq(status, UCS_OK);
    }
    flush_all();
    runs   = ucs_derived_of(side_a.iface, uct_hipower_iface_t)->stats.recall_runs - runs;
    visits = ucs_derived_of(side_a.iface, uct_hipower_iface_t)->stats.recall_visits - visits;
    memcpy(&value, b.remote, sizeof(value));
    printf("recall walks trailing: %"PRIu64" recalls looked at %"PRIu64
           " endpoints (%d endpoints), last write %"PRIu64"\n", runs, visits,
           n, value);
    ck_assert_uint_eq(value, writes - 1);
    ck_assert_msg(runs >= 3, "only %"PRIu64" credit recalls: the test did "
                  "not starve the CQ", runs);
    /* Each endpoint once (its hello and message), then those that posted
     * since: the stream's, and the few whose demotion handshakes went out.
     * A walk over all of them looks at 64 per recall. */
    ck_assert_msg(visits <= n + runs * n / 4, "%"PRIu64" recalls looked at %"
                  PRIu64" endpoints: they walk all %d endpoints", runs,
                  visits, n);
    for (p = 0; p < n; ++p) {
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message after the "
                      "recalls", p);
    }
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_int_eq(errors, 0);
    rma_cleanup(&b);
    teardown_pairs();
    unsetenv("UCX_HIPOWER_TX_CQ_LEN");
}
END_TEST

/*
 * A process that exits with its endpoints open (a crash, MPI_Abort, a
 * failed test) leaves the kernel to destroy its verbs objects, newest
 * first. A QP destroyed while memory windows are still bound to it waits
 * for them: on rdma_rxe a timeout per QP, so with windows older than their
 * QP the exit hung in the kernel for minutes (64 endpoint pairs: more than
 * 100 s, uninterruptible). The child here opens 64 pairs, carries a
 * message on each and exits without closing anything; it must be gone
 * within 30 s.
 */
START_TEST(test_exit_with_endpoints_open)
{
    double start, took;
    int status, p;
    pid_t pid;

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setup_pairs(64);
        hold_probability = 0;
        for (p = 0; p < 64; ++p) {
            if (!deliver_one(p, 5000)) {
                _exit(2);
            }
        }
        _exit(0);
    }

    start = now_sec();
    while ((waitpid(pid, &status, WNOHANG) == 0) && (now_sec() - start < 60)) {
        usleep(10000);
    }
    took = now_sec() - start;
    printf("exit with endpoints open: the child was gone after %.1f s\n",
           took);
    ck_assert_msg(took < 30, "a process with 64 endpoint pairs open took "
                  "%.0f s or more to exit (stuck destroying its QPs?)", took);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0),
                  "the child failed to carry a message on each pair "
                  "(status 0x%x)", status);
}
END_TEST

/*
 * Push mode when a device places the bitmap's write before the frame's
 * trailer (review H3: RC orders the execution of writes, not the moment
 * their bytes become visible): B's view of the written bitmap says message
 * 16 is there before its frame is. B must wait for the trailer, not drop
 * the message (and then lose the real one behind its head): nothing is
 * delivered until the frame comes, then it and those after it are, once
 * each and in order. Endpoints stay active (IDLE_TIME=inf) so that B
 * looks at the bitmap it was written without a wake-up.
 */
START_TEST(test_push_waits_for_trailer)
{
    uct_hipower_ep_addr_t addr;
    hipower_bitmap_word_t word;
    unsigned i, spins;

    if (strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "push")) {
        printf("push waits for the trailer: push mode only\n");
        return;
    }
    setenv("UCX_HIPOWER_IDLE_TIME", "inf", 1);
    setup_pairs(1);
    hold_probability = 0;
    for (i = 0; i < 16; ++i) {
        ck_assert_msg(deliver_one(0, 5000), "message %u not delivered", i);
    }
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_b,
                                        (uct_ep_addr_t*)&addr), UCS_OK);
    ck_assert_uint_ge(addr.num_slots, 17);
    /* The first word of B's view of A's written bitmap: slots 0-16 in their
     * first lap, i.e. message 16 written */
    word = ((hipower_bitmap_word_t)1 << 17) - 1;
    raw_write(pairs[0].ep_a, addr.ctrl_write_addr, addr.ctrl_write_rkey,
              &word, sizeof(word));
    flush_all();
    for (spins = 0; spins < 200000; ++spins) {
        progress(0, 1);
    }
    ck_assert_msg(received == 16, "%"PRIu64" messages delivered with message "
                  "16's bit set and its frame not there", received);
    for (i = 16; i < 40; ++i) {
        ck_assert_msg(deliver_one(0, 5000), "message %u not delivered (the "
                      "receiver went past it before its frame came?)", i);
    }
    ck_assert_uint_eq(received, 40);
    ck_assert_int_eq(errors, 0);
    printf("push waits for the trailer: message 16 delivered once its frame "
           "came, 40 in order\n");
    teardown_pairs();
    unsetenv("UCX_HIPOWER_IDLE_TIME");
}
END_TEST

/*
 * Connection churn over reused receive slots (review C1): rounds of new
 * endpoint pairs, each carrying a varying number of messages (none to a
 * ring's worth and more), then destroyed in a random order. The pool hands
 * the lowest free run out first, so a new endpoint at B sits on slots its
 * predecessor's peer wrote. Every round's sequence numbers start at a base
 * of its own: a frame left by an earlier round, delivered as a new
 * endpoint's message, breaks the order check (and the count), and a real
 * message lost behind it breaks the count.
 */
START_TEST(test_churn_over_reused_slots)
{
    enum { ROUNDS = 40, CHURN_PAIRS = 4, MAX_MSGS = 24 };
    unsigned round, n[CHURN_PAIRS], spins, order[CHURN_PAIRS];
    uint64_t expect = 0, sent_round;
    unsigned i, p, q, tmp, left;
    ucs_status_t status;

    setup_pairs(CHURN_PAIRS);
    hold_probability = 0;
    for (round = 0; round < ROUNDS; ++round) {
        sent_round = 0;
        for (p = 0; p < CHURN_PAIRS; ++p) {
            n[p]                  = next_rand() % (MAX_MSGS + 1);
            pairs[p].next_seq     = (round + 1) * 1000;
            pairs[p].expected_seq = (round + 1) * 1000;
            sent_round           += n[p];
        }
        /* The pairs' messages interleaved */
        for (left = 1; left;) {
            left = 0;
            for (p = 0; p < CHURN_PAIRS; ++p) {
                if (pairs[p].next_seq == (round + 1) * 1000 + n[p]) {
                    continue;
                }
                left = 1;
                status = send_one(&pairs[p], p, 1 + p % (NUM_AM_IDS - 1),
                                  fit_length(20 + next_rand() % 2000, 1), 1);
                if (status == UCS_ERR_NO_RESOURCE) {
                    progress(1, 1);
                } else {
                    ck_assert_int_eq(status, UCS_OK);
                }
            }
        }
        expect += sent_round;
        for (spins = 0; (received < expect) && (spins < 20000000); ++spins) {
            progress(1, 1);
        }
        /* Stale frames, if any, come right behind the real ones */
        for (spins = 0; spins < 2000; ++spins) {
            progress(1, 1);
        }
        ck_assert_msg(received == expect, "round %u: %"PRIu64" messages "
                      "delivered in all, %"PRIu64" sent", round, received,
                      expect);
        ck_assert_msg(errors == 0, "round %u: a message out of order or "
                      "corrupt (an earlier connection's frame?)", round);

        /* Destroyed in a random order, both ends, then connected anew */
        for (p = 0; p < CHURN_PAIRS; ++p) {
            order[p] = p;
        }
        for (p = CHURN_PAIRS - 1; p > 0; --p) {
            q        = next_rand() % (p + 1);
            tmp      = order[p];
            order[p] = order[q];
            order[q] = tmp;
        }
        for (i = 0; i < CHURN_PAIRS; ++i) {
            p = order[i];
            uct_ep_destroy(pairs[p].ep_b);
            uct_ep_destroy(pairs[p].ep_a);
        }
        for (i = 0; i < CHURN_PAIRS; ++i) {
            connect_pair(&pairs[order[i]]);
        }
    }
    printf("churn: %u rounds of %u new endpoint pairs, %"PRIu64" messages, "
           "each once and in order\n", ROUNDS, CHURN_PAIRS, expect);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * UCP creates, connects and destroys endpoints from its wire-up handler,
 * which UCX's async thread runs (ud_verbs' timer) holding the worker's
 * async lock, while the user's thread sends and progresses. Here a second
 * thread does so, holding both sides' async locks as UCP does, 150 times,
 * while this thread keeps traffic going on another pair. Every connect
 * must succeed (its window binds complete: once they timed out when the
 * user's thread took their completions), every message arrive once, in
 * order, checksummed, and no endpoint fail.
 */
static volatile int wireup_done;
static unsigned wireup_cycles;

static void *async_wireup_thread(void *arg)
{
    pair_t pair;
    unsigned i;

    for (i = 0; i < 150; ++i) {
        UCS_ASYNC_BLOCK(side_a.async);
        UCS_ASYNC_BLOCK(side_b.async);
        connect_pair(&pair);
        UCS_ASYNC_UNBLOCK(side_b.async);
        UCS_ASYNC_UNBLOCK(side_a.async);
        usleep(next_rand() % 2000);
        UCS_ASYNC_BLOCK(side_a.async);
        UCS_ASYNC_BLOCK(side_b.async);
        uct_ep_destroy(pair.ep_b);
        uct_ep_destroy(pair.ep_a);
        UCS_ASYNC_UNBLOCK(side_b.async);
        UCS_ASYNC_UNBLOCK(side_a.async);
        ++wireup_cycles;
    }
    wireup_done = 1;
    return NULL;
}

START_TEST(test_async_wireup)
{
    pthread_t thread;
    uint64_t sent = 0;
    unsigned spins;
    ucs_status_t status;

    setup_pairs(1);
    alloc_zbufs();
    wireup_done = 0;
    ck_assert_int_eq(pthread_create(&thread, NULL, async_wireup_thread,
                                    NULL), 0);
    while (!wireup_done) {
        status = send_one(&pairs[0], 0, 1, random_length(sent % 3),
                          sent % 3);
        if (status == UCS_OK) {
            ++sent;
        } else {
            ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
        }
        progress(1, 1);
    }
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    flush_all();
    for (spins = 0; (received < sent) && (spins < 20000000); ++spins) {
        progress(1, 1);
    }
    printf("async wire-up: %u endpoint pairs created, connected and "
           "destroyed by another thread; %"PRIu64" messages sent meanwhile, "
           "%"PRIu64" arrived\n", wireup_cycles, sent, received);
    all_arrived_cleanly(sent);
}
END_TEST

/* B's endpoint of pair @a p */
static uct_hipower_ep_t *b_ep(int p)
{
    return ucs_derived_of(pairs[p].ep_b, uct_hipower_ep_t);
}

/* A and B progress (C, if given, too) for @a ms milliseconds */
static void progress_with_for_ms(side_t *c, unsigned ms)
{
    double end = now_sec() + ms / 1000.0;

    do {
        progress(1, 1);
        if (c != NULL) {
            uct_worker_progress(c->worker);
        }
    } while (now_sec() < end);
}

/*
 * A busy peer is a live peer (review b86e41e H1): a peer whose process
 * stops calling UCX keeps the runs it holds, and the pool serves others
 * from the rest; only a peer whose device stops answering is failed.
 * Peers on a third interface C hold runs at B (pairs 0 and 1) and go idle,
 * then C calls nothing for 3 x UCX_HIPOWER_GRANT_TIMEOUT (1 s); pair 2
 * (A's) is idle too, pair 3 holds what is left and pair 4 starts without a
 * run and asks. B takes C's runs back with releases C never adopts: past
 * the deadline B probes C's device, which answers, so nothing fails and B
 * releases the next idle holder, A's pair 2, whose run serves pair 4.
 * Then C's QP of pair 1 dies (to error: its device stops answering): B's
 * endpoint of pair 1 fails within GRANT_TIMEOUT + (RETRY_COUNT + 1) x
 * TIMEOUT, once, and its run comes back. C then resumes: it adopts the
 * release of pair 0 and its next message arrives. Every message intact and
 * in order. Red while the deadline failed a peer that merely did not call.
 */
START_TEST(test_stopped_peer_pins_nothing)
{
    const double grant_timeout = 1.0, ack_timeout = 0.25;
    const unsigned retry_count = 3;
    struct ibv_qp_attr attr;
    side_t side_c;
    char dev_c[64], val[32];
    double start, waited, stopped, bound;
    int p;

    if (!small_shared_pool("stopped peer")) {
        return;
    }
    setenv("UCX_HIPOWER_GRANT_TIMEOUT", "1s", 1);
    setenv("UCX_HIPOWER_TIMEOUT", "0.25s", 1);
    snprintf(val, sizeof(val), "%u", retry_count);
    setenv("UCX_HIPOWER_RETRY_COUNT", val, 1);
    setup_pairs(0);
    memset(&side_c, 0, sizeof(side_c));
    snprintf(dev_c, sizeof(dev_c), "%s", side_a.dev);
    dev_c[strcspn(dev_c, ":")] = '\0'; /* "rxe0:1": the device, no port */
    open_side(&side_c, dev_c);
    hold_probability = 0;
    /* Pairs 0-1 from C, pair 2 from A: a message each; C's first, so that
     * C's endpoints at B are the longest idle (released first) */
    num_pairs = 5;
    for (p = 0; p < 3; ++p) {
        if (p < 2) {
            connect_pair_from(&pairs[p], &side_c);
        } else {
            connect_pair(&pairs[p]);
        }
        ck_assert_uint_eq(b_slots(p), 16);
    }
    for (p = 0; p < 2; ++p) {
        ck_assert_msg(deliver_one(p, 5000), "pair %d: no message", p);
    }
    /* C calls nothing from now on */
    stopped = now_sec();
    progress_for_ms(200); /* C's endpoints at B go idle */
    ck_assert_msg(deliver_one(2, 5000), "pair 2: no message");
    progress_for_ms(200); /* So does A's */
    connect_pair(&pairs[3]);
    connect_pair(&pairs[4]);
    ck_assert_uint_eq(b_slots(4), 0);

    start = now_sec();
    ck_assert_msg(deliver_one(4, 15000), "an endpoint without a run got "
                  "none while a stopped peer held part of the pool");
    waited = now_sec() - start;
    printf("stopped peer: pair 4 served after %.1f s (GRANT_TIMEOUT 1 s), "
           "%u endpoint errors at B, %"PRIu64" deadlines passed\n", waited,
           ep_errors_b, iface_b()->stats.grant_timeouts);
    ck_assert_msg(ep_errors_b == 0, "B failed %u endpoint(s) (%s) of a "
                  "peer that only stopped calling progress", ep_errors_b,
                  ucs_status_string(ep_error_status_b));
    ck_assert_msg(waited < 3 * grant_timeout, "the waiter was served after "
                  "%.1f s: not from the other runs", waited);

    /* C stays silent for 3 x GRANT_TIMEOUT: its endpoints keep their runs
     * (a release out, never failed) */
    progress_with_for_ms(NULL, (unsigned)((stopped + 3.2 * grant_timeout -
                                           now_sec()) * 1000));
    ck_assert_msg(ep_errors_b == 0, "B failed %u endpoint(s) (%s) of a "
                  "peer silent for 3 x GRANT_TIMEOUT", ep_errors_b,
                  ucs_status_string(ep_error_status_b));
    ck_assert(b_ep(0)->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING);
    ck_assert(b_ep(1)->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING);
    ck_assert(!(b_ep(0)->flags.all & UCT_HIPOWER_EP_FLAG_FAILED));
    ck_assert_uint_ge(iface_b()->stats.grant_timeouts, 2);

    /* C's QP of pair 1 dies: its device no longer answers */
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_ERR;
    ck_assert_int_eq(ibv_modify_qp(ucs_derived_of(pairs[1].ep_a,
                                                  uct_hipower_ep_t)->txqp.qp,
                                   &attr, IBV_QP_STATE), 0);
    bound = grant_timeout + (retry_count + 1) * ack_timeout + 1.0;
    start = now_sec();
    while ((ep_errors_b == 0) && (now_sec() - start < 4 * bound)) {
        progress(1, 1);
    }
    waited = now_sec() - start;
    printf("stopped peer: the holder whose device died failed after %.1f s "
           "(bound %.1f s) with %s\n", waited, bound,
           ucs_status_string(ep_error_status_b));
    ck_assert_msg(ep_errors_b == 1, "B's endpoint of a dead holder got %u "
                  "error callbacks in %.1f s", ep_errors_b, waited);
    ck_assert(b_ep(1)->flags.all & UCT_HIPOWER_EP_FLAG_FAILED);
    ck_assert_msg(waited < bound, "a dead holder failed after %.1f s, "
                  "beyond GRANT_TIMEOUT + (RETRY_COUNT + 1) x TIMEOUT",
                  waited);
    ck_assert_uint_eq(uct_hipower_ep_rx_held(b_ep(1)), 0);
    ck_assert(!(b_ep(0)->flags.all & UCT_HIPOWER_EP_FLAG_FAILED));

    /* C resumes: it adopts pair 0's release, and its next message (a run
     * asked for and granted) arrives */
    start = now_sec();
    while ((b_ep(0)->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) &&
           (now_sec() - start < 5)) {
        progress(1, 1);
        uct_worker_progress(side_c.worker);
    }
    for (start = now_sec(); now_sec() - start < 10;) {
        if (send_one(&pairs[0], 0, 1, 100, 1) == UCS_OK) {
            break;
        }
        progress(1, 1);
        uct_worker_progress(side_c.worker);
    }
    while ((pairs[0].expected_seq < 2) && (now_sec() - start < 10)) {
        progress(1, 1);
        uct_worker_progress(side_c.worker);
    }
    ck_assert_msg(pairs[0].expected_seq == 2, "pair 0: C's message after it "
                  "resumed did not arrive");
    ck_assert_msg(deliver_one(3, 5000), "pair 3: no message");
    ck_assert_msg(deliver_one(4, 5000), "pair 4: no second message");
    ck_assert_msg(deliver_one(2, 5000), "pair 2: no second message");
    ck_assert_uint_eq(ep_errors_b, 1);
    ck_assert_int_eq(errors, 0);
    for (p = 0; p < 2; ++p) {
        uct_ep_destroy(pairs[p].ep_a);
        uct_ep_destroy(pairs[p].ep_b);
        pairs[p].ep_a = pairs[p].ep_b = NULL;
    }
    close_side(&side_c);
    teardown_pairs();
}
END_TEST

/* B progresses alone until its clock counter reads @a phase: its next
 * progress call is number @a phase + 1 of the clock's cycle (the clock
 * is read, and the grant deadline checked, in the call that makes it
 * UCT_HIPOWER_CLOCK_CALLS) */
static void b_to_phase(unsigned phase)
{
    unsigned i;

    for (i = 0; iface_b()->clock.calls != phase; ++i) {
        ck_assert_uint_lt(i, UCT_HIPOWER_CLOCK_CALLS);
        progress(0, 1);
    }
}

/* B's pair-0 endpoint's release was answered (the run request of the
 * release's epoch is in B's memory) */
static int b_release_answered(void)
{
    uct_hipower_ep_t *ep = b_ep(0);

    return hipower_run_req_action(*(volatile uint64_t*)&ep->ctrl->run_req,
                                  ep->rx.epoch, ep->rx.ring.num_slots, 1) ==
           HIPOWER_RUN_REQ_RELEASED;
}

/*
 * A progresses until B's release of pair 0 is answered in B's memory. An A
 * that went to sleep over the record is woken by B's clock tick
 * (uct_hipower_iface_grant_wake()): while A has not adopted the release,
 * and so cannot have answered, B progresses for a clock cycle now and
 * then, and is brought back to @a phase.
 */
static void a_answers_release(unsigned phase)
{
    uct_hipower_ep_t *ep_a = ucs_derived_of(pairs[0].ep_a, uct_hipower_ep_t);
    uct_hipower_ep_t *ep_b = b_ep(0);
    double start           = now_sec();
    unsigned i;

    while (!b_release_answered()) {
        for (i = 0; (i < 1000) && !b_release_answered(); ++i) {
            progress(1, 0);
        }
        if (ep_a->tx.epoch != ep_b->rx.epoch + 1) {
            for (i = 0; i < UCT_HIPOWER_CLOCK_CALLS; ++i) {
                progress(0, 1);
            }
            b_to_phase(phase);
        }
        ck_assert_msg(now_sec() - start < 5, "phase %u: A did not answer "
                      "the release", phase);
    }
}

/*
 * A receiver that stalls itself past UCX_HIPOWER_GRANT_TIMEOUT never fails
 * a peer that answered in time (review b86e41e M1): the deadline is read
 * in the progress call that reads the clock, before that call looks at the
 * answers. The pool is short (room kept for MAX_EPS=8 endpoints), so B's
 * endpoint has no run, and each message costs a grant (A asks) and, once
 * B's endpoint is idle, a release. For each of the clock's 64 phases, once
 * for a grant (loop 0) or a release (loop 1): B posts it and then calls
 * nothing more until its clock is at that phase; A answers (its first
 * message in the granted run, or its run request for the release) at
 * once; B stalls for 1.6 x GRANT_TIMEOUT (no call), then progresses. No endpoint may
 * fail; every message arrives once, in order, intact. Red (the phase
 * whose first call reads the clock) when the deadline is checked before
 * the answer.
 */
START_TEST(test_receiver_stall_every_phase)
{
    const int stall_grant = (_i == 0); /* Else the release */
    const unsigned timeout_ms = 50;
    uct_hipower_ep_t *ep;
    uint32_t expected;
    unsigned phase;
    double start;

    if (!small_shared_pool("receiver stall")) {
        return;
    }
    setenv("UCX_HIPOWER_MAX_EPS", "8", 1);
    setenv("UCX_HIPOWER_GRANT_TIMEOUT", "50ms", 1);
    setup_pairs(1);
    hold_probability = 0;
    ep = b_ep(0);
    /* A message, then B's idle endpoint gives its run back */
    ck_assert_msg(deliver_one(0, 5000), "no message");
    for (start = now_sec(); (ep->rx.ring.num_slots > 0) ||
                            (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING);) {
        progress(1, 1);
        ck_assert_msg(now_sec() - start < 5, "B's idle endpoint kept its "
                      "run of %u slots", ep->rx.ring.num_slots);
    }

    for (phase = 0; phase < UCT_HIPOWER_CLOCK_CALLS; ++phase) {
        /* A grant: A asks, B grants and stops */
        expected = pairs[0].expected_seq + 1;
        ck_assert_int_eq(send_one(&pairs[0], 0, 1, 100, 1),
                         UCS_ERR_NO_RESOURCE);
        for (start = now_sec(); ep->rx.granted.count == 0;) {
            progress(0, 1);
            ck_assert_msg(now_sec() - start < 5, "phase %u: no grant",
                          phase);
        }
        if (stall_grant) {
            b_to_phase(phase);
        }
        /* A adopts it: its message is the new run's first */
        for (start = now_sec(); send_one(&pairs[0], 0, 1, 100, 1) != UCS_OK;) {
            progress(1, 0);
            ck_assert_msg(now_sec() - start < 5, "phase %u: A cannot send "
                          "in the run it was granted", phase);
        }
        for (start = now_sec(); !uct_hipower_ep_rx_granted_used(ep);) {
            progress(1, 0);
            ck_assert_msg(now_sec() - start < 5, "phase %u: A's message in "
                          "the granted run did not land", phase);
        }
        if (stall_grant) {
            usleep(timeout_ms * 1600); /* B stalls */
        }
        for (start = now_sec(); (pairs[0].expected_seq < expected) &&
                                (ep_errors_b == 0) &&
                                (now_sec() - start < 5);) {
            progress(1, 1);
        }
        ck_assert_msg(ep_errors_b == 0, "phase %u: B failed the endpoint "
                      "(%s) of a peer that adopted its grant at once, after "
                      "B's own stall", phase,
                      ucs_status_string(ep_error_status_b));
        ck_assert_uint_eq(pairs[0].expected_seq, expected);
        ck_assert_uint_eq(ep->rx.granted.count, 0);

        /* A release: B's endpoint goes idle, B takes the run back and
         * stops */
        for (start = now_sec();
             !(ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING);) {
            progress(1, 0);
            progress(0, 1);
            ck_assert_msg(now_sec() - start < 5, "phase %u: no release",
                          phase);
        }
        if (!stall_grant) {
            b_to_phase(phase);
        }
        a_answers_release(phase);
        if (!stall_grant) {
            usleep(timeout_ms * 1600); /* B stalls */
        }
        for (start = now_sec();
             (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) &&
             (ep_errors_b == 0) && (now_sec() - start < 5);) {
            progress(1, 1);
        }
        ck_assert_msg(ep_errors_b == 0, "phase %u: B failed the endpoint "
                      "(%s) of a peer that answered its release at once, "
                      "after B's own stall", phase,
                      ucs_status_string(ep_error_status_b));
        ck_assert(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING));
        ck_assert_uint_eq(ep->rx.ring.num_slots, 0);
    }
    printf("receiver stall after a %s answered at once, in each of the "
           "64 phases: %u messages, no endpoint failed, %"PRIu64" deadlines "
           "passed\n", stall_grant ? "grant" : "release",
           pairs[0].expected_seq, iface_b()->stats.grant_timeouts);
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(ep_errors_a, 0);
    teardown_pairs();
}
END_TEST

/*
 * A peer that makes us send writes with an immediate and never reposts its
 * receives (review M5): A writes new generations into B's word that says
 * A sleeps (a word A may write), so each message B sends to A carries a
 * wake-up immediate and takes one of A's few receives, and A never calls
 * progress again. With infinite receiver-not-ready retries B's queue pair
 * would stall for ever; B's endpoint must fail with
 * UCS_ERR_ENDPOINT_TIMEOUT instead, through the error handler, once.
 */
START_TEST(test_rnr_stall_fails_endpoint)
{
    uct_hipower_ep_addr_t addr;
    uint64_t gen, hdr = 0;
    unsigned k, spins;
    ucs_status_t status;
    double start;

    if (!strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "pull")) {
        printf("rnr stall: no wake-ups in pull mode\n");
        return;
    }
    setup_pairs(1);
    hold_probability = 0;
    ck_assert_msg(deliver_one(0, 5000), "no message");
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_b,
                                        (uct_ep_addr_t*)&addr), UCS_OK);

    /* From now on A never progresses */
    start = now_sec();
    for (k = 1; (k <= 12) && (ep_errors_b == 0); ++k) {
        gen = 1000 + k;
        /* B's peer_sleep_gen, after the 512-byte written-bitmap view */
        ck_assert_int_eq(uct_ep_put_short(pairs[0].ep_a, &gen, sizeof(gen),
                                          addr.ctrl_write_addr + 512,
                                          addr.ctrl_write_rkey), UCS_OK);
        for (spins = 0; spins < 20000; ++spins) {
            progress(0, 1);
        }
        status = uct_ep_am_short(pairs[0].ep_b, 1, hdr, NULL, 0);
        ck_assert_msg((status == UCS_OK) || (status == UCS_ERR_NO_RESOURCE) ||
                      (ep_errors_b > 0), "am_short: %s",
                      ucs_status_string(status));
    }
    while ((ep_errors_b == 0) && (now_sec() - start < 60)) {
        progress(0, 1);
    }
    printf("rnr stall: %u wake-up writes to a peer that never reposts, B's "
           "endpoint failed after %.1f s with %s\n", k - 1,
           now_sec() - start, ucs_status_string(ep_error_status_b));
    ck_assert_msg(ep_errors_b == 1, "B's endpoint to a peer that never "
                  "reposts its receives got %u error callbacks in 60 s",
                  ep_errors_b);
    ck_assert_int_eq(ep_error_status_b, UCS_ERR_ENDPOINT_TIMEOUT);
    teardown_pairs();
}
END_TEST

/*
 * A peer that keeps its endpoint active for ever (review H1 c): its
 * announced count, which B's demotion handshake reads, says more messages
 * than it ever sent, so every handshake finds B "behind" and B's endpoint
 * would stay active, holding its run. A's own count lives in this process
 * (A's control words, after the two consumed bitmaps and the published
 * one): the test bumps it. Past UCX_HIPOWER_GRANT_TIMEOUT B's endpoint
 * fails with UCS_ERR_ENDPOINT_TIMEOUT, once; the other endpoint carries on.
 */
START_TEST(test_silent_active_peer)
{
    uct_hipower_ep_addr_t addr_a;
    volatile uint64_t *announced;
    double start;

    if (!strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "pull")) {
        printf("silent active peer: endpoints never go idle in pull mode\n");
        return;
    }
    setenv("UCX_HIPOWER_GRANT_TIMEOUT", "1s", 1);
    setup_pairs(2);
    hold_probability = 0;
    ck_assert_msg(deliver_one(0, 5000), "pair 0: no message");
    ck_assert_msg(deliver_one(1, 5000), "pair 1: no message");
    ck_assert_uint_eq(side_a.attr.ep_addr_len, sizeof(addr_a));
    ck_assert_int_eq(uct_ep_get_address(pairs[0].ep_a,
                                        (uct_ep_addr_t*)&addr_a), UCS_OK);
    announced = (volatile uint64_t*)(uintptr_t)(addr_a.ctrl_read_addr +
                                                1024 + 512);
    ck_assert_uint_eq(*announced, 1);
    *announced += 1000;

    start = now_sec();
    while ((ep_errors_b == 0) && (now_sec() - start < 30)) {
        progress(1, 1);
    }
    printf("silent active peer: B's endpoint failed after %.1f s with %s\n",
           now_sec() - start, ucs_status_string(ep_error_status_b));
    ck_assert_msg(ep_errors_b == 1, "B's endpoint of a peer that is always "
                  "'behind' got %u error callbacks in 30 s", ep_errors_b);
    ck_assert_int_eq(ep_error_status_b, UCS_ERR_ENDPOINT_TIMEOUT);
    ck_assert_msg(deliver_one(1, 5000), "pair 1: no message afterwards");
    ck_assert_uint_eq(ep_errors_b, 1);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * The shared pool's own code under checked traffic (review T2: the unit
 * model re-implemented adopt, switch and release): eight peers share a
 * 64-slot pool; in each round a random few send bursts of random sizes
 * while the others rest long enough to go idle. Rings fill and grow, runs
 * shrink to the fair share, idle runs are released and asked for again,
 * endpoints start without a run and wait. Every message must arrive once,
 * in order, intact. The rig test checks, from the receiving interface's
 * statistics printed after the "switch storm" line, that grants, switches
 * and releases did happen.
 */
START_TEST(test_switch_storm)
{
    enum { STORM_PAIRS = 8, ROUNDS = 60 };
    uint64_t expect = 0;
    unsigned round, p, burst, i, spins;
    ucs_status_t status;

    if (!small_shared_pool("switch storm")) {
        return;
    }
    setup_pairs(STORM_PAIRS);
    hold_probability = 0;
    alloc_zbufs();
    for (round = 0; round < ROUNDS; ++round) {
        for (p = 0; p < STORM_PAIRS; ++p) {
            if (next_rand() % 3) {
                continue; /* Rests this round */
            }
            burst = 1 + next_rand() % 48;
            for (i = 0; i < burst; ++i) {
                do {
                    status = send_one(&pairs[p], p,
                                      1 + next_rand() % (NUM_AM_IDS - 1),
                                      random_length(i % 3), i % 3);
                    if (status == UCS_ERR_NO_RESOURCE) {
                        progress(1, 1);
                    }
                } while (status == UCS_ERR_NO_RESOURCE);
                ck_assert_int_eq(status, UCS_OK);
                ++expect;
            }
        }
        for (spins = 0; (received < expect) && (spins < 50000000); ++spins) {
            progress(1, 1);
        }
        ck_assert_msg(received == expect, "round %u: %"PRIu64" of %"PRIu64
                      " messages", round, received, expect);
        if (round % 4 == 3) {
            progress_for_ms(30); /* Longer than IDLE_TIME: idle spells */
        }
    }
    wait_all_received();
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(ep_errors_b, 0);
    for (p = 0; p < STORM_PAIRS; ++p) {
        ck_assert_uint_eq(pairs[p].expected_seq, pairs[p].next_seq);
    }
    printf("switch storm: %"PRIu64" messages over %d endpoints sharing a "
           "64-slot pool, each once, in order, intact\n", expect,
           STORM_PAIRS);
    fflush(stdout);
    teardown_pairs();
}
END_TEST

static size_t   align_req, align_off;
static unsigned misaligned, aligned_desc;

static ucs_status_t align_handler(void *arg, void *data, size_t length,
                                  unsigned flags)
{
    if (((uintptr_t)data + align_off) % align_req) {
        ++misaligned;
    }
    aligned_desc += !!(flags & UCT_CB_PARAM_FLAG_DESC);
    ++received;
    return UCS_OK;
}

/* Opens B with am_alignment/am_align_offset (0: not given) */
static ucs_status_t open_b_aligned(const char *dev, size_t align,
                                   size_t offset, uint64_t mask)
{
    uct_iface_config_t *config;
    uct_iface_params_t params;
    ucs_status_t status;

    ck_assert_int_eq(uct_md_iface_config_read(side_b.md, "hipower", NULL,
                                              NULL, &config), UCS_OK);
    ck_assert_int_eq(fixture_config_modify(config, "HOLD_SLOTS", hold_slots),
                     UCS_OK);
    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE    |
                                  UCT_IFACE_PARAM_FIELD_RX_HEADROOM | mask;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "hipower";
    params.mode.device.dev_name = dev;
    params.rx_headroom          = RX_HEADROOM;
    params.am_alignment         = align;
    params.am_align_offset      = offset;
    status = uct_iface_open(side_b.md, side_b.worker, &params, config,
                            &side_b.iface);
    uct_config_release(config);
    return status;
}

/*
 * am_alignment/am_align_offset: invalid ones fail uct_iface_open() with
 * UCS_ERR_INVALID_PARAM; valid ones put the data handed to AM handlers at
 * that alignment, in slots (HOLD_SLOTS=n) and in the copies handlers may
 * keep (y), from a peer with other parameters.
 */
START_TEST(test_am_alignment)
{
    static const size_t aligns[][2] = {{4096, 0}, {256, 8}, {64, 63},
                                       {8, 3}, {1, 0}};
    const char *modes[] = {"n", "y"};
    uct_iface_h ok_iface;
    unsigned a, m, i;
    char dev[64];

    setup_pairs(0);
    snprintf(dev, sizeof(dev), "%s", side_b.dev);
    ok_iface = side_b.iface;

    /* The cases of UCX's gtest uct_p2p_am_alignment.invalid_* */
    ck_assert_int_eq(open_b_aligned(dev, 0, 0,
                                    UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(open_b_aligned(dev, 3, 1,
                                    UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(open_b_aligned(dev, 0, 11,
                                    UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(open_b_aligned(dev, 8, 8,
                                    UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT |
                                    UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET),
                     UCS_ERR_INVALID_PARAM);
    side_b.iface = ok_iface;

    uct_iface_close(side_b.iface);
    for (m = 0; m < 2; ++m) {
        hold_slots = modes[m];
        for (a = 0; a < sizeof(aligns) / sizeof(aligns[0]); ++a) {
            align_req  = aligns[a][0];
            align_off  = aligns[a][1];
            misaligned = aligned_desc = 0;
            ck_assert_int_eq(open_b_aligned(dev, align_req, align_off,
                                            UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT |
                                            UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET),
                             UCS_OK);
            uct_iface_query(side_b.iface, &side_b.attr);
            uct_iface_get_device_address(side_b.iface, side_b.dev_addr);
            uct_iface_set_am_handler(side_b.iface, 1, align_handler, NULL, 0);
            uct_iface_progress_enable(side_b.iface, UCT_PROGRESS_SEND |
                                                    UCT_PROGRESS_RECV);
            connect_pair(&pairs[0]);
            num_pairs = 1;
            received  = 0;
            alloc_zbufs();
            for (i = 0; i < 30; ++i) {
                while (send_one(&pairs[0], 0, 1,
                                fit_length(16 + i * 37, i % 3), i % 3) ==
                       UCS_ERR_NO_RESOURCE) {
                    progress(1, 1);
                }
            }
            flush_all();  /* Pull mode: the sender publishes on completion */
            for (i = 0; (received < 30) && (i < 2000000); ++i) {
                progress(1, 1);
            }
            ck_assert_uint_eq(received, 30);
            ck_assert_msg(misaligned == 0, "HOLD_SLOTS=%s alignment %zu "
                          "offset %zu: %u of 30 misaligned", modes[m],
                          align_req, align_off, misaligned);
            ck_assert_uint_eq(aligned_desc, (m == 1) ? 30 : 0);
            free_zbufs();
            uct_ep_destroy(pairs[0].ep_a);
            uct_ep_destroy(pairs[0].ep_b);
            uct_iface_close(side_b.iface);
        }
    }
    hold_slots = "y";
    pairs[0].ep_a = pairs[0].ep_b = NULL;
    num_pairs = 0;
    uct_iface_close(side_a.iface);
    side_a.iface = NULL;
    uct_worker_destroy(side_a.worker);
    ucs_async_context_destroy(side_a.async);
    uct_md_close(side_a.md);
    free(side_a.dev_addr);
    uct_worker_destroy(side_b.worker);
    ucs_async_context_destroy(side_b.async);
    uct_md_close(side_b.md);
    free(side_b.dev_addr);
}
END_TEST

/* Each test in a Check case of its own, named after it without "test_",
 * so that one can run alone (CK_RUN_CASE=fence) */
/* Runs _n times, _i = 0 .. _n - 1 */
#define CONFORMANCE_LOOP_CASE(_suite, _name, _timeout, _n) \
    { \
        TCase *_tc = tcase_create(#_name); \
        tcase_set_tags(_tc, #_name); \
        case_timeout(_tc, _timeout); \
        tcase_add_loop_test(_tc, test_##_name, 0, _n); \
        suite_add_tcase(_suite, _tc); \
    }

#define CONFORMANCE_CASE(_suite, _name, _timeout) \
    { \
        TCase *_tc = tcase_create(#_name); \
        /* Tagged with its name too: CK_EXCLUDE_TAGS=name leaves it out */ \
        tcase_set_tags(_tc, #_name); \
        case_timeout(_tc, _timeout); \
        tcase_add_test(_tc, test_##_name); \
        suite_add_tcase(_suite, _tc); \
    }

void add_conformance_tests(Suite *suite)
{
    CONFORMANCE_LOOP_CASE(suite, delivery_needs_no_sender_call, 600, 3);
    CONFORMANCE_CASE(suite, am_short_bounded_by_slot, 600);
    CONFORMANCE_CASE(suite, am_bad_input, 600);
    CONFORMANCE_CASE(suite, iface_fence_orders_get_then_put, 600);
    CONFORMANCE_CASE(suite, flush_cancel, 600);
    CONFORMANCE_CASE(suite, destroy_drains_qp, 600);
    CONFORMANCE_CASE(suite, mass_failure_cq, 600);
    CONFORMANCE_CASE(suite, hostile_peer_scribbles, 600);
    CONFORMANCE_CASE(suite, foreign_rkey_refused, 600);
    CONFORMANCE_CASE(suite, send_before_peer_connects, 600);
    CONFORMANCE_CASE(suite, nothing_to_unready_peer, 600);
    CONFORMANCE_CASE(suite, orderly_close_is_quiet, 600);
    CONFORMANCE_CASE(suite, many_endpoints_default, 600);
    CONFORMANCE_CASE(suite, idle_runs_come_back, 600);
    CONFORMANCE_CASE(suite, release_to_silent_sender, 600);
    CONFORMANCE_CASE(suite, waiter_tried_on_change, 600);
    CONFORMANCE_CASE(suite, closed_peer_runs_come_back, 600);
    CONFORMANCE_CASE(suite, recall_walks_trailing, 600);
    CONFORMANCE_CASE(suite, exit_with_endpoints_open, 600);
    CONFORMANCE_CASE(suite, churn_over_reused_slots, 600);
    CONFORMANCE_CASE(suite, async_wireup, 600);
    CONFORMANCE_CASE(suite, push_waits_for_trailer, 600);
    CONFORMANCE_CASE(suite, stopped_peer_pins_nothing, 600);
    CONFORMANCE_LOOP_CASE(suite, receiver_stall_every_phase, 600, 2);
    CONFORMANCE_CASE(suite, rnr_stall_fails_endpoint, 600);
    CONFORMANCE_CASE(suite, silent_active_peer, 600);
    CONFORMANCE_CASE(suite, switch_storm, 600);
    CONFORMANCE_CASE(suite, am_alignment, 600);
    /* Run under valgrind by the rig test (CK_RUN_CASE=close) */
    CONFORMANCE_CASE(suite, close, 600);
}

/* The first line of port 1's sysfs file @a file of verbs device @a dev,
 * without its newline, or "" */
static void port_sysfs_line(const char *dev, const char *file, char *line,
                            size_t max)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/%s", dev,
             file);
    line[0] = '\0';
    f       = fopen(path, "r");
    if (f != NULL) {
        if (fgets(line, max, f) == NULL) {
            line[0] = '\0';
        }
        line[strcspn(line, "\n")] = '\0';
        fclose(f);
    }
}

/* The netdev under the verbs device @a dev (Soft-RoCE, RoCE), or "" */
static void port_netdev(const char *dev, char *name, size_t max)
{
    port_sysfs_line(dev, "gid_attrs/ndevs/0", name, max);
}

/* Whether port 1 of @a dev is active */
static int port_active(const char *dev)
{
    char state[64];

    port_sysfs_line(dev, "state", state, sizeof(state));
    return strstr(state, "ACTIVE") != NULL;
}

static void set_link(const char *netdev, const char *updown)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", netdev, updown);
    ck_assert_msg(system(cmd) == 0, "'%s' failed", cmd);
}

/* The link under @a side's device down (its netdev named in @a netdev),
 * and up again, waiting for the port */
static void port_link_down(const side_t *side, char *netdev, size_t max)
{
    char dev[64];

    snprintf(dev, sizeof(dev), "%s", side->dev);
    dev[strcspn(dev, ":")] = '\0';
    port_netdev(dev, netdev, max);
    ck_assert_msg(netdev[0] != '\0', "no netdev under %s", dev);
    printf("port down: %s (%s)\n", dev, netdev);
    fflush(stdout);
    set_link(netdev, "down");
}

static void port_link_up(const side_t *side, const char *netdev)
{
    char dev[64];
    double start;

    snprintf(dev, sizeof(dev), "%s", side->dev);
    dev[strcspn(dev, ":")] = '\0';
    set_link(netdev, "up");
    for (start = now_sec(); !port_active(dev) && (now_sec() - start < 30);) {
        usleep(100000);
    }
    ck_assert_msg(port_active(dev), "%s did not come back", dev);
}

/*
 * A device event: A's port goes down (its netdev is set down, as a cable
 * pull would), with two endpoints connected and idle. The device reports
 * it asynchronously, not by any completion: both endpoints must fail with
 * UCS_ERR_UNREACHABLE (the rig test checks the message names the device
 * and port). Changes the rig's network, so it runs only when asked for
 * (HIPOWER_TEST_PORT_DOWN=1, test/rig-tests/t_uct_port_down.sh).
 */
START_TEST(test_port_down)
{
    char netdev[64];
    unsigned i, spins;
    double start;

    setup_pairs(2);
    for (i = 0; i < 10; ++i) {
        ck_assert_int_eq(send_one(&pairs[i % 2], i % 2, 1, 64, 1), UCS_OK);
    }
    flush_all();  /* Pull mode: the sender publishes on completion */
    for (spins = 0; (received < 10) && (spins < 2000000); ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(received, 10);

    port_link_down(&side_a, netdev, sizeof(netdev));
    start = now_sec();
    while ((ep_errors_a < 2) && (now_sec() - start < 10)) {
        progress(1, 1);
    }
    printf("port down: %u of 2 endpoints failed in %.2f s: %s\n", ep_errors_a,
           now_sec() - start, ucs_status_string(ep_error_status));
    port_link_up(&side_a, netdev);

    ck_assert_uint_eq(ep_errors_a, 2);
    ck_assert_int_eq(ep_error_status, UCS_ERR_UNREACHABLE);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

void add_port_down_test(Suite *suite)
{
    TCase *tcase;

    if (getenv("HIPOWER_TEST_PORT_DOWN") == NULL) {
        return;
    }

    tcase = tcase_create("port_down");
    case_timeout(tcase, 120);
    tcase_add_test(tcase, test_port_down);
    add_connect_port_down_tests(tcase);
    suite_add_tcase(suite, tcase);
}
