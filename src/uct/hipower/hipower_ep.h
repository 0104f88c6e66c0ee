/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_H_
#define UCT_HIPOWER_EP_H_

#include "hipower_ep_def.h"
#include "hipower_post.h"
#include "hipower_ep_rx.h"
#include "hipower_iface.h"
#include "hipower_window.h"
#include "hipower_txq.h"

#include <uct/base/uct_iov.inl>
#include <ucs/arch/cpu.h>
#include <arpa/inet.h>
#include <sched.h>



UCS_CLASS_DECLARE_NEW_FUNC(uct_hipower_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_hipower_ep_t, uct_ep_t);

ucs_status_t uct_hipower_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr);

ucs_status_t uct_hipower_ep_connect_to_ep(uct_ep_h tl_ep,
                                          const uct_device_addr_t *dev_addr,
                                          const uct_ep_addr_t *ep_addr);

#if HIPOWER_UCX_IFACE_OPS_V2
ucs_status_t
uct_hipower_ep_connect_to_ep_v2(uct_ep_h tl_ep,
                                const uct_device_addr_t *dev_addr,
                                const uct_ep_addr_t *ep_addr,
                                const uct_ep_connect_to_ep_params_t *params);

int uct_hipower_ep_is_connected(const uct_ep_h tl_ep,
                                const uct_ep_is_connected_params_t *params);
#endif

ucs_status_t uct_hipower_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                                     const void *buffer, unsigned length);

ssize_t uct_hipower_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                uct_pack_callback_t pack_cb, void *arg,
                                unsigned flags);

/* The two with the bundle window on (hipower_ep_hold.c) */
ucs_status_t uct_hipower_held_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                          uint64_t hdr, const void *buffer,
                                          unsigned length);

ssize_t uct_hipower_held_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                     uct_pack_callback_t pack_cb, void *arg,
                                     unsigned flags);

ucs_status_t uct_hipower_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                     const void *header, unsigned header_length,
                                     const uct_iov_t *iov, size_t iovcnt,
                                     unsigned flags, uct_completion_t *comp);

ucs_status_t uct_hipower_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                      unsigned length, uint64_t remote_addr,
                                      uct_rkey_t rkey);

ssize_t uct_hipower_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                 void *arg, uint64_t remote_addr,
                                 uct_rkey_t rkey);

ucs_status_t uct_hipower_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t uct_hipower_ep_get_bcopy(uct_ep_h tl_ep,
                                      uct_unpack_callback_t unpack_cb,
                                      void *arg, size_t length,
                                      uint64_t remote_addr, uct_rkey_t rkey,
                                      uct_completion_t *comp);

ucs_status_t uct_hipower_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                      size_t iovcnt, uint64_t remote_addr,
                                      uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t uct_hipower_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                          uint64_t value, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ucs_status_t uct_hipower_ep_atomic64_fetch(uct_ep_h tl_ep, unsigned opcode,
                                           uint64_t value, uint64_t *result,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp);

ucs_status_t uct_hipower_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                           uint64_t swap, uint64_t remote_addr,
                                           uct_rkey_t rkey, uint64_t *result,
                                           uct_completion_t *comp);

ucs_status_t uct_hipower_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp);

ucs_status_t uct_hipower_ep_check(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp);

ucs_status_t uct_hipower_ep_fence(uct_ep_h tl_ep, unsigned flags);

ucs_status_t uct_hipower_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                        unsigned flags);

void uct_hipower_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                  void *arg);

/* Posting, room, descriptors and work-request builders: hipower_post.h */

/* Sender: the receiver granted a new run, the next message goes there
 * (hipower_ep_grant.c) */
void uct_hipower_ep_tx_adopt(uct_hipower_ep_t *ep);

/* No free peer slot: a recycle READ, or, to a peer that closed its
 * endpoint, a request that will fail and report it */
void uct_hipower_ep_slots_wanted(uct_hipower_ep_t *ep);

/*
 * Room for one more active message frame now: a free slot of the peer (in
 * the run it granted last, which this adopts) and room to post it.
 * UCS_ERR_NO_RESOURCE otherwise, after asking for slots; @a count: a
 * refused send, counted in the statistics (not a bundle's retry).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_tx_room(uct_hipower_ep_t *ep, int count)
{
    uct_hipower_iface_t *iface = uct_hipower_ep_iface(ep);

    /* The receiver granted a new run: this message goes there */
    if (ucs_unlikely(*(volatile uint64_t*)&ep->ctrl->grant.epoch !=
                     ep->tx.epoch)) {
        uct_hipower_ep_tx_adopt(ep);
    }

    if (ucs_unlikely(hipower_tx_ring_free(&ep->tx.ring) == 0)) {
        iface->stats.pool_empty += count;
        /* Our next message tells the receiver its run was too small */
        ep->tx.ack_flags |= HIPOWER_SLOT_ACK_WANTS;
        uct_hipower_ep_slots_wanted(ep);
        return UCS_ERR_NO_RESOURCE;
    }

    /* One more: the announce of an unfinished batch, or pull's hello */
    if (ucs_unlikely(!uct_hipower_ep_has_room(ep, ep->tx.msg_wrs + 1))) {
        iface->stats.tx_queue_full += count;
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

/* Set while this thread runs the hold timer's post (hipower_ep_hold.c) */
extern __thread int uct_hipower_hold_posting_here;

/* While the bundle window is on, an endpoint operation starts: marked,
 * then clear of the hold timer (hipower_ep_hold.c says why). The count is
 * an atomic add: UCP's wire-up creates and destroys endpoints from UCX's
 * async thread while the user's thread sends. An operation called from
 * within the timer's post (an error handler of an endpoint whose post
 * failed) does not wait for it: it runs in the timer's own thread, which
 * would never get back to end the post. */
static UCS_F_ALWAYS_INLINE void
uct_hipower_held_enter(uct_hipower_iface_t *iface)
{
    (void)__atomic_add_fetch(&iface->tx.hold_ops, 1, __ATOMIC_SEQ_CST);
    while (ucs_unlikely(__atomic_load_n(&iface->tx.hold_posting,
                                        __ATOMIC_SEQ_CST)) &&
           !uct_hipower_hold_posting_here) {
        sched_yield();
    }
}

static UCS_F_ALWAYS_INLINE void
uct_hipower_held_leave(uct_hipower_iface_t *iface)
{
    /* Sequentially consistent, as the async thread's look at hold_ops
     * after it marks post_due: if it saw this operation, this sees the
     * mark, and the bundles it could not post go here, at the end of the
     * call (not from an operation inside progress, or inside the async
     * thread's own post: those post them when they finish) */
    if ((__atomic_sub_fetch(&iface->tx.hold_ops, 1, __ATOMIC_SEQ_CST) == 0) &&
        ucs_unlikely(__atomic_load_n(&iface->tx.post_due, __ATOMIC_SEQ_CST)) &&
        !iface->tx.in_progress && !uct_hipower_hold_posting_here) {
        uct_hipower_iface_hold_due(iface);
    }
}

/* A wrapper of an endpoint operation for the bundle window: the plain one
 * (@a _op, inlined where it is an inline body), between held_enter and
 * held_leave (hipower_ep_hold.c says why) */
#define UCT_HIPOWER_HELD_WRAPPER(_scope, _type, _name, _op, _params, _args) \
    _scope _type _name _params \
    { \
        uct_hipower_iface_t *_iface = ucs_derived_of(tl_ep->iface, \
                                                     uct_hipower_iface_t); \
        _type _ret; \
        \
        uct_hipower_held_enter(_iface); \
        _ret = _op _args; \
        uct_hipower_held_leave(_iface); \
        return _ret; \
    }

/* The window holds a send: the completion of the frame ahead of it must
 * be seen without the sender, so the send CQ is armed for the async
 * thread if it is not; and the safety timer must run (hipower_ep_hold.c) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_hold(uct_hipower_iface_t *iface, int count)
{
    iface->stats.tx_window += count;
    iface->tx.hold_seen     = 1;
    if (ucs_unlikely(!*(volatile int*)&iface->tx.armed)) {
        uct_hipower_iface_hold_arm(iface);
    }
    if (ucs_unlikely(uct_hipower_timer_state(&iface->tx.hold_timer) ==
                     UCT_HIPOWER_TIMER_IDLE)) {
        uct_hipower_iface_hold_start(iface);
    }
}

/*
 * uct_hipower_ep_tx_room() for a frame of short or bcopy active messages,
 * which may wait in the endpoint's bundle: it also needs the bundle window
 * open (UCX_HIPOWER_BUNDLE_WINDOW: few requests in flight), or it waits
 * for the completion that opens it, and the messages after it join it.
 * Zero-copy frames, which cannot be bundled, do not look at the window.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_tx_am_room(uct_hipower_ep_t *ep, int count)
{
    ucs_status_t status;

    status = uct_hipower_ep_tx_room(ep, count);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    if (ucs_unlikely(hipower_txwin_full(&ep->tx.win,
                                        ep->txqp.txq.acked_sn))) {
        uct_hipower_ep_hold(uct_hipower_ep_iface(ep), count);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/* Takes the next peer slot and posts a frame of @a length bytes at
 * @a data in @a op's buffer, the trailer right after them in the same
 * buffer (hipower_ep_am.c); the caller checked the room
 * (uct_hipower_ep_tx_room()). @a op is retired with the frame. */
ucs_status_t uct_hipower_ep_send_frame(uct_hipower_ep_t *ep, void *data,
                                       uint32_t length, uint8_t am_id,
                                       uct_hipower_tx_op_t *op);

/* Bundles (hipower_ep_bundle.c) */

/* The frame kinds of a filled slot (hipower_ep_am.c's send_msg) */
#define UCT_HIPOWER_FILL_FIRST   2
#define UCT_HIPOWER_FILL_APPEND  1

/* Posts the first batch of a filled slot, @a size bytes at @a data in
 * @a op's buffer (records and footer, room for the trailer after them), as
 * the frame of the peer's next slot, its trailer counting one batch; the
 * caller checked the slot and the room */
ucs_status_t uct_hipower_ep_send_fill_first(uct_hipower_ep_t *ep, void *data,
                                            uint32_t size,
                                            uct_hipower_tx_op_t *op);

/* Posts a batch of @a size bytes at @a data in @a op's buffer (records and
 * footer, room for the trailer after them) into the peer's slot our
 * bundles fill, below its batches so far, and the slot's trailer after it
 * (hipower_ep_am.c); the caller checked uct_hipower_ep_fill_takes() and
 * the room for three work requests */
ucs_status_t uct_hipower_ep_send_batch(uct_hipower_ep_t *ep, void *data,
                                       uint32_t size, uct_hipower_tx_op_t *op);

/* Posts the open bundle if a slot and room are there, and with
 * @a windowed, the bundle window is open (uct_hipower_ep_tx_am_room()):
 * UCS_OK when none stays open, UCS_ERR_NO_RESOURCE while it waits, or the
 * post's error. Unwindowed when nothing more will join it or it must go
 * now: it is full, a flush, an arm or an operation that is not bundled
 * waits for it. */
ucs_status_t uct_hipower_ep_bundle_post(uct_hipower_ep_t *ep, int windowed);

/* Opens a bundle (UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN), empty; the endpoint is
 * listed for progress, which posts it once there is room */
ucs_status_t uct_hipower_ep_bundle_open(uct_hipower_ep_t *ep);

/*
 * Appends an active message (@a hdr_length bytes of @a hdr, then
 * @a length bytes of @a data) to the open bundle, opening one if none is;
 * then posts the bundle if it can go now. UCS_ERR_NO_RESOURCE, with nothing
 * changed, if it does not fit.
 */
ucs_status_t uct_hipower_ep_bundle_add(uct_hipower_ep_t *ep, uint8_t am_id,
                                       const void *hdr, unsigned hdr_length,
                                       const void *data, unsigned length);

/* Drops the open bundle, unsent (the endpoint failed, was canceled or is
 * destroyed): its messages are lost, as posted ones are then */
void uct_hipower_ep_bundle_drop(uct_hipower_ep_t *ep);

/* The endpoint is destroyed: the open bundle is posted if it can go now,
 * else dropped; no error is reported */
void uct_hipower_ep_bundle_leave(uct_hipower_ep_t *ep);

/* Before an operation that is not bundled (zero-copy, RMA) or a flush:
 * the open bundle goes first, window or not, or the operation waits
 * (UCS_ERR_NO_RESOURCE) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_hipower_ep_bundle_first(uct_hipower_ep_t *ep)
{
    if (ucs_likely(!(ep->flags & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN))) {
        return UCS_OK;
    }
    return uct_hipower_ep_bundle_post(ep, 0);
}

/* Wakeup: posts @a count receives for the peer's wake-up writes */
ucs_status_t uct_hipower_ep_post_event_recvs(uct_hipower_ep_t *ep,
                                             unsigned count);

/* Tells the peer sleep generation @a gen and reads its announced count
 * after it; @a type: UCT_HIPOWER_OP_ARM (the interface sleeps) or _DEMOTE
 * (this endpoint goes idle) -- hipower_ep_active.c */
ucs_status_t uct_hipower_ep_post_sleep(uct_hipower_ep_t *ep, uint64_t gen,
                                       uint8_t type);

/* Handles a completion of the endpoint's QP (successful or not) */
void uct_hipower_ep_tx_completion(uct_hipower_ep_t *ep, struct ibv_wc *wc);

/*
 * Marks the endpoint failed, completes everything outstanding with
 * @a status and tells the iface error handler, once; returns what the
 * handler returned. Not after flush(CANCEL) (the user asked for it) nor
 * after the peer closed its endpoint in order.
 */
ucs_status_t uct_hipower_ep_set_failed(uct_hipower_ep_t *ep,
                                       ucs_status_t status);

/* Calls the error handlers that endpoints failed in the async thread left
 * to the user's progress; returns how many */
unsigned uct_hipower_iface_report_failures(uct_hipower_iface_t *iface);

/* The shared pool (hipower_ep_grant.c, docs/protocol.md 9.2) */

/* Receiver: the peer's run is full or larger than its share: grants a
 * new run if the rules say so */
void uct_hipower_ep_rx_regrant(uct_hipower_ep_t *ep);

/* Receiver: a grant is out; moves to the granted run once its first
 * message is there and the old run is drained. Returns 1 if it moved */
int uct_hipower_ep_rx_switch(uct_hipower_ep_t *ep);

/* The runs an endpoint holds go back to the pool at once: their
 * registrations go first, so the peer can no longer write them, whatever
 * its QP still sends */
void uct_hipower_ep_free_runs(uct_hipower_ep_t *ep);

/* Receiver: the endpoint went idle while the pool is short: takes its
 * run back (a release, a grant of no slots) */
void uct_hipower_ep_rx_reclaim(uct_hipower_ep_t *ep);

/* Receiver: a wake-up came for an endpoint without a run, or giving its
 * run back: acts on the peer's run request (hipower_run_req_action()) */
void uct_hipower_ep_rx_run_req(uct_hipower_ep_t *ep);

/* Receiver: grants runs to endpoints that asked while none was free, in
 * the order they asked, as long as the pool has runs */
void uct_hipower_iface_serve_waiters(uct_hipower_iface_t *iface);

/* Receiver: the first grant or release out passed its deadline
 * (UCX_HIPOWER_GRANT_TIMEOUT) unanswered: its peer's device is probed (a
 * dead one fails the endpoint, a live one keeps its runs) and the
 * deadline re-armed */
void uct_hipower_iface_grant_deadline(uct_hipower_iface_t *iface);

/*
 * A grant or release record went out without a wake-up (the peer was
 * awake then) and the peer has started a sleep generation since: its
 * sleep handshake reads our announced count, which a record does not
 * change, so it may have gone to sleep without looking at the record and
 * would never answer it -- an honest idle peer failing at the grant
 * timeout (found by the simulator's schedules). Once per clock tick, each
 * endpoint with a record out whose peer sleeps unwoken gets a zero-length
 * write with its immediate.
 */
void uct_hipower_iface_grant_wake(uct_hipower_iface_t *iface);

/* Receiver: the peer is broken or hostile (it said for longer than
 * GRANT_TIMEOUT that it sent messages that never came): the endpoint
 * fails with UCS_ERR_ENDPOINT_TIMEOUT, and its runs go back to the pool
 * once no walk uses them */
void uct_hipower_ep_rx_timeout(uct_hipower_ep_t *ep);

/*
 * Nothing more will be delivered from the peer -- it closed its endpoint
 * in order ("closed" is written after its last frame, on the same QP) and
 * the receiver found nothing more, or the endpoint failed -- and no message
 * of it is held: its runs go back to the pool now, not when the user
 * destroys the endpoint, which a user keeping an endpoint to a departed or
 * failed peer may do late or never, while peers wait for a run (found by
 * the simulator's schedules)
 */
void uct_hipower_ep_rx_peer_gone(uct_hipower_ep_t *ep);

/* Receiver: the endpoint goes (destroyed): no more a waiter, no more
 * counted without a run */
void uct_hipower_ep_rx_runs_cleanup(uct_hipower_ep_t *ep);

/* Receiver: the peer failed or closed its endpoint: a release out will
 * not be answered (the endpoint keeps its run until it is destroyed), and
 * it waits for no run */
void uct_hipower_ep_rx_release_abandon(uct_hipower_ep_t *ep);

/* Receiver: the endpoint went idle (@a idle) or active: an idle one
 * holding a run is listed, oldest first, for waiters to take back */
void uct_hipower_ep_idle_holder(uct_hipower_ep_t *ep, int idle);

/* Sender, in progress: adopts a grant and sends the no-message frame that
 * tells the receiver, when nothing else would; writes a run request that
 * found no room before */
void uct_hipower_ep_tx_switch_idle(uct_hipower_ep_t *ep);

/* Sender without a run: asks the receiver for one (once per epoch) */
void uct_hipower_ep_tx_ask(uct_hipower_ep_t *ep);

/* Sender: writes tx.run_req into the receiver's run request word, with an
 * immediate */
ucs_status_t uct_hipower_ep_tx_run_req(uct_hipower_ep_t *ep);

/* The no-message frame (hipower_ep_am.c) */
ucs_status_t uct_hipower_ep_send_none(uct_hipower_ep_t *ep);

/* Clears the marks of the run of @a count slots from @a first, just taken
 * from the pool, before it is registered for a peer; returns its address */
void *uct_hipower_iface_run_clear(uct_hipower_iface_t *iface, uint32_t first,
                                  uint32_t count);

/* Slots were taken from the pool: updates the peak in the statistics */
void uct_hipower_iface_pool_used(uct_hipower_iface_t *iface);

/* Recomputes an active endpoint's share after the active set changed */
void uct_hipower_iface_pool_update(uct_hipower_iface_t *iface);

/*
 * A short or bcopy message joined the open bundle (hipower_bundle_append()):
 * the bundle goes now if it can (uct_hipower_ep_bundle_post(), windowed).
 * Under load it mostly cannot -- no slot or no room came back since it
 * opened, or the window is still full -- and that is decided here without
 * a call; progress, flush, arm and the hold timer post it later (the
 * endpoint is listed for progress while its bundle is open). A gathering
 * pending dispatch posts it when all its requests have joined.
 */
static UCS_F_ALWAYS_INLINE void uct_hipower_ep_bundle_joined(uct_hipower_ep_t *ep)
{
    if (ep->flags & UCT_HIPOWER_EP_FLAG_GATHER) {
        return;
    }

    if (ucs_likely(!uct_hipower_ep_tx_granted(ep))) {
        if (hipower_txwin_full(&ep->tx.win, ep->txqp.txq.acked_sn)) {
            /* Held by the window (asked first: with the window on, that is
             * what holds a bundle under load): its deadline must run. The
             * timer posts the bundle once there is a slot and room too. */
            uct_hipower_ep_hold(uct_hipower_ep_iface(ep), 0);
            return;
        }
        if ((hipower_tx_ring_free(&ep->tx.ring) == 0) ||
            !uct_hipower_ep_has_room(ep, ep->tx.msg_wrs + 1)) {
            return;
        }
    }

    /* Room came back, or a new run was granted (adopted there) */
    (void)uct_hipower_ep_bundle_post(ep, 1);
}

/* Copies a message (@a hdr_length bytes of @a hdr, then @a length bytes of
 * @a data) into the open bundle, which has room for it, and lets the
 * bundle go if it can (uct_hipower_ep_bundle_joined()) */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_bundle_copy_in(uct_hipower_ep_t *ep, uint8_t am_id,
                              const void *hdr, unsigned hdr_length,
                              const void *data, unsigned length)
{
    uint8_t *dst = hipower_bundle_append(&ep->tx.bundle.frame, am_id,
                                         hdr_length + length);

    memcpy(dst, hdr, hdr_length);
    memcpy(dst + hdr_length, data, length);
    uct_hipower_ep_bundle_joined(ep);
}

/* Delivers the messages that have arrived; returns how many */
unsigned uct_hipower_ep_rx_progress(uct_hipower_ep_t *ep);

/* Whether the next message has arrived */
int uct_hipower_ep_rx_ready(uct_hipower_ep_t *ep);

/* The peer moved to another run: the filled slot at the ring's head, if
 * open, gets nothing more; delivers the rest of it and moves the ring
 * past it. Returns the messages delivered. */
unsigned uct_hipower_ep_rx_fill_close(uct_hipower_ep_t *ep, uint32_t final);

/* The active set (hipower_active.h, hipower_ep_active.c): progress visits
 * an endpoint only while it is active */
void uct_hipower_ep_activate(uct_hipower_ep_t *ep);
void uct_hipower_ep_deactivate(uct_hipower_ep_t *ep);

/* An active endpoint was idle for IDLE_TIME: makes it idle, or starts the
 * handshake that will */
void uct_hipower_ep_demote(uct_hipower_ep_t *ep);

/* The demotion handshake of generation @a gen completed */
void uct_hipower_ep_demote_done(uct_hipower_ep_t *ep, uint64_t gen);

/* Per-endpoint work of an interface progress call */
unsigned uct_hipower_ep_progress(uct_hipower_ep_t *ep);

/* Dispatches pending requests while resources last; 1 if the queue emptied */
int uct_hipower_ep_dispatch_pending(uct_hipower_ep_t *ep);

/* Push mode: writes the bitmap word of messages not yet announced */
ucs_status_t uct_hipower_ep_announce(uct_hipower_ep_t *ep);

/* The RDMA_READs of a peer's bitmaps: consumed (recycle), published (pull) */
void uct_hipower_ep_post_recycle_read(uct_hipower_ep_t *ep);

/*
 * The recycle READ built in @a wr and @a sge to end a chain of @a nwr
 * requests (the message whose slot made it due, and the READ: one
 * doorbell). Returns its op, or NULL if it cannot go now. After the chain
 * went out, uct_hipower_ep_recycle_read_posted() marks it outstanding; if
 * it did not, the op goes back to its pool (ucs_mpool_put_inline()).
 */
uct_hipower_tx_op_t *
uct_hipower_ep_recycle_read_wr(uct_hipower_ep_t *ep, struct ibv_send_wr *wr,
                               struct ibv_sge *sge, unsigned nwr);
void uct_hipower_ep_recycle_read_posted(uct_hipower_ep_t *ep,
                                        uct_hipower_tx_op_t *op);
void uct_hipower_ep_post_notify_read(uct_hipower_ep_t *ep);


/* Drains and frees the QP records of destroyed endpoints that are done;
 * @a force: all of them, now (interface close) */
void uct_hipower_iface_gc_progress(uct_hipower_iface_t *iface, int force);

/* A completion (send CQ) or receive completion (wake-up CQ) for a QP of a
 * destroyed endpoint */
void uct_hipower_gc_tx_completion(uct_hipower_txqp_t *txqp, struct ibv_wc *wc);
void uct_hipower_gc_rx_completion(uct_hipower_txqp_t *txqp);

#endif
