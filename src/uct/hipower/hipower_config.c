/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

/*
 * The interface's configuration: the UCX_HIPOWER_* table (its defaults and
 * texts are what hipower(7) and "ucx_info -c -f" show), the checks that
 * refuse a value out of range with a message naming the device and the
 * variable, and what the interface's constructor derives from it.
 */

#include "hipower_config.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>


ucs_config_field_t uct_hipower_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_hipower_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"SLOT_SIZE", "8k",
     "Size of one receive slot: the largest active message a peer can write\n"
     "into it is this minus its 16-byte trailer. Must be a multiple of 64,\n"
     "between 256 bytes and 1 MiB, and the same on both peers.",
     ucs_offsetof(uct_hipower_iface_config_t, slot_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"SLOTS", "64",
     "Receive slots per endpoint (1 to 4096): how many messages a peer may\n"
     "have in flight to this endpoint before it must recycle. With\n"
     "SHARED_POOL, the largest run a peer is granted.",
     ucs_offsetof(uct_hipower_iface_config_t, slots_per_ep),
     UCS_CONFIG_TYPE_UINT},

    {"MIN_SLOTS", "8",
     "Fewest receive slots an endpoint accepts when the memory budget runs\n"
     "short; when no run of this many is free, endpoint creation fails with\n"
     "UCS_ERR_NO_MEMORY. With SHARED_POOL, what an idle endpoint keeps.",
     ucs_offsetof(uct_hipower_iface_config_t, min_slots_per_ep),
     UCS_CONFIG_TYPE_UINT},

    {"SHARED_POOL", "y",
     "Self mode only (ignored otherwise): the memory budget is a pool\n"
     "shared by all peers. An endpoint gets a run of slots at creation;\n"
     "when its peer finds it full it is granted a larger one, up to SLOTS\n"
     "and its fair share of what the active endpoints may use; a run larger\n"
     "than that share shrinks, and while the pool is short an idle\n"
     "endpoint's shrinks to MIN_SLOTS (docs/protocol.md 9.2). n: each\n"
     "endpoint keeps the run it got at creation.",
     ucs_offsetof(uct_hipower_iface_config_t, shared_pool),
     UCS_CONFIG_TYPE_BOOL},

    {"MAX_EPS", "256",
     "Endpoints the interface guarantees to serve, reported to UCX as its\n"
     "max_num_eps: room for this many runs of MIN_SLOTS is kept in the\n"
     "memory budget, and each endpoint takes up to SLOTS slots from the\n"
     "rest. Endpoints beyond it are created while a run of MIN_SLOTS is\n"
     "free. At most MEM_BUDGET / (SLOT_SIZE x MIN_SLOTS). With SHARED_POOL,\n"
     "max_num_eps is SHARED_MAX_EPS.",
     ucs_offsetof(uct_hipower_iface_config_t, max_eps),
     UCS_CONFIG_TYPE_UINT},

    {"SHARED_MAX_EPS", "4096",
     "With SHARED_POOL: endpoints the interface serves, reported to UCX as\n"
     "its max_num_eps. An endpoint may hold no slot of the pool (it gets a\n"
     "run when its peer asks), so MEM_BUDGET does not bound them; the\n"
     "completion queues are sized for this many (about 100 bytes of them\n"
     "each). At most what the device's completion queues hold.",
     ucs_offsetof(uct_hipower_iface_config_t, shared_max_eps),
     UCS_CONFIG_TYPE_UINT},

    {"IDLE_TIME", "10ms",
     "An endpoint that received nothing for this long leaves the set of\n"
     "endpoints progress looks at: its peer is asked (one write and one read,\n"
     "once) to send its next message with an immediate, whose completion\n"
     "brings the endpoint back. Progress then costs the same with thousands\n"
     "of idle endpoints as with none, and an idle peer costs no traffic. The\n"
     "first message after an idle spell costs one receive completion more.\n"
     "'inf': endpoints stay in the set once their peer wrote. Modes self and\n"
     "push with ANNOUNCE_BATCH=1; in the others every endpoint is visited.",
     ucs_offsetof(uct_hipower_iface_config_t, idle_time),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"GRANT_TIMEOUT", "30s",
     "With SHARED_POOL: how long a peer may leave a run it was granted, or one\n"
     "it was asked to release, unanswered before its device is probed. A busy\n"
     "peer is a live peer: one that computes and makes no UCX call keeps both\n"
     "runs for as long as its device answers the probe (a signaled zero-length\n"
     "write, again every GRANT_TIMEOUT), and peers that wait for a run are\n"
     "served from other runs meanwhile. Only when the probe fails, after\n"
     "(RETRY_COUNT + 1) x TIMEOUT, does the endpoint fail, through the error\n"
     "handler, and its runs go back to the pool. Past this long the peer's\n"
     "runs also stop holding back the release of other idle runs to waiters.\n"
     "It is also how long a peer may say it sent messages that never came\n"
     "before its endpoint fails as broken. 'inf': no deadline, no probe.",
     ucs_offsetof(uct_hipower_iface_config_t, grant_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"CONNECT_TO_IFACE", "try",
     "Let endpoints connect to a peer's interface address (UCX's\n"
     "CONNECT_TO_IFACE): the interface listens on a TCP port of the network\n"
     "interface CM_NETDEV names, an endpoint connects its queue pair through\n"
     "one handshake there when it is first used, and UCP needs no auxiliary\n"
     "transport, so UCX_TLS=hipower alone works (docs/protocol.md,\n"
     "\"Connection establishment\"). Both sides must set the same.\n"
     "'y': required, the interface does not open without its listener;\n"
     "'try': on if the listener opens; 'n': endpoints connect only through\n"
     "UCP's wire-up (uct_ep_connect_to_ep()), with an auxiliary transport.",
     ucs_offsetof(uct_hipower_iface_config_t, connect_to_iface),
     UCS_CONFIG_TYPE_TERNARY},

    {"CM_NETDEV", "auto",
     "Network interface whose IP address the handshake listens on, with\n"
     "CONNECT_TO_IFACE. 'auto': the one behind the port's GID_INDEX (RoCE);\n"
     "InfiniBand needs one named (an IPoIB or Ethernet interface every peer\n"
     "reaches). IPv4 first, else a global IPv6 address.",
     ucs_offsetof(uct_hipower_iface_config_t, cm_netdev),
     UCS_CONFIG_TYPE_STRING},

    {"CONNECT_TIMEOUT", "30s",
     "With CONNECT_TO_IFACE: how long an endpoint's handshake may take until\n"
     "the peer's interface acknowledges the request (its async thread does,\n"
     "whatever its process is doing). Past it, the endpoint fails with\n"
     "UCS_ERR_ENDPOINT_TIMEOUT. Once acknowledged, the endpoint waits for the\n"
     "peer's process to answer with no deadline: a busy peer is a live peer.\n"
     "Its host is watched by TCP keepalive (idle half of this, then 3 probes\n"
     "a sixth of it apart), so a host that vanishes fails it within about\n"
     "this long, a process that dies at once (UCS_ERR_CONNECTION_RESET). A\n"
     "peer that refuses or is not there fails it at once. The listener\n"
     "closes a connection that sends no whole request within 1 s (or this,\n"
     "if shorter).",
     ucs_offsetof(uct_hipower_iface_config_t, connect_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"CM_MAX_CONNS", "64",
     "With CONNECT_TO_IFACE: handshakes of each direction in their round trip\n"
     "(until the peer acknowledges the request) at once per interface;\n"
     "endpoints used beyond it queue, and connections beyond it wait in the\n"
     "kernel's listen backlog (the oldest of those that sent nothing for\n"
     "250 ms is closed to make room). Acknowledged requests waiting for a\n"
     "busy process do not count.",
     ucs_offsetof(uct_hipower_iface_config_t, cm_max_conns),
     UCS_CONFIG_TYPE_UINT},

    {"MEM_BUDGET", "32m",
     "Pre-registered memory per interface from which all endpoints' receive\n"
     "slots are carved (the paper's QoS bound on pinned memory).",
     ucs_offsetof(uct_hipower_iface_config_t, mem_budget),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"RECYCLE_THRESHOLD", "0.5",
     "A sender reads the receiver's consumed bitmap (one RDMA_READ, recycling\n"
     "every freed slot at once) when its free slots fall below this fraction\n"
     "of the total. The paper uses 0.4 to 0.5. Range: (0, 1].",
     ucs_offsetof(uct_hipower_iface_config_t, recycle_threshold),
     UCS_CONFIG_TYPE_DOUBLE},

    {"TX_QUEUE_LEN", "256",
     "Send queue entries per endpoint (16 to 16384).",
     ucs_offsetof(uct_hipower_iface_config_t, tx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"TX_CQ_LEN", "4096",
     "Work requests in flight per interface, 64 to 65536: each holds a\n"
     "completion queue entry until a completion covers it, because a failed\n"
     "queue pair completes every request it has, signaled or not.",
     ucs_offsetof(uct_hipower_iface_config_t, tx_cq_len),
     UCS_CONFIG_TYPE_UINT},

    {"SIGNAL_INTERVAL", "32",
     "Request a completion for one work request in this many (1 to half of\n"
     "TX_QUEUE_LEN); a completion retires all the requests before it.",
     ucs_offsetof(uct_hipower_iface_config_t, signal_interval),
     UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_INLINE", "128",
     "Largest write (16-byte slot trailer included) copied into the work\n"
     "request instead of read by the device; bounds am_short. At least 32.",
     ucs_offsetof(uct_hipower_iface_config_t, max_inline),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"NOTIFY", "self",
     "How a receiver learns that a slot holds a new message:\n"
     "  self - the message's trailer, written with its data by the same\n"
     "         RDMA_WRITE, marks it as arrived: one packet per message. Needs\n"
     "         a device that places a WRITE's bytes in order, which no\n"
     "         specification promises: rxe in the rig and ConnectX without\n"
     "         out-of-order placement do in practice, ConnectX with adaptive\n"
     "         routing (MLX5_RELAXED_PACKET_ORDERING_ON) does not\n"
     "  push - the sender RDMA_WRITEs its bitmap word after the payload;\n"
     "         the receiver takes a message when its bit and its trailer\n"
     "         say so (a bit placed first costs a wait, not the message)\n"
     "  pull - the receiver RDMA_READs the sender's bitmap (the paper's\n"
     "         scheme); the sender publishes writes once they completed:\n"
     "         the only mode safe by the specification alone\n"
     "Both peers must use the same mode.",
     ucs_offsetof(uct_hipower_iface_config_t, notify),
     UCS_CONFIG_TYPE_ENUM(uct_hipower_notify_names)},

    {"ANNOUNCE_BATCH", "1",
     "Push mode: write the bitmap word once per this many messages (1 to\n"
     "64). With 1 every message is announced by the send call itself, so\n"
     "the receiver sees it whatever the sender does next. Above 1 the last\n"
     "messages of an unfinished batch wait for the sender's next progress,\n"
     "flush or send: only for senders that keep calling progress.",
     ucs_offsetof(uct_hipower_iface_config_t, announce_batch),
     UCS_CONFIG_TYPE_UINT},

    {"BUNDLE", "y",
     "Bundle active messages that would wait. When an endpoint cannot post\n"
     "a short or bcopy active message now (no free slot of the peer, no room\n"
     "in the send queue or completion queue, or earlier messages of it\n"
     "waiting in a bundle), the message is packed, in order, into one frame\n"
     "for that peer instead of being refused; the frame goes out as one\n"
     "RDMA_WRITE into one slot as soon as there is room: at the next\n"
     "progress, flush or event arm (which returns UCS_ERR_BUSY while one is\n"
     "open). A message that can be posted is not held back (unless\n"
     "BUNDLE_WINDOW says so), so a lone message goes alone. Both peers must\n"
     "enable it, and the receiver must\n"
     "not ask for aligned active-message data; 'n': one frame per message.",
     ucs_offsetof(uct_hipower_iface_config_t, bundle),
     UCS_CONFIG_TYPE_BOOL},

    {"BUNDLE_FILL", "n",
     "With BUNDLE=y: a sender's bundles go into the same receive slot one\n"
     "after the other until it is full, instead of one slot each: each\n"
     "later bundle is a write of its own and a 16-byte write of the slot's\n"
     "trailer (two packets), and needs no free slot. A slot then holds as\n"
     "many small messages as fit in it (an 8-byte active message takes 16\n"
     "bytes of it) rather than those that waited at one moment. The\n"
     "receiver keeps a filled slot until the sender's next slot arrives.\n"
     "With BUNDLE_WINDOW, a message that finds the window open while the\n"
     "slot is open goes into it too (posted at once, two packets). Both\n"
     "peers must enable it; self mode only. Without BUNDLE_WINDOW bundles\n"
     "are rare and so are filled slots; with it, receive memory per 8-byte\n"
     "message falls from about 500 to about 20 bytes, and the message rate\n"
     "to about 0.8 of the window's alone (more packets).\n"
     "'n': one slot per bundle.",
     ucs_offsetof(uct_hipower_iface_config_t, bundle_fill),
     UCS_CONFIG_TYPE_BOOL},

    {"BUNDLE_WINDOW", "0",
     "With BUNDLE=y: how many of an endpoint's active-message frames may be\n"
     "in flight (posted, no completion seen yet), 1 to 8, before its next\n"
     "short and bcopy messages wait in its bundle instead of going as frames\n"
     "of their own. A message that finds fewer frames in flight, as a lone\n"
     "message or a ping-pong does, goes at once, alone. A held bundle goes,\n"
     "one frame, when the completion of the frame ahead of it is seen: by\n"
     "the sender's progress, send, flush or event arm, or else by UCX's\n"
     "async thread, which the first held message asks for that completion's\n"
     "event; so it never waits for the sender's next call (docs/protocol.md\n"
     "2.1). Under load a stream of small messages becomes about one write\n"
     "per round trip: far fewer packets, doorbells and completions per\n"
     "message. 'auto': 1 where the worker's async context has a thread (its\n"
     "default), 0 in its polling and signal modes; not the default yet: on\n"
     "Soft-RoCE the async thread's wake-ups cost more than the window gives\n"
     "(docs/protocol.md 2.1). 0: no window; a message is bundled only when\n"
     "it cannot be posted (no free peer slot, no send or completion queue\n"
     "room).",
     ucs_offsetof(uct_hipower_iface_config_t, bundle_window),
     UCS_CONFIG_TYPE_ULUNITS},

    {"BUNDLE_EVENT", "y",
     "With BUNDLE_WINDOW: UCX's async thread posts a held bundle on the\n"
     "completion event of the frame ahead of it. 'n' leaves it to the\n"
     "sender's next call and the BUNDLE_HOLD_TIME timer: for diagnosis only.",
     ucs_offsetof(uct_hipower_iface_config_t, bundle_event),
     UCS_CONFIG_TYPE_BOOL},

    {"BUNDLE_HOLD_TIME", "10ms",
     "With BUNDLE_WINDOW: the safety net's period (0.01ms to 1s). A bundle\n"
     "held by the window normally goes on the completion of the frame ahead\n"
     "of it; one still held a whole period later (a completion event lost,\n"
     "or no async thread) is posted by a timer of the worker's async\n"
     "context, and counted (hold_timer_posts). The timer runs only while\n"
     "bundles are held: an idle process has no timer waking it. With an\n"
     "async context in poll mode it fires only when that is polled.",
     ucs_offsetof(uct_hipower_iface_config_t, bundle_hold_time),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"HOLD_SLOTS", "n",
     "Let active-message handlers keep messages (UCT_CB_PARAM_FLAG_DESC).\n"
     "With 'y' each message is copied out of its receive slot into a\n"
     "private descriptor, aligned as the interface parameters ask, that the\n"
     "handler may keep until uct_iface_release_desc(). With 'n' handlers\n"
     "read the message in its slot and may not keep it (UCP then copies\n"
     "the messages it keeps, once). Either way the slot is free again when\n"
     "the handler returns: nothing the receiver keeps lies in memory a peer\n"
     "can write.",
     ucs_offsetof(uct_hipower_iface_config_t, hold_slots),
     UCS_CONFIG_TYPE_BOOL},

    {"MEM_WINDOWS", "try",
     "How a peer is kept to its own slots and control words. 'y': each\n"
     "region a peer may write or read is reached through a type-2 memory\n"
     "window bound to that peer's QP, so the device refuses its rkey on any\n"
     "other connection (another peer that learns or guesses it gets an\n"
     "error on its own endpoint); the interface fails to open on a device\n"
     "without type-2 windows. 'try': windows where the device has them,\n"
     "the MR's rkey otherwise. 'n': the MR's rkey, which any QP of the\n"
     "protection domain that has it can use (UCX rc's model for user\n"
     "memory).",
     ucs_offsetof(uct_hipower_iface_config_t, mem_windows),
     UCS_CONFIG_TYPE_TERNARY},

    {"STATS", "n",
     "Print the interface's counters to stderr when it is closed.",
     ucs_offsetof(uct_hipower_iface_config_t, print_stats),
     UCS_CONFIG_TYPE_BOOL},

    {"GID_INDEX", "0",
     "Local GID table index used to address peers (RoCE: pick the RoCEv2\n"
     "entry that 'show_gids' lists for the interface's IP address).",
     ucs_offsetof(uct_hipower_iface_config_t, gid_index),
     UCS_CONFIG_TYPE_UINT},

    {"SL", "0", "InfiniBand service level, 0 to 15.",
     ucs_offsetof(uct_hipower_iface_config_t, sl), UCS_CONFIG_TYPE_UINT},

    {"TRAFFIC_CLASS", "0", "Traffic class in the GRH (RoCE: DSCP << 2).",
     ucs_offsetof(uct_hipower_iface_config_t, traffic_class),
     UCS_CONFIG_TYPE_UINT},

    {"HOP_LIMIT", "64", "Hop limit in the GRH.",
     ucs_offsetof(uct_hipower_iface_config_t, hop_limit), UCS_CONFIG_TYPE_UINT},

    {"TIMEOUT", "1.0s",
     "Transport retransmission timeout: how long a write waits for its\n"
     "acknowledgement before retrying.",
     ucs_offsetof(uct_hipower_iface_config_t, ack_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "6",
     "Transport retries before a peer is declared dead, 0 to 7. A dead peer\n"
     "is reported after (RETRY_COUNT + 1) x TIMEOUT. Not 7 by default: Soft-RoCE\n"
     "(rdma_rxe) takes 7 as 'retry forever' and would never report it.",
     ucs_offsetof(uct_hipower_iface_config_t, retry_count),
     UCS_CONFIG_TYPE_UINT},

    {"RNR_RETRY_COUNT", "6",
     "Receiver-not-ready retries, 0 to 7 (7: infinite). Only writes with an\n"
     "immediate (wake-ups, run requests) take a receive of the peer's, at\n"
     "most a few per endpoint while the peer does not progress; a peer that\n"
     "makes us send more (it can write the word that asks for wake-ups) and\n"
     "never reposts would otherwise stall our queue pair for ever, with its\n"
     "requests holding completion queue entries the whole interface shares.\n"
     "With 6 the endpoint fails with UCS_ERR_ENDPOINT_TIMEOUT after about\n"
     "1.1 s of it.",
     ucs_offsetof(uct_hipower_iface_config_t, rnr_retry_count),
     UCS_CONFIG_TYPE_UINT},

    {"OVERHEAD", "50ns",
     "Software overhead per message reported to UCP. Lower than rc_verbs'\n"
     "75ns: no receive work request to repost, no receive completion, no\n"
     "credit messages; the sender posts two writes per message.",
     ucs_offsetof(uct_hipower_iface_config_t, overhead), UCS_CONFIG_TYPE_TIME},

    HIPOWER_UCX_IFACE_MPOOL_CONFIG_FIELDS("TX_", -1, 128, "send",
                                  ucs_offsetof(uct_hipower_iface_config_t, tx_mp),
                                  "\n"),

    {NULL}
};

/* Rejects a configuration value with a message that names the variable */
static int uct_hipower_config_in_range(const uct_hipower_iface_t *iface,
                                       const char *var, unsigned long value,
                                       unsigned long min, unsigned long max)
{
    if ((value >= min) && (value <= max)) {
        return 1;
    }

    ucs_error("hipower %s: UCX_" UCT_HIPOWER_CONFIG_PREFIX "%s=%lu is out of "
              "range [%lu, %lu]", iface->dev_name, var, value, min, max);
    return 0;
}

ucs_status_t uct_hipower_config_check(uct_hipower_iface_t *self,
                                      const uct_hipower_iface_config_t *config)
{
    if (!uct_hipower_config_in_range(self, "SLOT_SIZE", config->slot_size, 256,
                                     UCS_MBYTE) ||
        !uct_hipower_config_in_range(self, "SLOTS", config->slots_per_ep, 1,
                                     UCT_HIPOWER_MAX_SLOTS) ||
        !uct_hipower_config_in_range(self, "MIN_SLOTS",
                                     config->min_slots_per_ep, 1,
                                     config->slots_per_ep) ||
        !uct_hipower_config_in_range(self, "MEM_BUDGET", config->mem_budget,
                                     (unsigned long)config->min_slots_per_ep *
                                     config->slot_size,
                                     (unsigned long)UCT_HIPOWER_MAX_SLOTS *
                                     1024 * config->slot_size) ||
        !uct_hipower_config_in_range(self, "TX_QUEUE_LEN",
                                     config->tx_queue_len, 16, 16384) ||
        !uct_hipower_config_in_range(self, "TX_CQ_LEN", config->tx_cq_len, 64,
                                     65536) ||
        !uct_hipower_config_in_range(self, "SIGNAL_INTERVAL",
                                     config->signal_interval, 1,
                                     config->tx_queue_len / 2) ||
        ((config->bundle_window != UCS_ULUNITS_AUTO) &&
         !uct_hipower_config_in_range(self, "BUNDLE_WINDOW",
                                      config->bundle_window, 0,
                                      HIPOWER_TXWIN_MAX)) ||
        !uct_hipower_config_in_range(self, "BUNDLE_HOLD_TIME (in ns)",
                                     (unsigned long)(ucs_time_to_nsec(
                                         config->bundle_hold_time) + 0.5),
                                     10000, 1000000000ul) ||
        !uct_hipower_config_in_range(self, "TX_MAX_INLINE", config->max_inline,
                                     32, UCT_HIPOWER_MAX_INLINE) ||
        !uct_hipower_config_in_range(self, "ANNOUNCE_BATCH",
                                     config->announce_batch, 1, 64) ||
        !uct_hipower_config_in_range(self, "MAX_EPS", config->max_eps, 1,
                                     UINT16_MAX) ||
        !uct_hipower_config_in_range(self, "SHARED_MAX_EPS",
                                     config->shared_max_eps, 1, 1u << 20) ||
        !uct_hipower_config_in_range(self, "SL", config->sl, 0, 15) ||
        !uct_hipower_config_in_range(self, "TRAFFIC_CLASS",
                                     config->traffic_class, 0, 255) ||
        !uct_hipower_config_in_range(self, "HOP_LIMIT", config->hop_limit, 1,
                                     255) ||
        !uct_hipower_config_in_range(self, "RETRY_COUNT", config->retry_count,
                                     0, 7) ||
        !uct_hipower_config_in_range(self, "RNR_RETRY_COUNT",
                                     config->rnr_retry_count, 0, 7)) {
        return UCS_ERR_INVALID_PARAM;
    }

    if (config->slot_size % 64) {
        ucs_error("hipower %s: UCX_HIPOWER_SLOT_SIZE=%zu is not a multiple "
                  "of 64", self->dev_name, config->slot_size);
        return UCS_ERR_INVALID_PARAM;
    }

    if (!(config->recycle_threshold > 0) || (config->recycle_threshold > 1)) {
        ucs_error("hipower %s: UCX_HIPOWER_RECYCLE_THRESHOLD=%g is out of "
                  "range (0, 1]", self->dev_name, config->recycle_threshold);
        return UCS_ERR_INVALID_PARAM;
    }

    return UCS_OK;
}

/* IB encoding of the local ACK timeout: 4.096us * 2^value */
uint8_t uct_hipower_config_ack_timeout(double seconds)
{
    double value = log2(seconds / 4.096e-6);

    return (uint8_t)ucs_max(1, ucs_min(31, (int)ceil(value)));
}

/*
 * Where messages go in our receive slots: data aligned as UCT's
 * am_alignment/am_align_offset ask (checked as uct.h says; Debian's UCX
 * checks no parameter itself), every slot with room for SLOT_SIZE bytes
 * from the header on, so that any two interfaces agree on the largest
 * message whatever their parameters.
 */
ucs_status_t uct_hipower_config_layout(uct_hipower_iface_t *self,
                                       const uct_iface_params_t *params,
                                       size_t slot_size, size_t *align_p)
{
    int has_align  = !!(params->field_mask &
                        UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT);
    int has_offset = !!(params->field_mask &
                        UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET);
    size_t align   = has_align ? params->am_alignment : 1;
    size_t offset  = has_offset ? params->am_align_offset : 0;
    const char *reason;

    reason = hipower_slot_check_alignment(has_align, align, has_offset, offset);
    if (reason != NULL) {
        ucs_error("hipower %s: invalid interface parameters: %s "
                  "(am_alignment %zu, am_align_offset %zu)", self->dev_name,
                  reason, align, offset);
        return UCS_ERR_INVALID_PARAM;
    }

    if (!has_align) {
        offset = 0;
    }
    hipower_slot_layout(slot_size, align, offset, &self->config.layout);
    *align_p = align;
    return UCS_OK;
}

/* How many endpoints the arena could ever hold: a run of MIN_SLOTS each */
uint32_t uct_hipower_config_eps_possible(size_t budget, size_t stride,
                                         unsigned min_slots)
{
    return (budget / stride) / min_slots;
}

/*
 * Self mode (and push, for a frame's own bytes) needs the device to place
 * a WRITE's bytes in order, which no specification promises
 * (docs/protocol.md, "Which devices place in order"). NVIDIA's driver
 * places the packets of one WRITE in arrival order when this variable
 * enables out-of-order placement for user QPs: say so where it is set.
 */
void uct_hipower_config_check_placement(uct_hipower_iface_t *iface,
                                        const uct_hipower_iface_config_t *config)
{
    const char *ooo = getenv("MLX5_RELAXED_PACKET_ORDERING_ON");

    if ((config->notify != UCT_HIPOWER_NOTIFY_PULL) && (ooo != NULL) &&
        (ooo[0] != '\0') && strcmp(ooo, "0")) {
        ucs_warn("hipower: MLX5_RELAXED_PACKET_ORDERING_ON=%s lets the device "
                 "place a write's packets out of order; UCX_HIPOWER_NOTIFY=%s "
                 "relies on in-order placement and may deliver a message "
                 "before its data landed: use UCX_HIPOWER_NOTIFY=pull", ooo,
                 uct_hipower_notify_names[config->notify]);
    }
}
