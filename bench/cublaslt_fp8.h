// cuBLASLt's FP8 matmul for bench/matmul, loaded with dlopen (libcublasLt.so.13) so that
// nothing links against it: A and B e4m3 (or one e5m2), bf16 C / D, f32 compute and
// scale, per-tensor scales by device pointer (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kaio/ir/types.h"
#include "kaio/jit/buffer.h"

namespace kaio::bench {

class CublasLtFp8 {
 public:
  CublasLtFp8() = default;
  ~CublasLtFp8();
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;

  // Opens the library and a handle; false (with why()) when it is missing.
  bool load();
  const std::string& why() const { return why_; }

  // Row-major C (m x n, bf16) = scale_a * scale_b * A (m x k, row-major) * B (k x n,
  // column-major): cuBLASLt's TN form on column-major C^T = B^T A^T, the layout its FP8
  // kernels require. `fast_accum`: CUBLASLT_MATMUL_DESC_FAST_ACCUM (no periodic promotion
  // of the tensor cores' accumulator, as kaio's kernels do). Picks the heuristic's best
  // algorithm; returns the cublasStatus_t (0: ready).
  int prepare(ir::Scalar a_type, ir::Scalar b_type, uint32_t m, uint32_t n, uint32_t k, uint64_t scale_a, uint64_t scale_b,
              bool fast_accum, void* stream);
  int run(uint64_t a, uint64_t b, uint64_t c) const;  // on the prepared problem
  static std::string status_name(int status);

 private:
  void release();
  void* lib_ = nullptr;
  void* handle_ = nullptr;
  void* desc_ = nullptr;
  void* layout_[3] = {};  // Lt's A (our B), Lt's B (our A), C = D
  uint64_t algo_[8] = {};  // cublasLtMatmulAlgo_t
  void* stream_ = nullptr;
  std::unique_ptr<jit::DeviceBuffer<uint8_t>> workspace_;
  std::string why_;
};

}  // namespace kaio::bench
