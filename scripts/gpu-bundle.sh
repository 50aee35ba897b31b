#!/usr/bin/env bash
# Copies the binaries a GPU run needs into .carry/build (same layout as the build folder,
# so tests find their helper programs next to them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${KAIO_BUILD_DIR:-build}"
rm -rf .carry && mkdir -p .carry/build/{tests,tools,bench,examples}
cp "$BUILD"/tests/kaio_tests "$BUILD"/tests/kaio_test_child "$BUILD"/tests/kaio_cache_child "$BUILD"/tests/kaio_tune_child .carry/build/tests/
cp "$BUILD"/tools/kaio-cache "$BUILD"/tools/kaio-precompile .carry/build/tools/
for t in kaio_remote_child kaio_py_reference; do
  if [ -x "$BUILD/tests/$t" ]; then cp "$BUILD/tests/$t" .carry/build/tests/; fi
done
for b in jit_latency family build_scale ops ops_rows matmul tune python_overhead_cpp quant_gguf attention quant; do
  if [ -x "$BUILD/bench/$b" ]; then cp "$BUILD/bench/$b" .carry/build/bench/; fi
done
for f in bench/*.py; do [ -e "$f" ] && cp "$f" .carry/build/bench/; done
cp "$BUILD"/examples/quickstart .carry/build/examples/
# The Python package as scripts/test-python.sh installed it (pure Python, libkaio_c.so and the
# libraries it ships with: any Python 3), for bench/python_overhead.py and python/tests there:
# PYTHONPATH=.carry/py.
PKG=$(ls -d "$BUILD"/python-venv/lib/python3*/site-packages/kaio 2>/dev/null | head -1 || true)
if [ -n "$PKG" ]; then
  mkdir -p .carry/py && cp -r "$PKG" .carry/py/ && rm -rf .carry/py/kaio/__pycache__
fi
strip .carry/build/*/* 2>/dev/null || true
du -sh .carry
