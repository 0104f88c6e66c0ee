/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_GRANT_H_
#define UCT_HIPOWER_GRANT_H_

#include <stdint.h>

/*
 * Receive memory shared by all peers of an interface (docs/protocol.md,
 * section 9.2), as rules without verbs, checked by a model
 * (test/unit/check_grant.c). The transport (hipower_ep_grant.c, self mode
 * with UCX_HIPOWER_SHARED_POOL=y) uses the sizes (hipower_grant_decide()),
 * the record check and hipower_grant_old_remaining(); its receiver moves
 * to a new run only once the old one is drained, a special case of the
 * runs below, and no slot is ever held past its handler.
 *
 * An endpoint's peer writes into a *run* of the interface's slot pool: slots
 * first .. first + count - 1, messages in ring order within the run, each
 * run with an epoch (1, 2, ... per endpoint). The receiver changes a run by
 * a *grant*: it takes a new run from the pool, clears its slots' marks (a
 * trailer an earlier owner left must not look new), and writes
 * {first, count, epoch} into the sender's control words, epoch last.
 *
 * - The sender *adopts* a grant at its next send (or when nudged): it
 *   writes that message at sequence 0 of the new run, saying in it how many
 *   messages it wrote into the old run, and never writes the old run again.
 * - The receiver polls the old run's head as before and, while a grant is
 *   out, the new run's first slot too. When that first message is there,
 *   the count in it tells how many old-run messages to drain; they are
 *   delivered first (order per endpoint is kept), whatever order they land
 *   in relative to the new run's first message. A count the old run could
 *   not hold is a hostile or broken peer: the endpoint fails.
 * - Once every old-run message was delivered and released, the old run
 *   goes back to the pool (the transport deregisters its memory region
 *   first, so that a peer writing there anyway gets an access error and
 *   cannot touch the next owner's slots).
 * - One change at a time per endpoint: no grant while one is out or an old
 *   run is draining.
 *
 * Sizes (hipower_grant_decide()): an endpoint's fair share is the pool
 * divided among the active endpoints (at least its mailbox, at most the
 * largest run), so one peer's burst can take most of an idle pool and many
 * bursting peers get even shares. Growing leaves a reserve in the pool for
 * shrinking others: a shrink needs a new (smaller) run before the old one
 * comes back, and without a reserve a pool given out entirely to a few
 * peers could not be won back for the others.
 */

/* A run of pool slots; count 0: none */
typedef struct hipower_run {
    uint32_t epoch;
    uint32_t first;
    uint32_t count;
} hipower_run_t;

/* One endpoint's receive side */
typedef struct hipower_rx_runs {
    hipower_run_t cur;      /* The run the sender writes (or wrote last) */
    uint32_t      cur_head; /* Sequence (within cur) of the next message */
    uint32_t      cur_held; /* Delivered from cur, not yet released */
    hipower_run_t old;      /* Being drained after a switch */
    uint32_t      old_head;
    uint32_t      old_end;  /* Messages the sender wrote into old */
    uint32_t      old_held;
    hipower_run_t granted;  /* Granted, not yet adopted */
} hipower_rx_runs_t;

/* One endpoint's send side: the run its messages go to */
typedef struct hipower_tx_runs {
    hipower_run_t cur;
    uint32_t      written;  /* Messages written into cur */
} hipower_tx_runs_t;

typedef enum {
    HIPOWER_GRANT_NONE,
    HIPOWER_GRANT_GROW,
    HIPOWER_GRANT_SHRINK
} hipower_grant_action_t;


/* The first run (epoch 1), given at connection time */
static inline void hipower_rx_runs_init(hipower_rx_runs_t *runs,
                                        uint32_t first, uint32_t count)
{
    hipower_rx_runs_t init = {{1, first, count}};

    *runs = init;
}

static inline void hipower_tx_runs_init(hipower_tx_runs_t *runs,
                                        uint32_t first, uint32_t count)
{
    hipower_tx_runs_t init = {{1, first, count}, 0};

    *runs = init;
}

static inline int hipower_run_contains(const hipower_run_t *run,
                                       uint32_t slot)
{
    return (run->count > 0) && (slot - run->first < run->count);
}

/**
 * Where the endpoint's next message is expected: the pool slot, and the
 * sequence within its run (what its trailer's key says). Old-run messages
 * come first.
 */
static inline uint32_t hipower_rx_runs_next(const hipower_rx_runs_t *runs,
                                            uint32_t *seq_p)
{
    if (runs->old.count > 0 && runs->old_head != runs->old_end) {
        *seq_p = runs->old_head;
        return runs->old.first + runs->old_head % runs->old.count;
    }
    *seq_p = runs->cur_head;
    return runs->cur.first + runs->cur_head % runs->cur.count;
}

/* Whether the granted run's first slot is to be polled too (its message
 * at sequence 0 carries the old run's message count) */
static inline int hipower_rx_runs_switch_pending(const hipower_rx_runs_t *runs)
{
    return runs->granted.count > 0;
}

/**
 * The granted run's first message is there and says the sender wrote
 * @a old_count messages into the current run: the granted run becomes the
 * current one, the current one is drained. Returns 0 if the count is
 * impossible (fewer than were delivered from the run, or more than its
 * slots could hold beyond those: a sender may only reuse a slot released),
 * and changes nothing then.
 */
static inline int hipower_rx_runs_switch(hipower_rx_runs_t *runs,
                                         uint32_t old_count)
{
    if ((runs->granted.count == 0) ||
        (old_count - runs->cur_head > runs->cur.count)) {
        return 0;
    }

    runs->old      = runs->cur;
    runs->old_head = runs->cur_head;
    runs->old_end  = old_count;
    runs->old_held = runs->cur_held;
    runs->cur      = runs->granted;
    runs->cur_head = 0;
    runs->cur_held = 0;
    runs->granted.count = 0;
    return 1;
}

/* The message hipower_rx_runs_next() named was delivered; @a held: its
 * descriptor is kept, to be released by hipower_rx_runs_release() */
static inline void hipower_rx_runs_delivered(hipower_rx_runs_t *runs,
                                             int held)
{
    if (runs->old.count > 0 && runs->old_head != runs->old_end) {
        ++runs->old_head;
        runs->old_held += !!held;
    } else {
        ++runs->cur_head;
        runs->cur_held += !!held;
    }
}

/* A kept descriptor at pool slot @a slot was released */
static inline void hipower_rx_runs_release(hipower_rx_runs_t *runs,
                                           uint32_t slot)
{
    if (hipower_run_contains(&runs->old, slot)) {
        --runs->old_held;
    } else {
        --runs->cur_held;
    }
}

/**
 * Whether the old run is drained and released: then the transport
 * deregisters it, returns it to the pool and calls hipower_rx_runs_old_free().
 */
static inline int hipower_rx_runs_old_done(const hipower_rx_runs_t *runs)
{
    return (runs->old.count > 0) && (runs->old_head == runs->old_end) &&
           (runs->old_held == 0);
}

static inline void hipower_rx_runs_old_free(hipower_rx_runs_t *runs)
{
    runs->old.count = 0;
}

/* Whether a grant may go out now: one change at a time */
static inline int hipower_rx_runs_may_grant(const hipower_rx_runs_t *runs)
{
    return (runs->granted.count == 0) && (runs->old.count == 0);
}

/* Records a grant of @a count slots at @a first (marks already cleared);
 * returns its epoch, for the record the sender is sent */
static inline uint32_t hipower_rx_runs_grant(hipower_rx_runs_t *runs,
                                             uint32_t first, uint32_t count)
{
    runs->granted.epoch = runs->cur.epoch + 1;
    runs->granted.first = first;
    runs->granted.count = count;
    return runs->granted.epoch;
}

/* Whether a grant record {@a epoch, @a count} the sender found, at its
 * run's epoch @a cur_epoch, is one to adopt: the next epoch, and a size
 * its own bookkeeping can hold (@a max_count); 0 is a release (the run
 * goes back, see hipower_run_req_action()). Anything else (an old record,
 * a bogus one) is ignored. */
static inline int hipower_grant_record_valid(uint64_t cur_epoch,
                                             uint64_t epoch, uint32_t count,
                                             uint32_t max_count)
{
    return (epoch == cur_epoch + 1) && (count <= max_count);
}

/**
 * Whether the sender adopts a grant record {@a epoch, @a count} it found in
 * its control words: the next epoch, and a size its own bookkeeping can
 * hold (@a max_count). Anything else (a record not yet complete, an old
 * one, a bogus one) is ignored.
 */
static inline int hipower_tx_grant_valid(const hipower_tx_runs_t *runs,
                                         uint32_t epoch, uint32_t count,
                                         uint32_t max_count)
{
    return (count >= 1) &&
           hipower_grant_record_valid(runs->cur.epoch, epoch, count,
                                      max_count);
}

/* Adopts a valid grant: returns the old run's message count, which the
 * first message of the new run carries */
static inline uint32_t hipower_tx_runs_adopt(hipower_tx_runs_t *runs,
                                             uint32_t epoch, uint32_t first,
                                             uint32_t count)
{
    uint32_t old_count = runs->written;

    runs->cur.epoch = epoch;
    runs->cur.first = first;
    runs->cur.count = count;
    runs->written   = 0;
    return old_count;
}

/* An endpoint's fair share of a pool of @a pool_slots among @a active
 * endpoints: at least @a mailbox, at most @a max_run */
static inline uint32_t hipower_grant_fair_share(uint32_t pool_slots,
                                                uint32_t active,
                                                uint32_t mailbox,
                                                uint32_t max_run)
{
    uint32_t share = pool_slots / (active ? active : 1);

    if (share > max_run) {
        share = max_run;
    }
    return (share < mailbox) ? mailbox : share;
}

/**
 * What to do about an endpoint whose run has @a cur_count slots: shrink to
 * its mailbox when it is idle, shrink to @a fair (or what the pool has, if
 * less) when it holds more than that, grow towards @a fair when its sender
 * asked for more (@a wants: its ring was full). A grow takes only what
 * leaves @a reserve slots free (@a reserve >= @a mailbox); a shrink may take
 * the reserve. The new run's size goes to @a size_p.
 */
static inline hipower_grant_action_t
hipower_grant_decide(uint32_t cur_count, uint32_t fair, int wants, int idle,
                     uint32_t free_slots, uint32_t reserve, uint32_t mailbox,
                     uint32_t *size_p)
{
    uint32_t size;

    if (idle) {
        if ((cur_count <= mailbox) || (free_slots < mailbox)) {
            return HIPOWER_GRANT_NONE;
        }
        *size_p = mailbox;
        return HIPOWER_GRANT_SHRINK;
    }

    if (cur_count > fair) {
        /* Smaller than fair if the pool is that short: the old run comes
         * back, and the endpoint grows again when it asks */
        size = (free_slots < fair) ? free_slots : fair;
        if (size < mailbox) {
            return HIPOWER_GRANT_NONE; /* When old runs come back */
        }
        *size_p = size;
        return HIPOWER_GRANT_SHRINK;
    }

    if (!wants || (free_slots <= reserve)) {
        return HIPOWER_GRANT_NONE;
    }
    size = free_slots - reserve;
    if (size > fair) {
        size = fair;
    }
    if ((size <= cur_count) || ((cur_count == 0) && (size < mailbox))) {
        /* Nothing larger; and a peer without a run gets at least the
         * mailbox, as UCX_HIPOWER_MIN_SLOTS says, not one slot at a time */
        return HIPOWER_GRANT_NONE;
    }
    *size_p = size;
    return HIPOWER_GRANT_GROW;
}

/**
 * The transport's receiver (self mode) switches runs only once the old run
 * is drained, so it never delivers from two runs at once: the granted
 * run's first message (or, after a release, the run request word) is
 * there and says the sender had taken @a old_end messages in all (over
 * every run, mod 2^16, hipower_tx_ring_switch()) when it left the old run
 * of @a num_slots; the receiver has delivered @a delivered in all
 * (hipower_rx_ring_taken()). Returns how many old-run messages are still
 * to come (0: switch now), or -1 for a count the old run could not hold (a
 * broken or hostile peer: the endpoint fails). 16 bits are enough: at most
 * @a num_slots <= 4096 can be outstanding.
 */
static inline int hipower_grant_old_remaining(uint32_t delivered,
                                              uint16_t old_end,
                                              uint32_t num_slots)
{
    uint32_t remaining = (uint16_t)(old_end - (uint16_t)delivered);

    return (remaining > num_slots) ? -1 : (int)remaining;
}

/*
 * Endpoints without a run (docs/protocol.md 9.2): an endpoint created while
 * the pool has no run of MIN_SLOTS left, or whose peer went idle while the
 * pool is short, holds no slot of the pool, only its control words. A
 * grant of no slots (a *release*) takes a run back: the sender adopts it as
 * any grant, writes nothing more into the old run, and says where its
 * messages there end in its *run request*, a word it writes into the
 * receiver's control words with an immediate (there is no slot to carry
 * it). A sender without a run that has something to send writes the same
 * word with the ask bit, once per epoch: the receiver grants it a run
 * when the pool has one, or when one comes back. The word:
 * bits 63..32 the sender's run epoch, bit 16 ask, bits 15..0 where its
 * messages in its last run ended.
 */
#define HIPOWER_RUN_REQ_ASK  (1ull << 16)

static inline uint64_t hipower_run_req_make(uint32_t epoch, uint16_t old_end,
                                            int ask)
{
    return ((uint64_t)epoch << 32) | (ask ? HIPOWER_RUN_REQ_ASK : 0) |
           old_end;
}

static inline uint16_t hipower_run_req_old_end(uint64_t req)
{
    return (uint16_t)req;
}

typedef enum {
    HIPOWER_RUN_REQ_NONE,      /* Stale, early or bogus: nothing to do */
    HIPOWER_RUN_REQ_RELEASED,  /* The release was adopted: drain, free */
    HIPOWER_RUN_REQ_WANTS      /* No run, and the sender asks for one */
} hipower_run_req_action_t;

/**
 * What the receiver does with the run request word @a req it found, when
 * its current run has epoch @a epoch (and @a num_slots slots) and
 * @a releasing says a release (epoch + 1) is out. A word of any other
 * epoch is old or bogus: it is ignored, so a peer can only ask for its
 * own run, once per epoch, and only when it has none.
 */
static inline hipower_run_req_action_t
hipower_run_req_action(uint64_t req, uint32_t epoch, uint32_t num_slots,
                       int releasing)
{
    uint32_t req_epoch = (uint32_t)(req >> 32);

    if (releasing) {
        return (req_epoch == epoch + 1) ? HIPOWER_RUN_REQ_RELEASED :
                                          HIPOWER_RUN_REQ_NONE;
    }
    return ((num_slots == 0) && (req_epoch == epoch) &&
            (req & HIPOWER_RUN_REQ_ASK)) ? HIPOWER_RUN_REQ_WANTS :
                                           HIPOWER_RUN_REQ_NONE;
}

/* The shortest run that will do for a grant decided as @a action (the
 * pool's free slots may be scattered): a grow takes any run longer than
 * the current one, a shrink any run of at least the mailbox */
static inline uint32_t hipower_grant_min_size(hipower_grant_action_t action,
                                              uint32_t cur_count,
                                              uint32_t mailbox)
{
    if (action != HIPOWER_GRANT_GROW) {
        return mailbox;
    }
    return (cur_count == 0) ? mailbox : cur_count + 1;
}

#endif
