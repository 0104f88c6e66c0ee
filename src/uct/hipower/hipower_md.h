/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_MD_H_
#define UCT_HIPOWER_MD_H_

#include <uct/base/uct_md.h>
#include <infiniband/verbs.h>


/**
 * hipower memory domain: one per verbs device. It owns the device context and
 * the protection domain that all of the device's hipower interfaces share.
 */
typedef struct uct_hipower_md {
    uct_md_t                 super;
    struct ibv_context       *ibv_context; /* Opened verbs device */
    struct ibv_pd            *pd;          /* Protection domain */
    char                     name[UCT_MD_NAME_MAX];
} uct_hipower_md_t;


typedef struct uct_hipower_md_config {
    uct_md_config_t          super;
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

#endif
