/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_ORIGIN_H_
#define UCT_HIPOWER_ORIGIN_H_

#include <stdint.h>

/*
 * The epoch of a new endpoint's first run of receive slots, on both sides
 * of a connection (1). Every later run's epoch is the one before plus one;
 * run requests carry the low 32 bits, the grant record all 64, and the
 * consumed bitmap in use is the epoch's parity's, so nothing depends on
 * where epochs start, only on both sides starting at the same one.
 *
 * A function of its own, exported and not inline, like
 * uct_hipower_clock_now(): the simulator (test/sim, docs/sim.md) starts
 * epochs just below 2^32 and 2^64 by interposing it, so that its schedules
 * run the transport's own code across the wraps (issue 25).
 */
uint64_t uct_hipower_epoch_origin(void);

#endif
