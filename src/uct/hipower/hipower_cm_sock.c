/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The connection manager's sockets: the listener and its strangers, each
 * handshake connection's bytes in and out, keepalive, the deadline and
 * probe timer, the eventfd. Run by UCX's async thread (or the user's, by
 * ucs_async_check_miss()) under the worker's async lock; they move bytes
 * and queue what finished for progress (hipower_cm.c, which decides).
 */

#include "hipower_cm_sock.h"
#include "hipower_ep.h"
#include "hipower_cm.h"

#include <ucs/debug/log.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <arpa/inet.h>
#include <limits.h>
#include <net/if.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>


void uct_hipower_cm_signal(uct_hipower_iface_t *iface)
{
    uint64_t one = 1;

    if (iface->cm.sock.event_fd < 0) {
        return; /* No listener: arm's busy answer covers a sleeper */
    }
    /* Full only after 2^64-2 unread signals: nothing to do then */
    if ((write(iface->cm.sock.event_fd, &one, sizeof(one)) < 0) &&
        (errno != EAGAIN)) {
        ucs_debug("hipower %s: eventfd write failed: %m", iface->dev_name);
    }
}

void uct_hipower_cm_watch(uct_hipower_iface_t *iface, int fd,
                          void *data, ucs_event_set_types_t events,
                          int op)
{
    struct epoll_event event;

    if (op != EPOLL_CTL_ADD) {
        ucs_async_modify_handler(fd, (events && (data != NULL)) ?
                                 (events | UCT_HIPOWER_CM_ASYNC_EDGE) :
                                 events);
    }
    memset(&event, 0, sizeof(event));
    event.events   = ((events & UCS_EVENT_SET_EVREAD) ? EPOLLIN : 0) |
                     ((events & UCS_EVENT_SET_EVWRITE) ? EPOLLOUT : 0);
    event.data.ptr = data;
    if ((iface->cm.sock.io_epfd >= 0) &&
        (epoll_ctl(iface->cm.sock.io_epfd, op, fd, &event) < 0)) {
        ucs_debug("hipower %s: epoll_ctl(%d) of fd %d failed: %m",
                  iface->dev_name, op, fd);
    }
}

/* Handed to progress: from the socket handlers and the timer */
static void uct_hipower_cm_conn_queue(uct_hipower_cm_conn_t *conn, int state,
                                      int err)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);

    if (conn->fd >= 0) {
        uct_hipower_cm_watch(iface, conn->fd, conn, 0, EPOLL_CTL_MOD);
    }
    conn->state = state;
    conn->err   = err;
    if (!conn->queued) {
        conn->queued = 1;
        ucs_list_add_tail(&iface->cm.sock.ready, &conn->ready_list);
        ++iface->cm.sock.num_ready;
        uct_hipower_cm_signal(iface);
    }
}

/* Out of progress's queue: freed, or waiting again */
static void uct_hipower_cm_conn_unqueue(uct_hipower_cm_conn_t *conn)
{
    if (conn->queued) {
        conn->queued = 0;
        ucs_list_del(&conn->ready_list);
        --uct_hipower_cm_conn_iface(conn)->cm.sock.num_ready;
    }
}

/* Moves a connection between the counts that bound each phase */
static void uct_hipower_cm_conn_phase(uct_hipower_cm_conn_t *conn, int phase)
{
    uct_hipower_cm_t *cm = &uct_hipower_cm_conn_iface(conn)->cm;

    if (conn->phase == UCT_HIPOWER_CONN_PHASE_SHORT) {
        if (conn->active) {
            --cm->sock.num_active;
        } else {
            --cm->sock.num_passive;
        }
    } else if (conn->phase == UCT_HIPOWER_CONN_PHASE_HELD) {
        --cm->sock.num_held;
    }
    conn->phase = phase;
    if (cm->sock.listen_paused && (cm->sock.num_passive < cm->max_conns) &&
        (cm->sock.listen_fd >= 0)) {
        cm->sock.listen_paused = 0;
        uct_hipower_cm_watch(uct_hipower_cm_conn_iface(conn),
                             cm->sock.listen_fd, NULL, UCS_EVENT_SET_EVREAD,
                             EPOLL_CTL_MOD);
    }
    if (phase == UCT_HIPOWER_CONN_PHASE_SHORT) {
        if (conn->active) {
            ++cm->sock.num_active;
        } else {
            ++cm->sock.num_passive;
        }
    } else if (phase == UCT_HIPOWER_CONN_PHASE_HELD) {
        ++cm->sock.num_held;
    }
}

/* A connection that gets no answer, from the async handlers and the timer:
 * freed now, or by progress if uct_hipower_cm_poll() may still hold an
 * event of it (its socket is closed at once either way) */
static void uct_hipower_cm_conn_drop(uct_hipower_cm_conn_t *conn, int err)
{
    if (!conn->cm->sock.in_poll) {
        uct_hipower_cm_conn_free(conn);
        return;
    }
    uct_hipower_cm_conn_close_fd(conn);
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_NONE);
    uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, err);
}

/*
 * An acked handshake waits for the peer's process, which may compute for
 * minutes, and that is no reason to fail it; a host that is gone is. The
 * peer's kernel answers keepalive probes whatever its process does, so
 * the connection fails (ETIMEDOUT) only when the host stops answering:
 * within about CONNECT_TIMEOUT (half of it idle, then 3 probes a sixth of
 * it apart). A peer process that dies closes the socket at once.
 */
static void uct_hipower_cm_keepalive(uct_hipower_cm_conn_t *conn)
{
    int secs = (int)ucs_max(ucs_time_to_sec(conn->cm->timeout), 1.0);
    int one  = 1;
    int idle = ucs_max(secs / 2, 1);
    int intvl = ucs_max(secs / 6, 1);
    int cnt  = 3;

    if ((setsockopt(conn->fd, SOL_SOCKET, SO_KEEPALIVE, &one,
                    sizeof(one)) < 0) ||
        (setsockopt(conn->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle,
                    sizeof(idle)) < 0) ||
        (setsockopt(conn->fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl,
                    sizeof(intvl)) < 0) ||
        (setsockopt(conn->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt,
                    sizeof(cnt)) < 0)) {
        ucs_diag("hipower %s: no TCP keepalive on the handshake with %s: "
                 "%m; a host that vanishes is noticed by its QP only",
                 uct_hipower_cm_conn_iface(conn)->dev_name, conn->peer_str);
    }
}

void uct_hipower_cm_conn_got_req(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);
    hipower_hs_msg_t ack;
    const char *why;
    ssize_t ret;

    why = hipower_hs_msg_check(&conn->in, conn->offset,
                               UCS_BIT(HIPOWER_HS_REQ), iface->cm.addr.uuid,
                               sizeof(uct_hipower_device_addr_t),
                               sizeof(uct_hipower_ep_addr_t));
    if (why != NULL) {
        /* Not hipower at all: closed without a word. Else told why. */
        uct_hipower_cm_refuse(conn, why,
                              (conn->in.magic != HIPOWER_HS_MAGIC) ?
                              HIPOWER_HS_REASON_NONE :
                              (conn->in.dst_uuid != iface->cm.addr.uuid) ?
                              HIPOWER_HS_REASON_WRONG_IFACE :
                              HIPOWER_HS_REASON_BAD_REQUEST);
        uct_hipower_cm_conn_drop(conn, EPROTO);
        return;
    } else if (iface->cm.sock.num_held >= iface->cm.max_held) {
        /* As many peers wait for this process as it can have endpoints:
         * one more could not be served anyway */
        uct_hipower_cm_refuse(conn, "as many requests wait for this process "
                              "as it can have endpoints",
                              HIPOWER_HS_REASON_NO_RESOURCE);
        uct_hipower_cm_conn_drop(conn, ENOSPC);
        return;
    }

    hipower_hs_msg_pack(&ack, HIPOWER_HS_ACK, HIPOWER_HS_REASON_NONE,
                        iface->cm.addr.uuid, conn->in.src_uuid,
                        conn->in.conn_sn, NULL, 0, NULL, 0);
    /* Into a socket that has sent nothing yet: the buffer takes it */
    ret = send(conn->fd, &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (ret != sizeof(ack)) {
        ucs_debug("hipower %s: acknowledgement to %s not sent: %m",
                  iface->dev_name, conn->peer_str);
    }
    iface->stats.cm_acked++;
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_HELD);
    uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_DONE, 0);
}

/*
 * Active: a whole message read, in the async thread. The peer's ACK takes
 * the handshake out of its deadline and out of num_active (the next queued
 * endpoint starts: one peer that computes delays nobody else's connection)
 * and the REP is read next; anything else is the answer, for progress.
 * Returns 1 if the connection reads on.
 */
static int uct_hipower_cm_conn_got_ack(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);

    if ((conn->phase != UCT_HIPOWER_CONN_PHASE_SHORT) ||
        (hipower_hs_msg_check(&conn->in, conn->offset,
                              UCS_BIT(HIPOWER_HS_ACK), iface->cm.addr.uuid,
                              0, 0) != NULL) ||
        (conn->in.src_uuid != conn->ep_cm->peer_uuid) ||
        (conn->in.conn_sn != conn->ep_cm->conn_sn)) {
        return 0;
    }

    ucs_debug(UCT_HIPOWER_EP_FMT ": %s has our request; waiting for its "
              "answer as long as it lives",
              UCT_HIPOWER_EP_ARG(uct_hipower_cm_conn_ep(conn)), conn->peer_str);
    uct_hipower_cm_keepalive(conn);
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_NONE);
    conn->offset = 0;
    iface->cm.conn_room(&iface->cm);
    return 1;
}

void uct_hipower_cm_conn_io(int fd, ucs_event_set_types_t events,
                            void *arg)
{
    uct_hipower_cm_conn_t *conn = arg;
    socklen_t len               = sizeof(int);
    int err                     = 0;
    ssize_t ret;

    if (conn->state == UCT_HIPOWER_CONN_CONNECTING) {
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
            err = errno;
        }
        if (err == EINPROGRESS) {
            return;
        } else if (err != 0) {
            uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, err);
            return;
        }
        conn->state  = UCT_HIPOWER_CONN_SENDING;
        conn->offset = 0;
    }

    while (conn->state == UCT_HIPOWER_CONN_SENDING) {
        /* Until all sent or EAGAIN: the async events are edge-triggered */
        ret = send(fd, UCS_PTR_BYTE_OFFSET(&conn->out, conn->offset),
                   sizeof(conn->out) - conn->offset, MSG_NOSIGNAL);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            } else if (errno != EAGAIN) {
                uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, errno);
            }
            return;
        }
        conn->offset += ret;
        if (conn->offset < sizeof(conn->out)) {
            continue;
        }
        conn->state  = UCT_HIPOWER_CONN_RECVING;
        conn->offset = 0;
        uct_hipower_cm_watch(uct_hipower_cm_conn_iface(conn), fd, conn,
                             UCS_EVENT_SET_EVREAD, EPOLL_CTL_MOD);
        return;
    }

    if (conn->state != UCT_HIPOWER_CONN_RECVING) {
        return;
    }

    for (;;) {
        ret = recv(fd, UCS_PTR_BYTE_OFFSET(&conn->in, conn->offset),
                   sizeof(conn->in) - conn->offset, 0);
        if (ret == 0) {
            /* Closed before a whole message: the peer refused or died */
            uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR,
                                      ECONNRESET);
            return;
        } else if (ret < 0) {
            if (errno == EINTR) {
                continue;
            } else if (errno != EAGAIN) {
                uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, errno);
            }
            return;
        }

        conn->offset += ret;
        if (conn->offset < sizeof(conn->in)) {
            continue;
        } else if (!conn->active) {
            uct_hipower_cm_conn_got_req(conn);
            return;
        } else if (!uct_hipower_cm_conn_got_ack(conn)) {
            uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_DONE, 0);
            return;
        }
    }
}

static uct_hipower_cm_conn_t *
uct_hipower_cm_conn_new(uct_hipower_iface_t *iface, int fd, int active)
{
    uct_hipower_cm_conn_t *conn;

    conn = ucs_calloc(1, sizeof(*conn), "hipower handshake");
    if (conn == NULL) {
        return NULL;
    }

    conn->cm       = &iface->cm;
    conn->fd       = fd;
    conn->active   = active;
    conn->start    = ucs_get_time();
    conn->deadline = conn->start +
                     (active ? iface->cm.timeout :
                      ucs_min(iface->cm.timeout,
                              ucs_time_from_sec(UCT_HIPOWER_CM_FIRST_MSG_SEC)));
    conn->phase    = UCT_HIPOWER_CONN_PHASE_NONE;
    ucs_list_add_tail(&iface->cm.sock.conns, &conn->list);
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_SHORT);
    uct_hipower_cm_timer_start(iface);
    return conn;
}

void uct_hipower_cm_conn_close_fd(uct_hipower_cm_conn_t *conn)
{
    if (conn->fd >= 0) {
        /* Not sync: we hold the async lock, and a missed event of this
         * handler is looked up by its fd, which is gone by then */
        ucs_async_remove_handler(conn->fd, 0);
        if (conn->cm->sock.io_epfd >= 0) {
            epoll_ctl(conn->cm->sock.io_epfd, EPOLL_CTL_DEL, conn->fd, NULL);
        }
        close(conn->fd);
        conn->fd = -1;
    }
}

void uct_hipower_cm_conn_free(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);

    uct_hipower_cm_conn_close_fd(conn);
    uct_hipower_cm_conn_unqueue(conn);
    ucs_list_del(&conn->list);
    if (conn->ep_cm != NULL) {
        conn->ep_cm->sock.conn = NULL;
    }
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_NONE);
    ucs_free(conn);
    iface->cm.conn_room(&iface->cm);
}

/* The deadline timer's tick: a tenth of CONNECT_TIMEOUT within [10 ms,
 * 1 s], and a quarter of the first-message deadline while a passive
 * connection is read */
static ucs_time_t uct_hipower_cm_tick(uct_hipower_iface_t *iface, int fast)
{
    ucs_time_t tick = ucs_max(ucs_time_from_msec(10),
                              ucs_min(iface->cm.timeout / 10,
                                      ucs_time_from_sec(1)));

    return fast ? ucs_min(tick, ucs_time_from_sec(UCT_HIPOWER_CM_FAST_TICK_SEC)) :
                  tick;
}

void uct_hipower_cm_timer(void *arg)
{
    uct_hipower_iface_t *iface = arg;
    uct_hipower_cm_conn_t *conn, *tmp;
    ucs_time_t now;

    if (ucs_list_is_empty(&iface->cm.sock.conns) &&
        (iface->cm.num_internal == 0)) {
        uct_hipower_timer_stop(&iface->cm.sock.timer);
        iface->cm.sock.next_probe = 0;
        return;
    }

    now = ucs_get_time();
    ucs_list_for_each_safe(conn, tmp, &iface->cm.sock.conns, list) {
        if (conn->queued || (now <= conn->deadline) ||
            ((conn->phase != UCT_HIPOWER_CONN_PHASE_SHORT) &&
             (conn->state != UCT_HIPOWER_CONN_AWAIT))) {
            /* An acked handshake waits for a live peer: no deadline. One
             * told CROSSED waits for the peer's own REQ, which the peer's
             * async thread sends whatever its process does: that one has */
            continue;
        } else if (conn->active) {
            uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, ETIMEDOUT);
        } else {
            /* Sent no whole REQ in time: nobody to answer, nothing for
             * progress (which may not come for long) */
            ucs_debug("hipower %s: no request from %s within %.1fs",
                      iface->dev_name, conn->peer_str,
                      UCT_HIPOWER_CM_FIRST_MSG_SEC);
            iface->stats.cm_evicted++;
            uct_hipower_cm_conn_drop(conn, ETIMEDOUT);
        }
    }
    while (iface->cm.sock.listen_paused && uct_hipower_cm_evict_idle(iface)) {
        /* Room for the next in the backlog, if it is a real peer */
    }
    if ((iface->cm.sock.num_passive == 0) &&
        (iface->cm.sock.timer.interval < uct_hipower_cm_tick(iface, 0))) {
        /* No connection to read: back to the slow tick */
        uct_hipower_timer_stop(&iface->cm.sock.timer);
        uct_hipower_cm_timer_start(iface);
    }

    if (iface->cm.num_internal == 0) {
        iface->cm.sock.next_probe = 0;
    } else if (iface->cm.sock.next_probe == 0) {
        iface->cm.sock.next_probe = now + iface->cm.timeout;
    } else if ((now > iface->cm.sock.next_probe) && !iface->cm.sock.probe_due) {
        iface->cm.sock.probe_due  = 1;
        iface->cm.sock.next_probe = now + iface->cm.timeout;
        uct_hipower_cm_signal(iface);
    }
}

void uct_hipower_cm_timer_start(uct_hipower_iface_t *iface)
{
    ucs_time_t tick = uct_hipower_cm_tick(iface,
                                          iface->cm.sock.num_passive > 0);
    ucs_status_t status;

    if (uct_hipower_timer_state(&iface->cm.sock.timer) ==
        UCT_HIPOWER_TIMER_RUNNING) {
        if (iface->cm.sock.timer.interval <= tick) {
            return;
        }
        /* A passive connection to read: the fast tick */
        uct_hipower_timer_stop(&iface->cm.sock.timer);
    } else if (uct_hipower_timer_state(&iface->cm.sock.timer) !=
               UCT_HIPOWER_TIMER_IDLE) {
        return;
    }

    iface->cm.sock.timer.interval = tick;
    status = uct_hipower_timer_start(&iface->cm.sock.timer);
    if (status != UCS_OK) {
        ucs_warn("hipower %s: no timer for UCX_HIPOWER_CONNECT_TIMEOUT: %s; "
                 "a handshake with a silent peer is not bounded",
                 iface->dev_name, ucs_status_string(status));
    }
}

static void uct_hipower_cm_sockaddr(const hipower_hs_iface_addr_t *addr,
                                    struct sockaddr_storage *ss,
                                    socklen_t *len)
{
    struct sockaddr_in *sin   = (struct sockaddr_in*)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6*)ss;

    memset(ss, 0, sizeof(*ss));
    if (addr->family == HIPOWER_HS_AF_INET) {
        sin->sin_family = AF_INET;
        sin->sin_port   = addr->port;
        memcpy(&sin->sin_addr, addr->ip, 4);
        *len            = sizeof(*sin);
    } else {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port   = addr->port;
        memcpy(&sin6->sin6_addr, addr->ip, 16);
        *len              = sizeof(*sin6);
    }
}

static void uct_hipower_cm_addr_str(const hipower_hs_iface_addr_t *addr,
                                    char *str, size_t max)
{
    char ip[INET6_ADDRSTRLEN];

    inet_ntop((addr->family == HIPOWER_HS_AF_INET) ? AF_INET : AF_INET6,
              addr->ip, ip, sizeof(ip));
    ucs_snprintf_safe(str, max, (addr->family == HIPOWER_HS_AF_INET) ?
                      "%s:%u" : "[%s]:%u", ip, ntohs(addr->port));
}

void uct_hipower_cm_pack_addresses(uct_hipower_ep_t *ep,
                                   hipower_hs_msg_t *msg,
                                   hipower_hs_type_t type,
                                   uint64_t dst_uuid,
                                   uint64_t conn_sn)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_device_addr_t dev;
    uct_hipower_ep_addr_t ep_addr;

    UCS_STATIC_ASSERT(sizeof(dev) <= HIPOWER_HS_DEV_ADDR_MAX);
    UCS_STATIC_ASSERT(sizeof(ep_addr) <= HIPOWER_HS_EP_ADDR_MAX);
    memset(&dev, 0, sizeof(dev));
    dev.gid        = iface->gid;
    dev.lid        = iface->port_attr.lid;
    dev.link_layer = iface->port_attr.link_layer;
    uct_hipower_ep_get_address(&ep->super.super, (uct_ep_addr_t*)&ep_addr);
    hipower_hs_msg_pack(msg, type, HIPOWER_HS_REASON_NONE,
                        iface->cm.addr.uuid, dst_uuid, conn_sn, &dev,
                        sizeof(dev), &ep_addr, sizeof(ep_addr));
}

ucs_status_t uct_hipower_cm_connect(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_async_context_t *async = iface->super.worker->async;
    struct sockaddr_storage ss, src;
    uct_hipower_cm_conn_t *conn;
    ucs_status_t status;
    socklen_t len, src_len;
    int fd, one = 1;

    uct_hipower_cm_sockaddr(&ep->cm.peer, &ss, &len);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error(UCT_HIPOWER_EP_FMT ": socket() for the handshake failed: "
                  "%m", UCT_HIPOWER_EP_ARG(ep));
        return UCS_ERR_IO_ERROR;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (iface->cm.addr.family == ep->cm.peer.family) {
        /* From our listener's address (any port): the peer can check that
         * the request comes from the host our interface address names
         * (uct_hipower_cm_same_host()) */
        uct_hipower_cm_sockaddr(&iface->cm.addr, &src, &src_len);
        if (src.ss_family == AF_INET) {
            ((struct sockaddr_in*)&src)->sin_port = 0;
        } else {
            ((struct sockaddr_in6*)&src)->sin6_port = 0;
        }
        if (bind(fd, (struct sockaddr*)&src, src_len) < 0) {
            ucs_debug(UCT_HIPOWER_EP_FMT ": handshake socket not bound to "
                      "%s: %m", UCT_HIPOWER_EP_ARG(ep), iface->cm.addr_str);
        }
    }

    conn = uct_hipower_cm_conn_new(iface, fd, 1);
    if (conn == NULL) {
        close(fd);
        return UCS_ERR_NO_MEMORY;
    }
    conn->ep_cm = &ep->cm;
    conn->state = UCT_HIPOWER_CONN_CONNECTING;
    ep->cm.sock.conn = conn;
    if (ep->cm.sock.attempts++ == 0) {
        ep->cm.sock.deadline = conn->deadline;
    } else {
        /* Another connection of the same handshake: the same deadline */
        conn->deadline = ep->cm.sock.deadline;
    }
    iface->stats.cm_requests++;
    uct_hipower_cm_addr_str(&ep->cm.peer, conn->peer_str,
                            sizeof(conn->peer_str));
    uct_hipower_cm_pack_addresses(ep, &conn->out, HIPOWER_HS_REQ,
                                  ep->cm.peer_uuid, ep->cm.conn_sn);

    if ((connect(fd, (struct sockaddr*)&ss, len) < 0) &&
        (errno != EINPROGRESS)) {
        /* Reported from progress, like any failure of the handshake */
        uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, errno);
        return UCS_OK;
    }

    status = ucs_async_set_event_handler(async->mode, fd,
                                         UCS_EVENT_SET_EVWRITE |
                                         UCT_HIPOWER_CM_ASYNC_EDGE,
                                         uct_hipower_cm_conn_io, conn, async);
    if (status != UCS_OK) {
        ucs_error(UCT_HIPOWER_EP_FMT ": cannot watch the handshake's socket: "
                  "%s", UCT_HIPOWER_EP_ARG(ep), ucs_status_string(status));
        close(fd);
        conn->fd = -1;
        uct_hipower_cm_conn_queue(conn, UCT_HIPOWER_CONN_ERROR, EIO);
        return UCS_OK;
    }
    uct_hipower_cm_watch(iface, fd, conn, UCS_EVENT_SET_EVWRITE,
                         EPOLL_CTL_ADD);

    ucs_debug(UCT_HIPOWER_EP_FMT ": connecting to %s (interface %016" PRIx64
              ", endpoint %" PRIu64 ")", UCT_HIPOWER_EP_ARG(ep),
              conn->peer_str, ep->cm.peer_uuid, ep->cm.conn_sn);
    return UCS_OK;
}

void uct_hipower_cm_reply(uct_hipower_cm_conn_t *conn,
                          const hipower_hs_msg_t *msg)
{
    ssize_t ret;

    /* 128 bytes into a socket that has sent nothing yet: the send buffer
     * takes them at once. If not, the peer's handshake fails on EOF. */
    ret = send(conn->fd, msg, sizeof(*msg), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (ret != sizeof(*msg)) {
        ucs_debug("hipower %s: answer to %s not sent: %m",
                  uct_hipower_cm_conn_iface(conn)->dev_name, conn->peer_str);
    }
}

void uct_hipower_cm_reject(uct_hipower_cm_conn_t *conn,
                           uint64_t dst_uuid, uint64_t conn_sn,
                           hipower_hs_reason_t reason)
{
    hipower_hs_msg_t msg;

    hipower_hs_msg_pack(&msg, HIPOWER_HS_REJ, reason,
                        conn->cm->addr.uuid, dst_uuid, conn_sn, NULL, 0,
                        NULL, 0);
    uct_hipower_cm_reply(conn, &msg);
}

void uct_hipower_cm_refuse(uct_hipower_cm_conn_t *conn,
                           const char *why, hipower_hs_reason_t reason)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);
    ucs_time_t now             = ucs_get_time();

    iface->stats.cm_refused++;
    if ((iface->cm.sock.last_warn == 0) ||
        (now - iface->cm.sock.last_warn >
         ucs_time_from_sec(UCT_HIPOWER_CM_WARN_INTERVAL_SEC))) {
        ucs_warn("hipower %s: refused a connection request from %s: %s "
                 "(%u refused so far)", iface->dev_name, conn->peer_str, why,
                 (unsigned)iface->stats.cm_refused);
        iface->cm.sock.last_warn = now;
    }
    if (reason != HIPOWER_HS_REASON_NONE) {
        uct_hipower_cm_reject(conn, conn->in.src_uuid, conn->in.conn_sn,
                              reason);
    }
}

int uct_hipower_cm_evict_silent(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep;

    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (ep->cm.internal && !ep->cm.destroying &&
            (ep->cm.listed == UCT_HIPOWER_CM_LISTED_NONE) &&
            !(ep->flags.all & UCT_HIPOWER_EP_FLAG_IN_RX) &&
            (uct_hipower_ep_rx_delivered(ep) == 0)) {
            ucs_debug(UCT_HIPOWER_EP_FMT ": internal endpoint whose peer "
                      "never wrote closed for a new request",
                      UCT_HIPOWER_EP_ARG(ep));
            iface->stats.cm_silent_evicted++;
            UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(&ep->super.super);
            return 1;
        }
    }
    return 0;
}

ucs_status_t uct_hipower_cm_errno_status(int err)
{
    switch (err) {
    case ETIMEDOUT:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
        return UCS_ERR_UNREACHABLE;
    default:
        return UCS_ERR_CONNECTION_RESET;
    }
}

int uct_hipower_cm_evict_idle(uct_hipower_iface_t *iface)
{
    ucs_time_t old = ucs_get_time() -
                     ucs_time_from_sec(UCT_HIPOWER_CM_IDLE_SEC);
    uct_hipower_cm_conn_t *conn;

    ucs_list_for_each(conn, &iface->cm.sock.conns, list) {
        if (!conn->active && (conn->phase == UCT_HIPOWER_CONN_PHASE_SHORT)) {
            if (conn->start > old) {
                return 0; /* The oldest is young */
            }
            ucs_debug("hipower %s: closing the idle connection from %s to "
                      "accept another", iface->dev_name, conn->peer_str);
            iface->stats.cm_evicted++;
            uct_hipower_cm_conn_drop(conn, ECONNABORTED);
            return 1;
        }
    }
    return 0;
}

void uct_hipower_cm_listen_io(int fd, ucs_event_set_types_t events,
                              void *arg)
{
    uct_hipower_iface_t *iface = arg;
    ucs_async_context_t *async = iface->super.worker->async;
    struct sockaddr_storage ss;
    uct_hipower_cm_conn_t *conn;
    ucs_status_t status;
    socklen_t len;
    int cfd;

    for (;;) {
        if ((iface->cm.sock.num_passive >= iface->cm.max_conns) &&
            !uct_hipower_cm_evict_idle(iface)) {
            /* Every one is young: the rest wait in the kernel's backlog
             * until one sends its REQ or is closed, within a tick of the
             * first-message deadline (uct_hipower_cm_conn_phase()) */
            uct_hipower_cm_watch(iface, fd, NULL, 0, EPOLL_CTL_MOD);
            iface->cm.sock.listen_paused = 1;
            return;
        }

        len = sizeof(ss);
        cfd = accept4(fd, (struct sockaddr*)&ss, &len,
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if ((errno == EINTR) || (errno == ECONNABORTED)) {
                continue;
            } else if (errno != EAGAIN) {
                /* EMFILE and the like: the connection stays in the backlog
                 * and the next event or progress poll tries again */
                ucs_diag("hipower %s: accept() failed: %m", iface->dev_name);
            }
            return;
        }

        conn = uct_hipower_cm_conn_new(iface, cfd, 0);
        if (conn == NULL) {
            close(cfd);
            continue;
        }
        conn->state   = UCT_HIPOWER_CONN_RECVING;
        conn->peer_ss = ss;
        ucs_sockaddr_str((struct sockaddr*)&ss, conn->peer_str,
                         sizeof(conn->peer_str));
        status = ucs_async_set_event_handler(async->mode, cfd,
                                             UCS_EVENT_SET_EVREAD |
                                             UCT_HIPOWER_CM_ASYNC_EDGE,
                                             uct_hipower_cm_conn_io, conn,
                                             async);
        if (status != UCS_OK) {
            conn->fd = -1;
            close(cfd);
            uct_hipower_cm_conn_free(conn);
            continue;
        }
        uct_hipower_cm_watch(iface, cfd, conn, UCS_EVENT_SET_EVREAD,
                             EPOLL_CTL_ADD);
    }
}

/* The network interface behind the port's GID (RoCE), from sysfs */
static ucs_status_t uct_hipower_cm_gid_netdev(uct_hipower_iface_t *iface,
                                              char *netdev, size_t max)
{
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    char path[PATH_MAX];
    FILE *file;
    char *nl;

    ucs_snprintf_safe(path, sizeof(path),
                      "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%u",
                      md->name, iface->port_num, iface->verbs.qp.gid_index);
    file = fopen(path, "r");
    if (file == NULL) {
        return UCS_ERR_NO_DEVICE;
    }
    if (fgets(netdev, max, file) == NULL) {
        fclose(file);
        return UCS_ERR_NO_DEVICE;
    }
    fclose(file);
    nl = strchr(netdev, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    return (netdev[0] != '\0') ? UCS_OK : UCS_ERR_NO_DEVICE;
}

static ucs_status_t uct_hipower_cm_listen(uct_hipower_iface_t *iface,
                                          const char *netdev_cfg)
{
    ucs_async_context_t *async = iface->super.worker->async;
    struct sockaddr_storage ss;
    struct sockaddr_in6 *sin6  = (struct sockaddr_in6*)&ss;
    struct sockaddr_in *sin    = (struct sockaddr_in*)&ss;
    char netdev[IFNAMSIZ + 1];
    ucs_status_t status;
    socklen_t len;
    int fd;

    if (!strcmp(netdev_cfg, "auto")) {
        status = uct_hipower_cm_gid_netdev(iface, netdev, sizeof(netdev));
        if (status != UCS_OK) {
            ucs_error("hipower %s: no network interface behind GID %u "
                      "(UCX_HIPOWER_GID_INDEX) to listen for connections on: "
                      "name one in UCX_HIPOWER_CM_NETDEV, or set "
                      "UCX_HIPOWER_CONNECT_TO_IFACE=n", iface->dev_name,
                      iface->verbs.qp.gid_index);
            return status;
        }
    } else {
        ucs_strncpy_zero(netdev, netdev_cfg, sizeof(netdev));
    }

    memset(&ss, 0, sizeof(ss));
    status = ucs_netif_get_addr(netdev, AF_INET, (struct sockaddr*)&ss, NULL);
    if (status != UCS_OK) {
        memset(&ss, 0, sizeof(ss));
        status = ucs_netif_get_addr(netdev, AF_INET6, (struct sockaddr*)&ss,
                                    NULL);
        if ((status == UCS_OK) && IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) {
            /* Would need each peer's own scope: not an address to give out */
            status = UCS_ERR_INVALID_ADDR;
        }
    }
    if (status != UCS_OK) {
        ucs_error("hipower %s: network interface '%s' (UCX_HIPOWER_CM_NETDEV) "
                  "has no IPv4 or global IPv6 address to listen for "
                  "connections on", iface->dev_name, netdev);
        return UCS_ERR_NO_DEVICE;
    }

    len = (ss.ss_family == AF_INET) ? sizeof(*sin) : sizeof(*sin6);
    if (ss.ss_family == AF_INET) {
        sin->sin_port = 0;
    } else {
        sin6->sin6_port = 0;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("hipower %s: socket() failed: %m", iface->dev_name);
        return UCS_ERR_IO_ERROR;
    }
    if ((bind(fd, (struct sockaddr*)&ss, len) < 0) ||
        (listen(fd, SOMAXCONN) < 0) ||
        (getsockname(fd, (struct sockaddr*)&ss, &len) < 0)) {
        ucs_error("hipower %s: cannot listen on %s: %m", iface->dev_name,
                  netdev);
        close(fd);
        return UCS_ERR_IO_ERROR;
    }

    if (ss.ss_family == AF_INET) {
        hipower_hs_iface_addr_pack(&iface->cm.addr, HIPOWER_HS_AF_INET,
                                   &sin->sin_addr, sin->sin_port,
                                   iface->cm.addr.uuid);
    } else {
        hipower_hs_iface_addr_pack(&iface->cm.addr, HIPOWER_HS_AF_INET6,
                                   &sin6->sin6_addr, sin6->sin6_port,
                                   iface->cm.addr.uuid);
    }
    uct_hipower_cm_addr_str(&iface->cm.addr, iface->cm.addr_str,
                            sizeof(iface->cm.addr_str));

    status = ucs_async_set_event_handler(async->mode, fd, UCS_EVENT_SET_EVREAD,
                                         uct_hipower_cm_listen_io, iface,
                                         async);
    if (status != UCS_OK) {
        ucs_error("hipower %s: cannot watch the listener: %s",
                  iface->dev_name, ucs_status_string(status));
        close(fd);
        return status;
    }

    iface->cm.sock.listen_fd = fd;
    uct_hipower_cm_watch(iface, fd, NULL, UCS_EVENT_SET_EVREAD,
                         EPOLL_CTL_ADD);
    ucs_debug("hipower %s: listening for connections on %s (%s)",
              iface->dev_name, iface->cm.addr_str, netdev);
    return UCS_OK;
}

void uct_hipower_cm_close_fds(uct_hipower_iface_t *iface)
{
    if (iface->cm.sock.event_fd >= 0) {
        /* (Which takes it out of the interface's event fd) */
        close(iface->cm.sock.event_fd);
        iface->cm.sock.event_fd = -1;
    }
    if (iface->cm.sock.io_epfd >= 0) {
        close(iface->cm.sock.io_epfd);
        iface->cm.sock.io_epfd = -1;
    }
}

void uct_hipower_cm_sock_init(uct_hipower_iface_t *iface)
{
    uct_hipower_cm_sock_t *sock = &iface->cm.sock;

    sock->listen_fd     = -1;
    sock->event_fd      = -1;
    sock->io_epfd       = -1;
    sock->num_ready     = 0;
    sock->num_active    = 0;
    sock->num_passive   = 0;
    sock->num_held      = 0;
    sock->in_poll       = 0;
    sock->listen_paused = 0;
    sock->probe_due     = 0;
    sock->next_probe    = 0;
    sock->last_warn     = 0;
    ucs_list_head_init(&sock->conns);
    ucs_list_head_init(&sock->ready);
    uct_hipower_timer_init(&sock->timer, iface->super.worker->async, 0,
                           uct_hipower_cm_timer, iface);
}

ucs_status_t uct_hipower_cm_sock_open(uct_hipower_iface_t *iface,
                                      const char *netdev)
{
    struct epoll_event event;
    ucs_status_t status;

    /* The deadline timer's fds before any connection's socket
     * (hipower_timer.h: uct_hipower_timer_prepare()) */
    (void)uct_hipower_timer_prepare(&iface->cm.sock.timer);

    iface->cm.sock.io_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (iface->cm.sock.io_epfd < 0) {
        ucs_error("hipower %s: epoll_create1() failed: %m", iface->dev_name);
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    iface->cm.sock.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (iface->cm.sock.event_fd < 0) {
        ucs_error("hipower %s: eventfd() failed: %m", iface->dev_name);
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    if (iface->event.epfd >= 0) {
        /* The interface's event fd (hipower_event.c) has ours too */
        memset(&event, 0, sizeof(event));
        event.events  = EPOLLIN;
        event.data.fd = iface->cm.sock.event_fd;
        if (epoll_ctl(iface->event.epfd, EPOLL_CTL_ADD, event.data.fd,
                      &event) < 0) {
            goto err_epoll;
        }
    }

    status = uct_hipower_cm_listen(iface, netdev);
    if (status != UCS_OK) {
        goto err;
    }
    return UCS_OK;

err_epoll:
    ucs_error("hipower %s: epoll_ctl() failed: %m", iface->dev_name);
    status = UCS_ERR_IO_ERROR;
err:
    uct_hipower_cm_close_fds(iface);
    uct_hipower_timer_cleanup(&iface->cm.sock.timer); /* Its prepared fds */
    return status;
}

void uct_hipower_cm_sock_stop(uct_hipower_iface_t *iface)
{
    if (iface->cm.sock.listen_fd >= 0) {
        ucs_async_remove_handler(iface->cm.sock.listen_fd, 1);
        close(iface->cm.sock.listen_fd);
        iface->cm.sock.listen_fd = -1;
    }
    uct_hipower_timer_cleanup(&iface->cm.sock.timer);
}

unsigned uct_hipower_cm_poll(uct_hipower_iface_t *iface)
{
    struct epoll_event events[16];
    uct_hipower_cm_conn_t *conn;
    int i, num;

    iface->stats.cm_polls++;
    num = epoll_wait(iface->cm.sock.io_epfd, events,
                     ucs_static_array_size(events), 0);
    /* Events below may name a conn dropped above */
    iface->cm.sock.in_poll = 1;
    for (i = 0; i < num; ++i) {
        conn = events[i].data.ptr;
        if (conn == NULL) {
            uct_hipower_cm_listen_io(iface->cm.sock.listen_fd, 0, iface);
        } else if (conn->fd >= 0) {
            /* Not freed: only progress frees, after this */
            uct_hipower_cm_conn_io(conn->fd, 0, conn);
        }
    }
    iface->cm.sock.in_poll = 0;
    return (num > 0) ? num : 0;
}

void uct_hipower_cm_conn_await(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);

    uct_hipower_cm_conn_close_fd(conn);
    uct_hipower_cm_conn_unqueue(conn);
    conn->state    = UCT_HIPOWER_CONN_AWAIT;
    conn->deadline = ucs_get_time() + iface->cm.timeout;
}

int uct_hipower_cm_probe_take(uct_hipower_iface_t *iface)
{
    if (!iface->cm.sock.probe_due) {
        return 0;
    }
    iface->cm.sock.probe_due = 0;
    return 1;
}
