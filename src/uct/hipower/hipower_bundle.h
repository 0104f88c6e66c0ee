/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_BUNDLE_H_
#define UCT_HIPOWER_BUNDLE_H_

#include <assert.h>
#include <stdint.h>
#include <string.h>

/*
 * A bundle (issue 26, docs/protocol.md): small active messages that could
 * not be posted when they were sent, packed in order into one frame, which
 * one RDMA_WRITE carries into one slot with one trailer. The frame is an
 * ordinary slot frame (hipower_slot.h) whose AM id is HIPOWER_SLOT_AM_BUNDLE
 * and whose length is the bundle's; its data is a sequence of records:
 *
 *   record: [header, 8 bytes][data][pad to a multiple of 8]
 *   header: bits  0..31  the message's AM data length (am_short's 8-byte
 *                        header included, as for a single frame)
 *           bits 32..39  its AM id
 *           bits 40..63  0
 *
 * so each message's data starts 8-byte aligned when the frame does. The
 * frame's length is the sum of its records' sizes; a frame holds at least
 * one record. Plain C, no device: the sender builds a bundle in place (in
 * a bounce buffer or the slot's image), the receiver walks a frame that a
 * peer wrote and trusts none of it: each header is read once, and its
 * length is checked against what is left of the frame (whose own length
 * the trailer check bounded by the slot) before any byte of it is used.
 */

#define HIPOWER_SLOT_AM_BUNDLE     0xfe  /* AM id of a bundle frame */
#define HIPOWER_BUNDLE_HDR_SIZE    8
#define HIPOWER_BUNDLE_ALIGN       8

/* Bytes a message of @a length takes in a bundle */
static inline uint64_t hipower_bundle_record_size(uint32_t length)
{
    return HIPOWER_BUNDLE_HDR_SIZE +
           (((uint64_t)length + HIPOWER_BUNDLE_ALIGN - 1) &
            ~(uint64_t)(HIPOWER_BUNDLE_ALIGN - 1));
}

/* The sender's bundle under construction */
typedef struct hipower_bundle {
    uint8_t     *base;      /* Frame start (8-byte aligned) */
    uint32_t    capacity;   /* Largest frame length the slot takes */
    uint32_t    length;     /* Frame length so far */
    uint32_t    count;      /* Messages in it */
} hipower_bundle_t;

void hipower_bundle_init(hipower_bundle_t *bundle, void *base,
                         uint32_t capacity);

/* Whether a message of @a length still fits */
static inline int hipower_bundle_fits(const hipower_bundle_t *bundle,
                                      uint32_t length)
{
    return hipower_bundle_record_size(length) <=
           (uint64_t)bundle->capacity - bundle->length;
}

/**
 * Appends the header of a message of @a length with AM id @a am_id and
 * returns where its @a length bytes of data go (the caller copies or
 * packs them there; the pad after them is zeroed). The caller checked
 * hipower_bundle_fits(). Inline: under load every message of a bundle
 * comes this way.
 */
static inline void *hipower_bundle_append(hipower_bundle_t *bundle,
                                          uint8_t am_id, uint32_t length)
{
    uint64_t header = (uint64_t)length | ((uint64_t)am_id << 32);
    uint64_t zero   = 0;
    uint32_t size   = (uint32_t)hipower_bundle_record_size(length);
    uint8_t *record = bundle->base + bundle->length;

    assert(hipower_bundle_fits(bundle, length));

    /* The pad: no stale bytes of ours go to the peer. The record's last
     * word is zeroed first and the data copied over its start after; for
     * an empty message that word is the header, written next */
    memcpy(record + size - sizeof(zero), &zero, sizeof(zero));
    memcpy(record, &header, sizeof(header));
    bundle->length += size;
    ++bundle->count;
    return record + HIPOWER_BUNDLE_HDR_SIZE;
}

/*
 * A message packed in place (am_bcopy, whose length is known only once its
 * packer ran): the packer writes at hipower_bundle_packed_data(), right
 * after the room for the record header, and hipower_bundle_commit() makes
 * it a record once its length is known and fits. The caller's buffer has
 * room there for the largest message and 8 bytes more.
 */
static inline void *hipower_bundle_packed_data(const hipower_bundle_t *bundle)
{
    return bundle->base + bundle->length + HIPOWER_BUNDLE_HDR_SIZE;
}

static inline void hipower_bundle_commit(hipower_bundle_t *bundle,
                                         uint8_t am_id, uint32_t length)
{
    uint64_t header = (uint64_t)length | ((uint64_t)am_id << 32);
    uint64_t zero   = 0;
    uint8_t *record = bundle->base + bundle->length;

    assert(hipower_bundle_fits(bundle, length));

    /* The pad, with one store: 8 zero bytes right after the data cover it
     * (and spill into what is not part of the frame yet) */
    memcpy(record + HIPOWER_BUNDLE_HDR_SIZE + length, &zero, sizeof(zero));
    memcpy(record, &header, sizeof(header));
    bundle->length += (uint32_t)hipower_bundle_record_size(length);
    ++bundle->count;
}

/* The receiver's walk over a frame a peer wrote */
typedef struct hipower_bundle_iter {
    const uint8_t *frame;
    uint32_t      length;   /* The frame's, from the trailer: the bound */
    uint32_t      offset;   /* Of the next record */
    uint32_t      count;    /* Records returned so far */
} hipower_bundle_iter_t;

typedef enum {
    HIPOWER_BUNDLE_END      = 0,  /* Every record was returned */
    HIPOWER_BUNDLE_MSG      = 1,  /* One more message */
    HIPOWER_BUNDLE_BAD_HDR  = -1, /* Less than a header left */
    HIPOWER_BUNDLE_BAD_LEN  = -2, /* A length that leaves the frame */
    HIPOWER_BUNDLE_BAD_ID   = -3, /* An AM id out of range, or a bundle's */
    HIPOWER_BUNDLE_EMPTY    = -4  /* A frame without a record */
} hipower_bundle_status_t;

static inline void hipower_bundle_iter_init(hipower_bundle_iter_t *iter,
                                            const void *frame,
                                            uint32_t length)
{
    iter->frame  = (const uint8_t*)frame;
    iter->length = length;
    iter->offset = 0;
    iter->count  = 0;
}

/**
 * The next message of the frame: its AM id, data and length; or the end;
 * or why the frame is malformed (a broken or hostile peer: the caller
 * fails the endpoint; messages returned before stay delivered). AM ids
 * must be below @a num_am_ids; a bundle inside a bundle is malformed.
 * Inline: it runs once per bundled message on the receive path, where a
 * call and the iterator kept in memory cost as much as the walk itself.
 */
static inline hipower_bundle_status_t
hipower_bundle_next(hipower_bundle_iter_t *iter, unsigned num_am_ids,
                    uint8_t *am_id_p, const void **data_p,
                    uint32_t *length_p)
{
    uint32_t left = iter->length - iter->offset;
    uint64_t header, size;
    uint32_t length;
    uint8_t am_id;

    if (left < HIPOWER_BUNDLE_HDR_SIZE) {
        if (left != 0) {
            return HIPOWER_BUNDLE_BAD_HDR;
        }
        return (iter->count == 0) ? HIPOWER_BUNDLE_EMPTY : HIPOWER_BUNDLE_END;
    }

    /* Read once: the peer may write the frame while we look at it. The
     * empty asm makes the value opaque, so the compiler cannot fetch the
     * header again from the frame for a later use of it (an unaligned
     * frame, which only a hostile peer writes, is why this is a memcpy) */
    memcpy(&header, iter->frame + iter->offset, sizeof(header));
    __asm__ ("" : "+r"(header));
    length = (uint32_t)header;
    am_id  = (uint8_t)(header >> 32);
    size   = hipower_bundle_record_size(length);
    if ((header >> 40) != 0) {
        return HIPOWER_BUNDLE_BAD_HDR;
    }
    /* In 64 bits: a length near 2^32 must not wrap past the check */
    if (size > left) {
        return HIPOWER_BUNDLE_BAD_LEN;
    }
    if ((am_id >= num_am_ids) || (am_id == HIPOWER_SLOT_AM_BUNDLE)) {
        return HIPOWER_BUNDLE_BAD_ID;
    }

    *am_id_p      = am_id;
    *data_p       = iter->frame + iter->offset + HIPOWER_BUNDLE_HDR_SIZE;
    *length_p     = length;
    iter->offset += (uint32_t)size;
    ++iter->count;
    return HIPOWER_BUNDLE_MSG;
}

/* What a status says, for the error message */
const char *hipower_bundle_status_str(hipower_bundle_status_t status);

#endif
