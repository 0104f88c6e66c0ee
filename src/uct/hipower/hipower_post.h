/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_POST_H_
#define UCT_HIPOWER_POST_H_

#include "hipower_ep_def.h"

#include <uct/base/uct_iov.inl>
#include <arpa/inet.h>
#include <string.h>

/*
 * Posting on an endpoint's QP, what every operation kind shares: a chain
 * with a completion-queue credit per work request, the room a post needs,
 * send descriptors, the builders of control-word writes, wake-ups and
 * scatter lists, the credit recall's list of endpoints, and the list of
 * endpoints with pending requests. Inline where the send path uses it (as
 * UCX's rc_ep.h); hipower_post.c for the rest. Below every unit that
 * sends: a failure it finds goes up through the endpoint's hooks
 * (uct_hipower_ep_fail()), set by hipower_ep.c.
 */


/*
 * Fails the endpoint with @a status (hipower_ep.c's fan-out, reached
 * through the hook it set at the endpoint's creation: the units below it
 * report a failure without naming it); returns what the user's error
 * handler returned
 */
static inline ucs_status_t
uct_hipower_ep_fail(uct_hipower_ep_t *ep, ucs_status_t status)
{
    return ep->hooks->failed(ep, status);
}

/* A probe of the peer, as uct_ep_check(): through the endpoint's hooks */
static inline ucs_status_t uct_hipower_ep_probe(uct_hipower_ep_t *ep)
{
    return ep->hooks->check(ep);
}

/* Lists the endpoint for dispatch in the interface's next progress */
void uct_hipower_ep_add_pending_list(uct_hipower_ep_t *ep);

/* Takes it off that list */
void uct_hipower_ep_del_pending_list(uct_hipower_ep_t *ep);

/* The same, by a caller that holds the worker's async lock already (the
 * interface's progress, which walks the list) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_unlist_pending(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_PENDING_LISTED) {
        ucs_list_del(&ep->pending_list);
        uct_hipower_ep_flags_clear(ep, post,
                                   UCT_HIPOWER_EP_FLAG_PENDING_LISTED);
    }
}

/* Posts a signaled zero-length write on the endpoint, from @a cq_credits
 * (the interface's, or a reserve); @a op may be NULL */
ucs_status_t uct_hipower_ep_post_nop(uct_hipower_ep_t *ep, int *cq_credits,
                                     uct_hipower_tx_op_t *op);

/*
 * Posts a chain on @a txqp's QP with a credit per request from
 * *@a cq_credits. Returns how many requests went out (all of them, or the
 * ones before bad_wr) and sets *@a ret_p to ibv_post_send()'s result.
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_txqp_post(uct_hipower_iface_t *iface, uct_hipower_txqp_t *txqp,
                      struct ibv_send_wr *first, struct ibv_send_wr *last,
                      unsigned nwr, int signal, int *cq_credits,
                      int *ret_p)
{
    struct ibv_send_wr *bad_wr = NULL, *wr;
    unsigned index, posted;
    uint64_t sn;
    int ret;

    sn = txqp->txq.sn;
    for (wr = first; wr != last; wr = wr->next) {
        wr->wr_id = sn++;
    }
    last->wr_id = sn;
    last->next  = NULL;
    if (signal) {
        last->send_flags |= IBV_SEND_SIGNALED;
    }

    ret    = ibv_post_send(txqp->qp, first, &bad_wr);
    iface->stats.doorbells++;
    index  = nwr;
    if (ucs_unlikely(ret != 0)) {
        for (index = 0, wr = first; (wr != NULL) && (wr != bad_wr);
             wr = wr->next) {
            ++index;
        }
    }
    posted = hipower_txq_chain_posted(nwr, ret != 0, index);
    hipower_txq_posted(&txqp->txq, nwr, posted, signal, cq_credits);
    *ret_p = ret;
    return posted;
}

/*
 * After a post on the endpoint's QP: one whose last requests went
 * unsignaled holds CQ credits that only a later signaled request returns,
 * so it joins the list the credit recall walks (once; the recall drops it).
 * The recall then looks at these endpoints, not at every endpoint of the
 * interface (review P3).
 */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_note_trailing(uct_hipower_iface_t *iface, uct_hipower_ep_t *ep)
{
    if ((ep->txqp.txq.unsignaled > 0) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_TRAILING)) {
        ucs_list_add_tail(&iface->tx.trailing_eps, &ep->trailing_list);
        uct_hipower_ep_flags_set(ep, post, UCT_HIPOWER_EP_FLAG_TRAILING);
    }
}

/* uct_ep_fence(): the endpoint's next request waits for the READs and
 * atomics before it (uct_hipower_ep_post() fences a request whose
 * endpoint's beat is not the interface's; RDMA writes on one QP are
 * ordered anyway) */
static UCS_F_ALWAYS_INLINE void uct_hipower_ep_fence_next(uct_hipower_ep_t *ep)
{
    ep->post.fence_beat = uct_hipower_ep_iface(ep)->tx.fence_beat - 1;
}

/* The user's operations on the endpoint end with the work requests posted
 * last but @a own_wrs (our bitmap READs chained after them): a flush waits
 * for those, not for ours */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_user_end(uct_hipower_ep_t *ep, unsigned own_wrs)
{
    ep->post.user_end_sn = ep->txqp.txq.sn - own_wrs;
}

/* Takes the endpoint off the recall's list */
void uct_hipower_ep_unlist_trailing(uct_hipower_ep_t *ep);

/* Reports a post that failed part-way and fails the endpoint if any of
 * it went out; UCS_ERR_IO_ERROR */
ucs_status_t uct_hipower_ep_post_failed(uct_hipower_ep_t *ep, unsigned nwr,
                                        unsigned posted, int ret);

/*
 * Posts a chain of @a nwr work requests (send flags set by the caller),
 * with a completion-queue credit for each. The last one is signaled when
 * due (hipower_txq_signal()) or forced. @a op, if any, is retired with the
 * chain: it holds the bcopy buffer or the user completion. A chain that
 * fails part-way is accounted for what went out and fails the endpoint
 * (nothing of it can be taken back); UCS_ERR_IO_ERROR then.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_post(uct_hipower_ep_t *ep, struct ibv_send_wr *first,
                    struct ibv_send_wr *last, unsigned nwr, int force_signal,
                    uct_hipower_tx_op_t *op)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    unsigned posted;
    int signal, ret;

    signal = force_signal ||
             hipower_txq_signal(&ep->txqp.txq, nwr,
                                iface->config.signal_interval,
                                iface->tx.cq_credits,
                                iface->config.signal_interval +
                                UCT_HIPOWER_CQ_RECALL_RESERVE);

    if (ucs_unlikely(ep->post.fence_beat != iface->tx.fence_beat)) {
        /* An iface or ep fence since our last request: this one waits
         * until the READs and atomics before it have completed */
        first->send_flags |= IBV_SEND_FENCE;
        ep->post.fence_beat     = iface->tx.fence_beat;
        iface->stats.fenced_wrs++;
    }

    posted = uct_hipower_txqp_post(iface, &ep->txqp, first, last, nwr, signal,
                                   &iface->tx.cq_credits, &ret);
    uct_hipower_ep_note_trailing(iface, ep);
    if (ucs_likely(posted == nwr)) {
        if (op != NULL) {
            op->sn        = ep->txqp.txq.sn - 1;
            op->msg_count = ep->frame.msgs;
            ucs_queue_push(&ep->txqp.outstanding, &op->queue);
        }
        return UCS_OK;
    }

    return uct_hipower_ep_post_failed(ep, nwr, posted, ret);
}

/* An operation found no room: progress recalls the credits that
 * unsignaled requests hold (uct_hipower_tx_cq_recall()) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_iface_tx_starve(uct_hipower_iface_t *iface)
{
    iface->post.starved = 1;
}

/* Whether a recall is due, forgotten then: the recall starves the
 * interface again if the credits run out before it visited every
 * endpoint */
static UCS_F_ALWAYS_INLINE int
uct_hipower_iface_tx_starved_take(uct_hipower_iface_t *iface)
{
    if (ucs_likely(!iface->post.starved)) {
        return 0;
    }
    iface->post.starved = 0;
    return 1;
}

/*
 * Room for @a nwr more work requests of a user operation on the endpoint
 * (send queue and completion queue). The one check every operation kind
 * uses, with its own counter for the statistics.
 */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_has_room(uct_hipower_ep_t *ep, unsigned nwr)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ucs_likely(hipower_txq_can_post(&ep->txqp.txq, nwr,
                                        iface->tx.cq_credits,
                                        UCT_HIPOWER_CQ_RECALL_RESERVE))) {
        return 1;
    }

    if (iface->tx.cq_credits < (int)nwr + UCT_HIPOWER_CQ_RECALL_RESERVE) {
        /* Progress recalls credits held by unsignaled requests */
        uct_hipower_iface_tx_starve(iface);
    }
    return 0;
}

/* Work requests per active message, at most: the frame (data and trailer);
 * the trailer on its own when the peer's alignment leaves a gap before
 * it; in push mode the bitmap word that announces it */
static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_msg_wrs(uct_hipower_ep_t *ep)
{
    return ep->peer.msg_wrs;
}

/* An operation record (with its buffer) from the interface's send pool,
 * completed by @a handler (NULL: the user's @a comp alone) */
static UCS_F_ALWAYS_INLINE uct_hipower_tx_op_t *
uct_hipower_ep_op_get(uct_hipower_ep_t *ep, uct_hipower_op_handler_t handler,
                      uint8_t flags, uct_completion_t *comp)
{
    uct_hipower_tx_op_t *op;

    op = ucs_mpool_get_inline(&uct_hipower_ep_iface(ep)->tx_mp);
    if (ucs_likely(op != NULL)) {
        op->handler = handler;
        op->flags   = flags;
        op->comp    = comp;
    }
    return op;
}

/*
 * A bcopy packer returned more than the operation takes. Send buffers have
 * UCT_HIPOWER_BCOPY_SLACK bytes beyond the limit, so one that wrote that
 * little too much has hurt nothing: the operation fails, with UCX's wording
 * ("length"). One that wrote more has already overrun the buffer.
 */
ssize_t uct_hipower_ep_bcopy_too_long(uct_hipower_ep_t *ep, const char *op,
                                      size_t length, size_t max);

/*
 * One 64-bit word written inline into the peer's control region (its state
 * word, its sleep generation): the value is copied when posted, so
 * @a value may be on the stack.
 */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_word_wr(uct_hipower_ep_t *ep, struct ibv_send_wr *wr,
                       struct ibv_sge *sge, const uint64_t *value,
                       uint64_t remote_addr)
{
    sge->addr               = (uintptr_t)value;
    sge->length             = sizeof(*value);
    sge->lkey               = 0;
    wr->opcode              = IBV_WR_RDMA_WRITE;
    wr->send_flags          = IBV_SEND_INLINE;
    wr->sg_list             = sge;
    wr->num_sge             = 1;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->wr.rdma.rkey        = ep->peer.ctrl_write_rkey;
}

/* The user's iov as scatter/gather entries; zero-length entries dropped */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_iov_sge(const uct_iov_t *iov, size_t iovcnt,
                       struct ibv_sge *sge)
{
    int num_sge = 0;
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        if (uct_iov_get_length(&iov[i]) == 0) {
            continue;
        }
        sge[num_sge].addr   = (uintptr_t)iov[i].buffer;
        sge[num_sge].length = uct_iov_get_length(&iov[i]);
        sge[num_sge].lkey   = uct_hipower_memh_lkey(iov[i].memh);
        ++num_sge;
    }
    return num_sge;
}

/*
 * Wakeup, sender side, for each bitmap-word write: publishes how many
 * messages are announced and, if the peer has gone to sleep since we last
 * woke it (or this is the first write to it: it may have slept before it
 * knew of us), turns the write into one that also wakes it. One locked
 * exchange and one load per announce when nobody sleeps (see
 * hipower_event.c).
 * Returns the peer's sleep generation, for uct_hipower_ep_wakeup_posted().
 */
static UCS_F_ALWAYS_INLINE uint64_t
uct_hipower_ep_wakeup_check(uct_hipower_ep_t *ep, struct ibv_send_wr *wr)
{
    uint64_t gen;

    /* A locked exchange instead of a store and a full fence: the same
     * order (the store is visible before the load below reads), one
     * instruction that costs less than mfence on x86 (review P4) */
    (void)__atomic_exchange_n(&ep->ctrl->announced, ep->frame.msgs,
                              __ATOMIC_SEQ_CST);
    gen = __atomic_load_n(&ep->ctrl->peer_sleep_gen, __ATOMIC_SEQ_CST);
    if (ucs_unlikely(gen != ep->post.woken_gen)) {
        wr->opcode   = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr->imm_data = htonl((uint32_t)gen); /* Which one wakes */
    }
    return gen;
}

/*
 * A zero-length write with immediate @a gen, the peer's sleep generation:
 * it needs no rkey, takes one of the peer's receives and wakes its
 * endpoint (our hello; a wake-up for a record the peer slept over)
 */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_wake_wr(struct ibv_send_wr *wr, uint64_t gen)
{
    memset(wr, 0, sizeof(*wr));
    wr->opcode   = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->imm_data = htonl((uint32_t)gen);
}

/*
 * The write built by uct_hipower_ep_wakeup_check() was posted: only now is
 * the peer's generation woken. Were it recorded before a post that failed,
 * no later write would carry the wake-up and the peer would sleep on.
 */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_wakeup_posted(uct_hipower_ep_t *ep, uint64_t gen)
{
    if (ucs_unlikely(gen != ep->post.woken_gen)) {
        ep->post.woken_gen = gen;
        uct_hipower_ep_iface(ep)->stats.wakeup_writes++;
    }
}

/* Before the first write into the peer's windows: UCS_OK once said
 * (hipower_post.c) */
ucs_status_t uct_hipower_ep_hello(uct_hipower_ep_t *ep);

/*
 * Whether a user operation may go out now, resources aside: the endpoint
 * has not failed, is connected, and no pending request is ahead of it
 * (pending requests go first, so that operations keep their order). The
 * first one says hello to the peer first (uct_hipower_ep_hello()).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_user_check(uct_hipower_ep_t *ep)
{
    if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (ucs_unlikely(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_CONNECTED) &&
                     (uct_hipower_ep_hello(ep) != UCS_OK))) {
        return UCS_ERR_NO_RESOURCE;
    }

    if (ucs_unlikely(!ucs_queue_is_empty(&ep->pending_q) &&
                     !(ep->flags.all & UCT_HIPOWER_EP_FLAG_DISPATCHING))) {
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

/* Releases what an operation record held, and the record */
void uct_hipower_op_release(uct_hipower_tx_op_t *op);

/* The RDMA_READs of a peer's bitmaps: consumed (recycle), published (pull) */
void uct_hipower_ep_post_recycle_read(uct_hipower_ep_t *ep);

/*
 * The recycle READ built in @a wr and @a sge to end a chain of @a nwr
 * requests (the message whose slot made it due, and the READ: one
 * doorbell). Returns its op, or NULL if it cannot go now. After the chain
 * went out, uct_hipower_ep_recycle_read_posted() marks it outstanding; if
 * it did not, the op goes back to its pool (ucs_mpool_put_inline()).
 */
uct_hipower_tx_op_t *
uct_hipower_ep_recycle_read_wr(uct_hipower_ep_t *ep, struct ibv_send_wr *wr,
                               struct ibv_sge *sge, unsigned nwr);
void uct_hipower_ep_recycle_read_posted(uct_hipower_ep_t *ep,
                                        uct_hipower_tx_op_t *op);
void uct_hipower_ep_post_notify_read(uct_hipower_ep_t *ep);

/* The endpoint's operations were canceled: no bitmap READ is out any more
 * (their handlers will not run), and none goes again */
void uct_hipower_ep_bitmap_reads_dropped(uct_hipower_ep_t *ep);

#endif
