// Internal to the W4A16 kernels (qmatmul_int4.cpp: the mma and streaming paths and the
// family; qmatmul_int4_wgmma.cpp: the Hopper path): the config that names a kernel, the
// magic-number dequantisation they share, and the Hopper path's build and launch.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/ops/qmatmul.h"

namespace kaio::ops::detail {

struct Int4Config {
  uint32_t bm = 0;  // 0: the mma path (or wgmma with bx); else the streaming path for m <= bm
  ir::Scalar dtype = ir::Scalar::F16;
  bool zeros = false, bias = false;
  uint32_t parts = 1;
  uint32_t bx = 0;  // the Hopper path: activation rows per tile (128 or 256); 0: not it
  // The streaming path at m <= 16 with its registers capped at 64, so that two 512-thread
  // blocks share an SM: taken where the grid has more blocks than SMs (m <= 8 always has it).
  bool two_per_sm = false;
  // The streaming path on a grid of one block an SM or fewer: a deeper ring (8 stages at
  // m <= 8, 5 at m = 16; 150-180 KB), taken where the device's shared memory allows it.
  bool deep = false;
  // The streaming path with the deep ring on a grid of at most one block an SM where there
  // are more 32-column strips than that: each block takes strips blockIdx.x, + gridDim.x, ...
  // and its threads' rings run on from one strip into the next (no ramp between strips); the
  // warps' sums of a strip are added at its end (one block barrier a strip).
  bool persistent = false;
  auto fields() const { return std::tie(bm, dtype, zeros, bias, parts, bx, two_per_sm, deep, persistent); }
  std::string str() const {
    const std::string path = bx ? "wgmma_" + std::to_string(bx) + "x128"
                             : bm ? "stream_m" + std::to_string(bm)
                                  : std::string("mma_64x128");
    return "matmul_int4_" + path + "_" + ir::scalar_name(dtype) + (zeros ? "_zeros" : "") + (bias ? "_bias" : "") +
           (parts > 1 ? "_qkv" : "") + (two_per_sm ? "_2sm" : "") + (deep ? "_deep" : "") + (persistent ? "_persist" : "");
  }
};

// (magic + zero) for both halves of a pair, as u32 bits: zero 0..15 sits in the
// mantissa's low bits (magic 1024 for f16, 128 for bf16: a unit ulp).
inline ir::Value int4_zero_magic(ir::Value z_u32, ir::Scalar dtype) {
  const uint32_t magic = dtype == ir::Scalar::F16 ? 0x6400u : 0x4300u;
  return (z_u32 | magic) * 0x00010001u;
}

// Pair j of a word already shifted right by 4j (elements 2j and 2j + 1 in its nibbles 0
// and 4): (v - zero) * scale, rounded once. z2: the pair (magic + zero); s2: {s, s}.
// magic_reg: the magic pair in a register ptxas cannot fold to a constant (then the and
// and the or are one LOP3), or invalid for the immediate (an and and an or). s2 invalid:
// v - zero alone (exact), for a kernel that applies the scale to its f32 sums instead.
inline ir::Value int4_pair(ir::Value shifted, ir::Value z2, ir::Value s2, ir::Scalar pair, ir::Value magic_reg = {}) {
  const uint32_t magic = pair == ir::Scalar::F16x2 ? 0x64006400u : 0x43004300u;
  ir::Value bits = magic_reg.valid() ? (shifted & 0x000f000fu) | magic_reg : (shifted & 0x000f000fu) | magic;
  ir::Value d = ir::bitcast(bits, pair) - z2;
  return s2.valid() ? d * s2 : d;
}

// f16 only: the pair of nibbles 1 and 5 of `shifted` (pair j + 1 of a word shifted right by
// 4j) without a shift of its own. Masked with 0x00f000f0 under the magic, each half is
// 1024 + 16 v (exact: f16's ulp at 1024 is 1); one fma by sixteenth ({1/16, 1/16}) and zh
// (the pair -(64 + zero), int4_zero_high_f16) gives 64 + v - 64 - zero = v - zero exactly,
// and the scale rounds once: the same bits as int4_pair. (bf16's 7-bit mantissa cannot hold
// 16 v under its magic.)
inline ir::Value int4_pair_high_f16(ir::Value shifted, ir::Value zh, ir::Value s2, ir::Value sixteenth, ir::Value magic_reg) {
  ir::Value bits = (shifted & 0x00f000f0u) | magic_reg;
  ir::Value d = ir::fma(ir::bitcast(bits, ir::Scalar::F16x2), sixteenth, zh);
  return s2.valid() ? d * s2 : d;
}
// -(64 + zero) for both halves, as u32 bits: f16 64 is 0x5400 with an ulp of 1/16, so the
// zero 0..15 goes in at bit 4.
inline ir::Value int4_zero_high_f16(ir::Value z_u32) { return ((z_u32 << 4u) | 0xd400u) * 0x00010001u; }

// The streaming path (m <= 16): its activation rows per block (1, 4, 8 or 16) for a call of m
// rows, or 0 where the call goes to another path (m > 16, or offsets past 32 bits).
uint32_t int4_stream_rows(uint32_t m, uint32_t k, uint32_t n_max);
// m = 16 on a grid of more blocks than SMs: registers capped at 64, two blocks an SM.
bool int4_stream_two_per_sm(uint32_t bm, uint32_t n_max, uint32_t parts);
// The deep ring (Int4Config::deep): the grid is one block an SM or fewer and the ring fits
// the device's shared memory per block.
bool int4_stream_deep(uint32_t bm, uint32_t n_max, uint32_t parts);
// Tests: -1 the choice above, 0 never the deep ring, 1 always where it fits. Per thread.
void set_int4_stream_deep(int deep);
// The persistent form (Int4Config::persistent): its grid's blocks for a call, or 0 where the
// call does not take it. It can serve one part, k of at least 16 steps of 32, the ring and the
// strips' sums in the device's shared memory. By default (-1) it takes the m = 16 row count
// where the strips outnumber the SMs (one block an SM); set_int4_stream_persistent(blocks),
// per thread: 0 never, blocks > 0 wherever it can serve, with at most `blocks` blocks (and at
// most one an SM).
uint32_t int4_stream_persistent(uint32_t bm, uint32_t k, uint32_t n_max, uint32_t parts);
void set_int4_stream_persistent(int blocks);
// The calls whose products are exact before the f32 sums (the streaming path where it applies
// the scales to its sums: every one but the 64-register m = 16 form); the others round each
// weight to 16 bits first (dequantize_int4's round argument).
bool int4_exact_products(uint32_t m, uint32_t k, uint32_t n_max, uint32_t parts);

// The Hopper path (sm_90a, one launch per part): true where it takes a call of m rows;
// maps_ok: no zero points, or every part's n a multiple of 16 (their tensor map's rows are
// n bytes).
bool int4_wgmma_takes(uint32_t m, bool maps_ok);
// Activation rows per tile (128 or 256) for an m x n product on `sms` multiprocessors.
uint32_t int4_wgmma_rows(uint32_t m, uint32_t n, uint32_t sms);
ir::Kernel build_int4_wgmma(const Int4Config& c);
void launch_int4_wgmma(const jit::CompiledKernel& k, const Int4Config& c, uint64_t x, const Int4Weights& w, uint64_t y,
                       uint32_t m, uint64_t bias, const jit::Stream* stream);

// Tests and benches: 1 sends every W4A16 call with m > 16 to the mma path (0: the default
// choice); bx > 1 forces the Hopper path's tile rows. Per thread.
void set_int4_override(uint32_t force_mma, uint32_t bx);

}  // namespace kaio::ops::detail
