/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_H_
#define UCT_HIPOWER_EP_H_

#include "hipower_iface.h"

#include <uct/base/uct_iov.inl>
#include <ucs/arch/cpu.h>


enum {
    UCT_HIPOWER_EP_FLAG_CONNECTED      = UCS_BIT(0),
    UCT_HIPOWER_EP_FLAG_RECYCLE_READ   = UCS_BIT(1), /* Recycle READ posted */
    UCT_HIPOWER_EP_FLAG_NOTIFY_READ    = UCS_BIT(2), /* Pull READ posted */
    UCT_HIPOWER_EP_FLAG_FENCE          = UCS_BIT(3), /* Fence the next WR */
    UCT_HIPOWER_EP_FLAG_PENDING_LISTED = UCS_BIT(4), /* In iface pending_eps */
    UCT_HIPOWER_EP_FLAG_FAILED         = UCS_BIT(5),
    UCT_HIPOWER_EP_FLAG_DISPATCHING    = UCS_BIT(6)  /* Pending dispatch runs */
};


/* Largest zero-copy iov and AM header */
#define UCT_HIPOWER_MAX_IOV          8
#define UCT_HIPOWER_MAX_ZCOPY_HDR    128

struct uct_hipower_rx_owner;


typedef struct uct_hipower_ep {
    uct_base_ep_t                super;
    struct ibv_qp                *qp;
    uct_hipower_ep_ctrl_t        *ctrl;
    struct ibv_mr                *ctrl_read_mr;
    struct ibv_mr                *ctrl_write_mr;
    struct ibv_mr                *ctrl_local_mr;
    uint32_t                     flags;
    ucs_list_link_t              list;         /* In iface->ep_list */
    ucs_list_link_t              pending_list; /* In iface->pending_eps */
    ucs_queue_head_t             pending_q;

    struct {
        hipower_rx_ring_t        ring;
        void                     *slots;
        struct ibv_mr            *mr;          /* REMOTE_WRITE, our slots */
        struct uct_hipower_rx_owner *owner;    /* For release_desc */
        uint64_t                 delivered;    /* Messages taken from the ring */
    } rx;

    struct {
        hipower_tx_ring_t        ring;
        uint32_t                 threshold;    /* Recycle below this many */
        uint64_t                 msgs;         /* Messages posted */
        uint64_t                 published;    /* Pull: messages published */
        uint32_t                 publish_slot; /* Pull: next slot to publish */
        uint16_t                 sq_available; /* Free send queue entries */
        uint16_t                 unsignaled;   /* WRs since last signaled */
        uint16_t                 signaled;     /* Signaled WRs in flight */
        uint64_t                 sn;           /* Of the next work request */
        uint64_t                 acked_sn;     /* All WRs before it are done */
        uint64_t                 user_end_sn;  /* WRs of user ops end here */
        uint32_t                 unannounced;  /* Push: messages not announced */
        uint32_t                 announce_word; /* Push: their bitmap word */
        uint64_t                 woken_gen;    /* Peer sleep gen we woke */
        ucs_queue_head_t         outstanding;  /* uct_hipower_tx_op_t */
    } tx;

    struct {
        uint64_t                 posted_gen;   /* Sleep handshake posted */
        uint64_t                 confirmed_gen; /* ... and completed */
    } event;

    struct {
        uint64_t                 slots_addr;
        uint32_t                 slots_rkey;
        uint32_t                 slot_size;
        uint32_t                 data_offset;  /* Header + data start here */
        uint64_t                 consumed_addr;
        uint64_t                 published_addr;
        uint64_t                 announced_addr;
        uint64_t                 sleep_gen_addr;
        uint32_t                 ctrl_read_rkey;
        uint64_t                 written_view_addr;
        uint32_t                 ctrl_write_rkey;
        uint32_t                 qp_num;
    } peer;
} uct_hipower_ep_t;


#define UCT_HIPOWER_EP_FMT        "hipower %s ep %p (qp 0x%x -> peer qp 0x%x)"
#define UCT_HIPOWER_EP_ARG(_ep)   uct_hipower_ep_iface(_ep)->dev_name, (_ep), \
                                  (_ep)->qp->qp_num, (_ep)->peer.qp_num


static inline uct_hipower_iface_t *uct_hipower_ep_iface(uct_hipower_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_hipower_iface_t);
}


UCS_CLASS_DECLARE_NEW_FUNC(uct_hipower_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_hipower_ep_t, uct_ep_t);

ucs_status_t uct_hipower_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr);

ucs_status_t uct_hipower_ep_connect_to_ep(uct_ep_h tl_ep,
                                          const uct_device_addr_t *dev_addr,
                                          const uct_ep_addr_t *ep_addr);

ucs_status_t uct_hipower_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                                     const void *buffer, unsigned length);

ssize_t uct_hipower_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                uct_pack_callback_t pack_cb, void *arg,
                                unsigned flags);

ucs_status_t uct_hipower_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                     const void *header, unsigned header_length,
                                     const uct_iov_t *iov, size_t iovcnt,
                                     unsigned flags, uct_completion_t *comp);

ucs_status_t uct_hipower_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                      unsigned length, uint64_t remote_addr,
                                      uct_rkey_t rkey);

ssize_t uct_hipower_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                 void *arg, uint64_t remote_addr,
                                 uct_rkey_t rkey);

ucs_status_t uct_hipower_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t uct_hipower_ep_get_bcopy(uct_ep_h tl_ep,
                                      uct_unpack_callback_t unpack_cb,
                                      void *arg, size_t length,
                                      uint64_t remote_addr, uct_rkey_t rkey,
                                      uct_completion_t *comp);

ucs_status_t uct_hipower_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp);

/* What an RC QP's atomics can do: 64-bit add, fetch-add, compare-swap */
#define UCT_HIPOWER_ATOMIC64_OPS   UCS_BIT(UCT_ATOMIC_OP_ADD)
#define UCT_HIPOWER_ATOMIC64_FOPS  (UCS_BIT(UCT_ATOMIC_OP_ADD) | \
                                    UCS_BIT(UCT_ATOMIC_OP_CSWAP))

ucs_status_t uct_hipower_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                          uint64_t value, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ucs_status_t uct_hipower_ep_atomic64_fetch(uct_ep_h tl_ep, unsigned opcode,
                                           uint64_t value, uint64_t *result,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp);

ucs_status_t uct_hipower_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                           uint64_t swap, uint64_t remote_addr,
                                           uct_rkey_t rkey, uint64_t *result,
                                           uct_completion_t *comp);

ucs_status_t uct_hipower_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp);

ucs_status_t uct_hipower_ep_check(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp);

ucs_status_t uct_hipower_ep_fence(uct_ep_h tl_ep, unsigned flags);

ucs_status_t uct_hipower_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                        unsigned flags);

void uct_hipower_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                  void *arg);

/*
 * Posts a chain of work requests (send flags set by the caller). The last
 * one is signaled when due (every signal_interval WRs) or forced; a signaled
 * WR's completion retires every WR before it. @a op, if any, is retired with
 * the chain: it holds the bcopy buffer or the user completion.
 */
ucs_status_t uct_hipower_ep_post(uct_hipower_ep_t *ep,
                                 struct ibv_send_wr *first,
                                 struct ibv_send_wr *last, unsigned nwr,
                                 int force_signal, uct_hipower_tx_op_t *op);

/* An operation record (with its buffer) from the interface's send pool */
static UCS_F_ALWAYS_INLINE uct_hipower_tx_op_t *
uct_hipower_ep_op_get(uct_hipower_ep_t *ep, uct_hipower_op_type_t type,
                      uct_completion_t *comp)
{
    uct_hipower_tx_op_t *op;

    op = ucs_mpool_get_inline(&uct_hipower_ep_iface(ep)->tx_mp);
    if (ucs_likely(op != NULL)) {
        op->type = type;
        op->comp = comp;
    }
    return op;
}

/*
 * Whether a user operation may go out now, resources aside: the endpoint
 * has not failed, is connected, and no pending request is ahead of it
 * (pending requests go first, so that operations keep their order).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_user_check(uct_hipower_ep_t *ep)
{
    if (ucs_unlikely(ep->flags & UCT_HIPOWER_EP_FLAG_FAILED)) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (ucs_unlikely(!(ep->flags & UCT_HIPOWER_EP_FLAG_CONNECTED) ||
                     (!ucs_queue_is_empty(&ep->pending_q) &&
                      !(ep->flags & UCT_HIPOWER_EP_FLAG_DISPATCHING)))) {
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
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

/* Wakeup: posts @a count receives for the peer's wake-up writes */
ucs_status_t uct_hipower_ep_post_event_recvs(uct_hipower_ep_t *ep,
                                             unsigned count);

/*
 * Wakeup, sender side, for each bitmap-word write: publishes how many
 * messages are announced and, if the peer has gone to sleep since we last
 * woke it, turns the write into one that also wakes it. One store, one
 * fence and one load per announce when nobody sleeps (see hipower_event.c).
 * Returns the peer's sleep generation, for uct_hipower_ep_wakeup_posted().
 */
static UCS_F_ALWAYS_INLINE uint64_t
uct_hipower_ep_wakeup_check(uct_hipower_ep_t *ep, struct ibv_send_wr *wr)
{
    uint64_t gen;

    ep->ctrl->announced = ep->tx.msgs;
    ucs_memory_cpu_fence();
    gen = *(volatile uint64_t*)&ep->ctrl->peer_sleep_gen;
    if (ucs_unlikely(gen != ep->tx.woken_gen)) {
        wr->opcode   = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr->imm_data = 0;
    }
    return gen;
}

/*
 * The write built by uct_hipower_ep_wakeup_check() was posted: only now is
 * the peer's generation woken. Were it recorded before a post that failed,
 * no later write would carry the wake-up and the peer would sleep on.
 */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_wakeup_posted(uct_hipower_ep_t *ep, uint64_t gen)
{
    if (ucs_unlikely(gen != ep->tx.woken_gen)) {
        ep->tx.woken_gen = gen;
        uct_hipower_ep_iface(ep)->stats.wakeup_writes++;
    }
}

/* Handles the completion of the work request numbered @a sn */
void uct_hipower_ep_tx_completion(uct_hipower_ep_t *ep, uint64_t sn);

/* Marks the endpoint failed and completes everything outstanding with
 * @a status; the iface error handler is told once */
void uct_hipower_ep_set_failed(uct_hipower_ep_t *ep, ucs_status_t status);

/* Delivers the messages that have arrived; returns how many */
unsigned uct_hipower_ep_rx_progress(uct_hipower_ep_t *ep);

/* Dispatches pending requests while resources last; 1 if the queue emptied */
int uct_hipower_ep_dispatch_pending(uct_hipower_ep_t *ep);

/* Push mode: writes the bitmap word of messages not yet announced */
ucs_status_t uct_hipower_ep_announce(uct_hipower_ep_t *ep);

/* Posts the pull-mode READ of the peer's published bitmap, if none is out */
void uct_hipower_ep_post_notify_read(uct_hipower_ep_t *ep);

#endif
