/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_RX_H_
#define UCT_HIPOWER_EP_RX_H_

#include "hipower_ep_def.h"

/*
 * The receive side's walk (hipower_ep_rx.c): its end, inline where the
 * walks end (uct_hipower_ep_rx_enter() begins one, hipower_ep_def.h).
 */

/* The end of a walk that stopped at a frame no honest peer writes, or
 * during which a handler failed the endpoint (uct_hipower_ep_rx_leave()) */
void uct_hipower_ep_rx_failed(uct_hipower_ep_t *ep);

static UCS_F_ALWAYS_INLINE void uct_hipower_ep_rx_leave(uct_hipower_ep_t *ep)
{
    ep->flags &= ~UCT_HIPOWER_EP_FLAG_IN_RX;
    if (ucs_unlikely(ep->flags & (UCT_HIPOWER_EP_FLAG_BAD_FRAME |
                                  UCT_HIPOWER_EP_FLAG_FAILED))) {
        uct_hipower_ep_rx_failed(ep);
    }
}

#endif
