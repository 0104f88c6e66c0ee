/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_HELD_H_
#define UCT_HIPOWER_HELD_H_

#include "hipower_iface_def.h"

/* With the bundle window on, swaps the interface's endpoint ops for the
 * wrappers that keep them apart from the hold timer (hipower_held.c);
 * after uct_hipower_iface_hold_init() */
void uct_hipower_iface_held_init(uct_hipower_iface_t *iface);

#endif
