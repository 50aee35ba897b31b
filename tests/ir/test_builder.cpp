// Misuse of the builder throws UsageError naming the kernel and the op.
#include <catch2/catch.hpp>

#include "kaio/kaio.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

using kaio::test::usage_error_of;

TEST_CASE("mixing types without a cast is rejected", "[ir][errors]") {
  ir::KernelBuilder b("mix");
  auto x = b.param<const float*>("x");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  UsageError e = usage_error_of([&] { (void)(x[i] + n); });
  CHECK(e.kernel() == "mix");
  CHECK(e.op() == "add");
  CHECK_THAT(e.what(), Contains("f32") && Contains("u32") && Contains("cast"));
  // With a cast it is fine.
  CHECK_NOTHROW(x[i] + ir::cast<float>(n));
}

TEST_CASE("storing through a const pointer is rejected", "[ir][errors]") {
  ir::KernelBuilder b("ro");
  auto x = b.param<const float*>("x");
  auto i = b.global_id_x();
  UsageError e = usage_error_of([&] { x[i] = 1.0f; });
  CHECK(e.kernel() == "ro");
  CHECK(e.op() == "store");
  CHECK_THAT(e.what(), Contains("'x'") && Contains("const"));
}

TEST_CASE("a value used outside its scope is rejected", "[ir][errors]") {
  ir::KernelBuilder b("scoped");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto i = b.global_id_x();
  ir::Value inner;
  b.if_(i < 10u, [&] { inner = x[i] * 2.0f; });
  UsageError e = usage_error_of([&] { y[i] = inner; });
  CHECK(e.kernel() == "scoped");
  CHECK(e.op() == "store");
  CHECK_THAT(e.what(), Contains("outside the scope"));
  // A loop's induction value is scoped to its body as well.
  ir::Value iv;
  b.for_(0u, 4u, [&](ir::Value k) { iv = k; });
  CHECK_THROWS_AS(y[iv] = 0.0f, UsageError);
}

TEST_CASE("literals take the type of the value they meet, within range", "[ir][errors]") {
  ir::KernelBuilder b("lits");
  auto n = b.param<uint32_t>("n");
  auto s = b.param<int8_t>("s");
  CHECK_NOTHROW(n + 3);
  UsageError e = usage_error_of([&] { (void)(n + 1.5f); });
  CHECK(e.op() == "add");
  CHECK_THAT(e.what(), Contains("floating-point literal"));
  CHECK_THROWS_AS(n + (-1), UsageError);
  CHECK_THROWS_AS(s * 300, UsageError);
  CHECK_NOTHROW(s * -100);
}

TEST_CASE("operators check their operand kinds", "[ir][errors]") {
  ir::KernelBuilder b("kinds");
  auto f = b.param<float>("f");
  auto u = b.param<uint32_t>("u");
  auto p = b.param<float*>("p");
  CHECK(usage_error_of([&] { (void)(f % f); }).op() == "rem");
  CHECK(usage_error_of([&] { (void)(f << f); }).op() == "shl");
  CHECK(usage_error_of([&] { (void)(-u); }).op() == "neg");
  CHECK(usage_error_of([&] { (void)(p + 1); }).op() == "add");
  CHECK(usage_error_of([&] { (void)ir::exp(u); }).op() == "exp");
  CHECK(usage_error_of([&] { b.if_(u, [] {}); }).op() == "if_");
  CHECK(usage_error_of([&] { (void)ir::cast<double>(f, ir::Rounding::Rz); }).op() == "cast");
}

TEST_CASE("structure misuse", "[ir][errors]") {
  ir::KernelBuilder b("shape");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  auto chain = b.if_(i < n, [] {});
  (void)(i + 1u);  // something between the if_ and its else_
  CHECK(usage_error_of([&] { chain.else_([] {}); }).op() == "else_");
  CHECK(usage_error_of([&] { b.if_(i < n, [&] { (void)b.param<float>("late"); }); }).op() == "param");
  CHECK(usage_error_of([&] { (void)b.param<float>("n"); }).op() == "param");
  CHECK(usage_error_of([&] { b.for_(0u, n, 0u, [](ir::Value) {}); }).op() == "for_");
  b.build();
  CHECK(usage_error_of([&] { b.build(); }).op() == "build");
  CHECK(usage_error_of([&] { (void)(i + 1u); }).kernel() == "shape");
}

TEST_CASE("values of one builder cannot enter another", "[ir][errors]") {
  ir::KernelBuilder a("a"), b("b");
  auto x = a.param<float>("x");
  auto y = b.param<float>("y");
  CHECK_THROWS_AS(x + y, UsageError);
}

TEST_CASE("bad kernel names are rejected", "[ir][errors]") {
  CHECK_THROWS_AS(ir::KernelBuilder(""), UsageError);
  CHECK_THROWS_AS(ir::KernelBuilder("has space"), UsageError);
  CHECK_THROWS_AS(ir::KernelBuilder("9lives"), UsageError);
}
