#!/usr/bin/env bash
# Copies the binaries a GPU run needs into .carry/build (same layout as the build folder,
# so tests find their helper programs next to them).
#
#   scripts/gpu-bundle.sh [PART...]
#     no PART: everything below. PARTs: tests (kaio_tests and the child programs the [gpu]
#     tests start), test-helpers (kaio_remote_child, kaio_py_reference), tools (kaio-cache,
#     kaio-precompile: the tools' tests need them), examples, py (the installed Python
#     package), or a benchmark's name (quant, attention, matmul, ...: bench/NAME and the
#     bench/*.py scripts).
# The device machine gets the working tree too: scripts/gpu-shards.sh runs the tests there.
# Every program is linked statically against kaio (6-16 MB stripped), so the whole set is
# larger than what one device call carries (64 MiB): name the parts a call needs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${KAIO_BUILD_DIR:-build}"
BENCHES="jit_latency family build_scale ops ops_rows matmul tune python_overhead_cpp quant_gguf attention quant"
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0; fi
if [ $# -eq 0 ]; then set -- tests test-helpers tools examples py $BENCHES; fi
for part in "$@"; do
  case " tests test-helpers tools examples py $BENCHES " in
    *" $part "*) ;;
    *) echo "gpu-bundle.sh: unknown part '$part' (--help)" >&2; exit 2 ;;
  esac
done
rm -rf .carry && mkdir -p .carry/build
for part in "$@"; do
  case $part in
    tests)
      mkdir -p .carry/build/tests
      cp "$BUILD"/tests/kaio_tests "$BUILD"/tests/kaio_test_child "$BUILD"/tests/kaio_cache_child "$BUILD"/tests/kaio_tune_child .carry/build/tests/ ;;
    test-helpers)
      mkdir -p .carry/build/tests
      for t in kaio_remote_child kaio_py_reference; do
        if [ -x "$BUILD/tests/$t" ]; then cp "$BUILD/tests/$t" .carry/build/tests/; fi
      done ;;
    tools)
      mkdir -p .carry/build/tools
      cp "$BUILD"/tools/kaio-cache "$BUILD"/tools/kaio-precompile .carry/build/tools/ ;;
    examples)
      mkdir -p .carry/build/examples
      cp "$BUILD"/examples/quickstart .carry/build/examples/ ;;
    py)
      # The Python package as scripts/test-python.sh installed it (pure Python, libkaio_c.so and
      # the libraries it ships with: any Python 3), for bench/python_overhead.py and
      # python/tests there: PYTHONPATH=.carry/py.
      PKG=$(ls -d "$BUILD"/python-venv/lib/python3*/site-packages/kaio 2>/dev/null | head -1 || true)
      if [ -n "$PKG" ]; then
        mkdir -p .carry/py && cp -r "$PKG" .carry/py/ && rm -rf .carry/py/kaio/__pycache__
      else
        echo "gpu-bundle.sh: no installed Python package (run scripts/test-python.sh first)" >&2
      fi ;;
    *)
      mkdir -p .carry/build/bench
      if [ -x "$BUILD/bench/$part" ]; then cp "$BUILD/bench/$part" .carry/build/bench/; fi
      for f in bench/*.py; do [ -e "$f" ] && cp "$f" .carry/build/bench/; done ;;
  esac
done
find .carry/build -type f -perm -u+x -exec strip {} + 2>/dev/null || true
du -sh .carry
size=$(du -sm .carry | cut -f1)
if [ "$size" -gt 56 ]; then
  echo "gpu-bundle.sh: ${size} MiB: a device call carries 64 MiB with the working tree; name fewer parts" >&2
fi
