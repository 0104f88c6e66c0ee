/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Shared helpers of the MPI consumer tests: seeded data patterns, their
 * verification (a mismatch aborts the job with a message naming rank, peer,
 * size and byte index) and small utilities. Header-only: each program is
 * built from one .c file, once per MPI.
 */
#ifndef HIPOWER_MPI_CHECK_H
#define HIPOWER_MPI_CHECK_H

#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024 * 1024)

static int g_rank = -1, g_nranks = 0;
static const char *g_prog = "mpi";

static inline uint64_t mix64(uint64_t x)
{
    /* splitmix64 finalizer */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A seed that depends on everything that identifies one message */
static inline uint64_t make_seed(int phase, int sender, int receiver,
                                 size_t size, int iter)
{
    uint64_t s = mix64((uint64_t)phase);
    s = mix64(s ^ (uint64_t)(unsigned)sender);
    s = mix64(s ^ ((uint64_t)(unsigned)receiver << 20));
    s = mix64(s ^ (uint64_t)size);
    return mix64(s ^ ((uint64_t)(unsigned)iter << 32));
}

/* Byte i of the pattern: word i / 8 of a counter-based stream, so any
 * sub-range can be generated or checked on its own. */
static inline uint64_t pattern_word(uint64_t seed, size_t word)
{
    return mix64(seed + word * 0xd1b54a32d192ed03ull);
}

static inline void pattern_fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    size_t w, nwords = len / 8, i;
    uint64_t v;

    for (w = 0; w < nwords; ++w) {
        v = pattern_word(seed, w);
        memcpy(p + w * 8, &v, 8);
    }
    if (len % 8) {
        v = pattern_word(seed, nwords);
        for (i = nwords * 8; i < len; ++i) {
            p[i] = (unsigned char)(v >> (8 * (i % 8)));
        }
    }
}

/* Index of the first byte that differs from the pattern, or -1 */
static inline long pattern_find_mismatch(const void *buf, size_t len,
                                         uint64_t seed)
{
    const unsigned char *p = buf;
    size_t w, nwords = len / 8, i;
    uint64_t v, got;

    for (w = 0; w < nwords; ++w) {
        v = pattern_word(seed, w);
        memcpy(&got, p + w * 8, 8);
        if (got != v) {
            for (i = 0; i < 8; ++i) {
                if (p[w * 8 + i] != (unsigned char)(v >> (8 * i))) {
                    return (long)(w * 8 + i);
                }
            }
        }
    }
    v = pattern_word(seed, nwords);
    for (i = nwords * 8; i < len; ++i) {
        if (p[i] != (unsigned char)(v >> (8 * (i % 8)))) {
            return (long)i;
        }
    }
    return -1;
}

static inline unsigned char pattern_byte(uint64_t seed, size_t i)
{
    return (unsigned char)(pattern_word(seed, i / 8) >> (8 * (i % 8)));
}

static inline void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static inline void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: rank %d: FAIL: ", g_prog, g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/*
 * Verify buf[0..len) against the pattern of `seed`; on mismatch, abort the
 * job naming what was checked, the peer, the message size, iteration and
 * the first bad byte index (offset is added to the index reported, for
 * checks of a part of a message).
 */
static inline void check_pattern(const void *buf, size_t len, uint64_t seed,
                                 size_t offset, const char *what, int peer,
                                 size_t size, int iter)
{
    long bad = pattern_find_mismatch(buf, len, seed);

    if (bad >= 0) {
        die("%s: data mismatch: peer %d size %zu iteration %d index %zu: "
            "expected 0x%02x got 0x%02x",
            what, peer, size, iter, offset + (size_t)bad,
            pattern_byte(seed, (size_t)bad),
            ((const unsigned char*)buf)[bad]);
    }
}

static inline void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        die("out of memory allocating %zu bytes", size);
    }
    return p;
}

static inline void check_init(int *argc, char ***argv, const char *prog)
{
    MPI_Init(argc, argv);
    g_prog = prog;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
    /* Report errors ourselves, with rank and context */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

#define CHECK_MPI(_call, ...) \
    do { \
        int _rc = (_call); \
        if (_rc != MPI_SUCCESS) { \
            char _msg[MPI_MAX_ERROR_STRING]; \
            char _ctx[256]; \
            int _len = 0; \
            MPI_Error_string(_rc, _msg, &_len); \
            snprintf(_ctx, sizeof(_ctx), __VA_ARGS__); \
            die("%s failed (%s): %s", #_call, _ctx, _msg); \
        } \
    } while (0)

/* Every rank sends at least once here (so each one's transport counters
 * show traffic), and the job fails unless all ranks got here */
static inline void check_finish(void)
{
    int one = 1, sum = 0;

    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
              "final allreduce");
    if (sum != g_nranks) {
        die("final allreduce: sum %d, expected %d", sum, g_nranks);
    }
    MPI_Finalize();
}

/* Positive integer from argv[i], or the default */
static inline long arg_long(int argc, char **argv, int i, long def)
{
    char *end;
    long v;

    if (i >= argc) {
        return def;
    }
    v = strtol(argv[i], &end, 0);
    if ((*end != '\0') || (v <= 0)) {
        die("argument %d must be a positive integer, got '%s'", i, argv[i]);
    }
    return v;
}

#endif
