/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_bitmap.h"


/*
 * Both functions walk the ring as at most a few linear segments
 * [from, to) with from < to <= num_slots, one 64-bit word at a time: the
 * XOR of the two words has a bit set exactly where the slots differ.
 * Bits of the last word beyond num_slots are never counted, so padding
 * that a peer wrote there (the bitmaps travel over the wire) is harmless,
 * and no word past HIPOWER_BITMAP_WORDS(num_slots) is ever read.
 */


/* Mask of the bits [bit, bit + count) of a word; bit + count <= 64 */
static inline hipower_bitmap_word_t
hipower_bitmap_mask(unsigned bit, unsigned count)
{
    hipower_bitmap_word_t mask = ~(hipower_bitmap_word_t)0 << bit;

    if ((bit + count) < HIPOWER_BITMAP_WORD_BITS) {
        mask &= ((hipower_bitmap_word_t)1 << (bit + count)) - 1;
    }
    return mask;
}

/* Length of the run of equal bits at the start of [from, to) */
static unsigned hipower_bitmap_equal_run_linear(const hipower_bitmap_word_t *a,
                                                const hipower_bitmap_word_t *b,
                                                unsigned from, unsigned to)
{
    unsigned index = from;
    unsigned word, bit, count;
    hipower_bitmap_word_t diff;

    while (index < to) {
        word  = index / HIPOWER_BITMAP_WORD_BITS;
        bit   = index % HIPOWER_BITMAP_WORD_BITS;
        count = HIPOWER_BITMAP_WORD_BITS - bit;
        if (count > (to - index)) {
            count = to - index;
        }

        diff = (a[word] ^ b[word]) & hipower_bitmap_mask(bit, count);
        if (diff != 0) {
            return index + ((unsigned)__builtin_ctzll(diff) - bit) - from;
        }

        index += count;
    }

    return to - from;
}

/* Number of equal bits in [from, to) */
static unsigned
hipower_bitmap_count_equal_linear(const hipower_bitmap_word_t *a,
                                  const hipower_bitmap_word_t *b,
                                  unsigned from, unsigned to)
{
    unsigned index = from;
    unsigned equal = 0;
    unsigned word, bit, count;

    while (index < to) {
        word  = index / HIPOWER_BITMAP_WORD_BITS;
        bit   = index % HIPOWER_BITMAP_WORD_BITS;
        count = HIPOWER_BITMAP_WORD_BITS - bit;
        if (count > (to - index)) {
            count = to - index;
        }

        equal += (unsigned)__builtin_popcountll(~(a[word] ^ b[word]) &
                                      hipower_bitmap_mask(bit, count));
        index += count;
    }

    return equal;
}

unsigned hipower_bitmap_equal_run(const hipower_bitmap_word_t *a,
                                  const hipower_bitmap_word_t *b,
                                  unsigned start, unsigned num_slots,
                                  unsigned max)
{
    unsigned run = 0;
    unsigned segment, segment_run;

    /* max <= num_slots, so this loop wraps at most once; it is written for
     * any max anyway, which costs nothing */
    while (run < max) {
        segment = num_slots - start;
        if (segment > (max - run)) {
            segment = max - run;
        }

        segment_run = hipower_bitmap_equal_run_linear(a, b, start,
                                                      start + segment);
        run        += segment_run;
        if (segment_run < segment) {
            break;
        }

        start = 0;
    }

    return run;
}

unsigned hipower_bitmap_count_equal(const hipower_bitmap_word_t *a,
                                    const hipower_bitmap_word_t *b,
                                    unsigned start, unsigned num_slots,
                                    unsigned count)
{
    unsigned equal = 0;
    unsigned segment;

    /* A count beyond num_slots goes around the ring again, counting slots
     * once per pass, as "the count slots starting at start" says */
    while (count > 0) {
        segment = num_slots - start;
        if (segment > count) {
            segment = count;
        }

        equal += hipower_bitmap_count_equal_linear(a, b, start,
                                                   start + segment);
        count -= segment;
        start  = 0;
    }

    return equal;
}
