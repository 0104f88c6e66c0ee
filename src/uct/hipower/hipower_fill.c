/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_fill.h"


const char *hipower_fill_status_str(hipower_fill_status_t status)
{
    switch (status) {
    case HIPOWER_FILL_END:
        return "end of the filled slot";
    case HIPOWER_FILL_BATCH:
        return "a batch";
    case HIPOWER_FILL_BAD_FOOTER:
        return "a batch footer without its tag";
    case HIPOWER_FILL_BAD_SIZE:
        return "a batch size that leaves the slot, is not a multiple of 8 "
               "or holds no record";
    case HIPOWER_FILL_BEHIND:
        return "a trailer whose batch count is below the batches "
               "delivered (an older write placed again)";
    case HIPOWER_FILL_EMPTY:
        return "a filled slot without a batch";
    }
    return "an unknown status";
}
