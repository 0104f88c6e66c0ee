/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: a TeraSort-style shuffle over UCP.
 *
 * Every rank generates --records 100-byte records (10-byte random key, then
 * rank, index and 82 random bytes; a PRNG seeded per rank) and sends 256
 * evenly spaced sample keys to rank 0, which sorts all samples and sends
 * back N-1 splitters. Each rank partitions its records by key range (rank
 * i gets keys in [splitter i-1, splitter i)), sends every other rank its
 * record count, then its records in chunks of --chunk bytes (every chunk's
 * checksum travels in its tag and is checked on arrival), and sorts what
 * it received.
 *
 * Validation: every rank's output is sorted and inside its key range, rank
 * i's largest key <= rank i+1's smallest, and the record count and an
 * order-independent checksum (sum and xor of a 64-bit hash of each record)
 * are the same before and after. Times (rank 0, between barriers):
 * exchange = counts + data; total = sampling + partitioning + exchange +
 * sort.
 */
#include "wl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC       100
#define KEY       10
#define NSAMPLES  256
#define CHUNK_MASK 0xffffffff00000000ull

typedef struct {
    uint64_t in_count, out_count, in_sum, in_xor, out_sum, out_xor;
    uint64_t sent_bytes;
    uint8_t  min_key[KEY], max_key[KEY];
    uint8_t  pad[4];
} stats_t;

static uint64_t rec_hash(const uint8_t *r)
{
    uint64_t h = 0x243f6a8885a308d3ull, w;
    unsigned i;

    for (i = 0; i + 8 <= REC; i += 8) {
        memcpy(&w, r + i, 8);
        h = wl_mix(h ^ w);
    }
    w = 0;
    memcpy(&w, r + i, REC - i);
    return wl_mix(h ^ w);
}

/* Checksum of a chunk, carried in the low 32 bits of its tag */
static uint32_t chunk_sum(const uint8_t *p, size_t len)
{
    uint64_t h = len, w;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < len; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static void generate(uint8_t *recs, size_t n, stats_t *st)
{
    uint64_t x = wl_mix(wl.seed ^ (0x5348554646ull + wl.rank)), v, h;
    uint32_t r32 = wl.rank, i32;
    size_t i, j;

    for (i = 0; i < n; ++i) {
        uint8_t *r = recs + i * REC;

        for (j = 0; j < REC; j += 8) {
            x = wl_mix(x);
            v = x;
            memcpy(r + j, &v, REC - j < 8 ? REC - j : 8);
        }
        i32 = i;
        memcpy(r + KEY, &r32, 4);
        memcpy(r + KEY + 4, &i32, 4);
        h = rec_hash(r);
        st->in_sum += h;
        st->in_xor ^= h;
    }
    st->in_count = n;
}

static int cmp_key(const void *a, const void *b)
{
    return memcmp(a, b, KEY);
}

static int cmp_rec(const void *a, const void *b)
{
    int c = memcmp(a, b, KEY);

    return c ? c : memcmp(a, b, REC);
}

/* Destination of a key: the number of splitters <= key */
static int dest_of(const uint8_t *key, const uint8_t *split)
{
    int lo = 0, hi = wl.nranks - 1, mid;

    while (lo < hi) {
        mid = (lo + hi) / 2;
        if (memcmp(split + mid * KEY, key, KEY) <= 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Samples to rank 0, splitters back to everyone */
static void pick_splitters(const uint8_t *recs, size_t n, uint8_t *split)
{
    uint8_t mine[NSAMPLES * KEY], *all;
    size_t ns = n < NSAMPLES ? n : NSAMPLES, i, total = 0, got;
    uint64_t counts[WL_MAX_RANKS];
    int r;

    wl_where("shuffle: sampling");
    for (i = 0; i < ns; ++i) {
        memcpy(mine + i * KEY, recs + (i * n / ns) * REC, KEY);
    }
    if (wl.rank != 0) {
        wl_send_blocking(0, mine, ns * KEY, WL_TAG(K_SAMPLE, wl.rank, 0));
        got = wl_recv_blocking(0, split, (wl.nranks - 1) * KEY,
                               WL_TAG(K_SPLIT, 0, 0));
        if (got != (size_t)(wl.nranks - 1) * KEY) {
            wl_die("splitters from rank 0: %zu bytes, expected %d", got,
                   (wl.nranks - 1) * KEY);
        }
        return;
    }
    all = wl_malloc((size_t)wl.nranks * NSAMPLES * KEY);
    memcpy(all, mine, ns * KEY);
    total = ns;
    for (r = 1; r < wl.nranks; ++r) {
        got = wl_recv_blocking(r, all + total * KEY, NSAMPLES * KEY,
                               WL_TAG(K_SAMPLE, r, 0));
        if (got % KEY != 0) {
            wl_die("samples from rank %d: %zu bytes", r, got);
        }
        counts[r] = got / KEY;
        total    += counts[r];
    }
    qsort(all, total, KEY, cmp_key);
    for (r = 0; r < wl.nranks - 1; ++r) {
        memcpy(split + r * KEY, all + ((r + 1) * total / wl.nranks) * KEY,
               KEY);
    }
    free(all);
    for (r = 1; r < wl.nranks; ++r) {
        wl_send_blocking(r, split, (wl.nranks - 1) * KEY,
                         WL_TAG(K_SPLIT, 0, 0));
    }
}

/* Reorders recs by destination; count[d], first[d] set */
static uint8_t *partition(const uint8_t *recs, size_t n, const uint8_t *split,
                          uint64_t *count, uint64_t *first)
{
    uint8_t *out = wl_malloc(n * REC), *dst = wl_malloc(n);
    uint64_t pos[WL_MAX_RANKS];
    size_t i;
    int d;

    wl_where("shuffle: partitioning");
    memset(count, 0, wl.nranks * sizeof(*count));
    for (i = 0; i < n; ++i) {
        dst[i] = dest_of(recs + i * REC, split);
        ++count[dst[i]];
    }
    for (d = 0, pos[0] = 0; d < wl.nranks; ++d) {
        first[d] = d ? first[d - 1] + count[d - 1] : 0;
        pos[d]   = first[d];
    }
    for (i = 0; i < n; ++i) {
        memcpy(out + pos[dst[i]]++ * REC, recs + i * REC, REC);
    }
    free(dst);
    return out;
}

/*
 * The exchange: counts, then data in chunks. Returns the received records
 * (own partition included) and their number in *nout.
 */
static uint8_t *exchange(const uint8_t *parts, const uint64_t *count,
                         const uint64_t *first, size_t *nout, stats_t *st)
{
    size_t cr = wl.chunk / REC ? wl.chunk / REC : 1;
    uint64_t in_count[WL_MAX_RANKS], in_first[WL_MAX_RANKS], nrecv = 0;
    void *creq_s[WL_MAX_RANKS], *creq_r[WL_MAX_RANKS];
    void **sreq, **rreq;
    int *rpeer, *speer;
    uint8_t **rbuf;
    size_t *rlen, nchunks_in = 0, nchunks_out = 0, k, c, off, len;
    ucp_tag_recv_info_t info;
    uint8_t *out;
    unsigned left, made;
    int r;

    wl_where("shuffle: exchanging counts");
    for (r = 0; r < wl.nranks; ++r) {
        creq_s[r] = creq_r[r] = NULL;
        if (r == wl.rank) {
            continue;
        }
        creq_r[r] = wl_recv(&in_count[r], sizeof(in_count[r]),
                            WL_TAG(K_COUNT, r, wl.rank), WL_FULL_MASK);
        creq_s[r] = wl_send(r, &count[r], sizeof(count[r]),
                            WL_TAG(K_COUNT, wl.rank, r));
    }
    in_count[wl.rank] = count[wl.rank];
    for (r = 0; r < wl.nranks; ++r) {
        wl_send_wait(&creq_s[r], r);
        wl_recv_wait(&creq_r[r], &info, r);
        in_first[r] = nrecv;
        nrecv      += in_count[r];
        if (r != wl.rank) {
            nchunks_in  += (in_count[r] + cr - 1) / cr;
            nchunks_out += (count[r] + cr - 1) / cr;
            st->sent_bytes += count[r] * REC;
        }
    }

    wl_where("shuffle: exchanging data");
    out   = wl_malloc(nrecv * REC);
    rreq  = calloc(nchunks_in + 1, sizeof(void*));
    rpeer = calloc(nchunks_in + 1, sizeof(int));
    rlen  = calloc(nchunks_in + 1, sizeof(size_t));
    rbuf  = calloc(nchunks_in + 1, sizeof(uint8_t*));
    sreq  = calloc(nchunks_out + 1, sizeof(void*));
    speer = calloc(nchunks_out + 1, sizeof(int));
    memcpy(out + in_first[wl.rank] * REC, parts + first[wl.rank] * REC,
           count[wl.rank] * REC);
    for (r = 0, k = 0; r < wl.nranks; ++r) {
        for (c = 0, off = 0; r != wl.rank && off < in_count[r]; ++c) {
            len = in_count[r] - off < cr ? in_count[r] - off : cr;
            rpeer[k] = r;
            rlen[k]  = len * REC;
            rbuf[k]  = out + (in_first[r] + off) * REC;
            rreq[k] = wl_recv(rbuf[k], len * REC,
                              WL_TAG(K_DATA, r, c << 32), CHUNK_MASK);
            ++k;
            off += len;
        }
    }
    for (r = 0, k = 0; r < wl.nranks; ++r) {
        for (c = 0, off = 0; r != wl.rank && off < count[r]; ++c) {
            const uint8_t *p = parts + (first[r] + off) * REC;

            len = count[r] - off < cr ? count[r] - off : cr;
            speer[k]  = r;
            sreq[k++] = wl_send(r, p, len * REC,
                                WL_TAG(K_DATA, wl.rank,
                                       (c << 32) | chunk_sum(p, len * REC)));
            off += len;
        }
    }
    do {
        left = made = 0;
        for (k = 0; k < nchunks_out; ++k) {
            left += !wl_send_test(&sreq[k], speer[k]);
        }
        for (k = 0; k < nchunks_in; ++k) {
            if (rreq[k] == NULL) {
                continue;
            }
            if (!wl_recv_test(&rreq[k], &info, rpeer[k])) {
                ++left;
                continue;
            }
            ++made;
            c = (info.sender_tag >> 32) & 0xffff;
            if (info.length != rlen[k] ||
                (uint32_t)info.sender_tag != chunk_sum(rbuf[k], rlen[k])) {
                wl_die("shuffle chunk %zu from rank %d to rank %d: %zu "
                       "bytes (expected %zu), checksum 0x%08x in the tag "
                       "does not match the data", c, rpeer[k], wl.rank,
                       info.length, rlen[k], (uint32_t)info.sender_tag);
            }
        }
        if (left) {
            wl_step(made);
        }
    } while (left);
    free(rreq);
    free(rpeer);
    free(rlen);
    free(rbuf);
    free(sreq);
    free(speer);
    *nout = nrecv;
    return out;
}

/* Sorted, inside [split[rank-1], split[rank]), checksummed into st */
static void check_output(const uint8_t *out, size_t n, const uint8_t *split,
                         stats_t *st)
{
    uint64_t h;
    size_t i;

    wl_where("shuffle: validating");
    for (i = 0; i < n; ++i) {
        const uint8_t *r = out + i * REC;

        if (i > 0 && cmp_rec(r - REC, r) > 0) {
            wl_die("shuffle output of rank %d is not sorted at record %zu",
                   wl.rank, i);
        }
        if ((wl.rank > 0 && memcmp(r, split + (wl.rank - 1) * KEY, KEY) < 0) ||
            (wl.rank < wl.nranks - 1 &&
             memcmp(r, split + wl.rank * KEY, KEY) >= 0)) {
            wl_die("shuffle output of rank %d: record %zu is outside the "
                   "rank's key range", wl.rank, i);
        }
        h = rec_hash(r);
        st->out_sum += h;
        st->out_xor ^= h;
    }
    st->out_count = n;
    if (n > 0) {
        memcpy(st->min_key, out, KEY);
        memcpy(st->max_key, out + (n - 1) * REC, KEY);
    }
}

/* Rank 0: the global checks over every rank's stats */
static void check_global(const stats_t *all, uint64_t *exchanged,
                         uint64_t *out_min, uint64_t *out_max)
{
    stats_t sum = { 0 };
    int r, prev = -1;

    *out_min = UINT64_MAX;
    *out_max = 0;
    for (r = 0; r < wl.nranks; ++r) {
        sum.in_count   += all[r].in_count;
        sum.out_count  += all[r].out_count;
        sum.in_sum     += all[r].in_sum;
        sum.out_sum    += all[r].out_sum;
        sum.in_xor     ^= all[r].in_xor;
        sum.out_xor    ^= all[r].out_xor;
        sum.sent_bytes += all[r].sent_bytes;
        *out_min = all[r].out_count < *out_min ? all[r].out_count : *out_min;
        *out_max = all[r].out_count > *out_max ? all[r].out_count : *out_max;
        if (all[r].out_count == 0) {
            continue;
        }
        if (prev >= 0 && memcmp(all[prev].max_key, all[r].min_key, KEY) > 0) {
            wl_die("shuffle: rank %d's largest key is above rank %d's "
                   "smallest", prev, r);
        }
        prev = r;
    }
    if (sum.in_count != sum.out_count) {
        wl_die("shuffle: %llu records generated, %llu after the shuffle",
               (unsigned long long)sum.in_count,
               (unsigned long long)sum.out_count);
    }
    if (sum.in_sum != sum.out_sum || sum.in_xor != sum.out_xor) {
        wl_die("shuffle: the records' checksum changed (sum %016llx -> "
               "%016llx, xor %016llx -> %016llx)",
               (unsigned long long)sum.in_sum,
               (unsigned long long)sum.out_sum,
               (unsigned long long)sum.in_xor,
               (unsigned long long)sum.out_xor);
    }
    *exchanged = sum.sent_bytes;
}

int wl_run_shuffle(void)
{
    size_t n = wl.records, nout;
    uint8_t *recs = wl_malloc(n * REC), *parts, *out, split[WL_MAX_RANKS * KEY];
    uint64_t count[WL_MAX_RANKS], first[WL_MAX_RANKS];
    uint64_t exchanged = 0, out_min = 0, out_max = 0;
    int peers[WL_MAX_RANKS], npeers = 0, r;
    double t0, te0, te1, t1;
    stats_t st = { 0 }, *all = NULL;
    const char *wakeups;

    if (wl.nranks < 2) {
        wl_die("shuffle needs at least 2 ranks");
    }
    generate(recs, n, &st);
    for (r = 0; r < wl.nranks; ++r) {
        if (r != wl.rank) {
            peers[npeers++] = r;
        }
    }
    wl_warmup_peers(peers, npeers);

    wl_ctl_barrier("shuffle start");
    if (wl.rank == 0) {
        wl_log("shuffle: %d ranks x %zu records of %d bytes", wl.nranks, n,
               REC);
    }
    t0 = wl_now();
    pick_splitters(recs, n, split);
    parts = partition(recs, n, split, count, first);
    wl_ctl_barrier("exchange start");
    te0 = wl_now();
    out = exchange(parts, count, first, &nout, &st);
    wl_ctl_barrier("exchange end");
    te1 = wl_now();
    wl_where("shuffle: sorting");
    qsort(out, nout, REC, cmp_rec);
    wl_ctl_barrier("sort end");
    t1 = wl_now();

    check_output(out, nout, split, &st);
    if (wl.rank == 0) {
        all = calloc(wl.nranks, sizeof(*all));
    }
    wakeups = wl_wakeup_stats();
    wl_ctl_gather(&st, sizeof(st), all);
    if (wl.rank == 0) {
        check_global(all, &exchanged, &out_min, &out_max);
        printf("bench-result pattern=shuffle ranks=%d wait=%d "
               "records_per_rank=%zu record_bytes=%d chunk=%zu "
               "exchanged_bytes=%llu exchange_seconds=%.6f "
               "shuffle_mb_s=%.3f total_seconds=%.6f out_records_min=%llu "
               "out_records_max=%llu %s validated=1\n",
               wl.nranks, wl.wait_mode,
               n, REC, wl.chunk, (unsigned long long)exchanged, te1 - te0,
               exchanged / (te1 - te0) / 1e6, t1 - t0,
               (unsigned long long)out_min, (unsigned long long)out_max, wakeups);
        free(all);
    }
    free(recs);
    free(parts);
    free(out);
    return 0;
}
