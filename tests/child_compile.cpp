// Started by the tests as a separate process: compiles one test kernel and prints
// "<key hex> <from_cache 0|1>". With --launch N (needs a GPU) it also runs saxpy on N
// elements from a fixed seed and prints its largest error against float64, relative to
// |a x| + |y|.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"

int main(int argc, char** argv) {
  std::string arch = "sm_90";
  long launch_n = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--arch") && i + 1 < argc) arch = argv[++i];
    else if (!std::strcmp(argv[i], "--launch") && i + 1 < argc) launch_n = std::atol(argv[++i]);
  }
  try {
    kaio::ir::Kernel k = kaio::ops::saxpy_kernel();
    kaio::jit::CompiledKernel ck = kaio::jit::compile(k, {.arch = arch});
    std::printf("%s %d\n", ck.key().hex().c_str(), ck.from_cache() ? 1 : 0);
    if (launch_n > 0) {
      std::mt19937 rng(1234);
      std::uniform_real_distribution<float> d(-1.f, 1.f);
      std::vector<float> x(launch_n), y(launch_n);
      for (auto& v : x) v = d(rng);
      for (auto& v : y) v = d(rng);
      float a = 1.75f;
      kaio::DeviceBuffer<float> dx(x), dy(y);
      ck.launch({.grid = {(launch_n + 255) / 256}, .block = {256}}, a, dx, dy, static_cast<uint32_t>(launch_n));
      std::vector<float> out = dy.to_host();
      double worst = 0;
      for (long i = 0; i < launch_n; ++i) {
        double ref = double(a) * x[i] + double(y[i]);
        // error relative to the operands' magnitude (the result itself may cancel to ~0)
        double scale = std::fabs(double(a) * x[i]) + std::fabs(double(y[i]));
        double e = std::fabs(out[i] - ref) / std::max(1e-30, scale);
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
      }
      std::printf("max_rel_err %.3e\n", worst);
    }
    // The record's publish to a remote tier, waited for here (5 s bound) rather than in the
    // exit flush (1 s bound): the tests that start a second machine after this one test the
    // fetch, not how fast a loaded machine publishes.
    kaio::jit::flush_cache_writes();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
