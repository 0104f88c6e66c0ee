/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_IFACE_DEF_H_
#define UCT_HIPOWER_IFACE_DEF_H_

/*
 * The interface's data: its struct, its configuration, the send
 * descriptor and the constants every unit sizes by. Types only (and the
 * inline helpers that read them), so that every unit above the rules can
 * name the interface without naming hipower_iface.c, which sits on top.
 */

#include "hipower_md.h"
#include "hipower_clock.h"
#include "hipower_origin.h"
#include "hipower_active.h"
#include "hipower_arena.h"
#include "hipower_cm_def.h"
#include "hipower_ring.h"
#include "hipower_slot.h"
#include "hipower_stats.h"
#include "hipower_verbs.h"
#include "hipower_wire.h"
#include "hipower_window.h"
#include "hipower_txq.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue.h>
#include <infiniband/verbs.h>


#define UCT_HIPOWER_TL_NAME          "hipower"
#define UCT_HIPOWER_CONFIG_PREFIX    "HIPOWER_"

/* Slots per endpoint and direction: bounds the bitmaps to 512 bytes, so one
 * RDMA_READ always fetches a whole bitmap */
#define UCT_HIPOWER_MAX_SLOTS        4096

/* Bytes of each send buffer beyond the largest bcopy, to catch a packer
 * that returns a little too much (UCT_IFACE_FLAG_ERRHANDLE_BCOPY_LEN) */
#define UCT_HIPOWER_BCOPY_SLACK      64

/* Largest UCX_HIPOWER_TX_MAX_INLINE: bounds an am_short frame */
#define UCT_HIPOWER_MAX_INLINE       1024

/* Largest zero-copy iov and AM header */
#define UCT_HIPOWER_MAX_IOV          8
#define UCT_HIPOWER_MAX_ZCOPY_HDR    128

#define UCT_HIPOWER_BITMAP_WORDS     HIPOWER_BITMAP_WORDS(UCT_HIPOWER_MAX_SLOTS)


/* How the receiver learns that a slot holds a new message */
typedef enum {
    /* The message's own trailer, written by the same RDMA_WRITE after the
     * data: one packet per message. Relies on the device placing a WRITE's
     * bytes in order (docs/protocol.md) */
    UCT_HIPOWER_NOTIFY_SELF,
    /* Strict: the sender RDMA_WRITEs its bitmap word right after the
     * payload, a second, ordered write (RC places one message's data
     * before the next message's); the receiver only reads local memory */
    UCT_HIPOWER_NOTIFY_PUSH,
    /* The paper's scheme: the receiver RDMA_READs the sender's bitmap,
     * which the sender updates when its writes have completed */
    UCT_HIPOWER_NOTIFY_PULL,
    UCT_HIPOWER_NOTIFY_LAST
} uct_hipower_notify_t;

extern const char *uct_hipower_notify_names[];


typedef struct uct_hipower_iface_config {
    uct_iface_config_t           super;
    size_t                       slot_size;
    unsigned                     slots_per_ep;
    unsigned                     min_slots_per_ep;
    size_t                       mem_budget;
    double                       recycle_threshold;
    unsigned                     tx_queue_len;
    unsigned                     tx_cq_len;
    unsigned                     signal_interval;
    size_t                       max_inline;
    int                          notify;
    int                          shared_pool;
    unsigned                     announce_batch;
    unsigned                     max_eps;
    unsigned                     shared_max_eps;
    int                          hold_slots;
    int                          bundle;
    int                          bundle_fill;
    unsigned long                bundle_window; /* Or UCS_ULUNITS_AUTO */
    int                          bundle_event;
    ucs_time_t                   bundle_hold_time;
    int                          print_stats;
    ucs_ternary_auto_value_t     mem_windows;
    unsigned                     gid_index;
    unsigned                     sl;
    unsigned                     traffic_class;
    unsigned                     hop_limit;
    double                       ack_timeout;
    unsigned                     retry_count;
    unsigned                     rnr_retry_count;
    double                       overhead;
    ucs_time_t                   idle_time;
    ucs_time_t                   grant_timeout;
    int                          connect_to_iface;
    char                         *cm_netdev;
    ucs_time_t                   connect_timeout;
    unsigned                     cm_max_conns;
    uct_iface_mpool_config_t     tx_mp;
} uct_hipower_iface_config_t;


/*
 * Per-endpoint bitmaps, registered in three pieces so that the peer can read
 * only what it needs to read and write only what it needs to write.
 */
typedef struct uct_hipower_ep_ctrl {
    /* Peer may RDMA_READ these (one MR). Two consumed bitmaps, one per
     * parity of the run's epoch (docs/protocol.md, 9.2): releases of the
     * old run while it drains do not touch the new run's bits */
    hipower_bitmap_word_t        consumed[2 * UCT_HIPOWER_BITMAP_WORDS];
    hipower_bitmap_word_t        published[UCT_HIPOWER_BITMAP_WORDS];
    uint64_t                     announced;     /* Push: messages announced */
    /* Peer RDMA_WRITEs these (the bitmap in push mode; in pull mode it is
     * our READ target) */
    hipower_bitmap_word_t        written_view[UCT_HIPOWER_BITMAP_WORDS];
    uint64_t                     peer_sleep_gen; /* Peer sleeps: wake it */
    uint64_t                     peer_state;   /* Peer ready / closed */
    /* The run of the peer's slots it grants us next (shared pool, 9.2),
     * epoch written last; checked before each send */
    struct {
        uint64_t                 slots_addr;
        uint32_t                 rkey;
        uint32_t                 count;
        uint64_t                 epoch;
    } grant;
    /* Our peer's run request (hipower_run_req_make()): where its messages
     * in a run we took back end, and whether it asks for a run */
    uint64_t                     run_req;
    /* Target of our recycle READ of the peer's consumed bitmap */
    hipower_bitmap_word_t        peer_consumed[UCT_HIPOWER_BITMAP_WORDS];
    uint64_t                     peer_announced; /* Wakeup handshake READ */
    /* Local only: slots we have taken at the peer */
    hipower_bitmap_word_t        written[UCT_HIPOWER_BITMAP_WORDS];
} uct_hipower_ep_ctrl_t;

/* Bytes from @a _first up to (not including) @a _next in the ctrl struct */
#define UCT_HIPOWER_CTRL_SPAN(_first, _next) \
    (ucs_offsetof(uct_hipower_ep_ctrl_t, _next) - \
     ucs_offsetof(uct_hipower_ep_ctrl_t, _first))


KHASH_MAP_INIT_INT(uct_hipower_qp_ep, struct uct_hipower_txqp*);


typedef struct uct_hipower_iface {
    uct_base_iface_t             super;
    uint8_t                      port_num;
    struct ibv_port_attr         port_attr;
    union ibv_gid                gid;
    struct ibv_cq                *cq;          /* All send-side completions */
    ucs_mpool_t                  tx_mp;        /* Send descriptors */
    /* Bundles' send descriptors (UCX_HIPOWER_BUNDLE): a frame's buffer and
     * room past it to pack one more message in place */
    ucs_mpool_t                  tx_bundle_mp;
    ucs_list_link_t              ep_list;      /* All endpoints */
    unsigned                     num_eps;
    /* Endpoints progress visits (hipower_active.h); the others are idle
     * and woken by their peer's next write with immediate */
    ucs_list_link_t              active_eps;
    struct {                                   /* hipower_ep_active.c's */
        unsigned                 num_idle;
        unsigned                 num_wake_due; /* Eps with FLAG_WAKE_DUE */
    } active;
    /* Progress reads the clock once per UCT_HIPOWER_CLOCK_CALLS calls */
    struct {
        ucs_time_t               now;
        unsigned                 calls;
    } clock;
    khash_t(uct_hipower_qp_ep)   qp_eps;       /* QP number -> its requests */
    ucs_list_link_t              pending_eps;  /* Endpoints with pending reqs */
    ucs_list_link_t              gc_list;      /* QPs of destroyed endpoints */
    unsigned                     num_gc;

    struct {
        int                      cq_credits;   /* Free entries of cq (see
                                                  hipower_txq.h) */
        unsigned                 cq_len;       /* Its depth */
        uint32_t                 fence_beat;   /* uct_iface_fence() count */
        /* Endpoints whose last requests may be unsignaled: what a
         * recall looks at (uct_hipower_ep_note_trailing()) */
        ucs_list_link_t          trailing_eps;
        /* The bundle window's hold timer (hipower_ep_hold.c); hold_ops,
         * endpoint operations running, and hold_posting, the timer at
         * work: the two marks by which they keep out of each other's way */
        uct_hipower_timer_t      hold_timer;
        unsigned                 hold_ops;
        int                      hold_posting;
        /* The flush of held bundles on the completion of the frame ahead
         * of them (hipower_ep_hold.c): the send CQ's own channel, which
         * UCX's async thread watches (hold.relay_fd hands its events to
         * the worker's async lock); armed, the CQ asked for an event for a
         * held bundle; post_due, an event came that held bundles wait
         * for (who sees it first posts them); user_armed, the user sleeps
         * on UCT_EVENT_SEND_COMP, whose events the async thread leaves in
         * the channel for the event fd */
        struct ibv_comp_channel  *channel;
        int                      armed;
        int                      post_due;
        int                      user_armed;
        int                      in_progress;  /* Progress runs (under the
                                                  async lock) */
        /* Endpoints the timer's post failed whose error handler is due
         * (ep->err_due): progress calls it, event arm says busy */
        unsigned                 failures_due;
    } tx;

    struct {                                   /* hipower_post.c's */
        int                      starved;      /* A post found no credits */
    } post;

    struct {                                   /* hipower_ep_bundle.c's */
        /* Endpoints with a bundle open: event arm says busy until none */
        unsigned                 num_open;
        int                      hold_seen;    /* A send held by the window
                                                  since the timer's last tick */
    } bundle;

    struct {                                   /* hipower_ep_hold.c's */
        /* An eventfd that hands the send channel's events to the worker's
         * async lock */
        int                      relay_fd;
        int                      flush_async;  /* The async thread watches */
        /* Ticks of the safety timer: it posts the bundles that were open
         * a whole tick (ep->tx.bundle.tick) */
        uint32_t                 tick;
    } hold;

    struct {                                   /* hipower_held.c's */
        /* The interface's internal ops with the connect wrapped */
        uct_iface_internal_ops_t internal_ops;
    } held;

    struct {
        void                     *map;         /* mmap()ed, for munmap() */
        size_t                   map_size;
        void                     *base;        /* Receive slot arena */
        size_t                   size;
        hipower_arena_t          slots;        /* Which slots are taken */
    } arena;

    /* HOLD_SLOTS=y: messages go to handlers in private copies they may
     * keep; UCT's release_desc returns them to this pool */
    struct {
        ucs_mpool_t              mp;
        size_t                   payload_offset; /* Data in an element */
        uct_recv_desc_t          release_desc;
        /* Receive completions of the wake-up CQ due that no sleeper waits
         * for: progress polls it while there are (changed through
         * hipower_ep_rx.h's uct_hipower_rx_expect()/_done() only) */
        unsigned                 expected;
    } rx;

    struct {
        size_t                   slot_size;
        size_t                   max_payload;  /* What fits after the header */
        size_t                   max_short;    /* am_short frame, trailer
                                                  included */
        hipower_slot_layout_t    layout;       /* Of our receive slots */
        size_t                   rx_headroom;  /* User's, in held copies */
        unsigned                 slots_per_ep;
        unsigned                 max_eps;      /* Room kept for this many */
        unsigned                 eps_possible; /* Live and draining, at most */
        unsigned                 min_slots_per_ep;
        double                   recycle_threshold;
        unsigned                 tx_queue_len;
        unsigned                 signal_interval;
        size_t                   max_inline;
        uct_hipower_notify_t     notify;
        unsigned                 announce_batch;
        int                      hold_slots;   /* Handlers may keep slots */
        int                      bundle;       /* Bundles sent and taken */
        int                      bundle_fill;  /* Filled slots sent and
                                                  taken */
        unsigned                 bundle_window; /* Requests in flight that
                                                   make messages bundle */
        ucs_time_t               bundle_hold_time; /* A held bundle's
                                                      deadline */
        int                      print_stats;
        enum ibv_mtu             path_mtu;
        size_t                   max_rma;      /* Largest put/get zcopy */
        int                      atomics;      /* Device does RC atomics */
        double                   overhead;
        ucs_time_t               idle_time;    /* Demote after this quiet */
        ucs_time_t               grant_timeout; /* A grant's deadline */
        int                      demote;       /* Endpoints may go idle */
        int                      shared_pool;  /* Runs granted on demand */
    } config;

    /* The slot pool shared by all peers (docs/protocol.md, 9.2; self mode
     * with UCX_HIPOWER_SHARED_POOL=y): what a run may grow to */
    struct {
        uint32_t                 fair;         /* An active endpoint's share */
        uint32_t                 reserve;      /* Kept free by grows */
        uint32_t                 idle_held;    /* Slots idle endpoints hold */
        /* Endpoints without a run, or giving theirs back: their peers'
         * run requests come with immediates, polled while any exists */
        unsigned                 num_runless;
        ucs_list_link_t          waiters;      /* Asked, no run free yet */
        unsigned                 num_waiting;  /* Their number */
        /* The arena's free count when the first waiter was last tried:
         * until it moves, the next try waits for the clock's next tick */
        uint64_t                 waiters_frees;
        /* Waiters not in the active set: an active one is counted among
         * the active endpoints already (review L3) */
        unsigned                 num_waiting_idle;
        unsigned                 num_releasing; /* Runs being given back */
        /* Of those, past their deadline: a peer that computes, or one
         * whose death its probe will show; waiters do not count on them */
        unsigned                 num_overdue;
        ucs_list_link_t          idle_holders; /* Idle eps with a run */
        /* Endpoints with a grant or a release out, oldest first: each has
         * the same time to be adopted, so only the first one's deadline
         * is checked */
        ucs_list_link_t          granting;
    } pool;

    /* Wakeup (push mode): see hipower_event.c */
    struct {
        struct ibv_comp_channel  *channel;     /* Wake-up receives' */
        int                      epfd;         /* The event fd: channel,
                                                  tx.channel and the
                                                  handshakes' eventfd */
        struct ibv_cq            *rx_cq;       /* Wake-up writes' receives */
        uint64_t                 gen;          /* Sleep generation, 0: never */
        uint64_t                 gen_seq;      /* Every handshake's generation
                                                  (hipower_gen_next()) */
        int                      new_gen;      /* Next arm starts a new one */
        unsigned                 poll_always;  /* Pull mode: 1, rx_cq polled
                                                  in every progress call */
    } event;

    uint64_t                     async_seq;    /* Device events handled */

    /* Connecting to the interface (hipower_cm.h) */
    uct_hipower_cm_t             cm;

    uct_hipower_stats_t          stats;
    char                         dev_name[UCT_DEVICE_NAME_MAX];
    /* Where the peers' windows are made (hipower_window.h) */
    uct_hipower_window_dev_t     win_dev;
    /* What the verbs layer needs, and the send CQ's stash (hipower_verbs.h) */
    uct_hipower_verbs_dev_t      verbs;
} uct_hipower_iface_t;


struct uct_hipower_tx_op;
struct uct_hipower_txqp;

/*
 * What the completion of an operation's work request means to the unit that
 * posted it (a recycle READ's bitmap applied, a get's data unpacked, a
 * handshake confirmed), called by the completion walk of its QP, which does
 * not name it (UCX's rc: op->handler). NULL: nothing beyond the user's
 * completion. Runs before that completion is called.
 */
typedef void (*uct_hipower_op_handler_t)(struct uct_hipower_tx_op *op,
                                         struct uct_hipower_txqp *txqp);

enum {
    /* Its handler calls the user's code or writes the user's memory: only
     * the user's thread completes it (hipower_ep_hold.c) */
    UCT_HIPOWER_OP_FLAG_USER = UCS_BIT(0)
};

/* Send-side operation awaiting completion of its work request */
typedef struct uct_hipower_tx_op {
    ucs_queue_elem_t             queue;
    uint64_t                     sn;       /* Of the work request */
    uct_completion_t             *comp;    /* User completion, or NULL */
    uct_hipower_op_handler_t     handler;  /* Or NULL */
    uint64_t                     msg_count; /* Messages posted up to this op */
    uint32_t                     lkey;     /* Of the buffer that follows */
    uint8_t                      flags;    /* UCT_HIPOWER_OP_FLAG_* */
    union {
        struct {
            uct_unpack_callback_t cb;
            void                 *arg;
            size_t               length;
        } get_bcopy;                       /* Unpacks the buffer */
        void                     *result;  /* Fetching atomic's result */
        uint64_t                 arm_gen;  /* Wakeup handshake's generation */
        uint32_t                 taken_at_read; /* Recycle READ's bound
                                                   (hipower_tx_ring_recycle) */
    } u;
} uct_hipower_tx_op_t;


/*
 * The work requests of one QP in flight. Embedded in a live endpoint; when
 * the endpoint is destroyed with requests (or receives) outstanding, it
 * moves into a uct_hipower_qp_gc_t that keeps the QP and the buffers the
 * device may still touch until every completion has arrived, so that a
 * completion never reaches memory or an endpoint it does not belong to,
 * and the QP number is not reused before.
 */
typedef struct uct_hipower_txqp {
    struct ibv_qp                *qp;
    hipower_txq_t                txq;
    ucs_queue_head_t             outstanding;  /* uct_hipower_tx_op_t, by sn */
    unsigned                     recvs;        /* Wake-up receives posted */
    uint8_t                      is_gc;        /* 0: part of a live endpoint */
} uct_hipower_txqp_t;


static inline void *uct_hipower_tx_op_buffer(uct_hipower_tx_op_t *op)
{
    return op + 1;
}


/* Receive work requests per QP for wake-up writes (one per sleep at most,
 * the peer's hello and its first write) */
#define UCT_HIPOWER_EVENT_RECVS      5

/* What an RC QP's atomics can do: 64-bit add, fetch-add, compare-swap */
#define UCT_HIPOWER_ATOMIC64_OPS   UCS_BIT(UCT_ATOMIC_OP_ADD)
#define UCT_HIPOWER_ATOMIC64_FOPS  (UCS_BIT(UCT_ATOMIC_OP_ADD) | \
                                    UCS_BIT(UCT_ATOMIC_OP_CSWAP))

/* Receives each QP keeps posted: pull mode has no wake-ups, only the
 * peer's hello */
#define uct_hipower_iface_qp_recvs(_iface) \
    (((_iface)->config.notify == UCT_HIPOWER_NOTIFY_PULL) ? 1 : \
     UCT_HIPOWER_EVENT_RECVS)

/* Work requests that open an endpoint's connection: the binds of its
 * three windows (hipower_conn.c) and the hello (hipower_post.c) */
#define UCT_HIPOWER_CONNECT_WRS      4

/* Send-CQ entries each endpoint brings along: those of its connection's
 * opening and one for the request that ends its QP */
#define UCT_HIPOWER_EP_CQ_ENTRIES    (UCT_HIPOWER_CONNECT_WRS + 1)

/* How long connect_to_ep() waits for its window binds to complete */
#define UCT_HIPOWER_WAIT_QP_SEC      5

/* Progress calls per clock read: the idle test needs no finer time */
#define UCT_HIPOWER_CLOCK_CALLS      64

/* Completion-queue credits only recalls may take (hipower_txq.h) */
#define UCT_HIPOWER_CQ_RECALL_RESERVE  16

#endif
