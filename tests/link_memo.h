// nvJitLink results memoised for the test process. Many tests assemble the same kernels:
// the catalog test assembles every kernel, and each family's test assembles its own again to
// look at their resources and instructions. Assembly is nvJitLink's own time (most of the
// host suite's), so the second request for the same PTX, arch and name returns the first
// result. Failures are never memoised: they throw from nvJitLink every time.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/linker.h"

namespace kaio::test {

inline jit::LinkResult link_ptx(const std::string& ptx, const std::string& arch, const std::string& name) {
  static std::mutex m;
  static std::map<std::tuple<uint64_t, uint64_t, size_t, std::string, std::string>, jit::LinkResult> done;
  const ir::Hash128 h = ir::hash_bytes(ptx.data(), ptx.size());
  const auto key = std::make_tuple(h.lo, h.hi, ptx.size(), arch, name);
  {
    std::lock_guard<std::mutex> g(m);
    if (auto it = done.find(key); it != done.end()) return it->second;
  }
  jit::LinkResult r = jit::link_ptx(ptx, arch, name);  // throws on failure: nothing stored
  std::lock_guard<std::mutex> g(m);
  done.emplace(key, r);
  return r;
}

}  // namespace kaio::test
