/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The thin verbs layer: queue pair life cycle and what the port tells about
 * speed. Everything that decides *what* to post lives elsewhere.
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

/* Link latency and bandwidth of the port, from its speed and width */
void uct_hipower_port_estimate(const struct ibv_port_attr *port_attr,
                               size_t mtu, double *latency_p,
                               double *bandwidth_p);

static inline size_t uct_hipower_mtu_bytes(enum ibv_mtu mtu)
{
    return 128ul << mtu;
}

#endif
