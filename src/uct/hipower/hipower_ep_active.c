/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * An endpoint's part in wake-ups and in the active set (hipower_active.h):
 * the receives a peer's write with immediate consumes, the sleep handshake
 * one endpoint posts (for the interface's sleep, hipower_event.c, and for
 * its own demotion), and the moves between active and idle with the
 * demotion's verdict. Endpoint code: it calls nothing of the interface's
 * files above it (hipower_event.c, hipower_iface.c), which call it.
 */

#include "hipower_ep.h"
#include "hipower_ep_active.h"

#include <ucs/debug/log.h>
#include <string.h>


ucs_status_t uct_hipower_ep_post_event_recvs(uct_hipower_ep_t *ep,
                                             unsigned count)
{
    struct ibv_recv_wr wr, *bad_wr;
    int ret;

    /* No buffer: a write with immediate carries its data by RDMA */
    memset(&wr, 0, sizeof(wr));
    for (; count > 0; --count) {
        ret = ibv_post_recv(ep->txqp.qp, &wr, &bad_wr);
        if (ret != 0) {
            ucs_error(UCT_HIPOWER_EP_FMT ": ibv_post_recv() failed: %s",
                      UCT_HIPOWER_EP_ARG(ep), strerror(ret));
            return UCS_ERR_IO_ERROR;
        }
        /* Each completes once: consumed by a wake-up, or flushed */
        ++ep->txqp.recvs;
    }
    return UCS_OK;
}

static void uct_hipower_ep_demote_done(uct_hipower_tx_op_t *op,
                                      uct_hipower_txqp_t *txqp);

void uct_hipower_ep_arm_done(uct_hipower_tx_op_t *op,
                             uct_hipower_txqp_t *txqp)
{
    uct_hipower_txqp_ep(txqp)->event.confirmed_gen = op->u.arm_gen;
}

/* Tells the peer this generation and reads its announced count after it;
 * @a handler: uct_hipower_ep_arm_done() (the interface sleeps) or
 * uct_hipower_ep_demote_done() (this endpoint goes idle) */
ucs_status_t uct_hipower_ep_post_sleep(uct_hipower_ep_t *ep, uint64_t gen,
                                       uct_hipower_op_handler_t handler)
{
    struct ibv_send_wr write_wr, read_wr;
    struct ibv_sge write_sge, read_sge;
    uct_hipower_tx_op_t *op;
    ucs_status_t status;

    if (!uct_hipower_ep_has_room(ep, 2)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_hipower_ep_op_get(ep, handler, 0, NULL);
    if (op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    op->u.arm_gen                = gen;
    uct_hipower_ep_word_wr(ep, &write_wr, &write_sge, &gen,
                           ep->peer.sleep_gen_addr);
    write_wr.next                = &read_wr;
    read_sge.addr                = (uintptr_t)&ep->ctrl->peer_announced;
    read_sge.length              = sizeof(ep->ctrl->peer_announced);
    read_sge.lkey                = ep->ctrl_local_mr->lkey;
    read_wr.opcode               = IBV_WR_RDMA_READ;
    read_wr.send_flags           = 0;
    read_wr.sg_list              = &read_sge;
    read_wr.num_sge              = 1;
    read_wr.wr.rdma.remote_addr  = ep->peer.announced_addr;
    read_wr.wr.rdma.rkey         = ep->peer.ctrl_read_rkey;

    status = uct_hipower_ep_post(ep, &write_wr, &read_wr, 2, 1, op);
    if (status != UCS_OK) {
        ucs_mpool_put_inline(op);
        return status;
    }

    ep->event.posted_gen = gen;
    uct_hipower_ep_iface(ep)->stats.handshakes++;
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_WAKE_DUE)) {
        uct_hipower_ep_flags_set(ep, active, UCT_HIPOWER_EP_FLAG_WAKE_DUE);
        ++uct_hipower_ep_iface(ep)->active.num_wake_due;
    }
    return UCS_OK;
}

void uct_hipower_ep_wake_done(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_WAKE_DUE) {
        uct_hipower_ep_flags_clear(ep, active, UCT_HIPOWER_EP_FLAG_WAKE_DUE);
        --uct_hipower_ep_iface(ep)->active.num_wake_due;
    }
}

/*
 * The active set (hipower_active.h): progress visits only the endpoints in
 * iface->active_eps.
 */
void uct_hipower_ep_activate(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    ucs_assert(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE));
    ucs_list_add_tail(&iface->active_eps, &ep->active_list);
    uct_hipower_ep_flags_set(ep, active, UCT_HIPOWER_EP_FLAG_ACTIVE);
    ep->event.last_news = iface->clock.now;
    --iface->active.num_idle;
    uct_hipower_ep_pool_idle(ep, 0);
}

void uct_hipower_ep_active_init(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    /* Idle until its peer's first write, which always carries an
     * immediate; without demotion (pull mode, announce batches) always
     * active */
    ++iface->active.num_idle;
    uct_hipower_ep_pool_idle_held(ep, 1);
    uct_hipower_ep_idle_holder(ep, 1);
    ep->event.last_news = iface->clock.now;
    if (!iface->config.demote) {
        uct_hipower_ep_activate(ep);
    }
}

void uct_hipower_ep_active_cleanup(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE) {
        uct_hipower_ep_deactivate(ep);
    }
    --iface->active.num_idle;
    uct_hipower_ep_pool_idle_held(ep, 0);
    uct_hipower_ep_wake_done(ep); /* Its wake-up, if any, is flushed */
}

void uct_hipower_ep_deactivate(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    ucs_assert(ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE);
    ucs_list_del(&ep->active_list);
    uct_hipower_ep_flags_clear(ep, active,
                               UCT_HIPOWER_EP_FLAG_ACTIVE |
                               UCT_HIPOWER_EP_FLAG_NEWS);
    ++iface->active.num_idle;
    uct_hipower_ep_pool_idle(ep, 1);
}

/*
 * An active endpoint brought nothing for IDLE_TIME. With a peer that may
 * still send, ask it for an immediate with its next write (the sleep
 * handshake of one endpoint); the endpoint goes idle when the handshake's
 * read shows everything announced delivered. An endpoint whose peer never
 * wrote to us goes idle at once: a sender's first write always carries the
 * immediate. So does one that will receive nothing more (failed, or its
 * peer closed).
 */
void uct_hipower_ep_demote(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t gen;

    if ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                          UCT_HIPOWER_EP_FLAG_PEER_CLOSED)) ||
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_READY)) {
        /* A failed handshake completes with no verdict */
        uct_hipower_ep_flags_clear(ep, active, UCT_HIPOWER_EP_FLAG_DEMOTING);
        uct_hipower_ep_deactivate(ep);
        iface->stats.demotions++;
        if ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                              UCT_HIPOWER_EP_FLAG_PEER_CLOSED)) ==
            UCT_HIPOWER_EP_FLAG_PEER_CLOSED) {
            /* Nothing came for IDLE_TIME after its "closed": its runs are
             * of no more use */
            uct_hipower_ep_rx_peer_gone(ep);
        }
        return;
    }

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_DEMOTING) {
        return;
    }

    if (!uct_hipower_ep_may_initiate(ep) ||
        (ep->event.posted_gen != ep->event.confirmed_gen)) {
        /* Not connected yet, canceled, or a sleep handshake is out: later */
        ep->event.last_news = iface->clock.now;
        return;
    }

    gen = hipower_gen_next(&iface->event.gen_seq);
    if (uct_hipower_ep_post_sleep(ep, gen, uct_hipower_ep_demote_done) !=
        UCS_OK) {
        /* No room now: try again later */
        ep->event.last_news = iface->clock.now;
        return;
    }

    uct_hipower_ep_flags_set(ep, active, UCT_HIPOWER_EP_FLAG_DEMOTING);
    uct_hipower_ep_flags_clear(ep, active, UCT_HIPOWER_EP_FLAG_NEWS);
}

/* The demotion handshake of generation op->u.arm_gen completed */
static void uct_hipower_ep_demote_done(uct_hipower_tx_op_t *op,
                                       uct_hipower_txqp_t *txqp)
{
    uct_hipower_ep_t *ep       = uct_hipower_txqp_ep(txqp);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t gen               = op->u.arm_gen;
    hipower_demote_verdict_t verdict;
    uint64_t announced;

    ep->event.confirmed_gen = gen;
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_DEMOTING)) {
        return;
    }

    uct_hipower_ep_flags_clear(ep, active, UCT_HIPOWER_EP_FLAG_DEMOTING);
    ucs_memory_cpu_load_fence();
    announced = *(volatile uint64_t*)&ep->ctrl->peer_announced;
    verdict   = hipower_demote_verdict(gen, ep->event.posted_gen,
                                       !!(ep->flags.all &
                                          UCT_HIPOWER_EP_FLAG_NEWS),
                                       uct_hipower_ep_rx_delivered(ep),
                                       announced);
    if (verdict != HIPOWER_DEMOTE_BEHIND) {
        ep->event.behind_since = 0;
    } else if (ep->event.behind_since == 0) {
        ep->event.behind_since = uct_hipower_clock_now();
    } else if ((iface->config.grant_timeout != UCS_TIME_INFINITY) &&
               (uct_hipower_clock_now() - ep->event.behind_since >
                iface->config.grant_timeout)) {
        /* Messages in flight land in microseconds: a peer that says for
         * this long that it announced messages we never got is broken or
         * hostile, and would keep the endpoint active, and its run, for
         * ever (review H1 c) */
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer says it announced %u "
                  "messages, %u were delivered, and it has said so for "
                  "longer than UCX_HIPOWER_GRANT_TIMEOUT=%.1fs: broken or "
                  "hostile peer, the endpoint fails", UCT_HIPOWER_EP_ARG(ep),
                  (uint32_t)announced, uct_hipower_ep_rx_delivered(ep),
                  ucs_time_to_sec(iface->config.grant_timeout));
        uct_hipower_ep_rx_timeout(ep);
        return;
    }

    if ((verdict == HIPOWER_DEMOTE_IDLE) &&
        (ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE)) {
        uct_hipower_ep_deactivate(ep);
        iface->stats.demotions++;
        /* An idle peer keeps MIN_SLOTS of the shared pool */
        uct_hipower_ep_rx_reclaim(ep);
    } else {
        ep->event.last_news = iface->clock.now;
    }
}
