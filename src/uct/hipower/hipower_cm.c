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
#include "hipower_cm_sock.h"

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

/* Starts the endpoints queued while max_conns handshakes were out */
static void uct_hipower_cm_ep_next(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep;

    while (!ucs_list_is_empty(&iface->cm.waiting) &&
           (iface->cm.sock.num_active < iface->cm.max_conns)) {
        ep = ucs_list_extract_head(&iface->cm.waiting, uct_hipower_ep_t,
                                   cm.list);
        ep->cm.listed = UCT_HIPOWER_CM_LISTED_NONE;
        if (uct_hipower_cm_connect(ep) != UCS_OK) {
            ep->cm.state = UCT_HIPOWER_CM_FAILED;
            uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
        }
    }
}

/* The interface's cm.conn_room: a handshake connection left its short
 * phase or ended (hipower_cm_sock.c) */
static void uct_hipower_cm_conn_room(uct_hipower_cm_t *cm)
{
    uct_hipower_iface_t *iface = ucs_container_of(cm, uct_hipower_iface_t,
                                                  cm);

    if (iface->cm.enabled) {
        uct_hipower_cm_ep_next(iface);
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
    if (ep->cm.sock.conn != NULL) {
        uct_hipower_cm_conn_free(ep->cm.sock.conn);
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
    if (ep->cm.sock.conn != NULL) {
        uct_hipower_cm_conn_free(ep->cm.sock.conn);
    }
    ep->cm.state = UCT_HIPOWER_CM_FAILED;
    uct_hipower_ep_iface(ep)->stats.cm_failed++;
    /* Internal ones are doomed there, not reported */
    uct_hipower_ep_set_failed(ep, status);
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
    uct_hipower_iface_t *iface  = uct_hipower_cm_conn_iface(conn);
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

    ucs_list_for_each(mine, &conn->cm->sock.conns, list) {
        len = sizeof(ss);
        if (!mine->active || (mine->fd < 0) ||
            (mine->ep_cm->peer_uuid != conn->in.src_uuid) ||
            (mine->ep_cm->conn_sn != conn->in.conn_sn) ||
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
    uct_hipower_iface_t *iface  = uct_hipower_cm_conn_iface(conn);
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
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);
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

    if ((ep->cm.sock.conn != NULL) &&
        (ep->cm.sock.conn->state == UCT_HIPOWER_CONN_AWAIT)) {
        uct_hipower_cm_conn_free(ep->cm.sock.conn);
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
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);
    uct_hipower_ep_t *ep       = uct_hipower_cm_conn_ep(conn);

    if ((conn->phase != UCT_HIPOWER_CONN_PHASE_SHORT) ||
        ((conn->err != ECONNRESET) && (conn->err != EPIPE)) ||
        (ep->cm.state != UCT_HIPOWER_CM_CONNECTING) ||
        (ep->cm.sock.attempts >= UCT_HIPOWER_CM_ATTEMPTS) ||
        (ucs_get_time() >= ep->cm.sock.deadline) || !iface->cm.enabled) {
        return 0;
    }

    ucs_diag(UCT_HIPOWER_EP_FMT ": %s closed the handshake before it read "
             "our request (its host overloaded?); connecting again (%u of "
             "%u)", UCT_HIPOWER_EP_ARG(ep), conn->peer_str,
             ep->cm.sock.attempts + 1, UCT_HIPOWER_CM_ATTEMPTS);
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
    uct_hipower_iface_t *iface = uct_hipower_cm_conn_iface(conn);
    uct_hipower_ep_t *ep        = uct_hipower_cm_conn_ep(conn);
    const hipower_hs_msg_t *msg = &conn->in;
    hipower_hs_rej_action_t rej;
    ucs_status_t status;
    const char *why;

    ucs_assert(ep != NULL);
    if (conn->state == UCT_HIPOWER_CONN_ERROR) {
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) {
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
                                   !!(ep->flags.all &
                                      UCT_HIPOWER_EP_FLAG_QP_UP));
        if (rej == HIPOWER_HS_REJ_DONE) {
            uct_hipower_cm_conn_free(conn);
        } else if (rej == HIPOWER_HS_REJ_AWAIT_PEER) {
            /* No socket any more: CONNECT_TIMEOUT for the peer's REQ */
            uct_hipower_cm_conn_await(conn);
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

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP) {
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

unsigned uct_hipower_cm_progress(uct_hipower_iface_t *iface)
{
    uct_hipower_cm_conn_t *conn;
    uct_hipower_ep_t *ep, *tmp;
    unsigned count = 0;

    while (!ucs_list_is_empty(&iface->cm.sock.ready)) {
        conn = ucs_list_head(&iface->cm.sock.ready, uct_hipower_cm_conn_t,
                             ready_list);
        ++count;
        if (conn->active) {
            if ((conn->state == UCT_HIPOWER_CONN_ERROR) &&
                (conn->ep_cm->state == UCT_HIPOWER_CM_AWAIT_PEER)) {
                conn->err = ETIMEDOUT;
            }
            uct_hipower_cm_active(conn);
        } else {
            uct_hipower_cm_passive(conn);
        }
    }

    ucs_list_for_each_safe(ep, tmp, &iface->cm.doomed, cm.list) {
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_IN_RX) {
            continue; /* A progress called by a handler of its walk */
        }
        ucs_debug(UCT_HIPOWER_EP_FMT ": internal endpoint closed by its peer",
                  UCT_HIPOWER_EP_ARG(ep));
        UCS_CLASS_DELETE_FUNC_NAME(uct_hipower_ep_t)(&ep->super.super);
        ++count;
    }

    if (uct_hipower_cm_probe_take(iface)) {
        /* A signaled zero-length write each (uct_ep_check()'s): a dead
         * peer fails it after the retries, and the failure dooms the
         * endpoint (uct_hipower_cm_ep_gone()). One busy with its own
         * signaled requests is probed by them. */
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
    while (read(iface->cm.sock.event_fd, &value, sizeof(value)) > 0) {
    }

    /* An edge the async thread found while the lock was taken is not
     * signaled again: look at the sockets before sleeping */
    if (!ucs_list_is_empty(&iface->cm.sock.conns)) {
        uct_hipower_cm_poll(iface);
    }

    if ((iface->cm.sock.num_ready > 0) ||
        !ucs_list_is_empty(&iface->cm.doomed) || iface->cm.sock.probe_due) {
        return UCS_ERR_BUSY;
    }
    return UCS_OK;
}

void uct_hipower_cm_construct(uct_hipower_iface_t *iface)
{
    iface->cm.enabled      = 0;
    iface->cm.timeout      = 0;
    iface->cm.max_conns    = 1;
    iface->cm.num_internal = 0;
    iface->cm.max_held     = 1;
    iface->cm.max_internal = 1;
    iface->cm.conn_room    = uct_hipower_cm_conn_room;
    memset(&iface->cm.addr, 0, sizeof(iface->cm.addr));
    iface->cm.addr_str[0]  = '\0';
    uct_hipower_cm_sock_init(iface);
    ucs_list_head_init(&iface->cm.waiting);
    ucs_list_head_init(&iface->cm.doomed);
    ucs_conn_match_init(&iface->cm.match, sizeof(uint64_t),
                        UCS_CONN_MATCH_SN_MAX, &uct_hipower_cm_match_ops);
}

ucs_status_t uct_hipower_cm_open(uct_hipower_iface_t *iface,
                                 const char *netdev, ucs_time_t timeout,
                                 unsigned max_conns)
{
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

    status = uct_hipower_cm_sock_open(iface, netdev);
    if (status != UCS_OK) {
        return status;
    }

    iface->cm.enabled = 1;
    return UCS_OK;
}

void uct_hipower_cm_cleanup(uct_hipower_iface_t *iface)
{
    ucs_async_context_t *async = iface->super.worker->async;
    uct_hipower_cm_conn_t *conn, *tmp_conn;
    uct_hipower_ep_t *ep, *tmp_ep;

    uct_hipower_cm_sock_stop(iface);

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
    ucs_list_for_each_safe(conn, tmp_conn, &iface->cm.sock.conns, list) {
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

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_QP_UP)) {
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
