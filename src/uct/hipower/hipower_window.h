/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * What a peer may access of ours -- its receive slots, the control words it
 * writes, the bitmaps it reads -- each through a window bound to that
 * peer's QP alone (docs/protocol.md, "Windows").
 */
#ifndef UCT_HIPOWER_WINDOW_H_
#define UCT_HIPOWER_WINDOW_H_

#include "hipower_md.h"


/*
 * One region the peer reaches by RDMA. With memory windows (the default
 * where the device has type-2 windows) the region's MR grants no remote
 * access at all: the peer gets the rkey of a type-2 window that a bind on
 * the peer's own QP opens, so the device refuses that rkey on any other
 * QP -- another peer that learns or guesses it gets an error on its own
 * connection. The window covers the whole MR: a device that checks a
 * window's bounds against its MR only (Soft-RoCE in Linux 6.1 does) still
 * keeps the peer inside the region. Without windows the MR itself admits
 * the remote access, and any QP of the protection domain that has the
 * rkey can use it.
 */
typedef struct uct_hipower_window {
    struct ibv_mr                *mr;
    struct ibv_mw                *mw;      /* NULL: the MR's rkey is used */
    uint32_t                     rkey;     /* What the peer is given */
    int                          access;   /* IBV_ACCESS_REMOTE_WRITE/_READ */
} uct_hipower_window_t;


/* Where an interface makes its windows: its device's memory domain, the
 * device's name for messages, and whether it uses memory windows at all
 * (UCX_HIPOWER_MEM_WINDOWS and the device decide, at interface open).
 * The interface holds one; only its constructor writes it. */
typedef struct uct_hipower_window_dev {
    uct_hipower_md_t             *md;
    const char                   *dev_name;
    int                          use_mw;   /* Type-2 windows, else MRs */
} uct_hipower_window_dev_t;


/* Registers [@a address, + @a length) for @a access by the peer (one of
 * IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ) and, with windows,
 * allocates the window and chooses the rkey its bind will give it */
ucs_status_t uct_hipower_window_open(const uct_hipower_window_dev_t *dev,
                                     void *address, size_t length, int access,
                                     const char *what,
                                     uct_hipower_window_t *win);

/* Whether the window needs a bind before the peer may use it */
static UCS_F_ALWAYS_INLINE int
uct_hipower_window_needs_bind(const uct_hipower_window_t *win)
{
    return win->mw != NULL;
}

/* Fills @a wr (all of it) with the bind that opens the window to the peer
 * of the QP the request is posted on; the caller sets send flags and the
 * chain after */
void uct_hipower_window_bind_wr(const uct_hipower_window_t *win,
                                struct ibv_send_wr *wr);

/* Closes the window and deregisters the region: once it returns, no write
 * or read of the peer's reaches the region any more */
void uct_hipower_window_close(const uct_hipower_window_dev_t *dev,
                              uct_hipower_window_t *win, const char *what);

#endif
