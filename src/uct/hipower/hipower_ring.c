/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_ring.h"

#include <assert.h>


/*
 * Sequence numbers and the 2^32 wrap
 *
 * A message's slot is seq % num_slots and the parity of its lap is
 * (seq / num_slots) & 1. Had seq simply run through all 2^32 values, both
 * would jump at the wrap unless num_slots divided 2^32: with 3 slots,
 * seq 0xffffffff is slot 0 and so is the seq 0 after it. The rings would
 * then need a power-of-two num_slots, but an endpoint gets however many
 * slots the arena could give it.
 *
 * So a sequence number instead restarts from 0 at the "period": the first
 * multiple of 2 * num_slots that has the top bit set. A multiple of
 * 2 * num_slots ends an even number of laps, so both the slot order and the
 * lap parity carry on across the restart, and every bit is back to the
 * value it had at seq 0. Sender (take) and receiver (advance) apply the
 * same rule to the same stream, so their sequence numbers stay equal, and
 * the 16-bit seq in the slot header keeps matching. The test for the top
 * bit is the only cost on the fast path; the division runs only during the
 * at most 2 * num_slots messages before a restart.
 *
 * Callers must therefore not step sequence numbers themselves across the
 * restart (seq + 1 after period - 1 is 0, not the period). The receiver
 * restarts its head as soon as it reaches the period, because its head is
 * the seq expected in the next slot header. The sender restarts lazily, at
 * the take that follows: its head may rest at the period, and head - 1 is
 * always the seq the last take returned, so a caller that fails to post
 * the message can still give the slot back (toggle the written bit, head--).
 *
 * The sender's tail lags its head by at most num_slots. When the head
 * restarts, the tail moves back by the same period, which as an uint32 makes
 * it "negative": just below 2^32. That keeps head - tail, and thus
 * hipower_tx_ring_free(), right without a special case, and the tail reaches
 * 0 by plain uint32 overflow exactly when it reaches the period. A tail above
 * the head (a value the head never takes, as the period is below
 * 2^32 - num_slots) is one of those.
 *
 * The period is below 2^31 + 2 * num_slots; keeping it below the negative
 * tails, 2^32 - num_slots, bounds num_slots to 2^31 / 3. HIPOWER_RING_MAX_SLOTS
 * is a rounder bound, far above what a memory budget allows. A ring of 0
 * slots is allowed, as a placeholder that nothing can be taken from.
 */
#define HIPOWER_RING_MAX_SLOTS       (1u << 29)

/* Slot of the tail, which may be "negative" after the head restarted */
static inline uint32_t hipower_tx_ring_tail_slot(const hipower_tx_ring_t *ring)
{
    if (ring->tail > ring->head) {
        /* tail = 2^32 - k stands for period - k; the period is a multiple
         * of num_slots and 1 <= k <= num_slots */
        return ring->num_slots - (0u - ring->tail);
    }

    return ring->tail % ring->num_slots;
}

void hipower_ring_bitmap_at(hipower_bitmap_word_t *bitmap, uint32_t num_slots,
                            uint32_t seq)
{
    uint32_t words = HIPOWER_BITMAP_WORDS(num_slots);
    uint32_t below, word, bit;
    hipower_bitmap_word_t laps;

    if (num_slots == 0) {
        return;
    }

    /* Every slot was used seq / num_slots times, the slots below seq's one
     * time more */
    laps  = ((seq / num_slots) & 1) ? ~(hipower_bitmap_word_t)0 : 0;
    below = seq % num_slots;
    for (word = 0; word < words; ++word) {
        bitmap[word] = laps;
        bit          = word * HIPOWER_BITMAP_WORD_BITS;
        if (below >= bit + HIPOWER_BITMAP_WORD_BITS) {
            bitmap[word] = ~laps;
        } else if (below > bit) {
            bitmap[word] ^= ((hipower_bitmap_word_t)1 << (below - bit)) - 1;
        }
        if (num_slots < bit + HIPOWER_BITMAP_WORD_BITS) {
            bitmap[word] &= ((hipower_bitmap_word_t)1 << (num_slots - bit)) - 1;
        }
    }
}

void hipower_tx_ring_init(hipower_tx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *written, uint32_t start)
{
    assert(num_slots <= HIPOWER_RING_MAX_SLOTS);
    assert((start == 0) || (start < hipower_ring_seq_period(num_slots)));

    ring->num_slots = num_slots;
    ring->head      = start;
    ring->tail      = start;
    ring->recycled  = 0;
    ring->written   = written;
}

uint32_t hipower_tx_ring_recycle(hipower_tx_ring_t *ring,
                                 const hipower_bitmap_word_t *peer_consumed,
                                 uint32_t taken_at_read)
{
    uint32_t outstanding = ring->head - ring->tail;
    int32_t readable     = (int32_t)(taken_at_read - ring->recycled);
    uint32_t recycled;

    /* Only what was taken before the READ; acknowledgements since may have
     * freed even those */
    if (readable <= 0) {
        return 0;
    }
    if ((uint32_t)readable < outstanding) {
        outstanding = (uint32_t)readable;
    }
    if (outstanding == 0) {
        return 0;
    }

    /* Written and consumed parities are equal on a slot the receiver is
     * done with; stop at the first slot it still holds, since slots are
     * reused strictly in ring order */
    recycled    = hipower_bitmap_equal_run(ring->written, peer_consumed,
                                           hipower_tx_ring_tail_slot(ring),
                                           ring->num_slots, outstanding);
    ring->tail     += recycled;
    ring->recycled += recycled;
    return recycled;
}


/*
 * Length of the run of bits equal to @a parity at the start of [from, to):
 * hipower_bitmap_equal_run() against a constant bitmap, word-at-a-time.
 */
static uint32_t hipower_rx_ring_parity_run(const hipower_bitmap_word_t *bitmap,
                                           uint32_t from, uint32_t to,
                                           unsigned parity)
{
    hipower_bitmap_word_t flip = parity ? ~(hipower_bitmap_word_t)0 : 0;
    uint32_t index             = from;
    hipower_bitmap_word_t mismatch;
    uint32_t word, bit;

    while (index < to) {
        word     = index / HIPOWER_BITMAP_WORD_BITS;
        bit      = index % HIPOWER_BITMAP_WORD_BITS;
        /* Bits below "bit" were checked already; bits at or beyond "to" are
         * cut off below */
        mismatch = (bitmap[word] ^ flip) >> bit;
        if (mismatch != 0) {
            index += (uint32_t)__builtin_ctzll(mismatch);
            return ((index < to) ? index : to) - from;
        }

        index += HIPOWER_BITMAP_WORD_BITS - bit;
    }

    return to - from;
}

void hipower_rx_ring_init(hipower_rx_ring_t *ring, uint32_t num_slots,
                          hipower_bitmap_word_t *consumed, uint32_t start)
{
    assert(num_slots <= HIPOWER_RING_MAX_SLOTS);
    assert((start == 0) || (start < hipower_ring_seq_period(num_slots)));

    ring->num_slots = num_slots;
    ring->head      = start;
    ring->held      = 0;
    ring->taken     = 0;
    ring->acked     = 0;
    ring->consumed  = consumed;
}

/* Parity of the written bit that marks message @a seq as arrived */
static inline unsigned hipower_rx_ring_new_parity(uint32_t num_slots,
                                                  uint32_t seq)
{
    return ((seq / num_slots) + 1) & 1;
}

int hipower_rx_ring_ready(const hipower_rx_ring_t *ring,
                          const hipower_bitmap_word_t *peer_written)
{
    return hipower_bitmap_get(peer_written,
                              hipower_ring_slot(ring->num_slots, ring->head)) ==
           hipower_rx_ring_new_parity(ring->num_slots, ring->head);
}

uint32_t hipower_rx_ring_ready_count(const hipower_rx_ring_t *ring,
                                     const hipower_bitmap_word_t *peer_written,
                                     uint32_t max)
{
    uint32_t num_slots = ring->num_slots;
    uint32_t slot      = hipower_ring_slot(num_slots, ring->head);
    unsigned parity    = hipower_rx_ring_new_parity(num_slots, ring->head);
    uint32_t first_lap, count;

    /* The sender cannot be more than one ring ahead of the receiver */
    if (max > num_slots) {
        max = num_slots;
    }

    /* Up to the end of the ring, the slots' messages are in head's lap;
     * after the wrap, in the next lap, which flips the expected parity.
     * The period restart keeps this true across it (see above). */
    first_lap = num_slots - slot;
    if (max <= first_lap) {
        return hipower_rx_ring_parity_run(peer_written, slot, slot + max,
                                          parity);
    }

    count = hipower_rx_ring_parity_run(peer_written, slot, num_slots, parity);
    if (count < first_lap) {
        return count;
    }

    return count + hipower_rx_ring_parity_run(peer_written, 0,
                                              max - first_lap, !parity);
}

