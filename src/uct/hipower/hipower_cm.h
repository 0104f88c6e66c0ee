/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CM_H_
#define UCT_HIPOWER_CM_H_

#include "hipower_cm_def.h"
#include "hipower_ucx_compat.h"

#include <uct/api/uct.h>

/*
 * Connecting to an interface (UCT_IFACE_FLAG_CONNECT_TO_IFACE, issue 27):
 * the interface listens on a TCP port of its device's network interface,
 * an endpoint created from the peer's interface address connects its RC
 * QP through one handshake over it when it is first used, and UCP then
 * needs no auxiliary transport. The messages and decisions are
 * hipower_handshake.h's; this moves them (hipower_cm.c).
 *
 * Threads: UCX's async thread (or the user's thread, through
 * ucs_async_check_miss()) runs the socket handlers and the deadline
 * timer, under the worker's async lock; they only move bytes, acknowledge
 * a peer's whole request at once (HIPOWER_HS_ACK: the peer then waits as
 * long as our host is alive, not for a deadline, so a process that
 * computes for minutes is connected to when it next progresses), close
 * strangers' idle connections, and queue finished handshakes. Everything that touches endpoints, QPs or the CQ
 * runs in the interface's progress, under the same lock: endpoint
 * operations do not take that lock, so the async thread must not touch
 * what they touch. A handshake that finishes signals an eventfd that is
 * part of the interface's event fd, so a process asleep in
 * ucp_worker_wait() wakes for it.
 */

struct uct_hipower_iface;
struct uct_hipower_ep;

/* Every interface's, on or off: what cleanup and progress look at */
void uct_hipower_cm_construct(struct uct_hipower_iface *iface);

/* Opens the listener; @a netdev: "auto" (the one behind the port's GID)
 * or a network interface's name. Cleans up after itself on failure. */
ucs_status_t uct_hipower_cm_open(struct uct_hipower_iface *iface,
                                 const char *netdev, ucs_time_t timeout,
                                 unsigned max_conns);

/* Closes the listener, destroys the internal endpoints, drops the
 * handshakes: before the interface's endpoints go */
void uct_hipower_cm_cleanup(struct uct_hipower_iface *iface);

/* Handshake sockets ready now, served from progress (while any handshake
 * is under way): returns how many */
unsigned uct_hipower_cm_poll(struct uct_hipower_iface *iface);

/* Finished handshakes, doomed endpoints, due probes: from progress */
unsigned uct_hipower_cm_progress(struct uct_hipower_iface *iface);

/* Wakes a process asleep in the interface's event fd (the eventfd is in
 * its set with the listener on) for news that progress will handle */
void uct_hipower_cm_signal(struct uct_hipower_iface *iface);

/* UCS_ERR_BUSY if handshakes wait for progress; drains the eventfd */
ucs_status_t uct_hipower_cm_arm(struct uct_hipower_iface *iface);

ucs_status_t uct_hipower_cm_iface_addr_valid(struct uct_hipower_iface *iface,
                                             const uct_iface_addr_t *addr,
                                             size_t length);

/* The iface ops' ep_create: to an interface address, or for connect_to_ep */
ucs_status_t uct_hipower_ep_create(const uct_ep_params_t *params,
                                   uct_ep_h *ep_p);

/* 1 if @a ep, made from an interface address (or for a peer's request),
 * leads to the interface whose address is @a addr */
int uct_hipower_cm_ep_leads_to(const struct uct_hipower_ep *ep,
                               const uct_iface_addr_t *addr);

#if HIPOWER_UCX_IFACE_OPS_V2
/* The iface ops' ep_is_connected: to the same interface (one made from an
 * interface address), or to the same device and QP */
int uct_hipower_ep_is_connected(const uct_ep_h tl_ep,
                                const uct_ep_is_connected_params_t *params);
#endif

/* An endpoint made from an interface address is used: connect it */
void uct_hipower_cm_ep_start(struct uct_hipower_ep *ep);

/* Before an endpoint goes: its handshake and matching entry */
void uct_hipower_cm_ep_cleanup(struct uct_hipower_ep *ep);

/* The endpoint failed or its peer closed: 1 if it is internal (nobody to
 * report to; it is destroyed from progress), 0 if the user's */
int uct_hipower_cm_ep_gone(struct uct_hipower_ep *ep);

#endif
