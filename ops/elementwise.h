// Elementwise ops.
//
// The op library's elementwise ops (add ... gelu_gate_tanh below) are maps (ops/map.h):
// one kernel family per op, f32/f16/bf16, 16-byte vector accesses when the pointers are
// 16-byte aligned, computed in f32 and rounded once to T. T is given explicitly:
//
//   ops::silu_gate<kaio::bfloat16>(out, x, gate, n, &stream);   // out = silu(x) * gate
//
// Arrays are In<T> / Out<T> (ops/device_arg.h): DeviceBuffers, DevicePtrs or raw device
// addresses; the strided forms take Strided<In<T>> / Strided<Out<T>> ({array, ld}) and a
// rows x cols shape. `out` may be an input (in place). Bad input (null address, n = 0, an array
// shorter than n, unsupported dtype) is a UsageError naming the op and the argument,
// raised before anything is launched.
//
// Below them, the original example kernels (saxpy, silu_gate on DeviceBuffers, axpby_2d)
// as families selected by the element type; their *_kernel() functions return the f32
// kernel's IR.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/family.h"
#include "kaio/ops/device_arg.h"
#include "kaio/ops/map.h"

namespace kaio::ops {

// out = a + b, a - b, a * b.
template <class T>
void add(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* stream = nullptr);
template <class T>
void sub(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* stream = nullptr);
template <class T>
void mul(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* stream = nullptr);
// out = alpha * x + beta * y.
template <class T>
void axpby(Out<T> out, In<T> x, In<T> y, float alpha, float beta, size_t n, const jit::Stream* stream = nullptr);
// out = max(x, 0) (NaN stays NaN).
template <class T>
void relu(Out<T> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);
// out = x / (1 + exp(-x)).
template <class T>
void silu(Out<T> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);
// out = x / 2 * (1 + erf(x / sqrt(2))) (PyTorch's default gelu).
template <class T>
void gelu(Out<T> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);
// out = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) (gelu(approximate="tanh")).
template <class T>
void gelu_tanh(Out<T> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);
// out = exp(x).
template <class T>
void exp(Out<T> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);
// Gated activations (SwiGLU, GEGLU): out = silu(x) * gate, gelu(x) * gate, gelu_tanh(x) * gate.
template <class T>
void silu_gate(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* stream = nullptr);
template <class T>
void gelu_gate(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* stream = nullptr);
template <class T>
void gelu_gate_tanh(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* stream = nullptr);

// The same ops over rows x cols elements of strided arrays (each array's rows `ld`
// elements apart): ops::add<float>({out, ld_out}, {a, lda}, {b, ldb}, rows, cols, &stream).
template <class T>
using SIn = Strided<In<T>>;
template <class T>
using SOut = Strided<Out<T>>;
template <class T>
void add(SOut<T> out, SIn<T> a, SIn<T> b, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void sub(SOut<T> out, SIn<T> a, SIn<T> b, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void mul(SOut<T> out, SIn<T> a, SIn<T> b, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void axpby(SOut<T> out, SIn<T> x, SIn<T> y, float alpha, float beta, uint32_t rows, uint32_t cols,
           const jit::Stream* stream = nullptr);
template <class T>
void relu(SOut<T> out, SIn<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void silu(SOut<T> out, SIn<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void gelu(SOut<T> out, SIn<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void gelu_tanh(SOut<T> out, SIn<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void exp(SOut<T> out, SIn<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void silu_gate(SOut<T> out, SIn<T> x, SIn<T> gate, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void gelu_gate(SOut<T> out, SIn<T> x, SIn<T> gate, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
template <class T>
void gelu_gate_tanh(SOut<T> out, SIn<T> x, SIn<T> gate, uint32_t rows, uint32_t cols,
                    const jit::Stream* stream = nullptr);

// The maps behind these ops, by op name ("add", "silu_gate", ...; UsageError for another
// name), and all of them (their families are "map:<op>").
const detail::MapKernels& elementwise_op(std::string_view op);
std::vector<std::string> elementwise_op_names();
std::vector<jit::FamilyBase*> elementwise_families();

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
