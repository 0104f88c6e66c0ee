/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The bundle window's endpoint operations: with the window on
 * (UCX_HIPOWER_BUNDLE_WINDOW), the interface's endpoint ops are these
 * wrappers, each the plain operation between the marks that keep it and
 * the hold timer's post apart (hipower_ep_hold.c says why). On top of the
 * endpoint: nothing below calls them but through UCT's ops table.
 */

#include "hipower_held.h"
#include "hipower_ep.h"
#include "hipower_cm.h"

#include <ucs/type/class.h>


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

void uct_hipower_iface_held_init(uct_hipower_iface_t *iface)
{
    uct_iface_ops_t *ops = &iface->super.super.ops;

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
    iface->held.internal_ops                     = *iface->super.internal_ops;
    iface->held.internal_ops.ep_connect_to_ep_v2 =
            uct_hipower_held_ep_connect_to_ep_v2;
    iface->super.internal_ops = &iface->held.internal_ops;
#endif
}
