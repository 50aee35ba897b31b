// The C ABI over matmul and matmul_auto: the problem (sizes, layouts, leading dimensions,
// batch strides) is read from the DLPack tensors' shapes and strides.
#include <cstring>
#include <string>

#include "kaio/capi/internal.h"
#include "kaio/capi/plan.h"
#include "kaio/capi/map_handle.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_auto.h"

namespace kaio::capi {

namespace {

struct Operand {
  uint64_t rows = 0, cols = 0, batch = 1;
  ops::MatLayout layout = ops::MatLayout::RowMajor;
  uint64_t ld = 0, batch_stride = 0;
};

// A matrix (rows, cols) or a batch of them (batch, rows, cols): row-major when its last
// dimension is contiguous, column-major when the one before is (a transposed view).
Operand matrix(const char* op, const char* arg, const View& v, bool row_major_only) {
  const std::string a = std::string("argument '") + arg + "': ";
  if (v.ndim() != 2 && v.ndim() != 3)
    throw UsageError("", op, a + "expected a matrix or a batch of matrices, got shape " + v.shape_str());
  const int n = v.ndim();
  Operand m;
  m.rows = static_cast<uint64_t>(v.shape[n - 2]);
  m.cols = static_cast<uint64_t>(v.shape[n - 1]);
  const int64_t sr = v.strides[n - 2], sc = v.strides[n - 1];
  const bool row = (sc == 1 || m.cols <= 1) && (m.rows <= 1 || sr >= static_cast<int64_t>(m.cols));
  if (row) {
    m.layout = ops::MatLayout::RowMajor;
    m.ld = m.rows > 1 ? static_cast<uint64_t>(sr) : m.cols;
  } else {
    if (row_major_only)
      throw UsageError("", op, a + "must be row-major: a unit stride along its last dimension, rows apart");
    const bool col = (sr == 1 || m.rows <= 1) && (m.cols <= 1 || sc >= static_cast<int64_t>(m.rows));
    if (!col)
      throw UsageError("", op, a + "needs a unit stride along one of its last two dimensions (make it contiguous first)");
    m.layout = ops::MatLayout::ColMajor;
    m.ld = m.cols > 1 ? static_cast<uint64_t>(sc) : m.rows;
  }
  if (n == 3) {
    m.batch = static_cast<uint64_t>(v.shape[0]);
    m.batch_stride = m.batch > 1 ? static_cast<uint64_t>(v.strides[0]) : 0;
  }
  return m;
}

uint32_t u32(const char* op, const char* what, uint64_t v) {
  if (v > 0xffffffffu) throw UsageError("", op, std::string(what) + " = " + std::to_string(v) + " does not fit in 32 bits");
  return static_cast<uint32_t>(v);
}

}  // namespace

Plan plan_matmul(const char* variant, const kaio_tensor* a_t, const kaio_tensor* b_t, const kaio_tensor* c_t,
                 const kaio_matmul_options* o) {
  const char* op = variant ? "matmul" : "matmul_auto";
  kaio_matmul_options def{};
  def.alpha = 1.0f;
  if (!o) o = &def;
  View a = view(op, "a", a_t), b = view(op, "b", b_t), c = view(op, "c", c_t);
  if (a.dtype != ir::Scalar::F32 && a.dtype != ir::Scalar::F16 && a.dtype != ir::Scalar::BF16)
    throw UsageError("", op, std::string("argument 'a': has dtype ") + dtype_name(a.dtype) +
                                 "; expected float32, float16 or bfloat16");
  require_dtype(op, "b", b, a.dtype);
  require_float(op, "c", c);
  Operand ma = matrix(op, "a", a, false), mb = matrix(op, "b", b, false), mc = matrix(op, "c", c, true);
  if (mb.rows != ma.cols)
    throw UsageError("", op, "argument 'b': has " + std::to_string(mb.rows) + " rows; a has " +
                                 std::to_string(ma.cols) + " columns (shapes " + a.shape_str() + " @ " + b.shape_str() + ")");
  if (mc.rows != ma.rows || mc.cols != mb.cols)
    throw UsageError("", op, "argument 'c': has shape " + c.shape_str() + "; a @ b is " + std::to_string(ma.rows) +
                                 " x " + std::to_string(mb.cols));
  uint64_t batch = std::max({ma.batch, mb.batch, mc.batch});
  if (mc.batch != batch || (a.ndim() == 3 && ma.batch != batch) || (b.ndim() == 3 && mb.batch != batch))
    throw UsageError("", op, "argument 'c': batch sizes differ (a " + a.shape_str() + ", b " + b.shape_str() + ", c " +
                                 c.shape_str() + ")");
  ops::MatmulProblem p;
  p.m = u32(op, "m", ma.rows);
  p.n = u32(op, "n", mb.cols);
  p.k = u32(op, "k", ma.cols);
  p.in = a.dtype;
  p.out = c.dtype;
  p.a = ma.layout;
  p.b = mb.layout;
  p.lda = u32(op, "lda", ma.ld);
  p.ldb = u32(op, "ldb", mb.ld);
  p.ldc = u32(op, "ldc", mc.ld);
  p.batch = u32(op, "batch", batch);
  // A 2-D operand of a batched product is shared by every batch (stride 0); a packed
  // stride would be filled in for it, so give it one batch's worth of nothing.
  p.stride_a = a.ndim() == 3 ? ma.batch_stride : 0;
  p.stride_b = b.ndim() == 3 ? mb.batch_stride : 0;
  p.stride_c = mc.batch_stride;
  if (batch > 1 && (p.stride_a == 0 || p.stride_b == 0))
    throw UsageError("", op, "a batched product needs a and b batched too (broadcasting a matrix over the batch is not supported)");
  p.tf32 = o->tf32 != 0;
  p.split_k = o->split_k ? o->split_k : 1;
  Plan plan(op);
  plan.add("a", a);
  plan.add("b", b);
  plan.add("c", c);
  const bool has_bias = o->bias != nullptr;
  if (has_bias) {
    View bias = view(op, "bias", o->bias);
    require_dtype(op, "bias", bias, c.dtype);
    if (bias.ndim() != 1 || bias.shape[0] != static_cast<int64_t>(p.n) || (p.n > 1 && bias.strides[0] != 1))
      throw UsageError("", op, "argument 'bias': expected a contiguous vector of n = " + std::to_string(p.n) +
                                   " elements, got shape " + bias.shape_str());
    plan.add("bias", bias);
  }
  // The plan holds a user map used as the epilogue (the library's ops live as long as the process).
  std::shared_ptr<const ops::detail::MapKernels> keep;
  if (o->activation && *o->activation) {
    p.epilogue.activation = &ops::elementwise_op(o->activation);
  } else if (o->activation_map) {
    keep = o->activation_map->kernels;
    p.epilogue.activation = keep.get();
  }
  p.epilogue.fast_math = o->fast_math != 0;
  plan.add_value("alpha");
  plan.add_value("beta");
  if (a.numel == 0 || c.numel == 0) return plan;
  const ops::MatmulVariant* v = variant ? &ops::matmul_variant(variant) : nullptr;
  plan.set_run([p, v, has_bias, keep](const uint64_t* addr, const double* values, const jit::Stream& s) {
    ops::MatmulProblem q = p;
    q.alpha = static_cast<float>(values[0]);
    q.beta = static_cast<float>(values[1]);
    auto align = [](uint64_t address) {
      uint32_t al = 16;
      while (al > 1 && address % al) al /= 2;
      return al;
    };
    q.ptr_align = std::min({align(addr[0]), align(addr[1]), align(addr[2])});
    if (has_bias) q.epilogue.bias = addr[3];
    if (v) ops::matmul(*v, addr[0], addr[1], addr[2], q, &s);
    else ops::matmul_auto(addr[0], addr[1], addr[2], q, &s);
  });
  return plan;
}

}  // namespace kaio::capi

using namespace kaio;

extern "C" {

int kaio_matmul(const char* variant, const kaio_tensor* a_t, const kaio_tensor* b_t, const kaio_tensor* c_t,
                const kaio_matmul_options* o, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_matmul(variant, a_t, b_t, c_t, o);
    const double alpha = o ? o->alpha : 1.0, beta = o ? o->beta : 0.0;
    if (o && o->bias) plan.launch({a_t, b_t, c_t, o->bias}, {alpha, beta}, stream);
    else plan.launch({a_t, b_t, c_t}, {alpha, beta}, stream);
  });
}

int kaio_matmul_variant_names(char* buf, size_t cap, size_t* needed) {
  return capi::guard([&] {
    std::string s;
    for (const ops::MatmulVariant& v : ops::matmul_variants()) s += std::string(v.name) + "\n";
    if (needed) *needed = s.size() + 1;
    if (buf && cap) {
      size_t n = std::min(cap - 1, s.size());
      std::memcpy(buf, s.data(), n);
      buf[n] = 0;
    }
  });
}

}  // extern "C"
