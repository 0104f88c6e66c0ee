/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void hipower_test_load_plugin(void)
{
    /* RTLD_NODELETE: UCX 1.13 never unlinks a component from its global
     * list, so the library must stay mapped for the life of the process. */
    void *handle = dlopen(HIPOWER_TEST_PLUGIN,
                          RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);

    ck_assert_msg(handle != NULL, "cannot load %s: %s", HIPOWER_TEST_PLUGIN,
                  dlerror());
}

uct_component_h hipower_test_find_component(const char *name)
{
    uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
    uct_component_h *components, found = NULL;
    unsigned i, num_components;

    ck_assert_int_eq(uct_query_components(&components, &num_components),
                     UCS_OK);
    for (i = 0; i < num_components; ++i) {
        ck_assert_int_eq(uct_component_query(components[i], &attr), UCS_OK);
        if (!strcmp(attr.name, name)) {
            found = components[i];
        }
    }

    uct_release_component_list(components);
    return found;
}

int hipower_test_print_components(void)
{
    uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
    uct_component_h *components;
    unsigned i, num_components;

    if (uct_query_components(&components, &num_components) != UCS_OK) {
        return 1;
    }

    for (i = 0; i < num_components; ++i) {
        if (uct_component_query(components[i], &attr) == UCS_OK) {
            printf("%s\n", attr.name);
        }
    }

    uct_release_component_list(components);
    return 0;
}

int main(int argc, char **argv)
{
    SRunner *runner;
    int failed;

    /* Helper mode for the glue tests: show what an unmodified UCX consumer
     * started through hipower-run sees. */
    if ((argc > 1) && !strcmp(argv[1], "--print-components")) {
        return hipower_test_print_components();
    }

    runner = srunner_create(hipower_component_suite());
    srunner_add_suite(runner, hipower_glue_suite());
    srunner_add_suite(runner, hipower_protocol_suite());
    srunner_add_suite(runner, hipower_txq_suite());
    srunner_add_suite(runner, hipower_layout_suite());
    srunner_add_suite(runner, hipower_frame_suite());
    srunner_add_suite(runner, hipower_active_suite());
    srunner_add_suite(runner, hipower_grant_suite());
    srunner_add_suite(runner, hipower_switch_suite());
    srunner_add_suite(runner, hipower_bundle_suite());
    srunner_add_suite(runner, hipower_handshake_suite());
    srunner_add_suite(runner, hipower_timer_suite());
    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return (failed == 0) ? EXIT_SUCCESS : EXIT_FAILURE;
}
