/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_bundle.h"

#include <assert.h>
#include <string.h>


void hipower_bundle_init(hipower_bundle_t *bundle, void *base,
                         uint32_t capacity)
{
    assert(((uintptr_t)base % HIPOWER_BUNDLE_ALIGN) == 0);

    bundle->base     = base;
    bundle->capacity = capacity;
    bundle->length   = 0;
    bundle->count    = 0;
}

void *hipower_bundle_append(hipower_bundle_t *bundle, uint8_t am_id,
                            uint32_t length)
{
    uint64_t header = (uint64_t)length | ((uint64_t)am_id << 32);
    uint32_t size   = (uint32_t)hipower_bundle_record_size(length);
    uint8_t *record = bundle->base + bundle->length;

    assert(hipower_bundle_fits(bundle, length));

    memcpy(record, &header, sizeof(header));
    /* The pad: no stale bytes of ours go to the peer */
    memset(record + HIPOWER_BUNDLE_HDR_SIZE + length, 0,
           size - HIPOWER_BUNDLE_HDR_SIZE - length);
    bundle->length += size;
    ++bundle->count;
    return record + HIPOWER_BUNDLE_HDR_SIZE;
}

void hipower_bundle_iter_init(hipower_bundle_iter_t *iter, const void *frame,
                              uint32_t length)
{
    iter->frame  = frame;
    iter->length = length;
    iter->offset = 0;
    iter->count  = 0;
}

hipower_bundle_status_t hipower_bundle_next(hipower_bundle_iter_t *iter,
                                            unsigned num_am_ids,
                                            uint8_t *am_id_p,
                                            const void **data_p,
                                            uint32_t *length_p)
{
    uint32_t left = iter->length - iter->offset;
    uint64_t header;
    uint32_t length;
    uint8_t am_id;

    if (left == 0) {
        return (iter->count == 0) ? HIPOWER_BUNDLE_EMPTY : HIPOWER_BUNDLE_END;
    }
    if (left < HIPOWER_BUNDLE_HDR_SIZE) {
        return HIPOWER_BUNDLE_BAD_HDR;
    }

    /* Read once: the peer may write the frame while we look at it, and
     * after the barrier the compiler may not read it again for the copy */
    memcpy(&header, iter->frame + iter->offset, sizeof(header));
    __asm__ __volatile__("" ::: "memory");
    length = (uint32_t)header;
    am_id  = (uint8_t)(header >> 32);
    if ((header >> 40) != 0) {
        return HIPOWER_BUNDLE_BAD_HDR;
    }
    /* In 64 bits: a length near 2^32 must not wrap past the check */
    if (hipower_bundle_record_size(length) > left) {
        return HIPOWER_BUNDLE_BAD_LEN;
    }
    if ((am_id >= num_am_ids) || (am_id == HIPOWER_SLOT_AM_BUNDLE)) {
        return HIPOWER_BUNDLE_BAD_ID;
    }

    *am_id_p      = am_id;
    *data_p       = iter->frame + iter->offset + HIPOWER_BUNDLE_HDR_SIZE;
    *length_p     = length;
    iter->offset += (uint32_t)hipower_bundle_record_size(length);
    ++iter->count;
    return HIPOWER_BUNDLE_MSG;
}

const char *hipower_bundle_status_str(hipower_bundle_status_t status)
{
    switch (status) {
    case HIPOWER_BUNDLE_END:
        return "end of the bundle";
    case HIPOWER_BUNDLE_MSG:
        return "a message";
    case HIPOWER_BUNDLE_BAD_HDR:
        return "a record header cut short or with reserved bits set";
    case HIPOWER_BUNDLE_BAD_LEN:
        return "a record longer than what is left of the frame";
    case HIPOWER_BUNDLE_BAD_ID:
        return "an AM id out of range, or a bundle inside a bundle";
    case HIPOWER_BUNDLE_EMPTY:
        return "a bundle without a message";
    }
    return "an unknown status";
}
