// The GGUF matvec's fused form (see quant_matvec.h): for one activation row, each block
// quantises the row into shared memory itself (no pre-pass launch, activations read from
// shared memory), then its warps take a weight row each. A lane's task is 64 weights of a
// K-quant super-block (a q8_0 block for q8_0), and the next task's weight words are loaded
// while the current one is computed.
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/device.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/ops/quant_q8.h"
#include "kaio/quant/blocks.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Type;
using ir::Value;
using quant::GgmlType;

constexpr uint32_t kThreads = 256;  // 8 warps, a weight row each
constexpr uint32_t kQ = 32;         // activation quantisation block (a unit)
constexpr uint32_t kInfo = 4;       // words of a unit's info: d, the 32-sum, the two 16-sums
constexpr uint32_t kRows = kThreads / 32;

const char* op_name = "quant_matmul";

bool k_quant(uint32_t f) { return f != uint32_t(GgmlType::Q8_0); }
uint32_t task_elems(uint32_t f) { return k_quant(f) ? 64 : 32; }

// The weights are one allocation read through three pointers (16-bit and 32-bit words, f16
// scales): q8_0 and q6_K blocks (34 and 210 bytes) are only 2-byte aligned, so where a
// range starts at 2 mod 4 its 32-bit words are put together from aligned neighbours
// (load_range, join).
struct FusedSignature {
  kernel::Ptr w16{"w16", Scalar::U16, true};
  kernel::Ptr w32{"w32", Scalar::U32, true};
  kernel::Ptr wh{"wh", Scalar::F16, true};
  kernel::Ptr x{"x", Scalar::F32, true};   // the activations (f32), or
  kernel::Ptr xw{"xw", Scalar::U32, true};  // their 16-bit pairs
  kernel::Ptr y{"y"};
  kernel::Param<uint32_t> n{"n"}, units{"units"}, tasks{"tasks"};  // units: k / 32
  kernel::Param<uint64_t> row_bytes{"row_bytes"};
  explicit FusedSignature(Scalar out) { y.elem = out; }
  auto fields() { return std::tie(w16, w32, wh, x, xw, y, n, units, tasks, row_bytes); }
};

// The part of a lane's task against one activation unit: its weight words (4 quantised
// bytes each; non-negative for q4_K and q6_K, whose offsets are applied through the
// activation sums the pre-pass stores) and what turns the integer sums into a float.
struct Group {
  std::vector<Value> q;  // 8 words (q8_0, q4_K) or 4 (q6_K: 16 elements of the unit)
  Value unit;            // the unit's index in the row
  Value f0, f1;          // q8_0: d. q4_K: d * sc, dmin * m. q6_K: d.
  Value sc;              // q6_K: the 16 elements' s8 scale (s32)
  Value half;            // q6_K: the unit's half the 16 elements are (0 or 1)
};

// A lane's task: a q8_0 block (32 elements), or 64 elements of a K-quant super-block so that
// every weight byte is loaded once and the super-block's scales are decoded for two
// (q4_K) or four (q6_K) groups at a time:
// - q4_K task i of a super-block: sub-blocks 2i and 2i + 1, the low and high nibbles of qs
//   bytes 32i .. 32i + 31;
// - q6_K task (h, l0): in half h, elements l0 .. l0 + 15 (l0 = 0, 16) of its four 32-element
//   units: the low and high nibbles of ql[64h + l0 ..] and ql[64h + 32 + l0 ..], with the
//   2-bit pairs of qh[32h + l0 ..] (llama.cpp's dequantize_row_q6_K order).
class Product {
 public:
  // aq, info: the quantised activations and their unit info in shared memory (the info
  // from word info0).
  Product(ir::KernelBuilder& b, const QuantMatvecFusedConfig& c, FusedSignature& s, Value aq, Value info, Value info0)
      : b_(b), c_(c), s_(s), aq_(aq), info_(info), info0_(info0) {}
  // A task's global loads, taken before any of their values is used (so that all of
  // them are in flight at once, and the fused form can issue them before its
  // quantisation): the raw words in the order decode() reads them.
  struct Loaded {
    std::vector<Value> w;
    Value t, sb, mis;  // mis: the 2-byte-aligned ranges start at 2 mod 4
  };
  Loaded load(Value row, Value t) const {
    Loaded l;
    l.t = t;
    const Value row0 = ir::cast<uint64_t>(row) * s_.row_bytes.ir;
    if (c_.format == uint32_t(GgmlType::Q8_0)) {
      const Value base = row0 + ir::cast<uint64_t>(t) * uint64_t(34);
      l.w.push_back(s_.wh.ir[base >> uint64_t(1)]);  // d
      l.mis = ((base + uint64_t(2)) & uint64_t(2)) != uint64_t(0);
      load_range(l, base + uint64_t(2), 8);
      return l;
    }
    l.sb = t >> 2u;
    if (c_.format == uint32_t(GgmlType::Q4_K)) {
      // Blocks are 144 bytes and rows start 16-byte aligned: the header (d, dmin, the 12
      // scale bytes) is one 16-byte load and the task's 32 nibble bytes two.
      const Value base = row0 + ir::cast<uint64_t>(l.sb) * uint64_t(144);
      const Value word0 = (base + uint64_t(16) + ir::cast<uint64_t>(t & 3u) * uint64_t(32)) >> uint64_t(2);
      for (Value v : ir::load_vec(s_.w32.ir, base >> uint64_t(2), 4)) l.w.push_back(v);
      for (Value v : ir::load_vec(s_.w32.ir, word0, 4)) l.w.push_back(v);
      for (Value v : ir::load_vec(s_.w32.ir, word0 + uint64_t(4), 4)) l.w.push_back(v);
      return l;
    }
    // q6_K: blocks are 210 bytes, so 2-byte aligned; every range below starts at an even
    // offset of a multiple of 8, so all share the block's parity.
    const Value base = row0 + ir::cast<uint64_t>(l.sb) * uint64_t(210);
    l.mis = (base & uint64_t(2)) != uint64_t(0);
    const Value lh = ir::cast<uint64_t>((t & 3u) >> 1u), ll = ir::cast<uint64_t>((t & 1u) * 16u);
    load_range(l, base + lh * uint64_t(64) + ll, 4);
    load_range(l, base + lh * uint64_t(64) + uint64_t(32) + ll, 4);
    load_range(l, base + uint64_t(128) + lh * uint64_t(32) + ll, 4);
    load_range(l, base + uint64_t(192) + lh * uint64_t(8), 2);
    l.w.push_back(s_.wh.ir[(base + uint64_t(208)) >> uint64_t(1)]);  // d
    return l;
  }

  // The task's groups from its loaded words (registers only).
  std::vector<Group> decode(const Loaded& l) const {
    if (c_.format == uint32_t(GgmlType::Q8_0)) {
      Group g;
      g.unit = l.t;
      g.f0 = f32(l.w[0]);
      g.q = join(l, 1, 8);
      return {g};
    }
    if (c_.format == uint32_t(GgmlType::Q4_K)) return q4_k(l);
    return q6_k(l);
  }

  // The task's contribution for the activation row whose first unit is `unit0`.
  Value contribution(const std::vector<Group>& task, Value unit0) const {
    Value total;
    for (const Group& g : task) {
      const Value unit = unit0 + g.unit;
      const Value word = unit * 8u + (g.half.valid() ? g.half * 4u : b_.constant<uint32_t>(0));
      std::vector<Value> a = ir::load_vec(aq_, word, 4);
      if (g.q.size() == 8)
        for (Value v : ir::load_vec(aq_, word + 4u, 4)) a.push_back(v);
      Value dot = b_.constant<int32_t>(0);
      for (size_t k = 0; k < g.q.size(); ++k) dot = ir::dp4a(s32(g.q[k]), s32(a[k]), dot);
      Value v;
      if (c_.format == uint32_t(GgmlType::Q8_0)) {
        v = (g.f0 * ir::bitcast(u32(info_[info0_ + unit * kInfo]), Scalar::F32)) * f32(dot);
      } else if (c_.format == uint32_t(GgmlType::Q4_K)) {
        const std::vector<Value> in = ir::load_vec(info_, info0_ + unit * kInfo, 2);
        v = ir::bitcast(in[0], Scalar::F32) * (g.f0 * f32(dot) - g.f1 * f32(s32(in[1])));
      } else {
        // sum (q - 32) a = sum q a - 32 sum a over the 16 elements, times their s8 scale.
        const std::vector<Value> in = ir::load_vec(info_, info0_ + unit * kInfo, 4);
        const Value sum = s32(ir::select(g.half == 0u, in[2], in[3]));
        v = (g.f0 * ir::bitcast(in[0], Scalar::F32)) * f32(g.sc * (dot - sum * 32));
      }
      total = total.valid() ? total + v : v;
    }
    return total;
  }

 private:
  Value s32(Value v) const { return ir::cast(v, Type::scalar(Scalar::S32)); }
  Value u32(Value v) const { return ir::cast(v, Type::scalar(Scalar::U32)); }
  Value f32(Value v) const { return ir::cast(v, Type::scalar(Scalar::F32)); }

  // The n 32-bit words from byte `byte` (even) of the weights as n aligned 32-bit loads and
  // one 16-bit load: where `byte` is 2 mod 4 (l.mis), word k is the high half of aligned
  // word k and the low half of word k + 1, the last one's from the 16-bit load, so nothing
  // past the range is read (join); else the aligned words themselves.
  void load_range(Loaded& l, Value byte, uint32_t n) const {
    const Value a = byte >> uint64_t(2);
    for (uint32_t k = 0; k < n; ++k) l.w.push_back(s_.w32.ir[a + uint64_t(k)]);
    // The 16-bit word at 4a + 4n (misaligned), or one inside the range (aligned: unused).
    const Value h16 = (a + uint64_t(n)) * uint64_t(2) - ir::select(l.mis, b_.constant<uint64_t>(0), b_.constant<uint64_t>(1));
    l.w.push_back(s_.w16.ir[h16]);
  }
  // The n words of the range loaded at l.w[at]: one funnel shift of each pair.
  std::vector<Value> join(const Loaded& l, size_t at, uint32_t n) const {
    const Value shift = ir::select(l.mis, b_.constant<uint64_t>(16), b_.constant<uint64_t>(0));
    std::vector<Value> out;
    for (uint32_t k = 0; k < n; ++k) {
      const Value next = k + 1 < n ? l.w[at + k + 1] : u32(l.w[at + n]);
      const Value pair = (ir::cast<uint64_t>(next) << uint64_t(32)) | ir::cast<uint64_t>(l.w[at + k]);
      out.push_back(u32(pair >> shift));
    }
    return out;
  }

  // q4_K: d, dmin, 12 scale bytes, 128 bytes of nibbles.
  std::vector<Group> q4_k(const Loaded& l) const {
    const Value i = l.t & 3u;
    // The eight 6-bit scales and mins (quant/blocks.h: q4k_scale_min), four to a word:
    // sub-blocks 0-3 are the low 6 bits of scale bytes 0-3 (scales) and 4-7 (mins);
    // sub-blocks 4-7 take their low 4 bits from bytes 8-11 and their top 2 from the top
    // bits of bytes 0-3 and 4-7. Task i needs bytes 2i % 4 and 2i % 4 + 1 of one word.
    const Value w1 = l.w[1], w2 = l.w[2], w3 = l.w[3];
    const Value high = i >= 2u;
    const Value scw = ir::select(high, (w3 & 0x0F0F0F0Fu) | ((w1 >> 2u) & 0x30303030u), w1 & 0x3F3F3F3Fu);
    const Value mnw = ir::select(high, ((w3 >> 4u) & 0x0F0F0F0Fu) | ((w2 >> 2u) & 0x30303030u), w2 & 0x3F3F3F3Fu);
    const Value shift = (i & 1u) * 16u;
    const Value scs = scw >> shift, mns = mnw >> shift;
    const Value dm = ir::bitcast(l.w[0], Scalar::F16x2);
    const Value d = f32(ir::unpack_lo(dm)), dmin = f32(ir::unpack_hi(dm));
    std::vector<Group> task(2);
    for (uint32_t e = 0; e < 2; ++e) {
      Group& g = task[e];
      for (size_t k = 4; k < 12; ++k) g.q.push_back(e == 0 ? l.w[k] & 0x0F0F0F0Fu : (l.w[k] >> 4u) & 0x0F0F0F0Fu);
      g.unit = l.sb * 8u + i * 2u + e;
      g.f0 = d * f32((scs >> (8u * e)) & 0xFFu);
      g.f1 = dmin * f32((mns >> (8u * e)) & 0xFFu);
    }
    return task;
  }

  // q6_K: ql (128 bytes), qh (64), 16 s8 scales, d.
  std::vector<Group> q6_k(const Loaded& l) const {
    const Value t = l.t & 3u, h = t >> 1u;
    const std::vector<Value> qa = join(l, 0, 4), qb = join(l, 5, 4), qh = join(l, 10, 4);
    // Scale bytes 8h + l0 / 16 + {0, 2, 4, 6}: bytes l0 / 16 and l0 / 16 + 2 of the two
    // words at 192 + 8h.
    const std::vector<Value> scw = join(l, 15, 2);
    const Value d = f32(l.w[18]);
    const Value sbit = (t & 1u) * 8u;
    std::vector<Group> task(4);
    for (uint32_t g4 = 0; g4 < 4; ++g4) {
      Group& g = task[g4];
      const std::vector<Value>& ql = g4 % 2 == 0 ? qa : qb;
      for (uint32_t k = 0; k < 4; ++k) {
        const Value low = g4 < 2 ? ql[k] & 0x0F0F0F0Fu : (ql[k] >> 4u) & 0x0F0F0F0Fu;
        const Value top = ((qh[k] >> (2u * g4)) & 0x03030303u) << 4u;
        g.q.push_back(low | top);
      }
      g.unit = l.sb * 8u + h * 4u + g4;
      g.half = t & 1u;
      const Value byte = s32(scw[g4 / 2] >> (sbit + 16u * (g4 % 2)));
      g.sc = (byte << 24) >> 24;  // sign-extended
      g.f0 = d;
    }
    return task;
  }

  ir::KernelBuilder& b_;
  const QuantMatvecFusedConfig& c_;
  FusedSignature& s_;
  Value aq_, info_, info0_;
};

// The block quantises the activation row into shared memory `sm` (u32 words):
// the q bytes at words [0, k / 4) and each unit's info (d, sum, the two 16-sums) at
// k / 4 + 4 u. Thread t takes the quarter-units t, t + 256, ... (8 values each, few
// registers; the four quarters of a unit are neighbouring lanes, which exchange their max
// and sums).
void quantize_row(ir::KernelBuilder& b, const QuantMatvecFusedConfig& c, FusedSignature& s, Value sm) {
  const Value tid = b.thread_idx_x(), quarters = s.units.ir * 4u;
  b.for_(0u, (quarters + (kThreads - 1)) / kThreads, [&](Value j) {
    // Every lane runs every step (so whole warps reach the shuffles); past the end it
    // reads the last quarter and stores nothing. quarters is a multiple of 4, so units
    // stay whole.
    const Value h = j * kThreads + tid, hc = ir::min(h, quarters - 1u);
    const Value first = ir::cast<uint64_t>(hc) * uint64_t(8);
    std::vector<Value> x;
    if (c.in == Scalar::F32) {
      for (uint64_t v = 0; v < 2; ++v)
        for (Value e : ir::load_vec(s.x.ir, first + v * 4u, 4)) x.push_back(e);
    } else {
      for (Value w : ir::load_vec(s.xw.ir, first >> uint64_t(1), 4)) {
        if (c.in == Scalar::BF16) {  // a bf16 is the high half of its f32
          x.push_back(ir::bitcast(w << 16u, Scalar::F32));
          x.push_back(ir::bitcast(w & 0xFFFF0000u, Scalar::F32));
        } else {
          const Value pair = ir::bitcast(w, Scalar::F16x2);
          x.push_back(ir::cast(ir::unpack_lo(pair), Type::scalar(Scalar::F32)));
          x.push_back(ir::cast(ir::unpack_hi(pair), Type::scalar(Scalar::F32)));
        }
      }
    }
    Value amax = ir::abs(x[0]);
    for (size_t e = 1; e < x.size(); ++e) amax = ir::max(amax, ir::abs(x[e]));
    amax = ir::max(amax, ir::shfl_xor(amax, 1u));
    amax = ir::max(amax, ir::shfl_xor(amax, 2u));
    const detail::Q8Scale sc(amax);
    std::vector<Value> words;
    Value sum = b.constant<int32_t>(0);
    for (uint32_t w = 0; w < 2; ++w) {
      Value word;
      for (uint32_t e = 0; e < 4; ++e) {
        const Value q = sc.q(x[4 * w + e]);
        sum = sum + q;
        const Value byte = ir::cast(q, Type::scalar(Scalar::U32)) & 0xFFu;
        word = e == 0 ? byte : word | (byte << (8u * e));
      }
      words.push_back(word);
    }
    const Value half = sum + ir::shfl_xor(sum, 1u);  // this 16's sum
    const Value other = ir::shfl_xor(half, 2u);      // the unit's other 16
    b.if_(h < quarters, [&] {
      ir::store_vec(sm, hc * 2u, words);
      b.if_((h & 3u) == 0u, [&] {
        const auto u = [](Value v) { return ir::cast(v, Type::scalar(Scalar::U32)); };
        ir::store_vec(sm, s.units.ir * 8u + hc, {ir::bitcast(sc.d, Scalar::U32), u(half + other), u(half), u(other)});
      });
    });
  });
  b.barrier();
}

// q6_K from f32 activations holds too many registers for the sm_80 allocation at three
// blocks per SM (it spills): it takes the pre-pass form.
bool fused_form(uint32_t format, Scalar in) { return !(format == uint32_t(GgmlType::Q6_K) && in == Scalar::F32); }

}  // namespace

std::string QuantMatvecFusedConfig::str() const {
  return std::string(quant::type_name(format)) + "_" + ir::scalar_name(in) + "_" + ir::scalar_name(out);
}

ir::Kernel build_quant_matvec_fused(const QuantMatvecFusedConfig& c) {
  if (c.format != uint32_t(GgmlType::Q8_0) && c.format != uint32_t(GgmlType::Q4_K) && c.format != uint32_t(GgmlType::Q6_K))
    throw UsageError("", op_name, "weight type " + quant::type_name(c.format) + " is not supported (q8_0, q4_K, q6_K)");
  for (Scalar t : {c.in, c.out})
    if (t != Scalar::F32 && t != Scalar::F16 && t != Scalar::BF16)
      throw UsageError("", op_name, std::string("dtype ") + ir::scalar_name(t) + " is not supported (f32, f16, bf16)");
  ir::KernelBuilder b("quant_matvec_fused_" + c.str());
  FusedSignature s(c.out);
  kernel::declare(b, s);
  // Four blocks (32 warps) per SM at most 64 registers, which hold two q4_K tasks' words
  // (the current and the next) without spilling; q6_K's and q8_0's take more (their
  // 2-byte-aligned ranges carry a 16-bit tail each): three blocks, 80.
  b.launch_bounds(kThreads, c.format == uint32_t(GgmlType::Q4_K) ? 4 : 3);
  const Value tid = b.thread_idx_x(), lane = tid & 31u;
  const Value row = b.block_idx_x() * kRows + (tid >> 5u);
  // Rows past n compute on the last row (so every lane reaches the shuffles) and store nothing.
  const Value rowc = ir::min(row, s.n.ir - 1u);
  const Value sm = b.dynamic_shared<uint32_t>();
  const Product p(b, c, s, sm, sm, s.units.ir * 8u);
  const Value last = s.tasks.ir - 1u;
  auto carried = [&](const Product::Loaded& l) {
    return l.mis.valid() ? ir::select(l.mis, b.constant<uint32_t>(1), b.constant<uint32_t>(0)) : b.constant<uint32_t>(0);
  };
  // The first task's loads are issued before the block quantises the activations, so
  // their latency passes under that work; then each lane loads its next task while it
  // computes the current one (the last prefetch repeats the last task and is dropped).
  const Product::Loaded first = p.load(rowc, ir::min(lane, last));
  std::vector<ir::Var> cur;
  for (Value v : first.w) cur.push_back(b.var(v.type(), v));
  ir::Var mis = b.var(Type::scalar(Scalar::U32), carried(first));
  quantize_row(b, c, s, sm);
  ir::Var acc = b.var<float>(0.0f);
  const Value none = b.constant<uint32_t>(0);
  b.for_(lane, s.tasks.ir, 32u, [&](Value t) {
    const Product::Loaded next = p.load(rowc, ir::min(t + 32u, last));
    Product::Loaded now;
    now.t = t;
    now.sb = t >> 2u;
    now.mis = mis.get() != 0u;
    for (const ir::Var& v : cur) now.w.push_back(v.get());
    acc = acc.get() + p.contribution(p.decode(now), none);
    for (size_t k = 0; k < cur.size(); ++k) cur[k] = next.w[k];
    mis = carried(next);
  });
  const Value sum = b.warp_reduce_sum(acc.get());
  b.if_(lane == 0u && row < s.n.ir, [&] {
    s.y.ir[ir::cast<uint64_t>(row)] = c.out == Scalar::F32 ? sum : ir::cast(sum, Type::scalar(c.out), ir::Rounding::Rn);
  });
  return b.build();
}

jit::Family<QuantMatvecFusedConfig>& quant_matvec_fused_family() {
  static jit::Family<QuantMatvecFusedConfig> f("quant_matvec_fused", build_quant_matvec_fused, [] {
    std::vector<QuantMatvecFusedConfig> v;
    for (uint32_t fmt : {8u, 12u, 14u})
      for (Scalar in : {Scalar::F32, Scalar::F16, Scalar::BF16}) {
        if (!fused_form(fmt, in)) continue;
        v.push_back({fmt, in, Scalar::F32});
        if (in != Scalar::F32) v.push_back({fmt, in, in});
      }
    return v;
  }());
  return f;
}

namespace detail {

bool quant_matvec_fused_fits(uint32_t format, ir::Scalar in, size_t n, size_t k) {
  // Measured on the H200 (bench/NOTES.md): at K = 4096 and N = 4096 (one wave of four
  // blocks per SM) the fused form takes 12-21% less time than the pre-pass form; at K =
  // 14336 the quantisation every block repeats costs more than the pre-pass launch it
  // saves, and with N = 11008 (2.6 waves) the pre-pass form's 48 warps per SM win for the
  // K-quants.
  return fused_form(format, in) && k <= 4096 && (n + kRows - 1) / kRows <= size_t(jit::device_info().sm_count) * 4;
}

void launch_quant_matvec_fused(const QuantMatvecFusedConfig& c, uint64_t w, uint64_t x, uint64_t y, size_t n, size_t k,
                               size_t row_bytes, const jit::Stream* stream) {
  FusedSignature s(c.out);
  s.w16.host = s.w32.host = s.wh.host = w;
  s.x.host = s.xw.host = x;
  s.y.host = y;
  s.n.host = uint32_t(n);
  s.units.host = uint32_t(k / kQ);
  s.tasks.host = uint32_t(k / task_elems(c.format));
  s.row_bytes.host = row_bytes;
  const kernel::PackedArgs args = kernel::pack(s);
  const size_t shared = k + k / kQ * kInfo * 4;  // the q bytes and the unit info
  if (shared > 48 * 1024)
    throw UsageError("", op_name, "argument 'k': " + std::to_string(k) + " is too long for the fused form (at most 32768)");
  quant_matvec_fused_family().get(c).launch_packed(
      {.grid = {uint32_t((n + kRows - 1) / kRows)}, .block = {kThreads}, .shared_bytes = uint32_t(shared), .stream = stream},
      args.data(), args.size());
}

}  // namespace detail

}  // namespace kaio::ops
