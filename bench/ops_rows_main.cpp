// ops_rows: the row ops on their own (bench/ops runs the same cases beside every other op
// and PyTorch). Three tables:
//   1. 8192 x 8192, f32 and bf16: GB/s (bytes the op must move, counted once) and the
//      ratio to a device-to-device copy of the same bytes timed in the same run;
//   2. decode shapes 1/16/128 x 4096 bf16: µs per call (GPU time between events);
//   3. host cost per call: the op's C++ call (checks, plan, family lookup, launch) against
//      a raw CompiledKernel launch of the same kernel with prepacked arguments;
//   4. a sweep of the strategies at 8192 x 8192 (threads per row x vectors per thread in
//      registers, staged, streamed), the default marked *, to check plan_rows' choice.
// CUDA events, 3 warm-up calls, median of 21 rounds. Usage: ops_rows [--quick]
// (--quick: small shapes, also runs in KAIO_INTERPRET=1 as a smoke test).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/jit/driver.h"
#include "kaio/kaio.h"
#include "kaio/ops/row_kernel.h"
#include "kaio/ops/softmax.h"
#include "ops_case.h"

using namespace kaio;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median GPU ms of one call of f over 21 rounds (each round `calls` calls between events).
template <class F>
double gpu_ms(const jit::Stream& s, int calls, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> r;
  for (int round = 0; round < 21; ++round) {
    jit::Event a, b;
    a.record(&s);
    for (int i = 0; i < calls; ++i) f();
    b.record(&s);
    b.synchronize();
    r.push_back(jit::elapsed_ms(a, b) / calls);
  }
  return median(r);
}

// A device-to-device copy of `bytes` bytes in all (half read, half written).
double copy_ms(const jit::Stream& s, double bytes) {
  if (jit::interpret_mode()) return 0;
  const size_t half = static_cast<size_t>(bytes / 2);
  DeviceBuffer<uint8_t> src(half), dst(half);
  const auto& api = jit::driver::api();
  return gpu_ms(s, 1, [&] {
    jit::driver::check(api.memcpy_dtod(dst.device_address(), src.device_address(), half), "cuMemcpyDtoD");
  });
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  jit::Stream s;
  const uint32_t big = quick ? 256 : 8192;
  std::printf("## row ops at %ux%u\n\n| op | dtype | ms | GB/s | copy GB/s | ratio |\n|---|---|---|---|---|---|\n", big, big);
  for (ir::Scalar dt : {ir::Scalar::F32, ir::Scalar::BF16}) {
    for (bench::OpCase& c : bench::row_op_cases(dt, big, big)) {
      double ms = gpu_ms(s, 1, [&] { c.run(&s); });
      double cms = copy_ms(s, c.bytes);
      double gbs = c.bytes / (ms * 1e6), cgbs = cms > 0 ? c.bytes / (cms * 1e6) : 0;
      std::printf("| %s | %s | %.3f | %.0f | %.0f | %.2f |\n", c.op.c_str(), ir::scalar_name(dt), ms, gbs, cgbs,
                  cgbs > 0 ? gbs / cgbs : 0.0);
    }
  }
  std::printf("\n## decode shapes, bf16: µs per call (GPU)\n\n| op | 1x4096 | 16x4096 | 128x4096 |\n|---|---|---|---|\n");
  std::vector<std::vector<bench::OpCase>> dec;
  for (uint32_t rows : {1u, 16u, 128u}) dec.push_back(bench::row_op_cases(ir::Scalar::BF16, rows, 4096));
  for (size_t i = 0; i < dec[0].size(); ++i) {
    std::printf("| %s |", dec[0][i].op.c_str());
    for (auto& v : dec) std::printf(" %.2f |", 1e3 * gpu_ms(s, 20, [&] { v[i].run(&s); }));
    std::printf("\n");
  }
  // Host cost per call: softmax 1 x 4096 bf16 through ops::softmax and through a raw launch.
  {
    const uint32_t cols = 4096;
    DeviceBuffer<kaio::bfloat16> x(cols), y(cols);
    x.fill_bytes(0);
    ops::RowTensor X = ops::as_rows(x, 1, cols), Y = ops::as_rows(y, 1, cols);
    ops::RowPlan plan = ops::plan_rows(1, cols, 8, ops::detail::sm_count());
    ops::RowKernelConfig cfg = ops::row_kernel_config(ir::Scalar::BF16, plan);
    const jit::CompiledKernel& k = ops::softmax_family().get(cfg);
    const jit::detail::Arg args[] = {ops::detail::row_pointer_arg(x.device_address(), ir::Scalar::BF16, 8),
                                     ops::detail::row_pointer_arg(y.device_address(), ir::Scalar::BF16, 8),
                                     ops::detail::row_pointer_arg(0, ir::Scalar::F32, 1),
                                     jit::detail::make_arg(1u),
                                     jit::detail::make_arg(cols),
                                     jit::detail::make_arg(uint64_t(cols)),
                                     jit::detail::make_arg(uint64_t(cols)),
                                     jit::detail::make_arg(cols),
                                     jit::detail::make_arg(1u)};
    const jit::LaunchConfig lc = ops::row_launch(cfg, 1, cols, 1, &s);
    auto host_us = [&](auto&& f) {
      const int calls = quick ? 20 : 200;
      std::vector<double> r;
      for (int round = 0; round < 21; ++round) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) f();
        r.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls);
        s.synchronize();
      }
      return median(r);
    };
    const uint64_t builds = ops::softmax_family().builds();
    double raw = host_us([&] { k.launch_packed(lc, args, 9); });
    double op = host_us([&] { ops::softmax(X, Y, &s); });
    std::printf("\n## host cost per call, softmax 1x4096 bf16\n\n| path | µs per call |\n|---|---|\n");
    std::printf("| raw CompiledKernel launch | %.3f |\n| ops::softmax | %.3f |\n| difference | %.3f |\n", raw, op, op - raw);
    std::printf("\nbuilder runs while timing: %llu\n", (unsigned long long)(ops::softmax_family().builds() - builds));
  }
  std::printf("\n## strategy sweep at %ux%u (* = plan_rows' choice)\n\n| op | dtype | strategy | GB/s |\n|---|---|---|---|\n",
              big, big);
  for (ir::Scalar dt : {ir::Scalar::F32, ir::Scalar::BF16}) {
    const uint32_t vec = 16 / static_cast<uint32_t>(ir::scalar_bytes(dt)), nv = big / vec;
    std::vector<ops::RowPlan> plans;
    for (uint32_t team : {128u, 256u, 512u, 1024u})
      for (uint32_t items : {1u, 2u, 4u, 8u})
        if (uint64_t(team) * items == nv) {
          plans.push_back(ops::RowPlan{vec, team, items, 1, false});
          if (vec >= 8) plans.push_back(ops::RowPlan{vec, team, items, 1, false, true});  // persistent teams
        }
    plans.push_back(ops::RowPlan{vec, 1024, 0, 1, true});   // staged in shared memory
    plans.push_back(ops::RowPlan{vec, 1024, 0, 1, false});  // streamed (two reads)
    for (bench::OpCase& c : bench::row_op_cases(dt, big, big)) {
      if (c.op == "rope") continue;  // not a row strategy
      ops::RowPlan chosen = ops::plan_rows(big, big, vec, ops::detail::sm_count(), ops::row_holds(c.op));
      if (c.op == "add_rms_norm") chosen.persist = false;  // its one-shot blocks (norm.cpp)
      for (const ops::RowPlan& p : plans) {
        ops::detail::set_plan_override(&p);
        double ms = gpu_ms(s, 1, [&] { c.run(&s); });
        ops::detail::set_plan_override(nullptr);
        std::printf("| %s | %s | %s%s | %.0f |\n", c.op.c_str(), ir::scalar_name(dt), ops::describe(p).c_str(),
                    p.fields() == chosen.fields() ? " *" : "", c.bytes / (ms * 1e6));
      }
    }
  }
  return 0;
}
