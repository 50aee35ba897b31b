// The op library's elementwise ops, each a map (ops/map.h) over f32 values. Activations
// have two forms: the IR's precise math for f32 data, and forms built for 16-bit outputs
// (ops/math16.h) for f16/bf16 data, picked while the kernel of a dtype is built.
#include <algorithm>
#include <array>
#include <string>

#include "kaio/ir/half.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/map_dtype.h"
#include "kaio/ops/math16.h"
#include "kaio/ops/math32.h"

namespace kaio::ops {

namespace {

using ir::Value;
using In1 = std::span<Value>;

Value silu_of(Value x) { return x / (1.0f + ir::exp(-x)); }
// The IR's erf and tanh forms: what f32 kernels built with fast math use (a matmul epilogue
// asked for tanh.approx gets it).
Value gelu_erf_of(Value x) { return 0.5f * x * (1.0f + ir::erf(x * 0.70710678118654752f)); }
Value gelu_tanh_of(Value x) {
  Value inner = 0.79788456080286536f * ir::fma(0.044715f * x, x * x, x);  // sqrt(2/pi) (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + ir::tanh(inner));
}

// An activation with an f32 form (the IR's precise math, or ops/math32.h's short forms for
// gelu and gelu_tanh, whose fast-math kernels keep the IR's forms) and a form for 16-bit
// outputs (ops/math16.h: short forms with .approx steps, within 0.53 ulp of the output type).
struct Act {
  Value (*f32)(Value);
  Value (*f16)(Value);
  Value (*f32_fast)(Value) = nullptr;
  Value operator()(ir::KernelBuilder& b, Value x) const {
    if (detail::building_map_dtype() == ir::Scalar::F32) return f32_fast && b.fast_math_on() ? f32_fast(x) : f32(x);
    b.fast_math();  // changes none of the 16-bit forms (their .approx ops are explicit); kept: exp's keys stay
    return f16(x);
  }
};
constexpr Act kSilu{silu_of, detail::silu16}, kGelu{detail::gelu32, detail::gelu16, gelu_erf_of},
    kGeluTanh{detail::gelu_tanh32, detail::gelu_tanh16, gelu_tanh_of},
    kExp{[](Value x) { return ir::exp(x); }, detail::exp16};

struct OpDef {
  const char* name;
  std::vector<std::string> inputs, scalars;
  MapBody body;
};

MapBody unary(Value (*f)(Value)) {
  return [f](ir::KernelBuilder&, In1 in, In1) { return f(in[0]); };
}
MapBody unary(Act f) {
  return [f](ir::KernelBuilder& b, In1 in, In1) { return f(b, in[0]); };
}
MapBody gated(Act f) {
  return [f](ir::KernelBuilder& b, In1 in, In1) { return f(b, in[0]) * in[1]; };
}

const std::vector<OpDef>& op_defs() {
  static const std::vector<OpDef> defs = {
      {"add", {"a", "b"}, {}, [](ir::KernelBuilder&, In1 in, In1) { return in[0] + in[1]; }},
      {"sub", {"a", "b"}, {}, [](ir::KernelBuilder&, In1 in, In1) { return in[0] - in[1]; }},
      {"mul", {"a", "b"}, {}, [](ir::KernelBuilder&, In1 in, In1) { return in[0] * in[1]; }},
      {"axpby", {"x", "y"}, {"alpha", "beta"},
       [](ir::KernelBuilder&, In1 in, In1 s) { return ir::fma(s[0], in[0], s[1] * in[1]); }},
      // select keeps NaN (max(NaN, 0) would give 0).
      {"relu", {"x"}, {}, unary([](Value x) { return ir::select(x < 0.0f, 0.0f, x); })},
      {"silu", {"x"}, {}, unary(kSilu)},
      {"gelu", {"x"}, {}, unary(kGelu)},
      {"gelu_tanh", {"x"}, {}, unary(kGeluTanh)},
      {"exp", {"x"}, {}, unary(kExp)},
      {"silu_gate", {"x", "gate"}, {}, gated(kSilu)},
      {"gelu_gate", {"x", "gate"}, {}, gated(kGelu)},
      {"gelu_gate_tanh", {"x", "gate"}, {}, gated(kGeluTanh)},
  };
  return defs;
}

struct Registry {
  std::vector<std::unique_ptr<detail::MapKernels>> ops;  // in op_defs() order
};

// Built at first use (families register by name then); never destroyed, as families may
// be used from static destructors of the application.
const Registry& registry() {
  static const Registry* r = [] {
    auto* reg = new Registry;
    const std::vector<ir::Scalar> all = {ir::Scalar::F32, ir::Scalar::F16, ir::Scalar::BF16};
    for (const OpDef& d : op_defs())
      reg->ops.push_back(std::make_unique<detail::MapKernels>(std::string("map:") + d.name, d.name,
                                                              MapSpec{d.name, d.inputs, d.scalars, d.body}, all));
    return reg;
  }();
  return *r;
}

// Index of each op in op_defs(), for the call paths (no string lookups per call).
enum Id : size_t { Add, Sub, Mul, Axpby, Relu, Silu, Gelu, GeluTanh, Exp, SiluGate, GeluGate, GeluGateTanh };

template <class T>
void run(Id id, const Out<T>& out, std::initializer_list<In<T>> in, std::initializer_list<float> scalars, size_t n,
         const jit::Stream* stream) {
  const detail::MapKernels& k = *registry().ops[id];
  std::array<uint64_t, 2> addr{};
  std::array<size_t, 2> sizes{};
  size_t i = 0;
  for (const In<T>& a : in) {
    addr[i] = a.address;
    sizes[i++] = a.size;
  }
  k.launch(ir::ScalarOf<T>::value, out.address, out.size, std::span<const uint64_t>(addr.data(), i),
           std::span<const size_t>(sizes.data(), i), std::span<const float>(scalars.begin(), scalars.size()), n, stream);
}

template <class T>
void run_rows(Id id, const Strided<Out<T>>& out, std::initializer_list<Strided<In<T>>> in,
              std::initializer_list<float> scalars, uint32_t rows, uint32_t cols, const jit::Stream* stream) {
  const detail::MapKernels& k = *registry().ops[id];
  std::array<uint64_t, 2> addr{}, ld{};
  std::array<size_t, 2> sizes{};
  size_t i = 0;
  for (const Strided<In<T>>& a : in) {
    addr[i] = a.array.address;
    sizes[i] = a.array.size;
    ld[i++] = a.ld;
  }
  k.launch_rows(ir::ScalarOf<T>::value, out.array.address, out.array.size, out.ld,
                std::span<const uint64_t>(addr.data(), i), std::span<const size_t>(sizes.data(), i),
                std::span<const uint64_t>(ld.data(), i), std::span<const float>(scalars.begin(), scalars.size()), rows,
                cols, stream);
}

}  // namespace

template <class T>
void add(SOut<T> o, SIn<T> a, SIn<T> b, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(Add, o, {a, b}, {}, r, c, s);
}
template <class T>
void sub(SOut<T> o, SIn<T> a, SIn<T> b, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(Sub, o, {a, b}, {}, r, c, s);
}
template <class T>
void mul(SOut<T> o, SIn<T> a, SIn<T> b, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(Mul, o, {a, b}, {}, r, c, s);
}
template <class T>
void axpby(SOut<T> o, SIn<T> x, SIn<T> y, float alpha, float beta, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(Axpby, o, {x, y}, {alpha, beta}, r, c, s);
}
template <class T>
void relu(SOut<T> o, SIn<T> x, uint32_t r, uint32_t c, const jit::Stream* s) { run_rows<T>(Relu, o, {x}, {}, r, c, s); }
template <class T>
void silu(SOut<T> o, SIn<T> x, uint32_t r, uint32_t c, const jit::Stream* s) { run_rows<T>(Silu, o, {x}, {}, r, c, s); }
template <class T>
void gelu(SOut<T> o, SIn<T> x, uint32_t r, uint32_t c, const jit::Stream* s) { run_rows<T>(Gelu, o, {x}, {}, r, c, s); }
template <class T>
void gelu_tanh(SOut<T> o, SIn<T> x, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(GeluTanh, o, {x}, {}, r, c, s);
}
template <class T>
void exp(SOut<T> o, SIn<T> x, uint32_t r, uint32_t c, const jit::Stream* s) { run_rows<T>(Exp, o, {x}, {}, r, c, s); }
template <class T>
void silu_gate(SOut<T> o, SIn<T> x, SIn<T> g, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(SiluGate, o, {x, g}, {}, r, c, s);
}
template <class T>
void gelu_gate(SOut<T> o, SIn<T> x, SIn<T> g, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(GeluGate, o, {x, g}, {}, r, c, s);
}
template <class T>
void gelu_gate_tanh(SOut<T> o, SIn<T> x, SIn<T> g, uint32_t r, uint32_t c, const jit::Stream* s) {
  run_rows<T>(GeluGateTanh, o, {x, g}, {}, r, c, s);
}

template <class T>
void add(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* s) { run<T>(Add, out, {a, b}, {}, n, s); }
template <class T>
void sub(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* s) { run<T>(Sub, out, {a, b}, {}, n, s); }
template <class T>
void mul(Out<T> out, In<T> a, In<T> b, size_t n, const jit::Stream* s) { run<T>(Mul, out, {a, b}, {}, n, s); }
template <class T>
void axpby(Out<T> out, In<T> x, In<T> y, float alpha, float beta, size_t n, const jit::Stream* s) {
  run<T>(Axpby, out, {x, y}, {alpha, beta}, n, s);
}
template <class T>
void relu(Out<T> out, In<T> x, size_t n, const jit::Stream* s) { run<T>(Relu, out, {x}, {}, n, s); }
template <class T>
void silu(Out<T> out, In<T> x, size_t n, const jit::Stream* s) { run<T>(Silu, out, {x}, {}, n, s); }
template <class T>
void gelu(Out<T> out, In<T> x, size_t n, const jit::Stream* s) { run<T>(Gelu, out, {x}, {}, n, s); }
template <class T>
void gelu_tanh(Out<T> out, In<T> x, size_t n, const jit::Stream* s) { run<T>(GeluTanh, out, {x}, {}, n, s); }
template <class T>
void exp(Out<T> out, In<T> x, size_t n, const jit::Stream* s) { run<T>(Exp, out, {x}, {}, n, s); }
template <class T>
void silu_gate(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* s) {
  run<T>(SiluGate, out, {x, gate}, {}, n, s);
}
template <class T>
void gelu_gate(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* s) {
  run<T>(GeluGate, out, {x, gate}, {}, n, s);
}
template <class T>
void gelu_gate_tanh(Out<T> out, In<T> x, In<T> gate, size_t n, const jit::Stream* s) {
  run<T>(GeluGateTanh, out, {x, gate}, {}, n, s);
}

const detail::MapKernels& elementwise_op(std::string_view op) {
  const auto& defs = op_defs();
  for (size_t i = 0; i < defs.size(); ++i)
    if (op == defs[i].name) return *registry().ops[i];
  throw UsageError("", "elementwise_op", "no elementwise op named '" + std::string(op) + "'");
}

std::vector<std::string> elementwise_op_names() {
  std::vector<std::string> v;
  for (const OpDef& d : op_defs()) v.push_back(d.name);
  return v;
}

std::vector<jit::FamilyBase*> elementwise_families() {
  std::vector<jit::FamilyBase*> v;
  for (const auto& k : registry().ops) v.push_back(&k->family());
  return v;
}

#define KAIO_EW_INSTANTIATE(T)                                                                                \
  template void add<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                                    \
  template void sub<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                                    \
  template void mul<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                                    \
  template void axpby<T>(Out<T>, In<T>, In<T>, float, float, size_t, const jit::Stream*);                    \
  template void relu<T>(Out<T>, In<T>, size_t, const jit::Stream*);                                          \
  template void silu<T>(Out<T>, In<T>, size_t, const jit::Stream*);                                          \
  template void gelu<T>(Out<T>, In<T>, size_t, const jit::Stream*);                                          \
  template void gelu_tanh<T>(Out<T>, In<T>, size_t, const jit::Stream*);                                     \
  template void exp<T>(Out<T>, In<T>, size_t, const jit::Stream*);                                           \
  template void silu_gate<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                              \
  template void gelu_gate<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                              \
  template void gelu_gate_tanh<T>(Out<T>, In<T>, In<T>, size_t, const jit::Stream*);                         \
  template void add<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                     \
  template void sub<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                     \
  template void mul<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                     \
  template void axpby<T>(SOut<T>, SIn<T>, SIn<T>, float, float, uint32_t, uint32_t, const jit::Stream*);     \
  template void relu<T>(SOut<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                           \
  template void silu<T>(SOut<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                           \
  template void gelu<T>(SOut<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                           \
  template void gelu_tanh<T>(SOut<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                      \
  template void exp<T>(SOut<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);                            \
  template void silu_gate<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);               \
  template void gelu_gate<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);               \
  template void gelu_gate_tanh<T>(SOut<T>, SIn<T>, SIn<T>, uint32_t, uint32_t, const jit::Stream*);
KAIO_EW_INSTANTIATE(float)
KAIO_EW_INSTANTIATE(kaio::half)
KAIO_EW_INSTANTIATE(kaio::bfloat16)
#undef KAIO_EW_INSTANTIATE

}  // namespace kaio::ops
