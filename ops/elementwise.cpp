#include "kaio/ops/elementwise.h"

#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ir/half.h"

namespace kaio::ops {

namespace {

using ir::Scalar;

// "saxpy" for f32 (the name the catalog has always had), "saxpy_f16" etc. otherwise.
std::string kernel_name(const char* base, Scalar s) {
  return s == Scalar::F32 ? std::string(base) : std::string(base) + "_" + ir::scalar_name(s);
}

void check_dtype(const char* op, Scalar s) {
  if (s != Scalar::F32 && s != Scalar::F16 && s != Scalar::BF16)
    throw UsageError(op, op, std::string("dtype ") + ir::scalar_name(s) + " is not supported (f32, f16, bf16)");
}

ir::Type ptr(Scalar s, bool read_only) { return ir::Type::pointer(s, read_only); }

ir::Kernel build_saxpy(const ElementwiseConfig& c) {
  check_dtype("saxpy", c.dtype);
  ir::KernelBuilder b(kernel_name("saxpy", c.dtype));
  auto a = b.param("a", ir::Type::scalar(c.dtype));
  auto x = b.param("x", ptr(c.dtype, true));
  auto y = b.param("y", ptr(c.dtype, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];  // one statement per load keeps the IR order fixed
    ir::Value yi = y[i];
    y[i] = a * xi + yi;
  });
  return b.build();
}

ir::Kernel build_silu_gate(const ElementwiseConfig& c) {
  check_dtype("silu_gate", c.dtype);
  const bool f32 = c.dtype == Scalar::F32;
  ir::KernelBuilder b(f32 ? std::string("fused_silu_gate") : kernel_name("fused_silu_gate", c.dtype));
  auto x = b.param("x", ptr(c.dtype, true));
  auto gate = b.param("gate", ptr(c.dtype, true));
  auto out = b.param("out", ptr(c.dtype, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    ir::Value g = gate[i];
    if (f32) {
      out[i] = xi / (1.0f + ir::exp(-xi)) * g;
    } else {  // f32 inside, one rounding at the end
      ir::Value xf = ir::cast<float>(xi), gf = ir::cast<float>(g);
      out[i] = ir::cast(xf / (1.0f + ir::exp(-xf)) * gf, ir::Type::scalar(c.dtype), ir::Rounding::Rn);
    }
  });
  return b.build();
}

ir::Kernel build_axpby_2d(const ElementwiseConfig& c) {
  check_dtype("axpby_2d", c.dtype);
  ir::KernelBuilder b(kernel_name("axpby_2d", c.dtype));
  auto a = b.param("a", ptr(c.dtype, true));
  auto bb = b.param("b", ptr(c.dtype, true));
  auto cc = b.param("c", ptr(c.dtype, false));
  auto alpha = b.param("alpha", ir::Type::scalar(c.dtype));
  auto rows = b.param<uint32_t>("rows");
  auto cols = b.param<uint32_t>("cols");
  auto ld = b.param<uint32_t>("ld");
  auto col = b.global_id_x();
  auto row = b.global_id_y();
  b.if_(row < rows && col < cols, [&] {
    // 64-bit offset: rows * ld may exceed 2^32 elements.
    ir::Value r64 = ir::cast<uint64_t>(row), ld64 = ir::cast<uint64_t>(ld), c64 = ir::cast<uint64_t>(col);
    ir::Value off = r64 * ld64 + c64;
    ir::Value av = a[off], bv = bb[off];
    cc[off] = ir::fma(alpha, bv, av);
  });
  return b.build();
}

const std::vector<ElementwiseConfig> kAllTypes = {{Scalar::F32}, {Scalar::F16}, {Scalar::BF16}};

uint32_t checked_n(const char* op, size_t n) {
  if (n > 0xffffffffu)
    throw UsageError(op, op, "n = " + std::to_string(n) + " elements exceeds the u32 element count of the kernel");
  return static_cast<uint32_t>(n);
}

jit::LaunchConfig one_d(uint32_t n, const jit::Stream* stream) {
  return jit::LaunchConfig{.grid = {n ? (n + 255) / 256 : 1}, .block = {256}, .stream = stream};
}

}  // namespace

jit::Family<ElementwiseConfig>& saxpy_family() {
  static jit::Family<ElementwiseConfig> f("saxpy", build_saxpy, kAllTypes);
  return f;
}

jit::Family<ElementwiseConfig>& silu_gate_family() {
  static jit::Family<ElementwiseConfig> f("silu_gate", build_silu_gate, kAllTypes);
  return f;
}

jit::Family<ElementwiseConfig>& axpby_2d_family() {
  static jit::Family<ElementwiseConfig> f("axpby_2d", build_axpby_2d, {{Scalar::F32}});
  return f;
}

ir::Kernel saxpy_kernel() { return build_saxpy({}); }
ir::Kernel silu_gate_kernel() { return build_silu_gate({}); }
ir::Kernel axpby_2d_kernel() { return build_axpby_2d({}); }

template <class T>
void saxpy(T a, const jit::DeviceBuffer<T>& x, jit::DeviceBuffer<T>& y, const jit::Stream* stream) {
  if (x.size() != y.size())
    throw UsageError("saxpy", "saxpy", "x has " + std::to_string(x.size()) + " elements, y " + std::to_string(y.size()));
  uint32_t n = checked_n("saxpy", y.size());
  if (n == 0) return;
  saxpy_family().launch({ir::ScalarOf<T>::value}, one_d(n, stream), a, x, y, n);
}

template <class T>
void silu_gate(const jit::DeviceBuffer<T>& x, const jit::DeviceBuffer<T>& gate, jit::DeviceBuffer<T>& out,
               const jit::Stream* stream) {
  if (x.size() != gate.size() || x.size() != out.size())
    throw UsageError("silu_gate", "silu_gate", "x, gate and out must have one size; they have " +
                                                   std::to_string(x.size()) + ", " + std::to_string(gate.size()) +
                                                   " and " + std::to_string(out.size()) + " elements");
  uint32_t n = checked_n("silu_gate", out.size());
  if (n == 0) return;
  silu_gate_family().launch({ir::ScalarOf<T>::value}, one_d(n, stream), x, gate, out, n);
}

template void saxpy<float>(float, const jit::DeviceBuffer<float>&, jit::DeviceBuffer<float>&, const jit::Stream*);
template void saxpy<kaio::half>(kaio::half, const jit::DeviceBuffer<kaio::half>&, jit::DeviceBuffer<kaio::half>&,
                                const jit::Stream*);
template void saxpy<kaio::bfloat16>(kaio::bfloat16, const jit::DeviceBuffer<kaio::bfloat16>&,
                                    jit::DeviceBuffer<kaio::bfloat16>&, const jit::Stream*);
template void silu_gate<float>(const jit::DeviceBuffer<float>&, const jit::DeviceBuffer<float>&, jit::DeviceBuffer<float>&,
                               const jit::Stream*);
template void silu_gate<kaio::half>(const jit::DeviceBuffer<kaio::half>&, const jit::DeviceBuffer<kaio::half>&,
                                    jit::DeviceBuffer<kaio::half>&, const jit::Stream*);
template void silu_gate<kaio::bfloat16>(const jit::DeviceBuffer<kaio::bfloat16>&, const jit::DeviceBuffer<kaio::bfloat16>&,
                                        jit::DeviceBuffer<kaio::bfloat16>&, const jit::Stream*);

}  // namespace kaio::ops
