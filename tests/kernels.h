// Kernels that exercise every op on every type; shared by the codegen and jit tests.
#pragma once

#include <string>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/catalog.h"

namespace kaio::test {

inline ir::Value lit(ir::KernelBuilder& b, ir::Type t, int v) {
  return b.constant(t, ir::Literal{ir::Literal::Int, v, 0, 0}, "const");
}

// Every arithmetic, logic, comparison, math and conversion op valid on scalar `s`.
inline ir::Kernel all_ops_kernel(ir::Scalar s) {
  using namespace ir;
  Type t = Type::scalar(s);
  KernelBuilder b(std::string("all_ops_") + scalar_name(s));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(s, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = in[i];
    Value y = in[i + 1u];
    Value one = lit(b, t, 1);
    auto acc = b.var(t, x);
    acc = acc + y;
    acc = acc - y;
    acc = acc * y;
    acc = acc / one;
    acc = ir::min(acc, y);
    acc = ir::max(acc, y);
    if (t.is_int()) {
      acc = acc % one;
      acc = (acc & y) | (acc ^ y);
      acc = ~acc;
      acc = (acc << one) >> one;
    }
    if (t.is_signed()) {
      acc = -acc;
      acc = ir::abs(acc);
    }
    if (t.is_float()) {
      acc = ir::fma(acc, y, x);
      acc = ir::sqrt(acc) + ir::rsqrt(y);
      if (s != Scalar::F64) acc = ir::exp(acc) + ir::log(y) + ir::tanh(x) + ir::sin(acc) + ir::cos(y);
    }
    for (Value c : {acc < y, acc <= y, acc > y, acc >= y, acc == y, acc != y}) acc = ir::select(c, acc, y);
    Value p = (acc < y) && !(x == y) || (x > y);
    acc = ir::select(p == (y > x), acc, x);
    acc = ir::select(ir::select(p, p, x < y), acc, y);
    // Every conversion out and back, with each rounding the pair accepts.
    for (Scalar u : {Scalar::S8, Scalar::S16, Scalar::S32, Scalar::S64, Scalar::U8, Scalar::U16, Scalar::U32,
                     Scalar::U64, Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64, Scalar::Pred}) {
      Type ut = Type::scalar(u);
      Value there = ir::cast(Value(acc), ut);
      acc = acc + ir::cast(there, t);
    }
    if (t.is_float()) {
      for (Rounding r : {Rounding::Rn, Rounding::Rz, Rounding::Rm, Rounding::Rp}) {
        acc = acc + ir::cast(ir::cast(Value(acc), Type::scalar(Scalar::S32), r), t, r);
      }
    }
    out[i] = acc;
  });
  return b.build();
}

// Loops, while, if/else, early return and 2D/3D indices.
inline ir::Kernel control_kernel() {
  using namespace ir;
  KernelBuilder b("control");
  auto out = b.param<int32_t*>("out");
  auto n = b.param<int32_t>("n");
  auto flag = b.param<bool>("flag");
  auto gx = b.global_id_x();
  auto gy = b.global_id_y();
  auto gz = b.global_id_z();
  b.if_(!flag, [&] { b.return_(); });
  auto acc = b.var<int32_t>(0);
  b.for_(0, n, 3, [&](Value k) {
    b.if_(k % 2 == 0, [&] { acc += k; }).else_([&] { acc -= 1; });
  });
  auto w = b.var<int32_t>(1);
  b.while_([&] { return w < n; }, [&] { w = w * 2; });
  Value gx32 = ir::cast<int32_t>(gx), gy32 = ir::cast<int32_t>(gy), gz32 = ir::cast<int32_t>(gz);
  Value gdx = ir::cast<int32_t>(b.grid_dim_x()), gdy = ir::cast<int32_t>(b.grid_dim_y());
  out[gx32 + gy32 * gdx + gz32 * gdx * gdy] = acc + w;
  return b.build();
}

inline std::vector<ir::Kernel> test_kernels() {
  std::vector<ir::Kernel> ks = ops::catalog();
  for (ir::Scalar s : {ir::Scalar::S8, ir::Scalar::S16, ir::Scalar::S32, ir::Scalar::S64, ir::Scalar::U8,
                       ir::Scalar::U16, ir::Scalar::U32, ir::Scalar::U64, ir::Scalar::F16, ir::Scalar::BF16,
                       ir::Scalar::F32, ir::Scalar::F64})
    ks.push_back(all_ops_kernel(s));
  ks.push_back(control_kernel());
  return ks;
}

}  // namespace kaio::test
