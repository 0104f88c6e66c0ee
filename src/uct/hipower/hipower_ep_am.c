/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Active messages, sender side (docs/protocol.md): a message is one
 * RDMA_WRITE of its frame, the data and the trailer that ends the peer's
 * next slot. In self mode (the default) that is all: the trailer tells the
 * receiver the message has arrived, so once a send returned UCS_OK the
 * receiver sees it without any further call of the sender. In push mode
 * the sender then writes the slot's bitmap word too (an inline RDMA_WRITE
 * after the frame on the same QP, which RC places after it), in the same
 * call with UCX_HIPOWER_ANNOUNCE_BATCH=1. In pull mode the receiver reads
 * the sender's published bitmap.
 */

#include "hipower_ep.h"
#include "hipower_tx_frame_impl.h"

#include <ucs/debug/log.h>
#include <string.h>


/* UCX's wording, which its tests look for */
static ucs_status_t uct_hipower_ep_bad_am_id(uct_hipower_ep_t *ep,
                                             const char *op, unsigned id)
{
    ucs_error(UCT_HIPOWER_EP_FMT ": %s: invalid active message id %u "
              "(must be below %u)", UCT_HIPOWER_EP_ARG(ep), op, id,
              (unsigned)UCT_AM_ID_MAX);
    return UCS_ERR_INVALID_PARAM;
}

/*
 * am_short's frame [header][payload][trailer] in one buffer on the stack,
 * one inline gather entry: the provider copies each entry of an inline
 * request on its own, so one copy here is cheaper. @a one_write: see
 * uct_hipower_ep_send_msg().
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_am_short_frame(uct_hipower_ep_t *ep, uint8_t id, uint64_t hdr,
                              const void *buffer, unsigned length,
                              int one_write)
{
    uint8_t frame[UCT_HIPOWER_MAX_INLINE];
    struct ibv_send_wr wr;
    struct ibv_sge sge[2];

    memcpy(frame, &hdr, sizeof(hdr));
    memcpy(frame + sizeof(hdr), buffer, length);
    sge[0].addr   = (uintptr_t)frame;
    sge[0].length = sizeof(hdr) + length;
    wr.sg_list    = sge;
    wr.num_sge    = 1;
    wr.send_flags = IBV_SEND_INLINE;
    return uct_hipower_ep_send_msg(ep, &wr, frame + sizeof(hdr) + length, 0,
                                   1, id, sizeof(hdr) + length, 0, NULL,
                                   one_write, 0);
}

/*
 * Whether a short or bcopy message that could not go out now may go into a
 * bundle instead: only for want of a slot or of room (the endpoint is
 * connected and has not failed, and no pending request is ahead of it),
 * only to a peer that takes bundles, and only while the peer gives us a
 * run: its slots come back as it consumes them, while a run it has yet
 * to grant may take as long as its pool is short (the message waits as a
 * pending request then, which keeps the user's send incomplete)
 */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_may_bundle(uct_hipower_ep_t *ep, ucs_status_t status)
{
    return (status == UCS_ERR_NO_RESOURCE) &&
           (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLES) &&
           (ep->tx.ring.num_slots > 0);
}

/* A short or bcopy message goes as a batch of one into the open filled
 * slot (uct_hipower_ep_fill_open()), the window being open for it */
static UCS_F_ALWAYS_INLINE int uct_hipower_ep_fill_lone(uct_hipower_ep_t *ep)
{
    return uct_hipower_ep_fill_open(ep) &&
           !hipower_txwin_full(&ep->tx.win, ep->txqp.txq.acked_sn);
}

/* A message placed into a bundle opened for it as a batch of the open
 * filled slot (uct_hipower_ep_am_place()'s @a post): posted at once. It
 * was accepted: a post that fails fails the endpoint, which reports it
 * (uct_hipower_ep_bundle_post()); one that finds no room leaves it to
 * progress, as any bundle. */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_am_post_placed(uct_hipower_ep_t *ep, ucs_status_t status,
                              int post)
{
    if (ucs_unlikely(post) && (status == UCS_OK)) {
        (void)uct_hipower_ep_bundle_post(ep, 1);
    }
}

/*
 * Where a short or bcopy message of @a length bytes goes when it does not
 * take am_short's fast path: a frame of its own, now (UCS_OK); the
 * endpoint's bundle (UCS_INPROGRESS); or nowhere yet (UCS_ERR_NO_RESOURCE,
 * or an error). An open bundle keeps the endpoint's order: the message
 * joins it, or the bundle goes first. While a pending dispatch gathers
 * (UCT_HIPOWER_EP_FLAG_GATHER), every message goes into the bundle. With
 * the window open and a filled slot open (uct_hipower_ep_fill_open()), the
 * message opens a bundle that the caller posts at once (@a post_p set).
 */
static ucs_status_t uct_hipower_ep_am_place(uct_hipower_ep_t *ep,
                                            uint32_t length, int *post_p)
{
    ucs_status_t status;

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) {
        if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_FULL) &&
            uct_hipower_ep_bundle_fits(ep, length)) {
            return UCS_INPROGRESS;
        }
        /* Too large for what is left: the bundle goes first */
        status = uct_hipower_ep_bundle_post_full(ep);
        if (status != UCS_OK) {
            return status;
        }
    }

    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_GATHER) &&
        (ep->tx.ring.num_slots > 0)) {
        /* A request that waited: into the dispatch's bundle (while the
         * peer gives us a run: uct_hipower_ep_may_bundle()) */
        return UCS_INPROGRESS;
    }

    if (uct_hipower_ep_fill_lone(ep)) {
        /* A batch of its own in the open filled slot, now */
        *post_p = 1;
        return UCS_INPROGRESS;
    }

    status = uct_hipower_ep_tx_am_room(ep, 1);
    return uct_hipower_ep_may_bundle(ep, status) ? UCS_INPROGRESS : status;
}

/* Whether a short or bcopy message goes as its own frame right now, with
 * everything uct_hipower_ep_tx_check() and uct_hipower_ep_send_msg() decide
 * known in advance: one write, a free slot, room to post it (and a read),
 * nothing pending or bundled (a bundle open implies BUNDLE_FULL's clear) */
static UCS_F_ALWAYS_INLINE int uct_hipower_ep_am_fast(uct_hipower_ep_t *ep)
{
    return ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_ONE_WRITE |
                              UCT_HIPOWER_EP_FLAG_CONNECTED |
                              UCT_HIPOWER_EP_FLAG_FAILED |
                              UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN |
                              UCT_HIPOWER_EP_FLAG_GATHER)) ==
            (UCT_HIPOWER_EP_FLAG_ONE_WRITE |
             UCT_HIPOWER_EP_FLAG_CONNECTED)) &&
           ucs_queue_is_empty(&ep->pending_q) &&
           !uct_hipower_ep_tx_granted(ep) &&
           !uct_hipower_ep_fill_open(ep) &&
           (hipower_tx_ring_free(&ep->tx.ring) > 0) &&
           !hipower_txwin_full(&ep->tx.win, ep->txqp.txq.acked_sn) &&
           uct_hipower_ep_has_room(ep, 2);
}

/* Whether a message of @a length joins the open bundle right away, under
 * load: earlier messages wait in it, it has room, and nothing else is to
 * be decided (what uct_hipower_ep_am_place() would decide, without its
 * calls) */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_bundle_joins(uct_hipower_ep_t *ep, uint32_t length)
{
    return ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_CONNECTED |
                              UCT_HIPOWER_EP_FLAG_FAILED |
                              UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN |
                              UCT_HIPOWER_EP_FLAG_BUNDLE_FULL |
                              UCT_HIPOWER_EP_FLAG_GATHER)) ==
            (UCT_HIPOWER_EP_FLAG_CONNECTED |
             UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) &&
           ucs_queue_is_empty(&ep->pending_q) &&
           uct_hipower_ep_bundle_fits(ep, length);
}

/* am_short of an endpoint without UCT_HIPOWER_EP_FLAG_ONE_WRITE, or one
 * that cannot go out right away: off the fast path */
static UCS_F_NOINLINE ucs_status_t
uct_hipower_ep_am_short_slow(uct_hipower_ep_t *ep, uint8_t id, uint64_t hdr,
                             const void *buffer, unsigned length)
{
    ucs_status_t status;
    int post = 0;

    status = uct_hipower_ep_user_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    status = uct_hipower_ep_am_place(ep, sizeof(hdr) + length, &post);
    if (ucs_likely(status == UCS_OK)) {
        return uct_hipower_ep_am_short_frame(ep, id, hdr, buffer, length, 0);
    } else if (status == UCS_INPROGRESS) {
        status = uct_hipower_ep_bundle_add(ep, id, &hdr, sizeof(hdr), buffer,
                                           length);
        uct_hipower_ep_am_post_placed(ep, status, post);
    }
    return status;
}

/* am_short's body, inlined into the plain op and into the one the bundle
 * window uses (uct_hipower_held_ep_am_short()): one call per message */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_am_short_inline(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                               const void *buffer, unsigned length)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    ucs_status_t status;

    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        return uct_hipower_ep_bad_am_id(ep, "am_short", id);
    }

    /* Bounded by the inline size and by the slot */
    if (ucs_unlikely(sizeof(hdr) + length + HIPOWER_SLOT_TRAILER_SIZE >
                     iface->config.max_short)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": am_short length %u is over the "
                  "limit %zu", UCT_HIPOWER_EP_ARG(ep), length,
                  iface->config.max_short - sizeof(hdr) -
                  HIPOWER_SLOT_TRAILER_SIZE);
        return UCS_ERR_INVALID_PARAM;
    }

    /* The common case */
    if (ucs_likely(uct_hipower_ep_am_fast(ep))) {
        status = uct_hipower_ep_am_short_frame(ep, id, hdr, buffer, length,
                                               1);
    } else if (ucs_likely(uct_hipower_ep_bundle_joins(ep, sizeof(hdr) +
                                                      length))) {
        /* Under load: earlier messages wait in the open bundle, which has
         * room for this one -- it joins them, inline (what
         * uct_hipower_ep_am_short_slow() would decide, without its calls) */
        uct_hipower_ep_bundle_copy_in(ep, id, &hdr, sizeof(hdr), buffer,
                                      length);
        status = UCS_OK;
    } else {
        status = uct_hipower_ep_am_short_slow(ep, id, hdr, buffer, length);
    }

    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, &ep->super, AM, SHORT,
                                 sizeof(hdr) + length);
    return status;
}

ucs_status_t uct_hipower_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                                     const void *buffer, unsigned length)
{
    return uct_hipower_ep_am_short_inline(tl_ep, id, hdr, buffer, length);
}

UCT_HIPOWER_HELD_WRAPPER(, ucs_status_t, uct_hipower_held_ep_am_short,
                         uct_hipower_ep_am_short_inline,
                         (uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                          const void *buffer, unsigned length),
                         (tl_ep, id, hdr, buffer, length))

/*
 * A bcopy message that did not join the open bundle once packed, @a length
 * bytes at hipower_bundle_packed_data(): too long for any slot, or too long
 * for what the bundle has left. Then the bundle goes first (and gathers no
 * more), and this message after it, from a send buffer of its own (its
 * bytes are where the bundle's trailer goes). A refusal then comes after
 * the packer ran, which UCP allows: it keeps its send state until a send
 * succeeds. uct_hipower_ep_am_bcopy_slow() sends the bundle before packing
 * when the endpoint's last bcopy would not have fit, so with messages of
 * one size this happens only when the bundle could not go then.
 */
static UCS_F_NOINLINE ssize_t
uct_hipower_ep_am_bcopy_spill(uct_hipower_ep_t *ep, uint8_t id, void *data,
                              size_t length)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    ucs_status_t status;
    void *buffer;
    int post = 0;

    if (length > iface->config.max_payload) {
        /* (The buffer has UCT_HIPOWER_BCOPY_SLACK bytes to spare) */
        if (ep->tx.bundle.frame.count == 0) {
            uct_hipower_ep_bundle_drop(ep); /* Opened for this one */
        }
        return uct_hipower_ep_bcopy_too_long(ep, "am_bcopy", length,
                                             iface->config.max_payload);
    }

    /* Out of the bundle's buffer before the bundle goes: its trailer is
     * written where this message's record would have begun */
    ++iface->stats.tx_spills;
    op = uct_hipower_ep_op_get(ep, NULL, 0, NULL);
    if (op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    buffer = uct_hipower_tx_op_buffer(op);
    memcpy(buffer, data, length);

    /* The open bundle goes first and takes no more (am_place) */
    status = uct_hipower_ep_am_place(ep, length, &post);
    if (status == UCS_OK) {
        status = uct_hipower_ep_send_buffer(ep, buffer, length, id, op);
        if (status != UCS_OK) {
            ucs_mpool_put_inline(op);
            return status;
        }
    } else {
        if (status == UCS_INPROGRESS) {
            status = uct_hipower_ep_bundle_add(ep, id, NULL, 0, buffer,
                                               length);
            uct_hipower_ep_am_post_placed(ep, status, post);
        }
        ucs_mpool_put_inline(op);
        if (status != UCS_OK) {
            return status;
        }
    }

    ep->am.bcopy_hint = length;
    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

/*
 * Packs a bcopy message in place into the open bundle, past what it holds
 * (the bundle's buffer has room for the largest message: tx_bundle_mp), so
 * a bundled message is copied once, as one that goes alone. It joins the
 * bundle if it fits (the first message of a bundle may be as large as any);
 * if not, uct_hipower_ep_am_bcopy_spill(). The endpoint remembers its
 * length (am.bcopy_hint) to guess whether the next one will fit.
 */
static UCS_F_ALWAYS_INLINE ssize_t
uct_hipower_ep_am_bcopy_join(uct_hipower_ep_t *ep, uint8_t id,
                             uct_pack_callback_t pack_cb, void *arg,
                             int hint_fits)
{
    hipower_bundle_t *frame = &ep->tx.bundle.frame;
    uint32_t hint           = ep->am.bcopy_hint;
    void *data              = hipower_bundle_packed_data(frame);
    size_t length           = pack_cb(data, arg);

    /* @a hint_fits: the caller saw a message as long as the last one fit
     * (uct_hipower_ep_bundle_joins()), so one no longer fits as well */
    if (ucs_likely((hint_fits && (length <= hint)) ||
                   ((length <= uct_hipower_ep_iface(ep)->config.max_payload) &&
                    ((frame->count == 0) ||
                     uct_hipower_ep_bundle_fits(ep, length))))) {
        hipower_bundle_commit(frame, id, length);
        ep->am.bcopy_hint = length;
        uct_hipower_ep_bundle_joined(ep);
        UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
        return length;
    }

    return uct_hipower_ep_am_bcopy_spill(ep, id, data, length);
}

/*
 * am_bcopy into the endpoint's bundle (opened for it if none is): earlier
 * messages wait in it, a pending dispatch gathers, or nothing could be
 * posted a moment ago
 */
static UCS_F_NOINLINE ssize_t
uct_hipower_ep_am_bcopy_bundle(uct_hipower_ep_t *ep, uint8_t id,
                               uct_pack_callback_t pack_cb, void *arg)
{
    ucs_status_t status;

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        status = uct_hipower_ep_bundle_open(ep);
        if (status != UCS_OK) {
            return status;
        }
    }

    return uct_hipower_ep_am_bcopy_join(ep, id, pack_cb, arg, 0);
}

/* Packs a bcopy message into a send buffer and posts it as its own frame;
 * the caller checked the room. @a one_write: see uct_hipower_ep_send_msg() */
static UCS_F_ALWAYS_INLINE ssize_t
uct_hipower_ep_am_bcopy_frame(uct_hipower_ep_t *ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              int one_write)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_tx_op_t *op;
    ucs_status_t status;
    size_t length;
    void *data;

    op = uct_hipower_ep_op_get(ep, NULL, 0, NULL);
    if (ucs_unlikely(op == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    data   = uct_hipower_tx_op_buffer(op);
    length = pack_cb(data, arg);
    if (ucs_unlikely(length > iface->config.max_payload)) {
        /* The buffer has UCT_HIPOWER_BCOPY_SLACK bytes to spare, so a
         * packer a little over the limit is caught before anything is
         * sent (ERRHANDLE_BCOPY_LEN) */
        ucs_mpool_put_inline(op);
        return uct_hipower_ep_bcopy_too_long(ep, "am_bcopy", length,
                                             iface->config.max_payload);
    }

    /* The trailer right after the data, in the buffer (room for the
     * largest payload and a trailer): one gather entry for the frame */
    status = uct_hipower_ep_send_buffer_mode(ep, data, length, id, op,
                                             one_write, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put_inline(op);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

/* am_bcopy off the fast path: a bundle open or to open, an endpoint to set
 * up, a peer that asked for alignment, no room */
static UCS_F_NOINLINE ssize_t
uct_hipower_ep_am_bcopy_slow(uct_hipower_ep_t *ep, uint8_t id,
                             uct_pack_callback_t pack_cb, void *arg)
{
    ucs_status_t status;
    ssize_t length;

    status = uct_hipower_ep_user_check(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_FULL)) {
        /* The open bundle takes no more: it goes first, or this send is
         * refused before its packer runs (it would pack for nothing) */
        status = uct_hipower_ep_bundle_post(ep, 0);
        if (status != UCS_OK) {
            return status;
        }
    }

    if (((ep->flags.all & (UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN |
                           UCT_HIPOWER_EP_FLAG_GATHER)) ==
         UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) &&
        !uct_hipower_ep_bundle_fits(ep, ep->am.bcopy_hint)) {
        /* The last bcopy would not fit in what the bundle has left: it
         * goes now if it can (whatever the window, as when a message does
         * not fit: uct_hipower_ep_am_place()), so that this one is packed
         * once, into a new bundle or a frame, not into this bundle and
         * out of it again (uct_hipower_ep_am_bcopy_spill()). If it cannot,
         * this one is packed into it and may still fit. */
        status = uct_hipower_ep_bundle_post(ep, 0);
        if (ucs_unlikely((status != UCS_OK) &&
                         (status != UCS_ERR_NO_RESOURCE))) {
            return status;
        }
    }

    if (ucs_unlikely((ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN) ||
                     ((ep->flags.all & UCT_HIPOWER_EP_FLAG_GATHER) &&
                      (ep->tx.ring.num_slots > 0)))) {
        /* Earlier messages wait in the bundle: this one goes after them;
         * or a pending dispatch gathers its requests into one */
        return uct_hipower_ep_am_bcopy_bundle(ep, id, pack_cb, arg);
    }

    if (uct_hipower_ep_fill_lone(ep)) {
        /* A batch of its own in the open filled slot, now (am_place) */
        length = uct_hipower_ep_am_bcopy_bundle(ep, id, pack_cb, arg);
        uct_hipower_ep_am_post_placed(ep, (length < 0) ? UCS_ERR_NO_RESOURCE :
                                      UCS_OK, 1);
        return length;
    }

    status = uct_hipower_ep_tx_am_room(ep, 1);
    if (ucs_unlikely(status != UCS_OK)) {
        if (!uct_hipower_ep_may_bundle(ep, status)) {
            return status;
        }
        /* Nothing can be posted now: a bundle opens for it */
        return uct_hipower_ep_am_bcopy_bundle(ep, id, pack_cb, arg);
    }

    return uct_hipower_ep_am_bcopy_frame(ep, id, pack_cb, arg, 0);
}

/* am_bcopy's body, inlined as am_short's */
static UCS_F_ALWAYS_INLINE ssize_t
uct_hipower_ep_am_bcopy_inline(uct_ep_h tl_ep, uint8_t id,
                               uct_pack_callback_t pack_cb, void *arg)
{
    uct_hipower_ep_t *ep = ucs_derived_of(tl_ep, uct_hipower_ep_t);

    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        return uct_hipower_ep_bad_am_id(ep, "am_bcopy", id);
    }

    /* The common case, decided as for am_short */
    if (ucs_likely(uct_hipower_ep_am_fast(ep))) {
        return uct_hipower_ep_am_bcopy_frame(ep, id, pack_cb, arg, 1);
    }

    /* Under load: the open bundle takes it, as am_short's, if a message
     * as long as the last bcopy still fits */
    if (ucs_likely(uct_hipower_ep_bundle_joins(ep,
                                               ep->am.bcopy_hint))) {
        return uct_hipower_ep_am_bcopy_join(ep, id, pack_cb, arg, 1);
    }

    return uct_hipower_ep_am_bcopy_slow(ep, id, pack_cb, arg);
}

ssize_t uct_hipower_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                uct_pack_callback_t pack_cb, void *arg,
                                unsigned flags)
{
    return uct_hipower_ep_am_bcopy_inline(tl_ep, id, pack_cb, arg);
}

UCT_HIPOWER_HELD_WRAPPER(, ssize_t, uct_hipower_held_ep_am_bcopy,
                         uct_hipower_ep_am_bcopy_inline,
                         (uct_ep_h tl_ep, uint8_t id,
                          uct_pack_callback_t pack_cb, void *arg,
                          unsigned flags),
                         (tl_ep, id, pack_cb, arg))

ucs_status_t uct_hipower_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                     const void *header, unsigned header_length,
                                     const uct_iov_t *iov, size_t iovcnt,
                                     unsigned flags, uct_completion_t *comp)
{
    uct_hipower_ep_t *ep       = ucs_derived_of(tl_ep, uct_hipower_ep_t);
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    struct ibv_sge sge[UCT_HIPOWER_MAX_IOV + 2];
    uct_hipower_tx_op_t *op;
    struct ibv_send_wr wr;
    ucs_status_t status;
    size_t length;
    void *buffer;

    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        return uct_hipower_ep_bad_am_id(ep, "am_zcopy", id);
    }

    length = header_length + uct_iov_total_length(iov, iovcnt);
    if (ucs_unlikely((iovcnt > UCT_HIPOWER_MAX_IOV) ||
                     (header_length > UCT_HIPOWER_MAX_ZCOPY_HDR) ||
                     (length > iface->config.max_payload))) {
        ucs_error(UCT_HIPOWER_EP_FMT ": am_zcopy header %u iovcnt %zu "
                  "length %zu is over the limit (header <= %u, iovcnt <= %u, "
                  "length <= %zu)", UCT_HIPOWER_EP_ARG(ep), header_length,
                  iovcnt, length, UCT_HIPOWER_MAX_ZCOPY_HDR,
                  UCT_HIPOWER_MAX_IOV, iface->config.max_payload);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Not bundled: messages waiting in a bundle go first */
    status = uct_hipower_ep_bundle_first(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    status = uct_hipower_ep_tx_op_get(ep, comp, &op);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    /* The header, then the iov, then the trailer from the same buffer */
    buffer = uct_hipower_tx_op_buffer(op);
    memcpy(buffer, header, header_length);
    sge[0].addr   = (uintptr_t)buffer;
    sge[0].length = header_length;
    sge[0].lkey   = op->lkey;
    wr.sg_list    = sge;
    wr.num_sge    = 1 + uct_hipower_ep_iov_sge(iov, iovcnt, sge + 1);
    wr.send_flags = 0;
    status = uct_hipower_ep_send_msg(ep, &wr,
                                     UCS_PTR_BYTE_OFFSET(buffer,
                                                         UCT_HIPOWER_MAX_ZCOPY_HDR),
                                     op->lkey, 0, id, length, comp != NULL,
                                     op, 0, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put_inline(op);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY, length);
    return UCS_INPROGRESS;
}
