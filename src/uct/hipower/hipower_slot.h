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
    uint64_t desc;      /* Receiver-private: overwritten with the recv
                           descriptor pointer before the AM handler runs
                           (uct_iface_release_desc() finds it at data - 8) */
} hipower_slot_hdr_t;

#define HIPOWER_SLOT_HDR_SIZE  sizeof(hipower_slot_hdr_t)

/* Largest AM payload (incl. am_short's 8-byte header) a slot can carry */
static inline size_t hipower_slot_max_payload(size_t slot_size)
{
    return slot_size - HIPOWER_SLOT_HDR_SIZE;
}

/* Fills a header for message @a seq (the sender side) */
static inline void hipower_slot_hdr_init(hipower_slot_hdr_t *hdr,
                                         uint8_t am_id, uint32_t length,
                                         uint32_t seq)
{
    hdr->length = length;
    hdr->seq    = (uint16_t)seq;
    hdr->am_id  = am_id;
    hdr->flags  = 0;
    hdr->desc   = 0;
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
     * one this receiver knows how to read. The receiver-private desc is
     * not copied. */
    memcpy(&hdr, slot, offsetof(hipower_slot_hdr_t, desc));
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
