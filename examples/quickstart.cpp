// quickstart: builds the example kernels, compiles them for sm_90 (no GPU needed) and, when
// a GPU is present, for it too: launches each on random data and checks the result
// against a float64 reference. Exit status 0 when everything that ran is correct.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <kaio/kaio.h>
#include <kaio/ops/catalog.h>
#include <kaio/ops/elementwise.h>

using namespace kaio;

namespace {

bool gpu_present() {
  try {
    DeviceBuffer<float> probe(1);
    return true;
  } catch (const ToolError&) {
    return false;
  }
}

}  // namespace

int main() {
  try {
    // 1. Offline: every example kernel for sm_90 into the shared cache. Kernels that use
    //    sm_90a-only instructions (wgmma, setmaxnreg) compile for sm_90a, as an sm_90
    //    device compiles them.
    for (const ir::Kernel& k : ops::catalog()) {
      const char* arch = k.arch_specific() ? "sm_90a" : "sm_90";
      jit::CompiledKernel ck = jit::compile(k, {.arch = arch});
      std::printf("%-16s %-6s key %s  %s\n", k.name().c_str(), arch, ck.key().hex().substr(0, 12).c_str(),
                  ck.from_cache() ? "cached" : "compiled");
    }
    if (!gpu_present()) {
      std::printf("no GPU: kernels compiled for sm_90 (sm_90a where they need it) only\n");
      return 0;
    }

    // 2. On the device: launch and check.
    const uint32_t n = 1000003;
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-6.f, 6.f);
    std::vector<float> hx(n), hg(n);
    for (auto& v : hx) v = dist(rng);
    for (auto& v : hg) v = dist(rng);

    // ops::silu_gate_kernel() is the README's kernel: x / (1 + exp(-x)) * gate.
    jit::CompiledKernel ck = jit::compile(ops::silu_gate_kernel());
    DeviceBuffer<float> dx(hx), dg(hg), dout(n);
    dout.fill_bytes(0xFF);  // NaN everywhere: an unwritten element cannot pass
    ck.launch({.grid = {(n + 255) / 256}, .block = {256}}, dx, dg, dout, n);
    std::vector<float> y = dout.to_host();
    double worst = 0;
    for (uint32_t i = 0; i < n; ++i) {
      double ref = hx[i] / (1.0 + std::exp(-double(hx[i]))) * hg[i];
      double err = std::fabs(y[i] - ref) / (std::fabs(ref) + 1e-30);
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
    bool ok = worst < 1e-5;
    std::printf("fused_silu_gate on %s: n=%u max rel err %.2e  %s\n", ck.arch().c_str(), n, worst, ok ? "PASS" : "FAIL");

    jit::CompiledKernel sx = jit::compile(ops::saxpy_kernel());
    DeviceBuffer<float> dy(hg);
    sx.launch({.grid = {(n + 255) / 256}, .block = {256}}, 0.5f, dx, dy, n);
    std::vector<float> sy = dy.to_host();
    double worst2 = 0;
    for (uint32_t i = 0; i < n; ++i) {
      double ref = 0.5 * hx[i] + double(hg[i]);
      double err = std::fabs(sy[i] - ref) / (std::fabs(0.5 * hx[i]) + std::fabs(hg[i]) + 1e-30);
      worst2 = std::isnan(err) ? INFINITY : std::max(worst2, err);
    }
    bool ok2 = worst2 < 1e-6;
    std::printf("saxpy on %s: n=%u max rel err %.2e  %s\n", sx.arch().c_str(), n, worst2, ok2 ? "PASS" : "FAIL");
    return ok && ok2 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "quickstart: %s\n", e.what());
    return 1;
  }
}
