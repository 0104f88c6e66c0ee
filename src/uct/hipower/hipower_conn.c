/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Connecting an endpoint to its peer's endpoint: the address it gives
 * (get_address), the QP brought to RTS and the windows the peer reaches
 * bound (connect_to_ep), and the registration of the control words the
 * peer reads and writes. The handshake that carries the addresses when
 * an endpoint is made from an interface address is hipower_cm.c's.
 */

#include "hipower_conn.h"
#include "hipower_ep.h"
#include "hipower_verbs.h"

#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <string.h>


ucs_status_t uct_hipower_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_ep_addr_t *ep_addr = (uct_hipower_ep_addr_t*)addr;

    ep_addr->qp_num          = ep->txqp.qp->qp_num;
    ep_addr->slots_addr      = (uintptr_t)ep->rx.slots;
    ep_addr->slots_rkey      = (ep->rx.win.mr != NULL) ? ep->rx.win.rkey : 0;
    ep_addr->num_slots       = ep->rx.ring.num_slots;
    ep_addr->slot_stride     = iface->config.layout.stride;
    ep_addr->trailer_offset  = iface->config.layout.trailer_offset;
    ep_addr->align           = iface->config.layout.align;
    ep_addr->align_offset    = iface->config.layout.align_offset;
    ep_addr->ctrl_read_addr  = (uintptr_t)ep->ctrl->consumed;
    ep_addr->ctrl_read_rkey  = ep->ctrl_read.rkey;
    ep_addr->ctrl_write_addr = (uintptr_t)ep->ctrl->written_view;
    ep_addr->ctrl_write_rkey = ep->ctrl_write.rkey;
    ep_addr->notify          = iface->config.notify;
    ep_addr->path_mtu        = iface->config.path_mtu;
    ep_addr->flags           = (iface->config.bundle ?
                                UCT_HIPOWER_EP_ADDR_FLAG_BUNDLES : 0) |
                               (iface->config.bundle_fill ?
                                UCT_HIPOWER_EP_ADDR_FLAG_FILL : 0);
    return UCS_OK;
}

/*
 * Waits until every request of one QP has completed, polling the send CQ
 * outside progress (connect_to_ep(): the window binds must be done before
 * the QP takes the peer's hello). Other QPs' completions are set aside,
 * not handled here -- their callbacks belong in progress -- and the next
 * poll delivers them first (hipower_tx_cq.c).
 */
static ucs_status_t uct_hipower_conn_wait_qp(uct_hipower_iface_t *iface,
                                             uct_hipower_txqp_t *txqp,
                                             const char *what)
{
    ucs_time_t deadline = uct_hipower_clock_now() +
                          ucs_time_from_sec(UCT_HIPOWER_WAIT_QP_SEC);
    ucs_status_t status;
    struct ibv_wc wc;
    int num_wcs;

    while (hipower_txq_outstanding(&txqp->txq) > 0) {
        num_wcs = ibv_poll_cq(iface->cq, 1, &wc);
        if (num_wcs < 0) {
            ucs_error("hipower %s: ibv_poll_cq() failed: %d", iface->dev_name,
                      num_wcs);
            return UCS_ERR_IO_ERROR;
        } else if (num_wcs == 0) {
            if (uct_hipower_clock_now() > deadline) {
                ucs_error("hipower %s: %s on qp 0x%x did not complete within "
                          "%d s", iface->dev_name, what, txqp->qp->qp_num,
                          UCT_HIPOWER_WAIT_QP_SEC);
                return UCS_ERR_TIMED_OUT;
            }
            continue;
        }

        iface->stats.tx_completions++;
        if (wc.qp_num != txqp->qp->qp_num) {
            status = uct_hipower_cq_stash_wc(&iface->verbs, &wc);
            if (status != UCS_OK) {
                return status;
            }
            continue;
        }

        hipower_txq_completed(&txqp->txq, wc.wr_id, &iface->tx.cq_credits);
        if (wc.status != IBV_WC_SUCCESS) {
            ucs_error("hipower %s: %s on qp 0x%x failed: %s", iface->dev_name,
                      what, txqp->qp->qp_num,
                      uct_hipower_wc_status_name(wc.status));
            return UCS_ERR_IO_ERROR;
        }
    }

    return UCS_OK;
}

/*
 * Binds the windows of what the peer may reach -- bitmaps it reads, words
 * it writes, its first run -- to our QP, now that the QP can post, waits
 * until the device has done so, and only then posts our receives: a peer
 * that writes into a window not bound yet fails its connection, and the
 * peer's first request into our windows is its hello, a write with
 * immediate, which the device refuses with "receiver not ready" (retried
 * by the peer) while we have no receive posted. So the peer never finds a
 * window unbound, even if it sent before we connected (docs/protocol.md,
 * 1.1). Local requests only: nothing goes to the peer here.
 */
static ucs_status_t uct_hipower_conn_open_windows(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_window_t *wins[] = {&ep->ctrl_read, &ep->ctrl_write,
                                    &ep->rx.win};
    struct ibv_send_wr wrs[UCT_HIPOWER_CONNECT_WRS - 1];
    ucs_status_t status;
    unsigned i, nwr, posted;
    int ret;

    UCS_STATIC_ASSERT(ucs_static_array_size(wins) ==
                      ucs_static_array_size(wrs));
    nwr = 0;
    for (i = 0; i < ucs_static_array_size(wins); ++i) {
        if ((wins[i]->mr != NULL) && uct_hipower_window_needs_bind(wins[i])) {
            uct_hipower_window_bind_wr(wins[i], &wrs[nwr]);
            wrs[nwr].send_flags = 0;
            wrs[nwr].next       = &wrs[nwr + 1];
            ++nwr;
        }
    }

    if (nwr > 0) {
        posted = uct_hipower_txqp_post(iface, &ep->txqp, wrs, &wrs[nwr - 1],
                                       nwr, 1, &ep->post.connect_credits, &ret);
        if (posted != nwr) {
            return uct_hipower_ep_post_failed(ep, nwr, posted, ret);
        }
        iface->stats.windows_bound += nwr;

        status = uct_hipower_conn_wait_qp(iface, &ep->txqp,
                                           "memory window binds");
        if (status != UCS_OK) {
            return status;
        }
    }

    return uct_hipower_ep_post_event_recvs(ep,
                                           uct_hipower_iface_qp_recvs(iface));
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
    hipower_slot_layout_t layout;
    enum ibv_mtu path_mtu;
    const char *reason;
    ucs_status_t status;

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) {
        ucs_error(UCT_HIPOWER_EP_FMT ": already connected",
                  UCT_HIPOWER_EP_ARG(ep));
        return UCS_ERR_INVALID_PARAM;
    }

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

    /* Any layout of the peer's slots works, as long as each has room for
     * the largest message this interface advertises */
    layout.stride         = ep_addr->slot_stride;
    layout.trailer_offset = ep_addr->trailer_offset;
    layout.align          = ep_addr->align;
    layout.align_offset   = ep_addr->align_offset;
    reason                = hipower_slot_layout_check(&layout,
                                                      iface->config.max_payload);
    /* No slots: a peer whose pool had no run for us; we ask for one when
     * we send (self mode only, where runs are granted) */
    if ((reason == NULL) &&
        (((ep_addr->num_slots == 0) &&
          (iface->config.notify != UCT_HIPOWER_NOTIFY_SELF)) ||
         (ep_addr->num_slots > UCT_HIPOWER_MAX_SLOTS))) {
        reason = "slot count out of range";
    }
    if (reason != NULL) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer's receive slots do not fit "
                  "this process (%s): %u slots %u bytes apart, trailer at %u, "
                  "data aligned to %u+%u; this process sends up to %zu bytes "
                  "(UCX_HIPOWER_SLOT_SIZE=%zu) into at most %u slots: set the "
                  "same UCX_HIPOWER_SLOT_SIZE on both sides",
                  UCT_HIPOWER_EP_ARG(ep), reason, ep_addr->num_slots,
                  ep_addr->slot_stride, ep_addr->trailer_offset,
                  ep_addr->align, ep_addr->align_offset,
                  iface->config.max_payload, iface->config.slot_size,
                  UCT_HIPOWER_MAX_SLOTS);
        return UCS_ERR_UNREACHABLE;
    }

    ep->peer.layout            = layout;
    hipower_slot_placement_init(&ep->peer.placement, &layout);
    ep->peer.msg_wrs           = 1 + (layout.align > 1) +
                                 (iface->config.notify ==
                                  UCT_HIPOWER_NOTIFY_PUSH);
    if ((iface->config.notify == UCT_HIPOWER_NOTIFY_SELF) &&
        (layout.align == 1)) {
        uct_hipower_ep_flags_set(ep, conn, UCT_HIPOWER_EP_FLAG_ONE_WRITE);
    }
    /* Records of a bundle are 8-byte aligned in the frame, so not for a
     * peer that asked for its messages' data to be aligned */
    if (iface->config.bundle &&
        (ep_addr->flags & UCT_HIPOWER_EP_ADDR_FLAG_BUNDLES) &&
        (layout.align == 1)) {
        uct_hipower_ep_flags_set(ep, conn, UCT_HIPOWER_EP_FLAG_BUNDLES);
        hipower_txwin_init(&ep->tx.win, iface->config.bundle_window);
        /* Bundles into the same slot until it is full: both sides said so
         * (a peer in another mode refused the connection already) */
        if (iface->config.bundle_fill &&
            (ep_addr->flags & UCT_HIPOWER_EP_ADDR_FLAG_FILL)) {
            uct_hipower_ep_flags_set(ep, conn, UCT_HIPOWER_EP_FLAG_FILL);
        }
    }
    ep->peer.consumed_addr     = ep_addr->ctrl_read_addr;
    ep->peer.published_addr    = ep_addr->ctrl_read_addr +
                                 ucs_offsetof(uct_hipower_ep_ctrl_t, published);
    ep->peer.announced_addr    = ep_addr->ctrl_read_addr +
                                 UCT_HIPOWER_CTRL_SPAN(consumed, announced);
    ep->peer.sleep_gen_addr    = ep_addr->ctrl_write_addr +
                                 UCT_HIPOWER_CTRL_SPAN(written_view,
                                                       peer_sleep_gen);
    ep->peer.state_addr        = ep_addr->ctrl_write_addr +
                                 UCT_HIPOWER_CTRL_SPAN(written_view,
                                                       peer_state);
    ep->peer.grant_addr        = ep_addr->ctrl_write_addr +
                                 UCT_HIPOWER_CTRL_SPAN(written_view, grant);
    ep->peer.run_req_addr      = ep_addr->ctrl_write_addr +
                                 UCT_HIPOWER_CTRL_SPAN(written_view, run_req);
    ep->peer.ctrl_read_rkey    = ep_addr->ctrl_read_rkey;
    ep->peer.written_view_addr = ep_addr->ctrl_write_addr;
    ep->peer.ctrl_write_rkey   = ep_addr->ctrl_write_rkey;

    uct_hipower_ep_tx_first_run(ep, ep_addr->slots_addr, ep_addr->slots_rkey,
                                ep_addr->num_slots);

    path_mtu = ucs_min(iface->config.path_mtu, (enum ibv_mtu)ep_addr->path_mtu);
    status   = uct_hipower_qp_connect(&iface->verbs, ep->txqp.qp, peer_dev,
                                      ep_addr->qp_num, path_mtu);
    if (status != UCS_OK) {
        return status;
    }

    ep->peer.dev = *peer_dev;
    status = uct_hipower_conn_open_windows(ep);
    if (status != UCS_OK) {
        return status;
    }

    uct_hipower_ep_flags_set(ep, conn, UCT_HIPOWER_EP_FLAG_QP_UP);
    ucs_debug(UCT_HIPOWER_EP_FMT ": connected, %u peer slots %u bytes apart, "
              "recycle below %u free", UCT_HIPOWER_EP_ARG(ep),
              ep_addr->num_slots, ep_addr->slot_stride, ep->tx.threshold);
    return UCS_OK;
}

#if HIPOWER_UCX_IFACE_OPS_V2
/* The addresses carry their own lengths' worth: nothing in params changes
 * how they are read */
ucs_status_t
uct_hipower_ep_connect_to_ep_v2(uct_ep_h tl_ep,
                                const uct_device_addr_t *dev_addr,
                                const uct_ep_addr_t *ep_addr,
                                const uct_ep_connect_to_ep_params_t *params)
{
    return uct_hipower_ep_connect_to_ep(tl_ep, dev_addr, ep_addr);
}
#endif

ucs_status_t uct_hipower_conn_reg_ctrl(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    ucs_status_t status;

    /* The peer reads our consumed bitmap (recycle) and, in pull mode, our
     * published one; nothing else of ours */
    status = uct_hipower_window_open(&iface->win_dev, ep->ctrl->consumed,
                                     UCT_HIPOWER_CTRL_SPAN(consumed,
                                                           written_view),
                                     IBV_ACCESS_REMOTE_READ,
                                     "peer-readable bitmaps", &ep->ctrl_read);
    if (status != UCS_OK) {
        return status;
    }

    /* The peer writes its bitmap words (push), our sleep generation and
     * its state: all of them concern only its own messages */
    status = uct_hipower_window_open(&iface->win_dev, ep->ctrl->written_view,
                                     UCT_HIPOWER_CTRL_SPAN(written_view,
                                                           peer_consumed),
                                     IBV_ACCESS_REMOTE_WRITE,
                                     "peer-writable words", &ep->ctrl_write);
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
    uct_hipower_window_close(&iface->win_dev, &ep->ctrl_write,
                             "peer-writable words");
err_dereg_read:
    uct_hipower_window_close(&iface->win_dev, &ep->ctrl_read,
                             "peer-readable bitmaps");
    return status;
}

/* What the peer may access: read bitmaps, write words, write slots */
void uct_hipower_conn_dereg_peer_access(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    uct_hipower_window_close(&iface->win_dev, &ep->ctrl_write,
                             "peer-writable words");
    uct_hipower_window_close(&iface->win_dev, &ep->ctrl_read,
                             "peer-readable bitmaps");
}
