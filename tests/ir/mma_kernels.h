// Tensor-core test kernels shared by the IR, codegen and [gpu] tests: fragments loaded
// through the layout descriptors, a one-tile warp MMA fed by cp.async and ldmatrix, and a
// 64-register accumulator tile; one 8-bit wgmma (FP8 or integer) between descriptor
// parameters; plus a SASS dump of a cubin (cuobjdump).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../support.h"

namespace kaio::test {

// The lane's fragment of operand P (row-major, leading dimension ld, element offset `base`),
// packed as mma_sync wants it.
inline std::vector<ir::Value> mma_fragment(ir::KernelBuilder& b, const ir::MmaShape& s, const ir::FragLayout& f,
                                           ir::Value P, ir::Value ld, ir::Value base) {
  ir::Value lane = b.lane_id();
  std::vector<ir::Value> regs;
  for (int r = 0; r < f.regs; ++r) {
    std::vector<ir::Value> x;
    for (int e = 0; e < f.per_reg; ++e) {
      ir::Value i = base + ir::frag_row(f, lane, r, e) * ld + ir::frag_col(f, lane, r, e);
      x.push_back(P[i]);
    }
    if (s.kind == ir::MmaKind::F16 || s.kind == ir::MmaKind::BF16) {
      regs.push_back(ir::pack2(x[0], x[1]));
    } else if (s.kind == ir::MmaKind::TF32) {
      regs.push_back(x[0]);
    } else {  // four s8 in a b32, the first in the low byte
      ir::Value w = ir::cast<uint32_t>(x[0]) & 0xffu;
      for (int e = 1; e < 4; ++e) w = w | ((ir::cast<uint32_t>(x[e]) & 0xffu) << uint32_t(8 * e));
      regs.push_back(w);
    }
  }
  return regs;
}

// One warp: D = A (M x K) * B (K x N) + C for one shape, fragments loaded straight from
// global memory through the layout descriptors, C into the accumulators, D stored from them.
inline ir::Kernel direct_mma(ir::MmaKind kind) {
  const ir::MmaShape& s = ir::mma_shape(kind);
  ir::KernelBuilder b("direct_mma_" + std::to_string(static_cast<int>(kind)));
  auto A = b.param("a", ir::Type::pointer(s.in, true));
  auto B = b.param("b", ir::Type::pointer(s.in, true));
  auto C = b.param("c", ir::Type::pointer(s.acc, true));
  auto D = b.param("d", ir::Type::pointer(s.acc, false));
  ir::Value lane = b.lane_id();
  ir::Value zero = b.constant<uint32_t>(0u);
  ir::Value lda = b.constant<uint32_t>(uint32_t(s.k)), ldb = b.constant<uint32_t>(uint32_t(s.n));
  auto acc = b.array(ir::Type::scalar(s.acc), 4,
                     b.constant(ir::Type::scalar(s.acc), ir::Literal{ir::Literal::Int, 0, 0, 0}, "c"));
  for (int r = 0; r < 4; ++r) acc[r] = C[ir::frag_row(s.c, lane, r) * uint32_t(s.n) + ir::frag_col(s.c, lane, r)];
  b.mma_sync(kind, acc, mma_fragment(b, s, s.a, A, lda, zero), mma_fragment(b, s, s.b, B, ldb, zero));
  for (int r = 0; r < 4; ++r) D[ir::frag_row(s.c, lane, r) * uint32_t(s.n) + ir::frag_col(s.c, lane, r)] = acc[r];
  return b.build();
}

// One warp, one m16n8k16 tile: D = A (16 x 16) * B (16 x 8) + C over the first k_valid
// columns of A / rows of B. cp.async copies A (16-byte chunks) into a 128-byte-swizzled
// shared tile and B into a padded one, zero-filling past k_valid (src_bytes, down to 6-byte
// partial chunks); ldmatrix.x4 reads the A fragment, ldmatrix.x2.trans the B fragment.
inline ir::Kernel warp_mma_tile(ir::MmaKind kind) {
  const ir::Scalar in = kind == ir::MmaKind::BF16 ? ir::Scalar::BF16 : ir::Scalar::F16;
  ir::KernelBuilder b(kind == ir::MmaKind::BF16 ? "warp_mma_tile_bf16" : "warp_mma_tile_f16");
  auto A = b.param("a", ir::Type::pointer(in, true));
  auto B = b.param("b", ir::Type::pointer(in, true));
  auto C = b.param("c", ir::Type::pointer(ir::Scalar::F32, true));
  auto D = b.param("d", ir::Type::pointer(ir::Scalar::F32, false));
  auto k_valid = b.param<uint32_t>("k_valid");
  const ir::SmemLayout la = ir::SmemLayout::swizzled(16, in);  // 32-byte rows, 128-byte swizzle
  const ir::SmemLayout lb = ir::SmemLayout::padded(8, 8);      // 16-byte rows, padded to 32
  auto sa = b.shared(in, la.elements(16), 128);
  auto sb = b.shared(in, lb.elements(16), 128);
  ir::Value lane = b.lane_id();
  // A: lane l copies row l / 2, columns 8 (l % 2) .. + 7
  ir::Value row = lane / 2u, col0 = (lane % 2u) * 8u;
  ir::Value a_bytes = ir::select(k_valid > col0, ir::min((k_valid - col0) * 2u, 16u), b.constant<uint32_t>(0u));
  b.cp_async(sa, la.index(row, col0), A, row * 16u + col0, 16, ir::CacheHint::Global, a_bytes);
  // B: lanes 0..15 copy row l (8 elements)
  b.if_(lane < 16u, [&] {
    ir::Value b_bytes = ir::select(lane < k_valid, b.constant<uint32_t>(16u), b.constant<uint32_t>(0u));
    b.cp_async(sb, lb.index(lane, 0u), B, lane * 8u, 16, ir::CacheHint::Default, b_bytes);
  });
  b.cp_async_commit_group();
  b.cp_async_wait_group(0);
  b.barrier();  // the tiles were written by other lanes
  std::vector<ir::Value> fa = b.ldmatrix(sa, la.index(lane % 16u, (lane / 16u) * 8u), 4);
  std::vector<ir::Value> fb = b.ldmatrix(sb, lb.index(lane % 16u, 0u), 2, true);
  const ir::MmaShape& s = ir::mma_shape(kind);
  auto acc = b.array<float>(4, 0.0f);
  for (int r = 0; r < 4; ++r) acc[r] = C[ir::frag_row(s.c, lane, r) * 8u + ir::frag_col(s.c, lane, r)];
  b.mma_sync(kind, acc, fa, fb);
  for (int r = 0; r < 4; ++r) D[ir::frag_row(s.c, lane, r) * 8u + ir::frag_col(s.c, lane, r)] = acc[r];
  return b.build();
}

// One warp, a 64 x 32 f32 tile in a 64-register accumulator (4 x 4 m16n8 tiles, 4
// registers each), over K in steps of 16 (a run-time loop); the tiles are unrolled by C++
// loops with compile-time indices, so the accumulator stays in registers.
// D (64 x 32) = A (64 x K) * B (K x 32), f16 in, f32 out.
inline ir::Kernel accumulator_tile_64() {
  const ir::MmaShape& s = ir::mma_shape(ir::MmaKind::F16);
  ir::KernelBuilder b("mma_acc64");
  auto A = b.param<const half*>("a");
  auto B = b.param<const half*>("b");
  auto D = b.param<float*>("d");
  auto K = b.param<uint32_t>("k");
  auto acc = b.array<float>(64, 0.0f);
  ir::Value lane = b.lane_id();
  ir::Value ldb = b.constant<uint32_t>(32u);
  b.for_(0u, K, 16u, [&](ir::Value k0) {
    std::vector<std::vector<ir::Value>> fa, fb;
    for (uint32_t mi = 0; mi < 4; ++mi) fa.push_back(mma_fragment(b, s, s.a, A, K, K * (mi * 16u) + k0));
    for (uint32_t ni = 0; ni < 4; ++ni) fb.push_back(mma_fragment(b, s, s.b, B, ldb, k0 * 32u + ni * 8u));
    for (uint32_t mi = 0; mi < 4; ++mi)
      for (uint32_t ni = 0; ni < 4; ++ni) b.mma_sync(ir::MmaKind::F16, acc.slice(4 * (mi * 4 + ni), 4), fa[mi], fb[ni]);
  });
  for (uint32_t mi = 0; mi < 4; ++mi)
    for (uint32_t ni = 0; ni < 4; ++ni)
      for (int r = 0; r < 4; ++r)
        D[(mi * 16u + ir::frag_row(s.c, lane, r)) * 32u + ni * 8u + ir::frag_col(s.c, lane, r)] = acc[4 * (mi * 4 + ni) + r];
  return b.build();
}

// cuobjdump: $KAIO_CUOBJDUMP, else on PATH, else in /usr/local/cuda/bin; empty if none.
inline std::string cuobjdump_path() {
  if (const char* e = std::getenv("KAIO_CUOBJDUMP")) return e;
  if (run_command("command -v cuobjdump 2>/dev/null").status == 0) return "cuobjdump";
  if (std::filesystem::exists("/usr/local/cuda/bin/cuobjdump")) return "/usr/local/cuda/bin/cuobjdump";
  return {};
}

// The SASS of a cubin ("" when cuobjdump is not installed).
inline std::string sass_of(const std::string& cubin) {
  std::string tool = cuobjdump_path();
  if (tool.empty()) return {};
  TempDir dir;
  std::string path = (dir.path() / "k.cubin").string();
  std::ofstream(path, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  CommandResult r = run_command(tool + " --dump-sass " + path + " 2>&1");
  return r.status == 0 ? r.out : "cuobjdump failed: " + r.out;
}

// ptxas: $KAIO_PTXAS, else on PATH, else in /usr/local/cuda/bin; empty if none.
inline std::string ptxas_path() {
  if (const char* e = std::getenv("KAIO_PTXAS")) return e;
  if (run_command("command -v ptxas 2>/dev/null").status == 0) return "ptxas";
  if (std::filesystem::exists("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  return {};
}

// A kernel that moves registers (setmaxnreg) compiled as the device backend has the driver
// compile it: as a whole program (ptxas without -c). `ran` is false when ptxas is absent.
struct WholeProgram {
  bool ran = false;
  std::string log, cubin;
};
inline WholeProgram whole_program_compile(const std::string& ptx, const std::string& arch) {
  WholeProgram w;
  const std::string tool = ptxas_path();
  if (tool.empty()) return w;
  TempDir dir;
  const std::string in = (dir.path() / "k.ptx").string(), out = (dir.path() / "k.cubin").string();
  std::ofstream(in, std::ios::binary) << ptx;
  CommandResult r = run_command(tool + " -arch=" + arch + " -v " + in + " -o " + out + " 2>&1");
  w.ran = true;
  w.log = r.out;
  if (r.status != 0) return w;
  std::ifstream f(out, std::ios::binary);
  w.cubin.assign(std::istreambuf_iterator<char>(f), {});
  return w;
}

// What runs on the device for kernel k: nvJitLink's result `r` as it is, or, for a kernel that
// moves registers (setmaxnreg), its whole-program compile (as the driver makes it) in r's place,
// checked to honour setmaxnreg. False when that cannot be checked here (no ptxas: a warning).
inline bool as_loaded(const ir::Kernel& k, const std::string& ptx, jit::LinkResult& r) {
  if (!k.reallocates_registers()) return true;
  const WholeProgram w = whole_program_compile(ptx, "sm_90a");
  if (!w.ran) {
    WARN("ptxas not found (set KAIO_PTXAS): " << k.name() << "'s whole-program compile is not checked");
    return false;
  }
  INFO(w.log);
  REQUIRE(!w.cubin.empty());
  CHECK(w.log.find("C7504") == std::string::npos);  // "'setmaxnreg' ignored"
  r.info_log = w.log;
  r.cubin = w.cubin;
  return true;
}

// One m64nNk32 wgmma of 8-bit operands (e4m3 / e5m2 into f32, s8 / u8 into s32; mixed
// formats with ta != tb) between descriptor parameters da and db; each thread writes its
// N/2 accumulators to out (f32 or s32).
inline ir::Kernel wgmma_8bit_kernel(ir::Scalar ta, ir::Scalar tb, uint32_t n) {
  const bool int8 = ta == ir::Scalar::S8 || ta == ir::Scalar::U8;
  ir::KernelBuilder b(std::string("wg_") + ir::scalar_name(ta) + "_" + ir::scalar_name(tb) + "_n" + std::to_string(n));
  auto da = b.param<uint64_t>("da");
  auto db = b.param<uint64_t>("db");
  auto out = b.param("out", ir::Type::pointer(int8 ? ir::Scalar::S32 : ir::Scalar::F32, false));
  auto acc = int8 ? b.array<int32_t>(n / 2, 0) : b.array<float>(n / 2, 0.0f);
  b.wgmma_fence();
  if (ta == tb) b.wgmma(acc, da, db, ta);
  else b.wgmma(acc, da, db, ta, tb);
  b.wgmma_commit_group();
  b.wgmma_wait_group(0);
  for (uint32_t k = 0; k < n / 2; ++k) out[b.thread_idx_x() * (n / 2) + k] = acc[k];
  return b.build();
}

}  // namespace kaio::test
