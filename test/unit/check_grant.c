/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"
#include "hipower_grant.h"
#include "hipower_arena.h"
#include "hipower_slot.h"

#include <ucs/sys/math.h>

#include <stdlib.h>
#include <string.h>


START_TEST(test_grant_switch_rules)
{
    hipower_rx_runs_t rx;
    uint32_t seq, slot;

    hipower_rx_runs_init(&rx, 100, 4);
    ck_assert(hipower_rx_runs_may_grant(&rx));
    ck_assert(!hipower_rx_runs_switch_pending(&rx));

    /* Three messages delivered from the first run, one of them kept */
    for (seq = 0; seq < 3; ++seq) {
        ck_assert_uint_eq(hipower_rx_runs_next(&rx, &slot), 100 + seq);
        ck_assert_uint_eq(slot, seq);
        hipower_rx_runs_delivered(&rx, seq == 1);
    }

    ck_assert_uint_eq(hipower_rx_runs_grant(&rx, 200, 8), 2);
    ck_assert(hipower_rx_runs_switch_pending(&rx));
    ck_assert(!hipower_rx_runs_may_grant(&rx));

    /* Impossible counts: fewer than delivered, more than the run holds */
    ck_assert(!hipower_rx_runs_switch(&rx, 2));
    ck_assert(!hipower_rx_runs_switch(&rx, 3 + 4 + 1));
    ck_assert(!hipower_rx_runs_switch(&rx, UINT32_MAX));
    ck_assert(hipower_rx_runs_switch_pending(&rx));

    /* The sender wrote 5 into the first run: 3 and 4 are drained first */
    ck_assert(hipower_rx_runs_switch(&rx, 5));
    ck_assert(!hipower_rx_runs_switch_pending(&rx));
    ck_assert_uint_eq(hipower_rx_runs_next(&rx, &slot), 103);
    ck_assert_uint_eq(slot, 3);
    hipower_rx_runs_delivered(&rx, 0);
    ck_assert_uint_eq(hipower_rx_runs_next(&rx, &slot), 100); /* Wrapped */
    ck_assert_uint_eq(slot, 4);
    hipower_rx_runs_delivered(&rx, 0);
    ck_assert_uint_eq(hipower_rx_runs_next(&rx, &slot), 200);
    ck_assert_uint_eq(slot, 0);

    /* Drained but slot 101 still kept: the old run stays */
    ck_assert(!hipower_rx_runs_old_done(&rx));
    ck_assert(!hipower_rx_runs_may_grant(&rx));
    hipower_rx_runs_release(&rx, 101);
    ck_assert(hipower_rx_runs_old_done(&rx));
    hipower_rx_runs_old_free(&rx);
    ck_assert(hipower_rx_runs_may_grant(&rx));
    ck_assert_uint_eq(rx.cur.epoch, 2);
}
END_TEST

START_TEST(test_grant_sender_rules)
{
    hipower_tx_runs_t tx;

    hipower_tx_runs_init(&tx, 0, 4);
    tx.written = 9;
    ck_assert(!hipower_tx_grant_valid(&tx, 1, 8, 64)); /* The current one */
    ck_assert(!hipower_tx_grant_valid(&tx, 3, 8, 64)); /* Not the next */
    ck_assert(!hipower_tx_grant_valid(&tx, 2, 0, 64));
    ck_assert(!hipower_tx_grant_valid(&tx, 2, 65, 64));
    ck_assert(hipower_tx_grant_valid(&tx, 2, 64, 64));
    ck_assert_uint_eq(hipower_tx_runs_adopt(&tx, 2, 40, 64), 9);
    ck_assert_uint_eq(tx.written, 0);
    ck_assert(!hipower_tx_grant_valid(&tx, 2, 8, 64));
}
END_TEST

START_TEST(test_grant_sizes)
{
    static const struct {
        uint32_t               cur, fair;
        int                    wants, idle;
        uint32_t               free, reserve;
        hipower_grant_action_t action;
        uint32_t               size;
    } cases[] = {
        /* Idle: back to the mailbox (1), if not there yet */
        {16, 16, 0, 1, 100, 8, HIPOWER_GRANT_SHRINK, 1},
        {1, 16, 0, 1, 100, 8, HIPOWER_GRANT_NONE, 0},
        /* Idle wins over an old request (the last frame said "full") */
        {1, 16, 1, 1, 100, 8, HIPOWER_GRANT_NONE, 0},
        /* More than the fair share: shrink, out of the reserve if need be,
         * smaller than the share if the pool is short */
        {64, 16, 1, 0, 16, 20, HIPOWER_GRANT_SHRINK, 16},
        {64, 16, 1, 0, 5, 20, HIPOWER_GRANT_SHRINK, 5},
        {64, 16, 1, 0, 0, 20, HIPOWER_GRANT_NONE, 0},
        /* Grow only when asked, up to the fair share, leaving the reserve */
        {1, 64, 0, 0, 1000, 8, HIPOWER_GRANT_NONE, 0},
        {1, 64, 1, 0, 1000, 8, HIPOWER_GRANT_GROW, 64},
        {1, 64, 1, 0, 20, 8, HIPOWER_GRANT_GROW, 12},
        {1, 64, 1, 0, 9, 8, HIPOWER_GRANT_NONE, 0},
        {12, 64, 1, 0, 20, 8, HIPOWER_GRANT_NONE, 0},
    };
    uint32_t size;
    size_t i;

    ck_assert_uint_eq(hipower_grant_fair_share(4096, 1, 1, 64), 64);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 256, 1, 64), 16);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 8192, 1, 64), 1);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 0, 1, 64), 64);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        size = 0;
        ck_assert_msg(hipower_grant_decide(cases[i].cur, cases[i].fair,
                                           cases[i].wants, cases[i].idle,
                                           cases[i].free, cases[i].reserve,
                                           1, &size) == cases[i].action,
                      "case %zu: action", i);
        if (cases[i].action != HIPOWER_GRANT_NONE) {
            ck_assert_msg(size == cases[i].size, "case %zu: size %u", i,
                          size);
        }
    }
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 4, 1), 5);
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_SHRINK, 4, 1), 1);
}
END_TEST


/*
 * A model of one receiving interface whose slot pool serves G_EPS peers,
 * step by step in random order:
 *  - each sender writes into its current run in ring order while it knows
 *    of free slots (the receiver's in-order release count of that run,
 *    which the sender uses only for the epoch it was counted in), raises
 *    "wants" when its run is full, and adopts a grant at its next send, or,
 *    when not sending, at a nudge (a null frame);
 *  - writes land in order per peer, each one the frame's mark (magic and
 *    the low 16 bits of the sequence, as the real trailer) and its payload;
 *  - grant records reach the sender later, on their own path;
 *  - the receiver delivers per peer in order, keeps some descriptors
 *    (releasing them later, in any order), and decides grants with
 *    hipower_grant_decide() from the pool's arena.
 * The checks: every write lands in a slot of its own peer's run (the pool
 * owner map), every delivered payload is the next message of that peer,
 * and in the end every message sent was delivered. Phases of all senders
 * bursting check that the pool never deadlocks while the receiver keeps
 * descriptors, and that each sender gets at least half its fair share.
 * Breaking the rules (not clearing a new run's marks; freeing the old run
 * at the switch without draining it) must make the checks fail.
 */
#define G_EPS        12
#define G_POOL       96
#define G_MAX_RUN    32
#define G_RESERVE    4
#define G_MAILBOX    1
#define G_WIRE       64
#define G_MAX_HELD   24
#define G_IDLE       2000 /* Longer than a mailbox's round trip */
#define G_NULL_MSG   UINT64_MAX

enum {
    G_BREAK_NONE,
    G_BREAK_NO_CLEAR,   /* Grant a run without clearing its marks */
    G_BREAK_NO_DRAIN    /* Free the old run at the switch */
};

typedef struct {
    uint32_t slot;
    uint64_t mark;
    uint64_t msg;
    uint32_t old_count;
} g_write_t;

typedef struct {
    /* Sender */
    hipower_tx_runs_t tx;
    uint64_t          sent;
    int               sending;
    int               wants;
    uint32_t          rec_epoch, rec_first, rec_count; /* As seen */
    int               rec_in_flight;
    uint32_t          fl_epoch, fl_first, fl_count;
    uint32_t          ack_epoch, ack;                   /* As seen */
    g_write_t         wire[G_WIRE];
    unsigned          wire_head, wire_tail;
    /* Receiver */
    hipower_rx_runs_t rx;
    uint64_t          delivered;
    uint64_t          window_delivered;
    uint32_t          acked;
    uint64_t          last_news;
} g_ep_t;

typedef struct {
    g_ep_t            eps[G_EPS];
    hipower_arena_t   arena;
    uint64_t          mark[G_POOL];
    uint64_t          msg[G_POOL];
    uint32_t          old_count[G_POOL];
    int               owner[G_POOL];
    uint32_t          seq[G_POOL];
    int               released[G_POOL];
    struct {
        int           ep;
        uint32_t      slot;
        uint64_t      msg;
    } held[G_MAX_HELD];
    unsigned          num_held;
    uint64_t          now;
    int               brk;
    /* What went wrong */
    unsigned          violations, corrupt, bad_switches;
    unsigned          grants, shrinks;
} g_model_t;

static uint64_t g_key(uint32_t seq)
{
    return hipower_slot_trailer_key(seq);
}

static void g_give(g_model_t *m, int e, uint32_t first, uint32_t count)
{
    uint32_t i;

    for (i = first; i < first + count; ++i) {
        if (m->brk != G_BREAK_NO_CLEAR) {
            m->mark[i] = 0;
        }
        m->owner[i]    = e;
        m->released[i] = 1;
    }
}

static void g_take_back(g_model_t *m, const hipower_run_t *run)
{
    uint32_t i;

    for (i = run->first; i < run->first + run->count; ++i) {
        m->owner[i] = -1;
    }
    hipower_arena_free(&m->arena, run->first, run->count);
}

static void g_init(g_model_t *m, int brk)
{
    uint32_t first, count;
    int e;

    memset(m, 0, sizeof(*m));
    m->brk = brk;
    ck_assert_int_eq(hipower_arena_init(&m->arena, G_POOL), UCS_OK);
    for (e = 0; e < G_POOL; ++e) {
        m->owner[e] = -1;
    }
    for (e = 0; e < G_EPS; ++e) {
        /* Every endpoint starts with its mailbox */
        ck_assert_int_eq(hipower_arena_alloc(&m->arena, G_MAILBOX, G_MAILBOX,
                                             &first, &count), UCS_OK);
        g_give(m, e, first, count);
        hipower_rx_runs_init(&m->eps[e].rx, first, count);
        hipower_tx_runs_init(&m->eps[e].tx, first, count);
        m->eps[e].ack_epoch = 1;
    }
}

static void g_write(g_model_t *m, int e, uint64_t msg, uint32_t old_count)
{
    g_ep_t *ep = &m->eps[e];
    g_write_t *w;
    uint32_t seq = ep->tx.written++;

    w            = &ep->wire[ep->wire_tail++ % G_WIRE];
    w->slot      = ep->tx.cur.first + seq % ep->tx.cur.count;
    w->mark      = g_key(seq);
    w->msg       = msg;
    w->old_count = old_count;
    m->violations += (m->owner[w->slot] != e);
}

/* The sender adopts a grant it has seen, if any; returns the old run's
 * count for the next frame, or UINT32_MAX */
static uint32_t g_adopt(g_ep_t *ep)
{
    if (!hipower_tx_grant_valid(&ep->tx, ep->rec_epoch, ep->rec_count,
                                G_MAX_RUN)) {
        return UINT32_MAX;
    }
    return hipower_tx_runs_adopt(&ep->tx, ep->rec_epoch, ep->rec_first,
                                 ep->rec_count);
}

static void g_send(g_model_t *m, int e)
{
    g_ep_t *ep = &m->eps[e];
    uint32_t old_count, known, outstanding;

    if ((ep->wire_tail - ep->wire_head) == G_WIRE) {
        return;
    }

    old_count   = g_adopt(ep);
    known       = (ep->ack_epoch == ep->tx.cur.epoch) ? ep->ack : 0;
    outstanding = ep->tx.written - known;
    if (outstanding >= ep->tx.cur.count) {
        ep->wants = 1;
        return;
    }
    g_write(m, e, ep->sent++, old_count);
}

/* A sender that does not send adopts a grant when nudged: a null frame */
static void g_nudge(g_model_t *m, int e)
{
    g_ep_t *ep = &m->eps[e];
    uint32_t old_count;

    if (ep->sending || ((ep->wire_tail - ep->wire_head) == G_WIRE)) {
        return;
    }
    old_count = g_adopt(ep);
    if (old_count != UINT32_MAX) {
        g_write(m, e, G_NULL_MSG, old_count);
    }
}

static void g_land(g_model_t *m, int e)
{
    g_ep_t *ep = &m->eps[e];
    g_write_t *w;

    if (ep->wire_head == ep->wire_tail) {
        return;
    }
    w = &ep->wire[ep->wire_head++ % G_WIRE];
    m->violations        += (m->owner[w->slot] != e);
    m->msg[w->slot]       = w->msg;
    m->old_count[w->slot] = w->old_count;
    m->mark[w->slot]      = w->mark;
}

static void g_land_record(g_ep_t *ep)
{
    if (ep->rec_in_flight) {
        ep->rec_first     = ep->fl_first;
        ep->rec_count     = ep->fl_count;
        ep->rec_epoch     = ep->fl_epoch; /* Last */
        ep->rec_in_flight = 0;
    }
}

static void g_release_one(g_model_t *m)
{
    unsigned i;

    if (m->num_held == 0) {
        return;
    }
    i = rand() % m->num_held;
    /* A kept descriptor's message must be intact until released */
    m->corrupt += (m->msg[m->held[i].slot] != m->held[i].msg);
    m->released[m->held[i].slot] = 1;
    hipower_rx_runs_release(&m->eps[m->held[i].ep].rx, m->held[i].slot);
    m->held[i] = m->held[--m->num_held];
}

static unsigned g_active(const g_model_t *m)
{
    unsigned e, active = 0;

    for (e = 0; e < G_EPS; ++e) {
        active += (m->now - m->eps[e].last_news < G_IDLE) ||
                  m->eps[e].wants;
    }
    return active;
}

static void g_progress(g_model_t *m, int e, double hold_probability)
{
    g_ep_t *ep = &m->eps[e];
    uint32_t seq, slot, size, first, count;
    hipower_grant_action_t action;
    int held, i, switch_first;

    if (hipower_rx_runs_old_done(&ep->rx)) {
        g_take_back(m, &ep->rx.old);
        hipower_rx_runs_old_free(&ep->rx);
    }

    /* The order of the two polls does not matter: the switch may come
     * before the old run's last messages are delivered */
    switch_first = rand() % 2;
    for (i = 0; i < 8; ++i) {
        slot = hipower_rx_runs_next(&ep->rx, &seq);
        if (!switch_first && (m->mark[slot] == g_key(seq))) {
            if (m->msg[slot] == G_NULL_MSG) {
                held = 0;
            } else {
                m->corrupt += (m->owner[slot] != e) ||
                              (m->msg[slot] != ep->delivered);
                ++ep->delivered;
                ++ep->window_delivered;
                held = (m->num_held < G_MAX_HELD) &&
                       (rand() < hold_probability * RAND_MAX);
            }
            hipower_rx_runs_delivered(&ep->rx, held);
            m->seq[slot]      = seq;
            m->released[slot] = !held;
            if (held) {
                m->held[m->num_held].ep     = e;
                m->held[m->num_held].msg    = m->msg[slot];
                m->held[m->num_held++].slot = slot;
            }
            ep->last_news = m->now;
            continue;
        }

        if (!hipower_rx_runs_switch_pending(&ep->rx) ||
            (m->mark[ep->rx.granted.first] != g_key(0))) {
            if (switch_first) {
                switch_first = 0;
                continue;
            }
            break;
        }
        switch_first = 0;
        if (!hipower_rx_runs_switch(&ep->rx,
                                    m->old_count[ep->rx.granted.first])) {
            ++m->bad_switches;
            break;
        }
        ep->acked = 0;
        if (m->brk == G_BREAK_NO_DRAIN) {
            ep->rx.old_end  = ep->rx.old_head;
            ep->rx.old_held = 0;
        }
    }

    /* The in-order release count of the current run, for its sender */
    while ((ep->acked != ep->rx.cur_head)) {
        slot = ep->rx.cur.first + ep->acked % ep->rx.cur.count;
        if (!m->released[slot] || (m->seq[slot] != ep->acked)) {
            break;
        }
        ++ep->acked;
    }
    ep->ack_epoch = ep->rx.cur.epoch;
    ep->ack       = ep->acked;

    if (!hipower_rx_runs_may_grant(&ep->rx)) {
        return;
    }
    action = hipower_grant_decide(
            ep->rx.cur.count,
            hipower_grant_fair_share(G_POOL - G_RESERVE, g_active(m),
                                     G_MAILBOX, G_MAX_RUN),
            ep->wants, m->now - ep->last_news >= G_IDLE,
            hipower_arena_free_slots(&m->arena), G_RESERVE, G_MAILBOX,
            &size);
    if ((action == HIPOWER_GRANT_NONE) ||
        (hipower_arena_alloc(&m->arena, size,
                             hipower_grant_min_size(action, ep->rx.cur.count,
                                                    G_MAILBOX),
                             &first, &count) != UCS_OK)) {
        return;
    }
    g_give(m, e, first, count);
    ep->fl_epoch      = hipower_rx_runs_grant(&ep->rx, first, count);
    ep->fl_first      = first;
    ep->fl_count      = count;
    ep->rec_in_flight = 1;
    ep->wants         = 0;
    ++m->grants;
    m->shrinks += (action == HIPOWER_GRANT_SHRINK);
}

/* Runs the model; returns the messages not delivered in the end, and the
 * least served sender's share of its fair share in all-bursting phases */
static uint64_t g_run(g_model_t *m, unsigned seed, unsigned steps, int brk,
                      double *min_share_p)
{
    double min_share = 1e9, mean;
    uint64_t stranded = 0, total;
    unsigned i, phase;
    int e, k, bursting;

    srand(seed);
    g_init(m, brk);
    for (i = 0; i < steps; ++i) {
        ++m->now;
        /* Phases of 5,000 steps: every sender bursting, or some */
        phase    = i / 5000;
        bursting = (phase % 2) == 0;
        if ((i % 5000 == 0) && !bursting) {
            /* The second half of a phase of every sender bursting */
            total = 0;
            for (e = 0; e < G_EPS; ++e) {
                total += m->eps[e].window_delivered;
            }
            mean = (double)total / G_EPS;
            for (e = 0; e < G_EPS; ++e) {
                min_share = ucs_min(min_share,
                                    m->eps[e].window_delivered / mean);
            }
        }
        if (i % 5000 == 0) {
            for (e = 0; e < G_EPS; ++e) {
                m->eps[e].sending = bursting ? 1 : (rand() % 3 == 0);
            }
        }
        if (i % 5000 == 2500) {
            for (e = 0; e < G_EPS; ++e) {
                m->eps[e].window_delivered = 0;
            }
        }

        e = rand() % G_EPS;
        switch (rand() % 8) {
        case 0:
        case 1:
            if (m->eps[e].sending) {
                /* Senders post faster than one message per landing */
                for (k = 0; k < 8; ++k) {
                    g_send(m, e);
                }
            } else {
                g_nudge(m, e);
            }
            break;
        case 2:
        case 3:
            g_land(m, e);
            break;
        case 4:
            g_land_record(&m->eps[e]);
            break;
        case 5:
            g_release_one(m);
            break;
        default:
            g_progress(m, e, 0.3);
            break;
        }
    }

    /* The senders stop; what is in flight lands, every descriptor is
     * released, grants are adopted by nudges, the receiver drains */
    for (i = 0; i < 20 * G_WIRE; ++i) {
        ++m->now;
        for (e = 0; e < G_EPS; ++e) {
            m->eps[e].sending = 0;
            g_land(m, e);
            g_land_record(&m->eps[e]);
            g_nudge(m, e);
            g_release_one(m);
            g_progress(m, e, 0);
        }
    }

    for (e = 0; e < G_EPS; ++e) {
        stranded += m->eps[e].sent - m->eps[e].delivered;
    }
    hipower_arena_cleanup(&m->arena);
    *min_share_p = min_share;
    return stranded;
}

START_TEST(test_grant_model)
{
    g_model_t *m = malloc(sizeof(*m));
    unsigned seed, grants = 0, shrinks = 0;
    uint64_t delivered = 0;
    double share, min_share = 1e9;
    int e;

    ck_assert_ptr_ne(m, NULL);
    for (seed = 0; seed < 40; ++seed) {
        ck_assert_msg(g_run(m, seed + _i * 1000, 40000, G_BREAK_NONE,
                            &share) == 0,
                      "seed %u: messages not delivered", seed + _i * 1000);
        ck_assert_msg(m->violations == 0, "seed %u: %u writes outside the "
                      "peer's own run", seed, m->violations);
        ck_assert_msg(m->corrupt == 0, "seed %u: %u wrong messages "
                      "delivered", seed, m->corrupt);
        ck_assert_uint_eq(m->bad_switches, 0);
        for (e = 0; e < G_EPS; ++e) {
            delivered += m->eps[e].delivered;
        }
        grants   += m->grants;
        shrinks  += m->shrinks;
        min_share = ucs_min(min_share, share);
    }

    /* The model exercised grants, shrinks and traffic */
    ck_assert_uint_gt(grants, 40 * 50);
    ck_assert_uint_gt(shrinks, 40 * 20);
    ck_assert_uint_gt(delivered, 40 * 3000);
    printf("grant model: %u grants (%u shrinks), %lu messages delivered, "
           "least served bursting sender %.2f of its fair share\n", grants,
           shrinks, delivered, min_share);
    ck_assert_msg(min_share >= 0.5, "a bursting sender got %.2f of its fair "
                  "share", min_share);
    free(m);
}
END_TEST

static void g_expect_broken(int brk, const char *what)
{
    g_model_t *m = malloc(sizeof(*m));
    unsigned seed, bad_runs = 0;
    double share;

    ck_assert_ptr_ne(m, NULL);
    for (seed = 0; seed < 20; ++seed) {
        bad_runs += (g_run(m, seed, 40000, brk, &share) != 0) ||
                    (m->violations > 0) || (m->corrupt > 0) ||
                    (m->bad_switches > 0);
    }
    free(m);
    ck_assert_msg(bad_runs > 0, "the model did not notice %s", what);
}

START_TEST(test_grant_model_detects_uncleared_marks)
{
    g_expect_broken(G_BREAK_NO_CLEAR, "a run granted with stale marks");
}
END_TEST

START_TEST(test_grant_model_detects_undrained_run)
{
    g_expect_broken(G_BREAK_NO_DRAIN, "an old run freed before it drained");
}
END_TEST

Suite *hipower_grant_suite(void)
{
    Suite *s  = suite_create("grant");
    TCase *tc = tcase_create("grant");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_grant_switch_rules);
    tcase_add_test(tc, test_grant_sender_rules);
    tcase_add_test(tc, test_grant_sizes);
    tcase_add_loop_test(tc, test_grant_model, 0, 2);
    tcase_add_test(tc, test_grant_model_detects_uncleared_marks);
    tcase_add_test(tc, test_grant_model_detects_undrained_run);
    suite_add_tcase(s, tc);
    return s;
}
