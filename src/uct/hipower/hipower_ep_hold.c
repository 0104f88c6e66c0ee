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

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <sched.h>


__thread int uct_hipower_hold_posting_here = 0;

/* One wrapper per endpoint operation: the plain one, marked */
#define UCT_HIPOWER_HELD_OP(_type, _name, _params, _args) \
    UCT_HIPOWER_HELD_WRAPPER(static, _type, uct_hipower_held_##_name, \
                             uct_hipower_##_name, _params, _args)

/* am_short and am_bcopy have theirs in hipower_ep_am.c, with the plain
 * ones inlined: they are the hot path under load */

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_am_zcopy,
                    (uct_ep_h tl_ep, uint8_t id, const void *header,
                     unsigned header_length, const uct_iov_t *iov,
                     size_t iovcnt, unsigned flags, uct_completion_t *comp),
                    (tl_ep, id, header, header_length, iov, iovcnt, flags,
                     comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_put_short,
                    (uct_ep_h tl_ep, const void *buffer, unsigned length,
                     uint64_t remote_addr, uct_rkey_t rkey),
                    (tl_ep, buffer, length, remote_addr, rkey))

UCT_HIPOWER_HELD_OP(ssize_t, ep_put_bcopy,
                    (uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                     uint64_t remote_addr, uct_rkey_t rkey),
                    (tl_ep, pack_cb, arg, remote_addr, rkey))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_put_zcopy,
                    (uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                     uint64_t remote_addr, uct_rkey_t rkey,
                     uct_completion_t *comp),
                    (tl_ep, iov, iovcnt, remote_addr, rkey, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_get_bcopy,
                    (uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                     void *arg, size_t length, uint64_t remote_addr,
                     uct_rkey_t rkey, uct_completion_t *comp),
                    (tl_ep, unpack_cb, arg, length, remote_addr, rkey, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_get_zcopy,
                    (uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                     uint64_t remote_addr, uct_rkey_t rkey,
                     uct_completion_t *comp),
                    (tl_ep, iov, iovcnt, remote_addr, rkey, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_atomic64_post,
                    (uct_ep_h tl_ep, unsigned opcode, uint64_t value,
                     uint64_t remote_addr, uct_rkey_t rkey),
                    (tl_ep, opcode, value, remote_addr, rkey))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_atomic64_fetch,
                    (uct_ep_h tl_ep, unsigned opcode, uint64_t value,
                     uint64_t *result, uint64_t remote_addr, uct_rkey_t rkey,
                     uct_completion_t *comp),
                    (tl_ep, opcode, value, result, remote_addr, rkey, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_atomic_cswap64,
                    (uct_ep_h tl_ep, uint64_t compare, uint64_t swap,
                     uint64_t remote_addr, uct_rkey_t rkey, uint64_t *result,
                     uct_completion_t *comp),
                    (tl_ep, compare, swap, remote_addr, rkey, result, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_pending_add,
                    (uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags),
                    (tl_ep, req, flags))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_flush,
                    (uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp),
                    (tl_ep, flags, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_check,
                    (uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp),
                    (tl_ep, flags, comp))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_fence,
                    (uct_ep_h tl_ep, unsigned flags), (tl_ep, flags))

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_connect_to_ep,
                    (uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                     const uct_ep_addr_t *ep_addr),
                    (tl_ep, dev_addr, ep_addr))

#if HIPOWER_UCX_IFACE_OPS_V2
UCT_HIPOWER_HELD_OP(ucs_status_t, ep_connect_to_ep_v2,
                    (uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                     const uct_ep_addr_t *ep_addr,
                     const uct_ep_connect_to_ep_params_t *params),
                    (tl_ep, dev_addr, ep_addr, params))
#endif

static void uct_hipower_held_ep_pending_purge(uct_ep_h tl_ep,
                                              uct_pending_purge_callback_t cb,
                                              void *arg)
{
    uct_hipower_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_hipower_iface_t);

    uct_hipower_held_enter(iface);
    uct_hipower_ep_pending_purge(tl_ep, cb, arg);
    uct_hipower_held_leave(iface);
}

static ucs_status_t uct_hipower_held_ep_create(const uct_ep_params_t *params,
                                               uct_ep_h *ep_p)
{
    uct_hipower_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_hipower_iface_t);
    ucs_status_t status;

    uct_hipower_held_enter(iface);
    status = uct_hipower_ep_create(params, ep_p);
    uct_hipower_held_leave(iface);
    return status;
}

static void uct_hipower_held_ep_destroy(uct_ep_h tl_ep)
{
    uct_hipower_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_hipower_iface_t);

    uct_hipower_held_enter(iface);
    UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(tl_ep);
    uct_hipower_held_leave(iface);
}

/* Posts the open bundles (uct_hipower_iface_post_bundles(): unwindowed,
 * each needs only a slot and room; one that cannot go stays for progress;
 * a post that fails fails its endpoint, and UCP's error handler is
 * UCT_CB_FLAG_ASYNC, as for its wire-up from this thread). Returns whether
 * the timer is still needed. */
static int uct_hipower_iface_hold_post(uct_hipower_iface_t *iface)
{
    unsigned open = iface->tx.bundles_open;

    if ((open == 0) && !iface->tx.hold_seen) {
        return 0;
    }

    iface->tx.hold_seen        = 0;
    /* Those that went (or were dropped with a failed endpoint) */
    iface->stats.tx_hold_posts += open - uct_hipower_iface_post_bundles(iface);
    return 1;
}

static void uct_hipower_iface_hold_timer(void *arg)
{
    uct_hipower_iface_t *iface = arg;
    int needed;

    __atomic_store_n(&iface->tx.hold_posting, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&iface->tx.hold_ops, __ATOMIC_SEQ_CST) != 0) {
        /* An operation runs in the user's thread: the next tick */
        __atomic_store_n(&iface->tx.hold_posting, 0, __ATOMIC_RELEASE);
        return;
    }

    uct_hipower_hold_posting_here = 1;
    needed = uct_hipower_iface_hold_post(iface);
    uct_hipower_hold_posting_here = 0;
    if (!needed) {
        /* A tick with nothing held: stop until the window holds again */
        uct_hipower_timer_stop(&iface->tx.hold_timer);
    }
    __atomic_store_n(&iface->tx.hold_posting, 0, __ATOMIC_RELEASE);
}

void uct_hipower_iface_hold_start(uct_hipower_iface_t *iface)
{
    ucs_status_t status;

    status = uct_hipower_timer_start(&iface->tx.hold_timer);
    if (status != UCS_OK) {
        /* Held bundles still go at the sender's progress, flush and arm */
        ucs_warn("hipower %s: no timer for UCX_" UCT_HIPOWER_CONFIG_PREFIX
                 "BUNDLE_HOLD_TIME (%s): bundles held by the window wait for "
                 "the sender's next call", iface->dev_name,
                 ucs_status_string(status));
    }
}

void uct_hipower_iface_hold_init(uct_hipower_iface_t *iface)
{
    uct_iface_ops_t *ops = &iface->super.super.ops;

    /* (The marks were cleared with the rest of tx) */
    uct_hipower_timer_init(&iface->tx.hold_timer, iface->super.worker->async,
                           iface->config.bundle_hold_time,
                           uct_hipower_iface_hold_timer, iface);
    if (iface->config.bundle_window == 0) {
        return;
    }

    ops->ep_am_short       = uct_hipower_held_ep_am_short;
    ops->ep_am_bcopy       = uct_hipower_held_ep_am_bcopy;
    ops->ep_am_zcopy       = uct_hipower_held_ep_am_zcopy;
    ops->ep_put_short      = uct_hipower_held_ep_put_short;
    ops->ep_put_bcopy      = uct_hipower_held_ep_put_bcopy;
    ops->ep_put_zcopy      = uct_hipower_held_ep_put_zcopy;
    ops->ep_get_bcopy      = uct_hipower_held_ep_get_bcopy;
    ops->ep_get_zcopy      = uct_hipower_held_ep_get_zcopy;
    ops->ep_atomic64_post  = uct_hipower_held_ep_atomic64_post;
    ops->ep_atomic64_fetch = uct_hipower_held_ep_atomic64_fetch;
    ops->ep_atomic_cswap64 = uct_hipower_held_ep_atomic_cswap64;
    ops->ep_pending_add    = uct_hipower_held_ep_pending_add;
    ops->ep_pending_purge  = uct_hipower_held_ep_pending_purge;
    ops->ep_flush          = uct_hipower_held_ep_flush;
    ops->ep_fence          = uct_hipower_held_ep_fence;
    ops->ep_check          = uct_hipower_held_ep_check;
    ops->ep_create         = uct_hipower_held_ep_create;
    ops->ep_destroy        = uct_hipower_held_ep_destroy;
    ops->ep_connect_to_ep  = uct_hipower_held_ep_connect_to_ep;
#if HIPOWER_UCX_IFACE_OPS_V2
    iface->tx.held_internal_ops                     = *iface->super.internal_ops;
    iface->tx.held_internal_ops.ep_connect_to_ep_v2 =
            uct_hipower_held_ep_connect_to_ep_v2;
    iface->super.internal_ops = &iface->tx.held_internal_ops;
#endif
}

void uct_hipower_iface_hold_cleanup(uct_hipower_iface_t *iface)
{
    uct_hipower_timer_cleanup(&iface->tx.hold_timer);
}
