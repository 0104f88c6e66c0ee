#!/bin/sh
# Generates configure from configure.ac (Autotools).
set -e
cd "$(dirname "$0")"
mkdir -p config m4
autoreconf -fi
