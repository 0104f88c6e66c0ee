/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_BITMAP_H_
#define UCT_HIPOWER_BITMAP_H_

#include <stdint.h>

/*
 * One bit per slot, packed in 64-bit words: the unit a peer reads with one
 * RDMA_READ or receives with one RDMA_WRITE. A slot's bit is toggled on
 * every use, so its value is the parity of how many times that happened;
 * two sides compare parities instead of exchanging per-message messages.
 * Indices are slot numbers in [0, num_slots); "runs" wrap around the ring.
 */

#define HIPOWER_BITMAP_WORD_BITS  64
#define HIPOWER_BITMAP_WORDS(_n)  (((_n) + HIPOWER_BITMAP_WORD_BITS - 1) / \
                                   HIPOWER_BITMAP_WORD_BITS)

typedef uint64_t hipower_bitmap_word_t;


static inline unsigned hipower_bitmap_get(const hipower_bitmap_word_t *bitmap,
                                          unsigned index)
{
    return (bitmap[index / HIPOWER_BITMAP_WORD_BITS] >>
            (index % HIPOWER_BITMAP_WORD_BITS)) & 1;
}

static inline void hipower_bitmap_toggle(hipower_bitmap_word_t *bitmap,
                                         unsigned index)
{
    bitmap[index / HIPOWER_BITMAP_WORD_BITS] ^=
            (hipower_bitmap_word_t)1 << (index % HIPOWER_BITMAP_WORD_BITS);
}


/**
 * Length of the run of slots, starting at @a start and going around the
 * ring of @a num_slots, whose bits are equal in @a a and @a b; at most
 * @a max (which may not exceed @a num_slots). Word-at-a-time.
 */
unsigned hipower_bitmap_equal_run(const hipower_bitmap_word_t *a,
                                  const hipower_bitmap_word_t *b,
                                  unsigned start, unsigned num_slots,
                                  unsigned max);

/**
 * Number of slots, among the @a count starting at @a start around the ring,
 * whose bits are equal in @a a and @a b (not necessarily contiguous).
 */
unsigned hipower_bitmap_count_equal(const hipower_bitmap_word_t *a,
                                    const hipower_bitmap_word_t *b,
                                    unsigned start, unsigned num_slots,
                                    unsigned count);

#endif
