// The C ABI over the quantized matmuls (ops/qmatmul.h: W8A8 int8, W4A16 int4, their fused
// QKV forms and the host helpers) and the GGUF matmul (ops/quant_matvec.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/capi/internal.h"
#include "kaio/capi/plan.h"
#include "kaio/ir/half.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/quant/blocks.h"

namespace kaio::capi {

namespace {

std::string arg_text(const char* arg) { return std::string("argument '") + arg + "': "; }

uint32_t u32(const char* op, const char* arg, int64_t v) {
  if (v < 0 || v > 0xffffffffll)
    throw UsageError("", op, arg_text(arg) + std::to_string(v) + " does not fit in 32 bits");
  return static_cast<uint32_t>(v);
}

// A contiguous (rows, cols) matrix of `dtype`.
void require_matrix(const char* op, const char* arg, const View& v, ir::Scalar dtype) {
  require_dtype(op, arg, v, dtype);
  if (v.ndim() != 2 || !v.contiguous())
    throw UsageError("", op, arg_text(arg) + "expected a contiguous (row-major) matrix, got shape " + v.shape_str() +
                                 (v.ndim() == 2 ? " with other strides" : ""));
}

void require_shape(const char* op, const char* arg, const View& v, int64_t rows, int64_t cols) {
  if (v.shape != std::vector<int64_t>{rows, cols})
    throw UsageError("", op, arg_text(arg) + "has shape " + v.shape_str() + "; expected [" + std::to_string(rows) +
                                 ", " + std::to_string(cols) + "]");
}

// A contiguous f32 vector of 1 or n elements; true when it has n (per row / column).
bool scale_vector(const char* op, const char* arg, const View& v, int64_t n) {
  require_dtype(op, arg, v, ir::Scalar::F32);
  if (v.ndim() > 1 || (v.numel != 1 && v.numel != n) || !v.contiguous())
    throw UsageError("", op, arg_text(arg) + "expected one float32 or a contiguous vector of " + std::to_string(n) +
                                 ", got shape " + v.shape_str());
  return v.numel == n && n != 1;
}

void require_vector(const char* op, const char* arg, const View& v, ir::Scalar dtype, int64_t n) {
  require_dtype(op, arg, v, dtype);
  if (v.ndim() != 1 || v.shape[0] != n || !v.contiguous())
    throw UsageError("", op, arg_text(arg) + "expected a contiguous vector of " + std::to_string(n) +
                                 " elements, got shape " + v.shape_str());
}

ir::Scalar sixteen_bit(const char* op, const char* dtype) {
  const std::string d = dtype ? dtype : "";
  if (d == "float16" || d == "f16") return ir::Scalar::F16;
  if (d == "bfloat16" || d == "bf16") return ir::Scalar::BF16;
  throw UsageError("", op, "argument 'dtype': '" + d + "' is not float16 or bfloat16");
}

// ---- int8 ----

struct Int8Shape {
  ops::Int8Problem p;
  bool a_per_row = false, b_per_col = false;
};

Int8Shape check_int8(const char* op, Plan& plan, const View& a, const View& b, const View& c, const kaio_tensor* sa_t,
                     const kaio_tensor* sb_t, const kaio_tensor* bias_t) {
  require_matrix(op, "a", a, ir::Scalar::S8);
  require_matrix(op, "b", b, ir::Scalar::S8);
  if (c.dtype != ir::Scalar::S32 && c.dtype != ir::Scalar::F16 && c.dtype != ir::Scalar::BF16 &&
      c.dtype != ir::Scalar::F32)
    throw UsageError("", op, arg_text("out") + "has dtype " + dtype_name(c.dtype) +
                                 "; expected int32, float16, bfloat16 or float32");
  require_matrix(op, "out", c, c.dtype);
  if (b.shape[1] != a.shape[1])
    throw UsageError("", op, arg_text("b") + "has k = " + std::to_string(b.shape[1]) + "; a has k = " +
                                 std::to_string(a.shape[1]) + " (b is (n, k): a Linear weight)");
  require_shape(op, "out", c, a.shape[0], b.shape[0]);
  Int8Shape s;
  s.p.m = u32(op, "a", a.shape[0]);
  s.p.n = u32(op, "b", b.shape[0]);
  s.p.k = u32(op, "a", a.shape[1]);
  s.p.out = c.dtype;
  plan.add("a", a);
  plan.add("b", b);
  plan.add("out", c);
  if (sa_t) {
    View sa = view(op, "scale_a", sa_t);
    s.a_per_row = scale_vector(op, "scale_a", sa, a.shape[0]);
    plan.add("scale_a", sa);
  }
  if (sb_t) {
    View sb = view(op, "scale_b", sb_t);
    s.b_per_col = scale_vector(op, "scale_b", sb, b.shape[0]);
    plan.add("scale_b", sb);
  }
  if (bias_t) {
    View bias = view(op, "bias", bias_t);
    require_vector(op, "bias", bias, ir::Scalar::F32, b.shape[0]);
    plan.add("bias", bias);
  }
  return s;
}

// ---- int4 ----

ops::Int4Weights check_int4_weights(const char* op, const View& x, const View& q, const View& scales,
                                    const View* zeros, const char* sfx) {
  const std::string qn = std::string("q") + sfx, sn = std::string("scales") + sfx, zn = std::string("zeros") + sfx;
  const int64_t k = x.shape[1];
  // Packed words as uint32, or int32 (the same bits: what GPTQ checkpoints and torch hold).
  require_matrix(op, qn.c_str(), q, q.dtype == ir::Scalar::S32 ? ir::Scalar::S32 : ir::Scalar::U32);
  require_matrix(op, sn.c_str(), scales, x.dtype);
  const int64_t n = q.shape[1];
  if (q.shape[0] * 8 != k)
    throw UsageError("", op, arg_text(qn.c_str()) + "has " + std::to_string(q.shape[0]) + " rows of packed words; x's k = " +
                                 std::to_string(k) + " needs k / 8 = " + std::to_string(k / 8));
  const int64_t groups = scales.shape[0];
  if (groups == 0 || k % groups)
    throw UsageError("", op, arg_text(sn.c_str()) + "has " + std::to_string(groups) + " rows, which do not divide k = " +
                                 std::to_string(k) + " into groups");
  require_shape(op, sn.c_str(), scales, groups, n);
  if (zeros) {
    require_matrix(op, zn.c_str(), *zeros, ir::Scalar::U8);
    require_shape(op, zn.c_str(), *zeros, groups, n);
  }
  ops::Int4Weights w;
  w.k = u32(op, "x", k);
  w.n = u32(op, qn.c_str(), n);
  w.group = u32(op, sn.c_str(), k / groups);
  return w;
}

void check_int4_x(const char* op, const View& x) {
  if (x.dtype != ir::Scalar::F16 && x.dtype != ir::Scalar::BF16)
    throw UsageError("", op, arg_text("x") + "has dtype " + dtype_name(x.dtype) + "; expected float16 or bfloat16");
  require_matrix(op, "x", x, x.dtype);
}

}  // namespace

Plan plan_matmul_int8(const kaio_tensor* a_t, const kaio_tensor* b_t, const kaio_tensor* c_t, const kaio_tensor* sa_t,
                      const kaio_tensor* sb_t, const kaio_tensor* bias_t, int32_t tile) {
  const char* op = "matmul_int8";
  View a = view(op, "a", a_t), b = view(op, "b", b_t), c = view(op, "out", c_t);
  Plan plan(op);
  Int8Shape s = check_int8(op, plan, a, b, c, sa_t, sb_t, bias_t);
  if (tile < -1 || tile >= static_cast<int32_t>(ops::matmul_int8_tiles().size()))
    throw UsageError("", op, arg_text("tile") + std::to_string(tile) + " is not -1 or a tile index");
  s.p.tile = tile;
  if (a.numel == 0 || b.numel == 0) return plan;
  const bool has_sa = sa_t, has_sb = sb_t, has_bias = bias_t;
  plan.set_run([s, has_sa, has_sb, has_bias](const uint64_t* addr, const double*, const jit::Stream& st) {
    ops::Int8Scales sc;
    size_t i = 3;
    sc.a_per_row = s.a_per_row;
    sc.b_per_col = s.b_per_col;
    if (has_sa) sc.a = addr[i++];
    if (has_sb) sc.b = addr[i++];
    if (has_bias) sc.bias = addr[i++];
    ops::matmul_int8(addr[0], addr[1], addr[2], s.p, sc, &st);
  });
  return plan;
}

Plan plan_matmul_int4(const kaio_tensor* x_t, const kaio_tensor* q_t, const kaio_tensor* s_t, const kaio_tensor* z_t,
                      const kaio_tensor* y_t, const kaio_tensor* bias_t) {
  const char* op = "matmul_int4";
  View x = view(op, "x", x_t), q = view(op, "q", q_t), sc = view(op, "scales", s_t), y = view(op, "out", y_t);
  check_int4_x(op, x);
  std::vector<View> z;
  if (z_t) z.push_back(view(op, "zeros", z_t));
  const ops::Int4Weights w = check_int4_weights(op, x, q, sc, z.empty() ? nullptr : &z[0], "");
  require_matrix(op, "out", y, x.dtype);
  require_shape(op, "out", y, x.shape[0], w.n);
  Plan plan(op);
  plan.add("x", x);
  plan.add("q", q);
  plan.add("scales", sc);
  plan.add("out", y);
  if (!z.empty()) plan.add("zeros", z[0]);
  if (bias_t) {
    View bias = view(op, "bias", bias_t);
    require_vector(op, "bias", bias, x.dtype, w.n);
    plan.add("bias", bias);
  }
  if (x.numel == 0 || w.n == 0) return plan;
  const uint32_t m = u32(op, "x", x.shape[0]);
  const ir::Scalar dtype = x.dtype;
  const bool zeros = z_t, has_bias = bias_t;
  plan.set_run([w, m, dtype, zeros, has_bias](const uint64_t* addr, const double*, const jit::Stream& st) {
    ops::Int4Weights wt = w;
    wt.q = addr[1];
    wt.scales = addr[2];
    size_t i = 4;
    if (zeros) wt.zeros = addr[i++];
    const uint64_t bias = has_bias ? addr[i] : 0;
    ops::matmul_int4(addr[0], wt, addr[3], m, dtype, bias, &st);
  });
  return plan;
}

Plan plan_quant_matmul(const kaio_tensor* y_t, const kaio_tensor* w_t, uint32_t format, const kaio_tensor* x_t,
                       const kaio_tensor* ws_t, uint32_t warps_per_row) {
  const char* op = "quant_matmul";
  View y = view(op, "out", y_t), w = view(op, "w", w_t), x = view(op, "x", x_t), ws = view(op, "workspace", ws_t);
  require_float(op, "x", x);
  require_matrix(op, "x", x, x.dtype);
  require_float(op, "out", y);
  require_matrix(op, "out", y, y.dtype);
  require_matrix(op, "w", w, ir::Scalar::U8);
  const auto info = quant::type_info(format);
  if (!info || !info->computes || (format != 8 && format != 12 && format != 14))
    throw UsageError("", op, arg_text("format") + "weight type " + quant::type_name(format) +
                                 " is not supported (q8_0 = 8, q4_K = 12, q6_K = 14)");
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  if (k % info->block)
    throw UsageError("", op, arg_text("x") + "k = " + std::to_string(k) + " is not a multiple of the " + info->name +
                                 " block (" + std::to_string(info->block) + ")");
  const int64_t row_bytes = k / info->block * info->bytes;
  if (w.shape[1] != row_bytes)
    throw UsageError("", op, arg_text("w") + "rows of " + std::to_string(w.shape[1]) + " bytes; k = " +
                                 std::to_string(k) + " of " + info->name + " takes " + std::to_string(row_bytes));
  require_shape(op, "out", y, m, n);
  require_dtype(op, "workspace", ws, ir::Scalar::U8);
  const uint64_t need = ops::quant_matmul_workspace(size_t(m), size_t(k));
  if (!ws.contiguous() || uint64_t(ws.numel) < need)
    throw UsageError("", op, arg_text("workspace") + "needs " + std::to_string(need) + " contiguous bytes, has shape " +
                                 ws.shape_str());
  Plan plan(op);
  plan.add("out", y);
  plan.add("w", w);
  plan.add("x", x);
  plan.add("workspace", ws);
  if (m == 0 || n == 0) return plan;
  const ir::Scalar in = x.dtype, out = y.dtype;
  const size_t sm = size_t(m), sn = size_t(n), sk = size_t(k), ws_bytes = size_t(ws.numel);
  plan.set_run([=](const uint64_t* addr, const double*, const jit::Stream& st) {
    auto run = [&](auto xt, auto yt) {
      using T = decltype(xt);
      using O = decltype(yt);
      ops::quant_matmul<T, O>(ops::Out<O>(addr[0], sm * sn), ops::In<uint8_t>(addr[1], sn * size_t(row_bytes)), format,
                              ops::In<T>(addr[2], sm * sk), sm, sn, sk, ops::Out<uint8_t>(addr[3], ws_bytes), &st,
                              warps_per_row);
    };
    auto by_out = [&](auto xt) {
      switch (out) {
        case ir::Scalar::F32: run(xt, float{}); break;
        case ir::Scalar::F16: run(xt, kaio::half{}); break;
        default: run(xt, kaio::bfloat16{}); break;
      }
    };
    switch (in) {
      case ir::Scalar::F32: by_out(float{}); break;
      case ir::Scalar::F16: by_out(kaio::half{}); break;
      default: by_out(kaio::bfloat16{}); break;
    }
  });
  return plan;
}

}  // namespace kaio::capi

using namespace kaio;
using capi::address_of;

namespace {

int names_into(const std::vector<std::string>& v, char* buf, size_t cap, size_t* needed) {
  return capi::guard([&] {
    std::string s;
    for (const std::string& n : v) s += n + "\n";
    if (needed) *needed = s.size() + 1;
    if (buf && cap) {
      const size_t n = std::min(cap - 1, s.size());
      std::memcpy(buf, s.data(), n);
      buf[n] = 0;
    }
  });
}

// Both forms of kaio_dequantize_int4: rounded once to dtype (round), or exact in f32.
void dequantize_int4(const uint32_t* q, const uint16_t* scales, const uint8_t* zeros, uint32_t k, uint32_t n,
                     uint32_t group, const char* dtype, float* w, bool round) {
  const char* op = round ? "dequantize_int4" : "dequantize_int4_exact";
  ops::Int4Host h;
  h.dtype = capi::sixteen_bit(op, dtype);
  if (!q || !scales || !w) throw UsageError("", op, "argument 'q'/'scales'/'w': is missing");
  if (group == 0 || k % group || k % 8)
    throw UsageError("", op, "argument 'group': k = " + std::to_string(k) + " is not a multiple of the group " +
                                 std::to_string(group) + " and of 8");
  h.k = k, h.n = n, h.group = group;
  h.q.assign(q, q + size_t(k / 8) * n);
  h.scales.assign(scales, scales + size_t(k / group) * n);
  if (zeros) h.zeros.assign(zeros, zeros + size_t(k / group) * n);
  const std::vector<float> r = ops::dequantize_int4(h, round);
  std::copy(r.begin(), r.end(), w);
}

}  // namespace

extern "C" {

int kaio_matmul_int8(const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c, const kaio_tensor* scale_a,
                     const kaio_tensor* scale_b, const kaio_tensor* bias, int32_t tile, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_matmul_int8(a, b, c, scale_a, scale_b, bias, tile);
    std::vector<uint64_t> addr{address_of(a), address_of(b), address_of(c)};
    for (const kaio_tensor* t : {scale_a, scale_b, bias})
      if (t) addr.push_back(address_of(t));
    plan.launch(addr.data(), addr.size(), nullptr, 0, stream);
  });
}

int kaio_plan_matmul_int8(const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c, const kaio_tensor* scale_a,
                          const kaio_tensor* scale_b, const kaio_tensor* bias, int32_t tile, kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_matmul_int8(a, b, c, scale_a, scale_b, bias, tile); });
}

int kaio_matmul_int8_tiles(char* buf, size_t cap, size_t* needed) {
  return names_into(ops::matmul_int8_tiles(), buf, cap, needed);
}

int kaio_matmul_int8_qkv(const kaio_tensor* a_t, const kaio_tensor* const* b_t, const kaio_tensor* const* c_t,
                         const kaio_tensor* sa_t, const kaio_tensor* const* sb_t, const kaio_tensor* const* bias_t,
                         void* stream) {
  return capi::guard([&] {
    const char* op = "matmul_int8_qkv";
    if (!b_t || !c_t) throw UsageError("", op, "argument 'b'/'out': three of each are needed");
    capi::View a = capi::view(op, "a", a_t);
    ops::Int8Part parts[3];
    capi::HostRegions regions;
    regions.add(a);
    uint32_t m = 0, k = 0;
    ir::Scalar out = ir::Scalar::F16;
    bool a_per_row = false, b_per_col = false;
    const char* names[3][4] = {{"b[0]", "out[0]", "scale_b[0]", "bias[0]"},
                               {"b[1]", "out[1]", "scale_b[1]", "bias[1]"},
                               {"b[2]", "out[2]", "scale_b[2]", "bias[2]"}};
    for (int i = 0; i < 3; ++i) {
      capi::View b = capi::view(op, names[i][0], b_t[i]), c = capi::view(op, names[i][1], c_t[i]);
      capi::Plan plan(op);  // the checks of one part (and its spans)
      const kaio_tensor* sb = sb_t ? sb_t[i] : nullptr;
      const kaio_tensor* bias = bias_t ? bias_t[i] : nullptr;
      capi::Int8Shape s = capi::check_int8(op, plan, a, b, c, i == 0 ? sa_t : nullptr, sb, bias);
      if (i == 0) {
        m = s.p.m, k = s.p.k, out = s.p.out, a_per_row = s.a_per_row, b_per_col = s.b_per_col;
      } else if (s.p.out != out) {
        throw UsageError("", op, std::string("argument '") + names[i][1] + "': has another dtype than out[0]");
      } else if (s.b_per_col != b_per_col || (sb == nullptr) != (sb_t == nullptr || sb_t[0] == nullptr)) {
        throw UsageError("", op, std::string("argument '") + names[i][2] +
                                     "': every part's scale_b must be of one kind (absent, one value, or per column)");
      }
      regions.add(b);
      regions.add(c);
      parts[i] = {address_of(b_t[i]), address_of(c_t[i]), s.p.n, sb ? address_of(sb) : 0, bias ? address_of(bias) : 0};
      if (sb) regions.add(capi::view(op, names[i][2], sb));
      if (bias) regions.add(capi::view(op, names[i][3], bias));
    }
    if (sa_t) regions.add(capi::view(op, "scale_a", sa_t));
    jit::Stream st = capi::stream_of(stream);
    ops::matmul_int8_qkv(address_of(a_t), parts, m, k, out, sa_t ? address_of(sa_t) : 0, a_per_row, b_per_col, &st);
  });
}

int kaio_matmul_int4(const kaio_tensor* x, const kaio_tensor* q, const kaio_tensor* scales, const kaio_tensor* zeros,
                     const kaio_tensor* y, const kaio_tensor* bias, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_matmul_int4(x, q, scales, zeros, y, bias);
    std::vector<uint64_t> addr{address_of(x), address_of(q), address_of(scales), address_of(y)};
    for (const kaio_tensor* t : {zeros, bias})
      if (t) addr.push_back(address_of(t));
    plan.launch(addr.data(), addr.size(), nullptr, 0, stream);
  });
}

int kaio_plan_matmul_int4(const kaio_tensor* x, const kaio_tensor* q, const kaio_tensor* scales,
                          const kaio_tensor* zeros, const kaio_tensor* y, const kaio_tensor* bias, kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_matmul_int4(x, q, scales, zeros, y, bias); });
}

int kaio_matmul_int4_qkv(const kaio_tensor* x_t, const kaio_tensor* const* q_t, const kaio_tensor* const* s_t,
                         const kaio_tensor* const* z_t, const kaio_tensor* const* y_t, const kaio_tensor* const* bias_t,
                         void* stream) {
  return capi::guard([&] {
    const char* op = "matmul_int4_qkv";
    if (!q_t || !s_t || !y_t) throw UsageError("", op, "argument 'q'/'scales'/'out': three of each are needed");
    capi::View x = capi::view(op, "x", x_t);
    capi::check_int4_x(op, x);
    capi::HostRegions regions;
    regions.add(x);
    ops::Int4Part parts[3];
    const char* sfx[3] = {"[0]", "[1]", "[2]"};
    const bool zeros = z_t && z_t[0];
    for (int i = 0; i < 3; ++i) {
      const std::string yn = std::string("out") + sfx[i], bn = std::string("bias") + sfx[i];
      capi::View q = capi::view(op, ("q" + std::string(sfx[i])).c_str(), q_t[i]),
                 s = capi::view(op, ("scales" + std::string(sfx[i])).c_str(), s_t[i]),
                 y = capi::view(op, yn.c_str(), y_t[i]);
      std::vector<capi::View> z;
      const bool zi = z_t && z_t[i];
      if (zi != zeros)
        throw UsageError("", op, "argument 'zeros" + std::string(sfx[i]) + "': give zero points for every part or none");
      if (zi) z.push_back(capi::view(op, ("zeros" + std::string(sfx[i])).c_str(), z_t[i]));
      ops::Int4Weights w = capi::check_int4_weights(op, x, q, s, zi ? &z[0] : nullptr, sfx[i]);
      capi::require_matrix(op, yn.c_str(), y, x.dtype);
      capi::require_shape(op, yn.c_str(), y, x.shape[0], w.n);
      w.q = q.address;
      w.scales = s.address;
      w.zeros = zi ? z[0].address : 0;
      parts[i].w = w;
      parts[i].y = y.address;
      regions.add(q);
      regions.add(s);
      regions.add(y);
      if (zi) regions.add(z[0]);
      if (bias_t && bias_t[i]) {
        capi::View b = capi::view(op, bn.c_str(), bias_t[i]);
        capi::require_vector(op, bn.c_str(), b, x.dtype, w.n);
        parts[i].bias = b.address;
        regions.add(b);
      }
    }
    jit::Stream st = capi::stream_of(stream);
    ops::matmul_int4_qkv(x.address, parts, capi::u32(op, "x", x.shape[0]), x.dtype, &st);
  });
}

size_t kaio_quant_matmul_workspace(size_t m, size_t k) { return ops::quant_matmul_workspace(m, k); }

int kaio_quant_matmul(const kaio_tensor* y, const kaio_tensor* w, uint32_t format, const kaio_tensor* x,
                      const kaio_tensor* workspace, uint32_t warps_per_row, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_quant_matmul(y, w, format, x, workspace, warps_per_row);
    const uint64_t addr[4] = {address_of(y), address_of(w), address_of(x), address_of(workspace)};
    plan.launch(addr, 4, nullptr, 0, stream);
  });
}

int kaio_plan_quant_matmul(const kaio_tensor* y, const kaio_tensor* w, uint32_t format, const kaio_tensor* x,
                           const kaio_tensor* workspace, uint32_t warps_per_row, kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_quant_matmul(y, w, format, x, workspace, warps_per_row); });
}

int kaio_quantize_int8(const float* x, uint32_t rows, uint32_t cols, int8_t* q, float* scale) {
  return capi::guard([&] {
    if ((!x || !q || !scale) && rows != 0 && cols != 0)
      throw UsageError("", "quantize_int8", "argument 'x'/'q'/'scale': is missing");
    const size_t n = size_t(rows) * cols;
    ops::Int8Quantized r = ops::quantize_int8(std::span<const float>(x, n), rows, cols);
    std::copy(r.q.begin(), r.q.end(), q);
    std::copy(r.scale.begin(), r.scale.end(), scale);
  });
}

int kaio_quantize_int4(const float* w, uint32_t k, uint32_t n, uint32_t group, const char* dtype, int zero_points,
                       uint32_t* q, uint16_t* scales, uint8_t* zeros) {
  return capi::guard([&] {
    const char* op = "quantize_int4";
    const ir::Scalar d = capi::sixteen_bit(op, dtype);
    if (!w || !q || !scales || (zero_points && !zeros)) throw UsageError("", op, "argument 'w'/'q'/'scales'/'zeros': is missing");
    ops::Int4Host h = ops::quantize_int4(std::span<const float>(w, size_t(k) * n), k, n, group, d, zero_points != 0);
    std::copy(h.q.begin(), h.q.end(), q);
    std::copy(h.scales.begin(), h.scales.end(), scales);
    if (zero_points) std::copy(h.zeros.begin(), h.zeros.end(), zeros);
  });
}

int kaio_pack_int4(const uint8_t* v, uint32_t k, uint32_t n, uint32_t* q) {
  return capi::guard([&] {
    if (!v || !q) throw UsageError("", "pack_int4", "argument 'v'/'q': is missing");
    if (k % 8) throw UsageError("", "pack_int4", "argument 'v': k = " + std::to_string(k) + " is not a multiple of 8");
    std::vector<uint32_t> r = ops::pack_int4(std::span<const uint8_t>(v, size_t(k) * n), k, n);
    std::copy(r.begin(), r.end(), q);
  });
}

int kaio_dequantize_int4(const uint32_t* q, const uint16_t* scales, const uint8_t* zeros, uint32_t k, uint32_t n,
                         uint32_t group, const char* dtype, float* w) {
  return capi::guard([&] { dequantize_int4(q, scales, zeros, k, n, group, dtype, w, true); });
}

int kaio_dequantize_int4_exact(const uint32_t* q, const uint16_t* scales, const uint8_t* zeros, uint32_t k,
                               uint32_t n, uint32_t group, const char* dtype, float* w) {
  return capi::guard([&] { dequantize_int4(q, scales, zeros, k, n, group, dtype, w, false); });
}

}  // extern "C"
