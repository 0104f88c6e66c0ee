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

#include "hipower_md.h"
#include "hipower_wire.h"

#include <infiniband/verbs.h>


/* Completions taken off the send CQ where they cannot be handled (in
 * connect_to_ep(), in the send path, by the bundles' flush): the next
 * poll hands them out first, in their order. The send path may add to it
 * from the user's thread and from UCX's async thread (UCP's wire-up), so
 * a spin lock guards it. Only the uct_hipower_cq_stash_*() functions
 * write it. */
typedef struct uct_hipower_cq_stash {
    struct ibv_wc                *wcs;
    unsigned                     count;
    unsigned                     size;
    int                          lock;
} uct_hipower_cq_stash_t;


/* What the verbs layer needs of an interface: its device's memory domain,
 * port and GID, the device's name for messages, and the QPs' parameters
 * from UCX_HIPOWER_* (sl, traffic class, timeouts, retries, READ depth).
 * The interface holds one; its constructor writes all but the stash. */
typedef struct uct_hipower_verbs_dev {
    uct_hipower_md_t             *md;
    const char                   *dev_name;
    uint8_t                      port_num;
    const struct ibv_port_attr   *port_attr;
    const union ibv_gid          *gid;
    struct {
        unsigned                 max_send_wr;
        unsigned                 max_send_sge;
        unsigned                 max_recv_wr;  /* Receives each QP keeps */
        size_t                   max_inline;
        unsigned                 gid_index;
        unsigned                 sl;
        unsigned                 traffic_class;
        unsigned                 hop_limit;
        uint8_t                  ack_timeout;  /* IB encoding */
        unsigned                 retry_count;
        unsigned                 rnr_retry_count;
        uint8_t                  max_rd_atomic; /* Device's RDMA READ depth */
    } qp;
    uct_hipower_cq_stash_t       stash;        /* Of the send CQ */
} uct_hipower_verbs_dev_t;


/* Creates an RC QP whose sends complete on @a send_cq and whose receives
 * on @a recv_cq, and moves it to INIT */
ucs_status_t uct_hipower_qp_create(const uct_hipower_verbs_dev_t *dev,
                                   struct ibv_cq *send_cq,
                                   struct ibv_cq *recv_cq,
                                   struct ibv_qp **qp_p);

/* Moves a QP through RTR to RTS towards the peer's QP */
ucs_status_t uct_hipower_qp_connect(const uct_hipower_verbs_dev_t *dev,
                                    struct ibv_qp *qp,
                                    const uct_hipower_device_addr_t *peer,
                                    uint32_t peer_qp_num, enum ibv_mtu path_mtu);

void uct_hipower_qp_destroy(const uct_hipower_verbs_dev_t *dev,
                            struct ibv_qp *qp);

/* Moves a QP to the error state: what it has outstanding completes now,
 * flushed, and the device stops touching its buffers */
void uct_hipower_qp_to_error(const uct_hipower_verbs_dev_t *dev,
                             struct ibv_qp *qp);

/* Creates a CQ of @a cqe entries whose events go to @a channel (or
 * nowhere); @a what names it in the error */
ucs_status_t uct_hipower_cq_create(const uct_hipower_verbs_dev_t *dev,
                                   unsigned cqe,
                                   struct ibv_comp_channel *channel,
                                   const char *what, struct ibv_cq **cq_p);

void uct_hipower_cq_destroy(const uct_hipower_verbs_dev_t *dev,
                            struct ibv_cq *cq);

/* Asks for an event on @a cq's channel at its next completion */
ucs_status_t uct_hipower_cq_arm(const uct_hipower_verbs_dev_t *dev,
                                struct ibv_cq *cq);

/* A completion channel whose fd does not block (the interface's event fd) */
ucs_status_t uct_hipower_channel_create(const uct_hipower_verbs_dev_t *dev,
                                        struct ibv_comp_channel **channel_p);

void uct_hipower_channel_destroy(struct ibv_comp_channel *channel);

/* Takes and acknowledges every event of @a channel, so its fd goes quiet */
ucs_status_t uct_hipower_channel_drain(const uct_hipower_verbs_dev_t *dev,
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

/* An empty stash; uct_hipower_cq_stash_cleanup() frees its array */
void uct_hipower_cq_stash_init(uct_hipower_verbs_dev_t *dev);
void uct_hipower_cq_stash_cleanup(uct_hipower_verbs_dev_t *dev);

/* How many completions are set aside now: a hint without the lock (the
 * hot path's test before it takes them) */
static inline unsigned
uct_hipower_cq_stash_count(const uct_hipower_verbs_dev_t *dev)
{
    return *(volatile const unsigned*)&dev->stash.count;
}

/* Sets a send completion aside for the next poll of the send CQ (which
 * hands the ones set aside out first, in their order): taken off the CQ
 * where it cannot be handled, in connect_to_ep() and in the send path.
 * From the user's thread and from UCX's async thread (UCP's wire-up). */
ucs_status_t uct_hipower_cq_stash_wc(uct_hipower_verbs_dev_t *dev,
                                     const struct ibv_wc *wc);

/* Polls @a cq and sets what it finds aside, once, or until it is empty
 * with @a drain; returns how many it took off the CQ (the caller counts
 * them as completions) */
unsigned uct_hipower_cq_stash_poll(uct_hipower_verbs_dev_t *dev,
                                   struct ibv_cq *cq, int drain);

/* Takes the completions set aside (their array and its size); returns
 * how many. The caller hands the array back with
 * uct_hipower_cq_stash_return() once it handled them: kept for the next
 * time, unless more were set aside meanwhile into a new one. */
unsigned uct_hipower_cq_stash_take(uct_hipower_verbs_dev_t *dev,
                                   struct ibv_wc **wcs_p, unsigned *size_p);

void uct_hipower_cq_stash_return(uct_hipower_verbs_dev_t *dev,
                                 struct ibv_wc *wcs, unsigned size);

/* Handles the completions set aside, first first, with @a cb, which
 * returns 0 for one it does not handle: that one and the ones after it
 * stay, in their order. @a cb must not set completions aside. Returns how
 * many were handled. */
typedef int (*uct_hipower_cq_reap_cb_t)(void *arg, struct ibv_wc *wc);
unsigned uct_hipower_cq_stash_reap(uct_hipower_verbs_dev_t *dev,
                                   uct_hipower_cq_reap_cb_t cb, void *arg);

#endif
