/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Wakeup: an event fd for ucp_worker_wait() and friends (push mode).
 *
 * hipower's receiver learns of messages from memory, so nothing in the data
 * path makes a completion it could sleep on. A sleeping receiver therefore
 * asks its peers to wake it, and they pay for that only while it sleeps:
 *
 *  - arm(RECV) starts a sleep generation and, per endpoint, RDMA_WRITEs it
 *    into the peer's peer_sleep_gen, then RDMA_READs the peer's count of
 *    messages announced so far (same QP, so the read sees the write done).
 *  - A sender, whenever it writes a bitmap word, stores its announced count
 *    (a locked exchange: a store and a full fence in one), and loads
 *    peer_sleep_gen. If the generation is new, that bitmap
 *    write goes as RDMA_WRITE_WITH_IMM: it consumes a receive on the sleeper's
 *    QP and its completion on rx_cq fires the completion channel's fd.
 *  - A sender's very first bitmap write to a receiver always carries the
 *    immediate: the receiver may have gone to sleep before it knew the
 *    sender was ready, and it handshakes only with peers it knows to be
 *    ready (a handshake to a QP not yet connected would be retried until
 *    the endpoint failed). One receive completion per connection, polled
 *    even by a receiver that never sleeps, so that the receive is reposted.
 *  - When every handshake read has completed, the receiver sleeps only if it
 *    has taken every announced message from its rings. The store-fence-load
 *    on the sender and write-then-read on the receiver make sure a message is
 *    either counted by the read or sent after the sender saw the generation.
 *    The first such message carries the immediate and the ones after it do
 *    not; its completion either wakes the sleeper or, taken before it
 *    sleeps, spends the generation, so the next sleep starts a new one and
 *    its read counts them. No message can slip past a sleeping receiver.
 *
 * Busy-polling costs: one locked exchange and one load per bitmap write;
 * rx_cq is polled only once a consumer has armed the interface.
 * Send completions are ordinary signaled CQEs on the send CQ, armed as is.
 */

#include "hipower_ep.h"
#include "hipower_ep_active.h"
#include "hipower_verbs.h"
#include "hipower_tx_cq.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <string.h>
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>


/* Completions taken from rx_cq per poll */
#define UCT_HIPOWER_EVENT_POLL  16


/* The event fd: an epoll set of the wake-up receives' channel and the
 * send CQ's (UCT_EVENT_SEND_COMP; UCX's async thread leaves an event there
 * while the user sleeps on it: hipower_ep_hold.c); the handshake listener
 * adds its eventfd (hipower_cm.c) */
static ucs_status_t uct_hipower_iface_event_fd_init(uct_hipower_iface_t *iface)
{
    int fds[2] = {iface->event.channel->fd, iface->tx.channel->fd};
    struct epoll_event event;
    int i;

    iface->event.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (iface->event.epfd < 0) {
        ucs_error("hipower %s: epoll_create1() failed: %m", iface->dev_name);
        return UCS_ERR_IO_ERROR;
    }

    for (i = 0; i < 2; ++i) {
        memset(&event, 0, sizeof(event));
        event.events  = EPOLLIN;
        event.data.fd = fds[i];
        if (epoll_ctl(iface->event.epfd, EPOLL_CTL_ADD, fds[i], &event) < 0) {
            ucs_error("hipower %s: epoll_ctl(ADD %d) failed: %m",
                      iface->dev_name, fds[i]);
            return UCS_ERR_IO_ERROR;
        }
    }
    return UCS_OK;
}

ucs_status_t uct_hipower_iface_event_init(uct_hipower_iface_t *iface,
                                          unsigned cq_len)
{
    ucs_status_t status;

    iface->event.gen       = 0;
    iface->event.new_gen   = 1;
    iface->event.epfd      = -1;
    status = uct_hipower_channel_create(&iface->verbs, &iface->event.channel);
    if (status != UCS_OK) {
        iface->event.channel = NULL;
        return status;
    }

    status = uct_hipower_iface_event_fd_init(iface);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_hipower_cq_create(&iface->verbs, cq_len, iface->event.channel,
                                   "wake-up receives", &iface->event.rx_cq);
    if (status != UCS_OK) {
        goto err;
    }

    return UCS_OK;

err:
    uct_hipower_iface_event_cleanup(iface);
    iface->event.channel = NULL;
    return status;
}

void uct_hipower_iface_event_cleanup(uct_hipower_iface_t *iface)
{
    if (iface->event.rx_cq != NULL) {
        uct_hipower_cq_destroy(&iface->verbs, iface->event.rx_cq);
        iface->event.rx_cq = NULL;
    }
    if (iface->event.epfd >= 0) {
        close(iface->event.epfd);
        iface->event.epfd = -1;
    }
    if (iface->event.channel != NULL) {
        uct_hipower_channel_destroy(iface->event.channel);
        iface->event.channel = NULL;
    }
}

/*
 * Takes wake-up receives off rx_cq and gives their QPs new ones. A wake-up
 * spends the sleep generation: its sender wakes each generation only once
 * and sends the messages after it without one, so the next sleep needs a
 * new generation, whose handshake counts them. Flushed receives of failed
 * or destroyed endpoints' QPs come here too.
 */
unsigned uct_hipower_iface_progress_events(uct_hipower_iface_t *iface)
{
    struct ibv_wc wc[UCT_HIPOWER_EVENT_POLL];
    uct_hipower_txqp_t *txqp;
    uct_hipower_ep_t *ep;
    khiter_t iter;
    int i, num_wcs;

    num_wcs = ibv_poll_cq(iface->event.rx_cq, UCT_HIPOWER_EVENT_POLL, wc);
    if (num_wcs <= 0) {
        if (ucs_unlikely(num_wcs < 0)) {
            ucs_error("hipower %s: ibv_poll_cq(wake-up CQ) failed: %d",
                      iface->dev_name, num_wcs);
        }
        return 0;
    }

    iface->stats.rx_completions += num_wcs;
    for (i = 0; i < num_wcs; ++i) {
        iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, wc[i].qp_num);
        if (ucs_unlikely(iter == kh_end(&iface->qp_eps))) {
            /* QPs are destroyed only once drained: cannot happen */
            ucs_diag("hipower %s: wake-up completion of unknown qp 0x%x",
                     iface->dev_name, wc[i].qp_num);
            continue;
        }

        txqp = kh_value(&iface->qp_eps, iter);
        if (txqp->is_gc) {
            uct_hipower_gc_rx_completion(txqp);
            continue;
        }

        ep = uct_hipower_txqp_ep(txqp);
        uct_hipower_txqp_recv_done(txqp);
        if (wc[i].status != IBV_WC_SUCCESS) {
            /* Flushed by a failed QP: the send side reports */
            continue;
        }

        uct_hipower_ep_peer_ready(ep);
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_FIRST_IMM) {
            /* The peer's first write: counted when its message came */
            uct_hipower_ep_rx_first_imm_done(ep);
        }
        if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_WAKE_DUE) &&
            (wc[i].wc_flags & IBV_WC_WITH_IMM) &&
            (ntohl(wc[i].imm_data) == (uint32_t)ep->event.posted_gen)) {
            /* The wake-up of our latest handshake: none is due any more
             * (an older one's leaves the flag for the latest's) */
            uct_hipower_ep_wake_done(ep);
        }
        iface->event.new_gen = 1;
        iface->stats.wakeup_events++;
        uct_hipower_ep_post_event_recvs(ep, 1);
        if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE)) {
            uct_hipower_ep_activate(ep);
            iface->stats.promotions++;
        } else {
            uct_hipower_ep_news_woke(ep);
        }
        if (ucs_unlikely((ep->rx.ring.num_slots == 0) ||
                         (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING))) {
            /* Its peer's run request: a run given back, or one asked for
             * (not from a handler of its walk: the walk's next
             * uct_hipower_ep_rx_switch() sees a release) */
            if (uct_hipower_ep_rx_enter(ep)) {
                uct_hipower_ep_rx_run_req(ep);
                uct_hipower_ep_rx_leave(ep);
            }
        }
    }
    return num_wcs;
}

ucs_status_t uct_hipower_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    uct_hipower_iface_t *iface = ucs_derived_of(tl_iface, uct_hipower_iface_t);

    if (iface->event.channel == NULL) {
        ucs_error("hipower %s: no event fd with UCX_HIPOWER_NOTIFY=pull",
                  iface->dev_name);
        return UCS_ERR_UNSUPPORTED;
    }

    *fd_p = iface->event.epfd;
    return UCS_OK;
}

/*
 * UCS_OK: sleep on the fd. UCS_ERR_BUSY: progress and call again (messages
 * arrived or are in flight, or the sleep handshake has not completed yet).
 */
static ucs_status_t uct_hipower_iface_arm_recv(uct_hipower_iface_t *iface)
{
    ucs_status_t status = UCS_OK;
    uct_hipower_ep_t *ep;

    if (iface->event.new_gen) {
        iface->event.gen     = hipower_gen_next(&iface->event.gen_seq);
        iface->event.new_gen = 0;
    }

    /* Idle endpoints need no handshake: their peers write with an
     * immediate already (hipower_active.h) */
    ucs_list_for_each(ep, &iface->active_eps, active_list) {
        if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) ||
            (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
            continue;
        }

        /* Whoever we send to may sleep too: announce our batch now, or
         * stay awake until there is room to */
        if (uct_hipower_ep_announce(ep) != UCS_OK) {
            return UCS_ERR_BUSY;
        }
        if (uct_hipower_ep_rx_ready(ep)) {
            return UCS_ERR_BUSY;
        }

        if (!uct_hipower_ep_may_initiate(ep)) {
            /* Not known to be ready (its first write will wake us), or
             * closed: no handshake */
            continue;
        }

        if (ep->event.confirmed_gen != iface->event.gen) {
            if (ep->event.posted_gen != iface->event.gen) {
                uct_hipower_ep_post_sleep(ep, iface->event.gen,
                                          uct_hipower_ep_arm_done);
            }
            status = UCS_ERR_BUSY;
        } else if ((int32_t)(uct_hipower_ep_rx_delivered(ep) -
                             (uint32_t)*(volatile uint64_t*)
                             &ep->ctrl->peer_announced) < 0) {
            /* Announced before the peer saw our generation, still in flight */
            status = UCS_ERR_BUSY;
        }
    }

    if (status != UCS_OK) {
        return status;
    }

    status = uct_hipower_cq_arm(&iface->verbs, iface->event.rx_cq);
    if (status != UCS_OK) {
        return status;
    }

    /* A wake-up write that came before the arm made no event */
    if (uct_hipower_iface_progress_events(iface) > 0) {
        return UCS_ERR_BUSY;
    }

    /* The generation stays until a wake-up spends it: an arm after a sleep
     * that nobody woke needs no new handshake (and callers that arm until
     * nothing progresses, as UCX's tests do, would otherwise never stop) */
    return UCS_OK;
}

static ucs_status_t uct_hipower_iface_do_event_arm(uct_hipower_iface_t *iface,
                                                   unsigned events)
{
    ucs_status_t status;

    /* Bundled messages were accepted by sends that returned UCS_OK: they
     * leave before the process may sleep, or it does not sleep (nothing
     * but its own progress would send them) */
    if (ucs_unlikely(iface->bundle.num_open > 0) &&
        (uct_hipower_iface_post_bundles(iface) > 0)) {
        return UCS_ERR_BUSY;
    }

    status = uct_hipower_channel_drain(&iface->verbs, iface->event.channel);
    if (status != UCS_OK) {
        return status;
    }
    /* The send CQ's events: the bundles they were for went above */
    uct_hipower_iface_hold_drain(iface);

    /* Handshakes that finished wait for progress */
    if (iface->cm.enabled && (uct_hipower_cm_arm(iface) != UCS_OK)) {
        return UCS_ERR_BUSY;
    }

    if (events & UCT_EVENT_SEND_COMP) {
        /* Before the arm: the async thread leaves the event to the event
         * fd (hipower_ep_hold.c) */
        __atomic_store_n(&iface->tx.user_armed, 1, __ATOMIC_SEQ_CST);
        status = uct_hipower_cq_arm(&iface->verbs, iface->cq);
        if (status != UCS_OK) {
            return status;
        }

        /* Completions that came before the arm made no event */
        if (uct_hipower_tx_cq_poll(iface) > 0) {
            return UCS_ERR_BUSY;
        }
    }

    if (events & (UCT_EVENT_RECV | UCT_EVENT_RECV_SIG)) {
        status = uct_hipower_iface_arm_recv(iface);
        if (status != UCS_OK) {
            return status;
        }
        iface->stats.sleeps++;
    }

    return UCS_OK;
}

/* Polls the send CQ and walks the endpoints: under the worker's async lock,
 * like progress (uct_hipower_iface_progress()) */
ucs_status_t uct_hipower_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_hipower_iface_t *iface = ucs_derived_of(tl_iface, uct_hipower_iface_t);
    ucs_status_t status;

    if (iface->event.channel == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    /* An endpoint failed in the hold timer: its handler first (progress) */
    status = (*(volatile unsigned*)&iface->tx.failures_due != 0) ?
             UCS_ERR_BUSY : uct_hipower_iface_do_event_arm(iface, events);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}
