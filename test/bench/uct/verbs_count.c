/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * verbs_count: counts the verbs work of a process, whatever transport does
 * it, for the benchmark suite's "wire" figures.
 *
 *   LD_PRELOAD=libverbs_count.so VERBS_COUNT_OUT=FILE program ...
 *
 * ibv_post_send(), ibv_post_recv(), ibv_post_srq_recv() and ibv_poll_cq()
 * are inline functions that call through the device context's ops table,
 * so they cannot be interposed by name. Instead ibv_open_device() is: it
 * opens the device as usual and points the context's ops at counting
 * wrappers that call the provider's own. At exit one line per opened
 * device is appended to FILE:
 *
 *   verbs_count dev=NAME pid=PID send_wrs=N writes=N reads=N sends=N
 *               atomics=N recv_wrs=N polls=N cqes=N
 *
 * send_wrs counts work requests (a chain counts each), cqes the completions
 * ibv_poll_cq() returned (send and receive), polls the calls. Nothing is
 * counted for a device opened before the library was loaded.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VC_MAX_DEVS 16

typedef struct {
    struct ibv_context *ctx;
    char               name[64];
    /* The provider's own */
    int (*post_send)(struct ibv_qp*, struct ibv_send_wr*, struct ibv_send_wr**);
    int (*post_recv)(struct ibv_qp*, struct ibv_recv_wr*, struct ibv_recv_wr**);
    int (*post_srq_recv)(struct ibv_srq*, struct ibv_recv_wr*,
                         struct ibv_recv_wr**);
    int (*poll_cq)(struct ibv_cq*, int, struct ibv_wc*);
    unsigned long send_wrs, writes, reads, sends, atomics, recv_wrs, polls,
                  cqes;
} vc_dev_t;

static vc_dev_t vc_devs[VC_MAX_DEVS];
static int      vc_num_devs;

static vc_dev_t *vc_find(struct ibv_context *ctx)
{
    int i;

    for (i = 0; i < vc_num_devs; ++i) {
        if (vc_devs[i].ctx == ctx) {
            return &vc_devs[i];
        }
    }
    abort(); /* Only contexts we patched call the wrappers */
}

static int vc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                        struct ibv_send_wr **bad_wr)
{
    vc_dev_t *d = vc_find(qp->context);
    struct ibv_send_wr *w;

    for (w = wr; w != NULL; w = w->next) {
        ++d->send_wrs;
        switch (w->opcode) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            ++d->writes;
            break;
        case IBV_WR_RDMA_READ:
            ++d->reads;
            break;
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_IMM:
            ++d->sends;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            ++d->atomics;
            break;
        default:
            break;
        }
    }
    return d->post_send(qp, wr, bad_wr);
}

/* Receive work requests in a chain */
static unsigned long vc_recv_wrs(const struct ibv_recv_wr *wr)
{
    unsigned long n = 0;

    for (; wr != NULL; wr = wr->next) {
        ++n;
    }
    return n;
}

static int vc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                        struct ibv_recv_wr **bad_wr)
{
    vc_dev_t *d = vc_find(qp->context);

    d->recv_wrs += vc_recv_wrs(wr);
    return d->post_recv(qp, wr, bad_wr);
}

static int vc_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                            struct ibv_recv_wr **bad_wr)
{
    vc_dev_t *d = vc_find(srq->context);

    d->recv_wrs += vc_recv_wrs(wr);
    return d->post_srq_recv(srq, wr, bad_wr);
}

static int vc_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
    vc_dev_t *d = vc_find(cq->context);
    int n       = d->poll_cq(cq, num, wc);

    ++d->polls;
    if (n > 0) {
        d->cqes += n;
    }
    return n;
}

static void vc_report(void)
{
    const char *path = getenv("VERBS_COUNT_OUT");
    FILE *f;
    int i;

    if ((path == NULL) || (vc_num_devs == 0) ||
        ((f = fopen(path, "a")) == NULL)) {
        return;
    }

    for (i = 0; i < vc_num_devs; ++i) {
        fprintf(f, "verbs_count dev=%s pid=%d send_wrs=%lu writes=%lu "
                "reads=%lu sends=%lu atomics=%lu recv_wrs=%lu polls=%lu "
                "cqes=%lu\n", vc_devs[i].name, (int)getpid(),
                vc_devs[i].send_wrs, vc_devs[i].writes, vc_devs[i].reads,
                vc_devs[i].sends, vc_devs[i].atomics, vc_devs[i].recv_wrs,
                vc_devs[i].polls, vc_devs[i].cqes);
    }
    fclose(f);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    static struct ibv_context *(*real)(struct ibv_device*);
    struct ibv_context *ctx;
    vc_dev_t *d;

    if (real == NULL) {
        real = (struct ibv_context *(*)(struct ibv_device*))
               dlsym(RTLD_NEXT, "ibv_open_device");
        if (real == NULL) {
            return NULL;
        }
        atexit(vc_report);
    }

    ctx = real(device);
    if ((ctx == NULL) || (vc_num_devs == VC_MAX_DEVS)) {
        return ctx;
    }

    d = &vc_devs[vc_num_devs++];
    memset(d, 0, sizeof(*d));
    d->ctx = ctx;
    snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(device));
    d->post_send        = ctx->ops.post_send;
    d->post_recv        = ctx->ops.post_recv;
    d->post_srq_recv    = ctx->ops.post_srq_recv;
    d->poll_cq          = ctx->ops.poll_cq;
    ctx->ops.post_send  = vc_post_send;
    ctx->ops.post_recv  = vc_post_recv;
    if (d->post_srq_recv != NULL) {
        ctx->ops.post_srq_recv = vc_post_srq_recv;
    }
    ctx->ops.poll_cq    = vc_poll_cq;
    return ctx;
}
