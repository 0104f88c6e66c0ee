/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * MPI_Bcast from root 0 and MPI_Gather to root 0 over several sizes,
 * verified on every rank (bcast) and for every contributor at the root
 * (gather).
 *
 *   mpi_collectives [max_size [iters]]      (defaults 4194304, 2)
 *   Bcast sizes up to max_size, gather blocks up to max_size / 4.
 */
#include "mpi_check.h"

enum { PHASE_BCAST = 4, PHASE_GATHER = 5 };

static const size_t bcast_sizes[]  = {
    1, 7, 4096, 65537, 1048576, 3000001, 4194304
};
static const size_t gather_sizes[] = {
    1, 1000, 8193, 65536, 1048576
};

#define NELEM(_a) (sizeof(_a) / sizeof((_a)[0]))

int main(int argc, char **argv)
{
    size_t max_size, size, i, bmax = 0, gmax = 0;
    long iters;
    int iter, peer, nb = 0, ng = 0;
    unsigned char *buf, *gbuf;
    double t0, t_bcast = 0, t_gather = 0;

    check_init(&argc, &argv, "mpi_collectives");
    max_size = (size_t)arg_long(argc, argv, 1, 4 * MIB);
    iters    = arg_long(argc, argv, 2, 2);
    buf      = xmalloc(max_size);
    gbuf     = xmalloc(max_size * g_nranks);

    for (i = 0; i < NELEM(bcast_sizes); ++i) {
        size = bcast_sizes[i];
        if (size > max_size) {
            continue;
        }
        for (iter = 0; iter < iters; ++iter) {
            if (g_rank == 0) {
                pattern_fill(buf, size,
                             make_seed(PHASE_BCAST, 0, -1, size, iter));
            } else {
                memset(buf, 0x3c ^ iter, size);
            }
            t0 = MPI_Wtime();
            CHECK_MPI(MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD),
                      "bcast size %zu iteration %d", size, iter);
            t_bcast += MPI_Wtime() - t0;
            check_pattern(buf, size, make_seed(PHASE_BCAST, 0, -1, size, iter),
                          0, "bcast from root", 0, size, iter);
            ++nb;
            bmax = size;
        }
    }

    for (i = 0; i < NELEM(gather_sizes); ++i) {
        size = gather_sizes[i];
        if (size * 4 > max_size) {
            continue;
        }
        for (iter = 0; iter < iters; ++iter) {
            pattern_fill(buf, size,
                         make_seed(PHASE_GATHER, g_rank, 0, size, iter));
            if (g_rank == 0) {
                memset(gbuf, 0xc3 ^ iter, size * g_nranks);
            }
            t0 = MPI_Wtime();
            CHECK_MPI(MPI_Gather(buf, (int)size, MPI_BYTE, gbuf, (int)size,
                                 MPI_BYTE, 0, MPI_COMM_WORLD),
                      "gather size %zu iteration %d", size, iter);
            t_gather += MPI_Wtime() - t0;
            if (g_rank == 0) {
                for (peer = 0; peer < g_nranks; ++peer) {
                    check_pattern(gbuf + size * peer, size,
                                  make_seed(PHASE_GATHER, peer, 0, size, iter),
                                  0, "gather block", peer, size, iter);
                }
            }
            ++ng;
            gmax = size;
        }
    }

    if (g_rank == 0) {
        printf("mpi_collectives: OK: %d ranks, %d bcasts (1..%zu B, root 0) "
               "in %.2f s, %d gathers (1..%zu B per rank, root 0) in %.2f s, "
               "verified\n", g_nranks, nb, bmax, t_bcast, ng, gmax, t_gather);
        fflush(stdout);
    }
    free(buf);
    free(gbuf);
    check_finish();
    return 0;
}
