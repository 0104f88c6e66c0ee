/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef HIPOWER_TEST_H_
#define HIPOWER_TEST_H_

#include <check.h>
#include <uct/api/uct.h>

/* Loads the plugin from the build tree the way LD_PRELOAD would (once). */
void hipower_test_load_plugin(void);

/* Returns the UCT component named @a name, or NULL. */
uct_component_h hipower_test_find_component(const char *name);

/* Prints the names of all registered UCT components, one per line. */
int hipower_test_print_components(void);

Suite *hipower_component_suite(void);
Suite *hipower_glue_suite(void);
Suite *hipower_protocol_suite(void);
Suite *hipower_txq_suite(void);
Suite *hipower_layout_suite(void);
Suite *hipower_frame_suite(void);
Suite *hipower_active_suite(void);
Suite *hipower_grant_suite(void);
Suite *hipower_switch_suite(void);
Suite *hipower_bundle_suite(void);
Suite *hipower_handshake_suite(void);
Suite *hipower_timer_suite(void);

#endif
