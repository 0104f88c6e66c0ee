/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_verbs.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <sched.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>


ucs_status_t uct_hipower_qp_create(const uct_hipower_verbs_dev_t *dev,
                                   struct ibv_cq *send_cq,
                                   struct ibv_cq *recv_cq,
                                   struct ibv_qp **qp_p)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp_attr qp_attr;
    struct ibv_qp *qp;
    int ret;

    /* Nothing is ever received by SEND; the receive queue only takes the
     * peer's writes with immediate: its hello (hipower_post.c) and, in
     * self and push modes, its wake-ups (hipower_event.c) */
    memset(&init_attr, 0, sizeof(init_attr));
    init_attr.qp_type             = IBV_QPT_RC;
    init_attr.send_cq             = send_cq;
    init_attr.sq_sig_all          = 0;
    init_attr.cap.max_send_wr     = dev->qp.max_send_wr;
    init_attr.cap.max_send_sge    = dev->qp.max_send_sge;
    init_attr.cap.max_inline_data = dev->qp.max_inline;
    init_attr.recv_cq             = recv_cq;
    init_attr.cap.max_recv_wr     = dev->qp.max_recv_wr;
    init_attr.cap.max_recv_sge    = 1;

    qp = ibv_create_qp(dev->md->pd, &init_attr);
    if (qp == NULL) {
        ucs_error("hipower %s: ibv_create_qp(send queue %u, inline %zu) "
                  "failed: %m (UCX_HIPOWER_TX_QUEUE_LEN or "
                  "UCX_HIPOWER_TX_MAX_INLINE beyond what the device takes?)",
                  dev->dev_name, dev->qp.max_send_wr, dev->qp.max_inline);
        return UCS_ERR_IO_ERROR;
    }

    memset(&qp_attr, 0, sizeof(qp_attr));
    qp_attr.qp_state        = IBV_QPS_INIT;
    qp_attr.pkey_index      = 0;
    qp_attr.port_num        = dev->port_num;
    /* The QP admits RDMA; each MR narrows it to what the peer needs */
    qp_attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC;
    ret = ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        ucs_error("hipower %s: ibv_modify_qp(qp 0x%x, INIT) failed: %s",
                  dev->dev_name, qp->qp_num, strerror(ret));
        ibv_destroy_qp(qp);
        return UCS_ERR_IO_ERROR;
    }

    *qp_p = qp;
    return UCS_OK;
}

ucs_status_t uct_hipower_qp_connect(const uct_hipower_verbs_dev_t *dev,
                                    struct ibv_qp *qp,
                                    const uct_hipower_device_addr_t *peer,
                                    uint32_t peer_qp_num, enum ibv_mtu path_mtu)
{
    struct ibv_qp_attr qp_attr;
    char gid_str[64];
    int ret;

    if (peer->link_layer != dev->port_attr->link_layer) {
        ucs_error("hipower %s: qp 0x%x: the peer's link layer (%u) differs "
                  "from ours (%u)", dev->dev_name, qp->qp_num,
                  peer->link_layer, dev->port_attr->link_layer);
        return UCS_ERR_UNREACHABLE;
    }

    memset(&qp_attr, 0, sizeof(qp_attr));
    qp_attr.qp_state              = IBV_QPS_RTR;
    qp_attr.path_mtu              = path_mtu;
    qp_attr.dest_qp_num           = peer_qp_num;
    qp_attr.rq_psn                = 0;
    qp_attr.max_dest_rd_atomic    = dev->qp.max_rd_atomic;
    /* What a peer whose write finds none of our wake-up receives posted
     * waits before it retries: 163.84 ms (IBTA encoding 28). No honest
     * peer gets there (at most a few immediates are out per endpoint, and
     * we repost each as we poll it), so this only sets how long a peer
     * that makes us fall behind waits in all: (RNR_RETRY_COUNT + 1) times
     * this, about 1.1 s by default, before its endpoint fails */
    qp_attr.min_rnr_timer         = 28;
    qp_attr.ah_attr.port_num      = dev->port_num;
    qp_attr.ah_attr.sl            = dev->qp.sl;
    qp_attr.ah_attr.dlid          = peer->lid;
    if ((dev->port_attr->link_layer == IBV_LINK_LAYER_ETHERNET) ||
        (peer->gid.global.subnet_prefix != dev->gid->global.subnet_prefix)) {
        qp_attr.ah_attr.is_global      = 1;
        qp_attr.ah_attr.grh.dgid       = peer->gid;
        qp_attr.ah_attr.grh.sgid_index = dev->qp.gid_index;
        qp_attr.ah_attr.grh.hop_limit  = dev->qp.hop_limit;
        qp_attr.ah_attr.grh.traffic_class = dev->qp.traffic_class;
    }

    ret = ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE | IBV_QP_AV |
                                      IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                      IBV_QP_MIN_RNR_TIMER);
    if (ret != 0) {
        inet_ntop(AF_INET6, &peer->gid, gid_str, sizeof(gid_str));
        ucs_error("hipower %s: ibv_modify_qp(qp 0x%x, RTR to peer qp 0x%x gid "
                  "%s lid %u, gid index %u) failed: %s", dev->dev_name,
                  qp->qp_num, peer_qp_num, gid_str, peer->lid,
                  dev->qp.gid_index, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    qp_attr.qp_state      = IBV_QPS_RTS;
    qp_attr.sq_psn        = 0;
    qp_attr.timeout       = dev->qp.ack_timeout;
    qp_attr.retry_cnt     = dev->qp.retry_count;
    qp_attr.rnr_retry     = dev->qp.rnr_retry_count;
    qp_attr.max_rd_atomic = dev->qp.max_rd_atomic;
    ret = ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
                                      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (ret != 0) {
        ucs_error("hipower %s: ibv_modify_qp(qp 0x%x, RTS) failed: %s",
                  dev->dev_name, qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    return UCS_OK;
}

void uct_hipower_qp_destroy(const uct_hipower_verbs_dev_t *dev,
                            struct ibv_qp *qp)
{
    int ret = ibv_destroy_qp(qp);

    if (ret != 0) {
        ucs_warn("hipower %s: ibv_destroy_qp(0x%x) failed: %s",
                 dev->dev_name, qp->qp_num, strerror(ret));
    }
}

void uct_hipower_qp_to_error(const uct_hipower_verbs_dev_t *dev,
                             struct ibv_qp *qp)
{
    struct ibv_qp_attr qp_attr;
    int ret;

    memset(&qp_attr, 0, sizeof(qp_attr));
    qp_attr.qp_state = IBV_QPS_ERR;
    ret = ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE);
    if (ret != 0) {
        ucs_warn("hipower %s: ibv_modify_qp(qp 0x%x, ERR) failed: %s",
                 dev->dev_name, qp->qp_num, strerror(ret));
    }
}

void uct_hipower_port_estimate(const struct ibv_port_attr *port_attr,
                               size_t mtu, double *latency_p,
                               double *bandwidth_p)
{
    double lane_gbps, encoding, lanes, header_bytes;

    /* IBTA PortInfo: width 1x, 4x, 8x, 12x, 2x */
    switch (port_attr->active_width) {
    case 2:  lanes = 4;  break;
    case 4:  lanes = 8;  break;
    case 8:  lanes = 12; break;
    case 16: lanes = 2;  break;
    default: lanes = 1;  break;
    }

    /* Per-lane signalling rate and line code; link latency as UCX assumes
     * for the same generation, so that UCP compares like with like */
    switch (port_attr->active_speed) {
    case 2:   lane_gbps = 5.0;       encoding = 0.8;         *latency_p = 2500e-9; break;
    case 4:   lane_gbps = 10.0;      encoding = 0.8;         *latency_p = 1300e-9; break;
    case 8:   lane_gbps = 10.3125;   encoding = 64.0 / 66.0; *latency_p = 700e-9;  break;
    case 16:  lane_gbps = 14.0625;   encoding = 64.0 / 66.0; *latency_p = 700e-9;  break;
    case 32:  lane_gbps = 25.78125;  encoding = 64.0 / 66.0; *latency_p = 600e-9;  break;
    case 64:  lane_gbps = 51.5625;   encoding = 64.0 / 66.0; *latency_p = 600e-9;  break;
    case 128: lane_gbps = 100.0;     encoding = 64.0 / 66.0; *latency_p = 600e-9;  break;
    default:  lane_gbps = 2.5;       encoding = 0.8;         *latency_p = 5000e-9; break;
    }

    /* Per-packet headers: BTH + RETH + ICRC, plus Ethernet/IP/UDP on RoCE */
    header_bytes = 12 + 16 + 4;
    if (port_attr->link_layer == IBV_LINK_LAYER_ETHERNET) {
        header_bytes += 14 + 20 + 8 + 4;
        *latency_p   += 200e-9;
    } else {
        header_bytes += 8 + 2;
    }

    *bandwidth_p = (lanes * lane_gbps * 1e9 * encoding / 8.0) * mtu /
                   (mtu + header_bytes);
}

ucs_status_t uct_hipower_cq_create(const uct_hipower_verbs_dev_t *dev,
                                   unsigned cqe,
                                   struct ibv_comp_channel *channel,
                                   const char *what, struct ibv_cq **cq_p)
{
    *cq_p = ibv_create_cq(dev->md->ibv_context, cqe, NULL, channel, 0);
    if (*cq_p == NULL) {
        ucs_error("hipower %s: ibv_create_cq(%u) for %s failed: %m",
                  dev->dev_name, cqe, what);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void uct_hipower_cq_destroy(const uct_hipower_verbs_dev_t *dev,
                            struct ibv_cq *cq)
{
    int ret = ibv_destroy_cq(cq);

    if (ret != 0) {
        ucs_warn("hipower %s: ibv_destroy_cq() failed: %s", dev->dev_name,
                 strerror(ret));
    }
}

ucs_status_t uct_hipower_cq_arm(const uct_hipower_verbs_dev_t *dev,
                                struct ibv_cq *cq)
{
    int ret = ibv_req_notify_cq(cq, 0);

    if (ret != 0) {
        ucs_error("hipower %s: ibv_req_notify_cq() failed: %s",
                  dev->dev_name, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t uct_hipower_channel_create(const uct_hipower_verbs_dev_t *dev,
                                        struct ibv_comp_channel **channel_p)
{
    struct ibv_comp_channel *channel;
    ucs_status_t status;

    channel = ibv_create_comp_channel(dev->md->ibv_context);
    if (channel == NULL) {
        ucs_error("hipower %s: ibv_create_comp_channel() failed: %m",
                  dev->dev_name);
        return UCS_ERR_IO_ERROR;
    }

    /* uct_iface_event_arm() drains it without blocking */
    status = ucs_sys_fcntl_modfl(channel->fd, O_NONBLOCK, 0);
    if (status != UCS_OK) {
        ibv_destroy_comp_channel(channel);
        return status;
    }

    *channel_p = channel;
    return UCS_OK;
}

void uct_hipower_channel_destroy(struct ibv_comp_channel *channel)
{
    ibv_destroy_comp_channel(channel);
}

ucs_status_t uct_hipower_channel_drain(const uct_hipower_verbs_dev_t *dev,
                                       struct ibv_comp_channel *channel)
{
    void *cq_context;
    struct ibv_cq *cq;

    /* Rare (after a sleep): each event is acknowledged on its own */
    while (ibv_get_cq_event(channel, &cq, &cq_context) == 0) {
        ibv_ack_cq_events(cq, 1);
    }

    if (errno != EAGAIN) {
        ucs_error("hipower %s: ibv_get_cq_event() failed: %m",
                  dev->dev_name);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

const char *uct_hipower_wc_status_name(enum ibv_wc_status status)
{
    return ibv_wc_status_str(status);
}

const char *uct_hipower_port_state_name(enum ibv_port_state state)
{
    return ibv_port_state_str(state);
}

unsigned uct_hipower_channel_take(struct ibv_comp_channel *channel,
                                  struct ibv_cq *cq)
{
    unsigned count = 0;
    struct ibv_cq *ev_cq;
    void *cq_context;

    while (ibv_get_cq_event(channel, &ev_cq, &cq_context) == 0) {
        ++count;
    }
    if (count > 0) {
        ibv_ack_cq_events(cq, count);
    }
    return count;
}

void uct_hipower_cq_stash_init(uct_hipower_verbs_dev_t *dev)
{
    dev->stash.wcs   = NULL;
    dev->stash.count = 0;
    dev->stash.size  = 0;
    dev->stash.lock  = 0;
}

void uct_hipower_cq_stash_cleanup(uct_hipower_verbs_dev_t *dev)
{
    ucs_free(dev->stash.wcs);
    dev->stash.wcs = NULL;
}

static void uct_hipower_cq_stash_lock(uct_hipower_cq_stash_t *stash)
{
    while (__atomic_exchange_n(&stash->lock, 1, __ATOMIC_ACQUIRE)) {
        sched_yield();
    }
}

static void uct_hipower_cq_stash_unlock(uct_hipower_cq_stash_t *stash)
{
    __atomic_store_n(&stash->lock, 0, __ATOMIC_RELEASE);
}

ucs_status_t uct_hipower_cq_stash_wc(uct_hipower_verbs_dev_t *dev,
                                     const struct ibv_wc *wc)
{
    uct_hipower_cq_stash_t *stash = &dev->stash;
    struct ibv_wc *wcs;
    unsigned size;

    uct_hipower_cq_stash_lock(stash);
    if (stash->count == stash->size) {
        size = ucs_max(16, 2 * stash->size);
        wcs  = ucs_realloc(stash->wcs, size * sizeof(*wcs),
                           "hipower stashed completions");
        if (wcs == NULL) {
            uct_hipower_cq_stash_unlock(stash);
            ucs_error("hipower %s: no memory to set %u completions aside",
                      dev->dev_name, size);
            return UCS_ERR_NO_MEMORY;
        }
        stash->wcs  = wcs;
        stash->size = size;
    }
    stash->wcs[stash->count++] = *wc;
    uct_hipower_cq_stash_unlock(stash);
    return UCS_OK;
}

unsigned uct_hipower_cq_stash_poll(uct_hipower_verbs_dev_t *dev,
                                   struct ibv_cq *cq, int drain)
{
    struct ibv_wc wc[16];
    unsigned count = 0;
    int i, num_wcs;

    do {
        num_wcs = ibv_poll_cq(cq, ucs_static_array_size(wc), wc);
        for (i = 0; i < num_wcs; ++i) {
            if (uct_hipower_cq_stash_wc(dev, &wc[i]) != UCS_OK) {
                /* Reported; lost completions fail their endpoints */
                return count + i;
            }
        }
        if (num_wcs > 0) {
            count += num_wcs;
        }
    } while (drain && (num_wcs == (int)ucs_static_array_size(wc)));
    return count;
}

unsigned uct_hipower_cq_stash_take(uct_hipower_verbs_dev_t *dev,
                                   struct ibv_wc **wcs_p, unsigned *size_p)
{
    uct_hipower_cq_stash_t *stash = &dev->stash;
    unsigned count;

    uct_hipower_cq_stash_lock(stash);
    *wcs_p       = stash->wcs;
    *size_p      = stash->size;
    count        = stash->count;
    stash->wcs   = NULL;
    stash->size  = 0;
    stash->count = 0;
    uct_hipower_cq_stash_unlock(stash);
    return count;
}

void uct_hipower_cq_stash_return(uct_hipower_verbs_dev_t *dev,
                                 struct ibv_wc *wcs, unsigned size)
{
    uct_hipower_cq_stash_t *stash = &dev->stash;

    uct_hipower_cq_stash_lock(stash);
    if (stash->wcs == NULL) {
        stash->wcs  = wcs;  /* Kept for the next time */
        stash->size = size;
        wcs         = NULL;
    }
    uct_hipower_cq_stash_unlock(stash);
    ucs_free(wcs);
}

unsigned uct_hipower_cq_stash_reap(uct_hipower_verbs_dev_t *dev,
                                   uct_hipower_cq_reap_cb_t cb, void *arg)
{
    uct_hipower_cq_stash_t *stash = &dev->stash;
    struct ibv_wc *wcs;
    unsigned i, count;

    uct_hipower_cq_stash_lock(stash);
    wcs   = stash->wcs;
    count = stash->count;
    for (i = 0; (i < count) && cb(arg, &wcs[i]); ++i) {
    }
    /* The rest, in their order, for the next poll */
    memmove(wcs, wcs + i, (count - i) * sizeof(*wcs));
    stash->count = count - i;
    uct_hipower_cq_stash_unlock(stash);
    return i;
}
