// Plans (kaio_plan): an op resolved once for its arrays' metadata, launched with addresses.
#include "kaio/capi/plan.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kaio/capi/map_handle.h"
#include "kaio/ops/elementwise.h"

namespace kaio::capi {

void Plan::launch(const uint64_t* addr, size_t n_addr, const double* values, size_t n_values, void* stream) const {
  if (n_addr != arrays_.size() || (n_addr && !addr))
    throw UsageError("", op_, "argument 'data': the plan takes " + std::to_string(arrays_.size()) + " arrays, got " +
                                  std::to_string(n_addr));
  if (n_values != values_.size() || (n_values && !values))
    throw UsageError("", op_, "argument 'values': the plan takes " + std::to_string(values_.size()) +
                                  " numbers, got " + std::to_string(n_values));
  for (size_t k = 0; k < n_addr; ++k)
    if (addr[k] == 0 && arrays_[k].bytes)
      throw UsageError("", op_, "argument '" + arrays_[k].name + "': has a null data pointer");
  if (!run_) return;
  const jit::Stream s = stream_of(stream);
  if (!registers_host_memory()) return run_(addr, values, s);  // device mode: nothing to register
  HostRegions regions;
  for (size_t k = 0; k < n_addr; ++k) regions.add(addr[k], arrays_[k].bytes);
  run_(addr, values, s);
}

void Plan::launch(std::initializer_list<const kaio_tensor*> tensors, std::initializer_list<double> values,
                  void* stream) const {
  std::vector<uint64_t> addr;
  addr.reserve(tensors.size());
  for (const kaio_tensor* t : tensors) addr.push_back(address_of(t));
  launch(addr.data(), addr.size(), values.begin(), values.size(), stream);
}

}  // namespace kaio::capi

using namespace kaio;
using capi::make_plan;

extern "C" {

int kaio_plan_elementwise(const char* op, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                          size_t n_scalars, kaio_plan** plan) {
  return make_plan(plan, [&] {
    const ops::detail::MapKernels& m = ops::elementwise_op(op ? op : "");
    return capi::plan_map(nullptr, m, m.spec().name.c_str(), out, in, n_in, n_scalars);
  });
}

int kaio_plan_map(const kaio_map* m, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                  size_t n_scalars, kaio_plan** plan) {
  return make_plan(plan, [&] {
    if (!m) throw UsageError("", "map", "argument 'map': is missing");
    return capi::plan_map(m->kernels, *m->kernels, m->kernels->spec().name.c_str(), out, in, n_in, n_scalars);
  });
}

int kaio_plan_reduce_rows(const char* op, const kaio_tensor* out, const kaio_tensor* x, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_reduce_rows(op, out, x); });
}

int kaio_plan_reduce(const char* op, const kaio_tensor* out, const kaio_tensor* x, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_reduce(op, out, x); });
}

int kaio_plan_softmax(const kaio_tensor* x, const kaio_tensor* y, int log, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_softmax(x, y, log); });
}

int kaio_plan_rms_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* y, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_rms_norm(x, w, y); });
}

int kaio_plan_layer_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* b, const kaio_tensor* y,
                         kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_layer_norm(x, w, b, y); });
}

int kaio_plan_add_rms_norm(const kaio_tensor* x, const kaio_tensor* residual, const kaio_tensor* w,
                           const kaio_tensor* sum, const kaio_tensor* y, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_add_rms_norm(x, residual, w, sum, y); });
}

int kaio_plan_rope(const kaio_tensor* x, const kaio_tensor* y, const kaio_tensor* cos, const kaio_tensor* sin,
                   const kaio_rope_params* p, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_rope(x, y, cos, sin, p); });
}

int kaio_plan_matmul(const char* variant, const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                     const kaio_matmul_options* o, kaio_plan** plan) {
  return make_plan(plan, [&] { return capi::plan_matmul(variant, a, b, c, o); });
}

int kaio_plan_launch(const kaio_plan* plan, const uint64_t* data, size_t n_data, const double* values,
                     size_t n_values, void* stream) {
  return capi::guard([&] {
    if (!plan) throw UsageError("", "plan", "argument 'plan': is missing");
    plan->plan.launch(data, n_data, values, n_values, stream);
  });
}

int kaio_plan_launch_packed(const uint64_t* words) {
  return capi::guard([&] {
    if (!words) throw UsageError("", "plan", "argument 'words': is missing");
    uint64_t head[4];
    std::memcpy(head, words, sizeof head);
    if (!head[0]) throw UsageError("", "plan", "argument 'plan': is missing");
    const auto* plan = reinterpret_cast<const kaio_plan*>(head[0]);
    void* stream = reinterpret_cast<void*>(head[1]);
    const size_t n_data = head[2], n_values = head[3];
    capi::check_word_counts(plan->plan, n_data, n_values);
    // Copied out: the caller's buffer need not be 8-byte aligned (a Python bytes object's is
    // by CPython's layout, not by contract).
    static_assert(sizeof(double) == sizeof(uint64_t));
    uint64_t data[capi::kMaxPlanArrays];
    double values[capi::kMaxPlanValues];
    std::memcpy(data, words + 4, n_data * sizeof(uint64_t));
    std::memcpy(values, words + 4 + n_data, n_values * sizeof(double));
    plan->plan.launch(data, n_data, values, n_values, stream);
  });
}

size_t kaio_plan_arrays(const kaio_plan* plan) { return plan ? plan->plan.arrays() : 0; }

size_t kaio_plan_values(const kaio_plan* plan) { return plan ? plan->plan.values() : 0; }

const char* kaio_plan_op(const kaio_plan* plan) { return plan ? plan->plan.op().c_str() : ""; }

void kaio_plan_free(kaio_plan* plan) { delete plan; }

}  // extern "C"
