/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: the UCP side. One context and one worker per rank
 * (features TAG, plus WAKEUP with --wait), worker addresses all-gathered
 * over the control plane, endpoints created by worker address on first use.
 * Requests are polled (no callbacks); with --wait a rank that has nothing
 * to do arms its worker, progresses it once more (see wl_idle) and sleeps
 * in poll() on the worker's event fd (and on the control sockets, to notice
 * a peer that died) instead of spinning; the poll times out after 1 s, and
 * a timeout after which the worker had work counts as a lost wakeup.
 */
#define _GNU_SOURCE
#include "wl.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ucp_context_h g_ctx;
static ucp_worker_h  g_worker;
static int           g_efd = -1;
static ucp_ep_h      g_eps[WL_MAX_RANKS];
static char         *g_addrs;        /* nranks addresses of g_addr_len */
static size_t        g_addr_len;
unsigned             wl_lost_wakeups;
unsigned             wl_arm_races;

void wl_ucp_setup(void)
{
    ucp_params_t params = {
        .field_mask        = UCP_PARAM_FIELD_FEATURES |
                             UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
        .features          = UCP_FEATURE_TAG,
        .estimated_num_eps = wl.nranks
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    uint64_t lens[WL_MAX_RANKS], len, max_len = 0;
    ucp_address_t *addr;
    size_t addr_len;
    ucs_status_t status;
    char *mine;
    int r;

    wl_where("UCP setup");
    if (wl.wakeup) {
        params.features |= UCP_FEATURE_WAKEUP;
    }
    status = ucp_init(&params, NULL, &g_ctx);
    if (status != UCS_OK) {
        wl_die("ucp_init: %s", ucs_status_string(status));
    }
    status = ucp_worker_create(g_ctx, &wparams, &g_worker);
    if (status != UCS_OK) {
        wl_die("ucp_worker_create: %s", ucs_status_string(status));
    }
    if (wl.wakeup) {
        status = ucp_worker_get_efd(g_worker, &g_efd);
        if (status != UCS_OK) {
            wl_die("ucp_worker_get_efd (--wait): %s",
                   ucs_status_string(status));
        }
    }
    status = ucp_worker_get_address(g_worker, &addr, &addr_len);
    if (status != UCS_OK) {
        wl_die("ucp_worker_get_address: %s", ucs_status_string(status));
    }

    /* All-gather the addresses, padded to the longest one */
    len = addr_len;
    wl_ctl_allgather(&len, sizeof(len), lens);
    for (r = 0; r < wl.nranks; ++r) {
        max_len = lens[r] > max_len ? lens[r] : max_len;
    }
    if (max_len == 0 || max_len > 1048576) {
        wl_die("bad worker address length %" PRIu64, max_len);
    }
    g_addr_len = max_len;
    mine       = calloc(1, max_len);
    g_addrs    = wl_malloc(max_len * wl.nranks);
    memcpy(mine, addr, addr_len);
    ucp_worker_release_address(g_worker, addr);
    wl_ctl_allgather(mine, max_len, g_addrs);
    free(mine);
}

ucp_ep_h wl_ep(int peer)
{
    ucp_ep_params_t eparams = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
    };
    ucs_status_t status;

    if (g_eps[peer] != NULL) {
        return g_eps[peer];
    }
    eparams.address = (ucp_address_t*)(g_addrs + peer * g_addr_len);
    status = ucp_ep_create(g_worker, &eparams, &g_eps[peer]);
    if (status != UCS_OK) {
        wl_die("ucp_ep_create to rank %d: %s", peer,
               ucs_status_string(status));
    }
    if (wl.verbose && wl.rank <= 1 && peer <= 1) {
        ucp_ep_print_info(g_eps[peer], stderr);
    }
    return g_eps[peer];
}

ucp_worker_h wl_worker(void)
{
    return g_worker;
}

const ucp_address_t *wl_peer_address(int peer)
{
    return (const ucp_address_t*)(g_addrs + peer * g_addr_len);
}

void wl_ucp_teardown(void)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    void *reqs[WL_MAX_RANKS] = { NULL };
    int r, left;

    wl_ctl_barrier("before closing endpoints");
    wl_where("closing endpoints (flush)");
    for (r = 0; r < wl.nranks; ++r) {
        if (g_eps[r] == NULL) {
            continue;
        }
        reqs[r] = ucp_ep_close_nbx(g_eps[r], &param);
        g_eps[r] = NULL;
        if (UCS_PTR_IS_ERR(reqs[r])) {
            wl_die("closing the endpoint to rank %d: %s", r,
                   ucs_status_string(UCS_PTR_STATUS(reqs[r])));
        }
    }
    do {
        ucp_worker_progress(g_worker);
        for (r = 0, left = 0; r < wl.nranks; ++r) {
            if (reqs[r] != NULL &&
                ucp_request_check_status(reqs[r]) != UCS_INPROGRESS) {
                ucp_request_free(reqs[r]);
                reqs[r] = NULL;
            }
            left += reqs[r] != NULL;
        }
    } while (left > 0);
    wl_ctl_barrier("endpoints closed");
    ucp_worker_destroy(g_worker);
    g_worker = NULL;
    ucp_cleanup(g_ctx);
    g_ctx = NULL;
    free(g_addrs);
    g_addrs = NULL;
}

unsigned wl_progress(void)
{
    if (g_worker == NULL) {
        return 0;
    }
    wl_ctl_check_peers();
    return ucp_worker_progress(g_worker);
}

void wl_idle(void)
{
    struct pollfd pfds[WL_MAX_RANKS + 1];
    int fds[WL_MAX_RANKS], n, i, ret;
    ucs_status_t status;

    if (!wl.wait_mode) {
        return;
    }
    status = ucp_worker_arm(g_worker);
    if (status == UCS_ERR_BUSY) {
        return;
    } else if (status != UCS_OK) {
        wl_die("ucp_worker_arm: %s", ucs_status_string(status));
    }
    /* A completion that came after the last progress but before the arm
     * raises no event (UCX 1.13's verbs CQ arm, ibv_req_notify_cq, does not
     * look at the CQ again): progress once more, armed, before sleeping */
    if (ucp_worker_progress(g_worker) > 0) {
        ++wl_arm_races;
        return;
    }
    pfds[0].fd     = g_efd;
    pfds[0].events = POLLIN;
    n = wl_ctl_fds(fds, WL_MAX_RANKS);
    for (i = 0; i < n; ++i) {
        pfds[i + 1].fd     = fds[i];
        pfds[i + 1].events = POLLRDHUP;
    }
    ret = poll(pfds, n + 1, 1000);
    if (ret < 0 && errno != EINTR) {
        wl_die("poll on the worker's event fd: %s", strerror(errno));
    }
    if (ret == 0 && ucp_worker_progress(g_worker) > 0) {
        ++wl_lost_wakeups;
        wl_log("the worker's event fd stayed quiet for 1 s although the "
               "worker had work (a lost wakeup?) in %s", wl_where_now());
    }
    for (i = 1; i <= n; ++i) {
        if (pfds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
            wl_die("a peer exited (its control connection closed)");
        }
    }
}

const char *wl_wakeup_stats(void)
{
    static char str[64];
    unsigned mine[2] = { wl_lost_wakeups, wl_arm_races }, all[WL_MAX_RANKS][2];
    unsigned sum[2] = { 0, 0 };
    int r;

    wl_ctl_gather(mine, sizeof(mine), all);
    wl_lost_wakeups = wl_arm_races = 0;
    for (r = 0; wl.rank == 0 && r < wl.nranks; ++r) {
        sum[0] += all[r][0];
        sum[1] += all[r][1];
    }
    snprintf(str, sizeof(str), "lost_wakeups=%u arm_races=%u", sum[0], sum[1]);
    return str;
}

void wl_step(unsigned made)
{
    if (!wl_progress() && !made) {
        wl_idle();
    }
}

void *wl_send(int peer, const void *buf, size_t len, ucp_tag_t tag)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    ucs_status_ptr_t sp;

    sp = ucp_tag_send_nbx(wl_ep(peer), buf, len, tag, &param);
    if (UCS_PTR_IS_ERR(sp)) {
        wl_die("ucp_tag_send_nbx of %zu bytes to rank %d: %s", len, peer,
               ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    return sp;
}

void *wl_recv(void *buf, size_t len, ucp_tag_t tag, ucp_tag_t mask)
{
    /* UCX 1.13 does not fill the receive info on immediate completion:
     * always get a request */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL
    };
    ucs_status_ptr_t sp;

    sp = ucp_tag_recv_nbx(g_worker, buf, len, tag, mask, &param);
    if (UCS_PTR_IS_ERR(sp) || sp == NULL) {
        wl_die("ucp_tag_recv_nbx of %zu bytes from rank %d: %s", len,
               (int)((tag >> 48) & 0xff),
               sp == NULL ? "no request" :
               ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    return sp;
}

int wl_send_test(void **req, int peer)
{
    ucs_status_t status;

    if (*req == NULL) {
        return 1;
    }
    status = ucp_request_check_status(*req);
    if (status == UCS_INPROGRESS) {
        return 0;
    }
    ucp_request_free(*req);
    *req = NULL;
    if (status != UCS_OK) {
        wl_die("send to rank %d failed: %s", peer, ucs_status_string(status));
    }
    return 1;
}

int wl_recv_test(void **req, ucp_tag_recv_info_t *info, int peer)
{
    ucs_status_t status;

    if (*req == NULL) {
        return 1;
    }
    status = ucp_tag_recv_request_test(*req, info);
    if (status == UCS_INPROGRESS) {
        return 0;
    }
    ucp_request_free(*req);
    *req = NULL;
    if (status != UCS_OK) {
        wl_die("receive from rank %d failed: %s", peer,
               ucs_status_string(status));
    }
    return 1;
}

void wl_send_wait(void **req, int peer)
{
    while (!wl_send_test(req, peer)) {
        wl_step(0);
    }
}

void wl_recv_wait(void **req, ucp_tag_recv_info_t *info, int peer)
{
    while (!wl_recv_test(req, info, peer)) {
        wl_step(0);
    }
}

void wl_send_blocking(int peer, const void *buf, size_t len, ucp_tag_t tag)
{
    void *req = wl_send(peer, buf, len, tag);

    wl_send_wait(&req, peer);
}

size_t wl_recv_blocking(int peer, void *buf, size_t len, ucp_tag_t tag)
{
    ucp_tag_recv_info_t info;
    void *req = wl_recv(buf, len, tag, WL_FULL_MASK);

    wl_recv_wait(&req, &info, peer);
    return info.length;
}

void wl_warmup_peers(const int *peers, int n)
{
    void *sreqs[WL_MAX_RANKS], *rreqs[WL_MAX_RANKS];
    uint64_t out = wl_base(K_WARM, wl.rank, 0, 0), in[WL_MAX_RANKS];
    ucp_tag_recv_info_t info;
    int i;

    wl_where("warm-up exchange with %d peer(s)", n);
    for (i = 0; i < n; ++i) {
        rreqs[i] = wl_recv(&in[i], sizeof(in[i]),
                           WL_TAG(K_WARM, peers[i], wl.rank), WL_FULL_MASK);
    }
    for (i = 0; i < n; ++i) {
        sreqs[i] = wl_send(peers[i], &out, sizeof(out),
                           WL_TAG(K_WARM, wl.rank, peers[i]));
    }
    for (i = 0; i < n; ++i) {
        wl_send_wait(&sreqs[i], peers[i]);
        wl_recv_wait(&rreqs[i], &info, peers[i]);
        if (info.length != sizeof(in[i]) ||
            in[i] != wl_base(K_WARM, peers[i], 0, 0)) {
            wl_die("warm-up message from rank %d corrupted", peers[i]);
        }
    }
}
