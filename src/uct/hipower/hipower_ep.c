/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_ep.h"
#include "hipower_verbs.h"

#include <ucs/arch/bitops.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/type/class.h>
#include <string.h>


/* Work request id: the endpoint's WR sequence number */
#define UCT_HIPOWER_WR_ID(_sn)    ((uint64_t)(_sn))

/* Receive batch per endpoint per progress call */
#define UCT_HIPOWER_RX_BATCH      64


/*
 * Owner of an endpoint's receive slots, for uct_iface_release_desc(). It
 * outlives the endpoint while the user still holds descriptors, so a late
 * release neither touches freed memory nor loses the slots.
 */
typedef struct uct_hipower_rx_owner {
    uct_recv_desc_t              super;  /* Must be first */
    uct_hipower_ep_t             *ep;    /* NULL once the endpoint is gone */
    uct_hipower_iface_t          *iface;
    uint32_t                     first_slot;
    uint32_t                     num_slots;
    uint32_t                     held;   /* Descriptors still with the user */
} uct_hipower_rx_owner_t;


/* Whether one more message (of @a nwr work requests) can go out now */
static inline int uct_hipower_ep_has_tx_resources(uct_hipower_ep_t *ep,
                                                  unsigned nwr)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    return (hipower_tx_ring_free(&ep->tx.ring) > 0) &&
           (ep->tx.sq_available >= nwr + 1) && (iface->cq_available > 1);
}

static inline unsigned uct_hipower_ep_wrs_per_msg(uct_hipower_iface_t *iface)
{
    return (iface->config.notify == UCT_HIPOWER_NOTIFY_PUSH) ? 2 : 1;
}

static void uct_hipower_ep_add_pending_list(uct_hipower_ep_t *ep)
{
    if (!(ep->flags & UCT_HIPOWER_EP_FLAG_PENDING_LISTED)) {
        ucs_list_add_tail(&uct_hipower_ep_iface(ep)->pending_eps,
                          &ep->pending_list);
        ep->flags |= UCT_HIPOWER_EP_FLAG_PENDING_LISTED;
    }
}

static void uct_hipower_ep_del_pending_list(uct_hipower_ep_t *ep)
{
    if (ep->flags & UCT_HIPOWER_EP_FLAG_PENDING_LISTED) {
        ucs_list_del(&ep->pending_list);
        ep->flags &= ~UCT_HIPOWER_EP_FLAG_PENDING_LISTED;
    }
}

/* uct_hipower_ep_post(), inlined into the per-message send path */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_post_inline(uct_hipower_ep_t *ep, struct ibv_send_wr *first,
                           struct ibv_send_wr *last, unsigned nwr,
                           int force_signal, uct_hipower_tx_op_t *op)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr *bad_wr, *wr;
    int signal, own_op;
    int ret;

    signal = force_signal ||
             (ep->tx.unsignaled + nwr >= iface->config.signal_interval);
    own_op = 0;
    if (signal && (op == NULL)) {
        /* Pull mode publishes from the signaled WR's record */
        op = uct_hipower_ep_op_get(ep, UCT_HIPOWER_OP_COMP, NULL);
        if (ucs_unlikely(op == NULL)) {
            return UCS_ERR_NO_RESOURCE;
        }
        own_op = 1;
    }

    for (wr = first; wr != last; wr = wr->next) {
        wr->wr_id = UCT_HIPOWER_WR_ID(ep->tx.sn++);
    }
    last->wr_id = UCT_HIPOWER_WR_ID(ep->tx.sn++);
    last->next  = NULL;
    if (signal) {
        last->send_flags |= IBV_SEND_SIGNALED;
    }
    if (ucs_unlikely(ep->flags & UCT_HIPOWER_EP_FLAG_FENCE)) {
        first->send_flags |= IBV_SEND_FENCE;
        ep->flags         &= ~UCT_HIPOWER_EP_FLAG_FENCE;
    }

    ret = ibv_post_send(ep->qp, first, &bad_wr);
    if (ucs_unlikely(ret != 0)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_send() failed: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        ep->tx.sn -= nwr;
        if (own_op) {
            ucs_mpool_put_inline(op);
        }
        return UCS_ERR_IO_ERROR;
    }

    ep->tx.sq_available -= nwr;
    if (op != NULL) {
        op->sn       = ep->tx.sn - 1;
        op->msg_count = ep->tx.msgs;
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }
    if (signal) {
        ep->tx.unsignaled = 0;
        ep->tx.signaled++;
        iface->cq_available--;
    } else {
        ep->tx.unsignaled += nwr;
    }
    return UCS_OK;
}

ucs_status_t uct_hipower_ep_post(uct_hipower_ep_t *ep,
                                 struct ibv_send_wr *first,
                                 struct ibv_send_wr *last, unsigned nwr,
                                 int force_signal, uct_hipower_tx_op_t *op)
{
    return uct_hipower_ep_post_inline(ep, first, last, nwr, force_signal, op);
}

/* A zero-length signaled RDMA_WRITE: completes after everything before it */
static ucs_status_t uct_hipower_ep_post_nop(uct_hipower_ep_t *ep,
                                            uct_completion_t *comp)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    uct_hipower_tx_op_t *op;
    ucs_status_t status;

    if ((ep->tx.sq_available < 1) || (iface->cq_available < 1)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_hipower_ep_op_get(ep, UCT_HIPOWER_OP_COMP, comp);
    if (op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    wr.opcode               = IBV_WR_RDMA_WRITE;
    wr.send_flags           = 0;
    wr.sg_list              = NULL;
    wr.num_sge              = 0;
    wr.wr.rdma.remote_addr  = ep->peer.slots_addr;
    wr.wr.rdma.rkey         = ep->peer.slots_rkey;
    status = uct_hipower_ep_post(ep, &wr, &wr, 1, 1, op);
    if (status == UCS_OK) {
        iface->stats.rdma_writes++;
    }
    return status;
}

/*
 * One signaled RDMA_READ of a peer bitmap into @a local; @a flag marks it
 * outstanding (one at a time, so copies are applied in the order read).
 * Returns 1 if posted.
 */
static int uct_hipower_ep_post_bitmap_read(uct_hipower_ep_t *ep,
                                           uct_hipower_op_type_t type,
                                           uint32_t flag, void *local,
                                           uint32_t num_slots, uint32_t lkey,
                                           uint64_t remote_addr)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    uct_hipower_tx_op_t *op;

    if ((ep->flags & (flag | UCT_HIPOWER_EP_FLAG_FAILED)) ||
        !(ep->flags & UCT_HIPOWER_EP_FLAG_CONNECTED) ||
        (ep->tx.sq_available < 1) || (iface->cq_available < 1)) {
        return 0;
    }

    op = uct_hipower_ep_op_get(ep, type, NULL);
    if (op == NULL) {
        return 0;
    }

    sge.addr               = (uintptr_t)local;
    sge.length             = HIPOWER_BITMAP_WORDS(num_slots) *
                             sizeof(hipower_bitmap_word_t);
    sge.lkey               = lkey;
    wr.opcode              = IBV_WR_RDMA_READ;
    wr.send_flags          = 0;
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = ep->peer.ctrl_read_rkey;
    if (uct_hipower_ep_post(ep, &wr, &wr, 1, 1, op) != UCS_OK) {
        return 0;
    }

    ep->flags |= flag;
    return 1;
}

/* The receiver's consumed bitmap, so that free slots come back in a batch */
static void uct_hipower_ep_post_recycle_read(uct_hipower_ep_t *ep)
{
    if (uct_hipower_ep_post_bitmap_read(ep, UCT_HIPOWER_OP_RECYCLE_READ,
                                        UCT_HIPOWER_EP_FLAG_RECYCLE_READ,
                                        ep->ctrl->peer_consumed,
                                        ep->tx.ring.num_slots,
                                        ep->ctrl_local_mr->lkey,
                                        ep->peer.consumed_addr)) {
        uct_hipower_ep_iface(ep)->stats.bitmap_reads++;
    }
}

void uct_hipower_ep_post_notify_read(uct_hipower_ep_t *ep)
{
    if (uct_hipower_ep_post_bitmap_read(ep, UCT_HIPOWER_OP_NOTIFY_READ,
                                        UCT_HIPOWER_EP_FLAG_NOTIFY_READ,
                                        ep->ctrl->written_view,
                                        ep->rx.ring.num_slots,
                                        ep->ctrl_write_mr->lkey,
                                        ep->peer.published_addr)) {
        uct_hipower_ep_iface(ep)->stats.notify_reads++;
    }
}

/*
 * Push mode: the bitmap word that tells the receiver which of its slots
 * hold new messages. Inline, so the word is copied when posted and never
 * announces a slot whose payload write was posted after it; RC executes
 * the writes in order, so the payloads land before the word. Returns the
 * peer's sleep generation (see uct_hipower_ep_wakeup_check()).
 */
static uint64_t uct_hipower_ep_bitmap_wr(uct_hipower_ep_t *ep, uint32_t word,
                                         struct ibv_send_wr *wr,
                                         struct ibv_sge *sge)
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

/* Push mode: announces messages written but not yet announced */
ucs_status_t uct_hipower_ep_announce(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint64_t sleep_gen;

    if (ep->tx.unannounced == 0) {
        return UCS_OK;
    }

    if ((ep->tx.sq_available < 1) || (iface->cq_available < 1)) {
        return UCS_ERR_NO_RESOURCE;
    }

    sleep_gen = uct_hipower_ep_bitmap_wr(ep, ep->tx.announce_word, &wr, &sge);
    status    = uct_hipower_ep_post(ep, &wr, &wr, 1, 0, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
        /* Part of the user's messages: flush waits for it */
        ep->tx.user_end_sn = ep->tx.sn;
        ep->tx.unannounced = 0;
        iface->stats.rdma_writes++;
    }
    return status;
}

/*
 * Admission for one message: fails with UCS_ERR_NO_RESOURCE (the caller may
 * add a pending request) when there is no free peer slot or no room to post.
 */
static inline ucs_status_t uct_hipower_ep_tx_check(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_status_t status;

    status = uct_hipower_ep_user_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (ucs_unlikely(hipower_tx_ring_free(&ep->tx.ring) == 0)) {
        iface->stats.pool_empty++;
        uct_hipower_ep_post_recycle_read(ep);
        return UCS_ERR_NO_RESOURCE;
    }

    if (ucs_unlikely((ep->tx.sq_available < uct_hipower_ep_wrs_per_msg(iface) + 1) ||
                     (iface->cq_available <= 1))) {
        iface->stats.tx_queue_full++;
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

/* Admission plus a send descriptor whose buffer holds header and data */
static inline ucs_status_t
uct_hipower_ep_tx_op_get(uct_hipower_ep_t *ep, uct_hipower_op_type_t type,
                         uct_completion_t *comp, uct_hipower_tx_op_t **op_p)
{
    uct_hipower_tx_op_t *op;
    ucs_status_t status;

    status = uct_hipower_ep_tx_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    op = uct_hipower_ep_op_get(ep, type, comp);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    *op_p = op;
    return UCS_OK;
}

/*
 * Takes the next peer slot and posts the payload write (and in push mode
 * the bitmap word after it). @a data_wr has its sg_list and send flags
 * (inline) filled by the caller.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_send_msg(uct_hipower_ep_t *ep, struct ibv_send_wr *data_wr,
                        hipower_slot_hdr_t *hdr, uint8_t am_id,
                        uint32_t length, int force_signal,
                        uct_hipower_tx_op_t *op)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr bitmap_wr;
    struct ibv_sge bitmap_sge;
    uint32_t seq, slot, word, unannounced = 0;
    uint64_t sleep_gen                     = 0;
    ucs_status_t status;
    unsigned nwr;
    int push;

    seq  = hipower_tx_ring_take(&ep->tx.ring);
    slot = hipower_ring_slot(ep->tx.ring.num_slots, seq);
    hipower_slot_hdr_init(hdr, am_id, length, seq);
    ep->tx.msgs++;

    data_wr->opcode              = IBV_WR_RDMA_WRITE;
    data_wr->wr.rdma.remote_addr = ep->peer.slots_addr +
                                   (uint64_t)slot * ep->peer.slot_size +
                                   ep->peer.data_offset;
    data_wr->wr.rdma.rkey        = ep->peer.slots_rkey;

    push = (iface->config.notify == UCT_HIPOWER_NOTIFY_PUSH);
    nwr  = 1;
    if (push) {
        word = slot / HIPOWER_BITMAP_WORD_BITS;
        if ((ep->tx.unannounced > 0) && (word != ep->tx.announce_word)) {
            /* The new bit lives in another word: announce the old one */
            status = uct_hipower_ep_announce(ep);
            if (ucs_unlikely(status != UCS_OK)) {
                nwr = 0;
                goto err_undo;
            }
        }

        ep->tx.announce_word = word;
        unannounced          = ep->tx.unannounced;
        if (ep->tx.unannounced + 1 >= iface->config.announce_batch) {
            sleep_gen = uct_hipower_ep_bitmap_wr(ep, word, &bitmap_wr,
                                                 &bitmap_sge);
            data_wr->next       = &bitmap_wr;
            nwr                 = 2;
            ep->tx.unannounced  = 0;
        } else {
            ep->tx.unannounced++;
        }
    }
    status = uct_hipower_ep_post_inline(ep, data_wr,
                                        (nwr == 2) ? &bitmap_wr : data_wr,
                                        nwr, force_signal, op);

    if (ucs_unlikely(status != UCS_OK)) {
        if (push) {
            ep->tx.unannounced = unannounced;
        }
        goto err_undo;
    }

    if (nwr == 2) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
    }

    /* Flush waits for this, not for our own bitmap reads after it */
    ep->tx.user_end_sn = ep->tx.sn;
    iface->stats.tx_msgs++;
    iface->stats.tx_bytes    += length;
    iface->stats.rdma_writes += nwr;

    /* Below the threshold, every message until the read completes would
     * find it outstanding: test the flag here, not after a call */
    if (hipower_tx_ring_wants_recycle(&ep->tx.ring, ep->tx.threshold) &&
        !(ep->flags & UCT_HIPOWER_EP_FLAG_RECYCLE_READ)) {
        uct_hipower_ep_post_recycle_read(ep);
    }
    return UCS_OK;

err_undo:
    /* Nothing of this message was posted: give the slot back */
    hipower_bitmap_toggle(ep->tx.ring.written, slot);
    ep->tx.ring.head--;
    ep->tx.msgs--;
    if (push) {
        /* A sleeping peer that read the count meanwhile stays awake until
         * the message is sent again: never asleep with it missing */
        ep->ctrl->announced = ep->tx.msgs;
    }
    return status;
}

ucs_status_t uct_hipower_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                                     const void *buffer, unsigned length)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    /* One gather entry for both headers: each entry costs the provider a
     * copy of its own */
    struct {
        hipower_slot_hdr_t slot;
        uint64_t           am;
    } headers;
    struct ibv_send_wr wr;
    struct ibv_sge sge[2];
    ucs_status_t status;

    UCS_STATIC_ASSERT(sizeof(headers) == HIPOWER_SLOT_HDR_SIZE + sizeof(hdr));
    if (ucs_unlikely((id >= UCT_AM_ID_MAX) ||
                     (sizeof(hdr) + length + HIPOWER_SLOT_HDR_SIZE >
                      iface->config.max_inline))) {
        ucs_error(UCT_HIPOWER_EP_FMT ": am_short id %u length %u is over "
                  "the limit (id < %u, length <= %zu)", UCT_HIPOWER_EP_ARG(ep),
                  id, length, (unsigned)UCT_AM_ID_MAX, iface->config.max_inline -
                  HIPOWER_SLOT_HDR_SIZE - sizeof(hdr));
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_hipower_ep_tx_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    headers.am    = hdr;
    sge[0].addr   = (uintptr_t)&headers;
    sge[0].length = sizeof(headers);
    sge[1].addr   = (uintptr_t)buffer;
    sge[1].length = length;
    wr.sg_list    = sge;
    wr.num_sge    = (length > 0) ? 2 : 1;
    wr.send_flags = IBV_SEND_INLINE;
    status = uct_hipower_ep_send_msg(ep, &wr, &headers.slot, id,
                                     sizeof(hdr) + length, 0, NULL);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, &ep->super, AM, SHORT,
                                 sizeof(hdr) + length);
    return status;
}

ssize_t uct_hipower_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                uct_pack_callback_t pack_cb, void *arg,
                                unsigned flags)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_slot_hdr_t *slot_hdr;
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    size_t length;

    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": am_bcopy id %u out of range",
                  UCT_HIPOWER_EP_ARG(ep), id);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_hipower_ep_tx_op_get(ep, UCT_HIPOWER_OP_SEND, NULL, &op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    slot_hdr = uct_hipower_tx_op_buffer(op);
    length   = pack_cb(slot_hdr + 1, arg);
    if (ucs_unlikely(length > iface->config.max_payload)) {
        /* The packer has already written past the slot: a caller bug */
        ucs_fatal(UCT_HIPOWER_EP_FMT ": am_bcopy packed %zu bytes, the "
                  "limit is %zu", UCT_HIPOWER_EP_ARG(ep), length,
                  iface->config.max_payload);
    }

    sge.addr   = (uintptr_t)slot_hdr;
    sge.length = HIPOWER_SLOT_HDR_SIZE + length;
    sge.lkey      = op->lkey;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.send_flags = (sge.length <= iface->config.max_inline) ?
                    IBV_SEND_INLINE : 0;
    status = uct_hipower_ep_send_msg(ep, &wr, slot_hdr, id, length, 0, op);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put_inline(op);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

ucs_status_t uct_hipower_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                     const void *header, unsigned header_length,
                                     const uct_iov_t *iov, size_t iovcnt,
                                     unsigned flags, uct_completion_t *comp)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_sge sge[UCT_HIPOWER_MAX_IOV + 1];
    hipower_slot_hdr_t *slot_hdr;
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    ucs_status_t status;
    size_t length;
    int num_sge;

    length = header_length + uct_iov_total_length(iov, iovcnt);
    if (ucs_unlikely((id >= UCT_AM_ID_MAX) ||
                     (iovcnt > UCT_HIPOWER_MAX_IOV) ||
                     (header_length > UCT_HIPOWER_MAX_ZCOPY_HDR) ||
                     (length > iface->config.max_payload))) {
        ucs_error(UCT_HIPOWER_EP_FMT ": am_zcopy id %u header %u iovcnt %zu "
                  "length %zu is over the limit (id < %u, header <= %u, "
                  "iovcnt <= %u, length <= %zu)", UCT_HIPOWER_EP_ARG(ep), id,
                  header_length, iovcnt, length, (unsigned)UCT_AM_ID_MAX,
                  UCT_HIPOWER_MAX_ZCOPY_HDR, UCT_HIPOWER_MAX_IOV,
                  iface->config.max_payload);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_hipower_ep_tx_op_get(ep, UCT_HIPOWER_OP_COMP, comp, &op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    slot_hdr = uct_hipower_tx_op_buffer(op);
    memcpy(slot_hdr + 1, header, header_length);
    sge[0].addr   = (uintptr_t)slot_hdr;
    sge[0].length = HIPOWER_SLOT_HDR_SIZE + header_length;
    sge[0].lkey   = op->lkey;
    num_sge       = 1 + uct_hipower_ep_iov_sge(iov, iovcnt, sge + 1);

    wr.sg_list    = sge;
    wr.num_sge    = num_sge;
    wr.send_flags = 0;
    status = uct_hipower_ep_send_msg(ep, &wr, slot_hdr, id, length,
                                     comp != NULL, op);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put_inline(op);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY, length);
    return UCS_INPROGRESS;
}

/* Pull mode: make the bitmap the peer reads say which messages have landed.
 * Counts messages, not sequence numbers, which restart at the ring's period */
static void uct_hipower_ep_publish(uct_hipower_ep_t *ep, uint64_t msg_count)
{
    for (; ep->tx.published < msg_count; ++ep->tx.published) {
        hipower_bitmap_toggle(ep->ctrl->published, ep->tx.publish_slot);
        if (++ep->tx.publish_slot == ep->tx.ring.num_slots) {
            ep->tx.publish_slot = 0;
        }
    }
}

void uct_hipower_ep_tx_completion(uct_hipower_ep_t *ep, uint64_t sn)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    uint32_t recycled;
    int reread = 0;

    ep->tx.sq_available += (uint16_t)(sn + 1 - ep->tx.acked_sn);
    ep->tx.acked_sn      = sn + 1;
    ep->tx.signaled--;
    iface->cq_available++;

    ucs_queue_for_each_extract(op, &ep->tx.outstanding, queue,
                               (int64_t)(op->sn - sn) <= 0) {
        switch (op->type) {
        case UCT_HIPOWER_OP_RECYCLE_READ:
            ucs_memory_cpu_load_fence();
            recycled = hipower_tx_ring_recycle(&ep->tx.ring,
                                               ep->ctrl->peer_consumed);
            iface->stats.slots_recycled += recycled;
            ep->flags &= ~UCT_HIPOWER_EP_FLAG_RECYCLE_READ;
            /* Still blocked: keep looking until the receiver frees slots */
            reread = (hipower_tx_ring_free(&ep->tx.ring) == 0) &&
                     !ucs_queue_is_empty(&ep->pending_q);
            break;
        case UCT_HIPOWER_OP_NOTIFY_READ:
            ep->flags &= ~UCT_HIPOWER_EP_FLAG_NOTIFY_READ;
            break;
        case UCT_HIPOWER_OP_ATOMIC64:
            *(uint64_t*)op->u.result = *(uint64_t*)uct_hipower_tx_op_buffer(op);
            if (op->comp != NULL) {
                uct_invoke_completion(op->comp, UCS_OK);
            }
            break;
        case UCT_HIPOWER_OP_ARM:
            ep->event.confirmed_gen = op->u.arm_gen;
            break;
        case UCT_HIPOWER_OP_GET_BCOPY:
            op->u.get_bcopy.cb(op->u.get_bcopy.arg,
                               uct_hipower_tx_op_buffer(op),
                               op->u.get_bcopy.length);
            if (op->comp != NULL) {
                uct_invoke_completion(op->comp, UCS_OK);
            }
            break;
        default:
            if (op->comp != NULL) {
                uct_invoke_completion(op->comp, UCS_OK);
            }
            break;
        }

        if (iface->config.notify == UCT_HIPOWER_NOTIFY_PULL) {
            uct_hipower_ep_publish(ep, op->msg_count);
        }
        ucs_mpool_put_inline(op);
    }

    if (reread) {
        uct_hipower_ep_post_recycle_read(ep);
    }
    if (!ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_add_pending_list(ep);
    }
}

/* Completes every outstanding operation with @a status */
static void uct_hipower_ep_purge_outstanding(uct_hipower_ep_t *ep,
                                             ucs_status_t status)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;

    ucs_queue_for_each_extract(op, &ep->tx.outstanding, queue, 1) {
        if (op->comp != NULL) {
            uct_invoke_completion(op->comp, status);
        }
        ucs_mpool_put_inline(op);
    }
    /* Their CQEs, if any still come, are dropped without credit */
    iface->cq_available += ep->tx.signaled;
    ep->tx.signaled      = 0;
}

void uct_hipower_ep_set_failed(uct_hipower_ep_t *ep, ucs_status_t status)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->flags & UCT_HIPOWER_EP_FLAG_FAILED) {
        return;
    }

    ep->flags |= UCT_HIPOWER_EP_FLAG_FAILED;
    ep->flags &= ~(UCT_HIPOWER_EP_FLAG_RECYCLE_READ |
                   UCT_HIPOWER_EP_FLAG_NOTIFY_READ);
    uct_hipower_ep_purge_outstanding(ep, status);
    uct_hipower_ep_del_pending_list(ep);
    uct_iface_handle_ep_err(&iface->super.super, &ep->super.super, status);
}

/*
 * Receive side: messages arrive in ring order; a slot holds the next one
 * when the sender's written bit (pushed here or pulled from the sender)
 * shows the parity of that slot's next use. No completion is polled.
 */
unsigned uct_hipower_ep_rx_progress(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface   = uct_hipower_ep_iface(ep);
    uct_hipower_rx_owner_t *owner = ep->rx.owner;
    hipower_rx_ring_t *ring       = &ep->rx.ring;
    /* Per-message constants, loaded once per batch */
    size_t slot_size              = iface->config.slot_size;
    size_t slot_room              = slot_size - iface->config.data_offset;
    /* The user may use rx_headroom bytes before the data (UCP puts its
     * descriptor there, over our parsed header); right before those,
     * uct_iface_release_desc() finds the owner */
    ptrdiff_t owner_offset        = -(ptrdiff_t)(iface->config.rx_headroom +
                                                 sizeof(uct_recv_desc_t*));
    char *first_hdr               = UCS_PTR_BYTE_OFFSET(ep->rx.slots,
                                                        iface->config.data_offset);
    unsigned am_flags             = iface->config.hold_slots ?
                                    UCT_CB_PARAM_FLAG_DESC : 0;
    unsigned count, i, am_id;
    hipower_slot_hdr_t *hdr;
    const char *reason;
    ucs_status_t status;
    uint32_t slot, seq, length;

    count = hipower_rx_ring_ready_count(ring, ep->ctrl->written_view,
                                        UCT_HIPOWER_RX_BATCH);
    if (count == 0) {
        return 0;
    }

    ep->rx.delivered     += count;
    iface->stats.rx_msgs += count;

    /* The bitmap said so: now the slot contents may be read */
    ucs_memory_cpu_load_fence();

    for (i = 0; i < count; ++i) {
        seq    = ring->head;
        slot   = hipower_rx_ring_advance(ring);
        hdr    = (hipower_slot_hdr_t*)(first_hdr + (size_t)slot * slot_size);
        status = hipower_slot_hdr_parse(hdr, slot_room, seq, UCT_AM_ID_MAX,
                                        &am_id, &length, &reason);
        if (ucs_unlikely(status != UCS_OK)) {
            ucs_error(UCT_HIPOWER_EP_FMT ": dropping message %u in slot %u "
                      "from the peer: %s", UCT_HIPOWER_EP_ARG(ep), seq, slot,
                      reason);
            iface->stats.rx_msgs--;
            iface->stats.bad_slots++;
            hipower_rx_ring_release(ring, slot);
            continue;
        }

        iface->stats.rx_bytes += length;
        if (am_flags) {
            /* Only a kept descriptor is ever released */
            *(uct_recv_desc_t**)UCS_PTR_BYTE_OFFSET(hdr + 1, owner_offset) =
                    &owner->super;
        }
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id,
                           hdr + 1, length, "RX: AM slot %u", slot);
        status = uct_iface_invoke_am(&iface->super, am_id, hdr + 1, length,
                                     am_flags);
        if (ucs_likely((status == UCS_OK) || !am_flags)) {
            /* Without the flag the handler may not keep it (UCT's rule) */
            hipower_rx_ring_release(ring, slot);
        } else {
            owner->held++;
        }
    }

    return count;
}

/* uct_iface_release_desc() of a descriptor an AM handler kept */
static void uct_hipower_ep_release_desc(uct_recv_desc_t *self, void *desc)
{
    uct_hipower_rx_owner_t *owner = ucs_derived_of(self, uct_hipower_rx_owner_t);
    uct_hipower_iface_t *iface    = owner->iface;
    uint32_t slot;

    slot = UCS_PTR_BYTE_DIFF(iface->arena.base, desc) /
           iface->config.slot_size - owner->first_slot;
    ucs_assertv(slot < owner->num_slots, "slot %u num_slots %u", slot,
                owner->num_slots);
    owner->held--;
    if (owner->ep != NULL) {
        hipower_rx_ring_release(&owner->ep->rx.ring, slot);
        return;
    }

    if (owner->held == 0) {
        /* The endpoint is gone and this was its last descriptor */
        hipower_arena_free(&iface->arena.slots, owner->first_slot,
                           owner->num_slots);
        ucs_free(owner);
    }
}

int uct_hipower_ep_dispatch_pending(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    unsigned nwr               = uct_hipower_ep_wrs_per_msg(iface);
    uct_pending_req_priv_queue_t *priv;
    uct_pending_req_t *req;
    ucs_status_t status;

    /* Requests go in queue order; each one's own send must not be refused
     * for the requests still queued behind it */
    ep->flags |= UCT_HIPOWER_EP_FLAG_DISPATCHING;
    while (!ucs_queue_is_empty(&ep->pending_q) &&
           !(ep->flags & UCT_HIPOWER_EP_FLAG_FAILED) &&
           uct_hipower_ep_has_tx_resources(ep, nwr)) {
        priv = ucs_queue_head_elem_non_empty(&ep->pending_q,
                                             uct_pending_req_priv_queue_t,
                                             queue_elem);
        req  = ucs_container_of(priv, uct_pending_req_t, priv);
        ucs_queue_pull_non_empty(&ep->pending_q);
        status = req->func(req);
        if (status == UCS_OK) {
            iface->stats.pending_dispatch++;
            continue;
        }

        ucs_queue_push_head(&ep->pending_q, &priv->queue_elem);
        if (status != UCS_INPROGRESS) {
            break;
        }
    }
    ep->flags &= ~UCT_HIPOWER_EP_FLAG_DISPATCHING;

    if ((hipower_tx_ring_free(&ep->tx.ring) == 0) &&
        !ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_post_recycle_read(ep);
    }
    return ucs_queue_is_empty(&ep->pending_q);
}

ucs_status_t uct_hipower_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                        unsigned flags)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ucs_queue_is_empty(&ep->pending_q) &&
        !(ep->flags & UCT_HIPOWER_EP_FLAG_FAILED) &&
        uct_hipower_ep_has_tx_resources(ep, uct_hipower_ep_wrs_per_msg(iface))) {
        return UCS_ERR_BUSY;
    }

    uct_pending_req_queue_push(&ep->pending_q, req);
    UCT_TL_EP_STAT_PEND(&ep->super);
    if (hipower_tx_ring_free(&ep->tx.ring) == 0) {
        /* Nothing else will ask the receiver for slots */
        uct_hipower_ep_post_recycle_read(ep);
    }
    uct_hipower_ep_add_pending_list(ep);
    return UCS_OK;
}

void uct_hipower_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                  void *arg)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_pending_req_priv_queue_t *priv;

    uct_pending_queue_purge(priv, &ep->pending_q, 1, cb, arg);
    uct_hipower_ep_del_pending_list(ep);
}

ucs_status_t uct_hipower_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_tx_op_t *op;
    ucs_status_t status;

    if (ep->flags & UCT_HIPOWER_EP_FLAG_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Posted writes cannot be recalled; drop what has not started */
        uct_hipower_ep_pending_purge(tl_ep, (uct_pending_purge_callback_t)
                                     ucs_empty_function, NULL);
    } else if (!ucs_queue_is_empty(&ep->pending_q) &&
               !(ep->flags & UCT_HIPOWER_EP_FLAG_DISPATCHING)) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_hipower_ep_announce(ep);
    if (status != UCS_OK) {
        return status;
    }

    if ((int64_t)(ep->tx.acked_sn - ep->tx.user_end_sn) >= 0) {
        UCT_TL_EP_STAT_FLUSH(&ep->super);
        return UCS_OK;
    }

    if (ep->tx.unsignaled > 0) {
        /* Nothing signaled after the last writes: post a WR that is */
        status = uct_hipower_ep_post_nop(ep, comp);
        if (status != UCS_OK) {
            return status;
        }
    } else if (comp != NULL) {
        /* The last WR is signaled: complete with it */
        op = uct_hipower_ep_op_get(ep, UCT_HIPOWER_OP_COMP, comp);
        if (op == NULL) {
            return UCS_ERR_NO_RESOURCE;
        }
        op->sn        = ep->tx.sn - 1;
        op->msg_count = ep->tx.msgs;
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }

    UCT_TL_EP_STAT_FLUSH_WAIT(&ep->super);
    return UCS_INPROGRESS;
}

/*
 * Keepalive probe (UCP calls it every UCX_KEEPALIVE_INTERVAL): a zero-length
 * signaled RDMA_WRITE. If the peer's QP is gone it is retried and fails after
 * (UCX_HIPOWER_RETRY_COUNT + 1) x UCX_HIPOWER_TIMEOUT, and the failure goes
 * to the error handler like that of any other work request. A signaled
 * request already in flight probes the peer by itself.
 */
ucs_status_t uct_hipower_ep_check(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    /* Unsignaled requests alone never report: they need a signaled one */
    if ((ep->flags & UCT_HIPOWER_EP_FLAG_FAILED) ||
        !(ep->flags & UCT_HIPOWER_EP_FLAG_CONNECTED) ||
        (ep->tx.signaled > 0)) {
        return UCS_OK;
    }

    return uct_hipower_ep_post_nop(ep, NULL);
}

ucs_status_t uct_hipower_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    /* RDMA_WRITEs on one QP are already ordered; the fence matters for the
     * reads that may follow */
    ep->flags |= UCT_HIPOWER_EP_FLAG_FENCE;
    UCT_TL_EP_STAT_FENCE(&ep->super);
    return UCS_OK;
}

ucs_status_t uct_hipower_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_ep_addr_t *ep_addr = (uct_hipower_ep_addr_t*)addr;

    ep_addr->qp_num          = ep->qp->qp_num;
    ep_addr->slots_addr      = (uintptr_t)ep->rx.slots;
    ep_addr->slots_rkey      = ep->rx.mr->rkey;
    ep_addr->num_slots       = ep->rx.ring.num_slots;
    ep_addr->slot_size       = iface->config.slot_size;
    ep_addr->ctrl_read_addr  = (uintptr_t)ep->ctrl->consumed;
    ep_addr->ctrl_read_rkey  = ep->ctrl_read_mr->rkey;
    ep_addr->ctrl_write_addr = (uintptr_t)ep->ctrl->written_view;
    ep_addr->ctrl_write_rkey = (iface->config.notify == UCT_HIPOWER_NOTIFY_PUSH) ?
                               ep->ctrl_write_mr->rkey : 0;
    ep_addr->data_offset     = iface->config.data_offset;
    ep_addr->notify          = iface->config.notify;
    ep_addr->path_mtu        = iface->config.path_mtu;
    return UCS_OK;
}

ucs_status_t uct_hipower_ep_connect_to_ep(uct_ep_h tl_ep,
                                          const uct_device_addr_t *dev_addr,
                                          const uct_ep_addr_t *addr)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    const uct_hipower_ep_addr_t *ep_addr = (const uct_hipower_ep_addr_t*)addr;
    const uct_hipower_device_addr_t *peer_dev =
            (const uct_hipower_device_addr_t*)dev_addr;
    enum ibv_mtu path_mtu;
    ucs_status_t status;

    ep->peer.qp_num = ep_addr->qp_num;
    if (ep_addr->notify != iface->config.notify) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer uses UCX_HIPOWER_NOTIFY=%s, "
                  "this process %s; set the same on both sides",
                  UCT_HIPOWER_EP_ARG(ep),
                  (ep_addr->notify < UCT_HIPOWER_NOTIFY_LAST) ?
                  uct_hipower_notify_names[ep_addr->notify] : "?",
                  uct_hipower_notify_names[iface->config.notify]);
        return UCS_ERR_UNREACHABLE;
    }

    if ((ep_addr->slot_size != iface->config.slot_size) ||
        (ep_addr->num_slots == 0) ||
        (ep_addr->num_slots > UCT_HIPOWER_MAX_SLOTS)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer offers %u slots of %u bytes; "
                  "this process uses UCX_HIPOWER_SLOT_SIZE=%zu and at most %u "
                  "slots: set the same UCX_HIPOWER_SLOT_SIZE on both sides",
                  UCT_HIPOWER_EP_ARG(ep), ep_addr->num_slots,
                  ep_addr->slot_size, iface->config.slot_size,
                  UCT_HIPOWER_MAX_SLOTS);
        return UCS_ERR_UNREACHABLE;
    }

    if (ep_addr->data_offset + HIPOWER_SLOT_HDR_SIZE +
        iface->config.max_payload > ep_addr->slot_size) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer reserves %u bytes of each "
                  "slot for its receive headroom, this process %zu: the "
                  "largest message would not fit", UCT_HIPOWER_EP_ARG(ep),
                  ep_addr->data_offset, iface->config.data_offset);
        return UCS_ERR_UNREACHABLE;
    }

    ep->peer.data_offset       = ep_addr->data_offset;
    ep->peer.slots_addr        = ep_addr->slots_addr;
    ep->peer.slots_rkey        = ep_addr->slots_rkey;
    ep->peer.slot_size         = ep_addr->slot_size;
    ep->peer.consumed_addr     = ep_addr->ctrl_read_addr;
    ep->peer.published_addr    = ep_addr->ctrl_read_addr +
                                 ucs_offsetof(uct_hipower_ep_ctrl_t, published);
    ep->peer.announced_addr    = ep_addr->ctrl_read_addr +
                                 UCT_HIPOWER_CTRL_SPAN(consumed, announced);
    ep->peer.sleep_gen_addr    = ep_addr->ctrl_write_addr +
                                 UCT_HIPOWER_CTRL_SPAN(written_view,
                                                       peer_sleep_gen);
    ep->peer.ctrl_read_rkey    = ep_addr->ctrl_read_rkey;
    ep->peer.written_view_addr = ep_addr->ctrl_write_addr;
    ep->peer.ctrl_write_rkey   = ep_addr->ctrl_write_rkey;

    hipower_tx_ring_init(&ep->tx.ring, ep_addr->num_slots, ep->ctrl->written);
    ep->tx.threshold = ucs_max(1, (uint32_t)(ep_addr->num_slots *
                                             iface->config.recycle_threshold));

    path_mtu = ucs_min(iface->config.path_mtu, (enum ibv_mtu)ep_addr->path_mtu);
    status   = uct_hipower_qp_connect(iface, ep->qp, peer_dev, ep_addr->qp_num,
                                      path_mtu);
    if (status != UCS_OK) {
        return status;
    }

    ep->flags |= UCT_HIPOWER_EP_FLAG_CONNECTED;
    ucs_debug(UCT_HIPOWER_EP_FMT ": connected, %u peer slots of %u bytes, "
              "recycle below %u free", UCT_HIPOWER_EP_ARG(ep),
              ep_addr->num_slots, ep_addr->slot_size, ep->tx.threshold);
    return UCS_OK;
}

static ucs_status_t uct_hipower_ep_reg_ctrl(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    int write_access;
    ucs_status_t status;

    /* The peer reads our consumed bitmap (recycle) and, in pull mode, our
     * published one; nothing else of ours */
    status = uct_hipower_md_reg_internal(md, ep->ctrl->consumed,
                                         UCT_HIPOWER_CTRL_SPAN(consumed,
                                                               written_view),
                                         IBV_ACCESS_REMOTE_READ,
                                         "peer-readable bitmaps",
                                         &ep->ctrl_read_mr);
    if (status != UCS_OK) {
        return status;
    }

    write_access = IBV_ACCESS_LOCAL_WRITE;
    if (iface->config.notify == UCT_HIPOWER_NOTIFY_PUSH) {
        write_access |= IBV_ACCESS_REMOTE_WRITE;
    }
    status = uct_hipower_md_reg_internal(md, ep->ctrl->written_view,
                                         UCT_HIPOWER_CTRL_SPAN(written_view,
                                                               peer_consumed),
                                         write_access, "written-bitmap view",
                                         &ep->ctrl_write_mr);
    if (status != UCS_OK) {
        goto err_dereg_read;
    }

    status = uct_hipower_md_reg_internal(md, ep->ctrl->peer_consumed,
                                         UCT_HIPOWER_CTRL_SPAN(peer_consumed,
                                                               written) +
                                         sizeof(ep->ctrl->written),
                                         IBV_ACCESS_LOCAL_WRITE,
                                         "local bitmaps", &ep->ctrl_local_mr);
    if (status != UCS_OK) {
        goto err_dereg_write;
    }

    return UCS_OK;

err_dereg_write:
    uct_hipower_md_dereg_internal(md, ep->ctrl_write_mr, "written-bitmap view");
err_dereg_read:
    uct_hipower_md_dereg_internal(md, ep->ctrl_read_mr, "peer-readable bitmaps");
    return status;
}

static void uct_hipower_ep_dereg_ctrl(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);

    uct_hipower_md_dereg_internal(md, ep->ctrl_local_mr, "local bitmaps");
    uct_hipower_md_dereg_internal(md, ep->ctrl_write_mr, "written-bitmap view");
    uct_hipower_md_dereg_internal(md, ep->ctrl_read_mr, "peer-readable bitmaps");
}

/* Carves this endpoint's receive slots out of the arena and lets the peer
 * (and only the peer, by the rkey it gets) write into them */
static ucs_status_t uct_hipower_ep_alloc_rx(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    uct_hipower_rx_owner_t *owner;
    uint32_t first, count;
    ucs_status_t status;

    status = hipower_arena_alloc(&iface->arena.slots,
                                 iface->config.slots_per_ep,
                                 iface->config.min_slots_per_ep, &first,
                                 &count);
    if (status != UCS_OK) {
        ucs_error("hipower %s: cannot create an endpoint: fewer than "
                  "UCX_HIPOWER_MIN_SLOTS=%u contiguous receive slots left in "
                  "the UCX_HIPOWER_MEM_BUDGET=%zu arena (%u free in total); "
                  "raise the budget or lower UCX_HIPOWER_SLOTS",
                  iface->dev_name, iface->config.min_slots_per_ep,
                  iface->arena.size,
                  hipower_arena_free_slots(&iface->arena.slots));
        return UCS_ERR_NO_MEMORY;
    }

    if (count < iface->config.slots_per_ep) {
        ucs_debug("hipower %s: memory budget short, endpoint gets %u of %u "
                  "slots", iface->dev_name, count,
                  iface->config.slots_per_ep);
    }

    owner = ucs_calloc(1, sizeof(*owner), "hipower rx owner");
    if (owner == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err_free_slots;
    }

    owner->super.cb   = uct_hipower_ep_release_desc;
    owner->ep         = ep;
    owner->iface      = iface;
    owner->first_slot = first;
    owner->num_slots  = count;
    ep->rx.owner      = owner;
    ep->rx.slots      = UCS_PTR_BYTE_OFFSET(iface->arena.base,
                                            (size_t)first *
                                            iface->config.slot_size);
    hipower_rx_ring_init(&ep->rx.ring, count, ep->ctrl->consumed);

    status = uct_hipower_md_reg_internal(md, ep->rx.slots,
                                         (size_t)count * iface->config.slot_size,
                                         IBV_ACCESS_LOCAL_WRITE |
                                         IBV_ACCESS_REMOTE_WRITE,
                                         "receive slots", &ep->rx.mr);
    if (status != UCS_OK) {
        goto err_free_owner;
    }

    return UCS_OK;

err_free_owner:
    ucs_free(owner);
err_free_slots:
    hipower_arena_free(&iface->arena.slots, first, count);
    return status;
}

static void uct_hipower_ep_free_rx(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    uct_hipower_rx_owner_t *owner = ep->rx.owner;

    uct_hipower_md_dereg_internal(md, ep->rx.mr, "receive slots");
    if (owner->held > 0) {
        /* The user still holds descriptors: the slots stay taken until the
         * last one is released */
        ucs_debug("hipower %s: ep %p destroyed with %u descriptors held",
                  iface->dev_name, ep, owner->held);
        owner->ep = NULL;
        return;
    }

    hipower_arena_free(&iface->arena.slots, owner->first_slot,
                       owner->num_slots);
    ucs_free(owner);
}

static UCS_CLASS_INIT_FUNC(uct_hipower_ep_t, const uct_ep_params_t *params)
{
    uct_hipower_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_hipower_iface_t);
    ucs_status_t status;
    khiter_t iter;
    int ret;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    self->flags           = 0;
    self->tx.sn           = 0;
    self->tx.acked_sn     = 0;
    self->tx.user_end_sn  = 0;
    self->tx.unannounced  = 0;
    self->tx.announce_word = 0;
    self->tx.unsignaled   = 0;
    self->tx.signaled     = 0;
    self->tx.published    = 0;
    self->tx.publish_slot = 0;
    self->tx.msgs         = 0;
    self->tx.woken_gen    = 0;
    self->rx.delivered    = 0;
    self->event.posted_gen    = 0;
    self->event.confirmed_gen = 0;
    self->tx.sq_available = iface->config.tx_queue_len;
    self->peer.qp_num     = 0;
    ucs_queue_head_init(&self->tx.outstanding);
    ucs_queue_head_init(&self->pending_q);
    /* Until connected the ring has no slots, so nothing can be sent */
    memset(&self->tx.ring, 0, sizeof(self->tx.ring));

    status = ucs_posix_memalign((void**)&self->ctrl, ucs_get_page_size(),
                                sizeof(*self->ctrl), "hipower ep bitmaps");
    if (status != UCS_OK) {
        return status;
    }
    memset(self->ctrl, 0, sizeof(*self->ctrl));

    status = uct_hipower_ep_reg_ctrl(self);
    if (status != UCS_OK) {
        goto err_free_ctrl;
    }

    status = uct_hipower_ep_alloc_rx(self);
    if (status != UCS_OK) {
        goto err_dereg_ctrl;
    }

    status = uct_hipower_qp_create(iface, &self->qp);
    if (status != UCS_OK) {
        goto err_free_rx;
    }

    status = uct_hipower_ep_post_event_recvs(self, UCT_HIPOWER_EVENT_RECVS);
    if (status != UCS_OK) {
        goto err_destroy_qp;
    }

    iter = kh_put(uct_hipower_qp_ep, &iface->qp_eps, self->qp->qp_num, &ret);
    if (ret == -1) {
        status = UCS_ERR_NO_MEMORY;
        goto err_destroy_qp;
    }
    kh_value(&iface->qp_eps, iter) = self;
    ucs_list_add_tail(&iface->ep_list, &self->list);

    ucs_debug("hipower %s: ep %p qp 0x%x, %u receive slots", iface->dev_name,
              self, self->qp->qp_num, self->rx.ring.num_slots);
    return UCS_OK;

err_destroy_qp:
    uct_hipower_qp_destroy(iface, self->qp);
err_free_rx:
    uct_hipower_ep_free_rx(self);
err_dereg_ctrl:
    uct_hipower_ep_dereg_ctrl(self);
err_free_ctrl:
    ucs_free(self->ctrl);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_hipower_ep_t)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(self);
    khiter_t iter;

    uct_hipower_ep_pending_purge(&self->super.super,
                                 (uct_pending_purge_callback_t)
                                 ucs_empty_function, NULL);
    ucs_list_del(&self->list);
    iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, self->qp->qp_num);
    if (iter != kh_end(&iface->qp_eps)) {
        kh_del(uct_hipower_qp_ep, &iface->qp_eps, iter);
    }

    /* Work requests still in flight will never be seen by this endpoint:
     * their CQEs are dropped by QP number; once the QP is gone the device
     * no longer reads their buffers, so their completions run now */
    uct_hipower_qp_destroy(iface, self->qp);
    uct_hipower_ep_purge_outstanding(self, UCS_ERR_CANCELED);
    uct_hipower_ep_free_rx(self);
    uct_hipower_ep_dereg_ctrl(self);
    ucs_free(self->ctrl);
}

UCS_CLASS_DEFINE(uct_hipower_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_hipower_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_hipower_ep_t, uct_ep_t);
