#include "kaio/ops/reduction.h"

#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ir/half.h"

namespace kaio::ops {

namespace {

ir::Kernel build_row_sum(const RowSumConfig& c) {
  const ir::Scalar s = c.dtype;
  if (s != ir::Scalar::F32 && s != ir::Scalar::F16 && s != ir::Scalar::BF16)
    throw UsageError("row_sum", "row_sum", std::string("dtype ") + ir::scalar_name(s) + " is not supported (f32, f16, bf16)");
  ir::KernelBuilder b(s == ir::Scalar::F32 ? std::string("row_sum") : std::string("row_sum_") + ir::scalar_name(s));
  auto m = b.param("m", ir::Type::pointer(s, true));
  auto sums = b.param<float*>("sums");
  auto rows = b.param<uint32_t>("rows");
  auto cols = b.param<uint32_t>("cols");
  auto r = b.global_id_x();
  b.if_(r < rows, [&] {
    auto acc = b.var<float>(0.0f);
    ir::Value r64 = ir::cast<uint64_t>(r), cols64 = ir::cast<uint64_t>(cols);
    ir::Value base = r64 * cols64;
    b.for_(0u, cols, [&](ir::Value col) {
      ir::Value v = m[base + ir::cast<uint64_t>(col)];
      acc += s == ir::Scalar::F32 ? v : ir::cast<float>(v);
    });
    sums[r] = acc;
  });
  return b.build();
}

}  // namespace

jit::Family<RowSumConfig>& row_sum_family() {
  static jit::Family<RowSumConfig> f("row_sum", build_row_sum, {{ir::Scalar::F32}});
  return f;
}

ir::Kernel row_sum_kernel() { return build_row_sum({}); }

template <class T>
void row_sum(const jit::DeviceBuffer<T>& m, jit::DeviceBuffer<float>& sums, uint32_t rows, uint32_t cols,
             const jit::Stream* stream) {
  if (m.size() != size_t(rows) * cols)
    throw UsageError("row_sum", "row_sum", "m has " + std::to_string(m.size()) + " elements, rows x cols = " +
                                               std::to_string(size_t(rows) * cols));
  if (sums.size() != rows)
    throw UsageError("row_sum", "row_sum", "sums has " + std::to_string(sums.size()) + " elements, rows = " +
                                               std::to_string(rows));
  if (rows == 0) return;
  row_sum_family().launch({ir::ScalarOf<T>::value}, {.grid = {(rows + 127) / 128}, .block = {128}, .stream = stream}, m,
                          sums, rows, cols);
}

template void row_sum<float>(const jit::DeviceBuffer<float>&, jit::DeviceBuffer<float>&, uint32_t, uint32_t,
                             const jit::Stream*);
template void row_sum<kaio::half>(const jit::DeviceBuffer<kaio::half>&, jit::DeviceBuffer<float>&, uint32_t, uint32_t,
                                  const jit::Stream*);
template void row_sum<kaio::bfloat16>(const jit::DeviceBuffer<kaio::bfloat16>&, jit::DeviceBuffer<float>&, uint32_t,
                                      uint32_t, const jit::Stream*);

}  // namespace kaio::ops
