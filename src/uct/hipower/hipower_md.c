/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_md.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <ucs/sys/stubs.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <ucs/sys/sys.h>


ucs_config_field_t uct_hipower_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_hipower_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"RCACHE", "try",
     "Cache memory registrations of user buffers (zero-copy sends, RMA).\n"
     "  try - use the registration cache, fall back to direct registration\n"
     "  yes - use the registration cache or fail\n"
     "  no  - register and deregister on every call",
     ucs_offsetof(uct_hipower_md_config_t, rcache_enable),
     UCS_CONFIG_TYPE_TERNARY},

    {"", "", NULL,
     ucs_offsetof(uct_hipower_md_config_t, rcache),
     UCS_CONFIG_TYPE_TABLE(HIPOWER_UCX_RCACHE_CONFIG_TABLE)},

    {"MEM_REG_OVERHEAD", "16us",
     "Cost of one direct memory registration, reported to UCP when the\n"
     "registration cache is off (the same estimate UCX uses for ib devices)",
     ucs_offsetof(uct_hipower_md_config_t, uncached_reg_cost.c),
     UCS_CONFIG_TYPE_TIME},

    {"MEM_REG_GROWTH", "0.06ns",
     "Cost of direct registration per byte, when the registration cache is off",
     ucs_offsetof(uct_hipower_md_config_t, uncached_reg_cost.m),
     UCS_CONFIG_TYPE_TIME},

    {NULL}
};


ucs_status_t
uct_hipower_query_md_resources(uct_component_t *component,
                               uct_md_resource_desc_t **resources_p,
                               unsigned *num_resources_p)
{
    uct_md_resource_desc_t *resources;
    struct ibv_device **device_list;
    int i, num_devices;

    device_list = ibv_get_device_list(&num_devices);
    if ((device_list == NULL) || (num_devices == 0)) {
        ucs_debug("hipower: no verbs devices found (%s)",
                  (device_list == NULL) ? strerror(errno) : "empty list");
        if (device_list != NULL) {
            ibv_free_device_list(device_list);
        }
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }

    resources = ucs_calloc(num_devices, sizeof(*resources),
                           "hipower md resources");
    if (resources == NULL) {
        ibv_free_device_list(device_list);
        return UCS_ERR_NO_MEMORY;
    }

    for (i = 0; i < num_devices; ++i) {
        ucs_snprintf_zero(resources[i].md_name, sizeof(resources[i].md_name),
                          "%s", ibv_get_device_name(device_list[i]));
    }

    ibv_free_device_list(device_list);
    *resources_p     = resources;
    *num_resources_p = num_devices;
    return UCS_OK;
}

static ucs_status_t uct_hipower_reg_mr(uct_hipower_md_t *md, void *address,
                                       size_t length, int access, int silent,
                                       const char *what, struct ibv_mr **mr_p)
{
    struct ibv_mr *mr = ibv_reg_mr(md->pd, address, length, access);

    if (mr == NULL) {
        /* The registration cache probes and retries; it asks for silence */
        ucs_log(silent ? UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_ERROR,
                "hipower %s: ibv_reg_mr(%s, address %p, length %zu, access "
                "0x%x) failed: %m%s", md->name, what, address, length, access,
                (errno == ENOMEM) ? " (check 'ulimit -l')" : "");
        return UCS_ERR_IO_ERROR;
    }

    *mr_p = mr;
    return UCS_OK;
}

static void uct_hipower_dereg_mr(uct_hipower_md_t *md, struct ibv_mr *mr,
                                 const char *what)
{
    int ret = ibv_dereg_mr(mr);

    if (ret != 0) {
        ucs_warn("hipower %s: ibv_dereg_mr(%s) failed: %s", md->name, what,
                 strerror(ret));
    }
}

ucs_status_t uct_hipower_md_reg_internal(uct_hipower_md_t *md, void *address,
                                         size_t length, int access,
                                         const char *what,
                                         struct ibv_mr **mr_p)
{
    return uct_hipower_reg_mr(md, address, length, access, 0, what, mr_p);
}

void uct_hipower_md_dereg_internal(uct_hipower_md_t *md, struct ibv_mr *mr,
                                   const char *what)
{
    uct_hipower_dereg_mr(md, mr, what);
}

static void uct_hipower_md_close(uct_md_h uct_md)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    int ret;

    uct_hipower_md_async_cleanup(&md->async);
    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
    }

    ret = ibv_dealloc_pd(md->pd);
    if (ret != 0) {
        ucs_warn("hipower %s: ibv_dealloc_pd() failed: %s", md->name,
                 strerror(ret));
    }

    ret = ibv_close_device(md->ibv_context);
    if (ret != 0) {
        ucs_warn("hipower %s: ibv_close_device() failed: %s", md->name,
                 strerror(errno));
    }

    ucs_free(md);
}

/* Host memory only, registered by the device; as UCX's ib MD no allocation
 * of its own, but no bound either (UCX's tests size their buffers by it) */
#define UCT_HIPOWER_MD_FLAGS \
    (UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_NEED_RKEY)

static ucs_status_t uct_hipower_md_query(uct_md_h uct_md,
                                         hipower_ucx_md_attr_t *md_attr)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);

#if HIPOWER_UCX_MD_ATTR_V2
    uct_md_base_md_query(md_attr);
    md_attr->flags            = UCT_HIPOWER_MD_FLAGS;
    md_attr->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    md_attr->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* UCP keeps a registration cache of its own unless the MD caches */
    md_attr->cache_mem_types  = (md->rcache != NULL) ?
                                UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0;
    md_attr->max_alloc        = ULONG_MAX;
    md_attr->max_reg          = ULONG_MAX;
    /* Unique per device, as UCX's ib MD: component name, then the GUID */
    ucs_snprintf_zero(md_attr->global_id, sizeof(md_attr->global_id),
                      "%s", md->super.component->name);
    memcpy(md_attr->global_id + sizeof(md_attr->global_id) - sizeof(uint64_t),
           &md->guid, sizeof(md->guid));
#else
    memset(md_attr, 0, sizeof(*md_attr));
    md_attr->cap.flags            = UCT_HIPOWER_MD_FLAGS;
    md_attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    md_attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    md_attr->cap.max_alloc        = ULONG_MAX;
    md_attr->cap.max_reg          = ULONG_MAX;
    memset(&md_attr->local_cpus, 0xff, sizeof(md_attr->local_cpus));
#endif
    md_attr->rkey_packed_size     = sizeof(uint32_t);
    md_attr->reg_cost             = md->reg_cost;
    return UCS_OK;
}

static ucs_status_t uct_hipower_mem_reg(uct_md_h uct_md, void *address,
                                        size_t length,
                                        HIPOWER_UCX_MEM_REG_ARG(params),
                                        uct_mem_h *memh_p)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    unsigned flags       = HIPOWER_UCX_MEM_REG_FLAGS(params);
    uct_hipower_mem_t *mem;
    ucs_status_t status;

    mem = ucs_malloc(sizeof(*mem), "hipower memh");
    if (mem == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_hipower_reg_mr(md, address, length,
                                UCT_HIPOWER_MD_ACCESS_FLAGS,
                                flags & UCT_MD_MEM_FLAG_HIDE_ERRORS,
                                "user buffer", &mem->mr);
    if (status != UCS_OK) {
        ucs_free(mem);
        return status;
    }

    *memh_p = mem;
    return UCS_OK;
}

static ucs_status_t
uct_hipower_mem_dereg(uct_md_h uct_md, const uct_md_mem_dereg_params_t *params)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    uct_hipower_mem_t *mem;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    mem = params->memh;
    uct_hipower_dereg_mr(md, mem->mr, "user buffer");
    ucs_free(mem);
    return UCS_OK;
}

static ucs_status_t uct_hipower_mem_rcache_reg(uct_md_h uct_md, void *address,
                                               size_t length,
                                               HIPOWER_UCX_MEM_REG_ARG(params),
                                               uct_mem_h *memh_p)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    unsigned flags       = HIPOWER_UCX_MEM_REG_FLAGS(params);
    ucs_rcache_region_t *rregion;
    ucs_status_t status;

    status = hipower_ucx_rcache_get(md->rcache, address, length,
                                    ucs_get_page_size(), PROT_READ | PROT_WRITE,
                                    &flags, &rregion);
    if (status != UCS_OK) {
        return status;
    }

    *memh_p = &ucs_derived_of(rregion, uct_hipower_rcache_region_t)->mem;
    return UCS_OK;
}

static ucs_status_t
uct_hipower_mem_rcache_dereg(uct_md_h uct_md,
                             const uct_md_mem_dereg_params_t *params)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    uct_hipower_rcache_region_t *region;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    region = ucs_container_of(params->memh, uct_hipower_rcache_region_t, mem);
    ucs_rcache_region_put(md->rcache, &region->super);
    return UCS_OK;
}

static ucs_status_t uct_hipower_mkey_pack(uct_md_h uct_md, uct_mem_h memh,
                                          HIPOWER_UCX_MKEY_PACK_RANGE_ARGS
                                          const uct_md_mkey_pack_params_t *params,
                                          void *rkey_buffer)
{
    *(uint32_t*)rkey_buffer = ((uct_hipower_mem_t*)memh)->mr->rkey;
    return UCS_OK;
}

ucs_status_t uct_hipower_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     HIPOWER_UCX_RKEY_UNPACK_PARAMS_ARG
                                     uct_rkey_t *rkey_p, void **handle_p)
{
    *rkey_p   = *(const uint32_t*)rkey_buffer;
    *handle_p = NULL;
    return UCS_OK;
}

/* The two MD op tables differ only in how memory is registered */
#define UCT_HIPOWER_MD_OPS(_mem_reg, _mem_dereg) { \
    .close              = uct_hipower_md_close, \
    .query              = uct_hipower_md_query, \
    .mem_alloc          = HIPOWER_UCX_FUNC(uct_md_mem_alloc_func_t, \
                                  ucs_empty_function_return_unsupported), \
    .mem_free           = HIPOWER_UCX_FUNC(uct_md_mem_free_func_t, \
                                  ucs_empty_function_return_unsupported), \
    .mem_advise         = HIPOWER_UCX_FUNC(uct_md_mem_advise_func_t, \
                                  ucs_empty_function_return_unsupported), \
    .mem_reg            = _mem_reg, \
    .mem_dereg          = _mem_dereg, \
    .mem_query          = HIPOWER_UCX_FUNC(uct_md_mem_query_func_t, \
                                  ucs_empty_function_return_unsupported), \
    .mkey_pack          = uct_hipower_mkey_pack, \
    HIPOWER_UCX_MD_OPS_SOCKADDR \
    HIPOWER_UCX_MD_OPS_MEM_ATTACH \
    HIPOWER_UCX_MD_OPS_MEM_ELEM_PACK \
    .detect_memory_type = HIPOWER_UCX_FUNC(uct_md_detect_memory_type_func_t, \
                                  ucs_empty_function_return_unsupported), \
}

static uct_md_ops_t uct_hipower_md_ops =
        UCT_HIPOWER_MD_OPS(uct_hipower_mem_reg, uct_hipower_mem_dereg);

static uct_md_ops_t uct_hipower_md_rcache_ops =
        UCT_HIPOWER_MD_OPS(uct_hipower_mem_rcache_reg,
                           uct_hipower_mem_rcache_dereg);

static ucs_status_t
uct_hipower_rcache_mem_reg_cb(void *context, ucs_rcache_t *rcache, void *arg,
                              ucs_rcache_region_t *rregion, uint16_t flags)
{
    uct_hipower_rcache_region_t *region =
            ucs_derived_of(rregion, uct_hipower_rcache_region_t);
    uct_hipower_md_t *md = context;
    unsigned reg_flags   = *(unsigned*)arg;

    return uct_hipower_reg_mr(md, (void*)region->super.super.start,
                              region->super.super.end -
                              region->super.super.start,
                              UCT_HIPOWER_MD_ACCESS_FLAGS,
                              (flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS) ||
                              (reg_flags & UCT_MD_MEM_FLAG_HIDE_ERRORS),
                              "user buffer", &region->mem.mr);
}

static void uct_hipower_rcache_mem_dereg_cb(void *context, ucs_rcache_t *rcache,
                                            ucs_rcache_region_t *rregion)
{
    uct_hipower_rcache_region_t *region =
            ucs_derived_of(rregion, uct_hipower_rcache_region_t);

    uct_hipower_dereg_mr(context, region->mem.mr, "user buffer");
    region->mem.mr = NULL;
}

static void uct_hipower_rcache_dump_region_cb(void *context,
                                              ucs_rcache_t *rcache,
                                              ucs_rcache_region_t *rregion,
                                              char *buf, size_t max)
{
    uct_hipower_rcache_region_t *region =
            ucs_derived_of(rregion, uct_hipower_rcache_region_t);

    snprintf(buf, max, "lkey 0x%x rkey 0x%x", region->mem.mr->lkey,
             region->mem.mr->rkey);
}

static ucs_rcache_ops_t uct_hipower_rcache_ops = {
    HIPOWER_UCX_RCACHE_OPS_MERGE
    .mem_reg     = uct_hipower_rcache_mem_reg_cb,
    .mem_dereg   = uct_hipower_rcache_mem_dereg_cb,
    .dump_region = uct_hipower_rcache_dump_region_cb
};

static ucs_status_t
uct_hipower_md_init_rcache(uct_hipower_md_t *md,
                           const uct_hipower_md_config_t *config)
{
    ucs_rcache_params_t params;
    ucs_status_t status;

    md->super.ops = &uct_hipower_md_ops;
    md->reg_cost  = config->uncached_reg_cost;
    md->rcache    = NULL;
    if (config->rcache_enable == UCS_NO) {
        return UCS_OK;
    }

    hipower_ucx_rcache_set_params(&params, &config->rcache);
    hipower_ucx_rcache_set_alignment(&params, ucs_get_page_size());
    params.region_struct_size = sizeof(uct_hipower_rcache_region_t);
    params.flags             |= HIPOWER_UCX_RCACHE_FLAGS;
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.context            = md;
    params.ops                = &uct_hipower_rcache_ops;
    status = ucs_rcache_create(&params, md->name, NULL, &md->rcache);
    if (status != UCS_OK) {
        md->rcache = NULL;
        if (config->rcache_enable == UCS_YES) {
            ucs_error("hipower %s: cannot create the registration cache "
                      "(UCX_HIPOWER_RCACHE=yes): %s", md->name,
                      ucs_status_string(status));
            return status;
        }
        ucs_debug("hipower %s: no registration cache (%s), registering "
                  "directly", md->name, ucs_status_string(status));
        return UCS_OK;
    }

    md->super.ops = &uct_hipower_md_rcache_ops;
    md->reg_cost  = ucs_linear_func_make(
            hipower_ucx_rcache_overhead(&config->rcache), 0);
    return UCS_OK;
}

static struct ibv_device *
uct_hipower_md_find_device(struct ibv_device **device_list, int num_devices,
                           const char *md_name)
{
    int i;

    for (i = 0; i < num_devices; ++i) {
        if (!strcmp(ibv_get_device_name(device_list[i]), md_name)) {
            return device_list[i];
        }
    }

    return NULL;
}

ucs_status_t uct_hipower_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *uct_md_config,
                                 uct_md_h *md_p)
{
    const uct_hipower_md_config_t *config =
            ucs_derived_of(uct_md_config, uct_hipower_md_config_t);
    struct ibv_device **device_list;
    struct ibv_device *device;
    uct_hipower_md_t *md;
    ucs_status_t status;
    int num_devices;

    device_list = ibv_get_device_list(&num_devices);
    if (device_list == NULL) {
        ucs_debug("hipower: cannot open md %s: ibv_get_device_list() failed: %m",
                  md_name);
        return UCS_ERR_NO_DEVICE;
    }

    device = uct_hipower_md_find_device(device_list, num_devices, md_name);
    if (device == NULL) {
        ucs_debug("hipower: cannot open md %s: no such verbs device", md_name);
        status = UCS_ERR_NO_DEVICE;
        goto out_free_list;
    }

    md = ucs_calloc(1, sizeof(*md), "hipower md");
    if (md == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto out_free_list;
    }

    ucs_snprintf_zero(md->name, sizeof(md->name), "%s", md_name);
    md->super.component = component;
    md->guid            = ibv_get_device_guid(device);
    md->ibv_context     = ibv_open_device(device);
    if (md->ibv_context == NULL) {
        ucs_error("hipower %s: ibv_open_device() failed: %m", md_name);
        status = UCS_ERR_IO_ERROR;
        goto err_free_md;
    }

    md->pd = ibv_alloc_pd(md->ibv_context);
    if (md->pd == NULL) {
        ucs_error("hipower %s: ibv_alloc_pd() failed: %m", md_name);
        status = UCS_ERR_IO_ERROR;
        goto err_close_device;
    }

    status = uct_hipower_md_init_rcache(md, config);
    if (status != UCS_OK) {
        goto err_dealloc_pd;
    }

    status = uct_hipower_md_async_init(&md->async, md->ibv_context, md->name);
    if (status != UCS_OK) {
        goto err_destroy_rcache;
    }

    *md_p = &md->super;
    ucs_debug("hipower %s: memory domain opened%s", md_name,
              (md->rcache != NULL) ? " with registration cache" : "");
    status = UCS_OK;
    goto out_free_list;

err_destroy_rcache:
    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
    }
err_dealloc_pd:
    ibv_dealloc_pd(md->pd);
err_close_device:
    ibv_close_device(md->ibv_context);
err_free_md:
    ucs_free(md);
out_free_list:
    ibv_free_device_list(device_list);
    return status;
}

int uct_hipower_md_query_device(uct_hipower_md_t *md,
                                struct ibv_device_attr *attr)
{
    return ibv_query_device(md->ibv_context, attr);
}

int uct_hipower_md_query_port(uct_hipower_md_t *md, uint8_t port,
                              struct ibv_port_attr *attr)
{
    return ibv_query_port(md->ibv_context, port, attr);
}

int uct_hipower_md_query_gid(uct_hipower_md_t *md, uint8_t port,
                             unsigned gid_index, union ibv_gid *gid)
{
    return ibv_query_gid(md->ibv_context, port, gid_index, gid);
}
