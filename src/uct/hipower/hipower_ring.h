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
 */

typedef struct hipower_tx_ring {
    uint32_t                num_slots; /* Peer slots this sender may use */
    uint32_t                head;      /* Sequence of the next message */
    uint32_t                tail;      /* Oldest slot not known to be free */
    hipower_bitmap_word_t   *written;  /* Local: toggled when a slot is taken */
} hipower_tx_ring_t;


typedef struct hipower_rx_ring {
    uint32_t                num_slots; /* Local slots the peer writes into */
    uint32_t                head;      /* Sequence of the next message expected */
    uint32_t                held;      /* Delivered but not yet released */
    hipower_bitmap_word_t   *consumed; /* Toggled when a slot is released */
} hipower_rx_ring_t;


/* @a written must have HIPOWER_BITMAP_WORDS(num_slots) zeroed words */
void hipower_tx_ring_init(hipower_tx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *written);

static inline uint32_t hipower_tx_ring_free(const hipower_tx_ring_t *ring)
{
    return ring->num_slots - (ring->head - ring->tail);
}

/* Slot index of message number @a seq */
static inline uint32_t hipower_ring_slot(uint32_t num_slots, uint32_t seq)
{
    return seq % num_slots;
}

/* Sequence numbers restart at 0 at the "period" (see hipower_ring.c) */
#define HIPOWER_RING_SEQ_PERIOD_BIT  0x80000000u

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
 * Applies a fresh copy of the receiver's consumed bitmap: advances the tail
 * over the slots that are free again. Returns how many were recycled.
 */
uint32_t hipower_tx_ring_recycle(hipower_tx_ring_t *ring,
                                 const hipower_bitmap_word_t *peer_consumed);

/* True when free slots are below @a threshold (a count of slots) */
static inline int hipower_tx_ring_wants_recycle(const hipower_tx_ring_t *ring,
                                                uint32_t threshold)
{
    return hipower_tx_ring_free(ring) < threshold;
}


/* @a consumed must have HIPOWER_BITMAP_WORDS(num_slots) zeroed words */
void hipower_rx_ring_init(hipower_rx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *consumed);

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
    return slot;
}

/*
 * Releases the slot @a slot: toggles its consumed bit, which the sender
 * reads to reuse the slot. A release barrier first: every read of the
 * slot's message (ours and the handler's) is done before the bit can be
 * seen, or a weakly ordered CPU could still be reading the slot when the
 * sender's next message lands in it. (On x86 it only stops the compiler.)
 */
static inline void hipower_rx_ring_release(hipower_rx_ring_t *ring,
                                           uint32_t slot)
{
    assert(ring->held > 0);
    assert(slot < ring->num_slots);

    __atomic_thread_fence(__ATOMIC_RELEASE);
    hipower_bitmap_toggle(ring->consumed, slot);
    --ring->held;
}

#endif
