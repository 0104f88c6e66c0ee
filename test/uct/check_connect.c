/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Connecting to an interface (UCX_HIPOWER_CONNECT_TO_IFACE, issue 27,
 * docs/protocol.md section 10), through UCT's API and the transport's own
 * handshake code: endpoints made from a peer's interface address connect on
 * first use and carry checksummed messages both ways; the peer's endpoints
 * made later take over the ones its interface made for the requests;
 * crossed connects end in one connection; an endpoint to its own
 * interface works; a peer that is not there, or never answers, fails the
 * endpoint (UNREACHABLE, ENDPOINT_TIMEOUT) through the error handler;
 * malformed and stale requests from a raw socket are refused and cost the
 * listener nothing; an endpoint destroyed mid-handshake leaves nothing
 * behind; more endpoints than CM_MAX_CONNS queue and all connect.
 *
 * On the rig the listeners use the netdevs behind the GIDs; on the
 * simulator (whose devices have none) HIPOWER_TEST_CM_NETDEV=lo.
 */
#include "fixture.h"

#include <hipower_ep.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNECT_WAIT_SEC  60.0


static uct_hipower_iface_t *hiface(side_t *side)
{
    return ucs_derived_of(side->iface, uct_hipower_iface_t);
}

static uct_hipower_ep_t *hep(uct_ep_h ep)
{
    return ucs_derived_of(ep, uct_hipower_ep_t);
}

static ucs_status_t a_am_handler(void *arg, void *data, size_t length,
                                 unsigned flags)
{
    return am_handler(arg, data, length, flags);
}

/* Both sides with the handshake listener, @a timeout and @a max_conns
 * (NULL: defaults); A gets the same handlers as B */
static void connect_setup(const char *timeout, const char *max_conns)
{
    uint8_t id;

    cm_connect_to_iface = "y";
    cm_timeout          = timeout;
    cm_max_conns        = max_conns;
    setup_pairs(0);
    cm_connect_to_iface = NULL;
    cm_timeout          = NULL;
    cm_max_conns        = NULL;
    for (id = 0; id < NUM_AM_IDS; ++id) {
        ck_assert_int_eq(uct_iface_set_am_handler(side_a.iface, id,
                                                  a_am_handler,
                                                  (void*)(uintptr_t)id, 0),
                         UCS_OK);
    }
    ck_assert_msg(side_a.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE,
                  "no CONNECT_TO_IFACE with UCX_HIPOWER_CONNECT_TO_IFACE=y");
    ck_assert_msg(side_a.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP,
                  "CONNECT_TO_EP lost (UCP's client/server path needs it)");
    ck_assert_uint_eq(side_a.attr.iface_addr_len,
                      sizeof(hipower_hs_iface_addr_t));
}

static void iface_address(side_t *side, hipower_hs_iface_addr_t *addr)
{
    ck_assert_int_eq(uct_iface_get_address(side->iface,
                                           (uct_iface_addr_t*)addr), UCS_OK);
    ck_assert_uint_eq(addr->version, HIPOWER_HS_VERSION);
    ck_assert((addr->family == HIPOWER_HS_AF_INET) ||
              (addr->family == HIPOWER_HS_AF_INET6));
    ck_assert_uint_ne(addr->port, 0);
    ck_assert_uint_ne(addr->uuid, 0);
}

/* An endpoint of @a from to the interface at @a addr, as UCP makes it */
static ucs_status_t ep_to_iface(side_t *from, side_t *to_dev,
                                const hipower_hs_iface_addr_t *addr,
                                uct_ep_h *ep_p)
{
    uct_ep_params_t params;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                        UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = from->iface;
    params.dev_addr   = to_dev->dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)addr;
    return uct_ep_create(&params, ep_p);
}

/* Sends @a count messages on pair @a p, each retried until it goes (the
 * first ones wait for the handshake), progressing both sides */
static void send_retrying(int p, int count)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;
    ucs_status_t status;
    int i, layout;

    for (i = 0; i < count; ++i) {
        layout = i % 2;
        do {
            status = send_one(&pairs[p], p, i % NUM_AM_IDS,
                              fit_length(random_length(layout), layout),
                              layout);
            if (status == UCS_ERR_NO_RESOURCE) {
                progress(1, 1);
            }
            ck_assert_msg(now_sec() < deadline, "pair %d: message %d not "
                          "sent within %.0f s (handshake stuck?)", p, i,
                          CONNECT_WAIT_SEC);
        } while (status == UCS_ERR_NO_RESOURCE);
        ck_assert_int_eq(status, UCS_OK);
    }
}

static void wait_received(uint64_t count)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;

    while (received < count) {
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "%lu of %lu messages received",
                      (unsigned long)received, (unsigned long)count);
    }
    ck_assert_int_eq(errors, 0);
}

/* Until no handshake is under way on either side: the losing requests of
 * crossed connects may still be in flight when the messages are through */
static void wait_handshakes_done(void)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;

    while (!ucs_list_is_empty(&hiface(&side_a)->cm.sock.conns) ||
           !ucs_list_is_empty(&hiface(&side_b)->cm.sock.conns)) {
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "handshakes still under way");
    }
}

static void destroy_pairs(int first, int n)
{
    int i;

    for (i = first; i < first + n; ++i) {
        if (pairs[i].ep_a != NULL) {
            uct_ep_destroy(pairs[i].ep_a);
            pairs[i].ep_a = NULL;
        }
    }
}

static void connect_teardown(void)
{
    num_pairs = 0;
    release_held(0);
    close_side(&side_a);
    close_side(&side_b);
}

/*
 * A's endpoints, made from B's interface address, connect when first used;
 * B's interface makes an endpoint for each request; B's own endpoints to A,
 * made later, are those, already connected (no handshake of their own),
 * and carry messages back.
 */
#if HIPOWER_UCX_IFACE_OPS_V2
/* uct_ep_is_connected() (UCX >= 1.18) as UCP asks it when it re-wires:
 * with the peer's device and interface addresses */
static int ep_leads_to(uct_ep_h ep, side_t *to_dev,
                       const hipower_hs_iface_addr_t *addr)
{
    uct_ep_is_connected_params_t params;

    params.field_mask  = UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR |
                         UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR;
    params.device_addr = to_dev->dev_addr;
    params.iface_addr  = (const uct_iface_addr_t*)addr;
    return uct_ep_is_connected(ep, &params);
}
#endif

START_TEST(test_connect_first_use)
{
    const int n = 4, msgs = 40;
    hipower_hs_iface_addr_t addr_a, addr_b;
    uct_hipower_iface_t *ia, *ib;
    int i;

    connect_setup(NULL, NULL);
    ia = hiface(&side_a);
    ib = hiface(&side_b);
    iface_address(&side_a, &addr_a);
    iface_address(&side_b, &addr_b);
    ck_assert_uint_ne(addr_a.uuid, addr_b.uuid);

    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b,
                                     &pairs[i].ep_a), UCS_OK);
        ck_assert_int_eq(hep(pairs[i].ep_a)->cm.state, UCT_HIPOWER_CM_IDLE);
    }
    num_pairs = 2 * n;
#if HIPOWER_UCX_IFACE_OPS_V2
    /* Made from B's address: it leads there before it is connected */
    ck_assert(ep_leads_to(pairs[0].ep_a, &side_b, &addr_b));
    ck_assert(!ep_leads_to(pairs[0].ep_a, &side_a, &addr_a));
#endif
    /* Creating costs nothing: no request yet, nothing at B */
    progress(1, 1);
    ck_assert_uint_eq(ia->stats.cm_requests, 0);
    ck_assert_uint_eq(ib->num_eps, 0);

    for (i = 0; i < n; ++i) {
        send_retrying(i, msgs);
    }
    wait_received(n * msgs);
    ck_assert_uint_eq(ia->stats.cm_requests, n);
    ck_assert_uint_eq(ib->stats.cm_accepted, n);
    ck_assert_uint_eq(ib->stats.cm_internal, n);
    ck_assert_uint_eq(ib->cm.num_internal, n);
    ck_assert_uint_eq(ia->stats.cm_failed + ib->stats.cm_refused, 0);

    /* B's endpoints to A, in the same order: the internal ones */
    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(ep_to_iface(&side_b, &side_a, &addr_a,
                                     &pairs[n + i].ep_a), UCS_OK);
        ck_assert_int_eq(hep(pairs[n + i].ep_a)->cm.state,
                         UCT_HIPOWER_CM_CONNECTED);
        ck_assert_uint_eq(hep(pairs[n + i].ep_a)->peer.qp_num,
                          hep(pairs[i].ep_a)->txqp.qp->qp_num);
    }
    ck_assert_uint_eq(ib->stats.cm_adopted, n);
#if HIPOWER_UCX_IFACE_OPS_V2
    ck_assert(ep_leads_to(pairs[n].ep_a, &side_a, &addr_a));
    ck_assert(!ep_leads_to(pairs[n].ep_a, &side_b, &addr_b));
#endif
    ck_assert_uint_eq(ib->cm.num_internal, 0);
    ck_assert_uint_eq(ib->num_eps, n);
    for (i = 0; i < n; ++i) {
        send_retrying(n + i, msgs);
    }
    wait_received(2 * n * msgs);
    /* No handshake of their own */
    ck_assert_uint_eq(ib->stats.cm_requests, 0);
    ck_assert_uint_eq(ia->stats.cm_accepted, 0);

    destroy_pairs(0, 2 * n);
    connect_teardown();
}
END_TEST

/*
 * A peer that vanishes without a goodbye (its process killed: its QP stops
 * answering) does not leave the endpoint its interface made here until
 * the interface closes: it is probed every CONNECT_TIMEOUT and goes when
 * the probe fails, with no error for anybody at B (it has no user).
 */
START_TEST(test_connect_vanished_peer)
{
    hipower_hs_iface_addr_t addr_b;
    struct ibv_qp_attr attr;
    uct_hipower_iface_t *ib;
    double deadline, start;

    connect_setup("1s", NULL);
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    send_retrying(0, 4);
    wait_received(4);
    ck_assert_uint_eq(ib->cm.num_internal, 1);
    ck_assert_uint_eq(ib->num_eps, 1);

    /* Alive: probed, and kept */
    start    = now_sec();
    deadline = start + CONNECT_WAIT_SEC;
    while (ib->stats.cm_probes == 0) {
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "no probe of the internal "
                      "endpoint in %.0f s (CONNECT_TIMEOUT 1 s)",
                      CONNECT_WAIT_SEC);
    }
    while (now_sec() < start + 3.0) {
        progress(1, 1);
    }
    ck_assert_uint_eq(ib->cm.num_internal, 1);

    /* A's side dies without a word: its QP stops answering */
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_ERR;
    ck_assert_int_eq(ibv_modify_qp(hep(pairs[0].ep_a)->txqp.qp, &attr,
                                   IBV_QP_STATE), 0);
    deadline = now_sec() + CONNECT_WAIT_SEC;
    while (ib->num_eps > 0) {
        progress(0, 1);
        ck_assert_msg(now_sec() < deadline, "the internal endpoint of a "
                      "vanished peer still there after %.0f s",
                      CONNECT_WAIT_SEC);
    }
    ck_assert_uint_eq(ib->cm.num_internal, 0);
    ck_assert_uint_eq(ep_errors_b, 0);

    destroy_pairs(0, 1);
    connect_teardown();
}
END_TEST

typedef struct {
    uct_pending_req_t super;
    int               sent;
} flush_req_t;

static ucs_status_t flush_req_cb(uct_pending_req_t *self)
{
    flush_req_t *req    = ucs_container_of(self, flush_req_t, super);
    ucs_status_t status = send_one(&pairs[0], 0, 0, fit_length(8, 0), 0);

    req->sent = (status == UCS_OK);
    return status;
}

/*
 * A request in the pending queue of an endpoint whose handshake is under
 * way is not flushed yet: uct_iface_flush() does not say UCS_OK before it
 * went and completed (UCP's worker flush, and so MPI_Win_fence, rely on
 * it).
 */
START_TEST(test_connect_flush_pending)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;
    hipower_hs_iface_addr_t addr_b;
    flush_req_t req;
    ucs_status_t status;

    connect_setup(NULL, NULL);
    iface_address(&side_b, &addr_b);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    ck_assert_int_eq(uct_iface_flush(side_a.iface, 0, NULL), UCS_OK);

    /* As UCP does: the send is refused, the request queued */
    req.sent       = 0;
    req.super.func = flush_req_cb;
    ck_assert_int_eq(send_one(&pairs[0], 0, 0, fit_length(8, 0), 0),
                     UCS_ERR_NO_RESOURCE);
    ck_assert_int_eq(uct_ep_pending_add(pairs[0].ep_a, &req.super, 0),
                     UCS_OK);
    /* In progress, as rc says it (not an error: UCP fails the flush) */
    ck_assert_int_eq(uct_iface_flush(side_a.iface, 0, NULL), UCS_INPROGRESS);

    while (!req.sent) {
        ck_assert_int_eq(uct_iface_flush(side_a.iface, 0, NULL),
                         UCS_INPROGRESS);
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "the pending send never went");
    }
    do {
        status = uct_iface_flush(side_a.iface, 0, NULL);
        ck_assert((status == UCS_OK) || (status == UCS_INPROGRESS));
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "the interface never flushed");
    } while (status != UCS_OK);
    wait_received(1);

    destroy_pairs(0, 1);
    connect_teardown();
}
END_TEST

/*
 * Both sides send first, at once, on each of @a n pairs of endpoints: one
 * connection per pair, the same one seen from both sides, nothing
 * internal left over.
 */
START_TEST(test_connect_crossed)
{
    const int n = 8, msgs = 20;
    hipower_hs_iface_addr_t addr_a, addr_b;
    uct_hipower_iface_t *ia, *ib;
    ucs_status_t status;
    int i;

    connect_setup(NULL, NULL);
    ia = hiface(&side_a);
    ib = hiface(&side_b);
    iface_address(&side_a, &addr_a);
    iface_address(&side_b, &addr_b);
    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b,
                                     &pairs[i].ep_a), UCS_OK);
        ck_assert_int_eq(ep_to_iface(&side_b, &side_a, &addr_a,
                                     &pairs[n + i].ep_a), UCS_OK);
    }
    num_pairs = 2 * n;
    /* Every endpoint's first send before any progress: all REQs out */
    for (i = 0; i < 2 * n; ++i) {
        status = send_one(&pairs[i], i, 0, MSG_HDR_SIZE, 0);
        ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
    }
    for (i = 0; i < 2 * n; ++i) {
        send_retrying(i, msgs);
    }
    wait_received(2 * n * msgs);
    wait_handshakes_done();

    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(hep(pairs[i].ep_a)->cm.state,
                         UCT_HIPOWER_CM_CONNECTED);
        ck_assert_uint_eq(hep(pairs[i].ep_a)->peer.qp_num,
                          hep(pairs[n + i].ep_a)->txqp.qp->qp_num);
        ck_assert_uint_eq(hep(pairs[n + i].ep_a)->peer.qp_num,
                          hep(pairs[i].ep_a)->txqp.qp->qp_num);
    }
    ck_assert_uint_eq(ia->cm.num_internal + ib->cm.num_internal, 0);
    ck_assert_uint_eq(ia->num_eps, n);
    ck_assert_uint_eq(ib->num_eps, n);
    ck_assert_uint_eq(ia->stats.cm_requests + ib->stats.cm_requests, 2 * n);
    /* Each crossed pair: one REQ taken, the other answered CROSSED (or
     * DUPLICATE, when it came after the first's REP) */
    ck_assert_uint_eq(ia->stats.cm_accepted + ib->stats.cm_accepted, n);
    ck_assert_uint_eq(ia->stats.cm_crossed + ib->stats.cm_crossed, n);
    ck_assert_uint_eq(ia->stats.cm_failed + ib->stats.cm_failed, 0);
    ck_assert_uint_eq(ep_errors_a + ep_errors_b, 0);

    destroy_pairs(0, 2 * n);
    connect_teardown();
}
END_TEST

/* An endpoint to its own interface: its REQ gets an internal endpoint,
 * never the endpoint that sent it */
START_TEST(test_connect_self)
{
    hipower_hs_iface_addr_t addr_a;
    uct_hipower_iface_t *ia;

    connect_setup(NULL, NULL);
    ia = hiface(&side_a);
    iface_address(&side_a, &addr_a);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_a, &addr_a, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    send_retrying(0, 30);
    wait_received(30);
    ck_assert_uint_eq(ia->stats.cm_internal, 1);
    ck_assert_uint_eq(ia->num_eps, 2);
    destroy_pairs(0, 1);
    /* Its peer closed: the internal endpoint goes, from progress */
    progress(1, 1);
    connect_teardown();
}
END_TEST

/* Waits for A's error handler, progressing A */
static void wait_error_a(unsigned before, double limit)
{
    double deadline = now_sec() + limit;

    while (ep_errors_a == before) {
        progress(1, 0);
        ck_assert_msg(now_sec() < deadline, "no error reported within %.0f "
                      "s", limit);
    }
}

/* A listener that is not there: UNREACHABLE at once; one that accepts and
 * never answers: ENDPOINT_TIMEOUT at CONNECT_TIMEOUT. Each through the
 * error handler, once, and the endpoint can then be destroyed. */
START_TEST(test_connect_unreachable_and_silent)
{
    struct sockaddr_in sin;
    hipower_hs_iface_addr_t addr_b, bad;
    socklen_t len = sizeof(sin);
    double start, took;
    int lfd;

    connect_setup("1s", NULL);
    iface_address(&side_b, &addr_b);

    /* A port nobody listens on: one we bound and closed */
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    memcpy(&sin.sin_addr, addr_b.ip, 4);
    ck_assert_int_eq(bind(lfd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr*)&sin, &len), 0);
    close(lfd);
    bad      = addr_b;
    bad.port = sin.sin_port;
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &bad, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    ck_assert_int_eq(send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0), UCS_ERR_NO_RESOURCE);
    wait_error_a(0, 10);
    ck_assert_int_eq(ep_error_status, UCS_ERR_UNREACHABLE);
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;

    /* A listener that never answers */
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    sin.sin_port = 0;
    ck_assert_int_eq(bind(lfd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    len = sizeof(sin);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr*)&sin, &len), 0);
    bad.port = sin.sin_port;
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &bad, &pairs[0].ep_a),
                     UCS_OK);
    /* Timed by UCX's clock, which the deadline uses (calibrated at start-up:
     * on a loaded machine it may run some percent off the wall clock) */
    start = ucs_time_to_sec(ucs_get_time());
    ck_assert_int_eq(send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0), UCS_ERR_NO_RESOURCE);
    wait_error_a(1, 30);
    took = ucs_time_to_sec(ucs_get_time()) - start;
    ck_assert_int_eq(ep_error_status, UCS_ERR_ENDPOINT_TIMEOUT);
    ck_assert_msg((took > 0.8) && (took < 10), "timed out after %.1f s, "
                  "CONNECT_TIMEOUT is 1 s", took);
    ck_assert_uint_eq(ep_errors_a, 2);
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    close(lfd);
    connect_teardown();
}
END_TEST

/* A request as a client of our own would write it, field by field (the
 * plugin's packer is not linked here: the simulator's coverage counts the
 * plugin's own copy) */
static void raw_pack(hipower_hs_msg_t *msg, uint64_t src, uint64_t dst,
                     uint8_t dev_len, uint8_t ep_len)
{
    memset(msg, 0, sizeof(*msg));
    msg->magic        = HIPOWER_HS_MAGIC;
    msg->version      = HIPOWER_HS_VERSION;
    msg->type         = HIPOWER_HS_REQ;
    msg->length       = HIPOWER_HS_MSG_SIZE;
    msg->src_uuid     = src;
    msg->dst_uuid     = dst;
    msg->dev_addr_len = dev_len;
    msg->ep_addr_len  = ep_len;
    memset(msg->ep_addr, 0x77, ep_len);
}

static unsigned raw_acks; /* ACKs raw_request() skipped */
/* Where raw_request() connects from: 0.0.0.0 (any), or an impostor's IP */
static struct in_addr raw_source;

/* A raw TCP client of B's listener: sends @a len bytes of @a msg, then
 * reads the answer (up to 128 bytes, after any ACK) or EOF; returns the
 * bytes read */
static ssize_t raw_request(const hipower_hs_iface_addr_t *addr,
                           const void *msg, size_t len, hipower_hs_msg_t *ans)
{
    struct sockaddr_in sin;
    double deadline = now_sec() + CONNECT_WAIT_SEC;
    ssize_t got = 0, ret;
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr   = raw_source;
    ck_assert_msg(bind(fd, (struct sockaddr*)&sin, sizeof(sin)) == 0,
                  "bind to %s: %m", inet_ntoa(raw_source));
    sin.sin_port   = addr->port;
    memcpy(&sin.sin_addr, addr->ip, 4);
    ret = connect(fd, (struct sockaddr*)&sin, sizeof(sin));
    ck_assert(((ret == 0) || (errno == EINPROGRESS)));
    while (send(fd, msg, len, MSG_NOSIGNAL) < 0) {
        ck_assert_int_eq(errno, EAGAIN);
        progress(1, 1);
        ck_assert(now_sec() < deadline);
    }
    memset(ans, 0, sizeof(*ans));
    for (;;) {
        ret = recv(fd, (char*)ans + got, sizeof(*ans) - got, 0);
        if (ret == 0) {
            break;
        } else if (ret > 0) {
            got += ret;
            if ((got == sizeof(*ans)) && (ans->type == HIPOWER_HS_ACK)) {
                /* "Answer to follow": the listener has it */
                ++raw_acks;
                got = 0;
            } else if (got == sizeof(*ans)) {
                break;
            }
        } else {
            ck_assert_int_eq(errno, EAGAIN);
        }
        progress(1, 1);
        ck_assert_msg(now_sec() < deadline, "no answer nor close");
    }
    close(fd);
    return got;
}

/*
 * Requests B must refuse: garbage, a request for another interface id (a
 * stale address), one whose addresses have the wrong size, a duplicate of a
 * connected pair; and a client that sends half a request and stalls. None
 * creates an endpoint; B's listener serves A normally afterwards.
 */
START_TEST(test_connect_hostile_requests)
{
    hipower_hs_iface_addr_t addr_b;
    hipower_hs_msg_t msg, ans;
    uct_hipower_iface_t *ib;
    uint8_t junk[HIPOWER_HS_MSG_SIZE];
    unsigned i;
    ssize_t got;

    connect_setup("1s", NULL);
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);

    /* Garbage: closed, nothing made */
    for (i = 0; i < sizeof(junk); ++i) {
        junk[i] = (uint8_t)next_rand();
    }
    got = raw_request(&addr_b, junk, sizeof(junk), &ans);
    ck_assert_int_eq(got, 0);
    ck_assert_uint_eq(ib->stats.cm_refused, 1);

    /* For another interface: REJ(WRONG_IFACE) */
    raw_pack(&msg, 0x1234, addr_b.uuid + 1, sizeof(uct_hipower_device_addr_t),
             sizeof(uct_hipower_ep_addr_t));
    got = raw_request(&addr_b, &msg, sizeof(msg), &ans);
    ck_assert_int_eq(got, sizeof(ans));
    ck_assert_uint_eq(ans.type, HIPOWER_HS_REJ);
    ck_assert_uint_eq(ans.reason, HIPOWER_HS_REASON_WRONG_IFACE);

    /* Addresses of another size: REJ(BAD_REQUEST) */
    raw_pack(&msg, 0x1234, addr_b.uuid, 3, 5);
    got = raw_request(&addr_b, &msg, sizeof(msg), &ans);
    ck_assert_int_eq(got, sizeof(ans));
    ck_assert_uint_eq(ans.reason, HIPOWER_HS_REASON_BAD_REQUEST);

    /* Well-formed, but addresses that no device takes (zero GID, a QP
     * that does not exist, a layout of nonsense): refused by the checks of
     * uct_ep_connect_to_ep(), the endpoint made for it goes again */
    raw_pack(&msg, 0x1234, addr_b.uuid, sizeof(uct_hipower_device_addr_t),
             sizeof(uct_hipower_ep_addr_t));
    got = raw_request(&addr_b, &msg, sizeof(msg), &ans);
    ck_assert_int_eq(got, sizeof(ans));
    ck_assert_uint_eq(ans.type, HIPOWER_HS_REJ);
    ck_assert_uint_eq(ans.reason, HIPOWER_HS_REASON_MISMATCH);
    progress(1, 1);
    ck_assert_uint_eq(ib->num_eps, 0);

    /* Half a request, then silence: closed at the deadline (1 s) */
    got = raw_request(&addr_b, &msg, 50, &ans);
    ck_assert_int_eq(got, 0);
    ck_assert_uint_eq(ib->num_eps, 0);
    ck_assert_uint_eq(ib->cm.sock.num_passive, 0);

    /* And the listener still serves */
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    send_retrying(0, 10);
    wait_received(10);
    ck_assert_uint_eq(ib->num_eps, 1);
    destroy_pairs(0, 1);
    connect_teardown();
}
END_TEST

/* Endpoints destroyed at every stage of their handshake: nothing leaks,
 * nothing fires later, the next endpoints connect */
START_TEST(test_connect_destroy_midway)
{
    hipower_hs_iface_addr_t addr_b;
    uct_hipower_iface_t *ia, *ib;
    int i, spins;

    connect_setup(NULL, NULL);
    ia = hiface(&side_a);
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);
    for (i = 0; i < 24; ++i) {
        ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b,
                                     &pairs[0].ep_a), UCS_OK);
        num_pairs = 1;
        (void)send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0);
        for (spins = 0; spins < i * 20; ++spins) {
            progress(1, 1);
        }
        uct_ep_destroy(pairs[0].ep_a);
        pairs[0].ep_a = NULL;
    }
    ck_assert_uint_eq(ia->cm.sock.num_active, 0);
    ck_assert_uint_eq(ia->num_eps, 0);
    ck_assert_uint_eq(ep_errors_a, 0);

    /* Whatever B made for them goes as their goodbyes or closes arrive;
     * the next endpoint connects */
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    pairs[0].next_seq = pairs[0].expected_seq = 0;
    received          = 0;
    send_retrying(0, 10);
    wait_received(10);
    destroy_pairs(0, 1);
    (void)ib;
    connect_teardown();
}
END_TEST

/* More endpoints than CM_MAX_CONNS connect at once: they queue, all get
 * connected, every message arrives */
START_TEST(test_connect_many_queued)
{
    const int n = 96, msgs = 4;
    hipower_hs_iface_addr_t addr_b;
    uct_hipower_iface_t *ia, *ib;
    int i;

    connect_setup(NULL, "4");
    ia = hiface(&side_a);
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);
    for (i = 0; i < n; ++i) {
        ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b,
                                     &pairs[i].ep_a), UCS_OK);
    }
    num_pairs = n;
    for (i = 0; i < n; ++i) {
        (void)send_one(&pairs[i], i, 0, MSG_HDR_SIZE, 0);
    }
    ck_assert_uint_le(ia->cm.sock.num_active, 4);
    for (i = 0; i < n; ++i) {
        send_retrying(i, msgs);
    }
    wait_received(n * msgs);
    ck_assert_uint_eq(ib->stats.cm_internal, n);
    ck_assert_uint_eq(ia->stats.cm_failed, 0);
    destroy_pairs(0, n);
    connect_teardown();
}
END_TEST


/*
 * A peer that computes (makes no UCX call) for 3 x CONNECT_TIMEOUT while
 * A connects to its interface and sends: B's async thread acknowledges
 * the request at once, A waits without a deadline, and connects and
 * delivers when B progresses again. No error anywhere (review H2). While
 * it waits, A's progress makes no system call per call (review P1).
 */
START_TEST(test_connect_busy_peer)
{
    hipower_hs_iface_addr_t addr_b;
    uct_hipower_iface_t *ia, *ib;
    uint64_t calls = 0, polls, first;
    double end;

    connect_setup("1s", NULL);
    ia = hiface(&side_a);
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    (void)send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0);
    first = pairs[0].next_seq;

    /* B computes: only its async thread runs */
    end = now_sec() + 1.0;
    while ((ib->stats.cm_acked == 0) || (ia->cm.sock.num_active > 0)) {
        progress(1, 0);
        ck_assert_msg(now_sec() < end + CONNECT_WAIT_SEC, "B's async thread "
                      "did not acknowledge the request");
    }
    polls = ia->stats.cm_polls;
    end   = now_sec() + 3.5;
    while (now_sec() < end) {
        progress(1, 0);
        ++calls;
    }
    ck_assert_msg(ep_errors_a == 0, "A's endpoint failed (%s) while B "
                  "computed", ucs_status_string(ep_error_status));
    ck_assert_uint_eq(ia->stats.cm_failed, 0);
    ck_assert_uint_eq(ib->num_eps, 0);
    ck_assert_uint_eq(ib->cm.sock.num_held, 1);
    ck_assert_msg(ia->stats.cm_polls - polls <= calls / 32 + 2,
                  "%lu polls in %lu progress calls while waiting",
                  (unsigned long)(ia->stats.cm_polls - polls),
                  (unsigned long)calls);

    /* B resumes: connected, and every message (the first one too) */
    send_retrying(0, 20);
    wait_received(first + 20);
    ck_assert_uint_eq(ep_errors_a + ep_errors_b, 0);
    ck_assert_uint_eq(ib->stats.cm_accepted, 1);
    ck_assert_uint_eq(ib->cm.sock.num_held, 0);
    destroy_pairs(0, 1);
    connect_teardown();
}
END_TEST

/* A listener of our own on B's address: accepts, reads the REQ whole */
static int raw_listener(const hipower_hs_iface_addr_t *addr_b,
                        hipower_hs_iface_addr_t *fake)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int lfd;

    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    memcpy(&sin.sin_addr, addr_b->ip, 4);
    ck_assert_int_eq(bind(lfd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr*)&sin, &len), 0);
    *fake      = *addr_b;
    fake->port = sin.sin_port;
    return lfd;
}

static int raw_accept_req(int lfd, hipower_hs_msg_t *req)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;
    size_t got      = 0;
    ssize_t ret;
    int fd;

    fcntl(lfd, F_SETFL, O_NONBLOCK);
    while ((fd = accept(lfd, NULL, NULL)) < 0) {
        ck_assert_int_eq(errno, EAGAIN);
        progress(1, 0);
        ck_assert(now_sec() < deadline);
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (got < sizeof(*req)) {
        ret = recv(fd, (char*)req + got, sizeof(*req) - got, 0);
        if (ret > 0) {
            got += ret;
        } else {
            ck_assert_int_ne(ret, 0);
            progress(1, 0);
        }
        ck_assert(now_sec() < deadline);
    }
    return fd;
}

/* The fake listener's ACK of @a req on @a fd: "answer to follow" */
static void raw_ack(int fd, const hipower_hs_iface_addr_t *fake,
                    const hipower_hs_msg_t *req)
{
    hipower_hs_msg_t ack;

    memset(&ack, 0, sizeof(ack));
    ack.magic    = HIPOWER_HS_MAGIC;
    ack.version  = HIPOWER_HS_VERSION;
    ack.type     = HIPOWER_HS_ACK;
    ack.length   = HIPOWER_HS_MSG_SIZE;
    ack.src_uuid = fake->uuid;
    ack.dst_uuid = req->src_uuid;
    ack.conn_sn  = req->conn_sn;
    ck_assert_int_eq(send(fd, &ack, sizeof(ack), MSG_NOSIGNAL), sizeof(ack));
}

/*
 * A's endpoint of pair 0 to a fake B (a listener of ours on B's address,
 * *@a lfd_p) with CONNECT_TIMEOUT @a timeout: it connects and sends, we
 * read its REQ (checked) and acknowledge it. Returns our end of that
 * connection.
 */
static int connect_to_fake(const char *timeout, hipower_hs_iface_addr_t *fake,
                           int *lfd_p)
{
    hipower_hs_iface_addr_t addr_a, addr_b;
    hipower_hs_msg_t req;
    int fd;

    connect_setup(timeout, NULL);
    iface_address(&side_a, &addr_a);
    iface_address(&side_b, &addr_b);
    *lfd_p = raw_listener(&addr_b, fake);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, fake, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    (void)send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0);
    fd = raw_accept_req(*lfd_p, &req);
    ck_assert_uint_eq(req.type, HIPOWER_HS_REQ);
    ck_assert_uint_eq(req.src_uuid, addr_a.uuid);
    raw_ack(fd, fake, &req);
    return fd;
}

/*
 * The peer acknowledged and then: stays silent for 3 x CONNECT_TIMEOUT (a
 * live host whose process computes: A keeps waiting, no error), then its
 * process dies (the socket closes): A fails at once. A peer that never
 * acknowledges still fails at CONNECT_TIMEOUT (unreachable_and_silent).
 */
START_TEST(test_connect_acked_then_gone)
{
    hipower_hs_iface_addr_t fake;
    double end;
    int lfd, fd;

    fd = connect_to_fake("1s", &fake, &lfd);

    end = now_sec() + 3.5;
    while (now_sec() < end) {
        progress(1, 0);
    }
    ck_assert_msg(ep_errors_a == 0, "failed (%s) while the peer computed",
                  ucs_status_string(ep_error_status));

    close(fd);
    wait_error_a(0, 10);
    ck_assert_int_eq(ep_error_status, UCS_ERR_CONNECTION_RESET);
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    close(lfd);
    connect_teardown();
}
END_TEST

/* All traffic on loopback dropped (@a on) or delivered again: the rig's
 * two devices are one guest's, so their addresses talk through lo, and
 * setting a link down does not stop that (seen: keepalive answered) */
static void loopback_drop(int on)
{
    const char *cmd = on ? "modprobe sch_netem 2>/dev/null; "
                           "tc qdisc add dev lo root netem loss 100%" :
                           "tc qdisc del dev lo root";

    ck_assert_msg(system(cmd) == 0, "'%s' failed", cmd);
    printf("host vanishes: %s\n", cmd);
    fflush(stdout);
}

/*
 * The peer's host vanishes after it acknowledged our request: nothing
 * answers any more (no FIN, no RST: every packet between the two is
 * dropped). TCP keepalive, on since the ACK, fails the handshake within
 * about CONNECT_TIMEOUT (idle half of it, then 3 probes a sixth of it
 * apart, at least 1 s each), and only that endpoint fails. Rig only
 * (port_down: it drops the guest's loopback traffic for a while).
 */
START_TEST(test_connect_host_vanishes)
{
    const double timeout = 4.0;
    hipower_hs_iface_addr_t fake;
    double end, start, took;
    int lfd, fd;

    fd = connect_to_fake("4s", &fake, &lfd);
    end = now_sec() + 0.5;
    while (now_sec() < end) {
        progress(1, 0);
    }
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_uint_eq(hiface(&side_a)->cm.sock.num_active, 0); /* acked */

    loopback_drop(1);
    start = now_sec();
    while ((ep_errors_a == 0) && (now_sec() - start < 6 * timeout)) {
        progress(1, 0);
    }
    took = now_sec() - start;
    loopback_drop(0);
    printf("host vanished: A's endpoint failed after %.1f s (%s), "
           "CONNECT_TIMEOUT %.0f s\n", took,
           ucs_status_string(ep_error_status), timeout);
    ck_assert_msg(ep_errors_a == 1, "A's endpoint did not fail within %.0f "
                  "s of its peer's host vanishing", 6 * timeout);
    ck_assert_msg(took < 2 * timeout, "failed after %.1f s, not within about "
                  "CONNECT_TIMEOUT (%.0f s)", took, timeout);
    ck_assert((ep_error_status == UCS_ERR_ENDPOINT_TIMEOUT) ||
              (ep_error_status == UCS_ERR_UNREACHABLE));
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    close(fd);
    close(lfd);
    connect_teardown();
}
END_TEST

void add_connect_port_down_tests(TCase *tcase)
{
    tcase_add_test(tcase, test_connect_host_vanishes);
}

/* Accepts one connection of A's and closes it unread, as a listener
 * closes an idle one (its first-message deadline, or to make room) */
static void raw_accept_close(int lfd)
{
    double deadline = now_sec() + CONNECT_WAIT_SEC;
    int fd;

    fcntl(lfd, F_SETFL, O_NONBLOCK);
    while ((fd = accept(lfd, NULL, NULL)) < 0) {
        ck_assert_int_eq(errno, EAGAIN);
        progress(1, 0);
        ck_assert_msg(now_sec() < deadline, "A did not connect (again)");
    }
    close(fd);
}

/*
 * The peer's listener closes A's connection before it read the request
 * (what an overloaded peer's guard against idle strangers does to a real
 * request, seen on the rig): nothing was taken, so A connects again, with
 * the same request, within the first connection's deadline; after the
 * ACK it waits as usual. A listener that closes every one fails the
 * endpoint after UCT_HIPOWER_CM_ATTEMPTS (4) connections, not in a loop.
 */
START_TEST(test_connect_closed_unread)
{
    hipower_hs_iface_addr_t addr_a, addr_b, fake;
    hipower_hs_msg_t req;
    uct_hipower_iface_t *ia;
    double end;
    int lfd, fd, i;

    connect_setup("10s", NULL);
    ia = hiface(&side_a);
    iface_address(&side_a, &addr_a);
    iface_address(&side_b, &addr_b);
    lfd = raw_listener(&addr_b, &fake);
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &fake, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    (void)send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0);
    for (i = 0; i < 3; ++i) {
        raw_accept_close(lfd);
    }
    fd = raw_accept_req(lfd, &req);
    ck_assert_msg(ep_errors_a == 0, "A's endpoint failed (%s) when the "
                  "listener closed its connection unread",
                  ucs_status_string(ep_error_status));
    ck_assert_uint_eq(req.type, HIPOWER_HS_REQ);
    ck_assert_uint_eq(req.src_uuid, addr_a.uuid);
    ck_assert_uint_eq(ia->stats.cm_retried, 3);
    ck_assert_uint_eq(ia->stats.cm_requests, 4);

    raw_ack(fd, &fake, &req);
    end = now_sec() + 0.5;
    while (now_sec() < end) {
        progress(1, 0);
    }
    ck_assert_uint_eq(ep_errors_a, 0);
    /* Acknowledged: a close now is the peer's end, no new attempt */
    close(fd);
    wait_error_a(0, 10);
    ck_assert_int_eq(ep_error_status, UCS_ERR_CONNECTION_RESET);
    ck_assert_uint_eq(ia->stats.cm_retried, 3);
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;

    /* Closed unread every time: failed at the fourth */
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &fake, &pairs[0].ep_a),
                     UCS_OK);
    (void)send_one(&pairs[0], 0, 0, MSG_HDR_SIZE, 0);
    for (i = 0; i < 4; ++i) {
        raw_accept_close(lfd);
    }
    wait_error_a(1, 10);
    ck_assert_int_eq(ep_error_status, UCS_ERR_CONNECTION_RESET);
    ck_assert_uint_eq(ia->stats.cm_retried, 6);
    ck_assert_uint_eq(ia->stats.cm_requests, 8);
    uct_ep_destroy(pairs[0].ep_a);
    pairs[0].ep_a = NULL;
    close(lfd);
    connect_teardown();
}
END_TEST

/* A TCP connection to @a addr that sends nothing */
static int idle_connection(const hipower_hs_iface_addr_t *addr)
{
    struct sockaddr_in sin;
    int fd, ret;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port   = addr->port;
    memcpy(&sin.sin_addr, addr->ip, 4);
    ret = connect(fd, (struct sockaddr*)&sin, sizeof(sin));
    ck_assert(((ret == 0) || (errno == EINPROGRESS)));
    return fd;
}

/*
 * Slowloris: 20 idle connections to B, whose listener reads 2 at a time,
 * then A connects. A real peer is served at once (the oldest idle one
 * makes room), idle ones are closed within about 1 s of their accept
 * whatever CONNECT_TIMEOUT is (review M3).
 */
START_TEST(test_connect_idle_flood)
{
    hipower_hs_iface_addr_t addr_b;
    uct_hipower_iface_t *ib;
    int fds[20], i;
    double end;

    connect_setup("30s", "2");
    ib = hiface(&side_b);
    iface_address(&side_b, &addr_b);
    for (i = 0; i < 20; ++i) {
        fds[i] = idle_connection(&addr_b);
    }
    /* Accepted (the async thread's or progress' accept) */
    end = now_sec() + 0.3;
    while (now_sec() < end) {
        progress(0, 1);
    }
    ck_assert_uint_le(ib->cm.sock.num_passive, 2);

    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    send_retrying(0, 10);
    wait_received(10);
    ck_assert_uint_eq(ep_errors_a + ep_errors_b, 0);

    /* The idle ones left: each is closed a second after it was accepted
     * or sooner to make room, 2 at a time: about 3 s for the 20 (some
     * accepted only now), far within CONNECT_TIMEOUT (30 s). Bounded by
     * that work, not by a clock a loaded machine stretches. */
    end = now_sec() + 15.0;
    while ((ib->cm.sock.num_passive > 0) || (ib->stats.cm_evicted < 20)) {
        progress(1, 1);
        ck_assert_msg(now_sec() < end, "%u idle connections still held, "
                      "%lu closed, 15 s later (CONNECT_TIMEOUT 30 s)",
                      ib->cm.sock.num_passive,
                      (unsigned long)ib->stats.cm_evicted);
    }
    for (i = 0; i < 20; ++i) {
        close(fds[i]);
    }
    destroy_pairs(0, 1);
    connect_teardown();
}
END_TEST

/* A stranger's request carries a real endpoint's addresses (A's), so that
 * it passes every check and gets an endpoint at B */
typedef struct {
    uct_hipower_device_addr_t dev;
    uct_hipower_ep_addr_t     ep;
} stranger_addrs_t;

static uct_ep_h stranger_endpoint(stranger_addrs_t *addrs)
{
    uct_ep_params_t params;
    uct_ep_h target;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_a.iface;
    ck_assert_int_eq(uct_ep_create(&params, &target), UCS_OK);
    memset(addrs, 0, sizeof(*addrs));
    ck_assert_int_eq(uct_iface_get_device_address(side_a.iface,
                                                  (uct_device_addr_t*)
                                                  &addrs->dev), UCS_OK);
    ck_assert_int_eq(uct_ep_get_address(target, (uct_ep_addr_t*)&addrs->ep),
                     UCS_OK);
    return target;
}

static void stranger_pack(hipower_hs_msg_t *msg, uint64_t src, uint64_t dst,
                          uint64_t conn_sn, const stranger_addrs_t *addrs)
{
    raw_pack(msg, src, dst, sizeof(addrs->dev), sizeof(addrs->ep));
    msg->conn_sn = conn_sn;
    memcpy(msg->dev_addr, &addrs->dev, sizeof(addrs->dev));
    memcpy(msg->ep_addr, &addrs->ep, sizeof(addrs->ep));
}

/*
 * Well-formed requests from a stranger: 32 with a valid layout (a real
 * endpoint's addresses) and distinct conn_sn. Internal endpoints stay
 * within the cap (3/4 of the endpoints the interface can hold), B's user
 * can still make its own, and a real peer still connects. A request that
 * claims B's own id from a connection B did not open is refused (M4).
 */
START_TEST(test_connect_stranger_requests)
{
    hipower_hs_iface_addr_t addr_b;
    stranger_addrs_t addrs;
    hipower_hs_msg_t msg, ans;
    uct_hipower_iface_t *ib;
    uct_ep_params_t params;
    uct_ep_h target, mine;
    unsigned i, rejected = 0;
    ssize_t got;

    /* 16 endpoints at most, with the shared pool (self mode) or without */
    setenv("UCX_HIPOWER_MAX_EPS", "16", 1);
    setenv("UCX_HIPOWER_SHARED_MAX_EPS", "16", 1);
    setenv("UCX_HIPOWER_MEM_BUDGET", "1m", 1);
    connect_setup("2s", NULL);
    unsetenv("UCX_HIPOWER_MAX_EPS");
    unsetenv("UCX_HIPOWER_SHARED_MAX_EPS");
    unsetenv("UCX_HIPOWER_MEM_BUDGET");
    ib = hiface(&side_b);
    ck_assert_uint_le(ib->config.eps_possible, 16);
    iface_address(&side_b, &addr_b);

    target = stranger_endpoint(&addrs);

    raw_acks = 0;
    for (i = 0; i < 32; ++i) {
        stranger_pack(&msg, 0x5eed0000beefull, addr_b.uuid, i, &addrs);
        got = raw_request(&addr_b, &msg, sizeof(msg), &ans);
        ck_assert_int_eq(got, sizeof(ans));
        ck_assert_uint_eq(ans.conn_sn, i);
        if (ans.type == HIPOWER_HS_REJ) {
            ck_assert_uint_eq(ans.reason, HIPOWER_HS_REASON_NO_RESOURCE);
            ++rejected;
        } else {
            ck_assert_uint_eq(ans.type, HIPOWER_HS_REP);
        }
    }
    ck_assert_uint_eq(raw_acks, 32);
    ck_assert_uint_le(ib->cm.num_internal,
                      ib->config.eps_possible - ib->config.eps_possible / 4);
    /* Room made by closing the silent ones: nobody refused */
    ck_assert_uint_eq(rejected, 0);
    ck_assert_uint_ge(ib->stats.cm_silent_evicted,
                      32 - ib->cm.num_internal);

    /* B's user still gets endpoints */
    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_b.iface;
    ck_assert_int_eq(uct_ep_create(&params, &mine), UCS_OK);
    uct_ep_destroy(mine);

    /* Our own id from a stranger's connection: refused, nothing made */
    stranger_pack(&msg, addr_b.uuid, addr_b.uuid, 1000, &addrs);
    i   = ib->cm.num_internal;
    got = raw_request(&addr_b, &msg, sizeof(msg), &ans);
    ck_assert_int_eq(got, sizeof(ans));
    ck_assert_uint_eq(ans.type, HIPOWER_HS_REJ);
    ck_assert_uint_eq(ans.reason, HIPOWER_HS_REASON_BAD_REQUEST);
    ck_assert_uint_eq(ib->cm.num_internal, i);

    /* And a real peer connects */
    ck_assert_int_eq(ep_to_iface(&side_a, &side_b, &addr_b, &pairs[0].ep_a),
                     UCS_OK);
    num_pairs = 1;
    send_retrying(0, 10);
    wait_received(10);
    ck_assert_uint_eq(ep_errors_a, 0);
    destroy_pairs(0, 1);
    uct_ep_destroy(target);
    connect_teardown();
}
END_TEST

/* The impostor tests' world: A's and B's interface addresses, and a
 * stranger endpoint at A whose addresses the stranger's requests carry */
typedef struct {
    hipower_hs_iface_addr_t addr_a, addr_b;
    stranger_addrs_t        addrs;
    uct_ep_h                target;
    uct_hipower_iface_t     *ib;
    hipower_hs_msg_t        ans; /* B's answer to the last claim */
} impostor_t;

static void impostor_setup(impostor_t *im)
{
    connect_setup("2s", NULL);
    iface_address(&side_a, &im->addr_a);
    iface_address(&side_b, &im->addr_b);
    im->target = stranger_endpoint(&im->addrs);
    im->ib     = hiface(&side_b);
}

/* A stranger's request to B for A's first pair, from another host than
 * A's address: B's own (the rig's two netdevs), or another loopback address
 * when both listen on lo (the simulator); B's answer in im->ans */
static void impostor_claim(impostor_t *im)
{
    hipower_hs_msg_t msg;
    ssize_t got;

    if (memcmp(im->addr_a.ip, im->addr_b.ip, 4)) {
        memcpy(&raw_source, im->addr_b.ip, 4);
    } else {
        raw_source.s_addr = htonl(0x7f000002);
    }
    stranger_pack(&msg, im->addr_a.uuid, im->addr_b.uuid, 0, &im->addrs);
    got = raw_request(&im->addr_b, &msg, sizeof(msg), &im->ans);
    raw_source.s_addr = htonl(INADDR_ANY);
    ck_assert_int_eq(got, sizeof(im->ans));
}

/* Into pair @a p: an endpoint from A to B's interface (@a a_to_b), or
 * from B to A's */
static void impostor_ep(impostor_t *im, int a_to_b, int p)
{
    ck_assert_int_eq(a_to_b ?
                     ep_to_iface(&side_a, &side_b, &im->addr_b, &pairs[p].ep_a) :
                     ep_to_iface(&side_b, &side_a, &im->addr_a, &pairs[p].ep_a),
                     UCS_OK);
}

/* The stranger's claim of a pair nobody at B holds: answered REP, with an
 * internal endpoint of its own */
static void impostor_claim_unheld(impostor_t *im)
{
    impostor_claim(im);
    ck_assert_uint_eq(im->ans.type, HIPOWER_HS_REP);
    ck_assert_uint_eq(im->ib->cm.num_internal, 1);
}

/* B's user's endpoint to A (pair 1), made before A's REQ: not connected */
static void impostor_b_endpoint(impostor_t *im)
{
    impostor_ep(im, 0, 1);
    ck_assert_int_eq(hep(pairs[1].ep_a)->cm.state, UCT_HIPOWER_CM_IDLE);
}

/* A's endpoint to B (pair 0) and B's user's endpoint to A (pair 1) are
 * each other's: 10 messages each way after @a before, every one checked */
static void impostor_check_pairs(impostor_t *im, uint64_t before)
{
    num_pairs = 2;
    send_retrying(0, 10);
    wait_received(before + 10);
    send_retrying(1, 10);
    wait_received(before + 20);
    ck_assert_uint_eq(ep_errors_a + ep_errors_b, 0);
    ck_assert_uint_eq(hep(pairs[1].ep_a)->peer.qp_num,
                      hep(pairs[0].ep_a)->txqp.qp->qp_num);
    /* No stranger's endpoint is left: closed and gone in progress */
    ck_assert_uint_eq(im->ib->cm.num_internal, 0);
    destroy_pairs(0, 2);
    uct_ep_destroy(im->target);
    connect_teardown();
}

/*
 * A stranger sends, from another host than A's address, a well-formed
 * request under A's interface id and A's first pair number, before A
 * connects. B's user's endpoint to A must not take that connection (its
 * messages would go to the stranger): it connects by itself, and A's real
 * endpoint pairs with it, both ways, every message checked (review M4).
 */
START_TEST(test_connect_impostor)
{
    impostor_t im;

    impostor_setup(&im);
    impostor_claim_unheld(&im);

    /* B's user: an endpoint of its own, not the stranger's */
    impostor_b_endpoint(&im);
    ck_assert_uint_eq(im.ib->stats.cm_foreign, 1);
    ck_assert_uint_eq(im.ib->stats.cm_adopted, 0);

    /* A's real first endpoint to B pairs with it, both ways */
    impostor_ep(&im, 1, 0);
    impostor_check_pairs(&im, 0);
}
END_TEST

/*
 * A stranger claims A's first pair at B before A connects, and A's real
 * REQ for it comes before B's user makes its endpoint to A. The real peer
 * is not locked out (it was answered DUPLICATE and its endpoint failed):
 * each host's REQ gets an internal endpoint of its own; a replay from the
 * stranger's host is answered DUPLICATE; B's user's endpoint takes A's,
 * the stranger's is closed. Both ways, every message checked (review M4).
 */
START_TEST(test_connect_impostor_first)
{
    impostor_t im;

    impostor_setup(&im);
    impostor_claim_unheld(&im);

    /* A's real endpoint for that pair connects, and sends */
    impostor_ep(&im, 1, 0);
    num_pairs = 1;
    send_retrying(0, 10);
    wait_received(10);
    ck_assert_uint_eq(ep_errors_a, 0);
    ck_assert_int_eq(hep(pairs[0].ep_a)->cm.state, UCT_HIPOWER_CM_CONNECTED);
    ck_assert_uint_eq(im.ib->cm.num_internal, 2);

    /* The stranger's host again: a replay of a pair it holds */
    impostor_claim(&im);
    ck_assert_uint_eq(im.ans.type, HIPOWER_HS_REJ);
    ck_assert_uint_eq(im.ans.reason, HIPOWER_HS_REASON_DUPLICATE);
    ck_assert_uint_eq(im.ib->cm.num_internal, 2);

    /* B's user: A's endpoint, not the stranger's */
    impostor_ep(&im, 0, 1);
    ck_assert_int_eq(hep(pairs[1].ep_a)->cm.state, UCT_HIPOWER_CM_CONNECTED);
    ck_assert_uint_eq(im.ib->stats.cm_adopted, 1);
    ck_assert_uint_eq(im.ib->stats.cm_foreign, 1);
    impostor_check_pairs(&im, 10);
}
END_TEST

/*
 * B's user has its endpoint to A (not connected yet) when a stranger's REQ
 * for that pair comes from another host than A's address: refused FOREIGN,
 * and the user's endpoint stays its own (it was connected to the
 * stranger's QP). Then A connects; both ways, every message checked.
 */
START_TEST(test_connect_impostor_after_user)
{
    impostor_t im;

    impostor_setup(&im);
    impostor_b_endpoint(&im);

    impostor_claim(&im);
    ck_assert_uint_eq(im.ans.type, HIPOWER_HS_REJ);
    ck_assert_uint_eq(im.ans.reason, HIPOWER_HS_REASON_FOREIGN);
    ck_assert_int_eq(hep(pairs[1].ep_a)->cm.state, UCT_HIPOWER_CM_IDLE);
    ck_assert_uint_eq(im.ib->stats.cm_foreign, 1);
    ck_assert_uint_eq(im.ib->cm.num_internal, 0);

    impostor_ep(&im, 1, 0);
    impostor_check_pairs(&im, 0);
}
END_TEST

void add_connect_tests(Suite *suite)
{
    TCase *tcase = tcase_create("connect");

    case_timeout(tcase, 600);
    tcase_add_test(tcase, test_connect_first_use);
    tcase_add_test(tcase, test_connect_crossed);
    tcase_add_test(tcase, test_connect_self);
    tcase_add_test(tcase, test_connect_unreachable_and_silent);
    tcase_add_test(tcase, test_connect_hostile_requests);
    tcase_add_test(tcase, test_connect_destroy_midway);
    tcase_add_test(tcase, test_connect_many_queued);
    tcase_add_test(tcase, test_connect_flush_pending);
    tcase_add_test(tcase, test_connect_vanished_peer);
    tcase_add_test(tcase, test_connect_busy_peer);
    tcase_add_test(tcase, test_connect_acked_then_gone);
    tcase_add_test(tcase, test_connect_closed_unread);
    tcase_add_test(tcase, test_connect_idle_flood);
    tcase_add_test(tcase, test_connect_stranger_requests);
    tcase_add_test(tcase, test_connect_impostor);
    tcase_add_test(tcase, test_connect_impostor_first);
    tcase_add_test(tcase, test_connect_impostor_after_user);
    suite_add_tcase(suite, tcase);
}
