// nvJitLink: PTX -> cubin for a named SM. Needs no GPU.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kaio::jit {

struct LinkResult {
  std::string cubin;
  std::string info_log;
};

// Throws kaio::ToolError("nvJitLink", <NVJITLINK_ERROR_...>, ..., error log + info log).
LinkResult link_ptx(const std::string& ptx, const std::string& arch, const std::vector<std::string>& options,
                    const std::string& kernel_name);
// The options kaio passes for an arch (part of the cache key).
std::vector<std::string> link_options(const std::string& arch);
// nvJitLink's version (major, minor).
std::pair<int, int> nvjitlink_version();

}  // namespace kaio::jit
