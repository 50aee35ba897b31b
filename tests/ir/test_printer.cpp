// The canonical printer, checked against inline expected text.
#include <catch2/catch.hpp>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"

using namespace kaio;

TEST_CASE("printer: saxpy", "[ir][printer]") {
  const char* expected =
      "kernel saxpy(%0: f32 a, %1: ptr<const f32> x, %2: ptr<f32> y, %3: u32 n) {\n"
      "  %4 = sreg ctaid.x : u32\n"
      "  %5 = sreg ntid.x : u32\n"
      "  %6 = sreg tid.x : u32\n"
      "  %7 = mul %4, %5 : u32\n"
      "  %8 = add %7, %6 : u32\n"
      "  %9 = lt %8, %3 : pred\n"
      "  if %9 {\n"
      "    %10 = load %1[%8] : f32\n"
      "    %11 = load %2[%8] : f32\n"
      "    %12 = mul %0, %10 : f32\n"
      "    %13 = add %12, %11 : f32\n"
      "    store %2[%8], %13 : f32\n"
      "  }\n"
      "}\n";
  std::string got = ops::saxpy_kernel().print();
  CHECK(got == expected);
}

TEST_CASE("printer: control flow, variables, casts, specs", "[ir][printer]") {
  ir::KernelBuilder b("flow");
  auto out = b.param<int32_t*>("out");
  auto n = b.param<int32_t>("n");
  auto tile = b.spec<int32_t>("TILE", 16);
  auto acc = b.var<int32_t>(0);
  b.for_(0, n, tile, [&](ir::Value k) { acc += k; });
  auto w = b.var<int32_t>(1);
  b.while_([&] { return w < n; }, [&] { w = w * 2; });
  b.if_(n > 0, [&] { out[0] = acc; }).else_([&] { out[0] = ir::cast<int32_t>(ir::cast<float>(n) * 0.5f, ir::Rounding::Rn); });
  b.return_();
  const char* expected =
      "kernel flow(%0: ptr<s32> out, %1: s32 n) {\n"
      "  %2 = const 16 : s32  ; spec TILE\n"
      "  %3 = const 0 : s32\n"
      "  %4 = var %3 : s32\n"
      "  %5 = const 0 : s32\n"
      "  for %6 = %5 to %1 step %2 : s32 {\n"
      "    %7 = read %4 : s32\n"
      "    %8 = add %7, %6 : s32\n"
      "    write %4, %8 : s32\n"
      "  }\n"
      "  %9 = const 1 : s32\n"
      "  %10 = var %9 : s32\n"
      "  while {\n"
      "    %11 = read %10 : s32\n"
      "    %12 = lt %11, %1 : pred\n"
      "  } test %12 do {\n"
      "    %13 = read %10 : s32\n"
      "    %14 = const 2 : s32\n"
      "    %15 = mul %13, %14 : s32\n"
      "    write %10, %15 : s32\n"
      "  }\n"
      "  %16 = const 0 : s32\n"
      "  %17 = gt %1, %16 : pred\n"
      "  if %17 {\n"
      "    %18 = const 0 : u32\n"
      "    %19 = read %4 : s32\n"
      "    store %0[%18], %19 : s32\n"
      "  } else {\n"
      "    %20 = cast.rn %1 : f32\n"
      "    %21 = const 0.5 : f32\n"
      "    %22 = mul %20, %21 : f32\n"
      "    %23 = cast.rn %22 : s32\n"
      "    %24 = const 0 : u32\n"
      "    store %0[%24], %23 : s32\n"
      "  }\n"
      "  return\n"
      "}\n";
  CHECK(b.build().print() == expected);
}
