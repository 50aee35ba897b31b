#!/usr/bin/env bash
# Copies the binaries a GPU run needs into .carry/build (same layout as the build folder,
# so tests find their helper programs next to them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${KAIO_BUILD_DIR:-build}"
rm -rf .carry && mkdir -p .carry/build/{tests,tools,bench,examples}
cp "$BUILD"/tests/kaio_tests "$BUILD"/tests/kaio_test_child .carry/build/tests/
cp "$BUILD"/tools/kaio-cache "$BUILD"/tools/kaio-precompile .carry/build/tools/
cp "$BUILD"/bench/jit_latency "$BUILD"/bench/family .carry/build/bench/
cp "$BUILD"/examples/quickstart .carry/build/examples/
strip .carry/build/*/*
du -sh .carry
