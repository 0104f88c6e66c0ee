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

/* Reads every event of @a channel (non-blocking) and acknowledges them on
 * @a cq, its only CQ; returns how many. From any thread. */
unsigned uct_hipower_channel_take(struct ibv_comp_channel *channel,
                                  struct ibv_cq *cq);

/* Sets a send completion aside for the next poll of the send CQ (which
 * hands the ones set aside out first, in their order): taken off the CQ
 * where it cannot be handled, in connect_to_ep() and in the send path.
 * From the user's thread and from UCX's async thread (UCP's wire-up). */
ucs_status_t uct_hipower_cq_stash_wc(uct_hipower_iface_t *iface,
                                     const struct ibv_wc *wc);

/* Polls the send CQ and sets what it finds aside, once, or until it is
 * empty with @a drain; returns how many */
unsigned uct_hipower_cq_stash_poll(uct_hipower_iface_t *iface, int drain);

/* Takes the completions set aside (their array and its size); returns
 * how many. The caller hands the array back with
 * uct_hipower_cq_stash_return() once it handled them: kept for the next
 * time, unless more were set aside meanwhile into a new one. */
unsigned uct_hipower_cq_stash_take(uct_hipower_iface_t *iface,
                                   struct ibv_wc **wcs_p, unsigned *size_p);

void uct_hipower_cq_stash_return(uct_hipower_iface_t *iface,
                                 struct ibv_wc *wcs, unsigned size);

/* Handles the completions set aside, first first, with @a cb, which
 * returns 0 for one it does not handle: that one and the ones after it
 * stay, in their order. @a cb must not set completions aside. Returns how
 * many were handled. */
typedef int (*uct_hipower_cq_reap_cb_t)(uct_hipower_iface_t *iface,
                                        struct ibv_wc *wc);
unsigned uct_hipower_cq_stash_reap(uct_hipower_iface_t *iface,
                                   uct_hipower_cq_reap_cb_t cb);

#endif
