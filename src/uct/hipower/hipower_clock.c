/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_clock.h"


/* Exported (default visibility) and in a unit of its own so that calls
 * from the other units go through the PLT: see hipower_clock.h */
ucs_time_t uct_hipower_clock_now(void)
{
    return ucs_get_time();
}
