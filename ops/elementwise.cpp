#include "kaio/ops/elementwise.h"

#include "kaio/ir/builder.h"

namespace kaio::ops {

ir::Kernel saxpy_kernel() {
  ir::KernelBuilder b("saxpy");
  auto a = b.param<float>("a");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];  // one statement per load keeps the IR order fixed
    ir::Value yi = y[i];
    y[i] = a * xi + yi;
  });
  return b.build();
}

ir::Kernel silu_gate_kernel() {
  ir::KernelBuilder b("fused_silu_gate");
  auto x = b.param<const float*>("x");
  auto gate = b.param<const float*>("gate");
  auto out = b.param<float*>("out");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    ir::Value g = gate[i];
    out[i] = xi / (1.0f + ir::exp(-xi)) * g;
  });
  return b.build();
}

ir::Kernel axpby_2d_kernel() {
  ir::KernelBuilder b("axpby_2d");
  auto a = b.param<const float*>("a");
  auto bb = b.param<const float*>("b");
  auto c = b.param<float*>("c");
  auto alpha = b.param<float>("alpha");
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
    c[off] = ir::fma(alpha, bv, av);
  });
  return b.build();
}

}  // namespace kaio::ops
