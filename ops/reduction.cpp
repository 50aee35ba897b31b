#include "kaio/ops/reduction.h"

#include "kaio/ir/builder.h"

namespace kaio::ops {

ir::Kernel row_sum_kernel() {
  ir::KernelBuilder b("row_sum");
  auto m = b.param<const float*>("m");
  auto sums = b.param<float*>("sums");
  auto rows = b.param<uint32_t>("rows");
  auto cols = b.param<uint32_t>("cols");
  auto r = b.global_id_x();
  b.if_(r < rows, [&] {
    auto acc = b.var<float>(0.0f);
    ir::Value r64 = ir::cast<uint64_t>(r), cols64 = ir::cast<uint64_t>(cols);
    ir::Value base = r64 * cols64;
    b.for_(0u, cols, [&](ir::Value c) { acc += m[base + ir::cast<uint64_t>(c)]; });
    sums[r] = acc;
  });
  return b.build();
}

}  // namespace kaio::ops
