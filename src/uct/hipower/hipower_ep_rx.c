/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Active messages, receiver side: no receive work request and no
 * completion (docs/protocol.md). A slot holds the next message when its
 * trailer carries that message's sequence number (self mode), or when the
 * sender's written bit (pushed here or pulled from the sender) shows the
 * parity of that slot's next use; messages are taken in ring order, so in
 * send order, exactly once.
 *
 * The peer can write its slots at any time, so nothing of the receiver's
 * own is ever kept there: the trailer is read once and checked before
 * the data is touched, the handler is not offered the slot to keep
 * (UCT_CB_PARAM_FLAG_DESC), and the slot is released when it returns. With
 * UCX_HIPOWER_HOLD_SLOTS=y the handler gets a private copy instead, which
 * it may keep; a peer that scribbles over its slots corrupts only its own
 * messages.
 */

#include "hipower_ep.h"

#include <ucs/debug/log.h>
#include <string.h>


/* Receive batch per endpoint per progress call */
#define UCT_HIPOWER_RX_BATCH      64


/* uct_iface_release_desc() of a copy an AM handler kept */
static void uct_hipower_iface_release_desc(uct_recv_desc_t *self, void *desc)
{
    ucs_mpool_put_inline(UCS_PTR_BYTE_OFFSET(desc,
                                             -(ptrdiff_t)sizeof(uct_recv_desc_t*)));
}

ucs_status_t uct_hipower_iface_rx_init(uct_hipower_iface_t *iface,
                                       const uct_iface_params_t *params)
{
    static ucs_mpool_ops_t ops = {
        .chunk_alloc   = ucs_mpool_chunk_malloc,
        .chunk_release = ucs_mpool_chunk_free,
        .obj_init      = NULL,
        .obj_cleanup   = NULL
    };
    size_t align, align_offset;
    ucs_status_t status;

    iface->rx.release_desc.cb = uct_hipower_iface_release_desc;
    iface->rx.payload_offset  = sizeof(uct_recv_desc_t*) +
                                iface->config.rx_headroom;
    if (!iface->config.hold_slots) {
        return UCS_OK;
    }

    /* The copies a handler may keep: [release_desc][headroom][data], the
     * data at the alignment the user asked for */
    status = uct_iface_param_am_alignment(params, iface->config.max_payload,
                                          iface->rx.payload_offset,
                                          iface->rx.payload_offset, &align,
                                          &align_offset);
    if (status != UCS_OK) {
        return status;
    }

    return hipower_ucx_mpool_init(&iface->rx.mp,
                                  iface->rx.payload_offset +
                                  iface->config.max_payload,
                                  align_offset, align, 64, UINT_MAX, &ops,
                                  "hipower_rx_copies");
}

void uct_hipower_iface_rx_cleanup(uct_hipower_iface_t *iface)
{
    if (iface->config.hold_slots) {
        ucs_mpool_cleanup(&iface->rx.mp, 1);
    }
}

/* HOLD_SLOTS=y: the handler gets a copy it may keep */
static ucs_status_t
uct_hipower_ep_deliver_copy(uct_hipower_iface_t *iface, void *elem,
                            unsigned am_id, const void *data, uint32_t length)
{
    void *payload = UCS_PTR_BYTE_OFFSET(elem, iface->rx.payload_offset);
    void *desc    = UCS_PTR_BYTE_OFFSET(payload,
                                        -(ptrdiff_t)iface->config.rx_headroom);
    ucs_status_t status;

    memcpy(payload, data, length);
    iface->stats.rx_copies++;
    uct_recv_desc(desc) = &iface->rx.release_desc;
    status = uct_iface_invoke_am(&iface->super, am_id, payload, length,
                                 UCT_CB_PARAM_FLAG_DESC);
    if (status == UCS_OK) {
        ucs_mpool_put_inline(elem);
    }
    return status;
}

/*
 * The peer wrote to us, so its QP is ready. Its first write woke us
 * (hipower_event.c): that receive completion is polled even if nobody
 * sleeps, so that the receive is posted again.
 */
static UCS_F_NOINLINE void uct_hipower_ep_rx_first_contact(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_peer_ready(ep);
    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FIRST_IMM) &&
        !(ep->flags.all & UCT_HIPOWER_EP_FLAG_IMM_DUE)) {
        uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_IMM_DUE);
        uct_hipower_rx_expect(uct_hipower_ep_iface(ep), 1);
    }
}

/* Whether a message of the peer needs uct_hipower_ep_rx_first_contact():
 * the peer not known ready, or its wake-up due and not yet counted */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_rx_first_contact_due(const uct_hipower_ep_t *ep)
{
    uint64_t flags = ep->flags.all & (UCT_HIPOWER_EP_FLAG_PEER_READY |
                                      UCT_HIPOWER_EP_FLAG_FIRST_IMM |
                                      UCT_HIPOWER_EP_FLAG_IMM_DUE);

    return (flags != UCT_HIPOWER_EP_FLAG_PEER_READY) &&
           (flags != (UCT_HIPOWER_EP_FLAG_PEER_READY |
                      UCT_HIPOWER_EP_FLAG_FIRST_IMM |
                      UCT_HIPOWER_EP_FLAG_IMM_DUE));
}

/* The peer released @a acked of our slots (the acknowledgement in a
 * trailer): requests waiting for a slot may go now */
static UCS_F_NOINLINE void uct_hipower_ep_rx_acked(uct_hipower_ep_t *ep,
                                                   uint32_t acked)
{
    uct_hipower_ep_iface(ep)->stats.slots_acked += acked;
    if (!ucs_queue_is_empty(&ep->pending_q)) {
        uct_hipower_ep_add_pending_list(ep);
    }
}

/* A frame with no message (HIPOWER_SLOT_AM_NONE): its acknowledgement
 * still counts */
static UCS_F_NOINLINE void uct_hipower_ep_rx_none(uct_hipower_ep_t *ep,
                                                  const void *trailer)
{
    uint32_t acked = hipower_tx_ring_ack(&ep->tx.ring,
                                         hipower_slot_trailer_ack(trailer));

    if (acked > 0) {
        uct_hipower_ep_rx_acked(ep, acked);
    }
    uct_hipower_ep_iface(ep)->stats.rx_none++;
}

/*
 * Reports and counts a rejected trailer (hipower_slot_trailer_reject()).
 * Its key matched, so the peer wrote it for this very message, and no
 * honest peer writes a length or AM id the receiver's address does not
 * allow: the endpoint fails (uct_hipower_ep_rx_progress(), once this receive
 * loop is over), with one log line, rather than dropping such frames one
 * error line each for as long as the peer likes.
 */
static UCS_F_NOINLINE void
uct_hipower_ep_rx_bad_slot(uct_hipower_ep_t *ep, hipower_slot_trailer_t trailer,
                           uint32_t seq, uint32_t slot)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    const char *reason;

    hipower_slot_trailer_reject(trailer, iface->config.max_payload, seq,
                                UCT_AM_ID_MAX, &reason);
    ucs_error(UCT_HIPOWER_EP_FMT ": message %u in slot %u from the peer: "
              "%s; a broken or hostile peer, the endpoint fails",
              UCT_HIPOWER_EP_ARG(ep), seq, slot, reason);
    iface->stats.bad_slots++;
    uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_BAD_FRAME);
}

/*
 * A bundle frame (hipower_bundle.h, UCX_HIPOWER_BUNDLE) of @a length bytes
 * at @a frame, its trailer's key matched and its length within the slot:
 * each record goes to its handler as an active message of its own, in
 * order, by the rules of a single frame's message (in the slot, which the
 * handler may not keep; or, with HOLD_SLOTS=y, a copy it may keep); the
 * caller releases the slot after the last. The peer writes the frame, so
 * each record's header is read once and checked against what is left of
 * the frame before its data is touched: a record that leaves the frame, an
 * AM id out of range, a bundle in a bundle or an empty frame are written
 * by no honest peer -- the messages before it stay delivered, and the
 * endpoint fails as for any bad frame. Returns the messages delivered.
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_bundle_common(uct_hipower_ep_t *ep, const void *frame,
                                uint32_t length, const void *trailer,
                                uint32_t seq, uint32_t slot, int hold)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_bundle_iter_t iter;
    hipower_bundle_status_t status;
    uint64_t ack_word, rx_bytes = 0;
    uint32_t acked, msg_length;
    unsigned count = 0;
    const void *data;
    uint8_t am_id;
    void *elem;

    /* The acknowledgement the trailer carries, as any frame's */
    ack_word = hipower_slot_trailer_ack_word(trailer);
    uct_hipower_ep_rx_note_wants(ep, ack_word);
    acked    = hipower_tx_ring_ack(&ep->tx.ring, (uint32_t)ack_word);
    if (acked > 0) {
        uct_hipower_ep_rx_acked(ep, acked);
    }

    hipower_bundle_iter_init(&iter, frame, length);
    while ((status = hipower_bundle_next(&iter, UCT_AM_ID_MAX, &am_id, &data,
                                         &msg_length)) ==
           HIPOWER_BUNDLE_MSG) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id,
                           (void*)data, msg_length, "RX: AM slot %u, "
                           "bundled %u", slot, count);
        elem = hold ? ucs_mpool_get_inline(&iface->rx.mp) : NULL;
        if (hold && (elem != NULL)) {
            uct_hipower_ep_deliver_copy(iface, elem, am_id, data, msg_length);
        } else {
            /* (HOLD_SLOTS=y without memory for a copy: the handler may not
             * keep this one; the rest of the frame cannot wait) */
            uct_iface_invoke_am(&iface->super, am_id, (void*)data,
                                msg_length, 0);
        }
        rx_bytes += msg_length;
        ++count;
    }

    iface->stats.rx_msgs    += count;
    iface->stats.rx_bytes   += rx_bytes;
    iface->stats.rx_bundles++;
    iface->stats.rx_bundled += count;
    if (ucs_unlikely(status != HIPOWER_BUNDLE_END)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": bundle of %u bytes in slot %u "
                  "(message %u) from the peer: %s after %u message(s); a "
                  "broken or hostile peer, the endpoint fails",
                  UCT_HIPOWER_EP_ARG(ep), length, slot, seq,
                  hipower_bundle_status_str(status), count);
        iface->stats.bad_slots++;
        uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_BAD_FRAME);
    }
    return count;
}

/* uct_hipower_ep_rx_bundle_common() specialized for HOLD_SLOTS, as the
 * receive loop is: no per-message test of it in the walk */
static UCS_F_NOINLINE unsigned
uct_hipower_ep_rx_bundle_plain(uct_hipower_ep_t *ep, const void *frame,
                               uint32_t length, const void *trailer,
                               uint32_t seq, uint32_t slot)
{
    return uct_hipower_ep_rx_bundle_common(ep, frame, length, trailer, seq,
                                           slot, 0);
}

static UCS_F_NOINLINE unsigned
uct_hipower_ep_rx_bundle_hold(uct_hipower_ep_t *ep, const void *frame,
                              uint32_t length, const void *trailer,
                              uint32_t seq, uint32_t slot)
{
    return uct_hipower_ep_rx_bundle_common(ep, frame, length, trailer, seq,
                                           slot, 1);
}

static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_bundle(uct_hipower_ep_t *ep, const void *frame,
                         uint32_t length, const void *trailer, uint32_t seq,
                         uint32_t slot, int hold)
{
    return hold ? uct_hipower_ep_rx_bundle_hold(ep, frame, length, trailer,
                                                seq, slot) :
                  uct_hipower_ep_rx_bundle_plain(ep, frame, length, trailer,
                                                 seq, slot);
}

/*
 * Filled slots (hipower_fill.h, UCX_HIPOWER_BUNDLE_FILL): the peer's
 * bundles go into one slot, batch after batch, until it takes its next
 * slot. The receiver delivers each batch as soon as the slot's trailer
 * covers it, and keeps the slot (the ring's head stays there,
 * ep->rx.fill.done saying how far it was walked) until it is final: the
 * frame of the sender's next slot has arrived (RC placed every write to
 * this slot before it), or the sender moved to another run (the caller
 * knows: uct_hipower_ep_rx_switch()), or the run has one slot (the sender
 * then adds nothing).
 */

/* Delivers the batches of the filled slot at @a slot_base that the count
 * @a batches (its trailer's, key matched, or the final one) says beyond the
 * ep->rx.fill.walked walked (ep->rx.fill.done bytes); adds the messages
 * delivered to *count_p. Returns HIPOWER_FILL_END, or HIPOWER_FILL_BEHIND
 * if the count is below what was walked (an older write placed again:
 * not yet), or the error of a batch a peer lied about, which fails the
 * endpoint as any bad frame (what came before it stays delivered). */
static hipower_fill_status_t
uct_hipower_ep_rx_fill_walk(uct_hipower_ep_t *ep, char *slot_base,
                            uint32_t batches, uint32_t seq, uint32_t slot,
                            int hold, unsigned *count_p)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    const uint32_t trailer_offset = iface->config.layout.trailer_offset;
    const uint8_t *top         = (const uint8_t*)slot_base + trailer_offset;
    hipower_fill_status_t status;
    const uint8_t *records;
    uint32_t records_length, size;
    unsigned count = 0;

    while ((status = hipower_fill_next(top, ep->rx.fill.done,
                                       ep->rx.fill.walked, batches,
                                       iface->config.max_payload, &records,
                                       &records_length, &size)) ==
           HIPOWER_FILL_BATCH) {
        /* A bundle's records (and the trailer's acknowledgement, as any
         * frame's: a later batch's trailer carries a newer one) */
        count += uct_hipower_ep_rx_bundle(ep, records, records_length,
                                          top, seq, slot, hold);
        iface->stats.rx_fill_batches += (ep->rx.fill.done != 0);
        ep->rx.fill.done += size;
        ++ep->rx.fill.walked;
        ++ep->rx.fill.extra;
        if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
            *count_p += count;
            return HIPOWER_FILL_END;
        }
    }

    *count_p += count;
    if (ucs_unlikely((status != HIPOWER_FILL_END) &&
                     (status != HIPOWER_FILL_BEHIND))) {
        ucs_error(UCT_HIPOWER_EP_FMT ": filled slot %u (message %u) from the "
                  "peer, %u of %u batches (%u bytes) delivered: %s; a broken "
                  "or hostile peer, the endpoint fails",
                  UCT_HIPOWER_EP_ARG(ep), slot, seq, ep->rx.fill.walked,
                  batches, ep->rx.fill.done, hipower_fill_status_str(status));
        iface->stats.bad_slots++;
        uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_BAD_FRAME);
    }
    return status;
}

/* Whether the frame after message @a seq in slot @a slot has arrived: then
 * nothing more is written into @a slot, and *@a final_p is the final count
 * of batches that frame says @a slot got (0: it does not say) */
static int uct_hipower_ep_rx_fill_next_arrived(uct_hipower_ep_t *ep,
                                               uint32_t seq, uint32_t slot,
                                               uint32_t *final_p)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t num_slots         = ep->rx.ring.num_slots;
    uint32_t next_slot         = (slot + 1 == num_slots) ? 0 : slot + 1;
    uint32_t next_seq          = seq + 1;
    char *next_base;

    *final_p = 0;
    if (num_slots == 1) {
        return 1; /* Its sender never fills a run of one slot */
    }
    if (hipower_ring_seq_at_period(num_slots, next_seq)) {
        next_seq = 0;
    }
    next_base = (char*)ep->rx.slots +
                (size_t)next_slot * iface->config.layout.stride;
    if (!hipower_slot_trailer_is(*hipower_slot_mark(next_base,
                                                    &iface->config.layout),
                                 next_seq)) {
        return 0;
    }
    /* Its ack word landed with its mark; every rewrite of it (a batch, a
     * replay) says the same count */
    ucs_memory_cpu_load_fence();
    *final_p = hipower_slot_ack_fill_count(
            hipower_slot_trailer_ack_word(
                    next_base + iface->config.layout.trailer_offset));
    return 1;
}

/*
 * The filled slot of message @a seq at the ring's head, whose @a trailer
 * (read once, its key matched) says it is one: delivers what it covers
 * beyond what was delivered. Returns 1 if the slot is done -- final, or
 * @a close (the peer moved to another run; @a final, if not 0, the final
 * count of batches its move said), or bad -- and the caller releases it
 * and moves the ring on; 0 if it stays open for more batches.
 * Adds the messages delivered to *count_p. @a hold: HOLD_SLOTS, each
 * message a copy its handler may keep (the slot is not held for it).
 */
static UCS_F_NOINLINE int
uct_hipower_ep_rx_fill(uct_hipower_ep_t *ep, char *slot_base, uint32_t seq,
                       uint32_t slot, hipower_slot_trailer_t trailer,
                       int close, uint32_t final, int hold, unsigned *count_p)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t next_final;

    /* A count below what was walked, or this slot's key with another AM
     * id (no honest sender writes it), is "not yet": the slot stays open
     * and is read again, as a trailer that has not landed. A responder
     * that executes duplicate WRITEs again places the sender's writes to
     * the slot once more, in order, the newest last (hipower_fill.h); the
     * slot is never failed for it, and one that stays so stalls only its
     * sender (or the endpoint fails for a real reason). */
    if (!hipower_slot_trailer_is_fill(trailer) ||
        (uct_hipower_ep_rx_fill_walk(ep, slot_base, (uint32_t)trailer, seq,
                                     slot, hold, count_p) ==
         HIPOWER_FILL_BEHIND)) {
        return 0;
    }
    if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
        goto done;
    }
    /* What ends it says its count: its next frame if one came (a move to
     * another run ends the slot too, but says the count of the last slot
     * the sender filled there, which may be a later one: the receiver
     * reached this one first), else the move */
    if (uct_hipower_ep_rx_fill_next_arrived(ep, seq, slot, &next_final)) {
        final = next_final;
    } else if (!close) {
        return 0; /* The sender may add to it */
    }

    /* Final: everything the sender wrote into it landed before what said
     * so (its next frame, or its move to another run). How many batches:
     * what said so says it too, written once after the slot's last write
     * (a replay writes it again the same). The trailer may say fewer
     * while a replay of its older writes lands (docs/protocol.md 2.2). */
    ucs_memory_cpu_load_fence();
    if (final != 0) {
        if (ucs_unlikely(final < ep->rx.fill.walked)) {
            ucs_error(UCT_HIPOWER_EP_FMT ": filled slot %u (message %u) "
                      "from the peer: its next frame says %u batches, %u "
                      "were delivered; a broken or hostile peer, the "
                      "endpoint fails", UCT_HIPOWER_EP_ARG(ep), slot, seq,
                      final, ep->rx.fill.walked);
            uct_hipower_ep_iface(ep)->stats.bad_slots++;
            uct_hipower_ep_flags_set(ep, rx, UCT_HIPOWER_EP_FLAG_BAD_FRAME);
        } else {
            (void)uct_hipower_ep_rx_fill_walk(ep, slot_base, final, seq,
                                              slot, hold, count_p);
        }
        goto done;
    }
    /* An older peer's next frame: the trailer once more, for batches that
     * came since it was read */
    trailer = *hipower_slot_mark(slot_base, &iface->config.layout);
    if (!hipower_slot_trailer_is(trailer, seq)) {
        uct_hipower_ep_rx_bad_slot(ep, trailer, seq, slot);
        goto done;
    }
    ucs_memory_cpu_load_fence();
    if (!hipower_slot_trailer_is_fill(trailer) ||
        (uct_hipower_ep_rx_fill_walk(ep, slot_base, (uint32_t)trailer, seq,
                                     slot, hold, count_p) ==
         HIPOWER_FILL_BEHIND)) {
        return 0; /* Not yet, as above: read again at the next progress */
    }

done:
    /* One slot, taken by the ring's count from now on */
    ep->rx.fill.extra -= (ep->rx.fill.done != 0);
    ep->rx.fill.done   = 0;
    ep->rx.fill.walked = 0;
    return 1;
}

/*
 * The ring's head is a filled slot still open (ep->rx.fill.done): what the
 * sender added since, and whether it is done now; @a close: the peer moved
 * to another run, saying @a final (0: not said). Moves the ring past it
 * when done. Returns the messages delivered.
 */
static UCS_F_NOINLINE unsigned
uct_hipower_ep_rx_fill_resume(uct_hipower_ep_t *ep, int close,
                              uint32_t final, int hold)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t seq               = ring->head;
    uint32_t slot              = hipower_ring_slot(ring->num_slots, seq);
    char *slot_base            = (char*)ep->rx.slots +
                                 (size_t)slot * iface->config.layout.stride;
    unsigned count             = 0;
    hipower_slot_trailer_t trailer;

    trailer = *hipower_slot_mark(slot_base, &iface->config.layout);
    if (!hipower_slot_trailer_is(trailer, seq)) {
        /* A key that was there went away: only the peer rewrites it */
        uct_hipower_ep_rx_bad_slot(ep, trailer, seq, slot);
        ep->rx.fill.extra -= 1;
        ep->rx.fill.done   = 0;
        ep->rx.fill.walked = 0;
        return 0;
    }
    ucs_memory_cpu_load_fence();
    if (uct_hipower_ep_rx_fill(ep, slot_base, seq, slot, trailer, close,
                               final, hold, &count)) {
        hipower_rx_ring_advance(ring);
        hipower_rx_ring_release(ring, slot);
    }
    return count;
}

/* Whether the open filled slot at the ring's head has news: more batches,
 * the sender's next frame, or a trailer that is not the one it was */
static int uct_hipower_ep_rx_fill_ready(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t slot              = hipower_ring_slot(ring->num_slots,
                                                   ring->head);
    hipower_slot_trailer_t trailer;
    uint32_t final;

    trailer = *hipower_slot_mark((char*)ep->rx.slots +
                                 (size_t)slot * iface->config.layout.stride,
                                 &iface->config.layout);
    /* A count below what was walked is not news (an older write placed
     * again): the newer ones that follow are */
    return !hipower_slot_trailer_is(trailer, ring->head) ||
           (hipower_slot_trailer_is_fill(trailer) &&
            ((uint32_t)trailer > ep->rx.fill.walked)) ||
           uct_hipower_ep_rx_fill_next_arrived(ep, ring->head, slot, &final);
}

unsigned uct_hipower_ep_rx_fill_close(uct_hipower_ep_t *ep, uint32_t final)
{
    return (ep->rx.fill.done != 0) ?
           uct_hipower_ep_rx_fill_resume(ep, 1, final,
                                         uct_hipower_ep_iface(ep)->
                                                 config.hold_slots) : 0;
}

void uct_hipower_ep_rx_failed(uct_hipower_ep_t *ep)
{
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
        /* A frame no honest peer writes: the endpoint fails now that the
         * walk no longer uses its ring */
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
    } else {
        /* Failed by a handler during the walk: its runs go back now */
        uct_hipower_ep_rx_peer_gone(ep);
    }
}

/*
 * The receive loop, specialized by uct_hipower_ep_rx_progress() for the
 * notification mode and HOLD_SLOTS (constants here), as UCX specializes its
 * progress functions: no per-message test of either. Everything the loop
 * needs of the interface and the ring is loaded into locals once per
 * batch; the handler call would otherwise force reloads every message.
 * Self mode without HOLD_SLOTS, the default, takes the leaner
 * uct_hipower_ep_rx_progress_self() unless this is the first contact or
 * the sequence period is near.
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_progress_common(uct_hipower_ep_t *ep, int self, int hold)
{
    uct_hipower_iface_t *iface   = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring       = &ep->rx.ring;
    /* Per-message constants, loaded once per batch */
    const hipower_slot_layout_t layout = iface->config.layout;
    const uint32_t num_slots      = ring->num_slots;
    char *const slots             = ep->rx.slots;
    size_t max_payload            = iface->config.max_payload;
    void *elem                    = NULL;
    unsigned fill_count           = 0;
    unsigned count, i, am_id;
    hipower_slot_trailer_t trailer;
    const char *reason;
    ucs_status_t status;
    uint32_t slot, seq, length, acked;
    uint64_t ack_word;
    char *slot_base;
    void *data;

    if (self) {
        /* Each trailer says whether its message is there */
        count = UCT_HIPOWER_RX_BATCH;
    } else {
        count = hipower_rx_ring_ready_count(ring, ep->ctrl->written_view,
                                            UCT_HIPOWER_RX_BATCH);
        if (count == 0) {
            return 0;
        }
        /* The bitmap said so: now the slots may be read */
        ucs_memory_cpu_load_fence();
    }

    for (i = 0; i < count; ++i) {
        seq       = ring->head;
        slot      = hipower_ring_slot(num_slots, seq);
        slot_base = slots + (size_t)slot * layout.stride;
        trailer   = *hipower_slot_mark(slot_base, &layout);
        if (!hipower_slot_trailer_is(trailer, seq)) {
            /* Self mode: not there yet. Push and pull: the bitmap says the
             * message is there, but its trailer has not landed (a device
             * may place a write's packets, or two writes, out of order):
             * it will, so wait for it rather than drop the message. A
             * peer that sets bits and never writes stalls only itself. */
            break;
        }
        /* The trailer is there (in push and pull it may have landed after
         * the bitmap said so): now the data may be read */
        ucs_memory_cpu_load_fence();

        if (ucs_unlikely(uct_hipower_ep_rx_first_contact_due(ep))) {
            uct_hipower_ep_rx_first_contact(ep);
        }

        if (self && iface->config.bundle_fill &&
            ((unsigned)(trailer >> 32 & 0xff) == HIPOWER_SLOT_AM_FILL)) {
            if (!uct_hipower_ep_rx_fill(ep, slot_base, seq, slot, trailer, 0,
                                        0, hold, &fill_count)) {
                break; /* Open: the sender may add to it */
            }
            hipower_rx_ring_advance(ring);
            hipower_rx_ring_release(ring, slot);
            if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
                return i + 1 + fill_count; /* Nothing more of this peer */
            }
            continue;
        }

        if (hold) {
            elem = ucs_mpool_get_inline(&iface->rx.mp);
            if (ucs_unlikely(elem == NULL)) {
                /* No memory for a copy: the message waits in its slot */
                break;
            }
        }

        hipower_rx_ring_advance(ring);
        status = hipower_slot_trailer_parse(trailer, max_payload, seq,
                                            UCT_AM_ID_MAX, &am_id, &length,
                                            &reason);
        if (ucs_unlikely(status != UCS_OK)) {
            if (hipower_slot_trailer_is_none(trailer)) {
                /* No message, only its ack word */
                uct_hipower_ep_rx_none(ep, slot_base + layout.trailer_offset);
            } else if (iface->config.bundle &&
                       hipower_slot_trailer_is_bundle(trailer, max_payload)) {
                length = (uint32_t)trailer;
                uct_hipower_ep_rx_bundle(ep, slot_base +
                                         hipower_slot_data_offset(&layout,
                                                                  length),
                                         length,
                                         slot_base + layout.trailer_offset,
                                         seq, slot, hold);
            } else {
                uct_hipower_ep_rx_bad_slot(ep, trailer, seq, slot);
            }
            if (hold) {
                ucs_mpool_put_inline(elem);
            }
            hipower_rx_ring_release(ring, slot);
            if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
                return i + 1; /* Nothing more of this peer */
            }
            continue;
        }

        /* Slots of ours the peer has released: read after the mark (the
         * fence above), bounded by what we have outstanding */
        ack_word = hipower_slot_trailer_ack_word(slot_base +
                                                 layout.trailer_offset);
        uct_hipower_ep_rx_note_wants(ep, ack_word);
        acked = hipower_tx_ring_ack(&ep->tx.ring, (uint32_t)ack_word);
        if (ucs_unlikely(acked > 0)) {
            uct_hipower_ep_rx_acked(ep, acked);
        }

        /* Where the sender put the data, by the receiver's own layout: a
         * length its own limit allows lands inside the slot */
        data = slot_base + hipower_slot_data_offset(&layout, length);
        iface->stats.rx_msgs++;
        iface->stats.rx_bytes += length;
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id,
                           data, length, "RX: AM slot %u", slot);
        if (hold) {
            uct_hipower_ep_deliver_copy(iface, elem, am_id, data, length);
        } else {
            /* Without UCT_CB_PARAM_FLAG_DESC the handler may not keep it */
            uct_iface_invoke_am(&iface->super, am_id, data, length, 0);
        }
        hipower_rx_ring_release(ring, slot);
    }

    return i + fill_count;
}

/*
 * Self mode without HOLD_SLOTS: the receive path of almost every message.
 * The same steps as uct_hipower_ep_rx_progress_common() in the same order,
 * with the bookkeeping of a run done once at its end: the slot, its address
 * and the expected key step along with the sequence number (no division,
 * no period check inside the run), the ring moves and acknowledges once
 * (hipower_rx_ring_advance_run()), the statistics are added once. Each
 * message is still checked in full before its data is touched, and its
 * slot is consumed as soon as its handler returns.
 */
static unsigned uct_hipower_ep_rx_progress_self(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface   = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring       = &ep->rx.ring;
    const hipower_slot_layout_t layout = iface->config.layout;
    const uint32_t num_slots      = ring->num_slots;
    char *const slots             = ep->rx.slots;
    const size_t max_payload      = iface->config.max_payload;
    uint32_t slot, seq, length, acked;
    hipower_slot_trailer_t trailer;
    hipower_slot_placement_t placement;
    uint64_t key, ack_word, ack_or = 0, rx_bytes = 0;
    unsigned i, am_id, fill_count = 0;
    char *slot_base;
    void *data;

    seq       = ring->head;
    slot      = hipower_ring_slot(num_slots, seq);
    slot_base = slots + (size_t)slot * layout.stride;
    key       = hipower_slot_trailer_key(seq);
    if ((*hipower_slot_mark(slot_base, &layout) &
         HIPOWER_SLOT_TRAILER_KEY_MASK) != key) {
        return 0; /* Nothing new: one load, the idle poll */
    }

    if (ucs_unlikely(uct_hipower_ep_rx_first_contact_due(ep) ||
                     !hipower_rx_ring_run_fits(ring, UCT_HIPOWER_RX_BATCH))) {
        return uct_hipower_ep_rx_progress_common(ep, 1, 0);
    }

    hipower_slot_placement_init(&placement, &layout);
    for (i = 0; i < UCT_HIPOWER_RX_BATCH; ++i) {
        trailer = *hipower_slot_mark(slot_base, &layout);
        if ((trailer & HIPOWER_SLOT_TRAILER_KEY_MASK) != key) {
            break;
        }
        /* The trailer came last: now the data may be read */
        ucs_memory_cpu_load_fence();

        if (ucs_likely(hipower_slot_trailer_fits(trailer, max_payload,
                                                 UCT_AM_ID_MAX))) {
            length = (uint32_t)trailer;
            am_id  = (unsigned)(trailer >> 32) & 0xff;

            /* Slots of ours the peer has released: read after the mark,
             * bounded by what we have outstanding */
            ack_word = hipower_slot_trailer_ack_word(slot_base +
                                                     layout.trailer_offset);
            ack_or  |= ack_word;
            acked    = hipower_tx_ring_ack(&ep->tx.ring, (uint32_t)ack_word);
            if (ucs_unlikely(acked > 0)) {
                uct_hipower_ep_rx_acked(ep, acked);
            }

            /* Inside the slot for a length the receiver's limit allows */
            data      = slot_base + hipower_slot_place(&placement, length);
            rx_bytes += length;
            uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id,
                               data, length, "RX: AM slot %u", slot);
            /* Without UCT_CB_PARAM_FLAG_DESC the handler may not keep it */
            uct_iface_invoke_am(&iface->super, am_id, data, length, 0);
        } else if (hipower_slot_trailer_is_none(trailer)) {
            /* No message, only its ack word */
            uct_hipower_ep_rx_none(ep, slot_base + layout.trailer_offset);
        } else if (iface->config.bundle &&
                   hipower_slot_trailer_is_bundle(trailer, max_payload)) {
            /* Many messages, each checked as it is walked (and counted:
             * not as one among the run's) */
            --iface->stats.rx_msgs;
            length = (uint32_t)trailer;
            uct_hipower_ep_rx_bundle(ep, slot_base +
                                     hipower_slot_place(&placement, length),
                                     length,
                                     slot_base + layout.trailer_offset,
                                     seq + i, slot, 0);
            if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
                hipower_rx_ring_consume(ring, slot);
                ++i; /* Nothing more of this peer */
                break;
            }
        } else if (iface->config.bundle_fill &&
                   hipower_slot_trailer_is_fill(trailer)) {
            /* Batches of bundles, counted as they are walked */
            if (!uct_hipower_ep_rx_fill(ep, slot_base, seq + i, slot, trailer,
                                        0, 0, 0, &fill_count)) {
                break; /* Open: the ring stays at it */
            }
            --iface->stats.rx_msgs;
            if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
                hipower_rx_ring_consume(ring, slot);
                ++i; /* Nothing more of this peer */
                break;
            }
        } else {
            uct_hipower_ep_rx_bad_slot(ep, trailer, seq + i, slot);
            hipower_rx_ring_consume(ring, slot);
            ++i; /* Nothing more of this peer */
            break;
        }
        hipower_rx_ring_consume(ring, slot);

        key       += HIPOWER_SLOT_TRAILER_KEY_STEP;
        slot_base += layout.stride;
        if (ucs_unlikely(++slot == num_slots)) {
            slot      = 0;
            slot_base = slots;
        }
    }

    hipower_rx_ring_advance_run(ring, i);
    iface->stats.rx_msgs  += i;
    iface->stats.rx_bytes += rx_bytes;
    uct_hipower_ep_rx_note_wants(ep, ack_or);
    return i + fill_count;
}

static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_progress_self_mode(uct_hipower_ep_t *ep, int hold)
{
    unsigned count = 0;

    /* The ring's head is a filled slot the sender may still add to */
    if (ucs_unlikely(ep->rx.fill.done != 0)) {
        count = uct_hipower_ep_rx_fill_resume(ep, 0, 0, hold);
        if ((ep->rx.fill.done != 0) ||
            (ep->flags.all & UCT_HIPOWER_EP_FLAG_BAD_FRAME)) {
            return count;
        }
    }

    return count + (hold ? uct_hipower_ep_rx_progress_common(ep, 1, 1) :
                           uct_hipower_ep_rx_progress_self(ep));
}

/*
 * Self mode: the messages, then the shared pool's business (hipower_ep_grant.c):
 * while a grant is out, whether the peer moved to it (then the messages of
 * the new run); after messages, whether the peer's run is to change
 * because it said it was full or it holds more than its share.
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_progress_runs(uct_hipower_ep_t *ep, int hold)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    unsigned count             = 0;

    /* An endpoint without a run (hipower_ep_grant.c) has no slot to look at */
    if (ucs_likely(ep->rx.ring.num_slots > 0)) {
        count = uct_hipower_ep_rx_progress_self_mode(ep, hold);
        if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED)) {
            return count; /* By a handler: no more runs for it */
        }
    }

    if (ucs_unlikely((ep->rx.granted.count > 0) ||
                     (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING))) {
        if (uct_hipower_ep_rx_switch(ep) && (ep->rx.ring.num_slots > 0)) {
            count += uct_hipower_ep_rx_progress_self_mode(ep, hold);
        }
    } else if ((count > 0) && iface->config.shared_pool &&
               (ep->rx.wants ||
                (ep->rx.ring.num_slots > iface->pool.fair))) {
        uct_hipower_ep_rx_regrant(ep);
    }
    return count;
}

static UCS_F_ALWAYS_INLINE unsigned
uct_hipower_ep_rx_progress_mode(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (iface->config.notify == UCT_HIPOWER_NOTIFY_SELF) {
        return iface->config.hold_slots ?
               uct_hipower_ep_rx_progress_runs(ep, 1) :
               uct_hipower_ep_rx_progress_runs(ep, 0);
    }

    return iface->config.hold_slots ?
           uct_hipower_ep_rx_progress_common(ep, 0, 1) :
           uct_hipower_ep_rx_progress_common(ep, 0, 0);
}

unsigned uct_hipower_ep_rx_progress(uct_hipower_ep_t *ep)
{
    unsigned count;

    if (!uct_hipower_ep_rx_enter(ep)) {
        return 0; /* Called by a handler of this endpoint's walk */
    }
    count = uct_hipower_ep_rx_progress_mode(ep);
    uct_hipower_ep_rx_leave(ep);
    return count;
}

/* Whether the next message has arrived (the sleep check) */
int uct_hipower_ep_rx_ready(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t slot;

    if (iface->config.notify != UCT_HIPOWER_NOTIFY_SELF) {
        return hipower_rx_ring_ready_count(ring, ep->ctrl->written_view,
                                           1) > 0;
    }

    if (uct_hipower_ep_rx_granted_used(ep)) {
        return 1; /* The peer moved to its granted run */
    }

    if (ring->num_slots == 0) {
        return 0; /* No run: its peer's request comes with an immediate */
    }

    if (ep->rx.fill.done != 0) {
        return uct_hipower_ep_rx_fill_ready(ep);
    }

    slot = hipower_ring_slot(ring->num_slots, ring->head);
    return hipower_slot_trailer_is(*hipower_slot_mark(
                                           UCS_PTR_BYTE_OFFSET(
                                                   ep->rx.slots,
                                                   (size_t)slot *
                                                   iface->config.layout.stride),
                                           &iface->config.layout),
                                   ring->head);
}
