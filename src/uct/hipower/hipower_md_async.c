/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The device's asynchronous events (ibv_get_async_event()), read: UCX's
 * async thread takes them from the device's fd into a small ring (one per
 * memory domain, which holds it), from which each interface takes them in
 * its own progress (hipower_async.c, which fails endpoints). Part of the
 * verbs layer: it knows the device, not the endpoints.
 */

#include "hipower_md_async.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <string.h>
#include <errno.h>


static void uct_hipower_async_handler(int fd, ucs_event_set_types_t events,
                                      void *arg)
{
    uct_hipower_md_async_t *async = arg;
    struct ibv_async_event ibevent;
    uct_hipower_async_event_t event;

    while (ibv_get_async_event(async->context, &ibevent) == 0) {
        memset(&event, 0, sizeof(event));
        event.type = ibevent.event_type;
        switch (ibevent.event_type) {
        case IBV_EVENT_CQ_ERR:
            event.cq = ibevent.element.cq;
            break;
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            event.qp_num = ibevent.element.qp->qp_num;
            break;
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            event.port = ibevent.element.port_num;
            break;
        default:
            break;
        }
        ibv_ack_async_event(&ibevent);

        ucs_debug("hipower %s: device event '%s'", async->name,
                  ibv_event_type_str(event.type));
        ucs_spin_lock(&async->lock);
        async->ring[async->seq % UCT_HIPOWER_ASYNC_RING] = event;
        ucs_memory_cpu_store_fence();
        ++async->seq;
        ucs_spin_unlock(&async->lock);
    }

    if (errno != EAGAIN) {
        ucs_warn("hipower %s: ibv_get_async_event() failed: %m", async->name);
    }
}

ucs_status_t uct_hipower_md_async_init(uct_hipower_md_async_t *async,
                                       struct ibv_context *context,
                                       const char *name)
{
    ucs_status_t status;

    ucs_spinlock_init(&async->lock, 0);
    async->context    = context;
    async->name       = name;
    async->seq        = 0;
    async->registered = 0;

    status = ucs_sys_fcntl_modfl(context->async_fd, O_NONBLOCK, 0);
    if (status != UCS_OK) {
        goto err;
    }

    status = ucs_async_set_event_handler(UCS_ASYNC_THREAD_LOCK_TYPE,
                                         context->async_fd,
                                         UCS_EVENT_SET_EVREAD,
                                         uct_hipower_async_handler, async,
                                         NULL);
    if (status != UCS_OK) {
        ucs_error("hipower %s: cannot watch the device's asynchronous "
                  "events: %s", name, ucs_status_string(status));
        goto err;
    }

    async->registered = 1;
    return UCS_OK;

err:
    ucs_spinlock_destroy(&async->lock);
    return status;
}

void uct_hipower_md_async_cleanup(uct_hipower_md_async_t *async)
{
    if (!async->registered) {
        return;
    }

    /* Waits for a handler that is running */
    ucs_async_remove_handler(async->context->async_fd, 1);
    async->registered = 0;
    ucs_spinlock_destroy(&async->lock);
}

unsigned uct_hipower_md_async_take(uct_hipower_md_async_t *async,
                                   uint64_t *seq_p,
                                   uct_hipower_async_event_t *events,
                                   uint64_t *lost_p)
{
    uint64_t seq = *seq_p;
    uint64_t end;
    unsigned count;

    ucs_spin_lock(&async->lock);
    end     = async->seq;
    *lost_p = 0;
    if (end - seq > UCT_HIPOWER_ASYNC_RING) {
        *lost_p = end - seq - UCT_HIPOWER_ASYNC_RING;
        seq     = end - UCT_HIPOWER_ASYNC_RING;
    }
    for (count = 0; seq + count < end; ++count) {
        events[count] = async->ring[(seq + count) % UCT_HIPOWER_ASYNC_RING];
    }
    ucs_spin_unlock(&async->lock);
    *seq_p = end;
    return count;
}

const char *uct_hipower_md_event_name(enum ibv_event_type type)
{
    return ibv_event_type_str(type);
}
