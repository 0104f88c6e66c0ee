/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads connect: what opening endpoints costs (issue 27). Two
 * ranks, one interface each. Rank 1 creates --eps endpoints to rank 0's
 * worker address and sends on each, as soon as it is made, one 8-byte tag
 * message holding its index; rank 0 receives them all and checks that
 * every index came once. The clock runs at rank 1 from the first
 * ucp_ep_create() until every send completed and rank 0 said it has every
 * message (one message back on the first endpoint): with hipower alone
 * that is one handshake per endpoint (hipower_cm.c), with rc_verbs and
 * ud_verbs:aux UCP's wire-up over UD. Then rank 1 closes them all (flush),
 * timed apart.
 *
 * Output (rank 0): eps, connect_seconds, connect_us_per_ep, close_seconds,
 * close_us_per_ep.
 */
#define _GNU_SOURCE
#include "wl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_WINDOW  64   /* Sends in flight at rank 1 */


static void connect_rank0(void)
{
    uint64_t *got = wl_malloc(sizeof(uint64_t) * wl.eps);
    uint8_t *seen = calloc(wl.eps, 1);
    void **reqs   = calloc(wl.eps, sizeof(void*));
    ucp_tag_recv_info_t info;
    uint64_t done = 1;
    unsigned i, left;

    wl_where("connect: receiving one message per endpoint");
    for (i = 0; i < wl.eps; ++i) {
        reqs[i] = wl_recv(&got[i], sizeof(got[i]), WL_TAG(K_DATA, 1, 0),
                          ~WL_SEQ_MASK);
    }
    do {
        wl_step(0);
        for (i = 0, left = 0; i < wl.eps; ++i) {
            if ((reqs[i] != NULL) && wl_recv_test(&reqs[i], &info, 1)) {
                if ((got[i] >= wl.eps) || seen[got[i]]) {
                    wl_die("connect: endpoint index %" PRIu64 " twice or out "
                           "of range", got[i]);
                }
                seen[got[i]] = 1;
            }
            left += (reqs[i] != NULL);
        }
    } while (left > 0);
    wl_send_blocking(1, &done, sizeof(done), WL_TAG(K_DONE, 0, 0));
    free(reqs);
    free(seen);
    free(got);
}

static void connect_rank1(double *connect_s, double *close_s)
{
    ucp_ep_params_t eparams = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address    = (ucp_address_t*)wl_peer_address(0)
    };
    ucp_request_param_t param = { .op_attr_mask = 0 };
    ucp_ep_h *eps     = calloc(wl.eps, sizeof(ucp_ep_h));
    uint64_t *idx     = calloc(wl.eps, sizeof(uint64_t));
    void **reqs       = calloc(wl.eps, sizeof(void*));
    unsigned i, done = 0, left;
    ucs_status_t status;
    uint64_t ack;
    double t0;
    void *req;

    wl_where("connect: creating endpoints and sending on each");
    t0 = wl_now();
    for (i = 0; i < wl.eps; ++i) {
        status = ucp_ep_create(wl_worker(), &eparams, &eps[i]);
        if (status != UCS_OK) {
            wl_die("connect: ucp_ep_create number %u: %s", i,
                   ucs_status_string(status));
        }
        idx[i]  = i;
        reqs[i] = ucp_tag_send_nbx(eps[i], &idx[i], sizeof(idx[i]),
                                   WL_TAG(K_DATA, 1, i), &param);
        if (UCS_PTR_IS_ERR(reqs[i])) {
            wl_die("connect: send on endpoint %u: %s", i,
                   ucs_status_string(UCS_PTR_STATUS(reqs[i])));
        }
        /* At most CONNECT_WINDOW unfinished at once, as an application
         * that needs an answer before it goes on would have */
        while (i + 1 - done > CONNECT_WINDOW) {
            wl_step(0);
            while ((done <= i) && ((reqs[done] == NULL) ||
                                   wl_send_test(&reqs[done], 0))) {
                ++done;
            }
        }
    }
    do {
        wl_step(0);
        for (left = 0; done < wl.eps; ++done) {
            if ((reqs[done] != NULL) && !wl_send_test(&reqs[done], 0)) {
                left = 1;
                break;
            }
        }
    } while (left);
    wl_recv_blocking(0, &ack, sizeof(ack), WL_TAG(K_DONE, 0, 0));
    *connect_s = wl_now() - t0;

    wl_where("connect: closing the endpoints");
    t0 = wl_now();
    for (i = 0; i < wl.eps; ++i) {
        reqs[i] = ucp_ep_close_nbx(eps[i], &param);
        if (UCS_PTR_IS_ERR(reqs[i])) {
            wl_die("connect: closing endpoint %u: %s", i,
                   ucs_status_string(UCS_PTR_STATUS(reqs[i])));
        }
    }
    do {
        wl_step(0);
        for (i = 0, left = 0; i < wl.eps; ++i) {
            req = reqs[i];
            if ((req != NULL) &&
                (ucp_request_check_status(req) != UCS_INPROGRESS)) {
                ucp_request_free(req);
                reqs[i] = NULL;
            }
            left += (reqs[i] != NULL);
        }
    } while (left > 0);
    *close_s = wl_now() - t0;
    free(reqs);
    free(idx);
    free(eps);
}

int wl_run_connect(void)
{
    double t[2] = {0, 0}, all[2 * WL_MAX_RANKS];

    if (wl.nranks != 2) {
        wl_die("connect: needs 2 ranks, not %d", wl.nranks);
    }
    if (wl.rank == 0) {
        connect_rank0();
    } else {
        connect_rank1(&t[0], &t[1]);
    }
    wl_ctl_gather(t, sizeof(t), all);
    if (wl.rank == 0) {
        printf("bench-result pattern=connect ranks=2 wait=%d eps=%u "
               "connect_seconds=%.3f connect_us_per_ep=%.1f "
               "close_seconds=%.3f close_us_per_ep=%.1f\n", wl.wait_mode,
               wl.eps, all[2], 1e6 * all[2] / wl.eps, all[3],
               1e6 * all[3] / wl.eps);
        fflush(stdout);
    }
    return 0;
}
