/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * RMA on user memory: RDMA_WRITE and RDMA_READ on the endpoint's RC QP with
 * the rkeys of the hipower MD. No receive slot is involved, so RMA never
 * waits for the peer to recycle; it shares the send queue, the completion
 * credits and the work-request order with the endpoint's active messages.
 */

#include "hipower_ep.h"

#include <ucs/debug/log.h>
#include <string.h>
#include <inttypes.h>


/* Room to post one RMA work request and, later, the announce of pending
 * AMs; no bundle waiting before it */
static inline ucs_status_t uct_hipower_ep_rma_check(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_status_t status;

    status = uct_hipower_ep_user_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    /* Not bundled: active messages waiting in a bundle go first, so that
     * operations leave in the order they were called */
    status = uct_hipower_ep_bundle_first(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (ucs_unlikely(!uct_hipower_ep_has_room(ep, 2))) {
        iface->stats.tx_queue_full++;
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

static inline void uct_hipower_ep_rma_wr(struct ibv_send_wr *wr,
                                         enum ibv_wr_opcode opcode,
                                         struct ibv_sge *sge, int num_sge,
                                         uint64_t remote_addr, uct_rkey_t rkey)
{
    wr->opcode              = opcode;
    wr->send_flags          = 0;
    wr->sg_list             = sge;
    wr->num_sge             = num_sge;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->wr.rdma.rkey        = (uint32_t)rkey;
}

/* Posts one RMA work request (flush then waits for it); @a op, if any, goes
 * back to the pool if it could not be posted */
static inline ucs_status_t uct_hipower_ep_rma_post(uct_hipower_ep_t *ep,
                                                   struct ibv_send_wr *wr,
                                                   int force_signal,
                                                   uct_hipower_tx_op_t *op)
{
    ucs_status_t status;

    status = uct_hipower_ep_post(ep, wr, wr, 1, force_signal, op);
    if (ucs_likely(status == UCS_OK)) {
        uct_hipower_ep_user_end(ep, 0);
    } else if (op != NULL) {
        ucs_mpool_put_inline(op);
    }
    return status;
}

/* A get_bcopy's READ completed: its data to the user's unpacker */
static void uct_hipower_ep_get_bcopy_done(uct_hipower_tx_op_t *op,
                                          uct_hipower_txqp_t *txqp)
{
    op->u.get_bcopy.cb(op->u.get_bcopy.arg, uct_hipower_tx_op_buffer(op),
                       op->u.get_bcopy.length);
}

/* A fetching atomic completed: the value it fetched to the user's result */
static void uct_hipower_ep_atomic64_done(uct_hipower_tx_op_t *op,
                                         uct_hipower_txqp_t *txqp)
{
    *(uint64_t*)op->u.result = *(uint64_t*)uct_hipower_tx_op_buffer(op);
}

/* A size within the operation's limit, and room to post it now */
static inline ucs_status_t uct_hipower_ep_rma_admit(uct_hipower_ep_t *ep,
                                                    const char *name,
                                                    size_t length, size_t max)
{
    if (ucs_unlikely(length > max)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": %s length %zu is over the limit %zu",
                  UCT_HIPOWER_EP_ARG(ep), name, length, max);
        return UCS_ERR_INVALID_PARAM;
    }

    return uct_hipower_ep_rma_check(ep);
}

ucs_status_t uct_hipower_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                      unsigned length, uint64_t remote_addr,
                                      uct_rkey_t rkey)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    status = uct_hipower_ep_rma_admit(ep, "put_short", length,
                                      iface->config.max_inline);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    sge.addr   = (uintptr_t)buffer;
    sge.length = length;
    sge.lkey   = 0;
    uct_hipower_ep_rma_wr(&wr, IBV_WR_RDMA_WRITE, &sge, 1, remote_addr, rkey);
    wr.send_flags = IBV_SEND_INLINE;
    status = uct_hipower_ep_rma_post(ep, &wr, 0, NULL);
    if (ucs_likely(status == UCS_OK)) {
        iface->stats.put_ops++;
        iface->stats.put_bytes += length;
        UCT_TL_EP_STAT_OP(&ep->super, PUT, SHORT, length);
    }
    return status;
}

ssize_t uct_hipower_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                 void *arg, uint64_t remote_addr,
                                 uct_rkey_t rkey)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    size_t length;

    status = uct_hipower_ep_rma_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    op = uct_hipower_ep_op_get(ep, NULL, 0, NULL);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    length = pack_cb(uct_hipower_tx_op_buffer(op), arg);
    if (ucs_unlikely(length > iface->config.slot_size)) {
        /* Caught in the buffer's slack (ERRHANDLE_BCOPY_LEN) */
        ucs_mpool_put_inline(op);
        return uct_hipower_ep_bcopy_too_long(ep, "put_bcopy", length,
                                             iface->config.slot_size);
    }

    sge.addr   = (uintptr_t)uct_hipower_tx_op_buffer(op);
    sge.length = length;
    sge.lkey   = op->lkey;
    uct_hipower_ep_rma_wr(&wr, IBV_WR_RDMA_WRITE, &sge, 1, remote_addr, rkey);
    if (length <= iface->config.max_inline) {
        wr.send_flags = IBV_SEND_INLINE;
    }
    status = uct_hipower_ep_rma_post(ep, &wr, 0, op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->stats.put_ops++;
    iface->stats.put_bytes += length;
    UCT_TL_EP_STAT_OP(&ep->super, PUT, BCOPY, length);
    return length;
}

ucs_status_t uct_hipower_ep_get_bcopy(uct_ep_h tl_ep,
                                      uct_unpack_callback_t unpack_cb,
                                      void *arg, size_t length,
                                      uint64_t remote_addr, uct_rkey_t rkey,
                                      uct_completion_t *comp)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    status = uct_hipower_ep_rma_admit(ep, "get_bcopy", length,
                                      iface->config.slot_size);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    op = uct_hipower_ep_op_get(ep, uct_hipower_ep_get_bcopy_done,
                               UCT_HIPOWER_OP_FLAG_USER, comp);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op->u.get_bcopy.cb     = unpack_cb;
    op->u.get_bcopy.arg    = arg;
    op->u.get_bcopy.length = length;
    sge.addr               = (uintptr_t)uct_hipower_tx_op_buffer(op);
    sge.length             = length;
    sge.lkey               = op->lkey;
    uct_hipower_ep_rma_wr(&wr, IBV_WR_RDMA_READ, &sge, 1, remote_addr, rkey);
    /* Signaled: the data is unpacked when the read completes */
    status = uct_hipower_ep_rma_post(ep, &wr, 1, op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->stats.get_ops++;
    iface->stats.get_bytes += length;
    UCT_TL_EP_STAT_OP(&ep->super, GET, BCOPY, length);
    return UCS_INPROGRESS;
}

/* put_zcopy and get_zcopy: one WRITE or READ straight from/to user memory */
static inline ucs_status_t
uct_hipower_ep_rma_zcopy(uct_ep_h tl_ep, enum ibv_wr_opcode opcode,
                         const uct_iov_t *iov, size_t iovcnt,
                         uint64_t remote_addr, uct_rkey_t rkey,
                         uct_completion_t *comp)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    int is_put                 = (opcode == IBV_WR_RDMA_WRITE);
    size_t length              = uct_iov_total_length(iov, iovcnt);
    struct ibv_sge sge[UCT_HIPOWER_MAX_IOV];
    uct_hipower_tx_op_t *op = NULL;
    struct ibv_send_wr wr;
    ucs_status_t status;

    if (ucs_unlikely(iovcnt > UCT_HIPOWER_MAX_IOV)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": %s iovcnt %zu is over the limit %u",
                  UCT_HIPOWER_EP_ARG(ep), is_put ? "put_zcopy" : "get_zcopy",
                  iovcnt, UCT_HIPOWER_MAX_IOV);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_hipower_ep_rma_admit(ep, is_put ? "put_zcopy" : "get_zcopy",
                                      length, iface->config.max_rma);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (comp != NULL) {
        op = uct_hipower_ep_op_get(ep, NULL, 0, comp);
        if (ucs_unlikely(op == NULL)) {
            return UCS_ERR_NO_RESOURCE;
        }
    }

    uct_hipower_ep_rma_wr(&wr, opcode, sge,
                          uct_hipower_ep_iov_sge(iov, iovcnt, sge),
                          remote_addr, rkey);
    status = uct_hipower_ep_rma_post(ep, &wr, comp != NULL, op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (is_put) {
        iface->stats.put_ops++;
        iface->stats.put_bytes += length;
        UCT_TL_EP_STAT_OP(&ep->super, PUT, ZCOPY, length);
    } else {
        iface->stats.get_ops++;
        iface->stats.get_bytes += length;
        UCT_TL_EP_STAT_OP(&ep->super, GET, ZCOPY, length);
    }
    /* Without a completion the user learns of it by flush */
    return UCS_INPROGRESS;
}

ucs_status_t uct_hipower_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_hipower_ep_rma_zcopy(tl_ep, IBV_WR_RDMA_WRITE, iov, iovcnt,
                                    remote_addr, rkey, comp);
}

ucs_status_t uct_hipower_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_hipower_ep_rma_zcopy(tl_ep, IBV_WR_RDMA_READ, iov, iovcnt,
                                    remote_addr, rkey, comp);
}

/*
 * 64-bit remote atomics: the verbs FETCH_AND_ADD and CMP_AND_SWP, which is
 * all an RC QP offers (so post ADD, fetch ADD and CSWAP). The original
 * value lands in the operation's buffer and is copied out on completion.
 */
static inline ucs_status_t
uct_hipower_ep_atomic64(uct_hipower_ep_t *ep, enum ibv_wr_opcode opcode,
                        uint64_t compare_add, uint64_t swap,
                        uint64_t remote_addr, uct_rkey_t rkey,
                        uint64_t *result, uct_completion_t *comp)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    if (ucs_unlikely(remote_addr % sizeof(uint64_t))) {
        ucs_error(UCT_HIPOWER_EP_FMT ": atomic on unaligned remote address "
                  "0x%" PRIx64, UCT_HIPOWER_EP_ARG(ep), remote_addr);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_hipower_ep_rma_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    /* A posted (non-fetching) atomic still needs somewhere to put the
     * result: the buffer goes back to the pool when a later WR completes */
    op = (result != NULL) ?
         uct_hipower_ep_op_get(ep, uct_hipower_ep_atomic64_done,
                               UCT_HIPOWER_OP_FLAG_USER, comp) :
         uct_hipower_ep_op_get(ep, NULL, 0, comp);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op->u.result              = result;
    sge.addr                  = (uintptr_t)uct_hipower_tx_op_buffer(op);
    sge.length                = sizeof(uint64_t);
    sge.lkey                  = op->lkey;
    wr.opcode                 = opcode;
    wr.send_flags             = 0;
    wr.sg_list                = &sge;
    wr.num_sge                = 1;
    wr.wr.atomic.remote_addr  = remote_addr;
    wr.wr.atomic.rkey         = (uint32_t)rkey;
    wr.wr.atomic.compare_add  = compare_add;
    wr.wr.atomic.swap         = swap;
    status = uct_hipower_ep_rma_post(ep, &wr, result != NULL, op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->stats.atomic_ops++;
    return (result != NULL) ? UCS_INPROGRESS : UCS_OK;
}

static int uct_hipower_ep_atomic_op_valid(uct_hipower_ep_t *ep,
                                          unsigned opcode, uint64_t mask)
{
    if (ucs_likely((opcode < UCT_ATOMIC_OP_LAST) && (UCS_BIT(opcode) & mask))) {
        return 1;
    }

    ucs_error(UCT_HIPOWER_EP_FMT ": atomic operation %u is not supported "
              "(only add, fetch-add and compare-swap, 64-bit)",
              UCT_HIPOWER_EP_ARG(ep), opcode);
    return 0;
}

ucs_status_t uct_hipower_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                          uint64_t value, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    if (!uct_hipower_ep_atomic_op_valid(ep, opcode,
                                        UCT_HIPOWER_ATOMIC64_OPS)) {
        return UCS_ERR_UNSUPPORTED;
    }

    return uct_hipower_ep_atomic64(ep, IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0,
                                   remote_addr, rkey, NULL, NULL);
}

ucs_status_t uct_hipower_ep_atomic64_fetch(uct_ep_h tl_ep, unsigned opcode,
                                           uint64_t value, uint64_t *result,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    if (!uct_hipower_ep_atomic_op_valid(ep, opcode,
                                        UCT_HIPOWER_ATOMIC64_FOPS &
                                        ~UCS_BIT(UCT_ATOMIC_OP_CSWAP))) {
        return UCS_ERR_UNSUPPORTED;
    }

    return uct_hipower_ep_atomic64(ep, IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0,
                                   remote_addr, rkey, result, comp);
}

ucs_status_t uct_hipower_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                           uint64_t swap, uint64_t remote_addr,
                                           uct_rkey_t rkey, uint64_t *result,
                                           uct_completion_t *comp)
{
    return uct_hipower_ep_atomic64(ucs_derived_of(tl_ep, uct_hipower_ep_t),
                                   IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap,
                                   remote_addr, rkey, result, comp);
}
