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
 *
 * Endpoints without a run: when the pool is short, an idle endpoint's run
 * is taken back by a grant of no slots (a release); an endpoint created
 * when no run of MIN_SLOTS is free starts without one. Its peer writes a
 * run request word with an immediate: after a release, where its messages
 * in the run end; when it has something to send, an ask. The receiver
 * grants a run then, or when one comes back (waiters, in the order they
 * asked). So an idle peer holds no slot of the pool, and the interface
 * serves as many endpoints as it has QPs and control pages for.
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

    /* Peers waiting for a run count as active even while their endpoint
     * is idle (once: an active waiter is among the active already):
     * streaming peers' runs shrink to make room for them */
    ucs_assert(iface->pool.num_waiting_idle <= iface->active.num_idle);
    iface->pool.fair = hipower_grant_fair_share((total > unused) ?
                                                total - unused : 0,
                                                iface->num_eps -
                                                iface->active.num_idle +
                                                iface->pool.num_waiting_idle,
                                                iface->config.min_slots_per_ep,
                                                iface->config.slots_per_ep);
}

/* The slots of a run the endpoint holds changed by @a delta */
static void uct_hipower_ep_held_changed(uct_hipower_ep_t *ep, int32_t delta)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_ACTIVE)) {
        iface->pool.idle_held += delta;
        uct_hipower_iface_pool_update(iface);
    }
}

void *uct_hipower_iface_run_clear(uct_hipower_iface_t *iface, uint32_t first,
                                  uint32_t count)
{
    const hipower_slot_layout_t *layout = &iface->config.layout;
    void *slots = UCS_PTR_BYTE_OFFSET(iface->arena.base,
                                      (size_t)first * layout->stride);
    uint32_t i;

    /* Every run taken from the pool, whoever takes it and whatever gave it
     * back (a destroyed endpoint, a switch, a release, a failure): the
     * earlier owner's trailers must not look new to the next one (its peer
     * would get another peer's frames as its own, and lose its own behind
     * them). The run is free, so its registration is gone: no write of the
     * old peer can land after the clearing. */
    for (i = 0; i < count; ++i) {
        *(hipower_slot_trailer_t*)hipower_slot_mark(
                UCS_PTR_BYTE_OFFSET(slots, (size_t)i * layout->stride),
                layout) = 0;
    }
    return slots;
}

static void uct_hipower_ep_run_free(uct_hipower_ep_t *ep,
                                    uct_hipower_window_t *win, uint32_t first,
                                    uint32_t count)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (count == 0) {
        return; /* No run */
    }

    /* Closed first: the peer can no longer write the slots */
    uct_hipower_window_close(&iface->win_dev, win, "receive slots");
    hipower_arena_free(&iface->arena.slots, first, count);
}

void uct_hipower_ep_free_runs(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_run_free(ep, &ep->rx.win, ep->rx.first_slot,
                            ep->rx.ring.num_slots);
    ep->rx.ring.num_slots = 0;
    if (ep->rx.granted.count > 0) {
        uct_hipower_ep_run_free(ep, &ep->rx.granted.win,
                                ep->rx.granted.first_slot,
                                ep->rx.granted.count);
        ep->rx.granted.count = 0;
    }
}

/* A grant or a release went out (@a out), or was adopted or abandoned:
 * its deadline (UCX_HIPOWER_GRANT_TIMEOUT), when its peer's device is
 * probed, runs from now */
static void uct_hipower_ep_grant_out(uct_hipower_ep_t *ep, int out)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (out && (iface->config.grant_timeout != UCS_TIME_INFINITY)) {
        ucs_assert(!(ep->flags.all & UCT_HIPOWER_EP_FLAG_GRANT_OUT));
        ep->rx.grant_deadline = uct_hipower_clock_now() +
                                iface->config.grant_timeout;
        ep->rx.grant_probes   = 0;
        ucs_list_add_tail(&iface->pool.granting, &ep->rx.grant_list);
        uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_GRANT_OUT);
    } else if (!out && (ep->flags.all & UCT_HIPOWER_EP_FLAG_GRANT_OUT)) {
        /* Callers end a release after this: the flag still says */
        if ((ep->rx.grant_probes > 0) &&
            (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING)) {
            ucs_assert(iface->pool.num_overdue > 0);
            --iface->pool.num_overdue;
        }
        ucs_list_del(&ep->rx.grant_list);
        uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_GRANT_OUT);
    }
}

/*
 * The grant record, one inline write into the peer's control words: it
 * fits one packet, so its epoch, the last word, lands last. It wakes the
 * peer's endpoint as a message would (an immediate if the peer asked for
 * one, uct_hipower_ep_wakeup_check()): an idle peer must look at it, adopt
 * it and answer with the first frame of the new run. A run's window (@a
 * win, NULL for a release) is bound to our QP by a request before it, so
 * that the peer, which learns the rkey from the record, finds it bound.
 */
static ucs_status_t uct_hipower_ep_post_grant(uct_hipower_ep_t *ep,
                                              void *slots,
                                              const uct_hipower_window_t *win,
                                              uint32_t count, uint64_t epoch)
{
    typeof(ep->ctrl->grant) record;
    struct ibv_send_wr bind_wr, wr, *first;
    struct ibv_sge sge;
    ucs_status_t status;
    uint64_t sleep_gen;
    unsigned nwr;

    UCS_STATIC_ASSERT(sizeof(record) == 24);
    /* The receiver's epoch must not wrap before the record's (review L1) */
    UCS_STATIC_ASSERT(sizeof(ep->rx.epoch) == sizeof(record.epoch));
    UCS_STATIC_ASSERT(sizeof(ep->rx.epoch) == sizeof(ep->tx.epoch));
    record.slots_addr = (uintptr_t)slots;
    record.rkey       = (win != NULL) ? win->rkey : 0;
    record.count      = count;
    record.epoch      = epoch;

    uct_hipower_ep_word_wr(ep, &wr, &sge, &record.slots_addr,
                           ep->peer.grant_addr);
    sge.length = sizeof(record);
    sleep_gen  = uct_hipower_ep_wakeup_check(ep, &wr);
    first      = &wr;
    nwr        = 1;
    if ((win != NULL) && uct_hipower_window_needs_bind(win)) {
        uct_hipower_window_bind_wr(win, &bind_wr);
        bind_wr.send_flags  = 0;
        bind_wr.next        = &wr;
        /* The record leaves after the bind has taken effect */
        wr.send_flags      |= IBV_SEND_FENCE;
        first               = &bind_wr;
        nwr                 = 2;
    }
    status     = uct_hipower_ep_post(ep, first, &wr, nwr, 0, NULL);
    if (status == UCS_OK) {
        uct_hipower_ep_wakeup_posted(ep, sleep_gen);
        uct_hipower_ep_iface(ep)->stats.windows_bound += nwr - 1;
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
    const hipower_slot_layout_t *layout = &iface->config.layout;
    uint32_t first, count, start;
    ucs_status_t status;
    void *slots;

    status = hipower_arena_alloc(&iface->arena.slots, size, min, &first,
                                 &count);
    if (status != UCS_OK) {
        return 0; /* Free slots too scattered: later, when runs come back */
    }

    slots = uct_hipower_iface_run_clear(iface, first, count);
    start = uct_hipower_seq_origin(count);
    hipower_ring_bitmap_at(uct_hipower_ep_consumed(ep, ep->rx.epoch + 1),
                           count, start);

    status = uct_hipower_window_open(&iface->win_dev, slots,
                                     (size_t)count * layout->stride,
                                     IBV_ACCESS_REMOTE_WRITE, "receive slots",
                                     &ep->rx.granted.win);
    if (status != UCS_OK) {
        hipower_arena_free(&iface->arena.slots, first, count);
        return 0;
    }

    ep->rx.granted.slots      = slots;
    ep->rx.granted.first_slot = first;
    ep->rx.granted.count      = count;
    ep->rx.granted.start      = start;
    if (uct_hipower_ep_post_grant(ep, slots, &ep->rx.granted.win, count,
                                  ep->rx.epoch + 1) != UCS_OK) {
        uct_hipower_ep_run_free(ep, &ep->rx.granted.win, first, count);
        ep->rx.granted.count = 0;
        return 0;
    }

    uct_hipower_ep_held_changed(ep, count);
    uct_hipower_ep_grant_out(ep, 1);
    iface->stats.grants++;
    iface->stats.rdma_writes++;
    uct_hipower_iface_pool_used(iface);
    return count;
}

/*
 * Carves this endpoint's receive slots out of the arena and lets the peer
 * (and only the peer, by the rkey it gets) write into them. While fewer
 * than UCX_HIPOWER_MAX_EPS endpoints exist, room for the others to come
 * is kept: they get at least MIN_SLOTS each. With the shared pool, an
 * endpoint for which no run is left starts without one: its peer asks for
 * one when it sends.
 */
/* Sender: free slots of a run of @a count below which a recycle READ goes
 * out (UCX_HIPOWER_RECYCLE_THRESHOLD of them, at least one) */
static uint32_t uct_hipower_ep_tx_threshold(uct_hipower_iface_t *iface,
                                            uint32_t count)
{
    return ucs_max(1, (uint32_t)(count * iface->config.recycle_threshold));
}

ucs_status_t uct_hipower_ep_alloc_rx(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    size_t stride        = iface->config.layout.stride;
    uint32_t first, count, keep, start;
    ucs_status_t status;

    if (iface->num_eps + iface->num_gc >= iface->config.eps_possible) {
        ucs_error("hipower %s: cannot create endpoint number %u: %u "
                  "endpoints (and %u being closed) are all the interface's "
                  "completion queues and memory budget hold", iface->dev_name,
                  iface->num_eps + 1, iface->num_eps, iface->num_gc);
        return UCS_ERR_NO_MEMORY;
    }

    keep   = (iface->num_eps + 1 < iface->config.max_eps) ?
             (iface->config.max_eps - iface->num_eps - 1) *
             iface->config.min_slots_per_ep : 0;
    if (iface->config.shared_pool) {
        /* A shrink needs a free run before the larger one comes back
         * (hipower_grant_decide()): new endpoints leave that free too */
        keep += iface->pool.reserve;
    }
    /* With the shared pool a run larger than the endpoint's share later
     * shrinks, and a smaller one grows when its peer fills it */
    status = hipower_arena_alloc_keep(&iface->arena.slots,
                                      iface->config.slots_per_ep,
                                      iface->config.min_slots_per_ep, keep,
                                      &first, &count);
    if ((status != UCS_OK) && iface->config.shared_pool) {
        ucs_debug("hipower %s: endpoint %u starts without a run (%u slots "
                  "free, %u kept)", iface->dev_name, iface->num_eps + 1,
                  hipower_arena_free_slots(&iface->arena.slots), keep);
        ep->rx.first_slot = 0;
        ep->rx.slots      = NULL;
        ep->rx.win.mr     = NULL;
        ep->rx.win.mw     = NULL;
        hipower_rx_ring_init(&ep->rx.ring, 0,
                             uct_hipower_ep_consumed(ep, ep->rx.epoch), 0);
        ++iface->pool.num_runless;
        return UCS_OK;
    }
    if (status != UCS_OK) {
        ucs_error("hipower %s: cannot create endpoint number %u: no run of "
                  "UCX_HIPOWER_MIN_SLOTS=%u receive slots is left in the "
                  "UCX_HIPOWER_MEM_BUDGET=%zu arena (%u slots free in all); "
                  "raise the budget or lower UCX_HIPOWER_MIN_SLOTS",
                  iface->dev_name, iface->num_eps + 1,
                  iface->config.min_slots_per_ep, iface->arena.size,
                  hipower_arena_free_slots(&iface->arena.slots));
        return UCS_ERR_NO_MEMORY;
    }

    if (count < iface->config.slots_per_ep) {
        ucs_debug("hipower %s: endpoint %u gets %u of %u slots, room kept "
                  "for %u more", iface->dev_name, iface->num_eps + 1, count,
                  iface->config.slots_per_ep,
                  keep / iface->config.min_slots_per_ep);
    }

    ep->rx.first_slot = first;
    ep->rx.slots      = uct_hipower_iface_run_clear(iface, first, count);
    /* The released bits, and our view of the peer's written ones until it
     * writes them, start where the run's sequence numbers do */
    start             = uct_hipower_seq_origin(count);
    hipower_ring_bitmap_at(uct_hipower_ep_consumed(ep, ep->rx.epoch), count,
                           start);
    hipower_ring_bitmap_at(ep->ctrl->written_view, count, start);
    hipower_rx_ring_init(&ep->rx.ring, count,
                         uct_hipower_ep_consumed(ep, ep->rx.epoch), start);

    status = uct_hipower_window_open(&iface->win_dev, ep->rx.slots,
                                     (size_t)count * stride,
                                     IBV_ACCESS_REMOTE_WRITE, "receive slots",
                                     &ep->rx.win);
    if (status != UCS_OK) {
        hipower_arena_free(&iface->arena.slots, first, count);
        return status;
    }

    return UCS_OK;
}

/* Whether a grant may go out now: one at a time, to a peer that listens */
static int uct_hipower_ep_may_grant(uct_hipower_ep_t *ep)
{
    return (ep->rx.granted.count == 0) &&
           !(ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) &&
           uct_hipower_ep_may_initiate(ep) && uct_hipower_ep_has_room(ep, 2);
}

/* Counts the endpoint among those without a run (or giving it back): the
 * interface polls for their peers' run requests while any is */
static void uct_hipower_ep_runless(uct_hipower_ep_t *ep, int runless)
{
    uct_hipower_ep_iface(ep)->pool.num_runless += runless ? 1 : -1;
}

static void uct_hipower_ep_wait_end(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_WAITING) {
        ucs_list_del(&ep->rx.wait_list);
        uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_WAITING);
        --iface->pool.num_waiting;
        iface->pool.num_waiting_idle -= !(ep->flags.all &
                                          UCT_HIPOWER_EP_FLAG_ACTIVE);
        uct_hipower_iface_pool_update(iface);
    }
}

void uct_hipower_ep_idle_holder(uct_hipower_ep_t *ep, int idle)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (idle && iface->config.shared_pool && (ep->rx.ring.num_slots > 0) &&
        !(ep->flags.all & (UCT_HIPOWER_EP_FLAG_RELEASING |
                           UCT_HIPOWER_EP_FLAG_IDLE_HOLDER))) {
        ucs_list_add_tail(&iface->pool.idle_holders, &ep->rx.holder_list);
        uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_IDLE_HOLDER);
    } else if (!idle && (ep->flags.all & UCT_HIPOWER_EP_FLAG_IDLE_HOLDER)) {
        ucs_list_del(&ep->rx.holder_list);
        uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_IDLE_HOLDER);
    }
}

void uct_hipower_ep_pool_idle_held(uct_hipower_ep_t *ep, int idle)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t held              = uct_hipower_ep_rx_held(ep);

    if (idle) {
        iface->pool.idle_held += held;
    } else {
        iface->pool.idle_held -= held;
    }
}

void uct_hipower_ep_pool_idle(uct_hipower_ep_t *ep, int idle)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    unsigned waiting           = !!(ep->flags.all &
                                    UCT_HIPOWER_EP_FLAG_WAITING);

    if (idle) {
        iface->pool.num_waiting_idle += waiting;
    } else {
        iface->pool.num_waiting_idle -= waiting;
    }
    uct_hipower_ep_idle_holder(ep, idle);
    uct_hipower_ep_pool_idle_held(ep, idle);
    uct_hipower_iface_pool_update(iface);
}

void uct_hipower_ep_rx_release_abandon(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_wait_end(ep); /* Nor will it send */
    /* Nor adopt: no deadline for a peer that closed in order (no error to
     * report) or an endpoint that failed already; its runs go at destroy */
    uct_hipower_ep_grant_out(ep, 0);
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) {
        uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_RELEASING);
        --uct_hipower_ep_iface(ep)->pool.num_releasing;
        uct_hipower_ep_runless(ep, 0); /* It still holds its run */
    }
}

void uct_hipower_ep_rx_runs_cleanup(uct_hipower_ep_t *ep)
{
    uct_hipower_ep_grant_out(ep, 0);
    uct_hipower_ep_idle_holder(ep, 0);
    uct_hipower_ep_rx_release_abandon(ep);
    if (ep->rx.ring.num_slots == 0) {
        uct_hipower_ep_runless(ep, 0);
    }
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
    action     = hipower_grant_decide(cur, iface->pool.fair, wants,
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

/* An endpoint without a run whose peer asked: a run now, or a place in
 * the queue of those that get one when runs come back */
static void uct_hipower_ep_rx_wants_run(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    ep->rx.wants = 1;
    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_WAITING)) {
        /* Behind those that asked before: the pool goes to them first */
        if (ucs_list_is_empty(&iface->pool.waiters)) {
            uct_hipower_ep_rx_regrant(ep);
        }
        if (ep->rx.granted.count == 0) {
            ucs_list_add_tail(&iface->pool.waiters, &ep->rx.wait_list);
            uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_WAITING);
            ++iface->pool.num_waiting;
            iface->pool.num_waiting_idle += !(ep->flags.all &
                                              UCT_HIPOWER_EP_FLAG_ACTIVE);
            uct_hipower_iface_pool_update(iface);
            iface->stats.run_waits++;
        }
    }
}

static void uct_hipower_ep_rx_probe_peer(uct_hipower_ep_t *ep);

/* Takes the endpoint's run back: a grant of no slots. Returns 1 if it
 * went out. */
static int uct_hipower_ep_rx_release(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if (!iface->config.shared_pool || (ep->rx.ring.num_slots == 0) ||
        !uct_hipower_ep_may_grant(ep) ||
        (uct_hipower_ep_post_grant(ep, NULL, NULL, 0, ep->rx.epoch + 1) !=
         UCS_OK)) {
        return 0;
    }

    uct_hipower_ep_idle_holder(ep, 0);
    /* What uct_hipower_ep_rx_move() moves to: no run */
    ep->rx.granted.slots      = NULL;
    ep->rx.granted.win.mr     = NULL;
    ep->rx.granted.win.mw     = NULL;
    ep->rx.granted.first_slot = 0;
    ep->rx.granted.start      = 0;
    uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_RELEASING);
    uct_hipower_ep_grant_out(ep, 1);
    uct_hipower_ep_runless(ep, 1);
    ++iface->pool.num_releasing;
    iface->stats.reclaims++;
    iface->stats.rdma_writes++;
    ucs_debug(UCT_HIPOWER_EP_FMT ": idle, its run of %u slots taken back",
              UCT_HIPOWER_EP_ARG(ep), ep->rx.ring.num_slots);
    return 1;
}

/*
 * Peers wait for a run and none is free: take runs back from endpoints
 * that are idle, longest idle first (an endpoint that went idle while the
 * pool was not short kept its run, and may never go idle again), one more
 * only while fewer are coming back than peers wait. A release past its
 * deadline is not counted as coming back: its peer computes (it keeps the
 * run until it adopts the release) or is dead (its probe fails it), and
 * the waiters are served from the next idle holder meanwhile.
 */
static void uct_hipower_iface_reclaim_idle(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep, *tmp;

    ucs_list_for_each_safe(ep, tmp, &iface->pool.idle_holders,
                           rx.holder_list) {
        ucs_assert(iface->pool.num_overdue <= iface->pool.num_releasing);
        if (iface->pool.num_releasing - iface->pool.num_overdue >=
            iface->pool.num_waiting) {
            return;
        }
        /* One that cannot take a release now (its peer not known to be
         * ready, no room, a grant out) stays listed, in its place: it may
         * never go idle again to be listed anew (review M3) */
        if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_READY)) {
            uct_hipower_ep_rx_probe_peer(ep);
        } else {
            uct_hipower_ep_rx_release(ep);
        }
    }
}

/*
 * An idle holder whose peer never wrote to us, and to which we never
 * wrote: its run was given at creation, the peer may never use it, and a
 * release may go only to a peer known to have its windows bound. Our hello
 * and a signaled no-op behind it find out: their completion makes the peer
 * ready (uct_hipower_ep_tx_completion()), and the next try releases the
 * run; a peer that is gone fails the endpoint instead, which gives the run
 * back too. Without this, endpoints nobody used pinned the pool while
 * peers waited for ever (found by the simulator's schedules). Not at
 * connect: only when peers wait, once per endpoint.
 */
static void uct_hipower_ep_rx_probe_peer(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    if ((ep->flags.all & (UCT_HIPOWER_EP_FLAG_QP_UP |
                          UCT_HIPOWER_EP_FLAG_CONNECTED |
                          UCT_HIPOWER_EP_FLAG_PEER_CLOSED |
                          UCT_HIPOWER_EP_FLAG_FAILED |
                          UCT_HIPOWER_EP_FLAG_CANCELED)) !=
        UCT_HIPOWER_EP_FLAG_QP_UP) {
        return; /* Probed already, or nothing to probe */
    }
    if (!uct_hipower_ep_has_room(ep, 2) || (iface->tx.cq_credits < 1) ||
        (uct_hipower_ep_hello(ep) != UCS_OK)) {
        return; /* Tried again at the next attempt */
    }
    if (uct_hipower_ep_post_nop(ep, &iface->tx.cq_credits, NULL) == UCS_OK) {
        iface->stats.peer_probes++;
    }
}

void uct_hipower_iface_grant_wake(uct_hipower_iface_t *iface)
{
    struct ibv_send_wr wr;
    uct_hipower_ep_t *ep;
    uint64_t gen;

    ucs_list_for_each(ep, &iface->pool.granting, rx.grant_list) {
        gen = __atomic_load_n(&ep->ctrl->peer_sleep_gen, __ATOMIC_SEQ_CST);
        if ((gen == ep->post.woken_gen) || !uct_hipower_ep_may_initiate(ep) ||
            !uct_hipower_ep_has_room(ep, 1)) {
            continue;
        }

        uct_hipower_ep_wake_wr(&wr, gen);
        if (uct_hipower_ep_post(ep, &wr, &wr, 1, 0, NULL) == UCS_OK) {
            uct_hipower_ep_wakeup_posted(ep, gen);
            iface->stats.grant_wakeups++;
            iface->stats.rdma_writes++;
        }
    }
}

/* Whether the peer answered the grant or release out: its first message
 * in the granted run, or its run request of the release's epoch. The
 * walk, or the run request's immediate, finishes it. */
static int uct_hipower_ep_rx_answered(uct_hipower_ep_t *ep)
{
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) {
        return hipower_run_req_action(*(volatile uint64_t*)&ep->ctrl->run_req,
                                      ep->rx.epoch, ep->rx.ring.num_slots,
                                      1) == HIPOWER_RUN_REQ_RELEASED;
    }
    return uct_hipower_ep_rx_granted_used(ep);
}

/*
 * The first grant or release out passed its deadline. A busy peer is a
 * live peer: one that computes, or sits in a debugger, makes no UCX call
 * and cannot adopt, but its device answers, and UCX's rc fails a
 * connection only when the peer's device stops answering. So the peer is
 * judged by its device: a signaled zero-length write (uct_ep_check()'s
 * probe) completes, and the endpoint keeps the grant out (it pins only the
 * runs of its own peer), or fails after the transport's retries, through
 * the error handler, and its runs go back. Nothing is freed here: this
 * may run from a handler's nested progress while the endpoint is walked
 * (review b86e41e L1). The deadline is re-armed either way, and a release
 * past it no longer holds back the next release for waiters
 * (pool.num_overdue). A peer that answered already is not probed: this
 * runs before the progress call looks at answers, so a receiver that
 * stalled itself finds them here (review b86e41e M1).
 */
void uct_hipower_iface_grant_deadline(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep = ucs_list_head(&iface->pool.granting,
                                         uct_hipower_ep_t, rx.grant_list);

    if (ucs_likely((int64_t)(iface->clock.now - ep->rx.grant_deadline) < 0)) {
        return;
    }

    /* To the tail, where every deadline is earlier: the head is again the
     * first to expire */
    ucs_list_del(&ep->rx.grant_list);
    ep->rx.grant_deadline = iface->clock.now + iface->config.grant_timeout;
    ucs_list_add_tail(&iface->pool.granting, &ep->rx.grant_list);
    iface->stats.grant_timeouts++;
    if ((ep->rx.grant_probes++ == 0) &&
        (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING)) {
        ++iface->pool.num_overdue;
    }
    if (uct_hipower_ep_rx_answered(ep)) {
        return;
    }

    ucs_debug(UCT_HIPOWER_EP_FMT ": the peer did not %s within "
              "UCX_HIPOWER_GRANT_TIMEOUT=%.1fs (%u times): probing its "
              "device", UCT_HIPOWER_EP_ARG(ep),
              (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) ?
              "give back the run it was asked to release" :
              "adopt the run it was granted",
              ucs_time_to_sec(iface->config.grant_timeout),
              ep->rx.grant_probes);
    /* No room now: a signaled request is out, which probes as well, or
     * the next deadline tries again */
    (void)uct_hipower_ep_probe(ep);
}

/* Every run the endpoint holds or granted goes back to the pool now,
 * deregistered first; the endpoint lives on without one */
static void uct_hipower_ep_rx_give_back(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t held              = uct_hipower_ep_rx_held(ep);

    uct_hipower_ep_grant_out(ep, 0);
    uct_hipower_ep_idle_holder(ep, 0);
    uct_hipower_ep_held_changed(ep, -(int32_t)held);
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) {
        /* Counted without a run already; the release is over */
        uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_RELEASING);
        --iface->pool.num_releasing;
    } else if (ep->rx.ring.num_slots > 0) {
        uct_hipower_ep_runless(ep, 1); /* Destroy counts it out */
    }
    uct_hipower_ep_free_runs(ep);
    uct_hipower_iface_pool_update(iface);
}

void uct_hipower_ep_rx_timeout(uct_hipower_ep_t *ep)
{
    /* The QP goes to error (a late write of the peer's fails its own
     * connection), then its runs go back: at once, or, when a handler's
     * nested progress got here during the endpoint's walk, when the walk
     * ends (uct_hipower_ep_rx_leave(), review b86e41e L1); and not while
     * the user keeps a message in them (uct_hipower_ep_rx_peer_gone()) */
    uct_hipower_ep_fail(ep, UCS_ERR_ENDPOINT_TIMEOUT);
}

void uct_hipower_ep_rx_peer_gone(uct_hipower_ep_t *ep)
{
    /* Not while the user keeps a message in the slots; the shared pool
     * only (an endpoint's own run goes with it at destroy); once */
    if (!uct_hipower_ep_iface(ep)->config.shared_pool ||
        (uct_hipower_ep_rx_held(ep) == 0) || (ep->rx.ring.held > 0)) {
        return;
    }
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_IN_RX) {
        /* A handler of the walk failed it: the walk still reads the runs;
         * they go when it ends (uct_hipower_ep_rx_leave()) */
        return;
    }

    ucs_debug(UCT_HIPOWER_EP_FMT ": the peer %s: its %u slots go back to "
              "the pool", UCT_HIPOWER_EP_ARG(ep),
              (ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) ?
              "failed" : "closed and every message of it was delivered",
              uct_hipower_ep_rx_held(ep));
    uct_hipower_ep_wait_end(ep);
    uct_hipower_ep_rx_give_back(ep);
    uct_hipower_ep_iface(ep)->stats.closed_returns++;
}

void uct_hipower_iface_serve_waiters(uct_hipower_iface_t *iface)
{
    uct_hipower_ep_t *ep, *tmp;

    iface->pool.waiters_frees = iface->arena.slots.frees;
    ucs_list_for_each_safe(ep, tmp, &iface->pool.waiters, rx.wait_list) {
        if ((ep->rx.ring.num_slots == 0) &&
            !(ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                               UCT_HIPOWER_EP_FLAG_PEER_CLOSED))) {
            ep->rx.wants = 1;
            uct_hipower_ep_rx_regrant(ep);
            if (ep->rx.granted.count == 0) {
                iface->stats.waiter_tries++;
                /* Not yet: the ones behind wait too */
                uct_hipower_iface_reclaim_idle(iface);
                return;
            }
        }
        uct_hipower_ep_wait_end(ep);
    }
}

void uct_hipower_ep_rx_reclaim(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t keep              = uct_hipower_iface_pool_keep(iface);
    uint32_t free_slots        = hipower_arena_free_slots(&iface->arena.slots);

    /* Only while the pool is short (under a quarter free, beyond the room
     * kept for endpoints to come, or peers waiting for a run): the peer
     * asks again when it sends, which costs its next message a round
     * trip. (Not for UCX's test_uct_peer_failure_multiple: releasing on
     * every idle spell passes it, its 68 endpoints failing within a
     * second of each other; see docs/protocol.md 9.2 for the "hang" the
     * old shrink to 8 slots caused) */
    if ((free_slots > keep) &&
        (free_slots - keep >= iface->arena.slots.total / 4) &&
        ucs_list_is_empty(&iface->pool.waiters)) {
        return;
    }

    uct_hipower_ep_rx_release(ep);
}

/*
 * The current run is drained and every slot of it released (messages are
 * released before the receive loop moves on): it goes back to the pool and
 * the granted run -- none, for a release -- becomes the current one
 */
static void uct_hipower_ep_rx_move(uct_hipower_ep_t *ep)
{
    uint32_t old_count = ep->rx.ring.num_slots;

    uct_hipower_ep_run_free(ep, &ep->rx.win, ep->rx.first_slot, old_count);
    hipower_rx_ring_switch(&ep->rx.ring, ep->rx.granted.count,
                           uct_hipower_ep_consumed(ep, ep->rx.epoch + 1),
                           ep->rx.granted.start);
    ep->rx.slots         = ep->rx.granted.slots;
    ep->rx.win           = ep->rx.granted.win;
    ep->rx.first_slot    = ep->rx.granted.first_slot;
    ep->rx.granted.count = 0;
    ++ep->rx.epoch;
    uct_hipower_ep_grant_out(ep, 0); /* Adopted, and the old run drained */
    uct_hipower_ep_held_changed(ep, -(int32_t)old_count);
    uct_hipower_ep_iface(ep)->stats.run_switches++;
}

/* The release is out and the run request says where the peer's messages
 * in the run end: once they are delivered, the run goes back to the pool.
 * Returns 1 if it went. */
static int uct_hipower_ep_rx_release_done(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t old_count         = ring->num_slots;
    uint64_t req               = *(volatile uint64_t*)&ep->ctrl->run_req;
    int remaining;

    if (hipower_run_req_action(req, ep->rx.epoch, old_count, 1) !=
        HIPOWER_RUN_REQ_RELEASED) {
        return 0; /* The peer has not adopted the release yet */
    }

    /* Its request came after everything it wrote into the run: a filled
     * slot still open there is done, with the count the request says */
    ucs_memory_cpu_load_fence();
    ep->hooks->fill_close(ep, hipower_run_req_fill(req));
    if (ep->flags.all & (UCT_HIPOWER_EP_FLAG_BAD_FRAME |
                         UCT_HIPOWER_EP_FLAG_FAILED)) {
        return 0; /* Fails (or gives its runs back) at the walk's end */
    }

    remaining = hipower_grant_old_remaining(hipower_rx_ring_taken(ring),
                                            hipower_run_req_old_end(req),
                                            old_count);
    if (ucs_unlikely(remaining < 0)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer says its messages in the run "
                  "it gave back end at its message %u (mod 2^16), but %u "
                  "were delivered and the run holds %u: broken or hostile "
                  "peer", UCT_HIPOWER_EP_ARG(ep),
                  hipower_run_req_old_end(req),
                  hipower_rx_ring_taken(ring), old_count);
        iface->stats.bad_slots++;
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
        return 0;
    }
    if (remaining > 0) {
        return 0; /* Its last messages first */
    }

    uct_hipower_ep_rx_move(ep);
    uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_RELEASING);
    --iface->pool.num_releasing;
    /* Still counted without a run; the peer may have asked already */
    uct_hipower_ep_rx_run_req(ep);
    return 1;
}

void uct_hipower_ep_rx_run_req(uct_hipower_ep_t *ep)
{
    uint64_t req = *(volatile uint64_t*)&ep->ctrl->run_req;

    switch (hipower_run_req_action(req, ep->rx.epoch, ep->rx.ring.num_slots,
                                   !!(ep->flags.all &
                                      UCT_HIPOWER_EP_FLAG_RELEASING))) {
    case HIPOWER_RUN_REQ_RELEASED:
        uct_hipower_ep_rx_release_done(ep);
        break;
    case HIPOWER_RUN_REQ_WANTS:
        if ((ep->rx.granted.count == 0) &&
            !(ep->flags.all & (UCT_HIPOWER_EP_FLAG_FAILED |
                               UCT_HIPOWER_EP_FLAG_PEER_CLOSED))) {
            uct_hipower_ep_rx_wants_run(ep);
        }
        break;
    default:
        break;
    }
}

int uct_hipower_ep_rx_switch(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    const hipower_slot_layout_t *layout = &iface->config.layout;
    hipower_rx_ring_t *ring    = &ep->rx.ring;
    uint32_t old_count         = ring->num_slots;
    uint64_t ack_word;
    int remaining;

    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RELEASING) {
        return uct_hipower_ep_rx_release_done(ep);
    }

    if (!uct_hipower_ep_rx_granted_used(ep)) {
        return 0; /* The peer has not moved yet */
    }
    ucs_memory_cpu_load_fence();

    /* It wrote its new run after everything it wrote into the old one: a
     * filled slot still open there is done, with the count the new run's
     * first frame says */
    ack_word  = hipower_slot_trailer_ack_word(
                    UCS_PTR_BYTE_OFFSET(uct_hipower_ep_rx_granted_first(ep),
                                        layout->trailer_offset));
    ep->hooks->fill_close(ep, hipower_slot_ack_fill_count(ack_word));
    if (ep->flags.all & (UCT_HIPOWER_EP_FLAG_BAD_FRAME |
                         UCT_HIPOWER_EP_FLAG_FAILED)) {
        return 0; /* Fails (or gives its runs back) at the walk's end */
    }

    remaining = (ack_word & HIPOWER_SLOT_ACK_SWITCH) ?
                hipower_grant_old_remaining(hipower_rx_ring_taken(ring),
                                            hipower_slot_ack_old_end(ack_word),
                                            old_count) : -1;
    if (ucs_unlikely(remaining < 0)) {
        ucs_error(UCT_HIPOWER_EP_FMT ": the peer's first message in its new "
                  "run of %u slots says its old run ends at its message %u "
                  "(mod 2^16, switch flag %d), but %u were delivered and the "
                  "run holds %u: broken or hostile peer",
                  UCT_HIPOWER_EP_ARG(ep), ep->rx.granted.count,
                  hipower_slot_ack_old_end(ack_word),
                  !!(ack_word & HIPOWER_SLOT_ACK_SWITCH),
                  hipower_rx_ring_taken(ring), old_count);
        iface->stats.bad_slots++;
        uct_hipower_ep_fail(ep, UCS_ERR_IO_ERROR);
        return 0;
    }
    if (remaining > 0) {
        return 0; /* Old-run messages first, in order */
    }

    /* The old run is drained, and every slot of it released (messages are
     * released before the receive loop moves on) */
    uct_hipower_ep_rx_move(ep);
    if (old_count == 0) {
        uct_hipower_ep_runless(ep, 0); /* It has a run again */
    }
    return 1;
}

void uct_hipower_ep_tx_adopt(uct_hipower_ep_t *ep)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint64_t epoch             = *(volatile uint64_t*)&ep->ctrl->grant.epoch;
    uint32_t count, old_end, start;
    uint64_t fill_final;

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
        /* Never back: an older record is one the device placed again (a
         * responder executing a duplicate WRITE, docs/protocol.md); taking
         * its epoch would adopt the newer record, placed again after it,
         * a second time and restart a run the receiver is already in */
        if ((int64_t)(epoch - ep->tx.epoch) > 0) {
            ep->tx.epoch = epoch;
        }
        return;
    }

    /* A filled slot open in the old run ends here: its final count goes
     * with what says where the old run ends (the new run's first frame,
     * or the run request of a release) */
    fill_final           = uct_hipower_ep_fill_final_bits(ep);
    start                = uct_hipower_seq_origin(count);
    old_end              = hipower_tx_ring_switch(&ep->tx.ring, count, start);
    hipower_fill_tx_close(&ep->tx.fill); /* Nothing more into the old run */
    memset(ep->ctrl->written, 0, sizeof(ep->ctrl->written));
    hipower_ring_bitmap_at(ep->ctrl->written, count, start);
    if (count == 0) {
        /* A release: no slot to say where our messages end, so the run
         * request word says it */
        ep->tx.slots_addr   = 0;
        ep->tx.slots_rkey   = 0;
        ep->tx.epoch        = epoch;
        ep->tx.threshold    = 1;
        ep->tx.ack_flags    = 0;
        ep->tx.run_req      = hipower_run_req_with_fill(
                                  hipower_run_req_make(epoch, old_end, 0),
                                  hipower_slot_ack_fill_count(fill_final));
        uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE);
        iface->stats.runs_adopted++;
        uct_hipower_ep_tx_run_req(ep);
        return;
    }
    ep->tx.slots_addr    = ep->ctrl->grant.slots_addr;
    ep->tx.slots_rkey    = ep->ctrl->grant.rkey;
    ep->tx.epoch         = epoch;
    ep->tx.threshold     = uct_hipower_ep_tx_threshold(iface, count);
    /* The next message, the new run's first, says where the old
     * run's messages end (the grant answered any want of ours) */
    ep->tx.ack_flags     = hipower_slot_ack_switch(old_end) | fill_final;
    iface->stats.runs_adopted++;
}

void uct_hipower_ep_tx_first_run(uct_hipower_ep_t *ep, uint64_t addr,
                                 uint32_t rkey, uint32_t num_slots)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);
    uint32_t start             = uct_hipower_seq_origin(num_slots);

    /* Our written bits and the published ones the peer reads in pull mode
     * start where the run's sequence numbers do (0 in the product) */
    hipower_ring_bitmap_at(ep->ctrl->written, num_slots, start);
    hipower_ring_bitmap_at(ep->ctrl->published, num_slots, start);
    hipower_tx_ring_init(&ep->tx.ring, num_slots, ep->ctrl->written, start);
    ep->tx.publish_slot = (num_slots == 0) ? 0 :
                          hipower_ring_slot(num_slots, start);
    ep->tx.slots_addr   = addr;
    ep->tx.slots_rkey   = rkey;
    ep->tx.threshold    = uct_hipower_ep_tx_threshold(iface, num_slots);
}

ucs_status_t uct_hipower_ep_tx_run_req(uct_hipower_ep_t *ep)
{
    uint64_t req = ep->tx.run_req;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint64_t sleep_gen;

    /* Our hello first if we have sent nothing yet: the peer's release
     * asks for this answer even from an endpoint whose user never sends,
     * and the peer, which wrote to us, has its windows bound. Without it
     * the request stayed due, and was tried on every progress call, for
     * ever. */
    if ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FAILED) ||
        (uct_hipower_ep_hello(ep) != UCS_OK) ||
        !uct_hipower_ep_has_room(ep, 1)) {
        return UCS_ERR_NO_RESOURCE; /* Progress or the next send tries again */
    }

    /* Always with an immediate: the receiver holds no slot for us to
     * write, and polls for these (pool.num_runless); one that also wakes
     * the peer's sleep generation carries that one */
    uct_hipower_ep_word_wr(ep, &wr, &sge, &req, ep->peer.run_req_addr);
    sleep_gen = uct_hipower_ep_wakeup_check(ep, &wr);
    if (wr.opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
        wr.opcode   = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = 0; /* No generation is 0 */
    }
    status = uct_hipower_ep_post(ep, &wr, &wr, 1, 0, NULL);
    if (status != UCS_OK) {
        return status;
    }

    uct_hipower_ep_wakeup_posted(ep, sleep_gen);
    uct_hipower_ep_flags_clear(ep, grant, UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE);
    uct_hipower_ep_iface(ep)->stats.rdma_writes++;
    uct_hipower_ep_iface(ep)->stats.run_reqs++;
    return UCS_OK;
}

void uct_hipower_ep_tx_ask(uct_hipower_ep_t *ep)
{
    uint64_t req = hipower_run_req_with_fill(
                       hipower_run_req_make(ep->tx.epoch,
                                            hipower_run_req_old_end(
                                                    ep->tx.run_req), 1),
                       hipower_run_req_fill(ep->tx.run_req));

    if (req != ep->tx.run_req) {
        ep->tx.run_req  = req; /* Once per epoch */
        uct_hipower_ep_flags_set(ep, grant, UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE);
    }
    if (ep->flags.all & UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE) {
        uct_hipower_ep_tx_run_req(ep);
    }
}

void uct_hipower_ep_slots_wanted(uct_hipower_ep_t *ep)
{
    if (ucs_unlikely(ep->flags.all & UCT_HIPOWER_EP_FLAG_PEER_CLOSED)) {
        /* A peer that closed its endpoint releases nothing more, and no READ
         * goes to it: a request of the user's must be out to fail and say
         * so (the probe of uct_ep_check(), if none is), or a sender waiting
         * for a slot would wait forever */
        uct_hipower_ep_probe(ep);
        return;
    }

    if (ucs_unlikely(ep->tx.ring.num_slots == 0)) {
        /* No run at the peer (hipower_ep_grant.c): ask for one */
        if (ep->flags.all & UCT_HIPOWER_EP_FLAG_CONNECTED) {
            uct_hipower_ep_tx_ask(ep);
        }
        return;
    }

    uct_hipower_ep_post_recycle_read(ep);
}
