/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: multi-process UCP workloads of the benchmark suite.
 *
 *   ucp_workloads PATTERN --rank R --nranks N --port P [options]
 *
 * N ranks are N processes (contrib/bench/ucp-launch starts them, each on
 * its own verbs device through UCX_NET_DEVICES, and passes rank, size and
 * port in HIPOWER_LAUNCH_RANK/_NRANKS/_PORT). Rank 0 listens on a loopback
 * TCP port, the others connect; worker addresses are all-gathered over it,
 * endpoints are created by worker address, and all data moves with UCP tag
 * send/receive. Every received byte is checked (a pattern of kind, sender,
 * receiver, sequence number and offset; shuffle chunks carry a checksum in
 * their tag); a mismatch, a UCP error, a peer that exits or the watchdog
 * (--timeout) fails the run with a message naming the rank (and the peer)
 * and exit status 1.
 *
 * Patterns (wl_incast.c, wl_resnet.c, wl_shuffle.c, wl_connect.c):
 * incast-bcast, incast-gather, resnet, shuffle, connect.
 *
 * Output: rank 0 prints one line per run on stdout, starting with
 * "bench-result", then KEY=VALUE words; progress goes to stderr.
 *   all:     pattern, ranks, wait (1: --wait, ranks sleep in the worker's
 *            event fd when idle; 0: busy polling), lost_wakeups (times a
 *            rank's 1-s poll on the event fd timed out although its worker
 *            had work: each cost up to 1 s), arm_races (times
 *            ucp_worker_arm() returned UCS_OK but the worker had work right
 *            after: the rank did not sleep); both summed over all ranks,
 *            0 without --wait
 *   incast-bcast / incast-gather (one line per size and mode; "incast"
 *   runs both, for each size bcast then gather):
 *            workers, size (bytes per message), window (sends or receives
 *            in flight per worker), msgs (messages the master handled in
 *            the throughput phase), seconds (its wall time), mb_s (10^6
 *            bytes/s at the master), msg_rate (messages/s at the master),
 *            master_cpu_s (user+sys of the master process over the phase),
 *            master_cpu_us_per_msg, master_cpu_util (cpu/wall),
 *            pattern_cpu_us_per_msg (what filling, bcast, or checking,
 *            gather, one message's pattern costs the master: included in
 *            master_cpu_us_per_msg, the same for every transport),
 *            lat_rounds, lat_us_median/_min/_max (round time at the master:
 *            bcast: one message to every worker and its 8-byte ack back;
 *            gather: an 8-byte go to every worker and one message back),
 *            lat_master_cpu_us_per_round
 *   resnet:  workers, tensors (in ResNet-152), tensors_sent (per
 *            iteration, after --tensor-stride), stride, shrink,
 *            bytes_per_worker (each way per iteration), model_fraction
 *            (bytes_per_worker / model size), iters (measured, after
 *            --warmup-iters), fct_ms_median/_min/_max (flow completion
 *            time per iteration), mb_s (push+pull bytes of all workers /
 *            median fct)
 *   shuffle: records_per_rank, record_bytes (100), chunk, exchanged_bytes
 *            (records sent to other ranks, all ranks), exchange_seconds,
 *            shuffle_mb_s (exchanged_bytes / exchange_seconds, 10^6 B/s),
 *            total_seconds (sampling + partitioning + exchange + sort),
 *            out_records_min/_max (balance), validated=1
 *   connect: eps (endpoints rank 1 opened to rank 0, one message each),
 *            connect_seconds (first ucp_ep_create to the last message
 *            delivered), connect_us_per_ep, close_seconds (closing them
 *            all, flushed), close_us_per_ep
 */
#define _GNU_SOURCE
#include "wl.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

wl_opts_t wl = {
    .rank          = -1,
    .nranks        = 0,
    .port          = 0,
    .host          = "127.0.0.1",
    .timeout       = 120,
    .seed          = 0x48495057524b4c44ull,
    .size          = 4096,
    .modes         = 1,
    .msgs          = 1000,
    .window        = 16,
    .lat_rounds    = 100,
    .warmup        = 10,
    .iters         = 3,
    .warmup_iters  = 1,
    .tensor_stride = 1,
    .shrink        = 1,
    .records       = 41943,      /* 4 MiB of 100-byte records */
    .chunk         = 65536,
    .eps           = 1024,
};

static void usage(FILE *f)
{
    fprintf(f,
"usage: ucp_workloads PATTERN [options]\n"
"PATTERN: incast-bcast, incast-gather, incast (both), resnet, shuffle,\n"
"         connect\n"
"  --rank R, --nranks N, --port P   (default: $HIPOWER_LAUNCH_RANK,\n"
"                     $HIPOWER_LAUNCH_NRANKS, $HIPOWER_LAUNCH_PORT)\n"
"  --host ADDR        rank 0's control address (default %s)\n"
"  --timeout SEC      watchdog: fail after SEC seconds (default %u, 0 = none)\n"
"  --wait             sleep in the worker's event fd when idle (WAKEUP);\n"
"                     the same as --modes wait\n"
"  --modes LIST       incast: busy, wait or busy,wait: measure each size\n"
"                     with busy polling, sleeping, or both (default busy)\n"
"  --seed S           data seed (default: fixed)\n"
"  -v, --verbose      more on stderr (repeat for the ResNet tensor list)\n"
"incast:\n"
"  --size LIST        message sizes, comma-separated (default %zu)\n"
"  --msgs N           throughput phase: messages per worker (default %u)\n"
"  --budget BYTES     throughput phase: BYTES/size messages per worker,\n"
"                     at least 16 and at most --msgs\n"
"  --window W         in flight per worker (default %u)\n"
"  --lat-rounds N     latency rounds (default %u)\n"
"  --warmup N         untimed rounds first (default %u)\n"
"resnet:\n"
"  --iters N          measured iterations (default %u)\n"
"  --warmup-iters N   untimed iterations first (default %u)\n"
"  --tensor-stride K  send every K-th tensor only (default %u)\n"
"  --shrink D         divide tensors above 4 KB by D, not below 4 KB\n"
"                     (default %u)\n"
"shuffle:\n"
"  --records R        100-byte records per rank (default %zu)\n"
"  --chunk BYTES      exchange message size (default %zu)\n"
"connect (2 ranks):\n"
"  --eps N            endpoints rank 1 opens to rank 0 (default %u)\n",
            wl.host, wl.timeout, wl.size, wl.msgs, wl.window, wl.lat_rounds,
            wl.warmup, wl.iters, wl.warmup_iters, wl.tensor_stride, wl.shrink,
            wl.records, wl.chunk, wl.eps);
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);

    return v != NULL && *v ? atoi(v) : dflt;
}

static unsigned long long num(const char *s, const char *opt_name)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);

    if (*s == '\0' || *end != '\0') {
        fprintf(stderr, "ucp_workloads: %s takes a number, not '%s'\n",
                opt_name, s);
        exit(2);
    }
    return v;
}

static unsigned parse_modes(const char *list)
{
    if (!strcmp(list, "busy")) {
        return 1;
    } else if (!strcmp(list, "wait")) {
        return 2;
    } else if (!strcmp(list, "busy,wait") || !strcmp(list, "wait,busy")) {
        return 3;
    }
    fprintf(stderr, "ucp_workloads: --modes takes busy, wait or busy,wait\n");
    exit(2);
}

static void parse_sizes(const char *list)
{
    char *copy = strdup(list), *tok, *save = NULL;

    wl.num_sizes = 0;
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (wl.num_sizes == sizeof(wl.sizes) / sizeof(wl.sizes[0])) {
            fprintf(stderr, "ucp_workloads: too many sizes\n");
            exit(2);
        }
        wl.sizes[wl.num_sizes++] = num(tok, "--size");
    }
    free(copy);
    wl.size = wl.sizes[0];
}

int main(int argc, char **argv)
{
    enum { O_RANK = 256, O_NRANKS, O_PORT, O_HOST, O_TIMEOUT, O_WAIT, O_SEED,
           O_SIZE, O_MSGS, O_WINDOW, O_LAT, O_WARMUP, O_ITERS, O_WITERS,
           O_STRIDE, O_SHRINK, O_RECORDS, O_CHUNK, O_MODES, O_BUDGET, O_EPS };
    static const struct option long_opts[] = {
        { "rank",          required_argument, NULL, O_RANK },
        { "nranks",        required_argument, NULL, O_NRANKS },
        { "port",          required_argument, NULL, O_PORT },
        { "host",          required_argument, NULL, O_HOST },
        { "timeout",       required_argument, NULL, O_TIMEOUT },
        { "wait",          no_argument,       NULL, O_WAIT },
        { "modes",         required_argument, NULL, O_MODES },
        { "budget",        required_argument, NULL, O_BUDGET },
        { "seed",          required_argument, NULL, O_SEED },
        { "size",          required_argument, NULL, O_SIZE },
        { "msgs",          required_argument, NULL, O_MSGS },
        { "window",        required_argument, NULL, O_WINDOW },
        { "lat-rounds",    required_argument, NULL, O_LAT },
        { "warmup",        required_argument, NULL, O_WARMUP },
        { "iters",         required_argument, NULL, O_ITERS },
        { "warmup-iters",  required_argument, NULL, O_WITERS },
        { "tensor-stride", required_argument, NULL, O_STRIDE },
        { "shrink",        required_argument, NULL, O_SHRINK },
        { "records",       required_argument, NULL, O_RECORDS },
        { "chunk",         required_argument, NULL, O_CHUNK },
        { "eps",           required_argument, NULL, O_EPS },
        { "verbose",       no_argument,       NULL, 'v' },
        { "help",          no_argument,       NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *o;
    int c, rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    wl.rank   = env_int("HIPOWER_LAUNCH_RANK", -1);
    wl.nranks = env_int("HIPOWER_LAUNCH_NRANKS", 0);
    wl.port   = env_int("HIPOWER_LAUNCH_PORT", 0);
    while ((c = getopt_long(argc, argv, "vh", long_opts, NULL)) != -1) {
        o = optind > 1 ? argv[optind - 1] : "option";
        switch (c) {
        case O_RANK:    wl.rank = num(optarg, o); break;
        case O_NRANKS:  wl.nranks = num(optarg, o); break;
        case O_PORT:    wl.port = num(optarg, o); break;
        case O_HOST:    wl.host = optarg; break;
        case O_TIMEOUT: wl.timeout = num(optarg, o); break;
        case O_WAIT:    wl.modes = 2; break;
        case O_MODES:   wl.modes = parse_modes(optarg); break;
        case O_BUDGET:  wl.budget = num(optarg, o); break;
        case O_SEED:    wl.seed = num(optarg, o); break;
        case O_SIZE:    parse_sizes(optarg); break;
        case O_MSGS:    wl.msgs = num(optarg, o); break;
        case O_WINDOW:  wl.window = num(optarg, o); break;
        case O_LAT:     wl.lat_rounds = num(optarg, o); break;
        case O_WARMUP:  wl.warmup = num(optarg, o); break;
        case O_ITERS:   wl.iters = num(optarg, o); break;
        case O_WITERS:  wl.warmup_iters = num(optarg, o); break;
        case O_STRIDE:  wl.tensor_stride = num(optarg, o); break;
        case O_SHRINK:  wl.shrink = num(optarg, o); break;
        case O_RECORDS: wl.records = num(optarg, o); break;
        case O_CHUNK:   wl.chunk = num(optarg, o); break;
        case O_EPS:     wl.eps = num(optarg, o); break;
        case 'v':       ++wl.verbose; break;
        case 'h':       usage(stdout); return 0;
        default:        usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    wl.pattern = argv[optind];
    if (wl.num_sizes == 0) {
        wl.sizes[wl.num_sizes++] = wl.size;
    }
    wl.wakeup    = (wl.modes & 2) != 0;
    wl.wait_mode = wl.modes == 2;
    if (wl.nranks < 1 || wl.nranks > WL_MAX_RANKS || wl.rank < 0 ||
        wl.rank >= wl.nranks || wl.port <= 0 || wl.port > 65535) {
        fprintf(stderr, "ucp_workloads: give --rank (0..N-1), --nranks "
                "(1..%d) and --port, or run through ucp-launch\n",
                WL_MAX_RANKS);
        return 2;
    }
    if (wl.window < 1 || wl.tensor_stride < 1 || wl.shrink < 1 ||
        wl.iters < 1 || wl.records < 1 || wl.chunk < 1) {
        fprintf(stderr, "ucp_workloads: --window, --tensor-stride, --shrink, "
                "--iters, --records and --chunk must be >= 1\n");
        return 2;
    }
    if (strcmp(wl.pattern, "incast-bcast") && strcmp(wl.pattern, "incast") &&
        strcmp(wl.pattern,
        "incast-gather") && strcmp(wl.pattern, "resnet") &&
        strcmp(wl.pattern, "shuffle") && strcmp(wl.pattern, "connect")) {
        fprintf(stderr, "ucp_workloads: unknown pattern '%s'\n", wl.pattern);
        usage(stderr);
        return 2;
    }

    wl_watchdog_start();
    if (wl.rank == 0 && wl.verbose) {
        wl_log("%s: starting", wl.pattern);
    }
    wl_ctl_setup();
    if (wl.rank == 0 && wl.verbose) {
        wl_log("%s: %d ranks on the control plane", wl.pattern, wl.nranks);
    }
    wl_ucp_setup();
    wl_ctl_barrier("setup");
    if (wl.rank == 0) {
        wl_log("%s: %d ranks connected%s", wl.pattern, wl.nranks,
               wl.wakeup ? " (UCP_FEATURE_WAKEUP)" : "");
    }
    if (!strcmp(wl.pattern, "incast-bcast")) {
        rc = wl_run_incast(1);
    } else if (!strcmp(wl.pattern, "incast-gather")) {
        rc = wl_run_incast(2);
    } else if (!strcmp(wl.pattern, "incast")) {
        rc = wl_run_incast(3);
    } else if (!strcmp(wl.pattern, "resnet")) {
        rc = wl_run_resnet();
    } else if (!strcmp(wl.pattern, "connect")) {
        rc = wl_run_connect();
    } else {
        rc = wl_run_shuffle();
    }
    if (wl.rank == 0 && wl.verbose) {
        wl_log("%s: closing", wl.pattern);
    }
    wl_ucp_teardown();
    if (wl.rank == 0 && wl.verbose) {
        wl_log("%s: closed", wl.pattern);
    }
    wl_ctl_close();
    alarm(0);
    return rc;
}
