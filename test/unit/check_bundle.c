/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Bundle frames (hipower_bundle, issue 26), without a device: what a
 * sender packs, a receiver walks back message by message, in order, with
 * its bytes; a bundle fills a slot exactly and refuses what would not
 * fit; and a frame a peer wrote with lying lengths, ids or headers is
 * refused at the first bad record, never read beyond its length (the
 * frame sits at the end of a guard page).
 */
#include "hipower_bundle.h"
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

/* A frame at the very end of readable memory: reading past its length
 * faults */
static uint8_t *guarded_frame(void **map_p, size_t *map_size_p,
                              uint32_t length)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = ((length + page - 1) / page + 1) * page;
    uint8_t *map;

    map = mmap(NULL, size, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(map != MAP_FAILED);
    ck_assert_int_eq(mprotect(map + size - page, page, PROT_NONE), 0);
    *map_p      = map;
    *map_size_p = size;
    return map + size - page - length;
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
    return suite;
}
