#!/bin/bash
# Builds hipower in the source tree against the installed UCX, with -Werror.
# Assumes contrib/install-deps.sh has run.
set -eu -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

ucx_src=$(contrib/ucx-source.sh)
echo "build: UCX source $ucx_src"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    ./autogen.sh > autogen.log 2>&1 || { cat autogen.log >&2; exit 1; }
fi
./configure -q --with-ucx-src="$ucx_src" --enable-werror "$@"
make -s -j"$(nproc)"
echo "build: ok ($(ls .libs/libuct_hipower.so))"
