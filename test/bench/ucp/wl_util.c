/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: errors, watchdog, clocks, data patterns and statistics.
 *
 * The pattern of a message is a function of (kind, source, destination,
 * sequence) and of the byte offset: 64-bit word j holds base + j * PHI,
 * where base = mix(seed, kind, source, destination, sequence). Checking it
 * costs about as much as a memcmp, so every received byte is checked.
 */
#define _GNU_SOURCE
#include "wl.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PHI 0x9e3779b97f4a7c15ull

static char g_where[256] = "startup";

void wl_die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "ucp_workloads rank %d: FAIL: ", wl.rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (in %s)\n", g_where);
    exit(1);
}

void wl_where(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(g_where, sizeof(g_where), fmt, ap);
    va_end(ap);
}

const char *wl_where_now(void)
{
    return g_where;
}

void wl_log(const char *fmt, ...)
{
    va_list ap;

    static double t0;

    if (t0 == 0) {
        t0 = wl_now();
    }
    fprintf(stderr, "rank %d %+.1fs: ", wl.rank, wl_now() - t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

/* SIGALRM (--timeout) or SIGTERM: say where this rank was stuck */
static void on_signal(int sig)
{
    char msg[512];
    int len;

    if (sig == SIGALRM) {
        len = snprintf(msg, sizeof(msg), "ucp_workloads rank %d: FAIL: timed "
                       "out after %u s in %s\n", wl.rank, wl.timeout, g_where);
    } else {
        len = snprintf(msg, sizeof(msg), "ucp_workloads rank %d: FAIL: "
                       "terminated by signal %d in %s\n", wl.rank, sig,
                       g_where);
    }
    if (write(2, msg, len) < 0) {
        /* nothing to do */
    }
    _exit(1);
}

void wl_watchdog_start(void)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_signal);
    signal(SIGTERM, on_signal);
    alarm(wl.timeout);
}

double wl_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double wl_cpu(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

void *wl_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        wl_die("out of memory (%zu bytes)", size);
    }
    return p;
}

uint64_t wl_mix(uint64_t x)
{
    x += PHI;
    x  = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x  = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t wl_base(int kind, int src, int dst, uint64_t seq)
{
    return wl_mix(wl_mix(wl.seed ^ ((uint64_t)kind << 56) ^
                         ((uint64_t)src << 48) ^ ((uint64_t)dst << 40)) ^ seq);
}

void wl_fill(void *buf, size_t len, uint64_t base)
{
    uint8_t *p = buf;
    uint64_t v = base;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8, v += PHI) {
        memcpy(p + i, &v, 8);
    }
    if (i < len) {
        memcpy(p + i, &v, len - i);
    }
}

long wl_check(const void *buf, size_t len, uint64_t base)
{
    const uint8_t *p = buf;
    uint64_t v = base, w;
    size_t i, k;

    for (i = 0; i + 8 <= len; i += 8, v += PHI) {
        memcpy(&w, p + i, 8);
        if (w != v) {
            break;
        }
    }
    if (i + 8 <= len || (i < len && memcmp(p + i, &v, len - i) != 0)) {
        for (k = 0; k < 8 && i + k < len; ++k) {
            if (p[i + k] != ((const uint8_t*)&v)[k]) {
                return (long)(i + k);
            }
        }
        return (long)i;
    }
    return -1;
}

void wl_verify(const char *what, const void *buf, size_t got, size_t len,
               int kind, int src, int dst, uint64_t seq)
{
    long bad;

    if (got != len) {
        wl_die("%s from rank %d to rank %d seq %llu: received %zu bytes, "
               "expected %zu", what, src, dst, (unsigned long long)seq, got,
               len);
    }
    bad = wl_check(buf, len, wl_base(kind, src, dst, seq));
    if (bad >= 0) {
        wl_die("%s from rank %d to rank %d seq %llu (%zu bytes): data "
               "corrupted, first bad byte at offset %ld (0x%02x)", what, src,
               dst, (unsigned long long)seq, len, bad,
               ((const uint8_t*)buf)[bad]);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

double wl_median(const double *v, unsigned n)
{
    double *s, m;

    if (n == 0) {
        return 0;
    }
    s = wl_malloc(n * sizeof(*s));
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_double);
    m = (n % 2) ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

double wl_min(const double *v, unsigned n)
{
    double m = n ? v[0] : 0;
    unsigned i;

    for (i = 1; i < n; ++i) {
        m = v[i] < m ? v[i] : m;
    }
    return m;
}

double wl_max(const double *v, unsigned n)
{
    double m = n ? v[0] : 0;
    unsigned i;

    for (i = 1; i < n; ++i) {
        m = v[i] > m ? v[i] : m;
    }
    return m;
}

double wl_pattern_cost(size_t len, int check)
{
    struct timespec a, b;
    uint8_t *buf = wl_malloc(len);
    unsigned n = 0;
    double spent;
    volatile long sink = 0;

    wl_fill(buf, len, 1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do {
        if (check) {
            sink += wl_check(buf, len, 1);
        } else {
            wl_fill(buf, len, n);
        }
        ++n;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        spent = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
    } while (spent < 0.02 && n < 100000);
    free(buf);
    (void)sink;
    return spent * 1e6 / n;
}
