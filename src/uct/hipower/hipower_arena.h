/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_ARENA_H_
#define UCT_HIPOWER_ARENA_H_

#include <ucs/type/status.h>
#include <stdint.h>

/*
 * Carves endpoints' receive slots out of one interface-wide arena of
 * @a total slots (the memory budget divided by the slot size). An endpoint
 * asks for "want" slots and accepts any contiguous run of at least "min":
 * when the budget runs short, new endpoints get fewer slots (the paper's
 * QoS point) and, below the minimum, none. Freed runs coalesce.
 */

typedef struct hipower_arena_run {
    uint32_t first;
    uint32_t count;
} hipower_arena_run_t;

typedef struct hipower_arena {
    uint32_t            total;      /* Slots in the arena */
    uint32_t            free_slots; /* In all free runs: read per grant
                                       decision, so kept, not summed */
    uint32_t            num_free;   /* Entries used in free_runs */
    uint32_t            max_runs;   /* Capacity of free_runs */
    hipower_arena_run_t *free_runs; /* Sorted by first, non-adjacent */
    /* The longest free run's length, or HIPOWER_ARENA_LONGEST_UNKNOWN
     * after an allocation shortened it: an allocation that cannot succeed
     * fails without a scan until slots come back */
    uint32_t            longest;
    /* hipower_arena_free() calls so far: when it has not moved, a failed
     * allocation would fail again */
    uint64_t            frees;
} hipower_arena_t;

#define HIPOWER_ARENA_LONGEST_UNKNOWN UINT32_MAX


/* Allocates the bookkeeping; the whole arena starts free */
ucs_status_t hipower_arena_init(hipower_arena_t *arena, uint32_t total);

void hipower_arena_cleanup(hipower_arena_t *arena);

/**
 * Takes the longest free run, capped at @a want. Fails with
 * UCS_ERR_NO_MEMORY if it is shorter than @a min (min >= 1, min <= want).
 * Ties go to the lowest address.
 */
ucs_status_t hipower_arena_alloc(hipower_arena_t *arena, uint32_t want,
                                 uint32_t min, uint32_t *first_p,
                                 uint32_t *count_p);

/**
 * Like hipower_arena_alloc(), but leaves @a keep slots free for endpoints
 * yet to come as long as it can give at least @a min: an endpoint gets up
 * to @a want slots while the arena has plenty, and @a min when it runs
 * short, so that a given number of endpoints always fits. It fails only
 * when no contiguous run of @a min slots is free at all.
 */
ucs_status_t hipower_arena_alloc_keep(hipower_arena_t *arena, uint32_t want,
                                      uint32_t min, uint32_t keep,
                                      uint32_t *first_p, uint32_t *count_p);

/* Returns a run taken by hipower_arena_alloc() */
void hipower_arena_free(hipower_arena_t *arena, uint32_t first,
                        uint32_t count);

/* Free slots in total (not necessarily contiguous) */
uint32_t hipower_arena_free_slots(const hipower_arena_t *arena);

#endif
