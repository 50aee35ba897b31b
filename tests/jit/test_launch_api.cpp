// The launch side: cluster shapes and TMA tensor maps validated before the driver is asked,
// missing driver entry points, the bounded in-memory cache, events, and one kernel launched
// from many threads (with different dynamic shared memory sizes). Host tests need no GPU;
// [gpu] tests run on a device or, with KAIO_INTERPRET=1, in the interpreter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "kaio/jit/driver.h"
#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

std::string launch_error(const CompiledKernel& k, const LaunchConfig& cfg) {
  DevicePtr<float> x{0}, y{0};
  try {
    k.launch(cfg, 1.0f, x, y, 10u);
  } catch (const UsageError& e) {
    CHECK(e.kernel() == k.name());
    CHECK(e.op() == "launch");
    return e.what();
  }
  FAIL("expected UsageError");
  return {};
}

// A kernel no other test builds: x[i] = x[i] + c.
ir::Kernel add_kernel(const std::string& name, float c) {
  ir::KernelBuilder b(name);
  auto x = b.param<float*>("x");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    x[i] = xi + c;
  });
  return b.build();
}

// Reverses `count` floats through dynamic shared memory (sized by the launch).
ir::Kernel reverse_kernel() {
  ir::KernelBuilder b("concurrent_reverse");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto count = b.param<uint32_t>("count");
  auto dyn = b.dynamic_shared<float>();
  ir::Value tid = b.thread_idx_x(), nt = b.block_dim_x();
  b.for_(tid, count, nt, [&](ir::Value k) { dyn[k] = in[k]; });
  b.barrier();
  b.for_(tid, count, nt, [&](ir::Value k) {
    ir::Value rev = count - 1u - k;
    out[k] = dyn[rev];
  });
  return b.build();
}

}  // namespace

TEST_CASE("cluster shapes are validated before anything runs", "[jit][launch]") {
  test::TempDir dir;
  CompiledKernel k90 = jit::compile(ops::saxpy_kernel(), {.arch = "sm_90", .cache_dir = dir.str()});
  CHECK_THAT(launch_error(k90, {.grid = {6}, .block = {32}, .cluster = {4}}),
             Contains("grid (6, 1, 1) is not a multiple of the cluster (4, 1, 1)"));
  CHECK_THAT(launch_error(k90, {.grid = {16}, .block = {32}, .cluster = {16}}), Contains("portable maximum is 8"));
  CHECK_THAT(launch_error(k90, {.grid = {4, 4}, .block = {32}, .cluster = {2, 2, 3}}), Contains("holds 12 blocks"));
  CHECK_THAT(launch_error(k90, {.grid = {4}, .block = {32}, .cluster = {0}}), Contains("each dimension must be >= 1"));
  CompiledKernel k80 = jit::compile(ops::saxpy_kernel(), {.arch = "sm_80", .cache_dir = dir.str()});
  CHECK_THAT(launch_error(k80, {.grid = {4}, .block = {32}, .cluster = {2}}),
             Contains("clusters need sm_90") && Contains("sm_80"));
}

TEST_CASE("a missing driver entry point is a ToolError, not a crash", "[jit][driver]") {
  decltype(&cuLaunchKernelEx) none = nullptr;
  try {
    jit::driver::require(none, "cuLaunchKernelEx");
    FAIL("expected ToolError");
  } catch (const ToolError& e) {
    CHECK(e.tool() == "CUDA driver");
    CHECK(e.code() == "MISSING_ENTRY_POINT");
    CHECK_THAT(e.what(), Contains("cuLaunchKernelEx"));
  }
}

TEST_CASE("tensor map parameters are validated, each error naming its argument", "[jit][tma]") {
  auto good = [] {
    return jit::TensorMapTiled{.dtype = ir::Scalar::F16, .global_address = 0x7f0000000000ull,
                               .global_dims = {1024, 512}, .global_strides = {2048},
                               .box_dims = {64, 128}, .swizzle = jit::TensorMapSwizzle::B128};
  };
  REQUIRE_NOTHROW(jit::validate_tensor_map_tiled(good()));
  struct Case {
    const char* why;
    std::function<void(jit::TensorMapTiled&)> edit;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"misaligned address", [](auto& t) { t.global_address += 8; }, "global_address: must be 16-byte aligned"},
      {"null address", [](auto& t) { t.global_address = 0; }, "global_address: is null"},
      {"stride not a multiple of 16", [](auto& t) { t.global_strides = {2056}; }, "global_strides[0]: 2056 bytes is not a multiple of 16"},
      {"stride in elements", [](auto& t) { t.global_strides = {1024}; }, "global_strides[0]: 1024 bytes is less than the 2048"},
      {"stride count", [](auto& t) { t.global_strides = {}; }, "global_strides: needs rank - 1 = 1 entries"},
      {"box too large", [](auto& t) { t.box_dims = {64, 300}; }, "box_dims[1]: 300 is not in 1..256"},
      {"box count", [](auto& t) { t.box_dims = {64}; }, "box_dims: needs 2 entries"},
      {"inner box not 16 bytes", [](auto& t) { t.box_dims = {4, 128}; t.swizzle = jit::TensorMapSwizzle::None; }, "box_dims[0]: 4 elements are 8 bytes"},
      {"box wider than swizzle", [](auto& t) { t.swizzle = jit::TensorMapSwizzle::B64; }, "128 bytes exceed the 64-byte swizzle span"},
      {"rank 0", [](auto& t) { t.global_dims = {}; }, "global_dims: rank 0 is not in 1..5"},
      {"rank 6", [](auto& t) { t.global_dims = {1, 1, 1, 1, 1, 1}; }, "rank 6"},
      {"zero dim", [](auto& t) { t.global_dims = {0, 512}; }, "global_dims[0]: 0 is not in 1..2^32"},
      {"element stride", [](auto& t) { t.element_strides = {1, 9}; }, "element_strides[1]: 9 is not in 1..8"},
      {"dtype", [](auto& t) { t.dtype = ir::Scalar::S8; }, "dtype: s8 has no TMA data type"},
      {"nan fill on integers", [](auto& t) { t.dtype = ir::Scalar::U16; t.oob_fill = jit::TensorMapOobFill::NanRequestZeroFma; }, "oob_fill"},
      {"interleave rank", [](auto& t) { t.interleave = jit::TensorMapInterleave::B16; }, "interleaved layout needs rank >= 3"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    jit::TensorMapTiled t = good();
    c.edit(t);
    auto e = test::usage_error_of([&] { jit::validate_tensor_map_tiled(t); });
    CHECK(e.op() == "encode_tensor_map_tiled");
    CHECK_THAT(e.what(), Contains(c.expect));
    // encode validates first: the same error, with or without a driver.
    auto e2 = test::usage_error_of([&] { jit::encode_tensor_map_tiled(t); });
    CHECK(std::string(e2.what()) == e.what());
  }
}

TEST_CASE("the in-memory kernel cache is bounded; evicted kernels stay usable", "[jit][cache]") {
  test::TempDir dir;
  const size_t old_cap = jit::memory_cache_capacity();
  struct Restore {
    size_t cap;
    ~Restore() { jit::set_memory_cache_capacity(cap); }
  } restore{old_cap};
  jit::clear_memory_cache();
  jit::set_memory_cache_capacity(8);
  jit::reset_compile_stats();
  jit::CompileOptions o{.arch = "sm_90", .cache_dir = dir.str()};
  std::vector<CompiledKernel> held;
  for (int i = 0; i < 24; ++i) held.push_back(jit::compile(add_kernel("memcap_" + std::to_string(i), 1.0f), o));
  CHECK(jit::memory_cache_size() <= 8);
  CHECK(jit::compile_stats().evictions >= 16);
  CHECK(jit::compile_stats().builds == 24);
  for (const auto& k : held) CHECK(k.cubin().size() > 4);  // held kernels outlive eviction

  // The most recently used survive: the last one is a memory hit, the first comes from disk.
  jit::flush_cache_writes();
  jit::reset_compile_stats();
  CHECK(jit::compile(add_kernel("memcap_23", 1.0f), o).from_cache());
  CHECK(jit::compile_stats().memory_hits == 1);
  CHECK(jit::compile(add_kernel("memcap_0", 1.0f), o).from_cache());
  CHECK(jit::compile_stats().disk_hits == 1);
  CHECK(jit::compile_stats().builds == 0);

  // Lowering the cap evicts at once; 0 is unbounded.
  jit::set_memory_cache_capacity(2);
  CHECK(jit::memory_cache_size() <= 2);
  jit::set_memory_cache_capacity(0);
  for (int i = 0; i < 12; ++i) jit::compile(add_kernel("memcap_" + std::to_string(i), 1.0f), o);
  CHECK(jit::memory_cache_size() >= 12);
}

TEST_CASE("a crowd of threads compiling many kernels through a tiny memory cache", "[jit][cache][concurrency]") {
  test::TempDir dir;
  const size_t old_cap = jit::memory_cache_capacity();
  struct Restore {
    size_t cap;
    ~Restore() { jit::set_memory_cache_capacity(cap); }
  } restore{old_cap};
  jit::set_memory_cache_capacity(4);
  constexpr int kThreads = 8, kKernels = 24;
  std::vector<ir::Kernel> ks;
  std::vector<jit::Key> keys;
  for (int i = 0; i < kKernels; ++i) {
    ks.push_back(add_kernel("crowd_" + std::to_string(i), float(i)));
    keys.push_back(jit::cache_key(ks.back(), "sm_90"));
  }
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      try {
        for (int r = 0; r < 3; ++r)
          for (int j = 0; j < kKernels; ++j) {
            int i = (j * 7 + t * 5) % kKernels;
            CompiledKernel k = jit::compile(ks[i], {.arch = "sm_90", .cache_dir = dir.str()});
            if (!(k.key() == keys[i]) || k.cubin().size() < 4) ++wrong;
          }
      } catch (...) {
        ++failed;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
  CHECK(jit::memory_cache_size() <= 4);
}

// ---------------- [gpu]: on a device, or in the interpreter ----------------

TEST_CASE("one kernel launched from 8 threads with different dynamic shared memory sizes", "[gpu][concurrency]") {
  CompiledKernel k = jit::compile(reverse_kernel());
  constexpr int kThreads = 8;
  const int rounds = jit::interpret_mode() ? 3 : 50;
  std::atomic<int> bad{0}, failed{0}, ready{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      try {
        // 16 KB .. 128 KB: the upper half needs the function's limit raised (> 48 KB), by
        // whichever thread gets there first.
        const uint32_t count = 4096u * uint32_t(t + 1);
        std::mt19937 rng(t);
        std::vector<float> x(count);
        for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        DeviceBuffer<float> din(x), dout(count);
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int r = 0; r < rounds; ++r) {
          dout.fill_bytes(0xFF);
          k.launch({.grid = {1}, .block = {256}, .shared_bytes = count * 4}, din, dout, count);
          std::vector<float> got = dout.to_host();
          for (uint32_t i = 0; i < count; ++i)
            if (std::memcmp(&got[i], &x[count - 1 - i], 4) != 0) {
              ++bad;
              break;
            }
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
        ++failed;
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors)
    if (!e.empty()) UNSCOPED_INFO(e);
  CHECK(failed == 0);
  CHECK(bad == 0);
}

TEST_CASE("events time a launch; unrecorded events are a usage error", "[gpu]") {
  CompiledKernel k = jit::compile(add_kernel("event_add", 1.0f));
  const uint32_t n = 1 << 16;
  DeviceBuffer<float> x(std::vector<float>(n, 1.0f));
  Stream s;
  Event start, stop;
  CHECK_THROWS_AS(elapsed_ms(start, stop), UsageError);
  start.record(&s);
  k.launch({.grid = {n / 256}, .block = {256}, .stream = &s}, x, n);
  stop.record(&s);
  float ms = elapsed_ms(start, stop);
  CHECK(std::isfinite(ms));
  CHECK(ms >= 0.0f);
  std::vector<float> got = x.to_host();
  CHECK(std::count(got.begin(), got.end(), 2.0f) == n);
  Event moved = std::move(start);
  CHECK(moved.recorded());
  CHECK_FALSE(start.recorded());
}

TEST_CASE("a cluster launch runs every block once", "[gpu]") {
  // Needs sm_90+; in interpret mode the shape is validated and the kernel runs unchanged.
  if (!jit::interpret_mode() && jit::driver::device_sm() < 90) {
    CompiledKernel k = jit::compile(add_kernel("cluster_add_old", 1.0f));
    DeviceBuffer<float> x(std::vector<float>(64, 0.0f));
    CHECK_THROWS_AS(k.launch({.grid = {2}, .block = {32}, .cluster = {2}}, x, 64u), UsageError);
    return;
  }
  CompiledKernel k = jit::compile(add_kernel("cluster_add", 1.0f));
  for (uint32_t cluster : {2u, 4u, 8u}) {
    INFO("cluster of " << cluster);
    const uint32_t n = 64 * 128;  // 64 blocks: a multiple of every cluster size
    std::vector<float> host(n);
    for (uint32_t i = 0; i < n; ++i) host[i] = float(i);
    DeviceBuffer<float> x(host);
    k.launch({.grid = {n / 128}, .block = {128}, .cluster = {cluster}}, x, n);
    std::vector<float> got = x.to_host();
    size_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) bad += got[i] != float(i) + 1.0f;
    CHECK(bad == 0);
  }
}

TEST_CASE("a tensor map is encoded by the driver", "[gpu]") {
  jit::TensorMapTiled t{.dtype = ir::Scalar::F16, .global_address = 0, .global_dims = {256, 128},
                        .global_strides = {512}, .box_dims = {64, 64}, .swizzle = jit::TensorMapSwizzle::B128};
  if (!jit::driver::available()) {  // interpreted without a GPU: encoding needs the driver
    t.global_address = 0x10000;
    CHECK_THROWS_AS(jit::encode_tensor_map_tiled(t), ToolError);
    return;
  }
  // Device memory from the driver itself, so that this also holds in interpret mode (where
  // DeviceBuffer memory is host RAM).
  jit::driver::ensure_context();
  const jit::driver::Api& api = jit::driver::api();
  CUdeviceptr p = 0;
  REQUIRE(api.mem_alloc(&p, size_t(256) * 128 * 2) == CUDA_SUCCESS);
  t.global_address = p;
  jit::TensorMap m = jit::encode_tensor_map_tiled(t);
  jit::TensorMap m2 = jit::encode_tensor_map_tiled(t);
  api.mem_free(p);
  CHECK(reinterpret_cast<uintptr_t>(&m) % 64 == 0);
  CHECK(std::any_of(m.bytes.begin(), m.bytes.end(), [](uint8_t b) { return b != 0; }));
  CHECK(m.bytes == m2.bytes);  // deterministic: the same parameters give the same descriptor
}

// The umbrella header names the launch side in kaio:: as it does kaio::DeviceBuffer.
static_assert(std::is_same_v<kaio::LaunchConfig, kaio::jit::LaunchConfig>);
static_assert(std::is_same_v<kaio::Dim3, kaio::jit::Dim3>);
static_assert(std::is_same_v<kaio::CompiledKernel, kaio::jit::CompiledKernel>);
static_assert(std::is_same_v<kaio::CompileOptions, kaio::jit::CompileOptions>);
static_assert(std::is_same_v<kaio::Event, kaio::jit::Event>);
static_assert(std::is_same_v<kaio::TensorMap, kaio::jit::TensorMap>);

TEST_CASE("a launch that overlaps the previous kernel reads its writes after the wait", "[gpu]") {
  // The producer lets the next kernel start at once and then takes a while to write y; the
  // consumer, launched to overlap it, waits before reading y. Each round writes new values,
  // so a read before the producer's writes were visible would show.
  ir::KernelBuilder pb("overlap_producer");
  {
    auto y = pb.param<float*>("y");
    auto round = pb.param<uint32_t>("round");
    auto n = pb.param<uint32_t>("n");
    pb.launch_dependents();
    ir::Value i = pb.global_id_x();
    ir::Var v = pb.var<float>(ir::cast<float>(i + round));
    pb.for_(0u, 200u, [&](ir::Value) { v = v.get() * 0.5f + 1.0f; });  // converges to 2
    pb.if_(i < n, [&] { y[i] = v.get() + ir::cast<float>(i + round); });
  }
  ir::KernelBuilder cb("overlap_consumer");
  {
    auto y = cb.param<const float*>("y");
    auto z = cb.param<float*>("z");
    auto n = cb.param<uint32_t>("n");
    ir::Value i = cb.global_id_x();
    cb.grid_dependency_wait();
    cb.if_(i < n, [&] {
      ir::Value yi = y[i];
      z[i] = yi + 1.0f;
    });
  }
  CompiledKernel producer = jit::compile(pb.build()), consumer = jit::compile(cb.build());
  const uint32_t n = jit::interpret_mode() ? 256 : 1 << 20, block = 256;
  DeviceBuffer<float> y(n), z(n);
  jit::Stream s;
  for (uint32_t round = 0; round < (jit::interpret_mode() ? 2u : 20u); ++round) {
    y.fill_bytes(0xFF);
    z.fill_bytes(0xFF);
    producer.launch({.grid = {n / block}, .block = {block}, .stream = &s}, y.ptr(), round, n);
    consumer.launch({.grid = {n / block}, .block = {block}, .stream = &s, .overlap_previous = true}, y.ptr(), z.ptr(), n);
    s.synchronize();
    const std::vector<float> got = z.to_host();
    size_t bad = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (got[i] != 3.0f + float(i + round)) ++bad;
    INFO("round " << round);
    CHECK(bad == 0);
  }
}
