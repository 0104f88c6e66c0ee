#!/bin/bash
# Lone am_lat, every size, rc_verbs / hipower (window off) / hipower-window,
# 2000 round trips per run, REPS interleaved repetitions
# Run in the rig from the project root: test/rig/hipower-rig -n 2 -- $PWD/docs/bench/rerun-01809db/<this script>
R=$(cd "$(dirname "$0")/../../.." && pwd)
export PATH=$R/src/ucp_glue:$R/contrib:$PATH HIPOWER_PLUGIN=$R/.libs/libuct_hipower.so
for rep in $(seq ${REPS:-11}); do
  for size in 8 64 1024 4096 8176; do
    lay=short; [ $size -gt 64 ] && lay=bcopy
    for col in rc_verbs hipower hipower-window; do
      case $col in
        hipower-window) e="UCX_HIPOWER_BUNDLE_WINDOW=1"; tl=hipower;;
        hipower) e=""; tl=hipower;;
        *) e=""; tl=rc_verbs;;
      esac
      f=$(env UCX_HIPOWER_NOTIFY=self $e hipower-run perftest-pair -q $tl am_lat $size 2000 -D $lay 2>/dev/null)
      echo "rep=$rep size=$size col=$col $f"
    done
  done
done
