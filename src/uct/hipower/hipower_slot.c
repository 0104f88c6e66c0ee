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

const char *hipower_slot_check_alignment(int has_align, size_t align,
                                         int has_offset, size_t offset)
{
    if (!has_align) {
        return has_offset ? "am_align_offset is set without am_alignment" :
                            NULL;
    }

    if ((align == 0) || ((align & (align - 1)) != 0)) {
        return "am_alignment is not a power of 2";
    }

    if (has_offset && (offset >= align)) {
        return "am_align_offset is not below am_alignment";
    }

    return NULL;
}

void hipower_slot_layout(size_t slot_size, size_t align, size_t align_offset,
                         hipower_slot_layout_t *layout)
{
    size_t step = hipower_slot_base_align(align);
    size_t data_mod;

    /* The data starts HIPOWER_SLOT_HDR_SIZE after the header: move the
     * header so that data + align_offset lands on a multiple of align.
     * Slots a multiple of align apart keep that in every slot. */
    data_mod           = (HIPOWER_SLOT_HDR_SIZE + align_offset) % align;
    layout->hdr_offset = (uint32_t)((align - data_mod) % align);
    layout->stride     = (uint32_t)(((layout->hdr_offset + slot_size +
                                      step - 1) / step) * step);
    layout->room       = layout->stride - layout->hdr_offset;
}
