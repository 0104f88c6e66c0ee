/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * hipower-run, the way users load the plugin into an unmodified UCX
 * consumer: the consumer here is this test binary in --print-components
 * mode, started as a separate process exactly like ucx_info or mpirun.
 */
#include "hipower_test.h"

#include <hipower_ucx_features.h>
#include <uct/api/version.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* Runs a shell command, returns its output (caller frees) and exit status. */
static char *run(const char *command, int *status_p)
{
    size_t size = 0, capacity = 4096;
    char *output = malloc(capacity);
    FILE *pipe;
    size_t n;
    int status;

    ck_assert_ptr_nonnull(output);
    pipe = popen(command, "r");
    ck_assert_ptr_nonnull(pipe);
    while ((n = fread(output + size, 1, capacity - size - 1, pipe)) > 0) {
        size += n;
        if (size + 1 == capacity) {
            capacity *= 2;
            output    = realloc(output, capacity);
            ck_assert_ptr_nonnull(output);
        }
    }
    output[size] = '\0';
    status       = pclose(pipe);
    *status_p    = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return output;
}

static char *self_path(void)
{
    static char path[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);

    ck_assert_int_gt(len, 0);
    path[len] = '\0';
    return path;
}

static int every_line_starts(const char *output, const char *prefix)
{
    const char *p;

    for (p = output; *p != '\0'; p = strchr(p, '\n') + 1) {
        if ((strncmp(p, prefix, strlen(prefix)) != 0) ||
            (strchr(p, '\n') == NULL)) {
            return 0;
        }
    }
    return p != output;
}

static int has_line(const char *output, const char *line)
{
    size_t len = strlen(line);
    const char *p;

    for (p = output; (p = strstr(p, line)) != NULL; p += len) {
        if (((p == output) || (p[-1] == '\n')) &&
            ((p[len] == '\n') || (p[len] == '\0'))) {
            return 1;
        }
    }
    return 0;
}

START_TEST(test_run_loads_plugin_into_consumer)
{
    char command[2 * PATH_MAX + 256];
    char *output;
    int status;

    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD HIPOWER_PLUGIN=%s %s %s --print-components",
             HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN, self_path());
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(has_line(output, "hipower"),
                  "hipower-run did not register the component; got:\n%s",
                  output);
    free(output);

    /* ...and without the wrapper the same consumer does not see it */
    snprintf(command, sizeof(command), "env -u LD_PRELOAD %s --print-components",
             self_path());
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(!has_line(output, "hipower"), "got:\n%s", output);
    ck_assert_msg(has_line(output, "self"), "got:\n%s", output);
    free(output);

    /* The mechanism is the one this UCX has: UCX_PLUGIN_PATH on >= 1.22,
     * with nothing preloaded; LD_PRELOAD before */
    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD -u UCX_PLUGIN_PATH -u HIPOWER_LOAD HIPOWER_PLUGIN=%s "
             "%s /bin/sh -c 'echo \"preload=${LD_PRELOAD-unset} "
             "plugin_path=${UCX_PLUGIN_PATH-unset}\"'",
             HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
#if HIPOWER_UCX_PLUGIN_PATH
    ck_assert_msg(strstr(output, "preload=unset ") != NULL &&
                  strstr(output, "plugin_path=unset") == NULL,
                  "UCX >= 1.22 must load by UCX_PLUGIN_PATH alone; got: %s",
                  output);
#else
    ck_assert_msg(strstr(output, "preload=unset ") == NULL &&
                  strstr(output, "plugin_path=unset") != NULL,
                  "UCX < 1.22 must load by LD_PRELOAD alone; got: %s", output);
#endif
    free(output);
}
END_TEST

START_TEST(test_run_uses_ucx_tools_built_against)
{
    char command[PATH_MAX + 256];
    char *output;
    int status;

    /* "hipower-run ucx_info" is the ucx_info of the UCX the plugin was
     * built against (a prefix's bin first in PATH), not the system's */
    snprintf(command, sizeof(command), "HIPOWER_PLUGIN=%s %s ucx_info -v",
             HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    /* "# Version 1.13.1" up to 1.17, "# Library version: 1.18.1" since */
    ck_assert_msg(has_line(output, "# Version " UCT_VERNO_STRING) ||
                  has_line(output, "# Library version: " UCT_VERNO_STRING),
                  "built against UCX " UCT_VERNO_STRING ", ran: %s", output);
    free(output);
}
END_TEST

START_TEST(test_run_plugin_path_mechanism)
{
    char command[2 * PATH_MAX + 256];
    char expected[2 * PATH_MAX + 64];
    char plugin[PATH_MAX];
    char *output;
    int status;

    /* UCX_PLUGIN_PATH is the plugin's directory, and nothing is preloaded */
    ck_assert_ptr_nonnull(realpath(HIPOWER_TEST_PLUGIN, plugin));
    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD -u UCX_PLUGIN_PATH HIPOWER_LOAD=plugin-path "
             "HIPOWER_PLUGIN=%s %s --print sh", HIPOWER_TEST_PLUGIN,
             HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    snprintf(expected, sizeof(expected), "export UCX_PLUGIN_PATH='%s'",
             dirname(plugin));
    ck_assert_msg(has_line(output, expected), "want %s; got:\n%s", expected,
                  output);
    ck_assert_msg(strstr(output, "LD_PRELOAD") == NULL, "got:\n%s", output);
    free(output);

    /* A directory without the name UCX's loader opens is an error */
    snprintf(command, sizeof(command),
             "HIPOWER_LOAD=plugin-path HIPOWER_PLUGIN=/dev/null %s true 2>&1",
             HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 127);
    ck_assert_msg(strstr(output, "/dev has no libuct_hipower.so.0") != NULL,
                  "got: %s", output);
    free(output);

    snprintf(command, sizeof(command),
             "HIPOWER_LOAD=dlopen HIPOWER_PLUGIN=%s %s true 2>&1",
             HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 2);
    ck_assert_msg(strstr(output, "HIPOWER_LOAD must be preload or "
                                 "plugin-path, not 'dlopen'") != NULL,
                  "got: %s", output);
    free(output);
}
END_TEST

START_TEST(test_run_keeps_existing_preload_once)
{
    static const char *initial[] = {"libc.so.6", HIPOWER_TEST_PLUGIN " libc.so.6"};
    char command[2 * PATH_MAX + 256];
    char expected[PATH_MAX + 64];
    char *output;
    int status;
    unsigned i;

    /* An existing LD_PRELOAD stays, and the plugin is not added twice */
    snprintf(expected, sizeof(expected), "%s libc.so.6\n", HIPOWER_TEST_PLUGIN);
    for (i = 0; i < 2; ++i) {
        snprintf(command, sizeof(command),
                 "HIPOWER_LOAD=preload HIPOWER_PLUGIN=%s LD_PRELOAD='%s' %s "
                 "/bin/sh -c "
                 "'echo \"$LD_PRELOAD\"'",
                 HIPOWER_TEST_PLUGIN, initial[i], HIPOWER_TEST_RUN);
        output = run(command, &status);
        ck_assert_int_eq(status, 0);
        ck_assert_str_eq(output, expected);
        free(output);
    }
}
END_TEST

START_TEST(test_run_missing_plugin_fails_clearly)
{
    char *output;
    int status;

    output = run("HIPOWER_PLUGIN=/nonexistent/libuct_hipower.so "
                 HIPOWER_TEST_RUN " true 2>&1", &status);
    ck_assert_int_eq(status, 127);
    ck_assert_msg(strstr(output, "plugin not found: "
                                 "/nonexistent/libuct_hipower.so") != NULL,
                  "got: %s", output);
    free(output);
}
END_TEST

START_TEST(test_print_for_mpi_launchers)
{
    char command[PATH_MAX + 256];
    char expected[PATH_MAX + 64];
    char *output;
    int status;

    /* One launcher argument per variable; a UCX in a prefix adds its
     * LD_LIBRARY_PATH and PATH, each in the same form */
    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD HIPOWER_LOAD=preload HIPOWER_PLUGIN=%s %s "
             "--print ompi", HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    snprintf(expected, sizeof(expected), "-x LD_PRELOAD='%s'",
             HIPOWER_TEST_PLUGIN);
    ck_assert_msg(has_line(output, expected), "want %s; got:\n%s", expected,
                  output);
    ck_assert_msg(every_line_starts(output, "-x "), "got:\n%s", output);
    free(output);

    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD HIPOWER_LOAD=preload HIPOWER_PLUGIN=%s %s "
             "--print mpich", HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 0);
    snprintf(expected, sizeof(expected), "-genv LD_PRELOAD '%s'",
             HIPOWER_TEST_PLUGIN);
    ck_assert_msg(has_line(output, expected), "want %s; got:\n%s", expected,
                  output);
    ck_assert_msg(every_line_starts(output, "-genv "), "got:\n%s", output);
    free(output);

    snprintf(command, sizeof(command), "HIPOWER_PLUGIN=%s %s --print csh 2>&1",
             HIPOWER_TEST_PLUGIN, HIPOWER_TEST_RUN);
    output = run(command, &status);
    ck_assert_int_eq(status, 2);
    ck_assert_msg(strstr(output, "--print takes sh, ompi or mpich") != NULL,
                  "got: %s", output);
    free(output);
}
END_TEST

Suite *hipower_glue_suite(void)
{
    Suite *suite = suite_create("ucp_glue");
    TCase *tcase = tcase_create("hipower-run");

    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test_run_loads_plugin_into_consumer);
    tcase_add_test(tcase, test_run_keeps_existing_preload_once);
    tcase_add_test(tcase, test_run_missing_plugin_fails_clearly);
    tcase_add_test(tcase, test_run_uses_ucx_tools_built_against);
    tcase_add_test(tcase, test_run_plugin_path_mechanism);
    tcase_add_test(tcase, test_print_for_mpi_launchers);
    suite_add_tcase(suite, tcase);
    return suite;
}
