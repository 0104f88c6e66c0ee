/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "fixture.h"

#include <hipower_wire.h>


/* uct_config_modify() of a hipower setting by its name without the
 * "HIPOWER_" prefix, on every UCX: 1.13 matches the bare name, while
 * UCX >= 1.18 (uct_config_modify passes the table's prefix to the parser)
 * matches only "HIPOWER_<name>". */
ucs_status_t fixture_config_modify(void *config, const char *name,
                                   const char *value)
{
    char full_name[128];
    ucs_status_t status;

    snprintf(full_name, sizeof(full_name), "HIPOWER_%s", name);
    status = uct_config_modify(config, full_name, value);
    if (status != UCS_ERR_NO_ELEM) {
        return status;
    }
    return uct_config_modify(config, name, value);
}


side_t  side_a, side_b;
pair_t  pairs[MAX_PAIRS];
int     num_pairs;
void    *held[MAX_HELD];
int     num_held;
double  hold_probability;
/* UCX_HIPOWER_HOLD_SLOTS of the interfaces: most tests check that kept
 * descriptors stay intact, so they let handlers keep them */
const char *hold_slots = "y";
/* UCX_HIPOWER_CONNECT_TO_IFACE and its settings for the next open_side():
 * NULL leaves the environment's (check_connect.c sets them) */
const char *cm_connect_to_iface;
const char *cm_timeout;
const char *cm_max_conns;
uint64_t desc_offered;       /* Messages offered with FLAG_DESC */
int     errors;
uint64_t received, rx_bytes;
zbuf_t  zbufs[ZCOPY_BUFS];
static unsigned rand_state = 12345;
unsigned ep_errors_a;        /* Interface A's error handler calls */
ucs_status_t ep_error_status;
unsigned ep_errors_b;        /* Interface B's error handler calls */
ucs_status_t ep_error_status_b;

unsigned next_rand(void)
{
    rand_state = rand_state * 1103515245u + 12345u;
    return (rand_state >> 8) & 0xffffff;
}

uint32_t checksum(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    while (n-- > 0) {
        h = (h ^ *p++) * 16777619u;
    }
    return h;
}

void fill_message(void *buf, uint32_t pair, uint32_t seq, uint8_t am_id,
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
int message_intact(const void *data, size_t length, uint8_t am_id)
{
    const msg_hdr_t *hdr = data;

    return (length >= MSG_HDR_SIZE) && (hdr->length == length) &&
           (hdr->am_id == am_id) && (hdr->pair < (uint32_t)num_pairs) &&
           (hdr->checksum == checksum((const uint8_t*)(hdr + 1),
                                      length - MSG_HDR_SIZE));
}

ucs_status_t am_handler(void *arg, void *data, size_t length,
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
void release_held(int keep)
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

void progress(int a, int b)
{
    if (a) {
        uct_worker_progress(side_a.worker);
    }
    if (b) {
        uct_worker_progress(side_b.worker);
    }
}

int error_handler_purges;
unsigned error_handler_returns;
pthread_t error_handler_thread;

static void error_handler_purge_cb(uct_pending_req_t *req, void *arg)
{
}

ucs_status_t ep_error_handler(void *arg, uct_ep_h ep,
                              ucs_status_t status)
{
    if (error_handler_purges) {
        /* What UCP 1.13's handler does for an endpoint it discards
         * (ucp_discard_lane_ff()): an endpoint operation from within */
        uct_ep_pending_purge(ep, error_handler_purge_cb, NULL);
    }
    error_handler_thread = pthread_self();
    ++error_handler_returns;
    if (arg == &side_a) {
        ++ep_errors_a;
        ep_error_status = status;
    } else if (arg == &side_b) {
        ++ep_errors_b;
        ep_error_status_b = status;
    }
    return UCS_OK;
}

/* HIPOWER_TEST_TL: the transport under test, hipower unless a case
 * compares (check_many.c runs rc_verbs the same way) */
const char *fixture_tl(void)
{
    const char *tl = getenv("HIPOWER_TEST_TL");

    return ((tl != NULL) && (tl[0] != '\0')) ? tl : "hipower";
}

const char *fixture_component(void)
{
    /* UCX's verbs transports belong to its "ib" component */
    return strcmp(fixture_tl(), "hipower") ? "ib" : "hipower";
}

void open_side(side_t *side, const char *dev)
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
        if (!strcmp(comp_attr.name, fixture_component())) {
            comp = components[i];
        }
    }
    ck_assert_msg(comp != NULL, "component %s of transport %s not loaded "
                  "(hipower-run?)", fixture_component(), fixture_tl());
    side->component = comp;

    ck_assert_int_eq(uct_md_config_read(comp, NULL, NULL, &md_config), UCS_OK);
    ck_assert_int_eq(uct_md_open(comp, md_name, md_config, &side->md), UCS_OK);
    uct_config_release(md_config);
    uct_release_component_list(components);

    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                              &side->async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(side->async, UCS_THREAD_MODE_SINGLE,
                                       &side->worker), UCS_OK);

    ck_assert_int_eq(uct_md_iface_config_read(side->md, fixture_tl(), NULL,
                                              NULL, &iface_config), UCS_OK);
    if (!strcmp(fixture_tl(), "hipower")) {
        ck_assert_int_eq(fixture_config_modify(iface_config, "HOLD_SLOTS",
                                               hold_slots), UCS_OK);
        if (cm_connect_to_iface != NULL) {
            /* The rig's netdevs behind the GIDs, or what HIPOWER_TEST_CM_NETDEV
             * names (the simulator's devices have none: "lo") */
            ck_assert_int_eq(fixture_config_modify(iface_config,
                                                   "CONNECT_TO_IFACE",
                                                   cm_connect_to_iface),
                             UCS_OK);
            ck_assert_int_eq(fixture_config_modify(iface_config, "CM_NETDEV",
                                                   getenv("HIPOWER_TEST_CM_NETDEV") ?
                                                   getenv("HIPOWER_TEST_CM_NETDEV") :
                                                   "auto"), UCS_OK);
        }
        if (cm_timeout != NULL) {
            ck_assert_int_eq(fixture_config_modify(iface_config,
                                                   "CONNECT_TIMEOUT",
                                                   cm_timeout), UCS_OK);
        }
        if (cm_max_conns != NULL) {
            ck_assert_int_eq(fixture_config_modify(iface_config,
                                                   "CM_MAX_CONNS",
                                                   cm_max_conns), UCS_OK);
        }
    }
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
    params.mode.device.tl_name  = fixture_tl();
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

void close_side(side_t *side)
{
    uct_iface_close(side->iface);
    uct_worker_destroy(side->worker);
    ucs_async_context_destroy(side->async);
    uct_md_close(side->md);
    free(side->dev_addr);
}

void connect_pair_from(pair_t *pair, side_t *from)
{
    uct_ep_params_t params;
    void *addr_a, *addr_b;

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = from->iface;
    ck_assert_int_eq(uct_ep_create(&params, &pair->ep_a), UCS_OK);
    params.iface      = side_b.iface;
    ck_assert_int_eq(uct_ep_create(&params, &pair->ep_b), UCS_OK);

    addr_a = malloc(from->attr.ep_addr_len);
    addr_b = malloc(side_b.attr.ep_addr_len);
    ck_assert_int_eq(uct_ep_get_address(pair->ep_a, addr_a), UCS_OK);
    ck_assert_int_eq(uct_ep_get_address(pair->ep_b, addr_b), UCS_OK);
    ck_assert_int_eq(uct_ep_connect_to_ep(pair->ep_a, side_b.dev_addr, addr_b),
                     UCS_OK);
    ck_assert_int_eq(uct_ep_connect_to_ep(pair->ep_b, from->dev_addr, addr_a),
                     UCS_OK);
    free(addr_a);
    free(addr_b);
    pair->next_seq     = 0;
    pair->expected_seq = 0;
}

void connect_pair(pair_t *pair)
{
    connect_pair_from(pair, &side_a);
}

void setup_pairs(int n)
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
    ep_errors_b = 0;
    received = rx_bytes = desc_offered = 0;
}

void flush_comp_cb(uct_completion_t *self)
{
}

/* Flushes every endpoint and waits, progressing only the sender side once
 * the flush is under way */
void flush_all(void)
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
            /* Refused while a bundle waits for a slot of the receiver
             * (UCX_HIPOWER_BUNDLE), which only its progress gives back */
            progress(1, status == UCS_ERR_NO_RESOURCE);
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
void iface_flush_a(void)
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

void teardown_pairs(void)
{
    int i;

    release_held(0);
    for (i = 0; i < num_pairs; ++i) {
        if (pairs[i].ep_a != NULL) {
            uct_ep_destroy(pairs[i].ep_a);
        }
        if (pairs[i].ep_b != NULL) {
            uct_ep_destroy(pairs[i].ep_b);
        }
    }
    close_side(&side_a);
    close_side(&side_b);
}

size_t pack_cb(void *dest, void *arg)
{
    pack_arg_t *pack = arg;

    memcpy(dest, pack->buf, pack->length);
    return pack->length;
}

void zbuf_comp_cb(uct_completion_t *self)
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
ucs_status_t send_one(pair_t *pair, int pair_idx, uint8_t am_id,
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

void alloc_zbufs(void)
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

void free_zbufs(void)
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

uint64_t total_sent(void)
{
    uint64_t n = 0;
    int i;

    for (i = 0; i < num_pairs; ++i) {
        n += pairs[i].next_seq;
    }
    return n;
}

void wait_all_received(void)
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

size_t fit_length(size_t length, int layout)
{
    size_t max = (layout == 0) ? side_a.attr.cap.am.max_short :
                 (layout == 1) ? side_a.attr.cap.am.max_bcopy :
                                 side_a.attr.cap.am.max_zcopy;

    return (length < MSG_HDR_SIZE) ? MSG_HDR_SIZE :
           (length > max)          ? max : length;
}

size_t random_length(int layout)
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

size_t rma_pack_cb(void *dest, void *arg)
{
    rma_pack_arg_t *pack = arg;

    memcpy(dest, pack->src, pack->length);
    return pack->length;
}

void rma_unpack_cb(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        p[i] = (uint8_t)((i * 131) ^ (i >> 9) ^ (seed * 29));
    }
}

void rma_setup(rma_bufs_t *b)
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

void rma_cleanup(rma_bufs_t *b)
{
    uct_rkey_release(side_a.component, &b->rkey);
    uct_md_mem_dereg(side_a.md, b->local_memh);
    uct_md_mem_dereg(side_b.md, b->remote_memh);
    free(b->local);
    free(b->remote);
}

/* Waits for an operation's completion, or flushes A if it had none */
void rma_wait(ucs_status_t status, uct_completion_t *comp, const char *what,
              size_t length)
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

void rma_check(const uint8_t *got, const uint8_t *want, size_t length,
               const char *what)
{
    size_t i;

    /* Compare in one go and look for the byte only on a mismatch: every
     * passing ck_assert reports its location to Check's parent process
     * (a write to a pipe), which per byte of 4 MB cost minutes in the rig */
    if (memcmp(got, want, length) != 0) {
        for (i = 0; (i < length) && (got[i] == want[i]); ++i) {
        }
        ck_abort_msg("%s %zu: byte %zu is 0x%x, want 0x%x", what, length, i,
                     got[i], want[i]);
    }
    ck_assert_msg(got[-1] == RMA_GUARD && got[length] == RMA_GUARD,
                  "%s %zu: wrote outside the target", what, length);
}

void rma_comp_init(uct_completion_t *comp)
{
    comp->func   = flush_comp_cb;
    comp->count  = 1;
    comp->status = UCS_OK;
}

/* Progresses B alone for @a seconds (its own reads complete meanwhile) */
void progress_b_for(double seconds)
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
void arm_b_until_ok(const char *what)
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
void wait_received_one(uint64_t before)
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
int wakeup_setup(int num, struct pollfd *pfd)
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

ucs_status_t pending_cb(uct_pending_req_t *self)
{
    pending_send_t *ps = ucs_container_of(self, pending_send_t, req);
    ucs_status_t status;

    status = send_one(ps->pair, ps->pair_idx, 1, ps->length, 1);
    if (status == UCS_OK) {
        ps->done = 1;
    }
    return status;
}

void purge_cb(uct_pending_req_t *req, void *arg)
{
    ++*(unsigned*)arg;
}

double now_sec(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

void case_timeout(TCase *tcase, double seconds)
{
    const char *bound;
    double max;

    if (getenv("HIPOWER_TEST_ON_SIM") != NULL) {
        bound = getenv("HIPOWER_SIM_CASE_TIMEOUT");
        max   = (bound != NULL) ? strtod(bound, NULL) : 120;
        if ((max > 0) && (max < seconds)) {
            seconds = max;
        }
    }
    tcase_set_timeout(tcase, seconds);
}

/* The number of slots B's endpoint of pair @a p gives its peer */
unsigned b_slots(int p)
{
    uct_hipower_ep_addr_t addr;

    ck_assert_uint_eq(side_b.attr.ep_addr_len, sizeof(addr));
    ck_assert_int_eq(uct_ep_get_address(pairs[p].ep_b,
                                        (uct_ep_addr_t*)&addr), UCS_OK);
    return addr.num_slots;
}
