#!/usr/bin/env bash
# Builds and installs the Python package (python/) into a virtual environment and runs its
# tests with the interpreter (KAIO_INTERPRET=1: numpy arrays are the device arrays).
#
# The wheel is built from the build folder scripts/build.sh made (scikit-build-core
# reconfigures it and builds only the shared library and the tools, which are there
# already), so this adds the package install and the tests, not a second build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="$(realpath "${KAIO_BUILD_DIR:-build}")"
VENV="$BUILD/python-venv"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check scikit-build-core numpy pytest
# The folder keeps its tests and benchmarks (its own configuration is kept as it is).
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation ./python \
  --config-settings=build-dir="$BUILD" \
  --config-settings=cmake.define.KAIO_BUILD_TESTS=ON \
  --config-settings=cmake.define.KAIO_BUILD_BENCH=ON
export KAIO_INTERPRET=1
export KAIO_PY_REFERENCE="$BUILD/tests/kaio_py_reference"
export KAIO_CACHE_DIR="$(mktemp -d /tmp/kaio-py-cache-XXXXXX)"
# From outside the source tree, so that the installed package (with its library) is tested.
(cd "$BUILD" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests")
rm -rf "$KAIO_CACHE_DIR"
echo "test-python.sh: all passed"
