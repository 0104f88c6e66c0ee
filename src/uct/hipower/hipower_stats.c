/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#include "hipower_stats.h"

#include <inttypes.h>


void uct_hipower_stats_print(const uct_hipower_stats_t *stats,
                             const char *dev_name, FILE *stream)
{
    char line[2048];
    size_t len;

    /* One write: MPI launchers tag and interleave ranks' stderr by chunk */
#define UCT_HIPOWER_STATS_PRINT(_name) \
    len += snprintf(line + len, (len < sizeof(line)) ? sizeof(line) - len : 0, \
                    " " #_name "=%" PRIu64, stats->_name);

    len = snprintf(line, sizeof(line), "hipower-stats %s:", dev_name);
    UCT_HIPOWER_STATS_FIELDS(UCT_HIPOWER_STATS_PRINT)
    if (len < sizeof(line)) {
        snprintf(line + len, sizeof(line) - len, " slots_per_read=%.2f\n",
                 (stats->bitmap_reads == 0) ? 0.0 :
                 (double)stats->slots_recycled / stats->bitmap_reads);
    }
    /* Whatever the process buffered for stdout goes first, whole lines:
     * with both streams on one pipe, the line must start a line of its own
     * (tests look for it with ^) */
    if (stream != stdout) {
        fflush(stdout);
    }
    fputs(line, stream);
    fflush(stream);
#undef UCT_HIPOWER_STATS_PRINT
}
