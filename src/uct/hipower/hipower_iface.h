/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_IFACE_H_
#define UCT_HIPOWER_IFACE_H_

#include "hipower_iface_def.h"
#include "hipower_cm.h"

#include <uct/api/uct.h>


/* Receive side (hipower_ep_rx.c): the pool of copies handlers may keep */
ucs_status_t uct_hipower_iface_rx_init(uct_hipower_iface_t *iface,
                                       const uct_iface_params_t *params);
void uct_hipower_iface_rx_cleanup(uct_hipower_iface_t *iface);

/* Handles the device's asynchronous events that concern this interface
 * (hipower_async.c) */
unsigned uct_hipower_iface_progress_async(uct_hipower_iface_t *iface);


ucs_status_t uct_hipower_iface_progress_pending(uct_hipower_iface_t *iface);

unsigned uct_hipower_iface_progress(uct_iface_h tl_iface);

/* Posts the open bundles that can go now, window or not (the process is
 * about to sleep); returns how many stay open */
unsigned uct_hipower_iface_post_bundles(uct_hipower_iface_t *iface);

/* The same, only for the bundles opened at another tick of the safety
 * timer than @a tick (unless @a all): those held for a whole tick */
unsigned uct_hipower_iface_post_bundles_before(uct_hipower_iface_t *iface,
                                               int all, uint32_t tick);

/* Wakeup (hipower_event.c): completion channel and wake-up receive CQ */
ucs_status_t uct_hipower_iface_event_init(uct_hipower_iface_t *iface,
                                          unsigned cq_len);

void uct_hipower_iface_event_cleanup(uct_hipower_iface_t *iface);

unsigned uct_hipower_iface_progress_events(uct_hipower_iface_t *iface);

ucs_status_t uct_hipower_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p);

ucs_status_t uct_hipower_iface_event_arm(uct_iface_h tl_iface, unsigned events);

#endif
