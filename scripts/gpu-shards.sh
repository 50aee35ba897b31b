#!/usr/bin/env bash
# Runs the test cases a Catch2 spec selects (default "[gpu]") in N concurrent processes on
# one machine, each with its own cache folder, and reports every shard. On the GPU machine a
# whole [gpu] pass is longer than one command may run when the cases run one after another:
# most of their time is the float64 references on the CPU, which the shards spread over its
# cores.
#
#   scripts/gpu-shards.sh [-n N] [-t SECONDS] [-b BUILD] [-o DIR] [SPEC]
#     -n  shards (default 8)
#     -t  limit per shard in seconds (default 480; a shard past it is killed and reported)
#     -b  the build folder holding tests/kaio_tests (default .carry/build, as gpu-bundle.sh
#         leaves it)
#     -o  where the logs and the list of cases that did not pass go (default $OUT, else a
#         new temporary folder)
#
# Exit 0 when every shard passed. Otherwise DIR/not-passed holds the cases that failed or
# never ran (a shard killed by its limit), one per line with commas escaped, for
# `kaio_tests -f DIR/not-passed` or `-r FILE` of this script to run again.
#   -r FILE instead of SPEC: the names in FILE (as written to not-passed).
set -uo pipefail
cd "$(dirname "$0")/.."
N=8 LIMIT=480 BUILD=.carry/build DIR="${OUT:-}" NAMES_FILE=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "n:t:b:o:r:h" opt; do
  case $opt in
    n) N=$OPTARG ;;
    t) LIMIT=$OPTARG ;;
    b) BUILD=$OPTARG ;;
    o) DIR=$OPTARG ;;
    r) NAMES_FILE=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
SPEC="${1:-[gpu]}"
TESTS="$BUILD/tests/kaio_tests"
[ -x "$TESTS" ] || { echo "gpu-shards.sh: no $TESTS (run scripts/gpu-bundle.sh, or give -b)" >&2; exit 2; }
[ -n "$DIR" ] || DIR=$(mktemp -d /tmp/kaio-shards-XXXXXX)
mkdir -p "$DIR"

# Catch2 reads each line of -f as one test name, but splits it at commas unless escaped.
if [ -n "$NAMES_FILE" ]; then
  cp "$NAMES_FILE" "$DIR/names"
else
  "$TESTS" "$SPEC" --list-test-names-only | grep -v '^$' | sed 's/,/\\,/g' > "$DIR/names"
fi
total=$(grep -c . "$DIR/names")
[ "$total" -gt 0 ] || { echo "gpu-shards.sh: no test case matches $SPEC (no device, and KAIO_INTERPRET unset?)" >&2; exit 2; }
# Round-robin, so that the long cases of one source file land in different shards.
for i in $(seq 0 $((N - 1))); do : > "$DIR/shard$i"; done
awk -v n="$N" -v d="$DIR" '{ print > (d "/shard" ((NR - 1) % n)) }' "$DIR/names"

start=$(date +%s)
for i in $(seq 0 $((N - 1))); do
  [ -s "$DIR/shard$i" ] || continue
  (
    cache=$(mktemp -d /tmp/kaio-shard-cache-XXXXXX)
    KAIO_CACHE_DIR="$cache" timeout "$LIMIT" "$TESTS" -f "$DIR/shard$i" -r compact -d yes > "$DIR/log$i" 2>&1
    echo "rc=$?" >> "$DIR/log$i"
    rm -rf "$cache"
  ) &
done
wait
echo "gpu-shards.sh: $total test cases in $N shards, $(( $(date +%s) - start )) s"

# A case passed when its duration line is there and no failure came before any of its lines.
# With -d yes Catch2 prints "<seconds> s: <name>" after each section and after each run of a
# case (once per leaf section), failures before them; a failure belongs to the next line
# that names a case.
sed 's/\\,/,/g' "$DIR/names" | sort > "$DIR/all.sorted"
: > "$DIR/passed"
: > "$DIR/failed"
failed=0
for i in $(seq 0 $((N - 1))); do
  [ -s "$DIR/shard$i" ] || continue
  rc=$(sed -n 's/^rc=//p' "$DIR/log$i" | tail -1)
  summary=$(grep -E "^(Passed|Failed|All tests)|test cases" "$DIR/log$i" | tail -1)
  echo "shard $i: exit $rc; ${summary:-no summary (killed?)}"
  [ "$rc" = 0 ] || failed=1
  awk -v passed="$DIR/passed" -v bad_out="$DIR/failed" '
    FNR == NR { is_case[$0] = 1; next }
    /^[0-9.]+ s: / {
      name = $0; sub(/^[0-9.]+ s: /, "", name)
      if (!(name in is_case)) next
      print name >> passed
      if (bad) print name >> bad_out
      bad = 0; next
    }
    /: failed: |: FAILED:/ { bad = 1 }' "$DIR/all.sorted" "$DIR/log$i"
done
# Seen and never after a failure; the rest failed or never ran.
sort -u "$DIR/passed" | comm -23 - <(sort -u "$DIR/failed") > "$DIR/passed.sorted"
comm -23 "$DIR/all.sorted" "$DIR/passed.sorted" | sed 's/,/\\,/g' > "$DIR/not-passed"
left=$(grep -c . "$DIR/not-passed")
echo "slowest:"
grep -hE "^[0-9.]+ s: " "$DIR"/log* | sort -rn | head -5 | sed 's/^/  /'
if [ "$left" -gt 0 ] || [ "$failed" -ne 0 ]; then
  echo "gpu-shards.sh: $left of $total test cases did not pass (failed or never ran): $DIR/not-passed"
  grep -hE ": failed: |: FAILED:" "$DIR"/log* | head -20 | sed 's/^/  /'
  exit 1
fi
echo "gpu-shards.sh: all $total test cases passed"
