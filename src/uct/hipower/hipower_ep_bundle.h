/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_BUNDLE_H_
#define UCT_HIPOWER_EP_BUNDLE_H_

#include "hipower_ep_grant.h"
#include "hipower_tx_frame.h"

/*
 * Bundles (hipower_ep_bundle.c): small messages that wait in the endpoint
 * for the bundle window, then go together in one frame; inline where the
 * send path tests them.
 */

/* Adds the timer: the window held a send and it is not running */
void uct_hipower_iface_hold_start(uct_hipower_iface_t *iface);

/* The window held a send and the send CQ is not armed for it: arms it,
 * and makes sure a completion that came before the arm is not missed */
void uct_hipower_iface_hold_arm(uct_hipower_iface_t *iface);

/* The window holds a send: the completion of the frame ahead of it must
 * be seen without the sender, so the send CQ is armed for the async
 * thread if it is not; and the safety timer must run (hipower_ep_hold.c) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_hold(uct_hipower_iface_t *iface, int count)
{
    iface->stats.tx_window += count;
    iface->bundle.hold_seen     = 1;
    if (ucs_unlikely(!*(volatile int*)&iface->tx.armed)) {
        uct_hipower_iface_hold_arm(iface);
    }
    if (ucs_unlikely(uct_hipower_timer_state(&iface->tx.hold_timer) ==
                     UCT_HIPOWER_TIMER_IDLE)) {
        uct_hipower_iface_hold_start(iface);
    }
}

/* Whether a send was held since the last call, forgotten then: the hold
 * timer's tick asks (hipower_ep_hold.c). Cleared only when set, so that a
 * hold marked meanwhile by the sending thread is not lost. */
static UCS_F_ALWAYS_INLINE int
uct_hipower_iface_hold_take(uct_hipower_iface_t *iface)
{
    if (!iface->bundle.hold_seen) {
        return 0;
    }
    iface->bundle.hold_seen = 0;
    return 1;
}

/*
 * uct_hipower_ep_tx_room() for a frame of short or bcopy active messages,
 * which may wait in the endpoint's bundle: it also needs the bundle window
 * open (UCX_HIPOWER_BUNDLE_WINDOW: few requests in flight), or it waits
 * for the completion that opens it, and the messages after it join it.
 * Zero-copy frames, which cannot be bundled, do not look at the window.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_tx_am_room(uct_hipower_ep_t *ep, int count)
{
    ucs_status_t status;

    status = uct_hipower_ep_tx_room(ep, count);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (ucs_unlikely(hipower_txwin_full(&ep->tx.win,
                                        ep->txqp.txq.acked_sn))) {
        uct_hipower_ep_hold(uct_hipower_ep_iface(ep), count);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/* Bundles (hipower_ep_bundle.c) */

/* Posts the open bundle if a slot and room are there, and with
 * @a windowed, the bundle window is open (uct_hipower_ep_tx_am_room()):
 * UCS_OK when none stays open, UCS_ERR_NO_RESOURCE while it waits, or the
 * post's error. Unwindowed when nothing more will join it or it must go
 * now: it is full, a flush, an arm or an operation that is not bundled
 * waits for it. */
ucs_status_t uct_hipower_ep_bundle_post(uct_hipower_ep_t *ep, int windowed);

/* Opens a bundle (UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN), empty; the endpoint is
 * listed for progress, which posts it once there is room */
ucs_status_t uct_hipower_ep_bundle_open(uct_hipower_ep_t *ep);

/*
 * Appends an active message (@a hdr_length bytes of @a hdr, then
 * @a length bytes of @a data) to the open bundle, opening one if none is;
 * then posts the bundle if it can go now. UCS_ERR_NO_RESOURCE, with nothing
 * changed, if it does not fit.
 */
ucs_status_t uct_hipower_ep_bundle_add(uct_hipower_ep_t *ep, uint8_t am_id,
                                       const void *hdr, unsigned hdr_length,
                                       const void *data, unsigned length);

/* Drops the open bundle, unsent (the endpoint failed, was canceled or is
 * destroyed): its messages are lost, as posted ones are then */
void uct_hipower_ep_bundle_drop(uct_hipower_ep_t *ep);

/* The endpoint is destroyed: the open bundle is posted if it can go now,
 * else dropped; no error is reported */
void uct_hipower_ep_bundle_leave(uct_hipower_ep_t *ep);

/* Before an operation that is not bundled (zero-copy, RMA) or a flush:
 * the open bundle goes first, window or not, or the operation waits
 * (UCS_ERR_NO_RESOURCE) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_bundle_first(uct_hipower_ep_t *ep)
{
    if (ucs_likely(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN))) {
        return UCS_OK;
    }
    return uct_hipower_ep_bundle_post(ep, 0);
}

/* A message too large for what the open bundle has left: the bundle goes
 * first, whatever the window, and gathers no more until it has gone
 * (UCT_HIPOWER_EP_FLAG_BUNDLE_FULL: a bcopy is refused before its packer
 * runs) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_bundle_post_full(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_flags_set(ep, bundle, UCT_HIPOWER_EP_FLAG_BUNDLE_FULL);
    return uct_hipower_ep_bundle_post(ep, 0);
}

/*
 * A short or bcopy message joined the open bundle (hipower_bundle_append()):
 * the bundle goes now if it can (uct_hipower_ep_bundle_post(), windowed).
 * Under load it mostly cannot -- no slot or no room came back since it
 * opened, or the window is still full -- and that is decided here without
 * a call; progress, flush, arm and the hold timer post it later (the
 * endpoint is listed for progress while its bundle is open). A gathering
 * pending dispatch posts it when all its requests have joined.
 */
static UCS_F_ALWAYS_INLINE void uct_hipower_ep_bundle_joined(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_GATHER) {
        return;
    }

    if (ucs_likely(!uct_hipower_ep_tx_granted(ep))) {
        if (hipower_txwin_full(&ep->tx.win, ep->txqp.txq.acked_sn)) {
            /* Held by the window (asked first: with the window on, that is
             * what holds a bundle under load): its deadline must run. The
             * timer posts the bundle once there is a slot and room too. */
            uct_hipower_ep_hold(uct_hipower_ep_iface(ep), 0);
            return;
        }
        if ((hipower_tx_ring_free(&ep->tx.ring) == 0) ||
            !uct_hipower_ep_has_room(ep, ep->peer.msg_wrs + 1)) {
            return;
        }
    }

    /* Room came back, or a new run was granted (adopted there) */
    (void)uct_hipower_ep_bundle_post(ep, 1);
}

/* Copies a message (@a hdr_length bytes of @a hdr, then @a length bytes of
 * @a data) into the open bundle, which has room for it, and lets the
 * bundle go if it can (uct_hipower_ep_bundle_joined()) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_bundle_copy_in(uct_hipower_ep_t *ep, uint8_t am_id,
                              const void *hdr, unsigned hdr_length,
                              const void *data, unsigned length)
{
    uint8_t *dst = hipower_bundle_append(&ep->tx.bundle.frame, am_id,
                                         hdr_length + length);

    memcpy(dst, hdr, hdr_length);
    memcpy(dst + hdr_length, data, length);
    uct_hipower_ep_bundle_joined(ep);
}

#endif
