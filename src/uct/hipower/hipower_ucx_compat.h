/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef HIPOWER_UCX_COMPAT_H_
#define HIPOWER_UCX_COMPAT_H_

/*
 * The one place that knows how UCT's internal API differs between the UCX
 * versions hipower builds against (1.13.1, 1.18.1, 1.22.0). configure
 * probes the given source tree for each change (hipower_ucx_features.h,
 * named after what changed, not after a version); this header turns each
 * into one spelling the transport uses everywhere.
 */

#include "hipower_ucx_features.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/memory/rcache.h>
#include <ucs/time/time.h>
#if HIPOWER_UCX_PTR_ARITH_H
/* ucs_align_up_pow2() moved out of ucs/sys/math.h */
#  include <ucs/sys/ptr_arith.h>
#endif


/*
 * UCX's generic stubs (ucs_empty_function*) cast to an op's type. Since UCX
 * 1.22 they are declared with (void) parameters, and GCC's
 * -Wcast-function-type accepts a cast between unrelated function types only
 * through void (*)(void).
 */
#define HIPOWER_UCX_FUNC(_type, _func) ((_type)(void (*)(void))(_func))


/*
 * Interface memory pools: the configuration gained a maximal chunk size and
 * a growth factor (1.14), and ucs_mpool_init() takes a parameter struct.
 * The chunk defaults are those of UCX's ib transports.
 */
#if HIPOWER_UCX_MPOOL_CHUNK_CONFIG
#  define HIPOWER_UCX_IFACE_MPOOL_CONFIG_FIELDS(_prefix, _dfl_max, _dfl_grow, \
                                               _name, _offset, _desc) \
    UCT_IFACE_MPOOL_CONFIG_FIELDS(_prefix, _dfl_max, _dfl_grow, 128m, 1.0, \
                                  _name, _offset, _desc)
#else
#  define HIPOWER_UCX_IFACE_MPOOL_CONFIG_FIELDS(_prefix, _dfl_max, _dfl_grow, \
                                               _name, _offset, _desc) \
    UCT_IFACE_MPOOL_CONFIG_FIELDS(_prefix, _dfl_max, _dfl_grow, _name, \
                                  _offset, _desc)
#endif

static inline ucs_status_t
hipower_ucx_mpool_init(ucs_mpool_t *mp, size_t elem_size, size_t align_offset,
                       size_t alignment, unsigned elems_per_chunk,
                       unsigned max_elems, ucs_mpool_ops_t *ops,
                       const char *name)
{
#if HIPOWER_UCX_MPOOL_PARAMS
    ucs_mpool_params_t params;

    ucs_mpool_params_reset(&params);
    params.elem_size       = elem_size;
    params.align_offset    = align_offset;
    params.alignment       = alignment;
    params.elems_per_chunk = elems_per_chunk;
    params.max_elems       = max_elems;
    params.ops             = ops;
    params.name            = name;
    return ucs_mpool_init(&params, mp);
#else
    return ucs_mpool_init(mp, 0, elem_size, align_offset, alignment,
                          elems_per_chunk, max_elems, ops, name);
#endif
}


/*
 * Memory domain ops. query takes uct_md_attr_v2_t (1.15); mem_reg a
 * parameter struct instead of flags; mkey_pack the address and length of
 * the region; is_sockaddr_accessible is gone and mem_attach new.
 */
#if HIPOWER_UCX_MD_ATTR_V2
typedef uct_md_attr_v2_t hipower_ucx_md_attr_t;
#else
typedef uct_md_attr_t hipower_ucx_md_attr_t;
#endif

#if HIPOWER_UCX_MEM_REG_PARAMS
#  define HIPOWER_UCX_MEM_REG_ARG(_params) const uct_md_mem_reg_params_t *_params
#  define HIPOWER_UCX_MEM_REG_FLAGS(_params) \
    UCT_MD_MEM_REG_FIELD_VALUE(_params, flags, FIELD_FLAGS, 0)
#else
#  define HIPOWER_UCX_MEM_REG_ARG(_params)   unsigned _params
#  define HIPOWER_UCX_MEM_REG_FLAGS(_params) (_params)
#endif

#if HIPOWER_UCX_MKEY_PACK_ADDRESS
#  define HIPOWER_UCX_MKEY_PACK_RANGE_ARGS void *address, size_t length,
#else
#  define HIPOWER_UCX_MKEY_PACK_RANGE_ARGS
#endif

#if HIPOWER_UCX_MD_SOCKADDR_OP
#  define HIPOWER_UCX_MD_OPS_SOCKADDR \
    .is_sockaddr_accessible = HIPOWER_UCX_FUNC( \
            uct_md_is_sockaddr_accessible_func_t, \
            ucs_empty_function_return_zero_int),
#else
#  define HIPOWER_UCX_MD_OPS_SOCKADDR
#endif

#if HIPOWER_UCX_MD_MEM_ATTACH_OP
#  define HIPOWER_UCX_MD_OPS_MEM_ATTACH \
    .mem_attach = HIPOWER_UCX_FUNC(uct_md_mem_attach_func_t, \
                                   ucs_empty_function_return_unsupported),
#else
#  define HIPOWER_UCX_MD_OPS_MEM_ATTACH
#endif

/* 1.22: packing a memory element for device-initiated transfers */
#if HIPOWER_UCX_MD_MEM_ELEM_PACK_OP
#  define HIPOWER_UCX_MD_OPS_MEM_ELEM_PACK \
    .mem_elem_pack = HIPOWER_UCX_FUNC(uct_md_mem_elem_pack_func_t, \
                                      ucs_empty_function_return_unsupported),
#else
#  define HIPOWER_UCX_MD_OPS_MEM_ELEM_PACK
#endif


/*
 * Component: rkey_unpack takes a parameter struct (1.20), and rkey_compare
 * is required (UCP calls it unchecked since 1.16).
 */
#if HIPOWER_UCX_RKEY_UNPACK_PARAMS
#  define HIPOWER_UCX_RKEY_UNPACK_PARAMS_ARG const uct_rkey_unpack_params_t *params,
#else
#  define HIPOWER_UCX_RKEY_UNPACK_PARAMS_ARG
#endif

#if HIPOWER_UCX_RKEY_COMPARE
#  define HIPOWER_UCX_COMPONENT_RKEY_COMPARE .rkey_compare = uct_base_rkey_compare,
#else
#  define HIPOWER_UCX_COMPONENT_RKEY_COMPARE
#endif


/* Transports that reach other hosts say so since UCX 1.18 (UCP's
 * inter-node lanes) */
#if HIPOWER_UCX_IFACE_FLAG_INTER_NODE
#  define HIPOWER_UCX_FLAG_INTER_NODE UCT_IFACE_FLAG_INTER_NODE
#else
#  define HIPOWER_UCX_FLAG_INTER_NODE 0
#endif


/*
 * Registration cache: its configuration moved from UCT to UCS
 * (uct_md_rcache_config_t -> ucs_rcache_config_t), the lookup overhead
 * became a time with "auto", the alignment moved from the cache's
 * parameters to each ucs_rcache_get(), and merge became a required op.
 */
#if HIPOWER_UCX_RCACHE_CONFIG_UCS
typedef ucs_rcache_config_t hipower_ucx_rcache_config_t;
#  define HIPOWER_UCX_RCACHE_CONFIG_TABLE ucs_config_rcache_table
#  define hipower_ucx_rcache_set_params   ucs_rcache_set_params

/* The lookup cost UCX itself assumes for "auto" (1.13's
 * uct_md_rcache_overhead() on x86) */
static inline double
hipower_ucx_rcache_overhead(const hipower_ucx_rcache_config_t *config)
{
    return ucs_time_units_to_sec(config->overhead, 180e-9);
}
#else
typedef uct_md_rcache_config_t hipower_ucx_rcache_config_t;
#  define HIPOWER_UCX_RCACHE_CONFIG_TABLE uct_md_config_rcache_table
#  define hipower_ucx_rcache_set_params   uct_md_set_rcache_params
#  define hipower_ucx_rcache_overhead     uct_md_rcache_overhead
#endif

/* Since 1.22 the cache locks its LRU list only when told that nothing
 * else serializes its users; hipower's MD has no lock of its own */
#if HIPOWER_UCX_RCACHE_NEED_LRU_LOCK
#  define HIPOWER_UCX_RCACHE_FLAGS UCS_RCACHE_FLAG_NEED_LRU_LOCK
#else
#  define HIPOWER_UCX_RCACHE_FLAGS 0
#endif

/* Registrations are page-aligned: the cache's alignment where the cache
 * takes one, each lookup's where the lookup does */
static inline void
hipower_ucx_rcache_set_alignment(ucs_rcache_params_t *params, size_t align)
{
#if !HIPOWER_UCX_RCACHE_GET_ALIGNMENT
    params->max_alignment = align;
#endif
}

static inline ucs_status_t
hipower_ucx_rcache_get(ucs_rcache_t *rcache, void *address, size_t length,
                       size_t align, int prot, void *arg,
                       ucs_rcache_region_t **region_p)
{
#if HIPOWER_UCX_RCACHE_GET_ALIGNMENT
    return ucs_rcache_get(rcache, address, length, align, prot, arg, region_p);
#else
    return ucs_rcache_get(rcache, address, length, prot, arg, region_p);
#endif
}

#if HIPOWER_UCX_RCACHE_MERGE_OP
/* A merged region is registered anew by mem_reg: nothing to carry over */
static inline void hipower_ucx_rcache_merge(void *context, ucs_rcache_t *rcache,
                                            void *arg,
                                            ucs_rcache_region_t *region)
{
}
#  define HIPOWER_UCX_RCACHE_OPS_MERGE .merge = hipower_ucx_rcache_merge,
#else
#  define HIPOWER_UCX_RCACHE_OPS_MERGE
#endif

#endif
