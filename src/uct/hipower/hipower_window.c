/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_window.h"

#include <ucs/debug/log.h>
#include <string.h>


ucs_status_t uct_hipower_window_open(const uct_hipower_window_dev_t *dev,
                                     void *address, size_t length, int access,
                                     const char *what,
                                     uct_hipower_window_t *win)
{
    uct_hipower_md_t *md = dev->md;
    ucs_status_t status;
    int mr_access;

    /* With a window the MR admits nothing remote: only the window, bound
     * to one QP, does. A window that admits remote writes needs an MR
     * that admits local ones. */
    mr_access = IBV_ACCESS_LOCAL_WRITE |
                (dev->use_mw ? IBV_ACCESS_MW_BIND : access);
    status    = uct_hipower_md_reg_internal(md, address, length, mr_access,
                                            what, &win->mr);
    if (status != UCS_OK) {
        return status;
    }

    win->access = access;
    if (!dev->use_mw) {
        win->mw   = NULL;
        win->rkey = win->mr->rkey;
        return UCS_OK;
    }

    win->mw = ibv_alloc_mw(md->pd, IBV_MW_TYPE_2);
    if (win->mw == NULL) {
        ucs_error("hipower %s: ibv_alloc_mw(type 2) for %s failed: %m "
                  "(UCX_HIPOWER_MEM_WINDOWS=n gives peers the MR's rkey "
                  "instead)", dev->dev_name, what);
        uct_hipower_md_dereg_internal(md, win->mr, what);
        return UCS_ERR_IO_ERROR;
    }

    /* The key the bind sets: known now, so that it can go into the
     * endpoint's address before the QP exists to bind on */
    win->rkey = ibv_inc_rkey(win->mw->rkey);
    return UCS_OK;
}

void uct_hipower_window_bind_wr(const uct_hipower_window_t *win,
                                struct ibv_send_wr *wr)
{
    ucs_assert(win->mw != NULL);
    /* Devices refuse a bind with anything else set (immediate data) */
    memset(wr, 0, sizeof(*wr));
    wr->opcode                          = IBV_WR_BIND_MW;
    wr->bind_mw.mw                      = win->mw;
    wr->bind_mw.rkey                    = win->rkey;
    wr->bind_mw.bind_info.mr            = win->mr;
    wr->bind_mw.bind_info.addr          = (uintptr_t)win->mr->addr;
    wr->bind_mw.bind_info.length        = win->mr->length;
    wr->bind_mw.bind_info.mw_access_flags = win->access;
}

void uct_hipower_window_close(const uct_hipower_window_dev_t *dev,
                              uct_hipower_window_t *win, const char *what)
{
    uct_hipower_md_t *md = dev->md;
    int ret;

    if (win->mw != NULL) {
        /* Invalidates the window wherever it is bound */
        ret = ibv_dealloc_mw(win->mw);
        if (ret != 0) {
            ucs_warn("hipower %s: ibv_dealloc_mw(%s) failed: %s",
                     dev->dev_name, what, strerror(ret));
        }
        win->mw = NULL;
    }
    uct_hipower_md_dereg_internal(md, win->mr, what);
    win->mr = NULL;
}
