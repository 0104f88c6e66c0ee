/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_TX_FRAME_IMPL_H_
#define UCT_HIPOWER_TX_FRAME_IMPL_H_

#include "hipower_tx_frame.h"
#include "hipower_ep_grant.h"

#include <string.h>

/*
 * One message into the peer's next slot (docs/protocol.md): the inline
 * body of every send, instantiated where it is specialised -- in
 * hipower_ep_am.c for the UCT active-message operations (the hot path,
 * with the one-write constant) and in hipower_tx_frame.c for the frames
 * of bundles, filled slots and the no-message frame. As UCX's rc_verbs
 * keeps its post in rc_verbs_impl.h.
 */

/*
 * Push mode: the bitmap word that tells the receiver which of its slots
 * hold new messages. Inline, so the word is copied when posted and never
 * announces a slot whose payload write was posted after it; RC executes
 * the writes in order, so the payloads land before the word. Returns the
 * peer's sleep generation (see uct_hipower_ep_wakeup_check()).
 */
static UCS_F_MAYBE_UNUSED uint64_t
uct_hipower_ep_bitmap_wr(uct_hipower_ep_t *ep, uint32_t word,
                         struct ibv_send_wr *wr, struct ibv_sge *sge)
{
    sge->addr              = (uintptr_t)&ep->ctrl->written[word];
    sge->length            = sizeof(hipower_bitmap_word_t);
    sge->lkey              = ep->ctrl_local_mr->lkey;
    wr->opcode             = IBV_WR_RDMA_WRITE;
    wr->send_flags         = IBV_SEND_INLINE;
    wr->sg_list            = sge;
    wr->num_sge            = 1;
    wr->wr.rdma.remote_addr = ep->peer.written_view_addr +
                              word * sizeof(hipower_bitmap_word_t);
    wr->wr.rdma.rkey       = ep->peer.ctrl_write_rkey;
    return uct_hipower_ep_wakeup_check(ep, wr);
}

/*
 * Admission for one message: fails with UCS_ERR_NO_RESOURCE (the caller may
 * add a pending request, or bundle the message) when there is no free peer
 * slot or no room to post.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_tx_check(uct_hipower_ep_t *ep)
{
    ucs_status_t status;

    status = uct_hipower_ep_user_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    return uct_hipower_ep_tx_room(ep, 1);
}

/* Admission plus a send descriptor whose buffer holds header and data */
static inline ucs_status_t
uct_hipower_ep_tx_op_get(uct_hipower_ep_t *ep, uct_completion_t *comp,
                         uct_hipower_tx_op_t **op_p)
{
    uct_hipower_tx_op_t *op;
    ucs_status_t status;

    status = uct_hipower_ep_tx_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    op = uct_hipower_ep_op_get(ep, NULL, 0, comp);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    *op_p = op;
    return UCS_OK;
}

/* Pull mode, first message: "ready" goes first into the peer's state word,
 * in its own request, so that the peer starts reading our bitmap */
static UCS_F_MAYBE_UNUSED ucs_status_t
uct_hipower_ep_send_hello(uct_hipower_ep_t *ep)
{
    uint64_t state = UCT_HIPOWER_PEER_STATE_READY;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    /* Signaled: its completion tells us the peer is ready, so that we
     * start the reads whose completions publish our messages */
    uct_hipower_ep_word_wr(ep, &wr, &sge, &state, ep->peer.state_addr);
    status = uct_hipower_ep_post(ep, &wr, &wr, 1, 1, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_flags_set(ep, frame, UCT_HIPOWER_EP_FLAG_HELLO_SENT);
        uct_hipower_ep_iface(ep)->stats.rdma_writes++;
    }
    return status;
}

/*
 * Takes the next peer slot and posts the message. @a data_wr writes the
 * data: its sg_list (with room for one more entry) and send flags (inline)
 * are filled by the caller. The trailer is stored at @a trailer_p (memory
 * of @a trailer_lkey, unless the write is inline) and goes with the data,
 * in the same write, when the data ends where the trailer starts: always,
 * unless the peer asked for aligned data. @a trailer_follows: it lies right
 * after the data's last gather entry, in the same buffer, which then just
 * grows. Otherwise the trailer is a write of its own, which RC places after
 * the data. In push mode the bitmap word comes last.
 * @a one_write (a constant): the endpoint has UCT_HIPOWER_EP_FLAG_ONE_WRITE,
 * so all of that is known in advance and the compiler drops it: the
 * trailer follows the data in the one write, which also wakes the peer.
 * @a append (a constant, never with @a one_write): UCT_HIPOWER_FILL_FIRST,
 * the data is the first batch of a filled slot (hipower_fill.h), whose
 * trailer counts one batch instead of saying its length;
 * UCT_HIPOWER_FILL_APPEND, it is one more batch of the slot our bundles
 * fill (tx.fill): no slot is taken, the batch lands below the ones before
 * it and the trailer, rewritten with the slot's new batch count, is a
 * write of its own after it.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_send_msg(uct_hipower_ep_t *ep, struct ibv_send_wr *data_wr,
                        void *trailer_p,
                        uint32_t trailer_lkey, int trailer_follows,
                        uint8_t am_id, uint32_t length, int force_signal,
                        uct_hipower_tx_op_t *op, int one_write, int append)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr trailer_wr, bitmap_wr, read_wr, *last_wr, *msg_last;
    struct ibv_sge trailer_sge, bitmap_sge, read_sge, *sge;
    uct_hipower_tx_op_t *read_op = NULL;
    uint32_t seq, slot, word, data_offset, unannounced = 0;
    uint64_t slot_addr, sleep_gen                      = 0;
    uint64_t fill_final;
    ucs_status_t status;
    unsigned nwr, msg_nwr;
    int push;

    push = !one_write && (iface->config.notify == UCT_HIPOWER_NOTIFY_PUSH);
    if (ucs_unlikely(!one_write &&
                     (iface->config.notify == UCT_HIPOWER_NOTIFY_PULL) &&
                     !(ep->flags.all & UCT_HIPOWER_EP_FLAG_HELLO_SENT))) {
        status = uct_hipower_ep_send_hello(ep);
        if (status != UCS_OK) {
            return status;
        }
    }

    if (append == UCT_HIPOWER_FILL_APPEND) {
        /* Below the batches before: the slot's length grows by this one,
         * and a first frame's switch flags stay in the ack word (the
         * receiver reads them there when it moves to this run) */
        seq         = ep->tx.fill.seq;
        data_offset = hipower_slot_place(&ep->peer.placement,
                                         ep->tx.fill.length + length);
        hipower_slot_trailer_store(trailer_p, am_id,
                                   ep->tx.fill.count + 1, seq,
                                   hipower_rx_ring_acked(&ep->rx.ring) |
                                   ep->tx.fill.ack_flags | ep->tx.ack_flags);
    } else {
        /* Right after the data; it acknowledges what we released of the
         * peer's messages, so that under two-way traffic the peer recycles
         * without reading our bitmap, and says how many batches the filled
         * slot before it got, if that was open (before the take closes
         * it) */
        fill_final  = uct_hipower_ep_fill_final_bits(ep);
        seq         = hipower_tx_ring_take(&ep->tx.ring);
        data_offset = hipower_slot_place(&ep->peer.placement, length);
        hipower_slot_trailer_store(trailer_p, am_id,
                                   (append == UCT_HIPOWER_FILL_FIRST) ? 1 :
                                   length, seq,
                                   hipower_rx_ring_acked(&ep->rx.ring) |
                                   ep->tx.ack_flags | fill_final);
    }
    slot        = hipower_ring_slot(ep->tx.ring.num_slots, seq);
    slot_addr   = ep->tx.slots_addr +
                  (uint64_t)slot * ep->peer.layout.stride;
    ep->frame.msgs++;

    data_wr->opcode              = IBV_WR_RDMA_WRITE;
    data_wr->wr.rdma.remote_addr = slot_addr + data_offset;
    data_wr->wr.rdma.rkey        = ep->tx.slots_rkey;
    data_wr->next                = NULL;
    last_wr                      = data_wr;
    nwr                          = 1;
    if (one_write ||
        ucs_likely(data_offset + length == ep->peer.layout.trailer_offset)) {
        if (trailer_follows) {
            data_wr->sg_list[data_wr->num_sge - 1].length +=
                    HIPOWER_SLOT_TRAILER_SIZE;
        } else {
            sge         = &data_wr->sg_list[data_wr->num_sge++];
            sge->addr   = (uintptr_t)trailer_p;
            sge->length = HIPOWER_SLOT_TRAILER_SIZE;
            sge->lkey   = trailer_lkey;
        }
    } else {
        /* Aligned data leaves a gap before the trailer: the peer's pad is
         * not written (nothing of ours lands there) */
        uct_hipower_ep_word_wr(ep, &trailer_wr, &trailer_sge, trailer_p,
                               slot_addr + ep->peer.layout.trailer_offset);
        trailer_sge.length      = HIPOWER_SLOT_TRAILER_SIZE;
        trailer_wr.wr.rdma.rkey = ep->tx.slots_rkey;
        trailer_wr.next         = NULL;
        data_wr->next           = &trailer_wr;
        last_wr                 = &trailer_wr;
        nwr                     = 2;
    }

    if (push) {
        word = slot / HIPOWER_BITMAP_WORD_BITS;
        if ((ep->frame.unannounced > 0) && (word != ep->frame.announce_word)) {
            /* The new bit lives in another word: announce the old one */
            status = uct_hipower_ep_announce(ep);
            if (ucs_unlikely(status != UCS_OK)) {
                goto err_undo;
            }
        }

        ep->frame.announce_word = word;
        unannounced          = ep->frame.unannounced;
        if (ep->frame.unannounced + 1 >= iface->config.announce_batch) {
            sleep_gen = uct_hipower_ep_bitmap_wr(ep, word, &bitmap_wr,
                                                 &bitmap_sge);
            bitmap_wr.next     = NULL;
            last_wr->next      = &bitmap_wr;
            last_wr            = &bitmap_wr;
            ++nwr;
            ep->frame.unannounced = 0;
        } else {
            ep->frame.unannounced++;
        }
    } else if (one_write ||
               (iface->config.notify == UCT_HIPOWER_NOTIFY_SELF)) {
        /* The write that ends with the trailer wakes a sleeping peer */
        sleep_gen = uct_hipower_ep_wakeup_check(ep, last_wr);
    }

    /* With this slot taken, the ring wants its free slots back: the
     * recycle READ goes in the same chain, one doorbell for both. Below the
     * threshold, every message until the read completes would find it
     * outstanding: test the flag here, not after a call */
    msg_nwr  = nwr;
    msg_last = last_wr;
    if (ucs_unlikely(hipower_tx_ring_wants_recycle(&ep->tx.ring,
                                                   ep->tx.threshold) &&
                     !(ep->flags.all & UCT_HIPOWER_EP_FLAG_RECYCLE_READ))) {
        read_op = uct_hipower_ep_recycle_read_wr(ep, &read_wr, &read_sge,
                                                 nwr + 1);
        if (read_op != NULL) {
            last_wr->next = &read_wr;
            last_wr       = &read_wr;
            force_signal  = 1; /* A read's data is ours once it completes */
            ++nwr;
        }
    }

    /* The frame that fills the bundle window asks for the completion that
     * opens it again (no work per message with the window off) */
    if (ucs_unlikely(ep->tx.win.size > 0)) {
        force_signal |= hipower_txwin_fills(&ep->tx.win,
                                            ep->txqp.txq.acked_sn);
    }
    status = uct_hipower_ep_post(ep, data_wr, last_wr, nwr, force_signal, op);
    if (ucs_unlikely(status != UCS_OK)) {
        if (read_op != NULL) {
            ucs_mpool_put_inline(read_op);
        }
        if (push) {
            ep->frame.unannounced = unannounced;
        }
        goto err_undo;
    }

    if (one_write || (msg_last->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
    }

    /* Flush waits for this, not for our own bitmap reads after it */
    uct_hipower_ep_user_end(ep, nwr - msg_nwr);
    if (ucs_unlikely(ep->tx.win.size > 0)) {
        hipower_txwin_posted(&ep->tx.win, ep->post.user_end_sn - 1);
    }
    uct_hipower_ep_tx_acks_said(ep);
    iface->stats.tx_msgs++;
    iface->stats.tx_bytes    += length;
    iface->stats.rdma_writes += msg_nwr;
    if (read_op != NULL) {
        uct_hipower_ep_recycle_read_posted(ep, read_op);
        iface->stats.chained_reads++;
    }
    return UCS_OK;

err_undo:
    /* Nothing of this message was posted: give the slot back */
    if (append != UCT_HIPOWER_FILL_APPEND) {
        hipower_tx_ring_untake(&ep->tx.ring);
    }
    ep->frame.msgs--;
    if (iface->config.notify != UCT_HIPOWER_NOTIFY_PULL) {
        /* A sleeping peer that read the count meanwhile stays awake until
         * the message is sent again: never asleep with it missing */
        ep->ctrl->announced = ep->frame.msgs;
    }
    return status;
}

/*
 * A frame whose @a length bytes of data lie in @a op's buffer at @a data,
 * with room for the trailer right after them: one gather entry (inline when
 * small) for data and trailer. The caller checked the room. @a one_write,
 * @a append: see uct_hipower_ep_send_msg() (a batch's trailer, after it in
 * the buffer too, is a write of its own).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_send_buffer_mode(uct_hipower_ep_t *ep, void *data,
                                uint32_t length, uint8_t am_id,
                                uct_hipower_tx_op_t *op, int one_write,
                                int append)
{
    struct ibv_send_wr wr;
    struct ibv_sge sge[2];

    sge[0].addr   = (uintptr_t)data;
    sge[0].length = length;
    sge[0].lkey   = op->lkey;
    wr.sg_list    = sge;
    wr.num_sge    = 1;
    wr.send_flags = (length + HIPOWER_SLOT_TRAILER_SIZE <=
                     uct_hipower_ep_iface(ep)->config.max_inline) ?
                    IBV_SEND_INLINE : 0;
    return uct_hipower_ep_send_msg(ep, &wr, UCS_PTR_BYTE_OFFSET(data, length),
                                   op->lkey, 1, am_id, length, 0, op,
                                   one_write, append);
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_send_buffer(uct_hipower_ep_t *ep, void *data, uint32_t length,
                           uint8_t am_id, uct_hipower_tx_op_t *op)
{
    return uct_hipower_ep_send_buffer_mode(ep, data, length, am_id, op, 0, 0);
}

#endif
