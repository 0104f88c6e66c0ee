/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Handlers that call UCT again while the receiver walks its slots: one
 * that fails its own endpoint (uct_ep_flush() with UCT_FLUSH_FLAG_CANCEL,
 * what UCP's ucp_ep_close_nbx(FORCE) does from a receive callback) and one
 * that progresses the interface again. The walk goes on over slots that
 * are still the endpoint's and gives them back to the pool once it is over;
 * a nested progress leaves the endpoint under walk alone, so no message is
 * delivered twice or out of order. Each case in a run of single frames
 * (the default receive loop), with HOLD_SLOTS=y (the general loop), inside
 * a bundle, and (self mode) inside a filled slot's later batch, walked when
 * the receiver resumes the slot.
 */
#include "fixture.h"

#include "hipower_iface.h"
#include "hipower_ep.h"

#include <unistd.h>


enum {
    REENTRY_PLAIN,   /* Frames of their own, HOLD_SLOTS=n */
    REENTRY_HOLD,    /* Frames of their own, HOLD_SLOTS=y */
    REENTRY_BUNDLE,  /* The action falls on a bundled message */
    REENTRY_FILL,    /* ... on a filled slot's second batch (self mode) */
    REENTRY_LAST
};

static const char *reentry_names[] = {
    "frames", "frames, HOLD_SLOTS=y", "a bundle", "a filled slot"
};

enum {
    ACTION_CANCEL,   /* uct_ep_flush(CANCEL) of B's endpoint of pair 0 */
    ACTION_PROGRESS, /* B's interface and worker progressed again */
    ACTION_DEADLINE  /* Past the grant deadline, B's interface progressed
                        for a clock cycle */
};

static int      action;
static uint32_t action_seq;   /* Pair 0's message that triggers it */
static unsigned actions_done;

static uct_hipower_ep_t *ep_of(uct_ep_h ep)
{
    return ucs_derived_of(ep, uct_hipower_ep_t);
}

static int self_mode(void)
{
    return !strcmp(getenv("UCX_HIPOWER_NOTIFY") ? : "self", "self");
}

static ucs_status_t reentry_handler(void *arg, void *data, size_t length,
                                    unsigned flags)
{
    const msg_hdr_t *hdr = data;
    ucs_status_t status;
    int trigger, i;

    trigger = (length >= MSG_HDR_SIZE) && (hdr->pair == 0) &&
              (actions_done == 0) &&
              ((action == ACTION_DEADLINE) ?
               (ep_of(pairs[0].ep_b)->rx.granted.count > 0) :
               (hdr->seq == action_seq));
    status  = am_handler(arg, data, length, flags);
    if (!trigger) {
        return status;
    }

    ++actions_done;
    if (action == ACTION_CANCEL) {
        (void)uct_ep_flush(pairs[0].ep_b, UCT_FLUSH_FLAG_CANCEL, NULL);
        ck_assert(ep_of(pairs[0].ep_b)->flags.all & UCT_HIPOWER_EP_FLAG_FAILED);
    } else if (action == ACTION_DEADLINE) {
        action_seq = hdr->seq;
        usleep(300000); /* 1.5 x GRANT_TIMEOUT */
        for (i = 0; i < UCT_HIPOWER_CLOCK_CALLS; ++i) {
            uct_iface_progress(side_b.iface);
        }
    } else {
        for (i = 0; i < 16; ++i) {
            uct_iface_progress(side_b.iface);
            uct_worker_progress(side_b.worker);
        }
    }
    return status;
}

/*
 * Two pairs; pair 0's messages land in B's slots before B looks, then B
 * walks them and the handler acts on pair 0's message @a action_seq.
 * Returns the messages pair 0 sent.
 */
static unsigned reentry_setup(int variant)
{
    unsigned sent, spins, slots;

    hold_slots = (variant == REENTRY_HOLD) ? "y" : "n";
    if ((variant == REENTRY_BUNDLE) || (variant == REENTRY_FILL)) {
        /* A window of 1: a burst's first message goes alone, the rest
         * wait in a bundle for its completion */
        setenv("UCX_HIPOWER_BUNDLE_WINDOW", "1", 1);
        setenv("UCX_HIPOWER_BUNDLE_HOLD_TIME", "1s", 1);
    }
    if (variant == REENTRY_FILL) {
        setenv("UCX_HIPOWER_BUNDLE_FILL", "y", 1);
    }
    setup_pairs(2);
    hold_slots = "y"; /* The fixture's */
    unsetenv("UCX_HIPOWER_BUNDLE_WINDOW");
    unsetenv("UCX_HIPOWER_BUNDLE_HOLD_TIME");
    unsetenv("UCX_HIPOWER_BUNDLE_FILL");
    hold_probability = 0;
    actions_done     = 0;
    /* Pair 0's message the handler acts on: in a filled slot's second
     * batch, in the bundle after the first frame, or a third of a run */
    action_seq       = (variant == REENTRY_FILL)   ? 17 :
                       (variant == REENTRY_BUNDLE) ? 6 :
                       ucs_min(b_slots(0) - 1, 24) / 3;
    for (spins = 0; spins < NUM_AM_IDS; ++spins) {
        ck_assert_int_eq(uct_iface_set_am_handler(side_b.iface, spins,
                                                  reentry_handler,
                                                  (void*)(uintptr_t)spins, 0),
                         UCS_OK);
    }

    slots = b_slots(0);
    switch (variant) {
    case REENTRY_FILL:
        /* The first burst's bundle opens a filled slot, the second's is
         * its next batch; a zero-copy message in a slot of its own makes
         * it final */
        ck_assert(ep_of(pairs[0].ep_a)->flags.all & UCT_HIPOWER_EP_FLAG_FILL);
        bundle_burst(0, 12);
        /* B walks the first batch and keeps the slot open; the second
         * batch is walked when B resumes the slot */
        for (spins = 0; (pairs[0].expected_seq < 12) && (spins < 20000000);
             ++spins) {
            progress(1, 1);
        }
        ck_assert_uint_eq(pairs[0].expected_seq, 12);
        ck_assert(ep_of(pairs[0].ep_b)->rx.fill.done != 0);
        bundle_burst(12, 12);
        alloc_zbufs();
        ck_assert_int_eq(send_one(&pairs[0], 0, 2, fit_length(64, 2), 2),
                         UCS_OK);
        sent = 25;
        break;
    case REENTRY_BUNDLE:
        bundle_burst(0, 20);
        sent = 20;
        break;
    default:
        sent = ucs_min(slots - 1, 24);
        bundle_burst(0, sent);
        break;
    }
    for (spins = 0; spins < 1000; ++spins) {
        progress(1, 0);
    }
    return sent;
}

/* B delivers pair 1's next @a n messages, intact and in order */
static void second_pair_goes_on(unsigned n)
{
    uint32_t expected = pairs[1].expected_seq + n;
    unsigned i, spins;

    for (i = 0; i < n; ++i) {
        while (send_one(&pairs[1], 1, 1, fit_length(100, i % 2), i % 2) !=
               UCS_OK) {
            progress(1, 1);
        }
    }
    for (spins = 0; (pairs[1].expected_seq < expected) && (spins < 20000000);
         ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(pairs[1].expected_seq, expected);
}

/*
 * A handler cancels its own endpoint in the middle of a walk: the messages
 * walked before it stay delivered, intact and in order; the walk ends
 * without touching a slot that went back to the pool; once it is over the
 * endpoint holds no slot of the shared pool, delivers nothing more, and
 * the other pair goes on. Red (an assertion in the ring, or slots still
 * held, or garbage) when the runs go back while the walk runs.
 */
START_TEST(test_handler_cancels_its_endpoint)
{
    int variant = _i;
    uct_hipower_ep_t *ep_b;
    uint32_t delivered;
    unsigned sent, spins;

    if ((variant == REENTRY_FILL) && !self_mode()) {
        printf("handler cancels its endpoint: filled slots in self mode "
               "only\n");
        return;
    }
    action = ACTION_CANCEL;
    sent   = reentry_setup(variant);
    ep_b   = ep_of(pairs[0].ep_b);
    for (spins = 0; (actions_done == 0) && (spins < 2000000); ++spins) {
        progress(0, 1);
    }
    ck_assert_uint_eq(actions_done, 1);
    for (spins = 0; spins < 10000; ++spins) {
        progress(0, 1);
    }
    delivered = pairs[0].expected_seq;
    printf("handler cancels its endpoint in %s: at message %u, %u of %u "
           "delivered, %u slots held after\n", reentry_names[variant],
           action_seq, delivered, sent, uct_hipower_ep_rx_held(ep_b));
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_ge(delivered, action_seq + 1);
    ck_assert_uint_le(delivered, sent);
    ck_assert(ep_b->flags.all & UCT_HIPOWER_EP_FLAG_FAILED);
    ck_assert(!(ep_b->flags.all & UCT_HIPOWER_EP_FLAG_IN_RX));
    if (ucs_derived_of(side_b.iface,
                       uct_hipower_iface_t)->config.shared_pool) {
        /* (Push and pull: each endpoint's own slots, freed with it) */
        ck_assert_uint_eq(uct_hipower_ep_rx_held(ep_b), 0);
    }
    ck_assert_uint_eq(ep_errors_b, 0); /* Canceled: nobody to tell */

    second_pair_goes_on(40);
    ck_assert_uint_eq(pairs[0].expected_seq, delivered);
    ck_assert_int_eq(errors, 0);
    if (variant == REENTRY_FILL) {
        free_zbufs();
    }
    teardown_pairs();
}
END_TEST

/*
 * A handler progresses the interface again in the middle of a walk: the
 * nested progress does not walk that endpoint, so every message arrives
 * once, in order and intact (the fixture's handler counts a repeat or a
 * skip as an error). Red when a nested walk starts from the same ring
 * head or filled-slot offset.
 */
START_TEST(test_handler_progresses_again)
{
    int variant = _i;
    unsigned sent, spins;

    if ((variant == REENTRY_FILL) && !self_mode()) {
        printf("handler progresses again: filled slots in self mode only\n");
        return;
    }
    action = ACTION_PROGRESS;
    sent   = reentry_setup(variant);
    for (spins = 0; (pairs[0].expected_seq < sent) && (spins < 20000000);
         ++spins) {
        progress(1, 1);
    }
    printf("handler progresses again in %s: at message %u, %u of %u "
           "delivered\n", reentry_names[variant], action_seq,
           pairs[0].expected_seq, sent);
    ck_assert_uint_eq(actions_done, 1);
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(pairs[0].expected_seq, sent);
    ck_assert_uint_eq(received, sent);
    second_pair_goes_on(40);
    ck_assert_int_eq(errors, 0);
    if (variant == REENTRY_FILL) {
        free_zbufs();
    }
    teardown_pairs();
}
END_TEST

/*
 * A handler's nested progress reads the clock past the grant deadline of
 * the endpoint under walk (review b86e41e L1). Self mode, the shared pool
 * (256 slots of which pair 0 holds 128), IDLE_TIME=inf: pair 1 is active,
 * so pair 0 holds more than its share; A writes 100 messages into pair 0's
 * run before B looks. B's first walk of pair 0 delivers a batch (64) and
 * then grants a smaller run; in the next walk, the handler of pair 0's
 * first message delivered with the grant out sleeps 1.5 x GRANT_TIMEOUT
 * (200 ms) and progresses B's interface for a clock cycle (64 calls). The
 * deadline must leave the runs under walk alone: no assertion, no endpoint
 * error; every message arrives once, in order, intact, and pair 0 goes on
 * in the run it was granted. Red (an assertion in the ring, with
 * HOLD_SLOTS=y, or the endpoint failed) when the deadline frees the runs
 * under the walk. Frames of their own, HOLD_SLOTS=n and y.
 */
START_TEST(test_handler_meets_grant_deadline)
{
    int variant = _i;
    uct_hipower_ep_t *ep_b;
    unsigned sent, spins, i;

    if (!self_mode()) {
        printf("handler meets grant deadline: runs change in self mode "
               "only\n");
        return;
    }
    setenv("UCX_HIPOWER_SLOT_SIZE", "8192", 1);
    setenv("UCX_HIPOWER_MEM_BUDGET", "2m", 1);
    setenv("UCX_HIPOWER_SLOTS", "128", 1);
    setenv("UCX_HIPOWER_MIN_SLOTS", "8", 1);
    setenv("UCX_HIPOWER_MAX_EPS", "1", 1);
    setenv("UCX_HIPOWER_IDLE_TIME", "inf", 1);
    setenv("UCX_HIPOWER_BUNDLE", "n", 1);
    setenv("UCX_HIPOWER_GRANT_TIMEOUT", "200ms", 1);
    hold_slots = (variant == REENTRY_HOLD) ? "y" : "n";
    setup_pairs(2);
    hold_slots = "y"; /* The fixture's */
    hold_probability = 0;
    action           = ACTION_DEADLINE;
    actions_done     = 0;
    for (i = 0; i < NUM_AM_IDS; ++i) {
        ck_assert_int_eq(uct_iface_set_am_handler(side_b.iface, i,
                                                  reentry_handler,
                                                  (void*)(uintptr_t)i, 0),
                         UCS_OK);
    }
    ep_b = ep_of(pairs[0].ep_b);
    ck_assert_uint_eq(b_slots(0), 128);

    /* Pair 1 active at B */
    second_pair_goes_on(1);
    /* Pair 0's messages land before B looks */
    sent = 100;
    for (i = 0; i < sent; ++i) {
        ck_assert_int_eq(send_one(&pairs[0], 0, 1, fit_length(100, i % 2),
                                  i % 2), UCS_OK);
    }
    for (spins = 0; spins < 1000; ++spins) {
        progress(1, 0);
    }
    for (spins = 0; (pairs[0].expected_seq < sent) && (ep_errors_b == 0) &&
                    (spins < 2000000); ++spins) {
        progress(0, 1);
    }
    printf("handler meets grant deadline (%s): at message %u, %u of %u "
           "delivered, %u endpoint errors, %"PRIu64" deadlines passed\n",
           reentry_names[variant], action_seq, pairs[0].expected_seq, sent,
           ep_errors_b,
           ucs_derived_of(side_b.iface,
                          uct_hipower_iface_t)->stats.grant_timeouts);
    ck_assert_msg(actions_done == 1, "no message of pair 0 was delivered "
                  "while a grant was out: the case did not happen");
    ck_assert_int_eq(errors, 0);
    ck_assert_msg(ep_errors_b == 0, "B's endpoint failed (%s)",
                  ucs_status_string(ep_error_status_b));
    ck_assert(!(ep_b->flags.all & UCT_HIPOWER_EP_FLAG_FAILED));
    ck_assert_uint_eq(pairs[0].expected_seq, sent);
    ck_assert_uint_eq(received, sent + 1);

    /* A moves to the granted run; pair 0 goes on there, and so does 1 */
    for (i = 0; i < 40; ++i) {
        while (send_one(&pairs[0], 0, 1, fit_length(100, i % 2), i % 2) !=
               UCS_OK) {
            progress(1, 1);
        }
    }
    for (spins = 0; (pairs[0].expected_seq < sent + 40) && (spins < 20000000);
         ++spins) {
        progress(1, 1);
    }
    ck_assert_uint_eq(pairs[0].expected_seq, sent + 40);
    ck_assert_uint_eq(ep_b->rx.granted.count, 0);
    ck_assert_uint_lt(ep_b->rx.ring.num_slots, 128);
    second_pair_goes_on(40);
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(ep_errors_b, 0);
    teardown_pairs();
}
END_TEST

void add_reentry_tests(Suite *suite)
{
    TCase *tc;

    tc = tcase_create("handler_cancels_its_endpoint");
    tcase_set_tags(tc, "handler_cancels_its_endpoint");
    case_timeout(tc, 600);
    tcase_add_loop_test(tc, test_handler_cancels_its_endpoint, 0,
                        REENTRY_LAST);
    suite_add_tcase(suite, tc);

    tc = tcase_create("handler_progresses_again");
    tcase_set_tags(tc, "handler_progresses_again");
    case_timeout(tc, 600);
    tcase_add_loop_test(tc, test_handler_progresses_again, 0, REENTRY_LAST);
    suite_add_tcase(suite, tc);

    tc = tcase_create("handler_meets_grant_deadline");
    tcase_set_tags(tc, "handler_meets_grant_deadline");
    case_timeout(tc, 600);
    tcase_add_loop_test(tc, test_handler_meets_grant_deadline, REENTRY_PLAIN,
                        REENTRY_HOLD + 1);
    suite_add_tcase(suite, tc);
}
