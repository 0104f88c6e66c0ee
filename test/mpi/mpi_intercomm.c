/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Intercommunicator traffic with idle spells, as an mpi4py program that
 * alltoall()s pickled objects does it (mpi4py's test_cco_obj_inter.py: a
 * new intercommunicator per test): per iteration MPI_COMM_WORLD split
 * into two halves joined by a new MPI_Intercomm_create (Open MPI 4.1's
 * pml ucx creates a new UCP endpoint to each remote rank for it, so the
 * transport gets a new endpoint per iteration, and once the endpoints
 * outgrow its receive pool, idle ones give their runs of slots back and
 * new ones take runs that older endpoints used), then
 *   - an intercomm MPI_Alltoall of the per-peer message sizes (what
 *     mpi4py's lowercase alltoall sends first),
 *   - an intercomm MPI_Alltoallv of messages of those sizes (1 B to
 *     max_size, pseudo-random, log-uniform; each one verified),
 *   - MPI_Comm_dup of the intercomm, MPI_Comm_remote_group, MPI_Group_size
 *     (checked) and the frees,
 *   - MPI_Comm_free of the intercommunicator and of the halves,
 *   - pauses of 0 to max_pause_ms (pseudo-random, different per rank)
 *     between the steps and between iterations, as an interpreter's work
 *     between MPI calls makes them, so that endpoints go idle in the middle
 *     of an exchange (UCX_HIPOWER_IDLE_TIME is 10 ms by default) and have
 *     to be woken.
 *
 *   mpi_intercomm [iters [max_size [max_pause_ms [pause_kind [comms]]]]]
 *       (200, 100000, 50, either, fresh); pause_kind: sleep, spin (the CPU
 *       kept busy, as by an interpreter) or either (chosen per pause);
 *       comms: fresh (a new intercommunicator per iteration) or once (one
 *       for all iterations)
 *
 * Before new endpoints cleared the trailers a run's earlier owner left in
 * its slots, this failed within 20 to 50 iterations on two devices of the
 * rig under load: an old message taken for a new one ("peer N announced
 * size X, expected Y" from the checks), or the peer's real message passed
 * over and both ranks waiting for ever.
 *
 * Every rank prints "rank R at iteration I <step>" to stderr every
 * 10 iterations (and HIPOWER_MPI_INTERCOMM_TRACE=1: every step), so the
 * rank's stderr says where a hang happened.
 */
#include "mpi_check.h"

#include <time.h>

enum { PHASE_SIZES = 11, PHASE_DATA = 12, PHASE_PAUSE = 13 };

static long g_max_pause;
static int g_fresh = 1; /* A new intercommunicator per iteration */

static int g_spin = 2; /* 0: sleep, 1: spin, 2: either, per pause */

static void pause_ms(long ms, int spin);

/* A pause of 0 to max_pause ms, its own for each rank, iteration and
 * step; half of the pauses are shorter than 1/4 of max_pause */
static void pause_step(int iter, int which)
{
    uint64_t r;
    long ms;

    if (g_max_pause <= 0) {
        return;
    }
    r  = make_seed(PHASE_PAUSE, g_rank, which, 0, iter);
    ms = (long)(r % (uint64_t)(g_max_pause + 1));
    if ((r >> 40) & 1) {
        ms /= 4;
    }
    pause_ms(ms, (g_spin == 2) ? (int)((r >> 41) & 1) : g_spin);
}

static int g_trace;

static void step(int iter, const char *what)
{
    if (g_trace || ((iter % 10) == 0)) {
        fprintf(stderr, "mpi_intercomm: rank %d at iteration %d %s\n",
                g_rank, iter, what);
        fflush(stderr);
    }
}

/* Size of the message from world rank @a sender to @a receiver in
 * iteration @a iter: log-uniform in [1, max_size] */
static size_t msg_size(int sender, int receiver, int iter, size_t max_size)
{
    uint64_t r = make_seed(PHASE_SIZES, sender, receiver, 0, iter);
    unsigned bits = 0, b;
    size_t size;

    while (((size_t)1 << (bits + 1)) <= max_size) {
        ++bits;
    }
    b    = (unsigned)(r % (bits + 1));              /* 2^b .. 2^(b+1)-1 */
    size = ((size_t)1 << b) + (size_t)((r >> 16) % ((size_t)1 << b));
    return (size > max_size) ? max_size : size;
}

/* A pause that sleeps, or (@a spin) keeps the CPU busy as an interpreter
 * between two MPI calls does */
/* The halves and the intercommunicator between them */
static void make_intercomm(int color, int remote_first, int remote_size,
                           int iter, MPI_Comm *local, MPI_Comm *inter)
{
    int n;

    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, g_rank, local),
              "split, iteration %d", iter);
    CHECK_MPI(MPI_Intercomm_create(*local, 0, MPI_COMM_WORLD, remote_first,
                                   77, inter),
              "intercomm_create, iteration %d", iter);
    MPI_Comm_set_errhandler(*inter, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Comm_remote_size(*inter, &n), "remote_size");
    if (n != remote_size) {
        die("iteration %d: intercomm remote size %d, expected %d", iter, n,
            remote_size);
    }
}

static void free_intercomm(MPI_Comm *local, MPI_Comm *inter)
{
    CHECK_MPI(MPI_Comm_free(inter), "comm free (intercomm)");
    CHECK_MPI(MPI_Comm_free(local), "comm free (local)");
}

static void pause_ms(long ms, int spin)
{
    struct timespec ts;
    double end;
    volatile uint64_t x = 0;

    if (ms <= 0) {
        return;
    }
    if (spin) {
        end = MPI_Wtime() + ms / 1000.0;
        while (MPI_Wtime() < end) {
            for (int i = 0; i < 1000; ++i) {
                x = mix64(x + i);
            }
        }
        return;
    }

    ts.tv_sec  = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv)
{
    int half, color, remote_size, remote_first, i, iter, peer, n;
    long iters, max_pause;
    size_t max_size, size, total_sent = 0;
    int *ssizes, *rsizes, *sdispls, *rdispls;
    unsigned char *sbuf, *rbuf;
    MPI_Comm local, inter, dup;
    MPI_Group group;
    double t0;
    const char *env;

    check_init(&argc, &argv, "mpi_intercomm");
    iters     = arg_long(argc, argv, 1, 200);
    max_size  = (size_t)arg_long(argc, argv, 2, 100000);
    max_pause = (argc > 3) ? strtol(argv[3], NULL, 0) : 50;
    g_max_pause = max_pause;
    if (argc > 4) {
        if (!strcmp(argv[4], "sleep")) {
            g_spin = 0;
        } else if (!strcmp(argv[4], "spin")) {
            g_spin = 1;
        } else if (!strcmp(argv[4], "either")) {
            g_spin = 2;
        } else {
            die("pause kind must be sleep, spin or either, got '%s'",
                argv[4]);
        }
    }
    if (argc > 5) {
        if (!strcmp(argv[5], "fresh")) {
            g_fresh = 1;
        } else if (!strcmp(argv[5], "once")) {
            g_fresh = 0;
        } else {
            die("comms must be fresh or once, got '%s'", argv[5]);
        }
    }
    env       = getenv("HIPOWER_MPI_INTERCOMM_TRACE");
    g_trace   = (env != NULL) && (atoi(env) != 0);
    if (g_nranks < 2) {
        die("needs at least 2 ranks, got %d", g_nranks);
    }
    if ((max_size > (size_t)0x7fffffff / (size_t)g_nranks) ||
        (max_pause < 0)) {
        die("bad arguments: max_size %zu max_pause %ld", max_size,
            max_pause);
    }

    /* Ranks [0, half) and [half, n), ordered by world rank */
    half         = g_nranks / 2;
    color        = (g_rank < half) ? 0 : 1;
    remote_first = color ? 0 : half;
    remote_size  = color ? half : g_nranks - half;
    if (!g_fresh) {
        make_intercomm(color, remote_first, remote_size, -1, &local, &inter);
    }

    ssizes  = xmalloc(sizeof(int) * remote_size);
    rsizes  = xmalloc(sizeof(int) * remote_size);
    sdispls = xmalloc(sizeof(int) * remote_size);
    rdispls = xmalloc(sizeof(int) * remote_size);
    sbuf    = xmalloc(max_size * remote_size);
    rbuf    = xmalloc(max_size * remote_size);

    t0 = MPI_Wtime();
    for (iter = 0; iter < iters; ++iter) {
        if (g_fresh) {
            step(iter, "intercomm_create");
            make_intercomm(color, remote_first, remote_size, iter, &local,
                           &inter);
        }

        /* The sizes first, as mpi4py's alltoall of objects does */
        for (i = 0; i < remote_size; ++i) {
            ssizes[i] = (int)msg_size(g_rank, remote_first + i, iter,
                                      max_size);
            rsizes[i] = -1;
        }
        step(iter, "alltoall");
        CHECK_MPI(MPI_Alltoall(ssizes, 1, MPI_INT, rsizes, 1, MPI_INT, inter),
                  "intercomm alltoall of sizes, iteration %d", iter);
        for (i = 0; i < remote_size; ++i) {
            peer = remote_first + i;
            if ((size_t)rsizes[i] != msg_size(peer, g_rank, iter, max_size)) {
                die("iteration %d: peer %d announced size %d, expected %zu",
                    iter, peer, rsizes[i],
                    msg_size(peer, g_rank, iter, max_size));
            }
        }

        /* The messages: pattern per (sender, receiver, size, iteration) */
        for (i = 0, size = 0; i < remote_size; ++i) {
            sdispls[i] = (int)size;
            pattern_fill(sbuf + size, (size_t)ssizes[i],
                         make_seed(PHASE_DATA, g_rank, remote_first + i,
                                   (size_t)ssizes[i], iter));
            size       += (size_t)ssizes[i];
            total_sent += (size_t)ssizes[i];
        }
        for (i = 0, size = 0; i < remote_size; ++i) {
            rdispls[i] = (int)size;
            size      += (size_t)rsizes[i];
        }
        memset(rbuf, 0x5a ^ iter, size);
        pause_step(iter, 1);
        step(iter, "alltoallv");
        CHECK_MPI(MPI_Alltoallv(sbuf, ssizes, sdispls, MPI_BYTE, rbuf, rsizes,
                                rdispls, MPI_BYTE, inter),
                  "intercomm alltoallv, iteration %d", iter);
        for (i = 0; i < remote_size; ++i) {
            peer = remote_first + i;
            check_pattern(rbuf + rdispls[i], (size_t)rsizes[i],
                          make_seed(PHASE_DATA, peer, g_rank,
                                    (size_t)rsizes[i], iter),
                          0, "intercomm alltoallv", peer, (size_t)rsizes[i],
                          iter);
        }

        /* Dup and a query of the group, as after a pickled exchange */
        pause_step(iter, 2);
        step(iter, "comm_dup");
        CHECK_MPI(MPI_Comm_dup(inter, &dup), "intercomm dup, iteration %d",
                  iter);
        pause_step(iter, 3);
        step(iter, "remote_group");
        CHECK_MPI(MPI_Comm_remote_group(dup, &group),
                  "remote group, iteration %d", iter);
        CHECK_MPI(MPI_Group_size(group, &n), "group size, iteration %d",
                  iter);
        if (n != remote_size) {
            die("iteration %d: dup's remote group has %d ranks, expected %d",
                iter, n, remote_size);
        }
        MPI_Group_free(&group);
        CHECK_MPI(MPI_Comm_free(&dup), "comm free, iteration %d", iter);

        if (g_fresh) {
            free_intercomm(&local, &inter);
        }

        /* An idle spell of its own length on each rank */
        step(iter, "pause");
        pause_step(iter, 0);
    }

    step(iter, "done");
    if (g_rank == 0) {
        printf("mpi_intercomm: OK: %d ranks (%d + %d), %ld iterations of "
               "%sintercomm alltoall + alltoallv (1..%zu B, verified) + "
               "dup, pauses 0..%ld ms (%s): %zu B sent by rank 0, %.1f s\n",
               g_nranks, half, g_nranks - half, iters,
               g_fresh ? "new intercomm + " : "", max_size, max_pause,
               (g_spin == 0) ? "sleep" : (g_spin == 1) ? "spin" : "either",
               total_sent,
               MPI_Wtime() - t0);
        fflush(stdout);
    }
    free(ssizes);
    free(rsizes);
    free(sdispls);
    free(rdispls);
    free(sbuf);
    free(rbuf);
    if (!g_fresh) {
        free_intercomm(&local, &inter);
    }
    check_finish();
    return 0;
}
