/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_RX_H_
#define UCT_HIPOWER_EP_RX_H_

#include "hipower_ep_def.h"

/*
 * The receive side's walk (hipower_ep_rx.c): its start and end, inline
 * where the walks run (here and in hipower_event.c).
 */

/*
 * Around everything that delivers an endpoint's messages (its receive
 * loop, and a run's last filled slot closed from an event): handlers may
 * call UCT again -- fail this endpoint (uct_ep_flush() with
 * UCT_FLUSH_FLAG_CANCEL, as UCP's ucp_ep_close_nbx(FORCE) does) or
 * progress the interface. While the walk runs (UCT_HIPOWER_EP_FLAG_IN_RX)
 * the endpoint's runs stay with it (uct_hipower_ep_rx_peer_gone() waits)
 * and a nested progress leaves it alone: the walk still reads the slots
 * and moves the ring, and a second walk would deliver its messages twice.
 * Returns 0 if a walk of the endpoint is already under way.
 */
static UCS_F_ALWAYS_INLINE int uct_hipower_ep_rx_enter(uct_hipower_ep_t *ep)
{
    if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_IN_RX)) {
        return 0;
    }
    uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_IN_RX);
    return 1;
}

/* The peer's windows are bound: it wrote to us, or a request of ours after
 * our hello completed */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_peer_ready(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_PEER_READY);
}

/* @a n more receive completions of the wake-up CQ are due that no sleeper
 * waits for (a peer's write came before its first-contact wake-up was
 * polled; a closed QP's receives are to be flushed): progress polls the
 * CQ until they came */
static UCS_F_ALWAYS_INLINE void
uct_hipower_rx_expect(uct_hipower_iface_t *iface, unsigned n)
{
    iface->rx.expected += n;
}

/* @a n of them came, or will not come */
static UCS_F_ALWAYS_INLINE void
uct_hipower_rx_expect_done(uct_hipower_iface_t *iface, unsigned n)
{
    iface->rx.expected -= n;
}

/* The peer's first write was counted among the receive completions due
 * (UCT_HIPOWER_EP_FLAG_IMM_DUE, uct_hipower_ep_rx_first_contact()): it
 * completed, or the endpoint goes and its receives are flushed */
static UCS_F_ALWAYS_INLINE void uct_hipower_ep_rx_imm_done(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_IMM_DUE) {
        uct_hipower_ep_flags_clear(ep, rx, UCT_HIPOWER_EP_FLAG_IMM_DUE);
        uct_hipower_rx_expect_done(uct_hipower_ep_iface(ep), 1);
    }
}

/* The peer's first-contact wake-up was polled: it is due no more, and
 * counted no more if a message of the peer came before it */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_rx_first_imm_done(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_rx_imm_done(ep);
    uct_hipower_ep_flags_clear(ep, rx, UCT_HIPOWER_EP_FLAG_FIRST_IMM);
}

/* The end of a walk that stopped at a frame no honest peer writes, or
 * during which a handler failed the endpoint (uct_hipower_ep_rx_leave()) */
void uct_hipower_ep_rx_failed(uct_hipower_ep_t *ep);

static UCS_F_ALWAYS_INLINE void uct_hipower_ep_rx_leave(uct_hipower_ep_t *ep)
{
    /* Read before the lane's byte store: a wider load right after it
     * would wait for the store (no store-to-load forwarding) */
    uint64_t flags = ep->flags.all;

    uct_hipower_ep_flags_clear(ep, rx, UCT_HIPOWER_EP_FLAG_IN_RX);
    if (ucs_unlikely(flags & (UCT_HIPOWER_EP_FLAG_BAD_FRAME |
                              UCT_HIPOWER_EP_FLAG_FAILED))) {
        uct_hipower_ep_rx_failed(ep);
    }
}

#endif
