/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The connection handshake's rules (hipower_handshake, issue 27), without
 * a device or a socket: the interface address and the messages are checked
 * field by field, a rejected message costs nothing, and the decisions of
 * both sides, run by the transport's own functions over every order in
 * which two endpoints can start, be created and get each other's messages,
 * always end in exactly one connection that both use.
 */
#include "hipower_handshake.h"
#include "hipower_test.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#define UUID_A      0x1111222233334444ull
#define UUID_B      0x9999000011112222ull
#define DEV_LEN     19
#define EP_LEN      61


static void pack_req(hipower_hs_msg_t *msg, uint64_t src, uint64_t dst)
{
    uint8_t dev[DEV_LEN], ep[EP_LEN];

    memset(dev, 0xd1, sizeof(dev));
    memset(ep, 0xe1, sizeof(ep));
    hipower_hs_msg_pack(msg, HIPOWER_HS_REQ, HIPOWER_HS_REASON_NONE, src, dst,
                        7, dev, sizeof(dev), ep, sizeof(ep));
}

static const char *check_req(const hipower_hs_msg_t *msg, uint64_t me)
{
    return hipower_hs_msg_check(msg, sizeof(*msg), 1u << HIPOWER_HS_REQ, me,
                                DEV_LEN, EP_LEN);
}

START_TEST(test_hs_iface_addr)
{
    hipower_hs_iface_addr_t addr, bad;
    uint8_t ip4[4] = {10, 77, 0, 1};
    uint8_t ip6[16];

    ck_assert_uint_eq(sizeof(addr), 28);
    hipower_hs_iface_addr_pack(&addr, HIPOWER_HS_AF_INET, ip4, 0x3412,
                               UUID_A);
    ck_assert_ptr_null(hipower_hs_iface_addr_check(&addr, 0));
    ck_assert_ptr_null(hipower_hs_iface_addr_check(&addr, sizeof(addr)));
    ck_assert_mem_eq(addr.ip, ip4, 4);
    ck_assert_uint_eq(addr.ip[4], 0);
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&addr, 27));
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&addr, 0 + 8));

    memset(ip6, 0xab, sizeof(ip6));
    hipower_hs_iface_addr_pack(&addr, HIPOWER_HS_AF_INET6, ip6, 1, UUID_B);
    ck_assert_ptr_null(hipower_hs_iface_addr_check(&addr, 0));
    ck_assert_mem_eq(addr.ip, ip6, 16);

    bad = addr; bad.version = HIPOWER_HS_VERSION + 1;
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&bad, 0));
    bad = addr; bad.family = 5;
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&bad, 0));
    bad = addr; bad.port = 0;
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&bad, 0));
    bad = addr; bad.uuid = 0;
    ck_assert_ptr_nonnull(hipower_hs_iface_addr_check(&bad, 0));
}
END_TEST

START_TEST(test_hs_msg_fields)
{
    hipower_hs_msg_t msg, bad;
    unsigned i;

    ck_assert_uint_eq(sizeof(msg), HIPOWER_HS_MSG_SIZE);
    pack_req(&msg, UUID_A, UUID_B);
    ck_assert_ptr_null(check_req(&msg, UUID_B));
    ck_assert_uint_eq(msg.dev_addr[0], 0xd1);
    ck_assert_uint_eq(msg.ep_addr[EP_LEN - 1], 0xe1);
    /* Nothing past the addresses: no byte of the sender's memory leaks */
    ck_assert_uint_eq(msg.dev_addr[DEV_LEN], 0);
    ck_assert_uint_eq(msg.ep_addr[EP_LEN], 0);

    /* Meant for B, read by A: a stale address */
    ck_assert_ptr_nonnull(check_req(&msg, UUID_A));
    /* Read short */
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg) - 1,
                                               1u << HIPOWER_HS_REQ, UUID_B,
                                               DEV_LEN, EP_LEN));
    /* A REQ where only answers are expected */
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               (1u << HIPOWER_HS_REP) |
                                               (1u << HIPOWER_HS_REJ),
                                               UUID_B, DEV_LEN, EP_LEN));
    /* Addresses of another size (another hipower version) */
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_REQ, UUID_B,
                                               DEV_LEN + 1, EP_LEN));
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_REQ, UUID_B,
                                               DEV_LEN, EP_LEN - 1));

    bad = msg; bad.magic ^= 1;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.version++;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.length = 64;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.type = 200;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.type = 0;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.src_uuid = 0;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.reason = HIPOWER_HS_REASON_CROSSED;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.ep_addr_len = 255;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));
    bad = msg; bad.dev_addr_len = 255;
    ck_assert_ptr_nonnull(check_req(&bad, UUID_B));

    /* Every single-bit flip of the header is refused or changes nothing
     * that matters (the reserved bytes and the connection number) */
    for (i = 0; i < 8 * 40; ++i) {
        bad = msg;
        ((uint8_t*)&bad)[i / 8] ^= (uint8_t)(1u << (i % 8));
        if (check_req(&bad, UUID_B) == NULL) {
            ck_assert_msg(((i / 8 >= 9) && (i / 8 < 12)) ||   /* reserved */
                          ((i / 8 >= 16) && (i / 8 < 24)) ||  /* src id */
                          ((i / 8 >= 32) && (i / 8 < 40)),    /* conn_sn */
                          "flipped bit %u accepted", i);
        }
    }
}
END_TEST

START_TEST(test_hs_reject)
{
    hipower_hs_msg_t msg;
    uint8_t junk[EP_LEN];
    unsigned reason;

    memset(junk, 0x5a, sizeof(junk));
    hipower_hs_msg_pack(&msg, HIPOWER_HS_REJ, HIPOWER_HS_REASON_CROSSED,
                        UUID_B, UUID_A, 3, junk, DEV_LEN, junk, EP_LEN);
    /* A reject carries no addresses, whatever it was given */
    ck_assert_uint_eq(msg.dev_addr_len, 0);
    ck_assert_uint_eq(msg.ep_addr[0], 0);
    ck_assert_ptr_null(hipower_hs_msg_check(&msg, sizeof(msg),
                                            1u << HIPOWER_HS_REJ, UUID_A,
                                            DEV_LEN, EP_LEN));
    for (reason = 0; reason < 256; ++reason) {
        msg.reason = (uint8_t)reason;
        if ((reason == HIPOWER_HS_REASON_NONE) ||
            (reason >= HIPOWER_HS_REASON_LAST)) {
            ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                                       1u << HIPOWER_HS_REJ,
                                                       UUID_A, DEV_LEN,
                                                       EP_LEN));
        }
        ck_assert_ptr_nonnull(hipower_hs_reason_str(reason));
    }
}
END_TEST

/* The acknowledgement: no addresses, no reason; one that carries either
 * is refused, and it is never taken where another type is expected */
START_TEST(test_hs_ack)
{
    hipower_hs_msg_t msg;
    uint8_t junk[EP_LEN];

    memset(junk, 0x5a, sizeof(junk));
    hipower_hs_msg_pack(&msg, HIPOWER_HS_ACK, HIPOWER_HS_REASON_NONE,
                        UUID_B, UUID_A, 7, junk, DEV_LEN, junk, EP_LEN);
    ck_assert_uint_eq(msg.dev_addr_len, 0);
    ck_assert_uint_eq(msg.ep_addr_len, 0);
    ck_assert_uint_eq(msg.ep_addr[0], 0);
    ck_assert_ptr_null(hipower_hs_msg_check(&msg, sizeof(msg),
                                            1u << HIPOWER_HS_ACK, UUID_A,
                                            0, 0));
    /* Not where a REP or REJ is expected, nor for another interface */
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               (1u << HIPOWER_HS_REP) |
                                               (1u << HIPOWER_HS_REJ),
                                               UUID_A, DEV_LEN, EP_LEN));
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_ACK, UUID_B,
                                               0, 0));
    msg.ep_addr_len = 1;
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_ACK, UUID_A,
                                               0, 0));
    msg.ep_addr_len = 0;
    msg.reason      = HIPOWER_HS_REASON_CROSSED;
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_ACK, UUID_A,
                                               0, 0));
    /* Version 1 peers (no ACK) are refused by version */
    msg.reason  = HIPOWER_HS_REASON_NONE;
    msg.version = 1;
    ck_assert_ptr_nonnull(hipower_hs_msg_check(&msg, sizeof(msg),
                                               1u << HIPOWER_HS_ACK, UUID_A,
                                               0, 0));
}
END_TEST

START_TEST(test_hs_decide)
{
    /* Self: never matched with a local endpoint */
    ck_assert_int_eq(hipower_hs_decide(UUID_A, UUID_A,
                                       HIPOWER_HS_LOCAL_CONNECTING),
                     HIPOWER_HS_ACCEPT_NEW);
    ck_assert_int_eq(hipower_hs_decide(UUID_A, UUID_B, HIPOWER_HS_LOCAL_NONE),
                     HIPOWER_HS_ACCEPT_NEW);
    ck_assert_int_eq(hipower_hs_decide(UUID_A, UUID_B, HIPOWER_HS_LOCAL_IDLE),
                     HIPOWER_HS_ACCEPT_LOCAL);
    ck_assert_int_eq(hipower_hs_decide(UUID_A, UUID_B,
                                       HIPOWER_HS_LOCAL_CONNECTED),
                     HIPOWER_HS_REJECT_DUPLICATE);
    /* Crossed: exactly one of the two takes the other's request */
    ck_assert_int_eq(hipower_hs_decide(UUID_A, UUID_B,
                                       HIPOWER_HS_LOCAL_CONNECTING),
                     HIPOWER_HS_REJECT_CROSSED);
    ck_assert_int_eq(hipower_hs_decide(UUID_B, UUID_A,
                                       HIPOWER_HS_LOCAL_CONNECTING),
                     HIPOWER_HS_ACCEPT_LOCAL);
    /* CROSSED is only ever said to the larger id */
    ck_assert_int_eq(hipower_hs_on_reject(UUID_A, UUID_B,
                                          HIPOWER_HS_REASON_CROSSED, 0),
                     HIPOWER_HS_REJ_FAIL);
    ck_assert_int_eq(hipower_hs_on_reject(UUID_B, UUID_A,
                                          HIPOWER_HS_REASON_CROSSED, 0),
                     HIPOWER_HS_REJ_AWAIT_PEER);
    ck_assert_int_eq(hipower_hs_on_reject(UUID_B, UUID_A,
                                          HIPOWER_HS_REASON_MISMATCH, 0),
                     HIPOWER_HS_REJ_FAIL);
    ck_assert_int_eq(hipower_hs_on_reject(UUID_B, UUID_A,
                                          HIPOWER_HS_REASON_DUPLICATE, 0),
                     HIPOWER_HS_REJ_FAIL);
}
END_TEST


/*
 * Two sides, A and B, each with (at most) one endpoint to the other: the
 * model keeps what hipower_cm.c keeps, and asks the functions under test
 * what to do. Messages travel on separate TCP connections, so any message
 * in flight may arrive next. Every order is explored.
 */
enum { EP_NONE, EP_IDLE, EP_CONNECTING, EP_AWAIT, EP_CONNECTED, EP_FAILED };

typedef struct {
    int         state;
    int         conn;        /* Which REQ connected it: 0 = A's, 1 = B's */
    int         exists;      /* The user's endpoint was created */
    int         internal;    /* Connected before the user created it */
} model_side_t;

typedef struct {
    int         type;        /* 0: none, else hipower_hs_type_t */
    int         reason;
} model_msg_t;

typedef struct {
    model_side_t side[2];
    model_msg_t  req[2];     /* REQ of side i, to side 1-i */
    model_msg_t  ans[2];     /* Answer to side i's REQ */
    int          start[2];   /* Side i starts (sends) once created */
    int          create[2];  /* Side i's user creates its endpoint */
} model_t;

static uint64_t model_uuid[2] = {UUID_A, UUID_B};
static unsigned model_finals, model_failures;

static hipower_hs_local_t model_local(const model_side_t *s)
{
    if (!s->exists && !s->internal) {
        return HIPOWER_HS_LOCAL_NONE;
    }
    switch (s->state) {
    case EP_IDLE:
        return HIPOWER_HS_LOCAL_IDLE;
    case EP_CONNECTING:
    case EP_AWAIT:
        return HIPOWER_HS_LOCAL_CONNECTING;
    default:
        return HIPOWER_HS_LOCAL_CONNECTED;
    }
}

static void model_explore(model_t m);

static void model_step_req(model_t m, int i)
{
    int j            = 1 - i;
    model_side_t *s  = &m.side[j];

    m.req[i].type = 0;
    switch (hipower_hs_decide(model_uuid[j], model_uuid[i], model_local(s))) {
    case HIPOWER_HS_ACCEPT_NEW:
        s->internal = 1;
        /* fall through */
    case HIPOWER_HS_ACCEPT_LOCAL:
        s->state      = EP_CONNECTED;
        s->conn       = i;
        m.ans[i].type = HIPOWER_HS_REP;
        break;
    case HIPOWER_HS_REJECT_CROSSED:
        m.ans[i].type   = HIPOWER_HS_REJ;
        m.ans[i].reason = HIPOWER_HS_REASON_CROSSED;
        break;
    default:
        m.ans[i].type   = HIPOWER_HS_REJ;
        m.ans[i].reason = HIPOWER_HS_REASON_DUPLICATE;
        break;
    }
    model_explore(m);
}

static void model_step_ans(model_t m, int i)
{
    model_side_t *s = &m.side[i];
    int connected   = (s->state == EP_CONNECTED);

    if (m.ans[i].type == HIPOWER_HS_REP) {
        /* A REP to an endpoint connected already is an error */
        s->state = connected ? EP_FAILED : EP_CONNECTED;
        s->conn  = i;
    } else {
        switch (hipower_hs_on_reject(model_uuid[i], model_uuid[1 - i],
                                     (hipower_hs_reason_t)m.ans[i].reason,
                                     connected)) {
        case HIPOWER_HS_REJ_DONE:
            break;
        case HIPOWER_HS_REJ_AWAIT_PEER:
            s->state = EP_AWAIT;
            break;
        default:
            s->state = EP_FAILED;
            break;
        }
    }
    m.ans[i].type = 0;
    model_explore(m);
}

static void model_explore(model_t m)
{
    int progressed = 0;
    model_t next;
    int i;

    for (i = 0; i < 2; ++i) {
        if (m.create[i]) {
            /* The user's endpoint: takes an internal one, or starts IDLE */
            next = m;
            next.create[i]         = 0;
            next.side[i].exists    = 1;
            if (!next.side[i].internal) {
                next.side[i].state = EP_IDLE;
            }
            model_explore(next);
            progressed = 1;
        }
        if (m.start[i] && m.side[i].exists) {
            next = m;
            next.start[i] = 0;
            if (next.side[i].state == EP_IDLE) {
                next.side[i].state = EP_CONNECTING;
                next.req[i].type   = HIPOWER_HS_REQ;
            }
            model_explore(next);
            progressed = 1;
        }
        if (m.req[i].type != 0) {
            model_step_req(m, i);
            progressed = 1;
        }
        if (m.ans[i].type != 0) {
            model_step_ans(m, i);
            progressed = 1;
        }
    }

    if (progressed) {
        return;
    }

    /* Quiescent: both ends of one connection, or nothing started */
    ++model_finals;
    for (i = 0; i < 2; ++i) {
        if ((m.side[i].state == EP_FAILED) || (m.side[i].state == EP_AWAIT) ||
            (m.side[i].state == EP_CONNECTING)) {
            ++model_failures;
            return;
        }
    }
    if ((m.side[0].state == EP_CONNECTED) !=
        (m.side[1].state == EP_CONNECTED)) {
        ++model_failures;
        return;
    }
    if ((m.side[0].state == EP_CONNECTED) &&
        (m.side[0].conn != m.side[1].conn)) {
        ++model_failures;
    }
}

START_TEST(test_hs_every_order)
{
    unsigned starts, swap;
    model_t m;

    /* Both id orders (A smaller, then B smaller), every subset of sides
     * that send, endpoints created in any order */
    for (swap = 0; swap < 2; ++swap) {
        for (starts = 1; starts < 4; ++starts) {
            memset(&m, 0, sizeof(m));
            m.create[0] = m.create[1] = 1;
            m.start[0]  = !!(starts & 1);
            m.start[1]  = !!(starts & 2);
            model_finals = model_failures = 0;
            if (swap) {
                /* Same code, ids the other way round */
                model_uuid[0] = UUID_B;
                model_uuid[1] = UUID_A;
            }
            model_explore(m);
            ck_assert_uint_gt(model_finals, 0);
            ck_assert_msg(model_failures == 0, "sends %u, ids %s: %u of %u "
                          "orders end without one shared connection", starts,
                          swap ? "B<A" : "A<B", model_failures, model_finals);
        }
    }
    model_uuid[0] = UUID_A;
    model_uuid[1] = UUID_B;
}
END_TEST

Suite *hipower_handshake_suite(void)
{
    Suite *suite = suite_create("handshake");
    TCase *tcase = tcase_create("rules");

    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, test_hs_iface_addr);
    tcase_add_test(tcase, test_hs_msg_fields);
    tcase_add_test(tcase, test_hs_reject);
    tcase_add_test(tcase, test_hs_ack);
    tcase_add_test(tcase, test_hs_decide);
    tcase_add_test(tcase, test_hs_every_order);
    suite_add_tcase(suite, tcase);
    return suite;
}
