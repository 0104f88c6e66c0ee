/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Bundles, sender side (UCX_HIPOWER_BUNDLE, docs/protocol.md 2.1). A short
 * or bcopy active message that cannot be posted when it is sent -- no free
 * slot of the peer, no room in the send queue or completion queue -- is
 * packed into the endpoint's open bundle instead of being refused, and so
 * is every later one until the bundle has gone (the endpoint's order). The
 * bundle is one frame (hipower_bundle.h) that one RDMA_WRITE carries into
 * one slot: many messages for the price of one work request, one packet
 * for small ones, one trailer, one slot of the receiver.
 *
 * A message that can be posted is never held back: a bundle opens only
 * when a send would otherwise be refused, and it goes out as soon as there
 * is room -- with the message that finds room, from the interface's
 * progress (the endpoint stays in iface->pending_eps while its bundle is
 * open), from flush, and before an event arm lets the process sleep. Zero
 * copy and RMA operations let it go first (uct_hipower_ep_bundle_first()).
 * A bundle of one message goes as that message's own frame.
 *
 * With UCX_HIPOWER_BUNDLE_FILL (hipower_fill.h) a bundle of two or more
 * messages does not take a slot of its own when the slot the endpoint's
 * last bundle went into has room: it goes there, below that bundle, as a
 * write of its own and a rewrite of the slot's trailer. Such a batch needs
 * no free slot of the peer; the slot stays open for more until the
 * endpoint takes another slot for anything. With the bundle window on, a
 * message that finds the window open goes there too, as a batch of one,
 * posted at once (uct_hipower_ep_fill_open()).
 *
 * Pending requests have waited already: when a dispatch finds two or more
 * of an endpoint's, their messages are gathered into the bundle and it is
 * posted once, at the end of the dispatch (UCT_HIPOWER_EP_FLAG_GATHER) --
 * one work request, one doorbell and, for small ones, one packet for all
 * of them, a few instructions after the first would have gone.
 */

#include "hipower_ep.h"

#include <ucs/debug/log.h>
#include <string.h>


ucs_status_t uct_hipower_ep_bundle_open(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;

    /* A buffer with room past the frame for a bcopy packed in place */
    op = ucs_mpool_get_inline(&iface->tx_bundle_mp);
    if (op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    op->handler = NULL;
    op->flags   = 0;
    op->comp    = NULL;

    /* The buffer holds the largest message, its record header and pad
     * and a trailer (UCT_HIPOWER_BCOPY_SLACK covers header and pad);
     * uct_hipower_ep_bundle_fits() keeps a frame of more than one message
     * within a slot */
    hipower_bundle_init(&ep->tx.bundle.frame, uct_hipower_tx_op_buffer(op),
                        iface->config.max_payload +
                        2 * HIPOWER_BUNDLE_HDR_SIZE);
    ep->tx.bundle.op   = op;
    ep->tx.bundle.tick = iface->hold.tick;
    uct_hipower_ep_flags_set(ep, bundle, UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN);
    ++iface->bundle.num_open;
    /* Progress posts it once there is room */
    uct_hipower_ep_add_pending_list(ep);
    return UCS_OK;
}

static void uct_hipower_ep_bundle_closed(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_flags_clear(ep, bundle,
                               UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN |
                               UCT_HIPOWER_EP_FLAG_BUNDLE_FULL);
    ep->tx.bundle.op = NULL;
    --uct_hipower_ep_iface(ep)->bundle.num_open;
}

/* The ack word bits of a run's first frame that say where the old run
 * ended, and those of the frame after a filled slot that give its final
 * count (hipower_slot.h): a batch that rewrites that frame's trailer keeps
 * them, so that every rewrite says the same */
#define UCT_HIPOWER_FILL_ACK_KEEP  (HIPOWER_SLOT_ACK_SWITCH | \
                                    (0xffffull << 32) | \
                                    HIPOWER_SLOT_ACK_FILL_MASK)

/*
 * The open bundle, two or more messages (or one, with the window:
 * uct_hipower_ep_fill_open()), to a peer that takes filled slots: one more
 * batch of the slot our bundles fill if it has room (no free slot needed),
 * else the first batch of a new one. Nothing else on failure. @a windowed:
 * as for uct_hipower_ep_bundle_send().
 */
static ucs_status_t uct_hipower_ep_bundle_fill(uct_hipower_ep_t *ep,
                                               int windowed)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_bundle_t *frame    = &ep->tx.bundle.frame;
    uct_hipower_tx_op_t *op    = ep->tx.bundle.op;
    uint64_t ack_flags;
    ucs_status_t status;
    uint32_t size;

    /* The footer right after the records: stored at every try, since
     * records added after a refused one overwrite it */
    size = hipower_fill_footer_store(frame->base, frame->length);

    /* Not into the old run once the receiver granted a new one: the next
     * frame adopts it */
    if (uct_hipower_ep_fill_takes(ep, size) &&
        (*(volatile uint64_t*)&ep->ctrl->grant.epoch == ep->tx.epoch)) {
        /* The batch, the trailer, and a recycle READ that may join them */
        if (!uct_hipower_ep_has_room(ep, 3)) {
            return UCS_ERR_NO_RESOURCE;
        }
        if (windowed && hipower_txwin_full(&ep->tx.win,
                                           ep->txqp.txq.acked_sn)) {
            uct_hipower_ep_hold(iface, 0);
            return UCS_ERR_NO_RESOURCE;
        }
        status = uct_hipower_ep_send_batch(ep, frame->base, size, op);
        if (status != UCS_OK) {
            return status;
        }
        hipower_fill_tx_add(&ep->tx.fill, size);
        iface->stats.tx_fill_batches++;
        return UCS_OK;
    }

    status = windowed ? uct_hipower_ep_tx_am_room(ep, 0) :
             uct_hipower_ep_tx_room(ep, 0);
    if (status != UCS_OK) {
        return status;
    }

    /* The frame says them once; and the count of the filled slot it
     * closes, if one is open */
    ack_flags = ep->tx.ack_flags | uct_hipower_ep_fill_final_bits(ep);
    status    = uct_hipower_ep_send_fill_first(ep, frame->base, size, op);
    if (status != UCS_OK) {
        return status;
    }

    /* A run of one slot: the receiver moves past it at once (it cannot
     * wait for a next slot that needs this one back) */
    hipower_fill_tx_start(&ep->tx.fill, ep->tx.ring.head - 1,
                          (ep->tx.ring.num_slots > 1) ? size : 0,
                          ack_flags & UCT_HIPOWER_FILL_ACK_KEEP);
    iface->stats.tx_fills++;
    return UCS_OK;
}

/* Posts the open bundle if it can go now; nothing else on failure.
 * @a windowed: only when the bundle window is open (it paces a stream; a
 * bundle that must go now, on destroy, needs only a slot and room) */
static ucs_status_t uct_hipower_ep_bundle_send(uct_hipower_ep_t *ep,
                                               int windowed)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_bundle_t *frame    = &ep->tx.bundle.frame;
    uct_hipower_tx_op_t *op    = ep->tx.bundle.op;
    uint32_t count, length;
    ucs_status_t status;
    uint8_t am_id;
    uint8_t *data;
    uint64_t hdr;

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        return UCS_OK;
    }

    /* Into a filled slot: the open one if it has room, or a new one if
     * this bundle leaves room for more (one that fills most of a slot
     * goes as a bundle frame: a slot kept open for a few hundred bytes
     * costs the receiver a look at it on every progress call). One
     * message: into the open one with the window on, else a frame of its
     * own (uct_hipower_ep_fill_open(); fill_takes() checks it is open) */
    count = frame->count;
    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FILL) &&
        (((count > 1) &&
          ((frame->length <= iface->config.max_payload / 2) ||
           uct_hipower_ep_fill_takes(ep, frame->length +
                                         HIPOWER_FILL_FOOTER_SIZE))) ||
         ((count == 1) && (iface->config.bundle_window != 0) &&
          uct_hipower_ep_fill_takes(ep, frame->length +
                                        HIPOWER_FILL_FOOTER_SIZE)))) {
        status = uct_hipower_ep_bundle_fill(ep, windowed);
        if (status != UCS_OK) {
            return status;
        }
        /* As the receiver counts it: every batch is a bundle */
        iface->stats.tx_bundles++;
        iface->stats.tx_bundled += count;
        goto closed;
    }

    status = windowed ? uct_hipower_ep_tx_am_room(ep, 0) :
             uct_hipower_ep_tx_room(ep, 0);
    if (status != UCS_OK) {
        return status;
    }

    if (count == 1) {
        /* One message: its own frame, as if it had gone when sent */
        memcpy(&hdr, frame->base, sizeof(hdr));
        am_id  = (uint8_t)(hdr >> 32);
        length = (uint32_t)hdr;
        data   = frame->base + HIPOWER_BUNDLE_HDR_SIZE;
    } else {
        am_id  = HIPOWER_SLOT_AM_BUNDLE;
        length = frame->length;
        data   = frame->base;
    }

    /* The trailer right after the frame, in the same buffer */
    status = uct_hipower_ep_send_frame(ep, data, length, am_id, op);
    if (status != UCS_OK) {
        return status;
    }

    if (count > 1) {
        iface->stats.tx_bundles++;
        iface->stats.tx_bundled += count;
    }

closed:
    uct_hipower_ep_bundle_closed(ep);
    /* Counted as messages, as the receiver counts them */
    iface->stats.tx_msgs += count - 1;
    return UCS_OK;
}

ucs_status_t uct_hipower_ep_bundle_post(uct_hipower_ep_t *ep, int windowed)
{
    ucs_status_t status = uct_hipower_ep_bundle_send(ep, windowed);

    if ((status != UCS_OK) && (status != UCS_ERR_NO_RESOURCE) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
        /* Nothing of it went out, and its messages were accepted: the
         * endpoint cannot keep its promise, and says so */
        uct_hipower_ep_fail(ep, status);
    }
    return status;
}

ucs_status_t uct_hipower_ep_bundle_add(uct_hipower_ep_t *ep, uint8_t am_id,
                                       const void *hdr, unsigned hdr_length,
                                       const void *data, unsigned length)
{
    uint32_t total = hdr_length + length;
    ucs_status_t status;

    if (!uct_hipower_ep_bundle_fits(ep, total)) {
        return UCS_ERR_NO_RESOURCE;
    }

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        status = uct_hipower_ep_bundle_open(ep);
        if (status != UCS_OK) {
            return status;
        }
    }

    uct_hipower_ep_bundle_copy_in(ep, am_id, hdr, hdr_length, data, length);

    /* Accepted. If there is room now (a completion or a slot came back
     * since the last refusal), everything goes at once; if not, progress,
     * flush, arm or the hold timer sends it, and a failed post fails the
     * endpoint, which reports it: the message itself was accepted */
    return UCS_OK;
}

void uct_hipower_ep_bundle_drop(uct_hipower_ep_t *ep)
{
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        return;
    }

    ucs_debug(UCT_HIPOWER_EP_FMT ": %u bundled message(s) dropped unsent",
              UCT_HIPOWER_EP_ARG(ep), ep->tx.bundle.frame.count);
    ucs_mpool_put_inline(ep->tx.bundle.op);
    uct_hipower_ep_bundle_closed(ep);
}

void uct_hipower_ep_bundle_leave(uct_hipower_ep_t *ep)
{
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        return;
    }

    /* As the messages posted before: they go if they can (the user did
     * not flush, so nothing says whether they arrive) */
    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) ||
        (uct_hipower_ep_bundle_send(ep, 0) != UCS_OK)) {
        uct_hipower_ep_bundle_drop(ep);
    }
}

unsigned uct_hipower_iface_post_bundles_before(uct_hipower_iface_t *iface,
                                               int all, uint32_t tick)
{
    uct_hipower_ep_t *ep, *tmp;

    /* Every endpoint with a bundle open is listed for dispatch; a failed
     * post fails only its own endpoint (which unlists it) */
    ucs_list_for_each_safe(ep, tmp, &iface->pending_eps, pending_list) {
        if (iface->bundle.num_open == 0) {
            break;
        }
        if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) &&
            (all || (ep->tx.bundle.tick != tick))) {
            (void)uct_hipower_ep_bundle_post(ep, 0);
        }
    }
    return iface->bundle.num_open;
}

unsigned uct_hipower_iface_post_bundles(uct_hipower_iface_t *iface)
{
    return uct_hipower_iface_post_bundles_before(iface, 1, 0);
}

/* The bundle window's start, when it holds a send: the hold timer (the
 * safety net) and the send CQ's arm for UCX's async thread; the rest of
 * the window, which posts what they found, is hipower_ep_hold.c */

void uct_hipower_iface_hold_start(uct_hipower_iface_t *iface)
{
    ucs_status_t status;

    status = uct_hipower_timer_start(&iface->tx.hold_timer);
    if (status != UCS_OK) {
        /* Held bundles still go at the completion event, and at the
         * sender's progress, flush and arm */
        ucs_warn("hipower %s: no timer for UCX_" UCT_HIPOWER_CONFIG_PREFIX
                 "BUNDLE_HOLD_TIME (%s): a bundle whose completion event is "
                 "lost waits for the sender's next call", iface->dev_name,
                 ucs_status_string(status));
    }
}

void uct_hipower_iface_hold_arm(uct_hipower_iface_t *iface)
{
    unsigned polled;

    if (!iface->hold.flush_async) {
        return; /* The timer and the sender's calls only */
    }

    /* Set before the arm: the event clears it (step 1) */
    __atomic_store_n(&iface->tx.armed, 1, __ATOMIC_SEQ_CST);
    if (uct_hipower_cq_arm(&iface->verbs, iface->cq) != UCS_OK) {
        __atomic_store_n(&iface->tx.armed, 0, __ATOMIC_SEQ_CST);
        return; /* Reported; the timer posts */
    }
    iface->stats.tx_hold_arms++;

    /* A completion that came before the arm made no event: the frame
     * ahead may be done already (a sender that computed since it posted
     * it, with no progress call to see it). What is there is set aside
     * for the next poll (it cannot be handled inside a send), and the
     * held bundles go at the end of this call (uct_hipower_held_leave()).
     * So they do if completions were set aside before and not handled
     * yet: the window, which counts only handled ones, may be waiting for
     * one of those (found by bundle_window_event: a silent sender's last
     * bundle held for ever, its frame ahead done and set aside by an
     * earlier arm) */
    polled = uct_hipower_cq_stash_poll(&iface->verbs, iface->cq, 0);
    iface->stats.tx_completions += polled;
    if ((polled == 0) &&
        (uct_hipower_cq_stash_count(&iface->verbs) == 0)) {
        return;
    }
    __atomic_store_n(&iface->tx.post_due, 1, __ATOMIC_SEQ_CST);
}
