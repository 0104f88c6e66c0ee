/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * hipower-lanes: which transports UCP puts on which lanes, between two
 * devices of this machine. Two UCP contexts and workers in one process, A on
 * device -a and B on device -b (UCX_NET_DEVICES for each), UCX_TLS and the
 * rest of UCX's configuration from the environment as usual. A connects to
 * B by worker address and sends B a small and a large tag message (checked),
 * which completes wireup and exercises rendezvous; then the tool prints
 * ucp_ep_print_info() of the A->B endpoint and a summary of which transport
 * carries the eager lane (am / tag_offload) and the rendezvous lanes
 * (rma_bw).
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LANES   16
#define SMALL_SIZE  64
#define TAG         0x4850ull

typedef struct {
    const char   *dev;
    ucp_context_h ctx;
    ucp_worker_h  worker;
} side_t;

typedef struct {
    char     rsc[128];     /* "tl/dev" */
    char     tl[64];
    int      am, tag_offload, rma_bw, am_bw, wireup, keepalive;
} lane_t;

static side_t a, b;
static const char *prog = "hipower-lanes";


static void die(const char *fmt, const char *arg, ucs_status_t status)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    if (status != UCS_OK) {
        fprintf(stderr, ": %s", ucs_status_string(status));
    }
    fprintf(stderr, "\n");
    exit(1);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: %s [-a DEV] [-b DEV] [--expect TL] [-s SIZE] [-q]\n"
"Connects a UCP worker on device A to one on device B in this process,\n"
"sends a small and a large tag message A->B (checked), prints\n"
"ucp_ep_print_info() of the A->B endpoint and which transport carries the\n"
"eager (am/tag) lane and the rendezvous (rma_bw) lanes.\n"
"  -a DEV         device of worker A, as in UCX_NET_DEVICES (default: the\n"
"                 first of $UCX_NET_DEVICES, else rxe0:1)\n"
"  -b DEV         device of worker B (default: the second of\n"
"                 $UCX_NET_DEVICES, else rxe1:1)\n"
"  --expect TL    exit 1 unless the eager lane and all rendezvous lanes are\n"
"                 on transport TL (and there is a rendezvous lane)\n"
"  -s SIZE        size of the large message (default 1048576)\n"
"  -q             print only the summary line\n"
"  -h             this help\n"
"UCX_TLS and all other UCX_* variables apply to both workers; run it with\n"
"hipower-run to have the hipower transport loaded.\n", prog);
}

static void side_init(side_t *s)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM |
                      UCP_FEATURE_RMA
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucp_config_t *config;
    ucs_status_t status;

    status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) {
        die("ucp_config_read%s", "", status);
    }
    status = ucp_config_modify(config, "NET_DEVICES", s->dev);
    if (status != UCS_OK) {
        die("NET_DEVICES=%s", s->dev, status);
    }
    status = ucp_init(&params, config, &s->ctx);
    ucp_config_release(config);
    if (status != UCS_OK) {
        die("ucp_init on %s", s->dev, status);
    }
    status = ucp_worker_create(s->ctx, &wparams, &s->worker);
    if (status != UCS_OK) {
        die("ucp_worker_create on %s", s->dev, status);
    }
}

static void progress_both(void)
{
    ucp_worker_progress(a.worker);
    ucp_worker_progress(b.worker);
}

static void wait_req(void *req, const char *what)
{
    ucs_status_t status;
    double deadline = now() + 120;

    if (req == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        die("%s", what, UCS_PTR_STATUS(req));
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        progress_both();
        if (now() > deadline) {
            die("%s: not complete after 120 s", what, UCS_OK);
        }
    }
    ucp_request_free(req);
    if (status != UCS_OK) {
        die("%s", what, status);
    }
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = seed >> 56;
    }
}

/* A -> B, checked on B */
static void transfer(ucp_ep_h ep, size_t size, const char *what)
{
    ucp_request_param_t sparam = { .op_attr_mask = 0 };
    ucp_request_param_t rparam = {
        .op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL
    };
    ucp_tag_recv_info_t info;
    uint8_t *sbuf = malloc(size), *rbuf = malloc(size), *ebuf = malloc(size);
    void *rreq, *sreq;
    ucs_status_t status;
    double deadline = now() + 120;

    if (sbuf == NULL || rbuf == NULL || ebuf == NULL) {
        die("out of memory%s", "", UCS_OK);
    }
    fill(sbuf, size, size);
    memcpy(ebuf, sbuf, size);
    memset(rbuf, 0, size);
    rreq = ucp_tag_recv_nbx(b.worker, rbuf, size, TAG + size, UINT64_MAX,
                            &rparam);
    if (UCS_PTR_IS_ERR(rreq)) {
        die("%s: ucp_tag_recv_nbx", what, UCS_PTR_STATUS(rreq));
    }
    sreq = ucp_tag_send_nbx(ep, sbuf, size, TAG + size, &sparam);
    wait_req(sreq, what);
    while ((status = ucp_tag_recv_request_test(rreq, &info)) ==
           UCS_INPROGRESS) {
        progress_both();
        if (now() > deadline) {
            die("%s: not received after 120 s", what, UCS_OK);
        }
    }
    ucp_request_free(rreq);
    if (status != UCS_OK) {
        die("%s: receive", what, status);
    }
    if (info.length != size || memcmp(rbuf, ebuf, size) != 0) {
        die("%s: the data arrived corrupted", what, UCS_OK);
    }
    free(sbuf);
    free(rbuf);
    free(ebuf);
}

static char *ep_info(ucp_ep_h ep)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL) {
        die("open_memstream%s", "", UCS_OK);
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    return text;
}

/*
 * Parses the lane lines of ucp_ep_print_info() (UCX 1.13,
 * ucp_ep_config_lane_info_str):
 *   #   lane[0]:  3:hipower/rxe0:1.0 md[2]  -> md[2]/hipower/sysdev[255] rma_bw#0 am am_bw#0 wireup
 * "lane[N]: cm NAME" lines (connection manager) are skipped.
 */
static int parse_lanes(const char *text, lane_t *lanes)
{
    const char *line, *p, *arrow;
    char buf[512], *tok, *save, *dot;
    int n = 0, rsc_index, len;
    unsigned lane;

    for (line = text; line != NULL && *line; line = p ? p + 1 : NULL) {
        p   = strchr(line, '\n');
        len = p ? (int)(p - line) : (int)strlen(line);
        if (len >= (int)sizeof(buf)) {
            len = sizeof(buf) - 1;
        }
        memcpy(buf, line, len);
        buf[len] = '\0';
        tok = strstr(buf, "lane[");
        if (tok == NULL || sscanf(tok, "lane[%u]:", &lane) != 1) {
            continue;
        }
        tok = strchr(tok, ':') + 1;
        while (*tok == ' ') {
            ++tok;
        }
        if (!strncmp(tok, "cm ", 3) || n == MAX_LANES) {
            continue;
        }
        memset(&lanes[n], 0, sizeof(lanes[n]));
        if (sscanf(tok, "%d:%127s", &rsc_index, lanes[n].rsc) != 2) {
            continue;
        }
        dot = strrchr(lanes[n].rsc, '.'); /* ".path_index" */
        if (dot != NULL) {
            *dot = '\0';
        }
        snprintf(lanes[n].tl, sizeof(lanes[n].tl), "%.*s",
                 (int)strcspn(lanes[n].rsc, "/"), lanes[n].rsc);
        arrow = strstr(tok, "->");
        if (arrow == NULL) {
            continue;
        }
        for (tok = strtok_r((char*)arrow + 2, " ", &save); tok != NULL;
             tok = strtok_r(NULL, " ", &save)) {
            if (!strcmp(tok, "am")) {
                lanes[n].am = 1;
            } else if (!strcmp(tok, "tag_offload")) {
                lanes[n].tag_offload = 1;
            } else if (!strncmp(tok, "rma_bw#", 7)) {
                lanes[n].rma_bw = 1;
            } else if (!strncmp(tok, "am_bw#", 6)) {
                lanes[n].am_bw = 1;
            } else if (!strncmp(tok, "wireup", 6)) {
                lanes[n].wireup = 1;
            } else if (!strcmp(tok, "keepalive")) {
                lanes[n].keepalive = 1;
            }
        }
        ++n;
    }
    return n;
}

/* Appends rsc to a comma-separated list unless it is there already */
static void list_add(char *list, size_t size, const char *rsc)
{
    char item[160], padded[1024];
    size_t len = strlen(list);

    snprintf(item, sizeof(item), ",%s,", rsc);
    snprintf(padded, sizeof(padded), ",%s,", list);
    if (strstr(padded, item) != NULL) {
        return;
    }
    snprintf(list + len, size - len, "%s%s", len ? "," : "", rsc);
}

int main(int argc, char **argv)
{
    static const struct option long_opts[] = {
        { "expect", required_argument, NULL, 'e' },
        { "help",   no_argument,       NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    ucp_ep_params_t eparams = { .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS };
    ucp_request_param_t cparam = { .op_attr_mask = 0 };
    char devs[2][128] = { "rxe0:1", "rxe1:1" }, *env, *copy, *tok, *save;
    char eager[512] = "", rndv[512] = "", am_bw[512] = "";
    const char *expect = NULL, *dev_a = NULL, *dev_b = NULL;
    size_t large = 1048576, addr_len;
    ucp_address_t *addr_b;
    lane_t lanes[MAX_LANES];
    int c, i, n, quiet = 0, bad = 0, ndev = 0;
    ucs_status_t status;
    ucp_ep_h ep;
    char *text;
    double deadline;

    while ((c = getopt_long(argc, argv, "a:b:s:qh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'a': dev_a = optarg; break;
        case 'b': dev_b = optarg; break;
        case 's': large = strtoull(optarg, NULL, 0); break;
        case 'q': quiet = 1; break;
        case 'e': expect = optarg; break;
        case 'h': usage(stdout); return 0;
        default:  usage(stderr); return 2;
        }
    }
    if (optind != argc || large == 0) {
        usage(stderr);
        return 2;
    }
    env = getenv("UCX_NET_DEVICES");
    if (env != NULL && *env && strcmp(env, "all") != 0) {
        copy = strdup(env);
        for (tok = strtok_r(copy, ",", &save); tok != NULL && ndev < 2;
             tok = strtok_r(NULL, ",", &save)) {
            snprintf(devs[ndev++], sizeof(devs[0]), "%s", tok);
        }
        if (ndev == 1) {
            snprintf(devs[1], sizeof(devs[1]), "%s", devs[0]);
        }
        free(copy);
    }
    a.dev = dev_a ? dev_a : devs[0];
    b.dev = dev_b ? dev_b : devs[1];

    side_init(&a);
    side_init(&b);

    status = ucp_worker_get_address(b.worker, &addr_b, &addr_len);
    if (status != UCS_OK) {
        die("ucp_worker_get_address on %s", b.dev, status);
    }
    eparams.address = addr_b;
    status = ucp_ep_create(a.worker, &eparams, &ep);
    ucp_worker_release_address(b.worker, addr_b);
    if (status != UCS_OK) {
        fprintf(stderr, "%s: UCX_TLS=%s\n", prog,
                getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)");
        die("ucp_ep_create %s -> B", a.dev, status);
    }

    transfer(ep, SMALL_SIZE, "small tag message A->B");
    transfer(ep, large, "large tag message A->B");

    /* Wireup is complete once no lane is a wireup proxy ("wireup{aux}") */
    deadline = now() + 30;
    for (;;) {
        text = ep_info(ep);
        if (strstr(text, "wireup{") == NULL) {
            break;
        }
        if (now() > deadline) {
            fprintf(stderr, "%s: warning: wireup of %s -> %s not complete "
                    "after 30 s\n", prog, a.dev, b.dev);
            break;
        }
        free(text);
        for (i = 0; i < 1000; ++i) {
            progress_both();
        }
    }

    if (!quiet) {
        printf("# hipower-lanes: A = %s, B = %s, UCX_TLS=%s; small (%d B) "
               "and large (%zu B) tag messages A->B checked\n", a.dev, b.dev,
               getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)", SMALL_SIZE,
               large);
        fputs(text, stdout);
    }

    n = parse_lanes(text, lanes);
    free(text);
    if (n == 0) {
        fprintf(stderr, "%s: no lanes found in ucp_ep_print_info() output\n",
                prog);
        return 1;
    }
    for (i = 0; i < n; ++i) {
        if (lanes[i].am || lanes[i].tag_offload) {
            list_add(eager, sizeof(eager), lanes[i].rsc);
        }
        if (lanes[i].rma_bw) {
            list_add(rndv, sizeof(rndv), lanes[i].rsc);
        }
        if (lanes[i].am_bw) {
            list_add(am_bw, sizeof(am_bw), lanes[i].rsc);
        }
    }
    if (rndv[0]) {
        printf("hipower-lanes: eager: %s  rendezvous: %s\n",
               eager[0] ? eager : "none", rndv);
    } else {
        printf("hipower-lanes: eager: %s  rendezvous: none (no rma_bw lane; "
               "rendezvous data goes as active messages on am_bw: %s)\n",
               eager[0] ? eager : "none", am_bw[0] ? am_bw : "none");
    }

    if (expect != NULL) {
        for (i = 0; i < n; ++i) {
            if (((lanes[i].am || lanes[i].tag_offload || lanes[i].rma_bw) &&
                 strcmp(lanes[i].tl, expect) != 0)) {
                bad = 1;
            }
        }
        if (!eager[0] || !rndv[0] || bad) {
            fprintf(stderr, "%s: expected the eager and rendezvous lanes on "
                    "%s, got eager: %s, rendezvous (rma_bw): %s\n", prog,
                    expect, eager[0] ? eager : "none",
                    rndv[0] ? rndv : "none (no transport offers RMA for "
                    "rendezvous)");
        }
    }

    {
        void *req = ucp_ep_close_nbx(ep, &cparam);

        if (UCS_PTR_IS_ERR(req)) {
            fprintf(stderr, "%s: ucp_ep_close_nbx: %s\n", prog,
                    ucs_status_string(UCS_PTR_STATUS(req)));
        } else {
            wait_req(req, "ucp_ep_close_nbx");
        }
    }
    /* Let B see the disconnect before its worker goes */
    for (i = 0; i < 1000; ++i) {
        progress_both();
    }
    ucp_worker_destroy(a.worker);
    ucp_worker_destroy(b.worker);
    ucp_cleanup(a.ctx);
    ucp_cleanup(b.ctx);

    if (expect != NULL && (!eager[0] || !rndv[0] || bad)) {
        return 1;
    }
    return 0;
}
