/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_post.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <string.h>


/* Under the worker's async lock: UCP's wire-up may destroy another
 * endpoint in UCX's async thread meanwhile, which unlists it from the same
 * list (see uct_hipower_iface_progress()) */
void uct_hipower_ep_add_pending_list(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (!(ep->flags & UCT_HIPOWER_EP_FLAG_PENDING_LISTED)) {
        UCS_ASYNC_BLOCK(iface->super.worker->async);
        ucs_list_add_tail(&iface->pending_eps, &ep->pending_list);
        ep->flags |= UCT_HIPOWER_EP_FLAG_PENDING_LISTED;
        UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    }
}

void uct_hipower_ep_del_pending_list(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->flags & UCT_HIPOWER_EP_FLAG_PENDING_LISTED) {
        UCS_ASYNC_BLOCK(iface->super.worker->async);
        ucs_list_del(&ep->pending_list);
        ep->flags &= ~UCT_HIPOWER_EP_FLAG_PENDING_LISTED;
        UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    }
}

ucs_status_t uct_hipower_ep_post_failed(uct_hipower_ep_t *ep, unsigned nwr,
                                        unsigned posted, int ret)
{
    ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send() of %u work requests "
              "failed at number %u: %s", UCT_HIPOWER_EP_ARG(ep), nwr,
              posted + 1, strerror(ret));
    if (posted > 0) {
        /* Part of it is on the wire and cannot be taken back: the
         * endpoint can no longer keep its promises */
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
    }
    return UCS_ERR_IO_ERROR;
}

ucs_status_t uct_hipower_ep_post_nop(uct_hipower_ep_t *ep, int *cq_credits,
                                     uct_hipower_tx_op_t *op)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    unsigned posted;
    int ret;

    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.sg_list             = NULL;
    wr.num_sge             = 0;
    wr.wr.rdma.remote_addr = ep->peer.slots_addr;
    wr.wr.rdma.rkey        = ep->peer.slots_rkey;
    posted = uct_hipower_txqp_post(iface, &ep->txqp, &wr, &wr, 1, 1,
                                   cq_credits, &ret);
    if (posted != 1) {
        ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send(no-op) failed: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    if (op != NULL) {
        op->sn        = ep->txqp.txq.sn - 1;
        op->msg_count = ep->tx.msgs;
        ucs_queue_push(&ep->txqp.outstanding, &op->queue);
    }
    iface->stats.rdma_writes++;
    return UCS_OK;
}

void uct_hipower_ep_unlist_trailing(uct_hipower_ep_t *ep)
{
    if (ep->flags & UCT_HIPOWER_EP_FLAG_TRAILING) {
        ucs_list_del(&ep->trailing_list);
        ep->flags &= ~UCT_HIPOWER_EP_FLAG_TRAILING;
    }
}

ssize_t uct_hipower_ep_bcopy_too_long(uct_hipower_ep_t *ep, const char *op,
                                      size_t length, size_t max)
{
    if (length > max + UCT_HIPOWER_BCOPY_SLACK) {
        ucs_fatal(UCT_HIPOWER_EP_FMT ": %s packed %zu bytes into a buffer of "
                  "%zu: memory past it is overwritten", UCT_HIPOWER_EP_ARG(ep),
                  op, length, max + UCT_HIPOWER_BCOPY_SLACK);
    }

    ucs_error(UCT_HIPOWER_EP_FMT ": %s: invalid length %zu (the limit is %zu)",
              UCT_HIPOWER_EP_ARG(ep), op, length, max);
    return UCS_ERR_INVALID_PARAM;
}

/*
 * Said before our first request into the peer's windows: a zero-length
 * write with immediate (it needs no rkey). It takes one of the peer's
 * receives, which the peer posts only once its windows are bound
 * (uct_hipower_ep_open_windows()): until then the peer's device answers
 * "receiver not ready" and ours sends it again, and everything behind it
 * on the QP waits. Its immediate is the first-contact wake-up, as a write
 * that wakes the peer carries (uct_hipower_ep_wakeup_check()). Not sent
 * at connect: a peer that connects later than our retries last would fail
 * an endpoint that sent nothing; it goes with the first operation, like
 * that operation would. With the CQ credits the endpoint brought.
 */
ucs_status_t uct_hipower_ep_hello(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    unsigned posted;
    int ret;

    if ((ep->flags & (UCT_HIPOWER_EP_FLAG_QP_UP |
                      UCT_HIPOWER_EP_FLAG_CONNECTED |
                      UCT_HIPOWER_EP_FLAG_FAILED)) !=
        UCT_HIPOWER_EP_FLAG_QP_UP) {
        if (ucs_unlikely(ep->cm.state == UCT_HIPOWER_CM_IDLE)) {
            /* Made from the peer's interface address and used for the
             * first time: its handshake starts (hipower_cm.c) */
            ep->hooks->connect(ep);
        }
        return (ep->flags & UCT_HIPOWER_EP_FLAG_CONNECTED) ? UCS_OK :
               UCS_ERR_NO_RESOURCE;
    }

    uct_hipower_ep_wake_wr(&wr, *(volatile uint64_t*)
                                &ep->ctrl->peer_sleep_gen);
    posted      = uct_hipower_txqp_post(iface, &ep->txqp, &wr, &wr, 1, 0,
                                        &ep->tx.connect_credits, &ret);
    uct_hipower_ep_note_trailing(iface, ep);
    /* What the opening did not take goes back to the interface */
    hipower_credits_add(&iface->tx.cq_credits, ep->tx.connect_credits);
    ep->tx.connect_credits  = 0;
    if (posted != 1) {
        ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send(hello) failed: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
        return UCS_ERR_IO_ERROR;
    }

    ep->flags    |= UCT_HIPOWER_EP_FLAG_CONNECTED;
    ep->tx.hello_sn = ep->txqp.txq.sn - 1;
    iface->stats.rdma_writes++;
    return UCS_OK;
}
