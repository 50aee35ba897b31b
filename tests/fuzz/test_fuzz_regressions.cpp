// Regression tests for bugs the fuzzers found; each failed before its fix.
#include <catch2/catch.hpp>

#include <string>

#include "kaio/kaio.h"

using namespace kaio;
using ir::Scalar;

// Found by the IR fuzzer (tests/fuzz/test_fuzz_ir.cpp, seed 20251123, kernels 0, 3, 6, 13,
// 14, 24, 53). ir::cast_sat between integer types where the target holds every value of
// the source (s8->s16/s32/s64, s16->s32/s64, s32->s64, u8->u16/u32/u64/s32/s64,
// u16->u32/u64/s32/s64, u32->u64/s64) emits `cvt.sat.<dst>.<src>`, e.g.
// `cvt.sat.s32.s16 %r1, %rs0;` for s8->s32 (codegen/emit_convert.cpp, the integer <->
// integer branch), and ptxas rejects it: "Illegal modifier '.sat' for instruction 'cvt'".
// Such a conversion cannot saturate, so the plain `cvt` is the right code.
TEST_CASE("cast_sat between integer types assembles for sm_80 and sm_90", "[fuzz][regression][codegen]") {
  const Scalar ints[] = {Scalar::S8, Scalar::S16, Scalar::S32, Scalar::S64,
                         Scalar::U8, Scalar::U16, Scalar::U32, Scalar::U64};
  for (Scalar from : ints)
    for (Scalar to : ints) {
      if (from == to) continue;
      const std::string name = std::string("cast_sat_") + ir::scalar_name(from) + "_" + ir::scalar_name(to);
      ir::KernelBuilder b(name);
      auto out = b.param("out", ir::Type::pointer(to, false));
      auto in = b.param("in", ir::Type::pointer(from, true));
      ir::Value v = in[0u];
      out[0u] = v.builder()->cast_sat(v, ir::Type::scalar(to), ir::Rounding::Default);
      const ir::Kernel k = b.build();
      for (const char* arch : {"sm_80", "sm_90"}) {
        INFO(name << " for " << arch);
        CHECK_NOTHROW(jit::compile(k, {.arch = arch, .use_cache = false}));
      }
    }
}
