// The rows attention kernel: one warp per query row, online softmax over 32 keys at a time.
//
// Lane l scores key kb + l of the chunk (q broadcast from the lanes that hold it), the warp
// folds the chunk into the row's running max and sum, and each lane accumulates the output
// dimensions l, l + 32, ... over the chunk's keys (P broadcast by shuffles). Any dtype, any
// stride, any arch: the reference the tensor-core kernels are checked against, the
// fallback for what they do not cover, and the decode kernel (GQA rows packed per KV
// head, paged keys, split keys).
#include <cmath>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"

namespace kaio::ops {

namespace detail {

Sequence sequence(ir::KernelBuilder& b, AttentionRowsSignature& s, ir::Value batch) {
  ir::Var qs = b.var<uint32_t>(0u), sq = b.var<uint32_t>(s.sq.ir), ks = b.var<uint32_t>(0u), sk = b.var<uint32_t>(s.sk.ir);
  b.if_((s.flags.ir & uint32_t(kRowsVarlen)) != 0u, [&] {
    ir::Value q0 = s.cu_q.ir[batch];
    ir::Value q1 = s.cu_q.ir[batch + 1u];
    ir::Value k0 = s.cu_k.ir[batch];
    ir::Value k1 = s.cu_k.ir[batch + 1u];
    qs = ir::cast<uint32_t>(q0);
    sq = ir::cast<uint32_t>(q1 - q0);
    ks = ir::cast<uint32_t>(k0);
    sk = ir::cast<uint32_t>(k1 - k0);
  });
  b.if_((s.flags.ir & uint32_t(kRowsSeqused)) != 0u, [&] {
    ir::Value n = s.seqused_k.ir[batch];
    sk = ir::cast<uint32_t>(n);
  });
  return {qs.get(), sq.get(), ks.get(), sk.get()};
}

KeyRange key_range(AttentionRowsSignature& s, const Sequence& seq, ir::Value i, ir::Value split) {
  auto i32 = [](ir::Value v) { return ir::cast<int32_t>(v); };
  ir::Value sk = i32(seq.sk);
  ir::Value center = i32(i) + sk - i32(seq.sq);
  ir::Value wl = s.window_left.ir, wr = s.window_right.ir;
  ir::Value lo = ir::select(wl >= 0, ir::max(center - wl, 0), 0);
  ir::Value hi = ir::select(wr >= 0, ir::min(center + wr + 1, sk), sk);
  ir::Value slo = i32(split * s.split_len.ir);
  lo = ir::max(lo, slo);
  hi = ir::min(hi, slo + i32(s.split_len.ir));
  return {lo, ir::max(hi, lo), center};
}

}  // namespace detail

namespace {

using ir::Scalar;
using ir::Value;

using detail::KeyRange;
using detail::Sequence;

class RowsKernel {
 public:
  RowsKernel(ir::KernelBuilder& b, const AttentionRowsConfig& c, detail::AttentionRowsSignature& s)
      : b_(b), c_(c), s_(s), nt_(c.head_dim / 32) {}

  void build() {
    lane_ = b_.lane_id();
    warp_ = b_.warp_id();
    Value z = b_.block_idx_z();
    batch_ = z / s_.splits.ir;
    split_ = z - batch_ * s_.splits.ir;
    const Sequence seq = detail::sequence(b_, s_, batch_);
    Value rows = seq.sq * s_.pack.ir;
    Value first = b_.block_idx_x() * s_.rows_per_block.ir;
    b_.for_(warp_, s_.rows_per_block.ir, c_.warps, [&](Value rr) {
      Value r = first + rr;
      b_.if_(r < rows, [&] { row(seq, r); });
    });
  }

 private:
  bool on(uint32_t flag) const { return flag != 0; }
  Value flag(uint32_t f) { return (s_.flags.ir & f) != 0u; }
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value i32(Value v) { return ir::cast<int32_t>(v); }

  // The element offset of key j of KV head h: (kstart + j) along the sequence of batch
  // entry b, or slot j % page_size of the page the block table names.
  Value kv_offset(const Sequence& seq, Value j, Value h, Value bs, Value ss, Value hs) {
    ir::Var off = b_.var<uint64_t>(u64(batch_) * bs + u64(seq.kstart + j) * ss + u64(h) * hs);
    b_.if_(flag(detail::kRowsPaged), [&] {
      Value page = s_.block_table.ir[u64(batch_) * u64(s_.max_pages.ir) + u64(j >> s_.page_shift.ir)];
      Value in_page = j & ((1u << s_.page_shift.ir) - 1u);
      off = u64(ir::cast<uint32_t>(page)) * bs + u64(in_page) * ss + u64(h) * hs;
    });
    return off.get();
  }

  // This lane's share of the query row, times the softmax scale: dims lane + 32 t.
  ir::RegArray load_q(Value base) {
    ir::RegArray q = b_.array<float>(nt_, 0.0f);
    for (uint32_t t = 0; t < nt_; ++t) {
      Value x = s_.q.ir[base + u64(lane_ + 32u * t)];
      q[t] = ir::cast<float>(x) * s_.scale.ir;
    }
    return q;
  }

  // q . k for this lane's key (offset koff): q's dims broadcast from the lanes holding them.
  Value score(const ir::RegArray& q, Value koff) {
    ir::Var acc = b_.var<float>(0.0f);
    for (uint32_t t = 0; t < nt_; ++t)
      for (uint32_t src = 0; src < 32; ++src) {
        Value qd = ir::shfl_idx(q[t].get(), src);
        Value kv = s_.k.ir[koff + uint64_t(32 * t + src)];
        acc = ir::fma(qd, ir::cast<float>(kv), acc.get());
      }
    return acc.get();
  }

  // softcap, then ALiBi, then the mask (keys at or past hi).
  Value modify(Value s, Value j, const KeyRange& kr, Value slope) {
    ir::Var sv = b_.var<float>(s);
    Value cap = s_.softcap.ir;
    b_.if_(cap > 0.0f, [&] { sv = cap * ir::tanh(sv.get() / cap); });
    Value dist = ir::cast<float>(ir::abs(kr.center - i32(j)));
    Value out = sv.get() - slope * dist;
    return ir::select(i32(j) < kr.hi, out, -INFINITY);
  }

  // The running statistics of one row: max m, this lane's share of the sum l, and the
  // lane's output dims.
  struct Online {
    ir::Var m, l;
    ir::RegArray acc;
  };

  // Folds a chunk's scores into the row; returns the chunk's probabilities P.
  Value online_softmax(Online& st, Value s) {
    Value m_old = st.m;
    Value m_new = ir::max(m_old, b_.warp_reduce_max(s));
    Value ms = ir::select(m_new == -INFINITY, 0.0f, m_new);  // a fully masked row so far: exp(-inf) = 0, not NaN
    Value p = ir::exp(s - ms);
    Value corr = ir::exp(m_old - ms);
    st.l = st.l.get() * corr + p;
    for (uint32_t t = 0; t < nt_; ++t) st.acc[t] = st.acc[t].get() * corr;
    st.m = m_new;
    return p;
  }

  // O += P V over the chunk's n keys from kb.
  void accumulate_pv(Online& st, const Sequence& seq, Value p, Value kb, Value n, Value kvh) {
    b_.for_(0u, n, [&](Value src) {
      Value pj = ir::shfl_idx(p, src);
      Value voff = kv_offset(seq, kb + src, kvh, s_.v_bs.ir, s_.v_ss.ir, s_.v_hs.ir);
      for (uint32_t t = 0; t < nt_; ++t) {
        Value x = s_.v.ir[voff + u64(lane_ + 32u * t)];
        st.acc[t] = ir::fma(pj, ir::cast<float>(x), st.acc[t].get());
      }
    });
  }

  // o = acc / l and lse = m + log l (0 and -inf for a row that saw no key), or this
  // split's partial pair into the workspace.
  void epilogue(Online& st, const Sequence& seq, Value tok, Value qh) {
    Value l = b_.warp_reduce_sum(st.l);
    Value seen = l > 0.0f;
    Value inv = ir::select(seen, 1.0f / l, 0.0f);
    Value lse = ir::select(seen, st.m.get() + ir::log(l), -INFINITY);
    b_.if_(s_.splits.ir > 1u, [&] {
      Value row = (u64(batch_) * u64(s_.sq.ir) + u64(tok)) * u64(s_.hq.ir) + u64(qh);
      row = row * u64(s_.splits.ir) + u64(split_);
      for (uint32_t t = 0; t < nt_; ++t) s_.ws_o.ir[row * uint64_t(c_.head_dim) + u64(lane_ + 32u * t)] = st.acc[t].get() * inv;
      b_.if_(lane_ == 0u, [&] { s_.ws_lse.ir[row] = lse; });
    }).else_([&] {
      Value ob = u64(batch_) * s_.o_bs.ir + u64(seq.qstart + tok) * s_.o_ss.ir + u64(qh) * s_.o_hs.ir;
      for (uint32_t t = 0; t < nt_; ++t) {
        Value y = st.acc[t].get() * inv;
        s_.o.ir[ob + u64(lane_ + 32u * t)] = c_.dtype == Scalar::F32 ? y : ir::cast(y, ir::Type::scalar(c_.dtype), ir::Rounding::Rn);
      }
      b_.if_(flag(detail::kRowsLse) && lane_ == 0u, [&] {
        s_.lse.ir[u64(batch_) * s_.lse_bs.ir + u64(qh) * s_.lse_hs.ir + u64(seq.qstart + tok)] = lse;
      });
    });
  }

  void row(const Sequence& seq, Value r) {
    Value tok = r / s_.pack.ir;
    Value qh = b_.block_idx_y() * s_.pack.ir + (r - tok * s_.pack.ir);
    Value kvh = qh / s_.group.ir;
    Value qbase = u64(batch_) * s_.q_bs.ir + u64(seq.qstart + tok) * s_.q_ss.ir + u64(qh) * s_.q_hs.ir;
    const ir::RegArray q = load_q(qbase);
    ir::Var slope = b_.var<float>(0.0f);
    b_.if_(flag(detail::kRowsAlibi), [&] {
      Value a = s_.alibi.ir[qh];
      slope = a;
    });
    const KeyRange kr = detail::key_range(s_, seq, tok, split_);
    Online st{b_.var<float>(-INFINITY), b_.var<float>(0.0f), b_.array<float>(nt_, 0.0f)};
    Value hi = ir::cast<uint32_t>(kr.hi);
    b_.for_(ir::cast<uint32_t>(kr.lo), hi, 32u, [&](Value kb) {
      Value j = kb + lane_;
      Value jj = ir::min(j, hi - 1u);  // lanes past the end score the last key (masked): every lane shuffles
      Value koff = kv_offset(seq, jj, kvh, s_.k_bs.ir, s_.k_ss.ir, s_.k_hs.ir);
      Value s = modify(score(q, koff), j, kr, slope);
      Value p = online_softmax(st, s);
      accumulate_pv(st, seq, p, kb, ir::min(hi - kb, 32u), kvh);
    });
    epilogue(st, seq, tok, qh);
  }

  ir::KernelBuilder& b_;
  const AttentionRowsConfig& c_;
  detail::AttentionRowsSignature& s_;
  const uint32_t nt_;  // output dims per lane
  Value lane_, warp_, batch_, split_;
};

void check_config(const char* op, ir::Scalar dtype, uint32_t head_dim) {
  if (dtype != Scalar::F32 && dtype != Scalar::F16 && dtype != Scalar::BF16)
    throw UsageError("", op, std::string("dtype ") + ir::scalar_name(dtype) + " is not supported (f32, f16, bf16)");
  if (head_dim == 0 || head_dim % 32 || head_dim > 256)
    throw UsageError("", op, "head_dim " + std::to_string(head_dim) + " is not supported (64, 96, 128, 256)");
}

ir::Kernel build_rows(const AttentionRowsConfig& c) {
  check_config("attention", c.dtype, c.head_dim);
  ir::KernelBuilder b(std::string("attention_rows_") + ir::scalar_name(c.dtype) + "_d" + std::to_string(c.head_dim) + "_w" +
                      std::to_string(c.warps));
  detail::AttentionRowsSignature sig(c.dtype);
  kernel::declare(b, sig);
  b.launch_bounds(32 * c.warps);
  RowsKernel(b, c, sig).build();
  return b.build();
}

// One block of 128 threads per row, its threads over the splits (a split's partials are
// read in parallel, not one after another): the max of the splits' logsumexps and the sum
// of their weights (block reductions), then thread (lane sl, vector v) adds the weighted
// 4-float vectors v of splits sl, sl + lanes, ... (eight splits' loads in flight at a time),
// and the lanes' sums meet in shared memory.
ir::Kernel build_combine(const AttentionCombineConfig& c) {
  check_config("attention_decode", c.dtype, c.head_dim);
  ir::KernelBuilder b(std::string("attention_combine_") + ir::scalar_name(c.dtype) + "_d" + std::to_string(c.head_dim));
  detail::AttentionCombineSignature s(c.dtype);
  kernel::declare(b, s);
  constexpr uint32_t kThreads = 128, kUnroll = 8;
  b.launch_bounds(kThreads);
  const uint32_t D = c.head_dim, nv = D / 4, lanes = kThreads / nv;
  auto u64 = [](Value v) { return ir::cast<uint64_t>(v); };
  Value tid = b.thread_idx_x();
  Value row = b.block_idx_x();
  Value n = s.splits.ir;
  Value first = u64(row) * u64(n);
  ir::Var m = b.var<float>(-INFINITY);
  b.for_(tid, n, kThreads, [&](Value p) {
    Value x = s.ws_lse.ir[first + u64(p)];
    m = ir::max(m.get(), x);
  });
  Value mx = b.block_reduce_max(m.get());
  Value ms = ir::select(mx == -INFINITY, 0.0f, mx);
  ir::Var sum = b.var<float>(0.0f);
  b.for_(tid, n, kThreads, [&](Value p) {
    Value x = s.ws_lse.ir[first + u64(p)];
    sum = sum.get() + ir::exp(x - ms);
  });
  Value total = b.block_reduce_sum(sum.get());
  Value sl = tid / nv, v = tid % nv;
  ir::RegArray acc = b.array<float>(4, 0.0f);
  b.if_(sl < lanes, [&] {
    b.for_(sl, n, lanes * kUnroll, [&](Value p0) {
      std::vector<Value> w;
      std::vector<std::vector<Value>> y;
      for (uint32_t u = 0; u < kUnroll; ++u) {  // past the last split: its weight is 0 (the loads stay in bounds)
        Value p = p0 + u * lanes;
        Value pc = ir::min(p, n - 1u);
        Value x = s.ws_lse.ir[first + u64(pc)];
        w.push_back(ir::select(p < n, ir::exp(x - ms), 0.0f));
        y.push_back(ir::load_vec(s.ws_o.ir, (first + u64(pc)) * uint64_t(D) + u64(v * 4u), 4));
      }
      for (uint32_t u = 0; u < kUnroll; ++u)
        for (uint32_t e = 0; e < 4; ++e) acc[e] = ir::fma(w[u], y[u][e], acc[e].get());
    });
  });
  Value red = b.shared<float>(lanes * D);
  b.if_(sl < lanes, [&] { ir::store_vec(red, sl * D + v * 4u, {acc[0].get(), acc[1].get(), acc[2].get(), acc[3].get()}); });
  b.barrier();
  Value seen = total > 0.0f;
  Value inv = ir::select(seen, 1.0f / total, 0.0f);
  Value per_b = s.sq.ir * s.hq.ir;
  Value bi = row / per_b;
  Value rem = row - bi * per_b;
  Value tok = rem / s.hq.ir;
  Value h = rem - tok * s.hq.ir;
  Value ob = u64(bi) * s.o_bs.ir + u64(tok) * s.o_ss.ir + u64(h) * s.o_hs.ir;
  b.for_(tid, D, kThreads, [&](Value d) {
    ir::Var y = b.var<float>(0.0f);
    for (uint32_t l = 0; l < lanes; ++l) {
      Value x = red[l * D + d];
      y = y.get() + x;
    }
    Value out = y.get() * inv;
    s.o.ir[ob + u64(d)] = c.dtype == Scalar::F32 ? out : ir::cast(out, ir::Type::scalar(c.dtype), ir::Rounding::Rn);
  });
  b.if_(s.lse_hs.ir != uint64_t(0) && tid == 0u, [&] {
    s.lse.ir[u64(bi) * s.lse_bs.ir + u64(h) * s.lse_hs.ir + u64(tok)] = ir::select(seen, ms + ir::log(total), -INFINITY);
  });
  return b.build();
}

const uint32_t kHeadDims[] = {64, 96, 128, 256};
const Scalar kDtypes[] = {Scalar::F16, Scalar::BF16, Scalar::F32};

}  // namespace

std::string AttentionRowsConfig::str() const {
  return std::string("attention_rows(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " +
         std::to_string(warps) + " warps)";
}

std::string AttentionCombineConfig::str() const {
  return std::string("attention_combine(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ")";
}

jit::Family<AttentionRowsConfig>& attention_rows_family() {
  static jit::Family<AttentionRowsConfig> f("attention_rows", build_rows, [] {
    std::vector<AttentionRowsConfig> v;
    for (Scalar s : kDtypes)
      for (uint32_t d : kHeadDims) v.push_back({s, d, 4});
    return v;
  }());
  return f;
}

jit::Family<AttentionCombineConfig>& attention_combine_family() {
  static jit::Family<AttentionCombineConfig> f("attention_combine", build_combine, [] {
    std::vector<AttentionCombineConfig> v;
    for (Scalar s : kDtypes)
      for (uint32_t d : kHeadDims) v.push_back({s, d});
    return v;
  }());
  return f;
}

}  // namespace kaio::ops
