/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_RING_H_
#define UCT_HIPOWER_RING_H_

#include "hipower_bitmap.h"

#include <assert.h>
#include <stdint.h>

/*
 * Slot ring bookkeeping of one connection, without any verbs.
 *
 * Messages take the peer's slots in ring order: message number "seq"
 * (counted from 0 per direction) goes to slot seq % num_slots. The sender
 * toggles the slot's bit in its "written" bitmap when it takes the slot; the
 * receiver toggles the slot's bit in its "consumed" bitmap when the message
 * there is released (possibly out of order, when a handler keeps a
 * descriptor). Hence:
 *
 *  - the receiver's slot for seq holds the new message once the sender's
 *    written bit for it equals the parity of that slot's use count,
 *    ((seq / num_slots) + 1) & 1 -- a stale message from the previous lap
 *    never looks new;
 *  - a slot is free for the sender again once written == consumed there.
 *    The sender reuses slots strictly in ring order, so it recycles the
 *    contiguous run of free slots from its oldest outstanding one (tail).
 *
 * Besides the bitmap, the receiver acknowledges in the trailer of every
 * message it sends back (hipower_slot.h) how many messages it has released
 * in ring order, a count modulo 2^32. Under two-way traffic that frees the
 * sender's slots without any READ. Counts, not sequence numbers, because
 * sequence numbers restart at the ring's period.
 *
 * The two ways of learning about free slots must not mix badly: a bitmap
 * READ posted before an acknowledgement arrived may return a copy older
 * than the release the acknowledgement reported; the slot may meanwhile
 * have been reused, and the old copy then shows the parity of two laps
 * back, the same as the new lap's, and would free it early. So a READ may
 * only recycle slots taken before it was posted (hipower_tx_ring_taken()
 * at that time): their previous lap was known released before the READ
 * was posted, hence released before the peer answered it.
 */

typedef struct hipower_tx_ring {
    uint32_t                num_slots; /* Peer slots this sender may use */
    uint32_t                head;      /* Sequence of the next message */
    uint32_t                tail;      /* Oldest slot not known to be free */
    uint32_t                recycled;  /* Slots freed so far, mod 2^32 */
    hipower_bitmap_word_t   *written;  /* Local: toggled when a slot is taken */
} hipower_tx_ring_t;


typedef struct hipower_rx_ring {
    uint32_t                num_slots; /* Local slots the peer writes into */
    uint32_t                head;      /* Sequence of the next message expected */
    uint32_t                held;      /* Delivered but not yet released */
    uint32_t                taken;     /* Messages delivered, mod 2^32 */
    uint32_t                acked;     /* Released in ring order, mod 2^32 */
    hipower_bitmap_word_t   *consumed; /* Toggled when a slot is released */
} hipower_rx_ring_t;


/**
 * A sender's ring of @a num_slots whose first message is sequence @a start
 * (0, or anything before the period: both sides of a connection start a
 * run at the same number, see hipower_ring_bitmap_at()). @a written must
 * have the HIPOWER_BITMAP_WORDS(num_slots) words hipower_ring_bitmap_at()
 * sets for @a start (zeroes for 0).
 */
void hipower_tx_ring_init(hipower_tx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *written, uint32_t start);

static inline uint32_t hipower_tx_ring_free(const hipower_tx_ring_t *ring)
{
    return ring->num_slots - (ring->head - ring->tail);
}

/* Messages taken so far, mod 2^32: the bound of a READ posted now */
static inline uint32_t hipower_tx_ring_taken(const hipower_tx_ring_t *ring)
{
    return ring->recycled + (ring->head - ring->tail);
}

/* Slot index of message number @a seq */
static inline uint32_t hipower_ring_slot(uint32_t num_slots, uint32_t seq)
{
    return seq % num_slots;
}

/* Sequence numbers restart at 0 at the "period" (see hipower_ring.c) */
#define HIPOWER_RING_SEQ_PERIOD_BIT  0x80000000u

/* The period of a ring of @a num_slots (> 0): the first multiple of
 * 2 * num_slots with the top bit set, where sequence numbers restart at 0 */
static inline uint32_t hipower_ring_seq_period(uint32_t num_slots)
{
    uint32_t two_laps = 2 * num_slots;

    return HIPOWER_RING_SEQ_PERIOD_BIT +
           ((two_laps - (HIPOWER_RING_SEQ_PERIOD_BIT % two_laps)) % two_laps);
}

/**
 * Sets the first HIPOWER_BITMAP_WORDS(num_slots) words of @a bitmap as the
 * messages before sequence @a seq left them in a ring of @a num_slots: each
 * slot's bit is the parity of its uses so far, seq / num_slots, plus one
 * below slot seq % num_slots; bits past num_slots are 0. For seq 0: zeroes.
 * A run may start at any sequence number before its period provided that
 * the sender's written bits, the receiver's consumed bits and the bitmap
 * the receiver compares (pushed or pulled) start so: then everything is
 * as if the run had carried seq messages, all released. The transport
 * starts at 0 (uct_hipower_seq_origin()); the simulator starts runs just
 * before the period to run the restart (issue 25).
 */
void hipower_ring_bitmap_at(hipower_bitmap_word_t *bitmap, uint32_t num_slots,
                            uint32_t seq);

/* Whether @a seq is the period, where sequence numbers restart at 0 */
static inline int hipower_ring_seq_at_period(uint32_t num_slots, uint32_t seq)
{
    return (seq & HIPOWER_RING_SEQ_PERIOD_BIT) &&
           ((seq % (2 * num_slots)) == 0);
}

/**
 * Takes the next slot: returns its sequence number (slot = seq % num_slots)
 * and toggles its written bit. The caller checks hipower_tx_ring_free() > 0.
 * Inline, as are advance and release: they run once per message.
 */
static inline uint32_t hipower_tx_ring_take(hipower_tx_ring_t *ring)
{
    uint32_t seq;

    assert(hipower_tx_ring_free(ring) > 0);

    if (hipower_ring_seq_at_period(ring->num_slots, ring->head)) {
        ring->tail -= ring->head;
        ring->head  = 0;
    }

    seq        = ring->head;
    ring->head = seq + 1;
    hipower_bitmap_toggle(ring->written, hipower_ring_slot(ring->num_slots,
                                                           seq));
    return seq;
}

/**
 * Gives back the slot the last hipower_tx_ring_take() took, when nothing of
 * its message could be posted: its written bit flips back and the next take
 * returns the same sequence number.
 */
static inline void hipower_tx_ring_untake(hipower_tx_ring_t *ring)
{
    uint32_t seq = --ring->head;

    hipower_bitmap_toggle(ring->written, hipower_ring_slot(ring->num_slots,
                                                           seq));
}

/**
 * Applies a copy of the receiver's consumed bitmap, read by a READ posted
 * when hipower_tx_ring_taken() was @a taken_at_read: advances the tail over
 * the slots that are free again, but not past the messages taken after the
 * READ was posted (see above). Returns how many were recycled.
 */
uint32_t hipower_tx_ring_recycle(hipower_tx_ring_t *ring,
                                 const hipower_bitmap_word_t *peer_consumed,
                                 uint32_t taken_at_read);

/**
 * Applies the receiver's acknowledgement @a ack (its hipower_rx_ring_acked(),
 * carried by a message it sent): frees the slots it covers beyond what is
 * known free. An old acknowledgement (a copy of the bitmap overtook it) or
 * a bogus one (more than is outstanding) frees nothing. Returns how many
 * slots were freed. Inline: it runs once per received message.
 */
static inline uint32_t hipower_tx_ring_ack(hipower_tx_ring_t *ring,
                                           uint32_t ack)
{
    uint32_t delta = ack - ring->recycled;

    if (delta == 0) {
        return 0; /* Nothing new: one-way traffic, every message */
    }
    if (delta - 1 >= ring->head - ring->tail) {
        return 0; /* Nothing new (delta 0), old, or more than outstanding */
    }

    ring->tail     += delta;
    ring->recycled += delta;
    return delta;
}

/**
 * The sender adopts a new run of @a num_slots (docs/protocol.md, 9.2): its
 * next message is sequence @a start there (0, or as for
 * hipower_tx_ring_init()), and the old run is never written
 * again. Returns where its messages in the old run end, as the count of
 * messages taken over all runs (mod 2^32), which the first message of the
 * new run carries (its low 16 bits); the receiver compares it with its own
 * count of messages delivered (hipower_rx_ring_taken()). Not the sequence
 * number: the sender restarts sequences at the period lazily, at its next
 * take, the receiver at once, so around the period the two disagree by
 * the period, whose low 16 bits are not 0 for most run sizes; counts never
 * restart (2^32 is a multiple of 2^16). Messages
 * still outstanding in the old run never come back through this ring, so
 * they count as recycled: the receiver's acknowledgements count messages
 * over all runs, and one that covers only old-run messages frees nothing
 * here; nor does a copy of the old run's consumed bitmap from a READ
 * posted before the switch (its bound, hipower_tx_ring_taken() then, is
 * at most what the switch counted as recycled). The caller sets the
 * written bitmap for @a start (hipower_ring_bitmap_at()).
 */
static inline uint32_t hipower_tx_ring_switch(hipower_tx_ring_t *ring,
                                              uint32_t num_slots,
                                              uint32_t start)
{
    uint32_t old_end = hipower_tx_ring_taken(ring);

    ring->recycled  = old_end;
    ring->num_slots = num_slots;
    ring->head      = start;
    ring->tail      = start;
    return old_end;
}

/* True when free slots are below @a threshold (a count of slots) */
static inline int hipower_tx_ring_wants_recycle(const hipower_tx_ring_t *ring,
                                                uint32_t threshold)
{
    return hipower_tx_ring_free(ring) < threshold;
}


/* A receiver's ring whose first message is sequence @a start; @a consumed
 * set as hipower_ring_bitmap_at() sets it (see hipower_tx_ring_init()) */
void hipower_rx_ring_init(hipower_rx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *consumed, uint32_t start);

/**
 * Whether the message numbered ring->head has arrived, given the receiver's
 * view of the sender's written bitmap (pushed to it, or pulled from it).
 */
int hipower_rx_ring_ready(const hipower_rx_ring_t *ring,
                          const hipower_bitmap_word_t *peer_written);

/**
 * How many messages from ring->head on have arrived, contiguously, at most
 * @a max. Lets the receiver take a batch with one bitmap comparison.
 */
uint32_t hipower_rx_ring_ready_count(const hipower_rx_ring_t *ring,
                                     const hipower_bitmap_word_t *peer_written,
                                     uint32_t max);

/* Moves past the message at ring->head (delivered); returns its slot */
static inline uint32_t hipower_rx_ring_advance(hipower_rx_ring_t *ring)
{
    uint32_t slot = hipower_ring_slot(ring->num_slots, ring->head);

    ++ring->head;
    if (hipower_ring_seq_at_period(ring->num_slots, ring->head)) {
        ring->head = 0;
    }

    ++ring->held;
    ++ring->taken;
    return slot;
}

/*
 * Releases the slot @a slot: toggles its consumed bit, which the sender
 * reads to reuse the slot. A release barrier first: every read of the
 * slot's message (ours and the handler's) is done before the bit can be
 * seen, or a weakly ordered CPU could still be reading the slot when the
 * sender's next message lands in it. (On x86 it only stops the compiler.)
 */
/* Toggles @a slot's consumed bit, after every read of the slot: the peer
 * may reuse the slot as soon as a READ of the bitmap sees it */
static inline void hipower_rx_ring_consume(hipower_rx_ring_t *ring,
                                           uint32_t slot)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    hipower_bitmap_toggle(ring->consumed, slot);
}

static inline void hipower_rx_ring_release(hipower_rx_ring_t *ring,
                                           uint32_t slot)
{
    assert(ring->held > 0);
    assert(slot < ring->num_slots);

    hipower_rx_ring_consume(ring, slot);
    if (--ring->held == 0) {
        /* Everything delivered is released: in ring order, whatever the
         * order of the releases was */
        ring->acked = ring->taken;
    }
}

/*
 * Whether the next @a max messages from ring->head on lie before the period
 * (sequence numbers go on by one): then a receive loop may deliver a run of
 * them with hipower_rx_ring_consume() each and one
 * hipower_rx_ring_advance_run() at its end. Once every 2^31 messages it
 * does not, and the loop takes them one by one.
 */
static inline int hipower_rx_ring_run_fits(const hipower_rx_ring_t *ring,
                                           uint32_t max)
{
    return ring->head < HIPOWER_RING_SEQ_PERIOD_BIT - max;
}

/*
 * @a count messages from ring->head on were delivered and released in ring
 * order (each slot consumed), with nothing held before them: moves past
 * them and acknowledges them all, as hipower_rx_ring_advance() and
 * hipower_rx_ring_release() one by one would have. Only for a run
 * hipower_rx_ring_run_fits() allowed. Acknowledging once per run lets a
 * reply sent from a handler acknowledge up to the run before: a count that
 * lags is still exact, only later.
 */
static inline void hipower_rx_ring_advance_run(hipower_rx_ring_t *ring,
                                               uint32_t count)
{
    assert(ring->held == 0);
    assert(hipower_rx_ring_run_fits(ring, count));

    ring->head  += count;
    ring->taken += count;
    ring->acked  = ring->taken;
}

/*
 * The receiver moves to the sender's new run of @a num_slots, whose
 * released bits go to @a consumed (set for @a start by
 * hipower_ring_bitmap_at()): sequence numbers start again at @a start, the
 * sender's, the counts of messages delivered and acknowledged go on (they
 * span runs, see hipower_tx_ring_switch()). Only once everything of the
 * old run was delivered and released.
 */
static inline void hipower_rx_ring_switch(hipower_rx_ring_t *ring,
                                          uint32_t num_slots,
                                          hipower_bitmap_word_t *consumed,
                                          uint32_t start)
{
    assert(ring->held == 0);

    ring->num_slots = num_slots;
    ring->head      = start;
    ring->consumed  = consumed;
}

/* Messages delivered so far, mod 2^32: the sender's count of messages
 * sent, mod 2^32, says whether any is still on its way (hipower_event.c) */
static inline uint32_t hipower_rx_ring_taken(const hipower_rx_ring_t *ring)
{
    return ring->taken;
}

/* What the receiver acknowledges in the trailers it sends: how many
 * messages it has released in ring order (the sender may reuse their
 * slots), mod 2^32. Lags while a handler holds a message. */
static inline uint32_t hipower_rx_ring_acked(const hipower_rx_ring_t *ring)
{
    return ring->acked;
}

#endif
