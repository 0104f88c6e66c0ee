/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_H_
#define UCT_HIPOWER_EP_H_

#include "hipower_ep_def.h"
#include "hipower_post.h"
#include "hipower_ep_rx.h"
#include "hipower_ep_grant.h"
#include "hipower_ep_bundle.h"
#include "hipower_ep_hold.h"
#include "hipower_tx_frame.h"
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

/* The bundle window's marks: hipower_ep_hold.h; bundles: hipower_ep_bundle.h */

/* Wakeup: posts @a count receives for the peer's wake-up writes */
ucs_status_t uct_hipower_ep_post_event_recvs(uct_hipower_ep_t *ep,
                                             unsigned count);

/* Tells the peer sleep generation @a gen and reads its announced count
 * after it; @a handler: uct_hipower_ep_arm_done() (the interface sleeps)
 * or the demotion's (this endpoint goes idle) -- hipower_ep_active.c */
ucs_status_t uct_hipower_ep_post_sleep(uct_hipower_ep_t *ep, uint64_t gen,
                                       uct_hipower_op_handler_t handler);

/* No wake-up of the endpoint's latest sleep handshake is due any more: it
 * came (hipower_event.c), or the endpoint goes and its receives are
 * flushed (UCT_HIPOWER_EP_FLAG_WAKE_DUE, iface->active.num_wake_due) */
void uct_hipower_ep_wake_done(uct_hipower_ep_t *ep);

/* The handler of the interface's sleep handshake: the peer has seen the
 * generation (its announced count read after it) */
void uct_hipower_ep_arm_done(uct_hipower_tx_op_t *op,
                             uct_hipower_txqp_t *txqp);

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

/* Receiver, the pool's view of an endpoint that went idle (@a idle) or
 * active: the slots it holds count as idle ones' (not shared out), an idle
 * holder is listed for waiters, and its wait for a run, if any, counts as
 * an idle endpoint's (pool.num_waiting_idle); then the shares */
void uct_hipower_ep_pool_idle(uct_hipower_ep_t *ep, int idle);

/* Only its slots, among the idle ones' (@a idle) or out: a new endpoint,
 * idle, and one that goes */
void uct_hipower_ep_pool_idle_held(uct_hipower_ep_t *ep, int idle);

/* Sender without a run: asks the receiver for one (once per epoch) */
void uct_hipower_ep_tx_ask(uct_hipower_ep_t *ep);

/* Sender: writes tx.run_req into the receiver's run request word, with an
 * immediate */
ucs_status_t uct_hipower_ep_tx_run_req(uct_hipower_ep_t *ep);

/* Receiver: a new endpoint's first run, from the pool, open to the peer
 * (or none, with the shared pool, if none is left) */
ucs_status_t uct_hipower_ep_alloc_rx(uct_hipower_ep_t *ep);

/* Clears the marks of the run of @a count slots from @a first, just taken
 * from the pool, before it is registered for a peer; returns its address */
void *uct_hipower_iface_run_clear(uct_hipower_iface_t *iface, uint32_t first,
                                  uint32_t count);

/* Slots were taken from the pool: updates the peak in the statistics */
void uct_hipower_iface_pool_used(uct_hipower_iface_t *iface);

/* Recomputes an active endpoint's share after the active set changed */
void uct_hipower_iface_pool_update(uct_hipower_iface_t *iface);

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

/* A new endpoint joins the idle ones (or the active set at once, without
 * demotion); one that goes leaves both, with no wake-up due */
void uct_hipower_ep_active_init(uct_hipower_ep_t *ep);
void uct_hipower_ep_active_cleanup(uct_hipower_ep_t *ep);

/* An active endpoint was idle for IDLE_TIME: makes it idle, or starts the
 * handshake that will */
void uct_hipower_ep_demote(uct_hipower_ep_t *ep);

/* Per-endpoint work of an interface progress call */
unsigned uct_hipower_ep_progress(uct_hipower_ep_t *ep);

/* Dispatches pending requests while resources last; 1 if the queue emptied */
int uct_hipower_ep_dispatch_pending(uct_hipower_ep_t *ep);

/* Drains and frees the QP records of destroyed endpoints that are done;
 * @a force: all of them, now (interface close) */
void uct_hipower_iface_gc_progress(uct_hipower_iface_t *iface, int force);

/* A completion (send CQ) or receive completion (wake-up CQ) for a QP of a
 * destroyed endpoint */
void uct_hipower_gc_tx_completion(uct_hipower_txqp_t *txqp, struct ibv_wc *wc);
void uct_hipower_gc_rx_completion(uct_hipower_txqp_t *txqp);

#endif
