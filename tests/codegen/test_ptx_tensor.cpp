// Golden PTX for each form of the warp-level tensor-core and asynchronous-copy ops, and
// every form assembled by nvJitLink for sm_80 and sm_90.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "ptx_check.h"
#include "../link_memo.h"

using namespace kaio;

namespace {

// One warp-level op over a few inputs: fragments from global memory, results stored back.
ir::Kernel tensor_kernel(const std::string& name, const std::function<void(ir::KernelBuilder&)>& body) {
  ir::KernelBuilder b(name);
  body(b);
  return b.build();
}

std::vector<ir::Value> loads(ir::KernelBuilder& b, ir::Value p, int n) {
  std::vector<ir::Value> v;
  for (int k = 0; k < n; ++k) v.push_back(p[b.lane_id() * uint32_t(n) + uint32_t(k)]);
  return v;
}

ir::Kernel mma_kernel(ir::MmaKind kind) {
  const ir::MmaShape& s = ir::mma_shape(kind);
  return tensor_kernel(std::string("mma_") + std::to_string(static_cast<int>(kind)), [&](ir::KernelBuilder& b) {
    ir::Type frag = ir::Type::scalar(kind == ir::MmaKind::TF32 ? ir::Scalar::F32 : s.frag);
    auto a = b.param("a", ir::Type::pointer(frag.elem, true));
    auto bb = b.param("b", ir::Type::pointer(frag.elem, true));
    auto out = b.param("out", ir::Type::pointer(s.acc, false));
    auto acc = b.array(ir::Type::scalar(s.acc), 4,
                       b.constant(ir::Type::scalar(s.acc), ir::Literal{ir::Literal::Int, 0, 0, 0}, "const"));
    b.mma_sync(kind, acc, loads(b, a, 4), loads(b, bb, 2));
    for (uint32_t r = 0; r < 4; ++r) out[b.lane_id() * 4u + r] = acc[r];
  });
}

ir::Kernel ldmatrix_kernel(int num, bool trans) {
  return tensor_kernel("ldm" + std::to_string(num) + (trans ? "t" : ""), [&](ir::KernelBuilder& b) {
    auto out = b.param<uint32_t*>("out");
    auto tile = b.shared<half>(512);
    auto lane = b.lane_id();
    for (uint32_t k = 0; k < 16; ++k) tile[lane * 16u + k] = half(1.0f);
    b.barrier();
    auto r = b.ldmatrix(tile, lane * 16u, num, trans);
    for (int k = 0; k < num; ++k) out[lane * 4u + uint32_t(k)] = ir::cast<uint32_t>(ir::unpack_lo(r[k]));
  });
}

ir::Kernel cp_async_kernel(uint32_t bytes, ir::CacheHint hint, bool zfill) {
  return tensor_kernel("cpa" + std::to_string(bytes) + (hint == ir::CacheHint::Global ? "cg" : "ca") + (zfill ? "z" : ""),
                       [&](ir::KernelBuilder& b) {
                         auto src = b.param<const float*>("src");
                         auto out = b.param<float*>("out");
                         auto n = b.param<uint32_t>("n");
                         auto tile = b.shared<float>(128);
                         auto lane = b.lane_id();
                         const uint32_t per = bytes / 4;
                         ir::Value nb = b.constant<uint32_t>(0u);
                         if (zfill) nb = ir::select(lane < n, b.constant<uint32_t>(bytes), b.constant<uint32_t>(0u));
                         b.cp_async(tile, lane * per, src, lane * per, bytes, hint, zfill ? nb : ir::Value());
                         b.cp_async_commit_group();
                         b.cp_async_wait_group(1);
                         b.cp_async_wait_group(0);
                         ir::Value v = tile[lane * per];
                         out[lane] = v;
                       });
}

std::string ptx90(const ir::Kernel& k) { return codegen::emit_ptx(k, {"sm_90", 9, 0}); }

using L = std::vector<std::string>;
// The instruction lines (without tab and ';') that start with `prefix`.
L ptx_lines(const ir::Kernel& k, const std::string& prefix) {
  L out;
  std::string p = ptx90(k);
  size_t pos = 0;
  while (pos < p.size()) {
    size_t e = p.find('\n', pos);
    if (e == std::string::npos) e = p.size();
    std::string line = p.substr(pos, e - pos);
    pos = e + 1;
    if (line.size() < 2 || line[0] != '\t') continue;
    line = line.substr(1);
    if (line.back() == ';') line.pop_back();
    if (line.compare(0, prefix.size(), prefix) == 0) out.push_back(line);
  }
  return out;
}

void assembles(const ir::Kernel& k) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(k.name() << " for " << arch);
    std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
    jit::LinkResult r;
    try {
      r = test::link_ptx(ptx, arch, k.name());
    } catch (const ToolError& e) {
      FAIL(e.what() << "\n" << e.log() << "\n" << ptx);
    }
    CHECK(r.cubin.size() > 4);
  }
}

}  // namespace

TEST_CASE("tensor golden: mma.sync per shape, accumulators in place", "[codegen][golden][tensor]") {
  // D and C are the same registers: the accumulator array is updated in place.
  CHECK(ptx_lines(mma_kernel(ir::MmaKind::F16), "mma.") ==
        L{"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r17, %r23, %r29, %r35}, {%r5, %r11}, "
          "{%f1, %f2, %f3, %f4}"});
  CHECK(ptx_lines(mma_kernel(ir::MmaKind::BF16), "mma.") ==
        L{"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r17, %r23, %r29, %r35}, {%r5, %r11}, "
          "{%f1, %f2, %f3, %f4}"});
  // tf32 operands given as f32 values move to b32 registers first
  std::string tf32 = ptx90(mma_kernel(ir::MmaKind::TF32));
  CHECK(test::has_line(tf32, "mov.b32 %r30, %f7"));
  CHECK(ptx_lines(mma_kernel(ir::MmaKind::TF32), "mma.") ==
        L{"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, {%r30, %r31, %r32, %r33}, {%r34, %r35}, "
          "{%f1, %f2, %f3, %f4}"});
  CHECK(ptx_lines(mma_kernel(ir::MmaKind::S8), "mma.") ==
        L{"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1, %r2, %r3, %r4}, {%r22, %r28, %r34, %r40}, {%r10, %r16}, "
          "{%r1, %r2, %r3, %r4}"});
}

TEST_CASE("tensor golden: ldmatrix x1/x2/x4, with and without .trans", "[codegen][golden][tensor]") {
  CHECK(ptx_lines(ldmatrix_kernel(1, false), "ldmatrix") == L{"ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r85}, [%r84]"});
  CHECK(ptx_lines(ldmatrix_kernel(1, true), "ldmatrix") == L{"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%r85}, [%r84]"});
  CHECK(ptx_lines(ldmatrix_kernel(2, false), "ldmatrix") ==
        L{"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r85, %r86}, [%r84]"});
  CHECK(ptx_lines(ldmatrix_kernel(2, true), "ldmatrix") ==
        L{"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r85, %r86}, [%r84]"});
  CHECK(ptx_lines(ldmatrix_kernel(4, false), "ldmatrix") ==
        L{"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r85, %r86, %r87, %r88}, [%r84]"});
  CHECK(ptx_lines(ldmatrix_kernel(4, true), "ldmatrix") ==
        L{"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r85, %r86, %r87, %r88}, [%r84]"});
  // the row address is the shared-window address of tile[lane * 16]
  L addr = ptx_lines(ldmatrix_kernel(4, false), "mad.lo.u32 %r84, ");
  REQUIRE(addr.size() == 1);
  CHECK_THAT(addr[0], Catch::Matchers::EndsWith(", 2, %r0"));  // index * sizeof(f16) + the tile (%r0)
}

TEST_CASE("tensor golden: cp.async sizes, .ca/.cg, the L2 line prefetch, zero-fill, groups", "[codegen][golden][tensor]") {
  CHECK(ptx_lines(cp_async_kernel(4, ir::CacheHint::Default, false), "cp.async") ==
        L{"cp.async.ca.shared.global.L2::128B [%r8], [%rd5], 4", "cp.async.commit_group", "cp.async.wait_group 1",
          "cp.async.wait_group 0"});
  CHECK(ptx_lines(cp_async_kernel(8, ir::CacheHint::Default, true), "cp.async.ca") ==
        L{"cp.async.ca.shared.global.L2::128B [%r11], [%rd5], 8, %r6"});
  CHECK(ptx_lines(cp_async_kernel(16, ir::CacheHint::Global, true), "cp.async.cg") ==
        L{"cp.async.cg.shared.global.L2::128B [%r11], [%rd5], 16, %r6"});
}

TEST_CASE("tensor: every form assembles for sm_80 and sm_90", "[codegen][tensor][nvjitlink]") {
  for (auto k : {ir::MmaKind::F16, ir::MmaKind::BF16, ir::MmaKind::TF32, ir::MmaKind::S8}) assembles(mma_kernel(k));
  for (int n : {1, 2, 4})
    for (bool t : {false, true}) assembles(ldmatrix_kernel(n, t));
  assembles(cp_async_kernel(4, ir::CacheHint::Default, false));
  assembles(cp_async_kernel(8, ir::CacheHint::Default, true));
  assembles(cp_async_kernel(16, ir::CacheHint::Global, true));
}
