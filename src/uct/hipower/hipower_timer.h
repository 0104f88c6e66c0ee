/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_TIMER_H_
#define UCT_HIPOWER_TIMER_H_

#include <ucs/async/async.h>
#include <ucs/time/time.h>

/*
 * A periodic timer of a worker's async context whose callback runs under
 * the context's lock through ONE async handler for the timer's whole life.
 *
 * Why not ucs_async_add_timer() on start and ucs_async_remove_handler()
 * on stop: a tick that finds the context's lock taken is put in the
 * context's miss queue under the handler's id, once per handler, and
 * leaves it only when the context's owner calls ucs_async_check_miss().
 * UCP does after each progress; a program that drives UCT alone never
 * does. Each start of a UCX timer is a new handler id, so each start whose
 * tick met progress left an entry for ever: UCX 1.13 aborts when 1,024
 * are queued ("Failed to push event ... to miss queue"), later versions
 * grow the queue without bound. One handler leaves at most one entry
 * (UCX queues a handler again only after that entry was taken). The
 * transport must not take the entries itself: an entry of a handler
 * removed since may carry an id (an fd) that another context reuses, and
 * only the context's owner may check them (157e1c5).
 *
 * Two fds, made at the first start and kept until cleanup:
 * - a timerfd, armed while the timer runs, whose handler has no async
 *   context: UCX's async thread calls it without any lock, so it is never
 *   missed. It reads the tick -- a periodic timerfd is re-armed by the
 *   kernel only when read, so a tick left unread would stop it for good --
 *   and writes it to
 * - an eventfd, whose handler belongs to the worker's context and runs the
 *   callback under its lock. A tick relayed while the lock is taken is
 *   missed, and the next one, a new write, is a new edge (both fds are
 *   edge-triggered: the async thread does not spin on a tick while
 *   progress holds the lock, as it would on a level).
 * Both handlers read their fd and do nothing without a tick, so UCX's
 * polling mode, which calls every handler of the context at each
 * ucs_async_poll(), runs the callback only on ticks too; there (no async
 * thread, nothing missed) the timerfd's handler belongs to the context and
 * runs the callback itself, and there is no eventfd.
 *
 * Signal mode cannot watch these fds (they have no fasync): there the
 * timer falls back to a UCX timer added on start and removed on stop.
 *
 * The callback runs under the context's lock. Start and stop may be called
 * from the callback or from the timer user's thread, which keeps them
 * apart from the callback by its own means (the lock, or
 * hipower_ep_hold.c's marks).
 */

typedef void (*uct_hipower_timer_cb_t)(void *arg);

typedef enum {
    UCT_HIPOWER_TIMER_IDLE    = 0,  /* Not running */
    UCT_HIPOWER_TIMER_RUNNING = 1,  /* Ticks every interval */
    UCT_HIPOWER_TIMER_FAILED  = -1  /* Could not be set up: never runs */
} uct_hipower_timer_state_t;

typedef struct uct_hipower_timer {
    int                      state;    /* uct_hipower_timer_state_t */
    int                      fd;       /* The timerfd, or -1 */
    int                      efd;      /* Its ticks for the context, or -1
                                          (none in polling mode) */
    int                      ucs_id;   /* Signal mode: the UCX timer, or 0 */
    ucs_time_t               interval;
    ucs_async_context_t      *async;
    uct_hipower_timer_cb_t   cb;
    void                     *arg;
    uint64_t                 starts;   /* For tests: starts, */
    uint64_t                 ticks;    /* and callbacks run */
} uct_hipower_timer_t;


void uct_hipower_timer_init(uct_hipower_timer_t *timer,
                            ucs_async_context_t *async, ucs_time_t interval,
                            uct_hipower_timer_cb_t cb, void *arg);

/*
 * Makes the timer's fds and registers their handlers now, while nothing
 * runs, rather than at the first start (which makes them if this was not
 * called or failed). Why: UCX 1.13 keeps a handler's missed events in the
 * context's miss queue under its fd number after the handler is removed
 * and the fd closed; the next fd opened gets that number, and if its
 * handler has another async context -- the timerfd's has none -- the
 * owner's ucs_async_check_miss() aborts on "handler->async == async".
 * A first start in the middle of wire-up, right after a connection's
 * socket closed with an event missed, did that (an Open MPI rank of the
 * reference bench, stop 47). Made at the interface's creation, before
 * any of its sockets, the timerfd keeps its number for the interface's
 * life. Errors are reported; the start tries again. Nothing in polling
 * mode (the timerfd's handler has the context there) or signal mode.
 */
ucs_status_t uct_hipower_timer_prepare(uct_hipower_timer_t *timer);

/* Runs the timer (nothing if it runs); UCS_OK, or why it cannot, after
 * which it stays UCT_HIPOWER_TIMER_FAILED and every start fails at once */
ucs_status_t uct_hipower_timer_start(uct_hipower_timer_t *timer);

/* Stops its ticks until the next start; the handler stays */
void uct_hipower_timer_stop(uct_hipower_timer_t *timer);

/* Removes the handler (waiting for a callback that runs) and closes the fd */
void uct_hipower_timer_cleanup(uct_hipower_timer_t *timer);

static inline int uct_hipower_timer_state(const uct_hipower_timer_t *timer)
{
    return __atomic_load_n(&timer->state, __ATOMIC_ACQUIRE);
}

#endif
