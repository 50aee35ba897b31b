#include "kaio/jit/linker.h"

#include <nvJitLink.h>

#include "kaio/ir/error.h"

namespace kaio::jit {

namespace {

const char* result_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "NVJITLINK_ERROR_UNKNOWN";
}

// Owns one nvJitLink handle.
struct Handle {
  nvJitLinkHandle h = nullptr;
  ~Handle() {
    if (h) nvJitLinkDestroy(&h);
  }
  std::string log(bool info) {
    size_t n = 0;
    if ((info ? nvJitLinkGetInfoLogSize(h, &n) : nvJitLinkGetErrorLogSize(h, &n)) != NVJITLINK_SUCCESS || n <= 1)
      return {};
    std::string s(n, '\0');
    if ((info ? nvJitLinkGetInfoLog(h, s.data()) : nvJitLinkGetErrorLog(h, s.data())) != NVJITLINK_SUCCESS) return {};
    s.resize(n - 1);  // drop the terminating NUL
    return s;
  }
};

}  // namespace

// -verbose fills the info log with the resource usage (registers, spills, shared memory).
const std::string& link_flags() {
  static const std::string flags = "-verbose";
  return flags;
}

std::vector<std::string> link_options(const std::string& arch) { return {"-arch=" + arch, link_flags()}; }

std::pair<int, int> nvjitlink_version() {
  unsigned major = 0, minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) throw ToolError("nvJitLink", "NVJITLINK_ERROR_INTERNAL", "nvJitLinkVersion failed");
  return {static_cast<int>(major), static_cast<int>(minor)};
}

LinkResult link_ptx(const std::string& ptx, const std::string& arch, const std::string& kernel_name) {
  const std::vector<std::string> options = link_options(arch);
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  Handle h;
  auto fail = [&](nvJitLinkResult r, const std::string& step) {
    std::string log = h.h ? h.log(false) : std::string();
    std::string info = h.h ? h.log(true) : std::string();
    if (!info.empty()) log += (log.empty() ? "" : "\n") + info;
    throw ToolError("nvJitLink", result_name(r), step + " for kernel '" + kernel_name + "'", log);
  };
  nvJitLinkResult r = nvJitLinkCreate(&h.h, static_cast<uint32_t>(opts.size()), opts.data());
  if (r != NVJITLINK_SUCCESS) fail(r, "nvJitLinkCreate");
  std::string input_name = kernel_name + ".ptx";
  r = nvJitLinkAddData(h.h, NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), input_name.c_str());
  if (r != NVJITLINK_SUCCESS) fail(r, "nvJitLinkAddData");
  r = nvJitLinkComplete(h.h);
  if (r != NVJITLINK_SUCCESS) fail(r, "nvJitLinkComplete");
  size_t n = 0;
  r = nvJitLinkGetLinkedCubinSize(h.h, &n);
  if (r != NVJITLINK_SUCCESS) fail(r, "nvJitLinkGetLinkedCubinSize");
  LinkResult out;
  out.cubin.resize(n);
  r = nvJitLinkGetLinkedCubin(h.h, out.cubin.data());
  if (r != NVJITLINK_SUCCESS) fail(r, "nvJitLinkGetLinkedCubin");
  out.info_log = h.log(true);
  return out;
}

}  // namespace kaio::jit
