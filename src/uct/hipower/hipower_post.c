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

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_PENDING_LISTED)) {
        UCS_ASYNC_BLOCK(iface->super.worker->async);
        ucs_list_add_tail(&iface->pending_eps, &ep->pending_list);
        uct_hipower_ep_flags_set(ep, post, UCT_HIPOWER_EP_FLAG_PENDING_LISTED);
        UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    }
}

void uct_hipower_ep_del_pending_list(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_PENDING_LISTED) {
        UCS_ASYNC_BLOCK(iface->super.worker->async);
        uct_hipower_ep_unlist_pending(ep);
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
    wr.wr.rdma.remote_addr = ep->tx.slots_addr;
    wr.wr.rdma.rkey        = ep->tx.slots_rkey;
    posted = uct_hipower_txqp_post(iface, &ep->txqp, &wr, &wr, 1, 1,
                                   cq_credits, &ret);
    if (posted != 1) {
        ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send(no-op) failed: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    if (op != NULL) {
        op->sn        = ep->txqp.txq.sn - 1;
        op->msg_count = ep->frame.msgs;
        ucs_queue_push(&ep->txqp.outstanding, &op->queue);
    }
    iface->stats.rdma_writes++;
    return UCS_OK;
}

void uct_hipower_ep_unlist_trailing(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_TRAILING) {
        ucs_list_del(&ep->trailing_list);
        uct_hipower_ep_flags_clear(ep, post, UCT_HIPOWER_EP_FLAG_TRAILING);
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
 * (uct_hipower_conn_open_windows()): until then the peer's device answers
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

    if ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_QP_UP |
                          UCT_HIPOWER_EP_FLAG_CONNECTED |
                          UCT_HIPOWER_EP_FLAG_FAILED)) !=
        UCT_HIPOWER_EP_FLAG_QP_UP) {
        if (ucs_unlikely(ep->cm.state == UCT_HIPOWER_CM_IDLE)) {
            /* Made from the peer's interface address and used for the
             * first time: its handshake starts (hipower_cm.c) */
            ep->owner->start(ep);
        }
        return (ep->flags.all & UCT_HIPOWER_EP_FLAG_CONNECTED) ? UCS_OK :
               UCS_ERR_NO_RESOURCE;
    }

    uct_hipower_ep_wake_wr(&wr, *(volatile uint64_t*)
                                &ep->ctrl->peer_sleep_gen);
    posted      = uct_hipower_txqp_post(iface, &ep->txqp, &wr, &wr, 1, 0,
                                        &ep->post.connect_credits, &ret);
    uct_hipower_ep_note_trailing(iface, ep);
    /* What the opening did not take goes back to the interface */
    hipower_credits_add(&iface->tx.cq_credits, ep->post.connect_credits);
    ep->post.connect_credits  = 0;
    if (posted != 1) {
        ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send(hello) failed: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
        return UCS_ERR_IO_ERROR;
    }

    uct_hipower_ep_flags_set(ep, post, UCT_HIPOWER_EP_FLAG_CONNECTED);
    ep->post.hello_sn = ep->txqp.txq.sn - 1;
    iface->stats.rdma_writes++;
    return UCS_OK;
}

/* Releases what an operation record held, and the record */
void uct_hipower_op_release(uct_hipower_tx_op_t *op)
{
    ucs_mpool_put_inline(op);
}

/*
 * One RDMA_READ of a peer bitmap into @a local, built in @a wr and @a sge
 * for a chain of @a nwr requests that ends with it; @a flag marks it
 * outstanding (one at a time, so copies are applied in the order read).
 * Never to a peer that closed its endpoint. Returns the op it completes,
 * NULL if it cannot go now.
 */
static uct_hipower_tx_op_t *
uct_hipower_ep_bitmap_read_wr(uct_hipower_ep_t *ep,
                              uct_hipower_op_handler_t handler,
                              uint64_t flag, void *local, uint32_t num_slots,
                              uint32_t lkey, uint64_t remote_addr,
                              struct ibv_send_wr *wr, struct ibv_sge *sge,
                              unsigned nwr)
{
    uct_hipower_tx_op_t *op;

    if ((ep->flags.all & flag) ||
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) ||
        (ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                          UCT_HIPOWER_EP_FLAG_CANCELED |
                          UCT_HIPOWER_EP_FLAG_PEER_CLOSED)) ||
        !uct_hipower_ep_has_room(ep, nwr)) {
        return NULL;
    }

    op = uct_hipower_ep_op_get(ep, handler, 0, NULL);
    if (op == NULL) {
        return NULL;
    }

    op->u.taken_at_read     = hipower_tx_ring_taken(&ep->tx.ring);
    sge->addr               = (uintptr_t)local;
    sge->length             = HIPOWER_BITMAP_WORDS(num_slots) *
                              sizeof(hipower_bitmap_word_t);
    sge->lkey               = lkey;
    wr->opcode              = IBV_WR_RDMA_READ;
    wr->send_flags          = 0;
    wr->sg_list             = sge;
    wr->num_sge             = 1;
    wr->next                = NULL;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->wr.rdma.rkey        = ep->peer.ctrl_read_rkey;
    return op;
}

/* A chain that ended with the READ of @a op went out: @a flag marks it
 * outstanding until its completion retires @a op */
static void uct_hipower_ep_bitmap_read_posted(uct_hipower_ep_t *ep,
                                              uct_hipower_tx_op_t *op,
                                              uint64_t flag)
{
    op->sn        = ep->txqp.txq.sn - 1;
    op->msg_count = ep->frame.msgs;
    ucs_queue_push(&ep->txqp.outstanding, &op->queue);
    uct_hipower_ep_flags_set(ep, post, flag);
}

/* One signaled RDMA_READ of a peer bitmap, posted alone: see
 * uct_hipower_ep_bitmap_read_wr(). Returns 1 if posted. */
static int uct_hipower_ep_post_bitmap_read(uct_hipower_ep_t *ep,
                                           uct_hipower_op_handler_t handler,
                                           uint64_t flag, void *local,
                                           uint32_t num_slots, uint32_t lkey,
                                           uint64_t remote_addr)
{
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    uct_hipower_tx_op_t *op;

    op = uct_hipower_ep_bitmap_read_wr(ep, handler, flag, local, num_slots,
                                       lkey, remote_addr, &wr, &sge, 1);
    if (op == NULL) {
        return 0;
    }

    if (uct_hipower_ep_post(ep, &wr, &wr, 1, 1, op) != UCS_OK) {
        uct_hipower_op_release(op);
        return 0;
    }

    uct_hipower_ep_flags_set(ep, post, flag);
    return 1;
}

/* A recycle READ completed: the receiver's consumed bitmap, as read, gives
 * back the slots it released. A copy of an old run's bitmap, read before
 * we moved to a new run, recycles nothing: its bound is below what the
 * switch counted as recycled (hipower_tx_ring_switch()). The completion
 * walk asks for slots again if the endpoint is still blocked. */
static void uct_hipower_ep_recycle_done(uct_hipower_tx_op_t *op,
                                        uct_hipower_txqp_t *txqp)
{
    uct_hipower_ep_t *ep = uct_hipower_txqp_ep(txqp);

    ucs_memory_cpu_load_fence();
    uct_hipower_ep_iface(ep)->stats.slots_recycled +=
            hipower_tx_ring_recycle(&ep->tx.ring, ep->ctrl->peer_consumed,
                                    op->u.taken_at_read);
    uct_hipower_ep_flags_clear(ep, post, UCT_HIPOWER_EP_FLAG_RECYCLE_READ);
}

/* A pull-mode READ of the peer's published bitmap completed */
static void uct_hipower_ep_notify_done(uct_hipower_tx_op_t *op,
                                       uct_hipower_txqp_t *txqp)
{
    uct_hipower_ep_flags_clear(uct_hipower_txqp_ep(txqp), post,
                               UCT_HIPOWER_EP_FLAG_NOTIFY_READ);
}

/* Where the recycle READ reads: the receiver's consumed bitmap of our
 * current epoch */
static UCS_F_ALWAYS_INLINE uint64_t
uct_hipower_ep_recycle_addr(uct_hipower_ep_t *ep)
{
    return ep->peer.consumed_addr + (ep->tx.epoch & 1) *
           UCT_HIPOWER_BITMAP_WORDS * sizeof(hipower_bitmap_word_t);
}

/* The receiver's consumed bitmap, so that free slots come back in a batch.
 * Sending needs a ready peer anyway: this only follows the user's sends. */
void uct_hipower_ep_post_recycle_read(uct_hipower_ep_t *ep)
{
    if ((ep->tx.ring.num_slots > 0) &&
        uct_hipower_ep_post_bitmap_read(ep, uct_hipower_ep_recycle_done,
                                        UCT_HIPOWER_EP_FLAG_RECYCLE_READ,
                                        ep->ctrl->peer_consumed,
                                        ep->tx.ring.num_slots,
                                        ep->ctrl_local_mr->lkey,
                                        uct_hipower_ep_recycle_addr(ep))) {
        uct_hipower_ep_iface(ep)->stats.bitmap_reads++;
    }
}

uct_hipower_tx_op_t *
uct_hipower_ep_recycle_read_wr(uct_hipower_ep_t *ep, struct ibv_send_wr *wr,
                               struct ibv_sge *sge, unsigned nwr)
{
    if (ep->tx.ring.num_slots == 0) {
        return NULL;
    }
    return uct_hipower_ep_bitmap_read_wr(ep, uct_hipower_ep_recycle_done,
                                         UCT_HIPOWER_EP_FLAG_RECYCLE_READ,
                                         ep->ctrl->peer_consumed,
                                         ep->tx.ring.num_slots,
                                         ep->ctrl_local_mr->lkey,
                                         uct_hipower_ep_recycle_addr(ep), wr,
                                         sge, nwr);
}

void uct_hipower_ep_recycle_read_posted(uct_hipower_ep_t *ep,
                                        uct_hipower_tx_op_t *op)
{
    uct_hipower_ep_bitmap_read_posted(ep, op,
                                      UCT_HIPOWER_EP_FLAG_RECYCLE_READ);
    uct_hipower_ep_iface(ep)->stats.bitmap_reads++;
}

void uct_hipower_ep_bitmap_reads_dropped(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_flags_clear(ep, post,
                               UCT_HIPOWER_EP_FLAG_RECYCLE_READ |
                               UCT_HIPOWER_EP_FLAG_NOTIFY_READ);
}

/* Pull mode: the receiver reads the sender's published bitmap. Of the
 * transport's own accord, so only once the peer is known to be ready. */
void uct_hipower_ep_post_notify_read(uct_hipower_ep_t *ep)
{
    if (uct_hipower_ep_may_initiate(ep) &&
        uct_hipower_ep_post_bitmap_read(ep, uct_hipower_ep_notify_done,
                                        UCT_HIPOWER_EP_FLAG_NOTIFY_READ,
                                        ep->ctrl->written_view,
                                        ep->rx.ring.num_slots,
                                        ep->ctrl_write.mr->lkey,
                                        ep->peer.published_addr)) {
        uct_hipower_ep_iface(ep)->stats.notify_reads++;
    }
}
