// Test runner. [gpu] tests need a CUDA device: when the test spec asks for them and no
// device is present, the run exits 77, which CTest reports as "skipped" -- unless
// KAIO_INTERPRET=1, where they run in the CPU interpreter.
//
// It also owns the tests' random seeds (support.h): a listener reseeds the generators as
// each test case starts and, when a case fails, prints the command that repeats its inputs.
#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "kaio/jit/buffer.h"
#include "kaio/jit/driver.h"
#include "support.h"

namespace kaio::test {
namespace {

// splitmix64's finaliser: nearby inputs (case names, call counts) give unrelated seeds.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(std::string_view s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Seeds {
  std::mutex mu;
  uint64_t base = 0;
  uint64_t calls = 0;
  std::mt19937 rng;
  std::mt19937_64 rng64;
  Seeds() { start(""); }
  void start(std::string_view case_name) {
    std::lock_guard<std::mutex> lock(mu);
    base = mix(run_seed() ^ name_hash(case_name));
    calls = 0;
    rng.seed(static_cast<std::mt19937::result_type>(mix(base) & 0xffffffffu));
    rng64.seed(mix(base + 1));
  }
};

Seeds& seeds() {
  static Seeds s;
  return s;
}

}  // namespace

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("KAIO_TEST_SEED"); e && *e) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(e, &end, 10);
      if (end && *end == '\0') return static_cast<uint64_t>(v);
      std::fprintf(stderr, "KAIO_TEST_SEED=%s is not a decimal number: a fresh seed is used\n", e);
    }
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

uint64_t case_seed() {
  Seeds& s = seeds();
  std::lock_guard<std::mutex> lock(s.mu);
  return mix(s.base + 2 + s.calls++);
}

std::mt19937& rng() { return seeds().rng; }
std::mt19937_64& rng64() { return seeds().rng64; }

namespace {

struct SeedListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override { seeds().start(info.name); }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (stats.totals.assertions.failed == 0) return;
    Catch::cout() << "random inputs of \"" << stats.testInfo.name << "\": KAIO_TEST_SEED=" << run_seed()
                  << " draws them again, with the case run alone or in the same run\n";
  }
};
CATCH_REGISTER_LISTENER(SeedListener)

}  // namespace
}  // namespace kaio::test

int main(int argc, char** argv) {
  bool wants_gpu = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.find("[gpu]") != std::string::npos && a.find("~[gpu]") == std::string::npos) wants_gpu = true;
  }
  if (wants_gpu && !kaio::jit::interpret_mode() && !kaio::jit::driver::available()) {
    std::fprintf(stderr, "no CUDA device: [gpu] tests skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
