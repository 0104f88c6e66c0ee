/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"
#include "hipower_active.h"

#include <stdlib.h>
#include <string.h>


START_TEST(test_active_idle_time)
{
    ck_assert(!hipower_active_is_idle(100, 100, 10));
    ck_assert(!hipower_active_is_idle(109, 100, 10));
    ck_assert(hipower_active_is_idle(110, 100, 10));
    /* The clock wraps */
    ck_assert(hipower_active_is_idle(5, UINT64_MAX - 10, 10));
    ck_assert(!hipower_active_is_idle(5, UINT64_MAX - 2, 10));
    /* "inf": never idle */
    ck_assert(!hipower_active_is_idle(UINT64_MAX - 1, 0, UINT64_MAX));
}
END_TEST

START_TEST(test_demote_verdict)
{
    ck_assert_int_eq(hipower_demote_verdict(7, 7, 0, 42, 42),
                     HIPOWER_DEMOTE_IDLE);
    /* Announced counts compare mod 2^32: delivered wraps */
    ck_assert_int_eq(hipower_demote_verdict(7, 7, 0, 5, (1ull << 32) + 5),
                     HIPOWER_DEMOTE_IDLE);
    ck_assert_int_eq(hipower_demote_verdict(7, 7, 0, 41, 42),
                     HIPOWER_DEMOTE_BEHIND);
    ck_assert_int_eq(hipower_demote_verdict(7, 8, 0, 42, 42),
                     HIPOWER_DEMOTE_STALE);
    ck_assert_int_eq(hipower_demote_verdict(7, 7, 1, 42, 42),
                     HIPOWER_DEMOTE_STALE);
}
END_TEST

START_TEST(test_gen_next)
{
    uint64_t seq = 0, prev;
    int i;

    for (i = 0; i < 100; ++i) {
        prev = seq;
        ck_assert_uint_gt(hipower_gen_next(&seq), prev);
    }

    seq = UINT64_MAX;
    ck_assert_uint_eq(hipower_gen_next(&seq), 1);
}
END_TEST


/*
 * A model of one connection's receive direction with demotion, step by step
 * in random order. What the model keeps is what the transport relies on:
 *  - the sender stores its announced count, fences, loads the generation
 *    the receiver wrote into its memory, and sends the write with an
 *    immediate iff that generation is not the one it woke last;
 *  - the receiver's generation write and announced read travel on one QP,
 *    in order; the peer serves the read after the write landed;
 *  - the sender's frames land in order, each with its immediate if any; an
 *    immediate (carrying the generation it wakes) takes one of the
 *    MODEL_RECVS receives posted on the receiver's QP and makes one
 *    completion; with no receive left it cannot land (receiver not ready),
 *    and neither can any frame after it: the sender's QP is stalled;
 *  - the receiver delivers only from active endpoints; a completion makes
 *    the endpoint active; an idle active endpoint posts a handshake and
 *    goes idle when hipower_demote_verdict() says so; a completion that
 *    comes while a handshake is out counts as news for its verdict (the
 *    transport's first version missed this, and the model found it);
 *  - the receiver polls its completions (and reposts their receives) while
 *    the endpoint is idle or the wake-up of its latest handshake is due,
 *    whatever the verdict was (the transport's second version polled only
 *    while idle or demoting, and on rxe a handshake can complete before the
 *    next progress call: a handshake whose verdict kept the endpoint active
 *    left its wake-up unpolled, and ucx_perftest's am_bw hung with the
 *    receives used up; the model, polling only while idle, finds that).
 * The check: once the sender stops and everything in flight landed, the
 * receiver delivers every message it sent, and never delivered any message
 * twice. Breaking the verdict (demoting with announced messages not yet
 * delivered), or polling only while idle, strands messages.
 */
#define MODEL_QUEUE  64
#define MODEL_RECVS  4   /* UCT_HIPOWER_EVENT_RECVS */

enum {
    MODEL_SOUND,
    MODEL_BREAK_VERDICT,   /* Demote whatever the announced count */
    MODEL_BREAK_WAKE_DUE   /* Poll only while idle */
};

typedef struct {
    /* Sender */
    uint64_t msgs;          /* Sent = announced (stored before the fence) */
    uint64_t announced;     /* What the receiver's read finds */
    uint64_t peer_gen;      /* Written by the receiver */
    uint64_t woken;
    /* Frames on the wire, sender -> receiver: 0, or 1 + the generation
     * their immediate wakes */
    uint64_t frames[MODEL_QUEUE];
    unsigned frames_head, frames_tail;
    /* Receiver */
    uint64_t landed;        /* Frames in its slots */
    uint64_t delivered;
    unsigned recvs;         /* Posted on the QP */
    unsigned completions;   /* On the wake-up CQ */
    uint64_t last_imm_gen;  /* Of the latest completion */
    int      wake_due;
    int      active;
    uint64_t gen_seq;
    uint64_t posted_gen;
    uint64_t now, last_news;
    int      news_since_post;
    /* The handshake on the wire, receiver -> sender: 0 none, 1 the write
     * and the read, 2 the read only, 3 the read's answer on its way back */
    int      handshake;
    uint64_t handshake_gen;
    uint64_t read_value;
    uint64_t idle_time;
} active_model_t;

static void model_init(active_model_t *m, uint64_t idle_time)
{
    memset(m, 0, sizeof(*m));
    m->woken     = UINT64_MAX; /* The first write always wakes */
    m->idle_time = idle_time;
    m->recvs     = MODEL_RECVS;
}

static void model_send(active_model_t *m)
{
    uint64_t gen;

    if (m->frames_tail - m->frames_head == MODEL_QUEUE) {
        return; /* Out of slots: the send would return NO_RESOURCE */
    }

    m->announced = ++m->msgs;
    gen          = m->peer_gen; /* After the fence */
    m->frames[m->frames_tail++ % MODEL_QUEUE] = (gen != m->woken) ?
                                                1 + gen : 0;
    m->woken     = gen;
}

static void model_land(active_model_t *m)
{
    uint64_t imm;

    if (m->frames_head == m->frames_tail) {
        return;
    }

    imm = m->frames[m->frames_head % MODEL_QUEUE];
    if (imm) {
        if (m->recvs == 0) {
            return; /* Receiver not ready: retried, everything behind waits */
        }
        --m->recvs;
        ++m->completions;
        m->last_imm_gen = imm - 1;
    }
    ++m->frames_head;
    ++m->landed;
}

static void model_serve_handshake(active_model_t *m)
{
    if (m->handshake == 1) {
        m->peer_gen  = m->handshake_gen;
        m->handshake = 2;
    } else if (m->handshake == 2) {
        m->read_value = m->announced;
        m->handshake  = 3;
    }
}

static void model_progress(active_model_t *m, int brk)
{
    hipower_demote_verdict_t verdict;
    int poll;

    ++m->now;
    /* The broken rule polls while idle: on rxe a handshake can complete
     * before the next progress call polls anything */
    poll = !m->active || ((brk != MODEL_BREAK_WAKE_DUE) && m->wake_due);
    if (poll && (m->completions > 0)) {
        m->recvs      += m->completions;
        if (m->last_imm_gen == m->posted_gen) {
            m->wake_due = 0;
        }
        /* A wake-up while a handshake is out is news: the verdict must not
         * undo the promotion it stands for */
        m->completions     = 0;
        m->active          = 1;
        m->news_since_post = 1;
    }

    if (m->handshake == 3) {
        m->handshake = 0;
        verdict      = hipower_demote_verdict(m->handshake_gen, m->posted_gen,
                                              m->news_since_post,
                                              (uint32_t)m->delivered,
                                              m->read_value);
        if ((verdict == HIPOWER_DEMOTE_IDLE) ||
            (brk == MODEL_BREAK_VERDICT)) {
            m->active = 0;
        } else {
            m->last_news = m->now;
        }
    }

    if (!m->active) {
        return;
    }

    if (m->delivered < m->landed) {
        m->delivered       = m->landed;
        m->last_news       = m->now;
        m->news_since_post = 1;
    } else if ((m->handshake == 0) &&
               hipower_active_is_idle(m->now, m->last_news, m->idle_time)) {
        m->handshake_gen   = hipower_gen_next(&m->gen_seq);
        m->posted_gen      = m->handshake_gen;
        m->news_since_post = 0;
        m->handshake       = 1;
        m->wake_due        = 1;
    }
}

/* Runs the model; returns the messages stranded at the end */
static uint64_t model_run(unsigned seed, unsigned steps, int brk,
                          unsigned *demotions_p)
{
    active_model_t m;
    unsigned i, demotions = 0;
    int was_active;

    srand(seed);
    model_init(&m, 1 + rand() % 4);
    for (i = 0; i < steps; ++i) {
        was_active = m.active;
        switch (rand() % 8) {
        case 0:
            /* Bursts and pauses: send more often in some stretches */
            if ((i / 200) % 3 != 2) {
                model_send(&m);
            }
            break;
        case 1:
        case 2:
            model_land(&m);
            break;
        case 3:
        case 4:
            model_serve_handshake(&m);
            break;
        default:
            model_progress(&m, brk);
            break;
        }
        demotions += (was_active && !m.active);
        ck_assert_uint_le(m.delivered, m.msgs);
    }

    /* The sender stops; everything in flight lands, is served, polled */
    for (i = 0; i < 4 * MODEL_QUEUE + 100; ++i) {
        model_land(&m);
        model_serve_handshake(&m);
        model_progress(&m, brk);
    }

    *demotions_p = demotions;
    return m.msgs - m.delivered;
}

START_TEST(test_active_model)
{
    unsigned demotions, total_demotions = 0;
    unsigned seed;

    for (seed = 0; seed < 200; ++seed) {
        ck_assert_msg(model_run(seed + _i * 1000, 5000, MODEL_SOUND, &demotions) == 0,
                      "seed %u: messages stranded in an idle endpoint",
                      seed + _i * 1000);
        total_demotions += demotions;
    }

    /* The model exercised demotion, not only a busy endpoint */
    ck_assert_uint_gt(total_demotions, 1000);
}
END_TEST

/* Of 50 seeds, the runs of a broken model that strand messages */
static unsigned model_stranded_runs(int brk)
{
    unsigned demotions, seed, stranded_runs = 0;

    for (seed = 0; seed < 50; ++seed) {
        stranded_runs += (model_run(seed, 5000, brk, &demotions) > 0);
    }
    return stranded_runs;
}

START_TEST(test_active_model_detects_broken_verdict)
{
    /* The model can fail: a verdict that ignores the announced count
     * strands messages */
    ck_assert_uint_gt(model_stranded_runs(MODEL_BREAK_VERDICT), 0);
}
END_TEST

START_TEST(test_active_model_detects_unpolled_wakeups)
{
    /* Wake-ups of handshakes that kept the endpoint active, left unpolled,
     * use up the receives and stall the sender */
    ck_assert_uint_gt(model_stranded_runs(MODEL_BREAK_WAKE_DUE), 0);
}
END_TEST


Suite *hipower_active_suite(void)
{
    Suite *suite = suite_create("active");
    TCase *tcase;

    tcase = tcase_create("rules");
    tcase_add_test(tcase, test_active_idle_time);
    tcase_add_test(tcase, test_demote_verdict);
    tcase_add_test(tcase, test_gen_next);
    suite_add_tcase(suite, tcase);

    tcase = tcase_create("model");
    tcase_set_timeout(tcase, 120);
    tcase_add_loop_test(tcase, test_active_model, 0, 4);
    tcase_add_test(tcase, test_active_model_detects_broken_verdict);
    tcase_add_test(tcase, test_active_model_detects_unpolled_wakeups);
    suite_add_tcase(suite, tcase);

    return suite;
}
