/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * MPI_Alltoall with block_size bytes per peer (1 MiB by default, as in the
 * RoCE full-mesh paper's Figure 8), verified block by block, a few
 * iterations after one warm-up; prints the achieved throughput (time of
 * the slowest rank per alltoall; data moved between distinct ranks).
 *
 *   mpi_alltoall [block_size [iters]]     (defaults 1048576, 3)
 */
#include "mpi_check.h"

enum { PHASE_A2A = 3 };

int main(int argc, char **argv)
{
    size_t block, off;
    long iters;
    int iter, peer, it;
    unsigned char *sbuf, *rbuf;
    double t0, dt, dt_max, total = 0, best = -1;

    check_init(&argc, &argv, "mpi_alltoall");
    block = (size_t)arg_long(argc, argv, 1, MIB);
    iters = arg_long(argc, argv, 2, 3);
    if (block > (size_t)0x7fffffff) {
        die("block size %zu too large", block);
    }
    sbuf = xmalloc(block * g_nranks);
    rbuf = xmalloc(block * g_nranks);

    /* iteration -1 is the warm-up (connection setup, registration) */
    for (iter = -1; iter < iters; ++iter) {
        it = iter + 1;
        for (peer = 0; peer < g_nranks; ++peer) {
            pattern_fill(sbuf + block * peer, block,
                         make_seed(PHASE_A2A, g_rank, peer, block, it));
        }
        memset(rbuf, 0xa5 ^ it, block * g_nranks);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD), "barrier");
        t0 = MPI_Wtime();
        CHECK_MPI(MPI_Alltoall(sbuf, (int)block, MPI_BYTE, rbuf, (int)block,
                               MPI_BYTE, MPI_COMM_WORLD),
                  "alltoall block %zu iteration %d", block, it);
        dt = MPI_Wtime() - t0;
        for (peer = 0; peer < g_nranks; ++peer) {
            off = block * peer;
            check_pattern(rbuf + off, block,
                          make_seed(PHASE_A2A, peer, g_rank, block, it), 0,
                          "alltoall block", peer, block, it);
        }
        CHECK_MPI(MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX,
                                MPI_COMM_WORLD), "allreduce");
        if (iter >= 0) {
            total += dt_max;
            if ((best < 0) || (dt_max < best)) {
                best = dt_max;
            }
        }
    }

    if (g_rank == 0) {
        /* each rank sends (n-1) blocks to others and receives as many */
        double per_rank = (double)block * (g_nranks - 1);
        double avg      = total / iters;

        printf("mpi_alltoall: OK: %d ranks, %zu B per peer, %ld iterations "
               "verified: %.1f ms per alltoall (best %.1f), %.1f MB/s per "
               "rank sent, %.1f MB/s aggregate\n", g_nranks, block, iters,
               avg * 1e3, best * 1e3, per_rank / avg / 1e6,
               per_rank * g_nranks / avg / 1e6);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    check_finish();
    return 0;
}
