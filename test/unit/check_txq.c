/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Send-queue and completion-queue accounting (hipower_txq), without a
 * device:
 *  - every posted work request holds a completion-queue credit until a
 *    completion covers it; a signaled completion retires the requests
 *    before it, a flushed one (failed QP) only its own;
 *  - a chain that ibv_post_send() took only in part is accounted for what
 *    went out (bad_wr), and loses its signaled tail;
 *  - a model of many QPs, a device that completes requests in order and
 *    writes a completion only for signaled ones (or for every one once a
 *    QP has failed), never has more completions in the CQ than its depth,
 *    not even when every QP fails with a full send queue, and never stalls
 *    with credits held by unsignaled requests (recalls free them).
 */
#include "hipower_txq.h"
#include "hipower_test.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


START_TEST(test_txq_credit_per_request)
{
    hipower_txq_t txq;
    int credits = 100;
    unsigned i;

    hipower_txq_init(&txq, 16);
    for (i = 0; i < 10; ++i) {
        ck_assert(hipower_txq_can_post(&txq, 1, credits, 0));
        ck_assert_uint_eq(hipower_txq_posted(&txq, 1, 1, 0, &credits), i);
    }

    /* Unsignaled requests hold credits and queue entries all the same */
    ck_assert_int_eq(credits, 90);
    ck_assert_uint_eq(hipower_txq_outstanding(&txq), 10);
    ck_assert_uint_eq(hipower_txq_sq_free(&txq), 6);
    ck_assert_uint_eq(txq.unsignaled, 10);
    ck_assert(hipower_txq_has_trailing(&txq));
    ck_assert(!hipower_txq_can_post(&txq, 7, credits, 0));
    ck_assert(hipower_txq_can_post(&txq, 6, credits, 0));
    /* The kept-back credits are not for ordinary posts */
    ck_assert(!hipower_txq_can_post(&txq, 1, 10, 10));

    /* One signaled request; its completion retires all eleven */
    hipower_txq_posted(&txq, 1, 1, 1, &credits);
    ck_assert_uint_eq(txq.unsignaled, 0);
    ck_assert(!hipower_txq_has_trailing(&txq));
    ck_assert_uint_eq(hipower_txq_completed(&txq, 10, &credits), 11);
    ck_assert_int_eq(credits, 100);
    ck_assert_uint_eq(hipower_txq_outstanding(&txq), 0);
    ck_assert_uint_eq(hipower_txq_sq_free(&txq), 16);

    /* Stale or impossible ids retire nothing */
    ck_assert_uint_eq(hipower_txq_completed(&txq, 3, &credits), 0);
    ck_assert_uint_eq(hipower_txq_completed(&txq, 11, &credits), 0);
    ck_assert_int_eq(credits, 100);
}
END_TEST

START_TEST(test_txq_flushed_one_by_one)
{
    hipower_txq_t txq;
    int credits = 8;
    unsigned i;

    hipower_txq_init(&txq, 8);
    hipower_txq_posted(&txq, 3, 3, 1, &credits);  /* 0..2, 2 signaled */
    hipower_txq_posted(&txq, 2, 2, 0, &credits);  /* 3..4 unsignaled */
    ck_assert_int_eq(credits, 3);
    ck_assert_uint_eq(txq.unsignaled, 2);

    /* 0 and 1 completed silently; 2's completion covers them */
    ck_assert_uint_eq(hipower_txq_completed(&txq, 2, &credits), 3);
    ck_assert(hipower_txq_has_trailing(&txq));
    /* The QP fails: 3 and 4 come back flushed, one completion each */
    for (i = 3; i < 5; ++i) {
        ck_assert_uint_eq(hipower_txq_completed(&txq, i, &credits), 1);
    }
    ck_assert_int_eq(credits, 8);
    ck_assert_uint_eq(txq.unsignaled, 0);
    ck_assert(!hipower_txq_has_trailing(&txq));
}
END_TEST

START_TEST(test_txq_chain_cut_short)
{
    hipower_txq_t txq;
    int credits = 10;

    ck_assert_uint_eq(hipower_txq_chain_posted(2, 0, 0), 2);
    ck_assert_uint_eq(hipower_txq_chain_posted(2, 1, 0), 0);
    ck_assert_uint_eq(hipower_txq_chain_posted(2, 1, 1), 1);
    ck_assert_uint_eq(hipower_txq_chain_posted(2, 1, 7), 2);

    hipower_txq_init(&txq, 8);
    /* A payload write went out, the signaled bitmap write after it did not */
    ck_assert_uint_eq(hipower_txq_posted(&txq, 2, 1, 1, &credits), 0);
    ck_assert_uint_eq(txq.sn, 1);
    ck_assert_int_eq(credits, 9);
    ck_assert_uint_eq(txq.unsignaled, 1);
    ck_assert(hipower_txq_has_trailing(&txq));
    /* Nothing went out at all */
    ck_assert_uint_eq(hipower_txq_posted(&txq, 2, 0, 1, &credits), 1);
    ck_assert_uint_eq(txq.sn, 1);
    ck_assert_int_eq(credits, 9);
    ck_assert_uint_eq(txq.unsignaled, 1);
}
END_TEST

START_TEST(test_txq_signal_rule)
{
    hipower_txq_t txq;
    int credits = 1000;

    hipower_txq_init(&txq, 64);
    ck_assert(!hipower_txq_signal(&txq, 1, 4, credits, 16));
    hipower_txq_posted(&txq, 3, 3, 0, &credits);
    ck_assert(hipower_txq_signal(&txq, 1, 4, credits, 16));
    ck_assert(hipower_txq_signal(&txq, 2, 4, credits, 16));
    /* Near the bottom of the credits every request asks for a completion */
    hipower_txq_init(&txq, 64);
    ck_assert(!hipower_txq_signal(&txq, 1, 32, 17, 16));
    ck_assert(hipower_txq_signal(&txq, 2, 32, 17, 16));
}
END_TEST

/*
 * The bundle window counts frames, not requests: full while the last
 * @a size frames are all in flight; the frame that fills it must be
 * signaled, whatever the interval, and its completion opens it; requests
 * that are not frames (a pull-mode receiver's READs, always one in flight)
 * never keep it shut.
 */
START_TEST(test_txq_bundle_window)
{
    hipower_txwin_t win;
    hipower_txq_t txq;
    int credits = 1000;
    int signal;

    hipower_txq_init(&txq, 64);
    hipower_txwin_init(&win, 0);
    ck_assert(!hipower_txwin_fills(&win, txq.acked_sn));
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));

    hipower_txwin_init(&win, 2);
    /* A READ of the transport's own in flight: the window stays open */
    hipower_txq_posted(&txq, 1, 1, 1, &credits);
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));

    /* Frame 1 does not fill it: no completion asked */
    ck_assert(!hipower_txwin_fills(&win, txq.acked_sn));
    ck_assert(!hipower_txq_signal(&txq, 1, 32, credits, 16));
    hipower_txq_posted(&txq, 1, 1, 0, &credits);
    hipower_txwin_posted(&win, txq.sn - 1);
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));

    /* Frame 2 (a chain of two) fills it: signaled although the interval
     * is 32 */
    signal = hipower_txwin_fills(&win, txq.acked_sn);
    ck_assert(signal);
    hipower_txq_posted(&txq, 2, 2, signal, &credits);
    hipower_txwin_posted(&win, txq.sn - 1);
    ck_assert(hipower_txwin_full(&win, txq.acked_sn));

    /* The READ's completion does not open it; frame 2's does */
    ck_assert_uint_eq(hipower_txq_completed(&txq, 0, &credits), 1);
    ck_assert(hipower_txwin_full(&win, txq.acked_sn));
    ck_assert_uint_eq(hipower_txq_completed(&txq, 3, &credits), 3);
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));

    /* Frame 3 alone: frame 2, the one before it, is done: no fill */
    ck_assert(!hipower_txwin_fills(&win, txq.acked_sn));
    hipower_txq_posted(&txq, 1, 1, 0, &credits);
    hipower_txwin_posted(&win, txq.sn - 1);
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));
    /* Frame 4 fills it again */
    ck_assert(hipower_txwin_fills(&win, txq.acked_sn));
    hipower_txq_posted(&txq, 1, 1, 1, &credits);
    hipower_txwin_posted(&win, txq.sn - 1);
    ck_assert(hipower_txwin_full(&win, txq.acked_sn));

    /* A window of one: every frame fills it */
    hipower_txwin_init(&win, 1);
    ck_assert(hipower_txwin_fills(&win, txq.acked_sn));
    hipower_txwin_posted(&win, txq.sn - 1);
    ck_assert(hipower_txwin_full(&win, txq.acked_sn));
    /* A flushed QP retires everything: open */
    hipower_txq_completed(&txq, txq.sn - 1, &credits);
    ck_assert(!hipower_txwin_full(&win, txq.acked_sn));
    ck_assert_int_eq(credits, 1000);
}
END_TEST


/*
 * The model: QPs post ordinary requests while hipower_txq_can_post() lets
 * them, signaled as hipower_txq_signal() says; when credits run short the
 * "interface" recalls credits from QPs with unsignaled requests by posting
 * one signaled no-op on each, from the kept-back credits. A device runs the
 * requests of each QP in order and writes a completion for the signaled
 * ones; a failed QP gets one for every request left. The CQ is as deep as
 * the credits at the start.
 */
#define MODEL_QPS       48
#define MODEL_SQ_LEN    64
#define MODEL_DEPTH     256
#define MODEL_RESERVE   8
#define MODEL_INTERVAL  16
#define MODEL_MAX_WR    (MODEL_SQ_LEN * 256)

typedef struct {
    hipower_txq_t txq;
    uint8_t       signaled[MODEL_MAX_WR]; /* By request id (ids stay small) */
    uint64_t      done;                   /* Requests the device executed */
    int           failed;
} model_qp_t;

typedef struct {
    uint32_t qp;
    uint64_t sn;
} model_cqe_t;

typedef struct {
    model_qp_t  qps[MODEL_QPS];
    model_cqe_t cq[MODEL_DEPTH];
    unsigned    cq_head, cq_count, cq_max;
    int         credits;
    uint64_t    posted, recalls;
} model_t;

static uint64_t model_rand(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dull;
}

static void model_cqe(model_t *m, uint32_t qp, uint64_t sn)
{
    ck_assert_msg(m->cq_count < MODEL_DEPTH, "CQ overrun: %u completions "
                  "in a CQ of %u", m->cq_count + 1, MODEL_DEPTH);
    m->cq[(m->cq_head + m->cq_count) % MODEL_DEPTH].qp = qp;
    m->cq[(m->cq_head + m->cq_count) % MODEL_DEPTH].sn = sn;
    if (++m->cq_count > m->cq_max) {
        m->cq_max = m->cq_count;
    }
}

/* The device executes the next request of @a qp (or flushes it) */
static void model_device_step(model_t *m, uint32_t qp_idx)
{
    model_qp_t *qp = &m->qps[qp_idx];

    if (qp->done == qp->txq.sn) {
        return;
    }
    if (qp->failed || qp->signaled[qp->done]) {
        model_cqe(m, qp_idx, qp->done);
    }
    ++qp->done;
}

static void model_poll(model_t *m, unsigned max)
{
    model_cqe_t cqe;

    for (; (max > 0) && (m->cq_count > 0); --max) {
        cqe = m->cq[m->cq_head];
        m->cq_head = (m->cq_head + 1) % MODEL_DEPTH;
        --m->cq_count;
        hipower_txq_completed(&m->qps[cqe.qp].txq, cqe.sn, &m->credits);
    }
}

static void model_post(model_t *m, uint32_t qp_idx, unsigned nwr, int signal)
{
    model_qp_t *qp = &m->qps[qp_idx];
    uint64_t first;

    first = hipower_txq_posted(&qp->txq, nwr, nwr, signal, &m->credits);
    ck_assert_uint_lt(first + nwr, MODEL_MAX_WR);
    memset(&qp->signaled[first], 0, nwr);
    qp->signaled[first + nwr - 1] = signal;
    m->posted += nwr;
}

/* Credits and requests are conserved: every credit is free or held */
static void model_check_conservation(const model_t *m)
{
    int held = 0;
    unsigned i;

    for (i = 0; i < MODEL_QPS; ++i) {
        held += hipower_txq_outstanding(&m->qps[i].txq);
    }
    ck_assert_int_eq(m->credits + held, MODEL_DEPTH);
}

static void model_run(model_t *m, uint64_t *seed, unsigned steps,
                      int fail_all_at_end)
{
    unsigned step, i, nwr, stalled = 0;
    uint32_t qp_idx;
    int posted;

    for (step = 0; step < steps; ++step) {
        posted = 0;
        for (i = 0; i < 4; ++i) {
            qp_idx = model_rand(seed) % MODEL_QPS;
            nwr    = 1 + model_rand(seed) % 2;
            if (hipower_txq_can_post(&m->qps[qp_idx].txq, nwr, m->credits,
                                     MODEL_RESERVE)) {
                model_post(m, qp_idx, nwr,
                           hipower_txq_signal(&m->qps[qp_idx].txq, nwr,
                                              MODEL_INTERVAL, m->credits,
                                              MODEL_INTERVAL + MODEL_RESERVE));
                posted = 1;
            }
        }

        if (!posted && (m->credits < (int)(MODEL_INTERVAL + MODEL_RESERVE))) {
            /* Starved: recall credits held by unsignaled requests */
            for (i = 0; (i < MODEL_QPS) && (m->credits > 0); ++i) {
                if (hipower_txq_has_trailing(&m->qps[i].txq) &&
                    (hipower_txq_sq_free(&m->qps[i].txq) > 0)) {
                    model_post(m, i, 1, 1);
                    ++m->recalls;
                }
            }
        }

        /* The device runs a few requests, the poller takes some */
        for (i = 0; i < 6; ++i) {
            model_device_step(m, model_rand(seed) % MODEL_QPS);
        }
        model_poll(m, model_rand(seed) % 8);
        model_check_conservation(m);
        ck_assert_int_ge(m->credits, 0);

        stalled = posted ? 0 : (stalled + 1);
        ck_assert_msg(stalled < 10000, "no request could be posted for "
                      "10000 steps: credits %d held by unsignaled requests",
                      m->credits);
    }

    if (fail_all_at_end) {
        /* Every QP fails with what it has outstanding: one completion per
         * request, polled only after all of them were written */
        for (i = 0; i < MODEL_QPS; ++i) {
            m->qps[i].failed = 1;
            while (m->qps[i].done < m->qps[i].txq.sn) {
                model_device_step(m, i);
            }
        }
        model_poll(m, MODEL_DEPTH);
        ck_assert_int_eq(m->credits, MODEL_DEPTH);
    }
}

START_TEST(test_txq_model_mass_failure)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull + _i;
    model_t *m    = calloc(1, sizeof(*m));
    unsigned i;

    ck_assert_ptr_nonnull(m);
    m->credits = MODEL_DEPTH;
    for (i = 0; i < MODEL_QPS; ++i) {
        /* Together the send queues are far deeper than the CQ */
        hipower_txq_init(&m->qps[i].txq, MODEL_SQ_LEN);
    }

    /* A slow device: send queues fill up, credits run out */
    model_run(m, &seed, 20000, 1);
    ck_assert_uint_gt(m->posted, 20000);
    ck_assert_uint_gt(m->recalls, 0);
    ck_assert_uint_le(m->cq_max, MODEL_DEPTH);
    free(m);
}
END_TEST


Suite *hipower_txq_suite(void)
{
    Suite *suite = suite_create("txq");
    TCase *tcase;

    tcase = tcase_create("txq");
    /* The model runs take about a second each alone; Check's default of
     * 4 s ended three of them on a machine whose two cores also ran the
     * rig and the simulator (2026-12-02) */
    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test_txq_credit_per_request);
    tcase_add_test(tcase, test_txq_flushed_one_by_one);
    tcase_add_test(tcase, test_txq_chain_cut_short);
    tcase_add_test(tcase, test_txq_signal_rule);
    tcase_add_test(tcase, test_txq_bundle_window);
    tcase_add_loop_test(tcase, test_txq_model_mass_failure, 0, 4);
    suite_add_tcase(suite, tcase);
    return suite;
}
