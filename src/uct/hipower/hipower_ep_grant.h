/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_GRANT_H_
#define UCT_HIPOWER_EP_GRANT_H_

#include "hipower_post.h"

/*
 * The sender's side of the slots the receiver grants (hipower_ep_grant.c):
 * the room for a frame, inline where every send tests it.
 */

/* Sender: the receiver granted a new run, the next message goes there
 * (hipower_ep_grant.c) */
void uct_hipower_ep_tx_adopt(uct_hipower_ep_t *ep);

/* Sender: the peer's first run, from its endpoint address: @a num_slots
 * slots at @a addr, written with @a rkey (hipower_ep_grant.c) */
void uct_hipower_ep_tx_first_run(uct_hipower_ep_t *ep, uint64_t addr,
                                 uint32_t rkey, uint32_t num_slots);

/* Sender, pull mode: make the bitmap the peer reads say which messages
 * have landed, up to @a msg_count. Counts messages, not sequence numbers,
 * which restart at the ring's period */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_tx_publish(uct_hipower_ep_t *ep, uint64_t msg_count)
{
    for (; ep->tx.published < msg_count; ++ep->tx.published) {
        hipower_bitmap_toggle(ep->ctrl->published, ep->tx.publish_slot);
        if (++ep->tx.publish_slot == ep->tx.ring.num_slots) {
            ep->tx.publish_slot = 0;
        }
    }
}

/* Sender: the acknowledgement flags (a run switch, a filled slot's count,
 * a want) went out with a frame: said once */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_tx_acks_said(uct_hipower_ep_t *ep)
{
    ep->tx.ack_flags = 0;
}

/* Receiver: a frame's acknowledgement word says whether the peer's run was
 * too small (HIPOWER_SLOT_ACK_WANTS): the grant decides on it later */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_rx_note_wants(uct_hipower_ep_t *ep, uint64_t ack_word)
{
    ep->rx.wants |= !!(ack_word & HIPOWER_SLOT_ACK_WANTS);
}

/* No free peer slot: a recycle READ, or, to a peer that closed its
 * endpoint, a request that will fail and report it */
void uct_hipower_ep_slots_wanted(uct_hipower_ep_t *ep);

/*
 * Room for one more active message frame now: a free slot of the peer (in
 * the run it granted last, which this adopts) and room to post it.
 * UCS_ERR_NO_RESOURCE otherwise, after asking for slots; @a count: a
 * refused send, counted in the statistics (not a bundle's retry).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_tx_room(uct_hipower_ep_t *ep, int count)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    /* The receiver granted a new run: this message goes there */
    if (ucs_unlikely(*(volatile uint64_t*)&ep->ctrl->grant.epoch !=
                     ep->tx.epoch)) {
        uct_hipower_ep_tx_adopt(ep);
    }

    if (ucs_unlikely(hipower_tx_ring_free(&ep->tx.ring) == 0)) {
        iface->stats.pool_empty += count;
        /* Our next message tells the receiver its run was too small */
        ep->tx.ack_flags |= HIPOWER_SLOT_ACK_WANTS;
        uct_hipower_ep_slots_wanted(ep);
        return UCS_ERR_NO_RESOURCE;
    }

    /* One more: the announce of an unfinished batch, or pull's hello */
    if (ucs_unlikely(!uct_hipower_ep_has_room(ep, ep->peer.msg_wrs + 1))) {
        iface->stats.tx_queue_full += count;
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

#endif
