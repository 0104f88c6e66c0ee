/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_GRANT_H_
#define UCT_HIPOWER_GRANT_H_

#include <stdint.h>

/*
 * Receive memory shared by all peers of an interface (docs/protocol.md,
 * section 9.2), the rules without verbs that the transport
 * (hipower_ep_grant.c, self mode with UCX_HIPOWER_SHARED_POOL=y) calls:
 * the grant record check, the sizes (hipower_grant_fair_share(),
 * hipower_grant_decide()), how many old-run messages are still to come
 * (hipower_grant_old_remaining()) and the run request word. The protocol
 * itself -- grant, adopt, switch, release, ask -- is tested where it runs,
 * in the transport (the rig's conformance cases switch_storm,
 * churn_over_reused_slots, idle_runs_come_back, stopped_peer_pins_nothing),
 * not on a copy of it.
 *
 * An endpoint's peer writes into a *run* of the interface's slot pool,
 * messages in ring order within the run, each run with an epoch (1, 2, ...
 * per endpoint). The receiver changes a run by a *grant*: it takes a new
 * run from the pool (its marks cleared), and writes {address, rkey, count,
 * epoch} into the sender's control words, epoch last. The sender adopts it
 * at its next send: that message is sequence 0 of the new run and says
 * where its messages in the old run end; it never writes the old run
 * again. The receiver delivers the old run's messages first, then moves
 * and returns the old run to the pool (deregistered first). One change at
 * a time per endpoint.
 *
 * Sizes (hipower_grant_decide()): an endpoint's fair share is the pool
 * divided among the active endpoints (at least its mailbox, at most the
 * largest run), so one peer's burst can take most of an idle pool and many
 * bursting peers get even shares. Growing leaves a reserve in the pool for
 * shrinking others: a shrink needs a new (smaller) run before the old one
 * comes back, and without a reserve a pool given out entirely to a few
 * peers could not be won back for the others. Idle endpoints are not
 * shrunk but released (a grant of no slots) when the pool is short.
 */

typedef enum {
    HIPOWER_GRANT_NONE,
    HIPOWER_GRANT_GROW,
    HIPOWER_GRANT_SHRINK
} hipower_grant_action_t;

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
 * What to do about an active endpoint whose run has @a cur_count slots:
 * shrink to @a fair (or what the pool has, if less) when it holds more
 * than that, grow towards @a fair when its sender asked for more (@a wants:
 * its ring was full, or it has no run). A grow takes only what leaves
 * @a reserve slots free and is at least the mailbox from no run; a shrink,
 * and a peer without a run for its mailbox, may take the reserve. The new
 * run's size goes to @a size_p. (Idle endpoints are released, not shrunk:
 * hipower_ep_grant.c.)
 */
static inline hipower_grant_action_t
hipower_grant_decide(uint32_t cur_count, uint32_t fair, int wants,
                     uint32_t free_slots, uint32_t reserve, uint32_t mailbox,
                     uint32_t *size_p)
{
    uint32_t size;

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

    if (!wants) {
        return HIPOWER_GRANT_NONE;
    }
    if ((cur_count == 0) && (free_slots >= mailbox) &&
        (free_slots < reserve + mailbox)) {
        /* A peer without a run gets its mailbox even from the reserve: the
         * reserve lets a shrink find room (and a shrink that finds none
         * waits for runs to come back), but a peer with nothing must not
         * wait for a mailbox the pool holds -- with a pool of a few
         * mailboxes the reserve kept one of them empty for ever (found by
         * the simulator's schedules) */
        *size_p = mailbox;
        return HIPOWER_GRANT_GROW;
    }
    if (free_slots <= reserve) {
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
 * bits 63..32 the sender's run epoch, bits 31..24 the final count of
 * batches of a filled slot it left open in that run (0: none; see
 * hipower_slot_ack_fill_final()), bit 16 ask, bits 15..0 where its
 * messages in its last run ended.
 */
#define HIPOWER_RUN_REQ_ASK        (1ull << 16)
#define HIPOWER_RUN_REQ_FILL_SHIFT 24
#define HIPOWER_RUN_REQ_FILL_MASK  (0xffull << HIPOWER_RUN_REQ_FILL_SHIFT)

/* @a req saying the final count @a fill of a filled slot left open */
static inline uint64_t hipower_run_req_with_fill(uint64_t req, uint32_t fill)
{
    return (req & ~HIPOWER_RUN_REQ_FILL_MASK) |
           ((uint64_t)(uint8_t)fill << HIPOWER_RUN_REQ_FILL_SHIFT);
}

static inline uint32_t hipower_run_req_fill(uint64_t req)
{
    return (uint8_t)(req >> HIPOWER_RUN_REQ_FILL_SHIFT);
}

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
