// The scalar attention backward kernels: one warp per row, lanes over the head dimension.
//
// Dot: D = rowsum(do * o) per query row. Dq: the warp of query row i walks the keys the row
// sees and accumulates dq = scale * sum_j ds_ij k_j. Dkv: the warp of key j walks, for each
// query head of its KV head's group in turn, the query rows that see key j and accumulates
// dv = sum_i p_ij do_i and dk = scale * sum_i ds_ij q_i. Per (i, j) both recompute
// s = mods(scale q.k), p = exp(s - lse_i), dp = do_i . v_j and ds = p (dp - D_i) mods'.
// Every sum runs in one fixed order and nothing is accumulated with atomics: the results
// are bit-identical run to run. Any dtype, any stride, any arch: the reference for the
// tensor-core kernels and the fallback for what they do not cover.
#include <cmath>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/attention_backward_kernels.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Value;
using Part = AttentionBackwardPart;

Value u64(Value v) { return ir::cast<uint64_t>(v); }
Value i32(Value v) { return ir::cast<int32_t>(v); }

Value to_dtype(Value y, Scalar dtype) {
  return dtype == Scalar::F32 ? y : ir::cast(y, ir::Type::scalar(dtype), ir::Rounding::Rn);
}

// The first row / key of batch entry b and the lengths (varlen: from the prefix sums).
struct Seq {
  Value qstart, sq, kstart, sk;
};
template <class Sig>
Seq sequence(ir::KernelBuilder& b, Sig& s, Value batch, Value sk_fixed) {
  ir::Var qs = b.var<uint32_t>(0u), sq = b.var<uint32_t>(s.sq.ir), ks = b.var<uint32_t>(0u), sk = b.var<uint32_t>(sk_fixed);
  b.if_((s.flags.ir & uint32_t(detail::kBwdVarlen)) != 0u, [&] {
    Value q0 = s.cu_q.ir[batch];
    Value q1 = s.cu_q.ir[batch + 1u];
    qs = ir::cast<uint32_t>(q0);
    sq = ir::cast<uint32_t>(q1 - q0);
    if constexpr (requires { s.cu_k; }) {
      Value k0 = s.cu_k.ir[batch];
      Value k1 = s.cu_k.ir[batch + 1u];
      ks = ir::cast<uint32_t>(k0);
      sk = ir::cast<uint32_t>(k1 - k0);
    }
  });
  return {qs.get(), sq.get(), ks.get(), sk.get()};
}

ir::Kernel build_dot(ir::KernelBuilder& b, const AttentionBackwardRowsConfig& c) {
  detail::AttentionDotSignature s(c.dtype);
  kernel::declare(b, s);
  b.launch_bounds(32 * c.warps);
  const uint32_t nt = c.head_dim / 32;
  Value lane = b.lane_id(), batch = b.block_idx_z(), h = b.block_idx_y();
  Value i = b.block_idx_x() * c.warps + b.warp_id();
  const Seq seq = sequence(b, s, batch, s.sq.ir);
  b.if_(i < seq.sq, [&] {
    Value row = seq.qstart + i;
    Value ob = u64(batch) * s.o_bs.ir + u64(row) * s.o_ss.ir + u64(h) * s.o_hs.ir;
    Value db = u64(batch) * s.do_bs.ir + u64(row) * s.do_ss.ir + u64(h) * s.do_hs.ir;
    ir::Var acc = b.var<float>(0.0f);
    for (uint32_t t = 0; t < nt; ++t) {
      Value e = u64(lane + 32u * t);
      Value o = s.o.ir[ob + e];
      Value d = s.dout.ir[db + e];
      acc = ir::fma(ir::cast<float>(o), ir::cast<float>(d), acc.get());
    }
    Value sum = b.warp_reduce_sum(acc.get());
    b.if_(lane == 0u, [&] {
      Value local = (s.flags.ir & uint32_t(detail::kBwdStatsLocal)) != 0u;
      Value at = u64(batch) * s.st_bs.ir + u64(h) * s.st_hs.ir + u64(ir::select(local, i, row));
      s.delta.ir[at] = sum;
      b.if_((s.flags.ir & uint32_t(detail::kBwdLse2)) != 0u, [&] {
        Value l = s.lse.ir[u64(batch) * s.lse_bs.ir + u64(h) * s.lse_hs.ir + u64(row)];
        s.lse2.ir[at] = l * 1.4426950408889634f;
      });
    });
  });
  // Local stats (the wgmma kernels on a varlen batch): the rows from a sequence's end to the
  // longest one's lie inside the kernels' maps, and are read for the masked rows of a tile;
  // they hold zeros, not the workspace's old bytes (dS = P (dP - D) is 0 for a masked row
  // only while D is finite).
  b.if_((s.flags.ir & uint32_t(detail::kBwdStatsLocal)) != 0u && i >= seq.sq && i < s.sq.ir && lane == 0u, [&] {
    Value at = u64(batch) * s.st_bs.ir + u64(h) * s.st_hs.ir + u64(i);
    s.delta.ir[at] = 0.0f;
    s.lse2.ir[at] = 0.0f;
  });
  return b.build();
}

class GradKernel {
 public:
  GradKernel(ir::KernelBuilder& b, const AttentionBackwardRowsConfig& c, detail::AttentionBwdSignature& s)
      : b_(b), c_(c), s_(s), nt_(c.head_dim / 32) {}

  void build() {
    lane_ = b_.lane_id();
    batch_ = b_.block_idx_z();
    seq_ = sequence(b_, s_, batch_, s_.sk.ir);
    Value r = b_.block_idx_x() * c_.warps + b_.warp_id();
    if (c_.part == Part::Dq) b_.if_(r < seq_.sq, [&] { dq_row(r); });
    else b_.if_(r < seq_.sk, [&] { dkv_row(r); });
  }

 private:
  Value flag(uint32_t f) { return (s_.flags.ir & f) != 0u; }
  Value elem(uint32_t t) { return u64(lane_ + 32u * t); }
  Value offset(Value row, Value h, const kernel::Param<uint64_t>& bs, const kernel::Param<uint64_t>& ss,
               const kernel::Param<uint64_t>& hs) {
    return u64(batch_) * bs.ir + u64(row) * ss.ir + u64(h) * hs.ir;
  }
  ir::RegArray load(const kernel::Ptr& p, Value base) {
    ir::RegArray x = b_.array<float>(nt_, 0.0f);
    for (uint32_t t = 0; t < nt_; ++t) {
      Value y = p.ir[base + elem(t)];
      x[t] = ir::cast<float>(y);
    }
    return x;
  }
  Value dot(const ir::RegArray& a, const ir::RegArray& x) {
    ir::Var acc = b_.var<float>(0.0f);
    for (uint32_t t = 0; t < nt_; ++t) acc = ir::fma(a[t].get(), x[t].get(), acc.get());
    return b_.warp_reduce_sum(acc.get());
  }
  Value slope_of(Value h) {
    ir::Var slope = b_.var<float>(0.0f);
    b_.if_(flag(detail::kBwdAlibi), [&] {
      Value a = s_.alibi.ir[h];
      slope = a;
    });
    return slope.get();
  }

  // ds_ij (times the softcap's derivative) and p_ij from q.k, do.v, the row's lse and D.
  struct Grad {
    Value p, ds;
  };
  Grad grad(Value qk, Value dp, Value lse, Value delta, Value i, Value j, Value slope) {
    ir::Var sv = b_.var<float>(qk * s_.scale.ir);
    ir::Var deriv = b_.var<float>(1.0f);
    Value cap = s_.softcap.ir;
    b_.if_(cap > 0.0f, [&] {
      Value t = ir::tanh(sv.get() / cap);
      sv = cap * t;
      deriv = 1.0f - t * t;
    });
    Value center = i32(i) + i32(seq_.sk) - i32(seq_.sq);
    Value dist = ir::cast<float>(ir::abs(center - i32(j)));
    Value p = ir::exp(sv.get() - slope * dist - lse);
    return {p, p * (dp - delta) * deriv.get()};
  }

  void dq_row(Value i) {
    Value h = b_.block_idx_y(), kvh = h / s_.group.ir;
    Value row = seq_.qstart + i;
    const ir::RegArray q = load(s_.q, offset(row, h, s_.q_bs, s_.q_ss, s_.q_hs));
    const ir::RegArray d = load(s_.dout, offset(row, h, s_.do_bs, s_.do_ss, s_.do_hs));
    Value li = u64(batch_) * s_.lse_bs.ir + u64(h) * s_.lse_hs.ir + u64(row);
    Value lse = s_.lse.ir[li];
    Value delta = s_.delta.ir[li];
    Value slope = slope_of(h);
    // The keys [lo, hi) row i sees (bottom-right aligned window).
    Value sk = i32(seq_.sk), center = i32(i) + sk - i32(seq_.sq);
    Value wl = s_.window_left.ir, wr = s_.window_right.ir;
    Value lo = ir::select(wl >= 0, ir::max(center - wl, 0), 0);
    Value hi = ir::select(wr >= 0, ir::min(center + wr + 1, sk), sk);
    ir::RegArray acc = b_.array<float>(nt_, 0.0f);
    b_.for_(ir::cast<uint32_t>(lo), ir::cast<uint32_t>(ir::max(hi, lo)), [&](Value j) {
      Value key = seq_.kstart + j;
      const ir::RegArray k = load(s_.k, offset(key, kvh, s_.k_bs, s_.k_ss, s_.k_hs));
      const ir::RegArray v = load(s_.v, offset(key, kvh, s_.v_bs, s_.v_ss, s_.v_hs));
      const Grad g = grad(dot(q, k), dot(d, v), lse, delta, i, j, slope);
      for (uint32_t t = 0; t < nt_; ++t) acc[t] = ir::fma(g.ds, k[t].get(), acc[t].get());
    });
    Value out = offset(row, h, s_.dq_bs, s_.dq_ss, s_.dq_hs);
    for (uint32_t t = 0; t < nt_; ++t) s_.dq.ir[out + elem(t)] = to_dtype(acc[t].get() * s_.scale.ir, c_.dtype);
  }

  void dkv_row(Value j) {
    Value kvh = b_.block_idx_y();
    Value key = seq_.kstart + j;
    const ir::RegArray k = load(s_.k, offset(key, kvh, s_.k_bs, s_.k_ss, s_.k_hs));
    const ir::RegArray v = load(s_.v, offset(key, kvh, s_.v_bs, s_.v_ss, s_.v_hs));
    // The query rows [lo, hi) that see key j: the window's bounds solved for i.
    Value sq = i32(seq_.sq), off = i32(seq_.sk) - sq, jj = i32(j);
    Value wl = s_.window_left.ir, wr = s_.window_right.ir;
    Value lo = ir::select(wr >= 0, ir::max(jj - off - wr, 0), 0);
    Value hi = ir::select(wl >= 0, ir::min(jj - off + wl + 1, sq), sq);
    Value ulo = ir::cast<uint32_t>(lo), uhi = ir::cast<uint32_t>(ir::max(hi, lo));
    ir::RegArray dk = b_.array<float>(nt_, 0.0f), dv = b_.array<float>(nt_, 0.0f);
    b_.for_(0u, s_.group.ir, [&](Value g) {  // the group's query heads in order
      Value h = kvh * s_.group.ir + g;
      Value slope = slope_of(h);
      b_.for_(ulo, uhi, [&](Value i) {
        Value row = seq_.qstart + i;
        const ir::RegArray q = load(s_.q, offset(row, h, s_.q_bs, s_.q_ss, s_.q_hs));
        const ir::RegArray d = load(s_.dout, offset(row, h, s_.do_bs, s_.do_ss, s_.do_hs));
        Value li = u64(batch_) * s_.lse_bs.ir + u64(h) * s_.lse_hs.ir + u64(row);
        Value lse = s_.lse.ir[li];
        Value delta = s_.delta.ir[li];
        const Grad gr = grad(dot(q, k), dot(d, v), lse, delta, i, j, slope);
        for (uint32_t t = 0; t < nt_; ++t) {
          dv[t] = ir::fma(gr.p, d[t].get(), dv[t].get());
          dk[t] = ir::fma(gr.ds, q[t].get(), dk[t].get());
        }
      });
    });
    Value ko = offset(key, kvh, s_.dk_bs, s_.dk_ss, s_.dk_hs), vo = offset(key, kvh, s_.dv_bs, s_.dv_ss, s_.dv_hs);
    for (uint32_t t = 0; t < nt_; ++t) {
      s_.dk.ir[ko + elem(t)] = to_dtype(dk[t].get() * s_.scale.ir, c_.dtype);
      s_.dv.ir[vo + elem(t)] = to_dtype(dv[t].get(), c_.dtype);
    }
  }

  ir::KernelBuilder& b_;
  const AttentionBackwardRowsConfig& c_;
  detail::AttentionBwdSignature& s_;
  const uint32_t nt_;
  Value lane_, batch_;
  Seq seq_;
};

const char* part_name(Part p) {
  switch (p) {
    case Part::Dot: return "dot";
    case Part::Dq: return "dq";
    case Part::Dkv: return "dkv";
  }
  return "?";
}

ir::Kernel build_rows(const AttentionBackwardRowsConfig& c) {
  if (c.dtype != Scalar::F32 && c.dtype != Scalar::F16 && c.dtype != Scalar::BF16)
    throw UsageError("", "attention_backward", std::string("dtype ") + ir::scalar_name(c.dtype) + " is not supported (f32, f16, bf16)");
  if (c.head_dim == 0 || c.head_dim % 32 || c.head_dim > 256)
    throw UsageError("", "attention_backward", "head_dim " + std::to_string(c.head_dim) + " is not supported (64, 96, 128, 256)");
  ir::KernelBuilder b(std::string("attention_bwd_") + part_name(c.part) + "_" + ir::scalar_name(c.dtype) + "_d" +
                      std::to_string(c.head_dim) + "_w" + std::to_string(c.warps));
  if (c.part == Part::Dot) return build_dot(b, c);
  detail::AttentionBwdSignature s(c.dtype);
  kernel::declare(b, s);
  b.launch_bounds(32 * c.warps);
  GradKernel(b, c, s).build();
  return b.build();
}

}  // namespace

namespace detail {
BwdSequence bwd_sequence(ir::KernelBuilder& b, AttentionBwdSignature& s, ir::Value batch) {
  const Seq q = sequence(b, s, batch, s.sk.ir);
  return {q.qstart, q.sq, q.kstart, q.sk};
}
}  // namespace detail

std::string AttentionBackwardRowsConfig::str() const {
  return std::string("attention_bwd_rows(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " + part_name(part) +
         ", " + std::to_string(warps) + " warps)";
}

jit::Family<AttentionBackwardRowsConfig>& attention_backward_rows_family() {
  static jit::Family<AttentionBackwardRowsConfig> f("attention_bwd_rows", build_rows, [] {
    std::vector<AttentionBackwardRowsConfig> v;
    for (Scalar s : {Scalar::F16, Scalar::BF16, Scalar::F32})
      for (uint32_t d : {64u, 96u, 128u, 256u})
        for (Part p : {Part::Dot, Part::Dq, Part::Dkv}) v.push_back({s, d, p, 4});
    return v;
  }());
  return f;
}

}  // namespace kaio::ops
