// compile(): keys, the memory and disk caches across threads and processes, argument
// checks before launch. Offline (sm_90), no GPU needed.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "kaio/cache/store.h"
#include "kaio/kaio.h"
#include "kaio/jit/driver.h"
#include "kaio/ops/elementwise.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

// A kernel no other test builds (the name is part of the key).
ir::Kernel unique_kernel(const std::string& name, float c = 2.0f) {
  ir::KernelBuilder b(name);
  auto x = b.param<float*>("x");
  auto i = b.global_id_x();
  ir::Value xi = x[i];
  x[i] = xi * c;
  return b.build();
}

std::string child(const std::string& cache_dir, const std::string& args = "") {
  test::CommandResult r = test::run_command("KAIO_CACHE_DIR=" + cache_dir + " " + test::child_exe() + " " + args);
  REQUIRE(r.status == 0);
  return r.out;
}

}  // namespace

TEST_CASE("compile offline for sm_90: PTX, cubin, key", "[jit]") {
  test::TempDir dir;
  jit::CompiledKernel ck = jit::compile(unique_kernel("offline_a"), {.arch = "sm_90", .cache_dir = dir.str()});
  CHECK_FALSE(ck.from_cache());
  CHECK(ck.arch() == "sm_90");
  CHECK(ck.name() == "offline_a");
  CHECK_THAT(ck.ptx(), Contains(".target sm_90") && Contains(".visible .entry offline_a("));
  REQUIRE(ck.cubin().size() > 4);
  CHECK(ck.cubin().compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(ck.key() == jit::cache_key(unique_kernel("offline_a"), "sm_90"));
  CHECK(ck.params().size() == 1);

  // Same kernel again: answered in memory.
  jit::CompiledKernel again = jit::compile(unique_kernel("offline_a"), {.arch = "sm_90", .cache_dir = dir.str()});
  CHECK(again.from_cache());
  CHECK(again.key() == ck.key());
  CHECK(again.cubin() == ck.cubin());
}

TEST_CASE("a second process gets the kernel from the disk cache", "[jit][cache]") {
  test::TempDir dir;
  std::string first = child(dir.str(), "--arch sm_90");
  std::string second = child(dir.str(), "--arch sm_90");
  std::string key = jit::cache_key(ops::saxpy_kernel(), "sm_90").hex();
  CHECK(first == key + " 0\n");
  CHECK(second == key + " 1\n");
  // And for another arch, a different key and a fresh compile.
  std::string other = child(dir.str(), "--arch sm_80");
  CHECK(other == jit::cache_key(ops::saxpy_kernel(), "sm_80").hex() + " 0\n");
}

TEST_CASE("the disk cache serves this process after the memory cache is dropped", "[jit][cache]") {
  test::TempDir dir;
  jit::CompileOptions o{.arch = "sm_90", .cache_dir = dir.str()};
  jit::CompiledKernel a = jit::compile(unique_kernel("disk_b"), o);
  jit::flush_cache_writes();
  jit::clear_memory_cache();
  jit::reset_compile_stats();
  jit::CompiledKernel b = jit::compile(unique_kernel("disk_b"), o);
  CHECK(b.from_cache());
  CHECK(jit::compile_stats().disk_hits == 1);
  CHECK(jit::compile_stats().builds == 0);
  CHECK(b.cubin() == a.cubin());
  CHECK(b.ptx() == a.ptx());

  // force recompiles even when cached.
  jit::CompiledKernel c = jit::compile(unique_kernel("disk_b"), {.arch = "sm_90", .force = true, .cache_dir = dir.str()});
  CHECK_FALSE(c.from_cache());
  CHECK(jit::compile_stats().builds == 1);
}

TEST_CASE("a corrupt record is never served: recompiled and replaced", "[jit][cache]") {
  test::TempDir dir;
  ir::Kernel k = unique_kernel("corrupt_c");
  jit::Key key = jit::cache_key(k, "sm_90");
  cache::Store::open(dir.path())->put("kernels", key.bytes(), "not a record");
  jit::CompiledKernel ck = jit::compile(k, {.arch = "sm_90", .cache_dir = dir.str()});
  CHECK_FALSE(ck.from_cache());
  jit::flush_cache_writes();
  jit::clear_memory_cache();
  CHECK(jit::compile(k, {.arch = "sm_90", .cache_dir = dir.str()}).from_cache());
}

TEST_CASE("several threads compiling one key compile it once", "[jit][concurrency]") {
  test::TempDir dir;
  jit::reset_compile_stats();
  ir::Kernel k = unique_kernel("threads_d");
  std::vector<std::thread> ts;
  std::vector<std::string> keys(8);
  std::atomic<int> cached{0};
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      jit::CompiledKernel ck = jit::compile(k, {.arch = "sm_90", .cache_dir = dir.str()});
      keys[t] = ck.key().hex();
      cached += ck.from_cache() ? 1 : 0;
    });
  for (auto& t : ts) t.join();
  CHECK(jit::compile_stats().builds == 1);
  CHECK(cached == 7);
  for (const auto& kh : keys) CHECK(kh == keys[0]);
}

TEST_CASE("the disk cache can be turned off", "[jit][cache]") {
  test::TempDir dir;
  {
    test::ScopedEnv off("KAIO_DISABLE_CACHE", "1");
    jit::compile(unique_kernel("nocache_e"), {.arch = "sm_90", .cache_dir = dir.str()});
    jit::flush_cache_writes();
  }
  CHECK(cache::Store::open(dir.path())->count("kernels") == 0);
  jit::compile(unique_kernel("nocache_f"), {.arch = "sm_90", .use_cache = false, .cache_dir = dir.str()});
  jit::flush_cache_writes();
  CHECK(cache::Store::open(dir.path())->count("kernels") == 0);
}

TEST_CASE("a cache path under a regular file never fails a compile", "[jit][cache]") {
  test::TempDir dir;
  std::string file = dir.str() + "/not-a-dir";
  { std::FILE* f = std::fopen(file.c_str(), "w"); std::fclose(f); }
  jit::CompiledKernel ck = jit::compile(unique_kernel("badcache_g"), {.arch = "sm_90", .cache_dir = file + "/sub"});
  CHECK_FALSE(ck.from_cache());
  CHECK(ck.cubin().size() > 4);
}

TEST_CASE("KAIO_DUMP_PTX writes every emitted PTX", "[jit]") {
  test::TempDir dir, dump;
  test::ScopedEnv env("KAIO_DUMP_PTX", dump.str());
  jit::CompiledKernel ck = jit::compile(unique_kernel("dump_h"), {.arch = "sm_90", .use_cache = false});
  std::string expect = dump.str() + "/dump_h-" + ck.key().hex().substr(0, 12) + ".ptx";
  REQUIRE(std::filesystem::exists(expect));
  CHECK(std::filesystem::file_size(expect) == ck.ptx().size());
}

TEST_CASE("a bad arch is a usage error", "[jit]") {
  CHECK_THROWS_AS(jit::compile(unique_kernel("arch_i"), {.arch = "sm_9x", .use_cache = false}), UsageError);
  CHECK_THROWS_AS(jit::compile(unique_kernel("arch_i"), {.arch = "compute_90", .use_cache = false}), UsageError);
}

TEST_CASE("launch arguments are checked before anything runs", "[jit]") {
  test::TempDir dir;
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel(), {.arch = "sm_90", .cache_dir = dir.str()});
  jit::LaunchConfig cfg{.grid = {1}, .block = {32}};
  jit::DevicePtr<float> x{0}, y{0};
  jit::DevicePtr<int32_t> wrong{0};
  auto msg = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const UsageError& e) {
      CHECK(e.kernel() == "saxpy");
      CHECK(e.op() == "launch");
      return e.what();
    }
    FAIL("expected UsageError");
    return {};
  };
  CHECK_THAT(msg([&] { ck.launch(cfg, 1.0f, x, y); }), Contains("expected 4 arguments, got 3"));
  CHECK_THAT(msg([&] { ck.launch(cfg, 1.0f, wrong, y, 10u); }), Contains("argument 1 ('x')") && Contains("ptr<const f32>"));
  CHECK_THAT(msg([&] { ck.launch(cfg, 1.0, x, y, 10u); }), Contains("argument 0 ('a') is a double"));
  CHECK_THAT(msg([&] { ck.launch(cfg, 1.0f, x, y, -1); }), Contains("does not fit in u32"));
  CHECK_THAT(msg([&] { ck.launch(cfg, 1.0f, x, y, 2.5f); }), Contains("argument 3 ('n') is a float"));
  CHECK_THAT(msg([&] { ck.launch({.grid = {0}, .block = {32}}, 1.0f, x, y, 10); }), Contains("grid"));
  CHECK_THAT(msg([&] { ck.launch({.grid = {1}, .block = {2048}}, 1.0f, x, y, 10); }), Contains("block"));
}

TEST_CASE("without a GPU, device work fails with a clear error", "[jit]") {
  if (jit::driver::available()) return;  // only meaningful on a machine without a device
  try {
    jit::compile(unique_kernel("nogpu_j"));
    FAIL("expected ToolError");
  } catch (const ToolError& e) {
    CHECK(e.tool() == "CUDA driver");
    CHECK_THAT(e.what(), Contains("needs a GPU"));
  }
  CHECK_THROWS_AS(DeviceBuffer<float>(16), ToolError);
}
