// kaio-precompile: compiles kaio's kernel catalog for one or more SMs into the cache, so
// that applications start warm. Needs no GPU unless --arch native is given.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "kaio/jit/compile.h"
#include "kaio/jit/driver.h"
#include "kaio/ops/catalog.h"

using namespace kaio;

int main(int argc, char** argv) {
  CLI::App app{"kaio-precompile: compile kaio's kernel catalog into the kernel cache"};
  std::vector<std::string> archs;
  std::string cache_dir;
  bool force = false, list = false;
  app.add_option("-a,--arch", archs, "target SMs, e.g. sm_90 sm_90a; 'native' is this machine's GPU (default: native if a GPU is present, else sm_90)");
  app.add_option("--cache-dir", cache_dir, "cache directory (overrides KAIO_CACHE_DIR)");
  app.add_flag("-f,--force", force, "recompile even when cached");
  app.add_flag("-l,--list", list, "list the catalog and exit");
  CLI11_PARSE(app, argc, argv);

  std::vector<ir::Kernel> kernels = ops::catalog();
  if (list) {
    for (const auto& k : kernels) std::printf("%s\n", k.name().c_str());
    return 0;
  }
  if (archs.empty()) archs.push_back(jit::driver::available() ? "native" : "sm_90");
  int failures = 0, done = 0;
  const int total = static_cast<int>(kernels.size() * archs.size());
  for (const std::string& a : archs) {
    for (const ir::Kernel& k : kernels) {
      ++done;
      auto t0 = std::chrono::steady_clock::now();
      try {
        std::string arch = a == "native" ? jit::driver::device_arch() : a;
        jit::CompiledKernel ck = jit::compile(k, {.arch = arch, .force = force, .cache_dir = cache_dir});
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[%d/%d] %-16s %-7s %s  %-8s %7.1f ms\n", done, total, k.name().c_str(), arch.c_str(),
                    ck.key().hex().substr(0, 12).c_str(), ck.from_cache() ? "cached" : "compiled", ms);
      } catch (const std::exception& e) {
        ++failures;
        std::fprintf(stderr, "[%d/%d] %s for %s failed: %s\n", done, total, k.name().c_str(), a.c_str(), e.what());
      }
      std::fflush(stdout);
    }
  }
  jit::flush_cache_writes();
  std::printf("%d kernels, %d failed\n", total, failures);
  return failures ? 1 : 0;
}
