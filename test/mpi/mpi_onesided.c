/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * One-sided communication, verified, on windows from MPI_Win_create (user
 * memory) and MPI_Win_allocate. Each rank's window has one slot of
 * max_size bytes per origin rank. For each size, every rank targets every
 * other rank:
 *   fence-put   MPI_Put between two MPI_Win_fence, target checks its slots
 *   fence-get   MPI_Get between two MPI_Win_fence, origin checks
 *   lock-put    MPI_Win_lock(EXCLUSIVE)/MPI_Put/MPI_Win_unlock, then target
 *               checks (under a shared lock of its own window)
 *   lock-get    MPI_Win_lock(SHARED)/MPI_Get/MPI_Win_unlock
 *   flush       MPI_Win_lock_all, MPI_Put, MPI_Win_flush, MPI_Get of the
 *               same bytes back, MPI_Win_flush; origin and target check
 * The bytes after each written region (a guard of up to 64) must keep
 * their poison value.
 *
 *   mpi_onesided [max_size]      (default 1048576)
 */
#include "mpi_check.h"

enum {
    PHASE_FENCE_PUT = 10,
    PHASE_FENCE_GET,
    PHASE_LOCK_PUT,
    PHASE_LOCK_GET,
    PHASE_FLUSH
};

#define GUARD 64

static const size_t sizes[] = { 1, 8, 100, 4096, 65539, 1048576 };
static const char *kinds[]  = { "Win_create", "Win_allocate" };

static size_t g_slot;   /* bytes per slot in the window */
static size_t g_size;   /* current message size */
static int    g_kind;   /* window kind index */
static unsigned char *g_base, *g_local;

static unsigned char poison(int phase)
{
    return (unsigned char)(0x81 ^ (phase * 7) ^ (g_kind * 3));
}

/* Check slot `origin` of the own window after a put phase */
static void check_slot(int phase, const char *what, int origin)
{
    const unsigned char *p = g_base + g_slot * origin;
    size_t i, guard_end = g_size + GUARD;
    char desc[128];

    snprintf(desc, sizeof(desc), "%s %s: window slot written by origin",
             kinds[g_kind], what);
    check_pattern(p, g_size, make_seed(phase, origin, g_rank, g_size, g_kind),
                  0, desc, origin, g_size, g_kind);
    if (guard_end > g_slot) {
        guard_end = g_slot;
    }
    for (i = g_size; i < guard_end; ++i) {
        if (p[i] != poison(phase)) {
            die("%s %s: origin %d size %zu wrote beyond its data: index %zu "
                "is 0x%02x, expected 0x%02x", kinds[g_kind], what, origin,
                g_size, i, p[i], poison(phase));
        }
    }
}

/* The own window's first g_size bytes, for get phases to read */
static void fill_exposed(int phase)
{
    memset(g_base, poison(phase), g_slot);
    pattern_fill(g_base, g_size, make_seed(phase, g_rank, -1, g_size, g_kind));
}

static void check_got(int phase, const char *what, int target)
{
    char desc[128];

    snprintf(desc, sizeof(desc), "%s %s: data read from target", kinds[g_kind],
             what);
    check_pattern(g_local + g_slot * target, g_size,
                  make_seed(phase, target, -1, g_size, g_kind), 0, desc,
                  target, g_size, g_kind);
}

static void put_data(int phase, int target, MPI_Win win, const char *what)
{
    unsigned char *src = g_local + g_slot * target;

    pattern_fill(src, g_size, make_seed(phase, g_rank, target, g_size, g_kind));
    CHECK_MPI(MPI_Put(src, (int)g_size, MPI_BYTE, target,
                      (MPI_Aint)(g_slot * g_rank), (int)g_size, MPI_BYTE, win),
              "%s %s: put to %d size %zu", kinds[g_kind], what, target, g_size);
}

static void get_data(int target, MPI_Win win, const char *what)
{
    memset(g_local + g_slot * target, 0xee, g_size);
    CHECK_MPI(MPI_Get(g_local + g_slot * target, (int)g_size, MPI_BYTE,
                      target, 0, (int)g_size, MPI_BYTE, win),
              "%s %s: get from %d size %zu", kinds[g_kind], what, target,
              g_size);
}

static void lock_self(int type, MPI_Win win)
{
    CHECK_MPI(MPI_Win_lock(type, g_rank, 0, win), "%s: lock own window",
              kinds[g_kind]);
}

static void unlock_self(MPI_Win win)
{
    CHECK_MPI(MPI_Win_unlock(g_rank, win), "%s: unlock own window",
              kinds[g_kind]);
}

static void barrier(void)
{
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD), "barrier");
}

static void run_size(MPI_Win win)
{
    int t;

    /* fence + put */
    memset(g_base, poison(PHASE_FENCE_PUT), g_slot * g_nranks);
    CHECK_MPI(MPI_Win_fence(0, win), "fence");
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            put_data(PHASE_FENCE_PUT, t, win, "fence-put");
        }
    }
    CHECK_MPI(MPI_Win_fence(0, win), "fence after puts");
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            check_slot(PHASE_FENCE_PUT, "fence-put", t);
        }
    }

    /* fence + get */
    fill_exposed(PHASE_FENCE_GET);
    CHECK_MPI(MPI_Win_fence(0, win), "fence");
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            get_data(t, win, "fence-get");
        }
    }
    CHECK_MPI(MPI_Win_fence(0, win), "fence after gets");
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            check_got(PHASE_FENCE_GET, "fence-get", t);
        }
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win), "closing fence");

    /* passive target: exclusive lock + put */
    lock_self(MPI_LOCK_EXCLUSIVE, win);
    memset(g_base, poison(PHASE_LOCK_PUT), g_slot * g_nranks);
    unlock_self(win);
    barrier();
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win),
                      "%s: exclusive lock of %d", kinds[g_kind], t);
            put_data(PHASE_LOCK_PUT, t, win, "lock-put");
            CHECK_MPI(MPI_Win_unlock(t, win), "%s: unlock of %d",
                      kinds[g_kind], t);
        }
    }
    barrier();
    lock_self(MPI_LOCK_SHARED, win);
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            check_slot(PHASE_LOCK_PUT, "lock-put", t);
        }
    }
    unlock_self(win);

    /* passive target: shared lock + get */
    barrier();
    lock_self(MPI_LOCK_EXCLUSIVE, win);
    fill_exposed(PHASE_LOCK_GET);
    unlock_self(win);
    barrier();
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win),
                      "%s: shared lock of %d", kinds[g_kind], t);
            get_data(t, win, "lock-get");
            CHECK_MPI(MPI_Win_unlock(t, win), "%s: unlock of %d",
                      kinds[g_kind], t);
            check_got(PHASE_LOCK_GET, "lock-get", t);
        }
    }

    /* lock_all: put, flush, get the same bytes back, flush */
    barrier();
    lock_self(MPI_LOCK_EXCLUSIVE, win);
    memset(g_base, poison(PHASE_FLUSH), g_slot * g_nranks);
    unlock_self(win);
    barrier();
    CHECK_MPI(MPI_Win_lock_all(0, win), "%s: lock_all", kinds[g_kind]);
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            char desc[128];
            unsigned char *back = g_local + g_slot * g_nranks;

            put_data(PHASE_FLUSH, t, win, "flush");
            CHECK_MPI(MPI_Win_flush(t, win), "%s: flush %d after put",
                      kinds[g_kind], t);
            memset(back, 0xee, g_size);
            CHECK_MPI(MPI_Get(back, (int)g_size, MPI_BYTE, t,
                              (MPI_Aint)(g_slot * g_rank), (int)g_size,
                              MPI_BYTE, win),
                      "%s flush: get back from %d size %zu", kinds[g_kind],
                      t, g_size);
            CHECK_MPI(MPI_Win_flush(t, win), "%s: flush %d after get",
                      kinds[g_kind], t);
            snprintf(desc, sizeof(desc), "%s flush: own put read back from "
                     "target", kinds[g_kind]);
            check_pattern(back, g_size,
                          make_seed(PHASE_FLUSH, g_rank, t, g_size, g_kind), 0,
                          desc, t, g_size, g_kind);
        }
    }
    CHECK_MPI(MPI_Win_unlock_all(win), "%s: unlock_all", kinds[g_kind]);
    barrier();
    lock_self(MPI_LOCK_SHARED, win);
    for (t = 0; t < g_nranks; ++t) {
        if (t != g_rank) {
            check_slot(PHASE_FLUSH, "flush", t);
        }
    }
    unlock_self(win);
    barrier();
}

int main(int argc, char **argv)
{
    size_t max_size, i, win_size;
    MPI_Win win;
    int nsizes = 0;
    double t0, t_kind[2];

    check_init(&argc, &argv, "mpi_onesided");
    max_size = (size_t)arg_long(argc, argv, 1, MIB);
    g_slot   = max_size + GUARD;
    win_size = g_slot * g_nranks;
    /* one slot per target for puts and gets, one more for reading back */
    g_local  = xmalloc(g_slot * (g_nranks + 1));

    for (g_kind = 0; g_kind < 2; ++g_kind) {
        void *mem = NULL;

        t0 = MPI_Wtime();
        if (g_kind == 0) {
            mem = xmalloc(win_size);
            CHECK_MPI(MPI_Win_create(mem, (MPI_Aint)win_size, 1, MPI_INFO_NULL,
                                     MPI_COMM_WORLD, &win),
                      "window of %zu bytes", win_size);
            g_base = mem;
        } else {
            CHECK_MPI(MPI_Win_allocate((MPI_Aint)win_size, 1, MPI_INFO_NULL,
                                       MPI_COMM_WORLD, &g_base, &win),
                      "window of %zu bytes", win_size);
        }
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        nsizes = 0;
        for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            if (sizes[i] <= max_size) {
                g_size = sizes[i];
                run_size(win);
                ++nsizes;
            }
        }
        CHECK_MPI(MPI_Win_free(&win), "%s: free", kinds[g_kind]);
        free(mem);
        t_kind[g_kind] = MPI_Wtime() - t0;
    }

    if (g_rank == 0) {
        printf("mpi_onesided: OK: %d ranks, Win_create (%.2f s) and "
               "Win_allocate (%.2f s), %d sizes 1..%zu B, fence put/get, "
               "lock put/get, lock_all put+flush+get, verified\n", g_nranks,
               t_kind[0], t_kind[1], nsizes, g_size);
        fflush(stdout);
    }
    free(g_local);
    check_finish();
    return 0;
}
