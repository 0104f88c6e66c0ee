/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_TX_CQ_H_
#define UCT_HIPOWER_TX_CQ_H_

#include "hipower_iface_def.h"

/*
 * The send CQ, polled: each completion goes to its endpoint, or to the
 * record of a destroyed endpoint's QP (hipower_ep.c), the ones set aside
 * (uct_hipower_cq_stash_wc()) first, in their order. And the credits of
 * the CQ, recalled when sends went unsignaled and credits ran short
 * (hipower_txq.h). Called by the interface's progress and by event arm.
 */

/* Polls the send CQ once (or hands out what was set aside); returns how
 * many completions it handled */
unsigned uct_hipower_tx_cq_poll(uct_hipower_iface_t *iface);

/* Credits are short (uct_hipower_iface_tx_starved_take() said so): a
 * signaled no-op on every endpoint that posted unsignaled requests, from
 * the credits kept back for it */
void uct_hipower_tx_cq_recall(uct_hipower_iface_t *iface);

#endif
