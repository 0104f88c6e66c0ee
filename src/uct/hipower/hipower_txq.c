/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_txq.h"

#include <assert.h>


void hipower_txq_init(hipower_txq_t *txq, uint32_t sq_len)
{
    txq->sn         = 0;
    txq->acked_sn   = 0;
    txq->sq_len     = sq_len;
    txq->unsignaled = 0;
}

uint32_t hipower_txq_completed(hipower_txq_t *txq, uint64_t wr_sn,
                               int *cq_credits)
{
    uint32_t count;

    /* Ids are ours, so one beyond sn is impossible; a stale one (already
     * retired) is not */
    if ((wr_sn < txq->acked_sn) || (wr_sn >= txq->sn)) {
        return 0;
    }

    count          = (uint32_t)(wr_sn + 1 - txq->acked_sn);
    txq->acked_sn  = wr_sn + 1;
    hipower_credits_add(cq_credits, (int)count);
    if (txq->acked_sn == txq->sn) {
        /* Flushed completions retire unsignaled requests too */
        txq->unsignaled = 0;
    }
    return count;
}
