/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: the ResNet-152 parameter-server flow of the HiPower paper.
 *
 * The tensor list is derived from the architecture (He et al. 2016, as in
 * torchvision's resnet152): conv1 7x7x3x64 + BatchNorm, four stages of
 * 3/8/36/3 bottleneck blocks (1x1 in->w, 3x3 w->w, 1x1 w->4w, each with a
 * BatchNorm gamma and beta; the first block of a stage has a 1x1 projection
 * shortcut in->4w with its BatchNorm), fc 2048x1000 + bias: 467 float32
 * tensors, 60,192,808 parameters (230 MiB).
 *
 * Rank 0 is the server, ranks 1..N-1 the workers. One iteration: a barrier;
 * every worker pushes its gradient of every tensor to the server (all sends
 * in flight at once); as soon as the server holds a tensor's gradient from
 * every worker (each one checked) it writes the new parameters (a pattern
 * of iteration and tensor) and sends them to every worker; each worker
 * checks every parameter tensor and then sends the server an 8-byte
 * "done". Flow completion time = from the server's release of the barrier
 * to the last worker's done.
 *
 * Scaling (the full model moves 2 x 230 MiB per worker per iteration):
 * --tensor-stride K sends only every K-th tensor (tensor 0, K, 2K, ...),
 * which keeps the sizes but leaves few (mostly large) tensors; --shrink D
 * divides the size of every tensor above 4 KB by D (not below 4 KB) and
 * leaves the small ones (half of all tensors, under 1 MB in all) as they
 * are: every tensor is still one message, the small ones exactly, and the
 * bytes shrink by about D.
 */
#include "wl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS  512
#define SHRINK_FLOOR 4096   /* --shrink leaves tensors up to this alone */

typedef struct {
    char   name[40];
    size_t bytes;
} tensor_t;

static tensor_t g_tensors[MAX_TENSORS];
static unsigned g_num_tensors;

static void add(const char *name, size_t params)
{
    tensor_t *t;

    if (g_num_tensors == MAX_TENSORS) {
        wl_die("internal: more than %d tensors", MAX_TENSORS);
    }
    t = &g_tensors[g_num_tensors++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->bytes = params * 4;
}

/* A convolution (no bias) followed by BatchNorm (gamma, beta) */
static void conv_bn(const char *name, unsigned k, unsigned in, unsigned out)
{
    static const char *const suffix[] = { "weight", "bn.gamma", "bn.beta" };
    char n[sizeof(g_tensors[0].name)];
    unsigned i;

    for (i = 0; i < 3; i++) {
        /* A truncated name would only mislabel a tensor, but say so */
        if (snprintf(n, sizeof(n), "%s.%s", name, suffix[i]) >= (int)sizeof(n)) {
            wl_die("internal: tensor name %s.%s too long", name, suffix[i]);
        }
        add(n, (i == 0) ? (size_t)k * k * in * out : out);
    }
}

static void build_resnet152(void)
{
    static const unsigned blocks[4] = { 3, 8, 36, 3 };
    static const unsigned widths[4] = { 64, 128, 256, 512 };
    unsigned s, b, in = 64, w;
    char n[40];

    g_num_tensors = 0;
    conv_bn("conv1", 7, 3, 64);
    for (s = 0; s < 4; ++s) {
        w = widths[s];
        for (b = 0; b < blocks[s]; ++b) {
            snprintf(n, sizeof(n), "conv%u_%u.a", s + 2, b + 1);
            conv_bn(n, 1, in, w);
            snprintf(n, sizeof(n), "conv%u_%u.b", s + 2, b + 1);
            conv_bn(n, 3, w, w);
            snprintf(n, sizeof(n), "conv%u_%u.c", s + 2, b + 1);
            conv_bn(n, 1, w, 4 * w);
            if (b == 0) {
                snprintf(n, sizeof(n), "conv%u_%u.proj", s + 2, b + 1);
                conv_bn(n, 1, in, 4 * w);
            }
            in = 4 * w;
        }
    }
    add("fc.weight", 2048 * 1000);
    add("fc.bias", 1000);
}

typedef struct {
    size_t   bytes;           /* as sent */
    unsigned index;           /* in g_tensors */
} sel_t;

static sel_t   *g_sel;
static unsigned g_nsel;
static size_t   g_full_bytes;    /* the whole model */

static void select_tensors(void)
{
    size_t full = 0, sent = 0, under4k = 0, largest = 0;
    unsigned i;

    build_resnet152();
    g_sel = calloc(g_num_tensors, sizeof(*g_sel));
    for (i = 0; i < g_num_tensors; ++i) {
        full    += g_tensors[i].bytes;
        under4k += g_tensors[i].bytes < 4096;
        largest  = g_tensors[i].bytes > largest ? g_tensors[i].bytes : largest;
        if (i % wl.tensor_stride != 0) {
            continue;
        }
        g_sel[g_nsel].index = i;
        g_sel[g_nsel].bytes = g_tensors[i].bytes;
        if (g_tensors[i].bytes > SHRINK_FLOOR) {
            g_sel[g_nsel].bytes = g_tensors[i].bytes / wl.shrink / 4 * 4;
            if (g_sel[g_nsel].bytes < SHRINK_FLOOR) {
                g_sel[g_nsel].bytes = SHRINK_FLOOR;
            }
        }
        sent += g_sel[g_nsel++].bytes;
    }
    g_full_bytes = full;
    if (wl.rank == 0 && wl.verbose) {
        wl_log("resnet-152: %u tensors, %zu parameters (%.1f MB float32), "
               "%zu tensors under 4 KB, largest %zu bytes", g_num_tensors,
               full / 4, full / 1e6, under4k, largest);
        for (i = 0; i < g_num_tensors && wl.verbose > 1; ++i) {
            wl_log("  tensor %3u %-24s %zu bytes", i, g_tensors[i].name,
                   g_tensors[i].bytes);
        }
    }
    if (wl.rank == 0) {
        wl_log("resnet: an iteration sends %u of %u tensors (stride %u, "
               "tensors above 4 KB divided by %u): %zu bytes per worker each way = %.4f "
               "of the model; %.1f MB in total per iteration", g_nsel,
               g_num_tensors, wl.tensor_stride, wl.shrink, sent,
               (double)sent / full,
               2.0 * sent * (wl.nranks - 1) / 1e6);
    }
}

/* Tags: seq = iteration << 16 | selected tensor */
static uint64_t tseq(unsigned iter, unsigned t)
{
    return ((uint64_t)iter << 16) | t;
}

static void iteration_worker(unsigned iter, uint8_t **grad, uint8_t **param)
{
    void **sreq = calloc(g_nsel, sizeof(void*));
    void **rreq = calloc(g_nsel, sizeof(void*));
    ucp_tag_recv_info_t info;
    unsigned t, left, made;
    uint64_t done = iter;

    for (t = 0; t < g_nsel; ++t) {
        wl_fill(grad[t], g_sel[t].bytes,
                wl_base(K_GRAD, wl.rank, 0, tseq(iter, t)));
    }
    wl_ctl_barrier("iteration start");
    wl_where("resnet iteration %u: push and pull", iter);
    for (t = 0; t < g_nsel; ++t) {
        rreq[t] = wl_recv(param[t], g_sel[t].bytes,
                          WL_TAG(K_PARAM, 0, tseq(iter, t)), WL_FULL_MASK);
    }
    for (t = 0; t < g_nsel; ++t) {
        sreq[t] = wl_send(0, grad[t], g_sel[t].bytes,
                          WL_TAG(K_GRAD, wl.rank, tseq(iter, t)));
    }
    do {
        left = made = 0;
        for (t = 0; t < g_nsel; ++t) {
            if (!wl_send_test(&sreq[t], 0)) {
                ++left;
            }
            if (rreq[t] == NULL) {
                continue;
            }
            if (!wl_recv_test(&rreq[t], &info, 0)) {
                ++left;
                continue;
            }
            wl_verify("parameter tensor", param[t], info.length,
                      g_sel[t].bytes, K_PARAM, 0, 0, tseq(iter, t));
            ++made;
        }
        if (left) {
            wl_step(made);
        }
    } while (left);
    wl_send_blocking(0, &done, sizeof(done), WL_TAG(K_DONE, wl.rank, iter));
    free(sreq);
    free(rreq);
}

/* Returns the flow completion time */
static double iteration_server(unsigned iter, uint8_t ***grad, uint8_t **param)
{
    int workers = wl.nranks - 1, w;
    size_t n = (size_t)g_nsel * workers, i;
    void **rreq = calloc(n, sizeof(void*));
    void **sreq = calloc(n, sizeof(void*));
    unsigned *have = calloc(g_nsel, sizeof(unsigned));
    void *dreq[WL_MAX_RANKS];
    uint64_t dval[WL_MAX_RANKS];
    ucp_tag_recv_info_t info;
    unsigned t, left, made;
    double t0;

    for (w = 1; w <= workers; ++w) {
        for (t = 0; t < g_nsel; ++t) {
            rreq[t * workers + w - 1] =
                wl_recv(grad[w - 1][t], g_sel[t].bytes,
                        WL_TAG(K_GRAD, w, tseq(iter, t)), WL_FULL_MASK);
        }
        dreq[w] = wl_recv(&dval[w], sizeof(dval[w]),
                          WL_TAG(K_DONE, w, iter), WL_FULL_MASK);
    }
    wl_ctl_barrier("iteration start");
    t0 = wl_now();
    wl_where("resnet iteration %u: server", iter);
    do {
        left = made = 0;
        for (i = 0; i < n; ++i) {
            t = i / workers;
            w = i % workers + 1;
            if (!wl_send_test(&sreq[i], w)) {
                ++left;
            }
            if (rreq[i] == NULL) {
                continue;
            }
            if (!wl_recv_test(&rreq[i], &info, w)) {
                ++left;
                continue;
            }
            wl_verify("gradient tensor", grad[w - 1][t], info.length,
                      g_sel[t].bytes, K_GRAD, w, 0, tseq(iter, t));
            ++made;
            if (++have[t] < (unsigned)workers) {
                continue;
            }
            /* Every worker's gradient is in: update, send to all */
            wl_fill(param[t], g_sel[t].bytes,
                    wl_base(K_PARAM, 0, 0, tseq(iter, t)));
            for (w = 1; w <= workers; ++w) {
                sreq[t * workers + w - 1] =
                    wl_send(w, param[t], g_sel[t].bytes,
                            WL_TAG(K_PARAM, 0, tseq(iter, t)));
                left += sreq[t * workers + w - 1] != NULL;
            }
        }
        for (w = 1; w <= workers; ++w) {
            if (dreq[w] == NULL) {
                continue;
            }
            if (!wl_recv_test(&dreq[w], &info, w)) {
                ++left;
            } else if (info.length != sizeof(dval[w]) || dval[w] != iter) {
                wl_die("done message from rank %d: %zu bytes, iteration %llu",
                       w, info.length, (unsigned long long)dval[w]);
            }
        }
        if (left) {
            wl_step(made);
        }
    } while (left);
    free(rreq);
    free(sreq);
    free(have);
    return wl_now() - t0;
}

int wl_run_resnet(void)
{
    int workers = wl.nranks - 1, w, peers[WL_MAX_RANKS], npeers = 0;
    unsigned t, it, total = wl.warmup_iters + wl.iters;
    uint8_t **param, ***grad;
    double *fct, secs;
    size_t sent = 0;
    const char *wakeups;

    if (workers < 1) {
        wl_die("resnet needs at least 2 ranks");
    }
    select_tensors();
    for (t = 0; t < g_nsel; ++t) {
        sent += g_sel[t].bytes;
    }
    param = calloc(g_nsel, sizeof(*param));
    for (t = 0; t < g_nsel; ++t) {
        param[t] = wl_malloc(g_sel[t].bytes);
    }
    grad = calloc(workers, sizeof(*grad));
    for (w = 0; w < (wl.rank == 0 ? workers : 1); ++w) {
        grad[w] = calloc(g_nsel, sizeof(**grad));
        for (t = 0; t < g_nsel; ++t) {
            grad[w][t] = wl_malloc(g_sel[t].bytes);
        }
    }
    fct = calloc(total, sizeof(*fct));
    if (wl.rank == 0) {
        for (w = 1; w <= workers; ++w) {
            peers[npeers++] = w;
        }
    } else {
        peers[npeers++] = 0;
    }
    wl_warmup_peers(peers, npeers);

    for (it = 0; it < total; ++it) {
        if (wl.rank != 0) {
            iteration_worker(it, grad[0], param);
            continue;
        }
        fct[it] = iteration_server(it, grad, param);
        wl_log("resnet iteration %u%s: flow completion time %.3f s", it,
               it < wl.warmup_iters ? " (warm-up)" : "", fct[it]);
    }
    wakeups = wl_wakeup_stats();
    if (wl.rank == 0) {
        secs = wl_median(fct + wl.warmup_iters, wl.iters);
        printf("bench-result pattern=resnet ranks=%d workers=%d wait=%d "
               "tensors=%u tensors_sent=%u stride=%u shrink=%u "
               "bytes_per_worker=%zu model_fraction=%.5f iters=%u "
               "fct_ms_median=%.3f fct_ms_min=%.3f fct_ms_max=%.3f "
               "mb_s=%.3f %s\n", wl.nranks, workers, wl.wait_mode,
               g_num_tensors, g_nsel, wl.tensor_stride, wl.shrink, sent,
               (double)sent / g_full_bytes, wl.iters, secs * 1e3,
               wl_min(fct + wl.warmup_iters, wl.iters) * 1e3,
               wl_max(fct + wl.warmup_iters, wl.iters) * 1e3,
               secs > 0 ? 2.0 * sent * workers / secs / 1e6 : 0, wakeups);
    }
    for (t = 0; t < g_nsel; ++t) {
        free(param[t]);
    }
    for (w = 0; w < (wl.rank == 0 ? workers : 1); ++w) {
        for (t = 0; t < g_nsel; ++t) {
            free(grad[w][t]);
        }
        free(grad[w]);
    }
    free(param);
    free(grad);
    free(fct);
    free(g_sel);
    return 0;
}
