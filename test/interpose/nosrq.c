/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * libhipower-nosrq.so: a verbs device without shared receive queues and
 * without UD queue pairs, made from any real one (issue 27). Devices such
 * as Alibaba's eRDMA have neither (its UD exists only in a compatibility
 * mode); UCX's rc transports need an SRQ, its ud transport and its wire-up
 * need UD, so UCX cannot use such a device today, while hipower needs
 * neither. Loaded with LD_PRELOAD before libibverbs' users:
 *
 *   - ibv_create_srq() and ibv_create_srq_ex() fail with EOPNOTSUPP;
 *   - ibv_create_qp() and ibv_create_qp_ex() of a UD QP fail with
 *     EOPNOTSUPP (RC and the rest go through);
 *   - ibv_query_device() and ibv_query_device_ex() report max_srq,
 *     max_srq_wr and max_srq_sge as 0.
 *
 * The exported functions are replaced by name; the inline ones of
 * <infiniband/verbs.h> (ibv_create_qp_ex, ibv_create_srq_ex,
 * ibv_query_device_ex) call through the device context's verbs_context,
 * whose entries are swapped when ibv_open_device() opens a context.
 * HIPOWER_NOSRQ_LOG=1 prints each refusal to stderr.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOSRQ_MAX_CONTEXTS  64


/* The provider's entries of each context we changed */
static struct {
    struct ibv_context *context;
    struct ibv_qp *(*create_qp_ex)(struct ibv_context*,
                                   struct ibv_qp_init_attr_ex*);
    int (*query_device_ex)(struct ibv_context*,
                           const struct ibv_query_device_ex_input*,
                           struct ibv_device_attr_ex*, size_t);
} nosrq_ctx[NOSRQ_MAX_CONTEXTS];
static pthread_mutex_t nosrq_lock = PTHREAD_MUTEX_INITIALIZER;


static void nosrq_log(const char *what)
{
    const char *env = getenv("HIPOWER_NOSRQ_LOG");

    if ((env != NULL) && (env[0] == '1')) {
        fprintf(stderr, "hipower-nosrq: refused %s (EOPNOTSUPP)\n", what);
    }
}

/* The real entry point. RTLD_NEXT finds it when libibverbs is in the
 * global scope (UCX 1.13's hipower-run preloads the plugin, which links
 * it); UCX >= 1.22 loads the plugin and libibverbs later with
 * RTLD_LOCAL, out of RTLD_NEXT's sight: then by its soname. */
static void *nosrq_next(const char *name)
{
    void *func = dlsym(RTLD_NEXT, name);
    void *lib;

    if (func == NULL) {
        lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
        func = (lib != NULL) ? dlsym(lib, name) : NULL;
    }
    if (func == NULL) {
        fprintf(stderr, "hipower-nosrq: no %s after this library: %s\n",
                name, dlerror());
        abort();
    }
    return func;
}

static int nosrq_slot(struct ibv_context *context)
{
    int i;

    for (i = 0; i < NOSRQ_MAX_CONTEXTS; ++i) {
        if (nosrq_ctx[i].context == context) {
            return i;
        }
    }
    return -1;
}

static void nosrq_clear_srq(struct ibv_device_attr *attr)
{
    attr->max_srq     = 0;
    attr->max_srq_wr  = 0;
    attr->max_srq_sge = 0;
}

static struct ibv_qp *nosrq_create_qp_ex(struct ibv_context *context,
                                         struct ibv_qp_init_attr_ex *attr)
{
    int slot;

    if (attr->qp_type == IBV_QPT_UD) {
        nosrq_log("a UD QP");
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (attr->srq != NULL) {
        nosrq_log("a QP on an SRQ");
        errno = EOPNOTSUPP;
        return NULL;
    }

    pthread_mutex_lock(&nosrq_lock);
    slot = nosrq_slot(context);
    pthread_mutex_unlock(&nosrq_lock);
    if ((slot < 0) || (nosrq_ctx[slot].create_qp_ex == NULL)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return nosrq_ctx[slot].create_qp_ex(context, attr);
}

static int nosrq_query_device_ex(struct ibv_context *context,
                                 const struct ibv_query_device_ex_input *input,
                                 struct ibv_device_attr_ex *attr,
                                 size_t attr_size)
{
    int slot, ret;

    pthread_mutex_lock(&nosrq_lock);
    slot = nosrq_slot(context);
    pthread_mutex_unlock(&nosrq_lock);
    if ((slot < 0) || (nosrq_ctx[slot].query_device_ex == NULL)) {
        return EOPNOTSUPP;
    }

    ret = nosrq_ctx[slot].query_device_ex(context, input, attr, attr_size);
    if (ret == 0) {
        nosrq_clear_srq(&attr->orig_attr);
    }
    return ret;
}

static struct ibv_srq *nosrq_create_srq_ex(struct ibv_context *context,
                                           struct ibv_srq_init_attr_ex *attr)
{
    nosrq_log("an SRQ (ibv_create_srq_ex)");
    errno = EOPNOTSUPP;
    return NULL;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    static struct ibv_context *(*next)(struct ibv_device*);
    struct verbs_context *vctx;
    struct ibv_context *context;
    int slot;

    if (next == NULL) {
        next = nosrq_next("ibv_open_device");
    }

    context = next(device);
    if (context == NULL) {
        return NULL;
    }

    vctx = verbs_get_ctx(context);
    if (vctx == NULL) {
        return context;
    }

    pthread_mutex_lock(&nosrq_lock);
    slot = nosrq_slot(NULL);
    if (slot < 0) {
        pthread_mutex_unlock(&nosrq_lock);
        fprintf(stderr, "hipower-nosrq: more than %d device contexts\n",
                NOSRQ_MAX_CONTEXTS);
        abort();
    }
    nosrq_ctx[slot].context         = context;
    nosrq_ctx[slot].create_qp_ex    = vctx->create_qp_ex;
    nosrq_ctx[slot].query_device_ex = vctx->query_device_ex;
    vctx->create_qp_ex              = nosrq_create_qp_ex;
    vctx->query_device_ex           = nosrq_query_device_ex;
    vctx->create_srq_ex             = nosrq_create_srq_ex;
    pthread_mutex_unlock(&nosrq_lock);
    return context;
}

int ibv_close_device(struct ibv_context *context)
{
    static int (*next)(struct ibv_context*);
    int slot;

    if (next == NULL) {
        next = nosrq_next("ibv_close_device");
    }

    pthread_mutex_lock(&nosrq_lock);
    slot = nosrq_slot(context);
    if (slot >= 0) {
        memset(&nosrq_ctx[slot], 0, sizeof(nosrq_ctx[slot]));
    }
    pthread_mutex_unlock(&nosrq_lock);
    return next(context);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
                             struct ibv_qp_init_attr *attr)
{
    static struct ibv_qp *(*next)(struct ibv_pd*, struct ibv_qp_init_attr*);

    if (next == NULL) {
        next = nosrq_next("ibv_create_qp");
    }
    if (attr->qp_type == IBV_QPT_UD) {
        nosrq_log("a UD QP (ibv_create_qp)");
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (attr->srq != NULL) {
        nosrq_log("a QP on an SRQ (ibv_create_qp)");
        errno = EOPNOTSUPP;
        return NULL;
    }
    return next(pd, attr);
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
                               struct ibv_srq_init_attr *attr)
{
    nosrq_log("an SRQ (ibv_create_srq)");
    errno = EOPNOTSUPP;
    return NULL;
}

int ibv_query_device(struct ibv_context *context,
                     struct ibv_device_attr *attr)
{
    static int (*next)(struct ibv_context*, struct ibv_device_attr*);
    int ret;

    if (next == NULL) {
        next = nosrq_next("ibv_query_device");
    }
    ret = next(context, attr);
    if (ret == 0) {
        nosrq_clear_srq(attr);
    }
    return ret;
}
