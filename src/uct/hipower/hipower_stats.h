/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_STATS_H_
#define UCT_HIPOWER_STATS_H_

#include <stdint.h>
#include <stdio.h>

/*
 * Per-interface counters. Always counted (a handful of increments on paths
 * that already post work requests); printed at interface close when
 * UCX_HIPOWER_STATS=y as one "key=value" line that tests parse.
 */
#define UCT_HIPOWER_STATS_FIELDS(_f) \
    _f(tx_msgs)          /* Active messages sent */ \
    _f(tx_bytes)         /* Their AM data bytes */ \
    _f(rx_msgs)          /* Active messages delivered */ \
    _f(rx_bytes)         /* Their AM data bytes */ \
    _f(rdma_writes)      /* RDMA_WRITE work requests (payload and bitmap) */ \
    _f(bitmap_reads)     /* Recycle RDMA_READs of a peer's consumed bitmap */ \
    _f(slots_recycled)   /* Slots those reads gave back */ \
    _f(slots_acked)      /* Slots the peer's acknowledgements gave back */ \
    _f(notify_reads)     /* Pull mode: RDMA_READs of a peer's written bitmap */ \
    _f(put_ops)          /* RMA writes to user memory (put_*) */ \
    _f(put_bytes) \
    _f(get_ops)          /* RMA reads of user memory (get_*) */ \
    _f(get_bytes) \
    _f(atomic_ops)       /* Remote atomics */ \
    _f(tx_completions)   /* Completions polled from the send CQ */ \
    _f(rx_completions)   /* Receive completions polled, wake-up CQ included: \
                            one per woken sleep and peer, none per message */ \
    _f(pool_empty)       /* Sends refused: no free peer slot */ \
    _f(tx_bundles)       /* Bundle frames sent (UCX_HIPOWER_BUNDLE) */ \
    _f(tx_bundled)       /* Messages in them, counted in tx_msgs */ \
    _f(rx_bundles)       /* Bundle frames received */ \
    _f(rx_bundled)       /* Messages in them, counted in rx_msgs */ \
    _f(tx_fills)         /* Bundles that opened a filled slot \
                            (UCX_HIPOWER_BUNDLE_FILL), in tx_bundles */ \
    _f(tx_fill_batches)  /* Bundles written into an open filled slot, \
                            with no slot of their own, in tx_bundles */ \
    _f(rx_fill_batches)  /* ... received, in rx_bundles */ \
    _f(tx_gathered)      /* Bundles of pending requests gathered by one \
                            dispatch (also in tx_bundles when 2 or more) */ \
    _f(tx_spills)        /* Bcopy messages packed into an open bundle \
                            they did not fit, then copied out of it (the \
                            bundle could not go before the packer ran) */ \
    _f(doorbells)        /* ibv_post_send() calls: chains count once */ \
    _f(chained_reads)    /* Recycle READs posted in a message's chain */ \
    _f(tx_queue_full)    /* Sends refused: no send queue / CQ room */ \
    _f(tx_window)        /* Sends refused: bundle window full */ \
    _f(tx_hold_arms)     /* Send CQ armed for a bundle the window held */ \
    _f(tx_cq_events)     /* Send CQ events read by UCX's async thread */ \
    _f(tx_event_posts)   /* Held bundles posted on such an event (by the \
                            async thread, or by the user's next call that \
                            found the event's mark) */ \
    _f(tx_event_to_progress) /* Events the async thread left to the \
                            progress call that was running */ \
    _f(tx_reaped)        /* Send completions the sender had not handled, \
                            handled by a poster of held bundles (the \
                            async thread): frames and the transport's own \
                            reads, never a user's completion */ \
    _f(tx_event_idle)    /* Events for held bundles that found none left \
                            (progress had posted them): wasted wake-ups */ \
    _f(hold_timer_posts) /* Held bundles posted (or dropped with a failed \
                            endpoint) by the safety timer: held for a \
                            whole BUNDLE_HOLD_TIME with no completion \
                            event and no sender call to post them */ \
    _f(pending_dispatch) /* Pending requests dispatched */ \
    _f(wakeup_writes)    /* Announces sent with immediate: peer was asleep */ \
    _f(wakeup_events)    /* Their receive completions here */ \
    _f(sleeps)           /* event_arm calls that let the caller sleep */ \
    _f(bad_slots)        /* Slots rejected as corrupt */ \
    _f(grant_timeouts)   /* Peers past UCX_HIPOWER_GRANT_TIMEOUT */ \
    _f(closed_returns)   /* Runs back from peers that closed or failed */ \
    _f(peer_probes)      /* Hellos to reclaim a run no one used */ \
    _f(grant_wakeups)    /* Peers woken for a record they slept over */ \
    _f(rx_copies)        /* HOLD_SLOTS=y: messages copied for handlers */ \
    _f(cq_recalls)       /* Signaled no-ops posted to free CQ credits */ \
    _f(recall_runs)      /* Credit recalls: progress calls after a post \
                            found no CQ credits */ \
    _f(recall_visits)    /* Endpoints they looked at: those that posted \
                            unsignaled requests since, not all of them */ \
    _f(fenced_wrs)       /* Work requests posted with IBV_SEND_FENCE */ \
    _f(qps_drained)      /* QPs of destroyed endpoints drained, then freed */ \
    _f(goodbyes)         /* "Closed" written to a peer on endpoint destroy */ \
    _f(windows_bound)    /* Memory windows bound to a peer's QP: three at \
                            connect, one per run granted */ \
    _f(async_events)     /* Device events that concerned this interface */ \
    _f(ep_visits)        /* Endpoints a progress call looked at: active \
                            ones only (hipower_active.h) */ \
    _f(demotions)        /* Endpoints that went idle after IDLE_TIME */ \
    _f(promotions)       /* Idle endpoints woken by a peer's write */ \
    _f(handshakes)       /* Sleep handshakes posted (demotions tried, and \
                            sleeps): each can cost one wake-up completion */ \
    _f(grants)           /* Shared pool: runs granted to peers (grow or \
                            shrink) */ \
    _f(run_switches)     /* Peers that moved to their granted run */ \
    _f(runs_adopted)     /* Runs the peers granted us, adopted */ \
    _f(tx_none)          /* Frames without a message (a run adopted while \
                            idle), counted in tx_msgs too */ \
    _f(rx_none)          /* ... received, counted in rx_msgs too */ \
    _f(reclaims)         /* Runs of idle peers taken back (pool short) */ \
    _f(run_reqs)         /* Run requests written: run given back, or asked \
                            for (no run at the peer) */ \
    _f(run_waits)        /* Peers that asked when no run was free */ \
    _f(waiter_tries)     /* Tries to serve the first of them that found \
                            no run: after slots came back, else once per \
                            64 progress calls */ \
    _f(cm_requests)      /* Connection requests sent (CONNECT_TO_IFACE) */ \
    _f(cm_accepted)      /* Peers' requests that connected an endpoint */ \
    _f(cm_internal)      /* ... that made one of our own for the peer */ \
    _f(cm_adopted)       /* ... and that the user took over later */ \
    _f(cm_crossed)       /* Crossed requests answered CROSSED */ \
    _f(cm_refused)       /* Requests refused (malformed, stale, \
                            duplicate, no room, too many at once) */ \
    _f(cm_failed)        /* Our handshakes that failed an endpoint */ \
    _f(cm_retried)       /* Our requests sent again: the peer closed the \
                            connection before it read them */ \
    _f(cm_acked)         /* Peers' requests acknowledged at once, by the \
                            async thread (answered later by progress) */ \
    _f(cm_evicted)       /* Passive connections closed for sending no \
                            request within 1 s, or to make room */ \
    _f(cm_silent_evicted) /* Internal endpoints whose peer never wrote, \
                            closed to make room for a request at the cap */ \
    _f(cm_foreign)       /* Internal endpoints not given to the user: \
                            their request came from another host than \
                            the peer's interface address */ \
    _f(cm_polls)         /* Handshake sockets polled by progress (a \
                            system call each) */ \
    _f(cm_probes)        /* Probes of internal endpoints (a peer that \
                            vanished without a goodbye) */ \
    _f(peak_eps)         /* Most endpoints at once */ \
    _f(pool_bytes)       /* Receive slot arena: UCX_HIPOWER_MEM_BUDGET \
                            rounded to slots, pinned at open */ \
    _f(peak_pool_used)   /* Most of it carved into endpoints' slots */ \
    _f(ep_ctrl_bytes)    /* Pinned control words and bitmaps per endpoint */ \
    _f(slot_bytes)       /* One receive slot: what a frame occupies until \
                            released (slots received = rx_msgs - \
                            rx_bundled + rx_bundles - rx_fill_batches) */

#define UCT_HIPOWER_STATS_DECLARE(_name) uint64_t _name;

typedef struct uct_hipower_stats {
    UCT_HIPOWER_STATS_FIELDS(UCT_HIPOWER_STATS_DECLARE)
} uct_hipower_stats_t;

/* "hipower-stats <dev>: tx_msgs=N tx_bytes=N ... slots_per_read=X.XX" */
void uct_hipower_stats_print(const uct_hipower_stats_t *stats,
                             const char *dev_name, FILE *stream);

#endif
