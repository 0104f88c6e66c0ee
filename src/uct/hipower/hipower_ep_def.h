/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_EP_DEF_H_
#define UCT_HIPOWER_EP_DEF_H_

#include "hipower_iface_def.h"
#include "hipower_fill.h"
#include "hipower_window.h"
#include "hipower_txq.h"

/*
 * The endpoint's data: its flags, its struct, how messages name it, and
 * the two inline helpers that only read it. Types only, so that every
 * unit that works on an endpoint can name it without naming
 * hipower_ep.c, which sits above them.
 */


enum {
    /* Usable: our QP is up and our hello to the peer is posted */
    UCT_HIPOWER_EP_FLAG_CONNECTED      = UCS_BIT(0),
    UCT_HIPOWER_EP_FLAG_RECYCLE_READ   = UCS_BIT(1), /* Recycle READ posted */
    UCT_HIPOWER_EP_FLAG_NOTIFY_READ    = UCS_BIT(2), /* Pull READ posted */
    /* Its receive walk runs: a handler may fail the endpoint (a flush with
     * UCT_FLUSH_FLAG_CANCEL) or call progress again, so its runs go back to
     * the pool only once the walk is over, and a nested progress does not
     * walk it again (uct_hipower_ep_rx_progress()) */
    UCT_HIPOWER_EP_FLAG_IN_RX          = UCS_BIT(3),
    UCT_HIPOWER_EP_FLAG_PENDING_LISTED = UCS_BIT(4), /* In iface pending_eps */
    UCT_HIPOWER_EP_FLAG_FAILED         = UCS_BIT(5),
    UCT_HIPOWER_EP_FLAG_DISPATCHING    = UCS_BIT(6), /* Pending dispatch runs */
    /* The peer's windows are known to be bound (it wrote to us, or a
     * request of ours after our hello completed): only then does the
     * transport send anything of its own accord (pull reads, sleep
     * handshakes, grants, goodbye) */
    UCT_HIPOWER_EP_FLAG_PEER_READY     = UCS_BIT(7),
    /* The peer destroyed its endpoint in order (it wrote "closed"): no
     * more transport-initiated traffic to it, and no error for it */
    UCT_HIPOWER_EP_FLAG_PEER_CLOSED    = UCS_BIT(8),
    UCT_HIPOWER_EP_FLAG_CANCELED       = UCS_BIT(9), /* flush(CANCEL) ran */
    UCT_HIPOWER_EP_FLAG_HELLO_SENT     = UCS_BIT(10),/* Pull: "ready" written */
    UCT_HIPOWER_EP_FLAG_FIRST_IMM      = UCS_BIT(11),/* Peer's first-contact
                                                        wake-up still due */
    /* A message of the peer came before its first-contact wake-up was
     * polled: that receive completion is counted in event.rx_expected */
    UCT_HIPOWER_EP_FLAG_IMM_DUE        = UCS_BIT(12),
    /* Every message to the peer is one write that announces itself: self
     * mode, and the peer asked for no alignment (am_short's fast path) */
    UCT_HIPOWER_EP_FLAG_ONE_WRITE      = UCS_BIT(13),
    /* In iface->active_eps: progress visits it (hipower_active.h) */
    UCT_HIPOWER_EP_FLAG_ACTIVE         = UCS_BIT(14),
    UCT_HIPOWER_EP_FLAG_DEMOTING       = UCS_BIT(15), /* Handshake out */
    /* A message or a wake-up came while the demotion handshake was out */
    UCT_HIPOWER_EP_FLAG_NEWS           = UCS_BIT(16),
    /* A sleep handshake (demotion or arm) told the peer a generation whose
     * wake-up has not been polled yet: the peer's next write carries it as
     * an immediate, which takes a receive of our QP. Progress polls the
     * wake-up CQ while any endpoint has this, active or not: a handshake
     * whose verdict kept the endpoint active still gets its wake-up, and
     * unpolled wake-ups would use up the receives and stall the peer's QP
     * (receiver not ready) */
    UCT_HIPOWER_EP_FLAG_WAKE_DUE       = UCS_BIT(17),
    /* Receiver: a release (a grant of no slots) is out; the peer's run
     * request will say where its messages in the run end */
    UCT_HIPOWER_EP_FLAG_RELEASING      = UCS_BIT(18),
    /* Receiver: in iface->pool.waiters, for a run when one comes back */
    UCT_HIPOWER_EP_FLAG_WAITING        = UCS_BIT(19),
    /* Sender: tx.run_req is still to be written (no room at the time) */
    UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE    = UCS_BIT(20),
    /* Receiver: idle and holding a run: in iface->pool.idle_holders */
    UCT_HIPOWER_EP_FLAG_IDLE_HOLDER    = UCS_BIT(21),
    /* Receiver: the peer wrote a frame no honest peer writes (its key
     * matched, its length or AM id did not fit): the endpoint fails at the
     * end of this progress call, and nothing more of the peer is read */
    UCT_HIPOWER_EP_FLAG_BAD_FRAME      = UCS_BIT(22),
    /* Receiver: a grant or a release is out, in iface->pool.granting */
    UCT_HIPOWER_EP_FLAG_GRANT_OUT      = UCS_BIT(23),
    /* connect_to_ep() done: our QP is connected to the peer's, our windows
     * are bound to it and our receives posted. FLAG_CONNECTED follows with
     * the hello before our first write into the peer's windows. */
    UCT_HIPOWER_EP_FLAG_QP_UP          = UCS_BIT(24),
    /* In iface->tx.trailing_eps: posted requests that went unsignaled
     * since (the entry may be stale: the recall drops it) */
    UCT_HIPOWER_EP_FLAG_TRAILING       = UCS_BIT(25),
    /* Sender: small active messages that found no slot or no room may go
     * into a bundle: both sides enable UCX_HIPOWER_BUNDLE and the peer
     * asked for no alignment (hipower_ep_bundle.c) */
    UCT_HIPOWER_EP_FLAG_BUNDLES        = UCS_BIT(26),
    /* Sender: a bundle is open (tx.bundle): every later message of the
     * endpoint goes into it or after it; in iface->pending_eps until it
     * is posted */
    UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN    = UCS_BIT(27),
    /* Sender: pending dispatch of two or more requests runs, whose short
     * and bcopy messages all go into the bundle, posted once at the end
     * of the dispatch: one work request and one doorbell for the requests
     * that waited (uct_hipower_ep_dispatch_pending()) */
    UCT_HIPOWER_EP_FLAG_GATHER         = UCS_BIT(28),
    /* Sender: a message did not fit what is left of the open bundle,
     * which gathers no more: later short and bcopy messages wait for it
     * to go (and a bcopy packer does not run for a send that is refused
     * anyway) */
    UCT_HIPOWER_EP_FLAG_BUNDLE_FULL    = UCS_BIT(29),
    /* Sender: bundles of two or more messages fill a slot of the peer one
     * after the other (tx.fill): both sides enable UCX_HIPOWER_BUNDLE_FILL
     * (hipower_fill.h, hipower_ep_bundle.c) */
    UCT_HIPOWER_EP_FLAG_FILL           = UCS_BIT(30)
};




struct uct_hipower_ep;

/* What the units below hipower_ep.c call back up, without naming it: one
 * table for every endpoint, set by its constructor (as UCX's ops tables) */
typedef struct uct_hipower_ep_hooks {
    /* The failure fan-out (uct_hipower_ep_set_failed()) */
    ucs_status_t (*failed)(struct uct_hipower_ep *ep, ucs_status_t status);
    /* A probe of the peer, as uct_ep_check() (uct_hipower_ep_check()) */
    ucs_status_t (*check)(struct uct_hipower_ep *ep);
    /* A completion of its QP (uct_hipower_ep_tx_completion()), for the
     * hold timer's reap */
    void         (*completed)(struct uct_hipower_ep *ep, struct ibv_wc *wc);
    /* The peer moved to another run: the filled slot at the ring's head
     * is done with @a final batches (uct_hipower_ep_rx_fill_close()), for
     * the pool's run switch */
    unsigned     (*fill_close)(struct uct_hipower_ep *ep, uint32_t final);
} uct_hipower_ep_hooks_t;

/* What the connection manager does for the endpoints it makes (all of
 * them: UCT's ep_create is hipower_cm.c's, which sets this table on each),
 * reached without naming it */
typedef struct uct_hipower_ep_owner_ops {
    /* One made from an interface address is used: its handshake starts */
    void         (*start)(struct uct_hipower_ep *ep);
    /* It failed or its peer closed: 1 if it is internal (nobody to
     * report to; progress destroys it), 0 if the user's */
    int          (*gone)(struct uct_hipower_ep *ep);
    /* Before it goes: its handshake and matching entry */
    void         (*cleanup)(struct uct_hipower_ep *ep);
    /* News for progress (a failure to report): wakes a process asleep in
     * the interface's event fd */
    void         (*wake)(struct uct_hipower_ep *ep);
} uct_hipower_ep_owner_ops_t;


typedef struct uct_hipower_ep {
    uct_base_ep_t                super;
    uct_hipower_txqp_t           txqp;
    uct_hipower_ep_ctrl_t        *ctrl;
    uct_hipower_window_t         ctrl_read;    /* Bitmaps the peer reads */
    uct_hipower_window_t         ctrl_write;   /* Words the peer writes */
    struct ibv_mr                *ctrl_local_mr;
    uint32_t                     flags;
    /* Failed in UCX's async thread: the status its error handler gets at
     * the user's next progress (uct_hipower_iface_report_failures()) */
    ucs_status_t                 err_due;
    ucs_list_link_t              list;         /* In iface->ep_list */
    ucs_list_link_t              active_list;  /* In iface->active_eps */
    ucs_list_link_t              pending_list; /* In iface->pending_eps */
    ucs_list_link_t              trailing_list; /* In tx.trailing_eps */
    ucs_queue_head_t             pending_q;

    struct {
        hipower_rx_ring_t        ring;
        struct {                               /* hipower_ep_rx.c's */
            /* The slot at the ring's head is a filled slot still open
             * (hipower_fill.h): the bytes of its batches walked, 0 if
             * none, and how many batches they are */
            uint32_t             done;
            uint32_t             walked;
            /* Batches walked in filled slots beyond one per slot moved
             * past: with ring.taken, what the sender's announced count
             * counts */
            uint32_t             extra;
        } fill;
        void                     *slots;
        uct_hipower_window_t     win;          /* The peer writes our slots */
        uint32_t                 first_slot;   /* In the arena */
        /* Of the current run: 64 bits like the sender's and the grant
         * record's (a 32-bit one would wrap after 2^32 grants to 0, which
         * the sender rejects); run requests carry its low 32 bits */
        uint64_t                 epoch;
        int                      wants;        /* The peer's run was full */
        ucs_list_link_t          wait_list;    /* In iface->pool.waiters */
        ucs_list_link_t          holder_list;  /* In pool.idle_holders */
        ucs_list_link_t          grant_list;   /* In pool.granting */
        ucs_time_t               grant_deadline; /* Of the grant out */
        /* Deadlines the grant out passed unanswered: its peer's device
         * was probed each time (uct_hipower_iface_grant_deadline()) */
        uint32_t                 grant_probes;
        struct {                               /* Granted, not yet adopted */
            void                 *slots;
            uct_hipower_window_t win;
            uint32_t             first_slot;
            uint32_t             count;        /* 0: no grant out */
            uint32_t             start;        /* Sequence of its first
                                                  message (0 in the product,
                                                  uct_hipower_seq_origin()) */
        } granted;
    } rx;

    struct {
        hipower_tx_ring_t        ring;
        uint32_t                 threshold;    /* Recycle below this many */
        uint64_t                 published;    /* Pull: messages published */
        uint32_t                 publish_slot; /* Pull: next slot to publish */
        uint64_t                 slots_addr;   /* The peer's run we use: its */
        uint32_t                 slots_rkey;   /* slots, and their key */
        hipower_txwin_t          win;          /* The bundle window */
        uint64_t                 epoch;        /* Of the peer's run we use */
        uint64_t                 ack_flags;    /* For the next trailer */
        uint64_t                 run_req;      /* Written last, or due */
        /* The open bundle (FLAG_BUNDLE_OPEN): its frame is built in the
         * buffer of op, which is retired like a bcopy's once posted */
        struct {
            uct_hipower_tx_op_t  *op;
            hipower_bundle_t     frame;
            /* The safety timer's tick when it opened (iface->hold.tick) */
            uint32_t             tick;
        } bundle;
        /* The peer's slot our bundles fill (FLAG_FILL): open while no
         * slot was taken after it (ring.head == seq + 1) and length > 0 */
        struct {
            uint32_t             seq;
            uint32_t             length;       /* Of its batches so far */
            uint32_t             count;        /* Its batches so far */
            uint64_t             ack_flags;    /* Its first frame's switch */
        } fill;
    } tx;

    struct {                                   /* hipower_post.c's */
        /* CQ credits the endpoint brought for the opening of its
         * connection: window binds (hipower_conn.c) and hello */
        int                      connect_credits;
        uint64_t                 hello_sn;     /* Work request of the hello */
        uint64_t                 user_end_sn;  /* WRs of user ops end here */
        uint64_t                 woken_gen;    /* Peer sleep gen we woke */
        uint32_t                 fence_beat;   /* Iface fence seen last */
    } post;

    struct {                                   /* hipower_tx_frame.c's */
        uint64_t                 msgs;         /* Messages posted */
        uint32_t                 unannounced;  /* Push: messages not announced */
        uint32_t                 announce_word; /* Push: their bitmap word */
    } frame;

    struct {                                   /* hipower_ep_am.c's */
        /* The length of the endpoint's last bcopy: whether the next is
         * likely to fit, before its packer runs */
        uint32_t                 bcopy_hint;
    } am;

    struct {                                   /* hipower_ep_active.c's */
        ucs_time_t               last_news;    /* Iface clock at the last
                                                  message delivered */
        uint64_t                 posted_gen;   /* Sleep handshake posted */
        uint64_t                 confirmed_gen; /* ... and completed */
        /* When demotion handshakes began to find the peer behind (it
         * announced messages that have not landed), 0 if the last did not:
         * a peer behind for longer than GRANT_TIMEOUT never catches up */
        ucs_time_t               behind_since;
    } event;

    struct {                                   /* hipower_conn.c's */
        hipower_slot_layout_t    layout;       /* Of its receive slots */
        hipower_slot_placement_t placement;    /* Where data goes in them */
        uint64_t                 consumed_addr;
        uint64_t                 published_addr;
        uint64_t                 announced_addr;
        uint64_t                 sleep_gen_addr;
        uint64_t                 state_addr;   /* Its peer_state word */
        uint64_t                 grant_addr;   /* Its grant record */
        uint64_t                 run_req_addr; /* Its run request word */
        uint32_t                 ctrl_read_rkey;
        uint64_t                 written_view_addr;
        uint32_t                 ctrl_write_rkey;
        uint32_t                 qp_num;
        uct_hipower_device_addr_t dev;        /* Connected to (is_connected) */
        uint32_t                 msg_wrs;      /* Per message, at most */
    } peer;

    /* Connected through the interface's handshake (hipower_cm.h) */
    uct_hipower_ep_cm_t          cm;
    const uct_hipower_ep_hooks_t *hooks;     /* hipower_ep.c's */
    const uct_hipower_ep_owner_ops_t *owner; /* hipower_cm.c's */
} uct_hipower_ep_t;


#define UCT_HIPOWER_EP_FMT        "hipower %s ep %p (qp 0x%x -> peer qp 0x%x)"
#define UCT_HIPOWER_EP_ARG(_ep)   uct_hipower_ep_iface(_ep)->dev_name, (_ep), \
                                  (_ep)->txqp.qp->qp_num, (_ep)->peer.qp_num


static inline uct_hipower_iface_t *uct_hipower_ep_iface(uct_hipower_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_hipower_iface_t);
}

static inline uct_hipower_ep_t *uct_hipower_txqp_ep(uct_hipower_txqp_t *txqp)
{
    return ucs_container_of(txqp, uct_hipower_ep_t, txqp);
}


/*
 * Small inline operations on the endpoint's own data, calling only the
 * protocol rules: what the send, receive and pool units test on the fast
 * path. Nothing here reacts (fails, posts, calls a handler).
 */

/* Whether a message of @a length goes into the bundle (opened for it if
 * none is): the first one of a bundle may be as large as any message,
 * since a bundle of one goes as a frame of its own; later ones must keep
 * the frame within a slot */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_bundle_fits(uct_hipower_ep_t *ep, uint32_t length)
{
    size_t max_payload = uct_hipower_ep_iface(ep)->config.max_payload;

    if (!(ep->flags & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        return length <= max_payload;
    }
    /* A bundle that fills a slot ends with its batch footer */
    return (uint64_t)ep->tx.bundle.frame.length +
           hipower_bundle_record_size(length) +
           ((ep->flags & UCT_HIPOWER_EP_FLAG_FILL) ?
            HIPOWER_FILL_FOOTER_SIZE : 0) <= max_payload;
}

/* The ack word bits of a frame that takes a slot now: the final count of
 * batches of the peer's slot our bundles fill, if it is open (no slot was
 * taken since it, and the run is the same), for the receiver, which takes
 * it from this frame (hipower_slot_ack_fill_final()); 0 otherwise */
static UCS_F_ALWAYS_INLINE uint64_t
uct_hipower_ep_fill_final_bits(const uct_hipower_ep_t *ep)
{
    return ((ep->tx.fill.length != 0) &&
            (ep->tx.ring.head == ep->tx.fill.seq + 1)) ?
           hipower_slot_ack_fill_final(ep->tx.fill.count) : 0;
}

/* Whether the peer's slot our bundles fill takes a batch of @a size: no
 * slot was taken since it was (a take moves ring.head; a switch to a new
 * run clears the length), it has room, and its trailer can count one
 * batch more */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_fill_takes(const uct_hipower_ep_t *ep, uint32_t size)
{
    return (ep->tx.fill.length != 0) &&
           (ep->tx.ring.head == ep->tx.fill.seq + 1) &&
           (ep->tx.fill.count < HIPOWER_FILL_MAX_BATCHES) &&
           hipower_fill_fits(ep->tx.fill.length, size,
                             uct_hipower_ep_iface((uct_hipower_ep_t*)ep)->
                                     config.max_payload);
}

/*
 * Whether a message goes into the slot our bundles fill, as a batch of its
 * own, instead of a frame in a slot of its own: with the bundle window on
 * (UCX_HIPOWER_BUNDLE_WINDOW) and that slot still open. Such a message is
 * posted at once as it would have been, never held (the caller posts the
 * bundle it opens for it: uct_hipower_ep_bundle_send() then takes the slot
 * only if the message does not fit), as two writes instead of one (the
 * batch and the trailer's new count), and the slot stays open for the
 * bundles that follow; before, each took a slot (8 KB) for itself and
 * closed the filled one (bundle_fill_stream on the simulated device: 1,446
 * slots for 100,000 messages, now 628; on the rig's am_bw such messages
 * are rarer: 19.2 -> 17.5 B of slot per 8 B message). Without the window a
 * filled slot is rare and short-lived, and such a message keeps its one
 * packet. The first test is the only one the fast path pays with filled
 * slots off.
 */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_fill_open(const uct_hipower_ep_t *ep)
{
    return (ep->tx.fill.length != 0) &&
           (ep->tx.ring.head == ep->tx.fill.seq + 1) &&
           (uct_hipower_ep_iface((uct_hipower_ep_t*)ep)->config.bundle_window
            != 0);
}

/* The peer's windows are bound: it wrote to us, or a request of ours after
 * our hello completed */
static UCS_F_ALWAYS_INLINE void
uct_hipower_ep_peer_ready(uct_hipower_ep_t *ep)
{
    ep->flags |= UCT_HIPOWER_EP_FLAG_PEER_READY;
}

/* Slots the endpoint's receive side holds: its run and a granted one */
static UCS_F_ALWAYS_INLINE uint32_t
uct_hipower_ep_rx_held(const uct_hipower_ep_t *ep)
{
    return ep->rx.ring.num_slots + ep->rx.granted.count;
}

/* The consumed bitmap of runs of epoch @a epoch's parity */
static UCS_F_ALWAYS_INLINE hipower_bitmap_word_t *
uct_hipower_ep_consumed(uct_hipower_ep_t *ep, uint32_t epoch)
{
    return &ep->ctrl->consumed[(epoch & 1) * UCT_HIPOWER_BITMAP_WORDS];
}

/* Receiver: the slot of the first message of the run we granted the peer
 * (sequence ep->rx.granted.start there) */
static UCS_F_ALWAYS_INLINE void *
uct_hipower_ep_rx_granted_first(uct_hipower_ep_t *ep)
{
    return UCS_PTR_BYTE_OFFSET(ep->rx.granted.slots,
                               (size_t)hipower_ring_slot(ep->rx.granted.count,
                                                         ep->rx.granted.start) *
                               uct_hipower_ep_iface(ep)->config.layout.stride);
}

/* Receiver: whether the peer wrote the first message of the run we
 * granted it, so it moved to that run. Bytes of the run it could reach
 * before are cleared when the run is taken from the pool. */
static UCS_F_ALWAYS_INLINE int
uct_hipower_ep_rx_granted_used(uct_hipower_ep_t *ep)
{
    return (ep->rx.granted.count > 0) &&
           hipower_slot_trailer_is(
                   *hipower_slot_mark(uct_hipower_ep_rx_granted_first(ep),
                                      &uct_hipower_ep_iface(ep)->config.layout),
                   ep->rx.granted.start);
}

/* Sender: whether the receiver granted a run we have not adopted: one
 * load per send */
static UCS_F_ALWAYS_INLINE int uct_hipower_ep_tx_granted(uct_hipower_ep_t *ep)
{
    return *(volatile uint64_t*)&ep->ctrl->grant.epoch != ep->tx.epoch;
}

/* Frames and batches delivered, mod 2^32: what the peer's announced count
 * counts (one per slot it took, one per batch it added to a filled slot) */
static UCS_F_ALWAYS_INLINE uint32_t
uct_hipower_ep_rx_delivered(const uct_hipower_ep_t *ep)
{
    return hipower_rx_ring_taken(&ep->rx.ring) + ep->rx.fill.extra;
}

/* Whether the transport may send something of its own to the peer now */
static UCS_F_ALWAYS_INLINE int uct_hipower_ep_may_initiate(uct_hipower_ep_t *ep)
{
    return (ep->flags & (UCT_HIPOWER_EP_FLAG_QP_UP |
                         UCT_HIPOWER_EP_FLAG_PEER_READY |
                         UCT_HIPOWER_EP_FLAG_PEER_CLOSED |
                         UCT_HIPOWER_EP_FLAG_FAILED |
                         UCT_HIPOWER_EP_FLAG_CANCELED)) ==
           (UCT_HIPOWER_EP_FLAG_QP_UP | UCT_HIPOWER_EP_FLAG_PEER_READY);
}

#endif
