#!/bin/bash
R=$(cd "$(dirname "$0")/../../.." && pwd)
export PATH=$R/src/ucp_glue:$R/contrib:$PATH HIPOWER_PLUGIN=$R/.libs/libuct_hipower.so
for rep in $(seq ${REPS:-13}); do
  for size in 4096; do
    for col in rc_verbs hipower hipower-nomw; do
      case $col in
        hipower-nomw) e="UCX_HIPOWER_MEM_WINDOWS=n"; tl=hipower;;
        hipower) e=""; tl=hipower;;
        *) e=""; tl=rc_verbs;;
      esac
      f=$(env UCX_HIPOWER_NOTIFY=self $e hipower-run perftest-pair -q $tl am_lat $size 2000 -D bcopy 2>/dev/null)
      echo "rep=$rep size=$size col=$col $f"
    done
  done
done
