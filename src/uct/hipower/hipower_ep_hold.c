/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The bundle window's deadline (UCX_HIPOWER_BUNDLE_HOLD_TIME, docs/protocol.md
 * 2.1). A message the window holds in its endpoint's bundle would otherwise
 * leave only at the sender's next progress, flush or arm: delivery would
 * depend on the sender calling UCX again, which the design forbids for a
 * message that could have been posted. So while bundles are held, a timer
 * of the worker's async context posts every open bundle once per
 * BUNDLE_HOLD_TIME, unwindowed -- the sender's own progress normally gets
 * there first, when the completion that opens the window comes.
 *
 * The timer runs under the worker's async lock (UCX's async thread, or the
 * user's thread through ucs_async_check_miss() when the lock was taken at
 * the tick), so never beside progress, flush or arm, which take that lock.
 * Endpoint operations do not take it: UCS_ASYNC_BLOCK around each, as
 * ud_verbs does, cost about 70 user-space instructions per message on the
 * rig (the recursive spinlock, pthread_self() and the lock's calls; 394 ->
 * 466 per 8 B message with a window of 2). Instead, while the window is on,
 * the interface's endpoint ops are swapped, when it opens, for wrappers
 * that keep a count of operations running (hold_ops, an atomic add: UCP's
 * wire-up runs endpoint operations in UCX's async thread while the user's
 * thread sends), and the timer raises hold_posting: each stores its own
 * mark, then reads the other's, both sequentially consistent, so of two
 * that start together at least one sees the other -- the timer then leaves
 * it for its next tick, an operation waits the few microseconds of the
 * timer's post. An operation the timer's post itself leads to (the error
 * handler of an endpoint whose post failed, which UCP's purges) does not
 * wait: it runs in the timer's thread (uct_hipower_hold_posting_here).
 * With the window off nothing here runs and the ops are the plain ones.
 *
 * The timer starts when the window holds a send and stops after a tick
 * that saw no bundle open and no send held, so an idle process has no
 * timer waking it. It keeps one async handler for the interface's life
 * (hipower_timer.h): a UCX timer added at each start left an entry in the
 * worker's miss queue for each start whose tick met progress, which a
 * program driving UCT without UCP never empties.
 */

#include "hipower_ep.h"

#include "hipower_verbs.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>


__thread int uct_hipower_hold_posting_here = 0;

static void uct_hipower_iface_hold_reap(uct_hipower_iface_t *iface);

/* Posts the bundles held for a whole tick (uct_hipower_iface_post_bundles():
 * unwindowed, each needs only a slot and room; one that cannot go stays
 * for progress; a post that fails fails its endpoint, and UCP's error
 * handler is UCT_CB_FLAG_ASYNC, as for its wire-up from this thread).
 * Those opened since the last tick are left to their completion event:
 * under load a bundle is always open, and a timer that posted it would
 * post a bundle every tick. Returns whether the timer is still needed. */
static int uct_hipower_iface_hold_post(uct_hipower_iface_t *iface)
{
    unsigned open = iface->bundle.num_open;
    uint32_t tick = iface->hold.tick++;

    if (!uct_hipower_iface_hold_take(iface) && (open == 0)) {
        return 0;
    }

    if (open > 0) {
        uct_hipower_iface_hold_reap(iface);
    }
    /* Those that went (or were dropped with a failed endpoint) */
    iface->stats.hold_timer_posts +=
            open - uct_hipower_iface_post_bundles_before(iface, 0, tick);
    return 1;
}

/* Marks the async thread at work on the interface's bundles, unless an
 * endpoint operation runs: each stores its own mark, then reads the
 * other's, both sequentially consistent, so of two that start together at
 * least one sees the other */
static int uct_hipower_iface_hold_enter(uct_hipower_iface_t *iface)
{
    __atomic_store_n(&iface->tx.hold_posting, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&iface->tx.hold_ops, __ATOMIC_SEQ_CST) != 0) {
        __atomic_store_n(&iface->tx.hold_posting, 0, __ATOMIC_RELEASE);
        return 0;
    }
    uct_hipower_hold_posting_here = 1;
    return 1;
}

static void uct_hipower_iface_hold_leave(uct_hipower_iface_t *iface)
{
    uct_hipower_hold_posting_here = 0;
    __atomic_store_n(&iface->tx.hold_posting, 0, __ATOMIC_RELEASE);
}

static void uct_hipower_iface_hold_timer(void *arg)
{
    uct_hipower_iface_t *iface = arg;
    int needed;

    if (!uct_hipower_iface_hold_enter(iface)) {
        return; /* An operation runs in the user's thread: the next tick */
    }
    needed = uct_hipower_iface_hold_post(iface);
    if (!needed) {
        /* A tick with nothing held: stop until the window holds again */
        uct_hipower_timer_stop(&iface->tx.hold_timer);
    }
    uct_hipower_iface_hold_leave(iface);
}

/*
 * The flush on completion. A held bundle waits for the completion of the
 * frame ahead of it (the window's last frame, always signaled). The first
 * send the window holds arms the send CQ (uct_hipower_iface_hold_arm(),
 * hipower_ep_bundle.c);
 * the completion makes an event on the send CQ's own channel, which UCX's
 * async thread watches:
 *  1. uct_hipower_iface_tx_event(), a handler without an async context, so
 *     that UCX runs it at once and never leaves it in the context's miss
 *     queue: reads and acknowledges the events (unless the user sleeps on
 *     UCT_EVENT_SEND_COMP: its event fd has the channel, and the event is
 *     its to see); and, if the CQ was armed for held bundles, marks
 *     post_due and writes relay_fd;
 *  2. uct_hipower_iface_tx_relay(), relay_fd's handler, of the worker's
 *     async context (run under its lock): posts the open bundles, marked
 *     apart from endpoint operations as the timer is
 *     (uct_hipower_iface_hold_enter()).
 * Whoever is in the way posts them instead: an endpoint operation running
 * in the user's thread, at its end (uct_hipower_held_leave()); progress,
 * which held the lock when step 2 came, right after it gave the lock back
 * (UCX's miss queue would keep step 2 until the next UCP progress call,
 * and for ever in a program that drives UCT alone). Each reads the mark
 * after its own store, as step 1 writes it before it tries the lock.
 * So a held bundle leaves one completion after the frame ahead of it plus
 * the async thread's wake-up, whatever the sender does; the safety timer
 * posts only what was held a whole tick (a lost event).
 */

static void uct_hipower_iface_tx_event(int fd, ucs_event_set_types_t events,
                                       void *arg)
{
    uct_hipower_iface_t *iface = arg;
    uint64_t one               = 1;
    unsigned count;

    if (__atomic_load_n(&iface->tx.user_armed, __ATOMIC_SEQ_CST)) {
        /* The user sleeps on this channel too (its event fd has it): the
         * event is left for it to see, and its arm to read */
        count = 1;
    } else {
        count = uct_hipower_channel_take(iface->tx.channel, iface->cq);
        if (count == 0) {
            return; /* The user's arm read it */
        }
    }

    __atomic_fetch_add(&iface->stats.tx_cq_events, count, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&iface->tx.armed, 0, __ATOMIC_SEQ_CST)) {
        /* The mark before the lock is tried (step 2) */
        __atomic_store_n(&iface->tx.post_due, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&iface->tx.in_progress, __ATOMIC_SEQ_CST)) {
            /* Progress runs: it reads the mark after it gave the lock
             * back, and posts (step 2 would only find the lock taken) */
            iface->stats.tx_event_to_progress++;
            return;
        }
        if ((write(iface->hold.relay_fd, &one, sizeof(one)) < 0) &&
            (errno != EAGAIN)) {
            ucs_debug("hipower %s: eventfd write failed: %m",
                      iface->dev_name);
        }
    }
}

/* Handles @a wc if that touches nothing of the user's -- only the
 * transport's own requests and AM frames without a completion are done by
 * it (an AM frame's, a recycle READ's that gives slots back) -- and returns
 * 1; 0 otherwise: a user's completion, a fetched value or a failure are
 * for the user's progress (UCT calls the user's callbacks from there,
 * never from UCX's async thread) */
static int uct_hipower_iface_hold_wc(void *arg, struct ibv_wc *wc)
{
    uct_hipower_iface_t *iface = arg;
    khiter_t iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, wc->qp_num);
    uct_hipower_txqp_t *txqp;
    uct_hipower_tx_op_t *op;
    uct_hipower_ep_t *ep;

    if ((iter == kh_end(&iface->qp_eps)) || (wc->status != IBV_WC_SUCCESS)) {
        return 0;
    }
    txqp = kh_value(&iface->qp_eps, iter);
    if (txqp->is_gc) {
        return 0;
    }

    ep = uct_hipower_txqp_ep(txqp);
    ucs_queue_for_each(op, &ep->txqp.outstanding, queue) {
        if ((int64_t)(op->sn - wc->wr_id) > 0) {
            break;
        }
        if ((op->comp != NULL) || (op->flags & UCT_HIPOWER_OP_FLAG_USER)) {
            return 0;
        }
    }
    ep->hooks->completed(ep, wc);
    return 1;
}

/* Under the exclusion of the bundles' posters: takes the send CQ's
 * completions the sender did not handle (it computes, or stopped calling)
 * and handles those that touch nothing of the user's, in order: the
 * window then sees the frames that completed, and the sender's ring the
 * slots a recycle READ gave back -- a held bundle that waits for a slot
 * waits for that READ's completion, which only the sender's progress
 * handled before (found by bundle_window_event in push mode: the last
 * bundle of a silent sender held for ever with no free slot) */
static void uct_hipower_iface_hold_reap(uct_hipower_iface_t *iface)
{
    /* All of the CQ first: one order with what was set aside before */
    iface->stats.tx_completions += uct_hipower_cq_stash_poll(&iface->verbs,
                                                             iface->cq, 1);
    if (uct_hipower_cq_stash_count(&iface->verbs) > 0) {
        iface->stats.tx_reaped += uct_hipower_cq_stash_reap(
                &iface->verbs, uct_hipower_iface_hold_wc, iface);
    }
}

/* Under the worker's async lock: posts the held bundles if the mark says
 * an event came for them, unless an endpoint operation runs (it posts them
 * at its end) */
static void uct_hipower_iface_hold_event_post(uct_hipower_iface_t *iface)
{
    unsigned open;

    if (!__atomic_load_n(&iface->tx.post_due, __ATOMIC_SEQ_CST) ||
        !uct_hipower_iface_hold_enter(iface)) {
        return;
    }

    __atomic_store_n(&iface->tx.post_due, 0, __ATOMIC_SEQ_CST);
    open = iface->bundle.num_open;
    if (open > 0) {
        uct_hipower_iface_hold_reap(iface);
    }
    if (open == 0) {
        iface->stats.tx_event_idle++;
    } else {
        iface->stats.tx_event_posts += open -
                                       uct_hipower_iface_post_bundles(iface);
    }
    uct_hipower_iface_hold_leave(iface);
}

static void uct_hipower_iface_tx_relay(int fd, ucs_event_set_types_t events,
                                       void *arg)
{
    uct_hipower_iface_t *iface = arg;
    uint64_t value;

    /* Read, so the next write is a new edge; nothing read (polling mode
     * calls every handler) with the mark set still posts */
    (void)read(iface->hold.relay_fd, &value, sizeof(value));
    uct_hipower_iface_hold_event_post(iface);
}

void uct_hipower_iface_hold_due(uct_hipower_iface_t *iface)
{
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    /* Not from the async thread's own post (its error handlers) */
    if (!uct_hipower_hold_posting_here) {
        uct_hipower_iface_hold_event_post(iface);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
}

void uct_hipower_iface_hold_drain(uct_hipower_iface_t *iface)
{
    /* The bundles an event read here was for went before (the arm posts
     * them): the next hold arms again */
    if (uct_hipower_channel_take(iface->tx.channel, iface->cq) > 0) {
        __atomic_store_n(&iface->tx.armed, 0, __ATOMIC_SEQ_CST);
    }
}

void uct_hipower_iface_hold_open(uct_hipower_iface_t *iface)
{
    ucs_async_context_t *async = iface->super.worker->async;
    ucs_status_t status;

    if ((async->mode != UCS_ASYNC_MODE_THREAD_SPINLOCK) &&
        (async->mode != UCS_ASYNC_MODE_THREAD_MUTEX)) {
        ucs_debug("hipower %s: no async thread: bundles held by the window "
                  "go at the sender's next call or at the timer",
                  iface->dev_name);
        return;
    }

    iface->hold.relay_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (iface->hold.relay_fd < 0) {
        ucs_warn("hipower %s: eventfd() failed: %m: bundles held by the "
                 "window go at the sender's next call or at the timer",
                 iface->dev_name);
        return;
    }

    status = ucs_async_set_event_handler(async->mode, iface->hold.relay_fd,
                                         UCS_EVENT_SET_EVREAD |
                                         UCS_EVENT_SET_EDGE_TRIGGERED,
                                         uct_hipower_iface_tx_relay, iface,
                                         async);
    if (status != UCS_OK) {
        goto err_close;
    }

    /* No context: run at once, never missed */
    status = ucs_async_set_event_handler(async->mode, iface->tx.channel->fd,
                                         UCS_EVENT_SET_EVREAD |
                                         UCS_EVENT_SET_EDGE_TRIGGERED,
                                         uct_hipower_iface_tx_event, iface,
                                         NULL);
    if (status != UCS_OK) {
        ucs_async_remove_handler(iface->hold.relay_fd, 1);
        goto err_close;
    }

    iface->hold.flush_async = 1;
    return;

err_close:
    ucs_warn("hipower %s: the async thread does not watch the send CQ (%s): "
             "bundles held by the window go at the sender's next call or at "
             "the timer", iface->dev_name, ucs_status_string(status));
    close(iface->hold.relay_fd);
    iface->hold.relay_fd = -1;
}

void uct_hipower_iface_hold_init(uct_hipower_iface_t *iface)
{
    /* (The marks were cleared with the rest of tx) */
    uct_hipower_timer_init(&iface->tx.hold_timer, iface->super.worker->async,
                           iface->config.bundle_hold_time,
                           uct_hipower_iface_hold_timer, iface);
}

void uct_hipower_iface_hold_cleanup(uct_hipower_iface_t *iface)
{
    if (iface->hold.flush_async) {
        /* Waits for a handler that runs */
        ucs_async_remove_handler(iface->tx.channel->fd, 1);
        ucs_async_remove_handler(iface->hold.relay_fd, 1);
        close(iface->hold.relay_fd);
        iface->hold.relay_fd    = -1;
        iface->hold.flush_async = 0;
    }
    uct_hipower_timer_cleanup(&iface->tx.hold_timer);
}
