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
    uint32_t                     fence_beat;   /* Iface fence seen last */
    ucs_list_link_t              list;         /* In iface->ep_list */
    ucs_list_link_t              active_list;  /* In iface->active_eps */
    ucs_time_t                   last_news;    /* Iface clock at the last
                                                  message delivered */
    ucs_list_link_t              pending_list; /* In iface->pending_eps */
    ucs_list_link_t              trailing_list; /* In tx.trailing_eps */
    ucs_queue_head_t             pending_q;

    struct {
        hipower_rx_ring_t        ring;
        /* The slot at the ring's head is a filled slot still open
         * (hipower_fill.h): the bytes of its batches walked, 0 if none,
         * and how many batches they are */
        uint32_t                 fill_done;
        uint32_t                 fill_walked;
        /* Batches walked in filled slots beyond one per slot moved past:
         * with ring.taken, what the sender's announced count counts */
        uint32_t                 fill_extra;
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
        uint64_t                 msgs;         /* Messages posted */
        uint64_t                 published;    /* Pull: messages published */
        uint32_t                 publish_slot; /* Pull: next slot to publish */
        uint64_t                 user_end_sn;  /* WRs of user ops end here */
        uint32_t                 unannounced;  /* Push: messages not announced */
        uint32_t                 announce_word; /* Push: their bitmap word */
        uint64_t                 woken_gen;    /* Peer sleep gen we woke */
        uint32_t                 msg_wrs;      /* Per message, at most */
        hipower_txwin_t          win;          /* The bundle window */
        uint64_t                 epoch;        /* Of the peer's run we use */
        uint64_t                 ack_flags;    /* For the next trailer */
        uint64_t                 run_req;      /* Written last, or due */
        /* CQ credits the endpoint brought for the opening of its
         * connection: window binds and hello (hipower_ep.c) */
        int                      connect_credits;
        uint64_t                 hello_sn;     /* Work request of the hello */
        /* The open bundle (FLAG_BUNDLE_OPEN): its frame is built in the
         * buffer of op, which is retired like a bcopy's once posted */
        struct {
            uct_hipower_tx_op_t  *op;
            hipower_bundle_t     frame;
            /* The length of the endpoint's last bcopy: whether the next
             * is likely to fit, before its packer runs (hipower_ep_am.c) */
            uint32_t             bcopy_hint;
            /* The safety timer's tick when it opened (iface->tx.hold_tick) */
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

    struct {
        uint64_t                 posted_gen;   /* Sleep handshake posted */
        uint64_t                 confirmed_gen; /* ... and completed */
        /* When demotion handshakes began to find the peer behind (it
         * announced messages that have not landed), 0 if the last did not:
         * a peer behind for longer than GRANT_TIMEOUT never catches up */
        ucs_time_t               behind_since;
    } event;

    struct {
        uint64_t                 slots_addr;
        uint32_t                 slots_rkey;
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
    } peer;

    /* Connected through the interface's handshake (hipower_cm.h) */
    uct_hipower_ep_cm_t          cm;
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

#endif
