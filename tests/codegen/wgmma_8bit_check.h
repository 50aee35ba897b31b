// Shared by the FP8 and integer wgmma golden tests: one 8-bit wgmma kernel's PTX line, its
// IR print, its sm_90a assembly (the SASS op where cuobjdump is installed) and the refusal
// of plain sm_90.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "../link_memo.h"

namespace kaio::test {

// `form`: the instruction after "wgmma.mma_async.sync.aligned." up to the accumulators;
// `tail`: the operands after them; `sass_op`: the SASS instruction (QGMMA, IGMMA).
inline void check_wgmma_8bit_form(ir::Scalar ta, ir::Scalar tb, uint32_t n, const std::string& form,
                                  const std::string& tail, const char* sass_op) {
  using Catch::Matchers::Contains;
  ir::Kernel k = wgmma_8bit_kernel(ta, tb, n);
  INFO(k.name());
  CHECK(k.arch_specific());
  const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
  const size_t at = ptx.find("\twgmma.mma_async");
  REQUIRE(at != std::string::npos);
  const std::string line = ptx.substr(at + 1, ptx.find(";\n", at) - at - 1);
  CHECK_THAT(line, Contains("wgmma.mma_async.sync.aligned." + form));
  CHECK(line.substr(line.rfind('}')) == tail);
  CHECK_THAT(k.print(), Contains("m64n" + std::to_string(n) + "k32 " + ir::scalar_name(ta)));
  jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
  CHECK(r.cubin.size() > 4);
  const std::string sass = sass_of(r.cubin);
  if (!sass.empty()) CHECK_THAT(sass, Contains(sass_op));
  CHECK_THAT(usage_error_of([&] { (void)jit::compile(k, {.arch = "sm_90", .use_cache = false}); }).what(),
             Contains("sm_90a"));
}

}  // namespace kaio::test
