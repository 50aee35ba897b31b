#!/usr/bin/env bash
# The main job: install dependencies, build, warm the kernel cache for sm_90 with the
# example kernels, and - when a GPU is present - also compile them for it, launch them and
# check their results. Ends with a listing of the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BUILD="${KAIO_BUILD_DIR:-build}"
"$BUILD/tools/kaio-precompile" --arch sm_90
"$BUILD/examples/quickstart"
"$BUILD/tools/kaio-cache" ls
