/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CM_DEF_H_
#define UCT_HIPOWER_CM_DEF_H_

#include "hipower_handshake.h"
#include "hipower_timer.h"

#include <ucs/datastruct/conn_match.h>
#include <ucs/datastruct/list.h>
#include <ucs/time/time_def.h>
#include <sys/socket.h>

/*
 * The connection manager's data: an endpoint's part and the interface's
 * part (hipower_cm.c writes them, hipower_cm_sock.c the sockets' section),
 * here without the functions so that the endpoint and interface structs
 * below hipower_cm.c can hold them.
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
    ucs_list_link_t              list;       /* In cm.sock.conns */
    ucs_list_link_t              ready_list; /* In cm.sock.ready when queued */
    struct uct_hipower_cm        *cm;        /* Its interface's */
    struct uct_hipower_ep_cm     *ep_cm;     /* Active: our endpoint's;
                                                passive: NULL */
    int                          fd;
    int                          active;
    int                          state;      /* uct_hipower_conn_state_t */
    int                          queued;     /* In cm.sock.ready */
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
    struct {                                 /* hipower_cm_sock.c's */
        uint8_t                  attempts;   /* Connections its handshake
                                                made (uct_hipower_cm_retry()) */
        ucs_time_t               deadline;   /* Of its first connection */
        uct_hipower_cm_conn_t    *conn;      /* Its handshake, if any */
    } sock;
    ucs_list_link_t              list;       /* Waiting to connect, or doomed */
} uct_hipower_ep_cm_t;

/*
 * The interface's sockets: the listener, the handshakes' connections, the
 * deadline timer and what they hand to progress. hipower_cm_sock.c alone
 * writes them (test/layers/unit-graph --writers); hipower_cm.c reads them.
 */
typedef struct uct_hipower_cm_sock {
    int                          listen_fd;
    int                          event_fd;   /* Handlers' news for a sleeper */
    int                          io_epfd;    /* Listener and handshake
                                                sockets, polled by progress
                                                while handshakes run */
    ucs_list_link_t              conns;      /* Handshakes under way */
    ucs_list_link_t              ready;      /* Finished, for progress */
    unsigned                     num_ready;
    unsigned                     num_active; /* Our REQs out, not acked */
    unsigned                     num_passive; /* Peers' REQs being read */
    unsigned                     num_held;   /* Peers' REQs read, acked,
                                                waiting for progress */
    int                          in_poll;    /* uct_hipower_cm_poll() runs:
                                                conns are freed by progress */
    int                          listen_paused; /* max_conns being read,
                                                none old enough to close */
    int                          probe_due;  /* Timer to progress: probe
                                                the internal endpoints */
    ucs_time_t                   next_probe; /* When; 0: none planned */
    uct_hipower_timer_t          timer;      /* Deadlines and probes */
    ucs_time_t                   last_warn;  /* Refused-request log limit */
} uct_hipower_cm_sock_t;

/* The interface's part: hipower_cm.c writes it, but for sock */
typedef struct uct_hipower_cm {
    int                          enabled;
    hipower_hs_iface_addr_t      addr;       /* Our interface address */
    char                         addr_str[64];
    ucs_conn_match_ctx_t         match;      /* (peer id, conn_sn) -> ep */
    unsigned                     max_conns;  /* Active and passive ones
                                                in their short phase, each */
    unsigned                     max_held;   /* Held REQs, at most */
    unsigned                     max_internal; /* Internal endpoints, at most */
    ucs_list_link_t              waiting;    /* Endpoints queued to connect */
    ucs_list_link_t              doomed;     /* Internal eps to destroy */
    unsigned                     num_internal;
    ucs_time_t                   timeout;    /* UCX_HIPOWER_CONNECT_TIMEOUT */
    /* hipower_cm.c's, called by hipower_cm_sock.c when a connection leaves
     * its short phase or ends: the next endpoints waiting may connect
     * (a call up that does not name the unit above) */
    void                         (*conn_room)(struct uct_hipower_cm *cm);
    uct_hipower_cm_sock_t        sock;       /* hipower_cm_sock.c's */
} uct_hipower_cm_t;

#endif
