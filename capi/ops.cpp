// The C ABI over the op library (ops/): DLPack tensors become the ops' arrays and row
// tensors after their dtype, shape, strides and device are checked.
#include <cstring>
#include <string>
#include <vector>

#include "kaio/capi/internal.h"
#include "kaio/capi/map_handle.h"
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

ops::RowTensor row_tensor(const char* op, const char* arg, const View& v) {
  Rows r = rows_of(op, arg, v);
  return ops::as_rows(v.address, v.dtype, to_u32(op, arg, "rows", r.rows), to_u32(op, arg, "cols", r.cols),
                      r.rows > 1 ? r.ld : 0);
}

ops::RowTensor vector_tensor(const char* op, const char* arg, const View& v) {
  if (v.ndim() != 1 || (v.shape[0] > 1 && v.strides[0] != 1))
    throw UsageError("", op, std::string("argument '") + arg + "': expected a contiguous 1-D array, got shape " +
                                 v.shape_str());
  return ops::as_vector(v.address, v.dtype, to_u32(op, arg, "size", static_cast<uint64_t>(v.shape[0])));
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

void launch_map(const ops::detail::MapKernels& m, const char* op, const kaio_tensor* out_t,
                const kaio_tensor* const* in_t, size_t n_in, const float* scalars, size_t n_scalars, void* stream) {
  m.check_counts(n_in, n_scalars);
  std::vector<View> in;
  for (size_t k = 0; k < n_in; ++k) in.push_back(view(op, m.spec().inputs[k].c_str(), in_t[k]));
  View out = view(op, "out", out_t);
  require_float(op, "out", out);
  HostRegions regions;
  regions.add(out);
  for (size_t k = 0; k < n_in; ++k) {
    require_same(op, m.spec().inputs[k].c_str(), in[k], "out", out);
    regions.add(in[k]);
  }
  if (out.numel == 0) return;
  jit::Stream s = stream_of(stream);
  std::vector<uint64_t> addr;
  std::vector<size_t> sizes;
  bool dense = out.contiguous();
  for (const View& v : in) {
    addr.push_back(v.address);
    dense = dense && v.contiguous();
  }
  std::span<const float> sc(scalars, n_scalars);
  if (dense) {
    sizes.assign(in.size(), static_cast<size_t>(out.numel));
    m.launch(out.dtype, out.address, static_cast<size_t>(out.numel), addr, sizes, sc, static_cast<size_t>(out.numel), &s);
    return;
  }
  Rows ro = rows_of(op, "out", out);
  std::vector<uint64_t> ld;
  for (size_t k = 0; k < in.size(); ++k) {
    Rows r = rows_of(op, m.spec().inputs[k].c_str(), in[k]);
    ld.push_back(r.ld);
    sizes.push_back(ops::kUnknownSize);
  }
  m.launch_rows(out.dtype, out.address, ops::kUnknownSize, ro.ld, addr, sizes, ld, sc, to_u32(op, "out", "rows", ro.rows),
                to_u32(op, "out", "cols", ro.cols), &s);
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
  return guard([&] {
    const ops::Reduce r = capi::reduce_op("reduce_rows", op_name);
    const char* op = r == ops::Reduce::ArgMax ? "argmax_rows" : "reduce_rows";
    View x = capi::view(op, "x", x_t), out = capi::view(op, "out", out_t);
    capi::require_float(op, "x", x);
    capi::require_dtype(op, "out", out, r == ops::Reduce::ArgMax ? ir::Scalar::S64 : ir::Scalar::F32);
    if (x.ndim() < 1) throw UsageError("", op, "argument 'x': needs at least one dimension");
    std::vector<int64_t> want(x.shape.begin(), x.shape.end() - 1);
    if (out.shape != want || !out.contiguous())
      throw UsageError("", op, "argument 'out': has shape " + out.shape_str() + "; expected a contiguous array of x's "
                               "shape without its last dimension");
    capi::Rows rw = capi::rows_of(op, "x", x);
    if (x.numel == 0) return;
    capi::HostRegions regions;
    regions.add(x);
    regions.add(out);
    jit::Stream s = capi::stream_of(stream);
    const uint32_t rows = capi::to_u32(op, "x", "rows", rw.rows), cols = capi::to_u32(op, "x", "cols", rw.cols);
    capi::by_float_dtype(x.dtype, [&](auto t) {
      using T = decltype(t);
      if (r == ops::Reduce::ArgMax)
        ops::argmax_rows<T>(ops::Out<int64_t>(out.address), ops::In<T>(x.address), rows, cols, rw.ld, &s);
      else
        ops::reduce_rows<T>(r, ops::Out<float>(out.address), ops::In<T>(x.address), rows, cols, rw.ld, &s);
    });
  });
}

int kaio_reduce(const char* op_name, const kaio_tensor* out_t, const kaio_tensor* x_t, void* stream) {
  return guard([&] {
    const char* op = "reduce";
    const ops::Reduce r = capi::reduce_op(op, op_name);
    if (r != ops::Reduce::Sum && r != ops::Reduce::Max && r != ops::Reduce::Min)
      throw UsageError("", op, "argument 'op': the whole-array reduction is sum, max or min");
    View x = capi::view(op, "x", x_t), out = capi::view(op, "out", out_t);
    capi::require_float(op, "x", x);
    capi::require_dtype(op, "out", out, ir::Scalar::F32);
    if (out.numel != 1) throw UsageError("", op, "argument 'out': needs one element, has shape " + out.shape_str());
    if (!x.contiguous()) throw UsageError("", op, "argument 'x': must be contiguous");
    if (x.numel == 0) throw UsageError("", op, "argument 'x': is empty");
    capi::HostRegions regions;
    regions.add(x);
    regions.add(out);
    jit::Stream s = capi::stream_of(stream);
    capi::by_float_dtype(x.dtype, [&](auto t) {
      using T = decltype(t);
      ops::reduce<T>(r, ops::Out<float>(out.address), ops::In<T>(x.address), static_cast<size_t>(x.numel), &s);
    });
  });
}

int kaio_softmax(const kaio_tensor* x_t, const kaio_tensor* y_t, int log, void* stream) {
  return guard([&] {
    const char* op = log ? "log_softmax" : "softmax";
    View x = capi::view(op, "x", x_t), y = capi::view(op, "y", y_t);
    capi::require_float(op, "x", x);
    capi::require_same(op, "y", y, "x", x);
    if (x.numel == 0) return;
    capi::HostRegions regions;
    regions.add(x);
    regions.add(y);
    jit::Stream s = capi::stream_of(stream);
    ops::RowTensor rx = capi::row_tensor(op, "x", x), ry = capi::row_tensor(op, "y", y);
    if (log) ops::log_softmax(rx, ry, &s);
    else ops::softmax(rx, ry, &s);
  });
}

int kaio_rms_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* y_t, float eps, void* stream) {
  return guard([&] {
    const char* op = "rms_norm";
    View x = capi::view(op, "x", x_t), w = capi::view(op, "w", w_t), y = capi::view(op, "y", y_t);
    capi::require_float(op, "x", x);
    capi::require_same(op, "y", y, "x", x);
    if (x.numel == 0) return;
    capi::HostRegions regions;
    for (const View* v : {&x, &w, &y}) regions.add(*v);
    jit::Stream s = capi::stream_of(stream);
    ops::rms_norm(capi::row_tensor(op, "x", x), capi::vector_tensor(op, "w", w), capi::row_tensor(op, "y", y), eps, &s);
  });
}

int kaio_layer_norm(const kaio_tensor* x_t, const kaio_tensor* w_t, const kaio_tensor* b_t, const kaio_tensor* y_t,
                    float eps, void* stream) {
  return guard([&] {
    const char* op = "layer_norm";
    View x = capi::view(op, "x", x_t), w = capi::view(op, "w", w_t), b = capi::view(op, "b", b_t),
         y = capi::view(op, "y", y_t);
    capi::require_float(op, "x", x);
    capi::require_same(op, "y", y, "x", x);
    if (x.numel == 0) return;
    capi::HostRegions regions;
    for (const View* v : {&x, &w, &b, &y}) regions.add(*v);
    jit::Stream s = capi::stream_of(stream);
    ops::layer_norm(capi::row_tensor(op, "x", x), capi::vector_tensor(op, "w", w), capi::vector_tensor(op, "b", b),
                    capi::row_tensor(op, "y", y), eps, &s);
  });
}

int kaio_add_rms_norm(const kaio_tensor* x_t, const kaio_tensor* r_t, const kaio_tensor* w_t, const kaio_tensor* sum_t,
                      const kaio_tensor* y_t, float eps, void* stream) {
  return guard([&] {
    const char* op = "add_rms_norm";
    View x = capi::view(op, "x", x_t), r = capi::view(op, "residual", r_t), w = capi::view(op, "w", w_t),
         sum = capi::view(op, "sum", sum_t), y = capi::view(op, "y", y_t);
    capi::require_float(op, "x", x);
    capi::require_same(op, "residual", r, "x", x);
    capi::require_same(op, "sum", sum, "x", x);
    capi::require_same(op, "y", y, "x", x);
    if (x.numel == 0) return;
    capi::HostRegions regions;
    for (const View* v : {&x, &r, &w, &sum, &y}) regions.add(*v);
    jit::Stream s = capi::stream_of(stream);
    ops::add_rms_norm(capi::row_tensor(op, "x", x), capi::row_tensor(op, "residual", r), capi::vector_tensor(op, "w", w),
                      capi::row_tensor(op, "sum", sum), capi::row_tensor(op, "y", y), eps, &s);
  });
}

int kaio_rope(const kaio_tensor* x_t, const kaio_tensor* y_t, const kaio_tensor* cos_t, const kaio_tensor* sin_t,
              const kaio_rope_params* p, void* stream) {
  return guard([&] {
    const char* op = "rope";
    if (!p) throw UsageError("", op, "argument 'params': is missing");
    View x = capi::view(op, "x", x_t), y = capi::view(op, "y", y_t);
    capi::require_float(op, "x", x);
    capi::require_same(op, "y", y, "x", x);
    if ((cos_t == nullptr) != (sin_t == nullptr))
      throw UsageError("", op, "argument 'cos'/'sin': give both tables or neither");
    ops::Rope r{.style = p->style == 1 ? ops::RopeStyle::GptJ : ops::RopeStyle::NeoX,
                .heads = p->heads,
                .head_dim = p->head_dim,
                .rotary_dim = p->rotary_dim,
                .theta = p->theta,
                .position_offset = p->position_offset};
    if (x.numel == 0) return;
    capi::HostRegions regions;
    regions.add(x);
    regions.add(y);
    jit::Stream s = capi::stream_of(stream);
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
      return capi::row_tensor(op, arg, flat);
    };
    ops::RowTensor rx = tokens("x", x), ry = tokens("y", y);
    if (!cos_t) {
      ops::rope(rx, ry, r, &s);
      return;
    }
    View c = capi::view(op, "cos", cos_t), sn = capi::view(op, "sin", sin_t);
    capi::require_same(op, "sin", sn, "cos", c);
    regions.add(c);
    regions.add(sn);
    ops::rope(rx, ry, capi::row_tensor(op, "cos", c), capi::row_tensor(op, "sin", sn), r, &s);
  });
}

}  // extern "C"
