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


/*
 * The endpoint's flags: one byte for each unit that writes them. A unit
 * sets and clears the bits of its own lane only
 * (uct_hipower_ep_flags_set()/_clear(), which check at compile time that
 * the bits are the lane's), so that no unit's read-modify-write touches
 * another unit's bits; a test reads the whole word (flags.all), so that
 * the send path's checks across units stay one load and one compare. The
 * lanes that the per-message tests combine (post, ep, conn and rx; the
 * send path's bundle bits aside) are the low 32 bits, where a mask fits
 * an instruction's immediate (on x86-64 a wider one is first loaded into
 * a register).
 */
typedef union uct_hipower_ep_flags {
    uint64_t                     all;
    struct {
        uint8_t                  post;         /* hipower_post.c's */
        uint8_t                  ep;           /* hipower_ep.c's */
        uint8_t                  conn;         /* hipower_conn.c's */
        uint8_t                  rx;           /* hipower_ep_rx.c's */
        uint8_t                  bundle;       /* hipower_ep_bundle.c's */
        uint8_t                  active;       /* hipower_ep_active.c's */
        uint8_t                  grant;        /* hipower_ep_grant.c's */
        uint8_t                  frame;        /* hipower_tx_frame.c's */
    } by;
} uct_hipower_ep_flags_t;

/* Where a lane's bits are in flags.all */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define UCT_HIPOWER_EP_LANE_SHIFT(_lane) \
    (8 * offsetof(uct_hipower_ep_flags_t, by._lane))
#else
#  define UCT_HIPOWER_EP_LANE_SHIFT(_lane) \
    (8 * (7 - offsetof(uct_hipower_ep_flags_t, by._lane)))
#endif

/* Bit @a _n of lane @a _lane, as flags.all holds it */
#define UCT_HIPOWER_EP_LANE_BIT(_lane, _n) \
    (1ull << (UCT_HIPOWER_EP_LANE_SHIFT(_lane) + (_n)))

/* @a _flags (bits of flags.all) as lane @a _lane holds them; a constant
 * with a bit outside the lane does not compile */
#define UCT_HIPOWER_EP_LANE_BITS(_lane, _flags) \
    ((uint8_t)((uint64_t)(_flags) >> UCT_HIPOWER_EP_LANE_SHIFT(_lane)) + \
     0 * sizeof(struct { \
         int lane_bits_only : \
             ((uint64_t)__builtin_choose_expr(__builtin_constant_p(_flags), \
                                              (_flags), 0) & \
              ~(0xffull << UCT_HIPOWER_EP_LANE_SHIFT(_lane))) ? -1 : 1; }))

/* Sets or clears @a _flags, which must be bits of lane @a _lane */
#define uct_hipower_ep_flags_set(_ep, _lane, _flags) \
    ((_ep)->flags.by._lane |= UCT_HIPOWER_EP_LANE_BITS(_lane, _flags))
#define uct_hipower_ep_flags_clear(_ep, _lane, _flags) \
    ((_ep)->flags.by._lane &= \
     (uint8_t)~UCT_HIPOWER_EP_LANE_BITS(_lane, _flags))


/* hipower_post.c's lane */
/* Usable: our QP is up and our hello to the peer is posted */
#define UCT_HIPOWER_EP_FLAG_CONNECTED      UCT_HIPOWER_EP_LANE_BIT(post, 0)
/* Recycle READ posted */
#define UCT_HIPOWER_EP_FLAG_RECYCLE_READ   UCT_HIPOWER_EP_LANE_BIT(post, 1)
/* Pull READ posted */
#define UCT_HIPOWER_EP_FLAG_NOTIFY_READ    UCT_HIPOWER_EP_LANE_BIT(post, 2)
/* In iface pending_eps */
#define UCT_HIPOWER_EP_FLAG_PENDING_LISTED UCT_HIPOWER_EP_LANE_BIT(post, 3)
/* In iface->tx.trailing_eps: posted requests that went unsignaled since
 * (the entry may be stale: the recall drops it) */
#define UCT_HIPOWER_EP_FLAG_TRAILING       UCT_HIPOWER_EP_LANE_BIT(post, 4)

/* hipower_ep.c's lane */
#define UCT_HIPOWER_EP_FLAG_FAILED         UCT_HIPOWER_EP_LANE_BIT(ep, 0)
/* Pending dispatch runs */
#define UCT_HIPOWER_EP_FLAG_DISPATCHING    UCT_HIPOWER_EP_LANE_BIT(ep, 1)
/* The peer destroyed its endpoint in order (it wrote "closed"): no more
 * transport-initiated traffic to it, and no error for it */
#define UCT_HIPOWER_EP_FLAG_PEER_CLOSED    UCT_HIPOWER_EP_LANE_BIT(ep, 2)
/* flush(CANCEL) ran */
#define UCT_HIPOWER_EP_FLAG_CANCELED       UCT_HIPOWER_EP_LANE_BIT(ep, 3)
/* Sender: pending dispatch of two or more requests runs, whose short and
 * bcopy messages all go into the bundle, posted once at the end of the
 * dispatch: one work request and one doorbell for the requests that
 * waited (uct_hipower_ep_dispatch_pending()) */
#define UCT_HIPOWER_EP_FLAG_GATHER         UCT_HIPOWER_EP_LANE_BIT(ep, 4)

/* hipower_conn.c's lane */
/* connect_to_ep() done: our QP is connected to the peer's, our windows
 * are bound to it and our receives posted. FLAG_CONNECTED follows with
 * the hello before our first write into the peer's windows. */
#define UCT_HIPOWER_EP_FLAG_QP_UP          UCT_HIPOWER_EP_LANE_BIT(conn, 0)
/* Every message to the peer is one write that announces itself: self
 * mode, and the peer asked for no alignment (am_short's fast path) */
#define UCT_HIPOWER_EP_FLAG_ONE_WRITE      UCT_HIPOWER_EP_LANE_BIT(conn, 1)
/* Sender: small active messages that found no slot or no room may go
 * into a bundle: both sides enable UCX_HIPOWER_BUNDLE and the peer asked
 * for no alignment (hipower_ep_bundle.c) */
#define UCT_HIPOWER_EP_FLAG_BUNDLES        UCT_HIPOWER_EP_LANE_BIT(conn, 2)
/* Sender: bundles of two or more messages fill a slot of the peer one
 * after the other (tx.fill): both sides enable UCX_HIPOWER_BUNDLE_FILL
 * (hipower_fill.h, hipower_ep_bundle.c) */
#define UCT_HIPOWER_EP_FLAG_FILL           UCT_HIPOWER_EP_LANE_BIT(conn, 3)

/* hipower_ep_bundle.c's lane */
/* Sender: a bundle is open (tx.bundle): every later message of the
 * endpoint goes into it or after it; in iface->pending_eps until it is
 * posted */
#define UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN    UCT_HIPOWER_EP_LANE_BIT(bundle, 0)
/* Sender: a message did not fit what is left of the open bundle, which
 * gathers no more: later short and bcopy messages wait for it to go (and
 * a bcopy packer does not run for a send that is refused anyway) */
#define UCT_HIPOWER_EP_FLAG_BUNDLE_FULL    UCT_HIPOWER_EP_LANE_BIT(bundle, 1)

/* hipower_ep_rx.c's lane */
/* Its receive walk runs: a handler may fail the endpoint (a flush with
 * UCT_FLUSH_FLAG_CANCEL) or call progress again, so its runs go back to
 * the pool only once the walk is over, and a nested progress does not
 * walk it again (uct_hipower_ep_rx_progress()) */
#define UCT_HIPOWER_EP_FLAG_IN_RX          UCT_HIPOWER_EP_LANE_BIT(rx, 0)
/* Peer's first-contact wake-up still due */
#define UCT_HIPOWER_EP_FLAG_FIRST_IMM      UCT_HIPOWER_EP_LANE_BIT(rx, 1)
/* A message of the peer came before its first-contact wake-up was
 * polled: that receive completion is counted in iface->rx.expected */
#define UCT_HIPOWER_EP_FLAG_IMM_DUE        UCT_HIPOWER_EP_LANE_BIT(rx, 2)
/* Receiver: the peer wrote a frame no honest peer writes (its key
 * matched, its length or AM id did not fit): the endpoint fails at the
 * end of this progress call, and nothing more of the peer is read */
#define UCT_HIPOWER_EP_FLAG_BAD_FRAME      UCT_HIPOWER_EP_LANE_BIT(rx, 3)
/* The peer's windows are known to be bound (it wrote to us, or a request
 * of ours after our hello completed): only then does the transport send
 * anything of its own accord (pull reads, sleep handshakes, grants,
 * goodbye). In the receive lane, with the first contact's marks, which
 * the receive walk tests with it for every message */
#define UCT_HIPOWER_EP_FLAG_PEER_READY     UCT_HIPOWER_EP_LANE_BIT(rx, 4)

/* hipower_ep_active.c's lane */
/* In iface->active_eps: progress visits it (hipower_active.h) */
#define UCT_HIPOWER_EP_FLAG_ACTIVE         UCT_HIPOWER_EP_LANE_BIT(active, 0)
/* Handshake out */
#define UCT_HIPOWER_EP_FLAG_DEMOTING       UCT_HIPOWER_EP_LANE_BIT(active, 1)
/* A message or a wake-up came while the demotion handshake was out */
#define UCT_HIPOWER_EP_FLAG_NEWS           UCT_HIPOWER_EP_LANE_BIT(active, 2)
/* A sleep handshake (demotion or arm) told the peer a generation whose
 * wake-up has not been polled yet: the peer's next write carries it as an
 * immediate, which takes a receive of our QP. Progress polls the wake-up
 * CQ while any endpoint has this, active or not: a handshake whose
 * verdict kept the endpoint active still gets its wake-up, and unpolled
 * wake-ups would use up the receives and stall the peer's QP (receiver
 * not ready) */
#define UCT_HIPOWER_EP_FLAG_WAKE_DUE       UCT_HIPOWER_EP_LANE_BIT(active, 3)

/* hipower_ep_grant.c's lane */
/* Receiver: a release (a grant of no slots) is out; the peer's run
 * request will say where its messages in the run end */
#define UCT_HIPOWER_EP_FLAG_RELEASING      UCT_HIPOWER_EP_LANE_BIT(grant, 0)
/* Receiver: in iface->pool.waiters, for a run when one comes back */
#define UCT_HIPOWER_EP_FLAG_WAITING        UCT_HIPOWER_EP_LANE_BIT(grant, 1)
/* Sender: tx.run_req is still to be written (no room at the time) */
#define UCT_HIPOWER_EP_FLAG_RUN_REQ_DUE    UCT_HIPOWER_EP_LANE_BIT(grant, 2)
/* Receiver: idle and holding a run: in iface->pool.idle_holders */
#define UCT_HIPOWER_EP_FLAG_IDLE_HOLDER    UCT_HIPOWER_EP_LANE_BIT(grant, 3)
/* Receiver: a grant or a release is out, in iface->pool.granting */
#define UCT_HIPOWER_EP_FLAG_GRANT_OUT      UCT_HIPOWER_EP_LANE_BIT(grant, 4)

/* hipower_tx_frame.c's lane */
/* Pull: "ready" written */
#define UCT_HIPOWER_EP_FLAG_HELLO_SENT     UCT_HIPOWER_EP_LANE_BIT(frame, 0)




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
    uct_hipower_ep_flags_t       flags;
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
         * slot was taken after it (ring.head == seq + 1) and length > 0;
         * changed only by hipower_fill.h's operations */
        hipower_fill_tx_t        fill;
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
        uint32_t                 unannounced;  /* Push: not announced yet */
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

    if (!(ep->flags.all & UCT_HIPOWER_EP_FLAG_BUNDLE_OPEN)) {
        return length <= max_payload;
    }
    /* A bundle that fills a slot ends with its batch footer */
    return (uint64_t)ep->tx.bundle.frame.length +
           hipower_bundle_record_size(length) +
           ((ep->flags.all & UCT_HIPOWER_EP_FLAG_FILL) ?
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
    return (ep->flags.all & (UCT_HIPOWER_EP_FLAG_QP_UP |
                             UCT_HIPOWER_EP_FLAG_PEER_READY |
                             UCT_HIPOWER_EP_FLAG_PEER_CLOSED |
                             UCT_HIPOWER_EP_FLAG_FAILED |
                             UCT_HIPOWER_EP_FLAG_CANCELED)) ==
           (UCT_HIPOWER_EP_FLAG_QP_UP | UCT_HIPOWER_EP_FLAG_PEER_READY);
}

#endif
