/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: shared declarations (options, control plane over TCP, UCP
 * helpers, data patterns, statistics). See wl_main.c for the programme's
 * description and its output keys.
 */
#ifndef WL_H
#define WL_H

#include <ucp/api/ucp.h>

#include <stddef.h>
#include <stdint.h>

/* Tag: kind (8 bits) | source rank (8) | sequence / payload (48) */
#define WL_TAG(kind, src, seq) \
    (((uint64_t)(kind) << 56) | ((uint64_t)(src) << 48) | \
     ((uint64_t)(seq) & WL_SEQ_MASK))
#define WL_SEQ_MASK   0x0000ffffffffffffull
#define WL_FULL_MASK  0xffffffffffffffffull
#define WL_MAX_RANKS  64

/* Message kinds (tag bits 56..63) */
enum {
    K_WARM = 1, K_WARM_ACK, K_TPUT, K_DONE, K_LAT, K_LAT_ACK, K_GRAD,
    K_PARAM, K_SAMPLE, K_SPLIT, K_COUNT, K_DATA
};

typedef struct {
    /* launch */
    int         rank, nranks, port;
    const char *host;
    const char *pattern;
    unsigned    timeout;
    int         wait_mode;   /* now: 1 while a --modes wait phase runs */
    int         wakeup;      /* UCP_FEATURE_WAKEUP requested */
    unsigned    modes;       /* 1: busy polling, 2: wait */
    int         verbose;
    uint64_t    seed;
    /* incast */
    size_t      size;        /* the one being measured */
    size_t      sizes[16];
    unsigned    num_sizes;
    size_t      budget;      /* throughput bytes per worker, 0 = --msgs */
    unsigned    msgs, window, lat_rounds, warmup;
    /* resnet */
    unsigned    iters, warmup_iters, tensor_stride, shrink;
    /* shuffle */
    size_t      records, chunk;
    /* connect */
    unsigned    eps;
} wl_opts_t;

extern wl_opts_t wl;

/* ---- wl_util.c: errors, time, patterns, statistics */
void   wl_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                   noreturn));
void   wl_where(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *wl_where_now(void);
void   wl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void   wl_watchdog_start(void);
double wl_now(void);
double wl_cpu(void);
void  *wl_malloc(size_t size);
uint64_t wl_mix(uint64_t x);
uint64_t wl_base(int kind, int src, int dst, uint64_t seq);
void   wl_fill(void *buf, size_t len, uint64_t base);
/* Returns -1 if buf holds the pattern, else the first bad offset */
long   wl_check(const void *buf, size_t len, uint64_t base);
/* Exits naming the message if buf (got bytes) is not (kind, src, dst, seq) */
void   wl_verify(const char *what, const void *buf, size_t got, size_t len,
                 int kind, int src, int dst, uint64_t seq);
double wl_median(const double *v, unsigned n);
double wl_min(const double *v, unsigned n);
double wl_max(const double *v, unsigned n);
/* CPU microseconds that filling (or checking) one message of len costs */
double wl_pattern_cost(size_t len, int check);

/* ---- wl_ctl.c: control plane over loopback TCP (star around rank 0) */
void wl_ctl_setup(void);
void wl_ctl_close(void);
/* Rank 0 receives every rank's len bytes into all[rank * len] */
void wl_ctl_gather(const void *mine, size_t len, void *all);
void wl_ctl_bcast(void *buf, size_t len);
void wl_ctl_allgather(const void *mine, size_t len, void *all);
void wl_ctl_barrier(const char *name);
/* Control sockets for poll(): count of them, fds in fds[] */
int  wl_ctl_fds(int *fds, int max);
/* Dies if a peer closed its control socket (checked now and then) */
void wl_ctl_check_peers(void);

/* ---- wl_ucp.c: worker, endpoints, requests */
void wl_ucp_setup(void);
void wl_ucp_teardown(void);
ucp_ep_h wl_ep(int peer);
ucp_worker_h wl_worker(void);
/* Rank @a peer's worker address */
const ucp_address_t *wl_peer_address(int peer);
unsigned wl_progress(void);
/* Nothing progressed: with --wait, arm the worker and sleep on its fd */
void wl_idle(void);
/* One step of a polling loop that did `made` things itself: progress, and
 * idle if neither the loop nor the worker did anything */
void wl_step(unsigned made);
/* Times the event fd poll timed out (1 s) and the worker then had work:
 * wakeups that did not come */
extern unsigned wl_lost_wakeups;
/* Times ucp_worker_arm() said UCS_OK but a progress right after found work
 * (the rank would have slept although there was something to do) */
extern unsigned wl_arm_races;
/* Collective: rank 0 gets the sums over all ranks since the last call, as
 * "lost_wakeups=N arm_races=N" */
const char *wl_wakeup_stats(void);
void *wl_send(int peer, const void *buf, size_t len, ucp_tag_t tag);
void *wl_recv(void *buf, size_t len, ucp_tag_t tag, ucp_tag_t mask);
/* 1 when the send (or NULL) is done and freed; exits on error */
int  wl_send_test(void **req, int peer);
/* 1 when the receive is done and freed, *info filled; exits on error */
int  wl_recv_test(void **req, ucp_tag_recv_info_t *info, int peer);
void wl_send_wait(void **req, int peer);
void wl_recv_wait(void **req, ucp_tag_recv_info_t *info, int peer);
/* Small blocking messages (control over UCP) */
void wl_send_blocking(int peer, const void *buf, size_t len, ucp_tag_t tag);
size_t wl_recv_blocking(int peer, void *buf, size_t len, ucp_tag_t tag);
/* One 8-byte message each way with every peer in peers[]: wires them up */
void wl_warmup_peers(const int *peers, int n);

/* ---- patterns */
int wl_run_incast(int gather);
int wl_run_resnet(void);
int wl_run_shuffle(void);
int wl_run_connect(void);

#endif
