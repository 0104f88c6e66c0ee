/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/* A timer that keeps one async handler for its life (hipower_timer.h) */

#include "hipower_timer.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>


static void uct_hipower_timer_run(uct_hipower_timer_t *timer)
{
    if (uct_hipower_timer_state(timer) == UCT_HIPOWER_TIMER_RUNNING) {
        ++timer->ticks;
        timer->cb(timer->arg);
    }
}

/* The timerfd's handler, in UCX's async thread without any lock (it has
 * no async context, so it is never missed): the tick is read, which also
 * re-arms the periodic timer in the kernel, and relayed to the eventfd.
 * In polling mode it belongs to the context and runs the callback. */
static void uct_hipower_timer_fd_tick(int id, ucs_event_set_types_t events,
                                      void *arg)
{
    uct_hipower_timer_t *timer = arg;
    uint64_t value;

    if (read(timer->fd, &value, sizeof(value)) != sizeof(value)) {
        /* EAGAIN: no tick since the last read, or one settime() took back */
        return;
    }

    if (timer->async->mode == UCS_ASYNC_MODE_POLL) {
        /* No async thread: ucs_async_poll() of the context called this
         * handler, which then belongs to it, with the context blocked */
        uct_hipower_timer_run(timer);
    } else if (uct_hipower_timer_state(timer) == UCT_HIPOWER_TIMER_RUNNING) {
        value = 1;
        if (write(timer->efd, &value, sizeof(value)) != sizeof(value)) {
            /* Its counter is full: ticks are waiting already */
            ucs_trace("hipower timer: eventfd %d not written: %m",
                      timer->efd);
        }
    }
}

/* The eventfd's handler, under the context's lock: the callback */
static void uct_hipower_timer_fd_relay(int id, ucs_event_set_types_t events,
                                       void *arg)
{
    uct_hipower_timer_t *timer = arg;
    uint64_t value;

    if (read(timer->efd, &value, sizeof(value)) != sizeof(value)) {
        /* EAGAIN: UCX's polling mode calls every handler at each poll */
        return;
    }
    uct_hipower_timer_run(timer);
}

/* Signal mode's UCX timer */
static void uct_hipower_timer_ucs_handler(int id, ucs_event_set_types_t events,
                                          void *arg)
{
    uct_hipower_timer_run(arg);
}

void uct_hipower_timer_init(uct_hipower_timer_t *timer,
                            ucs_async_context_t *async, ucs_time_t interval,
                            uct_hipower_timer_cb_t cb, void *arg)
{
    timer->state    = UCT_HIPOWER_TIMER_IDLE;
    timer->fd       = -1;
    timer->efd      = -1;
    timer->ucs_id   = 0;
    timer->interval = interval;
    timer->async    = async;
    timer->cb       = cb;
    timer->arg      = arg;
    timer->starts   = 0;
    timer->ticks    = 0;
}

static ucs_status_t uct_hipower_timer_fd_set(uct_hipower_timer_t *timer,
                                             ucs_time_t interval)
{
    struct itimerspec its;
    uint64_t nsec = (uint64_t)ucs_time_to_nsec(interval);

    if ((interval != 0) && (nsec == 0)) {
        nsec = 1; /* Zero would disarm it */
    }
    its.it_interval.tv_sec  = nsec / UCS_NSEC_PER_SEC;
    its.it_interval.tv_nsec = nsec % UCS_NSEC_PER_SEC;
    its.it_value            = its.it_interval;
    if (timerfd_settime(timer->fd, 0, &its, NULL) < 0) {
        ucs_error("timerfd_settime(fd %d) failed: %m", timer->fd);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

static void uct_hipower_timer_fd_close(uct_hipower_timer_t *timer)
{
    if (timer->fd >= 0) {
        ucs_async_remove_handler(timer->fd, 1);
        close(timer->fd);
        timer->fd = -1;
    }
    if (timer->efd >= 0) {
        ucs_async_remove_handler(timer->efd, 1);
        close(timer->efd);
        timer->efd = -1;
    }
}

/* The first start: the fds and their handlers, kept until cleanup. In
 * polling mode only the timerfd: its handler belongs to the context and
 * runs the callback, and an eventfd would cost a read() at every
 * ucs_async_poll() for nothing. */
static ucs_status_t uct_hipower_timer_fd_open(uct_hipower_timer_t *timer)
{
    ucs_async_mode_t mode = timer->async->mode;
    int poll_mode         = (mode == UCS_ASYNC_MODE_POLL);
    ucs_status_t status;
    int fd, efd = -1;

    fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) {
        ucs_error("timerfd_create() failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    if (!poll_mode) {
        efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (efd < 0) {
            ucs_error("eventfd() failed: %m");
            close(fd);
            return UCS_ERR_IO_ERROR;
        }

        /* Each handler's fd is set once it is registered, for cleanup */
        status = ucs_async_set_event_handler(mode, efd,
                                             UCS_EVENT_SET_EVREAD |
                                             UCS_EVENT_SET_EDGE_TRIGGERED,
                                             uct_hipower_timer_fd_relay,
                                             timer, timer->async);
        if (status != UCS_OK) {
            close(fd);
            close(efd);
            return status;
        }
        timer->efd = efd;
    }

    status = ucs_async_set_event_handler(mode, fd, UCS_EVENT_SET_EVREAD |
                                         UCS_EVENT_SET_EDGE_TRIGGERED,
                                         uct_hipower_timer_fd_tick, timer,
                                         poll_mode ? timer->async : NULL);
    if (status != UCS_OK) {
        close(fd);
        uct_hipower_timer_fd_close(timer);
        return status;
    }
    timer->fd = fd;
    return UCS_OK;
}

ucs_status_t uct_hipower_timer_prepare(uct_hipower_timer_t *timer)
{
    /* Only the async thread's modes give the timerfd a handler without a
     * context; in polling mode it would cost a read() per poll from now */
    if ((timer->async->mode == UCS_ASYNC_MODE_SIGNAL) ||
        (timer->async->mode == UCS_ASYNC_MODE_POLL) || (timer->fd >= 0)) {
        return UCS_OK;
    }
    return uct_hipower_timer_fd_open(timer);
}

ucs_status_t uct_hipower_timer_start(uct_hipower_timer_t *timer)
{
    ucs_status_t status;

    switch (uct_hipower_timer_state(timer)) {
    case UCT_HIPOWER_TIMER_RUNNING:
        return UCS_OK;
    case UCT_HIPOWER_TIMER_FAILED:
        return UCS_ERR_UNSUPPORTED;
    default:
        break;
    }

    ++timer->starts;
    /* Running before armed: the first tick must find it so */
    __atomic_store_n(&timer->state, UCT_HIPOWER_TIMER_RUNNING,
                     __ATOMIC_RELEASE);
    if (timer->async->mode == UCS_ASYNC_MODE_SIGNAL) {
        status = ucs_async_add_timer(timer->async->mode, timer->interval,
                                     uct_hipower_timer_ucs_handler, timer,
                                     timer->async, &timer->ucs_id);
    } else {
        status = (timer->fd < 0) ? uct_hipower_timer_fd_open(timer) : UCS_OK;
        if (status == UCS_OK) {
            status = uct_hipower_timer_fd_set(timer, timer->interval);
        }
    }

    if (status != UCS_OK) {
        __atomic_store_n(&timer->state, UCT_HIPOWER_TIMER_FAILED,
                         __ATOMIC_RELEASE);
    }
    return status;
}

void uct_hipower_timer_stop(uct_hipower_timer_t *timer)
{
    if (uct_hipower_timer_state(timer) != UCT_HIPOWER_TIMER_RUNNING) {
        return;
    }

    __atomic_store_n(&timer->state, UCT_HIPOWER_TIMER_IDLE, __ATOMIC_RELEASE);
    if (timer->fd >= 0) {
        /* Disarmed: also takes back a tick not read yet */
        uct_hipower_timer_fd_set(timer, 0);
    } else if (timer->ucs_id != 0) {
        /* Not sync: this may be its own callback */
        ucs_async_remove_handler(timer->ucs_id, 0);
        timer->ucs_id = 0;
    }
}

void uct_hipower_timer_cleanup(uct_hipower_timer_t *timer)
{
    __atomic_store_n(&timer->state, UCT_HIPOWER_TIMER_IDLE, __ATOMIC_RELEASE);
    if (timer->ucs_id != 0) {
        ucs_async_remove_handler(timer->ucs_id, 1);
        timer->ucs_id = 0;
    }
    uct_hipower_timer_fd_close(timer);
}
