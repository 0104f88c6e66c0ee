/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_FILL_H_
#define UCT_HIPOWER_FILL_H_

#include "hipower_bundle.h"

#include <stdint.h>
#include <string.h>

/*
 * Filled slots (UCX_HIPOWER_BUNDLE_FILL, docs/protocol.md 2.2): the
 * bundles a sender posts one after the other go into the same slot of
 * the receiver until it is full, instead of one slot each, so that a slot
 * carries as many small messages as fit in it rather than those that were
 * waiting at one moment.
 *
 * A filled slot's trailer (hipower_slot.h) has the AM id
 * HIPOWER_SLOT_AM_FILL and, in its length field, the number of batches
 * written so far (1 to HIPOWER_FILL_MAX_BATCHES). The batches stack
 * downward from the trailer: the first ends where the trailer starts, each
 * later one where the one before starts. A batch is a bundle's records
 * (hipower_bundle.h) followed by an 8-byte footer:
 *
 *   footer: bits  0..31  the batch's size in bytes, footer included
 *           bits 32..39  HIPOWER_SLOT_AM_FILL
 *           bits 40..63  0
 *
 * The first batch and the trailer are one RDMA_WRITE, as any frame; a
 * later batch is a write of its own followed by a write of the trailer
 * with the new count, so that, with RC's order and in-order placement, a
 * trailer that says N batches means N batches have landed.
 *
 * Why a count of batches and not their length in bytes: a rewrite keeps
 * the trailer's key (magic and sequence, its last bytes), so a receiver
 * that reads the trailer while the rewrite lands cannot tell from the key
 * that it is whole. In-order placement at byte granularity (rxe copying a
 * packet under an emulated CPU does; the simulator's "torn" placement
 * does) then shows a length half old, half new: 5,800 bytes read as 5,680
 * (stop 43's rig failure). The count lives in the length field's first
 * byte, the others stay 0: a rewrite changes that byte alone, and a read
 * sees the old count or the new one. The ack word beside it may be read
 * half rewritten too; its acknowledgement is then a count between the old
 * and the new one or behind what is known, which frees only slots the
 * peer did release or none (hipower_tx_ring_ack()).
 *
 * A responder that executes a duplicate WRITE again (RC's go-back-N after a
 * lost ACK) places the slot's writes once more, in their order, with the
 * bytes each carried: the count a receiver reads may then go back below
 * what it walked, and up again. A lower count means "not yet", as a
 * trailer not there yet does (HIPOWER_FILL_BEHIND, docs/protocol.md).
 *
 * The receiver walks batches from the top: the footer right below what it
 * walked says where the next batch starts. It walks no more batches than
 * the trailer it read counts, and that trailer sits where every lap of the
 * slot writes its own, so nothing of an earlier lap is ever taken for a
 * batch. Plain C, no device; the footer is read once and checked against
 * what is left of the slot before the batch is used.
 */

#define HIPOWER_SLOT_AM_FILL      0xfd  /* AM id of a filled slot's trailer */
#define HIPOWER_FILL_FOOTER_SIZE  8
#define HIPOWER_FILL_MAX_BATCHES  255   /* One byte of the trailer */

/* The smallest batch: one record header and the footer */
#define HIPOWER_FILL_MIN_BATCH    (HIPOWER_BUNDLE_HDR_SIZE + \
                                   HIPOWER_FILL_FOOTER_SIZE)

/*
 * Ends a batch whose @a records_length bytes of records (a multiple of 8)
 * start at @a records with its footer, right after them; returns the
 * batch's size. The caller has room for the 8 bytes.
 */
static inline uint32_t hipower_fill_footer_store(void *records,
                                                 uint32_t records_length)
{
    uint32_t size   = records_length + HIPOWER_FILL_FOOTER_SIZE;
    uint64_t footer = (uint64_t)size | ((uint64_t)HIPOWER_SLOT_AM_FILL << 32);

    memcpy((uint8_t*)records + records_length, &footer, sizeof(footer));
    return size;
}

/* Whether a batch of @a size goes into a slot filled with @a used bytes so
 * far, whose frames may hold @a max_payload bytes */
static inline int hipower_fill_fits(uint32_t used, uint32_t size,
                                    uint32_t max_payload)
{
    return (uint64_t)used + size <= max_payload;
}

/*
 * The sender's side: the peer's slot its bundles fill. Open while no slot
 * was taken after it (the sender's ring head is seq + 1) and length > 0;
 * the bundle unit starts and grows it, the grant unit closes it when the
 * run switches under it. Both change it only here.
 */
typedef struct hipower_fill_tx {
    uint32_t seq;
    uint32_t length;       /* Of its batches so far, 0: closed */
    uint32_t count;        /* Its batches so far */
    uint64_t ack_flags;    /* Its first frame's switch */
} hipower_fill_tx_t;

/* A slot is filled from now on: its first frame went as slot @a seq with
 * @a length bytes (0: it can take no more) and @a ack_flags to keep */
static inline void hipower_fill_tx_start(hipower_fill_tx_t *fill,
                                         uint32_t seq, uint32_t length,
                                         uint64_t ack_flags)
{
    fill->seq       = seq;
    fill->length    = length;
    fill->count     = 1;
    fill->ack_flags = ack_flags;
}

/* One more batch of @a size bytes went into it */
static inline void hipower_fill_tx_add(hipower_fill_tx_t *fill,
                                       uint32_t size)
{
    fill->length += size;
    fill->count++;
}

/* Nothing more goes into it */
static inline void hipower_fill_tx_close(hipower_fill_tx_t *fill)
{
    fill->length = 0;
}

typedef enum {
    HIPOWER_FILL_END        = 0,  /* Every batch the trailer counts walked */
    HIPOWER_FILL_BATCH      = 1,  /* One more batch */
    HIPOWER_FILL_BEHIND     = 2,  /* The count is below what was walked:
                                     an older write of the slot placed
                                     again, the newer ones follow (not an
                                     error, see hipower_fill_next()) */
    HIPOWER_FILL_BAD_FOOTER = -1, /* A footer without its tag */
    HIPOWER_FILL_BAD_SIZE   = -2, /* A batch size that leaves the slot, or
                                     not a multiple of 8, or too small */
    HIPOWER_FILL_EMPTY      = -4  /* A filled slot without a batch */
} hipower_fill_status_t;

/**
 * The next batch of a filled slot whose batches stack down from @a top
 * (where the trailer starts) within @a max_payload bytes, @a done bytes in
 * @a walked batches walked already, the trailer now counting @a count: on
 * HIPOWER_FILL_BATCH sets *records_p and *records_length_p to the batch's
 * records (walk them with hipower_bundle_iter_init()/hipower_bundle_next())
 * and *size_p to the batch's size, which the caller adds to @a done (and 1
 * to @a walked) once they are walked. The peer writes the slot: the footer
 * is read once, and the batch it describes lies within the @a max_payload
 * bytes below @a top whatever it says. The caller keeps @a done within
 * @a max_payload (every batch walked so far was).
 */
static inline hipower_fill_status_t
hipower_fill_next(const uint8_t *top, uint32_t done, uint32_t walked,
                  uint32_t count, uint32_t max_payload,
                  const uint8_t **records_p, uint32_t *records_length_p,
                  uint32_t *size_p)
{
    uint32_t left, size;
    uint64_t footer;

    if (count == walked) {
        return (walked == 0) ? HIPOWER_FILL_EMPTY : HIPOWER_FILL_END;
    }
    if (count < walked) {
        /* An RC responder may execute a duplicate WRITE again (go-back-N
         * after a lost ACK): the sender's writes to this slot land once
         * more, in their order, each with the count it carried, so the
         * count goes back and then up again to where it was. Nothing
         * below what was walked changes (the same bytes again) */
        return HIPOWER_FILL_BEHIND;
    }

    left = max_payload - done;
    if (left < HIPOWER_FILL_MIN_BATCH) {
        return HIPOWER_FILL_BAD_SIZE;
    }

    /* Read once (see hipower_bundle_next()) */
    memcpy(&footer, top - done - HIPOWER_FILL_FOOTER_SIZE, sizeof(footer));
    __asm__ ("" : "+r"(footer));
    if ((footer >> 32) != HIPOWER_SLOT_AM_FILL) {
        return HIPOWER_FILL_BAD_FOOTER;
    }

    size = (uint32_t)footer;
    if ((size < HIPOWER_FILL_MIN_BATCH) || (size > left) ||
        (size % HIPOWER_BUNDLE_ALIGN)) {
        return HIPOWER_FILL_BAD_SIZE;
    }

    *records_p        = top - done - size;
    *records_length_p = size - HIPOWER_FILL_FOOTER_SIZE;
    *size_p           = size;
    return HIPOWER_FILL_BATCH;
}

/* What a status says, for the error message */
const char *hipower_fill_status_str(hipower_fill_status_t status);

#endif
