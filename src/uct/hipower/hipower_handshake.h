/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_HANDSHAKE_H_
#define UCT_HIPOWER_HANDSHAKE_H_

#include <stddef.h>
#include <stdint.h>

/*
 * The connection handshake (issue 27, docs/protocol.md "Connection
 * establishment"): how an endpoint created from a peer's interface address
 * (UCT_IFACE_FLAG_CONNECT_TO_IFACE) gets its RC QP connected without any
 * other UCX transport. Plain C, no sockets and no device: the messages,
 * their checks, and the decisions both sides take; hipower_cm.c moves the
 * bytes over a TCP connection and acts on the decisions.
 *
 * One exchange per connection: the side that sends first (active) opens a
 * TCP connection to the address in the peer's interface address and sends
 * a REQ holding its device and endpoint addresses; the listener (passive)
 * acknowledges it at once (ACK, from its async thread), then connects an
 * endpoint of its own to them and answers a REP holding its addresses, or
 * a REJ with a reason (from its progress, whenever its process calls it). Both then own one RC connection,
 * exactly as if UCX had exchanged the addresses (uct_ep_connect_to_ep()).
 *
 * Which endpoint a REQ connects: endpoints to one peer interface are
 * numbered by creation on each side (conn_sn, ucs_conn_match), and the
 * n-th endpoint of A to B is paired with the n-th of B to A, as UCX's tcp
 * and ud pair theirs. If both send their REQ at once, one connection
 * survives: the one the side with the smaller interface id started (the
 * other side takes the incoming REQ on its endpoint and is told CROSSED).
 *
 * Nothing a peer writes is trusted: a message is fixed-size, every field
 * is checked (magic, version, type, declared lengths, that it is meant for
 * this interface) before one of its addresses is used, and the addresses
 * themselves are then checked as uct_ep_connect_to_ep() checks them.
 */

#define HIPOWER_HS_MAGIC           0x4d435048u  /* "HPCM" */
/* 2: the passive side acknowledges a request at once (HIPOWER_HS_ACK) */
#define HIPOWER_HS_VERSION         2
#define HIPOWER_HS_MSG_SIZE        128
#define HIPOWER_HS_DEV_ADDR_MAX    24
#define HIPOWER_HS_EP_ADDR_MAX     64

/* Address families of the handshake listener */
#define HIPOWER_HS_AF_INET         4
#define HIPOWER_HS_AF_INET6        6


/*
 * The interface address (uct_iface_get_address()): where the interface
 * listens for handshakes, and a random id of this opening of it. 28 bytes:
 * UCP's default address format (v1) holds at most 63.
 */
typedef struct hipower_hs_iface_addr {
    uint8_t     version;   /* HIPOWER_HS_VERSION */
    uint8_t     family;    /* HIPOWER_HS_AF_xx */
    uint16_t    port;      /* Network byte order */
    uint64_t    uuid;      /* Never 0 */
    uint8_t     ip[16];    /* IPv4 in the first 4 bytes */
} __attribute__((packed)) hipower_hs_iface_addr_t;

typedef enum {
    HIPOWER_HS_REQ         = 1,
    HIPOWER_HS_REP         = 2,
    HIPOWER_HS_REJ         = 3,
    /* "Your REQ is here; the answer follows when my process gets to it":
     * sent by the listener's async handler the moment a whole, valid REQ
     * is read, whatever its process is doing. From then on the active side
     * waits for the REP as long as the connection lives (TCP keepalive
     * tells a dead host), not for UCX_HIPOWER_CONNECT_TIMEOUT: a peer that
     * computes is alive (docs/protocol.md, "Liveness"). No addresses. */
    HIPOWER_HS_ACK         = 4
} hipower_hs_type_t;

/* Why a REQ was refused */
typedef enum {
    HIPOWER_HS_REASON_NONE        = 0,
    HIPOWER_HS_REASON_CROSSED     = 1, /* Ours is under way, and ours wins */
    HIPOWER_HS_REASON_BAD_REQUEST = 2, /* Malformed */
    HIPOWER_HS_REASON_WRONG_IFACE = 3, /* Meant for another interface id */
    HIPOWER_HS_REASON_DUPLICATE   = 4, /* That pair is connected already */
    HIPOWER_HS_REASON_NO_RESOURCE = 5, /* No endpoint can be made now */
    HIPOWER_HS_REASON_MISMATCH    = 6, /* Addresses do not fit (settings) */
    HIPOWER_HS_REASON_CLOSING     = 7, /* The interface is closing */
    HIPOWER_HS_REASON_FOREIGN     = 8, /* A pair of a peer whose address
                                          names another host */
    HIPOWER_HS_REASON_LAST
} hipower_hs_reason_t;

/* Every message: 128 bytes, host byte order but for the magic's check */
typedef struct hipower_hs_msg {
    uint32_t    magic;
    uint8_t     version;
    uint8_t     type;          /* hipower_hs_type_t */
    uint8_t     reason;        /* REJ: hipower_hs_reason_t; else 0 */
    uint8_t     dev_addr_len;
    uint8_t     ep_addr_len;
    uint8_t     reserved[3];
    uint32_t    length;        /* HIPOWER_HS_MSG_SIZE */
    uint64_t    src_uuid;      /* The sender's interface id */
    uint64_t    dst_uuid;      /* The receiver's, as its address said */
    uint64_t    conn_sn;       /* Which endpoint pair (see above) */
    uint8_t     dev_addr[HIPOWER_HS_DEV_ADDR_MAX];
    uint8_t     ep_addr[HIPOWER_HS_EP_ADDR_MAX];
} __attribute__((packed)) hipower_hs_msg_t;


/* What the passive side's local endpoint for (peer, conn_sn) is doing */
typedef enum {
    HIPOWER_HS_LOCAL_NONE,        /* None: the user has not made it yet */
    HIPOWER_HS_LOCAL_IDLE,        /* Made, not connecting */
    HIPOWER_HS_LOCAL_CONNECTING,  /* Its own REQ is out */
    HIPOWER_HS_LOCAL_CONNECTED    /* Connected (or failed) already */
} hipower_hs_local_t;

/* What to do with a valid REQ */
typedef enum {
    HIPOWER_HS_ACCEPT_NEW,        /* Connect a new internal endpoint */
    HIPOWER_HS_ACCEPT_LOCAL,      /* Connect the local endpoint */
    HIPOWER_HS_REJECT_CROSSED,    /* REJ(CROSSED): our own REQ wins */
    HIPOWER_HS_REJECT_DUPLICATE   /* REJ(DUPLICATE) */
} hipower_hs_action_t;

/* What an active endpoint does with a REJ to its REQ */
typedef enum {
    HIPOWER_HS_REJ_DONE,          /* Connected by the peer's REQ already */
    HIPOWER_HS_REJ_AWAIT_PEER,    /* The peer's crossed REQ will connect us */
    HIPOWER_HS_REJ_FAIL           /* The endpoint fails */
} hipower_hs_rej_action_t;


void hipower_hs_iface_addr_pack(hipower_hs_iface_addr_t *addr, int family,
                                const void *ip, uint16_t port_be,
                                uint64_t uuid);

/* NULL if @a addr (of @a length bytes, or unknown length if 0) is one this
 * version can connect to, else why not */
const char *hipower_hs_iface_addr_check(const hipower_hs_iface_addr_t *addr,
                                        size_t length);

/* Fills all of @a msg; @a dev_addr_len and @a ep_addr_len are bounded by
 * the maxima (asserted) */
void hipower_hs_msg_pack(hipower_hs_msg_t *msg, hipower_hs_type_t type,
                         hipower_hs_reason_t reason, uint64_t src_uuid,
                         uint64_t dst_uuid, uint64_t conn_sn,
                         const void *dev_addr, uint8_t dev_addr_len,
                         const void *ep_addr, uint8_t ep_addr_len);

/*
 * NULL if @a msg (@a length bytes read) is a well-formed message of a type
 * in @a type_mask (bits 1 << type) meant for the interface @a my_uuid,
 * with address lengths @a dev_addr_len and @a ep_addr_len (REQ and REP;
 * a REJ and an ACK carry none), else why not.
 */
const char *hipower_hs_msg_check(const hipower_hs_msg_t *msg, size_t length,
                                 unsigned type_mask, uint64_t my_uuid,
                                 uint8_t dev_addr_len, uint8_t ep_addr_len);

/* The decision on a valid REQ from @a peer_uuid */
hipower_hs_action_t hipower_hs_decide(uint64_t my_uuid, uint64_t peer_uuid,
                                      hipower_hs_local_t local);

/* The decision on a valid REJ to our REQ */
hipower_hs_rej_action_t hipower_hs_on_reject(uint64_t my_uuid,
                                             uint64_t peer_uuid,
                                             hipower_hs_reason_t reason,
                                             int connected);

const char *hipower_hs_reason_str(unsigned reason);

#endif
