/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_handshake.h"

#include <assert.h>
#include <string.h>


_Static_assert(sizeof(hipower_hs_iface_addr_t) == 28,
               "the interface address fits UCP's v1 address format (63)");
_Static_assert(sizeof(hipower_hs_msg_t) == HIPOWER_HS_MSG_SIZE,
               "a handshake message is HIPOWER_HS_MSG_SIZE bytes");


void hipower_hs_iface_addr_pack(hipower_hs_iface_addr_t *addr, int family,
                                const void *ip, uint16_t port_be,
                                uint64_t uuid)
{
    memset(addr, 0, sizeof(*addr));
    addr->version = HIPOWER_HS_VERSION;
    addr->family  = (uint8_t)family;
    addr->port    = port_be;
    addr->uuid    = uuid;
    memcpy(addr->ip, ip, (family == HIPOWER_HS_AF_INET) ? 4 : 16);
}

const char *hipower_hs_iface_addr_check(const hipower_hs_iface_addr_t *addr,
                                        size_t length)
{
    if ((length != 0) && (length != sizeof(*addr))) {
        return "interface address of another size";
    }
    if (addr->version != HIPOWER_HS_VERSION) {
        return "interface address of another handshake version";
    }
    if ((addr->family != HIPOWER_HS_AF_INET) &&
        (addr->family != HIPOWER_HS_AF_INET6)) {
        return "unknown address family";
    }
    if ((addr->port == 0) || (addr->uuid == 0)) {
        return "no listener in the interface address";
    }
    return NULL;
}

void hipower_hs_msg_pack(hipower_hs_msg_t *msg, hipower_hs_type_t type,
                         hipower_hs_reason_t reason, uint64_t src_uuid,
                         uint64_t dst_uuid, uint64_t conn_sn,
                         const void *dev_addr, uint8_t dev_addr_len,
                         const void *ep_addr, uint8_t ep_addr_len)
{
    assert(dev_addr_len <= HIPOWER_HS_DEV_ADDR_MAX);
    assert(ep_addr_len <= HIPOWER_HS_EP_ADDR_MAX);

    /* All of it, padding included: no byte of our memory leaks out */
    memset(msg, 0, sizeof(*msg));
    msg->magic        = HIPOWER_HS_MAGIC;
    msg->version      = HIPOWER_HS_VERSION;
    msg->type         = (uint8_t)type;
    msg->reason       = (uint8_t)reason;
    msg->length       = HIPOWER_HS_MSG_SIZE;
    msg->src_uuid     = src_uuid;
    msg->dst_uuid     = dst_uuid;
    msg->conn_sn      = conn_sn;
    if ((type != HIPOWER_HS_REJ) && (type != HIPOWER_HS_ACK)) {
        msg->dev_addr_len = dev_addr_len;
        msg->ep_addr_len  = ep_addr_len;
        memcpy(msg->dev_addr, dev_addr, dev_addr_len);
        memcpy(msg->ep_addr, ep_addr, ep_addr_len);
    }
}

const char *hipower_hs_msg_check(const hipower_hs_msg_t *msg, size_t length,
                                 unsigned type_mask, uint64_t my_uuid,
                                 uint8_t dev_addr_len, uint8_t ep_addr_len)
{
    if (length != HIPOWER_HS_MSG_SIZE) {
        return "short message";
    }
    if (msg->magic != HIPOWER_HS_MAGIC) {
        return "not a hipower handshake (bad magic)";
    }
    if (msg->version != HIPOWER_HS_VERSION) {
        return "another handshake version";
    }
    if (msg->length != HIPOWER_HS_MSG_SIZE) {
        return "bad length field";
    }
    if ((msg->type >= 32) || !(type_mask & (1u << msg->type))) {
        return "unexpected message type";
    }
    if (msg->src_uuid == 0) {
        return "no sender id";
    }
    if (msg->dst_uuid != my_uuid) {
        return "meant for another interface (stale address?)";
    }
    if (msg->type == HIPOWER_HS_REJ) {
        if ((msg->reason == HIPOWER_HS_REASON_NONE) ||
            (msg->reason >= HIPOWER_HS_REASON_LAST)) {
            return "unknown reject reason";
        }
        return NULL;
    }
    if (msg->reason != HIPOWER_HS_REASON_NONE) {
        return "reason in a message that is no reject";
    }
    if (msg->type == HIPOWER_HS_ACK) {
        return ((msg->dev_addr_len | msg->ep_addr_len) != 0) ?
               "addresses in an acknowledgement" : NULL;
    }
    if ((msg->dev_addr_len != dev_addr_len) ||
        (msg->ep_addr_len != ep_addr_len)) {
        return "addresses of another size (another hipower version?)";
    }
    return NULL;
}

hipower_hs_action_t hipower_hs_decide(uint64_t my_uuid, uint64_t peer_uuid,
                                      hipower_hs_local_t local)
{
    if (peer_uuid == my_uuid) {
        /* Our own endpoint to ourselves: its REQ is the other half of it,
         * never an endpoint to match it with */
        return HIPOWER_HS_ACCEPT_NEW;
    }

    switch (local) {
    case HIPOWER_HS_LOCAL_NONE:
        return HIPOWER_HS_ACCEPT_NEW;
    case HIPOWER_HS_LOCAL_IDLE:
        return HIPOWER_HS_ACCEPT_LOCAL;
    case HIPOWER_HS_LOCAL_CONNECTING:
        /* Crossed: the connection the smaller id started survives. The
         * larger takes the peer's REQ on its endpoint (its own REQ will be
         * told CROSSED), the smaller refuses it and waits for its REP. */
        return (my_uuid > peer_uuid) ? HIPOWER_HS_ACCEPT_LOCAL :
                                       HIPOWER_HS_REJECT_CROSSED;
    case HIPOWER_HS_LOCAL_CONNECTED:
    default:
        /* A crossed REQ that arrives after our own got its REP, or a
         * replay: that pair has its connection */
        return HIPOWER_HS_REJECT_DUPLICATE;
    }
}

hipower_hs_rej_action_t hipower_hs_on_reject(uint64_t my_uuid,
                                             uint64_t peer_uuid,
                                             hipower_hs_reason_t reason,
                                             int connected)
{
    if ((reason != HIPOWER_HS_REASON_CROSSED) &&
        (reason != HIPOWER_HS_REASON_DUPLICATE)) {
        return HIPOWER_HS_REJ_FAIL;
    }

    /* Only the side with the smaller id refuses a crossed REQ, so only the
     * larger is told CROSSED; it took (or will take) the peer's REQ */
    if ((reason == HIPOWER_HS_REASON_CROSSED) && (my_uuid < peer_uuid)) {
        return HIPOWER_HS_REJ_FAIL;
    }
    if (connected) {
        return HIPOWER_HS_REJ_DONE;
    }
    /* CROSSED before the peer's REQ came: it is under way. DUPLICATE while
     * not connected: the peer holds a connection for the pair that we do
     * not know of (a peer gone astray, or an impostor): no wait helps. */
    return (reason == HIPOWER_HS_REASON_CROSSED) ? HIPOWER_HS_REJ_AWAIT_PEER :
                                                   HIPOWER_HS_REJ_FAIL;
}

const char *hipower_hs_reason_str(unsigned reason)
{
    static const char *names[] = {
        [HIPOWER_HS_REASON_NONE]        = "none",
        [HIPOWER_HS_REASON_CROSSED]     = "crossed connect, the peer's wins",
        [HIPOWER_HS_REASON_BAD_REQUEST] = "malformed request",
        [HIPOWER_HS_REASON_WRONG_IFACE] = "meant for another interface",
        [HIPOWER_HS_REASON_DUPLICATE]   = "already connected",
        [HIPOWER_HS_REASON_NO_RESOURCE] = "no endpoint available",
        [HIPOWER_HS_REASON_MISMATCH]    = "addresses do not fit (settings)",
        [HIPOWER_HS_REASON_CLOSING]     = "interface closing",
        [HIPOWER_HS_REASON_FOREIGN]     = "from another host than the peer's address"
    };

    return (reason < HIPOWER_HS_REASON_LAST) ? names[reason] : "unknown";
}
