/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CLOCK_H_
#define UCT_HIPOWER_CLOCK_H_

#include <ucs/time/time.h>

/*
 * The transport's one reading of the time, for everything that decides by
 * it: idle demotion (the interface's clock, read once per
 * UCT_HIPOWER_CLOCK_CALLS progress calls), grant and release deadlines,
 * a peer behind on its announcements, the wait for a QP's requests. Never
 * read per message.
 *
 * A function of its own, exported and not inline, for the same reason the
 * transport calls libibverbs through its exported functions: the
 * deterministic simulator (test/sim, docs/sim.md) supplies a virtual clock
 * by interposition, as it supplies the device, so one seed replays one
 * schedule, deadlines included, with the shipped binary unchanged.
 */
ucs_time_t uct_hipower_clock_now(void);

#endif
