/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_tx_cq.h"
#include "hipower_ep.h"

#include <ucs/debug/log.h>


/* Completions taken per poll */
#define UCT_HIPOWER_CQ_BATCH  16

/* One completion of the send CQ to its endpoint, or to the QP record of a
 * destroyed one */
static void uct_hipower_tx_cq_wc(uct_hipower_iface_t *iface,
                                 struct ibv_wc *wc)
{
    uct_hipower_txqp_t *txqp;
    khiter_t iter;

    iter = kh_get(uct_hipower_qp_ep, &iface->qp_eps, wc->qp_num);
    if (ucs_unlikely(iter == kh_end(&iface->qp_eps))) {
        /* QPs are destroyed only once drained: cannot happen */
        ucs_diag("hipower %s: completion of unknown qp 0x%x",
                 iface->dev_name, wc->qp_num);
        return;
    }

    txqp = kh_value(&iface->qp_eps, iter);
    if (ucs_unlikely(txqp->is_gc)) {
        uct_hipower_gc_tx_completion(txqp, wc);
    } else {
        uct_hipower_ep_tx_completion(uct_hipower_txqp_ep(txqp), wc);
    }
}

/* The completions set aside (uct_hipower_cq_stash_wc()), in their
 * order. A callback may set more aside: they go to a new array, handed out
 * by the next poll. Not inlined: the stash's address would hold a
 * callee-saved register, pushed and popped by every poll of an empty CQ. */
static UCS_F_NOINLINE unsigned
uct_hipower_tx_cq_unstash(uct_hipower_iface_t *iface)
{
    struct ibv_wc *wcs;
    unsigned i, size, count;

    count = uct_hipower_cq_stash_take(&iface->verbs, &wcs, &size);
    for (i = 0; i < count; ++i) {
        uct_hipower_tx_cq_wc(iface, &wcs[i]);
    }
    uct_hipower_cq_stash_return(&iface->verbs, wcs, size);
    return count;
}

unsigned uct_hipower_tx_cq_poll(uct_hipower_iface_t *iface)
{
    struct ibv_wc wc[UCT_HIPOWER_CQ_BATCH];
    int i, num_wcs;

    if (ucs_unlikely(uct_hipower_cq_stash_count(&iface->verbs) > 0)) {
        return uct_hipower_tx_cq_unstash(iface);
    }

    num_wcs = ibv_poll_cq(iface->cq, UCT_HIPOWER_CQ_BATCH, wc);
    if (num_wcs <= 0) {
        if (ucs_unlikely(num_wcs < 0)) {
            ucs_error("hipower %s: ibv_poll_cq() failed: %d", iface->dev_name,
                      num_wcs);
        }
        return 0;
    }

    iface->stats.tx_completions += num_wcs;
    for (i = 0; i < num_wcs; ++i) {
        uct_hipower_tx_cq_wc(iface, &wc[i]);
    }

    return num_wcs;
}

/*
 * Credits are short and the interface's requests went unsignaled: post a
 * signaled no-op on every endpoint holding unsignaled requests, from the
 * credits kept back for this, so that their completion gives the credits
 * back (see hipower_txq.h).
 */
void uct_hipower_tx_cq_recall(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep, *tmp;

    iface->stats.recall_runs++;
    /* Only the endpoints that posted unsignaled requests since they were
     * last looked at: each leaves the list when it is (or needs nothing),
     * so the walks cost what the posts that listed them did, not the
     * number of endpoints (review P3) */
    ucs_list_for_each_safe(ep, tmp, &iface->tx.trailing_eps, trailing_list) {
        if (iface->tx.cq_credits < 1) {
            uct_hipower_iface_tx_starve(iface);
            break;
        }

        iface->stats.recall_visits++;
        if (hipower_txq_has_trailing(&ep->txqp.txq) &&
            !(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
            if (hipower_txq_sq_free(&ep->txqp.txq) == 0) {
                continue; /* Full: listed until a later recall can */
            }
            if (uct_hipower_ep_post_nop(ep, &iface->tx.cq_credits, NULL) ==
                UCS_OK) {
                iface->stats.cq_recalls++;
            }
        }
        uct_hipower_ep_unlist_trailing(ep);
    }
}
