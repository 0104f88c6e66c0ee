/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The hipower component as UCX sees it after the plugin is loaded: it is
 * registered once, offers one memory domain per verbs device, and rejects
 * what does not exist with UCX's status codes instead of crashing.
 */
#include "hipower_test.h"

#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>


static unsigned count_components(void)
{
    uct_component_h *components;
    unsigned num_components;

    ck_assert_int_eq(uct_query_components(&components, &num_components),
                     UCS_OK);
    uct_release_component_list(components);
    return num_components;
}

START_TEST(test_registers_one_component)
{
    unsigned before = count_components();

    ck_assert_ptr_null(hipower_test_find_component("hipower"));
    hipower_test_load_plugin();
    ck_assert_uint_eq(count_components(), before + 1);
    ck_assert_ptr_nonnull(hipower_test_find_component("hipower"));

    /* A second load of the same library must not register it again */
    hipower_test_load_plugin();
    ck_assert_uint_eq(count_components(), before + 1);
}
END_TEST

START_TEST(test_one_md_per_verbs_device)
{
    uct_component_attr_t attr;
    struct ibv_device **devices;
    uct_component_h component;
    int i, num_devices = 0;

    hipower_test_load_plugin();
    component = hipower_test_find_component("hipower");
    ck_assert_ptr_nonnull(component);

    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ck_assert_int_eq(uct_component_query(component, &attr), UCS_OK);

    devices = ibv_get_device_list(&num_devices);
    ck_assert_uint_eq(attr.md_resource_count, (unsigned)num_devices);
    if (num_devices > 0) {
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = calloc(num_devices, sizeof(*attr.md_resources));
        ck_assert_int_eq(uct_component_query(component, &attr), UCS_OK);
        for (i = 0; i < num_devices; ++i) {
            ck_assert_str_eq(attr.md_resources[i].md_name,
                             ibv_get_device_name(devices[i]));
        }
        free(attr.md_resources);
    }

    if (devices != NULL) {
        ibv_free_device_list(devices);
    }
}
END_TEST

static void check_register(uct_component_h component, uct_md_h md)
{
    const size_t length = 3 * 4096 + 100;
    uint32_t packed[2] = {0, 0xdeadbeef};
    uct_rkey_bundle_t bundle;
    uct_mem_h memh, memh2;
    char *buffer;

    buffer = malloc(length);
    ck_assert_ptr_nonnull(buffer);
    ck_assert_int_eq(uct_md_mem_reg(md, buffer, length, UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(md, memh, packed), UCS_OK);
    ck_assert_uint_eq(packed[1], 0xdeadbeef); /* 4 bytes, as advertised */
    ck_assert_int_eq(uct_rkey_unpack(component, packed, &bundle), UCS_OK);
    ck_assert_uint_eq(bundle.rkey, packed[0]);
    uct_rkey_release(component, &bundle);

    /* A second registration of a part of it is served too (cache or not) */
    ck_assert_int_eq(uct_md_mem_reg(md, buffer + 4096, 4096, UCT_MD_MEM_ACCESS_ALL,
                                    &memh2),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mem_dereg(md, memh2), UCS_OK);
    ck_assert_int_eq(uct_md_mem_dereg(md, memh), UCS_OK);
    free(buffer);
}

static uct_md_config_t *read_md_config(uct_component_h component)
{
    uct_md_config_t *config;

    ck_assert_int_eq(uct_md_config_read(component, NULL, NULL, &config),
                     UCS_OK);
    return config;
}

START_TEST(test_md_open_unknown_device)
{
    uct_component_h component;
    uct_md_config_t *config;
    uct_md_h md = NULL;

    hipower_test_load_plugin();
    component = hipower_test_find_component("hipower");
    ck_assert_ptr_nonnull(component);

    config = read_md_config(component);
    ck_assert_int_eq(uct_md_open(component, "no_such_dev0", config, &md),
                     UCS_ERR_NO_DEVICE);
    ck_assert_ptr_null(md);
    uct_config_release(config);
}
END_TEST

/* On the rig (or RDMA hardware) every device opens and registers memory:
 * the packed remote key unpacks to the same key, and deregistration works.
 * Without devices there is nothing to open, which
 * test_one_md_per_verbs_device already checks. */
START_TEST(test_md_open_every_device)
{
    uct_component_attr_t attr;
    uct_component_h component;
    uct_md_config_t *config;
    uct_md_attr_t md_attr;
    unsigned i;
    uct_md_h md;

    hipower_test_load_plugin();
    component = hipower_test_find_component("hipower");
    ck_assert_ptr_nonnull(component);

    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ck_assert_int_eq(uct_component_query(component, &attr), UCS_OK);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = calloc(attr.md_resource_count + 1,
                               sizeof(*attr.md_resources));
    ck_assert_int_eq(uct_component_query(component, &attr), UCS_OK);

    config = read_md_config(component);
    for (i = 0; i < attr.md_resource_count; ++i) {
        ck_assert_int_eq(uct_md_open(component, attr.md_resources[i].md_name,
                                     config, &md),
                         UCS_OK);
        ck_assert_int_eq(uct_md_query(md, &md_attr), UCS_OK);
        ck_assert_uint_eq(md_attr.cap.flags & (UCT_MD_FLAG_REG |
                                               UCT_MD_FLAG_NEED_RKEY),
                          UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY);
        ck_assert_uint_eq(md_attr.rkey_packed_size, sizeof(uint32_t));
        check_register(component, md);
        uct_md_close(md);
    }

    uct_config_release(config);
    free(attr.md_resources);
}
END_TEST

Suite *hipower_component_suite(void)
{
    Suite *suite = suite_create("component");
    TCase *tcase = tcase_create("registration");

    /* No fork: the first test checks the state before the plugin loads */
    tcase_add_test(tcase, test_registers_one_component);
    tcase_add_test(tcase, test_one_md_per_verbs_device);
    tcase_add_test(tcase, test_md_open_unknown_device);
    tcase_add_test(tcase, test_md_open_every_device);
    suite_add_tcase(suite, tcase);
    return suite;
}
