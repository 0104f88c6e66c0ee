/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Bundle frames (hipower_bundle, issue 26), without a device: what a
 * sender packs, a receiver walks back message by message, in order, with
 * its bytes; a bundle fills a slot exactly and refuses what would not
 * fit; and a frame a peer wrote with lying lengths, ids or headers is
 * refused at the first bad record, never read beyond its length (the
 * frame sits at the end of a guard page). Filled slots (hipower_fill.h):
 * batches stacked down from the trailer are walked back in the order they
 * were written, whether the receiver looks after each batch or once at the
 * end, and a slot whose footers or length lie is refused without a read
 * outside the length its trailer gives.
 */
#include "hipower_bundle.h"
#include "hipower_fill.h"
#include "hipower_test.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NUM_AM_IDS  32


static uint64_t bundle_rand(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

static void fill(uint8_t *dst, uint32_t length, uint32_t tag)
{
    uint32_t i;

    for (i = 0; i < length; ++i) {
        dst[i] = (uint8_t)(tag * 131 + i * 7);
    }
}

static int same(const uint8_t *data, uint32_t length, uint32_t tag)
{
    uint32_t i;

    for (i = 0; i < length; ++i) {
        if (data[i] != (uint8_t)(tag * 131 + i * 7)) {
            return 0;
        }
    }
    return 1;
}

/* Random messages packed until full, then walked back: every one, in
 * order, its id, length and bytes; the frame's length is the sum of the
 * records' sizes */
START_TEST(test_bundle_round_trip)
{
    static uint64_t frame[1024];
    uint32_t lengths[1024], capacity, length, i, n;
    uint8_t ids[1024], am_id;
    uint64_t rng = 0xb0d1e + _i, sum;
    hipower_bundle_iter_t iter;
    hipower_bundle_t bundle;
    const void *data;
    void *dst;

    capacity = 64 + (uint32_t)bundle_rand(&rng) % (sizeof(frame) - 64);
    hipower_bundle_init(&bundle, frame, capacity);
    for (n = 0, sum = 0; ; ++n) {
        length = (uint32_t)bundle_rand(&rng) % ((_i % 2) ? 600 : 40);
        if (!hipower_bundle_fits(&bundle, length)) {
            ck_assert_uint_gt(sum + hipower_bundle_record_size(length),
                              capacity);
            break;
        }
        lengths[n] = length;
        ids[n]     = (uint8_t)(bundle_rand(&rng) % NUM_AM_IDS);
        dst        = hipower_bundle_append(&bundle, ids[n], length);
        ck_assert_uint_eq((uintptr_t)dst % 8, 0);
        fill(dst, length, n);
        sum       += hipower_bundle_record_size(length);
    }
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(bundle.count, n);
    ck_assert_uint_eq(bundle.length, sum);
    ck_assert_uint_le(bundle.length, capacity);

    hipower_bundle_iter_init(&iter, frame, bundle.length);
    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(hipower_bundle_next(&iter, NUM_AM_IDS, &am_id, &data,
                                             &length), HIPOWER_BUNDLE_MSG);
        ck_assert_uint_eq(am_id, ids[i]);
        ck_assert_uint_eq(length, lengths[i]);
        ck_assert_msg(same(data, length, i), "message %u of %u corrupt", i,
                      n);
    }
    ck_assert_int_eq(hipower_bundle_next(&iter, NUM_AM_IDS, &am_id, &data,
                                         &length), HIPOWER_BUNDLE_END);
}
END_TEST

/* A bundle that fills its slot exactly, then refuses one byte more; the
 * pad after a message is zeroed (nothing stale of the sender's leaves) */
START_TEST(test_bundle_fills_exactly)
{
    static uint64_t frame[64];
    hipower_bundle_t bundle;
    uint8_t *dst;

    memset(frame, 0xee, sizeof(frame));
    hipower_bundle_init(&bundle, frame, 64);
    ck_assert(hipower_bundle_fits(&bundle, 21));   /* 8 + 24 */
    dst = hipower_bundle_append(&bundle, 1, 21);
    ck_assert_uint_eq(dst[21], 0);
    ck_assert_uint_eq(dst[23], 0);
    ck_assert(!hipower_bundle_fits(&bundle, 25));  /* 8 + 32 > 32 */
    ck_assert(hipower_bundle_fits(&bundle, 24));   /* 8 + 24 = 32 */
    hipower_bundle_append(&bundle, 2, 24);
    ck_assert_uint_eq(bundle.length, 64);
    ck_assert(!hipower_bundle_fits(&bundle, 0));   /* A header is 8 */
    /* A length near 2^32 does not wrap into "fits" */
    hipower_bundle_init(&bundle, frame, 64);
    ck_assert(!hipower_bundle_fits(&bundle, UINT32_MAX));
    ck_assert(!hipower_bundle_fits(&bundle, UINT32_MAX - 7));
}
END_TEST

/* @a length bytes next to a page nobody may read: after it (@a below, a
 * filled slot's lowest byte at their start), else before it (a frame at
 * the very end of readable memory): reading beyond them faults */
static uint8_t *guarded(void **map_p, size_t *map_size_p, uint32_t length,
                        int below)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = ((length + page - 1) / page + 1) * page;
    uint8_t *map;

    map = mmap(NULL, size, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(map != MAP_FAILED);
    ck_assert_int_eq(mprotect(below ? map : map + size - page, page,
                              PROT_NONE), 0);
    *map_p      = map;
    *map_size_p = size;
    return below ? map + page : map + size - page - length;
}

static uint8_t *guarded_frame(void **map_p, size_t *map_size_p,
                              uint32_t length)
{
    return guarded(map_p, map_size_p, length, 0);
}

static hipower_bundle_status_t walk(const uint8_t *frame, uint32_t length,
                                    unsigned *count_p)
{
    hipower_bundle_iter_t iter;
    hipower_bundle_status_t status;
    const void *data;
    uint32_t msg_length;
    uint8_t am_id;

    *count_p = 0;
    hipower_bundle_iter_init(&iter, frame, length);
    while ((status = hipower_bundle_next(&iter, NUM_AM_IDS, &am_id, &data,
                                         &msg_length)) ==
           HIPOWER_BUNDLE_MSG) {
        /* Every byte handed out is inside the frame */
        ck_assert((const uint8_t*)data >= frame);
        ck_assert((const uint8_t*)data + msg_length <= frame + length);
        ++*count_p;
    }
    return status;
}

static void put_header(uint8_t *at, uint64_t header)
{
    memcpy(at, &header, sizeof(header));
}

/* A peer's lies, each refused at the record that tells it, with what was
 * before it intact */
START_TEST(test_bundle_hostile_frames)
{
    size_t map_size;
    unsigned count;
    uint8_t *frame;
    void *map;

    frame = guarded_frame(&map, &map_size, 64);

    /* Honest: two records of 24 bytes of data */
    memset(frame, 0, 64);
    put_header(frame, 24 | (3ull << 32));
    put_header(frame + 32, 24 | (4ull << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_END);
    ck_assert_uint_eq(count, 2);

    /* The second record's length leaves the frame, by one byte and by
     * 2^32 - 1 (which must not wrap) */
    put_header(frame + 32, 25 | (4ull << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_LEN);
    ck_assert_uint_eq(count, 1);
    put_header(frame + 32, 0xffffffffull | (4ull << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_LEN);
    put_header(frame + 32, 0xfffffff9ull | (4ull << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_LEN);

    /* Ids: out of range, a bundle in a bundle */
    put_header(frame + 32, 24 | ((uint64_t)NUM_AM_IDS << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_ID);
    put_header(frame + 32, 24 | ((uint64_t)HIPOWER_SLOT_AM_BUNDLE << 32));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_ID);

    /* Reserved bits set */
    put_header(frame + 32, 24 | (4ull << 32) | (1ull << 40));
    ck_assert_int_eq(walk(frame, 64, &count), HIPOWER_BUNDLE_BAD_HDR);

    /* A frame that ends inside a header: 28 bytes, a record of 24 and 4
     * bytes of the next header */
    put_header(frame, 16 | (3ull << 32));       /* 8 + 16 = 24 */
    ck_assert_int_eq(walk(frame, 28, &count), HIPOWER_BUNDLE_BAD_HDR);
    ck_assert_uint_eq(count, 1);

    /* No record at all */
    ck_assert_int_eq(walk(frame, 0, &count), HIPOWER_BUNDLE_EMPTY);

    ck_assert_int_eq(munmap(map, map_size), 0);
}
END_TEST

/* Random bytes as frames: whatever the walk returns stays inside the
 * frame (the guard page would fault), and it always ends */
START_TEST(test_bundle_random_frames)
{
    uint64_t rng = 0x5eedb00d;
    size_t map_size;
    unsigned count, trial;
    uint32_t length, i;
    uint8_t *frame;
    void *map;

    for (trial = 0; trial < 20000; ++trial) {
        length = 8 * (1 + (uint32_t)bundle_rand(&rng) % 64);
        frame  = guarded_frame(&map, &map_size, length);
        for (i = 0; i < length; i += 8) {
            /* Mostly plausible headers: small lengths, small ids */
            put_header(frame + i, (bundle_rand(&rng) % 4) ?
                                  ((bundle_rand(&rng) % 64) |
                                   ((bundle_rand(&rng) % 40) << 32)) :
                                  ((bundle_rand(&rng) << 32) ^
                                   bundle_rand(&rng)));
        }
        (void)walk(frame, length, &count);
        ck_assert_uint_le(count, length / 8);
        ck_assert_int_eq(munmap(map, map_size), 0);
    }
}
END_TEST

/* What a receiver got from a filled slot */
typedef struct {
    uint32_t done;      /* Bytes walked, from the top down */
    unsigned batches;   /* Batches walked */
    unsigned count;     /* Messages */
    uint32_t lengths[2048];
    uint8_t  ids[2048];
    const uint8_t *data[2048];
} fill_rx_t;

/* Walks the batches the trailer's @a count counts beyond rx->batches in
 * a slot of @a length bytes of payload, as the receive path does; every
 * byte handed out lies in [top - length, top) */
static hipower_fill_status_t fill_walk(const uint8_t *top, uint32_t count,
                                       uint32_t length, fill_rx_t *rx)
{
    const uint8_t *records;
    uint32_t records_length, size, msg_length;
    hipower_fill_status_t status;
    hipower_bundle_iter_t iter;
    const void *data;
    uint8_t am_id;

    while ((status = hipower_fill_next(top, rx->done, rx->batches, count,
                                       length, &records, &records_length,
                                       &size)) == HIPOWER_FILL_BATCH) {
        ck_assert(records >= top - length);
        ck_assert(records + records_length + HIPOWER_FILL_FOOTER_SIZE ==
                  top - rx->done);
        hipower_bundle_iter_init(&iter, records, records_length);
        while (hipower_bundle_next(&iter, NUM_AM_IDS, &am_id, &data,
                                   &msg_length) == HIPOWER_BUNDLE_MSG) {
            ck_assert((const uint8_t*)data >= top - length);
            ck_assert((const uint8_t*)data + msg_length <= top);
            ck_assert_uint_lt(rx->count, 2048);
            rx->ids[rx->count]     = am_id;
            rx->lengths[rx->count] = msg_length;
            rx->data[rx->count]    = data;
            ++rx->count;
        }
        rx->done += size;
        ++rx->batches;
    }
    return status;
}

/*
 * A sender's batches of random messages go into one slot, each below the
 * one before, until the next would not fit the slot's payload; a receiver
 * that walks after every batch and one that walks once at the end both get
 * every message in the order sent, with its id, length and bytes
 */
START_TEST(test_fill_round_trip)
{
    enum { MAX_PAYLOAD = 8176 };
    static uint64_t slot[(MAX_PAYLOAD + 16) / 8], scratch[MAX_PAYLOAD / 8];
    static fill_rx_t each, once;
    uint32_t lengths[2048], used = 0, size, length, i, n = 0;
    uint64_t rng = 0xf111 + _i;
    uint8_t *top = (uint8_t*)slot + MAX_PAYLOAD;
    uint8_t ids[2048];
    hipower_bundle_t bundle;
    unsigned batches = 0, in_batch, want;

    memset(slot, 0xee, sizeof(slot)); /* A previous lap's bytes */
    memset(&each, 0, sizeof(each));
    memset(&once, 0, sizeof(once));
    for (;;) {
        /* A bundle of 2 to 20 messages of 0 to 200 bytes (_i 0: 8 B) */
        hipower_bundle_init(&bundle, scratch, sizeof(scratch));
        want = 2 + (unsigned)(bundle_rand(&rng) % 19);
        for (in_batch = 0; in_batch < want; ++in_batch) {
            length = (_i == 0) ? 8 : (uint32_t)(bundle_rand(&rng) % 201);
            if (!hipower_bundle_fits(&bundle, length) || (n == 2048)) {
                break;
            }
            ids[n]     = (uint8_t)(bundle_rand(&rng) % NUM_AM_IDS);
            lengths[n] = length;
            fill(hipower_bundle_append(&bundle, ids[n], length), length, n);
            ++n;
        }
        size = bundle.length + HIPOWER_FILL_FOOTER_SIZE;
        if (!hipower_fill_fits(used, size, MAX_PAYLOAD)) {
            n -= in_batch; /* Would open the next slot: not sent here */
            break;
        }
        ck_assert_uint_eq(hipower_fill_footer_store(scratch, bundle.length),
                          size);
        /* The batch lands below the ones before, then the trailer counts
         * it */
        memcpy(top - used - size, scratch, size);
        used += size;
        ++batches;
        ck_assert_int_eq(fill_walk(top, batches, MAX_PAYLOAD, &each),
                         HIPOWER_FILL_END);
        ck_assert_uint_eq(each.done, used);
    }

    ck_assert_int_eq(fill_walk(top, batches, MAX_PAYLOAD, &once),
                     HIPOWER_FILL_END);
    ck_assert_uint_ge(batches, 2);
    ck_assert_uint_eq(each.batches, batches);
    ck_assert_uint_eq(once.batches, batches);
    ck_assert_uint_eq(each.count, n);
    ck_assert_uint_eq(once.count, n);
    for (i = 0; i < n; ++i) {
        ck_assert_uint_eq(each.ids[i], ids[i]);
        ck_assert_uint_eq(each.lengths[i], lengths[i]);
        ck_assert(same(each.data[i], lengths[i], i));
        ck_assert(once.data[i] == each.data[i]);
    }
    /* Nothing more: the walk stays at the end */
    ck_assert_int_eq(fill_walk(top, batches, MAX_PAYLOAD, &once),
                     HIPOWER_FILL_END);
    ck_assert_uint_eq(once.count, n);
    if (_i == 0) {
        /* 8-byte messages: 16 bytes of the slot each, and the footers */
        ck_assert_uint_le(used / n, 16 + (HIPOWER_FILL_FOOTER_SIZE + 1));
    }
}
END_TEST

static void put_footer(uint8_t *top, uint32_t done, uint64_t footer)
{
    memcpy(top - done - HIPOWER_FILL_FOOTER_SIZE, &footer, sizeof(footer));
}

/* A peer's lies about batches, each refused where it is told, with the
 * batches before it delivered and nothing read below the slot's payload
 * (the slot's lowest byte follows a guard page) */
START_TEST(test_fill_hostile_slots)
{
    const uint64_t tag = (uint64_t)HIPOWER_SLOT_AM_FILL << 32;
    static fill_rx_t rx;
    size_t map_size;
    uint8_t *base, *top;
    void *map;

    /* Two honest batches of one 8-byte message each (24 bytes), in a slot
     * of 48 bytes of payload */
    base = guarded(&map, &map_size, 48, 1);
    top  = base + 48;
    memset(base, 0, 48);
    put_header(top - 24, 8 | (3ull << 32));
    put_footer(top, 0, 24 | tag);
    put_header(top - 48, 8 | (4ull << 32));
    put_footer(top, 24, 24 | tag);
    memset(&rx, 0, sizeof(rx));
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_END);
    ck_assert_uint_eq(rx.count, 2);
    ck_assert_uint_eq(rx.ids[0], 3);
    ck_assert_uint_eq(rx.ids[1], 4);

    /* The second footer: no tag, reserved bits, a size past the slot (by
     * 8, and near 2^32), not a multiple of 8, below one record */
    put_footer(top, 24, 24);
    memset(&rx, 0, sizeof(rx));
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_FOOTER);
    ck_assert_uint_eq(rx.count, 1);
    put_footer(top, 24, 24 | tag | (1ull << 40));
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_FOOTER);
    put_footer(top, 24, 32 | tag);
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_SIZE);
    put_footer(top, 24, 0xfffffff8ull | tag);
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_SIZE);
    put_footer(top, 24, 20 | tag);
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_SIZE);
    put_footer(top, 24, 8 | tag);
    ck_assert_int_eq(fill_walk(top, 2, 48, &rx), HIPOWER_FILL_BAD_SIZE);
    ck_assert_uint_eq(rx.done, 24);
    ck_assert_uint_eq(rx.batches, 1);

    /* A count past what the slot holds (a third batch where less than one
     * is left), and one that went below what was walked (an older write
     * placed again: not yet, nothing walked) */
    put_footer(top, 24, 24 | tag);
    ck_assert_int_eq(fill_walk(top, 3, 48, &rx), HIPOWER_FILL_BAD_SIZE);
    ck_assert_uint_eq(rx.count, 2);
    ck_assert_uint_eq(rx.done, 48);
    ck_assert_int_eq(fill_walk(top, 1, 48, &rx), HIPOWER_FILL_BEHIND);
    ck_assert_uint_eq(rx.count, 2);

    /* No batch at all */
    memset(&rx, 0, sizeof(rx));
    ck_assert_int_eq(fill_walk(top, 0, 48, &rx), HIPOWER_FILL_EMPTY);

    ck_assert_int_eq(munmap(map, map_size), 0);
}
END_TEST

/* Random bytes as filled slots, walked as a trailer counts more batches in
 * random steps: whatever is returned lies inside the slot's payload (a
 * read below it faults on the guard page), and every walk ends */
START_TEST(test_fill_random_slots)
{
    uint64_t rng = 0xf177ed;
    static fill_rx_t rx;
    uint32_t length, count, i;
    unsigned trial;
    size_t map_size;
    uint8_t *base;
    void *map;

    for (trial = 0; trial < 5000; ++trial) {
        length = 8 * (2 + (uint32_t)bundle_rand(&rng) % 128);
        base   = guarded(&map, &map_size, length, 1);
        for (i = 0; i < length; i += 8) {
            /* Mostly plausible words: footers with small sizes, headers */
            put_header(base + i,
                       (bundle_rand(&rng) % 3 == 0) ?
                       ((8 * (bundle_rand(&rng) % 12)) |
                        ((uint64_t)HIPOWER_SLOT_AM_FILL << 32)) :
                       (bundle_rand(&rng) % 4) ?
                       ((bundle_rand(&rng) % 48) |
                        ((bundle_rand(&rng) % 40) << 32)) :
                       ((bundle_rand(&rng) << 32) ^ bundle_rand(&rng)));
        }
        memset(&rx, 0, sizeof(rx));
        for (count = 1; count <= HIPOWER_FILL_MAX_BATCHES;
             count += 1 + (uint32_t)(bundle_rand(&rng) % 4)) {
            if (fill_walk(base + length, count, length, &rx) < 0) {
                break;
            }
        }
        ck_assert_uint_le(rx.done, length);
        ck_assert_int_eq(munmap(map, map_size), 0);
    }
}
END_TEST

Suite *hipower_bundle_suite(void)
{
    Suite *suite = suite_create("bundle");
    TCase *tcase = tcase_create("frame");

    /* 20,000 mmap/munmap pairs of guarded frames: well within Check's
     * default 4 s natively, not in the rig's TCG guest beside the other UCX
     * versions' builds (timed out there once) */
    tcase_set_timeout(tcase, 120);

    tcase_add_loop_test(tcase, test_bundle_round_trip, 0, 16);
    tcase_add_test(tcase, test_bundle_fills_exactly);
    tcase_add_test(tcase, test_bundle_hostile_frames);
    tcase_add_test(tcase, test_bundle_random_frames);
    suite_add_tcase(suite, tcase);

    tcase = tcase_create("fill");
    tcase_set_timeout(tcase, 120);
    tcase_add_loop_test(tcase, test_fill_round_trip, 0, 8);
    tcase_add_test(tcase, test_fill_hostile_slots);
    tcase_add_test(tcase, test_fill_random_slots);
    suite_add_tcase(suite, tcase);
    return suite;
}
