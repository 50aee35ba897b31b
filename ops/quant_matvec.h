// Matrix-vector products (and small-M matmuls) against GGUF-quantised weights:
//
//   y[M x N] = x[M x K] . W^T      W: N rows of K elements in q8_0, q4_K or q6_K blocks
//                                  (a GGUF tensor of dims [K, N], rows back to back)
//
// x is f32, f16 or bf16; y is f32, f16 or bf16. A fused pre-pass kernel quantises x to q8
// (per 32 elements: s8 values and an f32 scale d = max|x| / 127, values rint(x * 127 /
// max|x|)) into
// a workspace; the product kernel then multiplies 4 bytes at a time with dp4a and applies
// the weight and activation scales per 32 elements in f32. The integer dot products are
// exact; the f32 part's error is bounded in docs/quantized.md.
//
// For one activation row with K <= 4096 and few enough weight rows for one wave, a fused
// form: each block quantises the row into shared memory itself (no pre-pass launch). Else
// the pre-pass and the product (launched to overlap the pre-pass). From two activation
// rows up (sm_80+) the product is the tensor-core form (quant_matmul_mma.cpp, below);
// otherwise, and where warps_per_row forces it, the dp4a product in two shapes: a warp
// per weight row (8 rows per block of 256 threads), or a block of 8 warps per row where
// there are too few rows to fill the GPU and the rows are long. Activation rows go MT at a
// time (MT = 1, 4 or 16) with one weight read per MT.
//
//   std::vector<uint8_t> ws(ops::quant_matmul_workspace(m, k));  // device bytes, in practice
//   ops::quant_matmul<float, float>(y, w_bytes, 12 /* q4_K */, x, m, n, k, ws_device);
//
// Each bad argument (an unsupported type, K not a multiple of the block, a null pointer)
// is a UsageError naming the op and the argument, raised before anything is launched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/family.h"
#include "kaio/ops/device_arg.h"

namespace kaio::ops {

// Bytes of workspace quant_matmul needs for m rows of k activations (m * k s8 values,
// then m * k / 32 f32 scales, then m * k / 32 f32 scaled sums).
size_t quant_matmul_workspace(size_t m, size_t k);

// `format`: ggml's type number (8: q8_0, 12: q4_K, 14: q6_K). `warps_per_row`: 0 picks
// the form by shape; 1 or 8 force the dp4a pre-pass form with that many warps per weight
// row (tests, benchmarks: the form m > 1 took before the tensor-core form).
template <class T, class O>
void quant_matmul(Out<O> y, In<uint8_t> w, uint32_t format, In<T> x, size_t m, size_t n, size_t k,
                  Out<uint8_t> workspace, const jit::Stream* stream = nullptr, uint32_t warps_per_row = 0);

// The product kernel's config.
struct QuantMatvecConfig {
  uint32_t format = 8;                 // q8_0, q4_K, q6_K (ggml type number)
  ir::Scalar out = ir::Scalar::F32;
  uint32_t mt = 1;                     // activation rows per block (1, 4, 16)
  uint32_t warps = 1;                  // warps per weight row (1 or 8)
  auto fields() const { return std::tie(format, out, mt, warps); }
  std::string str() const;
};
// The pre-pass (activation quantisation) config. `sums`: also store each 32's integer sum
// of its s8 values times its scale, d * sum q in f32 (the tensor-core form's q4_K min
// term), after the scales.
struct QuantActConfig {
  ir::Scalar in = ir::Scalar::F32;
  bool sums = false;
  auto fields() const { return std::tie(in, sums); }
  std::string str() const;
};

ir::Kernel build_quant_matvec(const QuantMatvecConfig& c);

// The fused form for one activation row (quant_matvec_fused.cpp), picked by shape: each
// block quantises the row into shared memory itself (no pre-pass launch), then its 8 warps
// take a weight row each; a lane's task is 64 weights of a K-quant super-block (32 of q8_0)
// and its next task's words are loaded while it computes the current one.
struct QuantMatvecFusedConfig {
  uint32_t format = 8;
  ir::Scalar in = ir::Scalar::F32;   // activations
  ir::Scalar out = ir::Scalar::F32;
  auto fields() const { return std::tie(format, in, out); }
  std::string str() const;
};
ir::Kernel build_quant_matvec_fused(const QuantMatvecFusedConfig& c);
jit::Family<QuantMatvecFusedConfig>& quant_matvec_fused_family();
namespace detail {
bool quant_matvec_fused_fits(uint32_t format, ir::Scalar in, size_t n, size_t k);
void launch_quant_matvec_fused(const QuantMatvecFusedConfig& c, uint64_t w, uint64_t x, uint64_t y, size_t n, size_t k,
                               size_t row_bytes, const jit::Stream* stream);
}  // namespace detail
ir::Kernel build_quant_act(const QuantActConfig& c);

// The tensor-core form for several activation rows (quant_matmul_mma.cpp), picked by shape
// (m >= 2 on sm_80+): after the pre-pass, a block of 8 warps owns 16 weight rows (or of 16
// warps 32 rows, `rows`) and 8 or 16 activation rows and its warps share out the row's k;
// each warp multiplies its 16 or 32 weight rows (mma.sync m16n8k32 s8, the decoded weights
// as A, one or two m16 tiles) by the activations' q8 values (B) per 32 elements and scales
// the s32 results into f32 accumulators.
struct QuantMatmulMmaConfig {
  uint32_t format = 8;
  ir::Scalar out = ir::Scalar::F32;
  uint32_t nt = 2;     // n8 tiles of activation rows per block (1 or 2: 8 or 16 rows)
  uint32_t rows = 16;  // weight rows per block: 16 (8 warps, one m16 tile each) or 32 (16 warps, two m16 tiles each)
  auto fields() const { return std::tie(format, out, nt, rows); }
  std::string str() const;
};
ir::Kernel build_quant_matmul_mma(const QuantMatmulMmaConfig& c);
jit::Family<QuantMatmulMmaConfig>& quant_matmul_mma_family();
namespace detail {
// Whether quant_matmul (warps_per_row 0) takes the tensor-core form for this shape.
bool quant_matmul_mma_picked(uint32_t format, size_t m, size_t n, size_t k);
// The tensor-core form's weight rows per block for this shape (16 or 32; q6_K: 16), or what
// force_quant_matmul_mma_rows set (tests, benchmarks: 16 or 32, process-wide; 0 returns the
// choice to the shape; q6_K has no 32-row form and keeps 16).
uint32_t quant_matmul_mma_rows(uint32_t format, size_t m, size_t n, size_t k);
void force_quant_matmul_mma_rows(uint32_t rows);
// Tensor-core products launched so far with 16 or 32 weight rows per block (process-wide).
uint64_t quant_matmul_mma_launches(uint32_t rows);
// Tests, benchmarks: with `on`, the tensor-core form for every m >= 2 on sm_80+ (q8_0 at
// m <= 4 too, which the shape rule leaves to the dp4a form). Process-wide.
void force_quant_matmul_mma(bool on);
// The dp4a pre-pass form's warps per weight row where quant_matmul picks them (1 or 8).
uint32_t quant_matvec_warps(size_t n, size_t k);
// The tensor-core product over the pre-pass's workspace (q4_K: with the sums).
void launch_quant_matmul_mma(const QuantMatmulMmaConfig& c, uint64_t w, uint64_t workspace, uint64_t y, size_t m, size_t n,
                             size_t k, size_t row_bytes, const jit::Stream* stream);
}  // namespace detail
jit::Family<QuantMatvecConfig>& quant_matvec_family();
jit::Family<QuantActConfig>& quant_act_family();

}  // namespace kaio::ops
