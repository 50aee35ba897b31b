// family: what a kernel family adds to a launch.
//   host rows (no GPU needed): the cost of Family::get on a hit, from the per-thread last-hit
//   slot and from the sharded map (two configs alternating), beside jit::compile's
//   in-memory hit of the same kernel (IR hash + key + map), which is what an op would pay
//   without a family.
//   gpu rows: host time per launch of N back-to-back launches of one small kernel: a raw
//   CompiledKernel::launch against fam.get(cfg).launch and fam.launch(cfg, ...); the
//   family's builder count must not move while measuring.
// Medians of 21 rounds. Usage: family [--launches N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/jit/driver.h"
#include "kaio/kaio.h"

using namespace kaio;
using Clock = std::chrono::steady_clock;

namespace {

struct Cfg {
  ir::Scalar dtype = ir::Scalar::F32;
  uint32_t vec = 1;
  auto fields() const { return std::tie(dtype, vec); }
};

ir::Kernel add_one(const Cfg& c) {
  ir::KernelBuilder b("family_bench_v" + std::to_string(c.vec));
  auto x = b.param("x", ir::Type::pointer(c.dtype, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    x[i] = xi + 1.0f;
  });
  return b.build();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over rounds of the time per call of f(), in nanoseconds.
template <class F>
double ns_per_call(int calls, F&& f) {
  std::vector<double> r;
  for (int round = 0; round < 21; ++round) {
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f(i);
    r.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls);
  }
  return median(r);
}

template <class T>
void keep(const T& v) { asm volatile("" : : "r"(&v) : "memory"); }

}  // namespace

int main(int argc, char** argv) {
  int launches = 20000;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--launches")) launches = std::atoi(argv[i + 1]);
  const bool gpu = !jit::interpret_mode() && jit::driver::available();
  // Offline (sm_90, nothing loaded) without a GPU: get() then costs the same lookups.
  jit::CompileOptions opts = gpu ? jit::CompileOptions{} : jit::CompileOptions{.arch = "sm_90"};
  jit::Family<Cfg> fam("family_bench", add_one, {{ir::Scalar::F32, 1}, {ir::Scalar::F32, 2}}, opts);
  const Cfg c1{ir::Scalar::F32, 1}, c2{ir::Scalar::F32, 2};
  const ir::Kernel k1 = add_one(c1);
  fam.get(c1);
  fam.get(c2);
  const uint64_t builds_before = fam.builds();

  std::printf("%-44s %12s\n", "host side (hits)", "ns per call");
  double last_hit = ns_per_call(1000000, [&](int) { keep(fam.get(c1)); });
  double map_hit = ns_per_call(1000000, [&](int i) { keep(fam.get(i & 1 ? c2 : c1)); });
  double compile_hit = ns_per_call(100000, [&](int) { keep(jit::compile(k1, opts)); });
  double build_and_hit = ns_per_call(2000, [&](int) { keep(jit::compile(add_one(c1), opts)); });
  std::printf("%-44s %12.1f\n", "Family::get, same config (last-hit slot)", last_hit);
  std::printf("%-44s %12.1f\n", "Family::get, two configs alternating (map)", map_hit);
  std::printf("%-44s %12.1f\n", "jit::compile memory hit (prebuilt IR)", compile_hit);
  std::printf("%-44s %12.1f\n", "builder + jit::compile memory hit", build_and_hit);

  if (gpu) {
    const uint32_t n = 256;
    DeviceBuffer<float> x(std::vector<float>(n, 0.0f));
    const jit::CompiledKernel& raw = fam.get(c1);
    LaunchConfig lc{.grid = {1}, .block = {256}};
    auto per_launch_us = [&](auto&& launch) {
      for (int i = 0; i < 100; ++i) launch();  // warm-up
      jit::synchronize();
      std::vector<double> r;
      for (int round = 0; round < 21; ++round) {
        auto t0 = Clock::now();
        for (int i = 0; i < launches; ++i) launch();
        r.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / launches);
        jit::synchronize();
      }
      return median(r);
    };
    double t_raw = per_launch_us([&] { raw.launch(lc, x, n); });
    double t_get = per_launch_us([&] { fam.get(c1).launch(lc, x, n); });
    double t_fam = per_launch_us([&] { fam.launch(c1, lc, x, n); });
    std::printf("\n%-44s %12s %10s\n", ("launches (host time, " + jit::driver::device_arch() + ")").c_str(),
                "us/launch", "vs raw");
    std::printf("%-44s %12.3f %10s\n", "CompiledKernel::launch (raw)", t_raw, "");
    std::printf("%-44s %12.3f %+9.3f\n", "fam.get(cfg).launch", t_get, t_get - t_raw);
    std::printf("%-44s %12.3f %+9.3f\n", "fam.launch(cfg, ...)", t_fam, t_fam - t_raw);
  } else {
    std::printf("\nno GPU (or interpret mode): launch rows skipped\n");
  }
  std::printf("\nbuilder runs while measuring: %llu (must be 0)\n",
              static_cast<unsigned long long>(fam.builds() - builds_before));
  return fam.builds() == builds_before ? 0 : 1;
}
