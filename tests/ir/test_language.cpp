// The full language: verifier rejections with messages naming the kernel and the op, and
// the printed form of the parallel ops.
#include <catch2/catch.hpp>

#include "kaio/codegen/ptx.h"
#include "kaio/kaio.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

using kaio::test::usage_error_of;

TEST_CASE("a barrier under a thread-dependent condition is rejected", "[ir][errors]") {
  ir::KernelBuilder b("divergent");
  auto out = b.param<float*>("out");
  auto t = b.thread_idx_x();
  b.if_(t < 16u, [&] { b.barrier(); });
  UsageError e = usage_error_of([&] { b.build(); });
  CHECK(e.kernel() == "divergent");
  CHECK(e.op() == "barrier");
  CHECK_THAT(e.what(), Contains("divergent barrier"));
  (void)out;
}

TEST_CASE("thread dependence flows through variables and loops", "[ir][errors]") {
  ir::KernelBuilder b("through_var");
  auto n = b.param<uint32_t>("n");
  auto trip = b.var<uint32_t>(0u);
  b.for_(0u, n, [&](ir::Value) { trip = b.lane_id(); });  // written with a lane-dependent value
  b.while_([&] { return trip.get() < n; }, [&] {
    b.barrier();
    trip += 1u;
  });
  CHECK(usage_error_of([&] { b.build(); }).op() == "barrier");
}

TEST_CASE("a barrier under a uniform condition is accepted", "[ir]") {
  ir::KernelBuilder b("uniform");
  auto n = b.param<uint32_t>("n");
  auto s = b.shared<float>(64);
  auto blk = b.block_idx_x();
  b.if_(blk < n, [&] {
    s[b.thread_idx_x()] = 1.0f;
    b.barrier();
  });
  b.for_(0u, n, [&](ir::Value) { b.barrier(); });
  CHECK_NOTHROW(b.build());
}

TEST_CASE("static shared memory over the target's limit is rejected at compile time", "[ir][errors]") {
  ir::KernelBuilder b("big_smem");
  auto s1 = b.shared<float>(8192);  // 32 KB
  auto s2 = b.shared<float>(8192);  // 32 KB more
  s1[0] = 1.0f;
  s2[0] = 2.0f;
  ir::Kernel k = b.build();
  try {
    codegen::emit_ptx(k, {"sm_90", 9, 0});
    FAIL("expected UsageError");
  } catch (const UsageError& e) {
    CHECK(e.kernel() == "big_smem");
    CHECK(e.op() == "shared");
    CHECK_THAT(e.what(), Contains("65536 bytes") && Contains("49152"));
  }
}

TEST_CASE("a misaligned vector access through a known offset is rejected", "[ir][errors]") {
  ir::KernelBuilder b("misaligned");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  UsageError e = usage_error_of([&] { (void)ir::load_vec(x, 2, 4); });
  CHECK(e.kernel() == "misaligned");
  CHECK(e.op() == "load_vec");
  CHECK_THAT(e.what(), Contains("not a multiple"));
  CHECK_NOTHROW(ir::load_vec(x, 4, 4));
  auto v = ir::load_vec(x, 8, 2);
  CHECK(usage_error_of([&] { ir::store_vec(y, 3, v); }).op() == "store_vec");
  CHECK(usage_error_of([&] { (void)ir::load_vec(x, 0, 3); }).op() == "load_vec");
  ir::KernelBuilder d("wide");
  auto z = d.param<const double*>("z");
  CHECK(usage_error_of([&] { (void)ir::load_vec(z, 0, 4); }).op() == "load_vec");  // 32 bytes
}

TEST_CASE("shuffles and votes check their operand types", "[ir][errors]") {
  ir::KernelBuilder b("warp_types");
  auto x = b.param<float>("x");
  auto p = x > 0.0f;
  UsageError e = usage_error_of([&] { (void)ir::shfl_down(p, 1u); });
  CHECK(e.kernel() == "warp_types");
  CHECK(e.op() == "shfl");
  CHECK_THAT(e.what(), Contains("pred") && Contains("vote"));
  CHECK(usage_error_of([&] { (void)ir::shfl_xor(x, 1u, 24); }).op() == "shfl");
  CHECK(usage_error_of([&] { (void)ir::vote_any(x); }).op() == "vote");
  CHECK(usage_error_of([&] { (void)b.warp_reduce_sum(ir::cast<double>(x)); }).op() == "warp_reduce");
}

TEST_CASE("atomics check pointer and type", "[ir][errors]") {
  ir::KernelBuilder b("atoms");
  auto c = b.param<const uint32_t*>("c");
  auto f = b.param<float*>("f");
  auto h = b.param<kaio::half*>("h");
  CHECK(usage_error_of([&] { (void)ir::atomic_add(c, 0, 1u); }).op() == "atomic_add");
  CHECK_THAT(usage_error_of([&] { (void)ir::atomic_max(f, 0, 1.0f); }).what(), Contains("atomic_cas"));
  CHECK(usage_error_of([&] { (void)ir::atomic_cas(h, 0, kaio::half(1.0f), kaio::half(2.0f)); }).op() == "atomic_cas");
  CHECK_NOTHROW(ir::atomic_add(f, 0, 1.0f));
}

TEST_CASE("packed pairs allow pairwise arithmetic only", "[ir][errors]") {
  ir::KernelBuilder b("packed_errors");
  auto x = b.param<kaio::half2>("x");
  auto h = b.param<kaio::half>("h");
  auto f = b.param<float>("f");
  CHECK(usage_error_of([&] { (void)(x / x); }).op() == "div");
  CHECK(usage_error_of([&] { (void)(x < x); }).op() == "lt");
  CHECK(usage_error_of([&] { (void)ir::exp(x); }).op() == "exp");
  CHECK(usage_error_of([&] { (void)ir::cast<float>(x); }).op() == "cast");
  CHECK(usage_error_of([&] { (void)ir::pack2(h, f); }).op() == "pack");
  CHECK(usage_error_of([&] { (void)ir::unpack_lo(h); }).op() == "unpack");
  CHECK_NOTHROW(ir::fma(x, x, x) + x * 0.5f);
  CHECK(ir::pack2(h, h).type() == ir::type_of<kaio::half2>());
}

TEST_CASE("cache hints are checked", "[ir][errors]") {
  ir::KernelBuilder b("hints");
  auto x = b.param<float*>("x");
  auto s = b.shared<float>(4);
  CHECK(usage_error_of([&] { (void)ir::load(x, 0, ir::CacheHint::ReadOnly); }).op() == "load");
  CHECK(usage_error_of([&] { (void)ir::load(s, 0, ir::CacheHint::Streaming); }).op() == "load");
  CHECK(usage_error_of([&] { ir::store(x, 0, 1.0f, ir::CacheHint::LastUse); }).op() == "store");
}

TEST_CASE("printer: shared memory, barrier, shuffles, votes, atomics, vectors", "[ir][printer]") {
  ir::KernelBuilder b("par");
  auto g = b.param<uint32_t*>("g");
  b.launch_bounds(128, 2);
  auto s = b.shared<uint32_t>(128);
  auto l = b.lane_id();
  s[l] = l;
  b.barrier();
  b.fence(ir::FenceScope::Cta);
  b.comment("next: a shuffle");
  ir::Value v = s[l];
  auto x = ir::shfl_xor(v, 1u, 16);
  auto bal = ir::ballot(x > 3u);
  auto old = ir::atomic_add(g, 0, bal);
  auto vv = ir::load_vec(g, 4, 2);
  ir::store_vec(g, 8, {vv[1], old});
  const char* expected =
      "kernel par(%0: ptr<u32> g) {\n"
      "  .launch_bounds 128, 2\n"
      "  %1 = shared 128 : ptr<shared u32>\n"
      "  %2 = sreg laneid : u32\n"
      "  store %1[%2], %2 : u32\n"
      "  barrier\n"
      "  fence.cta\n"
      "  ; next: a shuffle\n"
      "  %3 = load %1[%2] : u32\n"
      "  %4 = const 1 : u32\n"
      "  %5 = shfl.xor %3, %4 width 16 mask 0xffffffff : u32\n"
      "  %6 = const 3 : u32\n"
      "  %7 = gt %5, %6 : pred\n"
      "  %8 = vote.ballot %7 mask 0xffffffff : u32\n"
      "  %9 = const 0 : u32\n"
      "  %10 = atomic.add %0[%9], %8 : u32\n"
      "  %11 = const 4 : u32\n"
      "  %12, %13 = load_vec %0[%11] : u32\n"
      "  %14 = const 8 : u32\n"
      "  store_vec %0[%14], %13, %10 : u32\n"
      "}\n";
  ir::Kernel k = b.build();
  CHECK(k.print() == expected);
}

TEST_CASE("comments do not change the key; launch bounds and fast math do", "[ir][hash]") {
  auto make = [](bool comment, uint32_t bound, bool fast) {
    ir::KernelBuilder b("attrs");
    auto x = b.param<float*>("x");
    if (comment) b.comment("hello");
    if (bound) b.launch_bounds(bound);
    if (fast) b.fast_math();
    x[0] = ir::exp(x[0]);
    return b.build();
  };
  CHECK(make(true, 0, false).hash() == make(false, 0, false).hash());
  CHECK_FALSE(make(false, 256, false).hash() == make(false, 0, false).hash());
  CHECK_FALSE(make(false, 0, true).hash() == make(false, 0, false).hash());
}
