/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"
#include "hipower_arena.h"
#include "hipower_grant.h"
#include "hipower_ring.h"
#include "hipower_slot.h"

#include <stdlib.h>
#include <string.h>

/*
 * The run switch as the transport does it (hipower_ep_grant.c, self mode,
 * docs/protocol.md 9.2), with the real ring, trailer and grant functions:
 * one sender, one receiver, a pool of slots, and everything that crosses
 * the wire delayed at random. The sender's frames land in order (one QP);
 * the receiver's grant records and the acknowledgements its own messages
 * carry arrive in order (its QP), late; recycle READs return a copy of the
 * consumed bitmap taken at some moment after they were posted, and arrive
 * late, applied whichever run the sender is in by then (their bound makes
 * an old run's copy harmless). The receiver grants runs of random sizes at random times; it
 * moves to a granted run once its first message is there and the old run
 * is drained, then deregisters and frees the old run.
 *
 * Some grants are releases (no slots, hipower_run_req_action()): the
 * sender then writes its run request word, after its last frames on the
 * same QP, saying where they end; the receiver frees the run once those
 * are delivered. A sender without a run asks (the same word, once per
 * epoch), and the receiver grants a run only when asked.
 *
 * Checked: every message is delivered once, in order, with its payload; a
 * frame never lands on a slot whose message was not consumed yet (the
 * sender reused a slot too early) nor outside the runs registered for the
 * sender (it wrote a run already given back); a sender without a run
 * that asks gets one.
 */

#define SW_POOL       64
#define SW_FIFO       256
#define SW_SLOT_SIZE  256

enum {
    SW_BREAK_NONE,
    /* The sender restarts its ring's counts at a switch, as a fresh ring */
    SW_BREAK_RESET_COUNTS,
    /* The receiver grants without zeroing the new epoch's consumed bits */
    SW_BREAK_NO_ZERO,
    /* The receiver moves to the granted run as soon as its first message
     * is there, without draining the old one */
    SW_BREAK_NO_DRAIN,
    /* The receiver frees a released run as soon as the sender's run
     * request is there, without draining it */
    SW_BREAK_NO_DRAIN_RELEASE
};

typedef struct {
    uint32_t slot;                 /* Pool slot; SW_POOL: the run request */
    uint8_t  frame[24];            /* Payload (8 B) and trailer */
    uint64_t run_req;
} sw_write_t;

typedef struct {
    int      is_grant;
    uint64_t epoch;
    uint32_t first, count;         /* Grant */
    uint32_t ack;                  /* Acknowledgement */
} sw_back_t;

typedef struct {
    int                   posted, served;
    uint32_t              taken_at_read, epoch; /* Epoch: of the copy */
    hipower_bitmap_word_t copy[HIPOWER_BITMAP_WORDS(SW_POOL)];
} sw_read_t;

typedef struct {
    hipower_slot_layout_t layout;
    uint8_t               *mem;
    hipower_arena_t       arena;
    int                   registered[SW_POOL]; /* The sender may write it */
    int                   unconsumed[SW_POOL]; /* Landed, not consumed */

    /* Receiver */
    hipower_rx_ring_t     rx;
    hipower_bitmap_word_t consumed[2][HIPOWER_BITMAP_WORDS(SW_POOL)];
    uint32_t              rx_first, rx_epoch;
    uint32_t              granted_first, granted_count;
    int                   releasing, wants;
    uint64_t              run_req;     /* The word the sender writes */
    uint64_t              delivered;

    /* Sender */
    hipower_tx_ring_t     tx;
    hipower_bitmap_word_t written[HIPOWER_BITMAP_WORDS(SW_POOL)];
    uint32_t              tx_first;
    uint64_t              tx_epoch, sent, nones, ack_flags;
    uint64_t              record_epoch;
    uint32_t              record_first, record_count;
    uint64_t              tx_run_req;  /* Written last */
    sw_read_t             read;

    /* Wire */
    sw_write_t            fwd[SW_FIFO];
    unsigned              fwd_head, fwd_tail;
    sw_back_t             back[SW_FIFO];
    unsigned              back_head, back_tail;

    int                   brk;
    unsigned              switches, overwrites, strays, misdelivered;
    unsigned              bad_switches;
    unsigned              releases, asks, asks_served, unasked;
} sw_model_t;

static uint8_t *sw_slot(sw_model_t *m, uint32_t slot)
{
    return m->mem + (size_t)slot * m->layout.stride;
}

static void sw_init(sw_model_t *m, int brk)
{
    uint32_t first, count, i;

    memset(m, 0, sizeof(*m));
    m->brk = brk;
    hipower_slot_layout(SW_SLOT_SIZE, 1, 0, &m->layout);
    m->mem = calloc(SW_POOL, m->layout.stride);
    ck_assert_ptr_ne(m->mem, NULL);
    ck_assert_int_eq(hipower_arena_init(&m->arena, SW_POOL), UCS_OK);
    ck_assert_int_eq(hipower_arena_alloc(&m->arena, 4, 4, &first, &count),
                     UCS_OK);
    for (i = 0; i < count; ++i) {
        m->registered[first + i] = 1;
    }
    m->rx_first = m->tx_first = first;
    m->rx_epoch = 1;
    m->tx_epoch = m->record_epoch = 1;
    m->tx_run_req = hipower_run_req_make(1, 0, 0);
    hipower_rx_ring_init(&m->rx, count, m->consumed[1]);
    hipower_tx_ring_init(&m->tx, count, m->written);
}

/* Sender: its run request word, on the same QP as its frames (the model's
 * FIFO never fills: at most one request per adoption or ask) */
static void sw_write_req(sw_model_t *m)
{
    sw_write_t *w = &m->fwd[m->fwd_tail++ % SW_FIFO];

    w->slot    = SW_POOL;
    w->run_req = m->tx_run_req;
}

/* Sender: adopt a grant (as uct_hipower_ep_tx_adopt()), send if a slot is
 * free (as uct_hipower_ep_send_msg()); @a none: a frame without a message,
 * as an idle sender's progress sends after adopting
 * (uct_hipower_ep_tx_switch_idle()) */
static void sw_send(sw_model_t *m, int none)
{
    uint32_t seq, old_end;
    sw_write_t *w;

    if (m->record_epoch != m->tx_epoch) {
        ck_assert(hipower_grant_record_valid(m->tx_epoch, m->record_epoch,
                                             m->record_count, SW_POOL));
        if (m->brk == SW_BREAK_RESET_COUNTS) {
            old_end = hipower_tx_ring_taken(&m->tx);
            hipower_tx_ring_init(&m->tx, m->record_count, m->written);
        } else {
            old_end = hipower_tx_ring_switch(&m->tx, m->record_count);
        }
        memset(m->written, 0, sizeof(m->written));
        m->tx_first  = m->record_first;
        m->tx_epoch  = m->record_epoch;
        m->ack_flags = hipower_slot_ack_switch(old_end);
        if (m->record_count == 0) {
            /* A release: the run request says where our messages end */
            m->ack_flags  = 0;
            m->tx_run_req = hipower_run_req_make(m->tx_epoch, old_end, 0);
            sw_write_req(m);
        }
    }

    if ((m->tx.num_slots == 0) && !none &&
        (m->tx_run_req != hipower_run_req_make(m->tx_epoch,
                                               hipower_run_req_old_end(
                                                       m->tx_run_req), 1))) {
        /* No run: ask for one, once per epoch */
        m->tx_run_req = hipower_run_req_make(m->tx_epoch,
                                             hipower_run_req_old_end(
                                                     m->tx_run_req), 1);
        sw_write_req(m);
        ++m->asks;
    }

    if ((hipower_tx_ring_free(&m->tx) == 0) ||
        (m->fwd_tail - m->fwd_head == SW_FIFO) ||
        (none && !(m->ack_flags & HIPOWER_SLOT_ACK_SWITCH))) {
        return;
    }

    seq = hipower_tx_ring_take(&m->tx);
    w   = &m->fwd[m->fwd_tail++ % SW_FIFO];
    w->slot = m->tx_first + hipower_ring_slot(m->tx.num_slots, seq);
    memset(w->frame, 0xee, 8); /* Not written: lies before the trailer */
    if (none) {
        hipower_slot_trailer_store(w->frame + 8, HIPOWER_SLOT_AM_NONE, 0, seq,
                                   m->ack_flags);
        ++m->nones;
    } else {
        memcpy(w->frame, &m->sent, 8);
        hipower_slot_trailer_store(w->frame + 8, 1, 8, seq, m->ack_flags);
        ++m->sent;
    }
    m->ack_flags = 0;
}

/* A frame lands: where the receiver lets the sender write */
static void sw_land(sw_model_t *m)
{
    sw_write_t *w = &m->fwd[m->fwd_head++ % SW_FIFO];
    uint8_t *base;

    if (w->slot == SW_POOL) {
        m->run_req = w->run_req;
        return;
    }

    base = sw_slot(m, w->slot);
    if (!m->registered[w->slot]) {
        ++m->strays; /* An access error on a real device */
        return;
    }
    m->overwrites += m->unconsumed[w->slot];
    m->unconsumed[w->slot] = 1;
    memcpy(base + m->layout.trailer_offset - 8, w->frame, sizeof(w->frame));
}

/* Receiver: a release is out; once the sender's run request says where its
 * messages end and they are delivered, the run goes back to the pool */
static void sw_release_check(sw_model_t *m)
{
    uint32_t old_count = m->rx.num_slots, i;
    int remaining;

    if (hipower_run_req_action(m->run_req, m->rx_epoch, old_count, 1) !=
        HIPOWER_RUN_REQ_RELEASED) {
        return;
    }
    remaining = hipower_grant_old_remaining(hipower_rx_ring_taken(&m->rx),
                                            hipower_run_req_old_end(m->run_req),
                                            old_count);
    if (remaining < 0) {
        ++m->bad_switches;
        return;
    }
    if ((remaining > 0) && (m->brk != SW_BREAK_NO_DRAIN_RELEASE)) {
        return;
    }

    for (i = 0; i < old_count; ++i) {
        m->registered[m->rx_first + i] = 0;
    }
    hipower_arena_free(&m->arena, m->rx_first, old_count);
    hipower_rx_ring_switch(&m->rx, 0, m->consumed[(m->rx_epoch + 1) & 1]);
    m->rx_first  = 0;
    m->releasing = 0;
    ++m->rx_epoch;
    ++m->releases;
}

/* Receiver: a batch from the current run, then the switch check */
static void sw_receive(sw_model_t *m)
{
    const hipower_slot_trailer_t *mark;
    uint32_t slot, old_count, i;
    uint64_t payload, ack_word;
    unsigned batch = 1 + random() % 8;
    uint8_t *base;
    int remaining;

    while ((m->rx.num_slots > 0) && (batch-- > 0)) {
        slot = m->rx_first + hipower_ring_slot(m->rx.num_slots, m->rx.head);
        base = sw_slot(m, slot);
        mark = (const hipower_slot_trailer_t*)hipower_slot_mark(base,
                                                                 &m->layout);
        if (!hipower_slot_trailer_is(*mark, m->rx.head)) {
            break;
        }
        if (!hipower_slot_trailer_is_none(*mark)) {
            memcpy(&payload, base + m->layout.trailer_offset - 8, 8);
            m->misdelivered += (payload != m->delivered);
            ++m->delivered;
        }
        hipower_rx_ring_advance(&m->rx);
        m->unconsumed[slot] = 0;
        hipower_rx_ring_release(&m->rx, slot - m->rx_first);
    }

    if (m->releasing) {
        sw_release_check(m);
    }
    if ((m->rx.num_slots == 0) && !m->releasing && (m->granted_count == 0) &&
        (hipower_run_req_action(m->run_req, m->rx_epoch, 0, 0) ==
         HIPOWER_RUN_REQ_WANTS)) {
        m->wants = 1;
    }

    if (m->granted_count == 0) {
        return;
    }
    base = sw_slot(m, m->granted_first);
    if (!hipower_slot_trailer_is(*(const hipower_slot_trailer_t*)
                                 hipower_slot_mark(base, &m->layout), 0)) {
        return;
    }
    ack_word  = hipower_slot_trailer_ack_word(base + m->layout.trailer_offset);
    remaining = (ack_word & HIPOWER_SLOT_ACK_SWITCH) ?
                hipower_grant_old_remaining(hipower_rx_ring_taken(&m->rx),
                                            hipower_slot_ack_old_end(ack_word),
                                            m->rx.num_slots) : -1;
    if (remaining < 0) {
        ++m->bad_switches; /* The transport fails the endpoint */
        return;
    }
    if ((remaining > 0) && (m->brk != SW_BREAK_NO_DRAIN)) {
        return;
    }

    old_count = m->rx.num_slots;
    for (i = 0; i < old_count; ++i) {
        m->registered[m->rx_first + i] = 0;
    }
    if (old_count > 0) {
        hipower_arena_free(&m->arena, m->rx_first, old_count);
    }
    hipower_rx_ring_switch(&m->rx, m->granted_count,
                           m->consumed[(m->rx_epoch + 1) & 1]);
    m->rx_first      = m->granted_first;
    m->granted_count = 0;
    ++m->rx_epoch;
    ++m->switches;
}

/* Receiver: a new run of random size, marks cleared, consumed half zeroed */
static void sw_grant(sw_model_t *m)
{
    sw_back_t *b;
    uint32_t first, count, i;

    if ((m->granted_count > 0) || m->releasing ||
        (m->back_tail - m->back_head == SW_FIFO)) {
        return;
    }

    if ((m->rx.num_slots > 0) && (random() % 4 == 0)) {
        /* A release: the run comes back once the sender says where its
         * messages end (uct_hipower_ep_rx_reclaim()) */
        m->releasing = 1;
        b = &m->back[m->back_tail++ % SW_FIFO];
        b->is_grant = 1;
        b->epoch    = m->rx_epoch + 1;
        b->first    = 0;
        b->count    = 0;
        return;
    }

    if (((m->rx.num_slots == 0) && !m->wants) ||
        (hipower_arena_alloc(&m->arena, 1 + random() % 16, 1, &first,
                             &count) != UCS_OK)) {
        return; /* A run only to a sender that asked for one */
    }
    if (m->rx.num_slots == 0) {
        /* Served: the sender's word asks, for this epoch */
        m->unasked += (hipower_run_req_action(m->run_req, m->rx_epoch, 0, 0) !=
                       HIPOWER_RUN_REQ_WANTS);
        m->wants = 0;
        ++m->asks_served;
    }

    for (i = 0; i < count; ++i) {
        memset(sw_slot(m, first + i) + m->layout.trailer_offset, 0,
               HIPOWER_SLOT_TRAILER_SIZE);
        m->registered[first + i] = 1;
        m->unconsumed[first + i] = 0;
    }
    if (m->brk != SW_BREAK_NO_ZERO) {
        memset(m->consumed[(m->rx_epoch + 1) & 1], 0, sizeof(m->consumed[0]));
    }
    m->granted_first = first;
    m->granted_count = count;

    b = &m->back[m->back_tail++ % SW_FIFO];
    b->is_grant = 1;
    b->epoch    = m->rx_epoch + 1;
    b->first    = first;
    b->count    = count;
}

/* Receiver: a message of its own carries its acknowledgement */
static void sw_ack(sw_model_t *m)
{
    sw_back_t *b;

    if (m->back_tail - m->back_head == SW_FIFO) {
        return;
    }
    b           = &m->back[m->back_tail++ % SW_FIFO];
    b->is_grant = 0;
    b->ack      = hipower_rx_ring_acked(&m->rx);
}

static void sw_back_arrives(sw_model_t *m)
{
    sw_back_t *b = &m->back[m->back_head++ % SW_FIFO];

    if (b->is_grant) {
        m->record_first = b->first;
        m->record_count = b->count;
        m->record_epoch = b->epoch;
    } else {
        hipower_tx_ring_ack(&m->tx, b->ack);
    }
}

/* Recycle READ: posted, served (the copy taken), applied */
static void sw_read_step(sw_model_t *m)
{
    sw_read_t *r = &m->read;

    if (!r->posted) {
        r->posted        = 1;
        r->served        = 0;
        r->taken_at_read = hipower_tx_ring_taken(&m->tx);
        r->epoch         = (uint32_t)m->tx_epoch;
    } else if (!r->served) {
        memcpy(r->copy, m->consumed[r->epoch & 1], sizeof(r->copy));
        r->served = 1;
    } else {
        hipower_tx_ring_recycle(&m->tx, r->copy, r->taken_at_read);
        r->posted = 0;
    }
}

static void sw_run(sw_model_t *m, unsigned seed, unsigned steps, int brk)
{
    unsigned step;

    srandom(seed);
    sw_init(m, brk);
    for (step = 0; step < steps; ++step) {
        switch (random() % 8) {
        case 0:
        case 1:
            sw_send(m, random() % 4 == 0);
            break;
        case 2:
        case 3:
            if (m->fwd_head != m->fwd_tail) {
                sw_land(m);
            }
            break;
        case 4:
            sw_receive(m);
            break;
        case 5:
            if ((random() % 8 == 0) || m->wants) {
                sw_grant(m);
            } else {
                sw_ack(m);
            }
            break;
        case 6:
            if (m->back_head != m->back_tail) {
                sw_back_arrives(m);
            }
            break;
        default:
            sw_read_step(m);
            break;
        }
    }

    /* Quiesce: everything lands, arrives and is delivered */
    while ((m->fwd_head != m->fwd_tail) || (m->back_head != m->back_tail)) {
        if (m->fwd_head != m->fwd_tail) {
            sw_land(m);
        }
        if (m->back_head != m->back_tail) {
            sw_back_arrives(m);
        }
        sw_receive(m);
    }
    sw_receive(m);
    sw_receive(m);
}

static void sw_cleanup(sw_model_t *m)
{
    hipower_arena_cleanup(&m->arena);
    free(m->mem);
}

START_TEST(test_switch_model)
{
    sw_model_t *m = malloc(sizeof(*m));
    unsigned seed, switches = 0, releases = 0, asks = 0, served = 0;
    uint64_t delivered = 0, nones = 0;

    ck_assert_ptr_ne(m, NULL);
    for (seed = 0; seed < 40; ++seed) {
        sw_run(m, seed, 60000, SW_BREAK_NONE);
        ck_assert_msg((m->overwrites == 0) && (m->strays == 0) &&
                      (m->misdelivered == 0) && (m->bad_switches == 0) &&
                      (m->unasked == 0),
                      "seed %u: %u slots overwritten before consumed, %u "
                      "frames outside the sender's runs, %u delivered out of "
                      "order, %u impossible switches, %u runs granted to a "
                      "sender without a run that did not ask", seed,
                      m->overwrites, m->strays, m->misdelivered,
                      m->bad_switches, m->unasked);
        ck_assert_uint_eq(m->delivered, m->sent);
        switches  += m->switches;
        delivered += m->delivered;
        nones     += m->nones;
        releases  += m->releases;
        asks      += m->asks;
        served    += m->asks_served;
        sw_cleanup(m);
    }
    printf("switch model: %u run switches (%lu announced by a frame "
           "without a message), %u runs given back, %u asks for a run "
           "(%u served), %lu messages delivered\n", switches,
           (unsigned long)nones, releases, asks, served,
           (unsigned long)delivered);
    ck_assert_uint_gt(switches, 40 * 50);
    ck_assert_uint_gt(nones, 40);
    ck_assert_uint_gt(releases, 40 * 10);
    ck_assert_uint_gt(served, 40 * 10);
    free(m);
}
END_TEST

static void sw_expect_broken(int brk, const char *what)
{
    sw_model_t *m = malloc(sizeof(*m));
    unsigned seed, bad_runs = 0;

    ck_assert_ptr_ne(m, NULL);
    for (seed = 0; seed < 40; ++seed) {
        sw_run(m, seed, 60000, brk);
        bad_runs += (m->overwrites > 0) || (m->strays > 0) ||
                    (m->misdelivered > 0) || (m->bad_switches > 0) ||
                    (m->delivered != m->sent);
        sw_cleanup(m);
    }
    free(m);
    ck_assert_msg(bad_runs > 0, "the model did not notice %s", what);
}

START_TEST(test_switch_model_detects_reset_counts)
{
    sw_expect_broken(SW_BREAK_RESET_COUNTS,
                     "a sender that restarts its ring's counts at a switch");
}
END_TEST

START_TEST(test_switch_model_detects_stale_consumed_bits)
{
    sw_expect_broken(SW_BREAK_NO_ZERO,
                     "a run granted with the consumed bits of an older one");
}
END_TEST

START_TEST(test_switch_model_detects_undrained_switch)
{
    sw_expect_broken(SW_BREAK_NO_DRAIN,
                     "a switch before the old run was drained");
}
END_TEST

START_TEST(test_switch_model_detects_undrained_release)
{
    sw_expect_broken(SW_BREAK_NO_DRAIN_RELEASE,
                     "a run freed before its last messages were delivered");
}
END_TEST

START_TEST(test_switch_run_req)
{
    uint64_t req = hipower_run_req_make(5, 0x1234, 0);

    ck_assert_uint_eq(hipower_run_req_old_end(req), 0x1234);
    /* The release of epoch 5 adopted (the receiver is at 4) */
    ck_assert_int_eq(hipower_run_req_action(req, 4, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* An older or newer word is not that release */
    ck_assert_int_eq(hipower_run_req_action(req, 5, 8, 1),
                     HIPOWER_RUN_REQ_NONE);
    ck_assert_int_eq(hipower_run_req_action(req, 3, 8, 1),
                     HIPOWER_RUN_REQ_NONE);
    /* No ask, or an ask while the receiver holds a run, or of another
     * epoch: nothing (a peer cannot make us grant at will) */
    ck_assert_int_eq(hipower_run_req_action(req, 5, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
    req = hipower_run_req_make(5, 0x1234, 1);
    ck_assert_int_eq(hipower_run_req_action(req, 5, 0, 0),
                     HIPOWER_RUN_REQ_WANTS);
    ck_assert_int_eq(hipower_run_req_action(req, 5, 8, 0),
                     HIPOWER_RUN_REQ_NONE);
    ck_assert_int_eq(hipower_run_req_action(req, 6, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
    /* The ask word also says where the last run ended: while the release
     * is out it completes it */
    ck_assert_int_eq(hipower_run_req_action(req, 4, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* A release is a valid record; a grant of the current epoch is not */
    ck_assert(hipower_grant_record_valid(4, 5, 0, 64));
    ck_assert(!hipower_grant_record_valid(5, 5, 0, 64));
}
END_TEST

/* An ask is a want from a run of no slots: the fair share if the pool has
 * it beyond the reserve, what it has beyond the reserve if less but at
 * least the mailbox (MIN_SLOTS: review L2, a waiter got 1-slot runs), and
 * nothing (the endpoint waits) when less is left */
START_TEST(test_switch_grant_from_nothing)
{
    uint32_t size = 0;

    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 100, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 16);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 20, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 12);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 16, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 8);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 12, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 9, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 0, 8, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    /* Without an ask, nothing: a peer without a run gets one only when it
     * has something to send */
    ck_assert_int_eq(hipower_grant_decide(0, 16, 0, 0, 100, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    /* Nor from scattered free slots: at least the mailbox */
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 0, 8), 8);
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 8, 8), 9);
}
END_TEST

START_TEST(test_switch_old_remaining)
{
    /* Drained: switch now */
    ck_assert_int_eq(hipower_grant_old_remaining(7, 7, 8), 0);
    ck_assert_int_eq(hipower_grant_old_remaining(5, 7, 8), 2);
    ck_assert_int_eq(hipower_grant_old_remaining(0, 8, 8), 8);
    /* More than the run holds, or behind what was delivered */
    ck_assert_int_eq(hipower_grant_old_remaining(0, 9, 8), -1);
    ck_assert_int_eq(hipower_grant_old_remaining(7, 6, 8), -1);
    /* Sequence numbers beyond 16 bits: only the difference counts */
    ck_assert_int_eq(hipower_grant_old_remaining(0x1fffe, 0x0001, 4096), 3);
    ck_assert_int_eq(hipower_grant_old_remaining(0x80000000u, 0x0000, 4), 0);
}
END_TEST

/*
 * A switch (or a release) adopted right after message period - 1 of a run
 * (review M1): the sender's head rests at the period, the receiver's has
 * already restarted at 0. For every run size, through the transport's own
 * ring functions on both sides: the old end the sender reports must leave
 * the receiver nothing to wait for, and the same one step before the
 * period (one message still to come).
 */
START_TEST(test_switch_at_period)
{
    hipower_bitmap_word_t written[HIPOWER_BITMAP_WORDS(4096)];
    hipower_bitmap_word_t consumed[HIPOWER_BITMAP_WORDS(4096)];
    hipower_tx_ring_t tx;
    hipower_rx_ring_t rx;
    uint32_t n, period, old_end, bad = 0, first_bad = 0, slot;
    int behind;

    for (n = 1; n <= 4096; ++n) {
        /* The first multiple of 2n at or past 2^31: where sequences restart */
        period = (uint32_t)(((HIPOWER_RING_SEQ_PERIOD_BIT + 2ull * n - 1) /
                             (2ull * n)) * (2ull * n));
        for (behind = 0; behind <= 1; ++behind) {
            memset(written, 0, sizeof(written));
            memset(consumed, 0, sizeof(consumed));
            hipower_tx_ring_init(&tx, n, written);
            hipower_rx_ring_init(&rx, n, consumed);
            /* Both rings just before the period, nothing outstanding */
            tx.head = tx.tail = period - 2;
            tx.recycled = 12345;  /* Counts over all runs: any value */
            rx.head = period - 2;
            rx.taken = rx.acked = 12345;
            hipower_tx_ring_take(&tx);
            /* Acknowledged (room again in a ring of one slot) */
            ck_assert_uint_eq(hipower_tx_ring_ack(&tx, tx.recycled + 1), 1);
            hipower_tx_ring_take(&tx);
            /* The receiver delivered all but @a behind of them */
            slot = hipower_rx_ring_advance(&rx);
            hipower_rx_ring_release(&rx, slot);
            if (!behind) {
                slot = hipower_rx_ring_advance(&rx);
                hipower_rx_ring_release(&rx, slot);
            }
            old_end = hipower_tx_ring_switch(&tx, 8);
            if (hipower_grant_old_remaining(hipower_rx_ring_taken(&rx),
                                            (uint16_t)old_end, n) !=
                behind) {
                if (bad++ == 0) {
                    first_bad = n;
                }
            }
        }
    }
    ck_assert_msg(bad == 0, "%u cases of 8192 where a switch at the period "
                  "leaves the receiver waiting or failing (first: a run of "
                  "%u slots)", bad, first_bad);
}
END_TEST

/* Epochs past 2^32 (review L1): the grant record's 64-bit epoch is still
 * the next one, and run requests (their low 32 bits) still match */
START_TEST(test_switch_epoch_past_2_32)
{
    uint64_t epoch = 0xffffffffull; /* The receiver's current run */
    uint64_t req;

    ck_assert(hipower_grant_record_valid(epoch, epoch + 1, 8, 4096));
    ck_assert(!hipower_grant_record_valid(epoch, 0, 8, 4096));
    /* A release (epoch 2^32) adopted: the request says so */
    req = hipower_run_req_make((uint32_t)(epoch + 1), 5, 0);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)epoch, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* Then, without a run at epoch 2^32, an ask */
    req = hipower_run_req_make((uint32_t)(epoch + 1), 5, 1);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)(epoch + 1), 0, 0),
                     HIPOWER_RUN_REQ_WANTS);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)epoch, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
}
END_TEST

Suite *hipower_switch_suite(void)
{
    Suite *s  = suite_create("switch");
    TCase *tc = tcase_create("switch");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_switch_old_remaining);
    tcase_add_test(tc, test_switch_at_period);
    tcase_add_test(tc, test_switch_epoch_past_2_32);
    tcase_add_test(tc, test_switch_model);
    tcase_add_test(tc, test_switch_model_detects_reset_counts);
    tcase_add_test(tc, test_switch_model_detects_stale_consumed_bits);
    tcase_add_test(tc, test_switch_model_detects_undrained_switch);
    tcase_add_test(tc, test_switch_model_detects_undrained_release);
    tcase_add_test(tc, test_switch_run_req);
    tcase_add_test(tc, test_switch_grant_from_nothing);
    suite_add_tcase(s, tc);
    return s;
}
