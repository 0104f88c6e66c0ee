/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The MPI benchmarks of the suite (contrib/bench/mpi.sh), all in one job:
 * one mpirun costs tens of seconds on the rig (MPI_Init of 8 ranks on a
 * 2-vCPU guest), so a launch runs every measurement for one transport.
 *
 *   bench_mpi COMMAND...
 *     a2a:N:ITERS:BLOCK   MPI_Alltoall among world ranks 0..N-1
 *     pp:SIZE:ITERS       ping-pong between ranks 0 and 1
 *     mr:N:SIZE:ITERS:WIN message rate: ranks 0..N/2-1 each stream to
 *                         rank + N/2, WIN non-blocking sends per iteration
 *
 * Commands run in the order given, which must not decrease N (ping-pong
 * counts as N = 2). A rank joins at the first command that includes it;
 * until then it sleeps in MPI_Test on a "go" message from rank 0, so
 * ranks outside the measured group neither compete for the CPU nor have
 * talked to anyone. With Open MPI's "--mca mpi_add_procs_cutoff 0" they
 * have no UCX endpoint either until they join.
 *
 * Alltoall (the RoCE full-mesh paper's workload): BLOCK bytes per peer, one
 * verified warm-up, a barrier, then ITERS back-to-back alltoalls timed
 * together; the time is the slowest rank's. Every iteration has its own
 * send and receive region, so the data of every iteration is verified
 * after the clock stops: block (src, dst) of iteration i carries a pattern
 * seeded by source rank, destination rank, size and iteration
 * (test/mpi/mpi_check.h). Rank 0 prints
 *   bench_mpi: alltoall ranks=N block=B iters=K time_s=T MBps=X
 * X = N*(N-1)*B*K bytes (between distinct ranks) / T, MB = 1e6 bytes.
 *
 * Ping-pong: one verified warm-up round trip, then ITERS round trips,
 * each timed on rank 0 (send SIZE, receive SIZE back); both messages are
 * verified after the clock stops, and rank 1 confirms it is ready again
 * with an empty message before the next one starts. Rank 0 prints
 *   bench_mpi: pingpong size=S iters=K lat_us=L lat_min_us=M MBps=X
 * L / M = median / smallest round trip / 2; X = S / L.
 *
 * Message rate (the small-message-rate benchmark of issue 26, after OSU's
 * osu_mbw_mr): N/2 pairs; per iteration each sender posts WIN MPI_Isend of
 * SIZE bytes to its partner and waits for them, the partner posts WIN
 * MPI_Irecv and waits, then answers with an empty message that starts the
 * sender's next iteration. One verified warm-up iteration, a barrier, then
 * ITERS iterations timed together; the time is the slowest rank's. Every
 * message has its own receive buffer and a pattern seeded by sender,
 * receiver, size and its index, checked after the clock stops. Rank 0
 * prints
 *   bench_mpi: msgrate ranks=N pairs=P size=S window=W iters=K time_s=T
 *              msgs_per_s=X
 * X = P*W*K / T, all pairs together.
 *
 * Any data mismatch or MPI error aborts the job (MPI_Abort, exit code 1)
 * naming peer, size, iteration and byte. The last line is "bench_mpi: OK".
 */
#include "mpi_check.h"

#include <time.h>

enum {
    PHASE_BENCH_A2A  = 11,
    PHASE_BENCH_PING = 12,
    PHASE_BENCH_PONG = 13,
    PHASE_BENCH_MR   = 14,
    TAG_GO           = 100,
    TAG_PP           = 101,
    TAG_READY        = 102,
    TAG_MR           = 103,
    TAG_MR_ACK       = 104
};

typedef struct {
    char   kind;  /* 'a' alltoall, 'p' ping-pong, 'm' message rate */
    int    nranks;
    long   iters;
    size_t size;
    int    window;
} bench_cmd_t;

/* Wait for rank 0's go without spinning: the CPU belongs to the measured
 * ranks */
static void sleep_until_go(void)
{
    struct timespec ts = {0, 2000000};
    MPI_Request req;
    int done = 0, go;

    CHECK_MPI(MPI_Irecv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD, &req),
              "irecv go");
    for (;;) {
        CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "test go");
        if (done) {
            return;
        }
        nanosleep(&ts, NULL);
    }
}

/* Rank 0: let ranks [from, to) join */
static void send_go(int from, int to)
{
    int r, go = 1;

    for (r = from; r < to; ++r) {
        CHECK_MPI(MPI_Send(&go, 1, MPI_INT, r, TAG_GO, MPI_COMM_WORLD),
                  "send go to %d", r);
    }
}

/* Communicator of world ranks 0..n-1; only they call this */
static MPI_Comm prefix_comm(int n)
{
    MPI_Group world, group;
    MPI_Comm comm;
    int range[1][3] = {{0, n - 1, 1}};

    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_range_incl(world, 1, range, &group);
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, group, n, &comm),
              "comm_create_group of %d ranks", n);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return comm;
}

static void a2a_verify(const unsigned char *rbuf, int n, size_t block, int it)
{
    int peer;

    for (peer = 0; peer < n; ++peer) {
        check_pattern(rbuf + block * peer, block,
                      make_seed(PHASE_BENCH_A2A, peer, g_rank, block, it), 0,
                      "alltoall block", peer, block, it);
    }
}

static void bench_alltoall(MPI_Comm comm, int n, size_t block, long iters)
{
    size_t per_iter = block * (size_t)n;
    unsigned char *sbuf, *rbuf;
    double t0 = 0, dt, dt_max, mbps;
    int it, peer;

    sbuf = xmalloc(per_iter * (size_t)(iters + 1));
    rbuf = xmalloc(per_iter * (size_t)(iters + 1));
    for (it = 0; it <= iters; ++it) {
        for (peer = 0; peer < n; ++peer) {
            pattern_fill(sbuf + per_iter * it + block * peer, block,
                         make_seed(PHASE_BENCH_A2A, g_rank, peer, block, it));
        }
        memset(rbuf + per_iter * it, 0x5a ^ it, per_iter);
    }

    /* iteration 0: warm-up (connections, registration), not timed */
    for (it = 0; it <= iters; ++it) {
        if (it == 1) {
            CHECK_MPI(MPI_Barrier(comm), "barrier");
            t0 = MPI_Wtime();
        }
        CHECK_MPI(MPI_Alltoall(sbuf + per_iter * it, (int)block, MPI_BYTE,
                               rbuf + per_iter * it, (int)block, MPI_BYTE,
                               comm),
                  "alltoall of %d ranks, block %zu, iteration %d", n, block,
                  it);
    }
    dt = MPI_Wtime() - t0;
    CHECK_MPI(MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, comm),
              "allreduce");
    for (it = 0; it <= iters; ++it) {
        a2a_verify(rbuf + per_iter * it, n, block, it);
    }
    /* every rank verified before rank 0 reports */
    CHECK_MPI(MPI_Barrier(comm), "barrier after verification");
    if (g_rank == 0) {
        mbps = (double)block * n * (n - 1) * iters / dt_max / 1e6;
        printf("bench_mpi: alltoall ranks=%d block=%zu iters=%ld "
               "time_s=%.6f MBps=%.3f\n", n, block, iters, dt_max, mbps);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static void bench_pingpong(size_t size, long iters)
{
    int peer = 1 - g_rank, it;
    unsigned char *ping, *pong, *rbuf;
    double *rtt, t0 = 0, med;

    ping = xmalloc(size);
    pong = xmalloc(size);
    rbuf = xmalloc(size);
    rtt  = xmalloc(sizeof(*rtt) * (size_t)iters);
    for (it = 0; it <= iters; ++it) {
        /* iteration 0: warm-up */
        memset(rbuf, 0x5a ^ it, size);
        if (g_rank == 0) {
            pattern_fill(ping, size, make_seed(PHASE_BENCH_PING, 0, 1, size, it));
            if (it > 0) {
                CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_READY,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                          "recv ready");
            }
            t0 = MPI_Wtime();
            CHECK_MPI(MPI_Send(ping, (int)size, MPI_BYTE, peer, TAG_PP,
                               MPI_COMM_WORLD), "send ping size %zu", size);
            CHECK_MPI(MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_PP,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "recv pong size %zu", size);
            if (it > 0) {
                rtt[it - 1] = MPI_Wtime() - t0;
            }
            check_pattern(rbuf, size,
                          make_seed(PHASE_BENCH_PONG, 1, 0, size, it), 0,
                          "pong", peer, size, it);
        } else {
            pattern_fill(pong, size, make_seed(PHASE_BENCH_PONG, 1, 0, size, it));
            CHECK_MPI(MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_PP,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "recv ping size %zu", size);
            CHECK_MPI(MPI_Send(pong, (int)size, MPI_BYTE, peer, TAG_PP,
                               MPI_COMM_WORLD), "send pong size %zu", size);
            check_pattern(rbuf, size,
                          make_seed(PHASE_BENCH_PING, 0, 1, size, it), 0,
                          "ping", peer, size, it);
            if (it < iters) {
                CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_READY,
                                   MPI_COMM_WORLD), "send ready");
            }
        }
    }
    if (g_rank == 0) {
        qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
        med = (iters % 2) ? rtt[iters / 2] :
              (rtt[iters / 2 - 1] + rtt[iters / 2]) / 2;
        printf("bench_mpi: pingpong size=%zu iters=%ld lat_us=%.3f "
               "lat_min_us=%.3f MBps=%.6f\n", size, iters, med / 2 * 1e6,
               rtt[0] / 2 * 1e6, (double)size / (med / 2) / 1e6);
        fflush(stdout);
    }
    free(ping);
    free(pong);
    free(rbuf);
    free(rtt);
}

/* Message rate: see the header. @a comm holds world ranks 0..n-1. */
static void bench_msgrate(MPI_Comm comm, int n, size_t size, long iters,
                          int window)
{
    int pairs = n / 2, sender = (g_rank < pairs);
    int peer = sender ? g_rank + pairs : g_rank - pairs;
    size_t per_iter = size * (size_t)window;
    MPI_Request *reqs;
    unsigned char *buf;
    double t0 = 0, dt, dt_max;
    long it;
    int w, src, dst;

    src  = sender ? g_rank : peer;
    dst  = sender ? peer : g_rank;
    buf  = xmalloc(per_iter * (size_t)(iters + 1));
    reqs = xmalloc(sizeof(*reqs) * (size_t)window);
    for (it = 0; it <= iters; ++it) {
        for (w = 0; w < window; ++w) {
            if (sender) {
                pattern_fill(buf + per_iter * it + size * w, size,
                             make_seed(PHASE_BENCH_MR, src, dst, size,
                                       (int)(it * window + w)));
            } else {
                memset(buf + per_iter * it + size * w, 0x5a ^ w, size);
            }
        }
    }

    /* iteration 0: warm-up (connections, registration), not timed */
    for (it = 0; it <= iters; ++it) {
        if (it == 1) {
            CHECK_MPI(MPI_Barrier(comm), "barrier");
            t0 = MPI_Wtime();
        }
        for (w = 0; w < window; ++w) {
            if (sender) {
                CHECK_MPI(MPI_Isend(buf + per_iter * it + size * w, (int)size,
                                    MPI_BYTE, peer, TAG_MR, comm, &reqs[w]),
                          "isend %d of iteration %ld to %d", w, it, peer);
            } else {
                CHECK_MPI(MPI_Irecv(buf + per_iter * it + size * w, (int)size,
                                    MPI_BYTE, peer, TAG_MR, comm, &reqs[w]),
                          "irecv %d of iteration %ld from %d", w, it, peer);
            }
        }
        CHECK_MPI(MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE),
                  "waitall of iteration %ld, peer %d", it, peer);
        if (sender) {
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_MR_ACK, comm,
                               MPI_STATUS_IGNORE), "recv ack from %d", peer);
        } else {
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_MR_ACK, comm),
                      "send ack to %d", peer);
        }
    }
    dt = MPI_Wtime() - t0;
    CHECK_MPI(MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, comm),
              "allreduce");
    if (!sender) {
        for (it = 0; it <= iters; ++it) {
            for (w = 0; w < window; ++w) {
                check_pattern(buf + per_iter * it + size * w, size,
                              make_seed(PHASE_BENCH_MR, src, dst, size,
                                        (int)(it * window + w)), 0,
                              "message-rate message", peer, size,
                              (int)(it * window + w));
            }
        }
    }
    /* every receiver verified before rank 0 reports */
    CHECK_MPI(MPI_Barrier(comm), "barrier after verification");
    if (g_rank == 0) {
        printf("bench_mpi: msgrate ranks=%d pairs=%d size=%zu window=%d "
               "iters=%ld time_s=%.6f msgs_per_s=%.1f\n", n, pairs, size,
               window, iters, dt_max,
               (double)pairs * window * iters / dt_max);
        fflush(stdout);
    }
    free(reqs);
    free(buf);
}

static bench_cmd_t parse_cmd(const char *arg)
{
    bench_cmd_t c = {0, 2, 0, 0, 0};
    long n = 0, iters = 0, size = 0, window = 1;
    char extra;

    if (sscanf(arg, "a2a:%ld:%ld:%ld%c", &n, &iters, &size, &extra) == 3) {
        c.kind = 'a';
    } else if (sscanf(arg, "pp:%ld:%ld%c", &size, &iters, &extra) == 2) {
        c.kind = 'p';
        n      = 2;
    } else if (sscanf(arg, "mr:%ld:%ld:%ld:%ld%c", &n, &size, &iters,
                      &window, &extra) == 4) {
        c.kind = 'm';
        if ((n % 2) || (window < 1) || (window > 4096)) {
            die("command '%s': N must be even, WIN 1..4096", arg);
        }
    } else {
        die("bad command '%s' (a2a:N:ITERS:BLOCK, pp:SIZE:ITERS or "
            "mr:N:SIZE:ITERS:WIN)", arg);
    }
    if ((n < 2) || (n > g_nranks) || (iters < 1) || (iters > 100000) ||
        (size < 1) || (size > 0x7fffffffL) ||
        ((double)size * window * (iters + 1) > 1e9)) {
        die("command '%s' out of range (%d ranks in the job)", arg, g_nranks);
    }
    c.nranks = (int)n;
    c.iters  = iters;
    c.size   = (size_t)size;
    c.window = (int)window;
    return c;
}

int main(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_NULL;
    int comm_n = 0, joined = 0, i;
    struct timespec t_start, t_now;
    double t_init, t_cmd;
    bench_cmd_t c;

    /* startup cost of the job, for the section's time budget */
    clock_gettime(CLOCK_REALTIME, &t_start);
    check_init(&argc, &argv, "bench_mpi");
    t_init = MPI_Wtime();
    if (g_rank == 0) {
        /* tells a job killed later whether it got past startup */
        printf("bench_mpi: started\n");
        fflush(stdout);
    }
    if (argc < 2) {
        die("usage: bench_mpi a2a:N:ITERS:BLOCK|pp:SIZE:ITERS|"
            "mr:N:SIZE:ITERS:WIN ...");
    }
    for (i = 1; i < argc; ++i) {
        c = parse_cmd(argv[i]);
        if (c.nranks < comm_n) {
            die("commands must not decrease the rank count ('%s')", argv[i]);
        }
        if (c.nranks > comm_n) {
            if (g_rank == 0) {
                send_go(comm_n ? comm_n : 1, c.nranks);
            }
            if (g_rank < c.nranks) {
                if (!joined && (g_rank > 0)) {
                    sleep_until_go();
                }
                joined = 1;
                if (comm != MPI_COMM_NULL) {
                    MPI_Comm_free(&comm);
                }
                comm = prefix_comm(c.nranks);
            }
            comm_n = c.nranks;
        }
        if (g_rank >= c.nranks) {
            continue;
        }
        t_cmd = MPI_Wtime();
        if (c.kind == 'a') {
            bench_alltoall(comm, c.nranks, c.size, c.iters);
        } else if (c.kind == 'm') {
            bench_msgrate(comm, c.nranks, c.size, c.iters, c.window);
        } else {
            bench_pingpong(c.size, c.iters);
        }
        if (g_rank == 0) {
            printf("bench_mpi: %s took %.1f s\n", argv[i], MPI_Wtime() - t_cmd);
            fflush(stdout);
        }
    }
    /* ranks no command used */
    if (g_rank == 0) {
        send_go(comm_n ? comm_n : 1, g_nranks);
    } else if (!joined) {
        sleep_until_go();
    }
    if (comm != MPI_COMM_NULL) {
        MPI_Comm_free(&comm);
    }
    if (g_rank == 0) {
        clock_gettime(CLOCK_REALTIME, &t_now);
        printf("bench_mpi: MPI_Init returned %.1f s after rank 0 started, "
               "the commands took %.1f s\n",
               (t_now.tv_sec - t_start.tv_sec) +
               (t_now.tv_nsec - t_start.tv_nsec) * 1e-9 -
               (MPI_Wtime() - t_init), MPI_Wtime() - t_init);
        printf("bench_mpi: OK\n");
        fflush(stdout);
    }
    check_finish();
    return 0;
}
