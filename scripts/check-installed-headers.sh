#!/usr/bin/env bash
# Checks an installed kaio (cmake --install ... --prefix PREFIX): every installed header
# compiles on its own with nothing but PREFIX/include on the include path, and none of the
# library's internal headers was installed.
set -euo pipefail
PREFIX="$1"
INC="$PREFIX/include"
fail=0
count=0
while IFS= read -r h; do
  rel="${h#"$INC"/}"
  case "$rel" in *.def) continue ;; esac
  count=$((count + 1))
  if ! echo "#include <$rel>" | ${CXX:-c++} -std=c++20 -fsyntax-only -I"$INC" -x c++ - 2>/tmp/kaio-header-check.log; then
    echo "check-installed-headers: $rel does not compile on its own:" >&2
    head -5 /tmp/kaio-header-check.log >&2
    fail=1
  fi
done < <(find "$INC/kaio" -type f | sort)
for internal in kaio/cache/store.h kaio/codegen/emitter.h kaio/ir/interp/impl.h kaio/jit/backend.h kaio/jit/driver.h \
                kaio/ops/matmul_common.h kaio/ops/matmul_engine.h kaio/ops/kernel/stage_ring.h; do
  if [ -e "$INC/$internal" ]; then
    echo "check-installed-headers: internal header $internal was installed" >&2
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "check-installed-headers: $count public headers compile on their own; no internal header installed"
exit "$fail"
