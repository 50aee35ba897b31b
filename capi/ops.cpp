// The C ABI over the op library (ops/): DLPack tensors become the ops' arrays and row
// tensors after their dtype, shape, strides and device are checked.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/capi/internal.h"
#include "kaio/capi/map_handle.h"
#include "kaio/capi/plan.h"
#include "kaio/ir/half.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/norm.h"
#include "kaio/ops/reduction.h"
#include "kaio/ops/rope.h"
#include "kaio/ops/softmax.h"

namespace kaio::capi {

namespace {

uint32_t to_u32(const char* op, const char* arg, const char* what, uint64_t v) {
  if (v > 0xffffffffu)
    throw UsageError("", op, std::string("argument '") + arg + "': " + what + " = " + std::to_string(v) +
                                 " does not fit in 32 bits");
  return static_cast<uint32_t>(v);
}

template <class F>
void by_float_dtype(ir::Scalar d, F&& f) {
  switch (d) {
    case ir::Scalar::F32: f(float{}); break;
    case ir::Scalar::F16: f(kaio::half{}); break;
    case ir::Scalar::BF16: f(kaio::bfloat16{}); break;
    default: throw InternalError("capi: dtype was checked");
  }
}

ops::Reduce reduce_op(const char* op, const char* name) {
  std::string s = name ? name : "";
  if (s == "sum") return ops::Reduce::Sum;
  if (s == "max") return ops::Reduce::Max;
  if (s == "min") return ops::Reduce::Min;
  if (s == "mean") return ops::Reduce::Mean;
  if (s == "argmax") return ops::Reduce::ArgMax;
  throw UsageError("", op, "argument 'op': '" + s + "' is not one of sum, max, min, mean, argmax");
}

}  // namespace

Plan plan_map(std::shared_ptr<const ops::detail::MapKernels> keep, const ops::detail::MapKernels& m, const char* op,
              const kaio_tensor* out_t, const kaio_tensor* const* in_t, size_t n_in, size_t n_scalars) {
  m.check_counts(n_in, n_scalars);
  if (n_in && !in_t) throw UsageError("", op, "argument 'in': is missing");
  std::vector<View> in;
  for (size_t k = 0; k < n_in; ++k) in.push_back(view(op, m.spec().inputs[k].c_str(), in_t[k]));
  View out = view(op, "out", out_t);
  require_float(op, "out", out);
  for (size_t k = 0; k < n_in; ++k) require_same(op, m.spec().inputs[k].c_str(), in[k], "out", out);
  Plan plan(op);
  plan.add("out", out);
  for (size_t k = 0; k < n_in; ++k) plan.add(m.spec().inputs[k].c_str(), in[k]);
  for (size_t k = 0; k < n_scalars; ++k) plan.add_value(m.spec().scalars[k].c_str());
  if (out.numel == 0) return plan;
  // The plan holds a user map's kernels (the library's ops live as long as the process).
  const ops::detail::MapKernels* mk = &m;
  const ir::Scalar dtype = out.dtype;
  const size_t n = static_cast<size_t>(out.numel);
  bool dense = out.contiguous();
  for (const View& v : in) dense = dense && v.contiguous();
  if (dense) {
    plan.set_run([keep, mk, dtype, n, n_in, n_scalars](const uint64_t* addr, const double* values, const jit::Stream& s) {
      float sc[ops::kMapMaxScalars];
      for (size_t k = 0; k < n_scalars; ++k) sc[k] = static_cast<float>(values[k]);
      size_t sizes[ops::kMapMaxInputs];
      std::fill_n(sizes, n_in, n);
      mk->launch(dtype, addr[0], n, std::span<const uint64_t>(addr + 1, n_in), std::span<const size_t>(sizes, n_in),
                 std::span<const float>(sc, n_scalars), n, &s);
    });
    return plan;
  }
  Rows ro = rows_of(op, "out", out);
  std::vector<uint64_t> ld;
  for (size_t k = 0; k < in.size(); ++k) ld.push_back(rows_of(op, m.spec().inputs[k].c_str(), in[k]).ld);
  const uint32_t rows = to_u32(op, "out", "rows", ro.rows), cols = to_u32(op, "out", "cols", ro.cols);
  const uint64_t ld_out = ro.ld;
  plan.set_run([keep, mk, dtype, ld, ld_out, rows, cols, n_in, n_scalars](const uint64_t* addr, const double* values,
                                                                         const jit::Stream& s) {
    float sc[ops::kMapMaxScalars];
    for (size_t k = 0; k < n_scalars; ++k) sc[k] = static_cast<float>(values[k]);
    size_t sizes[ops::kMapMaxInputs];
    std::fill_n(sizes, n_in, ops::kUnknownSize);
    mk->launch_rows(dtype, addr[0], ops::kUnknownSize, ld_out, std::span<const uint64_t>(addr + 1, n_in),
                    std::span<const size_t>(sizes, n_in), ld, std::span<const float>(sc, n_scalars), rows, cols, &s);
  });
  return plan;
}

void launch_map(const ops::detail::MapKernels& m, const char* op, const kaio_tensor* out_t, const kaio_tensor* const* in_t,
                size_t n_in, const float* scalars, size_t n_scalars, void* stream) {
  // The caller holds the map for the call: the one-shot plan needs no reference of its own.
  Plan plan = plan_map(nullptr, m, op, out_t, in_t, n_in, n_scalars);
  std::vector<uint64_t> addr{address_of(out_t)};
  for (size_t k = 0; k < n_in; ++k) addr.push_back(address_of(in_t[k]));
  std::vector<double> values(scalars, scalars + (scalars ? n_scalars : 0));
  plan.launch(addr.data(), addr.size(), values.data(), n_scalars, stream);
}

Plan plan_reduce_rows(const char* op_name, const kaio_tensor* out_t, const kaio_tensor* x_t) {
  const ops::Reduce r = reduce_op("reduce_rows", op_name);
  const char* op = r == ops::Reduce::ArgMax ? "argmax_rows" : "reduce_rows";
  View x = view(op, "x", x_t), out = view(op, "out", out_t);
  require_float(op, "x", x);
  require_dtype(op, "out", out, r == ops::Reduce::ArgMax ? ir::Scalar::S64 : ir::Scalar::F32);
  if (x.ndim() < 1) throw UsageError("", op, "argument 'x': needs at least one dimension");
  std::vector<int64_t> want(x.shape.begin(), x.shape.end() - 1);
  if (out.shape != want || !out.contiguous())
    throw UsageError("", op, "argument 'out': has shape " + out.shape_str() + "; expected a contiguous array of x's "
                             "shape without its last dimension");
  Rows rw = rows_of(op, "x", x);
  Plan plan(op);
  plan.add("out", out);
  plan.add("x", x);
  if (x.numel == 0) return plan;
  const uint32_t rows = to_u32(op, "x", "rows", rw.rows), cols = to_u32(op, "x", "cols", rw.cols);
  const uint64_t ld = rw.ld;
  const ir::Scalar dtype = x.dtype;
  plan.set_run([r, rows, cols, ld, dtype](const uint64_t* addr, const double*, const jit::Stream& s) {
    by_float_dtype(dtype, [&](auto t) {
      using T = decltype(t);
      if (r == ops::Reduce::ArgMax)
        ops::argmax_rows<T>(ops::Out<int64_t>(addr[0]), ops::In<T>(addr[1]), rows, cols, ld, &s);
      else
        ops::reduce_rows<T>(r, ops::Out<float>(addr[0]), ops::In<T>(addr[1]), rows, cols, ld, &s);
    });
  });
  return plan;
}

Plan plan_reduce(const char* op_name, const kaio_tensor* out_t, const kaio_tensor* x_t) {
  const char* op = "reduce";
  const ops::Reduce r = reduce_op(op, op_name);
  if (r != ops::Reduce::Sum && r != ops::Reduce::Max && r != ops::Reduce::Min)
    throw UsageError("", op, "argument 'op': the whole-array reduction is sum, max or min");
  View x = view(op, "x", x_t), out = view(op, "out", out_t);
  require_float(op, "x", x);
  require_dtype(op, "out", out, ir::Scalar::F32);
  if (out.numel != 1) throw UsageError("", op, "argument 'out': needs one element, has shape " + out.shape_str());
  if (!x.contiguous()) throw UsageError("", op, "argument 'x': must be contiguous");
  if (x.numel == 0) throw UsageError("", op, "argument 'x': is empty");
  Plan plan(op);
  plan.add("out", out);
  plan.add("x", x);
  const size_t n = static_cast<size_t>(x.numel);
  const ir::Scalar dtype = x.dtype;
  plan.set_run([r, n, dtype](const uint64_t* addr, const double*, const jit::Stream& s) {
    by_float_dtype(dtype, [&](auto t) {
      using T = decltype(t);
      ops::reduce<T>(r, ops::Out<float>(addr[0]), ops::In<T>(addr[1]), n, &s);
    });
  });
  return plan;
}

// A row tensor at a launch's address: the rows resolved at plan time.
struct RowsAt {
  ir::Scalar dtype = ir::Scalar::F32;
  uint32_t rows = 0, cols = 0;
  uint64_t ld = 0;
  ops::RowTensor at(uint64_t address) const { return ops::as_rows(address, dtype, rows, cols, ld); }
};

RowsAt rows_at(const char* op, const char* arg, const View& v) {
  Rows r = rows_of(op, arg, v);
  return RowsAt{v.dtype, to_u32(op, arg, "rows", r.rows), to_u32(op, arg, "cols", r.cols), r.rows > 1 ? r.ld : 0};
}

RowsAt vector_at(const char* op, const char* arg, const View& v) {
  if (v.ndim() != 1 || (v.shape[0] > 1 && v.strides[0] != 1))
    throw UsageError("", op, std::string("argument '") + arg + "': expected a contiguous 1-D array, got shape " +
                                 v.shape_str());
  return RowsAt{v.dtype, 1, to_u32(op, arg, "size", static_cast<uint64_t>(v.shape[0])), 0};
}

Plan plan_softmax(const kaio_tensor* x_t, const kaio_tensor* y_t, int log) {
  const char* op = log ? "log_softmax" : "softmax";
  View x = view(op, "x", x_t), y = view(op, "y", y_t);
  require_float(op, "x", x);
  require_same(op, "y", y, "x", x);
  Plan plan(op);
  plan.add("x", x);
  plan.add("y", y);
  if (x.numel == 0) return plan;
  RowsAt rx = rows_at(op, "x", x), ry = rows_at(op, "y", y);
  plan.set_run([rx, ry, log](const uint64_t* addr, const double*, const jit::Stream& s) {
    if (log) ops::log_softmax(rx.at(addr[0]), ry.at(addr[1]), &s);
    else ops::softmax(rx.at(addr[0]), ry.at(addr[1]), &s);
  });
  return plan;
}

Plan plan_rms_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* y_t) {
  const char* op = "rms_norm";
  View x = view(op, "x", x_t), w = view(op, "w", w_t), y = view(op, "y", y_t);
  require_float(op, "x", x);
  require_same(op, "y", y, "x", x);
  Plan plan(op);
  plan.add("x", x);
  plan.add("w", w);
  plan.add("y", y);
  plan.add_value("eps");
  if (x.numel == 0) return plan;
  RowsAt rx = rows_at(op, "x", x), rw = vector_at(op, "w", w), ry = rows_at(op, "y", y);
  plan.set_run([rx, rw, ry](const uint64_t* addr, const double* v, const jit::Stream& s) {
    ops::rms_norm(rx.at(addr[0]), rw.at(addr[1]), ry.at(addr[2]), static_cast<float>(v[0]), &s);
  });
  return plan;
}

Plan plan_layer_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* b_t, const kaio_tensor* y_t) {
  const char* op = "layer_norm";
  View x = view(op, "x", x_t), w = view(op, "w", w_t), b = view(op, "b", b_t), y = view(op, "y", y_t);
  require_float(op, "x", x);
  require_same(op, "y", y, "x", x);
  Plan plan(op);
  plan.add("x", x);
  plan.add("w", w);
  plan.add("b", b);
  plan.add("y", y);
  plan.add_value("eps");
  if (x.numel == 0) return plan;
  RowsAt rx = rows_at(op, "x", x), rw = vector_at(op, "w", w), rb = vector_at(op, "b", b), ry = rows_at(op, "y", y);
  plan.set_run([rx, rw, rb, ry](const uint64_t* addr, const double* v, const jit::Stream& s) {
    ops::layer_norm(rx.at(addr[0]), rw.at(addr[1]), rb.at(addr[2]), ry.at(addr[3]), static_cast<float>(v[0]), &s);
  });
  return plan;
}

Plan plan_add_rms_norm(const kaio_tensor* x_t, const kaio_tensor* r_t, const kaio_tensor* w_t, const kaio_tensor* sum_t,
                       const kaio_tensor* y_t) {
  const char* op = "add_rms_norm";
  View x = view(op, "x", x_t), r = view(op, "residual", r_t), w = view(op, "w", w_t), sum = view(op, "sum", sum_t),
       y = view(op, "y", y_t);
  require_float(op, "x", x);
  require_same(op, "residual", r, "x", x);
  require_same(op, "sum", sum, "x", x);
  require_same(op, "y", y, "x", x);
  Plan plan(op);
  plan.add("x", x);
  plan.add("residual", r);
  plan.add("w", w);
  plan.add("sum", sum);
  plan.add("y", y);
  plan.add_value("eps");
  if (x.numel == 0) return plan;
  RowsAt rx = rows_at(op, "x", x), rr = rows_at(op, "residual", r), rw = vector_at(op, "w", w),
         rs = rows_at(op, "sum", sum), ry = rows_at(op, "y", y);
  plan.set_run([rx, rr, rw, rs, ry](const uint64_t* addr, const double* v, const jit::Stream& s) {
    ops::add_rms_norm(rx.at(addr[0]), rr.at(addr[1]), rw.at(addr[2]), rs.at(addr[3]), ry.at(addr[4]),
                      static_cast<float>(v[0]), &s);
  });
  return plan;
}

Plan plan_rope(const kaio_tensor* x_t, const kaio_tensor* y_t, const kaio_tensor* cos_t, const kaio_tensor* sin_t,
               const kaio_rope_params* p) {
  const char* op = "rope";
  if (!p) throw UsageError("", op, "argument 'params': is missing");
  View x = view(op, "x", x_t), y = view(op, "y", y_t);
  require_float(op, "x", x);
  require_same(op, "y", y, "x", x);
  if ((cos_t == nullptr) != (sin_t == nullptr))
    throw UsageError("", op, "argument 'cos'/'sin': give both tables or neither");
  const ops::Rope base{.style = p->style == 1 ? ops::RopeStyle::GptJ : ops::RopeStyle::NeoX,
                       .heads = p->heads,
                       .head_dim = p->head_dim,
                       .rotary_dim = p->rotary_dim,
                       .theta = p->theta,
                       .position_offset = p->position_offset};
  Plan plan(op);
  plan.add("x", x);
  plan.add("y", y);
  if (x.numel == 0) {  // nothing to launch: the tables are not read (nor checked)
    if (cos_t) {
      plan.add_unread("cos");
      plan.add_unread("sin");
    }
    plan.add_value("theta");
    plan.add_value("position_offset");
    return plan;
  }
  // Tokens are rows; heads x head_dim fold into the columns (x may be tokens x heads x head_dim).
  auto tokens = [&](const char* arg, const View& v) {
    if (v.ndim() < 2) throw UsageError("", op, std::string("argument '") + arg + "': needs tokens x (heads * head_dim)");
    View flat = v;
    if (v.ndim() == 3) {
      if (v.strides[1] != v.shape[2] * v.strides[2])
        throw UsageError("", op, std::string("argument '") + arg + "': heads must be contiguous within a token");
      flat.shape = {v.shape[0], v.shape[1] * v.shape[2]};
      flat.strides = {v.strides[0], v.strides[2]};
    }
    return rows_at(op, arg, flat);
  };
  RowsAt rx = tokens("x", x), ry = tokens("y", y);
  RowsAt rc, rs;
  const bool tables = cos_t != nullptr;
  if (tables) {
    View c = view(op, "cos", cos_t), sn = view(op, "sin", sin_t);
    require_same(op, "sin", sn, "cos", c);
    plan.add("cos", c);
    plan.add("sin", sn);
    rc = rows_at(op, "cos", c);
    rs = rows_at(op, "sin", sn);
  }
  plan.add_value("theta");
  plan.add_value("position_offset");
  plan.set_run([base, rx, ry, rc, rs, tables, op](const uint64_t* addr, const double* v, const jit::Stream& s) {
    ops::Rope r = base;
    r.theta = static_cast<float>(v[0]);
    if (!(v[1] >= 0 && v[1] <= 4294967295.0) || v[1] != static_cast<double>(static_cast<uint64_t>(v[1])))
      throw UsageError("", op, "argument 'position_offset': " + std::to_string(v[1]) + " is not a 32-bit unsigned integer");
    r.position_offset = static_cast<uint32_t>(v[1]);
    if (tables) ops::rope(rx.at(addr[0]), ry.at(addr[1]), rc.at(addr[2]), rs.at(addr[3]), r, &s);
    else ops::rope(rx.at(addr[0]), ry.at(addr[1]), r, &s);
  });
  return plan;
}

}  // namespace kaio::capi

using namespace kaio;
using capi::guard;
using capi::View;

extern "C" {

int kaio_elementwise(const char* op, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                     const float* scalars, size_t n_scalars, void* stream) {
  return guard([&] {
    const ops::detail::MapKernels& m = ops::elementwise_op(op ? op : "");
    capi::launch_map(m, m.spec().name.c_str(), out, in, n_in, scalars, n_scalars, stream);
  });
}

int kaio_reduce_rows(const char* op_name, const kaio_tensor* out_t, const kaio_tensor* x_t, void* stream) {
  return guard([&] { capi::plan_reduce_rows(op_name, out_t, x_t).launch({out_t, x_t}, {}, stream); });
}

int kaio_reduce(const char* op_name, const kaio_tensor* out_t, const kaio_tensor* x_t, void* stream) {
  return guard([&] { capi::plan_reduce(op_name, out_t, x_t).launch({out_t, x_t}, {}, stream); });
}

int kaio_softmax(const kaio_tensor* x_t, const kaio_tensor* y_t, int log, void* stream) {
  return guard([&] { capi::plan_softmax(x_t, y_t, log).launch({x_t, y_t}, {}, stream); });
}

int kaio_rms_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* y_t, float eps, void* stream) {
  return guard([&] { capi::plan_rms_norm(x_t, w_t, y_t).launch({x_t, w_t, y_t}, {eps}, stream); });
}

int kaio_layer_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* b_t, const kaio_tensor* y_t,
                    float eps, void* stream) {
  return guard([&] { capi::plan_layer_norm(x_t, w_t, b_t, y_t).launch({x_t, w_t, b_t, y_t}, {eps}, stream); });
}

int kaio_add_rms_norm(const kaio_tensor* x_t, const kaio_tensor* r_t, const kaio_tensor* w_t, const kaio_tensor* sum_t,
                      const kaio_tensor* y_t, float eps, void* stream) {
  return guard([&] {
    capi::plan_add_rms_norm(x_t, r_t, w_t, sum_t, y_t).launch({x_t, r_t, w_t, sum_t, y_t}, {eps}, stream);
  });
}

int kaio_rope(const kaio_tensor* x_t, const kaio_tensor* y_t, const kaio_tensor* cos_t, const kaio_tensor* sin_t,
              const kaio_rope_params* p, void* stream) {
  return guard([&] {
    capi::Plan plan = capi::plan_rope(x_t, y_t, cos_t, sin_t, p);
    const double theta = p->theta, offset = p->position_offset;
    if (cos_t) plan.launch({x_t, y_t, cos_t, sin_t}, {theta, offset}, stream);
    else plan.launch({x_t, y_t}, {theta, offset}, stream);
  });
}

}  // extern "C"
