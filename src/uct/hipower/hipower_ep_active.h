/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_ACTIVE_H_
#define UCT_HIPOWER_EP_ACTIVE_H_

#include "hipower_ep_def.h"

/*
 * The active set's marks of an endpoint (hipower_ep_active.c decides on
 * them: demotion, its handshake), and the count of its wake-up receives,
 * inline where progress and the wake-up events change them.
 */

/* The endpoint had news (progress delivered or completed something): it
 * is not idle, and a demotion handshake out must not demote it */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_news(uct_hipower_ep_t *ep, ucs_time_t now)
{
    ep->event.last_news  = now;
    uct_hipower_ep_flags_set(ep, active, UCT_HIPOWER_EP_FLAG_NEWS);
}

/* A wake-up of an endpoint still active: a demotion handshake out must
 * not undo it */
static UCS_F_ALWAYS_INLINE void uct_hipower_ep_news_woke(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_flags_set(ep, active, UCT_HIPOWER_EP_FLAG_NEWS);
}

/* A wake-up receive posted by uct_hipower_ep_post_event_recvs() completed,
 * consumed or flushed: one fewer on the QP, alive or in the gc (which
 * waits for none to be left before it destroys the QP) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_txqp_recv_done(uct_hipower_txqp_t *txqp)
{
    ucs_assert(txqp->recvs > 0);
    --txqp->recvs;
}

#endif
