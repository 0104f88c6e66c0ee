/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_SLOT_H_
#define UCT_HIPOWER_SLOT_H_

#include "hipower_bundle.h"
#include "hipower_fill.h"

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Protocol v2 frame (docs/protocol.md): a message is written into a receive
 * slot as [data][pad][trailer], so that it ends at a fixed place, the
 * slot's last 16 bytes. The trailer says what the message is and that it has
 * arrived: one RDMA_WRITE carries data and mark, and the receiver polls one
 * aligned 64-bit word per slot. Every message to a slot rewrites that word
 * with its own sequence number, so a stale one (the slot's previous lap, or
 * the zeroes of a slot never written) never looks new; no clearing needed.
 *
 * The trailer is two little-endian 64-bit words:
 *   ack word (first):
 *     bits  0..31  the sender's acknowledgement of the reverse direction:
 *                  how many of the messages it received from this peer it
 *                  has released, a count modulo 2^32 (hipower_ring.h); it
 *                  lets this peer reuse those slots without reading the
 *                  sender's consumed bitmap
 *     bits 32..47  first message of a new run (HIPOWER_SLOT_ACK_SWITCH):
 *                  where the sender's messages in its old run end, the low
 *                  16 bits of the sequence number after its last one
 *     bit  48      HIPOWER_SLOT_ACK_WANTS: the sender found its run full
 *                  since its last message (it asks for a larger one)
 *     bit  49      HIPOWER_SLOT_ACK_SWITCH
 *     bits 50..55  reserved, 0
 *     bits 56..63  in the frame after a filled slot of the sender's (the
 *                  ring's next slot, or a new run's first), that slot's
 *                  final count of batches (hipower_fill.h); 0 otherwise
 * (docs/protocol.md, section 9.2: runs granted from a shared pool)
 *   mark word (last, read with one load):
 *     bits  0..31  length of the AM data (for am_short: 8-byte header + payload)
 *     bits 32..39  active message id
 *     bits 40..47  HIPOWER_SLOT_MAGIC: this protocol version
 *     bits 48..63  low 16 bits of the message's sequence number
 * The data ends where the trailer starts, minus the pad that aligns its start
 * as the receiver's am_alignment/am_align_offset ask (no pad without them).
 *
 * Magic and sequence, the arrival key, are the frame's last bytes on
 * purpose. Packets of a WRITE start at MTU multiples from the data's start,
 * so the trailer may straddle two of them and a poll may find it half
 * written. With in-order placement what has landed is a prefix of the
 * frame: if the key bytes read equal the expected ones, every byte after
 * the landed prefix already holds its final value, so the whole trailer
 * and all data before it are there. The key of a stale lap (another
 * sequence number) or of fresh memory (no magic) never equals it in full.
 *
 * The receiver trusts none of it: the length is bounded by its own largest
 * message, which its layout has room for, before anything is read; the
 * acknowledgement only ever frees slots of this peer's own ring, and only
 * as many as are outstanding (hipower_tx_ring_ack()).
 */
typedef uint64_t hipower_slot_trailer_t; /* The mark word */

#define HIPOWER_SLOT_TRAILER_SIZE  16     /* Ack word and mark word */
#define HIPOWER_SLOT_MARK_OFFSET   8      /* Of the mark word in the trailer */
#define HIPOWER_SLOT_MAGIC         0xb3ull  /* Protocol v2, with the ack word */

/* Magic and sequence: what a receiver expects before the message is there */
#define HIPOWER_SLOT_TRAILER_KEY_MASK  0xffffff0000000000ull

/* Largest AM payload (incl. am_short's 8-byte header) a slot can carry */
static inline size_t hipower_slot_max_payload(size_t slot_size)
{
    return slot_size - HIPOWER_SLOT_TRAILER_SIZE;
}

/* The mark word of message @a seq (the sender side) */
static inline hipower_slot_trailer_t
hipower_slot_trailer_make(uint8_t am_id, uint32_t length, uint32_t seq)
{
    return (uint64_t)length | ((uint64_t)am_id << 32) |
           (HIPOWER_SLOT_MAGIC << 40) | ((uint64_t)(uint16_t)seq << 48);
}

/* The AM id of a frame that carries no message: the first of a new run
 * when the sender had nothing to send (docs/protocol.md 9.2). Receivers
 * consume it without a handler */
#define HIPOWER_SLOT_AM_NONE           0xff

/* Whether an arrived trailer (key matched) is that of a no-message frame */
static inline int hipower_slot_trailer_is_none(uint64_t trailer)
{
    return (uint32_t)trailer == 0 &&
           ((unsigned)(trailer >> 32) & 0xff) == HIPOWER_SLOT_AM_NONE;
}

/* Whether an arrived trailer (key matched) is that of a bundle frame
 * (hipower_bundle.h) whose length fits a slot of @a max_payload bytes of
 * data: its records are checked as they are walked */
static inline int hipower_slot_trailer_is_bundle(uint64_t trailer,
                                                 size_t max_payload)
{
    return ((unsigned)(trailer >> 32) & 0xff) == HIPOWER_SLOT_AM_BUNDLE &&
           (uint32_t)trailer <= max_payload;
}

/* Whether an arrived trailer (key matched) is that of a filled slot
 * (hipower_fill.h), its length field a count of batches: they are checked
 * as they are walked */
static inline int hipower_slot_trailer_is_fill(uint64_t trailer)
{
    return ((unsigned)(trailer >> 32) & 0xff) == HIPOWER_SLOT_AM_FILL &&
           ((uint32_t)trailer - 1 < HIPOWER_FILL_MAX_BATCHES);
}

/* Ack word flags (bits 32..63, see above) */
#define HIPOWER_SLOT_ACK_WANTS         (1ull << 48)
#define HIPOWER_SLOT_ACK_SWITCH        (1ull << 49)

/* The ack word bits of the frame after a filled slot: its final count of
 * batches, 1 to HIPOWER_FILL_MAX_BATCHES; the receiver takes it from there,
 * not from the slot's trailer, which a responder that executes duplicate
 * WRITEs again may show with an older count (docs/protocol.md 2.2) */
#define HIPOWER_SLOT_ACK_FILL_SHIFT    56
#define HIPOWER_SLOT_ACK_FILL_MASK     (0xffull << HIPOWER_SLOT_ACK_FILL_SHIFT)

static inline uint64_t hipower_slot_ack_fill_final(uint32_t count)
{
    return (uint64_t)(uint8_t)count << HIPOWER_SLOT_ACK_FILL_SHIFT;
}

/* The final count of the filled slot before, or 0 if it was none */
static inline uint32_t hipower_slot_ack_fill_count(uint64_t ack_word)
{
    return (uint8_t)(ack_word >> HIPOWER_SLOT_ACK_FILL_SHIFT);
}

/* The ack word's upper half in the first message of a new run, whose old
 * run ends before sequence @a old_end */
static inline uint64_t hipower_slot_ack_switch(uint32_t old_end)
{
    return HIPOWER_SLOT_ACK_SWITCH | ((uint64_t)(uint16_t)old_end << 32);
}

/* The old run's end a switch message carries (16 bits of it) */
static inline uint16_t hipower_slot_ack_old_end(uint64_t ack_word)
{
    return (uint16_t)(ack_word >> 32);
}

/*
 * Stores the whole trailer of message @a seq, carrying the ack word
 * @a ack_word (the acknowledgement, and flags in its upper half), at @a dst:
 * right after the data, which may end anywhere, so the stores do not assume
 * alignment (one instruction each on x86).
 */
static inline void hipower_slot_trailer_store(void *dst, uint8_t am_id,
                                              uint32_t length, uint32_t seq,
                                              uint64_t ack_word)
{
    hipower_slot_trailer_t mark    = hipower_slot_trailer_make(am_id, length,
                                                               seq);

    memcpy(dst, &ack_word, sizeof(ack_word));
    memcpy((char*)dst + HIPOWER_SLOT_MARK_OFFSET, &mark, sizeof(mark));
}

/* The ack word of an arrived message's trailer */
static inline uint64_t hipower_slot_trailer_ack_word(const void *trailer)
{
    return *(const volatile uint64_t*)trailer;
}

/* The acknowledgement in the ack word of an arrived message's trailer */
static inline uint32_t hipower_slot_trailer_ack(const void *trailer)
{
    return (uint32_t)hipower_slot_trailer_ack_word(trailer);
}

/* The part of message @a seq's trailer the receiver knows in advance */
static inline uint64_t hipower_slot_trailer_key(uint32_t seq)
{
    return (HIPOWER_SLOT_MAGIC << 40) | ((uint64_t)(uint16_t)seq << 48);
}

/* key(seq + 1) - key(seq), modulo 2^64: the sequence bits are the top ones,
 * so a receive loop steps its key by one addition */
#define HIPOWER_SLOT_TRAILER_KEY_STEP  (1ull << 48)

/* Whether @a trailer is that of message @a seq (arrived, if it is intact) */
static inline int hipower_slot_trailer_is(hipower_slot_trailer_t trailer,
                                          uint32_t seq)
{
    return (trailer & HIPOWER_SLOT_TRAILER_KEY_MASK) ==
           hipower_slot_trailer_key(seq);
}

/* Whether the length and AM id of a trailer whose key matched are ones the
 * receiver accepts: the length within its slots, the id a valid one */
static inline int hipower_slot_trailer_fits(hipower_slot_trailer_t trailer,
                                            size_t max_payload,
                                            unsigned num_am_ids)
{
    return ((uint32_t)trailer <= max_payload) &
           (((unsigned)(trailer >> 32) & 0xff) < num_am_ids);
}

/*
 * Where messages go in a receive slot. The receiver decides, from its own
 * interface parameters, and tells the sender in the endpoint address: slots
 * are "stride" bytes apart, each ends with its trailer at "trailer_offset",
 * and a message's data starts where hipower_slot_data_offset() says. Every
 * slot has room for SLOT_SIZE - 16 bytes of data whatever the alignment, so
 * the largest message a sender may write does not depend on the peer.
 */
typedef struct hipower_slot_layout {
    uint32_t stride;         /* Bytes from one slot to the next */
    uint32_t trailer_offset; /* Of the trailer in a slot: stride - 16 */
    uint32_t align;          /* Data + align_offset is a multiple of it */
    uint32_t align_offset;
} hipower_slot_layout_t;

/* Slots are at least cache-line aligned */
#define HIPOWER_SLOT_ALIGN  64

/**
 * Checks UCT's am_alignment/am_align_offset interface parameters (uct.h):
 * an offset only with an alignment, the alignment a power of 2, the offset
 * below it. Returns NULL if valid, else what is wrong.
 */
const char *hipower_slot_check_alignment(int has_align, size_t align,
                                         int has_offset, size_t offset);

/**
 * Lays out slots for messages of up to hipower_slot_max_payload(@a slot_size)
 * bytes of data, so that the data plus @a align_offset is a multiple of
 * @a align in every slot, given an arena that starts at a multiple of
 * hipower_slot_base_align(@a align). @a align = 1: no alignment asked for.
 */
void hipower_slot_layout(size_t slot_size, size_t align, size_t align_offset,
                         hipower_slot_layout_t *layout);

/**
 * Whether a peer's @a layout is one this process can send into: a sane
 * alignment, the trailer aligned and inside the slot, and room for
 * @a max_payload bytes of data before it however they are aligned. Returns
 * NULL if so, else what is wrong.
 */
const char *hipower_slot_layout_check(const hipower_slot_layout_t *layout,
                                      size_t max_payload);

/* Alignment the arena's base needs for hipower_slot_layout() */
static inline size_t hipower_slot_base_align(size_t align)
{
    return (align > HIPOWER_SLOT_ALIGN) ? align : HIPOWER_SLOT_ALIGN;
}

/*
 * Offset in a slot of the data of a @a length-byte message: the latest
 * start, as aligned as the layout asks, from which the data ends at or
 * before the trailer. Sender and receiver compute the same. Without
 * alignment: trailer_offset - length. Never negative for a length the
 * layout has room for (hipower_slot_layout_check()).
 */
/*
 * hipower_slot_data_offset() of one layout with what does not depend on the
 * length computed once: three operations per message on the hot paths.
 */
typedef struct hipower_slot_placement {
    uint32_t end;          /* trailer_offset + align_offset */
    uint32_t mask;         /* ~(align - 1) */
    uint32_t align_offset;
} hipower_slot_placement_t;

static inline void
hipower_slot_placement_init(hipower_slot_placement_t *placement,
                            const hipower_slot_layout_t *layout)
{
    placement->end          = layout->trailer_offset + layout->align_offset;
    placement->mask         = ~(layout->align - 1);
    placement->align_offset = layout->align_offset;
}

static inline uint32_t
hipower_slot_place(const hipower_slot_placement_t *placement, uint32_t length)
{
    return ((placement->end - length) & placement->mask) -
           placement->align_offset;
}

static inline uint32_t
hipower_slot_data_offset(const hipower_slot_layout_t *layout, uint32_t length)
{
    hipower_slot_placement_t placement;

    hipower_slot_placement_init(&placement, layout);
    return hipower_slot_place(&placement, length);
}

/* The mark word of the slot at @a slot_base, where a receiver polls */
static inline const volatile hipower_slot_trailer_t *
hipower_slot_mark(const void *slot_base, const hipower_slot_layout_t *layout)
{
    return (const volatile hipower_slot_trailer_t*)
           ((const char*)slot_base + layout->trailer_offset +
            HIPOWER_SLOT_MARK_OFFSET);
}

/* Bytes between the data's end and the trailer (0 without alignment) */
static inline uint32_t
hipower_slot_pad(const hipower_slot_layout_t *layout, uint32_t length)
{
    return layout->trailer_offset - hipower_slot_data_offset(layout, length) -
           length;
}

/* Why hipower_slot_trailer_parse() rejected @a trailer: sets *reason_p */
ucs_status_t hipower_slot_trailer_reject(hipower_slot_trailer_t trailer,
                                         size_t max_payload,
                                         uint32_t expected_seq,
                                         unsigned num_am_ids,
                                         const char **reason_p);

/**
 * Validates the trailer of message @a expected_seq, read with one load from
 * a slot that holds up to @a max_payload bytes of data. @a num_am_ids is
 * the number of valid AM ids (UCT_AM_ID_MAX). On success sets *am_id_p and
 * *length_p. On failure returns UCS_ERR_INVALID_PARAM and sets *reason_p to
 * a static string that says what was wrong (for an error message that also
 * names the peer). Inline, with one branch for a good trailer: it runs
 * once per received message.
 */
static inline ucs_status_t
hipower_slot_trailer_parse(hipower_slot_trailer_t trailer, size_t max_payload,
                           uint32_t expected_seq, unsigned num_am_ids,
                           unsigned *am_id_p, uint32_t *length_p,
                           const char **reason_p)
{
    uint32_t length = (uint32_t)trailer;
    unsigned am_id  = (unsigned)(trailer >> 32) & 0xff;

    /* Every check applies to the one copy whose values are returned: the
     * peer (a buggy or hostile one) may write the slot at any time */
    if (__builtin_expect(!(hipower_slot_trailer_is(trailer, expected_seq) &
                           hipower_slot_trailer_fits(trailer, max_payload,
                                                     num_am_ids)), 0)) {
        *am_id_p  = 0;
        *length_p = 0;
        return hipower_slot_trailer_reject(trailer, max_payload, expected_seq,
                                           num_am_ids, reason_p);
    }

    *am_id_p  = am_id;
    *length_p = length;
    return UCS_OK;
}

#endif
