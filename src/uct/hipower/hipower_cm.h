/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CM_H_
#define UCT_HIPOWER_CM_H_

#include "hipower_handshake.h"
#include "hipower_timer.h"

#include <uct/api/uct.h>
#include <ucs/datastruct/conn_match.h>
#include <ucs/datastruct/list.h>
#include <ucs/time/time_def.h>

/*
 * Connecting to an interface (UCT_IFACE_FLAG_CONNECT_TO_IFACE, issue 27):
 * the interface listens on a TCP port of its device's network interface,
 * an endpoint created from the peer's interface address connects its RC
 * QP through one handshake over it when it is first used, and UCP then
 * needs no auxiliary transport. The messages and decisions are
 * hipower_handshake.h's; this moves them (hipower_cm.c).
 *
 * Threads: UCX's async thread (or the user's thread, through
 * ucs_async_check_miss()) runs the socket handlers and the deadline
 * timer, under the worker's async lock; they only move bytes, acknowledge
 * a peer's whole request at once (HIPOWER_HS_ACK: the peer then waits as
 * long as our host is alive, not for a deadline, so a process that
 * computes for minutes is connected to when it next progresses), close
 * strangers' idle connections, and queue finished handshakes. Everything that touches endpoints, QPs or the CQ
 * runs in the interface's progress, under the same lock: endpoint
 * operations do not take that lock, so the async thread must not touch
 * what they touch. A handshake that finishes signals an eventfd that is
 * part of the interface's event fd, so a process asleep in
 * ucp_worker_wait() wakes for it.
 */

typedef enum {
    UCT_HIPOWER_CM_NONE = 0,    /* Connected by uct_ep_connect_to_ep() */
    UCT_HIPOWER_CM_IDLE,        /* From an interface address, unused yet */
    UCT_HIPOWER_CM_CONNECTING,  /* Our REQ out, or waiting to go out */
    UCT_HIPOWER_CM_AWAIT_PEER,  /* Told CROSSED: the peer's REQ is coming */
    UCT_HIPOWER_CM_CONNECTED,
    UCT_HIPOWER_CM_FAILED
} uct_hipower_cm_state_t;

typedef struct uct_hipower_cm_conn uct_hipower_cm_conn_t;

/* Which list an endpoint's cm.list is in */
enum {
    UCT_HIPOWER_CM_LISTED_NONE = 0,
    UCT_HIPOWER_CM_LISTED_WAITING,   /* Queued to connect */
    UCT_HIPOWER_CM_LISTED_DOOMED     /* Internal, to be destroyed */
};

/* An endpoint's part */
typedef struct uct_hipower_ep_cm {
    ucs_conn_match_elem_t        elem;       /* In the interface's matching */
    uint64_t                     peer_uuid;  /* Its matching key */
    uint64_t                     conn_sn;
    hipower_hs_iface_addr_t      peer;       /* Where its REQ goes */
    uint8_t                      state;      /* uct_hipower_cm_state_t */
    uint8_t                      internal;   /* Made for a peer's REQ, not
                                                given to the user (yet) */
    uint8_t                      matched;    /* In the matching, queue: */
    uint8_t                      queue;      /* ucs_conn_match_queue_type_t */
    uint8_t                      listed;     /* In cm.waiting or cm.doomed */
    uint8_t                      destroying; /* In uct_ep_destroy() */
    uint8_t                      attempts;   /* Connections its handshake
                                                made (uct_hipower_cm_retry()) */
    ucs_time_t                   deadline;   /* Of its first connection */
    uct_hipower_cm_conn_t        *conn;      /* Its handshake, if any */
    ucs_list_link_t              list;       /* Waiting to connect, or doomed */
} uct_hipower_ep_cm_t;

/* The interface's part */
typedef struct uct_hipower_cm {
    int                          enabled;
    int                          listen_fd;
    int                          event_fd;   /* Handlers' news for a sleeper */
    int                          io_epfd;    /* Listener and handshake
                                                sockets, polled by progress
                                                while handshakes run */
    hipower_hs_iface_addr_t      addr;       /* Our interface address */
    char                         addr_str[64];
    ucs_conn_match_ctx_t         match;      /* (peer id, conn_sn) -> ep */
    ucs_list_link_t              conns;      /* Handshakes under way */
    ucs_list_link_t              ready;      /* Finished, for progress */
    unsigned                     num_ready;
    unsigned                     num_active; /* Our REQs out, not acked */
    unsigned                     num_passive; /* Peers' REQs being read */
    unsigned                     num_held;   /* Peers' REQs read, acked,
                                                waiting for progress */
    unsigned                     max_conns;  /* Active and passive ones
                                                in their short phase, each */
    unsigned                     max_held;   /* Held REQs, at most */
    unsigned                     max_internal; /* Internal endpoints, at most */
    int                          in_poll;    /* uct_hipower_cm_poll() runs:
                                                conns are freed by progress */
    int                          listen_paused; /* max_conns being read,
                                                none old enough to close */
    ucs_list_link_t              waiting;    /* Endpoints queued to connect */
    ucs_list_link_t              doomed;     /* Internal eps to destroy */
    unsigned                     num_internal;
    int                          probe_due;  /* Timer to progress: probe
                                                the internal endpoints */
    ucs_time_t                   next_probe; /* When; 0: none planned */
    uct_hipower_timer_t          timer;      /* Deadlines and probes */
    ucs_time_t                   timeout;    /* UCX_HIPOWER_CONNECT_TIMEOUT */
    ucs_time_t                   last_warn;  /* Refused-request log limit */
} uct_hipower_cm_t;

struct uct_hipower_iface;
struct uct_hipower_ep;

/* Every interface's, on or off: what cleanup and progress look at */
void uct_hipower_cm_construct(struct uct_hipower_iface *iface);

/* Opens the listener; @a netdev: "auto" (the one behind the port's GID)
 * or a network interface's name. Cleans up after itself on failure. */
ucs_status_t uct_hipower_cm_open(struct uct_hipower_iface *iface,
                                 const char *netdev, ucs_time_t timeout,
                                 unsigned max_conns);

/* Closes the listener, destroys the internal endpoints, drops the
 * handshakes: before the interface's endpoints go */
void uct_hipower_cm_cleanup(struct uct_hipower_iface *iface);

/* Handshake sockets ready now, served from progress (while any handshake
 * is under way): returns how many */
unsigned uct_hipower_cm_poll(struct uct_hipower_iface *iface);

/* Finished handshakes, doomed endpoints, due probes: from progress */
unsigned uct_hipower_cm_progress(struct uct_hipower_iface *iface);

/* Wakes a process asleep in the interface's event fd (the eventfd is in
 * its set with the listener on) for news that progress will handle */
void uct_hipower_cm_signal(struct uct_hipower_iface *iface);

/* UCS_ERR_BUSY if handshakes wait for progress; drains the eventfd */
ucs_status_t uct_hipower_cm_arm(struct uct_hipower_iface *iface);

ucs_status_t uct_hipower_cm_iface_addr_valid(struct uct_hipower_iface *iface,
                                             const uct_iface_addr_t *addr,
                                             size_t length);

/* The iface ops' ep_create: to an interface address, or for connect_to_ep */
ucs_status_t uct_hipower_ep_create(const uct_ep_params_t *params,
                                   uct_ep_h *ep_p);

/* 1 if @a ep, made from an interface address (or for a peer's request),
 * leads to the interface whose address is @a addr */
int uct_hipower_cm_ep_leads_to(const struct uct_hipower_ep *ep,
                               const uct_iface_addr_t *addr);

/* An endpoint made from an interface address is used: connect it */
void uct_hipower_cm_ep_start(struct uct_hipower_ep *ep);

/* Before an endpoint goes: its handshake and matching entry */
void uct_hipower_cm_ep_cleanup(struct uct_hipower_ep *ep);

/* The endpoint failed or its peer closed: 1 if it is internal (nobody to
 * report to; it is destroyed from progress), 0 if the user's */
int uct_hipower_cm_ep_gone(struct uct_hipower_ep *ep);

#endif
