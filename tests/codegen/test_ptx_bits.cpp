// Bit-level forms the quantized kernels rely on: ir::bitcast (u32 <-> f32 / f16x2 / bf16x2,
// one mov.b32; refused for other types, naming the op), its interpreter semantics (the same 32
// bits), the magic-number pair 1024 + v it exists for, and a select between two pointers
// (selp.b64, accepted by ptxas).
#include <bit>
#include <cmath>

#include <catch2/catch.hpp>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ir::Scalar;

TEST_CASE("bitcast: u32 <-> f32 / f16x2 / bf16x2 is one mov.b32; other types are refused", "[codegen][ir]") {
  ir::KernelBuilder b("bitcast_forms");
  auto p = b.param<uint32_t*>("p");
  ir::Value x = p[0u];
  ir::Value h = ir::bitcast((x & 0x000f000fu) | 0x64006400u, Scalar::F16x2);
  CHECK(h.type() == ir::Type::scalar(Scalar::F16x2));
  CHECK(ir::bitcast(x, Scalar::U32).type() == ir::Type::scalar(Scalar::U32));  // same type: the value itself
  p[1u] = ir::bitcast(h - h, Scalar::U32);
  p[2u] = ir::bitcast(ir::bitcast(x, Scalar::BF16x2), Scalar::U32);
  auto fp = b.param<float*>("fp");
  fp[0u] = ir::bitcast(x & 0xffff0000u, Scalar::F32);           // a bf16 in the high half: that f32
  p[3u] = ir::bitcast(ir::cast<float>(x) * 2.0f, Scalar::U32);  // an f32's bits
  for (ir::Value bad : {ir::cast<uint16_t>(x), ir::cast<uint64_t>(x), ir::Value(ir::cast<int32_t>(x))}) {
    try {
      (void)ir::bitcast(bad, Scalar::U32);
      FAIL("bitcast of a " << bad.type().str() << " was accepted");
    } catch (const UsageError& e) {
      CHECK(e.op() == "bitcast");
    }
  }
  const ir::Kernel k = b.build();
  CHECK_THAT(k.print(), Contains("bitcast"));
  const std::string ptx = codegen::emit_ptx(k, {"sm_80", 9, 0});
  CHECK_THAT(ptx, Contains("mov.b32"));
  CHECK_THAT(ptx, Contains("sub.rn.f16x2"));
  for (const char* arch : {"sm_80", "sm_90"}) test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
}

TEST_CASE("bitcast: the interpreter keeps the 32 bits; the magic pair is 1024 + v (f16), 128 + v (bf16)", "[codegen][ir][interp]") {
  ir::KernelBuilder b("bitcast_magic");
  auto in = b.param<const uint32_t*>("in");
  auto out = b.param<float*>("out");
  auto raw = b.param<uint32_t*>("raw");
  ir::Value i = b.thread_idx_x();
  ir::Value q = in[i];
  ir::Value f = ir::bitcast((q & 0x000f000fu) | 0x64006400u, Scalar::F16x2);
  ir::Value g = ir::bitcast((q & 0x000f000fu) | 0x43004300u, Scalar::BF16x2);
  out[i * 4u] = ir::cast<float>(ir::unpack_lo(f));
  out[i * 4u + 1u] = ir::cast<float>(ir::unpack_hi(f));
  out[i * 4u + 2u] = ir::cast<float>(ir::unpack_lo(g));
  out[i * 4u + 3u] = ir::cast<float>(ir::unpack_hi(g));
  raw[i] = ir::bitcast(ir::bitcast(q, Scalar::F16x2), Scalar::U32);
  // f32: the high half as a bf16 widened exactly, and the word through f32 and back.
  auto wide = b.param<float*>("wide");
  auto raw32 = b.param<uint32_t*>("raw32");
  wide[i] = ir::bitcast(q & 0xffff0000u, Scalar::F32);
  raw32[i] = ir::bitcast(ir::bitcast(q, Scalar::F32), Scalar::U32);
  const ir::Kernel k = b.build();
  std::vector<uint32_t> words = {0x00000000u, 0x000f000fu, 0x12345678u, 0xfedcba98u, 0x7fff8000u, 0xffffffffu};
  std::vector<float> vals(words.size() * 4, -1.0f), widened(words.size(), -1.0f);
  std::vector<uint32_t> back(words.size(), 0), back32(words.size(), 0);
  ir::interpret(k, {.grid = {1}, .block = {uint32_t(words.size())}}, words, vals, back, widened, back32);
  for (size_t t = 0; t < words.size(); ++t) {
    const float bf = std::bit_cast<float>(words[t] & 0xffff0000u);
    CHECK((std::isnan(bf) ? std::isnan(widened[t]) : widened[t] == bf));
    CHECK(std::bit_cast<uint32_t>(widened[t]) == (words[t] & 0xffff0000u));
    CHECK(back32[t] == words[t]);
  }
  for (size_t t = 0; t < words.size(); ++t) {
    const float lo = float(words[t] & 15u), hi = float((words[t] >> 16) & 15u);
    CHECK(vals[4 * t] == 1024 + lo);
    CHECK(vals[4 * t + 1] == 1024 + hi);
    CHECK(vals[4 * t + 2] == 128 + lo);
    CHECK(vals[4 * t + 3] == 128 + hi);
    CHECK(back[t] == words[t]);
  }
}

TEST_CASE("select of two pointers selects 64 bits (a QKV part's weights)", "[codegen][ir]") {
  ir::KernelBuilder b("select_pointer");
  auto p = b.param<float*>("p");
  auto q = b.param<float*>("q");
  ir::Value r = ir::select(b.block_idx_z() == 0u, p, q);
  r[0u] = 1.0f;
  const std::string ptx = codegen::emit_ptx(b.build(), {"sm_80", 9, 0});
  CHECK_THAT(ptx, Contains("selp.b64"));
  test::link_ptx(ptx, "sm_80", "select_pointer");  // throws if ptxas refuses it
}
