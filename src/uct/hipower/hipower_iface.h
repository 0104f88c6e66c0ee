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

/* The bundle window's hold timer (hipower_ep_hold.c): with the window on,
 * swaps the interface's endpoint ops for wrappers that keep them apart
 * from the timer */
void uct_hipower_iface_hold_init(uct_hipower_iface_t *iface);

/* With the window on, at the end of the interface's creation: UCX's async
 * thread watches the send CQ's channel (in its thread modes; otherwise,
 * or if that fails, with a warning, held bundles go at the sender's next
 * call or at the timer) */
void uct_hipower_iface_hold_open(uct_hipower_iface_t *iface);

/* Adds the timer: the window held a send and it is not running */
void uct_hipower_iface_hold_start(uct_hipower_iface_t *iface);

/* The window held a send and the send CQ is not armed for it: arms it,
 * and makes sure a completion that came before the arm is not missed */
void uct_hipower_iface_hold_arm(uct_hipower_iface_t *iface);

/* An event came that held bundles wait for (tx.post_due): posts them, in
 * the user's thread, under the worker's async lock */
void uct_hipower_iface_hold_due(uct_hipower_iface_t *iface);

/* Takes the send channel's events: the user's arm, which sleeps on them */
void uct_hipower_iface_hold_drain(uct_hipower_iface_t *iface);

/* Removes it, before the interface goes */
void uct_hipower_iface_hold_cleanup(uct_hipower_iface_t *iface);

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
