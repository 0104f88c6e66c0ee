/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The protocol units that need no device, each against a reference that is
 * too simple to be wrong:
 *  - the bitmap run/count functions agree with a bit-by-bit loop for every
 *    ring size shape (1 slot, partial last word, exact words), including
 *    wrap-around and garbage in the last word's padding, and read no word
 *    past the bitmap;
 *  - a sender and a receiver driven by the two rings, in random
 *    interleavings with stale bitmap copies and out-of-order releases,
 *    deliver every message once, in order, and the sender never reuses a
 *    slot the receiver still holds -- also across the point where sequence
 *    numbers restart, and when one descriptor is held for a whole lap;
 *  - the slot header parser rejects hostile headers with the right reason
 *    and never reads past a slot that ends at a guard page;
 *  - the slot arena hands out the longest run capped at "want", shrinks
 *    allocations as the budget runs out, coalesces on free, and matches a
 *    slot-by-slot model over a long random sequence.
 */
#include "hipower_arena.h"
#include "hipower_bitmap.h"
#include "hipower_ring.h"
#include "hipower_slot.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


/*
 * ck_assert*() records its file and line on every pass, which costs a write
 * per call; the loops that check millions of times only call into Check
 * when something failed.
 */
#define EXPECT(_cond, ...) \
    do { \
        if (!(_cond)) { \
            ck_abort_msg(__VA_ARGS__); \
        } \
    } while (0)


/* xorshift64*: deterministic across libcs, so a failure can be replayed */
static uint64_t test_rand(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dull;
}

/* Uniform enough in [0, bound) for bounds far below 2^64 */
static uint32_t test_rand_below(uint64_t *state, uint32_t bound)
{
    return (uint32_t)(test_rand(state) % bound);
}


/*
 * Memory whose last byte is followed by a PROT_NONE page: reading even one
 * byte past it kills the test with SIGSEGV.
 */
typedef struct {
    void   *map;
    size_t map_size;
} guarded_mem_t;

static void *guarded_alloc(guarded_mem_t *mem, size_t size)
{
    size_t page_size  = (size_t)sysconf(_SC_PAGESIZE);
    size_t data_pages = (size + page_size - 1) / page_size;
    char *map;

    mem->map_size = (data_pages + 1) * page_size;
    map           = mmap(NULL, mem->map_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(map != MAP_FAILED);
    ck_assert_int_eq(mprotect(map + (data_pages * page_size), page_size,
                              PROT_NONE), 0);
    mem->map = map;
    return map + (data_pages * page_size) - size;
}

static void guarded_free(guarded_mem_t *mem)
{
    ck_assert_int_eq(munmap(mem->map, mem->map_size), 0);
}

static hipower_bitmap_word_t *guarded_bitmap(guarded_mem_t *mem,
                                             uint32_t num_slots)
{
    size_t size = HIPOWER_BITMAP_WORDS(num_slots) *
                  sizeof(hipower_bitmap_word_t);

    return memset(guarded_alloc(mem, size), 0, size);
}


/* ------------------------------------------------------------------------ */
/* bitmap                                                                   */
/* ------------------------------------------------------------------------ */

static unsigned ref_equal_run(const hipower_bitmap_word_t *a,
                              const hipower_bitmap_word_t *b, unsigned start,
                              unsigned num_slots, unsigned max)
{
    unsigned run;

    for (run = 0; run < max; ++run) {
        unsigned slot = (start + run) % num_slots;

        if (hipower_bitmap_get(a, slot) != hipower_bitmap_get(b, slot)) {
            break;
        }
    }

    return run;
}

static unsigned ref_count_equal(const hipower_bitmap_word_t *a,
                                const hipower_bitmap_word_t *b, unsigned start,
                                unsigned num_slots, unsigned count)
{
    unsigned i, equal = 0;

    for (i = 0; i < count; ++i) {
        unsigned slot = (start + i) % num_slots;

        equal += hipower_bitmap_get(a, slot) == hipower_bitmap_get(b, slot);
    }

    return equal;
}

START_TEST(test_bitmap_get_toggle)
{
    hipower_bitmap_word_t bitmap[3] = {0, 0, 0};

    hipower_bitmap_toggle(bitmap, 0);
    hipower_bitmap_toggle(bitmap, 63);
    hipower_bitmap_toggle(bitmap, 64);
    hipower_bitmap_toggle(bitmap, 129);
    ck_assert_uint_eq(bitmap[0], 0x8000000000000001ull);
    ck_assert_uint_eq(bitmap[1], 1);
    ck_assert_uint_eq(bitmap[2], 2);
    ck_assert_uint_eq(hipower_bitmap_get(bitmap, 63), 1);
    ck_assert_uint_eq(hipower_bitmap_get(bitmap, 62), 0);
    ck_assert_uint_eq(hipower_bitmap_get(bitmap, 129), 1);

    /* A second use of the slot brings its parity back */
    hipower_bitmap_toggle(bitmap, 63);
    ck_assert_uint_eq(hipower_bitmap_get(bitmap, 63), 0);
    ck_assert_uint_eq(bitmap[0], 1);
}
END_TEST

START_TEST(test_bitmap_partial_word)
{
    /* 65 slots: the second word has one real bit and 63 of padding */
    guarded_mem_t mem_a, mem_b;
    hipower_bitmap_word_t *a = guarded_bitmap(&mem_a, 65);
    hipower_bitmap_word_t *b = guarded_bitmap(&mem_b, 65);

    /* Padding that differs (a peer may write anything there) is ignored */
    b[1] = ~(hipower_bitmap_word_t)1;
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 0, 65, 65), 65);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 64, 65, 65), 65);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 60, 65, 65), 65);
    ck_assert_uint_eq(hipower_bitmap_count_equal(a, b, 0, 65, 65), 65);
    ck_assert_uint_eq(hipower_bitmap_count_equal(a, b, 64, 65, 2), 2);

    /* From 60 the run covers 60..64, wraps, and stops before slot 3 */
    hipower_bitmap_toggle(b, 3);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 60, 65, 65), 8);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 60, 65, 7), 7);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 3, 65, 65), 0);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 4, 65, 65), 64);

    /* The real bit of the last word does count */
    hipower_bitmap_toggle(b, 64);
    ck_assert_uint_eq(hipower_bitmap_equal_run(a, b, 60, 65, 65), 4);
    ck_assert_uint_eq(hipower_bitmap_count_equal(a, b, 0, 65, 65), 63);
    ck_assert_uint_eq(hipower_bitmap_count_equal(a, b, 60, 65, 10), 8);
    ck_assert_uint_eq(hipower_bitmap_count_equal(a, b, 5, 65, 0), 0);

    guarded_free(&mem_a);
    guarded_free(&mem_b);
}
END_TEST

START_TEST(test_bitmap_one_slot)
{
    hipower_bitmap_word_t a = 0, b = ~(hipower_bitmap_word_t)1;

    ck_assert_uint_eq(hipower_bitmap_equal_run(&a, &b, 0, 1, 1), 1);
    ck_assert_uint_eq(hipower_bitmap_equal_run(&a, &b, 0, 1, 0), 0);
    ck_assert_uint_eq(hipower_bitmap_count_equal(&a, &b, 0, 1, 1), 1);
    b ^= 1;
    ck_assert_uint_eq(hipower_bitmap_equal_run(&a, &b, 0, 1, 1), 0);
    ck_assert_uint_eq(hipower_bitmap_count_equal(&a, &b, 0, 1, 1), 0);
}
END_TEST

static const uint32_t bitmap_sizes[] = {1, 2, 3, 63, 64, 65, 127, 128, 129,
                                        200, 1000};

START_TEST(test_bitmap_matches_reference)
{
    uint32_t num_slots = bitmap_sizes[_i];
    unsigned num_words = HIPOWER_BITMAP_WORDS(num_slots);
    uint64_t rng       = 0x9e3779b97f4a7c15ull + num_slots;
    guarded_mem_t mem_a, mem_b;
    hipower_bitmap_word_t *a, *b;
    unsigned trial, i, num_diffs, start, max;

    a = guarded_bitmap(&mem_a, num_slots);
    b = guarded_bitmap(&mem_b, num_slots);
    for (trial = 0; trial < 3000; ++trial) {
        /* Random words, b differing from a in its last word's padding and
         * in a few random slots, so that runs are long and wrap */
        for (i = 0; i < num_words; ++i) {
            a[i] = b[i] = test_rand(&rng);
        }
        if ((num_slots % 64) != 0) {
            b[num_words - 1] ^= test_rand(&rng) << (num_slots % 64);
        }
        num_diffs = test_rand_below(&rng, 4);
        for (i = 0; i < num_diffs; ++i) {
            hipower_bitmap_toggle(b, test_rand_below(&rng, num_slots));
        }

        start = test_rand_below(&rng, num_slots);
        max   = test_rand_below(&rng, num_slots + 1);
        EXPECT(hipower_bitmap_equal_run(a, b, start, num_slots, max) ==
               ref_equal_run(a, b, start, num_slots, max),
               "equal_run n=%u start=%u max=%u: %u, expected %u", num_slots,
               start, max,
               hipower_bitmap_equal_run(a, b, start, num_slots, max),
               ref_equal_run(a, b, start, num_slots, max));

        /* Also beyond one lap: the slots are counted once per pass */
        max = test_rand_below(&rng, (2 * num_slots) + 1);
        EXPECT(hipower_bitmap_count_equal(a, b, start, num_slots, max) ==
               ref_count_equal(a, b, start, num_slots, max),
               "count_equal n=%u start=%u count=%u: %u, expected %u",
               num_slots, start, max,
               hipower_bitmap_count_equal(a, b, start, num_slots, max),
               ref_count_equal(a, b, start, num_slots, max));
    }

    guarded_free(&mem_a);
    guarded_free(&mem_b);
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Ring helpers                                                             */
/* ------------------------------------------------------------------------ */

/*
 * Where sequence numbers restart at 0, as hipower_ring.c documents it: the
 * first multiple of 2 * num_slots with the top bit set. Restated here so the
 * tests notice if it changes, since both peers must agree on it.
 */
static uint32_t test_seq_period(uint32_t num_slots)
{
    uint64_t step = 2ull * num_slots;

    return (uint32_t)((((1ull << 31) + step - 1) / step) * step);
}

static uint32_t test_next_seq(uint32_t num_slots, uint32_t seq)
{
    return (seq + 1 == test_seq_period(num_slots)) ? 0 : seq + 1;
}

/* Bits of a ring after @a seq messages, each slot toggled once per use */
static void test_set_lap_state(hipower_bitmap_word_t *bitmap,
                               uint32_t num_slots, uint32_t seq)
{
    uint32_t slot;

    memset(bitmap, 0,
           HIPOWER_BITMAP_WORDS(num_slots) * sizeof(hipower_bitmap_word_t));
    for (slot = 0; slot < num_slots; ++slot) {
        if ((((seq / num_slots) + (slot < (seq % num_slots))) & 1) != 0) {
            hipower_bitmap_toggle(bitmap, slot);
        }
    }
}

/* Bit-by-bit ready count: messages head, head + 1, ... whose slots hold the
 * parity of their own lap */
static uint32_t ref_ready_count(const hipower_rx_ring_t *ring,
                                const hipower_bitmap_word_t *peer_written,
                                uint32_t max)
{
    uint32_t count;

    for (count = 0; count < max; ++count) {
        uint32_t seq = ring->head + count;

        if (hipower_bitmap_get(peer_written, seq % ring->num_slots) !=
            (((seq / ring->num_slots) + 1) & 1)) {
            break;
        }
    }

    return count;
}


/* ------------------------------------------------------------------------ */
/* tx ring                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_tx_take_in_order)
{
    hipower_bitmap_word_t written[1] = {0};
    hipower_tx_ring_t ring;
    uint32_t seq;

    hipower_tx_ring_init(&ring, 5, written, 0);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 5);
    ck_assert(!hipower_tx_ring_wants_recycle(&ring, 5));
    for (seq = 0; seq < 5; ++seq) {
        ck_assert_uint_eq(hipower_tx_ring_take(&ring), seq);
        ck_assert_uint_eq(hipower_ring_slot(5, seq), seq);
        ck_assert_uint_eq(hipower_tx_ring_free(&ring), 4 - seq);
    }

    ck_assert_uint_eq(written[0], 0x1f);
    ck_assert(hipower_tx_ring_wants_recycle(&ring, 1));
    ck_assert(!hipower_tx_ring_wants_recycle(&ring, 0));
}
END_TEST

START_TEST(test_tx_recycle_contiguous_only)
{
    hipower_bitmap_word_t written[1] = {0}, consumed[1] = {0};
    hipower_tx_ring_t ring;

    hipower_tx_ring_init(&ring, 4, written, 0);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);
    hipower_tx_ring_take(&ring);
    hipower_tx_ring_take(&ring);
    hipower_tx_ring_take(&ring);
    hipower_tx_ring_take(&ring);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);

    /* Slot 2 released first: still behind slot 0, which is held */
    hipower_bitmap_toggle(consumed, 2);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 0);

    hipower_bitmap_toggle(consumed, 0);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 1);
    hipower_bitmap_toggle(consumed, 1);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 2);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 3);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);

    /* Message 4 reuses slot 0; the old consumed bit must not free it */
    ck_assert_uint_eq(hipower_tx_ring_take(&ring), 4);
    hipower_bitmap_toggle(consumed, 3);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 1);
    ck_assert_uint_eq(ring.tail, 4);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 3);
    hipower_bitmap_toggle(consumed, 0);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 1);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 4);
}
END_TEST

START_TEST(test_tx_recycle_wraps_ring)
{
    hipower_bitmap_word_t written[1] = {0}, consumed[1] = {0};
    hipower_tx_ring_t ring;

    hipower_tx_ring_init(&ring, 3, written, 0);
    hipower_tx_ring_take(&ring);
    hipower_tx_ring_take(&ring);
    hipower_tx_ring_take(&ring);
    hipower_bitmap_toggle(consumed, 0);
    hipower_bitmap_toggle(consumed, 1);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 2);

    /* Messages 3 and 4 in slots 0 and 1; one recycle covers 2, 0, 1 */
    ck_assert_uint_eq(hipower_tx_ring_take(&ring), 3);
    ck_assert_uint_eq(hipower_tx_ring_take(&ring), 4);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 0);
    hipower_bitmap_toggle(consumed, 2);
    hipower_bitmap_toggle(consumed, 0);
    hipower_bitmap_toggle(consumed, 1);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 3);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 3);
}
END_TEST

static const uint32_t ring_sizes[] = {1, 2, 3, 63, 64, 65, 128};
#define NUM_RING_SIZES (sizeof(ring_sizes) / sizeof(ring_sizes[0]))

/* Sequence numbers restart at 0 at the period instead of running into the
 * 2^32 wrap, where seq % num_slots would jump unless num_slots is a power
 * of two; slot order, parity and the free count must carry on across it */
START_TEST(test_tx_seq_period)
{
    uint32_t num_slots = ring_sizes[_i];
    uint32_t period    = test_seq_period(num_slots);
    uint32_t start     = period - (2 * num_slots) - 1;
    uint32_t expected  = start;
    hipower_bitmap_word_t *written, *consumed;
    guarded_mem_t mem_w, mem_c;
    hipower_tx_ring_t ring;
    uint32_t i, seq, slot, prev_slot;

    ck_assert_uint_eq(period % (2 * num_slots), 0);
    ck_assert_uint_ge(period, 1u << 31);
    ck_assert_uint_lt(period, (1u << 31) + (2 * num_slots));

    written  = guarded_bitmap(&mem_w, num_slots);
    consumed = guarded_bitmap(&mem_c, num_slots);
    hipower_tx_ring_init(&ring, num_slots, written, 0);
    ring.head = ring.tail = start;
    test_set_lap_state(written, num_slots, start);
    test_set_lap_state(consumed, num_slots, start);

    prev_slot = hipower_ring_slot(num_slots, start + num_slots - 1);
    for (i = 0; i < 6 * num_slots; ++i) {
        /* Fill the ring, so the tail lags the head across the restart */
        while (hipower_tx_ring_free(&ring) > 0) {
            seq = hipower_tx_ring_take(&ring);
            ck_assert_uint_eq(seq, expected);
            ck_assert_uint_le(ring.head, period);
            slot = hipower_ring_slot(num_slots, seq);
            ck_assert_uint_eq(slot, (prev_slot + 1) % num_slots);
            prev_slot = slot;
            expected  = test_next_seq(num_slots, expected);
        }

        /* Release the oldest message only: one slot at a time crosses */
        ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);
        hipower_bitmap_toggle(consumed, (prev_slot + 1) % num_slots);
        ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 1);
        ck_assert_uint_eq(hipower_tx_ring_free(&ring), 1);
    }

    /* 7 * num_slots - 1 messages from 2 * num_slots + 1 before the
     * restart; the bits are again those of a fresh ring after as many */
    ck_assert_uint_eq(expected, (5 * num_slots) - 2);
    ck_assert_uint_eq(ring.head, expected);
    test_set_lap_state(consumed, num_slots, expected);
    ck_assert_uint_eq(hipower_bitmap_count_equal(written, consumed, 0,
                                                 num_slots, num_slots),
                      num_slots);

    guarded_free(&mem_w);
    guarded_free(&mem_c);
}
END_TEST

/* A caller that cannot post a message gives its slot back right after the
 * take, by toggling the written bit back and decrementing the head; that
 * must hold on both sides of the restart too */
START_TEST(test_tx_take_undo)
{
    uint32_t num_slots = ring_sizes[_i];
    uint32_t period    = test_seq_period(num_slots);
    uint32_t expected  = period - 2;
    hipower_bitmap_word_t *written, *consumed;
    guarded_mem_t mem_w, mem_c;
    hipower_tx_ring_t ring;
    uint32_t i, seq, slot;

    written  = guarded_bitmap(&mem_w, num_slots);
    consumed = guarded_bitmap(&mem_c, num_slots);
    hipower_tx_ring_init(&ring, num_slots, written, 0);
    ring.head = ring.tail = expected;
    test_set_lap_state(written, num_slots, expected);
    test_set_lap_state(consumed, num_slots, expected);

    for (i = 0; i < 4; ++i) {
        seq  = hipower_tx_ring_take(&ring);
        slot = hipower_ring_slot(num_slots, seq);
        ck_assert_uint_eq(seq, expected);
        ck_assert_uint_eq(slot, (i + num_slots - 2) % num_slots);

        hipower_tx_ring_untake(&ring);
        ck_assert_uint_eq(hipower_tx_ring_free(&ring), num_slots);
        ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);

        ck_assert_uint_eq(hipower_tx_ring_take(&ring), expected);
        hipower_bitmap_toggle(consumed, slot);
        ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 1);
        ck_assert_uint_eq(hipower_tx_ring_free(&ring), num_slots);
        expected = test_next_seq(num_slots, expected);
    }

    ck_assert_uint_eq(expected, 2);
    ck_assert_uint_eq(hipower_bitmap_count_equal(written, consumed, 0,
                                                 num_slots, num_slots),
                      num_slots);
    guarded_free(&mem_w);
    guarded_free(&mem_c);
}
END_TEST

/* An endpoint not connected yet has a ring of no slots */
START_TEST(test_tx_no_slots)
{
    hipower_bitmap_word_t consumed[1] = {0};
    hipower_tx_ring_t ring;

    hipower_tx_ring_init(&ring, 0, NULL, 0);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 0);
    ck_assert(hipower_tx_ring_wants_recycle(&ring, 1));
    ck_assert_uint_eq(hipower_tx_ring_recycle(&ring, consumed, hipower_tx_ring_taken(&ring)), 0);
}
END_TEST


/* ------------------------------------------------------------------------ */
/* rx ring                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_rx_ready_parity)
{
    hipower_bitmap_word_t written[1] = {0}, consumed[1] = {0};
    hipower_rx_ring_t ring;

    hipower_rx_ring_init(&ring, 4, consumed, 0);
    ck_assert(!hipower_rx_ring_ready(&ring, written));
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 0);

    hipower_bitmap_toggle(written, 0);
    ck_assert(hipower_rx_ring_ready(&ring, written));
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 1);

    /* Slot 2 without slot 1 does not extend the batch */
    hipower_bitmap_toggle(written, 2);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 1);
    hipower_bitmap_toggle(written, 1);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 3);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 2), 2);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 0), 0);

    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 0);
    ck_assert_uint_eq(ring.head, 1);
    ck_assert_uint_eq(ring.held, 1);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 2);
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 1);
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 2);
    ck_assert_uint_eq(ring.held, 3);

    /* Releases toggle the consumed bits, in any order */
    hipower_rx_ring_release(&ring, 2);
    ck_assert_uint_eq(consumed[0], 4);
    hipower_rx_ring_release(&ring, 0);
    ck_assert_uint_eq(consumed[0], 5);
    ck_assert_uint_eq(ring.held, 1);

    /* Message 3, then message 4 in slot 0: the bit of slot 0 is 1 from
     * message 0 until message 4 sets it back to 0 */
    hipower_bitmap_toggle(written, 3);
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 3);
    ck_assert_uint_eq(ring.head, 4);
    ck_assert(!hipower_rx_ring_ready(&ring, written));
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 0);
    hipower_bitmap_toggle(written, 0);
    ck_assert(hipower_rx_ring_ready(&ring, written));
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 4), 1);
}
END_TEST

START_TEST(test_rx_ready_count_wraps_ring)
{
    hipower_bitmap_word_t written[2], consumed[2] = {0, 0};
    hipower_rx_ring_t ring;
    uint32_t seq;

    hipower_rx_ring_init(&ring, 65, consumed, 0);
    ring.head = 60;
    test_set_lap_state(written, 65, 60);
    for (seq = 60; seq < 70; ++seq) {
        hipower_bitmap_toggle(written, seq % 65);
    }

    /* 60..64 in lap 0 expect 1, then 0..4 in lap 1 expect 0 */
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 65), 10);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 7), 7);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 5), 5);
    for (seq = 60; seq < 65; ++seq) {
        ck_assert_uint_eq(hipower_rx_ring_advance(&ring), seq);
    }
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 65), 5);
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 0);
}
END_TEST

START_TEST(test_rx_ready_count_matches_reference)
{
    uint32_t num_slots = bitmap_sizes[_i];
    uint32_t period    = test_seq_period(num_slots);
    uint64_t rng       = 0xdeadbeefcafef00dull + num_slots;
    hipower_bitmap_word_t *written, *consumed;
    guarded_mem_t mem_w, mem_c;
    hipower_rx_ring_t ring;
    uint32_t trial, i, num_new, head, max;

    written  = guarded_bitmap(&mem_w, num_slots);
    consumed = guarded_bitmap(&mem_c, num_slots);
    hipower_rx_ring_init(&ring, num_slots, consumed, 0);
    for (trial = 0; trial < 3000; ++trial) {
        /* A head anywhere, near the restart included; a random number of
         * new messages written after it, and sometimes a bit flipped
         * anywhere; then random garbage in the padding */
        head = (trial % 2) ? test_rand_below(&rng, 10 * num_slots) :
                             period - 1 - test_rand_below(&rng,
                                                          3 * num_slots);
        test_set_lap_state(written, num_slots, head);
        num_new = test_rand_below(&rng, num_slots + 1);
        for (i = 0; i < num_new; ++i) {
            hipower_bitmap_toggle(written, (head + i) % num_slots);
        }
        if (test_rand_below(&rng, 2)) {
            hipower_bitmap_toggle(written, test_rand_below(&rng, num_slots));
        }
        if ((num_slots % 64) != 0) {
            written[num_slots / 64] ^= test_rand(&rng) << (num_slots % 64);
        }

        /* Beyond num_slots too: a batch never exceeds one ring */
        ring.head = head;
        max       = (trial % 8 == 0) ? UINT32_MAX :
                    test_rand_below(&rng, (2 * num_slots) + 1);
        EXPECT(hipower_rx_ring_ready_count(&ring, written, max) ==
               ref_ready_count(&ring, written, max),
               "n=%u head=%u max=%u: %u, expected %u", num_slots, head, max,
               hipower_rx_ring_ready_count(&ring, written, max),
               ref_ready_count(&ring, written, max));
        EXPECT(hipower_rx_ring_ready(&ring, written) ==
               (ref_ready_count(&ring, written, 1) == 1),
               "ready n=%u head=%u", num_slots, head);
    }

    guarded_free(&mem_w);
    guarded_free(&mem_c);
}
END_TEST

START_TEST(test_rx_advance_restarts_at_period)
{
    uint32_t num_slots = ring_sizes[_i];
    uint32_t period    = test_seq_period(num_slots);
    hipower_bitmap_word_t *written, *consumed;
    guarded_mem_t mem_w, mem_c;
    hipower_rx_ring_t ring;

    written  = guarded_bitmap(&mem_w, num_slots);
    consumed = guarded_bitmap(&mem_c, num_slots);
    hipower_rx_ring_init(&ring, num_slots, consumed, 0);
    ring.head = period - 1;
    test_set_lap_state(written, num_slots, period);
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&ring, written, 2), 1);

    /* The last message before the restart is in the last slot */
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), num_slots - 1);
    ck_assert_uint_eq(ring.head, 0);
    ck_assert(!hipower_rx_ring_ready(&ring, written));

    /* Message 0 again, in slot 0, with the parity of a fresh ring */
    hipower_bitmap_toggle(written, 0);
    ck_assert_uint_eq(hipower_bitmap_get(written, 0), 1);
    ck_assert(hipower_rx_ring_ready(&ring, written));
    ck_assert_uint_eq(hipower_rx_ring_advance(&ring), 0);
    ck_assert_uint_eq(ring.head, 1);

    guarded_free(&mem_w);
    guarded_free(&mem_c);
}
END_TEST


/*
 * A run may start at any sequence number before its period (the simulator
 * starts runs just before it, uct_hipower_seq_origin()): the bitmaps
 * hipower_ring_bitmap_at() sets are those the messages before it left, and
 * a pair of rings started there carries messages across the restart with
 * every slot coming back.
 */
START_TEST(test_ring_starts_anywhere)
{
    uint32_t num_slots = ring_sizes[_i];
    uint32_t period    = hipower_ring_seq_period(num_slots);
    uint32_t starts[]  = {0, 1, num_slots - 1, num_slots, 2 * num_slots + 1,
                          period - (2 * num_slots) - 1, period - num_slots,
                          period - 1, 0};
    hipower_bitmap_word_t *written, *consumed, *expected;
    guarded_mem_t mem_w, mem_c, mem_e;
    uint64_t rng = 0xa7a7u + num_slots;
    hipower_tx_ring_t tx;
    hipower_rx_ring_t rx;
    uint32_t i, k, seq, slot, start, restarts;

    ck_assert_uint_eq(period, test_seq_period(num_slots));
    written  = guarded_bitmap(&mem_w, num_slots);
    consumed = guarded_bitmap(&mem_c, num_slots);
    expected = guarded_bitmap(&mem_e, num_slots);
    starts[8] = test_rand_below(&rng, period);

    for (i = 0; i < sizeof(starts) / sizeof(starts[0]); ++i) {
        start = starts[i];
        /* Bits past num_slots stay 0: the guard words are checked too */
        memset(written, 0xff,
               HIPOWER_BITMAP_WORDS(num_slots) * sizeof(*written));
        hipower_ring_bitmap_at(written, num_slots, start);
        test_set_lap_state(expected, num_slots, start);
        ck_assert_msg(!memcmp(written, expected,
                              HIPOWER_BITMAP_WORDS(num_slots) *
                              sizeof(*written)),
                      "n=%u: bitmap at seq %u differs", num_slots, start);
        hipower_ring_bitmap_at(consumed, num_slots, start);

        hipower_tx_ring_init(&tx, num_slots, written, start);
        hipower_rx_ring_init(&rx, num_slots, consumed, start);
        ck_assert(!hipower_rx_ring_ready(&rx, written));

        /* Three laps of one message at a time, slots back by READs of the
         * consumed bitmap */
        restarts = 0;
        for (k = 0; k < 3 * num_slots; ++k) {
            ck_assert_uint_eq(hipower_tx_ring_free(&tx), num_slots);
            seq = hipower_tx_ring_take(&tx);
            restarts += (seq == 0) && (k > 0);
            ck_assert(hipower_rx_ring_ready(&rx, written));
            ck_assert_uint_eq(rx.head, seq);
            slot = hipower_rx_ring_advance(&rx);
            ck_assert_uint_eq(slot, hipower_ring_slot(num_slots, seq));
            ck_assert(!hipower_rx_ring_ready(&rx, written));
            hipower_rx_ring_release(&rx, slot);
            ck_assert_uint_eq(hipower_tx_ring_recycle(
                                      &tx, consumed, hipower_tx_ring_taken(&tx)),
                              1);
        }
        ck_assert_uint_eq(rx.taken, 3 * num_slots);
        ck_assert_uint_eq(hipower_tx_ring_taken(&tx), 3 * num_slots);
        /* Those that start within three laps of the period cross it */
        ck_assert_uint_eq(restarts,
                          (start != 0) && (period - start < 3 * num_slots));
    }

    guarded_free(&mem_w);
    guarded_free(&mem_c);
    guarded_free(&mem_e);
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Sender and receiver together                                             */
/* ------------------------------------------------------------------------ */

/* Acknowledgements in flight at once (frames of the reverse direction) */
#define SIM_MAX_ACKS 8

typedef enum {
    SIM_SLOT_FREE,    /* Released by the receiver */
    SIM_SLOT_WRITTEN, /* Holds a message not delivered yet */
    SIM_SLOT_HELD     /* Delivered, descriptor not released yet */
} sim_slot_state_t;

typedef struct {
    uint32_t              num_slots;
    hipower_tx_ring_t     tx;
    hipower_rx_ring_t     rx;
    hipower_bitmap_word_t *written;  /* Sender's */
    hipower_bitmap_word_t *consumed; /* Receiver's */
    hipower_bitmap_word_t *view;     /* Receiver's copy of written */
    hipower_bitmap_word_t *snapshot; /* Sender's copy of consumed */
    int                   snapshot_pending; /* A READ is posted ... */
    int                   snapshot_taken;   /* ... and has copied */
    uint32_t              taken_at_read;    /* When it was posted */
    uint32_t              acks[SIM_MAX_ACKS]; /* Acknowledgements on the way
                                                 back, oldest first */
    uint32_t              num_acks;
    uint64_t              acked_slots;      /* Freed by them */
    uint32_t              *slot_seq; /* What the "payload" says */
    sim_slot_state_t      *slot_state;
    uint32_t              *held;     /* Slots the receiver holds */
    uint32_t              num_held;
    uint32_t              next_send; /* What take() must return next */
    uint32_t              next_recv; /* What the receiver must get next */
    uint64_t              sent;
    uint64_t              delivered;
    unsigned              step;
    uint64_t              rng;
} sim_t;

static void sim_init(sim_t *sim, uint32_t num_slots, uint32_t start_seq,
                     uint64_t seed)
{
    size_t bitmap_size = HIPOWER_BITMAP_WORDS(num_slots) *
                         sizeof(hipower_bitmap_word_t);
    uint32_t slot;

    memset(sim, 0, sizeof(*sim));
    sim->num_slots  = num_slots;
    sim->written    = calloc(1, bitmap_size);
    sim->consumed   = calloc(1, bitmap_size);
    sim->view       = calloc(1, bitmap_size);
    sim->snapshot   = calloc(1, bitmap_size);
    sim->slot_seq   = calloc(num_slots, sizeof(*sim->slot_seq));
    sim->slot_state = calloc(num_slots, sizeof(*sim->slot_state));
    sim->held       = calloc(num_slots, sizeof(*sim->held));
    ck_assert(sim->written && sim->consumed && sim->view && sim->snapshot &&
              sim->slot_seq && sim->slot_state && sim->held);

    hipower_tx_ring_init(&sim->tx, num_slots, sim->written, 0);
    hipower_rx_ring_init(&sim->rx, num_slots, sim->consumed, 0);

    /* As if start_seq messages had been sent, delivered and released */
    sim->tx.head = sim->tx.tail = sim->rx.head = start_seq;
    test_set_lap_state(sim->written, num_slots, start_seq);
    memcpy(sim->consumed, sim->written, bitmap_size);
    memcpy(sim->view, sim->written, bitmap_size);
    memcpy(sim->snapshot, sim->written, bitmap_size);
    for (slot = 0; slot < num_slots; ++slot) {
        sim->slot_seq[slot]   = UINT32_MAX;
        sim->slot_state[slot] = SIM_SLOT_FREE;
    }
    sim->next_send = sim->next_recv = start_seq;
    sim->rng       = seed;
}

static void sim_cleanup(sim_t *sim)
{
    free(sim->written);
    free(sim->consumed);
    free(sim->view);
    free(sim->snapshot);
    free(sim->slot_seq);
    free(sim->slot_state);
    free(sim->held);
}

static void sim_send(sim_t *sim, uint32_t burst)
{
    uint32_t seq, slot;

    while ((burst-- > 0) && (hipower_tx_ring_free(&sim->tx) > 0)) {
        seq  = hipower_tx_ring_take(&sim->tx);
        slot = hipower_ring_slot(sim->num_slots, seq);
        if (test_rand_below(&sim->rng, 8) == 0) {
            /* Posting failed: the slot is given back, and taken again */
            hipower_bitmap_toggle(sim->tx.written, slot);
            sim->tx.head--;
            seq  = hipower_tx_ring_take(&sim->tx);
            slot = hipower_ring_slot(sim->num_slots, seq);
        }
        EXPECT(seq == sim->next_send, "n=%u step %u: took seq %u, not %u",
               sim->num_slots, sim->step, seq, sim->next_send);
        EXPECT(sim->slot_state[slot] == SIM_SLOT_FREE,
               "n=%u step %u: seq %u overwrites slot %u, which the "
               "receiver still %s", sim->num_slots, sim->step, seq, slot,
               (sim->slot_state[slot] == SIM_SLOT_HELD) ? "holds" :
                                                          "has not read");
        sim->slot_seq[slot]   = seq;
        sim->slot_state[slot] = SIM_SLOT_WRITTEN;
        sim->next_send        = test_next_seq(sim->num_slots, seq);
        ++sim->sent;
    }
}

/* The sender's bitmap reaches the receiver (push mode) */
static void sim_push(sim_t *sim)
{
    memcpy(sim->view, sim->written,
           HIPOWER_BITMAP_WORDS(sim->num_slots) *
           sizeof(hipower_bitmap_word_t));
}

/* Delivers up to @a max ready messages; returns how many were ready */
static uint32_t sim_receive(sim_t *sim, uint32_t max, uint32_t deliver)
{
    uint32_t ready = hipower_rx_ring_ready_count(&sim->rx, sim->view, max);
    uint32_t i, slot;

    EXPECT(ready == ref_ready_count(&sim->rx, sim->view, max),
           "n=%u step %u: ready_count %u, reference %u", sim->num_slots,
           sim->step, ready, ref_ready_count(&sim->rx, sim->view, max));
    EXPECT((max == 0) || (hipower_rx_ring_ready(&sim->rx, sim->view) ==
                          (ready > 0)),
           "n=%u step %u: ready() disagrees with ready_count() %u",
           sim->num_slots, sim->step, ready);

    for (i = 0; i < ready && i < deliver; ++i) {
        EXPECT(sim->rx.head == sim->next_recv,
               "n=%u step %u: rx head %u, expected %u", sim->num_slots,
               sim->step, sim->rx.head, sim->next_recv);
        slot = hipower_rx_ring_advance(&sim->rx);
        EXPECT(slot == sim->next_recv % sim->num_slots,
               "n=%u step %u: seq %u delivered from slot %u",
               sim->num_slots, sim->step, sim->next_recv, slot);
        EXPECT((sim->slot_state[slot] == SIM_SLOT_WRITTEN) &&
               (sim->slot_seq[slot] == sim->next_recv),
               "n=%u step %u: expected seq %u in slot %u, found %u (%s)",
               sim->num_slots, sim->step, sim->next_recv, slot,
               sim->slot_seq[slot],
               (sim->slot_state[slot] == SIM_SLOT_WRITTEN) ? "unread" :
                                                             "already read");
        sim->slot_state[slot]        = SIM_SLOT_HELD;
        sim->held[sim->num_held++]   = slot;
        sim->next_recv               = test_next_seq(sim->num_slots,
                                                     sim->next_recv);
        ++sim->delivered;
    }

    EXPECT(sim->rx.held == sim->num_held, "n=%u step %u: held %u, not %u",
           sim->num_slots, sim->step, sim->rx.held, sim->num_held);
    return ready;
}

static void sim_release(sim_t *sim, uint32_t index)
{
    uint32_t slot = sim->held[index];

    sim->held[index] = sim->held[--sim->num_held];
    hipower_rx_ring_release(&sim->rx, slot);
    sim->slot_state[slot] = SIM_SLOT_FREE;
}

/* The sender posts an RDMA_READ of the consumed bitmap ... */
static void sim_post_read(sim_t *sim)
{
    sim->taken_at_read    = hipower_tx_ring_taken(&sim->tx);
    sim->snapshot_pending = 1;
    sim->snapshot_taken   = 0;
}

/* ... which copies the bitmap some time later, and is stale when applied */
static void sim_read_copies(sim_t *sim)
{
    memcpy(sim->snapshot, sim->consumed,
           HIPOWER_BITMAP_WORDS(sim->num_slots) *
           sizeof(hipower_bitmap_word_t));
    sim->snapshot_taken = 1;
}

/* Posted and copied at once (the tests that place each step themselves) */
static void sim_read_consumed(sim_t *sim)
{
    sim_post_read(sim);
    sim_read_copies(sim);
}

static void sim_recycle(sim_t *sim)
{
    uint32_t free_before = hipower_tx_ring_free(&sim->tx);
    uint32_t recycled    = hipower_tx_ring_recycle(&sim->tx, sim->snapshot,
                                                   sim->taken_at_read);

    EXPECT((recycled <= sim->num_slots - free_before) &&
           (hipower_tx_ring_free(&sim->tx) == free_before + recycled),
           "n=%u step %u: recycled %u with %u free", sim->num_slots,
           sim->step, recycled, free_before);
    sim->snapshot_pending = 0;
}

/* The receiver sends a message back: its trailer carries the ack */
static void sim_ack_send(sim_t *sim)
{
    if (sim->num_acks < SIM_MAX_ACKS) {
        sim->acks[sim->num_acks++] = hipower_rx_ring_acked(&sim->rx);
    }
}

/* The sender receives the oldest of those messages */
static void sim_ack_arrive(sim_t *sim)
{
    uint32_t free_before = hipower_tx_ring_free(&sim->tx);
    uint32_t freed;

    if (sim->num_acks == 0) {
        return;
    }

    freed = hipower_tx_ring_ack(&sim->tx, sim->acks[0]);
    EXPECT(hipower_tx_ring_free(&sim->tx) == free_before + freed,
           "n=%u step %u: ack %u freed %u with %u free", sim->num_slots,
           sim->step, sim->acks[0], freed, free_before);
    sim->acked_slots += freed;
    memmove(sim->acks, sim->acks + 1, --sim->num_acks * sizeof(uint32_t));
}

static void sim_run(uint32_t num_slots, uint32_t start_seq, unsigned steps,
                    uint64_t seed)
{
    uint64_t in_flight;
    uint32_t action, max;
    sim_t sim;

    sim_init(&sim, num_slots, start_seq, seed);
    for (sim.step = 0; sim.step < steps; ++sim.step) {
        action = test_rand_below(&sim.rng, 100);
        if (action < 30) {
            sim_send(&sim, 1 + test_rand_below(&sim.rng, num_slots));
        } else if (action < 45) {
            sim_push(&sim);
        } else if (action < 65) {
            /* Sometimes a batch smaller than what is ready */
            max = 1 + test_rand_below(&sim.rng, num_slots);
            sim_receive(&sim, max, 1 + test_rand_below(&sim.rng, max));
        } else if (action < 85) {
            /* A random held descriptor: out of order, and some stay held
             * for many steps */
            if (sim.num_held > 0) {
                sim_release(&sim, test_rand_below(&sim.rng, sim.num_held));
            }
        } else if (action < 88) {
            if (!sim.snapshot_pending) {
                sim_post_read(&sim);
            } else if (!sim.snapshot_taken) {
                sim_read_copies(&sim);
            }
        } else if (action < 91) {
            if (sim.snapshot_taken) {
                sim_recycle(&sim);
            }
        } else if (action < 96) {
            sim_ack_send(&sim);
        } else {
            sim_ack_arrive(&sim);
        }

        in_flight = sim.sent - sim.delivered;
        EXPECT((hipower_tx_ring_free(&sim.tx) <= num_slots) &&
               (in_flight + sim.num_held <= num_slots),
               "n=%u step %u: free %u, in flight %llu, held %u", num_slots,
               sim.step, hipower_tx_ring_free(&sim.tx),
               (unsigned long long)in_flight, sim.num_held);
    }

    /* Random interleavings must not starve either side: with one slot, a
     * message needs five or six actions in turn, some rare (recycle 3%,
     * an acknowledgement's arrival 4%), so about 1% of the steps send */
    ck_assert_uint_ge(sim.sent, steps / 200);
    /* Both ways of recycling were exercised */
    ck_assert_uint_gt(sim.acked_slots, 0);
    ck_assert_uint_lt(sim.acked_slots, sim.sent);

    /* Drain: every message sent arrives exactly once, then nothing more */
    while (sim.num_held > 0) {
        sim_release(&sim, 0);
    }
    sim_push(&sim);
    sim_receive(&sim, num_slots, num_slots);
    ck_assert_uint_eq(sim.delivered, sim.sent);
    ck_assert_uint_eq(sim_receive(&sim, num_slots, num_slots), 0);
    while (sim.num_held > 0) {
        sim_release(&sim, 0);
    }

    /* ... and the sender gets the whole ring back, from a fresh READ or
     * from an acknowledgement sent now */
    if (seed & 1) {
        sim.num_acks = 0;
        sim_ack_send(&sim);
        sim_ack_arrive(&sim);
    } else {
        sim_read_consumed(&sim);
        sim_recycle(&sim);
    }
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), num_slots);
    ck_assert_uint_eq(sim.next_send, sim.next_recv);
    ck_assert_uint_eq(sim.rx.head, sim.next_recv);
    /* The sender's head may rest at the period until its next take */
    ck_assert((sim.tx.head == sim.rx.head) ||
              ((sim.tx.head == test_seq_period(num_slots)) &&
               (sim.rx.head == 0)));

    sim_cleanup(&sim);
}

START_TEST(test_ring_simulation)
{
    sim_run(ring_sizes[_i], 0, 1000000, 0x5eed0000u + ring_sizes[_i]);
}
END_TEST

/* Starts a little before the sequence restart, so that it happens with
 * messages in flight, descriptors held and a stale snapshot pending */
START_TEST(test_ring_simulation_seq_period)
{
    uint32_t num_slots = ring_sizes[_i];

    sim_run(num_slots, test_seq_period(num_slots) - (3 * num_slots) - 5,
            100000, 0xfeed0000u + num_slots);
}
END_TEST

/* Acknowledgements free what they cover and nothing more: not an old one,
 * not a bogus one, across the 2^32 wrap of the counts */
START_TEST(test_tx_ack)
{
    hipower_bitmap_word_t written[1] = {0};
    hipower_tx_ring_t ring;
    unsigned i;

    hipower_tx_ring_init(&ring, 8, written, 0);
    ring.recycled = UINT32_MAX - 2; /* The counts wrap during the test */
    for (i = 0; i < 6; ++i) {
        hipower_tx_ring_take(&ring);
    }
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 2);

    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, UINT32_MAX - 2), 0); /* no news */
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, UINT32_MAX - 3), 0); /* old */
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, 4), 0);   /* 7 > 6 taken */
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 2);
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, UINT32_MAX), 2);
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 4);
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, UINT32_MAX - 1), 0); /* old */
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, 3), 4);   /* all, wrapped */
    ck_assert_uint_eq(hipower_tx_ring_free(&ring), 8);
    ck_assert_uint_eq(ring.recycled, 3);
    ck_assert_uint_eq(hipower_tx_ring_ack(&ring, 4), 0);   /* none out */
    ck_assert_uint_eq(hipower_tx_ring_taken(&ring), 3);
}
END_TEST

/* The receiver acknowledges what it released in ring order: held messages
 * hold the count back, however the others were released */
START_TEST(test_rx_acked)
{
    hipower_bitmap_word_t consumed[1] = {0};
    hipower_rx_ring_t ring;
    uint32_t slots[4];
    unsigned i;

    hipower_rx_ring_init(&ring, 4, consumed, 0);
    ck_assert_uint_eq(hipower_rx_ring_acked(&ring), 0);
    for (i = 0; i < 3; ++i) {
        slots[i] = hipower_rx_ring_advance(&ring);
    }
    hipower_rx_ring_release(&ring, slots[1]);
    hipower_rx_ring_release(&ring, slots[2]);
    ck_assert_uint_eq(hipower_rx_ring_acked(&ring), 0); /* slot 0 held */
    hipower_rx_ring_release(&ring, slots[0]);
    ck_assert_uint_eq(hipower_rx_ring_acked(&ring), 3);
    slots[3] = hipower_rx_ring_advance(&ring);
    ck_assert_uint_eq(hipower_rx_ring_acked(&ring), 3); /* in the handler */
    hipower_rx_ring_release(&ring, slots[3]);
    ck_assert_uint_eq(hipower_rx_ring_acked(&ring), 4);
}
END_TEST

/*
 * A run delivered the lean way (hipower_rx_ring_consume() per message, one
 * hipower_rx_ring_advance_run() at the end) leaves the ring as one-by-one
 * advance and release do: same head, counts, acknowledgement and consumed
 * bits, across the ring's wrap. Near the period a run does not fit.
 */
START_TEST(test_rx_advance_run)
{
    uint32_t num_slots = ring_sizes[_i];
    hipower_bitmap_word_t *one_c, *run_c;
    hipower_rx_ring_t one, run;
    guarded_mem_t mem_one, mem_run;
    uint32_t n, k, slot, total = 0;

    one_c = guarded_bitmap(&mem_one, num_slots);
    run_c = guarded_bitmap(&mem_run, num_slots);
    hipower_rx_ring_init(&one, num_slots, one_c, 0);
    hipower_rx_ring_init(&run, num_slots, run_c, 0);
    for (n = 1; total < 5 * num_slots + 7; n = (n % 11) + 3) {
        ck_assert(hipower_rx_ring_run_fits(&run, n));
        slot = hipower_ring_slot(num_slots, run.head);
        for (k = 0; k < n; ++k) {
            hipower_rx_ring_release(&one, hipower_rx_ring_advance(&one));
            hipower_rx_ring_consume(&run, slot);
            slot = (slot + 1 == num_slots) ? 0 : slot + 1;
        }
        hipower_rx_ring_advance_run(&run, n);
        total += n;
        ck_assert_uint_eq(run.head, one.head);
        ck_assert_uint_eq(hipower_rx_ring_taken(&run), total);
        ck_assert_uint_eq(hipower_rx_ring_taken(&one), total);
        ck_assert_uint_eq(hipower_rx_ring_acked(&run),
                          hipower_rx_ring_acked(&one));
        ck_assert_mem_eq(run_c, one_c, HIPOWER_BITMAP_WORDS(num_slots) *
                                       sizeof(hipower_bitmap_word_t));
    }

    run.head = HIPOWER_RING_SEQ_PERIOD_BIT - 64;
    ck_assert(hipower_rx_ring_run_fits(&run, 63));
    ck_assert(!hipower_rx_ring_run_fits(&run, 64));
    guarded_free(&mem_one);
    guarded_free(&mem_run);
}
END_TEST

/*
 * The hazard of mixing both ways: a READ copies the consumed bitmap, then
 * the receiver releases and acknowledges, the sender reuses the slot, and
 * the old copy arrives. It shows the parity of two laps back, the same as
 * the new lap's written bit, so without the READ's bound it would free the
 * slot of a message the receiver has not read.
 */
START_TEST(test_ring_stale_read_after_ack)
{
    uint32_t num_slots = ring_sizes[_i];
    sim_t sim;

    sim_init(&sim, num_slots, 0, 2);
    /* A full lap, received and released */
    sim_send(&sim, num_slots);
    sim_push(&sim);
    ck_assert_uint_eq(sim_receive(&sim, num_slots, num_slots), num_slots);
    while (sim.num_held > 0) {
        sim_release(&sim, 0);
    }
    sim_read_consumed(&sim);     /* Copies lap 0's consumed bits */
    sim_recycle(&sim);
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), num_slots);

    /* Lap 1; a READ is posted and copies before the receiver is done */
    sim_send(&sim, num_slots);
    sim_read_consumed(&sim);
    sim_push(&sim);
    ck_assert_uint_eq(sim_receive(&sim, num_slots, num_slots), num_slots);
    while (sim.num_held > 0) {
        sim_release(&sim, 0);
    }
    sim_ack_send(&sim);
    sim_ack_arrive(&sim);       /* Frees lap 1 */
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), num_slots);

    /* Lap 2 fills the ring, unread; the old copy says lap 0 was consumed */
    sim_send(&sim, num_slots);
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), 0);
    sim_recycle(&sim);
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), 0);

    sim_cleanup(&sim);
}
END_TEST

/* A descriptor held for a whole lap blocks the sender at that slot, and the
 * receiver does not take the old message there for the next one */
START_TEST(test_ring_stale_lap)
{
    uint32_t num_slots = ring_sizes[_i];
    uint32_t slot, index;
    sim_t sim;

    sim_init(&sim, num_slots, 0, 1);
    sim_send(&sim, num_slots);
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), 0);
    sim_push(&sim);
    ck_assert_uint_eq(sim_receive(&sim, num_slots, num_slots), num_slots);

    /* Release everything but slot 0 (message 0) */
    for (slot = 1; slot < num_slots; ++slot) {
        for (index = 0; sim.held[index] != slot; ++index) {
        }
        sim_release(&sim, index);
    }
    ck_assert_uint_eq(sim.num_held, 1);
    ck_assert_uint_eq(sim.held[0], 0);

    sim_read_consumed(&sim);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&sim.tx, sim.snapshot, sim.taken_at_read), 0);
    ck_assert_uint_eq(hipower_tx_ring_free(&sim.tx), 0);
    ck_assert(hipower_tx_ring_wants_recycle(&sim.tx, 1));

    /* Slot 0 still holds message 0; message num_slots is not there */
    ck_assert(!hipower_rx_ring_ready(&sim.rx, sim.view));
    ck_assert_uint_eq(hipower_rx_ring_ready_count(&sim.rx, sim.view,
                                                  num_slots), 0);
    sim_push(&sim);
    ck_assert(!hipower_rx_ring_ready(&sim.rx, sim.view));

    /* Once released, the sender gets the whole ring and slot 0 first */
    sim_release(&sim, 0);
    sim_read_consumed(&sim);
    ck_assert_uint_eq(hipower_tx_ring_recycle(&sim.tx, sim.snapshot, sim.taken_at_read),
                      num_slots);
    sim_send(&sim, 1);
    ck_assert_uint_eq(sim.slot_seq[0], num_slots);
    ck_assert(!hipower_rx_ring_ready(&sim.rx, sim.view));
    sim_push(&sim);
    ck_assert_uint_eq(sim_receive(&sim, num_slots, num_slots), 1);
    ck_assert_uint_eq(sim.delivered, num_slots + 1);

    sim_cleanup(&sim);
}
END_TEST


/* ------------------------------------------------------------------------ */
/* arena                                                                    */
/* ------------------------------------------------------------------------ */

static void check_arena_invariants(const hipower_arena_t *arena)
{
    uint32_t i, longest = 0;

    EXPECT(arena->num_free <= arena->max_runs, "%u runs, room for %u",
           arena->num_free, arena->max_runs);
    for (i = 0; i < arena->num_free; ++i) {
        const hipower_arena_run_t *run = &arena->free_runs[i];

        longest = (run->count > longest) ? run->count : longest;

        EXPECT((run->count > 0) && (run->first < arena->total) &&
               (run->count <= arena->total - run->first),
               "run %u [%u, +%u) outside the arena of %u", i, run->first,
               run->count, arena->total);
        /* Strictly below: sorted, and adjacent runs would be one */
        EXPECT((i == 0) || (arena->free_runs[i - 1].first +
                            arena->free_runs[i - 1].count < run->first),
               "run %u at %u not after run %u [%u, +%u) with a gap", i,
               run->first, i - 1, arena->free_runs[i - 1].first,
               arena->free_runs[i - 1].count);
    }

    /* A longest run it knows is the longest there is: an allocation that
     * trusts it fails only when the scan would have */
    EXPECT((arena->longest == HIPOWER_ARENA_LONGEST_UNKNOWN) ||
           (arena->longest == longest), "longest run known as %u, it is %u",
           arena->longest, longest);
}

static void alloc_expect(hipower_arena_t *arena, uint32_t want, uint32_t min,
                         uint32_t first, uint32_t count)
{
    uint32_t first_out, count_out;

    ck_assert_int_eq(hipower_arena_alloc(arena, want, min, &first_out,
                                         &count_out), UCS_OK);
    ck_assert_uint_eq(first_out, first);
    ck_assert_uint_eq(count_out, count);
    check_arena_invariants(arena);
}

static void alloc_expect_fail(hipower_arena_t *arena, uint32_t want,
                              uint32_t min)
{
    uint32_t first, count;

    ck_assert_int_eq(hipower_arena_alloc(arena, want, min, &first, &count),
                     UCS_ERR_NO_MEMORY);
    check_arena_invariants(arena);
}

START_TEST(test_arena_budget_shrinks)
{
    hipower_arena_t arena;

    ck_assert_int_eq(hipower_arena_init(&arena, 100), UCS_OK);
    ck_assert_uint_eq(hipower_arena_free_slots(&arena), 100);
    alloc_expect(&arena, 40, 10, 0, 40);
    alloc_expect(&arena, 40, 10, 40, 40);
    alloc_expect(&arena, 40, 10, 80, 20);
    ck_assert_uint_eq(hipower_arena_free_slots(&arena), 0);
    alloc_expect_fail(&arena, 40, 10);
    alloc_expect_fail(&arena, 1, 1);

    /* Exactly min is enough, one short is not */
    hipower_arena_free(&arena, 40, 40);
    alloc_expect_fail(&arena, 50, 41);
    alloc_expect(&arena, 50, 40, 40, 40);
    hipower_arena_cleanup(&arena);
    ck_assert_ptr_null(arena.free_runs);
}
END_TEST

START_TEST(test_arena_longest_run_first)
{
    hipower_arena_t arena;

    ck_assert_int_eq(hipower_arena_init(&arena, 100), UCS_OK);
    alloc_expect(&arena, 100, 100, 0, 100);

    /* Free runs [10, +5), [30, +10), [60, +10), [90, +10) */
    hipower_arena_free(&arena, 10, 5);
    hipower_arena_free(&arena, 60, 10);
    hipower_arena_free(&arena, 30, 10);
    hipower_arena_free(&arena, 90, 10);
    ck_assert_uint_eq(arena.num_free, 4);
    ck_assert_uint_eq(hipower_arena_free_slots(&arena), 35);

    /* The longest, not the first that fits, and the lowest of equals */
    alloc_expect(&arena, 3, 1, 30, 3);
    alloc_expect(&arena, 20, 1, 60, 10);
    alloc_expect(&arena, 20, 8, 90, 10);
    alloc_expect_fail(&arena, 20, 8);
    alloc_expect(&arena, 20, 7, 33, 7);
    alloc_expect(&arena, 20, 1, 10, 5);
    ck_assert_uint_eq(arena.num_free, 0);
    hipower_arena_cleanup(&arena);
}
END_TEST

START_TEST(test_arena_coalesces)
{
    hipower_arena_t arena;
    uint32_t i;

    ck_assert_int_eq(hipower_arena_init(&arena, 100), UCS_OK);
    for (i = 0; i < 10; ++i) {
        alloc_expect(&arena, 10, 10, i * 10, 10);
    }

    /* Every other run: five separate runs */
    for (i = 0; i < 10; i += 2) {
        hipower_arena_free(&arena, i * 10, 10);
        check_arena_invariants(&arena);
    }
    ck_assert_uint_eq(arena.num_free, 5);
    alloc_expect_fail(&arena, 20, 11);

    /* Joins both neighbours: 3 runs are left */
    hipower_arena_free(&arena, 10, 10);
    hipower_arena_free(&arena, 50, 10);
    check_arena_invariants(&arena);
    ck_assert_uint_eq(arena.num_free, 3);
    alloc_expect(&arena, 40, 11, 0, 30);
    hipower_arena_free(&arena, 0, 30);

    /* Free: [0, +30), [40, +30), [80, +10). Joins the run below only */
    hipower_arena_free(&arena, 30, 5);
    check_arena_invariants(&arena);
    ck_assert_uint_eq(arena.num_free, 3);
    ck_assert_uint_eq(arena.free_runs[0].first, 0);
    ck_assert_uint_eq(arena.free_runs[0].count, 35);

    /* Joins the run above only */
    hipower_arena_free(&arena, 75, 5);
    check_arena_invariants(&arena);
    ck_assert_uint_eq(arena.num_free, 3);
    ck_assert_uint_eq(arena.free_runs[2].first, 75);
    ck_assert_uint_eq(arena.free_runs[2].count, 15);

    /* Fills the gaps: both sides each time */
    hipower_arena_free(&arena, 70, 5);
    ck_assert_uint_eq(arena.num_free, 2);
    hipower_arena_free(&arena, 35, 5);
    ck_assert_uint_eq(arena.num_free, 1);
    hipower_arena_free(&arena, 90, 10);
    check_arena_invariants(&arena);
    ck_assert_uint_eq(arena.num_free, 1);
    ck_assert_uint_eq(hipower_arena_free_slots(&arena), 100);
    alloc_expect(&arena, 100, 100, 0, 100);
    hipower_arena_cleanup(&arena);
}
END_TEST

/* The most runs there can be: every other slot free, in an odd arena */
START_TEST(test_arena_most_fragmented)
{
    const uint32_t total = 101;
    hipower_arena_t arena;
    uint32_t i;

    ck_assert_int_eq(hipower_arena_init(&arena, total), UCS_OK);
    for (i = 0; i < total; ++i) {
        alloc_expect(&arena, 1, 1, i, 1);
    }
    for (i = 0; i < total; i += 2) {
        hipower_arena_free(&arena, i, 1);
    }
    ck_assert_uint_eq(arena.num_free, (total + 1) / 2);
    check_arena_invariants(&arena);
    for (i = 1; i < total; i += 2) {
        hipower_arena_free(&arena, i, 1);
    }
    ck_assert_uint_eq(arena.num_free, 1);
    alloc_expect(&arena, total, total, 0, total);
    hipower_arena_cleanup(&arena);

    /* An empty arena has nothing to give */
    ck_assert_int_eq(hipower_arena_init(&arena, 0), UCS_OK);
    ck_assert_uint_eq(hipower_arena_free_slots(&arena), 0);
    alloc_expect_fail(&arena, 1, 1);
    hipower_arena_cleanup(&arena);
}
END_TEST

/* The free runs are exactly the maximal runs of unused slots of the model */
static void check_arena_matches(const hipower_arena_t *arena,
                                const unsigned char *used, unsigned op)
{
    uint32_t slot = 0, run = 0, first;

    check_arena_invariants(arena);
    while (slot < arena->total) {
        if (used[slot]) {
            ++slot;
            continue;
        }

        first = slot;
        while ((slot < arena->total) && !used[slot]) {
            ++slot;
        }
        EXPECT((run < arena->num_free) &&
               (arena->free_runs[run].first == first) &&
               (arena->free_runs[run].count == slot - first),
               "op %u: free run %u should be [%u, +%u)", op, run, first,
               slot - first);
        ++run;
    }

    EXPECT(run == arena->num_free, "op %u: %u free runs, not %u", op,
           arena->num_free, run);
}

START_TEST(test_arena_matches_model)
{
    const uint32_t total = 300;
    unsigned char used[300];
    hipower_arena_run_t taken[300];
    uint32_t num_taken = 0, free_slots = total;
    uint32_t longest, longest_first, run_first, slot;
    uint32_t want, min, first, count, index, expected_count;
    uint64_t rng = 0xa2e4a2e4a2e4ull;
    hipower_arena_t arena;
    ucs_status_t status;
    unsigned op;

    memset(used, 0, sizeof(used));
    ck_assert_int_eq(hipower_arena_init(&arena, total), UCS_OK);
    for (op = 0; op < 100000; ++op) {
        if ((num_taken > 0) && (test_rand_below(&rng, 2) == 0)) {
            index = test_rand_below(&rng, num_taken);
            hipower_arena_free(&arena, taken[index].first,
                               taken[index].count);
            memset(&used[taken[index].first], 0, taken[index].count);
            free_slots   += taken[index].count;
            taken[index]  = taken[--num_taken];
        } else {
            want = 1 + test_rand_below(&rng, 60);
            min  = 1 + test_rand_below(&rng, want);

            /* The model: the lowest of the longest unused runs */
            longest = longest_first = 0;
            for (slot = 0; slot < total;) {
                if (used[slot]) {
                    ++slot;
                    continue;
                }
                for (run_first = slot; (slot < total) && !used[slot];
                     ++slot) {
                }
                if (slot - run_first > longest) {
                    longest       = slot - run_first;
                    longest_first = run_first;
                }
            }
            expected_count = (longest < want) ? longest : want;

            status = hipower_arena_alloc(&arena, want, min, &first, &count);
            if (expected_count < min) {
                EXPECT(status == UCS_ERR_NO_MEMORY,
                       "op %u: want %u min %u got %u slots, longest free "
                       "run is %u", op, want, min, count, longest);
            } else {
                EXPECT((status == UCS_OK) && (first == longest_first) &&
                       (count == expected_count),
                       "op %u: want %u min %u: status %d [%u, +%u), "
                       "expected [%u, +%u)", op, want, min, status, first,
                       count, longest_first, expected_count);
                memset(&used[first], 1, count);
                taken[num_taken].first   = first;
                taken[num_taken++].count = count;
                free_slots              -= count;
            }
        }

        EXPECT(hipower_arena_free_slots(&arena) == free_slots,
               "op %u: %u free slots, expected %u", op,
               hipower_arena_free_slots(&arena), free_slots);
        check_arena_matches(&arena, used, op);
    }

    hipower_arena_cleanup(&arena);
}
END_TEST


Suite *hipower_protocol_suite(void)
{
    Suite *suite = suite_create("protocol");
    TCase *tcase;

    tcase = tcase_create("bitmap");
    tcase_add_test(tcase, test_bitmap_get_toggle);
    tcase_add_test(tcase, test_bitmap_partial_word);
    tcase_add_test(tcase, test_bitmap_one_slot);
    tcase_add_loop_test(tcase, test_bitmap_matches_reference, 0,
                        sizeof(bitmap_sizes) / sizeof(bitmap_sizes[0]));
    suite_add_tcase(suite, tcase);

    tcase = tcase_create("tx_ring");
    tcase_add_test(tcase, test_tx_take_in_order);
    tcase_add_test(tcase, test_tx_recycle_contiguous_only);
    tcase_add_test(tcase, test_tx_recycle_wraps_ring);
    tcase_add_loop_test(tcase, test_tx_seq_period, 0, NUM_RING_SIZES);
    tcase_add_loop_test(tcase, test_tx_take_undo, 0, NUM_RING_SIZES);
    tcase_add_loop_test(tcase, test_ring_starts_anywhere, 0, NUM_RING_SIZES);
    tcase_add_test(tcase, test_tx_no_slots);
    tcase_add_test(tcase, test_tx_ack);
    tcase_add_test(tcase, test_rx_acked);
    tcase_add_loop_test(tcase, test_rx_advance_run, 0, NUM_RING_SIZES);
    suite_add_tcase(suite, tcase);

    tcase = tcase_create("rx_ring");
    tcase_add_test(tcase, test_rx_ready_parity);
    tcase_add_test(tcase, test_rx_ready_count_wraps_ring);
    tcase_add_loop_test(tcase, test_rx_ready_count_matches_reference, 0,
                        sizeof(bitmap_sizes) / sizeof(bitmap_sizes[0]));
    tcase_add_loop_test(tcase, test_rx_advance_restarts_at_period, 0,
                        NUM_RING_SIZES);
    suite_add_tcase(suite, tcase);

    /* Sender and receiver rings together; slow under valgrind */
    tcase = tcase_create("ring_simulation");
    tcase_set_timeout(tcase, 300);
    tcase_add_loop_test(tcase, test_ring_simulation, 0, NUM_RING_SIZES);
    tcase_add_loop_test(tcase, test_ring_simulation_seq_period, 0,
                        NUM_RING_SIZES);
    tcase_add_loop_test(tcase, test_ring_stale_lap, 0, NUM_RING_SIZES);
    tcase_add_loop_test(tcase, test_ring_stale_read_after_ack, 0,
                        NUM_RING_SIZES);
    suite_add_tcase(suite, tcase);


    tcase = tcase_create("arena");
    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test_arena_budget_shrinks);
    tcase_add_test(tcase, test_arena_longest_run_first);
    tcase_add_test(tcase, test_arena_coalesces);
    tcase_add_test(tcase, test_arena_most_fragmented);
    tcase_add_test(tcase, test_arena_matches_model);
    suite_add_tcase(suite, tcase);

    return suite;
}
