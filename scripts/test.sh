#!/usr/bin/env bash
# Install dependencies, build, run the tests. [gpu] tests are skipped without a device.
# Then install kaio to a temporary prefix and build and run the examples against it, and
# run the tests again under AddressSanitizer + UBSan and ThreadSanitizer (sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/check-docs.sh
BUILD="${KAIO_BUILD_DIR:-build}"
export KAIO_CACHE_DIR="$(mktemp -d /tmp/kaio-ci-cache-XXXXXX)"
# The GGUF reader's interop test reads a file the Python gguf package writes
# (tests/quant/write_gguf.py) with $KAIO_TEST_PYTHON; without the package it skips.
if python3 -m venv "$BUILD/gguf-venv" &&
   "$BUILD/gguf-venv/bin/pip" install -q --disable-pip-version-check gguf numpy; then
  export KAIO_TEST_PYTHON="$BUILD/gguf-venv/bin/python"
else
  echo "test.sh: no gguf package: the GGUF interop test will skip"
fi
if ! (cd "$BUILD" && ctest --output-on-failure -j "$(nproc)"); then
  # The failures again, last, where a log's tail shows them.
  ./scripts/test-failures.sh "$BUILD/Testing/Temporary/LastTest.log"
  exit 1
fi

PREFIX="$(mktemp -d /tmp/kaio-install-XXXXXX)"
cmake --install "$BUILD" --prefix "$PREFIX"
cmake -S examples -B "$BUILD/installed-examples" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX"
cmake --build "$BUILD/installed-examples"
"$BUILD/installed-examples/quickstart"
./scripts/check-installed-headers.sh "$PREFIX"
rm -rf "$PREFIX" "$KAIO_CACHE_DIR"

# The Python package over the C ABI (python/), from the same build folder.
./scripts/test-python.sh

# Sanitizers (separate build folders, -O1 -g0): ASan + UBSan on the host tests and the
# interpreted [gpu] suite, TSan on the [concurrency] tests. KAIO_CI_SANITIZERS=0 skips them.
if [ "${KAIO_CI_SANITIZERS:-1}" != "0" ]; then
  ./scripts/sanitize.sh asan
  ./scripts/sanitize.sh tsan
fi
echo "test.sh: all passed"
