/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Where messages go in receive memory, without a device:
 *  - UCT's am_alignment/am_align_offset parameters are checked as uct.h
 *    says (offset only with an alignment, a power of 2, offset below it);
 *  - the slot layout puts the data of every slot at the requested
 *    alignment and leaves every slot room for SLOT_SIZE - 8 bytes of data
 *    before its trailer, whatever the alignment, so peers with different
 *    interface parameters agree on the largest message;
 *  - the arena keeps room for endpoints yet to come: with the defaults
 *    (32 MiB of 8 KiB slots, 64 wanted, 8 at least, 256 endpoints kept
 *    room for) the first endpoints get 64 slots, every one of 256 gets at
 *    least 8, and an endpoint is refused only when no run of 8 is free.
 */
#include "hipower_arena.h"
#include "hipower_slot.h"
#include "hipower_test.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>


START_TEST(test_alignment_params)
{
    ck_assert_ptr_null(hipower_slot_check_alignment(0, 0, 0, 0));
    ck_assert_ptr_null(hipower_slot_check_alignment(1, 1, 0, 0));
    ck_assert_ptr_null(hipower_slot_check_alignment(1, 4096, 1, 4095));
    ck_assert_ptr_null(hipower_slot_check_alignment(1, 8, 1, 0));
    /* The cases of UCX's gtest uct_p2p_am_alignment.invalid_* */
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(1, 0, 0, 0));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(1, 3, 0, 1));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(0, 0, 1, 11));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(0, 8, 1, 8));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(1, 8, 1, 8));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(1, 8, 1, 11));
    ck_assert_ptr_nonnull(hipower_slot_check_alignment(1, 12, 0, 0));
}
END_TEST

START_TEST(test_layout_default)
{
    hipower_slot_layout_t layout;

    /* 8 KiB slots, no alignment: 8176 bytes of data, then the trailer */
    hipower_slot_layout(8192, 1, 0, &layout);
    ck_assert_uint_eq(layout.stride, 8192);
    ck_assert_uint_eq(layout.trailer_offset, 8176);
    ck_assert_uint_eq(layout.align, 1);
    ck_assert_uint_eq(layout.align_offset, 0);
}
END_TEST

START_TEST(test_layout_aligns_every_slot)
{
    static const size_t slot_sizes[] = {256, 1024, 8192, 65536};
    const uintptr_t base = 0x7f0000000000ul;
    hipower_slot_layout_t layout;
    size_t align, offset, s, slot, max;
    uintptr_t data;
    uint32_t length;

    for (s = 0; s < sizeof(slot_sizes) / sizeof(slot_sizes[0]); ++s) {
        max = hipower_slot_max_payload(slot_sizes[s]);
        for (align = 1; align <= 8192; align *= 2) {
            for (offset = 0; offset < align; offset += 1 + offset / 3) {
                hipower_slot_layout(slot_sizes[s], align, offset, &layout);
                ck_assert_uint_eq(layout.stride % HIPOWER_SLOT_ALIGN, 0);
                ck_assert_uint_eq(layout.stride %
                                  hipower_slot_base_align(align), 0);
                /* Room for the largest message and the pad aligning it */
                ck_assert_uint_ge(layout.trailer_offset, max + align - 1);
                ck_assert_uint_eq(layout.trailer_offset + 16, layout.stride);
                for (slot = 0; slot < 5; ++slot) {
                    length = (uint32_t)((slot * 977) % (max + 1));
                    data   = base + slot * layout.stride +
                             hipower_slot_data_offset(&layout, length);
                    ck_assert_msg((data + offset) % align == 0,
                                  "slot %zu align %zu offset %zu size %zu: "
                                  "data at 0x%lx", slot, align, offset,
                                  slot_sizes[s], (unsigned long)data);
                }
            }
        }
    }
}
END_TEST

/* The defaults: 32 MiB / 8 KiB = 4096 slots, SLOTS 64, MIN_SLOTS 8 */
#define LAYOUT_TOTAL    4096
#define LAYOUT_WANT     64
#define LAYOUT_MIN      8
#define LAYOUT_KEEP_EPS 256

START_TEST(test_arena_keeps_room_for_endpoints)
{
    uint32_t first[LAYOUT_TOTAL], count[LAYOUT_TOTAL];
    uint32_t n, keep, full = 0;
    hipower_arena_t arena;

    ck_assert_int_eq(hipower_arena_init(&arena, LAYOUT_TOTAL), UCS_OK);
    for (n = 0; n < LAYOUT_TOTAL; ++n) {
        keep = (n + 1 < LAYOUT_KEEP_EPS) ?
               (LAYOUT_KEEP_EPS - n - 1) * LAYOUT_MIN : 0;
        if (hipower_arena_alloc_keep(&arena, LAYOUT_WANT, LAYOUT_MIN, keep,
                                     &first[n], &count[n]) != UCS_OK) {
            break;
        }
        ck_assert_uint_ge(count[n], LAYOUT_MIN);
        ck_assert_uint_le(count[n], LAYOUT_WANT);
        full += (count[n] == LAYOUT_WANT);
    }

    /* Every one of the 256 fits, the first ones with all they want, and
     * the arena refused only when it had no run of MIN_SLOTS left */
    ck_assert_uint_ge(n, LAYOUT_KEEP_EPS);
    ck_assert_uint_ge(full, 32);
    ck_assert_uint_eq(count[0], LAYOUT_WANT);
    ck_assert_uint_lt(hipower_arena_free_slots(&arena), LAYOUT_MIN);

    /* One endpoint goes: the next one gets its run */
    hipower_arena_free(&arena, first[5], count[5]);
    ck_assert_int_eq(hipower_arena_alloc_keep(&arena, LAYOUT_WANT, LAYOUT_MIN,
                                              0, &first[5], &count[5]),
                     UCS_OK);
    hipower_arena_cleanup(&arena);
}
END_TEST


Suite *hipower_layout_suite(void)
{
    Suite *suite = suite_create("layout");
    TCase *tcase;

    tcase = tcase_create("layout");
    tcase_add_test(tcase, test_alignment_params);
    tcase_add_test(tcase, test_layout_default);
    tcase_add_test(tcase, test_layout_aligns_every_slot);
    tcase_add_test(tcase, test_arena_keeps_room_for_endpoints);
    suite_add_tcase(suite, tcase);
    return suite;
}
