// Internal to the C ABI: an op call resolved once for its arrays' metadata (kaio_plan).
//
// Making a plan does every check of the op's C function that depends only on dtypes,
// shapes, strides, devices and options, and keeps what the launch needs (rows, leading
// dimensions, the op's kernels). A launch then takes the arrays' addresses and the op's
// per-call numbers (scalars, eps, ...), registers the arrays with the interpreter in
// interpret mode and runs the op: the op's own launch path, which picks the kernel for the
// addresses' alignment. The kaio_<op> functions are "make the plan, launch it once", so
// both paths check and launch the same way and raise the same errors.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kaio/capi/exchange.h"
#include "kaio/capi/internal.h"
#include "kaio/ops/map.h"

namespace kaio::capi {

inline constexpr size_t kMaxPlanValues = ops::kMapMaxScalars;
// The most of any op: attention_backward's nine tensors, two prefix sums and the slopes.
inline constexpr size_t kMaxPlanArrays = ops::kMapMaxInputs + 1 > 12 ? ops::kMapMaxInputs + 1 : 12;

class Plan {
 public:
  // addr: one element-0 address per array (in add() order); values: the per-call numbers.
  using Run = std::function<void(const uint64_t* addr, const double* values, const jit::Stream& s)>;

  explicit Plan(std::string op) : op_(std::move(op)) {}

  const std::string& op() const { return op_; }
  size_t arrays() const { return arrays_.size(); }
  size_t values() const { return values_.size(); }

  // The next array of the launch (its name for errors, and its span for the interpreter).
  void add(const char* name, const View& v) { add_span(name, v.bytes()); }
  // An array the launch takes but does not touch.
  void add_unread(const char* name) { add_span(name, 0); }
  // The next per-call number.
  void add_value(const char* name) {
    if (values_.size() == kMaxPlanValues) throw InternalError("capi: a plan takes at most 8 numbers");
    values_.emplace_back(name);
  }
  // What a launch runs; left unset when the arrays are empty (nothing to launch).
  void set_run(Run r) { run_ = std::move(r); }

  // Checks the counts and the addresses (not null where an array has elements), registers
  // the arrays in interpret mode and runs.
  void launch(const uint64_t* addr, size_t n_addr, const double* values, size_t n_values, void* stream) const;
  // The same with the tensors' own addresses (the kaio_<op> functions).
  void launch(std::initializer_list<const kaio_tensor*> tensors, std::initializer_list<double> values,
              void* stream) const;

 private:
  void add_span(const char* name, uint64_t bytes) {
    if (arrays_.size() == kMaxPlanArrays)
      throw InternalError("capi: a plan takes at most " + std::to_string(kMaxPlanArrays) + " arrays");
    arrays_.push_back(Array{name, bytes});
  }
  struct Array {
    std::string name;
    uint64_t bytes = 0;  // the span the view touches; 0: no elements
  };
  std::string op_;
  std::vector<Array> arrays_;
  std::vector<std::string> values_;
  Run run_;
};

// The counts a packed launch gives (kaio_plan_launch_packed, kaio_plan_launch_objects), checked
// against the plan before any word past them is read.
inline void check_word_counts(const Plan& p, size_t n_data, size_t n_values) {
  if (n_data != p.arrays() || n_values != p.values())
    throw UsageError("", p.op(), "argument 'words': the plan takes " + std::to_string(p.arrays()) + " arrays and " +
                                     std::to_string(p.values()) + " numbers, got " + std::to_string(n_data) + " and " +
                                     std::to_string(n_values));
}

// The element-0 address of a tensor (data + byte_offset); 0 for none.
inline uint64_t address_of(const kaio_tensor* t) {
  return t ? reinterpret_cast<uint64_t>(t->data) + t->byte_offset : 0;
}

// Plans of the ops (capi/ops.cpp, capi/matmul.cpp): the checks of kaio_<op>, in its order.
// The per-call numbers are listed beside each.
Plan plan_map(std::shared_ptr<const ops::detail::MapKernels> keep, const ops::detail::MapKernels& m, const char* op,
              const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in, size_t n_scalars);  // the scalars
Plan plan_reduce_rows(const char* op_name, const kaio_tensor* out, const kaio_tensor* x);
Plan plan_reduce(const char* op_name, const kaio_tensor* out, const kaio_tensor* x);
Plan plan_softmax(const kaio_tensor* x, const kaio_tensor* y, int log);
Plan plan_rms_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* y);  // eps
Plan plan_layer_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* b, const kaio_tensor* y);  // eps
Plan plan_add_rms_norm(const kaio_tensor* x, const kaio_tensor* r, const kaio_tensor* w, const kaio_tensor* sum,
                       const kaio_tensor* y);  // eps
Plan plan_rope(const kaio_tensor* x, const kaio_tensor* y, const kaio_tensor* cos, const kaio_tensor* sin,
               const kaio_rope_params* p);  // theta, position_offset
Plan plan_matmul(const char* variant, const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                 const kaio_matmul_options* o);  // alpha, beta
// capi/attention.cpp, capi/quant.cpp: no per-call numbers.
Plan plan_attention_backward(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* o,
                             const kaio_tensor* dout, const kaio_tensor* lse, const kaio_tensor* dq, const kaio_tensor* dk,
                             const kaio_tensor* dv, const kaio_attention_options* opt);
Plan plan_attention(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* o,
                    const kaio_attention_options* opt);
Plan plan_attention_decode(const kaio_tensor* q, const kaio_tensor* k_cache, const kaio_tensor* v_cache,
                           const kaio_tensor* seqlens, const kaio_tensor* o, const kaio_decode_options* opt);

}  // namespace kaio::capi

struct kaio_plan {
  kaio::capi::Plan plan;
  mutable kaio::capi::ObjectSignature objects;  // learned by kaio_plan_launch_objects
};

namespace kaio::capi {

// Runs f() (which makes a Plan) under guard(), into *out (a new kaio_plan).
template <class F>
int make_plan(kaio_plan** out, F&& f) {
  return guard([&] {
    if (!out) throw UsageError("", "plan", "argument 'out': is missing");
    *out = nullptr;
    *out = new kaio_plan{f()};
  });
}

}  // namespace kaio::capi
