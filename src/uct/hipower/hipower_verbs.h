/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The thin verbs layer: queue pairs, completion queues and their channel,
 * what the port tells about speed. Everything that decides *what* to post
 * lives elsewhere; the data path's posts and polls (ibv_post_send(),
 * ibv_poll_cq(), ibv_post_recv(), inline through the context's operation
 * table) are made where they are decided, as UCX's rc_verbs does in its
 * _impl.h. Memory: hipower_md.c and hipower_window.c; device events:
 * hipower_md_async.c.
 */
#ifndef UCT_HIPOWER_VERBS_H_
#define UCT_HIPOWER_VERBS_H_

#include "hipower_iface.h"


/* Creates an RC QP on the interface's CQ and moves it to INIT */
ucs_status_t uct_hipower_qp_create(uct_hipower_iface_t *iface,
                                   struct ibv_qp **qp_p);

/* Moves a QP through RTR to RTS towards the peer's QP */
ucs_status_t uct_hipower_qp_connect(uct_hipower_iface_t *iface,
                                    struct ibv_qp *qp,
                                    const uct_hipower_device_addr_t *peer,
                                    uint32_t peer_qp_num, enum ibv_mtu path_mtu);

void uct_hipower_qp_destroy(uct_hipower_iface_t *iface, struct ibv_qp *qp);

/* Moves a QP to the error state: what it has outstanding completes now,
 * flushed, and the device stops touching its buffers */
void uct_hipower_qp_to_error(uct_hipower_iface_t *iface, struct ibv_qp *qp);

/* Creates a CQ of @a cqe entries whose events go to @a channel (or
 * nowhere); @a what names it in the error */
ucs_status_t uct_hipower_cq_create(uct_hipower_iface_t *iface, unsigned cqe,
                                   struct ibv_comp_channel *channel,
                                   const char *what, struct ibv_cq **cq_p);

void uct_hipower_cq_destroy(uct_hipower_iface_t *iface, struct ibv_cq *cq);

/* Asks for an event on @a cq's channel at its next completion */
ucs_status_t uct_hipower_cq_arm(uct_hipower_iface_t *iface, struct ibv_cq *cq);

/* A completion channel whose fd does not block (the interface's event fd) */
ucs_status_t uct_hipower_channel_create(uct_hipower_iface_t *iface,
                                        struct ibv_comp_channel **channel_p);

void uct_hipower_channel_destroy(struct ibv_comp_channel *channel);

/* Takes and acknowledges every event of @a channel, so its fd goes quiet */
ucs_status_t uct_hipower_channel_drain(uct_hipower_iface_t *iface,
                                       struct ibv_comp_channel *channel);

/* Names, for messages */
const char *uct_hipower_wc_status_name(enum ibv_wc_status status);
const char *uct_hipower_port_state_name(enum ibv_port_state state);

/* Link latency and bandwidth of the port, from its speed and width */
void uct_hipower_port_estimate(const struct ibv_port_attr *port_attr,
                               size_t mtu, double *latency_p,
                               double *bandwidth_p);

static inline size_t uct_hipower_mtu_bytes(enum ibv_mtu mtu)
{
    return 128ul << mtu;
}

#endif
