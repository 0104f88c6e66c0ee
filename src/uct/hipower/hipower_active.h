/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_ACTIVE_H_
#define UCT_HIPOWER_ACTIVE_H_

#include <stdint.h>

/*
 * Which endpoints a progress call visits (docs/protocol.md, section 9), as
 * rules without verbs.
 *
 * A receiver polls the slots of its *active* endpoints only. Every other
 * endpoint is *idle*: its peer has been asked, by the one-endpoint form of
 * the sleep handshake (hipower_event.c), to send its next announcing write
 * with an immediate. That write's receive completion on the interface's
 * wake-up CQ names the QP, and the endpoint becomes active again. So a
 * progress call costs the active endpoints plus one empty CQ poll, however
 * many idle endpoints the interface has, and an idle peer costs no traffic
 * at all: nothing is sent to it until it sends.
 *
 * - An endpoint starts idle: a sender's first announcing write always
 *   carries the immediate (its woken generation starts at none).
 * - An active endpoint that brought no message for IDLE_TIME is demoted:
 *   the receiver writes a fresh generation into the peer's peer_sleep_gen
 *   and reads the peer's announced count after it on the same QP.
 * - When that read completes, the endpoint leaves the active set only if
 *   every message the peer had announced was delivered
 *   (hipower_demote_verdict()). The sender stores its announced count,
 *   fences, then loads the generation: a message is either counted by the
 *   read, or sent after the sender saw the generation, and then its write
 *   carries the immediate. No message is left in an idle endpoint's slots
 *   without a completion that names it.
 *
 * Generations come from one counter per interface, shared with the sleep
 * handshake of uct_iface_event_arm(), so that every handshake's generation
 * is new to the peer: its sender wakes each generation once.
 */

typedef enum {
    /* Every announced message was delivered: the endpoint goes idle */
    HIPOWER_DEMOTE_IDLE,
    /* Messages announced before the peer saw the generation are still
     * landing: stay active, deliver them, try again after IDLE_TIME */
    HIPOWER_DEMOTE_BEHIND,
    /* A later handshake (a sleep) replaced this one, or a message came
     * while it was out: stay active */
    HIPOWER_DEMOTE_STALE
} hipower_demote_verdict_t;


/* Whether an active endpoint whose last message came at @a last_news is
 * idle at @a now (times in any one unit, wrapping) */
static inline int hipower_active_is_idle(uint64_t now, uint64_t last_news,
                                         uint64_t idle_time)
{
    return (now - last_news) >= idle_time;
}

/**
 * The verdict of a demotion handshake of generation @a gen that completed
 * with the peer's announced count @a announced (mod 2^32 matters), when
 * the endpoint's latest handshake is @a posted_gen, @a delivered messages
 * were delivered in all (mod 2^32), and @a news says whether a message was
 * delivered since the handshake was posted.
 */
static inline hipower_demote_verdict_t
hipower_demote_verdict(uint64_t gen, uint64_t posted_gen, int news,
                       uint32_t delivered, uint64_t announced)
{
    if ((gen != posted_gen) || news) {
        return HIPOWER_DEMOTE_STALE;
    }
    if ((uint32_t)announced != delivered) {
        return HIPOWER_DEMOTE_BEHIND;
    }
    return HIPOWER_DEMOTE_IDLE;
}

/* The next handshake generation: never 0 (what a peer's word starts as,
 * and "never slept" for the interface) */
static inline uint64_t hipower_gen_next(uint64_t *seq)
{
    if (++(*seq) == 0) {
        ++(*seq);
    }
    return *seq;
}

#endif
