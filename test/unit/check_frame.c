/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The protocol v2 frame (hipower_slot.h, docs/protocol.md), without a
 * device: a message is [data][pad][trailer] ending at the slot's fixed
 * trailer word, and the receiver takes it as arrived when that word carries
 * the message's sequence number.
 *  - the trailer encodes and checks what it should, and a hostile one is
 *    refused with a reason before any data is read;
 *  - data offsets stay inside the slot and aligned as asked, for every
 *    length, alignment and offset, and a peer's layout is checked;
 *  - the arrival rule, played on a model of receive memory that a sender
 *    writes in order, in MTU-sized packets and 8 bytes at a time inside
 *    the last one, with random sizes across MTU and slot boundaries, over
 *    many laps of the ring: a message is never seen before its last byte
 *    has landed, a stale lap or fresh memory never looks new, and what is
 *    seen is exactly what was sent (checksummed).
 */
#include "hipower_slot.h"
#include "hipower_ring.h"
#include "hipower_test.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NUM_AM_IDS  32


START_TEST(test_trailer_encoding)
{
    hipower_slot_trailer_t t;

    uint8_t buf[HIPOWER_SLOT_TRAILER_SIZE + 3];
    uint64_t ack_word;

    ck_assert_uint_eq(HIPOWER_SLOT_TRAILER_SIZE, 16);
    ck_assert_uint_eq(hipower_slot_max_payload(256), 240);

    /* Stored anywhere (after data of any length): ack word, then mark */
    hipower_slot_trailer_store(buf + 3, 7, 1000, 0x12345678, 0xfedcba98);
    memcpy(&ack_word, buf + 3, sizeof(ack_word));
    ck_assert_uint_eq(ack_word, 0xfedcba98); /* reserved bits 0 */
    ck_assert_uint_eq(hipower_slot_trailer_ack(buf + 3), 0xfedcba98);
    memcpy(&t, buf + 3 + HIPOWER_SLOT_MARK_OFFSET, sizeof(t));
    ck_assert_uint_eq(t, hipower_slot_trailer_make(7, 1000, 0x12345678));

    /* The ack word's upper half: a run switch (the old run's end) and the
     * wish for a larger run (docs/protocol.md 9.2) */
    hipower_slot_trailer_store(buf + 3, 7, 1000, 0x12345678,
                               0xfedcba98 | HIPOWER_SLOT_ACK_WANTS |
                               hipower_slot_ack_switch(0x1234abcd));
    ack_word = hipower_slot_trailer_ack_word(buf + 3);
    ck_assert_uint_eq(hipower_slot_trailer_ack(buf + 3), 0xfedcba98);
    ck_assert(ack_word & HIPOWER_SLOT_ACK_WANTS);
    ck_assert(ack_word & HIPOWER_SLOT_ACK_SWITCH);
    ck_assert_uint_eq(hipower_slot_ack_old_end(ack_word), 0xabcd);
    ck_assert_uint_eq(ack_word >> 50, 0);

    /* A frame without a message, and what is not one */
    ck_assert(hipower_slot_trailer_is_none(
            hipower_slot_trailer_make(HIPOWER_SLOT_AM_NONE, 0, 5)));
    ck_assert(!hipower_slot_trailer_is_none(
            hipower_slot_trailer_make(HIPOWER_SLOT_AM_NONE, 1, 5)));
    ck_assert(!hipower_slot_trailer_is_none(hipower_slot_trailer_make(0, 0,
                                                                      5)));
    ck_assert(!hipower_slot_trailer_fits(
            hipower_slot_trailer_make(HIPOWER_SLOT_AM_NONE, 0, 5), 8192, 64));

    t = hipower_slot_trailer_make(7, 1000, 0x12345678);
    ck_assert_uint_eq((uint32_t)t, 1000);
    ck_assert_uint_eq((t >> 32) & 0xff, 7);
    ck_assert_uint_eq((t >> 40) & 0xff, HIPOWER_SLOT_MAGIC);
    ck_assert_uint_eq(t >> 48, 0x5678);

    /* Only the low 16 bits of the sequence travel */
    ck_assert(hipower_slot_trailer_is(t, 0x12345678));
    ck_assert(hipower_slot_trailer_is(t, 0x5678));
    ck_assert(!hipower_slot_trailer_is(t, 0x5679));
    ck_assert(!hipower_slot_trailer_is(t, 0x5677));
    /* Neither length nor AM id takes part in the arrival check */
    ck_assert(hipower_slot_trailer_is(hipower_slot_trailer_make(0, 0, 9), 9));
    ck_assert(hipower_slot_trailer_is(hipower_slot_trailer_make(255, UINT32_MAX,
                                                                9), 9));
    /* Memory never written is no message, not even message 0 */
    ck_assert(!hipower_slot_trailer_is(0, 0));
    ck_assert(!hipower_slot_trailer_is(UINT64_MAX, 0xffff));
}
END_TEST

static void check_rejected(hipower_slot_trailer_t t, size_t max_payload,
                           uint32_t expected_seq, const char *reason)
{
    unsigned am_id   = 99;
    uint32_t length  = 99;
    const char *actual = NULL;

    ck_assert_int_eq(hipower_slot_trailer_parse(t, max_payload, expected_seq,
                                                TEST_NUM_AM_IDS, &am_id,
                                                &length, &actual),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_ptr_nonnull(actual);
    ck_assert_str_eq(actual, reason);
    /* Nothing of a rejected trailer is handed on */
    ck_assert_uint_eq(am_id, 0);
    ck_assert_uint_eq(length, 0);
}

START_TEST(test_trailer_parse)
{
    const size_t max = 8184;
    const char *reason;
    unsigned am_id;
    uint32_t length;

    /* A payload filling the slot, the last AM id; an empty message */
    ck_assert_int_eq(hipower_slot_trailer_parse(
                             hipower_slot_trailer_make(TEST_NUM_AM_IDS - 1,
                                                       max, 42),
                             max, 42, TEST_NUM_AM_IDS, &am_id, &length,
                             &reason), UCS_OK);
    ck_assert_uint_eq(am_id, TEST_NUM_AM_IDS - 1);
    ck_assert_uint_eq(length, max);
    ck_assert_int_eq(hipower_slot_trailer_parse(
                             hipower_slot_trailer_make(0, 0, 0x7fff0003),
                             max, 0x10003, TEST_NUM_AM_IDS, &am_id, &length,
                             &reason), UCS_OK);
    ck_assert_uint_eq(am_id, 0);
    ck_assert_uint_eq(length, 0);

    /* What a hostile or broken peer might write */
    check_rejected(hipower_slot_trailer_make(1, UINT32_MAX, 100), max, 100,
                   "length exceeds the slot payload");
    check_rejected(hipower_slot_trailer_make(1, max + 1, 100), max, 100,
                   "length exceeds the slot payload");
    check_rejected(hipower_slot_trailer_make(255, 8, 100), max, 100,
                   "AM id out of range");
    check_rejected(hipower_slot_trailer_make(TEST_NUM_AM_IDS, 8, 100), max,
                   100, "AM id out of range");
    check_rejected(hipower_slot_trailer_make(1, 8, 100), max, 101,
                   "sequence mismatch");
    check_rejected(hipower_slot_trailer_make(1, 8, 0xffff), max, 0x10000,
                   "sequence mismatch");
    check_rejected(hipower_slot_trailer_make(1, 8, 100) ^ (1ull << 47), max,
                   100, "not a protocol v2 trailer");
    check_rejected(0, max, 0, "not a protocol v2 trailer");
}
END_TEST

START_TEST(test_layout_offsets)
{
    static const size_t slot_sizes[] = {256, 1024, 8192, 65536};
    const uintptr_t base = 0x7f0000000000ul;
    hipower_slot_layout_t layout;
    size_t align, offset, s, max;
    uint32_t length, data, pad;

    for (s = 0; s < sizeof(slot_sizes) / sizeof(slot_sizes[0]); ++s) {
        max = hipower_slot_max_payload(slot_sizes[s]);
        for (align = 1; align <= 8192; align *= 2) {
            for (offset = 0; offset < align; offset += 1 + offset / 3) {
                hipower_slot_layout(slot_sizes[s], align, offset, &layout);
                ck_assert_ptr_null(hipower_slot_layout_check(&layout, max));
                ck_assert_uint_eq(layout.stride %
                                  hipower_slot_base_align(align), 0);
                ck_assert_uint_eq(layout.trailer_offset + 16, layout.stride);
                /* Every length near either end, a sample in between */
                for (length = 0; length <= max;
                     length += ((length < 32) || (length + 32 > max)) ?
                               1 : 1 + length / 5) {
                    data = hipower_slot_data_offset(&layout, length);
                    pad  = hipower_slot_pad(&layout, length);
                    ck_assert_msg((uint64_t)data + length + pad ==
                                  layout.trailer_offset,
                                  "size %zu align %zu+%zu length %u: data "
                                  "at %u pad %u", slot_sizes[s], align,
                                  offset, length, data, pad);
                    ck_assert_uint_lt(pad, align);
                    ck_assert_uint_lt(data, layout.stride);
                    ck_assert_msg((base + 3 * layout.stride + data + offset) %
                                  align == 0, "size %zu align %zu+%zu "
                                  "length %u: data at %u", slot_sizes[s],
                                  align, offset, length, data);
                }
            }
        }
    }

    /* Without alignment the data ends right at the trailer: one write */
    hipower_slot_layout(8192, 1, 0, &layout);
    ck_assert_uint_eq(layout.stride, 8192);
    ck_assert_uint_eq(layout.trailer_offset, 8176);
    for (length = 0; length <= 8176; ++length) {
        ck_assert_uint_eq(hipower_slot_pad(&layout, length), 0);
    }
}
END_TEST

START_TEST(test_layout_check)
{
    hipower_slot_layout_t good, bad;

    hipower_slot_layout(8192, 1, 0, &good);
    ck_assert_ptr_null(hipower_slot_layout_check(&good, 8176));
    /* A sender with larger messages than the slots hold */
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&good, 8177));

    hipower_slot_layout(8192, 64, 8, &good);
    ck_assert_ptr_null(hipower_slot_layout_check(&good, 8176));

    bad = good; bad.align = 0;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    bad = good; bad.align = 48;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    bad = good; bad.align_offset = 64;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    bad = good; bad.trailer_offset -= 4;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    bad = good; bad.trailer_offset = bad.stride;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    bad = good; bad.trailer_offset = UINT32_MAX - 7; bad.stride = 8;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 100));
    /* Room for the data, but not for the pad that aligns it */
    bad = good; bad.trailer_offset = 8176 + 16; bad.stride = 8208;
    ck_assert_ptr_nonnull(hipower_slot_layout_check(&bad, 8176));
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Arrival on a model of receive memory                                     */
/* ------------------------------------------------------------------------ */

#define MODEL_MTU      1024

typedef struct {
    hipower_slot_layout_t layout;
    uint32_t              num_slots;
    size_t                max_payload;
    uint8_t               *mem;      /* The receiver's slots */
    hipower_rx_ring_t     rx;
    hipower_bitmap_word_t consumed[HIPOWER_BITMAP_WORDS(64)];
    uint32_t              tx_seq;
    uint64_t              delivered;
    uint64_t              polls;
    uint32_t              last_ack;  /* Of the message seen last */
} landing_t;

static uint32_t frame_checksum(const uint8_t *p, uint32_t length)
{
    uint32_t sum = 2166136261u, i;

    for (i = 0; i < length; ++i) {
        sum = (sum ^ p[i]) * 16777619u;
    }
    return sum;
}

static void landing_init(landing_t *m, size_t slot_size, size_t align,
                         size_t offset, uint32_t num_slots)
{
    memset(m, 0, sizeof(*m));
    hipower_slot_layout(slot_size, align, offset, &m->layout);
    m->num_slots   = num_slots;
    m->max_payload = hipower_slot_max_payload(slot_size);
    ck_assert_int_eq(posix_memalign((void**)&m->mem,
                                    hipower_slot_base_align(align),
                                    (size_t)num_slots * m->layout.stride), 0);
    memset(m->mem, 0, (size_t)num_slots * m->layout.stride);
    hipower_rx_ring_init(&m->rx, num_slots, m->consumed, 0);
}

/*
 * The receiver's poll, with the rules of uct_hipower_ep_rx_progress() in
 * self mode: 1 and the message's data if the next one has arrived (it is
 * taken from the ring), else 0.
 */
static int landing_poll(landing_t *m, unsigned *am_id, uint32_t *length,
                        const uint8_t **data)
{
    uint32_t seq      = m->rx.head;
    uint32_t slot     = hipower_ring_slot(m->num_slots, seq);
    uint8_t *base     = m->mem + (size_t)slot * m->layout.stride;
    hipower_slot_trailer_t trailer;
    const char *reason;

    ++m->polls;
    memcpy(&trailer, base + m->layout.trailer_offset +
           HIPOWER_SLOT_MARK_OFFSET, sizeof(trailer));
    if (!hipower_slot_trailer_is(trailer, seq)) {
        return 0;
    }

    m->last_ack = hipower_slot_trailer_ack(base + m->layout.trailer_offset);

    ck_assert_int_eq(hipower_slot_trailer_parse(trailer, m->max_payload, seq,
                                                TEST_NUM_AM_IDS, am_id, length,
                                                &reason), UCS_OK);
    *data = base + hipower_slot_data_offset(&m->layout, *length);
    ck_assert(*data >= base);
    ck_assert(*data + *length <= base + m->layout.trailer_offset);
    hipower_rx_ring_advance(&m->rx);
    hipower_rx_ring_release(&m->rx, slot);
    ++m->delivered;
    return 1;
}

/* What the receiver got must be the message, all of it final in memory */
static void landing_check(landing_t *m, uint32_t seq, const uint8_t *frame,
                          uint32_t length, unsigned am_id, uint32_t sum,
                          uint32_t ack, unsigned got_id, uint32_t got_len,
                          const uint8_t *got, uint32_t written)
{
    const uint8_t *dst = m->mem + (size_t)hipower_ring_slot(m->num_slots, seq) *
                         m->layout.stride;

    ck_assert_msg((got_id == am_id) && (got_len == length) &&
                  (frame_checksum(got, got_len) == sum) &&
                  !memcmp(got, frame, length) && (m->last_ack == ack) &&
                  !memcmp(dst + m->layout.trailer_offset, frame + length,
                          HIPOWER_SLOT_TRAILER_SIZE),
                  "message %u (%u bytes) seen with %u bytes placed, not as "
                  "sent (id %u length %u ack %u, sent %u)", seq, length,
                  written, got_id, got_len, m->last_ack, ack);
}

/*
 * Sends one message of @a length bytes: builds the frame as the sender
 * does and places it byte range by byte range in order, as a device that
 * places a WRITE's packets in order would: MTU-sized packets counted from
 * the data's start (so the trailer may straddle two), and inside the last
 * one a few bytes at a time, so that the receiver polls while the trailer
 * itself is landing. After every step the receiver polls. It may see the
 * message only once every byte of it holds its final value (the last
 * bytes of the trailer may already hold it: the stale lap's sequence
 * number can share its high byte); it must see it once all has landed,
 * and what it sees is exactly what was sent.
 */
static void landing_send(landing_t *m, uint32_t length, unsigned am_id)
{
    uint32_t seq   = m->tx_seq++;
    uint32_t slot  = hipower_ring_slot(m->num_slots, seq);
    uint32_t data  = hipower_slot_data_offset(&m->layout, length);
    uint32_t pad   = hipower_slot_pad(&m->layout, length);
    uint8_t *dst   = m->mem + (size_t)slot * m->layout.stride;
    static uint8_t frame[70000];
    uint32_t ack   = (uint32_t)random() * 2654435761u;
    uint32_t frame_len, written = 0, step, sum, i;
    const uint8_t *got;
    uint32_t got_len;
    unsigned got_id;
    int seen = 0;

    ck_assert_uint_le(length, m->max_payload);
    for (i = 0; i < length; ++i) {
        frame[i] = (uint8_t)(random() >> 7);
    }
    sum     = frame_checksum(frame, length);
    /* One write of data and trailer; with a pad, the trailer on its own */
    hipower_slot_trailer_store(frame + length, am_id, length, seq, ack);
    frame_len = length + ((pad == 0) ? HIPOWER_SLOT_TRAILER_SIZE : 0);

    while (written < frame_len) {
        step = frame_len - written;
        if (step > MODEL_MTU) {
            step = MODEL_MTU;
        } else if (step > 3) {
            step = 1 + random() % 3;
        }
        memcpy(dst + data + written, frame + written, step);
        written += step;
        if (!seen && landing_poll(m, &got_id, &got_len, &got)) {
            landing_check(m, seq, frame, length, am_id, sum, ack, got_id,
                          got_len, got, written);
            seen = 1;
        }
    }

    if (pad != 0) {
        memcpy(dst + m->layout.trailer_offset, frame + length,
               HIPOWER_SLOT_TRAILER_SIZE);
    }

    if (!seen) {
        ck_assert_msg(landing_poll(m, &got_id, &got_len, &got),
                      "message %u (%u bytes) not seen when complete", seq,
                      length);
        landing_check(m, seq, frame, length, am_id, sum, ack, got_id,
                      got_len, got, frame_len);
    }
    /* Nothing more: the next slot holds an older lap or nothing */
    ck_assert(!landing_poll(m, &got_id, &got_len, &got));
}

/* Sizes around what matters: 0, MTU multiples, the slot's largest */
static uint32_t landing_size(const landing_t *m)
{
    uint32_t max = (uint32_t)m->max_payload;
    uint32_t edge;

    switch (random() % 4) {
    case 0:
        return random() % (max + 1);
    case 1:
        return random() % 64;
    case 2:
        edge = MODEL_MTU * (1 + random() % (max / MODEL_MTU + 1));
        edge = edge + (random() % 17) - 8;
        return (edge > max) ? max - random() % 3 : edge;
    default:
        return max - random() % 9;
    }
}

static void landing_run(size_t slot_size, size_t align, size_t offset,
                        uint32_t num_slots, unsigned msgs)
{
    landing_t m;
    unsigned i;

    landing_init(&m, slot_size, align, offset, num_slots);
    for (i = 0; i < msgs; ++i) {
        landing_send(&m, landing_size(&m), random() % TEST_NUM_AM_IDS);
    }
    ck_assert_uint_eq(m.delivered, msgs);
    free(m.mem);
}

START_TEST(test_arrival_random_sizes)
{
    srandom(11);
    /* Many laps of small rings: every slot reused with stale frames of
     * every length in it */
    landing_run(8192, 1, 0, 4, 3000);
    landing_run(8192, 1, 0, 61, 2000);
    landing_run(1024, 1, 0, 3, 3000);
    landing_run(65536, 1, 0, 2, 300);
    /* Aligned data: the pad gap, the trailer written on its own */
    landing_run(8192, 64, 0, 5, 1500);
    landing_run(8192, 4096, 100, 3, 600);
    landing_run(256, 8, 3, 7, 3000);
}
END_TEST

/* A slot's previous lap, whatever its length, never looks like the next
 * message; nor do the zeroes of a fresh slot */
START_TEST(test_arrival_stale_lap)
{
    const uint32_t num_slots = 4;
    const uint8_t *got;
    uint32_t got_len;
    unsigned got_id, lap;
    landing_t m;

    landing_init(&m, 1024, 1, 0, num_slots);
    ck_assert(!landing_poll(&m, &got_id, &got_len, &got));
    for (lap = 0; lap < 20000; ++lap) {
        landing_send(&m, (lap * 37) % (m.max_payload + 1), lap % 32);
    }
    ck_assert_uint_eq(m.delivered, 20000);
    /* Past the 16-bit wrap of the sequence many times over */
    ck_assert_uint_gt(m.tx_seq, 0x10000 / 4);
    free(m.mem);
}
END_TEST

/* The model really detects a frame seen too early: trailer first */
START_TEST(test_arrival_model_can_fail)
{
    hipower_slot_trailer_t trailer;
    const uint8_t *got;
    uint32_t got_len;
    unsigned got_id;
    landing_t m;

    landing_init(&m, 1024, 1, 0, 2);
    trailer = hipower_slot_trailer_make(1, 100, 0);
    memcpy(m.mem + m.layout.trailer_offset + HIPOWER_SLOT_MARK_OFFSET,
           &trailer, sizeof(trailer));
    /* A device that placed the trailer before the data: the receiver
     * takes the message now, with data that has not landed. Self mode
     * relies on in-order placement for that reason (docs/protocol.md) */
    ck_assert(landing_poll(&m, &got_id, &got_len, &got));
    ck_assert_uint_eq(got_len, 100);
    free(m.mem);
}
END_TEST

Suite *hipower_frame_suite(void)
{
    Suite *suite = suite_create("frame");
    TCase *tcase = tcase_create("trailer");

    tcase_add_test(tcase, test_trailer_encoding);
    tcase_add_test(tcase, test_trailer_parse);
    tcase_add_test(tcase, test_layout_offsets);
    tcase_add_test(tcase, test_layout_check);
    suite_add_tcase(suite, tcase);

    tcase = tcase_create("arrival");
    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, test_arrival_random_sizes);
    tcase_add_test(tcase, test_arrival_stale_lap);
    tcase_add_test(tcase, test_arrival_model_can_fail);
    suite_add_tcase(suite, tcase);
    return suite;
}
