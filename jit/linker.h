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
// Links with link_options(arch).
LinkResult link_ptx(const std::string& ptx, const std::string& arch, const std::string& kernel_name);
// The options kaio passes for an arch: -arch=<arch> followed by link_flags().
std::vector<std::string> link_options(const std::string& arch);
// The options that do not depend on the arch, as one string (part of the cache key).
const std::string& link_flags();
// nvJitLink's version (major, minor).
std::pair<int, int> nvjitlink_version();

}  // namespace kaio::jit
