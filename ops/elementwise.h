// Elementwise kernels built with the builder, as kernel families (jit/family.h): one
// family per op, selected by the element type. The *_kernel() functions return the f32
// kernel's IR; the launch helpers go through the family (no builder run after the first
// call of a config).
#pragma once

#include <cstdint>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

struct ElementwiseConfig {
  ir::Scalar dtype = ir::Scalar::F32;  // f32, f16 or bf16 (f16/bf16 compute in f32 where it matters)
  auto fields() const { return std::tie(dtype); }
};

// y[i] = a * x[i] + y[i]  (params: T a, const T* x, T* y, u32 n). f32, f16, bf16 declared.
jit::Family<ElementwiseConfig>& saxpy_family();
// out[i] = x[i] / (1 + exp(-x[i])) * gate[i]  (params: const T* x, const T* gate, T* out,
// u32 n), computed in f32 and rounded once for f16/bf16. f32, f16, bf16 declared.
jit::Family<ElementwiseConfig>& silu_gate_family();
// 2D: c[r * ld + col] = a[r * ld + col] + alpha * b[r * ld + col] for r < rows, col < cols
// (params: const T* a, const T* b, T* c, T alpha, u32 rows, u32 cols, u32 ld). f32 declared.
jit::Family<ElementwiseConfig>& axpby_2d_family();

// The f32 kernels (what the catalog and the tests compile).
ir::Kernel saxpy_kernel();
ir::Kernel silu_gate_kernel();
ir::Kernel axpby_2d_kernel();

// Launch helpers: 256 threads per block on `stream` (null: the default stream). T is
// float, kaio::half or kaio::bfloat16. UsageError (op "saxpy"/"silu_gate") on mismatched sizes.
template <class T>
void saxpy(T a, const jit::DeviceBuffer<T>& x, jit::DeviceBuffer<T>& y, const jit::Stream* stream = nullptr);
template <class T>
void silu_gate(const jit::DeviceBuffer<T>& x, const jit::DeviceBuffer<T>& gate, jit::DeviceBuffer<T>& out,
               const jit::Stream* stream = nullptr);

}  // namespace kaio::ops
