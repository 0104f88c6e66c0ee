/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The device's asynchronous events, handled: a QP that broke without a
 * failed completion to show it, a CQ that overran, a port that went down,
 * a device that died. Each interface takes the ones the async thread read
 * (hipower_md_async.c) in its own progress, where it may fail its
 * endpoints (the async thread must not touch them), naming the device and
 * the peer.
 */

#include "hipower_ep.h"

#include <ucs/debug/log.h>
#include <string.h>


/* Fails every connected endpoint of the interface with @a status */
static void uct_hipower_iface_fail_all(uct_hipower_iface_t *iface,
                                       ucs_status_t status)
{
    uct_hipower_ep_t *ep, *tmp;

    /* The error handler may destroy the endpoint */
    ucs_list_for_each_safe(ep, tmp, &iface->ep_list, list) {
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) {
            uct_hipower_ep_set_failed(ep, status);
        }
    }
}

/* The QP's endpoint, or NULL if the QP is not ours or its endpoint gone */
static uct_hipower_ep_t *uct_hipower_iface_qp_ep(uct_hipower_iface_t *iface,
                                                 uint32_t qp_num)
{
    khiter_t iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, qp_num);
    uct_hipower_txqp_t *txqp;

    if (iter == kh_end(&iface->qp_eps)) {
        return NULL;
    }

    txqp = kh_value(&iface->qp_eps, iter);
    return txqp->is_gc ? NULL : uct_hipower_txqp_ep(txqp);
}

static void uct_hipower_iface_handle_async(uct_hipower_iface_t *iface,
                                           const uct_hipower_async_event_t *event)
{
    const char *name = uct_hipower_md_event_name(event->type);
    uct_hipower_ep_t *ep;

    switch (event->type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
        ep = uct_hipower_iface_qp_ep(iface, event->qp_num);
        if ((ep == NULL) || (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
            return;
        }
        iface->stats.async_events++;
        ucs_error(UCT_HIPOWER_EP_FMT ": device event '%s': the endpoint "
                  "fails", UCT_HIPOWER_EP_ARG(ep), name);
        uct_hipower_ep_set_failed(ep, (event->type == IBV_EVENT_QP_ACCESS_ERR) ?
                                      UCS_ERR_CONNECTION_RESET :
                                      UCS_ERR_IO_ERROR);
        break;
    case IBV_EVENT_CQ_ERR:
        if ((event->cq != iface->cq) && (event->cq != iface->event.rx_cq)) {
            return;
        }
        iface->stats.async_events++;
        ucs_error("hipower %s: device event '%s' on the %s completion queue: "
                  "completions may be lost, all %u endpoints fail",
                  iface->dev_name, name,
                  (event->cq == iface->cq) ? "send" : "wake-up",
                  iface->num_eps);
        uct_hipower_iface_fail_all(iface, UCS_ERR_IO_ERROR);
        break;
    case IBV_EVENT_PORT_ERR:
        if (event->port != iface->port_num) {
            return;
        }
        iface->stats.async_events++;
        ucs_error("hipower %s: device event '%s': port %u is down, all %u "
                  "endpoints on it fail", iface->dev_name, name, event->port,
                  iface->num_eps);
        uct_hipower_iface_fail_all(iface, UCS_ERR_UNREACHABLE);
        break;
    case IBV_EVENT_DEVICE_FATAL:
        iface->stats.async_events++;
        ucs_error("hipower %s: device event '%s': all %u endpoints fail",
                  iface->dev_name, name, iface->num_eps);
        uct_hipower_iface_fail_all(iface, UCS_ERR_IO_ERROR);
        break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
        if (event->port == iface->port_num) {
            iface->stats.async_events++;
            ucs_diag("hipower %s: device event '%s' on port %u",
                     iface->dev_name, name, event->port);
        }
        break;
    default:
        /* COMM_EST, SQ_DRAINED, LAST_WQE_REACHED, PATH_MIG: nothing to do */
        break;
    }
}

unsigned uct_hipower_iface_progress_async(uct_hipower_iface_t *iface)
{
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    uct_hipower_async_event_t events[UCT_HIPOWER_ASYNC_RING];
    unsigned i, count;
    uint64_t lost;

    count = uct_hipower_md_async_take(&md->async, &iface->async_seq, events,
                                      &lost);

    if (lost > 0) {
        ucs_warn("hipower %s: %lu device events came faster than they were "
                 "handled and were not looked at", iface->dev_name,
                 (unsigned long)lost);
    }

    for (i = 0; i < count; ++i) {
        uct_hipower_iface_handle_async(iface, &events[i]);
    }
    return count;
}
