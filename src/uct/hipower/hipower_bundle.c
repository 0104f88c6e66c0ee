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
