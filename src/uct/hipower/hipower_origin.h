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

/*
 * The sequence number of the first message of a run of @a num_slots
 * receive slots, on both sides of a connection (0). Sequence numbers
 * restart at the ring's period, about 2^31 (hipower_ring.c); whatever a
 * run starts at, its bitmaps start as that many messages would have left
 * them (hipower_ring_bitmap_at()), so the run behaves as one that carried
 * them. Exported for the simulator as above: it starts runs a few messages
 * before their period, so that its schedules cross the restart, and
 * switch runs around it, which an honest stream does once per 2^31
 * messages (the review's M1 lived there).
 */
uint32_t uct_hipower_seq_origin(uint32_t num_slots);

#endif
