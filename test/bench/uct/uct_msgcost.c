/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * uct_msgcost: user-space instructions per active message on the sender and
 * on the receiver of any UCT transport, for callgrind.
 *
 *   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=F \
 *       uct_msgcost -t TL -a DEV -b DEV [-s SIZE,...] [-B BURST] [-R ROUNDS]
 *                   [-L]
 *
 * One process, two interfaces (A on device -a sends, B on device -b
 * receives), as two hosts would. Each round A sends BURST messages and
 * flushes; once the network has delivered them (a pause, not counted), A
 * completes the flush and B drains the messages. Collection is switched on
 * only around these three steps and each step is dumped under its own name
 * ("tx:SIZE", "rx:SIZE"), so no start-up, connection or idle time is in the
 * counts. Progress calls that found nothing while collecting are counted
 * and, with the cost of one idle progress call measured at the end
 * ("txidle", "rxidle"), taken out by contrib/bench/cpu.sh: what remains is
 * the work of sending or receiving a message, not the waiting for one.
 * Every message carries its round and index; the receiver checks them and
 * the length, and a wrong or missing message fails the run.
 *
 * -L, under load: the burst may be larger than what the transport can take
 * at once (hipower: the receiver's slots). A send or flush that is refused
 * lets A progress once, then B, and B's calls are dumped as B's
 * ("rx:SIZE"): B catches up only when A has to wait for it, so a transport that accepts what it cannot post yet (hipower's
 * bundles) is measured doing so.
 *
 * Prints one line per size:
 *   msgcost size=S msgs=N tx_idle=I rx_idle=J idle_calls=C
 */
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>
#include <valgrind/callgrind.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AM_ID        7
#define HELLO_ID     8   /* The message that completes the connection */
#define IDLE_CALLS   200
#define MAX_SIZES    8
#define WAIT_LIMIT_S 30

typedef struct {
    uct_md_h            md;
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    uct_iface_attr_t    attr;
    uct_device_addr_t   *dev_addr;
    uct_ep_h            ep;
    char                dev[64];
} side_t;

typedef struct {
    uint32_t round;
    uint32_t index;
} msg_hdr_t;

static side_t   side_a, side_b;
static uint32_t cur_round, expect_index, cur_size;
static unsigned received, hellos;
/* -L: B progresses while A waits; its calls go under cur_rx_name */
static int      load_mode;
static unsigned load_rx_idle;
static char     cur_tx_name[32], cur_rx_name[32];
static char     payload[65536];

static void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "uct_msgcost: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

static void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        die(what, status);
    }
}

static ucs_status_t am_handler(void *arg, void *data, size_t length,
                               unsigned flags)
{
    const msg_hdr_t *hdr = data;

    if ((length != cur_size) || (hdr->round != cur_round) ||
        (hdr->index != expect_index)) {
        fprintf(stderr, "uct_msgcost: got round %u message %u of %zu bytes, "
                "expected round %u message %u of %u bytes\n", hdr->round,
                hdr->index, length, cur_round, expect_index, cur_size);
        exit(1);
    }
    ++expect_index;
    ++received;
    return UCS_OK;
}

/* The md of any component that offers transport @a tl on device @a dev */
static void open_md(side_t *side, const char *tl, const char *dev)
{
    uct_component_h *comps;
    uct_component_attr_t cattr;
    uct_md_resource_desc_t *mds;
    uct_tl_resource_desc_t *tls;
    uct_md_config_t *config;
    unsigned nc, nt, c, m, t;
    int found = 0;

    snprintf(side->dev, sizeof(side->dev), "%s:1", dev);
    check(uct_query_components(&comps, &nc), "uct_query_components");
    for (c = 0; (c < nc) && !found; ++c) {
        cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        check(uct_component_query(comps[c], &cattr), "uct_component_query");
        mds = calloc(cattr.md_resource_count, sizeof(*mds));
        cattr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        cattr.md_resources = mds;
        check(uct_component_query(comps[c], &cattr), "uct_component_query");
        for (m = 0; (m < cattr.md_resource_count) && !found; ++m) {
            check(uct_md_config_read(comps[c], NULL, NULL, &config),
                  "uct_md_config_read");
            if (uct_md_open(comps[c], mds[m].md_name, config, &side->md) !=
                UCS_OK) {
                uct_config_release(config);
                continue;
            }
            uct_config_release(config);
            check(uct_md_query_tl_resources(side->md, &tls, &nt),
                  "uct_md_query_tl_resources");
            for (t = 0; t < nt; ++t) {
                /* "rxe0" names port 1 of a verbs device, "lo" a netdev */
                if (!strcmp(tls[t].tl_name, tl) &&
                    (!strcmp(tls[t].dev_name, side->dev) ||
                     !strcmp(tls[t].dev_name, dev))) {
                    snprintf(side->dev, sizeof(side->dev), "%s",
                             tls[t].dev_name);
                    found = 1;
                }
            }
            uct_release_tl_resource_list(tls);
            if (!found) {
                uct_md_close(side->md);
            }
        }
        free(mds);
    }
    uct_release_component_list(comps);
    if (!found) {
        fprintf(stderr, "uct_msgcost: no transport %s on %s (is the plugin "
                "loaded, e.g. through hipower-run?)\n", tl, side->dev);
        exit(1);
    }
}

static void open_side(side_t *side, const char *tl, const char *dev)
{
    uct_iface_params_t params;
    uct_iface_config_t *config;

    open_md(side, tl, dev);
    check(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                   &side->async), "async context");
    check(uct_worker_create(side->async, UCS_THREAD_MODE_SINGLE,
                            &side->worker), "uct_worker_create");
    check(uct_md_iface_config_read(side->md, tl, NULL, NULL, &config),
          "uct_md_iface_config_read");
    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_CPU_MASK;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = side->dev;
    UCS_CPU_ZERO(&params.cpu_mask);
    check(uct_iface_open(side->md, side->worker, &params, config,
                         &side->iface), "uct_iface_open");
    uct_config_release(config);
    check(uct_iface_query(side->iface, &side->attr), "uct_iface_query");
    side->dev_addr = malloc(side->attr.device_addr_len);
    check(uct_iface_get_device_address(side->iface, side->dev_addr),
          "uct_iface_get_device_address");
    uct_iface_progress_enable(side->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static ucs_status_t hello_handler(void *arg, void *data, size_t length,
                                  unsigned flags)
{
    ++hellos;
    return UCS_OK;
}

static double now(void);

/*
 * An endpoint connected to an interface (hipower's handshake) is up once
 * the peer answered, which it does from its progress: one message sent
 * with both sides progressing, before anything is measured (the measured
 * steps progress B only after A is done, or only when A waits)
 */
static void connect_wait(void)
{
    double deadline = now() + WAIT_LIMIT_S;
    ucs_status_t status;

    while ((status = uct_ep_am_short(side_a.ep, HELLO_ID, 0, NULL, 0)) ==
           UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(side_a.worker);
        uct_worker_progress(side_b.worker);
        if (now() > deadline) {
            die("connecting to the interface", UCS_ERR_TIMED_OUT);
        }
    }
    check(status, "hello");
    while (hellos == 0) {
        uct_worker_progress(side_a.worker);
        uct_worker_progress(side_b.worker);
        if (now() > deadline) {
            die("the first message", UCS_ERR_TIMED_OUT);
        }
    }
}

/* A's endpoint to B, and B's to A (connect-to-ep transports need both) */
static void connect_sides(void)
{
    uct_ep_params_t params;
    uct_iface_addr_t *iface_b;
    void *addr_a, *addr_b;

    if (side_a.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        iface_b = malloc(side_b.attr.iface_addr_len);
        check(uct_iface_get_address(side_b.iface, iface_b), "iface address");
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = side_a.iface;
        params.dev_addr   = side_b.dev_addr;
        params.iface_addr = iface_b;
        check(uct_ep_create(&params, &side_a.ep), "uct_ep_create");
        free(iface_b);
        connect_wait();
        return;
    }

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_a.iface;
    check(uct_ep_create(&params, &side_a.ep), "uct_ep_create");
    params.iface      = side_b.iface;
    check(uct_ep_create(&params, &side_b.ep), "uct_ep_create");
    addr_a = malloc(side_a.attr.ep_addr_len);
    addr_b = malloc(side_b.attr.ep_addr_len);
    check(uct_ep_get_address(side_a.ep, addr_a), "uct_ep_get_address");
    check(uct_ep_get_address(side_b.ep, addr_b), "uct_ep_get_address");
    check(uct_ep_connect_to_ep(side_a.ep, side_b.dev_addr, addr_b),
          "uct_ep_connect_to_ep");
    check(uct_ep_connect_to_ep(side_b.ep, side_a.dev_addr, addr_a),
          "uct_ep_connect_to_ep");
    free(addr_a);
    free(addr_b);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Progress until *done (or the message count) is reached; counts idle calls */
static unsigned progress_until(uct_worker_h worker, const unsigned *value,
                               unsigned target, const char *what)
{
    double deadline = now() + WAIT_LIMIT_S;
    unsigned idle   = 0;

    while (*value < target) {
        if (uct_worker_progress(worker) == 0) {
            ++idle;
            if (((idle & 1023) == 0) && (now() > deadline)) {
                fprintf(stderr, "uct_msgcost: %s: no progress for %d s (%u "
                        "of %u)\n", what, WAIT_LIMIT_S, *value, target);
                exit(1);
            }
        }
    }
    return idle;
}

static size_t pack_cb(void *dest, void *arg)
{
    msg_hdr_t *hdr = arg;

    memcpy(dest, hdr, sizeof(*hdr));
    memcpy((char*)dest + sizeof(*hdr), payload, cur_size - sizeof(*hdr));
    return cur_size;
}

/*
 * A was refused: a progress call of A and, under load (-L), one of B,
 * dumped as the receiver's work (A's progress may never be idle while it
 * waits: hipower reads B's bitmap again after each read that found nothing
 * new). Returns whether A's call was idle.
 */
static unsigned progress_a_waiting(void)
{
    unsigned idle = (uct_worker_progress(side_a.worker) == 0);

    if (load_mode) {
        CALLGRIND_DUMP_STATS_AT(cur_tx_name);
        load_rx_idle += (uct_worker_progress(side_b.worker) == 0);
        CALLGRIND_DUMP_STATS_AT(cur_rx_name);
    }
    return idle;
}

static unsigned send_one(msg_hdr_t *hdr)
{
    unsigned idle = 0;
    ucs_status_t status;
    uint64_t header;
    ssize_t len;

    memcpy(&header, hdr, sizeof(header));
    for (;;) {
        if (cur_size <= side_a.attr.cap.am.max_short) {
            status = uct_ep_am_short(side_a.ep, AM_ID, header,
                                     payload, cur_size - sizeof(*hdr));
        } else {
            len    = uct_ep_am_bcopy(side_a.ep, AM_ID, pack_cb, hdr, 0);
            status = (len < 0) ? (ucs_status_t)len : UCS_OK;
        }
        if (status != UCS_ERR_NO_RESOURCE) {
            check(status, "send");
            return idle;
        }
        idle += progress_a_waiting();
    }
}

static unsigned flushed;

static void flush_cb(uct_completion_t *self)
{
    check(self->status, "flush completion");
    flushed = 1;
}

/* One size: ROUNDS x BURST messages; prints the summary line */
static void measure(const char *tag, uint32_t size, unsigned burst,
                    unsigned rounds)
{
    char *tx_name = cur_tx_name, *rx_name = cur_rx_name;
    unsigned tx_idle = 0, rx_idle = 0, i;
    uct_completion_t comp;
    ucs_status_t status;
    msg_hdr_t hdr;

    cur_size = size;
    snprintf(tx_name, sizeof(cur_tx_name), "%stx:%u", tag, size);
    snprintf(rx_name, sizeof(cur_rx_name), "%srx:%u", tag, size);
    load_rx_idle = 0;
    for (cur_round = 0; cur_round < rounds; ++cur_round) {
        received     = 0;
        expect_index = 0;
        flushed      = 0;
        comp.func    = flush_cb;
        comp.count   = 1;
        comp.status  = UCS_OK;

        CALLGRIND_TOGGLE_COLLECT;
        for (i = 0; i < burst; ++i) {
            hdr.round = cur_round;
            hdr.index = i;
            tx_idle  += send_one(&hdr);
        }
        status = uct_ep_flush(side_a.ep, 0, &comp);
        while (load_mode && (status == UCS_ERR_NO_RESOURCE)) {
            /* Accepted messages wait for room at B: B catches up */
            tx_idle += progress_a_waiting();
            status   = uct_ep_flush(side_a.ep, 0, &comp);
        }
        CALLGRIND_TOGGLE_COLLECT;
        if (status == UCS_OK) {
            flushed = 1;
        } else if (status != UCS_INPROGRESS) {
            die("uct_ep_flush", status);
        }

        /* The network's time, not the sender's work */
        usleep(20000);

        CALLGRIND_TOGGLE_COLLECT;
        tx_idle += progress_until(side_a.worker, &flushed, 1, "flush");
        CALLGRIND_TOGGLE_COLLECT;
        CALLGRIND_DUMP_STATS_AT(tx_name);

        CALLGRIND_TOGGLE_COLLECT;
        rx_idle += progress_until(side_b.worker, &received, burst, "receive");
        CALLGRIND_TOGGLE_COLLECT;
        CALLGRIND_DUMP_STATS_AT(rx_name);
    }
    if (*tag == '\0') {
        printf("msgcost size=%u msgs=%u tx_idle=%u rx_idle=%u idle_calls=%u\n",
               size, burst * rounds, tx_idle, rx_idle + load_rx_idle,
               IDLE_CALLS);
    }
}

/* The instructions of one progress call that finds nothing, per side */
static void measure_idle(void)
{
    int i;

    usleep(20000);
    CALLGRIND_TOGGLE_COLLECT;
    for (i = 0; i < IDLE_CALLS; ++i) {
        uct_worker_progress(side_a.worker);
    }
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT("txidle");
    CALLGRIND_TOGGLE_COLLECT;
    for (i = 0; i < IDLE_CALLS; ++i) {
        uct_worker_progress(side_b.worker);
    }
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT("rxidle");
}

static void usage(void)
{
    fprintf(stderr, "usage: uct_msgcost -t TL -a DEV -b DEV [-s SIZE,...] "
            "[-B BURST] [-R ROUNDS] [-L]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *tl = NULL, *dev_a = NULL, *dev_b = NULL;
    char *sizes_arg = "8", *tok;
    uint32_t sizes[MAX_SIZES];
    unsigned burst = 32, rounds = 20, nsizes = 0, i;
    int c;

    while ((c = getopt(argc, argv, "t:a:b:s:B:R:L")) != -1) {
        switch (c) {
        case 't': tl        = optarg; break;
        case 'a': dev_a     = optarg; break;
        case 'b': dev_b     = optarg; break;
        case 's': sizes_arg = optarg; break;
        case 'B': burst     = atoi(optarg); break;
        case 'R': rounds    = atoi(optarg); break;
        case 'L': load_mode = 1; break;
        default:  usage();
        }
    }
    if (!tl || !dev_a || !dev_b || (burst < 1) || (rounds < 1)) {
        usage();
    }
    for (tok = strtok(sizes_arg, ","); tok && (nsizes < MAX_SIZES);
         tok = strtok(NULL, ",")) {
        sizes[nsizes] = atoi(tok);
        if ((sizes[nsizes] < sizeof(msg_hdr_t)) ||
            (sizes[nsizes] > sizeof(payload))) {
            fprintf(stderr, "uct_msgcost: size %s out of range (%zu..%zu)\n",
                    tok, sizeof(msg_hdr_t), sizeof(payload));
            return 2;
        }
        ++nsizes;
    }
    memset(payload, 0xa5, sizeof(payload));

    open_side(&side_a, tl, dev_a);
    open_side(&side_b, tl, dev_b);
    check(uct_iface_set_am_handler(side_b.iface, AM_ID, am_handler, NULL, 0),
          "uct_iface_set_am_handler");
    check(uct_iface_set_am_handler(side_b.iface, HELLO_ID, hello_handler,
                                   NULL, 0), "uct_iface_set_am_handler");
    connect_sides();

    for (i = 0; i < nsizes; ++i) {
        if ((sizes[i] > side_a.attr.cap.am.max_bcopy) &&
            (sizes[i] > side_a.attr.cap.am.max_short)) {
            fprintf(stderr, "uct_msgcost: %s sends at most %zu bytes per "
                    "message, not %u\n", tl, side_a.attr.cap.am.max_bcopy,
                    sizes[i]);
            return 1;
        }
        /* A round dumped as "warm-" first: connection and first-use costs */
        measure("warm-", sizes[i], burst, 1);
        measure("", sizes[i], burst, rounds);
    }
    measure_idle();

    if (side_b.ep != NULL) {
        uct_ep_destroy(side_b.ep);
    }
    uct_ep_destroy(side_a.ep);
    for (i = 0; i < 2; ++i) {
        side_t *s = i ? &side_b : &side_a;
        uct_iface_close(s->iface);
        uct_worker_destroy(s->worker);
        ucs_async_context_destroy(s->async);
        uct_md_close(s->md);
        free(s->dev_addr);
    }
    return 0;
}
