#!/usr/bin/env bash
# Prints the failed test cases of Catch2 logs (each failure's block: the case, the assertion,
# its messages, and the seed line that repeats its random inputs), so that the end of a long
# CI log shows what failed. Usage: scripts/test-failures.sh LOG...
set -uo pipefail
echo "==== test failures (again) ===="
for log in "$@"; do
  [ -f "$log" ] || continue
  # A Catch2 console block starts at a line of dashes followed by the case name; keep the
  # blocks with a FAILED or a fatal error, and the seed lines.
  awk -v lf="$log" '
    function flush() { if (block ~ /FAILED|fatal error/) printf "%s: %s\n", lf, block; block = ""; n = 0 }
    # a dashes line opens a case (name lines follow) or closes its name (a second one)
    length($0) == 79 && /^-+$/ { if (n > 0 && n <= 4 && block !~ /\n[.]+/) { block = block "\n" $0; n++; next } flush(); block = $0; n = 1; next }
    length($0) == 79 && /^=+$/ { flush(); next }
    /^random inputs of / { if (n > 0) { block = block "\n" $0; n++ } else print lf ": " $0; next }
    { if (n > 0) { block = block "\n" $0; n++ } }
    END { flush() }
  ' "$log" | head -c 20000
done
echo "==== end of test failures ===="
