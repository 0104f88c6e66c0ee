/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_WIRE_H_
#define UCT_HIPOWER_WIRE_H_

#include <ucs/sys/compiler_def.h>
#include <infiniband/verbs.h>
#include <stdint.h>

/*
 * What crosses the wire in connection setup: the addresses UCX carries
 * between peers. Only plain types, so that a test can play a peer.
 */

/* Where a peer reaches this interface's device */
typedef struct uct_hipower_device_addr {
    union ibv_gid                gid;
    uint16_t                     lid;
    uint8_t                      link_layer; /* IBV_LINK_LAYER_xx */
} UCS_S_PACKED uct_hipower_device_addr_t;


/* What the peer's endpoint needs to send to this one and recycle its slots */
typedef struct uct_hipower_ep_addr {
    uint32_t                     qp_num;
    uint64_t                     slots_addr;      /* Our receive slots */
    uint32_t                     slots_rkey;      /* Window: REMOTE_WRITE, our
                                                     slots, our QP only */
    uint16_t                     num_slots;
    uint32_t                     slot_stride;     /* Bytes between slots */
    uint32_t                     trailer_offset;  /* Of the trailer in a slot */
    uint32_t                     align;           /* Of a message's data */
    uint32_t                     align_offset;
    uint64_t                     ctrl_read_addr;  /* consumed + published */
    uint32_t                     ctrl_read_rkey;  /* REMOTE_READ only */
    uint64_t                     ctrl_write_addr; /* written_view + words */
    uint32_t                     ctrl_write_rkey; /* REMOTE_WRITE */
    uint8_t                      notify;          /* uct_hipower_notify_t */
    uint8_t                      path_mtu;        /* enum ibv_mtu */
    uint8_t                      flags;           /* UCT_HIPOWER_EP_ADDR_FLAG_xx */
} UCS_S_PACKED uct_hipower_ep_addr_t;

/* The endpoint takes bundle frames (hipower_bundle.h): its interface has
 * UCX_HIPOWER_BUNDLE=y */
#define UCT_HIPOWER_EP_ADDR_FLAG_BUNDLES  0x01
/* The endpoint takes filled slots (hipower_fill.h): UCX_HIPOWER_BUNDLE_FILL=y,
 * self mode */
#define UCT_HIPOWER_EP_ADDR_FLAG_FILL     0x02


/* What a peer writes into its state word in our control region; anything
 * else is ignored */
#define UCT_HIPOWER_PEER_STATE_READY   0x52454459ull /* "REDY" */
#define UCT_HIPOWER_PEER_STATE_CLOSED  0x434c4f53ull /* "CLOS" */

#endif
