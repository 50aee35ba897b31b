// Started by the tuner tests as a separate process (in interpret mode): runs
// ops::matmul_auto once on a small f32 problem with a fake timer and prints
//   variant=<name> tunings=N timed_runs=N stored_hits=N failed=N err=<max rel. error>
// The fake timer makes --fastest NAME take 1 ms a run and the other candidates 2 ms, 3 ms,
// ... in the order they are timed (table order, among the variants that can serve the
// problem); --fail NAME makes timing that variant throw.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "kaio/kaio.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/tuner/tuner.h"

int main(int argc, char** argv) {
  using namespace kaio;
  std::string fastest, failing;
  uint32_t m = 5, n = 7, k = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fastest")) fastest = argv[i + 1];
    else if (!std::strcmp(argv[i], "--fail")) failing = argv[i + 1];
    else if (!std::strcmp(argv[i], "--m")) m = uint32_t(std::atoi(argv[i + 1]));
  }
  tuner::set_timer([&](const std::string& name, const std::function<void()>&, uint32_t runs, const jit::Stream*) {
    if (name == failing) throw std::runtime_error("injected timing failure of " + name);
    static std::vector<std::string> slower;  // the other candidates, in the order first timed
    double ms = 1.0;
    if (name != fastest) {
      auto it = std::find(slower.begin(), slower.end(), name);
      if (it == slower.end()) it = slower.insert(slower.end(), name);
      ms = 2.0 + double(it - slower.begin());
    }
    return std::vector<double>(runs, ms);
  });
  try {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> a(m * k), b(k * n);
    for (auto& x : a) x = d(rng);
    for (auto& x : b) x = d(rng);
    DeviceBuffer<float> da(a), db(b), dc(size_t(m) * n);
    dc.fill_bytes(0xFF);
    const ops::MatmulProblem p{.m = m, .n = n, .k = k};
    ops::matmul_auto(da, db, dc, p);
    const std::vector<float> c = dc.to_host();
    double worst = 0;
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        double ref = 0, scale = 0;
        for (uint32_t q = 0; q < k; ++q) {
          ref += double(a[i * k + q]) * b[q * n + j];
          scale += std::fabs(double(a[i * k + q]) * b[q * n + j]);
        }
        const double e = std::fabs(c[i * n + j] - ref) / std::max(scale, 1e-30);
        worst = std::isfinite(e) ? std::max(worst, e) : 1e30;
      }
    const tuner::Stats s = tuner::stats();
    std::printf("variant=%s tunings=%llu timed_runs=%llu stored_hits=%llu failed=%llu err=%.3g\n",
                ops::matmul_auto_variant(p).name, (unsigned long long)s.tunings, (unsigned long long)s.timed_runs,
                (unsigned long long)s.stored_hits, (unsigned long long)s.failed_candidates, worst);
    jit::flush_cache_writes();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_child: %s\n", e.what());
    return 1;
  }
}
