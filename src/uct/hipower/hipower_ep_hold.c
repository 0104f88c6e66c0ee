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
 * the tick). Progress, flush and arm take that lock already; while the
 * window is on, so does every endpoint operation (the interface's ops are
 * swapped for the wrappers below when it opens, as ud_verbs runs its
 * operations under uct_ud_enter()): the timer posts on the QPs, takes the
 * completion queue's credits and the peers' slots that sends use. With the
 * window off nothing here runs and no operation takes the lock.
 *
 * The timer is added when the window first holds a send and removes itself
 * after a tick that saw no bundle open and no send held, so an idle
 * process has no timer waking it.
 */

#include "hipower_ep.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>


#define UCT_HIPOWER_HELD_ASYNC(_tl_ep) \
    (ucs_derived_of((_tl_ep)->iface, uct_hipower_iface_t)->super.worker->async)

/* One wrapper per endpoint operation: the plain one, under the lock */
#define UCT_HIPOWER_HELD_OP(_type, _name, _params, _args) \
    static _type uct_hipower_held_##_name _params \
    { \
        ucs_async_context_t *async = UCT_HIPOWER_HELD_ASYNC(tl_ep); \
        _type ret; \
        \
        UCS_ASYNC_BLOCK(async); \
        ret = uct_hipower_##_name _args; \
        UCS_ASYNC_UNBLOCK(async); \
        return ret; \
    }

UCT_HIPOWER_HELD_OP(ucs_status_t, ep_am_short,
                    (uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                     const void *buffer, unsigned length),
                    (tl_ep, id, hdr, buffer, length))

UCT_HIPOWER_HELD_OP(ssize_t, ep_am_bcopy,
                    (uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                     void *arg, unsigned flags),
                    (tl_ep, id, pack_cb, arg, flags))

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
    ucs_async_context_t *async = UCT_HIPOWER_HELD_ASYNC(tl_ep);

    UCS_ASYNC_BLOCK(async);
    uct_hipower_ep_pending_purge(tl_ep, cb, arg);
    UCS_ASYNC_UNBLOCK(async);
}

static ucs_status_t uct_hipower_held_ep_create(const uct_ep_params_t *params,
                                               uct_ep_h *ep_p)
{
    uct_hipower_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_hipower_iface_t);
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = UCS_CLASS_NEW_FUNC_NAME(uct_hipower_ep_t)(params, ep_p);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

static void uct_hipower_held_ep_destroy(uct_ep_h tl_ep)
{
    ucs_async_context_t *async = UCT_HIPOWER_HELD_ASYNC(tl_ep);

    UCS_ASYNC_BLOCK(async);
    UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(tl_ep);
    UCS_ASYNC_UNBLOCK(async);
}

static void uct_hipower_iface_hold_timer(int id, ucs_event_set_types_t events,
                                         void *arg)
{
    uct_hipower_iface_t *iface = arg;
    uct_hipower_ep_t *ep, *tmp;

    if ((iface->tx.bundles_open == 0) && !iface->tx.hold_seen) {
        /* A tick with nothing held: stop until the window holds again */
        ucs_async_remove_handler(id, 0);
        iface->tx.hold_timer = 0;
        return;
    }

    iface->tx.hold_seen = 0;
    /* Every endpoint with a bundle open is in pending_eps. Unwindowed: it
     * needs only a slot and room; if it cannot go, it stays for progress.
     * A post that fails fails its endpoint (UCP's error handler is
     * UCT_CB_FLAG_ASYNC, as for its wire-up from this thread) */
    ucs_list_for_each_safe(ep, tmp, &iface->pending_eps, pending_list) {
        if (iface->tx.bundles_open == 0) {
            break;
        }
        if ((ep->flags & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) &&
            (uct_hipower_ep_bundle_post(ep, 0) == UCS_OK)) {
            iface->stats.tx_hold_posts++;
        }
    }
}

void uct_hipower_iface_hold_start(uct_hipower_iface_t *iface)
{
    ucs_async_context_t *async = iface->super.worker->async;
    ucs_status_t status;

    ucs_assert(iface->tx.hold_timer == 0);
    status = ucs_async_add_timer(async->mode, iface->config.bundle_hold_time,
                                 uct_hipower_iface_hold_timer, iface, async,
                                 &iface->tx.hold_timer);
    if (status != UCS_OK) {
        /* Held bundles still go at the sender's progress, flush and arm */
        ucs_warn("hipower %s: no timer for UCX_" UCT_HIPOWER_CONFIG_PREFIX
                 "BUNDLE_HOLD_TIME (%s): bundles held by the window wait for "
                 "the sender's next call", iface->dev_name,
                 ucs_status_string(status));
        iface->tx.hold_timer = -1;
    }
}

void uct_hipower_iface_hold_init(uct_hipower_iface_t *iface)
{
    uct_iface_ops_t *ops = &iface->super.super.ops;

    iface->tx.hold_timer = 0;
    iface->tx.hold_seen  = 0;
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
    if (iface->tx.hold_timer > 0) {
        ucs_async_remove_handler(iface->tx.hold_timer, 1);
        iface->tx.hold_timer = 0;
    }
}
