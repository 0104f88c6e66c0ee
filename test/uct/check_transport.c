/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The hipower transport through UCT's public API, between two verbs devices
 * (the first two of $HIPOWER_RIG_DEVICES) in one process: interface A sends,
 * interface B receives, each on its own worker so a test can stop one side.
 * Every message carries its endpoint, sequence number, AM id, length and a
 * checksum of its bytes; the receiver checks all of them, so a lost,
 * duplicated, reordered or corrupted message fails the test. Handlers keep
 * some descriptors and check them again when they release them, which fails
 * if a slot were reused while held.
 */
#include <check.h>
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>

#define NUM_AM_IDS      4
#define MAX_PAIRS       16
#define MAX_HELD        64
#define ZCOPY_BUFS      16
#define MSG_HDR_SIZE    sizeof(msg_hdr_t)
#define RX_HEADROOM     80  /* What UCP 1.13 asks for: its descriptor + 32 */


typedef struct {
    uint32_t pair;
    uint32_t seq;
    uint32_t length;   /* Whole AM data, header included */
    uint32_t checksum; /* Of the bytes after the header */
    uint8_t  am_id;
    uint8_t  pad[7];
} msg_hdr_t;

typedef struct {
    uct_component_h    component;
    uct_md_h           md;
    uct_worker_h       worker;
    ucs_async_context_t *async;
    uct_iface_h        iface;
    uct_iface_attr_t   attr;
    uct_device_addr_t  *dev_addr;
    char               dev[64];
} side_t;

typedef struct {
    uct_ep_h  ep_a;         /* A -> B */
    uct_ep_h  ep_b;         /* B -> A, only to connect */
    uint32_t  next_seq;     /* Sender */
    uint32_t  expected_seq; /* Receiver */
} pair_t;

typedef struct {
    uct_completion_t comp;
    void             *buffer;
    uct_mem_h        memh;
    int              busy;
} zbuf_t;

static side_t  side_a, side_b;
static pair_t  pairs[MAX_PAIRS];
static int     num_pairs;
static void    *held[MAX_HELD];
static int     num_held;
static double  hold_probability;
/* UCX_HIPOWER_HOLD_SLOTS of the interfaces: most tests check that kept
 * descriptors stay intact, so they let handlers keep them */
static const char *hold_slots = "y";
static uint64_t desc_offered;       /* Messages offered with FLAG_DESC */
static int     errors;
static uint64_t received, rx_bytes;
static zbuf_t  zbufs[ZCOPY_BUFS];
static unsigned rand_state = 12345;
static unsigned ep_errors_a;        /* Interface A's error handler calls */
static ucs_status_t ep_error_status;


static unsigned next_rand(void)
{
    rand_state = rand_state * 1103515245u + 12345u;
    return (rand_state >> 8) & 0xffffff;
}

static uint32_t checksum(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    while (n-- > 0) {
        h = (h ^ *p++) * 16777619u;
    }
    return h;
}

static void fill_message(void *buf, uint32_t pair, uint32_t seq, uint8_t am_id,
                         size_t length)
{
    msg_hdr_t *hdr = buf;
    uint8_t *body  = (uint8_t*)(hdr + 1);
    size_t i;

    for (i = 0; i < length - MSG_HDR_SIZE; ++i) {
        body[i] = (uint8_t)(seq * 31 + i * 7 + pair);
    }
    hdr->pair     = pair;
    hdr->seq      = seq;
    hdr->length   = length;
    hdr->am_id    = am_id;
    hdr->checksum = checksum(body, length - MSG_HDR_SIZE);
    memset(hdr->pad, 0, sizeof(hdr->pad));
}

/* Whether a received message is intact; does not check its order */
static int message_intact(const void *data, size_t length, uint8_t am_id)
{
    const msg_hdr_t *hdr = data;

    return (length >= MSG_HDR_SIZE) && (hdr->length == length) &&
           (hdr->am_id == am_id) && (hdr->pair < (uint32_t)num_pairs) &&
           (hdr->checksum == checksum((const uint8_t*)(hdr + 1),
                                      length - MSG_HDR_SIZE));
}

static ucs_status_t am_handler(void *arg, void *data, size_t length,
                               unsigned flags)
{
    uint8_t am_id        = (uint8_t)(uintptr_t)arg;
    const msg_hdr_t *hdr = data;

    if (!message_intact(data, length, am_id)) {
        fprintf(stderr, "corrupt message: am_id %u length %zu\n", am_id,
                length);
        ++errors;
        return UCS_OK;
    }

    if (hdr->seq != pairs[hdr->pair].expected_seq) {
        fprintf(stderr, "pair %u: got seq %u, expected %u\n", hdr->pair,
                hdr->seq, pairs[hdr->pair].expected_seq);
        ++errors;
    }
    pairs[hdr->pair].expected_seq = hdr->seq + 1;
    ++received;
    rx_bytes += length;
    desc_offered += !!(flags & UCT_CB_PARAM_FLAG_DESC);

    if ((flags & UCT_CB_PARAM_FLAG_DESC) && (num_held < MAX_HELD) &&
        ((next_rand() % 1000) < hold_probability * 1000)) {
        /* Like UCP: use the headroom in front of the data for our own
         * bookkeeping; no other message may be hurt by it */
        memset((char*)data - RX_HEADROOM, 0xab, RX_HEADROOM);
        held[num_held++] = data;
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

/* Releases kept descriptors after checking they were not overwritten */
static void release_held(int keep)
{
    const msg_hdr_t *hdr;

    while (num_held > keep) {
        hdr = held[--num_held];
        if (!message_intact(hdr, hdr->length, hdr->am_id)) {
            fprintf(stderr, "a held descriptor was overwritten\n");
            ++errors;
        }
        uct_iface_release_desc((char*)held[num_held] - RX_HEADROOM);
    }
}

static void progress(int a, int b)
{
    if (a) {
        uct_worker_progress(side_a.worker);
    }
    if (b) {
        uct_worker_progress(side_b.worker);
    }
}

static ucs_status_t ep_error_handler(void *arg, uct_ep_h ep,
                                     ucs_status_t status)
{
    if (arg == &side_a) {
        ++ep_errors_a;
        ep_error_status = status;
    }
    return UCS_OK;
}

static void open_side(side_t *side, const char *dev)
{
    uct_component_attr_t comp_attr;
    uct_iface_params_t params;
    uct_component_h *components;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    unsigned i, num_components;
    uct_component_h comp = NULL;
    char md_name[64];

    snprintf(side->dev, sizeof(side->dev), "%s:1", dev);
    snprintf(md_name, sizeof(md_name), "%s", dev);

    ck_assert_int_eq(uct_query_components(&components, &num_components),
                     UCS_OK);
    comp_attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    for (i = 0; i < num_components; ++i) {
        uct_component_query(components[i], &comp_attr);
        if (!strcmp(comp_attr.name, "hipower")) {
            comp = components[i];
        }
    }
    ck_assert_msg(comp != NULL, "hipower component not loaded (hipower-run?)");
    side->component = comp;

    ck_assert_int_eq(uct_md_config_read(comp, NULL, NULL, &md_config), UCS_OK);
    ck_assert_int_eq(uct_md_open(comp, md_name, md_config, &side->md), UCS_OK);
    uct_config_release(md_config);
    uct_release_component_list(components);

    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                              &side->async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(side->async, UCS_THREAD_MODE_SINGLE,
                                       &side->worker), UCS_OK);

    ck_assert_int_eq(uct_md_iface_config_read(side->md, "hipower", NULL, NULL,
                                              &iface_config), UCS_OK);
    ck_assert_int_eq(uct_config_modify(iface_config, "HOLD_SLOTS",
                                       hold_slots), UCS_OK);
    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE   |
                                  UCT_IFACE_PARAM_FIELD_DEVICE      |
                                  UCT_IFACE_PARAM_FIELD_STATS_ROOT  |
                                  UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                                  UCT_IFACE_PARAM_FIELD_CPU_MASK    |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "hipower";
    params.mode.device.dev_name = side->dev;
    params.stats_root           = NULL;
    params.rx_headroom          = RX_HEADROOM;
    params.err_handler          = ep_error_handler;
    params.err_handler_arg      = side;
    params.err_handler_flags    = UCT_CB_FLAG_ASYNC;
    UCS_CPU_ZERO(&params.cpu_mask);
    ck_assert_int_eq(uct_iface_open(side->md, side->worker, &params,
                                    iface_config, &side->iface), UCS_OK);
    uct_config_release(iface_config);

    ck_assert_int_eq(uct_iface_query(side->iface, &side->attr), UCS_OK);
    side->dev_addr = malloc(side->attr.device_addr_len);
    ck_assert_int_eq(uct_iface_get_device_address(side->iface, side->dev_addr),
                     UCS_OK);
    uct_iface_progress_enable(side->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static void close_side(side_t *side)
{
    uct_iface_close(side->iface);
    uct_worker_destroy(side->worker);
    ucs_async_context_destroy(side->async);
    uct_md_close(side->md);
    free(side->dev_addr);
}

static void connect_pair(pair_t *pair)
{
    uct_ep_params_t params;
    void *addr_a, *addr_b;

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_a.iface;
    ck_assert_int_eq(uct_ep_create(&params, &pair->ep_a), UCS_OK);
    params.iface      = side_b.iface;
    ck_assert_int_eq(uct_ep_create(&params, &pair->ep_b), UCS_OK);

    addr_a = malloc(side_a.attr.ep_addr_len);
    addr_b = malloc(side_b.attr.ep_addr_len);
    ck_assert_int_eq(uct_ep_get_address(pair->ep_a, addr_a), UCS_OK);
    ck_assert_int_eq(uct_ep_get_address(pair->ep_b, addr_b), UCS_OK);
    ck_assert_int_eq(uct_ep_connect_to_ep(pair->ep_a, side_b.dev_addr, addr_b),
                     UCS_OK);
    ck_assert_int_eq(uct_ep_connect_to_ep(pair->ep_b, side_a.dev_addr, addr_a),
                     UCS_OK);
    free(addr_a);
    free(addr_b);
    pair->next_seq     = 0;
    pair->expected_seq = 0;
}

static void setup_pairs(int n)
{
    const char *devs = getenv("HIPOWER_RIG_DEVICES");
    char dev0[32] = "", dev1[32] = "";
    uint8_t id;
    int i;

    ck_assert_msg(devs != NULL, "HIPOWER_RIG_DEVICES is not set");
    ck_assert_int_ge(sscanf(devs, "%31s %31s", dev0, dev1), 1);
    if (dev1[0] == '\0') {
        strcpy(dev1, dev0);
    }

    open_side(&side_a, dev0);
    open_side(&side_b, dev1);
    for (id = 0; id < NUM_AM_IDS; ++id) {
        ck_assert_int_eq(uct_iface_set_am_handler(side_b.iface, id, am_handler,
                                                  (void*)(uintptr_t)id, 0),
                         UCS_OK);
    }

    num_pairs = n;
    for (i = 0; i < n; ++i) {
        connect_pair(&pairs[i]);
    }
    num_held = 0;
    errors   = 0;
    ep_errors_a = 0;
    received = rx_bytes = desc_offered = 0;
}

static void flush_comp_cb(uct_completion_t *self)
{
}

/* Flushes every endpoint and waits, progressing only the sender side */
static void flush_all(void)
{
    uct_completion_t comp;
    ucs_status_t status;
    int i;

    for (i = 0; i < num_pairs; ++i) {
        comp.func   = flush_comp_cb;
        comp.count  = 1;
        comp.status = UCS_OK;
        do {
            status = uct_ep_flush(pairs[i].ep_a, 0, &comp);
            progress(1, 0);
        } while (status == UCS_ERR_NO_RESOURCE);
        ck_assert_msg((status == UCS_OK) || (status == UCS_INPROGRESS),
                      "flush: %s", ucs_status_string(status));
        if (status == UCS_INPROGRESS) {
            while (comp.count > 0) {
                progress(1, 0);
            }
            ck_assert_int_eq(comp.status, UCS_OK);
        }
    }
}

/* The same through the interface flush, with a completion */
static void iface_flush_a(void)
{
    uct_completion_t comp;
    ucs_status_t status;

    comp.func   = flush_comp_cb;
    comp.count  = 1;
    comp.status = UCS_OK;
    do {
        status = uct_iface_flush(side_a.iface, 0, &comp);
        progress(1, 0);
    } while (status == UCS_ERR_NO_RESOURCE);
    ck_assert_msg((status == UCS_OK) || (status == UCS_INPROGRESS),
                  "iface flush: %s", ucs_status_string(status));
    if (status == UCS_INPROGRESS) {
        while (comp.count > 0) {
            progress(1, 0);
        }
    }
}

static void teardown_pairs(void)
{
    int i;

    release_held(0);
    for (i = 0; i < num_pairs; ++i) {
        uct_ep_destroy(pairs[i].ep_a);
        if (pairs[i].ep_b != NULL) {
            uct_ep_destroy(pairs[i].ep_b);
        }
    }
    close_side(&side_a);
    close_side(&side_b);
}

typedef struct {
    uint8_t  *buf;
    size_t   length;
} pack_arg_t;

static size_t pack_cb(void *dest, void *arg)
{
    pack_arg_t *pack = arg;

    memcpy(dest, pack->buf, pack->length);
    return pack->length;
}

static void zbuf_comp_cb(uct_completion_t *self)
{
    zbuf_t *zbuf = ucs_container_of(self, zbuf_t, comp);

    /* Canceled only when a test destroys the endpoint on purpose */
    if ((self->status != UCS_OK) && (self->status != UCS_ERR_CANCELED)) {
        fprintf(stderr, "zcopy completed with %s\n",
                ucs_status_string(self->status));
        ++errors;
    }
    zbuf->busy = 0;
}

/* One message of @a length bytes with a random layout; UCS_ERR_NO_RESOURCE
 * if the transport has no room right now */
static ucs_status_t send_one(pair_t *pair, int pair_idx, uint8_t am_id,
                             size_t length, int layout)
{
    static uint8_t buf[65536];
    pack_arg_t pack;
    uct_iov_t iov;
    zbuf_t *zbuf = NULL;
    ssize_t packed;
    ucs_status_t status;
    int i;

    fill_message(buf, pair_idx, pair->next_seq, am_id, length);
    switch (layout) {
    case 0:
        status = uct_ep_am_short(pair->ep_a, am_id, *(uint64_t*)buf, buf + 8,
                                 length - 8);
        break;
    case 1:
        pack.buf    = buf;
        pack.length = length;
        packed      = uct_ep_am_bcopy(pair->ep_a, am_id, pack_cb, &pack, 0);
        status      = (packed < 0) ? (ucs_status_t)packed : UCS_OK;
        if (status == UCS_OK) {
            ck_assert_int_eq(packed, length);
        }
        break;
    default:
        for (i = 0; i < ZCOPY_BUFS; ++i) {
            if (!zbufs[i].busy) {
                zbuf = &zbufs[i];
                break;
            }
        }
        if (zbuf == NULL) {
            return UCS_ERR_NO_RESOURCE;
        }
        /* Header through the AM header, the rest zero-copy */
        memcpy(zbuf->buffer, buf + 16, length - 16);
        iov.buffer = zbuf->buffer;
        iov.length = length - 16;
        iov.memh   = zbuf->memh;
        iov.stride = 0;
        iov.count  = 1;
        zbuf->comp.func   = zbuf_comp_cb;
        zbuf->comp.count  = 1;
        zbuf->comp.status = UCS_OK;
        status = uct_ep_am_zcopy(pair->ep_a, am_id, buf, 16, &iov, 1, 0,
                                 &zbuf->comp);
        if (status == UCS_INPROGRESS) {
            zbuf->busy = 1;
            status     = UCS_OK;
        }
        break;
    }

    if (status == UCS_OK) {
        ++pair->next_seq;
    }
    return status;
}

static void alloc_zbufs(void)
{
    int i;

    for (i = 0; i < ZCOPY_BUFS; ++i) {
        zbufs[i].buffer = malloc(side_a.attr.cap.am.max_zcopy);
        zbufs[i].busy   = 0;
        ck_assert_int_eq(uct_md_mem_reg(side_a.md, zbufs[i].buffer,
                                        side_a.attr.cap.am.max_zcopy, UCT_MD_MEM_ACCESS_ALL,
                                        &zbufs[i].memh), UCS_OK);
    }
}

static void free_zbufs(void)
{
    int i;

    for (i = 0; i < ZCOPY_BUFS; ++i) {
        while (zbufs[i].busy) {
            progress(1, 1);
        }
        uct_md_mem_dereg(side_a.md, zbufs[i].memh);
        free(zbufs[i].buffer);
    }
}

static uint64_t total_sent(void)
{
    uint64_t n = 0;
    int i;

    for (i = 0; i < num_pairs; ++i) {
        n += pairs[i].next_seq;
    }
    return n;
}

static void wait_all_received(void)
{
    uint64_t sent = total_sent();
    unsigned spins = 0;

    flush_all();
    /* Flushed means written into B's slots: B's progress alone delivers */
    while (received < sent) {
        progress(0, 1);
        release_held(MAX_HELD / 2);
        ck_assert_msg(++spins < 100000000, "lost messages: %lu of %lu",
                      received, sent);
    }
}

static size_t random_length(int layout)
{
    size_t max = (layout == 0) ? side_a.attr.cap.am.max_short :
                 (layout == 1) ? side_a.attr.cap.am.max_bcopy :
                                 side_a.attr.cap.am.max_zcopy;
    size_t min = MSG_HDR_SIZE;

    /* Mostly small, sometimes up to the limit */
    if (next_rand() % 4) {
        max = (max < 256) ? max : 256;
    }
    return min + next_rand() % (max - min + 1);
}

/* Random traffic over several endpoints: in order, once, intact */
START_TEST(test_random_traffic)
{
    const unsigned num_msgs = getenv("HIPOWER_TEST_MSGS") ?
                              atoi(getenv("HIPOWER_TEST_MSGS")) : 200000;
    unsigned i, layout, spins;
    ucs_status_t status;
    pair_t *pair;
    int p;

    setup_pairs(4);
    alloc_zbufs();
    hold_probability = 0.01;

    for (i = 0; i < num_msgs; ++i) {
        p      = next_rand() % num_pairs;
        pair   = &pairs[p];
        layout = next_rand() % 3;
        spins = 0;
        do {
            status = send_one(pair, p, next_rand() % NUM_AM_IDS,
                              random_length(layout), layout);
            if (status == UCS_ERR_NO_RESOURCE) {
                progress(1, 1);
                /* A kept descriptor keeps its slot, and slots are reused
                 * in ring order: a sender blocked long enough needs the
                 * receiver to let go */
                release_held((++spins > 100) ? 0 : MAX_HELD / 2);
            }
        } while (status == UCS_ERR_NO_RESOURCE);
        ck_assert_int_eq(status, UCS_OK);
        if ((i % 64) == 0) {
            progress(1, 1);
        }
        if ((i % 20000) == 0) {
            printf("  random traffic: %u of %u sent, %lu received\n", i,
                   num_msgs, received);
            fflush(stdout);
        }
    }

    wait_all_received();
    free_zbufs();
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(received, num_msgs);
    for (p = 0; p < num_pairs; ++p) {
        ck_assert_uint_eq(pairs[p].expected_seq, pairs[p].next_seq);
    }
    printf("  random traffic: %lu messages, %lu bytes delivered in order\n",
           received, rx_bytes);
    teardown_pairs();
}
END_TEST

typedef struct {
    uct_pending_req_t req;
    pair_t            *pair;
    int               pair_idx;
    size_t            length;
    int               done;
} pending_send_t;

static ucs_status_t pending_cb(uct_pending_req_t *self)
{
    pending_send_t *ps = ucs_container_of(self, pending_send_t, req);
    ucs_status_t status;

    status = send_one(ps->pair, ps->pair_idx, 1, ps->length, 1);
    if (status == UCS_OK) {
        ps->done = 1;
    }
    return status;
}

/* A receiver that holds every descriptor and stops progressing: the sender
 * runs out of slots, falls back to pending, and resumes without loss */
START_TEST(test_slot_exhaustion_pending)
{
    static pending_send_t reqs[256];
    unsigned sent_direct = 0, queued = 0, spins;
    ucs_status_t status;
    unsigned i;

    setup_pairs(1);
    hold_probability = 1.0; /* Keep everything: slots stay taken */

    for (i = 0; i < 256; ++i) {
        status = send_one(&pairs[0], 0, 1, 100, 1);
        if (status == UCS_OK) {
            ++sent_direct;
            progress(1, 0);
            continue;
        }
        ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
        reqs[queued].req.func = pending_cb;
        reqs[queued].pair     = &pairs[0];
        reqs[queued].pair_idx = 0;
        reqs[queued].length   = 100;
        reqs[queued].done     = 0;
        status = uct_ep_pending_add(pairs[0].ep_a, &reqs[queued].req, 0);
        if (status == UCS_ERR_BUSY) {
            /* Resources came back meanwhile */
            continue;
        }
        ck_assert_int_eq(status, UCS_OK);
        ++queued;
    }

    /* The receiver cannot have more than its slots outstanding */
    ck_assert_uint_gt(queued, 0);
    ck_assert_uint_le(sent_direct, 4096);

    /* Only the sender progresses: nothing may be dispatched yet, because
     * the receiver has consumed nothing */
    for (spins = 0; spins < 2000; ++spins) {
        progress(1, 0);
    }
    ck_assert_int_eq(reqs[0].done, 0);

    /* Receiver progresses and releases: everything goes through */
    hold_probability = 0;
    for (spins = 0; (received < sent_direct + queued) && (spins < 50000000);
         ++spins) {
        progress(1, 1);
        release_held(0);
    }
    wait_all_received();
    ck_assert_int_eq(errors, 0);
    for (i = 0; i < queued; ++i) {
        ck_assert_msg(reqs[i].done, "pending request %u never ran", i);
    }
    ck_assert_uint_eq(received, sent_direct + queued);
    teardown_pairs();
}
END_TEST

/*
 * The default, HOLD_SLOTS=n: a handler is never offered the descriptor, so
 * every slot comes back when it returns. A receiver that would keep every
 * message (as UCP keeps unexpected ones) still lets the sender send four
 * rings' worth; with held slots it would stop after one.
 */
START_TEST(test_slots_not_held)
{
    uint64_t sent = 0, spins;
    ucs_status_t status;

    hold_slots = "n";
    setup_pairs(1);
    hold_probability = 1.0;

    for (spins = 0; (sent < 256) && (spins < 50000000); ++spins) {
        status = send_one(&pairs[0], 0, 1, random_length(sent % 2),
                          sent % 2);
        if (status == UCS_OK) {
            ++sent;
        } else {
            ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
        }
        progress(1, 1);
    }
    ck_assert_uint_eq(sent, 256);
    wait_all_received();
    ck_assert_uint_eq(received, 256);
    ck_assert_uint_eq(desc_offered, 0);
    ck_assert_int_eq(num_held, 0);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
    hold_slots = "y";
}
END_TEST

/* Flush completes only when the messages are in the receiver's memory:
 * after it, the receiver delivers them without the sender doing anything */
START_TEST(test_flush_means_delivered)
{
    unsigned i, round, spins;

    setup_pairs(2);
    hold_probability = 0;
    for (round = 0; round < 20; ++round) {
        for (i = 0; i < 10; ++i) {
            ck_assert_int_eq(send_one(&pairs[i % 2], i % 2, i % NUM_AM_IDS,
                                      24 + i * 100, 1), UCS_OK);
        }
        if (round % 2) {
            flush_all();
        } else {
            iface_flush_a();
        }
        for (spins = 0; (received < total_sent()) && (spins < 1000); ++spins) {
            progress(0, 1);
        }
        ck_assert_uint_eq(received, total_sent());
    }
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/* Sixteen endpoints on one interface at once */
START_TEST(test_sixteen_endpoints)
{
    unsigned i;
    int p;

    setup_pairs(16);
    hold_probability = 0.05;
    for (i = 0; i < 20; ++i) {
        for (p = 0; p < num_pairs; ++p) {
            while (send_one(&pairs[p], p, i % NUM_AM_IDS, 64 + 8 * p, 1) ==
                   UCS_ERR_NO_RESOURCE) {
                progress(1, 1);
                release_held(0);
            }
        }
        progress(1, 1);
    }
    wait_all_received();
    ck_assert_int_eq(errors, 0);
    for (p = 0; p < num_pairs; ++p) {
        ck_assert_uint_eq(pairs[p].expected_seq, 20);
    }
    teardown_pairs();
}
END_TEST

/* Destroying endpoints with traffic in flight and descriptors held must not
 * crash or leak (run under valgrind by the rig test) */
START_TEST(test_destroy_in_flight)
{
    unsigned i;
    int p;

    setup_pairs(4);
    alloc_zbufs();
    hold_probability = 0.2;
    for (i = 0; i < 400; ++i) {
        p = i % num_pairs;
        /* Zero-copy only on the pair whose sender is destroyed */
        if (send_one(&pairs[p], p, 2, 32 + (i * 37) % 3000,
                     (p == 0) ? 1 + i % 2 : 1) == UCS_ERR_NO_RESOURCE) {
            progress(1, 1);
        }
        if ((i % 50) == 0) {
            progress(0, 1);
        }
    }

    /* Pair 0's sender goes away mid-stream, zcopy completions included */
    uct_ep_destroy(pairs[0].ep_a);
    for (i = 0; i < ZCOPY_BUFS; ++i) {
        ck_assert_msg(!zbufs[i].busy, "zcopy %u not completed by destroy", i);
    }
    pairs[0].ep_a = NULL;
    for (i = 0; i < 1000; ++i) {
        progress(1, 1);
    }
    /* Receivers destroyed while the user still holds their descriptors */
    for (p = 0; p < num_pairs; ++p) {
        uct_ep_destroy(pairs[p].ep_b);
        pairs[p].ep_b = NULL;
    }
    release_held(0);
    for (p = 1; p < num_pairs; ++p) {
        uct_ep_destroy(pairs[p].ep_a);
    }
    free_zbufs();
    close_side(&side_a);
    close_side(&side_b);
    ck_assert_int_eq(errors, 0);
}
END_TEST

/* The memory budget (QoS): endpoints get their slots while the arena has
 * them, fewer when it runs short (down to the minimum), then creation fails
 * with UCS_ERR_NO_MEMORY; a destroyed endpoint gives its slots back */
START_TEST(test_memory_budget)
{
    const char *devs = getenv("HIPOWER_RIG_DEVICES");
    char dev[32]     = "";
    uct_ep_params_t params;
    uct_ep_h eps[4];
    int i;

    ck_assert_msg(devs != NULL, "HIPOWER_RIG_DEVICES is not set");
    ck_assert_int_eq(sscanf(devs, "%31s", dev), 1);
    /* 64 + 64 + 8 slots of 8 KiB: two full endpoints and one minimal */
    setenv("UCX_HIPOWER_MEM_BUDGET", "1114112", 1);
    setenv("UCX_HIPOWER_SLOTS", "64", 1);
    setenv("UCX_HIPOWER_MIN_SLOTS", "8", 1);
    setenv("UCX_HIPOWER_SLOT_SIZE", "8192", 1);
    open_side(&side_b, dev);
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side_b.iface;
    for (i = 0; i < 3; ++i) {
        ck_assert_int_eq(uct_ep_create(&params, &eps[i]), UCS_OK);
    }
    ck_assert_int_eq(uct_ep_create(&params, &eps[3]), UCS_ERR_NO_MEMORY);

    uct_ep_destroy(eps[1]);
    ck_assert_int_eq(uct_ep_create(&params, &eps[1]), UCS_OK);
    ck_assert_int_eq(uct_ep_create(&params, &eps[3]), UCS_ERR_NO_MEMORY);

    for (i = 0; i < 3; ++i) {
        uct_ep_destroy(eps[i]);
    }
    close_side(&side_b);
}
END_TEST

/*
 * RMA: put_short/bcopy/zcopy and get_bcopy/zcopy from A into memory
 * registered on B, every size class, each checked byte for byte along with
 * guard bytes around the target; then many operations outstanding at once.
 */
#define RMA_MAX     (4 * 1024 * 1024)
#define RMA_GUARD   0xEE

typedef struct {
    uint8_t          *local;      /* On A */
    uint8_t          *remote;     /* On B: the RMA target */
    uct_mem_h        local_memh, remote_memh;
    uct_rkey_bundle_t rkey;
} rma_bufs_t;

typedef struct {
    const void *src;
    size_t     length;
} rma_pack_arg_t;

static size_t rma_pack_cb(void *dest, void *arg)
{
    rma_pack_arg_t *pack = arg;

    memcpy(dest, pack->src, pack->length);
    return pack->length;
}

static void rma_unpack_cb(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        p[i] = (uint8_t)((i * 131) ^ (i >> 9) ^ (seed * 29));
    }
}

static void rma_setup(rma_bufs_t *b)
{
    uct_md_attr_t md_attr;
    void *rkey_buf;

    b->local  = malloc(RMA_MAX + 128);
    b->remote = malloc(RMA_MAX + 128);
    ck_assert(b->local != NULL && b->remote != NULL);
    ck_assert_int_eq(uct_md_mem_reg(side_a.md, b->local, RMA_MAX + 128,
                                    UCT_MD_MEM_ACCESS_ALL, &b->local_memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mem_reg(side_b.md, b->remote, RMA_MAX + 128,
                                    UCT_MD_MEM_ACCESS_ALL, &b->remote_memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_query(side_b.md, &md_attr), UCS_OK);
    rkey_buf = malloc(md_attr.rkey_packed_size);
    ck_assert_int_eq(uct_md_mkey_pack(side_b.md, b->remote_memh, rkey_buf),
                     UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(side_a.component, rkey_buf, &b->rkey),
                     UCS_OK);
    free(rkey_buf);
}

static void rma_cleanup(rma_bufs_t *b)
{
    uct_rkey_release(side_a.component, &b->rkey);
    uct_md_mem_dereg(side_a.md, b->local_memh);
    uct_md_mem_dereg(side_b.md, b->remote_memh);
    free(b->local);
    free(b->remote);
}

/* Waits for an operation's completion, or flushes A if it had none */
static void rma_wait(ucs_status_t status, uct_completion_t *comp,
                     const char *what, size_t length)
{
    ck_assert_msg(!UCS_STATUS_IS_ERR(status), "%s %zu: %s", what, length,
                  ucs_status_string(status));
    if ((status == UCS_INPROGRESS) && (comp != NULL)) {
        while (comp->count > 0) {
            progress(1, 0);
        }
        ck_assert_msg(comp->status == UCS_OK, "%s %zu completed with %s",
                      what, length, ucs_status_string(comp->status));
    }
    flush_all();
}

static void rma_check(const uint8_t *got, const uint8_t *want, size_t length,
                      const char *what)
{
    size_t i;

    for (i = 0; i < length; ++i) {
        ck_assert_msg(got[i] == want[i], "%s %zu: byte %zu is 0x%x, want 0x%x",
                      what, length, i, got[i], want[i]);
    }
    ck_assert_msg(got[-1] == RMA_GUARD && got[length] == RMA_GUARD,
                  "%s %zu: wrote outside the target", what, length);
}

static void rma_comp_init(uct_completion_t *comp)
{
    comp->func   = flush_comp_cb;
    comp->count  = 1;
    comp->status = UCS_OK;
}

START_TEST(test_rma)
{
    static const size_t sizes[] = {1, 7, 8, 64, 100, 112, 127, 1000, 4096,
                                   8191, 8192, 65537, 1024 * 1024 + 3,
                                   RMA_MAX - 64};
    enum { PUT_SHORT, PUT_BCOPY, PUT_ZCOPY, GET_BCOPY, GET_ZCOPY, NUM_OPS };
    static const char *names[] = {"put_short", "put_bcopy", "put_zcopy",
                                  "get_bcopy", "get_zcopy"};
    uct_completion_t comp;
    rma_pack_arg_t pack;
    ucs_status_t status;
    uct_iov_t iov[3];
    uint64_t raddr;
    uint8_t *src, *dst, *want;
    size_t i, len, part;
    ssize_t packed;
    rma_bufs_t b;
    int op, k;

    setup_pairs(1);
    rma_setup(&b);
    want = malloc(RMA_MAX);

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        len = sizes[i];
        for (op = 0; op < NUM_OPS; ++op) {
            if (((op == PUT_SHORT) && (len > side_a.attr.cap.put.max_short)) ||
                ((op == PUT_BCOPY) && (len > side_a.attr.cap.put.max_bcopy)) ||
                ((op == GET_BCOPY) && (len > side_a.attr.cap.get.max_bcopy))) {
                continue;
            }

            /* Odd offsets on both sides, guard bytes around the target */
            src = b.local + 1 + (next_rand() % 32);
            dst = b.remote + 1 + (next_rand() % 32);
            if (op >= GET_BCOPY) {
                uint8_t *tmp = src;
                src = dst;
                dst = tmp;
            }
            memset(b.local, RMA_GUARD, RMA_MAX + 128);
            memset(b.remote, RMA_GUARD, RMA_MAX + 128);
            fill_pattern(src, len, (unsigned)(i * NUM_OPS + op));
            memcpy(want, src, len);
            raddr = (uintptr_t)((op >= GET_BCOPY) ? src : dst);
            rma_comp_init(&comp);

            /* Zero-copy splits the buffer into three iov entries */
            part = len / 3;
            for (k = 0; k < 3; ++k) {
                iov[k].buffer = ((op >= GET_BCOPY) ? dst : src) + k * part;
                iov[k].length = (k < 2) ? part : len - 2 * part;
                iov[k].memh   = b.local_memh;
                iov[k].stride = 0;
                iov[k].count  = 1;
            }

            switch (op) {
            case PUT_SHORT:
                do {
                    status = uct_ep_put_short(pairs[0].ep_a, src, len, raddr,
                                              b.rkey.rkey);
                    progress(1, 0);
                } while (status == UCS_ERR_NO_RESOURCE);
                rma_wait(status, NULL, names[op], len);
                break;
            case PUT_BCOPY:
                pack.src    = src;
                pack.length = len;
                do {
                    packed = uct_ep_put_bcopy(pairs[0].ep_a, rma_pack_cb,
                                              &pack, raddr, b.rkey.rkey);
                    progress(1, 0);
                } while (packed == UCS_ERR_NO_RESOURCE);
                ck_assert_int_eq(packed, len);
                rma_wait(UCS_OK, NULL, names[op], len);
                break;
            case PUT_ZCOPY:
            case GET_ZCOPY:
                do {
                    status = (op == PUT_ZCOPY) ?
                             uct_ep_put_zcopy(pairs[0].ep_a, iov, 3, raddr,
                                              b.rkey.rkey, &comp) :
                             uct_ep_get_zcopy(pairs[0].ep_a, iov, 3, raddr,
                                              b.rkey.rkey, &comp);
                    progress(1, 0);
                } while (status == UCS_ERR_NO_RESOURCE);
                rma_wait(status, &comp, names[op], len);
                break;
            case GET_BCOPY:
                do {
                    status = uct_ep_get_bcopy(pairs[0].ep_a, rma_unpack_cb, dst,
                                              len, raddr, b.rkey.rkey, &comp);
                    progress(1, 0);
                } while (status == UCS_ERR_NO_RESOURCE);
                rma_wait(status, &comp, names[op], len);
                break;
            }
            rma_check(dst, want, len, names[op]);
        }
    }

    /* Many writes outstanding, unsignaled, then one flush: each region
     * must hold its own pattern */
    memset(b.remote, RMA_GUARD, RMA_MAX + 128);
    for (k = 0; k < 200; ++k) {
        fill_pattern(b.local + 1 + k * 1000, 999, 1000 + k);
        iov[0].buffer = b.local + 1 + k * 1000;
        iov[0].length = 999;
        do {
            status = uct_ep_put_zcopy(pairs[0].ep_a, iov, 1,
                                      (uintptr_t)(b.remote + 1 + k * 1000),
                                      b.rkey.rkey, NULL);
            progress(1, 0);
        } while (status == UCS_ERR_NO_RESOURCE);
        ck_assert_int_eq(status, UCS_INPROGRESS);
    }
    flush_all();
    for (k = 0; k < 200; ++k) {
        ck_assert_msg(!memcmp(b.remote + 1 + k * 1000, b.local + 1 + k * 1000,
                              999), "outstanding put %d landed wrong", k);
    }

    /* 64-bit atomics on an aligned word of B's memory, if advertised */
    if (side_a.attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE) {
        uint64_t *word = (uint64_t*)(b.remote + 64), result = 0;
        uint64_t raddr64 = (uintptr_t)word;

        *word = 5;
        rma_comp_init(&comp);
        status = uct_ep_atomic64_fetch(pairs[0].ep_a, UCT_ATOMIC_OP_ADD, 3,
                                       &result, raddr64, b.rkey.rkey, &comp);
        rma_wait(status, &comp, "atomic fetch-add", 8);
        ck_assert_uint_eq(result, 5);
        ck_assert_uint_eq(*word, 8);
        status = uct_ep_atomic64_post(pairs[0].ep_a, UCT_ATOMIC_OP_ADD, 10,
                                      raddr64, b.rkey.rkey);
        rma_wait(status, NULL, "atomic add", 8);
        ck_assert_uint_eq(*word, 18);
        rma_comp_init(&comp);
        status = uct_ep_atomic_cswap64(pairs[0].ep_a, 18, 100, raddr64,
                                       b.rkey.rkey, &result, &comp);
        rma_wait(status, &comp, "atomic cswap", 8);
        ck_assert_uint_eq(result, 18);
        ck_assert_uint_eq(*word, 100);
        rma_comp_init(&comp);
        status = uct_ep_atomic_cswap64(pairs[0].ep_a, 5, 7, raddr64,
                                       b.rkey.rkey, &result, &comp);
        rma_wait(status, &comp, "atomic cswap (mismatch)", 8);
        ck_assert_uint_eq(result, 100);
        ck_assert_uint_eq(*word, 100);
        ck_assert_int_eq(uct_ep_atomic64_post(pairs[0].ep_a,
                                              UCT_ATOMIC_OP_XOR, 1, raddr64,
                                              b.rkey.rkey),
                         UCS_ERR_UNSUPPORTED);
        printf("atomics: fetch-add, add, compare-swap ok\n");
    }

    ck_assert_int_eq(ep_errors_a, 0);
    free(want);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/* A write with a bad rkey fails the endpoint: the operation completes with
 * an error, the error handler runs once, later operations fail at once */
START_TEST(test_bad_rkey_fails_endpoint)
{
    uct_completion_t comp;
    ucs_status_t status;
    uct_iov_t iov;
    rma_bufs_t b;
    unsigned spins;

    setup_pairs(1);
    rma_setup(&b);
    iov.buffer = b.local;
    iov.length = 4096;
    iov.memh   = b.local_memh;
    iov.stride = 0;
    iov.count  = 1;
    rma_comp_init(&comp);
    status = uct_ep_put_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)b.remote,
                              b.rkey.rkey ^ 0x5a5a00, &comp);
    ck_assert_int_eq(status, UCS_INPROGRESS);
    for (spins = 0; (comp.count > 0) && (spins < 100000000); ++spins) {
        progress(1, 0);
    }
    ck_assert_msg(comp.count == 0, "the failed write never completed");
    ck_assert_msg(comp.status != UCS_OK, "a write with a bad rkey succeeded");
    ck_assert_uint_eq(ep_errors_a, 1);

    /* Everything after fails without reaching the wire, no second report */
    ck_assert_int_eq(send_one(&pairs[0], 0, 1, 100, 1),
                     UCS_ERR_ENDPOINT_TIMEOUT);
    status = uct_ep_put_short(pairs[0].ep_a, b.local, 8, (uintptr_t)b.remote,
                              b.rkey.rkey);
    ck_assert_msg(UCS_STATUS_IS_ERR(status), "put on a failed ep: %s",
                  ucs_status_string(status));
    ck_assert_msg(UCS_STATUS_IS_ERR(uct_ep_flush(pairs[0].ep_a, 0, NULL)),
                  "flush of a failed endpoint succeeded");
    progress(1, 1);
    ck_assert_uint_eq(ep_errors_a, 1);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/* The peer's endpoint disappears (its process died): outstanding work fails
 * within the transport's retry bound, the handler runs once, pending
 * requests are handed back by purge */
static void purge_cb(uct_pending_req_t *req, void *arg)
{
    ++*(unsigned*)arg;
}

START_TEST(test_peer_gone)
{
    static pending_send_t req;
    uct_completion_t comp;
    ucs_status_t status;
    unsigned purged = 0;
    struct timespec t0, t1;
    double elapsed;
    uct_iov_t iov;
    rma_bufs_t b;
    int i;

    /* Retries: 4 x ~67 ms (UCX_HIPOWER_TIMEOUT is rounded up to 4.096us*2^n) */
    setenv("UCX_HIPOWER_TIMEOUT", "50ms", 1);
    setenv("UCX_HIPOWER_RETRY_COUNT", "3", 1);
    setup_pairs(1);
    unsetenv("UCX_HIPOWER_TIMEOUT");
    unsetenv("UCX_HIPOWER_RETRY_COUNT");
    rma_setup(&b);

    uct_ep_destroy(pairs[0].ep_b);
    pairs[0].ep_b = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* Fill the peer's slots so that the next send queues */
    hold_probability = 0;
    for (i = 0; i < 5000; ++i) {
        status = send_one(&pairs[0], 0, 1, 64, 1);
        if (status != UCS_OK) {
            break;
        }
    }
    ck_assert_int_eq(status, UCS_ERR_NO_RESOURCE);
    req.req.func = pending_cb;
    req.pair     = &pairs[0];
    req.pair_idx = 0;
    req.length   = 64;
    req.done     = 0;
    ck_assert_int_eq(uct_ep_pending_add(pairs[0].ep_a, &req.req, 0), UCS_OK);

    iov.buffer = b.local;
    iov.length = 65536;
    iov.memh   = b.local_memh;
    iov.stride = 0;
    iov.count  = 1;
    rma_comp_init(&comp);
    do {
        status = uct_ep_put_zcopy(pairs[0].ep_a, &iov, 1, (uintptr_t)b.remote,
                                  b.rkey.rkey, &comp);
        progress(1, 0);
    } while (status == UCS_ERR_NO_RESOURCE);

    do {
        progress(1, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    } while ((ep_errors_a == 0) && (elapsed < 60));
    printf("peer gone: error reported after %.2f s: %s\n", elapsed,
           ucs_status_string(ep_error_status));
    ck_assert_msg(ep_errors_a == 1, "no error within 60 s");
    ck_assert_msg(!UCS_STATUS_IS_ERR(status) || (status == UCS_ERR_ENDPOINT_TIMEOUT),
                  "put_zcopy: %s", ucs_status_string(status));
    if (status == UCS_INPROGRESS) {
        ck_assert_int_eq(comp.count, 0);
        ck_assert_msg(comp.status != UCS_OK, "the lost write succeeded");
    }
    ck_assert_int_eq(req.done, 0);
    uct_ep_pending_purge(pairs[0].ep_a, purge_cb, &purged);
    ck_assert_uint_eq(purged, 1);

    progress(1, 0);
    ck_assert_uint_eq(ep_errors_a, 1);
    rma_cleanup(&b);
    teardown_pairs();
}
END_TEST

/* Progresses B alone for @a seconds (its own reads complete meanwhile) */
static void progress_b_for(double seconds)
{
    struct timespec start, t;

    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        progress(0, 1);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - start.tv_sec) +
             (t.tv_nsec - start.tv_nsec) * 1e-9 < seconds);
}

/* B arms until the interface lets it sleep */
static void arm_b_until_ok(const char *what)
{
    ucs_status_t status;
    unsigned spins = 0;

    do {
        status = uct_iface_event_arm(side_b.iface, UCT_EVENT_RECV |
                                                   UCT_EVENT_SEND_COMP);
        if (status == UCS_ERR_BUSY) {
            progress(0, 1);
        }
    } while ((status == UCS_ERR_BUSY) && (++spins < 10000000));
    ck_assert_msg(status == UCS_OK, "%s: arm: %s", what,
                  ucs_status_string(status));
}

/* Progresses B until it has received one message more than @a before */
static void wait_received_one(uint64_t before)
{
    unsigned spins;

    for (spins = 0; (received == before) && (spins < 10000000); ++spins) {
        progress(0, 1);
    }
    ck_assert_uint_eq(received, before + 1);
}

/*
 * Sets up @a num pairs for a wakeup test and @a pfd to poll B's event fd;
 * returns 0 (pairs torn down) in a mode without one, which must say so.
 */
static int wakeup_setup(int num, struct pollfd *pfd)
{
    int fd;

    setup_pairs(num);
    hold_probability = 0;
    if (!(side_b.attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD)) {
        ck_assert_int_eq(uct_iface_event_fd_get(side_b.iface, &fd),
                         UCS_ERR_UNSUPPORTED);
        printf("wakeup: no event fd in this mode\n");
        teardown_pairs();
        return 0;
    }
    ck_assert(side_b.attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
    ck_assert_int_eq(uct_iface_event_fd_get(side_b.iface, &fd), UCS_OK);
    pfd->fd     = fd;
    pfd->events = POLLIN;
    return 1;
}

/*
 * Wakeup: B sleeps on its event fd (push mode), A sends one message at a
 * time; each must make the fd readable, and the fd must stay quiet while
 * nothing is sent. Pull mode offers no events and says so.
 */
START_TEST(test_wakeup)
{
    struct pollfd pfd;
    uint64_t before;
    unsigned n;

    if (!wakeup_setup(2, &pfd)) {
        return;
    }

    for (n = 0; n < 20; ++n) {
        arm_b_until_ok("before the message");

        pfd.revents = 0;
        ck_assert_msg(poll(&pfd, 1, 50) == 0, "woken with nothing sent");

        /* One message on one of the endpoints, announced by the flush */
        before = received;
        ck_assert_int_eq(send_one(&pairs[n % 2], n % 2, 1, 100 + n, 1),
                         UCS_OK);
        flush_all();
        ck_assert_msg(poll(&pfd, 1, 10000) == 1, "message %u did not wake "
                      "the receiver within 10 s", n);
        wait_received_one(before);
    }
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

/*
 * Wakeup after an arm that did not sleep: B's arm posts its sleep handshake
 * and returns BUSY; A sees B's new generation and wakes it with its next
 * message, which B takes by progress, awake. A wakes each generation once,
 * so B's next sleep must not reuse that generation: A's message after it
 * has to make B's fd readable, each of several rounds.
 */
START_TEST(test_wakeup_after_busy_arm)
{
    struct pollfd pfd;
    ucs_status_t status;
    uint64_t before;
    unsigned n;

    if (!wakeup_setup(1, &pfd)) {
        return;
    }

    for (n = 0; n < 5; ++n) {
        /* The arm that starts a generation cannot sleep at once: its
         * handshake is on the wire */
        status = uct_iface_event_arm(side_b.iface, UCT_EVENT_RECV |
                                                   UCT_EVENT_SEND_COMP);
        ck_assert_msg(status == UCS_ERR_BUSY, "round %u: first arm: %s", n,
                      ucs_status_string(status));
        progress_b_for(0.5);

        /* A's message, sent after B's generation reached it, wakes B;
         * B takes it (and the wake-up) awake */
        before = received;
        ck_assert_int_eq(send_one(&pairs[0], 0, 1, 64 + n, 1), UCS_OK);
        flush_all();
        wait_received_one(before);
        progress_b_for(0.5);

        /* Asleep now: A's next message must wake B */
        arm_b_until_ok("before the second message");
        before = received;
        ck_assert_int_eq(send_one(&pairs[0], 0, 1, 200 + n, 1), UCS_OK);
        flush_all();
        pfd.revents = 0;
        ck_assert_msg(poll(&pfd, 1, 10000) == 1, "round %u: a message sent "
                      "after a busy arm did not wake the receiver within "
                      "10 s", n);
        wait_received_one(before);
    }
    printf("wakeup after a busy arm: %u rounds woken\n", n);
    ck_assert_int_eq(errors, 0);
    teardown_pairs();
}
END_TEST

int main(void)
{
    Suite *suite   = suite_create("hipower transport");
    TCase *tcase   = tcase_create("uct");
    TCase *destroy = tcase_create("destroy");
    TCase *wakeup  = tcase_create("wakeup");
    SRunner *runner;
    int failed;

    tcase_set_timeout(tcase, 1800);
    tcase_add_test(tcase, test_flush_means_delivered);
    tcase_add_test(tcase, test_slot_exhaustion_pending);
    tcase_add_test(tcase, test_slots_not_held);
    tcase_add_test(tcase, test_sixteen_endpoints);
    tcase_add_test(tcase, test_random_traffic);
    tcase_add_test(tcase, test_memory_budget);
    tcase_add_test(tcase, test_rma);
    tcase_add_test(tcase, test_bad_rkey_fails_endpoint);
    tcase_add_test(tcase, test_peer_gone);
    suite_add_tcase(suite, tcase);
    /* Its own case, so it can run alone (CK_RUN_CASE=wakeup) */
    tcase_set_timeout(wakeup, 600);
    tcase_add_test(wakeup, test_wakeup);
    tcase_add_test(wakeup, test_wakeup_after_busy_arm);
    suite_add_tcase(suite, wakeup);
    /* Its own case, so valgrind can run it alone (CK_RUN_CASE=destroy) */
    tcase_set_timeout(destroy, 1800);
    tcase_add_test(destroy, test_destroy_in_flight);
    suite_add_tcase(suite, destroy);

    runner = srunner_create(suite);
    srunner_run_all(runner, CK_VERBOSE);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return (failed == 0) ? EXIT_SUCCESS : EXIT_FAILURE;
}
