// The outside judge: every test kernel is assembled by nvJitLink for sm_80 and sm_90
// (sm_90a-only kernels for sm_90a; no GPU needed). A PTX syntax or typing mistake anywhere in codegen fails here.
#include <catch2/catch.hpp>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "../kernels.h"
#include "../link_memo.h"

using namespace kaio;

TEST_CASE("every test kernel assembles for sm_80 and sm_90", "[codegen][nvjitlink]") {
  for (const ir::Kernel& k : test::test_kernels()) {
    for (std::string arch : {"sm_80", "sm_90"}) {
      // sm_90a-only kernels (wgmma): for sm_90a, as a device of sm_90 compiles them.
      if (k.arch_specific() && arch == "sm_80") continue;
      if (k.arch_specific()) arch = "sm_90a";
      INFO(k.name() << " for " << arch);
      std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
      jit::LinkResult r;
      try {
        r = test::link_ptx(ptx, arch, k.name());
      } catch (const ToolError& e) {
        FAIL(e.what() << "\n" << ptx);
      }
      REQUIRE(r.cubin.size() > 4);
      CHECK(r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    }
  }
}

TEST_CASE("nvJitLink failures carry the code name and the log", "[codegen][nvjitlink]") {
  std::string bad = ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry broken() { add.s32 %r0, 1; }\n";
  try {
    test::link_ptx(bad, "sm_90", "broken");
    FAIL("expected ToolError");
  } catch (const ToolError& e) {
    CHECK(e.tool() == "nvJitLink");
    CHECK(e.code() == "NVJITLINK_ERROR_PTX_COMPILE");
    CHECK_FALSE(e.log().empty());
    CHECK(std::string(e.what()).find("broken") != std::string::npos);
  }
}
