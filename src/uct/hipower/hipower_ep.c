/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Endpoint life cycle and what every operation kind shares: posting with a
 * completion-queue credit per work request, completions, pending requests,
 * flush, check, fence, and the orderly end of a QP (what rc_ep.c holds in
 * UCX). Active messages are in hipower_ep_am.c, the receive side in
 * hipower_ep_rx.c, RMA in hipower_ep_rma.c.
 */

#include "hipower_ep.h"
#include "hipower_grant.h"
#include "hipower_verbs.h"
#include "hipower_conn.h"
#include "hipower_ep_active.h"

#include <ucs/arch/bitops.h>
#include <ucs/async/async.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/type/class.h>
#include <string.h>


/* The modes of UCX_HIPOWER_NOTIFY, by value (the configuration table
 * parses them; connect names a peer's mode that differs) */
const char *uct_hipower_notify_names[] = {
    [UCT_HIPOWER_NOTIFY_SELF] = "self",
    [UCT_HIPOWER_NOTIFY_PUSH] = "push",
    [UCT_HIPOWER_NOTIFY_PULL] = "pull",
    [UCT_HIPOWER_NOTIFY_LAST] = NULL
};


/*
 * A destroyed endpoint's QP, kept until the device is done with it: every
 * request it still has out completes (flushed, once the QP is in error),
 * every receive it still has posted is flushed, and only then is the QP
 * destroyed, so that no completion of it reaches memory that was reused or
 * an endpoint that took over its QP number. When the endpoint was idle and
 * its peer alive, the QP first writes "closed" to the peer (goodbye), so
 * that the peer stops what it sends of its own accord without an error.
 */
typedef struct uct_hipower_qp_gc {
    uct_hipower_txqp_t           txqp;         /* Must be first */
    ucs_list_link_t              list;         /* In iface->gc_list */
    uct_hipower_iface_t          *iface;
    uct_hipower_ep_ctrl_t        *ctrl;        /* Target of its READs */
    struct ibv_mr                *ctrl_local_mr;
    /* After a goodbye, the peer may still read our bitmaps and write our
     * control words until it has it: those windows stay open until the
     * QP drained (they cover ctrl, kept here; never the slots, which go
     * back to the pool at destroy) */
    uct_hipower_window_t         ctrl_read;
    uct_hipower_window_t         ctrl_write;
    int                          in_error;     /* QP moved to error */
    int                          reserve;      /* The endpoint's credit */
} uct_hipower_qp_gc_t;


static void uct_hipower_ep_check_peer_state(uct_hipower_ep_t *ep);

/* Completes the operations up to request @a sn, all successful */
static void uct_hipower_ep_retire_ops(uct_hipower_ep_t *ep, uint64_t sn)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    /* A recycle READ out: its completion may come in this walk */
    int reading                = !!(ep->flags.all &
                                    UCT_HIPOWER_EP_FLAG_RECYCLE_READ);
    uct_hipower_tx_op_t *op;

    ucs_queue_for_each_extract(op, &ep->txqp.outstanding, queue,
                               (int64_t)(op->sn - sn) <= 0) {
        /* What it means to the unit that posted it */
        if (op->handler != NULL) {
            op->handler(op, &ep->txqp);
        }
        if (op->comp != NULL) {
            uct_invoke_completion(op->comp, UCS_OK);
        }
        if (iface->config.notify == UCT_HIPOWER_NOTIFY_PULL) {
            uct_hipower_ep_tx_publish(ep, op->msg_count);
        }
        uct_hipower_op_release(op);
    }

    /* A recycle READ completed with the endpoint still blocked: keep
     * looking until the receiver frees slots (or ask, if the receiver took
     * our run back meanwhile). After the walk: it posts again. */
    if (reading && !(ep->flags.all & UCT_HIPOWER_EP_FLAG_RECYCLE_READ) &&
        (hipower_tx_ring_free(&ep->tx.ring) == 0) &&
        !ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_slots_wanted(ep);
    }
}

/*
 * Completes every outstanding operation with @a status, where the user
 * gave a completion. The records stay: the device may still write the
 * buffers of READs until their requests are flushed, so they go back to
 * the pool when their completions arrive.
 */
static void uct_hipower_ep_cancel_ops(uct_hipower_ep_t *ep,
                                      ucs_status_t status)
{
    uct_hipower_tx_op_t *op;

    ucs_queue_for_each(op, &ep->txqp.outstanding, queue) {
        if (op->comp != NULL) {
            uct_invoke_completion(op->comp, status);
            op->comp = NULL;
        }
        /* Nothing more is read, recycled or woken with them */
        op->handler = NULL;
    }
    uct_hipower_ep_bitmap_reads_dropped(ep);
}

/* Frees the records of requests up to @a sn, completing nothing */
static void uct_hipower_txqp_drop_ops(uct_hipower_txqp_t *txqp, uint64_t sn)
{
    uct_hipower_tx_op_t *op;

    ucs_queue_for_each_extract(op, &txqp->outstanding, queue,
                               (int64_t)(op->sn - sn) <= 0) {
        ucs_assert(op->comp == NULL);
        uct_hipower_op_release(op);
    }
}

static ucs_status_t uct_hipower_wc_status(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
        return UCS_ERR_CONNECTION_RESET;
    case IBV_WC_WR_FLUSH_ERR:
        return UCS_ERR_CANCELED;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

void uct_hipower_ep_tx_completion(uct_hipower_ep_t *ep, struct ibv_wc *wc)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t acked_before      = ep->txqp.txq.acked_sn;
    ucs_status_t status, handler_status;

    hipower_txq_completed(&ep->txqp.txq, wc->wr_id, &iface->tx.cq_credits);
    if (ucs_likely(wc->status == IBV_WC_SUCCESS)) {
        if (ucs_unlikely(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_READY)) &&
            (ep->flags.all & UCT_HIPOWER_EP_FLAG_CONNECTED) &&
            ((int64_t)(wc->wr_id - ep->post.hello_sn) >= 0)) {
            /* Acknowledged after our hello: the peer's QP took the hello,
             * so its windows are bound (a request before the hello, such
             * as a keepalive probe, proves only that the QP is up) */
            uct_hipower_ep_peer_ready(ep);
        }
        uct_hipower_ep_retire_ops(ep, wc->wr_id);
    } else if ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                                 UCT_HIPOWER_EP_FLAG_CANCELED)) ||
               ((wc->status == IBV_WC_WR_FLUSH_ERR) &&
                (ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_CLOSED) &&
                ((int64_t)(ep->post.user_end_sn - acked_before) <= 0))) {
        /* Flushed after the failure (or after our own request failed
         * quietly, see below): nothing more to say */
    } else {
        /* A peer that closed in order wrote so before its QP stopped
         * answering. If only our own requests (reads, handshakes) were out,
         * their failure is no error of the user's: nothing is reported,
         * and a user operation that goes to the peer later fails and
         * reports, as with any peer that is gone. */
        ucs_memory_cpu_load_fence();
        uct_hipower_ep_check_peer_state(ep);
        if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_CLOSED) &&
            ((int64_t)(ep->post.user_end_sn - acked_before) <= 0)) {
            ucs_debug(UCT_HIPOWER_EP_FMT ": %s of our own request after the "
                      "peer closed its endpoint", UCT_HIPOWER_EP_ARG(ep),
                      uct_hipower_wc_status_name(wc->status));
            uct_hipower_ep_cancel_ops(ep, UCS_ERR_CANCELED);
        } else {
            status         = uct_hipower_wc_status(wc->status);
            handler_status = uct_hipower_ep_set_failed(ep, status);
            ucs_log(uct_base_iface_failure_log_level(&iface->super,
                                                     handler_status, status),
                    UCT_HIPOWER_EP_FMT ": send completion with error: %s "
                    "(vendor error 0x%x)", UCT_HIPOWER_EP_ARG(ep),
                    uct_hipower_wc_status_name(wc->status), wc->vendor_err);
        }
    }

    if (ucs_unlikely(wc->status != IBV_WC_SUCCESS)) {
        uct_hipower_txqp_drop_ops(&ep->txqp, wc->wr_id);
    }

    if (!ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_add_pending_list(ep);
    }
}

ucs_status_t uct_hipower_ep_set_failed(uct_hipower_ep_t *ep,
                                       ucs_status_t status)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    int canceled               = !!(ep->flags.all &
                                    UCT_HIPOWER_EP_FLAG_CANCELED);

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) {
        return UCS_OK;
    }

    uct_hipower_ep_flags_set(ep, ep, UCT_HIPOWER_EP_FLAG_FAILED);
    /* Its peer will not give back a run now: others need not wait for it */
    uct_hipower_ep_rx_release_abandon(ep);
    /* Stop the QP, so that whatever is left completes (flushed) now */
    uct_hipower_qp_to_error(&iface->verbs, ep->txqp.qp);
    /* Nothing more is delivered from the peer: others may have its runs */
    uct_hipower_ep_rx_peer_gone(ep);
    uct_hipower_ep_cancel_ops(ep, canceled ? UCS_ERR_CANCELED : status);
    uct_hipower_ep_bundle_drop(ep);
    uct_hipower_ep_del_pending_list(ep);
    if (canceled || ep->owner->gone(ep)) {
        /* Canceled by the user; or made for a peer's request and never
         * the user's: nobody to tell, it goes from progress */
        return UCS_OK;
    }
    if (uct_hipower_hold_posting_here ||
        ucs_async_is_from_async(iface->super.worker->async)) {
        /* In UCX's async thread (the hold timer's post, a handshake
         * started there, UCP's wire-up): UCP's handler must not run there (ucp_ep_set_failed() asserts it is not in
         * async; UCP itself defers with ucp_ep_set_failed_schedule()).
         * The user's next progress calls it; a process asleep in the
         * event fd wakes for it (the handshakes' eventfd is in the set),
         * and arm says busy meanwhile. */
        ep->err_due = status;
        __atomic_fetch_add(&iface->tx.failures_due, 1, __ATOMIC_SEQ_CST);
        ep->owner->wake(ep);
        return UCS_OK;
    }
    return uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                                   status);
}

unsigned uct_hipower_iface_report_failures(uct_hipower_iface_t *iface)
{
    unsigned count = 0;
    uct_hipower_ep_t *ep;
    ucs_status_t status;

    /* Cleared first: a failure marked after this is seen at the next call */
    __atomic_store_n(&iface->tx.failures_due, 0, __ATOMIC_SEQ_CST);
again:
    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (ep->err_due == UCS_OK) {
            continue;
        }
        status      = ep->err_due;
        ep->err_due = UCS_OK;
        ++count;
        uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                                status);
        /* The handler may have destroyed endpoints (UCP discards lanes):
         * the list again from its start */
        goto again;
    }
    return count;
}

/* Sender, in progress: adopts a grant and sends the no-message frame that
 * tells the receiver, when nothing else would; writes a run request that
 * found no room before */
static void uct_hipower_ep_tx_switch_idle(uct_hipower_ep_t *ep)
{
    if (uct_hipower_ep_tx_granted(ep)) {
        uct_hipower_ep_tx_adopt(ep);
    }

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE) {
        uct_hipower_ep_tx_run_req(ep);
    }

    /* A message queued or sent next tells the receiver anyway */
    if ((ep->tx.ack_flags & HIPOWER_SLOT_ACK_SWITCH) &&
        ucs_queue_is_empty(&ep->pending_q) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) &&
        (uct_hipower_ep_send_none(ep) == UCS_OK)) {
        uct_hipower_ep_iface(ep)->stats.tx_none++;
    }
}

/* What the peer wrote into peer_state, applied; cheap: one local load */
static void uct_hipower_ep_check_peer_state(uct_hipower_ep_t *ep)
{
    uint64_t state = *(volatile uint64_t*)&ep->ctrl->peer_state;

    if (ucs_likely(state == 0)) {
        return;
    }

    if (state == UCT_HIPOWER_PEER_STATE_READY) {
        uct_hipower_ep_peer_ready(ep);
    } else if ((state == UCT_HIPOWER_PEER_STATE_CLOSED) &&
               !(ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_CLOSED)) {
        ucs_debug(UCT_HIPOWER_EP_FMT ": the peer closed its endpoint",
                  UCT_HIPOWER_EP_ARG(ep));
        uct_hipower_ep_flags_set(ep, ep, UCT_HIPOWER_EP_FLAG_PEER_CLOSED);
        uct_hipower_ep_peer_ready(ep);
        /* One made for the peer's request, not the user's: it goes */
        (void)ep->owner->gone(ep);
        uct_hipower_ep_rx_release_abandon(ep);
        if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE) &&
            uct_hipower_ep_iface(ep)->config.shared_pool &&
            (uct_hipower_ep_rx_held(ep) > 0)) {
            /* Seen on an idle endpoint (a request of ours failed): progress
             * visits it again, delivers what the peer wrote before it
             * closed and then gives its runs back to the pool
             * (uct_hipower_ep_rx_peer_gone()) */
            uct_hipower_ep_activate(ep);
        }
    }
}

unsigned uct_hipower_ep_progress(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    unsigned count;

    /* Not from a handler of its own walk (uct_hipower_ep_rx_enter()) */
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) ||
        (ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                          UCT_HIPOWER_EP_FLAG_IN_RX))) {
        return 0;
    }

    uct_hipower_ep_check_peer_state(ep);
    if (iface->config.notify == UCT_HIPOWER_NOTIFY_PULL) {
        /* While a read of the peer's bitmap is out, our copy is being
         * overwritten. The read is signaled, so its completion also
         * publishes every write of ours posted before it. */
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_NOTIFY_READ) {
            return 0;
        }
        count = uct_hipower_ep_rx_progress(ep);
        uct_hipower_ep_post_notify_read(ep); /* Not if it failed */
        return count;
    }

    count = uct_hipower_ep_rx_progress(ep);
    if (ucs_unlikely(ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                                      UCT_HIPOWER_EP_FLAG_PEER_CLOSED))) {
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) {
            return count; /* A bad frame: nothing more to do with it */
        }
        if (count == 0) {
            /* The peer's frames all landed before its "closed": none
             * found now, none will come */
            uct_hipower_ep_rx_peer_gone(ep);
        }
    }
    if (ucs_unlikely(ep->frame.unannounced > 0)) {
        uct_hipower_ep_announce(ep);
    }
    /* The receiver granted us a run and we may have nothing to send:
     * adopt it now and say so, so that it gets the old run back */
    if (ucs_unlikely(uct_hipower_ep_tx_granted(ep) ||
                     (ep->tx.ack_flags & HIPOWER_SLOT_ACK_SWITCH) ||
                     (ep->flags.all & UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE))) {
        uct_hipower_ep_tx_switch_idle(ep);
    }
    return count;
}

/* More than one request queued (ucs_queue has no O(1) length) */
static int uct_hipower_ep_pending_several(uct_hipower_ep_t *ep)
{
    return !ucs_queue_is_empty(&ep->pending_q) &&
           !ucs_queue_is_tail(&ep->pending_q, ep->pending_q.head);
}

int uct_hipower_ep_dispatch_pending(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_pending_req_priv_queue_t *priv;
    uct_pending_req_t *req;
    ucs_status_t status;

    /* Bundled messages came before every pending request: they go first
     * (when the window lets them: a completion it waits for comes to
     * progress), or nothing does */
    if (ucs_unlikely((ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) &&
                     (uct_hipower_ep_bundle_post(ep, 1) != UCS_OK))) {
        return 0;
    }

    /* Requests go in queue order; each one's own send must not be refused
     * for the requests still queued behind it. A request that finds no
     * room stays first; the next completion or recycle lists us again.
     * Without room, a request may still go into a bundle. */
    uct_hipower_ep_flags_set(ep, ep, UCT_HIPOWER_EP_FLAG_DISPATCHING);
    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLES) &&
        (ep->tx.ring.num_slots > 0) &&
        uct_hipower_ep_pending_several(ep)) {
        /* They waited: one bundle for all of them, posted below */
        uct_hipower_ep_flags_set(ep, ep, UCT_HIPOWER_EP_FLAG_GATHER);
    }
    while (!ucs_queue_is_empty(&ep->pending_q) &&
           !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) &&
           (uct_hipower_ep_has_room(ep, 1) ||
            (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLES))) {
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
    uct_hipower_ep_flags_clear(ep, ep, UCT_HIPOWER_EP_FLAG_DISPATCHING);
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_GATHER) {
        uct_hipower_ep_flags_clear(ep, ep, UCT_HIPOWER_EP_FLAG_GATHER);
        /* Now, if it can go (it can when a slot was free before): else it
         * stays open and listed, as any bundle */
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) {
            iface->stats.tx_gathered++;
            (void)uct_hipower_ep_bundle_post(ep, 1);
        }
    }

    if ((hipower_tx_ring_free(&ep->tx.ring) == 0) &&
        !ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_slots_wanted(ep);
    }
    /* Listed while requests or a bundle wait */
    return ucs_queue_is_empty(&ep->pending_q) &&
           !(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN);
}

ucs_status_t uct_hipower_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                        unsigned flags)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    /* Busy only when an active message would go now (the admission of
     * hipower_ep_am.c): a caller that retries must not be refused again.
     * An open bundle goes before anything else of the endpoint, and may
     * need more room than one message (a filled slot's batch: three work
     * requests): while it cannot go, the caller's operation cannot either,
     * and UCP, told busy, would retry it without progress for ever */
    if (ucs_queue_is_empty(&ep->pending_q) &&
        (ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) &&
        (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) ||
         (uct_hipower_ep_bundle_post(ep, 0) == UCS_OK)) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) &&
        (hipower_tx_ring_free(&ep->tx.ring) > 0) &&
        uct_hipower_ep_has_room(ep, uct_hipower_ep_msg_wrs(ep) + 1)) {
        return UCS_ERR_BUSY;
    }

    uct_pending_req_queue_push(&ep->pending_q, req);
    UCT_TL_EP_STAT_PEND(&ep->super);
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) {
        /* Never dispatched: the user purges it */
        return UCS_OK;
    }

    if (ucs_unlikely(ep->cm.state == UCT_HIPOWER_CM_IDLE)) {
        /* Nothing is sent before it is connected */
        ep->owner->start(ep);
    } else if (hipower_tx_ring_free(&ep->tx.ring) == 0) {
        /* Nothing else will ask the receiver for slots */
        uct_hipower_ep_slots_wanted(ep);
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
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        /* (A bundle keeps it listed: progress sends it) */
        uct_hipower_ep_del_pending_list(ep);
    }
}

/* Waits for everything posted so far: a completion after the last user
 * request (a signaled no-op if the last one was not signaled) */
static ucs_status_t uct_hipower_ep_flush_wait(uct_hipower_ep_t *ep,
                                              uct_completion_t *comp)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op    = NULL;
    ucs_status_t status;

    if (comp != NULL) {
        op = uct_hipower_ep_op_get(ep, NULL, 0, comp);
        if (op == NULL) {
            return UCS_ERR_NO_RESOURCE;
        }
    }

    if (hipower_txq_has_trailing(&ep->txqp.txq)) {
        /* Nothing signaled after the last requests: post one that is */
        if (!uct_hipower_ep_has_room(ep, 1)) {
            if (op != NULL) {
                uct_hipower_op_release(op);
            }
            uct_hipower_iface_tx_starve(iface);
            return UCS_ERR_NO_RESOURCE;
        }
        status = uct_hipower_ep_post_nop(ep, &iface->tx.cq_credits, op);
        if (status != UCS_OK) {
            if (op != NULL) {
                uct_hipower_op_release(op);
            }
            return status;
        }
    } else if (op != NULL) {
        /* The last request is signaled: complete with it */
        op->sn        = ep->txqp.txq.sn - 1;
        op->msg_count = ep->frame.msgs;
        ucs_queue_push(&ep->txqp.outstanding, &op->queue);
    }

    return UCS_INPROGRESS;
}

ucs_status_t uct_hipower_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    ucs_status_t status;

    if (ucs_unlikely(flags & UCT_FLUSH_FLAG_CANCEL)) {
        /*
         * UCT: cancel what has not completed and leave the endpoint in
         * error. The QP goes to error, so its requests complete now
         * (flushed, UCS_ERR_CANCELED), not after the peer's timeout; the
         * flush completes after the last of them; no error is reported
         * for what the user asked for. Pending requests stay for the
         * user's uct_ep_pending_purge().
         */
        if (!(ep->flags.all & (UCT_HIPOWER_EP_FLAG_CANCELED |
                               UCT_HIPOWER_EP_FLAG_FAILED))) {
            uct_hipower_ep_flags_set(ep, ep, UCT_HIPOWER_EP_FLAG_CANCELED);
            uct_hipower_ep_set_failed(ep, UCS_ERR_CANCELED);
        }
        /* Every user operation has completed (canceled): what the device
         * still flushes concerns only our own buffers */
        UCT_TL_EP_STAT_FLUSH(&ep->super);
        return UCS_OK;
    }

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) {
        return (ep->flags.all & UCT_HIPOWER_EP_FLAG_CANCELED) ?
               UCS_ERR_CANCELED : UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (!ucs_queue_is_empty(&ep->pending_q) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_DISPATCHING)) {
        return UCS_ERR_NO_RESOURCE;
    }

    /* Bundled messages were accepted: they go now, or the caller
     * progresses and retries */
    status = uct_hipower_ep_bundle_first(ep);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_hipower_ep_announce(ep);
    if (status != UCS_OK) {
        return status;
    }

    if ((int64_t)(ep->txqp.txq.acked_sn - ep->post.user_end_sn) >= 0) {
        UCT_TL_EP_STAT_FLUSH(&ep->super);
        return UCS_OK;
    }

    status = uct_hipower_ep_flush_wait(ep, comp);
    if (status == UCS_INPROGRESS) {
        UCT_TL_EP_STAT_FLUSH_WAIT(&ep->super);
    }
    return status;
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
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_status_t status;

    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) ||
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) ||
        ((hipower_txq_outstanding(&ep->txqp.txq) > 0) &&
         !hipower_txq_has_trailing(&ep->txqp.txq))) {
        return UCS_OK;
    }

    /* Unsignaled requests alone never report: they need a signaled one.
     * The probe is the user's: its failure is reported. */
    if (!uct_hipower_ep_has_room(ep, 1)) {
        uct_hipower_iface_tx_starve(iface);
        return UCS_ERR_NO_RESOURCE;
    }
    status = uct_hipower_ep_post_nop(ep, &iface->tx.cq_credits, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_user_end(ep, 0);
    }
    return status;
}

ucs_status_t uct_hipower_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    uct_hipower_ep_fence_next(ep);
    UCT_TL_EP_STAT_FENCE(&ep->super);
    return UCS_OK;
}

/* What the units below this one call back up (hipower_post.h) */
static ucs_status_t uct_hipower_ep_check_hook(uct_hipower_ep_t *ep)
{
    return uct_hipower_ep_check(&ep->super.super, 0, NULL);
}

static const uct_hipower_ep_hooks_t uct_hipower_ep_hooks = {
    .failed     = uct_hipower_ep_set_failed,
    .check      = uct_hipower_ep_check_hook,
    .completed  = uct_hipower_ep_tx_completion,
    .fill_close = uct_hipower_ep_rx_fill_close
};

static UCS_CLASS_INIT_FUNC(uct_hipower_ep_t, const uct_ep_params_t *params)
{
    uct_hipower_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_hipower_iface_t);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    ucs_status_t status;
    khiter_t iter;
    int ret;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    self->hooks               = &uct_hipower_ep_hooks;
    self->owner               = NULL;   /* Set by hipower_cm.c */
    self->flags.all           = 0;
    self->err_due             = UCS_OK;
    memset(&self->cm, 0, sizeof(self->cm));
    self->post.fence_beat     = iface->tx.fence_beat;
    self->post.user_end_sn    = 0;
    self->frame.unannounced   = 0;
    self->frame.announce_word = 0;
    self->peer.msg_wrs        = 3;      /* Set when connected */
    hipower_txwin_init(&self->tx.win, 0);
    self->tx.published        = 0;
    self->tx.publish_slot     = 0;
    self->frame.msgs          = 0;
    /* Where this connection's epochs start, the same on both sides */
    self->tx.epoch            = uct_hipower_epoch_origin();
    self->tx.ack_flags        = 0;
    self->tx.run_req          = hipower_run_req_make(self->tx.epoch, 0, 0);
    self->rx.epoch            = self->tx.epoch;
    self->rx.wants            = 0;
    self->rx.fill.done        = 0;
    self->rx.fill.walked      = 0;
    self->rx.fill.extra       = 0;
    memset(&self->tx.fill, 0, sizeof(self->tx.fill));
    /* No bcopy yet: the first one tries an open bundle, where its real
     * length is checked (UCS_CLASS_NEW does not zero the object) */
    self->am.bcopy_hint       = 0;
    self->rx.granted.count    = 0;
    self->rx.granted.start    = 0;
    /* The first bitmap write always wakes the peer: it may have gone to
     * sleep before it knew we would send (see hipower_event.c) */
    self->post.woken_gen      = UINT64_MAX;
    self->event.posted_gen    = 0;
    self->event.confirmed_gen = 0;
    self->event.behind_since  = 0;
    self->peer.qp_num         = 0;
    self->txqp.is_gc          = 0;
    self->txqp.recvs          = 0;
    hipower_txq_init(&self->txqp.txq, iface->config.tx_queue_len);
    ucs_queue_head_init(&self->txqp.outstanding);
    ucs_queue_head_init(&self->pending_q);
    /* Until connected the ring has no slots, so nothing can be sent */
    memset(&self->tx.ring, 0, sizeof(self->tx.ring));

    status = ucs_posix_memalign((void**)&self->ctrl, ucs_get_page_size(),
                                sizeof(*self->ctrl), "hipower ep bitmaps");
    if (status != UCS_OK) {
        return status;
    }
    memset(self->ctrl, 0, sizeof(*self->ctrl));
    /* No grant yet: the record's epoch is that of the first run */
    self->ctrl->grant.epoch = self->tx.epoch;
    /* No run request yet: a word of the first run's epoch, never taken
     * for the answer to a release (the next epoch's) or for an ask (it has
     * no ask bit). A zero word would be the answer to a release out at
     * any epoch whose low 32 bits are 0xffffffff, as if the peer had
     * written it (found by the simulator's schedules, docs/sim.md) */
    self->ctrl->run_req     = hipower_run_req_make(self->tx.epoch, 0, 0);

    /* The QP before the memory windows that will be bound to it: a
     * process that exits with the endpoint open leaves the kernel to
     * destroy them, newest first, and a QP destroyed while windows are
     * still bound to it waits for them (rdma_rxe: a timeout per QP, the
     * exit hangs for minutes with many endpoints) */
    status = uct_hipower_qp_create(&iface->verbs, iface->cq,
                                   iface->event.rx_cq, &self->txqp.qp);
    if (status != UCS_OK) {
        goto err_free_ctrl;
    }

    status = uct_hipower_conn_reg_ctrl(self);
    if (status != UCS_OK) {
        goto err_destroy_qp;
    }

    status = uct_hipower_ep_alloc_rx(self);
    if (status != UCS_OK) {
        goto err_dereg_ctrl;
    }

    /* The receives are posted once the windows are bound
     * (uct_hipower_conn_open_windows()) */
    if (iface->config.notify != UCT_HIPOWER_NOTIFY_PULL) {
        uct_hipower_ep_flags_set(self, rx, UCT_HIPOWER_EP_FLAG_FIRST_IMM);
    }

    iter = kh_put(uct_hipower_qp_ep, &iface->qp_eps, self->txqp.qp->qp_num,
                  &ret);
    if (ret == -1) {
        status = UCS_ERR_NO_MEMORY;
        goto err_free_rx;
    }
    kh_value(&iface->qp_eps, iter) = &self->txqp;
    ucs_list_add_tail(&iface->ep_list, &self->list);
    ++iface->num_eps;
    iface->stats.peak_eps       = ucs_max(iface->stats.peak_eps,
                                          iface->num_eps);
    uct_hipower_iface_pool_used(iface);
    uct_hipower_ep_active_init(self);
    /* Credits of the CQ for the requests that open the connection
     * (uct_hipower_conn_open_windows()) and the one that ends the QP in
     * order (uct_hipower_ep_end_qp()), taken now so that they are always
     * there */
    hipower_credits_add(&iface->tx.cq_credits, -UCT_HIPOWER_EP_CQ_ENTRIES);
    self->post.connect_credits    = UCT_HIPOWER_CONNECT_WRS;

    ucs_debug("hipower %s: ep %p qp 0x%x, %u receive slots", iface->dev_name,
              self, self->txqp.qp->qp_num, self->rx.ring.num_slots);
    return UCS_OK;

err_free_rx:
    uct_hipower_ep_rx_runs_cleanup(self);
    uct_hipower_ep_free_runs(self);
err_dereg_ctrl:
    uct_hipower_conn_dereg_peer_access(self);
    uct_hipower_md_dereg_internal(md, self->ctrl_local_mr, "local bitmaps");
err_destroy_qp:
    uct_hipower_qp_destroy(&iface->verbs, self->txqp.qp);
err_free_ctrl:
    ucs_free(self->ctrl);
    return status;
}

static void uct_hipower_qp_gc_free(uct_hipower_qp_gc_t *gc)
{
    uct_hipower_iface_t *iface = gc->iface;
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    khiter_t iter;

    iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, gc->txqp.qp->qp_num);
    if (iter != kh_end(&iface->qp_eps)) {
        kh_del(uct_hipower_qp_ep, &iface->qp_eps, iter);
    }

    /* Before the QP they are bound to (see uct_hipower_ep_t's creation) */
    if (gc->ctrl_write.mr != NULL) {
        uct_hipower_window_close(&iface->win_dev, &gc->ctrl_write,
                                 "peer-writable words");
    }
    if (gc->ctrl_read.mr != NULL) {
        uct_hipower_window_close(&iface->win_dev, &gc->ctrl_read,
                                 "peer-readable bitmaps");
    }
    uct_hipower_qp_destroy(&iface->verbs, gc->txqp.qp);
    uct_hipower_txqp_drop_ops(&gc->txqp, UINT64_MAX / 2);
    hipower_credits_add(&iface->tx.cq_credits, gc->reserve);
    uct_hipower_rx_expect_done(iface, gc->txqp.recvs);
    uct_hipower_md_dereg_internal(md, gc->ctrl_local_mr, "local bitmaps");
    ucs_free(gc->ctrl);
    ucs_list_del(&gc->list);
    --iface->num_gc;
    iface->stats.qps_drained++;
    ucs_free(gc);
}

/* Whether the QP of a destroyed endpoint is done: no request and no
 * receive of it can complete any more */
static int uct_hipower_qp_gc_done(uct_hipower_qp_gc_t *gc)
{
    return gc->in_error && (hipower_txq_outstanding(&gc->txqp.txq) == 0) &&
           (gc->txqp.recvs == 0);
}

static void uct_hipower_qp_gc_check(uct_hipower_qp_gc_t *gc)
{
    if (!gc->in_error && (hipower_txq_outstanding(&gc->txqp.txq) == 0)) {
        /* The goodbye arrived (or failed): flush the receives */
        uct_hipower_qp_to_error(&gc->iface->verbs, gc->txqp.qp);
        gc->in_error = 1;
    }

    if (uct_hipower_qp_gc_done(gc)) {
        uct_hipower_qp_gc_free(gc);
    }
}

void uct_hipower_gc_tx_completion(uct_hipower_txqp_t *txqp, struct ibv_wc *wc)
{
    uct_hipower_qp_gc_t *gc = ucs_container_of(txqp, uct_hipower_qp_gc_t, txqp);

    hipower_txq_completed(&txqp->txq, wc->wr_id, &gc->iface->tx.cq_credits);
    uct_hipower_txqp_drop_ops(txqp, wc->wr_id);
    uct_hipower_qp_gc_check(gc);
}

void uct_hipower_gc_rx_completion(uct_hipower_txqp_t *txqp)
{
    uct_hipower_qp_gc_t *gc = ucs_container_of(txqp, uct_hipower_qp_gc_t, txqp);

    uct_hipower_txqp_recv_done(txqp);
    uct_hipower_rx_expect_done(gc->iface, 1);
    uct_hipower_qp_gc_check(gc);
}

void uct_hipower_iface_gc_progress(uct_hipower_iface_t *iface, int force)
{
    uct_hipower_qp_gc_t *gc, *tmp;

    ucs_list_for_each_safe(gc, tmp, &iface->gc_list, list) {
        if (force || uct_hipower_qp_gc_done(gc)) {
            uct_hipower_qp_gc_free(gc);
        }
    }
}

/* Writes "closed" into the peer's state word: one signaled inline write */
static int uct_hipower_ep_post_goodbye(uct_hipower_ep_t *ep, int *reserve)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t state             = UCT_HIPOWER_PEER_STATE_CLOSED;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    int ret;

    uct_hipower_ep_word_wr(ep, &wr, &sge, &state, ep->peer.state_addr);
    if (uct_hipower_txqp_post(iface, &ep->txqp, &wr, &wr, 1, 1, reserve,
                              &ret) != 1) {
        ucs_debug(UCT_HIPOWER_EP_FMT ": cannot post the goodbye: %s",
                  UCT_HIPOWER_EP_ARG(ep), strerror(ret));
        return 0;
    }

    iface->stats.goodbyes++;
    return 1;
}

/*
 * Ends the endpoint's QP in order. Its user operations are canceled now
 * (UCS_ERR_CANCELED), after the QP stopped, so that the device no longer
 * touches their buffers. What the device may still do with the QP is
 * waited for by a QP record (uct_hipower_qp_gc_t), which owns the QP, the
 * READ targets and the requests' buffers until their completions arrived.
 */
static void uct_hipower_ep_end_qp(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    /* The credit taken at creation, and those of the connection's opening
     * if it never opened */
    int reserve          = 1 + ep->post.connect_credits;
    uct_hipower_qp_gc_t *gc;
    int goodbye          = 0;
    khiter_t iter;

    /* An idle endpoint's state word was not looked at since it went idle:
     * no goodbye to a peer that is gone */
    uct_hipower_ep_check_peer_state(ep);
    if (uct_hipower_ep_may_initiate(ep) &&
        ((int64_t)(ep->txqp.txq.acked_sn - ep->post.user_end_sn) >= 0)) {
        /* No user operation out (our own reads may be), peer alive and
         * ready: tell it we are gone, after what is out, so that it stops
         * what it sends of its own accord, without an error */
        goodbye = uct_hipower_ep_post_goodbye(ep, &reserve);
    } else if (hipower_txq_has_trailing(&ep->txqp.txq) &&
               !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
        /* The last requests are unsignaled: if they completed, nothing
         * would say so. A signaled one after them always completes. */
        uct_hipower_ep_post_nop(ep, &reserve, NULL);
    }

    if (!goodbye) {
        uct_hipower_qp_to_error(&iface->verbs, ep->txqp.qp);
        /* The peer reaches nothing of ours any more */
        uct_hipower_conn_dereg_peer_access(ep);
    }
    uct_hipower_ep_cancel_ops(ep, UCS_ERR_CANCELED);

    if (!goodbye && (hipower_txq_outstanding(&ep->txqp.txq) == 0) &&
        (ep->txqp.recvs == 0)) {
        /* Nothing to wait for */
        iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, ep->txqp.qp->qp_num);
        if (iter != kh_end(&iface->qp_eps)) {
            kh_del(uct_hipower_qp_ep, &iface->qp_eps, iter);
        }
        uct_hipower_qp_destroy(&iface->verbs, ep->txqp.qp);
        hipower_credits_add(&iface->tx.cq_credits, reserve);
        uct_hipower_md_dereg_internal(md, ep->ctrl_local_mr, "local bitmaps");
        ucs_free(ep->ctrl);
        return;
    }

    gc = ucs_malloc(sizeof(*gc), "hipower qp gc");
    if (gc == NULL) {
        /* Cannot wait for it: end it now, losing the completions */
        ucs_warn("hipower %s: no memory to drain qp 0x%x, destroying it "
                 "with %u requests out", iface->dev_name,
                 ep->txqp.qp->qp_num,
                 hipower_txq_outstanding(&ep->txqp.txq));
        iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, ep->txqp.qp->qp_num);
        if (iter != kh_end(&iface->qp_eps)) {
            kh_del(uct_hipower_qp_ep, &iface->qp_eps, iter);
        }
        if (goodbye) {
            uct_hipower_conn_dereg_peer_access(ep);
        }
        uct_hipower_qp_destroy(&iface->verbs, ep->txqp.qp);
        uct_hipower_txqp_drop_ops(&ep->txqp, UINT64_MAX / 2);
        hipower_credits_add(&iface->tx.cq_credits, reserve +
                            (int)hipower_txq_outstanding(&ep->txqp.txq));
        uct_hipower_md_dereg_internal(md, ep->ctrl_local_mr, "local bitmaps");
        ucs_free(ep->ctrl);
        return;
    }

    gc->txqp               = ep->txqp;
    gc->txqp.is_gc         = 1;
    ucs_queue_head_init(&gc->txqp.outstanding);
    ucs_queue_splice(&gc->txqp.outstanding, &ep->txqp.outstanding);
    gc->iface              = iface;
    gc->ctrl               = ep->ctrl;
    gc->ctrl_local_mr      = ep->ctrl_local_mr;
    /* Open only after a goodbye (closed above otherwise) */
    gc->ctrl_read          = ep->ctrl_read;
    gc->ctrl_write         = ep->ctrl_write;
    gc->in_error           = !goodbye;
    gc->reserve            = reserve;
    /* Its receives are flushed into the wake-up CQ: poll it until then */
    uct_hipower_rx_expect(iface, gc->txqp.recvs);
    ucs_list_add_tail(&iface->gc_list, &gc->list);
    ++iface->num_gc;

    iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, gc->txqp.qp->qp_num);
    ucs_assert(iter != kh_end(&iface->qp_eps));
    kh_value(&iface->qp_eps, iter) = &gc->txqp;
}

static void uct_hipower_ep_pending_purge_warn(uct_pending_req_t *req,
                                              void *arg)
{
    uct_hipower_ep_t *ep = arg;

    ucs_warn(UCT_HIPOWER_EP_FMT ": pending request %p (%s) was not purged "
             "before the endpoint was destroyed", UCT_HIPOWER_EP_ARG(ep), req,
             ucs_debug_get_symbol_name(req->func));
}

static UCS_CLASS_CLEANUP_FUNC(uct_hipower_ep_t)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(self);

    ucs_debug(UCT_HIPOWER_EP_FMT ": destroy, %u requests out",
              UCT_HIPOWER_EP_ARG(self),
              hipower_txq_outstanding(&self->txqp.txq));
    /* Its handshake, if one is under way, and its matching entry */
    self->owner->cleanup(self);
    uct_hipower_ep_bundle_leave(self);
    /* UCT: the user purges pending requests before destroying */
    uct_hipower_ep_pending_purge(&self->super.super,
                                 uct_hipower_ep_pending_purge_warn, self);
    ucs_list_del(&self->list);
    uct_hipower_ep_unlist_trailing(self);
    --iface->num_eps;
    uct_hipower_ep_active_cleanup(self);
    uct_hipower_ep_rx_imm_done(self);

    /* The peer can no longer reach our slots; the QP drains apart, our
     * control words stay reachable until it has our goodbye
     * (uct_hipower_ep_end_qp()) */
    uct_hipower_ep_rx_runs_cleanup(self);
    uct_hipower_ep_free_runs(self);
    uct_hipower_ep_end_qp(self);
}

UCS_CLASS_DEFINE(uct_hipower_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_hipower_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_hipower_ep_t, uct_ep_t);
