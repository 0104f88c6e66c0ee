/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "hipower_md.h"
#include "hipower_ucx_compat.h"

#include <uct/base/uct_component.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/stubs.h>
#include <ucs/type/status.h>


uct_component_t uct_hipower_component = {
    .query_md_resources = uct_hipower_query_md_resources,
    .md_open            = uct_hipower_md_open,
    .cm_open            = HIPOWER_UCX_FUNC(uct_component_cm_open_func_t,
                                    ucs_empty_function_return_unsupported),
    .rkey_unpack        = uct_hipower_rkey_unpack,
    .rkey_ptr           = HIPOWER_UCX_FUNC(uct_component_rkey_ptr_func_t,
                                    ucs_empty_function_return_unsupported),
    .rkey_release       = HIPOWER_UCX_FUNC(uct_component_rkey_release_func_t,
                                    ucs_empty_function_return_success),
    HIPOWER_UCX_COMPONENT_RKEY_COMPARE
    .name               = "hipower",
    .md_config          = {
        .name           = "hipower memory domain",
        .prefix         = "HIPOWER_",
        .table          = uct_hipower_md_config_table,
        .size           = sizeof(uct_hipower_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(
                                  &uct_hipower_component),
    .flags              = 0,
    .md_vfs_init        = HIPOWER_UCX_FUNC(uct_component_md_vfs_init_func_t,
                                           ucs_empty_function)
};
