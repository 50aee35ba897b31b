#include "kaio/ops/rope.h"

#include <cmath>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/signature.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Value;

const char* style_name(RopeStyle s) { return s == RopeStyle::NeoX ? "neox" : "gptj"; }

// Pairs one thread rotates: a 16-byte vector of each half (NeoX), the pairs inside one
// 16-byte vector (GPT-J), or one pair (scalar accesses).
uint32_t pairs_per_unit(const RopeConfig& c) {
  if (c.vec == 1) return 1;
  return c.style == RopeStyle::NeoX ? c.vec : c.vec / 2;
}

class Access {
 public:
  Access(const RopeConfig& c) : c_(c), f32_(ir::Type::scalar(Scalar::F32)) {}
  // n consecutive elements from element index idx (u64) of p, in f32: one 16-byte access
  // (n == vec) or n scalar loads.
  std::vector<Value> load(Value p, Value idx, uint32_t n) const {
    std::vector<Value> out;
    if (c_.vec > 1 && p.type().elem == Scalar::F32) {
      for (Value v : ir::load_vec(p, idx, 4)) out.push_back(v);
    } else if (c_.vec > 1) {
      for (Value v : ir::load_vec(p, idx >> 1u, 4)) {
        out.push_back(ir::cast(ir::unpack_lo(v), f32_));
        out.push_back(ir::cast(ir::unpack_hi(v), f32_));
      }
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        Value v = i ? p[idx + uint64_t(i)] : p[idx];
        out.push_back(c_.dtype == Scalar::F32 ? v : ir::cast(v, f32_));
      }
    }
    return out;
  }
  void store(Value p, Value idx, const std::vector<Value>& v) const {
    const ir::Type dt = ir::Type::scalar(c_.dtype);
    auto round = [&](Value x) { return c_.dtype == Scalar::F32 ? x : ir::cast(x, dt, ir::Rounding::Rn); };
    if (c_.vec > 1 && p.type().elem == Scalar::F32) {
      ir::store_vec(p, idx, v);
    } else if (c_.vec > 1) {
      std::vector<Value> packed;
      for (size_t j = 0; j < v.size(); j += 2) {
        Value lo = round(v[j]);
        Value hi = round(v[j + 1]);
        packed.push_back(ir::pack2(lo, hi));
      }
      ir::store_vec(p, idx >> 1u, packed);
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) p[idx + uint64_t(i)] = round(v[i]);
        else p[idx] = round(v[i]);
      }
    }
  }

 private:
  RopeConfig c_;
  ir::Type f32_;
};

// The kernels' parameters, declared by build and packed by run.
struct RopeSignature {
  kernel::Ptr x{"x"}, y{"y"}, cos{"cos"}, sin{"sin"};
  kernel::Param<uint32_t> units_total{"units_total"};  // tokens * heads * units
  kernel::Param<uint32_t> units{"units"};              // per head: rotation units, then copy units
  kernel::Param<uint32_t> rot_units{"rot_units"}, heads{"heads"}, head_dim{"head_dim"}, rotary_dim{"rotary_dim"};
  kernel::Param<uint64_t> x_stride{"x_stride"}, y_stride{"y_stride"}, table_stride{"table_stride"};
  kernel::Param<uint32_t> position_offset{"position_offset"};
  kernel::Param<float> freq_exp{"freq_exp"};
  kernel::Param<uint32_t> table_vec{"table_vec"};
  // `access`: the row pointers' element (pairs for 16-bit vectors); `table`: the tables'.
  RopeSignature(Scalar access, Scalar table) {
    x.elem = y.elem = access;
    cos.elem = sin.elem = table;
    x.is_const = cos.is_const = sin.is_const = true;
  }
  auto fields() {
    return std::tie(x, y, cos, sin, units_total, units, rot_units, heads, head_dim, rotary_dim, x_stride, y_stride, table_stride,
                    position_offset, freq_exp, table_vec);
  }
};

ir::Kernel build(const RopeConfig& c) {
  detail::check_dtype("rope", "x", c.dtype);
  if (c.table != Scalar::Pred) detail::check_dtype("rope", "cos", c.table);
  ir::KernelBuilder b("rope" + std::string("_") + ir::scalar_name(c.dtype) + "_" + style_name(c.style) + "_v" +
                      std::to_string(c.vec) + (c.table == Scalar::Pred ? std::string("_theta") :
                                                 std::string("_table_") + ir::scalar_name(c.table)));
  const Scalar acc = detail::access_type(c.dtype, c.vec);
  const Scalar tab = c.table == Scalar::Pred ? Scalar::F32 : c.table;
  RopeSignature sig(acc, tab);
  kernel::declare(b, sig);
  Value x = sig.x.ir, y = sig.y.ir, cos_t = sig.cos.ir, sin_t = sig.sin.ir;
  Value units_total = sig.units_total.ir, units = sig.units.ir, rot_units = sig.rot_units.ir, heads = sig.heads.ir;
  Value head_dim = sig.head_dim.ir, rot = sig.rotary_dim.ir, xs = sig.x_stride.ir, ys = sig.y_stride.ir;
  Value ts = sig.table_stride.ir, offset = sig.position_offset.ir, freq_exp = sig.freq_exp.ir, table_vec = sig.table_vec.ir;
  b.launch_bounds(256);
  const uint32_t pv = pairs_per_unit(c);
  Access io(c);
  Value g = b.global_id_x();
  b.if_(g < units_total, [&] {
    Value per_token = heads * units;
    Value token = g / per_token;
    Value rem = g - token * per_token;
    Value head = rem / units;
    Value u = rem - head * units;
    Value hoff = ir::cast<uint64_t>(head * head_dim);
    Value xb = ir::cast<uint64_t>(token) * xs + hoff;
    Value yb = ir::cast<uint64_t>(token) * ys + hoff;
    b.if_(u < rot_units, [&] {
      Value pos = offset + token;
      Value p0 = u * pv;  // first pair of this unit
      // cos and sin of pair p0 + i.
      std::vector<Value> cs, sn;
      const bool vector_table = c.table == Scalar::F32 && pv >= 2;
      if (vector_table) {
        // The unit's pv consecutive f32 table entries in 8- or 16-byte loads when the host
        // found the tables aligned (table_vec): scalar loads would cost a pass over L1 each.
        const int w = pv >= 4 ? 4 : 2;
        ir::RegArray cv = b.array<float>(pv, 0.0f), sv = b.array<float>(pv, 0.0f);
        Value t0 = ir::cast<uint64_t>(pos) * ts + ir::cast<uint64_t>(p0);
        b.if_(table_vec != 0u, [&] {
          for (uint32_t i = 0; i < pv; i += w) {
            std::vector<Value> a = ir::load_vec(cos_t, i ? t0 + uint64_t(i) : t0, w);
            std::vector<Value> s = ir::load_vec(sin_t, i ? t0 + uint64_t(i) : t0, w);
            for (int j = 0; j < w; ++j) {
              cv[i + j] = a[j];
              sv[i + j] = s[j];
            }
          }
        }).else_([&] {
          for (uint32_t i = 0; i < pv; ++i) {
            Value a = cos_t[i ? t0 + uint64_t(i) : t0];
            Value s = sin_t[i ? t0 + uint64_t(i) : t0];
            cv[i] = a;
            sv[i] = s;
          }
        });
        for (uint32_t i = 0; i < pv; ++i) {
          cs.push_back(cv[i].get());
          sn.push_back(sv[i].get());
        }
      }
      for (uint32_t i = 0; i < pv && !vector_table; ++i) {
        Value pi = i ? p0 + i : p0;
        if (c.table == Scalar::Pred) {
          Value inv_freq = ir::exp2(ir::cast<float>(pi) * freq_exp);
          Value a = ir::cast<float>(pos) * inv_freq;
          cs.push_back(ir::cos(a));
          sn.push_back(ir::sin(a));
        } else {
          Value ti = ir::cast<uint64_t>(pos) * ts + ir::cast<uint64_t>(pi);
          Value cv = cos_t[ti];
          Value sv = sin_t[ti];
          cs.push_back(c.table == Scalar::F32 ? cv : ir::cast<float>(cv));
          sn.push_back(c.table == Scalar::F32 ? sv : ir::cast<float>(sv));
        }
      }
      if (c.style == RopeStyle::NeoX) {
        Value half = rot >> 1u;
        Value i1 = ir::cast<uint64_t>(p0), i2 = ir::cast<uint64_t>(p0 + half);
        std::vector<Value> a = io.load(x, xb + i1, pv);
        std::vector<Value> bb = io.load(x, xb + i2, pv);
        std::vector<Value> oa, ob;
        for (uint32_t i = 0; i < pv; ++i) {
          oa.push_back(a[i] * cs[i] - bb[i] * sn[i]);
          ob.push_back(bb[i] * cs[i] + a[i] * sn[i]);
        }
        io.store(y, yb + i1, oa);
        io.store(y, yb + i2, ob);
      } else {
        Value i1 = ir::cast<uint64_t>(p0 * 2u);
        std::vector<Value> v = io.load(x, xb + i1, 2 * pv);
        std::vector<Value> o;
        for (uint32_t i = 0; i < pv; ++i) {
          o.push_back(v[2 * i] * cs[i] - v[2 * i + 1] * sn[i]);
          o.push_back(v[2 * i + 1] * cs[i] + v[2 * i] * sn[i]);
        }
        io.store(y, yb + i1, o);
      }
    }).else_([&] {  // past rotary_dim: a copy (y != x only)
      Value e = ir::cast<uint64_t>(rot + (u - rot_units) * c.vec);
      io.store(y, yb + e, io.load(x, xb + e, c.vec));
    });
  });
  return b.build();
}

std::vector<RopeConfig> declared() {
  std::vector<RopeConfig> out;
  for (Scalar s : {Scalar::F32, Scalar::F16, Scalar::BF16})
    for (RopeStyle st : {RopeStyle::NeoX, RopeStyle::GptJ})
      for (uint32_t vec : {16u / static_cast<uint32_t>(ir::scalar_bytes(s)), 1u})
        for (Scalar t : {Scalar::Pred, Scalar::F32}) out.push_back(RopeConfig{s, t, st, vec});
  return out;
}

[[noreturn]] void fail(const std::string& m) { throw UsageError("", "rope", "rope: " + m); }

}  // namespace

std::string RopeConfig::str() const {
  return std::string("rope(") + ir::scalar_name(dtype) + ", " + style_name(style) + ", vec " + std::to_string(vec) +
         ", " + (table == ir::Scalar::Pred ? std::string("theta") : std::string("table ") + ir::scalar_name(table)) + ")";
}

jit::Family<RopeConfig>& rope_family() {
  static jit::Family<RopeConfig> f("rope", build, declared());
  return f;
}

namespace {

void run(const RowTensor& x, const RowTensor& y, const RowTensor* cos, const RowTensor* sin, const Rope& r,
         const jit::Stream* stream) {
  detail::check_rows("rope", "x", x);
  detail::check_same("rope", "y", y, "x", x);
  if (r.heads == 0 || r.head_dim == 0) fail("heads and head_dim must be positive");
  if (uint64_t(r.heads) * r.head_dim != x.cols)
    fail("x has " + std::to_string(x.cols) + " columns, heads x head_dim = " + std::to_string(uint64_t(r.heads) * r.head_dim));
  const uint32_t rot = r.rotary_dim ? r.rotary_dim : r.head_dim;
  if (rot % 2 || rot > r.head_dim)
    fail("rotary_dim " + std::to_string(rot) + " must be even and at most head_dim " + std::to_string(r.head_dim));
  if (uint64_t(r.position_offset) + x.rows > 0xffffffffull) fail("position_offset + rows exceeds 2^32");
  if (!cos && !(r.theta > 0.0f && std::isfinite(r.theta))) fail("theta must be positive and finite");
  if (cos) {
    for (auto [t, name] : {std::pair{cos, "cos"}, std::pair{sin, "sin"}}) {
      detail::check_rows("rope", name, *t);
      if (t->cols < rot / 2)
        fail(std::string(name) + " has " + std::to_string(t->cols) + " columns, rotary_dim / 2 = " + std::to_string(rot / 2));
      if (uint64_t(t->rows) < uint64_t(r.position_offset) + x.rows)
        fail(std::string(name) + " has " + std::to_string(t->rows) + " positions, position_offset + rows = " +
             std::to_string(uint64_t(r.position_offset) + x.rows));
    }
    if (sin->dtype != cos->dtype || sin->row_stride() != cos->row_stride())
      fail("sin and cos must have one dtype and one row stride");
  }
  // 16-byte accesses when every head, half (NeoX) and copied tail starts on a vector.
  uint32_t vec = vector_width(x.dtype, x.cols, {&x, &y});
  if (vec > 1) {
    const uint32_t step = r.style == RopeStyle::NeoX ? rot / 2 : rot;
    if (r.head_dim % vec || step % vec || (r.head_dim - rot) % vec) vec = 1;
  }
  RopeConfig c{x.dtype, cos ? cos->dtype : ir::Scalar::Pred, r.style, vec};
  const uint32_t pv = pairs_per_unit(c);
  const uint32_t rot_units = rot / 2 / pv;
  const bool in_place = x.address == y.address && x.row_stride() == y.row_stride();
  const uint32_t copy_units = in_place ? 0 : (r.head_dim - rot) / vec;
  const uint32_t units = rot_units + copy_units;
  const uint64_t total = uint64_t(x.rows) * r.heads * units;
  if (total > 0xffffffffull) fail("rows x heads x work per head exceeds 2^32 threads");
  if (total == 0) return;  // rotary_dim 0 in place: nothing to do
  const float freq_exp = static_cast<float>(-2.0 * std::log2(double(r.theta)) / rot);
  // f32 tables read 16 bytes at a time when aligned (the kernel's units start on multiples
  // of 2 or 4 entries).
  const uint32_t table_vec = cos && cos->address % 16 == 0 && sin->address % 16 == 0 && cos->row_stride() % 4 == 0;
  RopeSignature sig(detail::access_type(x.dtype, vec), cos ? cos->dtype : ir::Scalar::F32);
  sig.x.host = x.address;
  sig.y.host = y.address;
  sig.cos.host = cos ? cos->address : 0;
  sig.sin.host = sin ? sin->address : 0;
  sig.units_total.host = static_cast<uint32_t>(total);
  sig.units.host = units;
  sig.rot_units.host = rot_units;
  sig.heads.host = r.heads;
  sig.head_dim.host = r.head_dim;
  sig.rotary_dim.host = rot;
  sig.x_stride.host = x.row_stride();
  sig.y_stride.host = y.row_stride();
  sig.table_stride.host = cos ? cos->row_stride() : uint64_t(0);
  sig.position_offset.host = r.position_offset;
  sig.freq_exp.host = freq_exp;
  sig.table_vec.host = table_vec;
  const kernel::PackedArgs args = kernel::pack(sig);
  const uint32_t blocks = static_cast<uint32_t>((total + 255) / 256);
  rope_family().get(c).launch_packed({.grid = {blocks}, .block = {256}, .stream = stream}, args.data(), args.size());
}

}  // namespace

void rope(const RowTensor& x, const RowTensor& y, const Rope& r, const jit::Stream* stream) {
  run(x, y, nullptr, nullptr, r, stream);
}

void rope(const RowTensor& x, const RowTensor& y, const RowTensor& cos, const RowTensor& sin, const Rope& r,
          const jit::Stream* stream) {
  run(x, y, &cos, &sin, r, stream);
}

}  // namespace kaio::ops
