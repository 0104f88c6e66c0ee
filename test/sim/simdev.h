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
} hipower_sim_stats_t;

/* Runs @a count device steps; returns how many did something */
unsigned hipower_sim_step(unsigned count);

/* The device's counters since the program started */
void hipower_sim_get_stats(hipower_sim_stats_t *stats);

/* The seed in use (HIPOWER_SIM_SEED, or 1) */
uint64_t hipower_sim_seed(void);

#endif
