/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Frames that are not one UCT operation's message: a bundle's frame, a
 * filled slot's first and later batches, the no-message frame, and the
 * push mode's announce of messages written before. Each is one
 * instantiation of uct_hipower_ep_send_msg() (hipower_tx_frame_impl.h).
 */

#include "hipower_tx_frame_impl.h"

#include <ucs/debug/log.h>


/* Push mode: announces messages written but not yet announced (with
 * UCX_HIPOWER_ANNOUNCE_BATCH > 1 only) */
ucs_status_t uct_hipower_ep_announce(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint64_t sleep_gen;

    if (ep->frame.unannounced == 0) {
        return UCS_OK;
    }

    if (!uct_hipower_ep_has_room(ep, 1)) {
        return UCS_ERR_NO_RESOURCE;
    }

    sleep_gen = uct_hipower_ep_bitmap_wr(ep, ep->frame.announce_word, &wr,
                                         &sge);
    status    = uct_hipower_ep_post(ep, &wr, &wr, 1, 0, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
        /* Part of the user's messages: flush waits for it */
        uct_hipower_ep_user_end(ep, 0);
        ep->frame.unannounced = 0;
        iface->stats.rdma_writes++;
    }
    return status;
}

ucs_status_t uct_hipower_ep_send_frame(uct_hipower_ep_t *ep, void *data,
                                       uint32_t length, uint8_t am_id,
                                       uct_hipower_tx_op_t *op)
{
    return uct_hipower_ep_send_buffer(ep, data, length, am_id, op);
}

ucs_status_t uct_hipower_ep_send_fill_first(uct_hipower_ep_t *ep, void *data,
                                            uint32_t size,
                                            uct_hipower_tx_op_t *op)
{
    return uct_hipower_ep_send_buffer_mode(ep, data, size,
                                           HIPOWER_SLOT_AM_FILL, op, 0,
                                           UCT_HIPOWER_FILL_FIRST);
}

ucs_status_t uct_hipower_ep_send_batch(uct_hipower_ep_t *ep, void *data,
                                       uint32_t size, uct_hipower_tx_op_t *op)
{
    return uct_hipower_ep_send_buffer_mode(ep, data, size,
                                           HIPOWER_SLOT_AM_FILL, op, 0,
                                           UCT_HIPOWER_FILL_APPEND);
}

/*
 * The frame that carries no message (HIPOWER_SLOT_AM_NONE, no data): the
 * first of a run the receiver granted while we had nothing to send, which
 * tells it where our old run ends so that it can give the old run back
 * (docs/protocol.md 9.2). A frame like any other otherwise: it takes a slot,
 * counts as sent, and wakes a sleeping receiver.
 */
ucs_status_t uct_hipower_ep_send_none(uct_hipower_ep_t *ep)
{
    uint8_t frame[HIPOWER_SLOT_TRAILER_SIZE];
    struct ibv_send_wr wr;
    struct ibv_sge sge[2];
    ucs_status_t status;

    status = uct_hipower_ep_tx_check(ep);
    if (status != UCS_OK) {
        return status;
    }

    sge[0].addr   = (uintptr_t)frame;
    sge[0].length = 0;
    wr.sg_list    = sge;
    wr.num_sge    = 1;
    wr.send_flags = IBV_SEND_INLINE;
    return uct_hipower_ep_send_msg(ep, &wr, frame, 0, 1, HIPOWER_SLOT_AM_NONE,
                                   0, 0, NULL, 0, 0);
}
