/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_slot.h"

#include <string.h>


void hipower_slot_hdr_init(hipower_slot_hdr_t *hdr, uint8_t am_id,
                           uint32_t length, uint32_t seq)
{
    hdr->length = length;
    hdr->seq    = (uint16_t)seq;
    hdr->am_id  = am_id;
    hdr->flags  = 0;
    hdr->desc   = 0;
}

ucs_status_t hipower_slot_hdr_parse(const void *slot, size_t slot_size,
                                    uint32_t expected_seq, unsigned num_am_ids,
                                    unsigned *am_id_p, uint32_t *length_p,
                                    const char **reason_p)
{
    hipower_slot_hdr_t hdr;

    /* The size is checked before the header is touched, so that a slot
     * too small for one is not read past its end */
    if (slot_size < HIPOWER_SLOT_HDR_SIZE) {
        *reason_p = "slot smaller than header";
        return UCS_ERR_INVALID_PARAM;
    }

    /* One copy: the peer may still be writing the slot (a buggy or hostile
     * one), and every check must apply to the same values that are then
     * returned. memcpy() also does not care how the slot is aligned. */
    memcpy(&hdr, slot, sizeof(hdr));

    /* Subtracting from slot_size, which is known to be large enough, cannot
     * overflow; adding to length (up to UINT32_MAX) could */
    if (hdr.length > hipower_slot_max_payload(slot_size)) {
        *reason_p = "length exceeds the slot payload";
        return UCS_ERR_INVALID_PARAM;
    }

    if (hdr.am_id >= num_am_ids) {
        *reason_p = "AM id out of range";
        return UCS_ERR_INVALID_PARAM;
    }

    /* Reserved for later protocol versions: a header that uses them is not
     * one this receiver knows how to read */
    if (hdr.flags != 0) {
        *reason_p = "unknown flags";
        return UCS_ERR_INVALID_PARAM;
    }

    if (hdr.seq != (uint16_t)expected_seq) {
        *reason_p = "sequence mismatch";
        return UCS_ERR_INVALID_PARAM;
    }

    *am_id_p  = hdr.am_id;
    *length_p = hdr.length;
    return UCS_OK;
}
