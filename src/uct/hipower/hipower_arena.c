/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_arena.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>


/*
 * Free runs are kept sorted and never adjacent (hipower_arena_free()
 * coalesces), so between two of them lies at least one taken slot: k runs
 * cover at least 2k - 1 slots, hence k <= (total + 1) / 2 <= total / 2 + 1.
 * free_runs never needs to grow, and a free cannot fail for lack of room.
 *
 * Costs (review P2): a free finds its place by binary search and moves the
 * runs above by one memmove(); an allocation scans the runs for the longest
 * one, unless the longest is known (no allocation since it was found) and
 * too short: then it fails at once. An allocation runs once per grant,
 * which also registers memory and binds a window; failing ones, which a
 * peer waiting for a run could repeat on every progress call, cost O(1)
 * until a free.
 */

ucs_status_t hipower_arena_init(hipower_arena_t *arena, uint32_t total)
{
    arena->max_runs  = (total / 2) + 1;
    arena->free_runs = calloc(arena->max_runs, sizeof(*arena->free_runs));
    if (arena->free_runs == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    arena->total      = total;
    arena->free_slots = total;
    arena->num_free   = 0;
    arena->longest    = total;
    arena->frees      = 0;
    if (total > 0) {
        arena->free_runs[0].first = 0;
        arena->free_runs[0].count = total;
        arena->num_free           = 1;
    }

    return UCS_OK;
}

void hipower_arena_cleanup(hipower_arena_t *arena)
{
    free(arena->free_runs);
    arena->free_runs = NULL;
    arena->num_free  = 0;
    arena->max_runs  = 0;
}

static void hipower_arena_remove_run(hipower_arena_t *arena, uint32_t index)
{
    memmove(&arena->free_runs[index], &arena->free_runs[index + 1],
            (arena->num_free - index - 1) * sizeof(*arena->free_runs));
    --arena->num_free;
}

ucs_status_t hipower_arena_alloc(hipower_arena_t *arena, uint32_t want,
                                 uint32_t min, uint32_t *first_p,
                                 uint32_t *count_p)
{
    uint32_t longest = 0;
    uint32_t best    = 0;
    hipower_arena_run_t *run;
    uint32_t index, count;

    assert((min >= 1) && (min <= want));

    if ((arena->longest != HIPOWER_ARENA_LONGEST_UNKNOWN) &&
        (arena->longest < min)) {
        return UCS_ERR_NO_MEMORY;
    }

    /* Strictly longer only: among equal runs the first, lowest, one wins */
    for (index = 0; index < arena->num_free; ++index) {
        if (arena->free_runs[index].count > longest) {
            longest = arena->free_runs[index].count;
            best    = index;
        }
    }

    arena->longest = longest;
    count          = (longest < want) ? longest : want;
    if (count < min) {
        return UCS_ERR_NO_MEMORY;
    }

    /* Taking the start keeps the remainder where it was in the sorted list */
    run                = &arena->free_runs[best];
    *first_p           = run->first;
    *count_p           = count;
    run->first        += count;
    run->count        -= count;
    arena->free_slots -= count;
    /* Another run may be as long: found by the next scan */
    arena->longest     = HIPOWER_ARENA_LONGEST_UNKNOWN;
    if (run->count == 0) {
        hipower_arena_remove_run(arena, best);
    }

    return UCS_OK;
}

ucs_status_t hipower_arena_alloc_keep(hipower_arena_t *arena, uint32_t want,
                                      uint32_t min, uint32_t keep,
                                      uint32_t *first_p, uint32_t *count_p)
{
    uint32_t free_slots = hipower_arena_free_slots(arena);
    uint32_t spare      = (free_slots > keep) ? (free_slots - keep) : 0;

    assert((min >= 1) && (min <= want));
    if (spare < want) {
        want = (spare > min) ? spare : min;
    }
    return hipower_arena_alloc(arena, want, min, first_p, count_p);
}

void hipower_arena_free(hipower_arena_t *arena, uint32_t first,
                        uint32_t count)
{
    hipower_arena_run_t *runs = arena->free_runs;
    uint32_t index, low, high, merged;
    int joins_prev, joins_next;

    assert(count > 0);
    assert((first <= arena->total) && (count <= (arena->total - first)));

    /* index: the first free run above the returned one */
    low  = 0;
    high = arena->num_free;
    while (low < high) {
        index = low + (high - low) / 2;
        if (runs[index].first > first) {
            high = index;
        } else {
            low  = index + 1;
        }
    }
    index = low;

    /* A run that overlaps a free one was freed twice, or never taken */
    assert((index == 0) ||
           ((runs[index - 1].first + runs[index - 1].count) <= first));
    assert((index == arena->num_free) ||
           ((first + count) <= runs[index].first));

    arena->free_slots += count;
    joins_prev = (index > 0) &&
                 ((runs[index - 1].first + runs[index - 1].count) == first);
    joins_next = (index < arena->num_free) &&
                 ((first + count) == runs[index].first);

    if (joins_prev && joins_next) {
        runs[index - 1].count += count + runs[index].count;
        merged                 = runs[index - 1].count;
        hipower_arena_remove_run(arena, index);
    } else if (joins_prev) {
        runs[index - 1].count += count;
        merged                 = runs[index - 1].count;
    } else if (joins_next) {
        runs[index].first  = first;
        runs[index].count += count;
        merged             = runs[index].count;
    } else {
        /* Cannot overflow: see the bound at the top */
        assert(arena->num_free < arena->max_runs);
        memmove(&runs[index + 1], &runs[index],
                (arena->num_free - index) * sizeof(*runs));
        runs[index].first = first;
        runs[index].count = count;
        merged            = count;
        ++arena->num_free;
    }

    /* A free only lengthens runs: the longest stays known if it was */
    if ((arena->longest != HIPOWER_ARENA_LONGEST_UNKNOWN) &&
        (merged > arena->longest)) {
        arena->longest = merged;
    }
    ++arena->frees;
}

uint32_t hipower_arena_free_slots(const hipower_arena_t *arena)
{
    return arena->free_slots;
}
