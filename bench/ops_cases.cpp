// bench/ops cases of the elementwise ops and the reductions (bench/ops_case.h). Inputs are
// filled with a constant byte pattern on the device (0x3C: about 0.0115 in f32 and bf16,
// finite through exp and every activation): the timing does not depend on the values, and
// filling 8192 x 8192 arrays from the host would dominate the run.
#include <memory>

#include "kaio/bench/ops_case.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"

namespace kaio::bench {

namespace {

using ir::Scalar;

// Device arrays shared by the cases of one (dtype, shape): two inputs, one output.
struct Arrays {
  std::unique_ptr<jit::DeviceBuffer<uint8_t>> a, b, out;
  size_t n = 0;
  int eb = 4;
  Arrays(Scalar dtype, size_t n_) : n(n_), eb(ir::scalar_bytes(dtype)) {
    for (auto* p : {&a, &b, &out}) {
      *p = std::make_unique<jit::DeviceBuffer<uint8_t>>(n * eb);
      (*p)->fill_bytes(0x3C);
    }
  }
};

template <class T>
std::vector<OpCase> elementwise_of(Scalar dtype, uint32_t rows, uint32_t cols) {
  const size_t n = size_t(rows) * cols;
  auto arr = std::make_shared<Arrays>(dtype, n);
  const uint64_t a = arr->a->device_address(), b = arr->b->device_address(), o = arr->out->device_address();
  const double eb = sizeof(T);
  std::vector<OpCase> v;
  auto add_case = [&](const char* op, int inputs, std::function<void(const jit::Stream*)> f) {
    v.push_back(OpCase{op, dtype, rows, cols, (inputs + 1) * n * eb, [arr, f](const jit::Stream* s) { f(s); }});
  };
  add_case("add", 2, [=](const jit::Stream* s) { ops::add<T>(o, a, b, n, s); });
  add_case("sub", 2, [=](const jit::Stream* s) { ops::sub<T>(o, a, b, n, s); });
  add_case("mul", 2, [=](const jit::Stream* s) { ops::mul<T>(o, a, b, n, s); });
  add_case("axpby", 2, [=](const jit::Stream* s) { ops::axpby<T>(o, a, b, 0.5f, 2.0f, n, s); });
  add_case("relu", 1, [=](const jit::Stream* s) { ops::relu<T>(o, a, n, s); });
  add_case("silu", 1, [=](const jit::Stream* s) { ops::silu<T>(o, a, n, s); });
  add_case("gelu", 1, [=](const jit::Stream* s) { ops::gelu<T>(o, a, n, s); });
  add_case("gelu_tanh", 1, [=](const jit::Stream* s) { ops::gelu_tanh<T>(o, a, n, s); });
  add_case("exp", 1, [=](const jit::Stream* s) { ops::exp<T>(o, a, n, s); });
  add_case("silu_gate", 2, [=](const jit::Stream* s) { ops::silu_gate<T>(o, a, b, n, s); });
  add_case("gelu_gate", 2, [=](const jit::Stream* s) { ops::gelu_gate<T>(o, a, b, n, s); });
  add_case("gelu_gate_tanh", 2, [=](const jit::Stream* s) { ops::gelu_gate_tanh<T>(o, a, b, n, s); });
  return v;
}

template <class T>
std::vector<OpCase> reductions_of(Scalar dtype, uint32_t rows, uint32_t cols) {
  const size_t n = size_t(rows) * cols;
  auto arr = std::make_shared<Arrays>(dtype, n);
  const uint64_t x = arr->a->device_address(), o = arr->out->device_address();
  const double in_bytes = double(n) * sizeof(T);
  std::vector<OpCase> v;
  auto add_case = [&](const char* op, double out_bytes, std::function<void(const jit::Stream*)> f) {
    v.push_back(OpCase{op, dtype, rows, cols, in_bytes + out_bytes, [arr, f](const jit::Stream* s) { f(s); }});
  };
  using ops::Reduce;
  for (auto [name, op] : {std::pair{"row_sum", Reduce::Sum}, std::pair{"row_max", Reduce::Max},
                          std::pair{"row_min", Reduce::Min}, std::pair{"row_mean", Reduce::Mean}})
    add_case(name, rows * 4.0, [=](const jit::Stream* s) { ops::reduce_rows<T>(op, o, x, rows, cols, s); });
  add_case("row_argmax", rows * 8.0, [=](const jit::Stream* s) { ops::argmax_rows<T>(o, x, rows, cols, s); });
  for (auto [name, op] : {std::pair{"sum", Reduce::Sum}, std::pair{"max", Reduce::Max}, std::pair{"min", Reduce::Min}})
    add_case(name, 4.0, [=](const jit::Stream* s) { ops::reduce<T>(op, o, x, n, s); });
  return v;
}

template <template <class> class F>
std::vector<OpCase> by_dtype(Scalar dtype, uint32_t rows, uint32_t cols) {
  switch (dtype) {
    case Scalar::F32: return F<float>{}(dtype, rows, cols);
    case Scalar::F16: return F<kaio::half>{}(dtype, rows, cols);
    case Scalar::BF16: return F<kaio::bfloat16>{}(dtype, rows, cols);
    default: return {};
  }
}

template <class T>
struct Elementwise {
  std::vector<OpCase> operator()(Scalar d, uint32_t r, uint32_t c) const { return elementwise_of<T>(d, r, c); }
};
template <class T>
struct Reductions {
  std::vector<OpCase> operator()(Scalar d, uint32_t r, uint32_t c) const { return reductions_of<T>(d, r, c); }
};

}  // namespace

std::vector<OpCase> elementwise_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols) {
  return by_dtype<Elementwise>(dtype, rows, cols);
}

std::vector<OpCase> reduction_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols) {
  return by_dtype<Reductions>(dtype, rows, cols);
}

}  // namespace kaio::bench
