/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CM_SOCK_H_
#define UCT_HIPOWER_CM_SOCK_H_

#include "hipower_ep_def.h"

#include <ucs/async/async.h>
#include <sys/socket.h>

/*
 * The connection manager's sockets (hipower_cm_sock.c): the listener, the
 * handshake connections and their I/O in UCX's async thread, the deadline
 * timer, the eventfd that wakes a sleeper. hipower_cm.c decides what the
 * messages mean and what becomes of the endpoints.
 */

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



/* A handshake connection's interface, and its endpoint (active side;
 * NULL on the passive one) */
static inline uct_hipower_iface_t *
uct_hipower_cm_conn_iface(const uct_hipower_cm_conn_t *conn)
{
    return ucs_container_of(conn->cm, uct_hipower_iface_t, cm);
}

static inline uct_hipower_ep_t *
uct_hipower_cm_conn_ep(const uct_hipower_cm_conn_t *conn)
{
    return (conn->ep_cm == NULL) ? NULL :
           ucs_container_of(conn->ep_cm, uct_hipower_ep_t, cm);
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
void uct_hipower_cm_watch(uct_hipower_iface_t *iface, int fd,
                          void *data, ucs_event_set_types_t events,
                          int op);

/*
 * Passive: a whole message read, in the async thread. A valid REQ is
 * acknowledged now, whatever this process is doing, and held for progress
 * to connect and answer; the peer then waits for as long as we live.
 * Anything else is refused now: nothing of it waits for progress.
 */
void uct_hipower_cm_conn_got_req(uct_hipower_cm_conn_t *conn);

/* Reads and writes what the socket takes now; from UCX's async context */
void uct_hipower_cm_conn_io(int fd, ucs_event_set_types_t events,
                            void *arg);

void uct_hipower_cm_conn_close_fd(uct_hipower_cm_conn_t *conn);

/* Under the async lock */
void uct_hipower_cm_conn_free(uct_hipower_cm_conn_t *conn);

/* Handshakes past their deadline: failed, for progress to report.
 * Internal endpoints: probed every CONNECT_TIMEOUT by progress, so that
 * one whose peer vanished without a goodbye (killed, or its endpoint
 * destroyed mid-handshake) goes when its QP fails, not at interface close
 * (a peer that sends on it never needs a user's endpoint here). Stops
 * when neither is left, so an idle process has no timer waking it */
void uct_hipower_cm_timer(void *arg);

void uct_hipower_cm_timer_start(uct_hipower_iface_t *iface);

void uct_hipower_cm_pack_addresses(uct_hipower_ep_t *ep,
                                   hipower_hs_msg_t *msg,
                                   hipower_hs_type_t type,
                                   uint64_t dst_uuid,
                                   uint64_t conn_sn);

/* Opens the endpoint's TCP connection and sends its REQ once connected.
 * Under the async lock. */
ucs_status_t uct_hipower_cm_connect(uct_hipower_ep_t *ep);

/* The passive side's answer; the connection is closed after it */
void uct_hipower_cm_reply(uct_hipower_cm_conn_t *conn,
                          const hipower_hs_msg_t *msg);

void uct_hipower_cm_reject(uct_hipower_cm_conn_t *conn,
                           uint64_t dst_uuid, uint64_t conn_sn,
                           hipower_hs_reason_t reason);

/* A request we refuse for what it is, not for a crossed connect: one log
 * line per second at most, so a flood costs a line, not a log */
void uct_hipower_cm_refuse(uct_hipower_cm_conn_t *conn,
                           const char *why, hipower_hs_reason_t reason);

/*
 * At the cap of internal endpoints: the oldest one whose peer never wrote
 * to it goes. A real peer connects because it has something to send and
 * writes right after its REP; one that never wrote is a request nobody
 * meant to use (a stranger's, or a peer that left). Without this, anyone
 * who knows our address could keep every later peer out. 1 if one went.
 */
int uct_hipower_cm_evict_silent(uct_hipower_iface_t *iface);

ucs_status_t uct_hipower_cm_errno_status(int err);

/*
 * The listener is full of connections that have not sent their REQ: the
 * oldest goes if it is old enough to be idle (a real peer sends with its
 * connect). Pausing accept until the first-message deadline, as before,
 * let a stream of idle connections keep real peers in the kernel's
 * backlog for as long as it came (review M3). 1 if one was closed.
 */
int uct_hipower_cm_evict_idle(uct_hipower_iface_t *iface);

/* Accepts what connects; from UCX's async context */
void uct_hipower_cm_listen_io(int fd, ucs_event_set_types_t events,
                              void *arg);

/* The sockets' section before the interface opens anything */
void uct_hipower_cm_sock_init(uct_hipower_iface_t *iface);

/* The deadline timer's fds, the poll set, the eventfd (in the interface's
 * event fd, if any) and the listener; cleans up after itself on failure */
ucs_status_t uct_hipower_cm_sock_open(uct_hipower_iface_t *iface,
                                      const char *netdev);

/* No new connection, no deadline: the listener and the timer go (the
 * handshakes are freed after, then the fds closed) */
void uct_hipower_cm_sock_stop(uct_hipower_iface_t *iface);

void uct_hipower_cm_close_fds(uct_hipower_iface_t *iface);

/* Active, told CROSSED: the socket closes, the connection leaves the
 * ready queue and waits CONNECT_TIMEOUT for the peer's own REQ */
void uct_hipower_cm_conn_await(uct_hipower_cm_conn_t *conn);

/* 1 once per probe the timer asked for: progress probes the internal
 * endpoints then */
int uct_hipower_cm_probe_take(uct_hipower_iface_t *iface);

#endif
