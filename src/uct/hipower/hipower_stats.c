/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_stats.h"

#include <inttypes.h>


void uct_hipower_stats_print(const uct_hipower_stats_t *stats,
                             const char *dev_name, FILE *stream)
{
#define UCT_HIPOWER_STATS_PRINT(_name) \
    fprintf(stream, " " #_name "=%" PRIu64, stats->_name);

    fprintf(stream, "hipower-stats %s:", dev_name);
    UCT_HIPOWER_STATS_FIELDS(UCT_HIPOWER_STATS_PRINT)
    fprintf(stream, " slots_per_read=%.2f\n",
            (stats->bitmap_reads == 0) ? 0.0 :
            (double)stats->slots_recycled / stats->bitmap_reads);
    fflush(stream);
#undef UCT_HIPOWER_STATS_PRINT
}
