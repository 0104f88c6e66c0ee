#!/bin/bash
# Fetches the source of the installed UCX (Debian's source package, same
# version and revision) into the cache and configures it with the flags the
# installed library was built with (ucx_info -v), so that its config.h and
# internal headers describe the same struct layouts as libucx0.
# Prints the configured source directory. Cached: runs once per version.
set -eu -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${HIPOWER_CACHE:-$ROOT/.cache}

log() { echo "ucx-source: $*" >&2; }

version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null) ||
    { log "libucx0 is not installed (contrib/install-deps.sh)"; exit 1; }
flags=$(ucx_info -v | sed -n 's/^# Configured with: //p')
[ -n "$flags" ] || { log "cannot read the configure flags from 'ucx_info -v'"; exit 1; }

upstream=${version#*:}
upstream=${upstream%-*}
top=$CACHE/ucx-src
dir=$top/ucx-$upstream
stamp="$version $flags"
if [ -r "$dir/.hipower-configured" ] && [ "$(cat "$dir/.hipower-configured")" = "$stamp" ]; then
    echo "$dir"
    exit 0
fi

log "fetching ucx $version source into $top"
rm -rf "$top"
mkdir -p "$top"
(cd "$top" && apt-get source -qq "ucx=$version") > "$CACHE/ucx-source.log" 2>&1 || {
    tail -20 "$CACHE/ucx-source.log" >&2
    log "apt-get source ucx=$version failed: is deb-src enabled? (contrib/install-deps.sh does it)"
    exit 1
}
[ -d "$dir" ] || { log "apt-get source did not create $dir"; exit 1; }

log "configuring with: $flags"
# Word-split on purpose, without eval: "${prefix}/include" must reach
# configure literally, as it did in Debian's build.
read -r -a args <<< "$flags"
(cd "$dir" && ./autogen.sh && ./configure "${args[@]}") >> "$CACHE/ucx-source.log" 2>&1 || {
    tail -30 "$CACHE/ucx-source.log" >&2
    log "UCX configure failed (log: $CACHE/ucx-source.log)"
    exit 1
}
echo "$stamp" > "$dir/.hipower-configured"
echo "$dir"
