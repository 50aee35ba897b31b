#include "kaio/jit/resources.h"

#include <algorithm>
#include <cstdlib>
#include <regex>

namespace kaio::jit {

namespace {
uint64_t first_number(const std::string& log, const std::regex& re) {
  std::smatch m;
  if (std::regex_search(log, m, re)) return std::strtoull(m[1].str().c_str(), nullptr, 10);
  return 0;
}
}  // namespace

Resources parse_resources(const std::string& log, uint32_t launch_bound_threads) {
  Resources r;
  r.registers = static_cast<int>(first_number(log, std::regex(R"([Uu]sed (\d+) registers)")));
  r.local_bytes = first_number(log, std::regex(R"((\d+) bytes stack frame)"));
  r.spill_stores = first_number(log, std::regex(R"((\d+) bytes spill stores)"));
  r.spill_loads = first_number(log, std::regex(R"((\d+) bytes spill loads)"));
  r.static_shared = first_number(log, std::regex(R"((\d+) bytes smem)"));
  r.local_bytes = std::max<uint64_t>(r.local_bytes, first_number(log, std::regex(R"((\d+) bytes lmem)")));
  // 64K registers per SM, allocated per warp in units of 256: the largest block that fits.
  int per_warp = ((std::max(r.registers, 1) * 32 + 255) / 256) * 256;
  int warps = 65536 / per_warp;
  r.max_threads_per_block = std::min(1024, warps * 32);
  if (launch_bound_threads) r.max_threads_per_block = std::min<int>(r.max_threads_per_block, static_cast<int>(launch_bound_threads));
  return r;
}

std::string Resources::str() const {
  return std::to_string(registers) + " registers, " + std::to_string(static_shared) + " B static shared, " +
         std::to_string(local_bytes) + " B local (" + std::to_string(spill_stores) + " B spill stores, " +
         std::to_string(spill_loads) + " B spill loads), max " + std::to_string(max_threads_per_block) +
         " threads per block" +
         (whole_program ? " (device, whole-program compile)" : from_device ? " (device)" : " (estimated)");
}

}  // namespace kaio::jit
