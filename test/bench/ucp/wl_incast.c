/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: the incast patterns of the HiPower paper (its Figure 6).
 * Rank 0 is the master, ranks 1..N-1 the workers.
 *
 *   incast-bcast   throughput: the master keeps --window sends of --size
 *                  bytes in flight to every worker, --msgs per worker; each
 *                  worker keeps --window receives posted, checks every
 *                  message and finally sends an 8-byte "done". Time and
 *                  master CPU run from the start barrier to the last done.
 *                  latency: per round the master sends one message to
 *                  every worker and waits for each worker's 8-byte ack.
 *   incast-gather  throughput: every worker keeps --window sends to the
 *                  master in flight, --msgs of them; the master keeps
 *                  --window receives posted per worker and checks every
 *                  message. Time and CPU run until the last one is in.
 *                  latency: per round the master sends an 8-byte ack (the
 *                  "go") to every worker, each worker answers with one
 *                  message; the round ends when all are in.
 *
 * Master CPU = getrusage(SELF) user+sys of the master over the phase.
 */
#include "wl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAT_SEQ0 (1ull << 32)   /* warm-up rounds use seq from here */

typedef struct {
    void    *req;
    uint8_t *buf;
    uint64_t seq;
} slot_t;

static int g_workers;

/* One message of the master's throughput phase, (worker w, slot s) */
static slot_t *slot_of(slot_t *slots, int w, unsigned s)
{
    return &slots[(size_t)w * wl.window + s];
}

static slot_t *slots_alloc(int n)
{
    slot_t *slots = calloc((size_t)n * wl.window, sizeof(*slots));
    size_t i;

    for (i = 0; i < (size_t)n * wl.window; ++i) {
        slots[i].buf = wl_malloc(wl.size);
    }
    return slots;
}

static void slots_free(slot_t *slots, int n)
{
    size_t i;

    for (i = 0; i < (size_t)n * wl.window; ++i) {
        free(slots[i].buf);
    }
    free(slots);
}

/*
 * Sender side of the throughput phase: --msgs messages to each of the n
 * peers (peers[i]), --window in flight per peer
 */
static void tput_send(const int *peers, int n)
{
    slot_t *slots = slots_alloc(n);
    uint64_t *next = calloc(n, sizeof(*next));
    unsigned s, made, busy;
    slot_t *sl;
    int i;

    wl_where("throughput phase: sending %u messages of %zu bytes to %d "
             "rank(s)", wl.msgs, wl.size, n);
    do {
        made = busy = 0;
        for (i = 0; i < n; ++i) {
            for (s = 0; s < wl.window; ++s) {
                sl = slot_of(slots, i, s);
                if (!wl_send_test(&sl->req, peers[i])) {
                    ++busy;
                    continue;
                }
                if (next[i] == wl.msgs) {
                    continue;
                }
                sl->seq = next[i]++;
                wl_fill(sl->buf, wl.size,
                        wl_base(K_TPUT, wl.rank, peers[i], sl->seq));
                sl->req = wl_send(peers[i], sl->buf, wl.size,
                                  WL_TAG(K_TPUT, wl.rank, sl->seq));
                busy   += sl->req != NULL;
                ++made;
            }
        }
        for (i = 0; i < n && next[i] == wl.msgs; ++i) {
        }
        if (busy == 0 && i == n) {
            break;
        }
        wl_step(made);
    } while (1);
    free(next);
    slots_free(slots, n);
}

/* Receiver side: --msgs messages from each of the n peers, all checked */
static void tput_recv(const int *peers, int n)
{
    slot_t *slots = slots_alloc(n);
    uint64_t *next = calloc(n, sizeof(*next)), got = 0;
    uint64_t total = (uint64_t)wl.msgs * n;
    ucp_tag_recv_info_t info;
    unsigned s, made;
    slot_t *sl;
    int i;

    wl_where("throughput phase: receiving %u messages of %zu bytes from %d "
             "rank(s)", wl.msgs, wl.size, n);
    for (i = 0; i < n; ++i) {
        for (s = 0; s < wl.window && next[i] < wl.msgs; ++s) {
            sl      = slot_of(slots, i, s);
            sl->seq = next[i]++;
            sl->req = wl_recv(sl->buf, wl.size,
                              WL_TAG(K_TPUT, peers[i], sl->seq), WL_FULL_MASK);
        }
    }
    while (got < total) {
        made = 0;
        for (i = 0; i < n; ++i) {
            for (s = 0; s < wl.window; ++s) {
                sl = slot_of(slots, i, s);
                if (sl->req == NULL ||
                    !wl_recv_test(&sl->req, &info, peers[i])) {
                    continue;
                }
                wl_verify("throughput message", sl->buf, info.length, wl.size,
                          K_TPUT, peers[i], wl.rank, sl->seq);
                ++got;
                ++made;
                if (next[i] < wl.msgs) {
                    sl->seq = next[i]++;
                    sl->req = wl_recv(sl->buf, wl.size,
                                      WL_TAG(K_TPUT, peers[i], sl->seq),
                                      WL_FULL_MASK);
                }
            }
        }
        wl_step(made);
    }
    free(next);
    slots_free(slots, n);
}

/* bcast: each worker tells the master it has everything */
static void done_exchange(int gather)
{
    uint64_t v[WL_MAX_RANKS];
    void *reqs[WL_MAX_RANKS];
    ucp_tag_recv_info_t info;
    int w;

    if (gather) {
        return;
    }
    wl_where("throughput phase: done messages");
    if (wl.rank != 0) {
        v[0] = wl.msgs;
        wl_send_blocking(0, &v[0], sizeof(v[0]), WL_TAG(K_DONE, wl.rank, 0));
        return;
    }
    for (w = 1; w <= g_workers; ++w) {
        reqs[w] = wl_recv(&v[w], sizeof(v[w]), WL_TAG(K_DONE, w, 0),
                          WL_FULL_MASK);
    }
    for (w = 1; w <= g_workers; ++w) {
        wl_recv_wait(&reqs[w], &info, w);
        if (info.length != sizeof(v[w]) || v[w] != wl.msgs) {
            wl_die("done message from rank %d: says %llu messages, expected "
                   "%u", w, (unsigned long long)v[w], wl.msgs);
        }
    }
}

/*
 * n latency rounds (seq0 + r); the master's round times go to times[] if
 * not NULL. bcast: data out, 8-byte acks back; gather: 8-byte go out, data
 * back.
 */
static void lat_rounds(int gather, unsigned n, uint64_t seq0, double *times)
{
    int kout = gather ? K_LAT_ACK : K_LAT, kin = gather ? K_LAT : K_LAT_ACK;
    size_t out_len = gather ? 8 : wl.size, in_len = gather ? wl.size : 8;
    uint8_t *out[WL_MAX_RANKS], *in[WL_MAX_RANKS];
    void *sreq[WL_MAX_RANKS], *rreq[WL_MAX_RANKS];
    ucp_tag_recv_info_t info;
    int w, first = wl.rank == 0 ? 1 : 0, last = wl.rank == 0 ? g_workers : 0;
    uint64_t seq;
    unsigned r;
    double t;

    for (w = first; w <= last; ++w) {
        out[w] = wl_malloc(wl.size > 8 ? wl.size : 8);
        in[w]  = wl_malloc(wl.size > 8 ? wl.size : 8);
    }
    for (r = 0; r < n; ++r) {
        seq = seq0 + r;
        wl_where("latency round %u", r);
        if (wl.rank == 0) {
            t = wl_now();
            for (w = 1; w <= g_workers; ++w) {
                rreq[w] = wl_recv(in[w], in_len, WL_TAG(kin, w, seq),
                                  WL_FULL_MASK);
            }
            for (w = 1; w <= g_workers; ++w) {
                wl_fill(out[w], out_len, wl_base(kout, 0, w, seq));
                sreq[w] = wl_send(w, out[w], out_len, WL_TAG(kout, 0, seq));
            }
            for (w = 1; w <= g_workers; ++w) {
                wl_recv_wait(&rreq[w], &info, w);
                wl_verify("latency round message", in[w], info.length, in_len,
                          kin, w, 0, seq);
                wl_send_wait(&sreq[w], w);
            }
            if (times != NULL) {
                times[r] = wl_now() - t;
            }
        } else {
            rreq[0] = wl_recv(in[0], out_len, WL_TAG(kout, 0, seq),
                              WL_FULL_MASK);
            wl_recv_wait(&rreq[0], &info, 0);
            wl_verify("latency round message", in[0], info.length, out_len,
                      kout, 0, wl.rank, seq);
            wl_fill(out[0], in_len, wl_base(kin, wl.rank, 0, seq));
            sreq[0] = wl_send(0, out[0], in_len, WL_TAG(kin, wl.rank, seq));
            wl_send_wait(&sreq[0], 0);
        }
    }
    for (w = first; w <= last; ++w) {
        free(out[w]);
        free(in[w]);
    }
}

/* One measurement: throughput then latency of one pattern, size and mode */
static void measure(int gather, const int *peers, int npeers)
{
    const char *name = gather ? "incast-gather" : "incast-bcast";
    double t0, c0, secs, cpu, lat_cpu, pattern_us = 0, *times;
    uint64_t handled;
    const char *wakeups;

    if (wl.rank == 0) {
        /* What checking (gather) or filling (bcast) one message costs the
         * master: part of its CPU per message, whatever the transport */
        pattern_us = wl_pattern_cost(wl.size, gather);
    }
    times = calloc(wl.lat_rounds + 1, sizeof(*times));
    wl_ctl_barrier("warm-up rounds");
    lat_rounds(gather, wl.warmup, LAT_SEQ0, NULL);

    wl_ctl_barrier("throughput start");
    if (wl.rank == 0) {
        wl_log("%s %zu B%s: throughput phase, %u messages per worker, "
               "window %u", name, wl.size, wl.wait_mode ? " --wait" : "",
               wl.msgs, wl.window);
    }
    t0 = wl_now();
    c0 = wl_cpu();
    if ((wl.rank == 0) == gather) {
        tput_recv(peers, npeers);
    } else {
        tput_send(peers, npeers);
    }
    done_exchange(gather);
    secs = wl_now() - t0;
    cpu  = wl_cpu() - c0;

    wl_ctl_barrier("latency start");
    c0 = wl_cpu();
    lat_rounds(gather, wl.lat_rounds, 0, times);
    lat_cpu = wl_cpu() - c0;
    wakeups = wl_wakeup_stats();

    if (wl.rank == 0) {
        handled = (uint64_t)wl.msgs * g_workers;
        printf("bench-result pattern=%s ranks=%d workers=%d size=%zu "
               "window=%u wait=%d msgs=%llu seconds=%.6f mb_s=%.3f "
               "msg_rate=%.1f master_cpu_s=%.6f master_cpu_us_per_msg=%.3f "
               "master_cpu_util=%.3f pattern_cpu_us_per_msg=%.3f "
               "lat_rounds=%u lat_us_median=%.1f lat_us_min=%.1f "
               "lat_us_max=%.1f lat_master_cpu_us_per_round=%.1f %s\n",
               name, wl.nranks, g_workers, wl.size, wl.window, wl.wait_mode,
               (unsigned long long)handled, secs,
               handled * wl.size / secs / 1e6, handled / secs, cpu,
               cpu * 1e6 / handled, cpu / secs, pattern_us, wl.lat_rounds,
               wl_median(times, wl.lat_rounds) * 1e6,
               wl_min(times, wl.lat_rounds) * 1e6,
               wl_max(times, wl.lat_rounds) * 1e6,
               wl.lat_rounds ? lat_cpu * 1e6 / wl.lat_rounds : 0, wakeups);
    }
    free(times);
}

/* which: 1 bcast, 2 gather, 3 both; for each size, pattern and mode */
int wl_run_incast(int which)
{
    int peers[WL_MAX_RANKS], npeers, w, gather;
    unsigned s, mode, max_msgs = wl.msgs;

    g_workers = wl.nranks - 1;
    if (g_workers < 1) {
        wl_die("the incast patterns need at least 2 ranks");
    }
    if (wl.rank == 0) {
        for (w = 1; w <= g_workers; ++w) {
            peers[w - 1] = w;
        }
        npeers = g_workers;
    } else {
        peers[0] = 0;
        npeers   = 1;
    }
    wl_warmup_peers(peers, npeers);
    for (s = 0; s < wl.num_sizes; ++s) {
        wl.size = wl.sizes[s];
        wl.msgs = max_msgs;
        if (wl.budget > 0 && wl.budget / wl.size < wl.msgs) {
            wl.msgs = wl.budget / wl.size < 16 ? 16 : wl.budget / wl.size;
        }
        for (gather = 0; gather < 2; ++gather) {
            if (!(which & (1 << gather))) {
                continue;
            }
            for (mode = 1; mode <= 2; ++mode) {
                if (wl.modes & mode) {
                    wl.wait_mode = mode == 2;
                    measure(gather, peers, npeers);
                }
            }
        }
    }
    return 0;
}
