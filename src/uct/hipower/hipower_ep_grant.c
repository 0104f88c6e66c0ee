/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * Receive memory shared by all peers of an interface (docs/protocol.md,
 * section 9.2), self mode with UCX_HIPOWER_SHARED_POOL=y: an endpoint
 * starts with a run of MIN_SLOTS slots of the interface's pool; its
 * receive side grants it a larger run when its peer says its run was full,
 * and a smaller one when it holds more than its share of what the active
 * endpoints may use. The rules are hipower_grant.h's; here they meet the
 * verbs.
 *
 * A grant: the receiver takes a run from the pool, clears its marks (a
 * trailer an earlier owner left must not look new), zeroes the consumed
 * bitmap of the new epoch's parity, registers the run for the peer alone
 * and writes {address, rkey, count, epoch} into the peer's grant record,
 * epoch last, in one inline write (one packet).
 * The sender adopts it at its next send: that message is sequence 0 of the
 * new run and says where its messages in the old run end; it never writes
 * the old run again. The receiver goes on delivering from the old run and
 * moves to the new one once that is drained; then the old run's
 * registration goes (a peer writing there anyway gets an access error and
 * cannot reach the next owner's slots) and its slots go back to the pool.
 */

#include "hipower_ep.h"
#include "hipower_grant.h"

#include <ucs/debug/log.h>
#include <string.h>


/* Slots kept for endpoints yet to come (UCX_HIPOWER_MAX_EPS) */
static uint32_t uct_hipower_iface_pool_keep(uct_hipower_iface_t *iface)
{
    return (iface->num_eps < iface->config.max_eps) ?
           (iface->config.max_eps - iface->num_eps) *
           iface->config.min_slots_per_ep : 0;
}

void uct_hipower_iface_pool_used(uct_hipower_iface_t *iface)
{
    iface->stats.peak_pool_used = ucs_max(iface->stats.peak_pool_used,
            (iface->arena.slots.total -
             hipower_arena_free_slots(&iface->arena.slots)) *
            (uint64_t)iface->config.layout.stride);
}

void uct_hipower_iface_pool_update(uct_hipower_iface_t *iface)
{
    uint32_t total  = iface->arena.slots.total;
    uint32_t unused = iface->pool.idle_held + iface->pool.reserve +
                      uct_hipower_iface_pool_keep(iface);

    iface->pool.fair = hipower_grant_fair_share((total > unused) ?
                                                total - unused : 0,
                                                iface->num_eps -
                                                iface->num_idle,
                                                iface->config.min_slots_per_ep,
                                                iface->config.slots_per_ep);
}

/* The slots of a run the endpoint holds changed by @a delta */
static void uct_hipower_ep_held_changed(uct_hipower_ep_t *ep, int32_t delta)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (!(ep->flags & UCT_HIPOWER_EP_FLAG_ACTIVE)) {
        iface->pool.idle_held += delta;
        uct_hipower_iface_pool_update(iface);
    }
}

static void uct_hipower_ep_run_free(uct_hipower_ep_t *ep, struct ibv_mr *mr,
                                    uint32_t first, uint32_t count)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);

    /* Deregistered first: the peer can no longer write the slots */
    uct_hipower_md_dereg_internal(md, mr, "receive slots");
    hipower_arena_free(&iface->arena.slots, first, count);
}

void uct_hipower_ep_free_runs(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_run_free(ep, ep->rx.mr, ep->rx.first_slot,
                            ep->rx.ring.num_slots);
    if (ep->rx.granted.count > 0) {
        uct_hipower_ep_run_free(ep, ep->rx.granted.mr,
                                ep->rx.granted.first_slot,
                                ep->rx.granted.count);
        ep->rx.granted.count = 0;
    }
}

/*
 * The grant record, one inline write into the peer's control words: it
 * fits one packet, so its epoch, the last word, lands last. It wakes the
 * peer's endpoint as a message would (an immediate if the peer asked for
 * one, uct_hipower_ep_wakeup_check()): an idle peer must look at it, adopt
 * it and answer with the first frame of the new run.
 */
static ucs_status_t uct_hipower_ep_post_grant(uct_hipower_ep_t *ep,
                                              uint32_t epoch)
{
    typeof(ep->ctrl->grant) record;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint64_t sleep_gen;

    UCS_STATIC_ASSERT(sizeof(record) == 24);
    record.slots_addr = (uintptr_t)ep->rx.granted.slots;
    record.rkey       = ep->rx.granted.mr->rkey;
    record.count      = ep->rx.granted.count;
    record.epoch      = epoch;

    uct_hipower_ep_word_wr(ep, &wr, &sge, &record.slots_addr,
                           ep->peer.grant_addr);
    sge.length = sizeof(record);
    sleep_gen  = uct_hipower_ep_wakeup_check(ep, &wr);
    status     = uct_hipower_ep_post(ep, &wr, &wr, 1, 0, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
    }
    return status;
}

/*
 * Grants the peer a run of @a size slots (at least @a min): clears its
 * marks and the new epoch's consumed bits, registers it for the peer and
 * writes the record. Returns the run's size, 0 if none was granted.
 */
static uint32_t uct_hipower_ep_grant(uct_hipower_ep_t *ep, uint32_t size,
                                     uint32_t min)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uct_hipower_md_t *md = ucs_derived_of(iface->super.md, uct_hipower_md_t);
    const hipower_slot_layout_t *layout = &iface->config.layout;
    uint32_t first, count, i;
    ucs_status_t status;
    void *slots;

    status = hipower_arena_alloc(&iface->arena.slots, size, min, &first,
                                 &count);
    if (status != UCS_OK) {
        return 0; /* Free slots too scattered: later, when runs come back */
    }

    /* An earlier owner's trailers must not look new to us */
    slots = UCS_PTR_BYTE_OFFSET(iface->arena.base,
                                (size_t)first * layout->stride);
    for (i = 0; i < count; ++i) {
        *(hipower_slot_trailer_t*)hipower_slot_mark(
                UCS_PTR_BYTE_OFFSET(slots, (size_t)i * layout->stride),
                layout) = 0;
    }
    memset(uct_hipower_ep_consumed(ep, ep->rx.epoch + 1), 0,
           UCT_HIPOWER_BITMAP_WORDS * sizeof(hipower_bitmap_word_t));

    status = uct_hipower_md_reg_internal(md, slots,
                                         (size_t)count * layout->stride,
                                         IBV_ACCESS_LOCAL_WRITE |
                                         IBV_ACCESS_REMOTE_WRITE,
                                         "receive slots",
                                         &ep->rx.granted.mr);
    if (status != UCS_OK) {
        hipower_arena_free(&iface->arena.slots, first, count);
        return 0;
    }

    ep->rx.granted.slots      = slots;
    ep->rx.granted.first_slot = first;
    ep->rx.granted.count      = count;
    if (uct_hipower_ep_post_grant(ep, ep->rx.epoch + 1) != UCS_OK) {
        uct_hipower_ep_run_free(ep, ep->rx.granted.mr, first, count);
        ep->rx.granted.count = 0;
        return 0;
    }

    uct_hipower_ep_held_changed(ep, count);
    iface->stats.grants++;
    iface->stats.rdma_writes++;
    uct_hipower_iface_pool_used(iface);
    return count;
}

/* Whether a grant may go out now: one at a time, to a peer that listens */
static int uct_hipower_ep_may_grant(uct_hipower_ep_t *ep)
{
    return (ep->rx.granted.count == 0) && uct_hipower_ep_may_initiate(ep) &&
           uct_hipower_ep_has_room(ep, 1);
}

void uct_hipower_ep_rx_regrant(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t mailbox = iface->config.min_slots_per_ep;
    uint32_t cur     = ep->rx.ring.num_slots;
    uint32_t keep    = uct_hipower_iface_pool_keep(iface);
    int wants        = ep->rx.wants;
    uint32_t free_slots, size, count;
    hipower_grant_action_t action;

    ep->rx.wants = 0;
    if (!uct_hipower_ep_may_grant(ep)) {
        return; /* Asked again when it still wants */
    }

    free_slots = hipower_arena_free_slots(&iface->arena.slots);
    free_slots = (free_slots > keep) ? free_slots - keep : 0;
    action     = hipower_grant_decide(cur, iface->pool.fair, wants, 0,
                                      free_slots, iface->pool.reserve,
                                      mailbox, &size);
    if (action == HIPOWER_GRANT_NONE) {
        return;
    }

    count = uct_hipower_ep_grant(ep, size,
                                 hipower_grant_min_size(action, cur, mailbox));
    if (count > 0) {
        ucs_debug(UCT_HIPOWER_EP_FMT ": %s from %u to %u slots (share %u, "
                  "%u free)", UCT_HIPOWER_EP_ARG(ep),
                  (action == HIPOWER_GRANT_GROW) ? "grow" : "shrink", cur,
                  count, iface->pool.fair, free_slots);
    }
}

void uct_hipower_ep_rx_reclaim(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t mailbox           = iface->config.min_slots_per_ep;
    uint32_t keep              = uct_hipower_iface_pool_keep(iface);
    uint32_t free_slots        = hipower_arena_free_slots(&iface->arena.slots);
    uint32_t size;

    /* Only while the pool is short (under a quarter free, beyond the room
     * kept for endpoints to come): a reclaimed peer grows again when it
     * sends, and the switch costs both sides a round of work. (Also: with
     * reclaim on every idle spell, UCX's test_uct_peer_failure_multiple
     * hangs -- a sender's 8-slot ring full towards a killed peer, a recycle
     * READ never completing; open, see the issue) */
    if ((free_slots > keep) &&
        (free_slots - keep >= iface->arena.slots.total / 4)) {
        return;
    }

    if (!iface->config.shared_pool || !uct_hipower_ep_may_grant(ep) ||
        (hipower_grant_decide(ep->rx.ring.num_slots, mailbox, 0, 1,
                              hipower_arena_free_slots(&iface->arena.slots),
                              0, mailbox, &size) != HIPOWER_GRANT_SHRINK)) {
        return;
    }

    if (uct_hipower_ep_grant(ep, size, size) > 0) {
        iface->stats.reclaims++;
        ucs_debug(UCT_HIPOWER_EP_FMT ": idle, shrink from %u to %u slots",
                  UCT_HIPOWER_EP_ARG(ep), ep->rx.ring.num_slots, size);
    }
}

void uct_hipower_ep_tx_switch_idle(uct_hipower_ep_t *ep)
{
    if (uct_hipower_ep_tx_granted(ep)) {
        uct_hipower_ep_tx_adopt(ep);
    }

    /* A message queued or sent next tells the receiver anyway */
    if ((ep->tx.ack_flags & HIPOWER_SLOT_ACK_SWITCH) &&
        ucs_queue_is_empty(&ep->pending_q) &&
        (uct_hipower_ep_send_none(ep) == UCS_OK)) {
        uct_hipower_ep_iface(ep)->stats.tx_none++;
    }
}

int uct_hipower_ep_rx_switch(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    const hipower_slot_layout_t *layout = &iface->config.layout;
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t old_count         = ring->num_slots;
    hipower_slot_trailer_t mark;
    uint64_t ack_word;
    int remaining;

    mark = *hipower_slot_mark(ep->rx.granted.slots, layout);
    if (!hipower_slot_trailer_is(mark, 0)) {
        return 0; /* The peer has not moved yet */
    }
    ucs_memory_cpu_load_fence();

    ack_word  = hipower_slot_trailer_ack_word(
                    UCS_PTR_BYTE_OFFSET(ep->rx.granted.slots,
                                        layout->trailer_offset));
    remaining = (ack_word & HIPOWER_SLOT_ACK_SWITCH) ?
                hipower_grant_old_remaining(ring->head,
                                            hipower_slot_ack_old_end(ack_word),
                                            old_count) : -1;
    if (ucs_unlikely(remaining < 0)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer's first message in its new "
                  "run of %u slots says its old run ends at sequence %u "
                  "(switch flag %d), but %u is next there and the run holds "
                  "%u: broken or hostile peer", UCT_HIPOWER_EP_ARG(ep),
                  ep->rx.granted.count, hipower_slot_ack_old_end(ack_word),
                  !!(ack_word & HIPOWER_SLOT_ACK_SWITCH), ring->head,
                  old_count);
        iface->stats.bad_slots++;
        uct_hipower_ep_set_failed(ep, UCS_ERR_IO_ERROR);
        return 0;
    }
    if (remaining > 0) {
        return 0; /* Old-run messages first, in order */
    }

    /* The old run is drained, and every slot of it released (messages are
     * released before the receive loop moves on) */
    uct_hipower_ep_run_free(ep, ep->rx.mr, ep->rx.first_slot, old_count);
    hipower_rx_ring_switch(ring, ep->rx.granted.count,
                           uct_hipower_ep_consumed(ep, ep->rx.epoch + 1));
    ep->rx.slots         = ep->rx.granted.slots;
    ep->rx.mr            = ep->rx.granted.mr;
    ep->rx.first_slot    = ep->rx.granted.first_slot;
    ep->rx.granted.count = 0;
    ++ep->rx.epoch;
    uct_hipower_ep_held_changed(ep, -(int32_t)old_count);
    iface->stats.run_switches++;
    return 1;
}

void uct_hipower_ep_tx_adopt(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t epoch             = *(volatile uint64_t*)&ep->ctrl->grant.epoch;
    uint32_t count, old_end;

    /* The epoch landed last: the rest of the record is there */
    ucs_memory_cpu_load_fence();
    count = ep->ctrl->grant.count;
    if ((iface->config.notify != UCT_HIPOWER_NOTIFY_SELF) ||
        !hipower_grant_record_valid(ep->tx.epoch, epoch, count,
                                    UCT_HIPOWER_MAX_SLOTS)) {
        /* Not ours to act on (a peer granting outside self mode, a bogus
         * record): stop looking at it; our run stays */
        ucs_debug(UCT_HIPOWER_EP_FMT ": ignoring the peer's grant record "
                  "(epoch %"PRIu64", %u slots) at epoch %"PRIu64,
                  UCT_HIPOWER_EP_ARG(ep), epoch, count, ep->tx.epoch);
        ep->tx.epoch = epoch;
        return;
    }

    old_end              = hipower_tx_ring_switch(&ep->tx.ring, count);
    memset(ep->ctrl->written, 0, sizeof(ep->ctrl->written));
    ep->peer.slots_addr  = ep->ctrl->grant.slots_addr;
    ep->peer.slots_rkey  = ep->ctrl->grant.rkey;
    ep->tx.epoch         = epoch;
    ep->tx.threshold     = ucs_max(1, (uint32_t)(count *
                                   iface->config.recycle_threshold));
    /* The next message, sequence 0 of the new run, says where the old
     * run's messages end (the grant answered any want of ours) */
    ep->tx.ack_flags     = hipower_slot_ack_switch(old_end);
    iface->stats.runs_adopted++;
}
