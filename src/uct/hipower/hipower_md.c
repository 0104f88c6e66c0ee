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


ucs_config_field_t uct_hipower_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_hipower_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

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

static void uct_hipower_md_close(uct_md_h uct_md)
{
    uct_hipower_md_t *md = ucs_derived_of(uct_md, uct_hipower_md_t);
    int ret;

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

static ucs_status_t uct_hipower_md_query(uct_md_h uct_md,
                                         uct_md_attr_t *md_attr)
{
    /* Memory registration arrives with the data path; until then the MD
     * advertises no capability rather than one it cannot honour. */
    memset(md_attr, 0, sizeof(*md_attr));
    md_attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    md_attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&md_attr->local_cpus, 0xff, sizeof(md_attr->local_cpus));
    return UCS_OK;
}

static uct_md_ops_t uct_hipower_md_ops = {
    .close                  = uct_hipower_md_close,
    .query                  = uct_hipower_md_query,
    .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
    .mem_dereg              = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
    .mem_query              = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack              = (uct_md_mkey_pack_func_t)ucs_empty_function_return_unsupported,
    .is_sockaddr_accessible = ucs_empty_function_return_zero_int,
    .detect_memory_type     = ucs_empty_function_return_unsupported,
};

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
                                 const uct_md_config_t *config,
                                 uct_md_h *md_p)
{
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
    md->ibv_context = ibv_open_device(device);
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

    md->super.ops       = &uct_hipower_md_ops;
    md->super.component = component;
    *md_p               = &md->super;
    ucs_debug("hipower %s: memory domain opened", md_name);
    status = UCS_OK;
    goto out_free_list;

err_close_device:
    ibv_close_device(md->ibv_context);
err_free_md:
    ucs_free(md);
out_free_list:
    ibv_free_device_list(device_list);
    return status;
}
