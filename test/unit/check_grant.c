/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_test.h"
#include "hipower_grant.h"
#include "hipower_arena.h"
#include "hipower_slot.h"

#include <ucs/sys/math.h>

#include <stdlib.h>
#include <string.h>


/* The sizes the transport's receiver decides (hipower_ep_grant.c): the
 * fair share, shrink, grow, and the shortest run a grant may take */
START_TEST(test_grant_sizes)
{
    static const struct {
        uint32_t               cur, fair;
        int                    wants;
        uint32_t               free, reserve;
        hipower_grant_action_t action;
        uint32_t               size;
    } cases[] = {
        /* More than the fair share: shrink, out of the reserve if need be,
         * smaller than the share if the pool is short */
        {64, 16, 1, 16, 20, HIPOWER_GRANT_SHRINK, 16},
        {64, 16, 1, 5, 20, HIPOWER_GRANT_SHRINK, 5},
        {64, 16, 1, 0, 20, HIPOWER_GRANT_NONE, 0},
        /* Grow only when asked, up to the fair share, leaving the reserve */
        {1, 64, 0, 1000, 8, HIPOWER_GRANT_NONE, 0},
        {1, 64, 1, 1000, 8, HIPOWER_GRANT_GROW, 64},
        {1, 64, 1, 20, 8, HIPOWER_GRANT_GROW, 12},
        {1, 64, 1, 9, 8, HIPOWER_GRANT_NONE, 0},
        {12, 64, 1, 20, 8, HIPOWER_GRANT_NONE, 0},
    };
    uint32_t size;
    size_t i;

    ck_assert_uint_eq(hipower_grant_fair_share(4096, 1, 1, 64), 64);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 256, 1, 64), 16);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 8192, 1, 64), 1);
    ck_assert_uint_eq(hipower_grant_fair_share(4096, 0, 1, 64), 64);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        size = 0;
        ck_assert_msg(hipower_grant_decide(cases[i].cur, cases[i].fair,
                                           cases[i].wants, cases[i].free,
                                           cases[i].reserve, 1, &size) ==
                      cases[i].action, "case %zu: action", i);
        if (cases[i].action != HIPOWER_GRANT_NONE) {
            ck_assert_msg(size == cases[i].size, "case %zu: size %u", i,
                          size);
        }
    }
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_GROW, 4, 1), 5);
    ck_assert_uint_eq(hipower_grant_min_size(HIPOWER_GRANT_SHRINK, 4, 1), 1);
}
END_TEST

Suite *hipower_grant_suite(void)
{
    Suite *s  = suite_create("grant");
    TCase *tc = tcase_create("grant");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_grant_sizes);
    suite_add_tcase(s, tc);
    return s;
}
