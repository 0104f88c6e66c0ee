/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_TXQ_H_
#define UCT_HIPOWER_TXQ_H_

#include <assert.h>
#include <stdint.h>

/*
 * Send-queue and completion-queue accounting of one RC queue pair, without
 * any verbs.
 *
 * Work requests are numbered from 0 per QP (the work request id). Only
 * every signal_interval-th one asks for a completion, and a completion
 * retires its request and every one before it. But when a QP fails, the
 * device completes *every* outstanding request, signaled or not, each with
 * its own (flushed) completion; so every posted request holds a credit of
 * the interface's completion queue until a completion covers it, or a mass
 * failure of queue pairs with full send queues would overrun the CQ.
 *
 * Credits live in one counter per interface (@a cq_credits below). A
 * request may take the last credits only when it is signaled: credits held
 * by unsignaled requests come back only with a later signaled one, so near
 * the bottom every post asks for a completion, and a QP holding unsignaled
 * requests can be asked to post a signaled no-op (a "recall") from the
 * credits kept back for that.
 */

typedef struct hipower_txq {
    uint64_t sn;          /* Id of the next work request */
    uint64_t acked_sn;    /* Every request before it has completed */
    uint32_t sq_len;      /* Send queue entries usable by operations */
    uint32_t unsignaled;  /* Requests since the last signaled one */
} hipower_txq_t;


/*
 * The bundle window (UCX_HIPOWER_BUNDLE_WINDOW) of one endpoint: at most
 * @a size active-message frames in flight (posted, no completion seen for
 * them yet); while that many are, its next short and bcopy messages wait
 * in a bundle. Frames, not requests: the READs a transport posts of its
 * own accord (a pull-mode receiver keeps one in flight all the time) must
 * not hold the sender's messages back, or starve them.
 * Keeps the work request ids of the last @a size frames.
 */
#define HIPOWER_TXWIN_MAX 8

typedef struct hipower_txwin {
    uint64_t sn[HIPOWER_TXWIN_MAX]; /* Last frames' ids, a ring */
    uint32_t size;                  /* 0: no window */
    uint32_t next;                  /* Oldest of the last @a size frames */
    uint32_t posted;                /* Frames posted, up to @a size */
} hipower_txwin_t;


void hipower_txq_init(hipower_txq_t *txq, uint32_t sq_len);

/*
 * Adds @a delta to a credit counter. Atomic: the interface's counter is
 * taken by sends in the user's thread while UCP's wire-up, in UCX's async
 * thread, creates, connects or destroys another endpoint, which takes or
 * gives back credits too (a lost update could let the CQ overrun). One
 * locked instruction per post, no lock.
 */
static inline void hipower_credits_add(int *credits, int delta)
{
    (void)__atomic_fetch_add(credits, delta, __ATOMIC_RELAXED);
}

/* Requests posted and not yet covered by a completion */
static inline uint32_t hipower_txq_outstanding(const hipower_txq_t *txq)
{
    return (uint32_t)(txq->sn - txq->acked_sn);
}

/* Free send queue entries */
static inline uint32_t hipower_txq_sq_free(const hipower_txq_t *txq)
{
    uint32_t outstanding = hipower_txq_outstanding(txq);

    return (outstanding >= txq->sq_len) ? 0 : (txq->sq_len - outstanding);
}

/*
 * Whether @a nwr more requests may be posted: send queue room, and
 * completion queue credits beyond @a cq_reserve (the credits kept back for
 * recalls, see hipower_txq_signal()).
 */
static inline int hipower_txq_can_post(const hipower_txq_t *txq, unsigned nwr,
                                       int cq_credits, int cq_reserve)
{
    return (hipower_txq_sq_free(txq) >= nwr) &&
           (cq_credits >= (int)nwr + cq_reserve);
}

/*
 * Whether the last of @a nwr requests about to be posted must be signaled:
 * when due by the interval, or when the credits left after it fall below
 * @a low_water (so that credits do not end up held by unsignaled requests
 * that nothing would retire).
 */
static inline int hipower_txq_signal(const hipower_txq_t *txq, unsigned nwr,
                                     unsigned signal_interval, int cq_credits,
                                     int low_water)
{
    return (txq->unsignaled + nwr >= signal_interval) ||
           (cq_credits - (int)nwr < low_water);
}

/*
 * Accounts for a chain of @a nwr requests of which the first @a posted went
 * out (ibv_post_send() stops at bad_wr: posted < nwr when it failed part-way);
 * @a last_signaled: the chain's last request was signaled, which counts only
 * if it was posted. Takes a credit per posted request from *@a cq_credits.
 * Returns the id of the first request of the chain.
 */
/* Inline: it runs once per post */
static inline uint64_t
hipower_txq_posted(hipower_txq_t *txq, unsigned nwr, unsigned posted,
                   int last_signaled, int *cq_credits)
{
    uint64_t first = txq->sn;

    assert(posted <= nwr);
    txq->sn     += posted;
    hipower_credits_add(cq_credits, -(int)posted);
    if (last_signaled && (posted == nwr) && (posted > 0)) {
        txq->unsignaled = 0;
    } else {
        /* A chain cut short lost its signaled tail: what went out is
         * unsignaled and waits for a later completion */
        txq->unsignaled += posted;
    }
    return first;
}


/* How many requests of a chain ibv_post_send() took, given bad_wr's index
 * (0-based; @a nwr when it succeeded) */
static inline unsigned hipower_txq_chain_posted(unsigned nwr, int failed,
                                                unsigned bad_index)
{
    return failed ? ((bad_index < nwr) ? bad_index : nwr) : nwr;
}

/*
 * A completion (successful or flushed) of the request with id @a wr_sn: it
 * and every request before it are done. Returns how many requests it
 * retires; their send queue entries and credits (added to *@a cq_credits)
 * come back. A completion for a request already retired retires nothing.
 */
uint32_t hipower_txq_completed(hipower_txq_t *txq, uint64_t wr_sn,
                               int *cq_credits);

/* Whether the requests posted so far end in an unsignaled one, which no
 * completion will ever report unless the QP fails */
static inline int hipower_txq_has_trailing(const hipower_txq_t *txq)
{
    return (txq->unsignaled > 0) && (hipower_txq_outstanding(txq) > 0);
}


static inline void hipower_txwin_init(hipower_txwin_t *win, uint32_t size)
{
    assert(size <= HIPOWER_TXWIN_MAX);
    win->size   = size;
    win->next   = 0;
    win->posted = 0;
}

/* Whether the request with id @a sn has completed, given the queue pair's
 * @a acked_sn (every request before it has) */
static inline int hipower_txwin_done(uint64_t sn, uint64_t acked_sn)
{
    return sn < acked_sn;
}

/* Whether the window is full: the last @a size frames are all in flight */
static inline int hipower_txwin_full(const hipower_txwin_t *win,
                                     uint64_t acked_sn)
{
    return (win->size > 0) && (win->posted == win->size) &&
           !hipower_txwin_done(win->sn[win->next], acked_sn);
}

/*
 * Whether the frame about to be posted fills the window: the @a size - 1
 * frames before it are all in flight (in order: the oldest of them is).
 * Its last request must then be signaled, since only a completion opens
 * the window again; that one retires every frame before it too.
 */
static inline int hipower_txwin_fills(const hipower_txwin_t *win,
                                      uint64_t acked_sn)
{
    if (win->size <= 1) {
        return win->size == 1;
    }
    /* Once @a size - 1 frames were posted, the oldest of the last
     * @a size - 1 sits one after @a next */
    return (win->posted >= win->size - 1) &&
           !hipower_txwin_done(win->sn[(win->next + 1) % win->size],
                               acked_sn);
}

/* A frame whose last request has id @a sn went out */
static inline void hipower_txwin_posted(hipower_txwin_t *win, uint64_t sn)
{
    if (win->size == 0) {
        return;
    }
    win->sn[win->next] = sn;
    win->next          = (win->next + 1) % win->size;
    if (win->posted < win->size) {
        ++win->posted;
    }
}

#endif
