/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_SLOT_H_
#define UCT_HIPOWER_SLOT_H_

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * What a sender writes at the start of a receive slot, followed by the
 * active message's data (for am_short: the 64-bit header, then the payload).
 * The receiver trusts none of it: hipower_slot_hdr_parse() checks it against
 * the slot's size and what the receiver expects before anything is read.
 */
typedef struct hipower_slot_hdr {
    uint32_t length;    /* Bytes of AM data following this header */
    uint16_t seq;       /* Low 16 bits of the message's sequence number */
    uint8_t  am_id;     /* Active message id */
    uint8_t  flags;     /* Reserved, 0 */
    uint64_t reserved;  /* 0; never read: nothing of the receiver's own
                           state is ever kept in memory a peer can write */
} hipower_slot_hdr_t;

#define HIPOWER_SLOT_HDR_SIZE  sizeof(hipower_slot_hdr_t)

/* Largest AM payload (incl. am_short's 8-byte header) a slot can carry */
static inline size_t hipower_slot_max_payload(size_t slot_size)
{
    return slot_size - HIPOWER_SLOT_HDR_SIZE;
}

/*
 * Where a message goes in a receive slot. The receiver decides, from its
 * own interface parameters, and tells the sender in the endpoint address:
 * the slots are "stride" bytes apart and the header starts "hdr_offset"
 * bytes into each. Every slot has room for SLOT_SIZE bytes from the header
 * on, whatever the alignment, so the largest message a sender may write
 * does not depend on which peer it writes to.
 */
typedef struct hipower_slot_layout {
    uint32_t stride;       /* Bytes from one slot to the next */
    uint32_t hdr_offset;   /* Of the header in a slot */
    uint32_t room;         /* Bytes from the header to the slot's end */
} hipower_slot_layout_t;

/* Slots are at least cache-line aligned */
#define HIPOWER_SLOT_ALIGN  64

/**
 * Checks UCT's am_alignment/am_align_offset interface parameters (uct.h):
 * an offset only with an alignment, the alignment a power of 2, the offset
 * below it. Returns NULL if valid, else what is wrong.
 */
const char *hipower_slot_check_alignment(int has_align, size_t align,
                                         int has_offset, size_t offset);

/**
 * Lays out slots with @a slot_size bytes of header and data each, so that
 * the data (right after the header) plus @a align_offset is a multiple of
 * @a align in every slot, given an arena that starts at a multiple of
 * hipower_slot_base_align(@a align). @a align = 1: no alignment asked for,
 * the header starts the slot.
 */
void hipower_slot_layout(size_t slot_size, size_t align, size_t align_offset,
                         hipower_slot_layout_t *layout);

/* Alignment the arena's base needs for hipower_slot_layout() */
static inline size_t hipower_slot_base_align(size_t align)
{
    return (align > HIPOWER_SLOT_ALIGN) ? align : HIPOWER_SLOT_ALIGN;
}

/* Fills a header for message @a seq (the sender side) */
static inline void hipower_slot_hdr_init(hipower_slot_hdr_t *hdr,
                                         uint8_t am_id, uint32_t length,
                                         uint32_t seq)
{
    hdr->length = length;
    hdr->seq    = (uint16_t)seq;
    hdr->am_id  = am_id;
    hdr->flags    = 0;
    hdr->reserved = 0;
}

/* Why hipower_slot_hdr_parse() rejected @a copy: sets *reason_p */
ucs_status_t hipower_slot_hdr_reject(const hipower_slot_hdr_t *copy,
                                     size_t slot_size, uint32_t expected_seq,
                                     unsigned num_am_ids,
                                     const char **reason_p);

/**
 * Validates the header at the start of a slot of @a slot_size bytes.
 * @a num_am_ids is the number of valid AM ids (UCT_AM_ID_MAX).
 * On success sets *am_id_p and *length_p. On failure returns
 * UCS_ERR_INVALID_PARAM and sets *reason_p to a static string that says
 * what was wrong (for an error message that also names the peer); nothing
 * outside the slot is read. Inline, with one branch for a good header: it
 * runs once per received message.
 */
static inline ucs_status_t
hipower_slot_hdr_parse(const void *slot, size_t slot_size,
                       uint32_t expected_seq, unsigned num_am_ids,
                       unsigned *am_id_p, uint32_t *length_p,
                       const char **reason_p)
{
    hipower_slot_hdr_t hdr;

    /* The size is checked before the header is touched, so that a slot
     * too small for one is not read past its end */
    *am_id_p  = 0;
    *length_p = 0;
    if (__builtin_expect(slot_size < HIPOWER_SLOT_HDR_SIZE, 0)) {
        return hipower_slot_hdr_reject(NULL, slot_size, expected_seq,
                                       num_am_ids, reason_p);
    }

    /* One copy: the peer may still be writing the slot (a buggy or hostile
     * one), and every check must apply to the same values that are then
     * returned. memcpy() also does not care how the slot is aligned.
     * Subtracting from slot_size, which is known to be large enough, cannot
     * overflow; adding to length (up to UINT32_MAX) could. Flags are
     * reserved for later protocol versions: a header that uses them is not
     * one this receiver knows how to read. The reserved word is not
     * copied. */
    memcpy(&hdr, slot, offsetof(hipower_slot_hdr_t, reserved));
    if (__builtin_expect((hdr.length > hipower_slot_max_payload(slot_size)) |
                         (hdr.am_id >= num_am_ids) | (hdr.flags != 0) |
                         (hdr.seq != (uint16_t)expected_seq), 0)) {
        return hipower_slot_hdr_reject(&hdr, slot_size, expected_seq,
                                       num_am_ids, reason_p);
    }

    *am_id_p  = hdr.am_id;
    *length_p = hdr.length;
    return UCS_OK;
}

#endif
