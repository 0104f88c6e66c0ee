/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * A busy rank is a live rank (issue 50, review H1/H2): ranks that compute
 * without any MPI call while others first talk to them must not make
 * anybody's connection fail.
 *
 *   1. Right after MPI_Init rank 1 computes for `busy` seconds while rank 0
 *      sends it a small message: the first contact between the two, so
 *      rank 0's endpoint handshakes with a rank whose user thread makes no
 *      UCX call. The other ranks go on to step 2 and reach rank 1 there,
 *      while it still computes.
 *   2. MPI_Alltoall, every block checked.
 *   3. The odd ranks compute for `busy` seconds while each even rank sends
 *      a small message to each odd rank, on connections that are up now
 *      (a peer that adopts no run and answers no grant for that long).
 *
 * Every message is a seeded pattern checked by its receiver; a mismatch or
 * an MPI error aborts the job. Rank 0 prints "OK" only after every rank
 * counted its checked messages. Ranks 0 and 1 on one host share their
 * monotonic clock: there the job also fails if rank 0's first send did not
 * start before rank 1's compute ended (step 1 would have tested nothing),
 * and says how long before. Run it with the transport's deadlines lowered
 * below busy / 3 (the rig tests: 2 s and busy 7).
 *
 *   mpi_busy [busy_seconds [block_size]]      (defaults 7, 4096)
 */
#include "mpi_check.h"

#include <time.h>

enum {
    PHASE_FIRST = 1,     /* rank 0 -> busy rank 1, first contact */
    PHASE_A2A   = 2,     /* the alltoall in between */
    PHASE_ODD   = 3,     /* even ranks -> busy odd ranks */
    MSG_SIZE    = 64,    /* "small": eager in every MPI */
    TAG_FIRST   = 11,
    TAG_ODD     = 13
};

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A compute phase: no MPI call (so no UCX progress) for `seconds`. The
 * result feeds the output so that the loop cannot be optimized away. */
static uint64_t compute(double seconds)
{
    double end = now_sec() + seconds;
    uint64_t x = (uint64_t)g_rank;
    int i;

    do {
        for (i = 0; i < 4096; ++i) {
            x = mix64(x);
        }
    } while (now_sec() < end);
    return x;
}

static void send_checked(int phase, int peer, int tag)
{
    unsigned char buf[MSG_SIZE];

    pattern_fill(buf, sizeof(buf), make_seed(phase, g_rank, peer,
                                             sizeof(buf), 0));
    CHECK_MPI(MPI_Send(buf, sizeof(buf), MPI_BYTE, peer, tag, MPI_COMM_WORLD),
              "phase %d: send to rank %d", phase, peer);
}

static void recv_checked(int phase, int peer, int tag, const char *what)
{
    unsigned char buf[MSG_SIZE];
    MPI_Status status;
    int count;

    memset(buf, 0xa5, sizeof(buf));
    CHECK_MPI(MPI_Recv(buf, sizeof(buf), MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                       &status),
              "phase %d: receive from rank %d", phase, peer);
    CHECK_MPI(MPI_Get_count(&status, MPI_BYTE, &count), "get_count");
    if (count != (int)sizeof(buf)) {
        die("%s: %d bytes from rank %d, expected %zu", what, count, peer,
            sizeof(buf));
    }
    check_pattern(buf, sizeof(buf),
                  make_seed(phase, peer, g_rank, sizeof(buf), 0), 0, what,
                  peer, sizeof(buf), 0);
}

int main(int argc, char **argv)
{
    long busy, checked = 0, total = 0;
    size_t block, off;
    unsigned char *sbuf, *rbuf;
    uint64_t sink = 0;
    double t0 = 0, first_send = 0, busy_end = 0, lead = 0;
    char host[MPI_MAX_PROCESSOR_NAME], host1[MPI_MAX_PROCESSOR_NAME];
    int peer, len;

    check_init(&argc, &argv, "mpi_busy");
    busy  = arg_long(argc, argv, 1, 7);
    block = (size_t)arg_long(argc, argv, 2, 4096);
    if ((g_nranks < 2) || (g_nranks % 2)) {
        die("needs an even number of ranks, got %d", g_nranks);
    }
    if (block > (size_t)0x7fffffff / g_nranks) {
        die("block size %zu too large", block);
    }

    /* 1. First contact with a computing rank */
    if (g_rank == 1) {
        sink    ^= compute(busy);
        busy_end = now_sec();
        recv_checked(PHASE_FIRST, 0, TAG_FIRST, "first message to busy rank");
        ++checked;
    } else if (g_rank == 0) {
        t0 = now_sec();
        send_checked(PHASE_FIRST, 1, TAG_FIRST);
        first_send = now_sec() - t0;
    }

    /* 2. Alltoall, every block checked */
    sbuf = xmalloc(block * g_nranks);
    rbuf = xmalloc(block * g_nranks);
    for (peer = 0; peer < g_nranks; ++peer) {
        pattern_fill(sbuf + block * peer, block,
                     make_seed(PHASE_A2A, g_rank, peer, block, 0));
    }
    memset(rbuf, 0xa5, block * g_nranks);
    CHECK_MPI(MPI_Alltoall(sbuf, (int)block, MPI_BYTE, rbuf, (int)block,
                           MPI_BYTE, MPI_COMM_WORLD),
              "alltoall block %zu", block);
    for (peer = 0; peer < g_nranks; ++peer) {
        off = block * peer;
        check_pattern(rbuf + off, block,
                      make_seed(PHASE_A2A, peer, g_rank, block, 0), 0,
                      "alltoall block", peer, block, 0);
        ++checked;
    }
    free(sbuf);
    free(rbuf);

    /* 3. The odd ranks compute while every even rank sends to each */
    if (g_rank % 2) {
        sink ^= compute(busy);
        for (peer = 0; peer < g_nranks; peer += 2) {
            recv_checked(PHASE_ODD, peer, TAG_ODD, "message to busy odd rank");
            ++checked;
        }
    } else {
        for (peer = 1; peer < g_nranks; peer += 2) {
            send_checked(PHASE_ODD, peer, TAG_ODD);
        }
    }

    /* Every rank's count: 1 + n blocks + n/2 messages on the odd ranks */
    CHECK_MPI(MPI_Reduce(&checked, &total, 1, MPI_LONG, MPI_SUM, 0,
                         MPI_COMM_WORLD), "reduce");

    /* Did rank 0's first send overlap rank 1's compute? */
    memset(host, 0, sizeof(host));
    CHECK_MPI(MPI_Get_processor_name(host, &len), "get_processor_name");
    if (g_rank == 1) {
        CHECK_MPI(MPI_Send(&busy_end, 1, MPI_DOUBLE, 0, TAG_FIRST,
                           MPI_COMM_WORLD), "send busy end");
        CHECK_MPI(MPI_Send(host, sizeof(host), MPI_CHAR, 0, TAG_FIRST,
                           MPI_COMM_WORLD), "send host name");
    } else if (g_rank == 0) {
        CHECK_MPI(MPI_Recv(&busy_end, 1, MPI_DOUBLE, 1, TAG_FIRST,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "receive busy end");
        CHECK_MPI(MPI_Recv(host1, sizeof(host1), MPI_CHAR, 1, TAG_FIRST,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "receive host name");
        lead = busy_end - t0;
        if (!strcmp(host, host1) && (lead <= 0)) {
            die("the first send to rank 1 started %.1f s after its compute "
                "ended: nothing was tested", -lead);
        }
    }

    if (g_rank == 0) {
        long expected = 1 + (long)g_nranks * g_nranks +
                        (long)(g_nranks / 2) * (g_nranks / 2);

        if (total != expected) {
            die("%ld messages checked over all ranks, expected %ld", total,
                expected);
        }
        printf("mpi_busy: OK: %d ranks, busy %ld s twice, %ld messages "
               "checked (first send to the busy rank %.1f s before its "
               "compute ended%s, took %.1f s)%s\n", g_nranks, busy, total,
               lead, strcmp(host, host1) ? ", other host's clock" : "",
               first_send, (sink == 1) ? " " : "");
        fflush(stdout);
    }
    check_finish();
    return 0;
}
