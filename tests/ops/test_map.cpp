// ops::map, the public fused-map generator: a user map with inputs and scalars in every
// dtype at edge sizes, aligned and misaligned, against float64; the call path runs no
// builder after the first call of a config; misuse is a UsageError naming the map; every
// vector width assembles for sm_80 and sm_90.
#include <catch2/catch.hpp>

#include <cmath>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/ops/map.h"
#include "ops_support.h"
#include "../link_memo.h"

using namespace kaio;
using namespace kaio::test::ops;

namespace {

// out = s0 * x * y + z - s1, in f32.
template <class T>
ops::Map<T> fma3() {
  return ops::map<T>("test_fma3", 3, 2, [](ir::KernelBuilder& b, std::span<ir::Value> in, std::span<ir::Value> s) {
    b.comment("fma3 body");
    return ir::fma(s[0] * in[0], in[1], in[2]) - s[1];
  });
}

}  // namespace

TEMPLATE_TEST_CASE("ops::map: a user map with three inputs and two scalars", "[gpu][ops][map]", float, kaio::half,
                   kaio::bfloat16) {
  using T = TestType;
  ops::Map<T> op = fma3<T>();
  CHECK(op.name() == "test_fma3");
  const float s0 = 1.5f, s1 = 0.25f;
  for (size_t n : {size_t(1), size_t(3 * 17), size_t(67 * 1025)})
    for (size_t offset : {size_t(0), size_t(1)}) {
      INFO(type_name<T>() << " n = " << n << " offset = " << offset);
      Slice<T> x(n, offset), y(n, offset), z(n, offset), out(n, offset);
      auto hx = random_vec<T>(n, -2, 2), hy = random_vec<T>(n, -2, 2), hz = random_vec<T>(n, -2, 2);
      x.upload(hx);
      y.upload(hy);
      z.upload(hz);
      out.poison();
      op(out.address(), {x.address(), y.address(), z.address()}, {s0, s1}, n);
      std::vector<T> got = out.download();
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        double p = s0 * as_double(hx[i]) * as_double(hy[i]), r = p + as_double(hz[i]) - s1;
        // f32: s0 * x, the fma and the subtraction each round once.
        double tol = 3 * kU32 * (std::fabs(p) + std::fabs(as_double(hz[i])) + s1);
        if (!std::is_same_v<T, float>) tol += unit<T>() * std::fabs(r) * 1.0001 + tiny<T>();
        bad += !(std::fabs(as_double(got[i]) - r) <= tol);
      }
      CHECK(bad == 0);
      CHECK(out.guards_intact());
    }
  // DeviceBuffers and DevicePtrs are accepted too; repeated calls run no builder.
  DeviceBuffer<T> bx(random_vec<T>(64, -1, 1)), by(random_vec<T>(64, -1, 1)), bz(random_vec<T>(64, -1, 1)), bo(64);
  op(bo, {bx, by, bz}, {s0, s1}, 64);
  const uint64_t builds = op.family().builds();
  for (int i = 0; i < 5; ++i) op(bo.ptr(), {bx.ptr(), by, jit::DevicePtr<const T>{bz.device_address()}}, {s0, s1}, 64);
  CHECK(op.family().builds() == builds);
  // On a stream: the result is there once the stream has synchronized.
  jit::Stream stream;
  bo.fill_bytes(0xFF);
  op(bo, {bx, by, bz}, {0.0f, -1.0f}, 64, &stream);  // 0 * x * y + z + 1
  stream.synchronize();
  std::vector<T> hz = bz.to_host(), got = bo.to_host();
  size_t bad = 0;
  for (size_t i = 0; i < 64; ++i)
    bad += !(std::fabs(as_double(got[i]) - (as_double(hz[i]) + 1)) <= 2 * unit<T>() * (std::fabs(as_double(hz[i])) + 1));
  CHECK(bad == 0);
}

TEMPLATE_TEST_CASE("ops::map on strided rows", "[gpu][ops][map]", float, kaio::bfloat16) {
  using T = TestType;
  ops::Map<T> op = fma3<T>();
  struct Shape {
    uint32_t rows, cols;
    uint64_t ld;
    size_t offset;
  };
  for (Shape sh : {Shape{1, 1, 1, 0}, Shape{3, 17, 24, 0}, Shape{67, 1025, 1032, 0}, Shape{4, 40, 41, 1},
                   Shape{70000, 2, 8, 0}}) {  // more rows than the grid's y extent
    INFO(type_name<T>() << " " << sh.rows << "x" << sh.cols << " ld " << sh.ld << " offset " << sh.offset);
    const size_t span = size_t(sh.rows - 1) * sh.ld + sh.cols;
    Slice<T> x(span, sh.offset), y(span, sh.offset), z(span, sh.offset), out(span, sh.offset);
    auto hx = random_vec<T>(span, -2, 2), hy = random_vec<T>(span, -2, 2), hz = random_vec<T>(span, -2, 2);
    x.upload(hx);
    y.upload(hy);
    z.upload(hz);
    out.poison();
    op.rows({out.address(), sh.ld}, {{x.address(), sh.ld}, {y.address(), sh.ld}, {z.address(), sh.ld}}, {2.0f, 1.0f},
            sh.rows, sh.cols);
    std::vector<T> got = out.download();
    size_t bad = 0;
    for (size_t i = 0; i < span; ++i) {
      double g = as_double(got[i]);
      if (i % sh.ld >= sh.cols) {
        bad += !std::isnan(g);  // padding between rows: untouched
        continue;
      }
      double p = 2 * as_double(hx[i]) * as_double(hy[i]), r = p + as_double(hz[i]) - 1;
      double tol = 3 * kU32 * (std::fabs(p) + std::fabs(as_double(hz[i])) + 1);
      if (!std::is_same_v<T, float>) tol += unit<T>() * std::fabs(r) * 1.0001 + tiny<T>();
      bad += !(std::fabs(g - r) <= tol);
    }
    CHECK(bad == 0);
    CHECK(out.guards_intact());
  }
}

TEST_CASE("ops::map without scalars, the README's example", "[gpu][ops][map]") {
  auto swiglu = ops::map<kaio::bfloat16>("my_swiglu", 2, [](ir::KernelBuilder&, std::span<ir::Value> in) {
    return in[0] / (1.0f + ir::exp(-in[0])) * in[1];
  });
  const size_t n = 1000;
  auto hx = random_vec<kaio::bfloat16>(n, -4, 4), hg = random_vec<kaio::bfloat16>(n, -2, 2);
  DeviceBuffer<kaio::bfloat16> x(hx), g(hg), out(n);
  out.fill_bytes(0xFF);
  swiglu(out, {x, g}, n);
  std::vector<kaio::bfloat16> got = out.to_host();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double xi = as_double(hx[i]), r = xi / (1 + std::exp(-xi)) * as_double(hg[i]);
    bad += !(std::fabs(as_double(got[i]) - r) <= (unit<kaio::bfloat16>() * 1.0001 + 20 * kU32) * std::fabs(r) + 1e-37);
  }
  CHECK(bad == 0);
}

TEST_CASE("ops::map misuse is a UsageError naming the map and the argument", "[ops][map]") {
  auto body = [](ir::KernelBuilder&, std::span<ir::Value> in) { return in[0]; };
  CHECK_THAT(test::usage_error_of([&] { ops::map<float>("bad name", 1, body); }).what(), Catch::Contains("letters"));
  CHECK_THAT(test::usage_error_of([&] { ops::map<float>("", 1, body); }).what(), Catch::Contains("'"));
  CHECK_THAT(test::usage_error_of([&] { ops::map<float>("none", 0, body); }).what(), Catch::Contains("1 to 8"));
  CHECK_THAT(test::usage_error_of([&] { ops::map<float>("many", 9, body); }).what(), Catch::Contains("at most 8"));
  {
    auto a = ops::map<float>("twice", 1, body);
    CHECK_THAT(test::usage_error_of([&] { ops::map<float>("twice", 1, body); }).what(), Catch::Contains("exists already"));
    auto h = ops::map<kaio::half>("twice", 1, body);  // another dtype: another family
    CHECK(h.family().name() != a.family().name());
  }
  auto again = ops::map<float>("twice", 1, body);  // the name is free once the map is gone
  CHECK(again.name() == "twice");

  auto op = ops::map<float>("checked", 2, [](ir::KernelBuilder&, std::span<ir::Value> in) { return in[0] * in[1]; });
  const uint64_t x = 0x10000, y = 0x20000, out = 0x30000;  // never dereferenced: every call fails its checks
  auto e = test::usage_error_of([&] { op(out, {x}, 10); });
  CHECK(e.op() == "checked");
  CHECK_THAT(e.what(), Catch::Contains("takes 2 inputs, got 1"));
  e = test::usage_error_of([&] { op(out, {x, y}, {1.0f}, 10); });
  CHECK_THAT(e.what(), Catch::Contains("'scalars'"));
  e = test::usage_error_of([&] { op(out, {x, uint64_t{0}}, 10); });
  CHECK_THAT(e.what(), Catch::Contains("'in1'") && Catch::Contains("null"));
  e = test::usage_error_of([&] { op(out, {x, y}, 0); });
  CHECK_THAT(e.what(), Catch::Contains("'n'"));
  CHECK(op.family().builds() == 0);

  // A body returning something other than f32 fails when its kernel is built.
  auto wrong = ops::map<kaio::half>("wrong_type", 1, [](ir::KernelBuilder&, std::span<ir::Value> in) {
    return ir::cast<kaio::half>(in[0]);
  });
  ir::Kernel k;
  e = test::usage_error_of([&] { k = wrong.kernels().kernel({ir::Scalar::F16, 1, 0, 8}); });
  CHECK(e.op() == "wrong_type");
  CHECK_THAT(e.what(), Catch::Contains("must return an f32 value"));
}

TEST_CASE("ops::map kernels assemble for sm_80 and sm_90 at every vector width", "[ops][map][nvjitlink]") {
  ops::Map<float> f = fma3<float>();
  ops::Map<kaio::half> h = fma3<kaio::half>();
  ops::Map<kaio::bfloat16> bf = fma3<kaio::bfloat16>();
  std::vector<ir::Kernel> ks;
  for (bool rows : {false, true}) {
    for (uint32_t v : {1u, 2u, 4u}) ks.push_back(f.kernels().kernel({ir::Scalar::F32, 3, 2, v, rows}));
    for (uint32_t v : {1u, 2u, 4u, 8u}) {
      ks.push_back(h.kernels().kernel({ir::Scalar::F16, 3, 2, v, rows}));
      ks.push_back(bf.kernels().kernel({ir::Scalar::BF16, 3, 2, v, rows}));
    }
  }
  for (const ir::Kernel& k : ks)
    for (const char* arch : {"sm_80", "sm_90"}) {
      INFO(k.name() << " for " << arch);
      jit::LinkResult r = test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
      CHECK(r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    }
}

// The umbrella header's launch-side names are kaio::X as well as kaio::jit::X.
static_assert(std::is_same_v<kaio::LaunchConfig, kaio::jit::LaunchConfig>);
static_assert(std::is_same_v<kaio::DeviceBuffer<float>, kaio::jit::DeviceBuffer<float>>);
static_assert(std::is_same_v<kaio::DevicePtr<float>, kaio::jit::DevicePtr<float>>);
static_assert(std::is_same_v<kaio::Stream, kaio::jit::Stream>);
