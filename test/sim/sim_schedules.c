/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * Random schedules of the transport on the simulated device, each one
 * drawn from a seed and checked by an oracle (docs/sim.md, "Schedules").
 *
 * One schedule: three hipower interfaces (on sim0, sim1 and sim0 again)
 * opened with settings the seed picks (notification mode, slot size and
 * count, a shared pool too small for every endpoint, idle time, grant
 * timeout, queue lengths, signaling), then a few hundred operations the
 * seed picks: connections made and destroyed (churn over reused slots),
 * bursts of checksummed active messages both ways (short, bcopy, zcopy,
 * and the pending queue when there is no room) with RMA operations and
 * atomics between them (puts, gets, add, fetch-add, compare-and-swap into
 * a region per stream at its receiver), flushes, progress of one
 * interface, device steps, descriptors held and released, the clock moved
 * on, and faults: a QP sent to error, an interface that stops calling
 * progress for longer than the deadlines, a hostile peer writing into
 * whatever the receiver let it reach. The device's steps, the placement of
 * writes and the transport's clock (virtual: HIPOWER_SIM_CLOCK=virtual)
 * all come from the seed, so a seed replays its schedule.
 *
 * The oracle, checked as things happen:
 *  - each message is delivered at most once, in order, intact, on the
 *    interface it was sent to, from a connection that sent it, and never
 *    after the receiving endpoint was destroyed (stale frames);
 *  - when a message is delivered, what the RMA operations its stream
 *    accepted before it wrote is in the region, byte for byte; gets and
 *    fetching atomics return what the operations before them left, and
 *    after the final flush the region is what all of them left;
 *  - a message that was accepted (the send returned OK) on a connection
 *    that no fault, hostile peer or close touched is delivered: at the end,
 *    first with the senders silent (delivery never depends on the sender),
 *    then with everyone progressing, within a bound of progress calls;
 *  - an endpoint fails only if its connection met a fault, a stopped or
 *    hostile peer, or its peer's endpoint went;
 *  - nothing a hostile peer writes shows on another connection;
 *  - at the end every flush completes, and once every endpoint is
 *    destroyed each interface's shared pool has every slot back; the
 *    device saw no local protection error and no CQ overrun.
 * A failure prints the seed, the operation and the command that replays
 * it with a trace.
 *
 * HIPOWER_SCHED_FIRST (1), HIPOWER_SCHED_COUNT (100): the seeds to run;
 * HIPOWER_SCHED_OPS (300): operations per schedule; HIPOWER_SCHED_MODE
 * (any): self, push, pull or any; HIPOWER_SCHED_FAULTS (1): 0 leaves
 * faults and hostile peers out; HIPOWER_SCHED_RMA (1): 0 leaves RMA and
 * atomics out; HIPOWER_SCHED_TRACE (0): 1 prints every operation, 2 every
 * message too. The first failure ends the run (the transport's state after
 * it is not worth going on with).
 */
#define _GNU_SOURCE
#include "simdev.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include "hipower_iface.h"
#include "hipower_ep.h"

#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define NUM_SIDES        3
#define MAX_CONNS        48
#define ZBUFS            8
#define HELD_MAX         32
#define MSG_MIN          28
/* Each stream's RMA operations write, read and add into a region of this
 * many bytes at its receiver; the atomics work on its last word */
#define RMA_REGION       256
#define RMA_WORD         (RMA_REGION - 8)
/* RMA operations with a completion outstanding, per side */
#define RMA_OPS          8
#define MSG_MAX          8192
#define AM_ID            3
/* Progress rounds the end of a schedule may take to deliver everything */
#define SETTLE_ROUNDS    200000

/* Every message starts so: who sent it where, and a checksum of the rest */
typedef struct {
    uint32_t conn;
    uint32_t seq;
    uint32_t length;
    uint32_t checksum;
    uint32_t dir;
    uint32_t schedule;
    /* RMA operations the sender's stream had accepted before this
     * message: what they wrote must be in the stream's region at the
     * receiver when it is delivered (operations on an endpoint leave in
     * the order they were called) */
    uint32_t rma_ops;
} sched_msg_t;

/* An RMA operation whose completion is outstanding: what it must find */
typedef struct {
    int                   busy;
    int                   conn;
    int                   dir;
    const char            *what;
    uint32_t              offset;
    uint32_t              length;
    uint32_t              op_index;     /* Its number in the stream */
    uint64_t              result;       /* A fetching atomic's */
    uint64_t              expect_word;
    uint8_t               expect[RMA_REGION];
    uint8_t               *buf;         /* Registered: zcopy source, get
                                           destination */
    uct_mem_h             memh;
    uct_completion_t      comp;
} sched_rma_op_t;

typedef struct {
    uct_md_h              md;
    uct_iface_attr_t      attr;
} sched_dev_t;

typedef struct {
    int                   index;
    int                   dev;          /* sim device index */
    ucs_async_context_t   *async;
    uct_worker_h          worker;
    uct_iface_h           iface;
    uct_iface_attr_t      attr;
    uct_device_addr_t     *dev_addr;
    int                   stopped;      /* Ops left before it progresses */
    uint64_t              last_progress_ns;
    int                   tainted;      /* A hostile peer wrote to it */
    /* A port or device event it has not progressed over yet: it fails
     * every endpoint it has then, new ones too */
    int                   event_pending;
    void                  *held[HELD_MAX];
    int                   num_held;
    struct {
        void              *buf;
        uct_mem_h         memh;
        uct_completion_t  comp;
        int               busy;
    } zbufs[ZBUFS];
    /* The regions its peers' RMA operations reach: one of RMA_REGION
     * bytes per connection and direction, registered, and its key */
    uint8_t               *rma_buf;
    uct_mem_h             rma_memh;
    uct_rkey_bundle_t     rma_rkey;
    sched_rma_op_t        rma_ops[RMA_OPS];
} sched_side_t;

/* One direction of a connection: sent on ep[dir], received at the other
 * side */
typedef struct {
    uint32_t              sent;        /* Accepted by the transport */
    uint32_t              delivered;   /* Next expected at the receiver */
    int                   pending;     /* A request in the pending queue */
    uct_pending_req_t     req;
    int                   flushing;
    int                   flushed;     /* The last flush ended (OK) */
    uint32_t              flush_rma;   /* RMA operations before it */
    uct_completion_t      flush_comp;
    /* RMA operations accepted, what they leave in the region at the
     * receiver, and which one (1 + its number) last wrote each byte */
    uint32_t              rma_ops;
    uint8_t               shadow[RMA_REGION];
    uint32_t              writer[RMA_REGION];
} sched_stream_t;

typedef struct {
    int                   used;
    int                   side[2];      /* ep[i] lives on side[i] */
    uct_ep_h              ep[2];        /* NULL once destroyed */
    int                   destroyed[2];
    int                   failed[2];    /* Its error handler was called */
    /* Why this connection may lose messages or fail: a fault, a stopped
     * or hostile side, a close */
    int                   excused;
    int                   hostile;      /* Messages may be anything */
    sched_stream_t        stream[2];    /* [dir]: ep[dir] -> side[!dir] */
    /* 1 + the tx epoch of ep[dir]'s last run seen past its sequence
     * restart, and resting at it (0: none) */
    uint64_t              restarted[2];
    uint64_t              at_period[2];
} sched_conn_t;

static struct {
    uint64_t              seed;
    unsigned              op;           /* Current operation */
    const char            *op_name;
    uint64_t              rng;
    int                   trace;
    int                   faults;
    uint64_t              grant_timeout_ns;
    int                   shared_pool;
    uint64_t              epoch_origin; /* Of this schedule's connections */
    uint32_t              seq_before;   /* Runs start this many messages
                                           before their period (0: at 0) */
    int                   sender_free;  /* Delivery needs no sender call */
    int                   rma;          /* Streams send RMA and atomics */
    uct_component_h       comp;
    /* A peer waiting for a run of the shared pool is served: runs come
     * back from idle endpoints, and only demotion makes them idle */
    int                   waiters_served;
    unsigned              fault_pct;    /* Of the ops that may be faults */
    const char            *mode;
    unsigned              ops;
    sched_dev_t           devs[2];
    sched_side_t          sides[NUM_SIDES];
    sched_conn_t          conns[MAX_CONNS];
    int                   num_conns;
    jmp_buf               fail_jmp;
    char                  failure[512];
    /* Totals over all schedules */
    uint64_t              msgs_sent, msgs_delivered, conns_made, faults_done,
                          stops, scribbles, pending_adds, garbage,
                          device_events, epoch_wraps,
                          errors_reported, runs_restarted, runs_at_period,
                          rnr_naks, rnr_naks_honest, bundles, bundled,
                          fill_batches, rma_sent, rma_checked, am_rma_checked,
                          flush_rma_checked;
    uint8_t               msg_buf[MSG_MAX];
    double                slowest_sec;
    uint64_t              slowest_seed;
} sch;


static uint64_t sched_rand(void)
{
    sch.rng ^= sch.rng >> 12;
    sch.rng ^= sch.rng << 25;
    sch.rng ^= sch.rng >> 27;
    return sch.rng * 0x2545f4914f6cdd1dull;
}

static unsigned sched_below(unsigned n)
{
    return (n == 0) ? 0 : (unsigned)(sched_rand() % n);
}

static void sched_trace(const char *fmt, ...)
{
    va_list ap;

    if (!sch.trace) {
        return;
    }
    va_start(ap, fmt);
    fprintf(stdout, "  [seed %" PRIu64 " op %u] ", sch.seed, sch.op);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
}

/* With a trace: what each interface's pool and endpoints hold */
static void sched_dump(void)
{
    uct_hipower_iface_t *iface;
    uct_hipower_ep_t *ep;
    int s, c, d;

    for (s = 0; s < NUM_SIDES; ++s) {
        if (sch.sides[s].iface == NULL) {
            continue;
        }
        iface = ucs_derived_of(sch.sides[s].iface, uct_hipower_iface_t);
        printf("  side %d: pool %u of %u slots free, %u waiting, %u runless,"
               " %u held descriptors, clock %.3f s%s\n", s,
               iface->arena.slots.free_slots, iface->arena.slots.total,
               iface->pool.num_waiting, iface->pool.num_runless,
               sch.sides[s].num_held, ucs_time_to_sec(iface->clock.now),
               (sch.sides[s].stopped == INT_MAX) ? ", stopped for ever" :
               sch.sides[s].stopped ? ", stopped" : "");
        ucs_list_for_each(ep, &iface->ep_list, list) {
            for (c = 0, d = -1; c < sch.num_conns; ++c) {
                for (d = 0; d < 2; ++d) {
                    if (sch.conns[c].ep[d] == &ep->super.super) {
                        goto found;
                    }
                }
            }
            c = -1;
found:
            printf("    connection %d: flags 0x%" PRIx64 ", run of %u slots "
                   "(head %u held %u), grant of %u out (deadline %.3f s), "
                   "tx msgs %" PRIu64 "; tx run of %u slots (%u free), "
                   "%u requests out (%u unsignaled), bundle of %u, "
                   "pending %s\n", c,
                   ep->flags.all, ep->rx.ring.num_slots,
                   ep->rx.ring.head, ep->rx.ring.held, ep->rx.granted.count,
                   (ep->flags.all & UCT_HIPOWER_EP_FLAG_GRANT_OUT) ?
                   ucs_time_to_sec(ep->rx.grant_deadline) : 0.0, ep->frame.msgs,
                   ep->tx.ring.num_slots, hipower_tx_ring_free(&ep->tx.ring),
                   hipower_txq_outstanding(&ep->txqp.txq),
                   ep->txqp.txq.unsignaled,
                   (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) ?
                   ep->tx.bundle.frame.count : 0,
                   ucs_queue_is_empty(&ep->pending_q) ? "none" : "yes");
            if (c >= 0) {
                printf("      its stream: %u accepted, %u delivered, %u RMA "
                       "operations;%s%s%s\n", sch.conns[c].stream[d].sent,
                       sch.conns[c].stream[d].delivered,
                       sch.conns[c].stream[d].rma_ops,
                       sch.conns[c].excused ? " excused" : "",
                       sch.conns[c].failed[d] ? " failed" : "",
                       sch.conns[c].stream[d].flushing ? " flushing" : "");
            }
        }
    }
}

/* The oracle said no: the schedule ends here */
static void sched_fail(const char *fmt, ...)
{
    va_list ap;
    int len;

    len = snprintf(sch.failure, sizeof(sch.failure), "op %u (%s): ", sch.op,
                   sch.op_name ? sch.op_name : "-");
    va_start(ap, fmt);
    vsnprintf(sch.failure + len, sizeof(sch.failure) - len, fmt, ap);
    va_end(ap);
    if (sch.trace) {
        sched_dump();
    }
    longjmp(sch.fail_jmp, 1);
}

static uint32_t sched_checksum(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    while (n-- > 0) {
        h = (h ^ *p++) * 16777619u;
    }
    return h;
}

static ucs_status_t sched_config(uct_iface_config_t *config,
                                 const char *name, const char *value)
{
    char full_name[128];
    ucs_status_t status;

    /* UCX >= 1.18 matches only the prefixed name, 1.13 the bare one */
    snprintf(full_name, sizeof(full_name), "HIPOWER_%s", name);
    status = uct_config_modify(config, full_name, value);
    if (status == UCS_ERR_NO_ELEM) {
        status = uct_config_modify(config, name, value);
    }
    if (status != UCS_OK) {
        fprintf(stderr, "hipower-sched: cannot set %s=%s: %s\n", name, value,
                ucs_status_string(status));
        exit(2);
    }
    return status;
}

static sched_conn_t *sched_conn_of(int side, uct_ep_h ep, int *dir)
{
    int c, d;

    for (c = 0; c < sch.num_conns; ++c) {
        for (d = 0; d < 2; ++d) {
            if ((sch.conns[c].ep[d] == ep) && (sch.conns[c].side[d] == side) &&
                (ep != NULL)) {
                *dir = d;
                return &sch.conns[c];
            }
        }
    }
    return NULL;
}


static int sched_stream_open(sched_conn_t *conn, int dir)
{
    return conn->used && (conn->ep[dir] != NULL) && !conn->failed[dir] &&
           !conn->destroyed[!dir];
}

/* The region at side[!dir] that the RMA operations of @a dir write */
static uint8_t *sched_region(sched_conn_t *conn, int dir)
{
    return sch.sides[conn->side[!dir]].rma_buf +
           ((size_t)(conn - sch.conns) * 2 + dir) * RMA_REGION;
}

/* A byte of @a dir's region that one of its first @a ops RMA operations
 * wrote last and that does not hold what it wrote: 1 and the byte in
 * *byte_p, or 0 */
static int sched_region_short(sched_conn_t *conn, int dir, uint32_t ops,
                              uint32_t *byte_p)
{
    const uint8_t *region  = sched_region(conn, dir);
    sched_stream_t *stream = &conn->stream[dir];
    uint32_t i;

    for (i = 0; i < RMA_REGION; ++i) {
        if ((stream->writer[i] != 0) && (stream->writer[i] <= ops) &&
            (region[i] != stream->shadow[i])) {
            *byte_p = i;
            return 1;
        }
    }
    return 0;
}

/* A message is delivered: every byte of its stream's region that an RMA
 * operation accepted before it wrote last holds what that one wrote. (The
 * bytes later ones wrote may hold anything: a later write may land before
 * the receiver gets to the message, on any RC transport.) */
static void sched_check_region(sched_conn_t *conn, int dir,
                               const sched_msg_t *msg)
{
    const uint8_t *region  = sched_region(conn, dir);
    sched_stream_t *stream = &conn->stream[dir];
    uint32_t i;

    if (msg->rma_ops == 0) {
        return;
    }
    if (sched_region_short(conn, dir, msg->rma_ops, &i)) {
        sched_fail("side %d: connection %ld dir %d: message %u is "
                   "delivered before RMA operation %u, accepted before it, "
                   "wrote byte %u of the region (0x%02x, not 0x%02x)",
                   conn->side[!dir], (long)(conn - sch.conns), dir,
                   msg->seq, stream->writer[i] - 1, i, region[i],
                   stream->shadow[i]);
    }
    ++sch.am_rma_checked;
}

/* The first RMA operation still outstanding on an open stream of a
 * connection nothing happened to: with @a conn, one of its @a dir numbered
 * below @a before; else any. NULL if there is none. */
static sched_rma_op_t *sched_rma_outstanding(sched_conn_t *conn, int dir,
                                             uint32_t before)
{
    sched_rma_op_t *op;
    sched_conn_t *c;
    unsigned s, i;

    for (s = 0; s < NUM_SIDES; ++s) {
        for (i = 0; i < RMA_OPS; ++i) {
            op = &sch.sides[s].rma_ops[i];
            c  = &sch.conns[op->conn];
            if (op->busy && !c->excused && sched_stream_open(c, op->dir) &&
                ((conn == NULL) ||
                 ((c == conn) && (op->dir == dir) &&
                  (op->op_index < before)))) {
                return op;
            }
        }
    }
    return NULL;
}

/* A flush of @a dir of @a conn completed: every RMA operation accepted
 * before it completed, and every byte one of them wrote last holds what
 * it wrote (uct.h: a flush completes once every operation issued before
 * it has completed remotely) */
static void sched_check_flushed(sched_conn_t *conn, int dir)
{
    sched_stream_t *stream = &conn->stream[dir];
    const uint8_t *region  = sched_region(conn, dir);
    sched_rma_op_t *op;
    uint32_t b;

    if (conn->excused || conn->failed[dir] || conn->hostile) {
        return;
    }
    op = sched_rma_outstanding(conn, dir, stream->flush_rma);
    if (op != NULL) {
        sched_fail("side %d: connection %ld dir %d: a flush completed before "
                   "%s %u, accepted before it", conn->side[dir],
                   (long)(conn - sch.conns), dir, op->what, op->op_index);
    }
    if (sched_region_short(conn, dir, stream->flush_rma, &b)) {
        sched_fail("side %d: connection %ld dir %d: a flush completed "
                   "before RMA operation %u, accepted before it, wrote byte "
                   "%u of the region (0x%02x, not 0x%02x)", conn->side[dir],
                   (long)(conn - sch.conns), dir, stream->writer[b] - 1, b,
                   region[b], stream->shadow[b]);
    }
    ++sch.flush_rma_checked;
}


/* The receiving side */

static int sched_message_ok(int side, const void *data, size_t length,
                            const char **why, sched_conn_t **conn_p,
                            const sched_msg_t **msg_p)
{
    const sched_msg_t *msg = data;
    sched_conn_t *conn;

    *conn_p = NULL;
    *msg_p  = msg;
    if (length < sizeof(*msg)) {
        *why = "shorter than a header";
        return 0;
    }
    if ((msg->length != length) ||
        (msg->checksum != sched_checksum((const uint8_t*)(msg + 1),
                                         length - sizeof(*msg)))) {
        *why = "corrupt (length or checksum)";
        return 0;
    }
    if ((msg->schedule != (uint32_t)sch.seed) ||
        (msg->conn >= (uint32_t)sch.num_conns) || (msg->dir > 1)) {
        *why = "from no connection of this schedule";
        return 0;
    }
    conn = &sch.conns[msg->conn];
    if (conn->side[!msg->dir] != side) {
        *why = "sent to another interface";
        return 0;
    }
    *conn_p = conn;
    return 1;
}

static ucs_status_t sched_am_handler(void *arg, void *data, size_t length,
                                     unsigned flags)
{
    int side = (int)(uintptr_t)arg;
    const sched_msg_t *msg;
    sched_stream_t *stream;
    sched_conn_t *conn;
    const char *why;

    if (!sched_message_ok(side, data, length, &why, &conn, &msg)) {
        if (sch.sides[side].tainted) {
            /* A hostile peer's doing, on its own connection: it may write
             * anything into its own slots */
            ++sch.garbage;
            return UCS_OK;
        }
        sched_fail("side %d delivered a message %s (length %zu)", side, why,
                   length);
    }
    if (conn->hostile) {
        return UCS_OK;
    }

    stream = &conn->stream[msg->dir];
    if (sch.sides[side].tainted &&
        (conn->destroyed[!msg->dir] || (msg->seq != stream->delivered) ||
         (msg->seq >= stream->sent))) {
        /* Made by a hostile peer on its own connection: its run may hold
         * old frames of this one (a run is reused), and it may rewrite
         * them into a frame that looks like this connection's */
        ++sch.garbage;
        return UCS_OK;
    }
    if (conn->destroyed[!msg->dir]) {
        sched_fail("side %d delivered message %u of connection %u after its "
                   "endpoint was destroyed (a stale frame)", side, msg->seq,
                   msg->conn);
    }
    if (msg->seq != stream->delivered) {
        sched_fail("side %d: connection %u dir %u delivered seq %u, "
                   "expected %u (sent %u)", side, msg->conn, msg->dir,
                   msg->seq, stream->delivered, stream->sent);
    }
    if (msg->seq >= stream->sent) {
        sched_fail("side %d: connection %u dir %u delivered seq %u that was "
                   "never accepted", side, msg->conn, msg->dir, msg->seq);
    }
    if (sch.rma) {
        sched_check_region(conn, (int)msg->dir, msg);
    }
    ++stream->delivered;
    ++sch.msgs_delivered;

    if ((flags & UCT_CB_PARAM_FLAG_DESC) &&
        (sch.sides[side].num_held < HELD_MAX) && (sched_below(8) == 0)) {
        sch.sides[side].held[sch.sides[side].num_held++] = data;
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

static void sched_release_held(sched_side_t *side, int keep)
{
    const sched_msg_t *msg;
    sched_conn_t *conn;
    const char *why;
    void *data;

    while (side->num_held > keep) {
        data = side->held[--side->num_held];
        msg  = data;
        if (!side->tainted &&
            !sched_message_ok(side->index, data, msg->length, &why, &conn,
                              &msg)) {
            sched_fail("side %d: a held descriptor changed: %s", side->index,
                       why);
        }
        uct_iface_release_desc(data);
    }
}

static ucs_status_t sched_err_handler(void *arg, uct_ep_h ep,
                                      ucs_status_t status)
{
    int side = (int)(uintptr_t)arg, dir;
    sched_conn_t *conn = sched_conn_of(side, ep, &dir);

    ++sch.errors_reported;
    if (conn == NULL) {
        sched_fail("side %d: error handler for an endpoint it does not have "
                   "(%s)", side, ucs_status_string(status));
    }
    sched_trace("side %d: connection %ld endpoint failed: %s", side,
                (long)(conn - sch.conns), ucs_status_string(status));
    if (!conn->excused) {
        sched_fail("side %d: connection %ld failed (%s) though nothing "
                   "happened to it or its peer", side,
                   (long)(conn - sch.conns), ucs_status_string(status));
    }
    conn->failed[dir] = 1;
    return UCS_OK;
}


/* Interfaces */

static const char *sched_pick(const char *const *values, unsigned n)
{
    return values[sched_below(n)];
}

#define SCHED_PICK(...) \
    ({ static const char *const _v[] = { __VA_ARGS__ }; \
       sched_pick(_v, sizeof(_v) / sizeof(_v[0])); })

/* The regions a side's peers reach, and its own buffers for RMA */
static void sched_rma_open(sched_side_t *side)
{
    uct_md_h md = sch.devs[side->dev].md;
    uint8_t packed_rkey[256];
    uct_md_attr_t md_attr;
    int i;

    side->rma_buf = calloc(MAX_CONNS * 2, RMA_REGION);
    if ((side->rma_buf == NULL) ||
        (uct_md_query(md, &md_attr) != UCS_OK) ||
        (md_attr.rkey_packed_size > sizeof(packed_rkey)) ||
        (uct_md_mem_reg(md, side->rma_buf, MAX_CONNS * 2 * RMA_REGION,
                        UCT_MD_MEM_ACCESS_ALL, &side->rma_memh) != UCS_OK) ||
        (uct_md_mkey_pack(md, side->rma_memh, packed_rkey) != UCS_OK) ||
        (uct_rkey_unpack(sch.comp, packed_rkey, &side->rma_rkey) != UCS_OK)) {
        sched_fail("side %d: cannot register the RMA regions", side->index);
    }
    for (i = 0; i < RMA_OPS; ++i) {
        side->rma_ops[i].buf = malloc(RMA_REGION);
        if ((side->rma_ops[i].buf == NULL) ||
            (uct_md_mem_reg(md, side->rma_ops[i].buf, RMA_REGION,
                            UCT_MD_MEM_ACCESS_ALL, &side->rma_ops[i].memh) !=
             UCS_OK)) {
            sched_fail("side %d: cannot register an RMA buffer", side->index);
        }
    }
}

static void sched_rma_close(sched_side_t *side)
{
    uct_md_h md = sch.devs[side->dev].md;
    int i;

    for (i = 0; i < RMA_OPS; ++i) {
        uct_md_mem_dereg(md, side->rma_ops[i].memh);
        free(side->rma_ops[i].buf);
    }
    uct_rkey_release(sch.comp, &side->rma_rkey);
    uct_md_mem_dereg(md, side->rma_memh);
    free(side->rma_buf);
}

static void sched_open_sides(void)
{
    char slots[16], min_slots[16], budget[32];
    const char *slot_size, *mode, *idle, *grant, *txq, *signal, *batch,
               *hold, *shared, *stats, *bundle, *window, *fill;
    static const char *windows[] = {"1", "1", "2", "0"};
    static const struct {
        const char *value;
        uint64_t   ns;
    } grants[] = {{"20ms", 20000000}, {"200ms", 200000000},
                  {"2s", 2000000000}};
    unsigned num_slots, slot_bytes, g, min_run, runs;
    char max_eps[16];
    uct_iface_config_t *config;
    uct_iface_params_t params;
    sched_side_t *side;
    char dev_name[32];
    int s, z;

    /* Epochs from 1, or a few runs below their wraps: run requests carry
     * the low 32 bits, grant records all 64 */
    static const uint64_t origins[] = {1, 1, 0xfffffffdull,
                                       0xfffffffffffffffdull};

    sch.epoch_origin = origins[sched_below(4)];
    hipower_sim_set_epoch_origin(sch.epoch_origin);

    /* One set of settings for all sides: they must agree on the mode */
    mode      = strcmp(sch.mode, "any") ? sch.mode :
                SCHED_PICK("self", "push", "pull");
    slot_size = SCHED_PICK("1k", "2k", "8k");
    slot_bytes = (slot_size[0] == '1') ? 1024 : (slot_size[0] == '2') ?
                 2048 : 8192;
    /* 4 .. 32, half the time not a power of two: the period's low 16
     * bits are then not 0 (review M1) */
    num_slots = sched_below(2) ? (4u << sched_below(4)) :
                (3 + sched_below(30));
    snprintf(slots, sizeof(slots), "%u", num_slots);
    min_run   = ucs_max(2, num_slots >> sched_below(3));
    snprintf(min_slots, sizeof(min_slots), "%u", min_run);
    /* Room for 2 to 5 full runs: connections outnumber it, so waiters,
     * reclaims and short runs happen */
    runs      = 2 + sched_below(4);
    snprintf(budget, sizeof(budget), "%u", num_slots * slot_bytes * runs);
    /* Endpoints guaranteed a run of MIN_SLOTS: at most what fits */
    snprintf(max_eps, sizeof(max_eps), "%u",
             1 + sched_below(runs * (num_slots / min_run)));
    idle      = SCHED_PICK("100us", "1ms", "10ms", "inf");
    g         = sched_below(3);
    grant     = grants[g].value;
    sch.grant_timeout_ns = grants[g].ns;
    txq       = SCHED_PICK("16", "32", "256");
    signal    = SCHED_PICK("1", "4", "8");
    batch     = SCHED_PICK("1", "1", "4");
    hold      = SCHED_PICK("y", "n");
    shared    = SCHED_PICK("y", "y", "y", "n");
    /* The counters, printed when the interface closes */
    stats     = SCHED_PICK("n", "n", "n", "n", "n", "n", "n", "y");
    /* Bundles (UCX_HIPOWER_BUNDLE) mostly on, as by default */
    bundle    = SCHED_PICK("y", "y", "y", "n");
    if (getenv("HIPOWER_SCHED_BUNDLE") != NULL) {
        bundle = getenv("HIPOWER_SCHED_BUNDLE"); /* Replays: y or n */
    }
    /* The bundle window (1 by default where an async thread is; these
     * schedules poll theirs, where "auto" is 0, so they name it) in three
     * schedules of four: from the seed's hash, not the random stream,
     * which then picks for every schedule what it picked before the
     * window existed */
    window    = windows[(sch.seed * 0x9e3779b97f4a7c15ull) >> 62];
    if (getenv("HIPOWER_SCHED_WINDOW") != NULL) {
        window = getenv("HIPOWER_SCHED_WINDOW"); /* Replays */
    }
    /* Filled slots (on by default) in three schedules of four, from
     * another bit of the seed's hash, as the window */
    fill      = (((sch.seed * 0x9e3779b97f4a7c15ull) >> 60) & 3) ? "y" : "n";
    if (getenv("HIPOWER_SCHED_FILL") != NULL) {
        fill = getenv("HIPOWER_SCHED_FILL"); /* Replays: y or n */
    }
    /* The pool is shared in self mode only: there an endpoint is never
     * refused, elsewhere one finds no run of MIN_SLOTS left */
    sch.shared_pool = !strcmp(mode, "self") && !strcmp(shared, "y");
    /* Pull mode publishes, and ANNOUNCE_BATCH > 1 announces, at the
     * sender's later progress (docs/protocol.md 3): kept for comparison,
     * outside the rule that delivery never depends on the sender */
    sch.sender_free = strcmp(mode, "pull") && !strcmp(batch, "1");
    /* With IDLE_TIME=inf or ANNOUNCE_BATCH > 1 no endpoint goes idle: a
     * pool held at MIN_SLOTS by endpoints that no longer send serves no
     * waiter until one of them is destroyed (docs/sim.md) */
    sch.waiters_served = !sch.shared_pool ||
                         (strcmp(idle, "inf") && !strcmp(batch, "1"));
    /* Sequence numbers from 0, or each run a few messages (up to four
     * laps) before its period: every run restarts them and many switch
     * to the next run around the restart, as an honest stream does once
     * per 2^31 messages */
    switch (sched_below(6)) {
    case 0:
    case 1:
        sch.seq_before = 0;
        break;
    case 2:
    case 3:
        sch.seq_before = 1 + sched_below(3);
        break;
    case 4:
        sch.seq_before = 1 + sched_below(num_slots);
        break;
    default:
        sch.seq_before = 1 + sched_below(4 * num_slots);
        break;
    }
    if (getenv("HIPOWER_SCHED_SEQ_BEFORE") != NULL) {
        /* Replays: the same schedule with runs started elsewhere */
        sch.seq_before = strtoul(getenv("HIPOWER_SCHED_SEQ_BEFORE"), NULL, 0);
    }
    hipower_sim_set_seq_origin(sch.seq_before);
    sched_trace("settings: NOTIFY=%s SLOT_SIZE=%s SLOTS=%s MIN_SLOTS=%s "
                "MEM_BUDGET=%s MAX_EPS=%s IDLE_TIME=%s GRANT_TIMEOUT=%s TX_QUEUE_LEN=%s "
                "SIGNAL_INTERVAL=%s ANNOUNCE_BATCH=%s HOLD_SLOTS=%s "
                "SHARED_POOL=%s BUNDLE=%s BUNDLE_WINDOW=%s BUNDLE_FILL=%s, "
                "epochs from 0x%" PRIx64
                ", runs start %u messages before their period", mode, slot_size,
                slots, min_slots, budget,
                max_eps, idle, grant, txq, signal, batch, hold, shared,
                bundle, window, fill, sch.epoch_origin, sch.seq_before);

    for (s = 0; s < NUM_SIDES; ++s) {
        side        = &sch.sides[s];
        memset(side, 0, sizeof(*side));
        side->index = s;
        side->last_progress_ns = hipower_sim_now_ns();
        side->dev   = (s == 1) ? 1 : 0;
        snprintf(dev_name, sizeof(dev_name), "sim%d:1", side->dev);

        if (ucs_async_context_create(UCS_ASYNC_MODE_POLL, &side->async) !=
            UCS_OK ||
            uct_worker_create(side->async, UCS_THREAD_MODE_SINGLE,
                              &side->worker) != UCS_OK ||
            uct_md_iface_config_read(sch.devs[side->dev].md, "hipower", NULL,
                                     NULL, &config) != UCS_OK) {
            sched_fail("side %d: cannot create a worker", s);
        }
        sched_config(config, "NOTIFY", mode);
        sched_config(config, "SLOT_SIZE", slot_size);
        sched_config(config, "SLOTS", slots);
        sched_config(config, "MIN_SLOTS", min_slots);
        sched_config(config, "MEM_BUDGET", budget);
        sched_config(config, "MAX_EPS", max_eps);
        sched_config(config, "IDLE_TIME", idle);
        sched_config(config, "GRANT_TIMEOUT", grant);
        sched_config(config, "TX_QUEUE_LEN", txq);
        sched_config(config, "SIGNAL_INTERVAL", signal);
        sched_config(config, "ANNOUNCE_BATCH", batch);
        sched_config(config, "HOLD_SLOTS", hold);
        sched_config(config, "SHARED_POOL", shared);
        sched_config(config, "BUNDLE", bundle);
        sched_config(config, "BUNDLE_WINDOW", window);
        sched_config(config, "BUNDLE_FILL", fill);
        sched_config(config, "STATS", stats);
        /* Retries end in virtual milliseconds, not seconds */
        sched_config(config, "TIMEOUT", "1ms");

        memset(&params, 0, sizeof(params));
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE   |
                                      UCT_IFACE_PARAM_FIELD_DEVICE      |
                                      UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = "hipower";
        params.mode.device.dev_name = dev_name;
        params.rx_headroom          = 0;
        params.err_handler          = sched_err_handler;
        params.err_handler_arg      = (void*)(uintptr_t)s;
        params.err_handler_flags    = 0;
        if (uct_iface_open(sch.devs[side->dev].md, side->worker, &params,
                           config, &side->iface) != UCS_OK) {
            uct_config_release(config);
            sched_fail("side %d: uct_iface_open() failed", s);
        }
        uct_config_release(config);
        uct_iface_query(side->iface, &side->attr);
        side->dev_addr = malloc(side->attr.device_addr_len);
        uct_iface_get_device_address(side->iface, side->dev_addr);
        uct_iface_set_am_handler(side->iface, AM_ID, sched_am_handler,
                                 (void*)(uintptr_t)s, 0);
        uct_iface_progress_enable(side->iface,
                                  UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        for (z = 0; z < ZBUFS; ++z) {
            side->zbufs[z].buf = malloc(MSG_MAX);
            if (uct_md_mem_reg(sch.devs[side->dev].md, side->zbufs[z].buf,
                               MSG_MAX, UCT_MD_MEM_ACCESS_ALL,
                               &side->zbufs[z].memh) != UCS_OK) {
                sched_fail("side %d: cannot register a zcopy buffer", s);
            }
        }
        sched_rma_open(side);
    }
}

static void sched_progress(sched_side_t *side, unsigned count)
{
    side->last_progress_ns = hipower_sim_now_ns();
    while (count-- > 0) {
        uct_worker_progress(side->worker);
    }
    side->event_pending = 0;
}


/* Connections and messages */

static void sched_connect(void)
{
    sched_conn_t *conn;
    uct_ep_params_t params;
    ucs_status_t status;
    void *addr[2];
    int d, x, y;

    if (sch.num_conns == MAX_CONNS) {
        return;
    }
    x = sched_below(NUM_SIDES);
    y = (x + 1 + sched_below(NUM_SIDES - 1)) % NUM_SIDES;
    conn = &sch.conns[sch.num_conns];
    memset(conn, 0, sizeof(*conn));
    conn->side[0] = x;
    conn->side[1] = y;
    for (d = 0; d < 2; ++d) {
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
        params.iface      = sch.sides[conn->side[d]].iface;
        status            = uct_ep_create(&params, &conn->ep[d]);
        if ((status == UCS_ERR_NO_MEMORY) && !sch.shared_pool) {
            /* Without the shared pool the budget bounds the endpoints */
            sched_trace("side %d has no run of MIN_SLOTS left",
                        conn->side[d]);
            if (d == 1) {
                uct_ep_destroy(conn->ep[0]);
                free(addr[0]);
            }
            return;
        } else if (status != UCS_OK) {
            sched_fail("uct_ep_create() on side %d failed: %s",
                       conn->side[d], ucs_status_string(status));
        }
        addr[d] = malloc(sch.sides[conn->side[d]].attr.ep_addr_len);
        uct_ep_get_address(conn->ep[d], addr[d]);
    }
    for (d = 0; d < 2; ++d) {
        if (uct_ep_connect_to_ep(conn->ep[d],
                                 sch.sides[conn->side[!d]].dev_addr,
                                 addr[!d]) != UCS_OK) {
            sched_fail("uct_ep_connect_to_ep() on side %d failed",
                       conn->side[d]);
        }
    }
    free(addr[0]);
    free(addr[1]);
    conn->used = 1;

    /* A stopped side's connections may fail (deadlines run out) */
    conn->excused = sch.sides[x].stopped || sch.sides[y].stopped ||
                    sch.sides[x].event_pending || sch.sides[y].event_pending;
    ++sch.num_conns;
    ++sch.conns_made;
    sched_trace("connection %d: side %d <-> side %d", sch.num_conns - 1, x,
                y);
}

static void sched_zcomp(uct_completion_t *comp)
{
    /* ucs_container_of would need the index: the busy flag is cleared by
     * whoever finds its completion called (count 0) */
    (void)comp;
}

static size_t sched_pack(void *dest, void *arg)
{
    size_t length = *(size_t*)arg;

    memcpy(dest, sch.msg_buf, length);
    return length;
}

/* One message on @a dir of @a conn; UCS_ERR_NO_RESOURCE if no room */
static ucs_status_t sched_send(sched_conn_t *conn, int dir)
{
    sched_side_t *side     = &sch.sides[conn->side[dir]];
    sched_stream_t *stream = &conn->stream[dir];
    sched_msg_t *msg       = (sched_msg_t*)sch.msg_buf;
    size_t length, max, i;
    ucs_status_t status;
    unsigned layout;
    uct_iov_t iov;
    ssize_t packed;
    int z;

    layout = sched_below(4);
    max    = (layout == 0) ? side->attr.cap.am.max_short :
             (layout == 3) ? side->attr.cap.am.max_zcopy :
             side->attr.cap.am.max_bcopy;
    max    = ucs_min(max, MSG_MAX);
    if (max < MSG_MIN) {
        layout = 1;
        max    = ucs_min(side->attr.cap.am.max_bcopy, MSG_MAX);
    }
    /* Mostly small, sometimes up to the largest the layout takes */
    length = (sched_below(4) == 0) ? MSG_MIN + sched_below(max - MSG_MIN + 1) :
             MSG_MIN + sched_below(ucs_min(max, 128) - MSG_MIN + 1);

    msg->conn     = (uint32_t)(conn - sch.conns);
    msg->seq      = stream->sent;
    msg->length   = (uint32_t)length;
    msg->dir      = (uint32_t)dir;
    msg->schedule = (uint32_t)sch.seed;
    msg->rma_ops  = stream->rma_ops;
    for (i = sizeof(*msg); i < length; ++i) {
        sch.msg_buf[i] = (uint8_t)(msg->seq * 31 + i * 7 + msg->conn);
    }
    msg->checksum = sched_checksum(sch.msg_buf + sizeof(*msg),
                                   length - sizeof(*msg));

    switch (layout) {
    case 0:
    case 1:
        if ((layout == 0) && (length <= side->attr.cap.am.max_short)) {
            status = uct_ep_am_short(conn->ep[dir], AM_ID,
                                     *(uint64_t*)sch.msg_buf,
                                     sch.msg_buf + 8, length - 8);
            break;
        }
        /* fall through */
    case 2:
        packed = uct_ep_am_bcopy(conn->ep[dir], AM_ID, sched_pack, &length,
                                 0);
        status = (packed < 0) ? (ucs_status_t)packed : UCS_OK;
        if ((status == UCS_OK) && ((size_t)packed != length)) {
            sched_fail("am_bcopy packed %zd of %zu bytes", packed, length);
        }
        break;
    default:
        for (z = 0; z < ZBUFS; ++z) {
            if (side->zbufs[z].busy && (side->zbufs[z].comp.count == 0)) {
                side->zbufs[z].busy = 0;
            }
            if (!side->zbufs[z].busy) {
                break;
            }
        }
        if ((z == ZBUFS) || (length <= 16)) {
            return UCS_ERR_NO_RESOURCE;
        }
        memcpy(side->zbufs[z].buf, sch.msg_buf + 16, length - 16);
        iov.buffer = side->zbufs[z].buf;
        iov.length = length - 16;
        iov.memh   = side->zbufs[z].memh;
        iov.stride = 0;
        iov.count  = 1;
        side->zbufs[z].comp.func   = sched_zcomp;
        side->zbufs[z].comp.count  = 1;
        side->zbufs[z].comp.status = UCS_OK;
        status = uct_ep_am_zcopy(conn->ep[dir], AM_ID, sch.msg_buf, 16, &iov,
                                 1, 0, &side->zbufs[z].comp);
        if (status == UCS_INPROGRESS) {
            side->zbufs[z].busy = 1;
            status              = UCS_OK;
        }
        break;
    }

    if (status == UCS_OK) {
        if (sch.trace > 1) {
            sched_trace("connection %ld dir %d: message %u (layout %u, %zu "
                        "bytes) after %u RMA operations",
                        (long)(conn - sch.conns), dir, stream->sent, layout,
                        length, stream->rma_ops);
        }
        ++stream->sent;
        ++sch.msgs_sent;
    } else if ((status != UCS_ERR_NO_RESOURCE) &&
               !conn->excused && !conn->failed[dir]) {
        sched_fail("side %d: send on connection %ld failed: %s",
                   conn->side[dir], (long)(conn - sch.conns),
                   ucs_status_string(status));
    }
    return status;
}

/* An RMA operation completed: a get must have read, and a fetching atomic
 * fetched, what the stream's operations before it left */
static void sched_rma_done(sched_rma_op_t *op, ucs_status_t status)
{
    sched_conn_t *conn = &sch.conns[op->conn];
    uint32_t i;

    op->busy = 0;
    if (status != UCS_OK) {
        if (!conn->excused && !conn->failed[op->dir]) {
            sched_fail("side %d: %s %u of connection %d completed with %s "
                       "though nothing happened to it or its peer",
                       conn->side[op->dir], op->what, op->op_index, op->conn,
                       ucs_status_string(status));
        }
        return;
    }
    if (conn->hostile) {
        return;
    }
    if (!strcmp(op->what, "get_bcopy") || !strcmp(op->what, "get_zcopy")) {
        for (i = 0; i < op->length; ++i) {
            if (op->buf[i] != op->expect[i]) {
                sched_fail("side %d: %s %u of connection %d dir %d read byte "
                           "%u of %u at offset %u as 0x%02x, not 0x%02x (what "
                           "the operations before it wrote)",
                           conn->side[op->dir], op->what, op->op_index,
                           op->conn, op->dir, i, op->length, op->offset,
                           op->buf[i], op->expect[i]);
            }
        }
        ++sch.rma_checked;
    } else if (strcmp(op->what, "put_zcopy")) {
        if (op->result != op->expect_word) {
            sched_fail("side %d: %s %u of connection %d dir %d fetched 0x%"
                       PRIx64 ", not 0x%" PRIx64 " (what the operations "
                       "before it left)", conn->side[op->dir], op->what,
                       op->op_index, op->conn, op->dir, op->result,
                       op->expect_word);
        }
        ++sch.rma_checked;
    }
}

static void sched_rma_comp(uct_completion_t *comp)
{
    sched_rma_op_t *op = ucs_container_of(comp, sched_rma_op_t, comp);

    sched_rma_done(op, comp->status);
}

typedef struct {
    const uint8_t         *data;
    size_t                length;
} sched_rma_data_t;

static size_t sched_rma_pack(void *dest, void *arg)
{
    sched_rma_data_t *d = arg;

    memcpy(dest, d->data, d->length);
    return d->length;
}

static void sched_rma_unpack(void *arg, const void *data, size_t length)
{
    memcpy(((sched_rma_op_t*)arg)->buf, data, length);
}

/* The stream's latest RMA operation wrote @a length bytes at @a offset */
static void sched_rma_wrote(sched_stream_t *stream, uint32_t offset,
                            const void *data, uint32_t length)
{
    uint32_t i;

    memcpy(stream->shadow + offset, data, length);
    for (i = 0; i < length; ++i) {
        stream->writer[offset + i] = stream->rma_ops;
    }
}

/*
 * One RMA operation on @a dir of @a conn, between two of its messages: a
 * put (short, bcopy, zcopy) of a few bytes anywhere in the stream's region
 * at the receiver, a get (bcopy, zcopy) of some of it, or a 64-bit atomic
 * (add, fetch-and-add, compare-and-swap) on its last word. The stream's
 * shadow follows what the accepted ones leave there; the messages after
 * them find it in the region (sched_check_region), gets and fetches find
 * it when they complete, and after the flush at the end so does the
 * region, whole.
 */
static void sched_rma(sched_conn_t *conn, int dir)
{
    sched_side_t *side     = &sch.sides[conn->side[dir]];
    sched_side_t *peer     = &sch.sides[conn->side[!dir]];
    sched_stream_t *stream = &conn->stream[dir];
    uint64_t remote        = (uintptr_t)sched_region(conn, dir);
    uct_rkey_t rkey        = peer->rma_rkey.rkey;
    uct_ep_h ep            = conn->ep[dir];
    const uct_iface_attr_t *attr = &side->attr;
    uint8_t data[RMA_REGION];
    sched_rma_data_t packing;
    sched_rma_op_t *op = NULL;
    uint64_t value, word, swap = 0;
    uint32_t offset, length, i;
    ucs_status_t status;
    const char *what;
    uct_iov_t iov;
    ssize_t packed;
    unsigned kind;
    int atomics;

    kind    = sched_below(8);
    atomics = (attr->cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE) &&
              (attr->cap.atomic64.fop_flags & UCS_BIT(UCT_ATOMIC_OP_ADD)) &&
              (attr->cap.atomic64.fop_flags & UCS_BIT(UCT_ATOMIC_OP_CSWAP)) &&
              (attr->cap.atomic64.op_flags & UCS_BIT(UCT_ATOMIC_OP_ADD));
    if ((kind >= 6) && !atomics) {
        kind -= 4;
    }
    /* Mostly a few bytes, sometimes the whole region */
    length  = (sched_below(4) == 0) ? 1 + sched_below(RMA_REGION) :
              1 + sched_below(16);
    offset  = sched_below(RMA_REGION - length + 1);
    value   = sched_rand();
    for (i = 0; i < length; ++i) {
        data[i] = (uint8_t)((value >> ((i % 8) * 8)) ^ i);
    }
    memcpy(&word, stream->shadow + RMA_WORD, sizeof(word));

    if ((kind == 3) || (kind == 4) || (kind == 5) || (kind == 7)) {
        for (i = 0; i < RMA_OPS; ++i) {
            if (!side->rma_ops[i].busy) {
                op = &side->rma_ops[i];
                break;
            }
        }
        if (op == NULL) {
            return; /* As many outstanding as it keeps */
        }
        op->conn        = (int)(conn - sch.conns);
        op->dir         = dir;
        op->offset      = offset;
        op->length      = length;
        op->op_index    = stream->rma_ops;
        op->result      = 0;
        op->expect_word = word;
        memcpy(op->expect, stream->shadow + offset, length);
        memset(op->buf, 0xa5, RMA_REGION);
        op->comp.func   = sched_rma_comp;
        op->comp.count  = 1;
        op->comp.status = UCS_OK;
        op->busy        = 1;
        iov.buffer      = op->buf;
        iov.length      = length;
        iov.memh        = op->memh;
        iov.stride      = 0;
        iov.count       = 1;
    }

    switch (kind) {
    case 0:
    case 1:
        if ((attr->cap.flags & UCT_IFACE_FLAG_PUT_SHORT) &&
            (length <= attr->cap.put.max_short)) {
            what   = "put_short";
            status = uct_ep_put_short(ep, data, length, remote + offset, rkey);
            break;
        }
        /* fall through */
    case 2:
        what           = "put_bcopy";
        packing.data   = data;
        packing.length = length;
        packed = uct_ep_put_bcopy(ep, sched_rma_pack, &packing,
                                  remote + offset, rkey);
        status = (packed < 0) ? (ucs_status_t)packed : UCS_OK;
        if ((status == UCS_OK) && ((size_t)packed != length)) {
            sched_fail("put_bcopy packed %zd of %u bytes", packed, length);
        }
        break;
    case 3:
        what = "put_zcopy";
        memcpy(op->buf, data, length);
        status = uct_ep_put_zcopy(ep, &iov, 1, remote + offset, rkey,
                                  &op->comp);
        break;
    case 4:
        what   = "get_bcopy";
        status = uct_ep_get_bcopy(ep, sched_rma_unpack, op, length,
                                  remote + offset, rkey, &op->comp);
        break;
    case 5:
        what   = "get_zcopy";
        status = uct_ep_get_zcopy(ep, &iov, 1, remote + offset, rkey,
                                  &op->comp);
        break;
    case 6:
        what   = "atomic_add64";
        status = uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, value,
                                      remote + RMA_WORD, rkey);
        break;
    default:
        if (sched_below(2)) {
            what   = "atomic_fadd64";
            status = uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, value,
                                           &op->result, remote + RMA_WORD,
                                           rkey, &op->comp);
        } else {
            /* Half of them match */
            what   = "atomic_cswap64";
            swap   = value;
            value  = sched_below(2) ? word : word ^ 1;
            status = uct_ep_atomic_cswap64(ep, value, swap, remote + RMA_WORD,
                                           rkey, &op->result, &op->comp);
        }
        break;
    }

    if (op != NULL) {
        op->what = what;
    }
    if ((status != UCS_OK) && (status != UCS_INPROGRESS)) {
        if (op != NULL) {
            op->busy = 0;
        }
        if ((status != UCS_ERR_NO_RESOURCE) && !conn->excused &&
            !conn->failed[dir]) {
            sched_fail("side %d: %s on connection %ld failed: %s",
                       conn->side[dir], what, (long)(conn - sch.conns),
                       ucs_status_string(status));
        }
        return;
    }

    /* Accepted: what it leaves in the region */
    ++stream->rma_ops;
    if (!strncmp(what, "put", 3)) {
        sched_rma_wrote(stream, offset, data, length);
    } else if (!strcmp(what, "atomic_add64") ||
               !strcmp(what, "atomic_fadd64")) {
        word += value;
        sched_rma_wrote(stream, RMA_WORD, &word, sizeof(word));
    } else if (!strcmp(what, "atomic_cswap64") && (word == value)) {
        sched_rma_wrote(stream, RMA_WORD, &swap, sizeof(swap));
    }
    ++sch.rma_sent;
    sched_trace("connection %ld dir %d: %s %u (%u bytes at %u): %s",
                (long)(conn - sch.conns), dir, what, stream->rma_ops - 1,
                length, offset, ucs_status_string(status));
    if ((status == UCS_OK) && (op != NULL)) {
        sched_rma_done(op, UCS_OK);
    }
}

static ucs_status_t sched_pending_cb(uct_pending_req_t *req)
{
    sched_stream_t *stream = ucs_container_of(req, sched_stream_t, req);
    int c, d;

    for (c = 0; c < sch.num_conns; ++c) {
        for (d = 0; d < 2; ++d) {
            if (&sch.conns[c].stream[d] == stream) {
                if (sched_send(&sch.conns[c], d) == UCS_ERR_NO_RESOURCE) {
                    return UCS_ERR_NO_RESOURCE;
                }
                stream->pending = 0;
                return UCS_OK;
            }
        }
    }
    sched_fail("a pending request of no stream was dispatched");
    return UCS_OK;
}

static void sched_purge_cb(uct_pending_req_t *req, void *arg)
{
    ucs_container_of(req, sched_stream_t, req)->pending = 0;
}

static void sched_burst(sched_conn_t *conn, int dir, unsigned count)
{
    sched_stream_t *stream = &conn->stream[dir];
    ucs_status_t status;

    /* Messages of a stream go in order: none while one is pending */
    while ((count-- > 0) && !stream->pending && sched_stream_open(conn, dir)) {
        if (sch.rma && (sched_below(4) == 0)) {
            sched_rma(conn, dir);
            if (!sched_stream_open(conn, dir)) {
                break;
            }
        }
        if (sched_send(conn, dir) != UCS_ERR_NO_RESOURCE) {
            continue;
        }
        if (sched_below(2) == 0) {
            break;
        }
        stream->req.func = sched_pending_cb;
        status = uct_ep_pending_add(conn->ep[dir], &stream->req, 0);
        if (status == UCS_OK) {
            stream->pending = 1;
            ++sch.pending_adds;
        } else if (status != UCS_ERR_BUSY) {
            sched_fail("uct_ep_pending_add() failed: %s",
                       ucs_status_string(status));
        }
        break;
    }
}

static void sched_flush_cb(uct_completion_t *comp)
{
    sched_stream_t *stream = ucs_container_of(comp, sched_stream_t,
                                              flush_comp);
    int c;

    stream->flushing = 0;
    stream->flushed  = (comp->status == UCS_OK);
    for (c = 0; stream->flushed && (c < sch.num_conns); ++c) {
        if (stream == &sch.conns[c].stream[0]) {
            sched_check_flushed(&sch.conns[c], 0);
        } else if (stream == &sch.conns[c].stream[1]) {
            sched_check_flushed(&sch.conns[c], 1);
        }
    }
}

static void sched_flush(sched_conn_t *conn, int dir)
{
    sched_stream_t *stream = &conn->stream[dir];
    ucs_status_t status;

    if (stream->flushing || (conn->ep[dir] == NULL)) {
        return;
    }
    stream->flush_comp.func   = sched_flush_cb;
    stream->flush_comp.count  = 1;
    stream->flush_comp.status = UCS_OK;
    stream->flush_rma         = stream->rma_ops;
    status = uct_ep_flush(conn->ep[dir], 0, &stream->flush_comp);
    stream->flushed = (status == UCS_OK);
    if (status == UCS_OK) {
        sched_check_flushed(conn, dir);
    } else if (status == UCS_INPROGRESS) {
        stream->flushing = 1;
    } else if ((status != UCS_ERR_NO_RESOURCE) && !conn->excused &&
               !conn->failed[dir]) {
        sched_fail("flush on connection %ld failed: %s",
                   (long)(conn - sch.conns), ucs_status_string(status));
    }
}

static void sched_destroy_ep(sched_conn_t *conn, int d)
{
    if (conn->ep[d] == NULL) {
        return;
    }
    if (conn->stream[d].pending) {
        uct_ep_pending_purge(conn->ep[d], sched_purge_cb, NULL);
    }
    /* Its peer may see it go (and report it); messages still in flight
     * either way may be lost, and its operations still outstanding end
     * (canceled) as it goes */
    conn->excused      = 1;
    uct_ep_destroy(conn->ep[d]);
    conn->ep[d]        = NULL;
    conn->destroyed[d] = 1;
    conn->stream[d].flushing = 0;
}

static sched_conn_t *sched_pick_conn(void)
{
    int c, tries;

    for (tries = 0; tries < 8; ++tries) {
        if (sch.num_conns == 0) {
            return NULL;
        }
        c = sched_below(sch.num_conns);
        if (sch.conns[c].used &&
            ((sch.conns[c].ep[0] != NULL) || (sch.conns[c].ep[1] != NULL))) {
            return &sch.conns[c];
        }
    }
    return NULL;
}

static uint32_t sched_ep_qpn(uct_ep_h ep)
{
    return ucs_derived_of(ep, uct_hipower_ep_t)->txqp.qp->qp_num;
}


/*
 * The clock moves on by up to @a ns, but no honest side is made to look
 * stopped: none goes a quarter of the grant timeout without progress (a
 * side that does is a stopped peer, which the "stop" operation makes on
 * purpose and excuses)
 */
static void sched_advance(uint64_t ns)
{
    uint64_t now, limit = sch.grant_timeout_ns / 4;
    unsigned s;

    /* The device works while time passes: it is not slower than the
     * deadlines (what is posted is placed in microseconds, not in a
     * quarter of the grant timeout) */
    hipower_sim_step(256);
    now = hipower_sim_now_ns();

    for (s = 0; s < NUM_SIDES; ++s) {
        if (sch.sides[s].stopped) {
            continue;
        }
        if (now + ns > sch.sides[s].last_progress_ns + limit) {
            ns = (sch.sides[s].last_progress_ns + limit > now) ?
                 sch.sides[s].last_progress_ns + limit - now : 0;
        }
    }
    hipower_sim_advance(ns);
}

/* A side stops calling progress while the others go on, for longer than
 * the deadlines: its connections may fail, no other may */
static void sched_stop(unsigned s)
{
    unsigned i, t;
    int c;

    /* For a while, or for ever (until the schedule ends: it is progressed
     * again only to tear down) */
    sch.sides[s].stopped = (sched_below(3) == 0) ? INT_MAX :
                           20 + sched_below(100);
    for (c = 0; c < sch.num_conns; ++c) {
        if ((sch.conns[c].side[0] == (int)s) ||
            (sch.conns[c].side[1] == (int)s)) {
            sch.conns[c].excused = 1;
        }
    }
    /* 2.5 grant timeouts, in steps of 1/64 of one: the others progress
     * and the device works in each */
    for (i = 0; i < 160; ++i) {
        hipower_sim_advance(sch.grant_timeout_ns / 64);
        for (t = 0; t < NUM_SIDES; ++t) {
            if (!sch.sides[t].stopped) {
                sched_progress(&sch.sides[t], 1 + sched_below(4));
            }
        }
        hipower_sim_step(64);
    }
}

/*
 * An asynchronous event of the device: a QP that broke (its connection may
 * fail), or a port that went down or a device that died (every connection
 * of the interfaces on that device may fail). The device's user reads it
 * in UCX's async thread: the schedule waits until it has, so that the
 * interfaces find it in their next progress as in every replay.
 */
static void sched_device_event(void)
{
    static const enum ibv_event_type qp_events[] = {
        IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR
    };
    static const enum ibv_event_type dev_events[] = {
        IBV_EVENT_PORT_ERR, IBV_EVENT_DEVICE_FATAL, IBV_EVENT_PORT_ACTIVE,
        IBV_EVENT_GID_CHANGE
    };
    uct_hipower_md_t *md;
    enum ibv_event_type type;
    sched_conn_t *conn;
    uint64_t seq, spins;
    int c, d, dev;

    if (sched_below(2) == 0) {
        conn = sched_pick_conn();
        d    = sched_below(2);
        if ((conn == NULL) || (conn->ep[d] == NULL)) {
            return;
        }
        dev  = sch.sides[conn->side[d]].dev;
        type = qp_events[sched_below(3)];
        sched_trace("device event %s on the QP of connection %ld side %d",
                    ibv_event_type_str(type), (long)(conn - sch.conns),
                    conn->side[d]);
        conn->excused = 1;
        md   = ucs_derived_of(sch.devs[dev].md, uct_hipower_md_t);
        seq  = uct_hipower_md_async_seq(&md->async);
        if (hipower_sim_async_event(dev, type, sched_ep_qpn(conn->ep[d])) ==
            0) {
            return;
        }
    } else {
        dev  = sched_below(2);
        type = dev_events[sched_below(4)];
        sched_trace("device event %s on sim%d", ibv_event_type_str(type),
                    dev);
        if ((type == IBV_EVENT_PORT_ERR) || (type == IBV_EVENT_DEVICE_FATAL)) {
            /* Every endpoint of the interfaces on it fails */
            for (c = 0; c < sch.num_conns; ++c) {
                if ((sch.sides[sch.conns[c].side[0]].dev == dev) ||
                    (sch.sides[sch.conns[c].side[1]].dev == dev)) {
                    sch.conns[c].excused = 1;
                }
            }
            for (c = 0; c < NUM_SIDES; ++c) {
                sch.sides[c].event_pending |= (sch.sides[c].dev == dev);
            }
        }
        md   = ucs_derived_of(sch.devs[dev].md, uct_hipower_md_t);
        seq  = uct_hipower_md_async_seq(&md->async);
        if (hipower_sim_async_event(dev, type, 0) == 0) {
            return;
        }
    }
    ++sch.device_events;
    for (spins = 0; uct_hipower_md_async_seq(&md->async) == seq; ++spins) {
        if (spins > 100000000ull) {
            sched_fail("UCX's async thread never read the device event");
        }
        sched_yield();
    }
}

/* One operation of the schedule */
static void sched_step(void)
{
    sched_conn_t *conn;
    sched_side_t *side;
    unsigned kind = sched_below(100), s, d;

    /* Stopped sides count down */
    for (s = 0; s < NUM_SIDES; ++s) {
        if ((sch.sides[s].stopped > 0) && (sch.sides[s].stopped < INT_MAX)) {
            --sch.sides[s].stopped;
        }
    }

    if ((kind < 6) || (sch.num_conns == 0)) {
        sch.op_name = "connect";
        sched_connect();
    } else if (kind < 36) {
        sch.op_name = "send";
        conn = sched_pick_conn();
        d    = sched_below(2);
        if (conn != NULL) {
            sched_trace("send up to burst on connection %ld dir %u",
                        (long)(conn - sch.conns), d);
            sched_burst(conn, d, 1 + sched_below(16));
        }
    } else if (kind < 62) {
        sch.op_name = "progress";
        side        = &sch.sides[sched_below(NUM_SIDES)];
        if (!side->stopped) {
            sched_progress(side, 1 + sched_below(8));
        }
    } else if (kind < 76) {
        sch.op_name = "device";
        hipower_sim_step(1 + sched_below(32));
    } else if (kind < 80) {
        sch.op_name = "flush";
        conn = sched_pick_conn();
        if (conn != NULL) {
            sched_flush(conn, sched_below(2));
        }
    } else if (kind < 84) {
        sch.op_name = "destroy";
        conn = sched_pick_conn();
        if (conn != NULL) {
            d = sched_below(2);
            sched_trace("destroy connection %ld side %d's endpoint",
                        (long)(conn - sch.conns), conn->side[d]);
            sched_destroy_ep(conn, d);
            if (sched_below(2)) {
                sched_destroy_ep(conn, !d);
            }
        }
    } else if (kind < 88) {
        sch.op_name = "release";
        side        = &sch.sides[sched_below(NUM_SIDES)];
        sched_release_held(side, sched_below(side->num_held + 1));
    } else if (kind < 92) {
        sch.op_name = "clock";
        sched_advance(1000ull << sched_below(20)); /* 1 us .. 0.5 s */
    } else if (!sch.faults || (sched_below(100) >= sch.fault_pct)) {
        sch.op_name = "progress";
        sched_progress(&sch.sides[sched_below(NUM_SIDES)], 1);
    } else if (kind < 94) {
        sch.op_name = "qp-error";
        conn = sched_pick_conn();
        d    = sched_below(2);
        if ((conn != NULL) && (conn->ep[d] != NULL)) {
            sched_trace("QP of connection %ld side %d to error",
                        (long)(conn - sch.conns), conn->side[d]);
            conn->excused = 1;
            hipower_sim_fail_qp(sch.sides[conn->side[d]].dev,
                                sched_ep_qpn(conn->ep[d]));
            ++sch.faults_done;
        }
    } else if (kind < 97) {
        sch.op_name = "stop";
        s = sched_below(NUM_SIDES);
        sched_trace("side %u stops progressing", s);
        sched_stop(s);
        ++sch.stops;
    } else if (kind < 98) {
        sch.op_name = "device-event";
        sched_device_event();
    } else {
        sch.op_name = "hostile";
        conn = sched_pick_conn();
        d    = sched_below(2);
        if ((conn != NULL) && (conn->ep[d] != NULL)) {
            /* side[!d] turns hostile and writes to side[d] */
            sched_trace("side %d writes into what connection %ld lets it "
                        "reach of side %d", conn->side[!d],
                        (long)(conn - sch.conns), conn->side[d]);
            if (hipower_sim_scribble(sch.sides[conn->side[d]].dev,
                                     sched_ep_qpn(conn->ep[d])) > 0) {
                conn->excused = conn->hostile = 1;
                sch.sides[conn->side[d]].tainted = 1;
                ++sch.scribbles;
            }
        }
    }
}

/* The shared pool balances: its free slots and every run an endpoint
 * holds or granted make the whole arena, after every operation */
static void sched_check_pool(void)
{
    uct_hipower_iface_t *iface;
    uct_hipower_ep_t *ep;
    uint64_t held;
    int s;

    for (s = 0; s < NUM_SIDES; ++s) {
        iface = ucs_derived_of(sch.sides[s].iface, uct_hipower_iface_t);
        held  = iface->arena.slots.free_slots;
        ucs_list_for_each(ep, &iface->ep_list, list) {
            held += ep->rx.ring.num_slots + ep->rx.granted.count;
        }
        if (iface->config.shared_pool && (held != iface->arena.slots.total)) {
            sched_fail("side %d: the pool does not balance: %u free and "
                       "the endpoints' runs make %" PRIu64 " slots of %u", s,
                       iface->arena.slots.free_slots, held,
                       iface->arena.slots.total);
        }
    }
}

/* Runs whose sender restarted its sequence numbers at the period, and
 * runs whose sender rested exactly at the period (its next message would
 * be sequence 0): where a switch found the review's M1 */
static void sched_note_period(void)
{
    uct_hipower_ep_t *ep;
    sched_conn_t *conn;
    uint32_t n, start;
    int c, d;

    if (sch.seq_before == 0) {
        return;
    }

    for (c = 0; c < sch.num_conns; ++c) {
        conn = &sch.conns[c];
        for (d = 0; d < 2; ++d) {
            if (conn->ep[d] == NULL) {
                continue;
            }
            ep    = ucs_derived_of(conn->ep[d], uct_hipower_ep_t);
            n     = ep->tx.ring.num_slots;
            if (n == 0) {
                continue;
            }
            start = uct_hipower_seq_origin(n);
            if ((ep->tx.ring.head < start) &&
                (conn->restarted[d] != ep->tx.epoch + 1)) {
                conn->restarted[d] = ep->tx.epoch + 1;
                ++sch.runs_restarted;
            }
            if ((ep->tx.ring.head == hipower_ring_seq_period(n)) &&
                (conn->at_period[d] != ep->tx.epoch + 1)) {
                conn->at_period[d] = ep->tx.epoch + 1;
                ++sch.runs_at_period;
            }
        }
    }
}

/* Messages of @a dir of @a conn waiting in its sender's open bundle
 * (UCX_HIPOWER_BUNDLE): the last ones it accepted; they leave at the
 * sender's next progress, flush or arm, not without it */
static uint32_t sched_bundled(sched_conn_t *conn, int dir)
{
    uct_hipower_ep_t *ep;

    if ((conn->ep[dir] == NULL) || conn->destroyed[dir]) {
        return 0;
    }
    ep = ucs_derived_of(conn->ep[dir], uct_hipower_ep_t);
    return (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) ?
           ep->tx.bundle.frame.count : 0;
}

/* A connection nothing happened to that has an accepted message not yet
 * delivered (or, with @a check_pending, a request still pending) to a
 * side not in @a skip_receivers: its number and direction, or -1 when
 * every one is settled. With @a silent_senders, the messages in a silent
 * sender's open bundle are not due (the one exception to delivery without
 * the sender: they were accepted because nothing could be posted). */
static int sched_unsettled(int check_pending, unsigned skip_receivers,
                           unsigned silent_senders, int *dir_p)
{
    sched_stream_t *stream;
    sched_conn_t *conn;
    uint32_t due;
    int c, d;

    for (c = 0; c < sch.num_conns; ++c) {
        conn = &sch.conns[c];
        for (d = 0; d < 2; ++d) {
            stream = &conn->stream[d];
            due    = stream->sent;
            if (silent_senders & (1u << conn->side[d])) {
                due -= sched_bundled(conn, d);
            }
            if (!conn->excused && sched_stream_open(conn, d) &&
                !(skip_receivers & (1u << conn->side[!d])) &&
                ((stream->delivered != due) ||
                 (check_pending && stream->pending))) {
                *dir_p = d;
                return c;
            }
        }
    }
    return -1;
}

/* A flush of @a dir of @a conn refused for resources may stay refused
 * where waiters may not be served (see sch.waiters_served): a pending
 * request, or a bundle, waiting for a run may wait for ever (the settle
 * allows the same) */
static int sched_flush_may_wait(sched_conn_t *conn, int dir)
{
    return !sch.waiters_served && !conn->stream[dir].flushing &&
           (conn->stream[dir].pending || (sched_bundled(conn, dir) > 0));
}

static void sched_report_unsettled(const char *when, int check_pending,
                                   unsigned silent_senders)
{
    sched_stream_t *stream;
    sched_conn_t *conn;
    int c, d;

    c = sched_unsettled(check_pending, 0, silent_senders, &d);
    if (c < 0) {
        return;
    }
    conn   = &sch.conns[c];
    stream = &conn->stream[d];
    sched_fail("%s: connection %d (side %d -> side %d) delivered %u of %u "
               "accepted messages%s", when, c, conn->side[d], conn->side[!d],
               stream->delivered, stream->sent,
               stream->pending ? ", a request still pending" : "");
}

/* The end of a schedule: liveness, flush, destroy, accounting */
static void sched_finish(void)
{
    sched_side_t *side;
    sched_conn_t *conn;
    uct_hipower_iface_t *iface;
    unsigned round, s, sender_mask, waiting;
    const unsigned all_sides = (1u << NUM_SIDES) - 1;
    int c, d;

    for (s = 0; s < NUM_SIDES; ++s) {
        if (sch.sides[s].stopped < INT_MAX) {
            sch.sides[s].stopped = 0;
            continue;
        }
        /* Stopped for ever: its device still answers, so the runs it
         * holds at its peers stay with it (docs/protocol.md 9.2) and
         * their waiters could wait for ever. It dies now, as a process
         * stopped for ever is killed in the end: its QPs stop answering,
         * the probes of the deadlines that follow fail its endpoints
         * there, and their runs come back within the settle's bound */
        for (c = 0; c < sch.num_conns; ++c) {
            for (d = 0; d < 2; ++d) {
                conn = &sch.conns[c];
                if ((conn->side[d] == (int)s) && (conn->ep[d] != NULL)) {
                    hipower_sim_fail_qp(sch.sides[s].dev,
                                        sched_ep_qpn(conn->ep[d]));
                }
            }
        }
    }

    /* Delivery never depends on the sender: with some sides silent (they
     * neither progress nor send), what they already handed over reaches
     * the sides that progress. Messages in a bundle are not due yet: a
     * silent side's wait for its progress, and so may a progressing
     * side's, like pending requests, when the bundle waits for a run of
     * a peer whose pool silent sides hold */
    sch.op_name = "settle (senders silent)";
    sender_mask = 1 + sched_below((1u << NUM_SIDES) - 1); /* Silent ones */
    if (!sch.sender_free) {
        sender_mask = 0;
    }
    for (round = 0; round < SETTLE_ROUNDS / 4; ++round) {
        for (s = 0; s < NUM_SIDES; ++s) {
            if (!(sender_mask & (1u << s)) && !sch.sides[s].stopped) {
                sched_progress(&sch.sides[s], 1);
            }
        }
        hipower_sim_step(4);
        /* Done when every stream into a progressing side delivered */
        if (((round % 64) == 0) &&
            (sched_unsettled(0, sender_mask, all_sides, &d) < 0)) {
            break;
        }
    }
    c = sched_unsettled(0, sender_mask, all_sides, &d);
    if (c >= 0) {
        conn = &sch.conns[c];
        sched_fail("with side %d silent, connection %d (side %d -> side %d) "
                   "delivered %u of %u accepted messages in %u progress "
                   "rounds of the receiver", conn->side[d], c, conn->side[d],
                   conn->side[!d], conn->stream[d].delivered,
                   conn->stream[d].sent, round);
    }

    /* Everyone progresses: pending requests go, everything arrives. Where
     * waiters may not be served (see sch.waiters_served), a bundle waiting
     * for a run may wait as a pending request does */
    sch.op_name = "settle";
    waiting     = sch.waiters_served ? 0 : all_sides;
    for (round = 0; round < SETTLE_ROUNDS; ++round) {
        for (s = 0; s < NUM_SIDES; ++s) {
            if (!sch.sides[s].stopped) {
                sched_progress(&sch.sides[s], 1);
            }
        }
        hipower_sim_step(4);
        /* Time passes (the bound is 200 grant timeouts): the deadlines of
         * peers stopped for ever (and dead since) expire, their probes
         * fail, and their runs come back */
        hipower_sim_advance(sch.grant_timeout_ns / 1000);
        if (((round % 64) == 0) &&
            (sched_unsettled(sch.waiters_served, 0, waiting, &d) < 0)) {
            break;
        }
    }
    sched_report_unsettled("settle", sch.waiters_served, waiting);

    /* Every flush ends. One refused for resources (UCS_ERR_NO_RESOURCE:
     * a bundle waits for a run, say) is tried again after progress, as
     * uct.h asks of the caller */
    sch.op_name = "flush";
    for (c = 0; c < sch.num_conns; ++c) {
        sch.conns[c].stream[0].flushed = 0;
        sch.conns[c].stream[1].flushed = 0;
    }
    for (round = 0; round < SETTLE_ROUNDS; ++round) {
        unsigned unflushed = 0;

        for (c = 0; c < sch.num_conns; ++c) {
            for (d = 0; d < 2; ++d) {
                conn = &sch.conns[c];
                if (conn->excused || !sched_stream_open(conn, d) ||
                    conn->stream[d].flushed) {
                    continue;
                }
                sched_flush(conn, d);
                unflushed += !conn->stream[d].flushed &&
                             !sched_flush_may_wait(conn, d);
            }
        }
        /* (An operation with a completion completes without a flush) */
        if ((unflushed == 0) && (sched_rma_outstanding(NULL, 0, 0) == NULL)) {
            break;
        }
        for (s = 0; s < NUM_SIDES; ++s) {
            if (!sch.sides[s].stopped) {
                sched_progress(&sch.sides[s], 1);
            }
        }
        hipower_sim_step(4);
    }
    for (c = 0; c < sch.num_conns; ++c) {
        for (d = 0; d < 2; ++d) {
            conn = &sch.conns[c];
            if (!conn->excused && sched_stream_open(conn, d) &&
                !conn->stream[d].flushed && !sched_flush_may_wait(conn, d)) {
                sched_fail("flush of connection %d side %d did not complete "
                           "in %u progress rounds%s", c, conn->side[d], round,
                           conn->stream[d].flushing ? "" :
                           " (refused for resources each time)");
            }
        }
    }

    /* Every RMA operation of a connection nothing happened to completed,
     * and left in its region what the stream's shadow says */
    {
        sched_rma_op_t *op = sched_rma_outstanding(NULL, 0, 0);

        if (op != NULL) {
            sched_fail("side %d: %s %u of connection %d did not complete "
                       "after its flush", sch.conns[op->conn].side[op->dir],
                       op->what, op->op_index, op->conn);
        }
    }
    for (c = 0; c < sch.num_conns; ++c) {
        conn = &sch.conns[c];
        for (d = 0; d < 2; ++d) {
            if (sch.rma && conn->used && !conn->excused && !conn->hostile &&
                (!sched_stream_open(conn, d) || conn->stream[d].flushed) &&
                memcmp(sched_region(conn, d), conn->stream[d].shadow,
                       RMA_REGION)) {
                sched_fail("connection %d dir %d: after its flush the region "
                           "holds not what its %u RMA operations left", c, d,
                           conn->stream[d].rma_ops);
            }
        }
    }

    /* Endpoints whose epochs crossed a wrap (2^32: run requests; 2^64)
     * while the schedule ran */
    for (s = 0; s < NUM_SIDES; ++s) {
        uct_hipower_ep_t *ep;

        iface = ucs_derived_of(sch.sides[s].iface, uct_hipower_iface_t);
        ucs_list_for_each(ep, &iface->ep_list, list) {
            sch.epoch_wraps += (uint32_t)ep->rx.epoch <
                               (uint32_t)sch.epoch_origin;
        }
    }

    /* Everything goes; every slot comes back to its pool (a side stopped
     * for ever is progressed again to tear down) */
    sch.op_name = "teardown";
    for (s = 0; s < NUM_SIDES; ++s) {
        sch.sides[s].stopped = 0;
    }
    for (s = 0; s < NUM_SIDES; ++s) {
        sched_release_held(&sch.sides[s], 0);
    }
    for (c = 0; c < sch.num_conns; ++c) {
        for (d = 0; d < 2; ++d) {
            sched_destroy_ep(&sch.conns[c], d);
        }
    }
    for (round = 0; round < SETTLE_ROUNDS; ++round) {
        for (s = 0, d = 0; s < NUM_SIDES; ++s) {
            iface = ucs_derived_of(sch.sides[s].iface, uct_hipower_iface_t);
            d    += (iface->arena.slots.free_slots !=
                     iface->arena.slots.total) || (iface->num_gc > 0);
            sched_progress(&sch.sides[s], 1);
        }
        if (d == 0) {
            break;
        }
        hipower_sim_step(4);
        if ((round % 1024) == 1023) {
            hipower_sim_advance(1000000); /* Drains wait on timers too */
        }
    }
    for (s = 0; s < NUM_SIDES; ++s) {
        iface = ucs_derived_of(sch.sides[s].iface, uct_hipower_iface_t);
        if (iface->arena.slots.free_slots != iface->arena.slots.total) {
            sched_fail("side %u: %u of %u slots of the pool free with every "
                       "endpoint destroyed", s, iface->arena.slots.free_slots,
                       iface->arena.slots.total);
        }
    }

    for (s = 0; s < NUM_SIDES; ++s) {
        side = &sch.sides[s];
        for (d = 0; d < ZBUFS; ++d) {
            uct_md_mem_dereg(sch.devs[side->dev].md, side->zbufs[d].memh);
            free(side->zbufs[d].buf);
        }
        sched_rma_close(side);
        iface = ucs_derived_of(side->iface, uct_hipower_iface_t);
        sch.bundles += iface->stats.tx_bundles;
        sch.bundled += iface->stats.tx_bundled;
        sch.fill_batches += iface->stats.tx_fill_batches;
        uct_iface_close(side->iface);
        uct_worker_destroy(side->worker);
        ucs_async_context_destroy(side->async);
        free(side->dev_addr);
        side->iface = NULL;
    }
}

static void sched_close_after_failure(void)
{
    int s;

    /* The process ends after a failure: nothing to give back */
    for (s = 0; s < NUM_SIDES; ++s) {
        sch.sides[s].iface = NULL;
    }
}

static int sched_run(uint64_t seed)
{
    hipower_sim_stats_t before, after;
    volatile int failed = 0;

    sch.seed      = seed;
    sch.rng       = seed * 0x9e3779b97f4a7c15ull + 7;
    sch.op        = 0;
    sch.op_name   = "open";
    sch.num_conns = 0;
    memset(sch.conns, 0, sizeof(sch.conns));
    hipower_sim_reseed(seed);
    hipower_sim_get_stats(&before);
    /* Half the schedules honest, the others with a few faults each */
    sch.fault_pct = (sched_below(2) == 0) ? 0 : 5 + sched_below(20);

    if (setjmp(sch.fail_jmp) == 0) {
        sched_open_sides();
        for (sch.op = 1; sch.op <= sch.ops; ++sch.op) {
            sched_step();
            sched_check_pool();
            sched_note_period();
            /* After every operation: the device saw no transport bug */
            hipower_sim_get_stats(&after);
            if ((after.local_errors != before.local_errors) ||
                (after.cq_overruns != before.cq_overruns)) {
                sched_fail("the device saw %" PRIu64 " local protection "
                           "errors and %" PRIu64 " CQ overruns (a request "
                           "the transport should not have posted)",
                           after.local_errors - before.local_errors,
                           after.cq_overruns - before.cq_overruns);
            }
            /* Every peer progresses and nobody lies: a write with
             * immediate (a wake-up) always finds a receive, since each is
             * reposted when its completion is polled (hipower_event.c).
             * One that does not stalls its sender's QP in RNR retries. */
            if ((sch.fault_pct == 0) &&
                (after.rnr_naks != before.rnr_naks)) {
                sched_fail("the device answered %" PRIu64 " writes with "
                           "immediate with an RNR NAK, in a schedule "
                           "without faults: a receiver that progresses ran "
                           "out of wake-up receives",
                           after.rnr_naks - before.rnr_naks);
            }
        }
        sched_finish();
        hipower_sim_get_stats(&after);
        sch.rnr_naks += after.rnr_naks - before.rnr_naks;
        if (sch.fault_pct == 0) {
            sch.rnr_naks_honest += after.rnr_naks - before.rnr_naks;
        }
        if ((after.local_errors != before.local_errors) ||
            (after.cq_overruns != before.cq_overruns)) {
            snprintf(sch.failure, sizeof(sch.failure), "the device saw %"
                     PRIu64 " local protection errors and %" PRIu64
                     " CQ overruns", after.local_errors - before.local_errors,
                     after.cq_overruns - before.cq_overruns);
            failed = 1;
        }
    } else {
        failed = 1;
        sched_close_after_failure();
    }
    return failed;
}

/* The totals a schedule adds to, in the order of its line in the per-seed
 * record (HIPOWER_SCHED_SEEDS) */
#define SCHED_TOTALS(_x) \
    _x(conns_made) _x(msgs_sent) _x(msgs_delivered) _x(pending_adds) \
    _x(faults_done) _x(device_events) _x(stops) _x(scribbles) _x(garbage) \
    _x(errors_reported) _x(epoch_wraps) _x(runs_restarted) \
    _x(runs_at_period) _x(rnr_naks) _x(rnr_naks_honest) _x(bundles) \
    _x(bundled) _x(fill_batches) _x(rma_sent) _x(rma_checked) \
    _x(am_rma_checked) _x(flush_rma_checked)
#define SCHED_TOTAL_COUNT(_f) + 1
#define SCHED_NUM_TOTALS (0 SCHED_TOTALS(SCHED_TOTAL_COUNT))

static void sched_totals(uint64_t *totals)
{
    unsigned n = 0;

#define SCHED_TOTAL_GET(_f) totals[n++] = sch._f;
    SCHED_TOTALS(SCHED_TOTAL_GET)
#undef SCHED_TOTAL_GET
}

/*
 * One line per schedule: its seed and what it added to every total. A
 * schedule must be a function of its seed (and the HIPOWER_SCHED_* and
 * HIPOWER_SIM_* settings) alone: two runs of the same seeds, whatever the
 * build (plain, -O0 with gcov), the number of processes or the machine,
 * must write the same lines, and run-schedules prints their digest so that
 * two runs can be compared; where they differ, diff shows the first seed.
 */
static void sched_record(FILE *record, uint64_t seed, const uint64_t *before)
{
    uint64_t after[SCHED_NUM_TOTALS];
    unsigned i;

    sched_totals(after);
    fprintf(record, "%" PRIu64 ":", seed);
    for (i = 0; i < SCHED_NUM_TOTALS; ++i) {
        fprintf(record, " %" PRIu64, after[i] - before[i]);
    }
    fputc('\n', record);
}

static uint64_t sched_env(const char *name, uint64_t dflt)
{
    const char *value = getenv(name);

    return (value != NULL) ? strtoull(value, NULL, 0) : dflt;
}

int main(int argc, char **argv)
{
    uint64_t first, count, seed, failed = 0, ran = 0;
    uint64_t before[SCHED_NUM_TOTALS];
    FILE *record = NULL;
    uct_component_h *components, comp = NULL;
    uct_component_attr_t comp_attr;
    unsigned i, num_components;
    uct_md_config_t *md_config;
    struct timespec t0, t1;
    double secs;

    first       = sched_env("HIPOWER_SCHED_FIRST", 1);
    count       = sched_env("HIPOWER_SCHED_COUNT", 100);
    sch.ops     = (unsigned)sched_env("HIPOWER_SCHED_OPS", 300);
    sch.trace   = (int)sched_env("HIPOWER_SCHED_TRACE", 0);
    sch.faults  = (int)sched_env("HIPOWER_SCHED_FAULTS", 1);
    sch.rma     = (int)sched_env("HIPOWER_SCHED_RMA", 1);
    sch.mode    = getenv("HIPOWER_SCHED_MODE") ? getenv("HIPOWER_SCHED_MODE") :
                  "any";

    if ((getenv("HIPOWER_SIM_CLOCK") == NULL) ||
        strcmp(getenv("HIPOWER_SIM_CLOCK"), "virtual")) {
        fprintf(stderr, "hipower-sched: needs HIPOWER_SIM_CLOCK=virtual (a "
                "seed replays its schedule only on the virtual clock)\n");
        return 2;
    }

    uct_query_components(&components, &num_components);
    comp_attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    for (i = 0; i < num_components; ++i) {
        uct_component_query(components[i], &comp_attr);
        if (!strcmp(comp_attr.name, "hipower")) {
            comp = components[i];
        }
    }
    if (comp == NULL) {
        fprintf(stderr, "hipower-sched: the hipower component is not loaded "
                "(run under hipower-run)\n");
        return 2;
    }
    sch.comp = comp;
    /* The memory domains the component lists: the simulated devices */
    comp_attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    uct_component_query(comp, &comp_attr);
    comp_attr.md_resources = calloc(comp_attr.md_resource_count,
                                    sizeof(*comp_attr.md_resources));
    comp_attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    uct_component_query(comp, &comp_attr);
    if ((comp_attr.md_resource_count < 2) ||
        strcmp(comp_attr.md_resources[0].md_name, "sim0") ||
        strcmp(comp_attr.md_resources[1].md_name, "sim1")) {
        fprintf(stderr, "hipower-sched: the component lists %u memory "
                "domains, not sim0 and sim1 (is the simulator linked in?)\n",
                comp_attr.md_resource_count);
        return 2;
    }
    free(comp_attr.md_resources);

    for (i = 0; i < 2; ++i) {
        char name[16];

        snprintf(name, sizeof(name), "sim%u", i);
        uct_md_config_read(comp, NULL, NULL, &md_config);
        if (uct_md_open(comp, name, md_config, &sch.devs[i].md) != UCS_OK) {
            fprintf(stderr, "hipower-sched: cannot open %s\n", name);
            return 2;
        }
        uct_config_release(md_config);
    }
    /* The component list stays: sch.comp unpacks and releases rkeys */

    if (getenv("HIPOWER_SCHED_SEEDS") != NULL) {
        record = fopen(getenv("HIPOWER_SCHED_SEEDS"), "w");
        if (record == NULL) {
            fprintf(stderr, "hipower-sched: cannot write %s (HIPOWER_SCHED_"
                    "SEEDS): %m\n", getenv("HIPOWER_SCHED_SEEDS"));
            return 2;
        }
    }

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (seed = first; seed < first + count; ++seed) {
        struct timespec s0, s1;
        int failed_now;

        ++ran;
        clock_gettime(CLOCK_MONOTONIC, &s0);
        sched_totals(before);
        failed_now = sched_run(seed);
        if (record != NULL) {
            sched_record(record, seed, before);
        }
        clock_gettime(CLOCK_MONOTONIC, &s1);
        secs = (s1.tv_sec - s0.tv_sec) + (s1.tv_nsec - s0.tv_nsec) * 1e-9;
        if (secs > sch.slowest_sec) {
            sch.slowest_sec  = secs;
            sch.slowest_seed = seed;
        }
        if (!failed_now) {
            continue;
        }
        ++failed;
        printf("hipower-sched: FAILED schedule %" PRIu64 ": %s\n"
               "  replay: HIPOWER_SCHED_FIRST=%" PRIu64 " HIPOWER_SCHED_COUNT=1"
               " HIPOWER_SCHED_OPS=%u HIPOWER_SCHED_MODE=%s"
               " HIPOWER_SCHED_FAULTS=%d HIPOWER_SCHED_TRACE=1"
               "%s%s test/sim/run-schedules\n", seed, sch.failure, seed,
               sch.ops, sch.mode, sch.faults,
               getenv("HIPOWER_SIM_PLACEMENT") ? " HIPOWER_SIM_PLACEMENT=" : "",
               getenv("HIPOWER_SIM_PLACEMENT") ?
                       getenv("HIPOWER_SIM_PLACEMENT") : "");
        fflush(stdout);
        break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;

    printf("hipower-sched: schedules %" PRIu64 "-%" PRIu64 ": %" PRIu64
           " run, %" PRIu64 " failed, %.1f s; %" PRIu64 " connections, %"
           PRIu64 " messages accepted, %" PRIu64 " delivered, %" PRIu64
           " pending adds, %" PRIu64 " QP faults, %" PRIu64 " device events, %"
           PRIu64 " stops, %" PRIu64
           " hostile writes (%" PRIu64 " garbage deliveries), %" PRIu64
           " endpoint errors reported, %" PRIu64 " endpoints past an epoch "
           "wrap, %" PRIu64 " runs past their sequence restart (%" PRIu64
           " resting at it), %" PRIu64 " RNR NAKs (%" PRIu64 " without "
           "faults), %" PRIu64 " bundles carried %" PRIu64 " messages (%"
           PRIu64 " of them batches of a filled slot); %" PRIu64 " RMA "
           "operations (%" PRIu64 " gets and fetches checked, %" PRIu64
           " messages checked against the RMA before them, %" PRIu64
           " flushes against the RMA before them); "
           "slowest schedule %" PRIu64 " (%.2f s)\n",
           first, first + ran - 1, ran, failed, secs, sch.conns_made, sch.msgs_sent, sch.msgs_delivered,
           sch.pending_adds, sch.faults_done, sch.device_events, sch.stops,
           sch.scribbles,
           sch.garbage, sch.errors_reported, sch.epoch_wraps,
           sch.runs_restarted, sch.runs_at_period, sch.rnr_naks,
           sch.rnr_naks_honest, sch.bundles, sch.bundled, sch.fill_batches,
           sch.rma_sent, sch.rma_checked, sch.am_rma_checked,
           sch.flush_rma_checked, sch.slowest_seed,
           sch.slowest_sec);
    fflush(stdout);
    if (record != NULL) {
        fclose(record);
    }
    if (failed > 0) {
        /* The failed schedule's interfaces are still open: no cleanup */
        _exit(1);
    }
    for (i = 0; i < 2; ++i) {
        uct_md_close(sch.devs[i].md);
    }
    uct_release_component_list(components);
    (void)argc;
    (void)argv;
    return 0;
}
