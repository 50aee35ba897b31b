// The GGUF matvec kernels (see quant_matvec.h): the activation pre-pass and the dp4a
// product over q8_0, q4_K and q6_K weight rows.
#include "kaio/ops/quant_matvec.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/device.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/quant/blocks.h"
#include "kaio/ops/quant_q8.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Type;
using ir::Value;
using quant::GgmlType;

constexpr uint32_t kThreads = 256;  // both kernels: 8 warps per block
constexpr uint32_t kQ = 32;         // activation quantisation block (and a product unit)

const char* op_name = "quant_matmul";

const char* format_name(uint32_t f) { return quant::type_info(f) ? quant::type_info(f)->name : "unknown"; }
bool supported(uint32_t f) {
  return f == uint32_t(GgmlType::Q8_0) || f == uint32_t(GgmlType::Q4_K) || f == uint32_t(GgmlType::Q6_K);
}

// The pre-pass: one thread per activation, one warp per 32 of them.
struct QuantActSignature {
  kernel::Ptr x{"x", Scalar::F32, true};
  kernel::Ptr q{"q", Scalar::S8};
  kernel::Ptr d{"d", Scalar::F32};
  kernel::Opt<kernel::Ptr> sum{{"sum", Scalar::F32}};  // QuantActConfig::sums: d * the sum of the q, in f32
  kernel::Param<uint32_t> total{"total"};  // m * k, a multiple of 32
  explicit QuantActSignature(const QuantActConfig& c) {
    x.elem = c.in;
    sum.on = c.sums;
  }
  auto fields() { return std::tie(x, q, d, sum, total); }
};

// The product. The weights are one allocation read through four pointers (bytes, 16-bit
// and 32-bit words, f16 scales): q8_0 and q6_K blocks (34 and 210 bytes) are only 2-byte
// aligned, so where a range starts at 2 mod 4 its 32-bit words are put together from
// halves of aligned neighbours (words_at).
struct QuantMatvecSignature {
  kernel::Ptr w8{"w8", Scalar::U8, true};
  kernel::Ptr w16{"w16", Scalar::U16, true};
  kernel::Ptr w32{"w32", Scalar::S32, true};
  kernel::Ptr wh{"wh", Scalar::F16, true};
  kernel::Ptr aq{"aq", Scalar::S32, true};  // the quantised activations, four per word
  kernel::Ptr ad{"ad", Scalar::F32, true};  // their scales, one per 32
  kernel::Ptr y{"y"};
  kernel::Param<uint32_t> m{"m"}, n{"n"}, units{"units"};  // units: k / 32
  kernel::Param<uint64_t> row_bytes{"row_bytes"};
  explicit QuantMatvecSignature(Scalar out) { y.elem = out; }
  auto fields() { return std::tie(w8, w16, w32, wh, aq, ad, y, m, n, units, row_bytes); }
};

// The weight side of one unit (32 elements of one row): 8 words of 4 quantised bytes
// (non-negative for q4_K and q6_K, their offsets applied through the activation sums)
// and what turns the unit's integer sums into a float.
struct WeightUnit {
  std::vector<Value> q;  // 8 x s32
  // q8_0: d. q4_K: d * scale, dmin * min. q6_K: d, and the two 16-element scales (s32).
  Value f0, f1, sc0, sc1;
};

class Product {
 public:
  Product(ir::KernelBuilder& b, const QuantMatvecConfig& c, QuantMatvecSignature& s) : b_(b), c_(c), s_(s) {}

  Value s32(Value v) const { return ir::cast(v, Type::scalar(Scalar::S32)); }
  Value f32(Value v) const { return ir::cast(v, Type::scalar(Scalar::F32)); }
  // The n 32-bit words from byte `byte` (even) of the weights, with n aligned 32-bit loads
  // and one 16-bit load: where `byte` is 2 mod 4, word k is the high half of aligned word
  // k and the low half of word k + 1 (the last one's from the 16-bit load, so nothing
  // past the range is read); else the aligned words themselves.
  std::vector<Value> words_at(Value byte, uint32_t n) const {
    const Value a = byte >> uint64_t(2);
    const Value mis = (byte & uint64_t(2)) != uint64_t(0);
    std::vector<Value> w;
    for (uint32_t k = 0; k < n; ++k) w.push_back(s_.w32.ir[a + uint64_t(k)]);
    // The 16-bit word at 4a + 4n (misaligned), or one inside the range (aligned: unused).
    const Value h16 = (a + uint64_t(n)) * uint64_t(2) - ir::select(mis, b_.constant<uint64_t>(0), b_.constant<uint64_t>(1));
    const Value tail = s32(s_.w16.ir[h16]);
    std::vector<Value> out;
    for (uint32_t k = 0; k < n; ++k) {
      const Value next = k + 1 < n ? w[k + 1] : tail;
      out.push_back(ir::select(mis, ((w[k] >> 16) & 0xFFFF) | (next << 16), w[k]));
    }
    return out;
  }
  Value half_at(Value byte) const { return f32(s_.wh.ir[byte >> uint64_t(1)]); }

  // Unit u of weight row `row`: its block starts at row * row_bytes + (u / per) * bytes.
  WeightUnit weights(Value row, Value u) const {
    WeightUnit w;
    const Value row0 = ir::cast<uint64_t>(row) * s_.row_bytes.ir;
    if (c_.format == uint32_t(GgmlType::Q8_0)) {
      const Value base = row0 + ir::cast<uint64_t>(u) * uint64_t(34);
      w.f0 = half_at(base);
      w.q = words_at(base + uint64_t(2), 8);
      return w;
    }
    const Value sb = ir::cast<uint64_t>(u >> 3u), j = u & 7u;
    if (c_.format == uint32_t(GgmlType::Q4_K)) {
      const Value base = row0 + sb * uint64_t(144);
      // The super-block's first 16 bytes (d, dmin, the 12 scale bytes) in one 16-byte load
      // (blocks are 144 bytes and rows start 16-byte aligned), not five narrow ones: the
      // K-quant rows were bound by the number of load instructions in flight, not bytes.
      // The 6-bit scale and min of sub-block j (quant/blocks.h: q4k_scale_min) from scale
      // bytes j % 4 (word 1), j % 4 + 4 (word 2) and j + 4 (word 2 or 3).
      const std::vector<Value> hd = ir::load_vec(s_.w32.ir, base >> uint64_t(2), 4);
      const Value jb = (j & 3u) * 8u;
      const Value lo = ir::cast<uint32_t>(hd[1]) >> jb, mid = ir::cast<uint32_t>(hd[2]) >> jb;
      const Value hi = ir::select(j < 4u, ir::cast<uint32_t>(hd[2]), ir::cast<uint32_t>(hd[3])) >> jb;
      const Value low4 = j < 4u;
      const Value sc = ir::select(low4, lo & 63u, (hi & 15u) | (((lo >> 6u) & 3u) << 4u));
      const Value mn = ir::select(low4, mid & 63u, ((hi >> 4u) & 15u) | (((mid >> 6u) & 3u) << 4u));
      const Value dm = ir::bitcast(ir::cast<uint32_t>(hd[0]), Scalar::F16x2);
      w.f0 = f32(ir::unpack_lo(dm)) * f32(sc);
      w.f1 = f32(ir::unpack_hi(dm)) * f32(mn);
      // Sub-block j: bytes 32 (j / 2) .. + 31 of qs, the low nibbles for even j; two
      // 16-byte loads (blocks are 144 bytes and rows start 16-byte aligned).
      const Value shift = s32((j & 1u) * 4u);
      const Value word0 = (base + uint64_t(16) + ir::cast<uint64_t>(j >> 1u) * uint64_t(32)) >> uint64_t(2);
      std::vector<Value> words = ir::load_vec(s_.w32.ir, word0, 4);
      for (Value v : ir::load_vec(s_.w32.ir, word0 + uint64_t(4), 4)) words.push_back(v);
      for (Value v : words) w.q.push_back((v >> shift) & 0x0F0F0F0F);
      return w;
    }
    // q6_K: 32-element chunk j of the super-block: half h = j / 4, quarter t = j % 4.
    const Value base = row0 + sb * uint64_t(210);
    const Value h = ir::cast<uint64_t>(j >> 2u), t = j & 3u;
    const Value ql = base + h * uint64_t(64) + ir::cast<uint64_t>(t & 1u) * uint64_t(32);
    const Value qh = base + uint64_t(128) + h * uint64_t(32);
    const Value lshift = s32((t >> 1u) * 4u), hshift = s32(t * 2u);
    const std::vector<Value> lw = words_at(ql, 8), hw = words_at(qh, 8);
    for (uint32_t k = 0; k < 8; ++k) {
      Value low = (lw[k] >> lshift) & 0x0F0F0F0F;
      Value high = ((hw[k] >> hshift) & 0x03030303) << 4;
      w.q.push_back(low | high);
    }
    const Value scales = s32(s_.w16.ir[(base + uint64_t(192) + ir::cast<uint64_t>(j) * uint64_t(2)) >> uint64_t(1)]);
    w.sc0 = (scales << 24) >> 24;  // sign-extended bytes 2j and 2j + 1
    w.sc1 = (scales << 16) >> 24;
    w.f0 = half_at(base + uint64_t(208));
    return w;
  }

  // The unit's contribution for one activation row (a: 8 words, da: its scale).
  Value contribution(const WeightUnit& w, const std::vector<Value>& a, Value da) const {
    const Value ones = b_.constant<int32_t>(0x01010101);
    auto dot = [&](uint32_t k0, uint32_t k1, bool sums) {
      Value s = b_.constant<int32_t>(0);
      for (uint32_t k = k0; k < k1; ++k) s = ir::dp4a(sums ? ones : w.q[k], a[k], s);
      return s;
    };
    if (c_.format == uint32_t(GgmlType::Q8_0)) return (w.f0 * da) * f32(dot(0, 8, false));
    if (c_.format == uint32_t(GgmlType::Q4_K))
      return da * (w.f0 * f32(dot(0, 8, false)) - w.f1 * f32(dot(0, 8, true)));
    // q6_K: sum (q - 32) a = sum q a - 32 sum a, per 16 elements, times their s8 scale.
    const Value lo = dot(0, 4, false) - dot(0, 4, true) * 32;
    const Value hi = dot(4, 8, false) - dot(4, 8, true) * 32;
    return (w.f0 * da) * f32(w.sc0 * lo + w.sc1 * hi);
  }

 private:
  ir::KernelBuilder& b_;
  const QuantMatvecConfig& c_;
  QuantMatvecSignature& s_;
};

}  // namespace

std::string QuantMatvecConfig::str() const {
  return std::string(format_name(format)) + "_" + ir::scalar_name(out) + "_m" + std::to_string(mt) + "_w" +
         std::to_string(warps);
}
std::string QuantActConfig::str() const { return std::string("q8act_") + ir::scalar_name(in) + (sums ? "_sums" : ""); }

ir::Kernel build_quant_act(const QuantActConfig& c) {
  if (c.in != Scalar::F32 && c.in != Scalar::F16 && c.in != Scalar::BF16)
    throw UsageError("", op_name, std::string("activation dtype ") + ir::scalar_name(c.in) + " is not supported (f32, f16, bf16)");
  ir::KernelBuilder b("quant_act_" + c.str());
  QuantActSignature s(c);
  kernel::declare(b, s);
  // The product is launched to overlap this kernel: let it start (it waits for this
  // kernel's writes before it reads them).
  b.launch_dependents();
  // Threads past the end read the last element (so whole warps reach the shuffles) and
  // store nothing; `total` is a multiple of 32, so a warp is wholly in or wholly out.
  const Value i = b.global_id_x();
  const Value in = i < s.total.ir;
  const Value x = ir::cast(s.x.ir[ir::min(i, s.total.ir - 1u)], Type::scalar(Scalar::F32));
  const Value amax = b.warp_reduce_max(ir::abs(x));
  const detail::Q8Scale sc(amax);
  const Value q = sc.q(x);
  const Value qsum = c.sums ? b.warp_reduce_sum(q) : Value();
  b.if_(in, [&] {
    s.q.ir[i] = ir::cast(q, Type::scalar(Scalar::S8));
    b.if_((i & 31u) == 0u, [&] {
      s.d.ir[i >> 5u] = sc.d;
      if (c.sums) s.sum.ir[i >> 5u] = sc.d * ir::cast(qsum, Type::scalar(Scalar::F32));
    });
  });
  return b.build();
}

ir::Kernel build_quant_matvec(const QuantMatvecConfig& c) {
  if (!supported(c.format))
    throw UsageError("", op_name, "weight type " + quant::type_name(c.format) + " is not supported (q8_0, q4_K, q6_K)");
  if (c.out != Scalar::F32 && c.out != Scalar::F16 && c.out != Scalar::BF16)
    throw UsageError("", op_name, std::string("output dtype ") + ir::scalar_name(c.out) + " is not supported (f32, f16, bf16)");
  if (c.mt != 1 && c.mt != 4 && c.mt != 16) throw UsageError("", op_name, "mt must be 1, 4 or 16");
  if (c.warps != 1 && c.warps != 8) throw UsageError("", op_name, "warps per row must be 1 or 8");
  ir::KernelBuilder b("quant_matvec_" + c.str());
  QuantMatvecSignature s(c.out);
  kernel::declare(b, s);
  const uint32_t W = c.warps, rows_per_block = 8 / W;
  const Value tid = b.thread_idx_x(), lane = tid & 31u, warp = tid >> 5u;
  const Value row = b.block_idx_x() * rows_per_block + warp / W;
  // Rows past n compute on the last row (so every lane reaches the shuffles) and store nothing.
  const Value rowc = ir::min(row, s.n.ir - 1u);
  const Value m0 = b.block_idx_y() * c.mt;
  const Value part = (warp % W) * 32u + lane;
  ir::RegArray acc = b.array<float>(c.mt, 0.0f);
  Product p(b, c, s);
  auto add_unit = [&](const WeightUnit& w, Value u) {
    for (uint32_t r = 0; r < c.mt; ++r) {
      const Value mr = ir::min(m0 + r, s.m.ir - 1u);
      const Value unit = mr * s.units.ir + u;  // the activation block
      std::vector<Value> a = ir::load_vec(s.aq.ir, unit * 8u, 4);
      for (Value v : ir::load_vec(s.aq.ir, unit * 8u + 4u, 4)) a.push_back(v);
      acc[r] += p.contribution(w, a, s.ad.ir[unit]);
    }
  };
  // The kernel is launched to overlap the pre-pass (programmatic dependent launch): the
  // weights do not depend on it, so each lane's first unit is loaded while the pre-pass
  // runs, and the activations are read after the wait for it.
  const WeightUnit first = p.weights(rowc, ir::min(part, s.units.ir - 1u));
  b.grid_dependency_wait();
  b.if_(part < s.units.ir, [&] { add_unit(first, part); });
  b.for_(part + 32u * W, s.units.ir, 32u * W, [&](Value u) { add_unit(p.weights(rowc, u), u); });
  auto store = [&](uint32_t r, Value v) {
    b.if_(row < s.n.ir && m0 + r < s.m.ir, [&] {
      const Value at = ir::cast<uint64_t>(m0 + r) * ir::cast<uint64_t>(s.n.ir) + ir::cast<uint64_t>(row);
      s.y.ir[at] = c.out == Scalar::F32 ? v : ir::cast(v, Type::scalar(c.out), ir::Rounding::Rn);
    });
  };
  std::vector<Value> sums;
  for (uint32_t r = 0; r < c.mt; ++r) sums.push_back(b.warp_reduce_sum(acc[r]));
  if (W == 1) {
    b.if_(lane == 0u, [&] {
      for (uint32_t r = 0; r < c.mt; ++r) store(r, sums[r]);
    });
  } else {
    // The 8 warps of the row add their sums through shared memory, in warp order.
    const Value part_sums = b.shared<float>(8 * c.mt);
    b.if_(lane == 0u, [&] {
      for (uint32_t r = 0; r < c.mt; ++r) part_sums[warp * c.mt + r] = sums[r];
    });
    b.barrier();
    b.if_(tid == 0u, [&] {
      for (uint32_t r = 0; r < c.mt; ++r) {
        Value t = part_sums[b.constant<uint32_t>(r)];
        for (uint32_t k = 1; k < 8; ++k) t = t + part_sums[b.constant<uint32_t>(k * c.mt + r)];
        store(r, t);
      }
    });
  }
  return b.build();
}

jit::Family<QuantMatvecConfig>& quant_matvec_family() {
  static jit::Family<QuantMatvecConfig> f("quant_matvec", build_quant_matvec, [] {
    std::vector<QuantMatvecConfig> v;
    for (uint32_t fmt : {8u, 12u, 14u}) {
      for (uint32_t mt : {1u, 4u, 16u})
        for (uint32_t w : {1u, 8u}) v.push_back({fmt, Scalar::F32, mt, w});
      for (Scalar o : {Scalar::F16, Scalar::BF16}) v.push_back({fmt, o, 1, 1});
    }
    return v;
  }());
  return f;
}

jit::Family<QuantActConfig>& quant_act_family() {
  static jit::Family<QuantActConfig> f("quant_act", build_quant_act, [] {
    std::vector<QuantActConfig> v;
    for (bool sums : {false, true})
      for (Scalar in : {Scalar::F32, Scalar::F16, Scalar::BF16}) v.push_back({in, sums});
    return v;
  }());
  return f;
}

size_t quant_matmul_workspace(size_t m, size_t k) { return m * k + m * (k / kQ) * 8; }

namespace detail {

uint32_t quant_matvec_warps(size_t n, size_t k) {
  // A block per row where a warp per row leaves the SMs short of warps and rows are
  // long enough to share among 8 warps.
  const uint64_t warps_wanted = uint64_t(jit::device_info().sm_count) * 32;
  return n < warps_wanted && k / kQ >= 64 ? 8u : 1u;
}

}  // namespace detail

template <class T, class O>
void quant_matmul(Out<O> y, In<uint8_t> w, uint32_t format, In<T> x, size_t m, size_t n, size_t k,
                  Out<uint8_t> workspace, const jit::Stream* stream, uint32_t warps_per_row) {
  if (!supported(format))
    throw UsageError("", op_name, "argument 'format': weight type " + quant::type_name(format) +
                                      " is not supported (q8_0, q4_K, q6_K)");
  const quant::TypeInfo info = *quant::type_info(format);
  if (m == 0 || n == 0 || k == 0)
    throw UsageError("", op_name, "arguments 'm', 'n', 'k': " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                                      std::to_string(k) + " is empty");
  if (k % info.block)
    throw UsageError("", op_name, "argument 'k': " + std::to_string(k) + " is not a multiple of the " + info.name +
                                      " block (" + std::to_string(info.block) + ")");
  if (n > 0xffffffffu || m * k >= (size_t(1) << 32))
    throw UsageError("", op_name, "arguments 'm', 'n', 'k': n and m * k must be below 2^32");
  if (warps_per_row != 0 && warps_per_row != 1 && warps_per_row != 8)
    throw UsageError("", op_name, "argument 'warps_per_row': " + std::to_string(warps_per_row) + " (0, 1 or 8)");
  const size_t row_bytes = k / info.block * info.bytes;
  detail::check_array(op_name, "w", w.address, w.size, n * row_bytes, 1);
  if (w.address % 16)
    throw UsageError("", op_name, "argument 'w': the weights must be 16-byte aligned");
  detail::check_array(op_name, "x", x.address, x.size, m * k, sizeof(T));
  detail::check_array(op_name, "y", y.address, y.size, m * n, sizeof(O));
  detail::check_array(op_name, "workspace", workspace.address, workspace.size, quant_matmul_workspace(m, k), 1);
  if (workspace.address % 16)
    throw UsageError("", op_name, "argument 'workspace': must be 16-byte aligned");

  if (m == 1 && warps_per_row == 0 && detail::quant_matvec_fused_fits(format, ir::ScalarOf<T>::value, n, k)) {
    detail::launch_quant_matvec_fused({format, ir::ScalarOf<T>::value, ir::ScalarOf<O>::value}, w.address, x.address,
                                      y.address, n, k, row_bytes, stream);
    return;
  }
  // The workspace: m * k s8 values, the m * k / 32 scales, then (tensor-core q4_K) the sums.
  const bool mma = warps_per_row == 0 && detail::quant_matmul_mma_picked(format, m, n, k);
  const QuantActConfig ac{ir::ScalarOf<T>::value, mma && format == uint32_t(GgmlType::Q4_K)};
  const uint32_t total = uint32_t(m * k);
  QuantActSignature as(ac);
  as.x.host = x.address;
  as.q.host = workspace.address;
  as.d.host = workspace.address + m * k;
  as.sum.host = workspace.address + m * k + m * (k / kQ) * 4;
  as.total.host = total;
  const kernel::PackedArgs aargs = kernel::pack(as);
  quant_act_family().get(ac).launch_packed(
      {.grid = {(total + kThreads - 1) / kThreads}, .block = {kThreads}, .stream = stream}, aargs.data(), aargs.size());
  if (mma) {
    detail::launch_quant_matmul_mma(
        {format, ir::ScalarOf<O>::value, m <= 8 ? 1u : 2u, detail::quant_matmul_mma_rows(format, m, n, k)}, w.address,
        workspace.address, y.address, m, n, k, row_bytes, stream);
    return;
  }

  QuantMatvecConfig c{format, ir::ScalarOf<O>::value, m == 1 ? 1u : m <= 4 ? 4u : 16u, warps_per_row};
  if (c.warps == 0) c.warps = detail::quant_matvec_warps(n, k);
  QuantMatvecSignature s(c.out);
  s.w8.host = s.w16.host = s.w32.host = s.wh.host = w.address;
  s.aq.host = workspace.address;
  s.ad.host = workspace.address + m * k;
  s.y.host = y.address;
  s.m.host = uint32_t(m);
  s.n.host = uint32_t(n);
  s.units.host = uint32_t(k / kQ);
  s.row_bytes.host = row_bytes;
  const kernel::PackedArgs args = kernel::pack(s);
  const uint32_t rows_per_block = 8 / c.warps;
  const uint32_t gx = uint32_t((n + rows_per_block - 1) / rows_per_block), gy = uint32_t((m + c.mt - 1) / c.mt);
  quant_matvec_family().get(c).launch_packed(
      {.grid = {gx, gy, 1}, .block = {kThreads}, .stream = stream, .overlap_previous = true}, args.data(), args.size());
}

#define KAIO_QUANT_MATMUL(T, O)                                                                                      \
  template void quant_matmul<T, O>(Out<O>, In<uint8_t>, uint32_t, In<T>, size_t, size_t, size_t, Out<uint8_t>, \
                                   const jit::Stream*, uint32_t);
#define KAIO_QUANT_MATMUL_OUT(T) KAIO_QUANT_MATMUL(T, float) KAIO_QUANT_MATMUL(T, kaio::half) KAIO_QUANT_MATMUL(T, kaio::bfloat16)
KAIO_QUANT_MATMUL_OUT(float)
KAIO_QUANT_MATMUL_OUT(kaio::half)
KAIO_QUANT_MATMUL_OUT(kaio::bfloat16)

}  // namespace kaio::ops
