#!/bin/sh
# Builds the native peers of `make bench` into $BUILD (default /tmp/peers-build).
set -e
BUILD=${BUILD:-/tmp/peers-build}
HERE=$(dirname "$0")
mkdir -p "$BUILD"
cc -O2 -fopenmp "$HERE/membw.c" -o "$BUILD/membw"
