#!/usr/bin/env bash
# Builds the host tests under sanitizers and runs them (CI runs this from test.sh).
#   ./scripts/sanitize.sh asan   AddressSanitizer + UBSan in build-asan: the host tests
#                                (~[gpu]) and the [gpu] suite in the interpreter
#   ./scripts/sanitize.sh tsan   ThreadSanitizer in build-tsan (kaio_tsan_tests: the test files
#                                that hold them, tests/CMakeLists.txt): the [concurrency] tests (in
#                                interpret mode, so that the concurrent launches run) and the
#                                multi-threaded cache tests
# Release-like (-O1 -g0, no benches or examples) to keep the build short and small; ccache is
# used when present. Prints the build and run times.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:?usage: sanitize.sh asan|tsan}"
case "$kind" in
  asan) san="address,undefined"; dir="${KAIO_ASAN_DIR:-build-asan}" ;;
  tsan) san="thread"; dir="${KAIO_TSAN_DIR:-build-tsan}" ;;
  *) echo "sanitize.sh: unknown kind '$kind' (asan or tsan)" >&2; exit 2 ;;
esac
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

t0=$(date +%s)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g0 -DNDEBUG" \
  -DKAIO_SANITIZE="$san" -DKAIO_WERROR=ON -DKAIO_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
target=kaio_tests
if [ "$kind" = tsan ]; then
  target=kaio_tsan_tests  # just the files its tests are in: each must be on its list
  for f in $(grep -rl --include='*.cpp' '\[concurrency\]' tests); do
    if ! grep -q "${f#tests/}" tests/CMakeLists.txt; then
      echo "sanitize.sh: $f has [concurrency] tests but is not in kaio_tsan_tests (tests/CMakeLists.txt)" >&2
      exit 1
    fi
  done
fi
cmake --build "$dir" --parallel --target "$target"
t1=$(date +%s)

export KAIO_CACHE_DIR="$(mktemp -d /tmp/kaio-san-cache-XXXXXX)"
trap 'rm -rf "$KAIO_CACHE_DIR"' EXIT
# Abort on the first report, with a non-zero exit status.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
tests="$dir/tests/$target"
if [ "$kind" = asan ]; then
  # Not the [nvjitlink] tests: their time is nvJitLink's own assembly (not instrumented), ten
  # minutes here; the Release ctest runs them, and the PTX they assemble is emitted under
  # ASan by the codegen corpus and golden tests.
  # The host tests and the interpreted [gpu] suite side by side (each single-threaded, each
  # with a cache folder of its own); each one's output is printed when both have finished.
  mkdir -p "$KAIO_CACHE_DIR/host" "$KAIO_CACHE_DIR/gpu"
  KAIO_CACHE_DIR="$KAIO_CACHE_DIR/host" "$tests" "~[gpu]~[nvjitlink]" >"$dir/host-tests.log" 2>&1 &
  host_pid=$!
  gpu_rc=0
  KAIO_INTERPRET=1 KAIO_CACHE_DIR="$KAIO_CACHE_DIR/gpu" "$tests" "[gpu]~[agreement]" >"$dir/gpu-tests.log" 2>&1 || gpu_rc=$?
  host_rc=0
  wait "$host_pid" || host_rc=$?
  echo "sanitize.sh asan: host tests (exit $host_rc):"; cat "$dir/host-tests.log"
  echo "sanitize.sh asan: interpreted [gpu] tests (exit $gpu_rc):"; cat "$dir/gpu-tests.log"
  if [ "$host_rc" != 0 ] || [ "$gpu_rc" != 0 ]; then
    # The failures again, last, where a log's tail shows them.
    ./scripts/test-failures.sh "$dir/host-tests.log" "$dir/gpu-tests.log"
    exit 1
  fi
else
  KAIO_INTERPRET=1 "$tests" "[concurrency]"
  # Multi-threaded tests of the LMDB store (selected by name: they live with the cache).
  "$tests" "store serves readers while writers grow the map"
fi
t2=$(date +%s)
echo "sanitize.sh $kind: build $((t1 - t0)) s, tests $((t2 - t1)) s"
