/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_HOLD_H_
#define UCT_HIPOWER_EP_HOLD_H_

#include "hipower_iface_def.h"

#include <sched.h>

/*
 * The bundle window (hipower_ep_hold.c says why): its timer, the send
 * CQ's arm for the async thread, and the marks around every endpoint
 * operation, inline where the operations are.
 */

/* The bundle window's hold timer (hipower_ep_hold.c): with the window on,
 * swaps the interface's endpoint ops for wrappers that keep them apart
 * from the timer */
void uct_hipower_iface_hold_init(uct_hipower_iface_t *iface);

/* With the window on, at the end of the interface's creation: UCX's async
 * thread watches the send CQ's channel (in its thread modes; otherwise,
 * or if that fails, with a warning, held bundles go at the sender's next
 * call or at the timer) */
void uct_hipower_iface_hold_open(uct_hipower_iface_t *iface);


/* An event came that held bundles wait for (tx.post_due): posts them, in
 * the user's thread, under the worker's async lock */
void uct_hipower_iface_hold_due(uct_hipower_iface_t *iface);

/* Takes the send channel's events: the user's arm, which sleeps on them */
void uct_hipower_iface_hold_drain(uct_hipower_iface_t *iface);

/* Removes it, before the interface goes */
void uct_hipower_iface_hold_cleanup(uct_hipower_iface_t *iface);

/* Set while this thread runs the hold timer's post (hipower_ep_hold.c) */
extern __thread int uct_hipower_hold_posting_here;

/* While the bundle window is on, an endpoint operation starts: marked,
 * then clear of the hold timer (hipower_ep_hold.c says why). The count is
 * an atomic add: UCP's wire-up creates and destroys endpoints from UCX's
 * async thread while the user's thread sends. An operation called from
 * within the timer's post (an error handler of an endpoint whose post
 * failed) does not wait for it: it runs in the timer's own thread, which
 * would never get back to end the post. */
static UCS_F_ALWAYS_INLINE void
uct_hipower_held_enter(uct_hipower_iface_t *iface)
{
    (void)__atomic_add_fetch(&iface->tx.hold_ops, 1, __ATOMIC_SEQ_CST);
    while (ucs_unlikely(__atomic_load_n(&iface->tx.hold_posting,
                                        __ATOMIC_SEQ_CST)) &&
           !uct_hipower_hold_posting_here) {
        sched_yield();
    }
}

static UCS_F_ALWAYS_INLINE void
uct_hipower_held_leave(uct_hipower_iface_t *iface)
{
    /* Sequentially consistent, as the async thread's look at hold_ops
     * after it marks post_due: if it saw this operation, this sees the
     * mark, and the bundles it could not post go here, at the end of the
     * call (not from an operation inside progress, or inside the async
     * thread's own post: those post them when they finish) */
    if ((__atomic_sub_fetch(&iface->tx.hold_ops, 1, __ATOMIC_SEQ_CST) == 0) &&
        ucs_unlikely(__atomic_load_n(&iface->tx.post_due, __ATOMIC_SEQ_CST)) &&
        !iface->tx.in_progress && !uct_hipower_hold_posting_here) {
        uct_hipower_iface_hold_due(iface);
    }
}

/* A wrapper of an endpoint operation for the bundle window: the plain one
 * (@a _op, inlined where it is an inline body), between held_enter and
 * held_leave (hipower_ep_hold.c says why) */
#define UCT_HIPOWER_HELD_WRAPPER(_scope, _type, _name, _op, _params, _args) \
    _scope _type _name _params \
    { \
        uct_hipower_iface_t *_iface = ucs_derived_of(tl_ep->iface, \
                                                     uct_hipower_iface_t); \
        _type _ret; \
        \
        uct_hipower_held_enter(_iface); \
        _ret = _op _args; \
        uct_hipower_held_leave(_iface); \
        return _ret; \
    }

#endif
