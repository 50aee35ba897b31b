// Started by the tuner tests as a separate process (in interpret mode): runs
// ops::matmul_auto on small f32 problems with a fake timer and prints
//   variant=<name> tunings=N timed_runs=N stored_hits=N failed=N waits=N taken_over=N
//   meanwhile=N fallbacks=N err=<max rel. error> variant_m<M>=<name> (one per bucket)
// The fake timer makes --fastest NAME take 1 ms a run and the other candidates 2 ms, 3 ms,
// ... in the order they are timed (table order, among the variants that can serve the
// problem); --fail NAME makes timing that variant throw; --slow MS makes each timing take MS
// milliseconds of wall time (so that tunings of several processes overlap); --hang NAME
// kills this process with SIGKILL when NAME is timed (in the middle of the tuning, its
// claim taken). --m 5,40 runs one problem per value of m (5 x 7 x 9 by default), and
// --threads N runs them from N threads at once, each in its own order.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "kaio/kaio.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/tuner/tuner.h"

namespace {

using namespace kaio;

// Max |C - ref| / sum |a b| of one matmul_auto call on fresh random inputs.
double run_one(uint32_t m, uint32_t n, uint32_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> a(m * k), b(k * n);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  DeviceBuffer<float> da(a), db(b), dc(size_t(m) * n);
  dc.fill_bytes(0xFF);
  ops::matmul_auto(da, db, dc, ops::MatmulProblem{.m = m, .n = n, .k = k});
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
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  // The fake timer decides the ranking; the wall-clock budget (which counts the interpreted
  // checks) must not skip a candidate on a loaded machine.
  setenv("KAIO_TUNE_BUDGET_SECONDS", "600", 0);
  std::string fastest, failing, hang;
  std::vector<uint32_t> ms{5};
  int threads = 1, slow_ms = 0;
  const uint32_t n = 7, k = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fastest")) fastest = argv[i + 1];
    else if (!std::strcmp(argv[i], "--fail")) failing = argv[i + 1];
    else if (!std::strcmp(argv[i], "--hang")) hang = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--slow")) slow_ms = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--m")) {
      ms.clear();
      std::stringstream s(argv[i + 1]);
      for (std::string v; std::getline(s, v, ',');) ms.push_back(uint32_t(std::atoi(v.c_str())));
    }
  }
  std::mutex timer_m;
  std::vector<std::string> slower;  // the other candidates, in the order first timed
  tuner::set_timer([&](const std::string& name, const std::function<void()>&, uint32_t runs, const jit::Stream*) {
    if (name == hang) kill(getpid(), SIGKILL);  // dies holding the claim, as a crash would
    if (name == failing) throw std::runtime_error("injected timing failure of " + name);
    if (slow_ms) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    std::lock_guard<std::mutex> g(timer_m);
    double t = 1.0;
    if (name != fastest) {
      auto it = std::find(slower.begin(), slower.end(), name);
      if (it == slower.end()) it = slower.insert(slower.end(), name);
      t = 2.0 + double(it - slower.begin());
    }
    return std::vector<double>(runs, t);
  });
  try {
    std::atomic<bool> failed{false};
    std::mutex err_m;
    double worst = 0;
    std::string error;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          std::mt19937 rng(std::random_device{}());
          std::vector<uint32_t> order = ms;
          std::rotate(order.begin(), order.begin() + (size_t(t) % order.size()), order.end());
          for (uint32_t m : order) {
            const double e = run_one(m, n, k, rng);
            std::lock_guard<std::mutex> g(err_m);
            worst = std::max(worst, e);
          }
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(err_m);
          error = e.what();
          failed = true;
        }
      });
    for (auto& th : pool) th.join();
    if (failed) throw std::runtime_error(error);
    const tuner::Stats s = tuner::stats();
    std::printf("variant=%s tunings=%llu timed_runs=%llu stored_hits=%llu failed=%llu waits=%llu taken_over=%llu "
                "meanwhile=%llu fallbacks=%llu err=%.3g\n",
                ops::matmul_auto_variant({.m = ms[0], .n = n, .k = k}).name, (unsigned long long)s.tunings,
                (unsigned long long)s.timed_runs, (unsigned long long)s.stored_hits,
                (unsigned long long)s.failed_candidates, (unsigned long long)s.waits,
                (unsigned long long)s.claims_taken_over, (unsigned long long)s.untimed_meanwhile,
                (unsigned long long)s.fallbacks, worst);
    for (uint32_t m : ms)
      std::printf("variant_m%u=%s\n", m, ops::matmul_auto_variant({.m = m, .n = n, .k = k}).name);
    jit::flush_cache_writes();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_child: %s\n", e.what());
    return 1;
  }
}
