/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The simulated RDMA device (simdev.h, docs/sim.md). Not a model of
 * hipower: a device that executes whatever the transport posts, with the
 * checks a responder and a requester make, and completes it in each QP's
 * order. Rules follow the InfiniBand RC semantics as rdma_rxe (the rig's
 * device) implements them, where they are observable by the transport:
 *  - a send work request completes (if signaled) after it executed; when
 *    a QP goes to error every outstanding request and receive completes,
 *    flushed, signaled or not;
 *  - a remote key is an MR's (remote access in the MR, same PD as the
 *    responder's QP) or a type-2 window's (bound, to the responder's QP);
 *    the range must lie in the region; a violation fails the request with
 *    a remote access error and puts both QPs in error;
 *  - a WRITE_WITH_IMM takes one receive of the responder; without one the
 *    responder answers "receiver not ready" and the requester tries again
 *    (for ever with rnr_retry 7), the write not executed;
 *  - a request to a QP that is not there or not ready is retried, then
 *    fails with "retry exceeded";
 *  - deregistering an MR with a window bound fails with EINVAL (rxe).
 * Everything runs under one lock: UCX's async thread may post (UCP's
 * wire-up) while the user's thread polls.
 */
#define _GNU_SOURCE
#include "simdev.h"
#include "hipower_ring.h"

#include <infiniband/verbs.h>
/* Defined here under their exported names, not the header's inline
 * wrappers */
#undef ibv_query_port
#undef ibv_reg_mr

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ucs/time/time.h>


#define SIM_MAX_DEVS        8
#define SIM_MAX_SGE         32
#define SIM_MAX_INLINE      1024
#define SIM_MAX_WR          16384
#define SIM_MAX_CQE         (1 << 20)
/* With nobody polling for this long, the device thread works on its own
 * (a device does not wait for its user) */
#define SIM_IDLE_NS         200000

typedef struct sim_qp  sim_qp_t;

typedef struct sim_dev {
    struct ibv_device    ibdev;
    int                  index;
    union ibv_gid        gid;
    /* Keys: index << 8 | variant; slot index of an MR or a window */
    void                 **keys;
    uint8_t              *key_is_mw;
    uint32_t             num_keys;
    /* QP numbers: table by number */
    sim_qp_t             **qps;
    uint32_t             max_qps;
    struct sim_ctx       *contexts; /* Open on it */
} sim_dev_t;

#define SIM_MAX_EVENTS      64

typedef struct sim_ctx {
    struct ibv_context   ctx;
    sim_dev_t            *dev;
    int                  async_pipe[2];
    /* Asynchronous events not read yet (a byte in the pipe for each) */
    struct ibv_async_event events[SIM_MAX_EVENTS];
    unsigned             event_head, num_events;
    struct sim_ctx       *next_open; /* The device's open contexts */
} sim_ctx_t;

typedef struct sim_mr {
    struct ibv_mr        mr;
    int                  access;
    unsigned             bound_mws;
} sim_mr_t;

typedef struct sim_mw {
    struct ibv_mw        mw;
    sim_dev_t            *dev;
    sim_mr_t             *mr;        /* Bound to: NULL when not bound */
    uint64_t             addr, length;
    int                  access;
    sim_qp_t             *qp;
    /* In qp->mws while bound to it */
    struct sim_mw        *qp_prev, *qp_next;
} sim_mw_t;

typedef struct sim_chan {
    struct ibv_comp_channel ch;
    int                  pipe[2];
    struct ibv_cq        **events;
    unsigned             head, count, size;
} sim_chan_t;

typedef struct sim_cq {
    struct ibv_cq        cq;
    struct ibv_wc        *wcs;
    unsigned             size, head, count;
    int                  armed;
    sim_chan_t           *chan;
} sim_cq_t;

typedef struct sim_swr {
    struct ibv_send_wr   wr;
    struct ibv_sge       sge[SIM_MAX_SGE];
    uint8_t              *inline_data;
    size_t               inline_len;
    uint64_t             first_try_ns; /* 0: not tried yet */
    /* WRITE and READ: placed in pieces of the path MTU, in the order
     * HIPOWER_SIM_PLACEMENT says (piece k is (k * stride + start) % n) */
    uint64_t             pieces_done;
    uint64_t             stride, start;
    uint64_t             cut;   /* Torn: where the current packet splits */
} sim_swr_t;

/*
 * Replay placement (HIPOWER_SIM_PLACEMENT=replay): an RC responder that
 * re-executes duplicate WRITEs after a lost ACK. The ACK of a window of a
 * QP's WRITEs is lost: they are placed once, as any, but not completed;
 * some steps later the requester's retry timer goes back N to the first
 * of them and the responder places them all once more, one a step, in
 * their order, with the bytes each carried the first time. Then the ACK
 * comes: their completions, in order. Nothing of the QP overtakes the
 * window: its WRITEs after the first join it (they are unacknowledged as
 * well), anything else (a READ's response would acknowledge them) waits
 * for the replay.
 */
#define SIM_REPLAY_MAX      16   /* WRITEs in one lost-ACK window */
#define SIM_REPLAY_DELAY    32   /* Steps before the replay, at most */

typedef struct sim_replay_write {
    uint64_t             addr;
    uint32_t             rkey;
    uint32_t             length;
    uint8_t              *data;
} sim_replay_write_t;

typedef struct sim_rwr {
    uint64_t             wr_id;
    struct ibv_sge       sge;
    int                  num_sge;
} sim_rwr_t;

struct sim_qp {
    struct ibv_qp        qp;
    sim_dev_t            *dev;
    struct ibv_qp_cap    cap;
    uint32_t             dest_qpn;
    int                  dest_dev;   /* -1: not known */
    int                  access;     /* Remote access the QP admits */
    uint8_t              retry_cnt, rnr_retry;
    uint8_t              timeout;      /* Requester: ack timeout exponent */
    uint32_t             mtu;          /* Path MTU in bytes */
    uint8_t              min_rnr_timer; /* Responder: its RNR NAK timer */
    sim_swr_t            *sq;
    unsigned             sq_head, sq_count;
    sim_rwr_t            *rq;
    unsigned             rq_head, rq_count;
    /* In the list of QPs with requests to execute */
    sim_qp_t             *ready_prev, *ready_next;
    int                  in_ready;
    /* Windows bound to it: its destroy and hostile peers look at these,
     * not at every key of the device (a long run has many) */
    sim_mw_t             *mws;
    /* Replay placement: the WRITEs of the open lost-ACK window (count >
     * 0), the next to place again once the step count reaches due, and
     * the completions it holds back */
    struct {
        sim_replay_write_t writes[SIM_REPLAY_MAX];
        struct ibv_wc      held[SIM_REPLAY_MAX];
        unsigned           count, next, num_held;
        uint64_t           due;
    }                    replay;
};

static struct {
    pthread_mutex_t      lock;
    int                  initialized;
    uint64_t             seed, rng;
    unsigned             steps_per_poll;
    unsigned             pieces_per_step;
    enum {
        SIM_PLACE_IN_ORDER,
        SIM_PLACE_REVERSE,
        SIM_PLACE_RANDOM,
        SIM_PLACE_TORN,
        SIM_PLACE_REPLAY
    }                    placement;
    /* Replay placement: one WRITE in this many opens a lost-ACK window */
    unsigned             replay_every;
    int                  num_devs;
    sim_dev_t            devs[SIM_MAX_DEVS];
    struct ibv_device    *dev_list[SIM_MAX_DEVS + 1];
    sim_qp_t             *ready;     /* Circular list head, or NULL */
    unsigned             num_ready;
    hipower_sim_stats_t  stats;
    int                  thread_on;
    pthread_t            thread;
    uint64_t             last_poll_ns;
    /* HIPOWER_SIM_CLOCK=virtual: time is this count of nanoseconds, moved
     * by the device's steps, by polls and by hipower_sim_advance(), and
     * the transport's clock (uct_hipower_clock_now) reads it too */
    int                  virtual_clock;
    uint64_t             virtual_ns;
    /* What uct_hipower_epoch_origin() answers (HIPOWER_SIM_EPOCH_ORIGIN,
     * or hipower_sim_set_epoch_origin()) */
    uint64_t             epoch_origin;
    /* How many messages before their period runs start
     * (uct_hipower_seq_origin(); HIPOWER_SIM_SEQ_BEFORE_PERIOD or
     * hipower_sim_set_seq_origin()); 0: at 0, as in the product */
    uint32_t             seq_before_period;
} sim = {
    .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
};


static uint64_t sim_rand(void)
{
    /* xorshift64*: small, fast and the same everywhere */
    sim.rng ^= sim.rng >> 12;
    sim.rng ^= sim.rng << 25;
    sim.rng ^= sim.rng >> 27;
    return sim.rng * 0x2545f4914f6cdd1dull;
}

static uint64_t sim_env_u64(const char *name, uint64_t dflt)
{
    const char *value = getenv(name);

    return (value != NULL) ? strtoull(value, NULL, 0) : dflt;
}

/* Virtual time a device step and a poll take: what lets a deadline of the
 * device (retry, RNR) or of the transport (grants, idle demotion) expire
 * while the schedule runs, the same way for every replay of a seed */
#define SIM_VIRTUAL_NS_PER_STEP 1000
#define SIM_VIRTUAL_NS_PER_POLL 200

static uint64_t sim_now_ns(void)
{
    struct timespec ts;

    if (sim.virtual_clock) {
        return sim.virtual_ns;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* RC's timers as the device keeps them: the ack timeout is
 * 4.096 us * 2^timeout (0: none, here the largest), the RNR NAK timer
 * is the responder's min_rnr_timer (IB's table, in 10 us units) */
static uint64_t sim_ack_timeout_ns(uint8_t timeout)
{
    return 4096ull << ((timeout == 0) ? 31 : ((timeout < 31) ? timeout : 31));
}

static uint64_t sim_rnr_timer_ns(uint8_t code)
{
    static const uint32_t table_10us[32] = {
        65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
        384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
        16384, 24576, 32768, 49152
    };

    return table_10us[code & 31] * 10000ull;
}

unsigned hipower_sim_step(unsigned count);

/*
 * A device does not wait for its user: while nobody polls (a process
 * asleep in its event fd, a peer that stopped calling progress), this
 * thread runs the steps. HIPOWER_SIM_THREAD=0 turns it off: then only
 * polls and hipower_sim_step() move the device, and a seed replays the
 * whole schedule.
 */
static void *sim_thread_func(void *arg)
{
    for (;;) {
        usleep(SIM_IDLE_NS / 2000);
        pthread_mutex_lock(&sim.lock);
        if (sim_now_ns() - sim.last_poll_ns > SIM_IDLE_NS) {
            hipower_sim_step(64);
        }
        pthread_mutex_unlock(&sim.lock);
    }
    return NULL;
}

static void sim_init(void)
{
    const char *placement;
    sim_dev_t *dev;
    int i;

    if (sim.initialized) {
        return;
    }

    sim.seed           = sim_env_u64("HIPOWER_SIM_SEED", 1);
    sim.rng            = sim.seed * 0x9e3779b97f4a7c15ull + 1;
    sim.steps_per_poll = sim_env_u64("HIPOWER_SIM_STEPS_PER_POLL", 4);
    sim.pieces_per_step = sim_env_u64("HIPOWER_SIM_PIECES_PER_STEP", 16);
    if (sim.pieces_per_step < 1) {
        sim.pieces_per_step = 1;
    }
    placement = getenv("HIPOWER_SIM_PLACEMENT");
    if ((placement == NULL) || !strcmp(placement, "in-order")) {
        sim.placement = SIM_PLACE_IN_ORDER;
    } else if (!strcmp(placement, "reverse")) {
        sim.placement = SIM_PLACE_REVERSE;
    } else if (!strcmp(placement, "random")) {
        sim.placement = SIM_PLACE_RANDOM;
    } else if (!strcmp(placement, "torn")) {
        sim.placement = SIM_PLACE_TORN;
    } else if (!strcmp(placement, "replay")) {
        sim.placement = SIM_PLACE_REPLAY;
    } else {
        fprintf(stderr, "hipower-sim: HIPOWER_SIM_PLACEMENT=%s: use in-order, "
                "torn, reverse, random or replay\n", placement);
        abort();
    }
    sim.replay_every   = sim_env_u64("HIPOWER_SIM_REPLAY_EVERY", 4);
    if (sim.replay_every < 1) {
        sim.replay_every = 1;
    }
    sim.num_devs       = (int)sim_env_u64("HIPOWER_SIM_DEVICES", 2);
    if ((sim.num_devs < 1) || (sim.num_devs > SIM_MAX_DEVS)) {
        sim.num_devs = 2;
    }

    for (i = 0; i < sim.num_devs; ++i) {
        dev = &sim.devs[i];
        memset(dev, 0, sizeof(*dev));
        dev->index                   = i;
        dev->ibdev.node_type         = IBV_NODE_CA;
        dev->ibdev.transport_type    = IBV_TRANSPORT_IB;
        snprintf(dev->ibdev.name, sizeof(dev->ibdev.name), "sim%d", i);
        snprintf(dev->ibdev.dev_name, sizeof(dev->ibdev.dev_name),
                 "uverbs_sim%d", i);
        /* RoCE v2 style: ::ffff:10.77.0.(i + 1) */
        dev->gid.raw[10] = 0xff;
        dev->gid.raw[11] = 0xff;
        dev->gid.raw[12] = 10;
        dev->gid.raw[13] = 77;
        dev->gid.raw[15] = (uint8_t)(i + 1);
        sim.dev_list[i]  = &dev->ibdev;
    }
    sim.dev_list[sim.num_devs] = NULL;
    sim.initialized            = 1;
    sim.virtual_clock          = (getenv("HIPOWER_SIM_CLOCK") != NULL) &&
                                 !strcmp(getenv("HIPOWER_SIM_CLOCK"),
                                         "virtual");
    /* Not 0: the transport takes 0 for "not set" in places */
    sim.virtual_ns             = 1000000000ull;
    sim.epoch_origin           = sim_env_u64("HIPOWER_SIM_EPOCH_ORIGIN", 1);
    sim.seq_before_period      = (uint32_t)
                                 sim_env_u64("HIPOWER_SIM_SEQ_BEFORE_PERIOD",
                                             0);
    /* The thread works when the wall clock says nobody polled: with a
     * virtual clock, steps come from polls and from the test alone */
    sim.thread_on              = !sim.virtual_clock &&
                                 (int)sim_env_u64("HIPOWER_SIM_THREAD", 1);
    if (sim.thread_on &&
        (pthread_create(&sim.thread, NULL, sim_thread_func, NULL) == 0)) {
        pthread_detach(sim.thread);
    }
    if (sim_env_u64("HIPOWER_SIM_QUIET", 0)) {
        return;
    }
    fprintf(stderr, "hipower-sim: %d devices, seed %" PRIu64 " "
            "(HIPOWER_SIM_SEED=%" PRIu64 " replays this run), %s clock, "
            "writes placed %s\n", sim.num_devs, sim.seed, sim.seed,
            sim.virtual_clock ? "virtual" : "wall",
            (sim.placement == SIM_PLACE_IN_ORDER) ? "in order" :
            (sim.placement == SIM_PLACE_TORN) ?
                    "in order, each packet in two steps cut at any byte" :
            (sim.placement == SIM_PLACE_REVERSE) ? "last piece first" :
            (sim.placement == SIM_PLACE_REPLAY) ?
                    "in order, windows of them placed again later (lost "
                    "ACKs, go-back-N)" :
            "in random order");
}

static sim_dev_t *sim_ctx_dev(struct ibv_context *ctx)
{
    return ((sim_ctx_t*)ctx)->dev;
}


/* Keys */

static uint32_t sim_key_add(sim_dev_t *dev, void *obj, int is_mw)
{
    uint32_t index;

    /* Never reused: a stale key must stay invalid */
    index = dev->num_keys++;
    dev->keys      = realloc(dev->keys, dev->num_keys * sizeof(*dev->keys));
    dev->key_is_mw = realloc(dev->key_is_mw, dev->num_keys);
    if ((dev->keys == NULL) || (dev->key_is_mw == NULL)) {
        abort();
    }
    dev->keys[index]      = obj;
    dev->key_is_mw[index] = (uint8_t)is_mw;
    /* Index 0 is never handed out: a zeroed key is invalid */
    return index;
}

static void *sim_key_find(sim_dev_t *dev, uint32_t key, int *is_mw)
{
    uint32_t index = key >> 8;

    if ((index == 0) || (index >= dev->num_keys) ||
        (dev->keys[index] == NULL)) {
        return NULL;
    }
    *is_mw = dev->key_is_mw[index];
    return dev->keys[index];
}


/* Devices */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
    struct ibv_device **list;

    pthread_mutex_lock(&sim.lock);
    sim_init();
    list = calloc(sim.num_devs + 1, sizeof(*list));
    if (list != NULL) {
        memcpy(list, sim.dev_list, (sim.num_devs + 1) * sizeof(*list));
        if (num_devices != NULL) {
            *num_devices = sim.num_devs;
        }
    }
    pthread_mutex_unlock(&sim.lock);
    return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
    return htobe64(0x5150000000000000ull +
                   ((sim_dev_t*)device)->index);
}

static int sim_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                         struct ibv_send_wr **bad_wr);
static int sim_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad_wr);
static int sim_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc);
static int sim_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
static struct ibv_mw *sim_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
static int sim_dealloc_mw(struct ibv_mw *mw);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    sim_ctx_t *ctx = calloc(1, sizeof(*ctx));

    if (ctx == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(ctx->async_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(ctx);
        return NULL;
    }

    ctx->dev                   = (sim_dev_t*)device;
    ctx->ctx.device            = device;
    ctx->ctx.ops.post_send     = sim_post_send;
    ctx->ctx.ops.post_recv     = sim_post_recv;
    ctx->ctx.ops.poll_cq       = sim_poll_cq;
    ctx->ctx.ops.req_notify_cq = sim_req_notify_cq;
    ctx->ctx.ops.alloc_mw      = sim_alloc_mw;
    ctx->ctx.ops.dealloc_mw    = sim_dealloc_mw;
    ctx->ctx.cmd_fd            = -1;
    ctx->ctx.async_fd          = ctx->async_pipe[0];
    ctx->ctx.num_comp_vectors  = 1;
    ctx->ctx.abi_compat        = NULL; /* No extended verbs */
    pthread_mutex_init(&ctx->ctx.mutex, NULL);
    pthread_mutex_lock(&sim.lock);
    ctx->next_open             = ctx->dev->contexts;
    ctx->dev->contexts         = ctx;
    pthread_mutex_unlock(&sim.lock);
    return &ctx->ctx;
}

int ibv_close_device(struct ibv_context *context)
{
    sim_ctx_t *ctx = (sim_ctx_t*)context;
    sim_ctx_t **p;

    pthread_mutex_lock(&sim.lock);
    for (p = &ctx->dev->contexts; *p != NULL; p = &(*p)->next_open) {
        if (*p == ctx) {
            *p = ctx->next_open;
            break;
        }
    }
    pthread_mutex_unlock(&sim.lock);
    close(ctx->async_pipe[0]);
    close(ctx->async_pipe[1]);
    free(ctx);
    return 0;
}

int ibv_query_device(struct ibv_context *context,
                     struct ibv_device_attr *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->fw_ver, sizeof(attr->fw_ver), "hipower-sim");
    attr->node_guid           = ibv_get_device_guid(context->device);
    attr->max_mr_size         = UINT64_MAX;
    attr->page_size_cap       = 0xfffff000;
    attr->max_qp              = 1 << 20;
    attr->max_qp_wr           = SIM_MAX_WR;
    attr->device_cap_flags    = IBV_DEVICE_MEM_WINDOW |
                                IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                                IBV_DEVICE_RC_RNR_NAK_GEN;
    attr->max_sge             = SIM_MAX_SGE;
    attr->max_cq              = 1 << 20;
    attr->max_cqe             = SIM_MAX_CQE;
    attr->max_mr              = 1 << 24;
    attr->max_pd              = 1 << 20;
    attr->max_qp_rd_atom      = 128;
    attr->max_qp_init_rd_atom = 128;
    attr->atomic_cap          = IBV_ATOMIC_HCA;
    attr->max_mw              = 1 << 24;
    attr->phys_port_cnt       = 1;
    return 0;
}

int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *compat_attr)
{
    /* The inline caller (___ibv_query_port) passes a whole, zeroed
     * struct ibv_port_attr */
    struct ibv_port_attr *attr = (struct ibv_port_attr*)compat_attr;

    if (port_num != 1) {
        errno = EINVAL;
        return EINVAL;
    }
    attr->state       = IBV_PORT_ACTIVE;
    attr->max_mtu     = IBV_MTU_4096;
    attr->active_mtu  = IBV_MTU_1024;
    attr->gid_tbl_len = 1;
    attr->max_msg_sz  = 1u << 31;
    attr->pkey_tbl_len = 1;
    attr->link_layer  = IBV_LINK_LAYER_ETHERNET;
    attr->active_width = 1;
    attr->active_speed = 1;
    attr->phys_state  = 5; /* LinkUp */
    return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
                  union ibv_gid *gid)
{
    if ((port_num != 1) || (index != 0)) {
        errno = EINVAL;
        return -1;
    }
    *gid = sim_ctx_dev(context)->gid;
    return 0;
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
    /* libibverbs' names of the events the device raises */
    switch (event) {
    case IBV_EVENT_QP_FATAL:       return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR:     return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR:  return "local access violation work queue error";
    case IBV_EVENT_PORT_ACTIVE:    return "port active";
    case IBV_EVENT_PORT_ERR:       return "port error";
    case IBV_EVENT_GID_CHANGE:     return "GID table change";
    case IBV_EVENT_DEVICE_FATAL:   return "local catastrophic error";
    default:                       return "unknown";
    }
}

const char *ibv_port_state_str(enum ibv_port_state state)
{
    return (state == IBV_PORT_ACTIVE) ? "PORT_ACTIVE" : "PORT_DOWN";
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_SUCCESS:            return "success";
    case IBV_WC_LOC_PROT_ERR:       return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:       return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR:     return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:  return "RNR retry counter exceeded";
    case IBV_WC_MW_BIND_ERR:        return "memory window bind error";
    default:                        return "error";
    }
}

int ibv_get_async_event(struct ibv_context *context,
                        struct ibv_async_event *event)
{
    sim_ctx_t *ctx = (sim_ctx_t*)context;
    char byte;
    int ret = -1;

    pthread_mutex_lock(&sim.lock);
    if (ctx->num_events > 0) {
        *event          = ctx->events[ctx->event_head];
        ctx->event_head = (ctx->event_head + 1) % SIM_MAX_EVENTS;
        --ctx->num_events;
        (void)read(ctx->async_pipe[0], &byte, 1);
        ret = 0;
    } else {
        errno = EAGAIN;
    }
    pthread_mutex_unlock(&sim.lock);
    return ret;
}

static void sim_event_push(sim_ctx_t *ctx, const struct ibv_async_event *event)
{
    char byte = 0;

    if (ctx->num_events == SIM_MAX_EVENTS) {
        return; /* A device drops what its user does not read */
    }
    ctx->events[(ctx->event_head + ctx->num_events) % SIM_MAX_EVENTS] = *event;
    ++ctx->num_events;
    if (write(ctx->async_pipe[1], &byte, 1) != 1) {
        --ctx->num_events;
    }
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
}


/* Protection domains and memory */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));

    if (pd != NULL) {
        pd->context = context;
        pd->handle  = 1;
    }
    return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
    free(pd);
    return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                uint64_t iova, unsigned int access)
{
    sim_dev_t *dev = sim_ctx_dev(pd->context);
    sim_mr_t *mr;
    uint32_t index;

    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }

    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        errno = ENOMEM;
        return NULL;
    }

    pthread_mutex_lock(&sim.lock);
    if (dev->num_keys == 0) {
        (void)sim_key_add(dev, NULL, 0); /* Index 0: invalid */
    }
    index = sim_key_add(dev, mr, 0);
    pthread_mutex_unlock(&sim.lock);

    mr->mr.context = pd->context;
    mr->mr.pd      = pd;
    mr->mr.addr    = addr;
    mr->mr.length  = length;
    mr->mr.lkey    = index << 8;
    mr->mr.rkey    = index << 8;
    mr->access     = (int)access;
    (void)iova;
    return &mr->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
                          int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
                            (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
    sim_mr_t *mr   = (sim_mr_t*)ibmr;
    sim_dev_t *dev = sim_ctx_dev(ibmr->context);

    pthread_mutex_lock(&sim.lock);
    if (mr->bound_mws > 0) {
        pthread_mutex_unlock(&sim.lock);
        return EINVAL; /* As rxe: windows still bound to it */
    }
    dev->keys[ibmr->lkey >> 8] = NULL;
    pthread_mutex_unlock(&sim.lock);
    free(mr);
    return 0;
}

static void sim_mw_unbind(sim_mw_t *mw)
{
    if (mw->mr != NULL) {
        --mw->mr->bound_mws;
        mw->mr = NULL;
    }
    if (mw->qp != NULL) {
        if (mw->qp_prev != NULL) {
            mw->qp_prev->qp_next = mw->qp_next;
        } else {
            mw->qp->mws = mw->qp_next;
        }
        if (mw->qp_next != NULL) {
            mw->qp_next->qp_prev = mw->qp_prev;
        }
        mw->qp_prev = mw->qp_next = NULL;
    }
    mw->qp = NULL;
}

static struct ibv_mw *sim_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    sim_dev_t *dev = sim_ctx_dev(pd->context);
    sim_mw_t *mw;
    uint32_t index;

    if (type != IBV_MW_TYPE_2) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    mw = calloc(1, sizeof(*mw));
    if (mw == NULL) {
        errno = ENOMEM;
        return NULL;
    }

    pthread_mutex_lock(&sim.lock);
    if (dev->num_keys == 0) {
        (void)sim_key_add(dev, NULL, 0);
    }
    index = sim_key_add(dev, mw, 1);
    pthread_mutex_unlock(&sim.lock);

    mw->mw.context = pd->context;
    mw->mw.pd      = pd;
    mw->mw.rkey    = index << 8;
    mw->mw.type    = type;
    mw->dev        = dev;
    return &mw->mw;
}

static int sim_dealloc_mw(struct ibv_mw *ibmw)
{
    sim_mw_t *mw = (sim_mw_t*)ibmw;

    pthread_mutex_lock(&sim.lock);
    sim_mw_unbind(mw);
    mw->dev->keys[ibmw->rkey >> 8] = NULL;
    pthread_mutex_unlock(&sim.lock);
    free(mw);
    return 0;
}


/* Completion queues and channels */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    sim_chan_t *chan = calloc(1, sizeof(*chan));

    if (chan == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(chan->pipe, O_CLOEXEC) != 0) {
        free(chan);
        return NULL;
    }
    chan->ch.context = context;
    chan->ch.fd      = chan->pipe[0];
    return &chan->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    sim_chan_t *chan = (sim_chan_t*)channel;

    close(chan->pipe[0]);
    close(chan->pipe[1]);
    free(chan->events);
    free(chan);
    return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
                             void *cq_context,
                             struct ibv_comp_channel *channel,
                             int comp_vector)
{
    sim_cq_t *cq;

    if ((cqe < 1) || (cqe > SIM_MAX_CQE)) {
        errno = EINVAL;
        return NULL;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    cq->wcs = calloc(cqe, sizeof(*cq->wcs));
    if (cq->wcs == NULL) {
        free(cq);
        errno = ENOMEM;
        return NULL;
    }
    cq->size          = cqe;
    cq->chan          = (sim_chan_t*)channel;
    cq->cq.context    = context;
    cq->cq.channel    = channel;
    cq->cq.cq_context = cq_context;
    cq->cq.cqe        = cqe;
    (void)comp_vector;
    return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
    sim_cq_t *cq = (sim_cq_t*)ibcq;

    free(cq->wcs);
    free(cq);
    return 0;
}

static void sim_cq_push(sim_cq_t *cq, const struct ibv_wc *wc)
{
    sim_chan_t *chan = cq->chan;
    char byte        = 0;

    if (cq->count == cq->size) {
        ++sim.stats.cq_overruns;
        fprintf(stderr, "hipower-sim: CQ %p of %u entries overrun "
                "(seed %" PRIu64 ")\n", (void*)cq, cq->size, sim.seed);
        return;
    }
    cq->wcs[(cq->head + cq->count) % cq->size] = *wc;
    ++cq->count;

    if (cq->armed && (chan != NULL)) {
        cq->armed = 0;
        if (chan->count == chan->size) {
            chan->size   = chan->size ? 2 * chan->size : 16;
            chan->events = realloc(chan->events,
                                   chan->size * sizeof(*chan->events));
            if (chan->events == NULL) {
                abort();
            }
            /* Unwrap: the queue restarts at 0 */
            if (chan->head + chan->count > chan->size / 2) {
                memmove(chan->events + chan->size / 2, chan->events,
                        chan->head * sizeof(*chan->events));
            }
        }
        chan->events[(chan->head + chan->count) % chan->size] = &cq->cq;
        ++chan->count;
        if (write(chan->pipe[1], &byte, 1) != 1) {
            abort();
        }
    }
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                     void **cq_context)
{
    sim_chan_t *chan = (sim_chan_t*)channel;
    char byte;

    if (read(chan->pipe[0], &byte, 1) != 1) {
        return -1; /* errno from read(): EAGAIN when non-blocking */
    }
    pthread_mutex_lock(&sim.lock);
    *cq         = chan->events[chan->head];
    *cq_context = (*cq)->cq_context;
    chan->head  = (chan->head + 1) % chan->size;
    --chan->count;
    pthread_mutex_unlock(&sim.lock);
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
}

static int sim_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    sim_cq_t *cq = (sim_cq_t*)ibcq;

    pthread_mutex_lock(&sim.lock);
    cq->armed = 1;
    pthread_mutex_unlock(&sim.lock);
    return 0;
}

static int sim_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
    sim_cq_t *cq = (sim_cq_t*)ibcq;
    unsigned steps;
    int n = 0;

    pthread_mutex_lock(&sim.lock);
    sim.virtual_ns  += SIM_VIRTUAL_NS_PER_POLL;
    sim.last_poll_ns = sim_now_ns();
    /* The device worked meanwhile: a few steps, as many as the seed says */
    steps = (unsigned)(sim_rand() % (sim.steps_per_poll + 1));
    hipower_sim_step(steps);
    while ((n < num) && (cq->count > 0)) {
        wc[n++]  = cq->wcs[cq->head];
        cq->head = (cq->head + 1) % cq->size;
        --cq->count;
    }
    pthread_mutex_unlock(&sim.lock);
    return n;
}


/* Queue pairs */

static void sim_ready_add(sim_qp_t *qp)
{
    if (qp->in_ready) {
        return;
    }
    if (sim.ready == NULL) {
        qp->ready_prev = qp->ready_next = qp;
        sim.ready      = qp;
    } else {
        qp->ready_next             = sim.ready;
        qp->ready_prev             = sim.ready->ready_prev;
        sim.ready->ready_prev->ready_next = qp;
        sim.ready->ready_prev      = qp;
    }
    qp->in_ready = 1;
    ++sim.num_ready;
}

static void sim_ready_del(sim_qp_t *qp)
{
    if (!qp->in_ready) {
        return;
    }
    if (qp->ready_next == qp) {
        sim.ready = NULL;
    } else {
        qp->ready_prev->ready_next = qp->ready_next;
        qp->ready_next->ready_prev = qp->ready_prev;
        if (sim.ready == qp) {
            sim.ready = qp->ready_next;
        }
    }
    qp->in_ready = 0;
    --sim.num_ready;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
                             struct ibv_qp_init_attr *attr)
{
    sim_dev_t *dev = sim_ctx_dev(pd->context);
    sim_qp_t *qp;
    uint32_t qpn;

    if ((attr->qp_type != IBV_QPT_RC) || (attr->srq != NULL) ||
        (attr->cap.max_send_wr > SIM_MAX_WR) ||
        (attr->cap.max_recv_wr > SIM_MAX_WR) ||
        (attr->cap.max_send_sge > SIM_MAX_SGE) ||
        (attr->cap.max_inline_data > SIM_MAX_INLINE)) {
        errno = EINVAL;
        return NULL;
    }

    qp = calloc(1, sizeof(*qp));
    if (qp == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    qp->sq = calloc(attr->cap.max_send_wr + 1, sizeof(*qp->sq));
    qp->rq = calloc(attr->cap.max_recv_wr + 1, sizeof(*qp->rq));
    if ((qp->sq == NULL) || (qp->rq == NULL)) {
        free(qp->sq);
        free(qp->rq);
        free(qp);
        errno = ENOMEM;
        return NULL;
    }

    pthread_mutex_lock(&sim.lock);
    /* Numbers are never reused in a run: a stale one must not reach a
     * new QP */
    qpn = dev->max_qps + 0x11;
    dev->qps = realloc(dev->qps, (dev->max_qps + 1) * sizeof(*dev->qps));
    if (dev->qps == NULL) {
        abort();
    }
    dev->qps[dev->max_qps++] = qp;
    pthread_mutex_unlock(&sim.lock);

    qp->dev            = dev;
    qp->cap            = attr->cap;
    qp->dest_dev       = -1;
    qp->qp.context     = pd->context;
    qp->qp.qp_context  = attr->qp_context;
    qp->qp.pd          = pd;
    qp->qp.send_cq     = attr->send_cq;
    qp->qp.recv_cq     = attr->recv_cq;
    qp->qp.qp_num      = qpn;
    qp->qp.state       = IBV_QPS_RESET;
    qp->qp.qp_type     = IBV_QPT_RC;
    pthread_mutex_init(&qp->qp.mutex, NULL);
    pthread_cond_init(&qp->qp.cond, NULL);
    return &qp->qp;
}

static sim_qp_t *sim_qp_find(sim_dev_t *dev, uint32_t qpn)
{
    uint32_t index = qpn - 0x11;

    return ((qpn >= 0x11) && (index < dev->max_qps)) ? dev->qps[index] : NULL;
}

static void sim_wc_init(struct ibv_wc *wc, uint64_t wr_id,
                        enum ibv_wc_status status, enum ibv_wc_opcode opcode,
                        uint32_t qpn)
{
    memset(wc, 0, sizeof(*wc));
    wc->wr_id  = wr_id;
    wc->status = status;
    wc->opcode = opcode;
    wc->qp_num = qpn;
}

static enum ibv_wc_opcode sim_wc_opcode(enum ibv_wr_opcode opcode)
{
    switch (opcode) {
    case IBV_WR_RDMA_READ:              return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:     return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:   return IBV_WC_FETCH_ADD;
    case IBV_WR_BIND_MW:                return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV:              return IBV_WC_LOCAL_INV;
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:          return IBV_WC_SEND;
    default:                            return IBV_WC_RDMA_WRITE;
    }
}

static void sim_swr_free(sim_swr_t *swr)
{
    free(swr->inline_data);
    swr->inline_data = NULL;
}

static void sim_cq_push(sim_cq_t *cq, const struct ibv_wc *wc);

/* Ends the QP's lost-ACK window: the completions it held come, with
 * @a status (a flush if the QP failed before the replay) */
static void sim_replay_end(sim_qp_t *qp, enum ibv_wc_status status)
{
    unsigned i;

    for (i = 0; i < qp->replay.num_held; ++i) {
        qp->replay.held[i].status = status;
        sim_cq_push((sim_cq_t*)qp->qp.send_cq, &qp->replay.held[i]);
    }
    for (i = 0; i < qp->replay.count; ++i) {
        free(qp->replay.writes[i].data);
    }
    qp->replay.count    = 0;
    qp->replay.next     = 0;
    qp->replay.num_held = 0;
}

/* QP to error: everything outstanding completes, flushed */
static void sim_qp_error(sim_qp_t *qp)
{
    struct ibv_wc wc;
    sim_swr_t *swr;
    sim_rwr_t *rwr;

    qp->qp.state = IBV_QPS_ERR;
    sim_replay_end(qp, IBV_WC_WR_FLUSH_ERR);
    while (qp->sq_count > 0) {
        swr = &qp->sq[qp->sq_head];
        sim_wc_init(&wc, swr->wr.wr_id, IBV_WC_WR_FLUSH_ERR,
                    sim_wc_opcode(swr->wr.opcode), qp->qp.qp_num);
        sim_cq_push((sim_cq_t*)qp->qp.send_cq, &wc);
        sim_swr_free(swr);
        qp->sq_head = (qp->sq_head + 1) % (qp->cap.max_send_wr + 1);
        --qp->sq_count;
        ++sim.stats.flushed;
    }
    while (qp->rq_count > 0) {
        rwr = &qp->rq[qp->rq_head];
        sim_wc_init(&wc, rwr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV,
                    qp->qp.qp_num);
        sim_cq_push((sim_cq_t*)qp->qp.recv_cq, &wc);
        qp->rq_head = (qp->rq_head + 1) % (qp->cap.max_recv_wr + 1);
        --qp->rq_count;
        ++sim.stats.flushed;
    }
    sim_ready_del(qp);
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
                  int attr_mask)
{
    sim_qp_t *qp = (sim_qp_t*)ibqp;
    enum ibv_qp_state cur, next;
    int i, ret = 0;

    pthread_mutex_lock(&sim.lock);
    cur  = ibqp->state;
    next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : cur;
    switch (next) {
    case IBV_QPS_INIT:
        if ((cur != IBV_QPS_RESET) && (cur != IBV_QPS_INIT)) {
            ret = EINVAL;
            break;
        }
        if (attr_mask & IBV_QP_ACCESS_FLAGS) {
            qp->access = attr->qp_access_flags;
        }
        break;
    case IBV_QPS_RTR:
        if ((cur != IBV_QPS_INIT) ||
            !(attr_mask & IBV_QP_DEST_QPN) || !(attr_mask & IBV_QP_AV)) {
            ret = EINVAL;
            break;
        }
        qp->dest_qpn = attr->dest_qp_num;
        qp->mtu      = 128u << ((attr_mask & IBV_QP_PATH_MTU) ?
                                attr->path_mtu : IBV_MTU_1024);
        if (attr_mask & IBV_QP_MIN_RNR_TIMER) {
            qp->min_rnr_timer = attr->min_rnr_timer;
        }
        qp->dest_dev = -1;
        for (i = 0; i < sim.num_devs; ++i) {
            if (attr->ah_attr.is_global &&
                !memcmp(&attr->ah_attr.grh.dgid, &sim.devs[i].gid,
                        sizeof(union ibv_gid))) {
                qp->dest_dev = i;
            }
        }
        break;
    case IBV_QPS_RTS:
        if ((cur != IBV_QPS_RTR) && (cur != IBV_QPS_RTS)) {
            ret = EINVAL;
            break;
        }
        if (attr_mask & IBV_QP_RETRY_CNT) {
            qp->retry_cnt = attr->retry_cnt;
        }
        if (attr_mask & IBV_QP_RNR_RETRY) {
            qp->rnr_retry = attr->rnr_retry;
        }
        if (attr_mask & IBV_QP_TIMEOUT) {
            qp->timeout = attr->timeout;
        }
        break;
    case IBV_QPS_ERR:
        sim_qp_error(qp);
        break;
    case IBV_QPS_RESET:
        sim_qp_error(qp);
        break;
    default:
        ret = EINVAL;
        break;
    }
    if ((ret == 0) && (next != IBV_QPS_ERR)) {
        ibqp->state = next;
    }
    if ((ret == 0) && (next == IBV_QPS_RTS) && (qp->sq_count > 0)) {
        sim_ready_add(qp);
    }
    pthread_mutex_unlock(&sim.lock);
    return ret;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
    sim_qp_t *qp = (sim_qp_t*)ibqp;
    sim_mw_t *mw;

    pthread_mutex_lock(&sim.lock);
    sim_ready_del(qp);
    qp->replay.num_held = 0; /* No CQ to complete them on */
    sim_replay_end(qp, IBV_WC_WR_FLUSH_ERR);
    while (qp->sq_count > 0) {
        sim_swr_free(&qp->sq[qp->sq_head]);
        qp->sq_head = (qp->sq_head + 1) % (qp->cap.max_send_wr + 1);
        --qp->sq_count;
    }
    qp->dev->qps[qp->qp.qp_num - 0x11] = NULL;
    /* Windows bound to it are bound to nothing now (their MR stays bound:
     * a window keeps its MR until it is deallocated or bound again) */
    while ((mw = qp->mws) != NULL) {
        qp->mws = mw->qp_next;
        mw->qp  = NULL;
        mw->qp_prev = mw->qp_next = NULL;
    }
    pthread_mutex_unlock(&sim.lock);
    free(qp->sq);
    free(qp->rq);
    free(qp);
    return 0;
}

static int sim_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                         struct ibv_send_wr **bad_wr)
{
    sim_qp_t *qp = (sim_qp_t*)ibqp;
    sim_swr_t *swr;
    size_t length;
    int i, ret = 0;

    pthread_mutex_lock(&sim.lock);
    for (; wr != NULL; wr = wr->next) {
        if ((ibqp->state != IBV_QPS_RTS) && (ibqp->state != IBV_QPS_ERR)) {
            ret = EINVAL;
            break;
        }
        if ((qp->sq_count >= qp->cap.max_send_wr) ||
            (wr->num_sge > (int)qp->cap.max_send_sge) || (wr->num_sge < 0)) {
            ret = (qp->sq_count >= qp->cap.max_send_wr) ? ENOMEM : EINVAL;
            break;
        }

        swr = &qp->sq[(qp->sq_head + qp->sq_count) %
                      (qp->cap.max_send_wr + 1)];
        memset(swr, 0, sizeof(*swr));
        swr->wr         = *wr;
        swr->wr.next    = NULL;
        swr->wr.sg_list = swr->sge;
        if (wr->num_sge > 0) {
            memcpy(swr->sge, wr->sg_list, wr->num_sge * sizeof(*swr->sge));
        }

        if (wr->send_flags & IBV_SEND_INLINE) {
            /* The data is taken now: the buffer may change after */
            for (i = 0, length = 0; i < wr->num_sge; ++i) {
                length += wr->sg_list[i].length;
            }
            if (length > qp->cap.max_inline_data) {
                ret = EINVAL;
                break;
            }
            swr->inline_data = malloc(length ? length : 1);
            if (swr->inline_data == NULL) {
                ret = ENOMEM;
                break;
            }
            for (i = 0, length = 0; i < wr->num_sge; ++i) {
                memcpy(swr->inline_data + length,
                       (void*)(uintptr_t)wr->sg_list[i].addr,
                       wr->sg_list[i].length);
                length += wr->sg_list[i].length;
            }
            swr->inline_len = length;
        }

        ++qp->sq_count;
        if (ibqp->state == IBV_QPS_ERR) {
            /* Completed at once, flushed */
            sim_qp_error(qp);
        } else {
            sim_ready_add(qp);
        }
    }

    if (ret != 0) {
        *bad_wr = wr;
    }
    pthread_mutex_unlock(&sim.lock);
    return ret;
}

static int sim_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad_wr)
{
    sim_qp_t *qp = (sim_qp_t*)ibqp;
    sim_rwr_t *rwr;
    int ret = 0;

    pthread_mutex_lock(&sim.lock);
    for (; wr != NULL; wr = wr->next) {
        if ((ibqp->state == IBV_QPS_RESET) ||
            (qp->rq_count >= qp->cap.max_recv_wr) || (wr->num_sge > 1)) {
            ret = (qp->rq_count >= qp->cap.max_recv_wr) ? ENOMEM : EINVAL;
            break;
        }
        rwr = &qp->rq[(qp->rq_head + qp->rq_count) %
                      (qp->cap.max_recv_wr + 1)];
        rwr->wr_id   = wr->wr_id;
        rwr->num_sge = wr->num_sge;
        if (wr->num_sge > 0) {
            rwr->sge = wr->sg_list[0];
        }
        ++qp->rq_count;
        if (ibqp->state == IBV_QPS_ERR) {
            sim_qp_error(qp);
        }
    }
    if (ret != 0) {
        *bad_wr = wr;
    }
    pthread_mutex_unlock(&sim.lock);
    return ret;
}


/* Execution */

/* The local memory of @a sge, if the QP's device has an MR that covers it
 * with @a access; NULL (a local protection error) if not */
static void *sim_local(sim_qp_t *qp, const struct ibv_sge *sge, int access)
{
    sim_mr_t *mr;
    int is_mw;

    mr = sim_key_find(qp->dev, sge->lkey, &is_mw);
    if ((mr == NULL) || is_mw || (mr->mr.lkey != sge->lkey) ||
        (mr->mr.pd != qp->qp.pd) ||
        ((access & IBV_ACCESS_LOCAL_WRITE) &&
         !(mr->access & IBV_ACCESS_LOCAL_WRITE)) ||
        (sge->addr < (uintptr_t)mr->mr.addr) ||
        (sge->addr + sge->length > (uintptr_t)mr->mr.addr + mr->mr.length)) {
        return NULL;
    }
    return (void*)(uintptr_t)sge->addr;
}

/* The responder's memory at @a addr for @a length bytes under @a rkey, if
 * @a resp may be reached so; NULL (a remote access error) if not */
static void *sim_remote(sim_qp_t *resp, uint64_t addr, uint32_t rkey,
                        uint64_t length, int access)
{
    sim_mr_t *mr;
    sim_mw_t *mw;
    void *obj;
    int is_mw;

    obj = sim_key_find(resp->dev, rkey, &is_mw);
    if (obj == NULL) {
        return NULL;
    }
    if (is_mw) {
        mw = obj;
        if ((mw->mr == NULL) || (mw->mw.rkey != rkey) || (mw->qp != resp) ||
            ((mw->access & access) != access) || (addr < mw->addr) ||
            (addr + length > mw->addr + mw->length)) {
            return NULL;
        }
        return (void*)(uintptr_t)addr;
    }

    mr = obj;
    if ((mr->mr.rkey != rkey) || (mr->mr.pd != resp->qp.pd) ||
        ((mr->access & access) != access) ||
        ((resp->access & access) != access) ||
        (addr < (uintptr_t)mr->mr.addr) ||
        (addr + length > (uintptr_t)mr->mr.addr + mr->mr.length)) {
        return NULL;
    }
    return (void*)(uintptr_t)addr;
}

static void sim_sq_pop(sim_qp_t *qp)
{
    sim_swr_free(&qp->sq[qp->sq_head]);
    qp->sq_head = (qp->sq_head + 1) % (qp->cap.max_send_wr + 1);
    --qp->sq_count;
    if ((qp->sq_count == 0) && (qp->replay.count == 0)) {
        sim_ready_del(qp); /* A window open: its replay is to come */
    }
}

/* The head request failed with @a status: it completes with it, the QP
 * goes to error and the rest is flushed */
static void sim_fail(sim_qp_t *qp, enum ibv_wc_status status)
{
    sim_swr_t *swr = &qp->sq[qp->sq_head];
    struct ibv_wc wc;

    sim_wc_init(&wc, swr->wr.wr_id, status, sim_wc_opcode(swr->wr.opcode),
                qp->qp.qp_num);
    sim_cq_push((sim_cq_t*)qp->qp.send_cq, &wc);
    sim_sq_pop(qp);
    sim_qp_error(qp);
}

static void sim_complete(sim_qp_t *qp, uint32_t byte_len)
{
    sim_swr_t *swr = &qp->sq[qp->sq_head];
    struct ibv_wc wc;

    if (swr->wr.send_flags & IBV_SEND_SIGNALED) {
        sim_wc_init(&wc, swr->wr.wr_id, IBV_WC_SUCCESS,
                    sim_wc_opcode(swr->wr.opcode), qp->qp.qp_num);
        wc.byte_len = byte_len;
        if (qp->replay.count > 0) {
            /* Not acknowledged until the replay (only WRITEs run while
             * a window is open: at most one completion each) */
            qp->replay.held[qp->replay.num_held++] = wc;
        } else {
            sim_cq_push((sim_cq_t*)qp->qp.send_cq, &wc);
        }
    }
    ++sim.stats.wrs_executed;
    sim_sq_pop(qp);
}

static void sim_exec_bind(sim_qp_t *qp, sim_swr_t *swr)
{
    struct ibv_mw_bind_info *info = &swr->wr.bind_mw.bind_info;
    sim_mw_t *mw                  = (sim_mw_t*)swr->wr.bind_mw.mw;
    sim_mr_t *mr                  = (sim_mr_t*)info->mr;

    const char *why = NULL;
    void *obj;
    int is_mw;

    /* The window by its key, as a device finds it (the pointer in the
     * request may be of a window deallocated since: not to be touched) */
    obj = sim_key_find(qp->dev, swr->wr.bind_mw.rkey, &is_mw);
    if ((obj == NULL) || !is_mw) {
        /* Deallocated after the bind was posted: the bind fails and the
         * QP goes to error, as rxe does; a transport's bug only if the QP
         * was one it still used (then its endpoint fails, and a test sees
         * that) */
        ++sim.stats.bind_errors;
        sim_fail(qp, IBV_WC_MW_BIND_ERR);
        return;
    }

    if ((mw == NULL) || (mr == NULL) || (obj != mw)) {
        why = "no window or no MR";
    } else if (mw->dev != qp->dev) {
        why = "window of another device";
    } else if ((swr->wr.bind_mw.rkey >> 8) != (mw->mw.rkey >> 8)) {
        why = "new rkey not of this window";
    } else if (!(mr->access & IBV_ACCESS_MW_BIND)) {
        why = "MR without MW_BIND";
    } else if ((info->mw_access_flags & (IBV_ACCESS_REMOTE_WRITE |
                                         IBV_ACCESS_REMOTE_ATOMIC)) &&
               !(mr->access & IBV_ACCESS_LOCAL_WRITE)) {
        why = "remote write on an MR without local write";
    } else if ((info->addr < (uintptr_t)mr->mr.addr) ||
               (info->addr + info->length >
                (uintptr_t)mr->mr.addr + mr->mr.length)) {
        why = "range outside the MR";
    }
    if (why != NULL) {
        ++sim.stats.local_errors;
        fprintf(stderr, "hipower-sim: bad memory window bind on qp 0x%x: "
                "%s\n", qp->qp.qp_num, why);
        sim_fail(qp, IBV_WC_MW_BIND_ERR);
        return;
    }

    sim_mw_unbind(mw);
    mw->mr      = mr;
    ++mr->bound_mws;
    mw->addr    = info->addr;
    mw->length  = info->length;
    mw->access  = (int)info->mw_access_flags;
    mw->qp      = qp;
    mw->qp_prev = NULL;
    mw->qp_next = qp->mws;
    if (qp->mws != NULL) {
        qp->mws->qp_prev = mw;
    }
    qp->mws     = mw;
    mw->mw.rkey = swr->wr.bind_mw.rkey;
    sim_complete(qp, 0);
}

/* How long the request has been tried: 0 at its first try */
static uint64_t sim_tried_for(sim_swr_t *swr)
{
    uint64_t now = sim_now_ns();

    if (swr->first_try_ns == 0) {
        swr->first_try_ns = now;
    }
    return now - swr->first_try_ns;
}

/* Copies bytes [off, off + len) of the request's local data (inline, or
 * its sges one after the other) to @a mem, or from it if @a to_local */
static void sim_copy_local(sim_swr_t *swr, uint64_t off, uint8_t *mem,
                           uint64_t len, int to_local)
{
    uint64_t pos = 0, start, n;
    uint8_t *data;
    int i;

    if (swr->inline_data != NULL) {
        memcpy(mem, swr->inline_data + off, len);
        return;
    }
    for (i = 0; (i < swr->wr.num_sge) && (len > 0); ++i) {
        if (off < pos + swr->sge[i].length) {
            start = off - pos;
            n     = swr->sge[i].length - start;
            n     = (n < len) ? n : len;
            data  = (uint8_t*)(uintptr_t)swr->sge[i].addr + start;
            if (to_local) {
                memmove(data, mem, n);
            } else {
                memmove(mem, data, n);
            }
            off += n;
            mem += n;
            len -= n;
        }
        pos += swr->sge[i].length;
    }
}

static uint64_t sim_gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Places the next pieces of a WRITE (into @a remote) or a READ (from it),
 * a few per step; returns 1 once every piece is placed */
static int sim_place(sim_qp_t *qp, sim_swr_t *swr, uint8_t *remote,
                     uint64_t length, int is_read)
{
    uint64_t mtu = qp->mtu ? qp->mtu : 1024;
    uint64_t n   = (length + mtu - 1) / mtu;
    unsigned count = 1 + (unsigned)(sim_rand() % sim.pieces_per_step);
    uint64_t k, piece, off, len;

    if (sim.placement == SIM_PLACE_TORN) {
        /* In order, but each packet in two steps, cut at a byte the
         * generator picks (swr->cut keeps it between the two): a poll
         * may find any prefix of the write placed, even part of a word,
         * as a CPU copying the packet byte by byte leaves it (rxe under
         * an emulated CPU does) */
        while ((count-- > 0) && (swr->pieces_done < 2 * n)) {
            k     = swr->pieces_done++;
            off   = (k / 2) * mtu;
            len   = ((length - off) < mtu) ? (length - off) : mtu;
            if ((k % 2) == 0) {
                swr->cut = sim_rand() % (len + 1);
                len      = swr->cut;
            } else {
                off += swr->cut;
                len -= swr->cut;
            }
            if (len > 0) {
                sim_copy_local(swr, off, remote + off, len, is_read);
                sim.stats.bytes_placed += len;
            }
        }
        return swr->pieces_done >= 2 * n;
    }

    if ((swr->pieces_done == 0) && (n > 1)) {
        swr->stride = 1 + sim_rand() % n;
        while (sim_gcd(swr->stride, n) != 1) {
            swr->stride = (swr->stride % n) + 1;
        }
        swr->start = sim_rand() % n;
    }

    while ((count-- > 0) && (swr->pieces_done < n)) {
        k = swr->pieces_done++;
        switch (sim.placement) {
        case SIM_PLACE_REVERSE:
            piece = n - 1 - k;
            break;
        case SIM_PLACE_RANDOM:
            piece = (k * swr->stride + swr->start) % n;
            break;
        default:
            piece = k;
            break;
        }
        off = piece * mtu;
        len = ((length - off) < mtu) ? (length - off) : mtu;
        sim_copy_local(swr, off, remote + off, len, is_read);
        sim.stats.bytes_placed += len;
    }
    return swr->pieces_done >= n;
}

/* Requests of a QP whose data may be placed at once in random placement:
 * a WRITE's packets may overtake an earlier WRITE's (adaptive routing) */
#define SIM_PLACE_WINDOW 4

static int sim_is_write(const sim_swr_t *swr)
{
    return (swr->wr.opcode == IBV_WR_RDMA_WRITE) ||
           (swr->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
}

/*
 * Random placement: places pieces of a WRITE behind the head one, if the
 * generator picks one and every request before it is a WRITE too. Its
 * completion (and its immediate) still waits for its turn. Returns 1 if
 * it placed something.
 */
static int sim_place_ahead(sim_qp_t *qp, sim_qp_t *resp)
{
    unsigned window = (qp->sq_count < SIM_PLACE_WINDOW) ? qp->sq_count :
                      SIM_PLACE_WINDOW;
    unsigned j      = (unsigned)(sim_rand() % window), i;
    uint64_t length;
    sim_swr_t *swr;
    uint8_t *remote;
    int k;

    for (i = 0; i <= j; ++i) {
        if (!sim_is_write(&qp->sq[(qp->sq_head + i) %
                                 (qp->cap.max_send_wr + 1)])) {
            return 0;
        }
    }
    if (j == 0) {
        return 0;
    }

    swr = &qp->sq[(qp->sq_head + j) % (qp->cap.max_send_wr + 1)];
    for (k = 0, length = 0; k < swr->wr.num_sge; ++k) {
        if ((swr->inline_data == NULL) &&
            (sim_local(qp, &swr->sge[k], 0) == NULL)) {
            return 0; /* Its error comes in its turn */
        }
        length += swr->sge[k].length;
    }
    remote = sim_remote(resp, swr->wr.wr.rdma.remote_addr,
                        swr->wr.wr.rdma.rkey, length,
                        IBV_ACCESS_REMOTE_WRITE);
    if ((remote == NULL) || (length == 0) ||
        (swr->pieces_done * (qp->mtu ? qp->mtu : 1024) >= length)) {
        return 0;
    }
    (void)sim_place(qp, swr, remote, length, 0);
    return 1;
}

/*
 * Replay placement: the WRITE at the head of @a qp, placed whole just now,
 * joins the QP's open lost-ACK window, or opens one now and then. What its
 * replay carries is copied now: the bytes it was placed with, which its
 * local buffer held when it executed. Not when it was posted: a WRITE
 * behind a fence, or behind a READ into its buffer, is sent with what the
 * READ brought (a copy at posting made uct_iface_fence() look broken:
 * iface_fence_orders_get_then_put, "stale == 1"). A requester resends
 * what it sent; the buffer is the user's again only after the completion,
 * which the window holds until after the replay.
 */
static void sim_replay_add(sim_qp_t *qp, sim_swr_t *swr, uint64_t length)
{
    sim_replay_write_t *write;
    uint8_t *data;

    if (length == 0) {
        return;
    }
    if (qp->replay.count == 0) {
        if ((sim_rand() % sim.replay_every) != 0) {
            return; /* Acknowledged */
        }
        qp->replay.due = sim.stats.steps + 1 +
                         sim_rand() % SIM_REPLAY_DELAY;
    }
    data = malloc(length);
    if (data == NULL) {
        return; /* Acknowledged after all */
    }
    sim_copy_local(swr, 0, data, length, 0);
    write         = &qp->replay.writes[qp->replay.count++];
    write->addr   = swr->wr.wr.rdma.remote_addr;
    write->rkey   = swr->wr.wr.rdma.rkey;
    write->length = (uint32_t)length;
    write->data   = data;
}

/*
 * The next step of the open lost-ACK window of @a qp: once due, its WRITEs
 * placed again one a step, then the ACK (the completions it held).
 * Returns 1 if it did something. A WRITE whose key no longer admits it
 * (the responder unbound the window since) is left out: what a device does
 * then is not modelled.
 */
static int sim_replay_step(sim_qp_t *qp)
{
    sim_replay_write_t *write;
    sim_qp_t *resp = NULL;
    uint8_t *remote    = NULL;

    if (sim.stats.steps < qp->replay.due) {
        return 0;
    }
    if (qp->replay.next == qp->replay.count) {
        sim_replay_end(qp, IBV_WC_SUCCESS);
        if (qp->sq_count == 0) {
            sim_ready_del(qp);
        }
        return 1;
    }

    write = &qp->replay.writes[qp->replay.next++];
    if (qp->dest_dev >= 0) {
        resp = sim_qp_find(&sim.devs[qp->dest_dev], qp->dest_qpn);
    }
    if ((resp != NULL) &&
        ((resp->qp.state == IBV_QPS_RTR) || (resp->qp.state == IBV_QPS_RTS))) {
        remote = sim_remote(resp, write->addr, write->rkey, write->length,
                            IBV_ACCESS_REMOTE_WRITE);
    }
    if (remote == NULL) {
        ++sim.stats.replays_dropped;
        return 1;
    }
    memcpy(remote, write->data, write->length);
    sim.stats.bytes_placed += write->length;
    ++sim.stats.replayed_writes;
    return 1;
}

/* Executes the head request of @a qp; returns 1 if it made progress */
static int sim_exec(sim_qp_t *qp)
{
    sim_swr_t *swr = &qp->sq[qp->sq_head];
    sim_qp_t *resp = NULL;
    sim_rwr_t *rwr;
    struct ibv_wc wc;
    uint64_t length = 0, old;
    uint8_t *remote;
    int i, access;

    /* A lost-ACK window open: its replay once due; until then only WRITEs
     * join it (a READ's response, a bind's completion would acknowledge
     * it) */
    if ((qp->replay.count > 0) &&
        ((sim.stats.steps >= qp->replay.due) || (qp->sq_count == 0) ||
         !sim_is_write(swr) || (qp->replay.count == SIM_REPLAY_MAX))) {
        return sim_replay_step(qp);
    }

    if (swr->wr.opcode == IBV_WR_BIND_MW) {
        sim_exec_bind(qp, swr);
        return 1;
    }
    if (swr->wr.opcode == IBV_WR_LOCAL_INV) {
        sim_complete(qp, 0);
        return 1;
    }

    /* The data's local side: inline, or every sge under its lkey */
    for (i = 0; i < swr->wr.num_sge; ++i) {
        access = ((swr->wr.opcode == IBV_WR_RDMA_READ) ||
                  (swr->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) ||
                  (swr->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP)) ?
                 IBV_ACCESS_LOCAL_WRITE : 0;
        if ((swr->inline_data == NULL) &&
            (sim_local(qp, &swr->sge[i], access) == NULL)) {
            ++sim.stats.local_errors;
            fprintf(stderr, "hipower-sim: qp 0x%x: sge %d [0x%" PRIx64
                    ", +%u) not under lkey 0x%x\n", qp->qp.qp_num, i,
                    swr->sge[i].addr, swr->sge[i].length, swr->sge[i].lkey);
            sim_fail(qp, IBV_WC_LOC_PROT_ERR);
            return 1;
        }
        length += swr->sge[i].length;
    }

    if (qp->dest_dev >= 0) {
        resp = sim_qp_find(&sim.devs[qp->dest_dev], qp->dest_qpn);
    }
    if ((resp == NULL) ||
        ((resp->qp.state != IBV_QPS_RTR) && (resp->qp.state != IBV_QPS_RTS))) {
        /* No answer: the retry timer, then "retry exceeded" */
        if (sim_tried_for(swr) > (qp->retry_cnt + 1) *
                                 sim_ack_timeout_ns(qp->timeout)) {
            ++sim.stats.retry_errors;
            sim_fail(qp, IBV_WC_RETRY_EXC_ERR);
            return 1;
        }
        return 0;
    }

    if ((sim.placement == SIM_PLACE_RANDOM) && sim_place_ahead(qp, resp)) {
        return 1;
    }

    switch (swr->wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        remote = sim_remote(resp, swr->wr.wr.rdma.remote_addr,
                            swr->wr.wr.rdma.rkey, length,
                            IBV_ACCESS_REMOTE_WRITE);
        if ((remote == NULL) && (length > 0)) {
            break;
        }
        if (!sim_place(qp, swr, remote, length, 0)) {
            return 1; /* More pieces to come */
        }
        /* The immediate comes with the last packet: it needs a receive
         * (the pieces before it stay placed) */
        if (swr->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
            if (resp->rq_count == 0) {
                ++sim.stats.rnr_naks;
                if ((qp->rnr_retry < 7) &&
                    (sim_tried_for(swr) > (qp->rnr_retry + 1) *
                                    sim_rnr_timer_ns(resp->min_rnr_timer))) {
                    sim_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
                    return 1;
                }
                return 0;
            }
        }
        if (swr->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
            rwr = &resp->rq[resp->rq_head];
            sim_wc_init(&wc, rwr->wr_id, IBV_WC_SUCCESS,
                        IBV_WC_RECV_RDMA_WITH_IMM, resp->qp.qp_num);
            wc.byte_len  = (uint32_t)length;
            wc.imm_data  = swr->wr.imm_data;
            wc.wc_flags  = IBV_WC_WITH_IMM;
            wc.src_qp    = qp->qp.qp_num;
            resp->rq_head = (resp->rq_head + 1) % (resp->cap.max_recv_wr + 1);
            --resp->rq_count;
            sim_cq_push((sim_cq_t*)resp->qp.recv_cq, &wc);
        }
        if (sim.placement == SIM_PLACE_REPLAY) {
            sim_replay_add(qp, swr, length);
        }
        sim_complete(qp, 0);
        return 1;
    case IBV_WR_RDMA_READ:
        remote = sim_remote(resp, swr->wr.wr.rdma.remote_addr,
                            swr->wr.wr.rdma.rkey, length,
                            IBV_ACCESS_REMOTE_READ);
        if ((remote == NULL) && (length > 0)) {
            break;
        }
        if (!sim_place(qp, swr, remote, length, 1)) {
            return 1;
        }
        sim_complete(qp, (uint32_t)length);
        return 1;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        if ((length != 8) || (swr->wr.wr.atomic.remote_addr % 8)) {
            break;
        }
        remote = sim_remote(resp, swr->wr.wr.atomic.remote_addr,
                            swr->wr.wr.atomic.rkey, 8,
                            IBV_ACCESS_REMOTE_ATOMIC);
        if (remote == NULL) {
            break;
        }
        memcpy(&old, remote, 8);
        if (swr->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
            *(uint64_t*)remote = old + swr->wr.wr.atomic.compare_add;
        } else if (old == swr->wr.wr.atomic.compare_add) {
            *(uint64_t*)remote = swr->wr.wr.atomic.swap;
        }
        memcpy((void*)(uintptr_t)swr->sge[0].addr, &old, 8);
        sim.stats.bytes_placed += 8;
        sim_complete(qp, 8);
        return 1;
    default:
        ++sim.stats.local_errors;
        fprintf(stderr, "hipower-sim: qp 0x%x: opcode %d not supported\n",
                qp->qp.qp_num, (int)swr->wr.opcode);
        sim_fail(qp, IBV_WC_LOC_QP_OP_ERR);
        return 1;
    }

    /* The responder refused: both QPs fail */
    ++sim.stats.access_errors;
    sim_fail(qp, IBV_WC_REM_ACCESS_ERR);
    sim_qp_error(resp);
    return 1;
}

unsigned hipower_sim_step(unsigned count)
{
    unsigned done = 0, skip;
    sim_qp_t *qp;

    pthread_mutex_lock(&sim.lock);
    while ((count-- > 0) && (sim.ready != NULL)) {
        /* Any QP with requests may go next: RC orders each QP's own */
        for (qp = sim.ready, skip = sim_rand() % sim.num_ready; skip > 0;
             --skip) {
            qp = qp->ready_next;
        }
        ++sim.stats.steps;
        sim.virtual_ns += SIM_VIRTUAL_NS_PER_STEP;
        if (qp->qp.state == IBV_QPS_RTS) {
            done += sim_exec(qp);
        }
    }
    pthread_mutex_unlock(&sim.lock);
    return done;
}

void hipower_sim_get_stats(hipower_sim_stats_t *stats)
{
    pthread_mutex_lock(&sim.lock);
    *stats = sim.stats;
    pthread_mutex_unlock(&sim.lock);
}

uint64_t hipower_sim_seed(void)
{
    uint64_t seed;

    pthread_mutex_lock(&sim.lock);
    sim_init();
    seed = sim.seed;
    pthread_mutex_unlock(&sim.lock);
    return seed;
}

uint64_t hipower_sim_now_ns(void)
{
    uint64_t now;

    pthread_mutex_lock(&sim.lock);
    sim_init();
    now = sim_now_ns();
    pthread_mutex_unlock(&sim.lock);
    return now;
}

void hipower_sim_advance(uint64_t ns)
{
    pthread_mutex_lock(&sim.lock);
    sim.virtual_ns += ns;
    pthread_mutex_unlock(&sim.lock);
}

void hipower_sim_reseed(uint64_t seed)
{
    pthread_mutex_lock(&sim.lock);
    sim_init();
    sim.seed = seed;
    sim.rng  = seed * 0x9e3779b97f4a7c15ull + 1;
    pthread_mutex_unlock(&sim.lock);
}

/*
 * The transport's clock (hipower_clock.h), interposed like the verbs
 * functions: the wall clock, or the virtual one in the units of
 * ucs_get_time()
 */
ucs_time_t uct_hipower_clock_now(void)
{
    if (!sim.virtual_clock) {
        return ucs_get_time();
    }
    return ucs_time_from_usec((double)sim.virtual_ns / 1000.0);
}

int hipower_sim_fail_qp(int dev_index, uint32_t qpn)
{
    sim_qp_t *qp = NULL;

    pthread_mutex_lock(&sim.lock);
    if ((dev_index >= 0) && (dev_index < sim.num_devs)) {
        qp = sim_qp_find(&sim.devs[dev_index], qpn);
    }
    if (qp != NULL) {
        sim_qp_error(qp);
    }
    pthread_mutex_unlock(&sim.lock);
    return (qp != NULL) ? 0 : -1;
}

/* What a hostile peer writes: random bytes, or values a protocol word
 * plausibly holds (small counts, all ones, a word near one already
 * there), which get further into a parser than noise does */
static void sim_hostile_bytes(uint8_t *dst, size_t len)
{
    uint64_t kind = sim_rand() % 4, value;
    size_t i;

    for (i = 0; i < len; i += sizeof(value)) {
        switch (kind) {
        case 0:
            value = sim_rand();
            break;
        case 1:
            value = sim_rand() % 8;
            break;
        case 2:
            value = ~0ull << (sim_rand() % 64);
            break;
        default:
            memcpy(&value, dst + i, ((len - i) < sizeof(value)) ?
                                    (len - i) : sizeof(value));
            value += (sim_rand() % 5) - 2;
            break;
        }
        memcpy(dst + i, &value, ((len - i) < sizeof(value)) ?
                                (len - i) : sizeof(value));
    }
}

size_t hipower_sim_scribble(int dev_index, uint32_t qpn)
{
    sim_qp_t *resp = NULL;
    uint64_t addr = 0, length = 0, off, len;
    unsigned count = 0, pick;
    sim_mw_t *mw;
    int pass;

    pthread_mutex_lock(&sim.lock);
    if ((dev_index >= 0) && (dev_index < sim.num_devs)) {
        resp = sim_qp_find(&sim.devs[dev_index], qpn);
    }
    if ((resp == NULL) || (resp->qp.state == IBV_QPS_ERR)) {
        pthread_mutex_unlock(&sim.lock);
        return 0;
    }

    /* What the responder lets its peer write: the windows bound to it.
     * (MRs of its domain with remote write are the user's RMA buffers, or
     * the rcache's registrations of memory since freed: a peer reaches
     * them only with keys the user gave it, not the transport's business;
     * pass 0 counts, pass 1 takes the chosen one) */
    pick = 0;
    for (pass = 0; pass < 2; ++pass) {
        for (mw = resp->mws, count = 0; mw != NULL; mw = mw->qp_next) {
            if ((mw->mr == NULL) || !(mw->access & IBV_ACCESS_REMOTE_WRITE) ||
                (mw->length == 0)) {
                continue;
            }
            addr   = mw->addr;
            length = mw->length;
            if ((pass == 1) && (count == pick)) {
                goto found;
            }
            ++count;
        }
        if (count == 0) {
            break;
        }
        pick = (unsigned)(sim_rand() % count);
    }
    pthread_mutex_unlock(&sim.lock);
    return 0;

found:
    /* Mostly a word or two, sometimes a longer run, 8-byte aligned half
     * of the time (where the protocol's words are) */
    len = (sim_rand() % 4 == 0) ? 1 + sim_rand() % 256 : 1 + sim_rand() % 16;
    len = (len < length) ? len : length;
    off = sim_rand() % (length - len + 1);
    if (sim_rand() % 2) {
        off &= ~7ull;
    }
    sim_hostile_bytes((uint8_t*)(uintptr_t)(addr + off), len);
    sim.stats.bytes_placed += len;
    pthread_mutex_unlock(&sim.lock);
    return len;
}

int hipower_sim_async_event(int dev_index, enum ibv_event_type type,
                            uint32_t qpn)
{
    struct ibv_async_event event;
    sim_qp_t *qp = NULL;
    sim_ctx_t *ctx;
    int count = 0;

    pthread_mutex_lock(&sim.lock);
    if ((dev_index < 0) || (dev_index >= sim.num_devs)) {
        pthread_mutex_unlock(&sim.lock);
        return 0;
    }
    memset(&event, 0, sizeof(event));
    event.event_type = type;
    switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
        /* The QP broke: in error, and its user told */
        qp = sim_qp_find(&sim.devs[dev_index], qpn);
        if (qp != NULL) {
            sim_qp_error(qp);
            event.element.qp = &qp->qp;
            sim_event_push((sim_ctx_t*)qp->qp.context, &event);
            count = 1;
        }
        break;
    default:
        /* Port and device events: every context open on the device */
        event.element.port_num = 1;
        for (ctx = sim.devs[dev_index].contexts; ctx != NULL;
             ctx = ctx->next_open) {
            sim_event_push(ctx, &event);
            ++count;
        }
        break;
    }
    pthread_mutex_unlock(&sim.lock);
    return count;
}

void hipower_sim_set_epoch_origin(uint64_t origin)
{
    pthread_mutex_lock(&sim.lock);
    sim_init();
    sim.epoch_origin = origin;
    pthread_mutex_unlock(&sim.lock);
}

void hipower_sim_set_seq_origin(uint32_t before_period)
{
    pthread_mutex_lock(&sim.lock);
    sim_init();
    sim.seq_before_period = before_period;
    pthread_mutex_unlock(&sim.lock);
}

/* The sequence number a run's first message has (hipower_origin.h): a
 * few messages before the run's period, where sequence numbers restart */
uint32_t uct_hipower_seq_origin(uint32_t num_slots)
{
    uint32_t before, period;

    pthread_mutex_lock(&sim.lock);
    sim_init();
    before = sim.seq_before_period;
    pthread_mutex_unlock(&sim.lock);
    if ((num_slots == 0) || (before == 0)) {
        return 0;
    }

    period = hipower_ring_seq_period(num_slots);
    return period - ((before < period) ? before : period - 1);
}

/* The transport's first epoch of a connection (hipower_origin.h),
 * interposed like its clock */
uint64_t uct_hipower_epoch_origin(void)
{
    uint64_t origin;

    pthread_mutex_lock(&sim.lock);
    sim_init();
    origin = sim.epoch_origin;
    pthread_mutex_unlock(&sim.lock);
    return origin;
}
