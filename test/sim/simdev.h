/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * A simulated RDMA device under hipower's own compiled code (docs/sim.md).
 *
 * simdev.c defines the libibverbs functions the transport calls (they
 * interpose on libibverbs in a program linked with it) and a device
 * behind them: "sim0", "sim1", ... (HIPOWER_SIM_DEVICES, default 2), RC
 * queue pairs between them, memory regions, type-2 memory windows and
 * completion queues, in this process. What the transport posts is
 * executed in steps of the device, each one chosen by a generator seeded
 * from HIPOWER_SIM_SEED: a poll of a completion queue runs a few steps (as
 * if the device had worked meanwhile), and a test may run more.
 */
#ifndef HIPOWER_SIMDEV_H_
#define HIPOWER_SIMDEV_H_

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

/* What the device did and saw, for tests and for the end-of-run line */
typedef struct hipower_sim_stats {
    uint64_t steps;          /* Device steps run */
    uint64_t wrs_executed;   /* Send work requests executed */
    uint64_t bytes_placed;   /* Bytes written or read into memory */
    uint64_t rnr_naks;       /* WRITE_WITH_IMM that found no receive */
    uint64_t access_errors;  /* Requests a responder refused (key, range,
                                access, window bound to another QP) */
    uint64_t retry_errors;   /* Requests to a QP that never answered */
    uint64_t flushed;        /* Completions of requests flushed by an
                                error */
    uint64_t cq_overruns;    /* Completions that found their CQ full: a
                                transport bug (the device would fail) */
    uint64_t local_errors;   /* Requests that broke a local rule (lkey,
                                range, bind): a transport bug */
    uint64_t bind_errors;    /* Binds of windows deallocated after the
                                bind was posted: the QP fails, as on rxe */
    uint64_t replayed_writes; /* Replay placement: WRITEs placed again */
    uint64_t replays_dropped; /* Replay placement: WRITEs not placed again,
                                 their key no longer valid */
} hipower_sim_stats_t;

/* Runs @a count device steps; returns how many did something */
unsigned hipower_sim_step(unsigned count);

/* The device's counters since the program started */
void hipower_sim_get_stats(hipower_sim_stats_t *stats);

/* The seed in use (HIPOWER_SIM_SEED, or 1) */
uint64_t hipower_sim_seed(void);

/* Restarts the device's generator from @a seed (one schedule per seed) */
void hipower_sim_reseed(uint64_t seed);

/* The device's time in nanoseconds: virtual with HIPOWER_SIM_CLOCK=virtual
 * (then also the transport's clock, and the device thread is off), else
 * the monotonic clock */
uint64_t hipower_sim_now_ns(void);

/* Where the transport's epochs start on connections made from now on
 * (default 1, or HIPOWER_SIM_EPOCH_ORIGIN): near 2^32 or 2^64, the
 * schedules cross the wraps */
void hipower_sim_set_epoch_origin(uint64_t origin);

/* Runs of receive slots made from now on start @a before_period messages
 * before their sequence period (0: at 0, the default, or
 * HIPOWER_SIM_SEQ_BEFORE_PERIOD): the schedules restart sequence numbers
 * and switch runs around the restart */
void hipower_sim_set_seq_origin(uint32_t before_period);

/* Moves the virtual clock on by @a ns: a peer that stopped for a minute */
void hipower_sim_advance(uint64_t ns);

/* Sends QP @a qpn of device @a dev_index to error (a fatal QP error: what
 * it had outstanding completes flushed, its peer's requests find nobody);
 * -1 if there is no such QP */
int hipower_sim_fail_qp(int dev_index, uint32_t qpn);

/* An asynchronous event of device @a dev_index, read by its users with
 * ibv_get_async_event(): a QP event (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR;
 * the QP @a qpn goes to error) goes to the QP's context, any other (a port
 * or the device) to every context open on the device. Returns to how many
 * contexts it went. */
int hipower_sim_async_event(int dev_index, enum ibv_event_type type,
                            uint32_t qpn);

/* A hostile peer of QP @a qpn of device @a dev_index writes something
 * (random bytes or plausible protocol words) somewhere it may write:
 * in a window bound to that QP (all the transport lets a peer reach).
 * Returns the bytes written, 0 if it could reach nothing. */
size_t hipower_sim_scribble(int dev_index, uint32_t qpn);

#endif
