/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_slot.h"

#include <string.h>


ucs_status_t hipower_slot_trailer_reject(hipower_slot_trailer_t trailer,
                                         size_t max_payload,
                                         uint32_t expected_seq,
                                         unsigned num_am_ids,
                                         const char **reason_p)
{
    if (((trailer >> 40) & 0xff) != HIPOWER_SLOT_MAGIC) {
        *reason_p = "not a protocol v2 trailer";
    } else if ((uint16_t)(trailer >> 48) != (uint16_t)expected_seq) {
        *reason_p = "sequence mismatch";
    } else if ((uint32_t)trailer > max_payload) {
        *reason_p = "length exceeds the slot payload";
    } else if (((trailer >> 32) & 0xff) >= num_am_ids) {
        *reason_p = "AM id out of range";
    } else {
        /* The inline check let through nothing that gets here */
        *reason_p = "trailer rejected";
    }
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

    /* Room for the largest message however its start is aligned (up to
     * align - 1 bytes of pad), then the trailer; slots a multiple of
     * align apart keep the alignment in every slot, and the trailer, at
     * the slot's end, 8-byte aligned for a one-load read */
    layout->stride         = (uint32_t)(((hipower_slot_max_payload(slot_size) +
                                          (align - 1) +
                                          HIPOWER_SLOT_TRAILER_SIZE +
                                          step - 1) / step) * step);
    layout->trailer_offset = layout->stride - HIPOWER_SLOT_TRAILER_SIZE;
    layout->align          = (uint32_t)align;
    layout->align_offset   = (uint32_t)align_offset;
}

const char *hipower_slot_layout_check(const hipower_slot_layout_t *layout,
                                      size_t max_payload)
{
    if ((layout->align == 0) || ((layout->align & (layout->align - 1)) != 0) ||
        (layout->align_offset >= layout->align)) {
        return "invalid alignment";
    }

    /* Both trailer words are read with one aligned load each */
    if ((layout->trailer_offset % sizeof(uint64_t)) != 0) {
        return "trailer not 8-byte aligned";
    }

    if ((uint64_t)layout->trailer_offset + HIPOWER_SLOT_TRAILER_SIZE >
        layout->stride) {
        return "trailer outside the slot";
    }

    /* hipower_slot_data_offset() loses up to align - 1 bytes to the
     * alignment: the largest message must still start in the slot */
    if ((uint64_t)layout->trailer_offset < max_payload + layout->align - 1) {
        return "slots too small for the largest message";
    }

    return NULL;
}
