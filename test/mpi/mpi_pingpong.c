/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Ping-pong between rank pairs, every pairing in turn (peer = rank XOR r for
 * r = 1..P-1, P the largest power of two <= ranks), over sizes from 1 byte
 * to max_size: powers of two and odd sizes around protocol thresholds.
 * Every message carries a pattern seeded by sender, receiver, size,
 * iteration and direction, and is verified (length and every byte) on
 * arrival.
 *
 *   mpi_pingpong [max_size [iters [large_iters]]]
 *   (defaults 4194304, 10 round trips below 64 KiB, 2 from 64 KiB, half
 *   that from 1 MiB)
 */
#include "mpi_check.h"

enum { PHASE_PING = 1, PHASE_PONG = 2, PHASE_WARMUP = 3 };

static const size_t odd_sizes[] = {
    3, 63, 65, 1000, 4095, 4097, 8193, 65537, 1000003, 3000001
};

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t*)a, y = *(const size_t*)b;

    return (x > y) - (x < y);
}

static int size_list(size_t max_size, size_t *sizes)
{
    int n = 0;
    size_t s, i;

    for (s = 1; s <= max_size; s *= 2) {
        sizes[n++] = s;
    }
    for (i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); ++i) {
        if (odd_sizes[i] <= max_size) {
            sizes[n++] = odd_sizes[i];
        }
    }
    qsort(sizes, n, sizeof(*sizes), cmp_size);
    return n;
}

static unsigned char *g_sbuf, *g_rbuf;
static long long g_sent, g_verified;

/* One message of the pair's exchange: phase PING from the initiator,
 * PONG back; the pattern depends on direction, pairing, sender, receiver,
 * size and iteration */
static void send_msg(int phase, int round, int peer, size_t size, int tag,
                     int iter)
{
    pattern_fill(g_sbuf, size, make_seed(phase + 10 * round, g_rank, peer,
                                         size, iter));
    CHECK_MPI(MPI_Send(g_sbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD),
              "%s to %d size %zu iteration %d",
              (phase == PHASE_PING) ? "ping" :
              (phase == PHASE_PONG) ? "pong" : "warm-up", peer, size, iter);
    ++g_sent;
}

static void recv_msg(int phase, int round, int peer, size_t size, int tag,
                     int iter, int seq)
{
    const char *what = (phase == PHASE_PING) ? "ping" :
                       (phase == PHASE_PONG) ? "pong" : "warm-up";
    MPI_Status st;
    int count;

    memset(g_rbuf, 0x5a ^ (seq & 0xff), size);
    CHECK_MPI(MPI_Recv(g_rbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                       &st),
              "%s from %d size %zu iteration %d", what, peer, size, iter);
    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count), "count");
    if ((size_t)count != size) {
        die("%s from peer %d size %zu iteration %d: received %d bytes", what,
            peer, size, iter, count);
    }
    check_pattern(g_rbuf, size, make_seed(phase + 10 * round, peer, g_rank,
                                          size, iter),
                  0, what, peer, size, iter);
    ++g_verified;
}

int main(int argc, char **argv)
{
    size_t sizes[80], size, max_size;
    long iters_small, iters_large;
    int nsizes, pow2, round, peer, si, iter, iters, initiator;
    int seq = 0;
    long long total = 0;
    double t0, lat_small = -1, bw_large = -1, dt;

    check_init(&argc, &argv, "mpi_pingpong");
    max_size    = (size_t)arg_long(argc, argv, 1, 4 * MIB);
    iters_small = arg_long(argc, argv, 2, 10);
    iters_large = arg_long(argc, argv, 3, 2);
    if (g_nranks < 2) {
        die("needs at least 2 ranks, got %d", g_nranks);
    }
    for (pow2 = 1; pow2 * 2 <= g_nranks; pow2 *= 2) {
    }

    nsizes = size_list(max_size, sizes);
    g_sbuf = xmalloc(max_size);
    g_rbuf = xmalloc(max_size);

    for (round = 1; round < pow2; ++round) {
        peer      = (g_rank < pow2) ? (g_rank ^ round) : -1;
        initiator = (peer >= 0) && (g_rank < peer);
        /* untimed warm-up: connects the pair (UCX wires up on demand) */
        if (initiator) {
            send_msg(PHASE_WARMUP, round, peer, 1, 1000, 0);
            recv_msg(PHASE_WARMUP, round, peer, 1, 1000, 0, 0);
        } else if (peer >= 0) {
            recv_msg(PHASE_WARMUP, round, peer, 1, 1000, 0, 0);
            send_msg(PHASE_WARMUP, round, peer, 1, 1000, 0);
        }
        for (si = 0; (peer >= 0) && (si < nsizes); ++si) {
            size  = sizes[si];
            iters = (size < 65536) ? iters_small :
                    (size < MIB) ? iters_large :
                    ((iters_large + 1) / 2);
            t0    = MPI_Wtime();
            for (iter = 0; iter < iters; ++iter, ++seq) {
                if (initiator) {
                    send_msg(PHASE_PING, round, peer, size, si, iter);
                    recv_msg(PHASE_PONG, round, peer, size, si, iter, seq);
                } else {
                    recv_msg(PHASE_PING, round, peer, size, si, iter, seq);
                    send_msg(PHASE_PONG, round, peer, size, si, iter);
                }
            }
            dt = (MPI_Wtime() - t0) / iters;
            if ((g_rank == 0) && (round == 1) && (size == 1)) {
                lat_small = dt * 1e6;
            }
            if ((g_rank == 0) && (round == 1) && (size == max_size)) {
                bw_large = 2.0 * size / dt / 1e6;
            }
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD), "barrier after round %d",
                  round);
    }

    /* for the rig test: the transport must have sent at least as many
     * messages as this rank did */
    printf("mpi_pingpong: rank %d sent %lld messages\n", g_rank, g_sent);
    fflush(stdout);
    CHECK_MPI(MPI_Reduce(&g_verified, &total, 1, MPI_LONG_LONG, MPI_SUM, 0,
                         MPI_COMM_WORLD), "reduce");
    if (g_rank == 0) {
        printf("mpi_pingpong: OK: %d ranks, %d pairings, %d sizes %zu..%zu B, "
               "%lld messages verified; rank 0 round trip with checks: "
               "1 B %.1f us, %zu B %.1f MB/s\n", g_nranks, pow2 - 1, nsizes,
               sizes[0], sizes[nsizes - 1], total, lat_small, max_size,
               bw_large);
        fflush(stdout);
    }
    free(g_sbuf);
    free(g_rbuf);
    check_finish();
    return 0;
}
