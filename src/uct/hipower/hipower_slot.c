/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_slot.h"

#include <string.h>


ucs_status_t hipower_slot_hdr_reject(const hipower_slot_hdr_t *copy,
                                     size_t slot_size, uint32_t expected_seq,
                                     unsigned num_am_ids,
                                     const char **reason_p)
{
    hipower_slot_hdr_t hdr;

    /* @a copy is NULL then: the slot was never read */
    if (slot_size < HIPOWER_SLOT_HDR_SIZE) {
        *reason_p = "slot smaller than header";
        return UCS_ERR_INVALID_PARAM;
    }

    hdr = *copy;
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

    /* The inline check let through nothing that gets here */
    *reason_p = "header rejected";
    return UCS_ERR_INVALID_PARAM;
}
