// The GGUF matmul's tensor-core form (see quant_matvec.h) for several activation rows, on
// the idea of llama.cpp's MMQ: the integer products of a block's 16 weight rows with its 8
// or 16 activation rows go to mma.sync m16n8k32 s8 -> s32, one mma per 32 elements (two
// for q6_K, whose scales cover 16), and each s32 result is scaled into f32 accumulators by
// its weight and activation scales. The dp4a form's work per weight byte grows with m; here
// one mma does 16 x 8 x 32 of it, so the kernel stays bound by the weight bytes, each of
// which is loaded once, straight into the registers of the A fragments.
//
// Fragments. m16n8k32 takes a lane's A words from weight rows g = lane / 4 and g + 8 and
// its B words from activation row g, at mma k-words t = lane % 4 and t + 4. A dot product
// may take its k in any order if A and B take the same one, so mma k-word t holds word 2t
// of the 32 elements and k-word t + 4 word 2t + 1: a lane's two words of a row are 8
// neighbouring bytes (one 8-byte load where the format's alignment allows), for weights
// and activations alike. The C tile: weight rows g, g + 8 x activation rows 2t, 2t + 1
// (kernel::AccTile's layout), which is where the lane's own weight scales already are.
//
// Weights as A: q8_0 s8 as stored; q4_K nibbles (0..15, as s8), their min term taken from
// the activations' per-32 d * sum q that the pre-pass stores beside the scales; q6_K q - 32
// (s8), a mma per 16 with the other 16's A words zero (lanes t < 2 hold the first 16).
//
// Work split. A block: 8 warps, 16 weight rows (blockIdx.x), 8 or 16 activation rows
// (blockIdx.y; more rows take more y blocks, each reading the weights again). A row's k is
// cut into tasks of 128 elements (half a K-quant super-block, four q8_0 blocks) that the
// warps take in turn, and a lane loads its next task while it computes the current one.
// At the end the 8 warps' partial tiles are added in shared memory, in warp order.
#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/device.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/quant/blocks.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Type;
using ir::Value;
using quant::GgmlType;

constexpr uint32_t kQ = 32;  // elements per chunk: one mma's k, one activation scale

const char* op_name = "quant_matmul";

bool is(uint32_t f, GgmlType t) { return f == uint32_t(t); }
// The block's shape by config: 16 weight rows (one m16 tile per warp), 8 warps, tasks of 4
// chunks of 32 elements (half a K-quant super-block, four q8_0 blocks; a whole q4_K
// super-block holds too many registers at 16 activation rows: it spills); or 32 weight rows
// (two m16 tiles per warp sharing each B fragment and activation scale: half the activation
// loads per weight byte), 16 warps (one block per SM, the same 16 warps), tasks of 2 chunks
// (two q8_0 blocks, a quarter q4_K super-block: the same weight bytes per task as at 16
// rows), or 4 for q4_K at 8 activation rows (fits the registers; the header decoded once
// per 128 elements).
uint32_t mtiles(const QuantMatmulMmaConfig& c) { return c.rows / 16; }
uint32_t warps_of(const QuantMatmulMmaConfig& c) { return c.rows == 32 ? 16 : 8; }
uint32_t chunks_of(const QuantMatmulMmaConfig& c) { return c.rows == 32 && !(c.nt == 1 && is(c.format, GgmlType::Q4_K)) ? 2 : 4; }
size_t task_count(const QuantMatmulMmaConfig& c, size_t k) { return (k / kQ + chunks_of(c) - 1) / chunks_of(c); }

// The weights are one allocation read through three pointers (16-bit and 32-bit words, f16
// scales); the activations are the pre-pass's workspace: s8 values four to a word, the
// per-32 scales and (q4_K) the per-32 sums of the s8 values times the scales (f32).
struct MmaSignature {
  kernel::Ptr w16{"w16", Scalar::U16, true};
  kernel::Ptr w32{"w32", Scalar::U32, true};
  kernel::Ptr wh{"wh", Scalar::F16, true};
  kernel::Ptr aq{"aq", Scalar::U32, true};
  kernel::Ptr ad{"ad", Scalar::F32, true};
  kernel::Opt<kernel::Ptr> as{{"as", Scalar::F32, true}};  // q4_K: d * sum q per 32
  kernel::Ptr y{"y"};
  kernel::Param<uint32_t> m{"m"}, n{"n"}, units{"units"}, tasks{"tasks"};  // units: k / 32
  kernel::Param<uint64_t> row_bytes{"row_bytes"};
  explicit MmaSignature(const QuantMatmulMmaConfig& c) {
    y.elem = c.out;
    as.on = is(c.format, GgmlType::Q4_K);
  }
  auto fields() { return std::tie(w16, w32, wh, aq, ad, as, y, m, n, units, tasks, row_bytes); }
};

Value s32(Value v) { return ir::cast(v, Type::scalar(Scalar::S32)); }
Value u32(Value v) { return ir::cast(v, Type::scalar(Scalar::U32)); }
Value f32(Value v) { return ir::cast(v, Type::scalar(Scalar::F32)); }
Value u64(Value v) { return ir::cast<uint64_t>(v); }

// One chunk of a lane's weight rows (2 per m16 tile), decoded: the A fragments and the row scales.
struct Chunk {
  std::vector<Value> a[2];  // per m16 tile: row g word 2t, row g + 8 word 2t, row g word 2t + 1, row g + 8 word 2t + 1
  Value unit;               // the chunk's 32 elements in the row (clamped into it)
  Value f0[4], f1[4];       // per row (h = 2 tile + g / g + 8): q8_0 d (0 past the row); q4_K d * sc, dmin * min; q6_K d
  Value sc[4][2];           // q6_K, per row: the s8 scales of the two 16s (s32)
};

// The weight side: a lane's rows g and g + 8 of each of the block's m16 tiles. load()
// issues all of a task's loads (the raw words, row by row) before any is used, so that they
// are in flight together and the next task's can be issued ahead of the current one's
// arithmetic; decode() works on registers only.
//
// q8_0 and q6_K blocks (34 and 210 bytes) are only 2-byte aligned: a range of 8 bytes
// that starts at 2 mod 4 is two aligned 32-bit words and the 16-bit word after them, put
// together with funnel shifts (else the two words themselves, the 16-bit load unused).
// Rows start at even bytes, so whether a block starts at 2 mod 4 follows from its row's
// start and its index (34 / 2 and 210 / 2 are odd): no address goes through the registers.
//
// Tasks of 2 chunks (32-row blocks, q4_K at 16 activation rows): task 4 sb + 2 hh + qq is
// sub-blocks 4 hh + 2 qq and 4 hh + 2 qq + 1 of super-block sb (the header and one 32-byte
// group of nibbles, low and high).
class Weights {
 public:
  Weights(ir::KernelBuilder& b, const QuantMatmulMmaConfig& c, MmaSignature& s, Value row_g, Value t)
      : b_(b), c_(c), s_(s), t_(t), rows_(2 * mtiles(c)), kc_(chunks_of(c)) {
    for (uint32_t h = 0; h < rows_; ++h) {
      const Value row = ir::min(row_g + (16u * (h / 2) + 8u * (h % 2)), s.n.ir - 1u);  // rows past n load the last one
      row0_[h] = u64(row) * s.row_bytes.ir;
      odd_[h] = u32((row0_[h] >> uint64_t(1)) & uint64_t(1));
    }
  }

  std::vector<Value> load(Value task) const {
    std::vector<Value> w;
    const Value t8 = u64(t_ * 8u);
    for (uint32_t h = 0; h < rows_; ++h) {
      if (is(c_.format, GgmlType::Q8_0) && kc_ == 2) {
        // Blocks u0, u0 + 1 (u0 = first(task), see there): every address is one of four
        // per row and task plus a constant. Block u0 + 1's range starts 34 bytes on, its
        // misalignment the other way: its words are at W0 + mis0 + 8. The 16-bit word is
        // the range's last two whichever way (unused where aligned): byte offset 6.
        const Value blk = row0_[h] + u64(first(task)) * uint64_t(34);
        const Value hw = blk >> uint64_t(1), w0 = (blk + uint64_t(2) + t8) >> uint64_t(2);
        const Value w1 = w0 + u64(u32((blk >> uint64_t(1)) & uint64_t(1)) ^ 1u) + uint64_t(8);
        const Value v16 = hw + u64(t_ * 4u) + uint64_t(4);
        for (uint32_t ch = 0; ch < 2; ++ch) {
          w.push_back(s_.wh.ir[hw + uint64_t(17 * ch)]);  // d
          w.push_back(s_.w32.ir[ch == 0 ? w0 : w1]);
          w.push_back(s_.w32.ir[(ch == 0 ? w0 : w1) + uint64_t(1)]);
          w.push_back(s_.w16.ir[v16 + uint64_t(17 * ch)]);
        }
      } else if (is(c_.format, GgmlType::Q8_0)) {
        for (uint32_t ch = 0; ch < kc_; ++ch) {
          const Value u = ir::min(task * kc_ + ch, s_.units.ir - 1u);
          const Value blk = row0_[h] + u64(u) * uint64_t(34);
          w.push_back(s_.wh.ir[blk >> uint64_t(1)]);  // d
          load8(w, blk + uint64_t(2) + t8, ((odd_[h] + u + 1u) & 1u) != 0u);
        }
      } else if (is(c_.format, GgmlType::Q4_K) && kc_ == 4) {
        // Half hh of a super-block: 144 bytes and rows start 16-byte aligned, so the header
        // (d, dmin, 12 scale bytes) is one 16-byte load and each of the half's two 32-byte
        // groups of nibbles one 8-byte load.
        const Value b4 = (row0_[h] + u64(task >> 1u) * uint64_t(144)) >> uint64_t(2);  // in words
        const Value qs = b4 + u64((task & 1u) * 16u + t_ * 2u);
        for (Value v : ir::load_vec(s_.w32.ir, b4, 4)) w.push_back(v);
        for (uint64_t i = 0; i < 2; ++i)
          for (Value v : ir::load_vec(s_.w32.ir, qs + uint64_t(4 + 8 * i), 2)) w.push_back(v);
      } else if (is(c_.format, GgmlType::Q4_K)) {
        // A quarter: the header and group task % 4 of the super-block's four.
        const Value b4 = (row0_[h] + u64(task >> 2u) * uint64_t(144)) >> uint64_t(2);  // in words
        for (Value v : ir::load_vec(s_.w32.ir, b4, 4)) w.push_back(v);
        for (Value v : ir::load_vec(s_.w32.ir, b4 + u64((task & 3u) * 8u + t_ * 2u) + uint64_t(4), 2)) w.push_back(v);
      } else {
        // q6_K half hh of super-block sb: ql bytes 64 hh .. + 63 (two 32-byte ranges), qh
        // bytes 128 + 32 hh .., the half's 8 scale bytes, d.
        // Every range starts at base + a multiple of 4, so its words are base / 4 (rounded
        // down) plus a quarter of that, and its last two bytes base / 2 plus half of it
        // plus 3: three 32-bit bases, three 16-bit ones and d's, plus constants.
        const Value sb = task >> 1u, hh = task & 1u;
        const Value base = row0_[h] + u64(sb) * uint64_t(210);
        const Value b4 = base >> uint64_t(2), b2 = base >> uint64_t(1);
        const Value ql = u64(hh * 16u + t_ * 2u), qh = u64(hh * 8u + t_ * 2u), sc = u64(hh * 2u);
        load8_at(w, b4 + ql, b2 + ql * uint64_t(2) + uint64_t(3));                 // ql, 64 hh
        load8_at(w, b4 + ql + uint64_t(8), b2 + ql * uint64_t(2) + uint64_t(19));  // + 32
        load8_at(w, b4 + qh + uint64_t(32), b2 + qh * uint64_t(2) + uint64_t(67)); // qh, 128 + 32 hh
        load8_at(w, b4 + sc + uint64_t(48), b2 + sc * uint64_t(2) + uint64_t(99)); // scales, 192 + 8 hh
        w.push_back(s_.wh.ir[b2 + uint64_t(104)]);                                 // d, 208
      }
    }
    return w;
  }

  std::vector<Chunk> decode(const std::vector<Value>& w, Value task) const {
    const size_t per_row = w.size() / rows_;
    std::vector<Chunk> out(kc_);
    for (uint32_t h = 0; h < rows_; ++h) {
      const Value* r = w.data() + h * per_row;
      std::vector<Value> words[4];  // each chunk's two words of this row
      if (is(c_.format, GgmlType::Q8_0) && kc_ == 2) {
        // Block u0 + ch counts where the previous task has not counted it.
        const Value u0 = first(task);
        const Value mis0 = ((odd_[h] + u0 + 1u) & 1u) != 0u;
        for (uint32_t ch = 0; ch < 2; ++ch) {
          words[ch] = join8(r + 4 * ch + 1, ch == 0 ? mis0 : !mis0);
          out[ch].unit = u0 + ch;
          out[ch].f0[h] = ir::select(u0 + ch >= task * 2u, f32(r[4 * ch]), b_.constant<float>(0.0f));
        }
      } else if (is(c_.format, GgmlType::Q8_0)) {
        for (uint32_t ch = 0; ch < kc_; ++ch) {
          // A chunk past the row's end repeats its last block (as load() did) and counts 0.
          const Value u = task * kc_ + ch, uc = ir::min(u, s_.units.ir - 1u);
          words[ch] = join8(r + 4 * ch + 1, ((odd_[h] + uc + 1u) & 1u) != 0u);
          out[ch].unit = uc;
          out[ch].f0[h] = ir::select(u < s_.units.ir, f32(r[4 * ch]), b_.constant<float>(0.0f));
        }
      } else if (is(c_.format, GgmlType::Q4_K)) {
        q4_k(r, task, h, out, words);
      } else {
        q6_k(r, task, h, out, words);
      }
      for (size_t ch = 0; ch < out.size(); ++ch) {
        std::vector<Value>& a = out[ch].a[h / 2];
        a.resize(4);
        a[h % 2] = words[ch][0];
        a[2 + h % 2] = words[ch][1];
      }
    }
    return out;
  }

 private:
  // 8 bytes from 32-bit word a (rounded down) and 16-bit word h (the last two bytes).
  void load8_at(std::vector<Value>& w, Value a, Value h) const {
    w.push_back(s_.w32.ir[a]);
    w.push_back(s_.w32.ir[a + uint64_t(1)]);
    w.push_back(s_.w16.ir[h]);
  }
  // 8 bytes from byte `at` (even): two 32-bit loads and a 16-bit one (see the class comment).
  void load8(std::vector<Value>& w, Value at, Value mis) const {
    const Value a = at >> uint64_t(2);
    w.push_back(s_.w32.ir[a]);
    w.push_back(s_.w32.ir[a + uint64_t(1)]);
    // Misaligned: the 16-bit word at 4a + 8, the range's last two bytes. Else one inside the range.
    w.push_back(s_.w16.ir[a * uint64_t(2) + uint64_t(4) - ir::select(mis, b_.constant<uint64_t>(0), b_.constant<uint64_t>(1))]);
  }
  std::vector<Value> join8(const Value* r, Value mis) const {
    const Value shift = ir::select(mis, b_.constant<uint64_t>(16), b_.constant<uint64_t>(0));
    const Value next[2] = {r[1], u32(r[2])};
    std::vector<Value> out;
    for (uint32_t k = 0; k < 2; ++k)
      out.push_back(u32(((u64(next[k]) << uint64_t(32)) | u64(r[k])) >> shift));
    return out;
  }

  // q4_K: d, dmin, 12 bytes of 6-bit scales and mins (quant/blocks.h: q4k_scale_min), then
  // 4 groups of 32 bytes whose low nibbles are sub-block 2i and high nibbles 2i + 1. Half hh
  // of the super-block is sub-blocks 4 hh + c (c = 0..3), groups 2 hh and 2 hh + 1.
  void q4_k(const Value* r, Value task, uint32_t h, std::vector<Chunk>& out, std::vector<Value>* words) const {
    // Sub-blocks 0-3 are the low 6 bits of scale bytes 0-3 (scales) and 4-7 (mins); 4-7
    // take their low 4 bits from bytes 8-11 and their top 2 from the top bits of 0-7.
    const Value w1 = r[1], w2 = r[2], w3 = r[3], upper = (kc_ == 4 ? task & 1u : task & 2u) != 0u;
    Value scw = ir::select(upper, (w3 & 0x0F0F0F0Fu) | ((w1 >> 2u) & 0x30303030u), w1 & 0x3F3F3F3Fu);
    Value mnw = ir::select(upper, ((w3 >> 4u) & 0x0F0F0F0Fu) | ((w2 >> 2u) & 0x30303030u), w2 & 0x3F3F3F3Fu);
    if (kc_ == 2) {  // the quarter's two bytes of the half's four
      const Value sh = (task & 1u) * 16u;
      scw = scw >> sh;
      mnw = mnw >> sh;
    }
    const Value dm = ir::bitcast(r[0], Scalar::F16x2);
    const Value d = f32(ir::unpack_lo(dm)), dmin = f32(ir::unpack_hi(dm));
    for (uint32_t c = 0; c < kc_; ++c) {
      out[c].unit = task * kc_ + c;
      out[c].f0[h] = d * f32((scw >> (8u * c)) & 0xFFu);
      out[c].f1[h] = dmin * f32((mnw >> (8u * c)) & 0xFFu);
      for (uint32_t k = 0; k < 2; ++k) words[c].push_back((r[4 + 2 * (c / 2) + k] >> (4u * (c % 2))) & 0x0F0F0F0Fu);
    }
  }

  // q6_K, half hh of a super-block: chunk c (elements 32c .. 32c + 31 of the half) takes the
  // low (c < 2) or high nibbles of ql range c % 2 and bits 2c, 2c + 1 of qh as its top two
  // bits (llama.cpp's dequantize_row_q6_K order), minus 32 per byte without borrows: with
  // bit 7 set each byte is q + 128 >= 32, so q + 96 after the subtraction, and clearing the
  // bit leaves q - 32 as an s8. Its two 16s have scale bytes 2c and 2c + 1 of the half's 8.
  void q6_k(const Value* r, Value task, uint32_t h, std::vector<Chunk>& out, std::vector<Value>* words) const {
    const Value mis = ((odd_[h] + (task >> 1u)) & 1u) != 0u;
    const std::vector<Value> ql[2] = {join8(r, mis), join8(r + 3, mis)};
    const std::vector<Value> qh = join8(r + 6, mis), scw = join8(r + 9, mis);
    const Value d = f32(r[12]);
    for (uint32_t ch = 0; ch < 4; ++ch) {
      out[ch].unit = task * 4u + ch;
      out[ch].f0[h] = d;
      const Value sw = s32(scw[ch / 2]);
      const int32_t lo = 24 - 16 * int32_t(ch % 2);
      out[ch].sc[h][0] = (sw << lo) >> 24;  // sign-extended
      out[ch].sc[h][1] = (sw << (lo - 8)) >> 24;
      for (uint32_t k = 0; k < 2; ++k) {
        const Value low = ch < 2 ? ql[ch % 2][k] & 0x0F0F0F0Fu : (ql[ch % 2][k] >> 4u) & 0x0F0F0F0Fu;
        const Value q = low | (((qh[k] >> (2u * ch)) & 0x03030303u) << 4u) | 0x80808080u;
        words[ch].push_back((q - 0x20202020u) ^ 0x80808080u);
      }
    }
  }

  // q8_0 tasks of 2 blocks: the first, moved back to keep both in the row (k / 32 >= 2) where
  // the row has an odd number (the last task then repeats the block before it, not counted).
  Value first(Value task) const { return ir::min(task * 2u, s_.units.ir - 2u); }

  ir::KernelBuilder& b_;
  const QuantMatmulMmaConfig& c_;
  MmaSignature& s_;
  Value t_;
  uint32_t rows_, kc_;
  Value row0_[4], odd_[4];  // each row's first byte; bit 1 of it
};

// The activation side: B fragments (row g of each n8 tile) and the scales (and q4_K sums)
// of the lane's C columns 2t, 2t + 1. Rows past m read row m - 1 and store nothing.
class Activations {
 public:
  Activations(ir::KernelBuilder& b, const QuantMatmulMmaConfig& c, MmaSignature& s, Value a0, Value g, Value t)
      : b_(b), c_(c), s_(s), t_(t) {
    for (uint32_t ni = 0; ni < c.nt; ++ni) {
      brow_.push_back(ir::min(a0 + (8 * ni) + g, s.m.ir - 1u));
      for (uint32_t e = 0; e < 2; ++e) col_.push_back(ir::min(a0 + (8 * ni + e) + t * 2u, s.m.ir - 1u));
    }
  }
  // B of n8 tile ni at a chunk: words 2t, 2t + 1 of its 32 values (one 8-byte load).
  std::vector<Value> fragment(uint32_t ni, Value unit) const {
    return ir::load_vec(s_.aq.ir, (brow_[ni] * s_.units.ir + unit) * 8u + t_ * 2u, 2);
  }
  // Column (2 ni + e)'s values of `from` for the task's chunks: the K-quants' tasks start at
  // a multiple of their chunk count in rows of k / 32 (a multiple of 8), so one 16-byte (or
  // 8-byte) load; q8_0's are single loads (its rows may have any number of blocks).
  std::vector<Value> per_chunk(Value from, uint32_t col, const std::vector<Chunk>& chunks, Value task) const {
    std::vector<Value> v;
    if (is(c_.format, GgmlType::Q8_0)) {
      for (const Chunk& ch : chunks) v.push_back(Value(from[col_[col] * s_.units.ir + ch.unit]));
      return v;
    }
    const uint32_t kc = uint32_t(chunks.size());
    return ir::load_vec(from, col_[col] * s_.units.ir + task * kc, int(kc));
  }

 private:
  ir::KernelBuilder& b_;
  const QuantMatmulMmaConfig& c_;
  MmaSignature& s_;
  Value t_;
  std::vector<Value> brow_, col_;
};

// A task's chunks times the activations into acc (m16 tile mi, n8 tile ni, register r:
// weight row 16 mi + g + 8 (r / 2), activation column 2t + r % 2). Each B fragment and
// activation scale serves the block's m16 tiles.
void multiply(ir::KernelBuilder& b, const QuantMatmulMmaConfig& c, MmaSignature& s, const Activations& act,
              const std::vector<Chunk>& chunks, Value task, Value t, const kernel::AccTile& acc) {
  const bool q4 = is(c.format, GgmlType::Q4_K), q6 = is(c.format, GgmlType::Q6_K);
  const Value zero = b.constant<uint32_t>(0);
  for (uint32_t ni = 0; ni < c.nt; ++ni) {
    std::vector<Value> da[2], dsum[2];  // per column e, per chunk
    for (uint32_t e = 0; e < 2; ++e) {
      da[e] = act.per_chunk(s.ad.ir, 2 * ni + e, chunks, task);
      if (q4) dsum[e] = act.per_chunk(s.as.ir, 2 * ni + e, chunks, task);  // the pre-pass's d * sum q
    }
    for (size_t ch = 0; ch < chunks.size(); ++ch) {
      const Chunk& w = chunks[ch];
      const std::vector<Value> bf = act.fragment(ni, w.unit);
      for (uint32_t mi = 0; mi < mtiles(c); ++mi) {
        std::vector<Value> prod;  // s32 per register
        if (!q6) {
          const ir::RegArray p = b.array<int32_t>(4, 0);
          b.mma_sync(ir::MmaKind::S8, p, w.a[mi], bf);
          for (uint32_t r = 0; r < 4; ++r) prod.push_back(p[r]);
        } else {
          // A mma per 16: lanes t < 2 hold the first 16 elements' words, t >= 2 the second's;
          // each mma takes the A words of its 16, the others zero, or at one n8 tile the B
          // words (two a lane, not A's four; at two tiles A's serve both).
          ir::RegArray p[2] = {b.array<int32_t>(4, 0), b.array<int32_t>(4, 0)};
          for (uint32_t half = 0; half < 2; ++half) {
            const Value mine = half == 0 ? t < 2u : t >= 2u;
            std::vector<Value> ah = w.a[mi], bh = bf;
            for (Value& v : c.nt == 1 ? bh : ah) v = ir::select(mine, v, zero);
            b.mma_sync(ir::MmaKind::S8, p[half], ah, bh);
          }
          for (uint32_t r = 0; r < 4; ++r) {
            const uint32_t h = 2 * mi + r / 2;
            prod.push_back(w.sc[h][0] * Value(p[0][r]) + w.sc[h][1] * Value(p[1][r]));
          }
        }
        for (uint32_t r = 0; r < 4; ++r) {
          const uint32_t h = 2 * mi + r / 2, e = r % 2;
          ir::Var x = acc.at(0, mi, ni, r);
          Value v = Value(x) + f32(prod[r]) * (w.f0[h] * da[e][ch]);
          if (q4) v = v - w.f1[h] * dsum[e][ch];
          x = v;
        }
      }
    }
  }
}

}  // namespace

std::string QuantMatmulMmaConfig::str() const {
  return quant::type_name(format) + "_" + ir::scalar_name(out) + "_n" + std::to_string(8 * nt) +
         (rows == 16 ? "" : "_m" + std::to_string(rows));
}

ir::Kernel build_quant_matmul_mma(const QuantMatmulMmaConfig& c) {
  if (!is(c.format, GgmlType::Q8_0) && !is(c.format, GgmlType::Q4_K) && !is(c.format, GgmlType::Q6_K))
    throw UsageError("", op_name, "weight type " + quant::type_name(c.format) + " is not supported (q8_0, q4_K, q6_K)");
  if (c.out != Scalar::F32 && c.out != Scalar::F16 && c.out != Scalar::BF16)
    throw UsageError("", op_name, std::string("output dtype ") + ir::scalar_name(c.out) + " is not supported (f32, f16, bf16)");
  if (c.nt != 1 && c.nt != 2) throw UsageError("", op_name, "nt (n8 tiles of activation rows) must be 1 or 2");
  if (c.rows != 16 && (c.rows != 32 || is(c.format, GgmlType::Q6_K)))
    throw UsageError("", op_name, "rows (weight rows per block) must be 16, or 32 for q8_0 and q4_K");
  ir::KernelBuilder b("quant_matmul_mma_" + c.str());
  MmaSignature s(c);
  kernel::declare(b, s);
  const uint32_t warps = warps_of(c), threads = 32 * warps;
  // One SM holds 16 warps at most 128 registers: two blocks of 8 (16 rows) or one of 16 (32
  // rows): a task's words twice (the current and the next), the accumulators and a chunk's
  // activations.
  b.launch_bounds(threads, 512 / threads);
  // warp_id(): the task loop's bounds are uniform over a warp (its mma needs the whole warp).
  const Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  const Value g = lane >> 2u, t = lane & 3u;
  const Value row_base = b.block_idx_x() * c.rows, a0 = b.block_idx_y() * (8 * c.nt);
  const Weights wt(b, c, s, row_base + g, t);
  const Activations act(b, c, s, a0, g, t);
  const kernel::AccTile acc(b, 1, mtiles(c), c.nt);
  // The kernel is launched to overlap the pre-pass (programmatic dependent launch): the
  // weights do not depend on it, so each warp's first task is loaded before the wait for
  // it. A warp without a task (fewer tasks than warps) loads the last one and drops it.
  const Value last = s.tasks.ir - 1u;
  std::vector<ir::Var> cur;
  for (Value v : wt.load(ir::min(warp, last))) cur.push_back(b.var(v.type(), v));
  b.grid_dependency_wait();
  b.for_(warp, s.tasks.ir, warps, [&](Value task) {
    const std::vector<Value> next = wt.load(ir::min(task + warps, last));
    std::vector<Value> now;
    for (const ir::Var& v : cur) now.push_back(v.get());
    multiply(b, c, s, act, wt.decode(now, task), task, t, acc);
    for (size_t i = 0; i < cur.size(); ++i) cur[i] = next[i];
  });
  // The warps' partial tiles, [warp][activation row][weight row], added in warp order by
  // one thread per output.
  const uint32_t outs = c.rows * 8 * c.nt;
  const Value part = b.shared<float>(warps * outs);
  for (uint32_t mi = 0; mi < mtiles(c); ++mi)
    for (uint32_t ni = 0; ni < c.nt; ++ni)
      for (uint32_t r = 0; r < 4; ++r)
        part[warp * outs + (acc.col(lane, ni, r) * c.rows + acc.row(lane, mi, r))] = Value(acc.at(0, mi, ni, r));
  b.barrier();
  b.if_(tid < outs, [&] {
    Value sum = part[tid];
    for (uint32_t w = 1; w < warps; ++w) sum = sum + part[tid + w * outs];
    const Value arow = a0 + tid / c.rows, row = row_base + tid % c.rows;
    b.if_(arow < s.m.ir && row < s.n.ir, [&] {
      s.y.ir[u64(arow) * u64(s.n.ir) + u64(row)] = c.out == Scalar::F32 ? sum : ir::cast(sum, Type::scalar(c.out), ir::Rounding::Rn);
    });
  });
  return b.build();
}

jit::Family<QuantMatmulMmaConfig>& quant_matmul_mma_family() {
  static jit::Family<QuantMatmulMmaConfig> f("quant_matmul_mma", build_quant_matmul_mma, [] {
    std::vector<QuantMatmulMmaConfig> v;
    for (uint32_t fmt : {8u, 12u, 14u})
      for (Scalar o : {Scalar::F32, Scalar::F16, Scalar::BF16})
        for (uint32_t nt : {1u, 2u}) {
          v.push_back({fmt, o, nt, 16});
          // q6_K's 32-row form spills (16 activation rows) or takes 23% more instructions
          // per weight byte (8 rows; it spills on sm_80): not built.
          if (fmt != 14u) v.push_back({fmt, o, nt, 32});
        }
    return v;
  }());
  return f;
}

namespace detail {

namespace {
std::atomic<uint32_t> forced_rows{0};
std::atomic<bool> forced_mma{false};
std::atomic<uint64_t> launches[2];
}  // namespace

uint32_t quant_matmul_mma_rows(uint32_t format, size_t m, size_t n, size_t k) {
  (void)m, (void)n;
  // q6_K has no 32-row form; q8_0's takes two blocks per task from rows of two or more.
  if (format == uint32_t(GgmlType::Q6_K) || (format == uint32_t(GgmlType::Q8_0) && k < 64)) return 16;
  const uint32_t forced = forced_rows.load(std::memory_order_relaxed);
  // Else 32 rows: measured on the H200 (bench/NOTES.md) 3-11% less time than 16 rows at
  // m = 8 and 16 on every shape, q4_K at 16 activation rows included although its task loop
  // takes 401 instructions per 16 rows x 128 elements there against 364 (half the activation
  // loads outweigh a quarter super-block per task); level at m = 4.
  return forced != 0 ? forced : 32;
}

void force_quant_matmul_mma_rows(uint32_t rows) {
  if (rows != 0 && rows != 16 && rows != 32)
    throw UsageError("", op_name, "rows (weight rows per block) must be 0 (by shape), 16 or 32");
  forced_rows.store(rows, std::memory_order_relaxed);
}

uint64_t quant_matmul_mma_launches(uint32_t rows) { return launches[rows == 32 ? 1 : 0].load(std::memory_order_relaxed); }

void force_quant_matmul_mma(bool on) { forced_mma.store(on, std::memory_order_relaxed); }

bool quant_matmul_mma_picked(uint32_t format, size_t m, size_t n, size_t k) {
  (void)n, (void)k;
  // mma.sync s8 needs sm_80. One activation row keeps the dp4a forms (a mma would do 8
  // times its work for one row; the m = 1 forms are already at the weight bytes' speed).
  // q8_0 at m <= 4 too: its weights need no decoding, so the dp4a form with 4 rows per
  // block measured faster there (H200: 18.4 against 19.7 us at 4096 x 4096, 27.8 against
  // 47.1 at 11008 x 4096); from m = 8 on the tensor cores win for every format (2-3x).
  if (format == uint32_t(GgmlType::Q8_0) && m <= 4 && !forced_mma.load(std::memory_order_relaxed)) return false;
  return m >= 2 && jit::device_info().sm >= 80;
}

void launch_quant_matmul_mma(const QuantMatmulMmaConfig& c, uint64_t w, uint64_t workspace, uint64_t y, size_t m, size_t n,
                             size_t k, size_t row_bytes, const jit::Stream* stream) {
  if (c.rows == 32 && is(c.format, GgmlType::Q8_0) && k < 64)
    throw UsageError("", op_name, "argument 'k': the 32-row q8_0 form needs two blocks (k >= 64)");
  MmaSignature s(c);
  s.w16.host = s.w32.host = s.wh.host = w;
  s.aq.host = workspace;
  s.ad.host = workspace + m * k;
  s.as.host = workspace + m * k + m * (k / kQ) * 4;
  s.y.host = y;
  s.m.host = uint32_t(m);
  s.n.host = uint32_t(n);
  s.units.host = uint32_t(k / kQ);
  s.tasks.host = uint32_t(task_count(c, k));
  s.row_bytes.host = row_bytes;
  const kernel::PackedArgs args = kernel::pack(s);
  const uint32_t gx = uint32_t((n + c.rows - 1) / c.rows), gy = uint32_t((m + 8 * c.nt - 1) / (8 * c.nt));
  launches[c.rows == 32 ? 1 : 0].fetch_add(1, std::memory_order_relaxed);  // a count for tests: no ordering
  quant_matmul_mma_family().get(c).launch_packed(
      {.grid = {gx, gy, 1}, .block = {32 * warps_of(c)}, .stream = stream, .overlap_previous = true}, args.data(), args.size());
}

}  // namespace detail

}  // namespace kaio::ops
