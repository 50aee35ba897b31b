// quant_gguf: ops::quant_matmul over GGUF weights (q8_0, q4_K, q6_K) at a decoder's
// shapes (N x K = 4096 x 4096, 11008 x 4096, 4096 x 14336) for M = 1, 4, 8 and 16 bf16
// activation rows: GB/s of weight bytes (the weights' bytes over the median time of one
// call, the activation pre-pass included), beside a device-to-device copy
// (cuMemcpyDtoDAsync) moving the same bytes, measured in the same run. Weights rotate
// through copies that together exceed twice the L2, so every call reads them from memory.
// Timing: jit::Event around --calls back-to-back calls after 3 warm-up calls, median of
// --rounds (25). Without a GPU (KAIO_INTERPRET=1) it runs one small shape as a smoke test.
// Usage: quant_gguf [--rounds N] [--calls N] [--warps 1|8] [--fused] [--dp4a] [--mma-rows]
// (--warps: every call in the dp4a pre-pass form with that many warps per weight row
// instead of the op's choice; --fused: M = 1 in the fused form at every shape; --dp4a: for
// M > 1 a second row, the dp4a pre-pass form with its own warps choice, beside the op's
// choice (the tensor-core form on sm_80+), so that one run compares them; --mma-rows: where
// M > 1 can take the tensor-core form (sm_80+), a row for each of its block shapes forced,
// 16 and 32 weight rows per block (q6_K: 16 only), beside the op's choice; q8_0 at M = 4
// too, which the op leaves to the dp4a form). `form` names what ran:
// fused, dp4a, dp4a-w1 / -w8, mma-r16 / mma-r32 (the tensor-core form, rows per block).
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kaio/jit/device.h"
#include "kaio/jit/driver.h"
#include "kaio/bench/timing.h"
#include "kaio/kaio.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/quant/blocks.h"

using namespace kaio;

using bench::copy_fn;
using bench::median;
using bench::ms_per_call;

namespace {

// GB/s of a device-to-device copy that reads bytes / 2 and writes bytes / 2 (0: no device).
double copy_gbps(const jit::Stream& s, size_t bytes, int rounds) {
  if (jit::interpret_mode() || !copy_fn()) return 0;
  const size_t half = bytes / 2;
  DeviceBuffer<uint8_t> src(half), dst(half);
  src.fill_bytes(1);
  const double ms = ms_per_call(s, rounds, 1, [&] {
    jit::driver::check(copy_fn()(dst.device_address(), src.device_address(), half, static_cast<CUstream>(s.handle())),
                       "cuMemcpyDtoDAsync");
  });
  return double(bytes) / (ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 25, calls = 20;
  uint32_t warps = 0;
  bool fused = false, dp4a = false, mma_rows = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--calls" && i + 1 < argc) calls = std::max(1, std::atoi(argv[++i]));
    else if (a == "--warps" && i + 1 < argc) warps = uint32_t(std::atoi(argv[++i]));
    else if (a == "--fused") fused = true;
    else if (a == "--dp4a") dp4a = true;
    else if (a == "--mma-rows") mma_rows = true;
    else {
      std::fprintf(a == "--help" ? stdout : stderr, "usage: quant_gguf [--rounds N] [--calls N] [--warps 1|8] [--fused] [--dp4a] [--mma-rows]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  const bool device = !jit::interpret_mode();
  std::vector<std::pair<size_t, size_t>> shapes = {{4096, 4096}, {11008, 4096}, {4096, 14336}};
  if (!device) {
    shapes = {{64, 256}};
    rounds = 1;
    calls = 1;
  }
  jit::Stream s;
  const uint64_t l2 = jit::device_info().l2_bytes;
  std::printf("quant_gguf: %s; GB/s = weight bytes / median time per call (pre-pass included); copy = "
              "cuMemcpyDtoDAsync of the same bytes\n",
              jit::device_info().name.c_str());
  std::printf("%-6s %6s %-7s %12s %9s %10s %9s %9s %8s\n", "format", "M", "form", "N x K", "MB", "us", "GB/s", "copy",
              "of copy");
  for (uint32_t fmt : {8u, 12u, 14u}) {
    for (const auto& [n, k] : shapes) {
      // Weights: random values quantised once; copies rotate past the L2.
      std::vector<float> wf(n * k);
      uint32_t state = 12345;
      for (auto& v : wf) v = float(int32_t(state = state * 1664525u + 1013904223u)) * 1e-10f;
      const std::string wq = quant::quantize(fmt, wf.data(), wf.size());
      const size_t copies = device ? std::max<size_t>(2, 2 * l2 / wq.size() + 1) : 1;
      std::vector<DeviceBuffer<uint8_t>> w;
      for (size_t c = 0; c < copies; ++c) w.emplace_back(std::vector<uint8_t>(wq.begin(), wq.end()));
      const double copy = copy_gbps(s, wq.size(), rounds);
      for (size_t m : {size_t(1), size_t(4), size_t(8), size_t(16)}) {
        std::vector<kaio::bfloat16> xh(m * k);
        for (size_t i = 0; i < xh.size(); ++i) xh[i] = kaio::bfloat16(float(int(i % 17) - 8) * 0.125f);
        DeviceBuffer<kaio::bfloat16> x(xh);
        DeviceBuffer<uint8_t> ws(ops::quant_matmul_workspace(m, k));
        DeviceBuffer<float> y(m * n);
        // The op's choice (or --warps / --fused), then for M > 1 with --mma-rows the
        // tensor-core form with 16 and 32 rows per block, with --dp4a the dp4a form.
        struct Pass {
          uint32_t wpr, rows;  // rows: 0 the op's choice, else forced
        };
        std::vector<Pass> passes = {{warps, 0}};
        ops::detail::force_quant_matmul_mma(true);
        const bool mma = m > 1 && warps == 0 && ops::detail::quant_matmul_mma_picked(fmt, m, n, k);
        ops::detail::force_quant_matmul_mma(false);
        if (mma && mma_rows)
          for (uint32_t r : {16u, 32u})
            if (r == 16 || fmt != uint32_t(quant::GgmlType::Q6_K)) passes.push_back({0, r});
        if (dp4a && m > 1 && warps == 0) passes.push_back({ops::detail::quant_matvec_warps(n, k), 0});
        for (const Pass& pass : passes) {
          const uint32_t wpr = pass.wpr;
          ops::detail::force_quant_matmul_mma_rows(pass.rows);
          ops::detail::force_quant_matmul_mma(pass.rows != 0);
          const bool fused_call = fused && m == 1;
          const char* form = fused_call ? "fused"
                             : wpr != 0 ? (wpr == 8 ? "dp4a-w8" : "dp4a-w1")
                             : m == 1 ? (ops::detail::quant_matvec_fused_fits(fmt, ir::Scalar::BF16, n, k) ? "fused" : "dp4a")
                             : !ops::detail::quant_matmul_mma_picked(fmt, m, n, k) ? "dp4a"
                             : ops::detail::quant_matmul_mma_rows(fmt, m, n, k) == 32 ? "mma-r32" : "mma-r16";
          size_t next = 0;
          const double ms = ms_per_call(s, rounds, calls, [&] {
            if (fused_call)
              ops::detail::launch_quant_matvec_fused({fmt, ir::Scalar::BF16, ir::Scalar::F32}, w[next].device_address(),
                                                     x.device_address(), y.device_address(), n, k, wq.size() / n, &s);
            else
              ops::quant_matmul<kaio::bfloat16, float>(y, w[next], fmt, x, m, n, k, ws, &s, wpr);
            next = (next + 1) % copies;
          });
          const double gbps = double(wq.size()) / (ms * 1e6);
          std::printf("%-6s %6zu %-7s %12s %9.2f %10.2f %9.1f %9.1f %7.0f%%\n", quant::type_name(fmt).c_str(), m, form,
                      (std::to_string(n) + "x" + std::to_string(k)).c_str(), double(wq.size()) / 1e6, ms * 1e3, gbps,
                      copy, copy > 0 ? 100 * gbps / copy : 0.0);
          ops::detail::force_quant_matmul_mma_rows(0);
          ops::detail::force_quant_matmul_mma(false);
        }
      }
    }
  }
  return 0;
}
