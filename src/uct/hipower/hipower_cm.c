/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Connecting to an interface: the handshake's transport (see hipower_cm.h
 * for the threads, hipower_handshake.h for the protocol, docs/protocol.md
 * "Connection establishment").
 *
 * Why TCP and not the RDMA connection manager: the handshake must carry
 * both sides' device and endpoint addresses (19 + 61 bytes each way), and
 * rdma_cm's REQ holds 56 bytes of private data, so half of the exchange
 * would have to go in-band once the QP is up; over TCP one round trip
 * carries everything, and the QP is connected by the same
 * uct_ep_connect_to_ep() code and checks as on UCP's wire-up path. It
 * needs no /dev/infiniband/rdma_cm (absent from many containers), and no
 * IP address that maps onto the RDMA path (rdma_cm resolves the GID from
 * the IP: on Soft-RoCE between local devices that fails for IPv4). The
 * cost: the peers need IP connectivity (as rdma_cm needs, over IPoIB on
 * InfiniBand), and iWARP, which takes its QP attributes only from its
 * connection manager, is out -- as it is for hipower's connect_to_ep().
 */

#include "hipower_ep.h"
#include "hipower_cm.h"

#include <ucs/async/async.h>
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
#include <sys/socket.h>
#include <unistd.h>


/* UCX's async thread gets each socket's readiness once (see
 * uct_hipower_cm_watch()) */
#define UCT_HIPOWER_CM_ASYNC_EDGE  UCS_EVENT_SET_EDGE_TRIGGERED

/* A refused request is logged at most once per this long (per interface) */
#define UCT_HIPOWER_CM_WARN_INTERVAL_SEC  1.0

/* A peer's whole REQ is due this soon after its connection is accepted
 * (or CONNECT_TIMEOUT, if shorter): a real peer sends its 128 bytes with
 * the connect, so an idle connection is a stranger's or a dead host's and
 * holds a passive slot no longer (review M3) */
#define UCT_HIPOWER_CM_FIRST_MSG_SEC      1.0

/* The deadline timer's tick while a passive connection is read: the
 * first-message deadline holds to a quarter of it */
#define UCT_HIPOWER_CM_FAST_TICK_SEC      (UCT_HIPOWER_CM_FIRST_MSG_SEC / 4)

/* A passive connection this old without its REQ may be closed to accept
 * another: a real peer's REQ follows its connect within a round trip and
 * a scheduler slice, so a younger one is most likely a peer on its way */
#define UCT_HIPOWER_CM_IDLE_SEC           (UCT_HIPOWER_CM_FIRST_MSG_SEC / 4)

/* Connections one handshake makes, at most, when the peer's listener
 * closes them before it read the request (uct_hipower_cm_retry()) */
#define UCT_HIPOWER_CM_ATTEMPTS           4

typedef enum {
    UCT_HIPOWER_CONN_CONNECTING,   /* Active: TCP connect under way */
    UCT_HIPOWER_CONN_SENDING,      /* Active: REQ going out */
    UCT_HIPOWER_CONN_RECVING,      /* Reading the REQ, or the REP/REJ */
    UCT_HIPOWER_CONN_AWAIT,        /* Active, told CROSSED: no socket */
    UCT_HIPOWER_CONN_DONE,         /* A message read: for progress */
    UCT_HIPOWER_CONN_ERROR         /* Failed (errno in err): for progress */
} uct_hipower_conn_state_t;

/* What a connection counts in, and whether a deadline holds it */
typedef enum {
    UCT_HIPOWER_CONN_PHASE_NONE,   /* Active, acked: waits as long as the
                                      peer's host is alive (keepalive) */
    UCT_HIPOWER_CONN_PHASE_SHORT,  /* Connecting, sending, reading the first
                                      answer: num_active / num_passive, and
                                      the deadline */
    UCT_HIPOWER_CONN_PHASE_HELD    /* Passive, a whole REQ acked: num_held,
                                      until progress answers it */
} uct_hipower_conn_phase_t;

struct uct_hipower_cm_conn {
    ucs_list_link_t              list;       /* In cm.conns */
    ucs_list_link_t              ready_list; /* In cm.ready when queued */
    uct_hipower_iface_t          *iface;
    uct_hipower_ep_t             *ep;        /* Active: ours; passive: NULL */
    int                          fd;
    int                          active;
    int                          state;      /* uct_hipower_conn_state_t */
    int                          queued;     /* In cm.ready */
    int                          phase;      /* uct_hipower_conn_phase_t */
    int                          err;        /* errno of a failure */
    size_t                       offset;     /* Of the message in flight */
    ucs_time_t                   deadline;
    ucs_time_t                   start;
    hipower_hs_msg_t             out;
    hipower_hs_msg_t             in;
    char                         peer_str[64];
    struct sockaddr_storage      peer_ss;    /* Passive: who connected */
};


static void uct_hipower_cm_timer_start(uct_hipower_iface_t *iface);
static void uct_hipower_cm_conn_free(uct_hipower_cm_conn_t *conn);
static void uct_hipower_cm_conn_close_fd(uct_hipower_cm_conn_t *conn);
static void uct_hipower_cm_reject(uct_hipower_cm_conn_t *conn,
                                  uint64_t dst_uuid, uint64_t conn_sn,
                                  hipower_hs_reason_t reason);
static void uct_hipower_cm_refuse(uct_hipower_cm_conn_t *conn,
                                  const char *why, hipower_hs_reason_t reason);
static void uct_hipower_cm_ep_next(uct_hipower_iface_t *iface);
static int uct_hipower_cm_evict_idle(uct_hipower_iface_t *iface);
static void uct_hipower_cm_listen_io(int fd, ucs_event_set_types_t events,
                                     void *arg);


static const void *uct_hipower_cm_match_address(const ucs_conn_match_elem_t *elem)
{
    return &ucs_container_of(elem, uct_hipower_ep_t, cm.elem)->cm.peer_uuid;
}

static ucs_conn_sn_t uct_hipower_cm_match_sn(const ucs_conn_match_elem_t *elem)
{
    return ucs_container_of(elem, uct_hipower_ep_t, cm.elem)->cm.conn_sn;
}

static const char *uct_hipower_cm_match_str(const ucs_conn_match_ctx_t *ctx,
                                            const void *address, char *str,
                                            size_t max_size)
{
    ucs_snprintf_safe(str, max_size, "interface %016" PRIx64,
                      *(const uint64_t*)address);
    return str;
}

static void uct_hipower_cm_match_purge(ucs_conn_match_ctx_t *ctx,
                                       ucs_conn_match_elem_t *elem)
{
    /* Endpoints are destroyed by their owners, not by the matching */
}

static const ucs_conn_match_ops_t uct_hipower_cm_match_ops = {
    .get_address = uct_hipower_cm_match_address,
    .get_conn_sn = uct_hipower_cm_match_sn,
    .address_str = uct_hipower_cm_match_str,
    .purge_cb    = uct_hipower_cm_match_purge
};

void uct_hipower_cm_signal(uct_hipower_iface_t *iface)
{
    uint64_t one = 1;

    if (iface->cm.event_fd < 0) {
        return; /* No listener: arm's busy answer covers a sleeper */
    }
    /* Full only after 2^64-2 unread signals: nothing to do then */
    if ((write(iface->cm.event_fd, &one, sizeof(one)) < 0) &&
        (errno != EAGAIN)) {
        ucs_debug("hipower %s: eventfd write failed: %m", iface->dev_name);
    }
}

static void uct_hipower_cm_ep_wake(uct_hipower_ep_t *ep)
{
    uct_hipower_cm_signal(uct_hipower_ep_iface(ep));
}

/* Every endpoint's owner: the calls hipower_ep.c and hipower_post.c make
 * into the connection manager (uct_hipower_ep_owner_ops_t) */
static const uct_hipower_ep_owner_ops_t uct_hipower_cm_owner_ops = {
    .start   = uct_hipower_cm_ep_start,
    .gone    = uct_hipower_cm_ep_gone,
    .cleanup = uct_hipower_cm_ep_cleanup,
    .wake    = uct_hipower_cm_ep_wake
};

/* An endpoint, with the connection manager as its owner */
static ucs_status_t uct_hipower_cm_ep_new(const uct_ep_params_t *params,
                                          uct_ep_h *ep_p)
{
    ucs_status_t status;

    status = UCS_CLASS_NEW_FUNC_NAME(uct_hipower_ep_t)(params, ep_p);
    if (status == UCS_OK) {
        ucs_derived_of(*ep_p, uct_hipower_ep_t)->owner =
                &uct_hipower_cm_owner_ops;
    }
    return status;
}

/*
 * A socket's events, for UCX's async context and for our own poll set:
 * while handshakes are under way, progress polls them itself
 * (uct_hipower_cm_poll()), so a busy-polling process does not wait for the
 * async thread to be scheduled (on 2 busy cores, a scheduler slice per
 * handshake step); the async thread serves a process that sleeps or does
 * not progress. Both run under the async lock, and the handlers do nothing
 * more for an event already taken. The async thread's events of a
 * handshake's socket are edge-triggered: level-triggered, a ready socket
 * made it spin while progress held the async lock (71% of a busy-polling
 * client's time in the kernel on the rig); an edge that finds the lock
 * taken is served by this poll, which runs in every progress call and
 * every arm while any handshake is under way. The listener's stay
 * level-triggered: with no handshake under way nothing else polls it.
 */
static void uct_hipower_cm_watch(uct_hipower_iface_t *iface, int fd,
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
    if ((iface->cm.io_epfd >= 0) &&
        (epoll_ctl(iface->cm.io_epfd, op, fd, &event) < 0)) {
        ucs_debug("hipower %s: epoll_ctl(%d) of fd %d failed: %m",
                  iface->dev_name, op, fd);
    }
}

/* Handed to progress: from the socket handlers and the timer */
static void uct_hipower_cm_conn_queue(uct_hipower_cm_conn_t *conn, int state,
                                      int err)
{
    uct_hipower_iface_t *iface = conn->iface;

    if (conn->fd >= 0) {
        uct_hipower_cm_watch(iface, conn->fd, conn, 0, EPOLL_CTL_MOD);
    }
    conn->state = state;
    conn->err   = err;
    if (!conn->queued) {
        conn->queued = 1;
        ucs_list_add_tail(&iface->cm.ready, &conn->ready_list);
        ++iface->cm.num_ready;
        uct_hipower_cm_signal(iface);
    }
}

/* Moves a connection between the counts that bound each phase */
static void uct_hipower_cm_conn_phase(uct_hipower_cm_conn_t *conn, int phase)
{
    uct_hipower_cm_t *cm = &conn->iface->cm;

    if (conn->phase == UCT_HIPOWER_CONN_PHASE_SHORT) {
        if (conn->active) {
            --cm->num_active;
        } else {
            --cm->num_passive;
        }
    } else if (conn->phase == UCT_HIPOWER_CONN_PHASE_HELD) {
        --cm->num_held;
    }
    conn->phase = phase;
    if (cm->listen_paused && (cm->num_passive < cm->max_conns) &&
        (cm->listen_fd >= 0)) {
        cm->listen_paused = 0;
        uct_hipower_cm_watch(conn->iface, cm->listen_fd, NULL,
                             UCS_EVENT_SET_EVREAD, EPOLL_CTL_MOD);
    }
    if (phase == UCT_HIPOWER_CONN_PHASE_SHORT) {
        if (conn->active) {
            ++cm->num_active;
        } else {
            ++cm->num_passive;
        }
    } else if (phase == UCT_HIPOWER_CONN_PHASE_HELD) {
        ++cm->num_held;
    }
}

/* A connection that gets no answer, from the async handlers and the timer:
 * freed now, or by progress if uct_hipower_cm_poll() may still hold an
 * event of it (its socket is closed at once either way) */
static void uct_hipower_cm_conn_drop(uct_hipower_cm_conn_t *conn, int err)
{
    if (!conn->iface->cm.in_poll) {
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
    int secs = (int)ucs_max(ucs_time_to_sec(conn->iface->cm.timeout), 1.0);
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
                 conn->iface->dev_name, conn->peer_str);
    }
}

/*
 * Passive: a whole message read, in the async thread. A valid REQ is
 * acknowledged now, whatever this process is doing, and held for progress
 * to connect and answer; the peer then waits for as long as we live.
 * Anything else is refused now: nothing of it waits for progress.
 */
static void uct_hipower_cm_conn_got_req(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = conn->iface;
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
    } else if (iface->cm.num_held >= iface->cm.max_held) {
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
    uct_hipower_iface_t *iface = conn->iface;

    if ((conn->phase != UCT_HIPOWER_CONN_PHASE_SHORT) ||
        (hipower_hs_msg_check(&conn->in, conn->offset,
                              UCS_BIT(HIPOWER_HS_ACK), iface->cm.addr.uuid,
                              0, 0) != NULL) ||
        (conn->in.src_uuid != conn->ep->cm.peer_uuid) ||
        (conn->in.conn_sn != conn->ep->cm.conn_sn)) {
        return 0;
    }

    ucs_debug(UCT_HIPOWER_EP_FMT ": %s has our request; waiting for its "
              "answer as long as it lives", UCT_HIPOWER_EP_ARG(conn->ep),
              conn->peer_str);
    uct_hipower_cm_keepalive(conn);
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_NONE);
    conn->offset = 0;
    if (iface->cm.enabled && !ucs_list_is_empty(&iface->cm.waiting)) {
        uct_hipower_cm_ep_next(iface);
    }
    return 1;
}

/* Reads and writes what the socket takes now; from UCX's async context */
static void uct_hipower_cm_conn_io(int fd, ucs_event_set_types_t events,
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
        uct_hipower_cm_watch(conn->iface, fd, conn, UCS_EVENT_SET_EVREAD,
                             EPOLL_CTL_MOD);
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

    conn->iface    = iface;
    conn->fd       = fd;
    conn->active   = active;
    conn->start    = ucs_get_time();
    conn->deadline = conn->start +
                     (active ? iface->cm.timeout :
                      ucs_min(iface->cm.timeout,
                              ucs_time_from_sec(UCT_HIPOWER_CM_FIRST_MSG_SEC)));
    conn->phase    = UCT_HIPOWER_CONN_PHASE_NONE;
    ucs_list_add_tail(&iface->cm.conns, &conn->list);
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_SHORT);
    uct_hipower_cm_timer_start(iface);
    return conn;
}

static void uct_hipower_cm_conn_close_fd(uct_hipower_cm_conn_t *conn)
{
    if (conn->fd >= 0) {
        /* Not sync: we hold the async lock, and a missed event of this
         * handler is looked up by its fd, which is gone by then */
        ucs_async_remove_handler(conn->fd, 0);
        if (conn->iface->cm.io_epfd >= 0) {
            epoll_ctl(conn->iface->cm.io_epfd, EPOLL_CTL_DEL, conn->fd, NULL);
        }
        close(conn->fd);
        conn->fd = -1;
    }
}

/* Under the async lock */
static void uct_hipower_cm_conn_free(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = conn->iface;

    uct_hipower_cm_conn_close_fd(conn);
    if (conn->queued) {
        ucs_list_del(&conn->ready_list);
        --iface->cm.num_ready;
    }
    ucs_list_del(&conn->list);
    if (conn->ep != NULL) {
        conn->ep->cm.conn = NULL;
    }
    uct_hipower_cm_conn_phase(conn, UCT_HIPOWER_CONN_PHASE_NONE);
    ucs_free(conn);
    if (iface->cm.enabled && !ucs_list_is_empty(&iface->cm.waiting)) {
        uct_hipower_cm_ep_next(iface);
    }
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

/* Handshakes past their deadline: failed, for progress to report.
 * Internal endpoints: probed every CONNECT_TIMEOUT by progress, so that
 * one whose peer vanished without a goodbye (killed, or its endpoint
 * destroyed mid-handshake) goes when its QP fails, not at interface close
 * (a peer that sends on it never needs a user's endpoint here). Stops
 * when neither is left, so an idle process has no timer waking it */
static void uct_hipower_cm_timer(void *arg)
{
    uct_hipower_iface_t *iface = arg;
    uct_hipower_cm_conn_t *conn, *tmp;
    ucs_time_t now;

    if (ucs_list_is_empty(&iface->cm.conns) && (iface->cm.num_internal == 0)) {
        uct_hipower_timer_stop(&iface->cm.timer);
        iface->cm.next_probe = 0;
        return;
    }

    now = ucs_get_time();
    ucs_list_for_each_safe(conn, tmp, &iface->cm.conns, list) {
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
    while (iface->cm.listen_paused && uct_hipower_cm_evict_idle(iface)) {
        /* Room for the next in the backlog, if it is a real peer */
    }
    if ((iface->cm.num_passive == 0) &&
        (iface->cm.timer.interval < uct_hipower_cm_tick(iface, 0))) {
        /* No connection to read: back to the slow tick */
        uct_hipower_timer_stop(&iface->cm.timer);
        uct_hipower_cm_timer_start(iface);
    }

    if (iface->cm.num_internal == 0) {
        iface->cm.next_probe = 0;
    } else if (iface->cm.next_probe == 0) {
        iface->cm.next_probe = now + iface->cm.timeout;
    } else if ((now > iface->cm.next_probe) && !iface->cm.probe_due) {
        iface->cm.probe_due  = 1;
        iface->cm.next_probe = now + iface->cm.timeout;
        uct_hipower_cm_signal(iface);
    }
}

static void uct_hipower_cm_timer_start(uct_hipower_iface_t *iface)
{
    ucs_time_t tick = uct_hipower_cm_tick(iface, iface->cm.num_passive > 0);
    ucs_status_t status;

    if (uct_hipower_timer_state(&iface->cm.timer) ==
        UCT_HIPOWER_TIMER_RUNNING) {
        if (iface->cm.timer.interval <= tick) {
            return;
        }
        /* A passive connection to read: the fast tick */
        uct_hipower_timer_stop(&iface->cm.timer);
    } else if (uct_hipower_timer_state(&iface->cm.timer) !=
               UCT_HIPOWER_TIMER_IDLE) {
        return;
    }

    iface->cm.timer.interval = tick;
    status = uct_hipower_timer_start(&iface->cm.timer);
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

static void uct_hipower_cm_pack_addresses(uct_hipower_ep_t *ep,
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

/* Opens the endpoint's TCP connection and sends its REQ once connected.
 * Under the async lock. */
static ucs_status_t uct_hipower_cm_connect(uct_hipower_ep_t *ep)
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
    conn->ep    = ep;
    conn->state = UCT_HIPOWER_CONN_CONNECTING;
    ep->cm.conn = conn;
    if (ep->cm.attempts++ == 0) {
        ep->cm.deadline = conn->deadline;
    } else {
        /* Another connection of the same handshake: the same deadline */
        conn->deadline = ep->cm.deadline;
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

/* Starts the endpoints queued while max_conns handshakes were out */
static void uct_hipower_cm_ep_next(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep;

    while (!ucs_list_is_empty(&iface->cm.waiting) &&
           (iface->cm.num_active < iface->cm.max_conns)) {
        ep = ucs_list_extract_head(&iface->cm.waiting, uct_hipower_ep_t,
                                   cm.list);
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_NONE;
        if (uct_hipower_cm_connect(ep) != UCS_OK) {
            ep->cm.state = UCT_HIPOWER_CM_FAILED;
            uct_hipower_ep_set_failed(ep, UCS_ERR_IO_ERROR);
        }
    }
}

void uct_hipower_cm_ep_start(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_async_context_t *async = iface->super.worker->async;

    UCS_ASYNC_BLOCK(async);
    if (ep->cm.state == UCT_HIPOWER_CM_IDLE) {
        ep->cm.state  = UCT_HIPOWER_CM_CONNECTING;
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_WAITING;
        ucs_list_add_tail(&iface->cm.waiting, &ep->cm.list);
        uct_hipower_cm_ep_next(iface);
    }
    UCS_ASYNC_UNBLOCK(async);
}

static void uct_hipower_cm_match_del(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->cm.matched) {
        ucs_conn_match_remove_elem(&iface->cm.match, &ep->cm.elem,
                                   (ucs_conn_match_queue_type_t)ep->cm.queue);
        ep->cm.matched = 0;
    }
}

static void uct_hipower_cm_match_add(uct_hipower_ep_t *ep,
                                     ucs_conn_match_queue_type_t queue)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ucs_conn_match_insert(&iface->cm.match, &ep->cm.peer_uuid,
                              ep->cm.conn_sn, &ep->cm.elem, queue)) {
        ep->cm.matched = 1;
        ep->cm.queue   = queue;
    }
}

void uct_hipower_cm_ep_cleanup(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_async_context_t *async = iface->super.worker->async;

    /* What its destruction finds (its peer closed, say) dooms it no more */
    ep->cm.destroying = 1;
    if (((ep->cm.state == UCT_HIPOWER_CM_NONE) && !ep->cm.internal) ||
        !iface->cm.enabled) {
        /* Not connected by us, or the interface is closing: its
         * uct_hipower_cm_cleanup() dropped the handshakes and matching */
        return;
    }

    UCS_ASYNC_BLOCK(async);
    if (ep->cm.conn != NULL) {
        uct_hipower_cm_conn_free(ep->cm.conn);
    }
    if (ep->cm.listed != UCT_HIPOWER_CM_LISTED_NONE) {
        ucs_list_del(&ep->cm.list);
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_NONE;
    }
    uct_hipower_cm_match_del(ep);
    if (ep->cm.internal) {
        --iface->cm.num_internal;
    }
    ep->cm.state = UCT_HIPOWER_CM_NONE;
    UCS_ASYNC_UNBLOCK(async);
}

int uct_hipower_cm_ep_gone(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (!ep->cm.internal) {
        return 0;
    }

    if ((ep->cm.listed == UCT_HIPOWER_CM_LISTED_NONE) && !ep->cm.destroying) {
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_DOOMED;
        ucs_list_add_tail(&iface->cm.doomed, &ep->cm.list);
        /* No user's endpoint may take it over now */
        uct_hipower_cm_match_del(ep);
    }
    return 1;
}

/* Fails a user's endpoint whose handshake failed; the handshake is freed
 * first (the error handler may destroy the endpoint) */
static void uct_hipower_cm_ep_fail(uct_hipower_ep_t *ep, ucs_status_t status)
{
    if (ep->cm.conn != NULL) {
        uct_hipower_cm_conn_free(ep->cm.conn);
    }
    ep->cm.state = UCT_HIPOWER_CM_FAILED;
    uct_hipower_ep_iface(ep)->stats.cm_failed++;
    /* Internal ones are doomed there, not reported */
    uct_hipower_ep_set_failed(ep, status);
}

/* The passive side's answer; the connection is closed after it */
static void uct_hipower_cm_reply(uct_hipower_cm_conn_t *conn,
                                 const hipower_hs_msg_t *msg)
{
    ssize_t ret;

    /* 128 bytes into a socket that has sent nothing yet: the send buffer
     * takes them at once. If not, the peer's handshake fails on EOF. */
    ret = send(conn->fd, msg, sizeof(*msg), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (ret != sizeof(*msg)) {
        ucs_debug("hipower %s: answer to %s not sent: %m",
                  conn->iface->dev_name, conn->peer_str);
    }
}

static void uct_hipower_cm_reject(uct_hipower_cm_conn_t *conn,
                                  uint64_t dst_uuid, uint64_t conn_sn,
                                  hipower_hs_reason_t reason)
{
    hipower_hs_msg_t msg;

    hipower_hs_msg_pack(&msg, HIPOWER_HS_REJ, reason,
                        conn->iface->cm.addr.uuid, dst_uuid, conn_sn, NULL, 0,
                        NULL, 0);
    uct_hipower_cm_reply(conn, &msg);
}

/* A request we refuse for what it is, not for a crossed connect: one log
 * line per second at most, so a flood costs a line, not a log */
static void uct_hipower_cm_refuse(uct_hipower_cm_conn_t *conn,
                                  const char *why, hipower_hs_reason_t reason)
{
    uct_hipower_iface_t *iface = conn->iface;
    ucs_time_t now             = ucs_get_time();

    iface->stats.cm_refused++;
    if ((iface->cm.last_warn == 0) ||
        (now - iface->cm.last_warn >
         ucs_time_from_sec(UCT_HIPOWER_CM_WARN_INTERVAL_SEC))) {
        ucs_warn("hipower %s: refused a connection request from %s: %s "
                 "(%u refused so far)", iface->dev_name, conn->peer_str, why,
                 (unsigned)iface->stats.cm_refused);
        iface->cm.last_warn = now;
    }
    if (reason != HIPOWER_HS_REASON_NONE) {
        uct_hipower_cm_reject(conn, conn->in.src_uuid, conn->in.conn_sn,
                              reason);
    }
}

static hipower_hs_local_t uct_hipower_cm_local(const uct_hipower_ep_t *ep)
{
    if (ep == NULL) {
        return HIPOWER_HS_LOCAL_NONE;
    }

    switch (ep->cm.state) {
    case UCT_HIPOWER_CM_IDLE:
        return HIPOWER_HS_LOCAL_IDLE;
    case UCT_HIPOWER_CM_CONNECTING:
    case UCT_HIPOWER_CM_AWAIT_PEER:
        return HIPOWER_HS_LOCAL_CONNECTING;
    default:
        return HIPOWER_HS_LOCAL_CONNECTED;
    }
}

/*
 * At the cap of internal endpoints: the oldest one whose peer never wrote
 * to it goes. A real peer connects because it has something to send and
 * writes right after its REP; one that never wrote is a request nobody
 * meant to use (a stranger's, or a peer that left). Without this, anyone
 * who knows our address could keep every later peer out. 1 if one went.
 */
static int uct_hipower_cm_evict_silent(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep;

    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (ep->cm.internal && !ep->cm.destroying &&
            (ep->cm.listed == UCT_HIPOWER_CM_LISTED_NONE) &&
            !(ep->flags & UCT_HIPOWER_EP_FLAG_IN_RX) &&
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

/* The host a passive connection came from, as an interface address
 * without port: what a user's endpoint made later is checked against */
static void uct_hipower_cm_source(const uct_hipower_cm_conn_t *conn,
                                  hipower_hs_iface_addr_t *addr)
{
    const struct sockaddr_in *sin   = (const struct sockaddr_in*)&conn->peer_ss;
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6*)
                                      &conn->peer_ss;

    if (conn->peer_ss.ss_family == AF_INET) {
        hipower_hs_iface_addr_pack(addr, HIPOWER_HS_AF_INET, &sin->sin_addr,
                                   0, conn->in.src_uuid);
    } else {
        hipower_hs_iface_addr_pack(addr, HIPOWER_HS_AF_INET6,
                                   &sin6->sin6_addr, 0, conn->in.src_uuid);
    }
}

/* Whether @a source (where a request came from) is the host of the
 * interface address @a addr: active sides bind their handshake sockets to
 * their listener's address (uct_hipower_cm_connect()), so an honest peer's
 * request comes from the IP its interface address holds */
static int uct_hipower_cm_same_host(const hipower_hs_iface_addr_t *source,
                                    const hipower_hs_iface_addr_t *addr)
{
    return (source->family == addr->family) &&
           !memcmp(source->ip, addr->ip,
                   (addr->family == HIPOWER_HS_AF_INET) ? 4 : 16);
}

/* An endpoint for a peer's REQ that no endpoint of the user's matches */
static ucs_status_t uct_hipower_cm_ep_internal(uct_hipower_cm_conn_t *conn,
                                               uct_hipower_ep_t **ep_p)
{
    uct_hipower_iface_t *iface  = conn->iface;
    const hipower_hs_msg_t *req = &conn->in;
    uct_ep_params_t params;
    uct_hipower_ep_t *ep;
    ucs_status_t status;
    uct_ep_h tl_ep;

    if ((iface->cm.num_internal >= iface->cm.max_internal) &&
        !uct_hipower_cm_evict_silent(iface)) {
        /* A quarter of the endpoints stays for the user's own: requests
         * (anyone's who knows our address) cannot take them all (M4) */
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = &iface->super.super;
    status = uct_hipower_cm_ep_new(&params, &tl_ep);
    if (status != UCS_OK) {
        return status;
    }

    ep              = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    ep->cm.internal = 1;
    ep->cm.state    = UCT_HIPOWER_CM_CONNECTED;
    ep->cm.peer_uuid = req->src_uuid;
    ep->cm.conn_sn   = req->conn_sn;
    uct_hipower_cm_source(conn, &ep->cm.peer);
    ++iface->cm.num_internal;
    /* Its probes (the handshake's timer runs now: this keeps it going) */
    uct_hipower_cm_timer_start(iface);
    iface->stats.cm_internal++;
    if (req->src_uuid != iface->cm.addr.uuid) {
        /* The user's endpoint to that peer, when made, takes this one */
        uct_hipower_cm_match_add(ep, UCS_CONN_MATCH_QUEUE_UNEXP);
    }
    *ep_p = ep;
    return UCS_OK;
}

/* A held request's sender closed its end while we computed (its endpoint
 * destroyed, its process gone): nobody to connect to */
static int uct_hipower_cm_peer_left(uct_hipower_cm_conn_t *conn)
{
    char byte;

    return recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/*
 * A REQ that carries our own id is one of our endpoints connecting to
 * ourselves only if its connection is one of ours: an active handshake's
 * socket whose local address is the peer address this one was accepted
 * from. Anyone who knows our address knows our id; only this process
 * holds that socket.
 */
static int uct_hipower_cm_from_self(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_cm_conn_t *mine;
    struct sockaddr_storage ss;
    ucs_status_t status;
    socklen_t len;

    ucs_list_for_each(mine, &conn->iface->cm.conns, list) {
        len = sizeof(ss);
        if (!mine->active || (mine->fd < 0) ||
            (mine->ep->cm.peer_uuid != conn->in.src_uuid) ||
            (mine->ep->cm.conn_sn != conn->in.conn_sn) ||
            (getsockname(mine->fd, (struct sockaddr*)&ss, &len) < 0)) {
            continue;
        }
        if ((ucs_sockaddr_cmp((struct sockaddr*)&ss,
                              (struct sockaddr*)&conn->peer_ss,
                              &status) == 0) && (status == UCS_OK)) {
            return 1;
        }
    }
    return 0;
}

/* Internal endpoints one pair (interface id and pair number) can have at
 * once, one per host whose REQ claimed it, until the user's endpoint for
 * it picks the one from its peer's host: more hosts than this are refused */
#define UCT_HIPOWER_CM_MAX_CANDIDATES 8

/*
 * The endpoint a REQ is for. A pair is bound to the host of its peer
 * (review M4): an honest peer's REQ comes from the IP its interface address
 * holds (uct_hipower_cm_connect() binds its socket there).
 * - The user's endpoint for that pair: it holds the peer's interface
 *   address as the user got it (UCP's, trusted). A REQ for it from another
 *   host is a stranger's: *foreign_p, and it is refused, never connected
 *   to the user's endpoint.
 * - Else an internal endpoint that an earlier REQ for that pair from the
 *   same host made (a replay, the tail of a crossed connect): answered
 *   DUPLICATE by the caller. Internal endpoints of that pair from other
 *   hosts do not match: each host gets one of its own
 *   (*candidates_p says how many there are), so that a stranger who
 *   claimed the pair first cannot lock its real peer out; the user's
 *   uct_ep_create() keeps the one from the peer's host and closes the rest.
 */
static uct_hipower_ep_t *uct_hipower_cm_req_match(uct_hipower_cm_conn_t *conn,
                                                  int *foreign_p,
                                                  unsigned *candidates_p)
{
    uct_hipower_iface_t *iface  = conn->iface;
    const hipower_hs_msg_t *req = &conn->in;
    ucs_conn_match_elem_t *elems[UCT_HIPOWER_CM_MAX_CANDIDATES];
    uct_hipower_ep_t *ep, *found = NULL;
    hipower_hs_iface_addr_t source;
    ucs_conn_match_elem_t *elem;
    unsigned i, n;

    *foreign_p    = 0;
    *candidates_p = 0;
    uct_hipower_cm_source(conn, &source);
    elem = ucs_conn_match_get_elem(&iface->cm.match, &req->src_uuid,
                                   req->conn_sn, UCS_CONN_MATCH_QUEUE_EXP, 0);
    if (elem != NULL) {
        ep         = ucs_container_of(elem, uct_hipower_ep_t, cm.elem);
        *foreign_p = !uct_hipower_cm_same_host(&source, &ep->cm.peer);
        return *foreign_p ? NULL : ep;
    }

    /* The matching looks up one at a time: each taken out to be looked
     * at, all put back in their order */
    for (n = 0; n < UCT_HIPOWER_CM_MAX_CANDIDATES; ++n) {
        elems[n] = ucs_conn_match_get_elem(&iface->cm.match, &req->src_uuid,
                                           req->conn_sn,
                                           UCS_CONN_MATCH_QUEUE_UNEXP, 1);
        if (elems[n] == NULL) {
            break;
        }
    }
    for (i = 0; i < n; ++i) {
        ep = ucs_container_of(elems[i], uct_hipower_ep_t, cm.elem);
        ucs_conn_match_insert(&iface->cm.match, &ep->cm.peer_uuid,
                              ep->cm.conn_sn, elems[i],
                              UCS_CONN_MATCH_QUEUE_UNEXP);
        if (uct_hipower_cm_same_host(&source, &ep->cm.peer)) {
            found = ep;
        }
    }
    *candidates_p = n;
    return found;
}

static void uct_hipower_cm_passive(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = conn->iface;
    const hipower_hs_msg_t *req = &conn->in;
    uct_hipower_ep_t *ep        = NULL;
    hipower_hs_msg_t rep;
    hipower_hs_action_t action;
    unsigned candidates;
    ucs_status_t status;
    int foreign;

    if (conn->state == UCT_HIPOWER_CONN_ERROR) {
        /* A peer that went away (its endpoint destroyed while connecting),
         * or sent too little before the deadline: nothing to answer */
        ucs_debug("hipower %s: no request from %s: %s", iface->dev_name,
                  conn->peer_str, (conn->err == ETIMEDOUT) ?
                  "none whole before the deadline" : strerror(conn->err));
        goto out;
    }

    /* Checked whole by uct_hipower_cm_conn_got_req() */
    if (uct_hipower_cm_peer_left(conn)) {
        ucs_debug("hipower %s: %s left before its request was answered",
                  iface->dev_name, conn->peer_str);
        goto out;
    }

    if ((req->src_uuid == iface->cm.addr.uuid) &&
        !uct_hipower_cm_from_self(conn)) {
        /* Our own id from a connection none of our endpoints opened:
         * never an endpoint to ourselves, nor one to match (review M4) */
        uct_hipower_cm_refuse(conn, "it claims this interface's own id",
                              HIPOWER_HS_REASON_BAD_REQUEST);
        goto out;
    }

    if (req->src_uuid != iface->cm.addr.uuid) {
        ep = uct_hipower_cm_req_match(conn, &foreign, &candidates);
        if (foreign) {
            /* Never the user's endpoint to someone else (review M4) */
            iface->stats.cm_foreign++;
            uct_hipower_cm_refuse(conn, "it claims a pair of ours from "
                                  "another host than that peer's address",
                                  HIPOWER_HS_REASON_FOREIGN);
            goto out;
        }
        if ((ep == NULL) && (candidates >= UCT_HIPOWER_CM_MAX_CANDIDATES)) {
            uct_hipower_cm_refuse(conn, "as many hosts as allowed claim "
                                  "that pair already",
                                  HIPOWER_HS_REASON_NO_RESOURCE);
            goto out;
        }
    }

    action = hipower_hs_decide(iface->cm.addr.uuid, req->src_uuid,
                               uct_hipower_cm_local(ep));
    switch (action) {
    case HIPOWER_HS_ACCEPT_NEW:
        status = uct_hipower_cm_ep_internal(conn, &ep);
        if (status != UCS_OK) {
            uct_hipower_cm_refuse(conn, "no endpoint can be created",
                                  HIPOWER_HS_REASON_NO_RESOURCE);
            goto out;
        }
        break;
    case HIPOWER_HS_ACCEPT_LOCAL:
        break;
    case HIPOWER_HS_REJECT_CROSSED:
        ucs_debug("hipower %s: crossed connect with %s, endpoint %" PRIu64
                  ": ours goes on", iface->dev_name, conn->peer_str,
                  req->conn_sn);
        uct_hipower_cm_reject(conn, req->src_uuid, req->conn_sn,
                              HIPOWER_HS_REASON_CROSSED);
        iface->stats.cm_crossed++;
        goto out;
    case HIPOWER_HS_REJECT_DUPLICATE:
    default:
        /* The tail of a crossed connect (the peer's REQ was under way when
         * ours got its REP), or a replay: no warning either way */
        ucs_debug("hipower %s: request from %s for endpoint %" PRIu64
                  ", connected already", iface->dev_name, conn->peer_str,
                  req->conn_sn);
        uct_hipower_cm_reject(conn, req->src_uuid, req->conn_sn,
                              HIPOWER_HS_REASON_DUPLICATE);
        iface->stats.cm_crossed++;
        goto out;
    }

    status = uct_hipower_ep_connect_to_ep(&ep->super.super,
                                          (const uct_device_addr_t*)
                                          req->dev_addr,
                                          (const uct_ep_addr_t*)req->ep_addr);
    if (status != UCS_OK) {
        /* connect_to_ep() said why; the peer's endpoint fails with it */
        uct_hipower_cm_refuse(conn, "its addresses do not fit this process",
                              HIPOWER_HS_REASON_MISMATCH);
        if (ep->cm.internal) {
            uct_hipower_cm_ep_gone(ep);
        } else {
            uct_hipower_cm_ep_fail(ep, UCS_ERR_UNREACHABLE);
        }
        goto out;
    }

    if ((ep->cm.conn != NULL) &&
        (ep->cm.conn->state == UCT_HIPOWER_CONN_AWAIT)) {
        uct_hipower_cm_conn_free(ep->cm.conn);
    }
    if (ep->cm.listed == UCT_HIPOWER_CM_LISTED_WAITING) {
        /* Queued behind other handshakes: no REQ of its own needed now */
        ucs_list_del(&ep->cm.list);
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_NONE;
    }
    ep->cm.state = UCT_HIPOWER_CM_CONNECTED;
    iface->stats.cm_accepted++;
    uct_hipower_cm_pack_addresses(ep, &rep, HIPOWER_HS_REP, req->src_uuid,
                                  req->conn_sn);
    uct_hipower_cm_reply(conn, &rep);
    ucs_debug(UCT_HIPOWER_EP_FMT ": connected by %s's request (endpoint %"
              PRIu64 "%s)", UCT_HIPOWER_EP_ARG(ep), conn->peer_str,
              req->conn_sn, ep->cm.internal ? ", internal" : "");
out:
    uct_hipower_cm_conn_free(conn);
}

static ucs_status_t uct_hipower_cm_errno_status(int err)
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

/*
 * Closed by the peer before it acknowledged our request. It acknowledges
 * a whole one at once, so it read none: nothing of ours was taken. What
 * closes such a connection is the listener's guard against strangers (one
 * idle past the first-message deadline, or the oldest idle one when all
 * passive slots are taken), which a real request meets only when the
 * peer's host is so loaded that its async thread did not read 128 bytes
 * in time (seen on an overloaded rig). The endpoint connects again, a few
 * times, within the first connection's deadline; a process that died
 * answers that with ECONNREFUSED. 1 if it does.
 */
static int uct_hipower_cm_retry(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = conn->iface;
    uct_hipower_ep_t *ep       = conn->ep;

    if ((conn->phase != UCT_HIPOWER_CONN_PHASE_SHORT) ||
        ((conn->err != ECONNRESET) && (conn->err != EPIPE)) ||
        (ep->cm.state != UCT_HIPOWER_CM_CONNECTING) ||
        (ep->cm.attempts >= UCT_HIPOWER_CM_ATTEMPTS) ||
        (ucs_get_time() >= ep->cm.deadline) || !iface->cm.enabled) {
        return 0;
    }

    ucs_diag(UCT_HIPOWER_EP_FMT ": %s closed the handshake before it read "
             "our request (its host overloaded?); connecting again (%u of "
             "%u)", UCT_HIPOWER_EP_ARG(ep), conn->peer_str,
             ep->cm.attempts + 1, UCT_HIPOWER_CM_ATTEMPTS);
    iface->stats.cm_retried++;
    /* First in the queue: the slot this connection frees is its own */
    ucs_assert(ep->cm.listed == UCT_HIPOWER_CM_LISTED_NONE);
    ep->cm.listed = UCT_HIPOWER_CM_LISTED_WAITING;
    ucs_list_add_head(&iface->cm.waiting, &ep->cm.list);
    uct_hipower_cm_conn_free(conn);
    return 1;
}

static void uct_hipower_cm_active(uct_hipower_cm_conn_t *conn)
{
    uct_hipower_iface_t *iface = conn->iface;
    uct_hipower_ep_t *ep        = conn->ep;
    const hipower_hs_msg_t *msg = &conn->in;
    hipower_hs_rej_action_t rej;
    ucs_status_t status;
    const char *why;

    ucs_assert(ep != NULL);
    if (conn->state == UCT_HIPOWER_CONN_ERROR) {
        if (ep->flags & UCT_HIPOWER_EP_FLAG_QP_UP) {
            /* The peer's crossed request connected us meanwhile */
            uct_hipower_cm_conn_free(conn);
            return;
        } else if (uct_hipower_cm_retry(conn)) {
            return;
        }
        status = uct_hipower_cm_errno_status(conn->err);
        ucs_error(UCT_HIPOWER_EP_FMT ": handshake with %s failed: %s%s",
                  UCT_HIPOWER_EP_ARG(ep), conn->peer_str,
                  (conn->err != ETIMEDOUT) ? strerror(conn->err) :
                  (ep->cm.state == UCT_HIPOWER_CM_AWAIT_PEER) ?
                  "told CROSSED, and the peer's own request did not come "
                  "within UCX_HIPOWER_CONNECT_TIMEOUT" :
                  (conn->phase == UCT_HIPOWER_CONN_PHASE_SHORT) ?
                  "no answer within UCX_HIPOWER_CONNECT_TIMEOUT" :
                  "its host stopped answering (TCP keepalive) while it "
                  "held our request",
                  (conn->err == ECONNRESET) ? " (peer closed the connection: "
                  "process gone, or it refused our request)" : "");
        uct_hipower_cm_ep_fail(ep, status);
        return;
    }

    why = hipower_hs_msg_check(msg, conn->offset,
                               UCS_BIT(HIPOWER_HS_REP) |
                               UCS_BIT(HIPOWER_HS_REJ), iface->cm.addr.uuid,
                               sizeof(uct_hipower_device_addr_t),
                               sizeof(uct_hipower_ep_addr_t));
    if ((why == NULL) && ((msg->src_uuid != ep->cm.peer_uuid) ||
                          (msg->conn_sn != ep->cm.conn_sn))) {
        why = "answer of another interface or endpoint";
    }
    if (why != NULL) {
        ucs_error(UCT_HIPOWER_EP_FMT ": bad handshake answer from %s: %s",
                  UCT_HIPOWER_EP_ARG(ep), conn->peer_str, why);
        uct_hipower_cm_ep_fail(ep, UCS_ERR_CONNECTION_RESET);
        return;
    }

    if (msg->type == HIPOWER_HS_REJ) {
        rej = hipower_hs_on_reject(iface->cm.addr.uuid, ep->cm.peer_uuid,
                                   (hipower_hs_reason_t)msg->reason,
                                   !!(ep->flags & UCT_HIPOWER_EP_FLAG_QP_UP));
        if (rej == HIPOWER_HS_REJ_DONE) {
            uct_hipower_cm_conn_free(conn);
        } else if (rej == HIPOWER_HS_REJ_AWAIT_PEER) {
            /* No socket any more: CONNECT_TIMEOUT for the peer's REQ */
            uct_hipower_cm_conn_close_fd(conn);
            ucs_list_del(&conn->ready_list);
            --iface->cm.num_ready;
            conn->queued   = 0;
            conn->state    = UCT_HIPOWER_CONN_AWAIT;
            conn->deadline = ucs_get_time() + iface->cm.timeout;
            ep->cm.state = UCT_HIPOWER_CM_AWAIT_PEER;
        } else {
            ucs_error(UCT_HIPOWER_EP_FMT ": %s refused the connection: %s",
                      UCT_HIPOWER_EP_ARG(ep), conn->peer_str,
                      hipower_hs_reason_str(msg->reason));
            uct_hipower_cm_ep_fail(ep,
                                   (msg->reason ==
                                    HIPOWER_HS_REASON_MISMATCH) ?
                                   UCS_ERR_UNREACHABLE :
                                   UCS_ERR_CONNECTION_RESET);
        }
        return;
    }

    if (ep->flags & UCT_HIPOWER_EP_FLAG_QP_UP) {
        /* The peer answered both our REQ and took its own: cannot be */
        ucs_error(UCT_HIPOWER_EP_FMT ": %s answered a request of an endpoint "
                  "connected already", UCT_HIPOWER_EP_ARG(ep), conn->peer_str);
        uct_hipower_cm_ep_fail(ep, UCS_ERR_CONNECTION_RESET);
        return;
    }

    status = uct_hipower_ep_connect_to_ep(&ep->super.super,
                                          (const uct_device_addr_t*)
                                          msg->dev_addr,
                                          (const uct_ep_addr_t*)msg->ep_addr);
    if (status != UCS_OK) {
        uct_hipower_cm_ep_fail(ep, status);
        return;
    }

    ep->cm.state = UCT_HIPOWER_CM_CONNECTED;
    ucs_debug(UCT_HIPOWER_EP_FMT ": connected to %s", UCT_HIPOWER_EP_ARG(ep),
              conn->peer_str);
    uct_hipower_cm_conn_free(conn);
}

unsigned uct_hipower_cm_poll(uct_hipower_iface_t *iface)
{
    struct epoll_event events[16];
    uct_hipower_cm_conn_t *conn;
    int i, num;

    iface->stats.cm_polls++;
    num = epoll_wait(iface->cm.io_epfd, events, ucs_static_array_size(events),
                     0);
    iface->cm.in_poll = 1; /* Events below may name a conn dropped above */
    for (i = 0; i < num; ++i) {
        conn = events[i].data.ptr;
        if (conn == NULL) {
            uct_hipower_cm_listen_io(iface->cm.listen_fd, 0, iface);
        } else if (conn->fd >= 0) {
            /* Not freed: only progress frees, after this */
            uct_hipower_cm_conn_io(conn->fd, 0, conn);
        }
    }
    iface->cm.in_poll = 0;
    return (num > 0) ? num : 0;
}

unsigned uct_hipower_cm_progress(uct_hipower_iface_t *iface)
{
    uct_hipower_cm_conn_t *conn;
    uct_hipower_ep_t *ep, *tmp;
    unsigned count = 0;

    while (!ucs_list_is_empty(&iface->cm.ready)) {
        conn = ucs_list_head(&iface->cm.ready, uct_hipower_cm_conn_t,
                             ready_list);
        ++count;
        if (conn->active) {
            if ((conn->state == UCT_HIPOWER_CONN_ERROR) &&
                (conn->ep->cm.state == UCT_HIPOWER_CM_AWAIT_PEER)) {
                conn->err = ETIMEDOUT;
            }
            uct_hipower_cm_active(conn);
        } else {
            uct_hipower_cm_passive(conn);
        }
    }

    ucs_list_for_each_safe(ep, tmp, &iface->cm.doomed, cm.list) {
        if (ep->flags & UCT_HIPOWER_EP_FLAG_IN_RX) {
            continue; /* A progress called by a handler of its walk */
        }
        ucs_debug(UCT_HIPOWER_EP_FMT ": internal endpoint closed by its peer",
                  UCT_HIPOWER_EP_ARG(ep));
        UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(&ep->super.super);
        ++count;
    }

    if (iface->cm.probe_due) {
        /* A signaled zero-length write each (uct_ep_check()'s): a dead
         * peer fails it after the retries, and the failure dooms the
         * endpoint (uct_hipower_cm_ep_gone()). One busy with its own
         * signaled requests is probed by them. */
        iface->cm.probe_due = 0;
        ucs_list_for_each(ep, &iface->ep_list, list) {
            if (ep->cm.internal &&
                (ep->cm.listed == UCT_HIPOWER_CM_LISTED_NONE) &&
                (uct_hipower_ep_check(&ep->super.super, 0, NULL) == UCS_OK)) {
                iface->stats.cm_probes++;
                ++count;
            }
        }
    }

    return count;
}

ucs_status_t uct_hipower_cm_arm(uct_hipower_iface_t *iface)
{
    uint64_t value;

    /* Drained first: a handler that queues after the checks signals anew */
    while (read(iface->cm.event_fd, &value, sizeof(value)) > 0) {
    }

    /* An edge the async thread found while the lock was taken is not
     * signaled again: look at the sockets before sleeping */
    if (!ucs_list_is_empty(&iface->cm.conns)) {
        uct_hipower_cm_poll(iface);
    }

    if ((iface->cm.num_ready > 0) || !ucs_list_is_empty(&iface->cm.doomed) ||
        iface->cm.probe_due) {
        return UCS_ERR_BUSY;
    }
    return UCS_OK;
}

/*
 * The listener is full of connections that have not sent their REQ: the
 * oldest goes if it is old enough to be idle (a real peer sends with its
 * connect). Pausing accept until the first-message deadline, as before,
 * let a stream of idle connections keep real peers in the kernel's
 * backlog for as long as it came (review M3). 1 if one was closed.
 */
static int uct_hipower_cm_evict_idle(uct_hipower_iface_t *iface)
{
    ucs_time_t old = ucs_get_time() -
                     ucs_time_from_sec(UCT_HIPOWER_CM_IDLE_SEC);
    uct_hipower_cm_conn_t *conn;

    ucs_list_for_each(conn, &iface->cm.conns, list) {
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

/* Accepts what connects; from UCX's async context */
static void uct_hipower_cm_listen_io(int fd, ucs_event_set_types_t events,
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
        if ((iface->cm.num_passive >= iface->cm.max_conns) &&
            !uct_hipower_cm_evict_idle(iface)) {
            /* Every one is young: the rest wait in the kernel's backlog
             * until one sends its REQ or is closed, within a tick of the
             * first-message deadline (uct_hipower_cm_conn_phase()) */
            uct_hipower_cm_watch(iface, fd, NULL, 0, EPOLL_CTL_MOD);
            iface->cm.listen_paused = 1;
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

    iface->cm.listen_fd = fd;
    uct_hipower_cm_watch(iface, fd, NULL, UCS_EVENT_SET_EVREAD,
                         EPOLL_CTL_ADD);
    ucs_debug("hipower %s: listening for connections on %s (%s)",
              iface->dev_name, iface->cm.addr_str, netdev);
    return UCS_OK;
}

static void uct_hipower_cm_close_fds(uct_hipower_iface_t *iface)
{
    if (iface->cm.event_fd >= 0) {
        /* (Which takes it out of the interface's event fd) */
        close(iface->cm.event_fd);
        iface->cm.event_fd = -1;
    }
    if (iface->cm.io_epfd >= 0) {
        close(iface->cm.io_epfd);
        iface->cm.io_epfd = -1;
    }
}

void uct_hipower_cm_construct(uct_hipower_iface_t *iface)
{
    iface->cm.enabled      = 0;
    iface->cm.listen_fd    = -1;
    iface->cm.event_fd     = -1;
    iface->cm.io_epfd      = -1;
    uct_hipower_timer_init(&iface->cm.timer, iface->super.worker->async, 0,
                           uct_hipower_cm_timer, iface);
    iface->cm.timeout      = 0;
    iface->cm.max_conns    = 1;
    iface->cm.num_ready    = 0;
    iface->cm.num_active   = 0;
    iface->cm.num_passive  = 0;
    iface->cm.num_internal = 0;
    iface->cm.probe_due    = 0;
    iface->cm.next_probe   = 0;
    iface->cm.last_warn    = 0;
    iface->cm.num_held     = 0;
    iface->cm.max_held     = 1;
    iface->cm.max_internal = 1;
    iface->cm.in_poll      = 0;
    iface->cm.listen_paused = 0;
    memset(&iface->cm.addr, 0, sizeof(iface->cm.addr));
    iface->cm.addr_str[0]  = '\0';
    ucs_list_head_init(&iface->cm.conns);
    ucs_list_head_init(&iface->cm.ready);
    ucs_list_head_init(&iface->cm.waiting);
    ucs_list_head_init(&iface->cm.doomed);
    ucs_conn_match_init(&iface->cm.match, sizeof(uint64_t),
                        UCS_CONN_MATCH_SN_MAX, &uct_hipower_cm_match_ops);
}

ucs_status_t uct_hipower_cm_open(uct_hipower_iface_t *iface,
                                 const char *netdev, ucs_time_t timeout,
                                 unsigned max_conns)
{
    struct epoll_event event;
    ucs_status_t status;
    uint64_t uuid;

    iface->cm.timeout   = timeout;
    iface->cm.max_conns = ucs_max(max_conns, 1);
    /* Peers waiting for this process: as many as it can have endpoints */
    iface->cm.max_held  = ucs_max(iface->config.eps_possible, 1);
    iface->cm.max_internal = ucs_max(iface->config.eps_possible -
                                     iface->config.eps_possible / 4, 1);

    /* Tells this opening from any other, here or elsewhere, and the
     * crossed-connect winner: never 0 */
    do {
        uuid = ucs_generate_uuid((uintptr_t)iface);
    } while (uuid == 0);
    iface->cm.addr.uuid = uuid;

    /* The deadline timer's fds before any connection's socket
     * (hipower_timer.h: uct_hipower_timer_prepare()) */
    (void)uct_hipower_timer_prepare(&iface->cm.timer);

    iface->cm.io_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (iface->cm.io_epfd < 0) {
        ucs_error("hipower %s: epoll_create1() failed: %m", iface->dev_name);
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    iface->cm.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (iface->cm.event_fd < 0) {
        ucs_error("hipower %s: eventfd() failed: %m", iface->dev_name);
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    if (iface->event.epfd >= 0) {
        /* The interface's event fd (hipower_event.c) has ours too */
        memset(&event, 0, sizeof(event));
        event.events  = EPOLLIN;
        event.data.fd = iface->cm.event_fd;
        if (epoll_ctl(iface->event.epfd, EPOLL_CTL_ADD, event.data.fd,
                      &event) < 0) {
            goto err_epoll;
        }
    }

    status = uct_hipower_cm_listen(iface, netdev);
    if (status != UCS_OK) {
        goto err;
    }

    iface->cm.enabled = 1;
    return UCS_OK;

err_epoll:
    ucs_error("hipower %s: epoll_ctl() failed: %m", iface->dev_name);
    status = UCS_ERR_IO_ERROR;
err:
    uct_hipower_cm_close_fds(iface);
    uct_hipower_timer_cleanup(&iface->cm.timer); /* Its prepared fds */
    return status;
}

void uct_hipower_cm_cleanup(uct_hipower_iface_t *iface)
{
    ucs_async_context_t *async = iface->super.worker->async;
    uct_hipower_cm_conn_t *conn, *tmp_conn;
    uct_hipower_ep_t *ep, *tmp_ep;

    if (iface->cm.listen_fd >= 0) {
        ucs_async_remove_handler(iface->cm.listen_fd, 1);
        close(iface->cm.listen_fd);
        iface->cm.listen_fd = -1;
    }
    uct_hipower_timer_cleanup(&iface->cm.timer);

    UCS_ASYNC_BLOCK(async);
    /* Endpoints made for peers: nobody else destroys them */
    ucs_list_for_each_safe(ep, tmp_ep, &iface->ep_list, list) {
        if (ep->cm.internal) {
            UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(&ep->super.super);
        }
    }
    /* The user's endpoints still open stay as they are: none connects */
    while (!ucs_list_is_empty(&iface->cm.waiting)) {
        ep = ucs_list_extract_head(&iface->cm.waiting, uct_hipower_ep_t,
                                   cm.list);
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_NONE;
    }
    iface->cm.enabled = 0;
    ucs_list_for_each_safe(conn, tmp_conn, &iface->cm.conns, list) {
        uct_hipower_cm_conn_free(conn);
    }
    UCS_ASYNC_UNBLOCK(async);

    ucs_conn_match_cleanup(&iface->cm.match);
    uct_hipower_cm_close_fds(iface);
}

ucs_status_t uct_hipower_cm_iface_addr_valid(uct_hipower_iface_t *iface,
                                             const uct_iface_addr_t *addr,
                                             size_t length)
{
    const char *why;

    if (addr == NULL) {
        return UCS_ERR_INVALID_ADDR;
    }
    why = hipower_hs_iface_addr_check((const hipower_hs_iface_addr_t*)addr,
                                      length);
    if (why != NULL) {
        ucs_debug("hipower %s: peer interface address refused: %s",
                  iface->dev_name, why);
        return UCS_ERR_INVALID_ADDR;
    }
    return UCS_OK;
}

int uct_hipower_cm_ep_leads_to(const uct_hipower_ep_t *ep,
                               const uct_iface_addr_t *addr)
{
    const hipower_hs_iface_addr_t *peer = (const hipower_hs_iface_addr_t*)addr;

    return (peer != NULL) && (hipower_hs_iface_addr_check(peer, 0) == NULL) &&
           (peer->uuid == ep->cm.peer_uuid);
}

ucs_status_t uct_hipower_ep_create(const uct_ep_params_t *params,
                                   uct_ep_h *ep_p)
{
    uct_hipower_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_hipower_iface_t);
    ucs_async_context_t *async = iface->super.worker->async;
    const hipower_hs_iface_addr_t *peer;
    ucs_conn_match_elem_t *elem;
    uct_hipower_ep_t *ep, *other;
    ucs_status_t status;
    ucs_conn_sn_t sn;
    size_t length = 0;
    uct_ep_h tl_ep;

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) ||
        !iface->cm.enabled) {
        return uct_hipower_cm_ep_new(params, ep_p);
    }

#if HIPOWER_UCX_IFACE_OPS_V2
    if (params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR_LENGTH) {
        length = params->iface_addr_length;
    }
#endif
    peer = (const hipower_hs_iface_addr_t*)params->iface_addr;
    if (uct_hipower_cm_iface_addr_valid(iface, params->iface_addr,
                                        length) != UCS_OK) {
        ucs_error("hipower %s: cannot connect to that interface address: "
                  "not one of this hipower version with "
                  "UCX_HIPOWER_CONNECT_TO_IFACE on", iface->dev_name);
        return UCS_ERR_UNREACHABLE;
    }

    UCS_ASYNC_BLOCK(async);
    sn = ucs_conn_match_get_next_sn(&iface->cm.match, &peer->uuid);
    if (peer->uuid != iface->cm.addr.uuid) {
        /* The internal endpoints the peer's REQs made for this pair, one
         * per host (uct_hipower_cm_req_match()): the one from the host of
         * the address the user has for that interface (UCP's, trusted) is
         * the user's. The others' requests came from elsewhere: someone who
         * knew the peer's id claimed its pair. Never the user's: closed
         * (M4). With none from the peer's host the user's endpoint
         * connects by itself. */
        ep = NULL;
        while ((elem = ucs_conn_match_get_elem(&iface->cm.match, &peer->uuid,
                                               sn, UCS_CONN_MATCH_QUEUE_UNEXP,
                                               1)) != NULL) {
            other             = ucs_container_of(elem, uct_hipower_ep_t,
                                                 cm.elem);
            other->cm.matched = 0;
            if ((ep == NULL) &&
                uct_hipower_cm_same_host(&other->cm.peer, peer)) {
                ep = other;
                continue;
            }
            iface->stats.cm_foreign++;
            ucs_warn(UCT_HIPOWER_EP_FMT ": a request from another host than "
                     "interface %016" PRIx64 "'s address claimed its "
                     "endpoint %" PRIu64 "; closed, not given to the user",
                     UCT_HIPOWER_EP_ARG(other), peer->uuid, sn);
            uct_hipower_ep_set_failed(other, UCS_ERR_REJECTED);
        }
        if (ep != NULL) {
            /* The peer connected it already: it is the user's now */
            ep->cm.matched  = 0;
            ep->cm.internal = 0;
            ep->cm.peer     = *peer;
            --iface->cm.num_internal;
            iface->stats.cm_adopted++;
            uct_hipower_cm_match_add(ep, UCS_CONN_MATCH_QUEUE_EXP);
            ucs_debug(UCT_HIPOWER_EP_FMT ": taken by the user (endpoint %"
                      PRIu64 " to interface %016" PRIx64 ")",
                      UCT_HIPOWER_EP_ARG(ep), sn, peer->uuid);
            *ep_p = &ep->super.super;
            UCS_ASYNC_UNBLOCK(async);
            return UCS_OK;
        }
    }

    status = uct_hipower_cm_ep_new(params, &tl_ep);
    if (status == UCS_OK) {
        ep               = ucs_derived_of(tl_ep, uct_hipower_ep_t);
        ep->cm.state     = UCT_HIPOWER_CM_IDLE;
        ep->cm.peer      = *peer;
        ep->cm.peer_uuid = peer->uuid;
        ep->cm.conn_sn   = sn;
        uct_hipower_cm_match_add(ep, UCS_CONN_MATCH_QUEUE_EXP);
        *ep_p            = tl_ep;
    }
    UCS_ASYNC_UNBLOCK(async);
    return status;
}

#if HIPOWER_UCX_IFACE_OPS_V2
/* UCP asks whether an endpoint already leads to the peer it is wiring up.
 * One made from an interface address leads to that interface from its
 * creation on (UCP treats such lanes as connected), whatever its handshake
 * is doing: the same interface id. One connected endpoint to endpoint: the
 * same device (GID, LID) and, when given, the same remote QP. */
int uct_hipower_ep_is_connected(const uct_ep_h tl_ep,
                                const uct_ep_is_connected_params_t *params)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    const uct_hipower_device_addr_t *dev;
    const uct_hipower_ep_addr_t *ep_addr;

    if (ep->cm.state != UCT_HIPOWER_CM_NONE) {
        return (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) &&
               uct_hipower_cm_ep_leads_to(ep, params->iface_addr);
    }

    if (!(ep->flags & UCT_HIPOWER_EP_FLAG_QP_UP)) {
        return 0;
    }

    if (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR) {
        ep_addr = (const uct_hipower_ep_addr_t*)params->ep_addr;
        if (ep_addr->qp_num != ep->peer.qp_num) {
            return 0;
        }
    }

    if (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) {
        dev = (const uct_hipower_device_addr_t*)params->device_addr;
        if ((dev->lid != ep->peer.dev.lid) ||
            memcmp(&dev->gid, &ep->peer.dev.gid, sizeof(dev->gid))) {
            return 0;
        }
    }

    return 1;
}
#endif
