// IR -> PTX text for one target SM. Pure: no CUDA, no files.
#pragma once

#include <string>
#include <utility>

#include "kaio/ir/kernel.h"

namespace kaio::codegen {

// Bumped whenever the emitted PTX for some kernel changes; it is part of the cache key.
inline constexpr int kCodegenVersion = 5;

struct Target {
  std::string arch = "sm_90";  // sm_NN with an optional a/f suffix: sm_80, sm_90a, sm_100f
  int ptx_major = 9;
  int ptx_minor = 0;
  bool annotate = false;  // KAIO_PTX_ANNOTATE: each IR op as a comment before its PTX
};

// Static shared memory one block may declare (all targets).
inline constexpr uint64_t kStaticSharedLimit = 48 * 1024;

struct ArchInfo {
  int sm = 0;          // 80, 90, 100, ...
  char suffix = '\0';  // 'a', 'f' or '\0'
};

// Parses "sm_90a"; throws UsageError for anything else.
ArchInfo parse_arch(const std::string& arch);
// The newest PTX ISA a toolkit's nvJitLink accepts (CUDA 13.0 -> 9.0, 12.8 -> 8.7).
std::pair<int, int> ptx_isa_for_toolkit(int cuda_major, int cuda_minor);
// The oldest PTX ISA that knows a target.
std::pair<int, int> min_ptx_isa_for_arch(const ArchInfo& a);
// Throws UsageError when the target is unknown or the PTX ISA too old for it.
void validate_target(const Target& t);

std::string emit_ptx(const ir::Kernel& k, const Target& t);

}  // namespace kaio::codegen
