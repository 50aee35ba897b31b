#!/usr/bin/env bash
# Configures and builds kaio (Release, warnings as errors) into ${KAIO_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${KAIO_BUILD_DIR:-build}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKAIO_WERROR=ON
cmake --build "$BUILD" --parallel
