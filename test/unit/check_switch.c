/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"
#include "hipower_arena.h"
#include "hipower_grant.h"
#include "hipower_ring.h"
#include "hipower_slot.h"

#include <stdlib.h>
#include <string.h>

/*
 * The switch rules of the shared pool (docs/protocol.md, 9.2) that the
 * transport calls as plain functions: the run request word, grants from
 * no run, how many old-run messages are still to come, the sequence
 * period, epochs past 2^32. The protocol they make up (grant, adopt,
 * switch, release, ask) is tested in the transport itself, on the rig
 * (test/uct/check_conformance.c: switch_storm, churn_over_reused_slots,
 * idle_runs_come_back, stopped_peer_pins_nothing), not on a copy of it.
 */

START_TEST(test_switch_run_req)
{
    uint64_t req = hipower_run_req_make(5, 0x1234, 0);

    ck_assert_uint_eq(hipower_run_req_old_end(req), 0x1234);
    /* The release of epoch 5 adopted (the receiver is at 4) */
    ck_assert_int_eq(hipower_run_req_action(req, 4, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* An older or newer word is not that release */
    ck_assert_int_eq(hipower_run_req_action(req, 5, 8, 1),
                     HIPOWER_RUN_REQ_NONE);
    ck_assert_int_eq(hipower_run_req_action(req, 3, 8, 1),
                     HIPOWER_RUN_REQ_NONE);
    /* No ask, or an ask while the receiver holds a run, or of another
     * epoch: nothing (a peer cannot make us grant at will) */
    ck_assert_int_eq(hipower_run_req_action(req, 5, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
    req = hipower_run_req_make(5, 0x1234, 1);
    ck_assert_int_eq(hipower_run_req_action(req, 5, 0, 0),
                     HIPOWER_RUN_REQ_WANTS);
    ck_assert_int_eq(hipower_run_req_action(req, 5, 8, 0),
                     HIPOWER_RUN_REQ_NONE);
    ck_assert_int_eq(hipower_run_req_action(req, 6, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
    /* The ask word also says where the last run ended: while the release
     * is out it completes it */
    ck_assert_int_eq(hipower_run_req_action(req, 4, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* A release is a valid record; a grant of the current epoch is not */
    ck_assert(hipower_grant_record_valid(4, 5, 0, 64));
    ck_assert(!hipower_grant_record_valid(5, 5, 0, 64));
}
END_TEST

/* The final count of a filled slot the sender left open rides in the run
 * request of a release (bits 24..31) and in the ack word of the frame
 * after the slot (bits 56..63), without touching the fields beside it */
START_TEST(test_switch_fill_final)
{
    uint64_t req = hipower_run_req_with_fill(
                       hipower_run_req_make(5, 0x1234, 1), 255);
    uint64_t ack;

    ck_assert_uint_eq(hipower_run_req_fill(req), 255);
    ck_assert_uint_eq(hipower_run_req_old_end(req), 0x1234);
    ck_assert_uint_eq((uint32_t)(req >> 32), 5);
    ck_assert(req & HIPOWER_RUN_REQ_ASK);
    ck_assert_int_eq(hipower_run_req_action(req, 4, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    ck_assert_int_eq(hipower_run_req_action(req, 5, 0, 0),
                     HIPOWER_RUN_REQ_WANTS);
    /* Said again (the ask keeps it), or replaced */
    ck_assert_uint_eq(hipower_run_req_fill(hipower_run_req_with_fill(req, 7)),
                      7);
    ck_assert_uint_eq(hipower_run_req_fill(hipower_run_req_make(5, 0xffff, 1)),
                      0);

    ack = 0xfedcba98u | hipower_slot_ack_switch(0xabcd) |
          HIPOWER_SLOT_ACK_WANTS | hipower_slot_ack_fill_final(200);
    ck_assert_uint_eq(hipower_slot_ack_fill_count(ack), 200);
    ck_assert_uint_eq((uint32_t)ack, 0xfedcba98u);
    ck_assert_uint_eq(hipower_slot_ack_old_end(ack), 0xabcd);
    ck_assert(ack & HIPOWER_SLOT_ACK_SWITCH);
    ck_assert(ack & HIPOWER_SLOT_ACK_WANTS);
    ck_assert_uint_eq(hipower_slot_ack_fill_count(
                          hipower_slot_ack_switch(0xffff) |
                          HIPOWER_SLOT_ACK_WANTS | 0xffffffffu), 0);
    /* Every count a trailer can hold */
    ck_assert_uint_eq(hipower_slot_ack_fill_count(
                          hipower_slot_ack_fill_final(HIPOWER_FILL_MAX_BATCHES)),
                      HIPOWER_FILL_MAX_BATCHES);
}
END_TEST

/* An ask is a want from a run of no slots: the fair share if the pool has
 * it beyond the reserve, what it has beyond the reserve if less but at
 * least the mailbox (MIN_SLOTS: review L2, a waiter got 1-slot runs), the
 * mailbox from the reserve if the pool has it only with the reserve, and
 * nothing (the endpoint waits) when less is left */
START_TEST(test_switch_grant_from_nothing)
{
    uint32_t size = 0;

    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 100, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 16);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 20, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 12);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 16, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 8);
    /* Less than the reserve and a mailbox: the mailbox, from the reserve
     * (a pool of a few mailboxes kept one empty for ever otherwise) */
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 12, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 8);
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 8, 8, 8, &size),
                     HIPOWER_GRANT_GROW);
    ck_assert_uint_eq(size, 8);
    /* Less than a mailbox: nothing (the endpoint waits) */
    ck_assert_int_eq(hipower_grant_decide(0, 16, 1, 7, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    /* A run that has one grows only beyond the reserve */
    ck_assert_int_eq(hipower_grant_decide(8, 16, 1, 12, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    /* Without an ask, nothing: a peer without a run gets one only when it
     * has something to send */
    ck_assert_int_eq(hipower_grant_decide(0, 16, 0, 100, 8, 8, &size),
                     HIPOWER_GRANT_NONE);
    /* Nor from scattered free slots: at least the mailbox */
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 0, 8), 8);
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 8, 8), 9);
}
END_TEST

START_TEST(test_switch_old_remaining)
{
    /* Drained: switch now */
    ck_assert_int_eq(hipower_grant_old_remaining(7, 7, 8), 0);
    ck_assert_int_eq(hipower_grant_old_remaining(5, 7, 8), 2);
    ck_assert_int_eq(hipower_grant_old_remaining(0, 8, 8), 8);
    /* More than the run holds, or behind what was delivered */
    ck_assert_int_eq(hipower_grant_old_remaining(0, 9, 8), -1);
    ck_assert_int_eq(hipower_grant_old_remaining(7, 6, 8), -1);
    /* Sequence numbers beyond 16 bits: only the difference counts */
    ck_assert_int_eq(hipower_grant_old_remaining(0x1fffe, 0x0001, 4096), 3);
    ck_assert_int_eq(hipower_grant_old_remaining(0x80000000u, 0x0000, 4), 0);
}
END_TEST

/*
 * A switch (or a release) adopted right after message period - 1 of a run
 * (review M1): the sender's head rests at the period, the receiver's has
 * already restarted at 0. For every run size, through the transport's own
 * ring functions on both sides: the old end the sender reports must leave
 * the receiver nothing to wait for, and the same one step before the
 * period (one message still to come).
 */
START_TEST(test_switch_at_period)
{
    hipower_bitmap_word_t written[HIPOWER_BITMAP_WORDS(4096)];
    hipower_bitmap_word_t consumed[HIPOWER_BITMAP_WORDS(4096)];
    hipower_tx_ring_t tx;
    hipower_rx_ring_t rx;
    uint32_t n, period, old_end, bad = 0, first_bad = 0, slot;
    int behind;

    for (n = 1; n <= 4096; ++n) {
        /* The first multiple of 2n at or past 2^31: where sequences restart */
        period = (uint32_t)(((HIPOWER_RING_SEQ_PERIOD_BIT + 2ull * n - 1) /
                             (2ull * n)) * (2ull * n));
        for (behind = 0; behind <= 1; ++behind) {
            memset(written, 0, sizeof(written));
            memset(consumed, 0, sizeof(consumed));
            hipower_tx_ring_init(&tx, n, written, 0);
            hipower_rx_ring_init(&rx, n, consumed, 0);
            /* Both rings just before the period, nothing outstanding */
            tx.head = tx.tail = period - 2;
            tx.recycled = 12345;  /* Counts over all runs: any value */
            rx.head = period - 2;
            rx.taken = rx.acked = 12345;
            hipower_tx_ring_take(&tx);
            /* Acknowledged (room again in a ring of one slot) */
            ck_assert_uint_eq(hipower_tx_ring_ack(&tx, tx.recycled + 1), 1);
            hipower_tx_ring_take(&tx);
            /* The receiver delivered all but @a behind of them */
            slot = hipower_rx_ring_advance(&rx);
            hipower_rx_ring_release(&rx, slot);
            if (!behind) {
                slot = hipower_rx_ring_advance(&rx);
                hipower_rx_ring_release(&rx, slot);
            }
            old_end = hipower_tx_ring_switch(&tx, 8, 0);
            if (hipower_grant_old_remaining(hipower_rx_ring_taken(&rx),
                                            (uint16_t)old_end, n) !=
                behind) {
                if (bad++ == 0) {
                    first_bad = n;
                }
            }
        }
    }
    ck_assert_msg(bad == 0, "%u cases of 8192 where a switch at the period "
                  "leaves the receiver waiting or failing (first: a run of "
                  "%u slots)", bad, first_bad);
}
END_TEST

/* Epochs past 2^32 (review L1): the grant record's 64-bit epoch is still
 * the next one, and run requests (their low 32 bits) still match */
START_TEST(test_switch_epoch_past_2_32)
{
    uint64_t epoch = 0xffffffffull; /* The receiver's current run */
    uint64_t req;

    ck_assert(hipower_grant_record_valid(epoch, epoch + 1, 8, 4096));
    ck_assert(!hipower_grant_record_valid(epoch, 0, 8, 4096));
    /* A release (epoch 2^32) adopted: the request says so */
    req = hipower_run_req_make((uint32_t)(epoch + 1), 5, 0);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)epoch, 8, 1),
                     HIPOWER_RUN_REQ_RELEASED);
    /* Then, without a run at epoch 2^32, an ask */
    req = hipower_run_req_make((uint32_t)(epoch + 1), 5, 1);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)(epoch + 1), 0, 0),
                     HIPOWER_RUN_REQ_WANTS);
    ck_assert_int_eq(hipower_run_req_action(req, (uint32_t)epoch, 0, 0),
                     HIPOWER_RUN_REQ_NONE);
}
END_TEST

Suite *hipower_switch_suite(void)
{
    Suite *s  = suite_create("switch");
    TCase *tc = tcase_create("switch");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_switch_old_remaining);
    tcase_add_test(tc, test_switch_at_period);
    tcase_add_test(tc, test_switch_epoch_past_2_32);
    tcase_add_test(tc, test_switch_run_req);
    tcase_add_test(tc, test_switch_fill_final);
    tcase_add_test(tc, test_switch_grant_from_nothing);
    suite_add_tcase(s, tc);
    return s;
}
