/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_MD_H_
#define UCT_HIPOWER_MD_H_

#include "hipower_md_async.h"
#include "hipower_ucx_compat.h"

#include <uct/base/uct_md.h>
#include <ucs/memory/rcache.h>
#include <ucs/type/spinlock.h>
#include <ucs/type/status.h>
#include <infiniband/verbs.h>


/* Registration for user buffers: zero-copy sources, RMA and atomic targets */
#define UCT_HIPOWER_MD_ACCESS_FLAGS  (IBV_ACCESS_LOCAL_WRITE  | \
                                      IBV_ACCESS_REMOTE_WRITE | \
                                      IBV_ACCESS_REMOTE_READ  | \
                                      IBV_ACCESS_REMOTE_ATOMIC)


/**
 * Memory handle: what a zero-copy operation needs (lkey) and what
 * mkey_pack exports (rkey). With the registration cache it lives inside the
 * cache's region; without it, on its own.
 */
typedef struct uct_hipower_mem {
    struct ibv_mr            *mr;
} uct_hipower_mem_t;


typedef struct uct_hipower_rcache_region {
    ucs_rcache_region_t      super;
    uct_hipower_mem_t        mem;
} uct_hipower_rcache_region_t;


/**
 * hipower memory domain: one per verbs device. It owns the device context and
 * the protection domain that all of the device's hipower interfaces share.
 */
typedef struct uct_hipower_md {
    uct_md_t                 super;
    struct ibv_context       *ibv_context; /* Opened verbs device */
    uint64_t                 guid;         /* Node GUID (MD global id) */
    struct ibv_pd            *pd;          /* Protection domain */
    ucs_rcache_t             *rcache;      /* Registration cache, or NULL */
    ucs_linear_func_t        reg_cost;     /* Reported registration cost */
    char                     name[UCT_MD_NAME_MAX];

    /* Device events (hipower_md_async.h) */
    uct_hipower_md_async_t   async;
} uct_hipower_md_t;


typedef struct uct_hipower_md_config {
    uct_md_config_t          super;
    ucs_ternary_auto_value_t rcache_enable;
    hipower_ucx_rcache_config_t rcache;
    ucs_linear_func_t        uncached_reg_cost;
} uct_hipower_md_config_t;


extern uct_component_t uct_hipower_component;
extern ucs_config_field_t uct_hipower_md_config_table[];


ucs_status_t
uct_hipower_query_md_resources(uct_component_t *component,
                               uct_md_resource_desc_t **resources_p,
                               unsigned *num_resources_p);

ucs_status_t uct_hipower_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *config,
                                 uct_md_h *md_p);

ucs_status_t uct_hipower_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     HIPOWER_UCX_RKEY_UNPACK_PARAMS_ARG
                                     uct_rkey_t *rkey_p, void **handle_p);

/**
 * Registers memory the transport itself exposes (slot arena, bitmaps) with
 * exactly @a access; logs an error that names the device and @a what.
 */
ucs_status_t uct_hipower_md_reg_internal(uct_hipower_md_t *md, void *address,
                                         size_t length, int access,
                                         const char *what,
                                         struct ibv_mr **mr_p);

void uct_hipower_md_dereg_internal(uct_hipower_md_t *md, struct ibv_mr *mr,
                                   const char *what);

/* What the device, one of its ports, or a GID of the port is; 0 or an
 * errno value, as libibverbs returns it (the caller names what failed) */
int uct_hipower_md_query_device(uct_hipower_md_t *md,
                                struct ibv_device_attr *attr);
int uct_hipower_md_query_port(uct_hipower_md_t *md, uint8_t port,
                              struct ibv_port_attr *attr);
int uct_hipower_md_query_gid(uct_hipower_md_t *md, uint8_t port,
                             unsigned gid_index, union ibv_gid *gid);


static inline uint32_t uct_hipower_memh_lkey(uct_mem_h memh)
{
    return ((uct_hipower_mem_t*)memh)->mr->lkey;
}

#endif
