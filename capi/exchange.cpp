// kaio_plan_launch_objects: a plan launched on a framework's tensor objects, read through
// the DLPack exchange table the framework publishes (its tensor type's
// __dlpack_c_exchange_api__ capsule, DLPack 1.2 and later). One foreign call replaces the
// caller's reads of every tensor's dtype, shape, strides, device, address and current
// stream: the table's functions read them from the tensors' C structs.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/capi/plan.h"

namespace {

// DLPack's exchange table, declared by its published layout (dlpack.h's DLPackExchangeAPI):
// the objects stay opaque pointers handed to the producer's own functions, so kaio needs
// neither DLPack's nor Python's headers.
struct ExchangeHeader {
  uint32_t major, minor;
  const ExchangeHeader* prev;  // an older version of the table, or null
};
struct ExchangeTable {
  ExchangeHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* object, kaio_tensor* out);  // may be null
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** stream);
};
constexpr int32_t kDLCPU = 1;

// The newest table of major version 1 that has the non-owning reader (added in 1.2).
const ExchangeTable* usable(const void* api) {
  for (auto* h = static_cast<const ExchangeHeader*>(api); h; h = h->prev) {
    if (h->major != 1) continue;
    if (h->minor < 2) return nullptr;
    auto* t = reinterpret_cast<const ExchangeTable*>(h);
    return t->dltensor_from_py_object_no_sync && t->current_work_stream ? t : nullptr;
  }
  return nullptr;
}

// One array's metadata as words: device, dtype and rank, the shape, the strides.
void append_words(const kaio_tensor& t, std::vector<int64_t>& w) {
  w.push_back((int64_t(t.device.device_type) << 32) | uint32_t(t.device.device_id));
  w.push_back(int64_t(t.dtype.code) | int64_t(t.dtype.bits) << 8 | int64_t(t.dtype.lanes) << 16 |
              int64_t(t.ndim) << 32);
  for (int32_t d = 0; d < t.ndim; ++d) w.push_back(t.shape[d]);
  w.push_back(t.strides != nullptr);
  if (t.strides)
    for (int32_t d = 0; d < t.ndim; ++d) w.push_back(t.strides[d]);
}

}  // namespace

using namespace kaio;

extern "C" {

int kaio_plan_launch_objects(const uint64_t* words) {
  int status = KAIO_MISMATCH;
  const int st = capi::guard([&] {
    if (!words) throw UsageError("", "plan", "argument 'words': is missing");
    uint64_t head[5];
    std::memcpy(head, words, sizeof head);
    const auto* plan = reinterpret_cast<const kaio_plan*>(head[0]);
    if (!plan) throw UsageError("", "plan", "argument 'plan': is missing");
    const ExchangeTable* api = usable(reinterpret_cast<const void*>(head[1]));
    const bool learn = head[2] != 0;
    const size_t n = head[3], n_values = head[4];
    capi::check_word_counts(plan->plan, n, n_values);
    if (!api || n > capi::kMaxPlanArrays) return;  // KAIO_MISMATCH: the caller's own path
    // Copied out: the caller's buffer need not be 8-byte aligned.
    uint64_t objects[capi::kMaxPlanArrays];
    double values[capi::kMaxPlanValues];
    std::memcpy(objects, words + 5, n * sizeof(uint64_t));
    std::memcpy(values, words + 5 + n, n_values * sizeof(double));
    kaio_tensor t[capi::kMaxPlanArrays] = {};
    for (size_t k = 0; k < n; ++k)
      if (api->dltensor_from_py_object_no_sync(reinterpret_cast<void*>(objects[k]), &t[k]) != 0) {
        status = KAIO_ERR_CALLBACK;  // the producer's error is set in the caller's interpreter
        return;
      }
    // The objects' metadata as words, in a buffer each thread reuses (no allocation per call).
    thread_local std::vector<int64_t> w;
    w.clear();
    for (size_t k = 0; k < n; ++k) append_words(t[k], w);
    if (learn ? !plan->objects.learn(w) : !plan->objects.known() || w != plan->objects.words()) return;
    uint64_t addr[capi::kMaxPlanArrays];
    for (size_t k = 0; k < n; ++k) addr[k] = capi::address_of(&t[k]);
    void* stream = nullptr;
    if (n && t[0].device.device_type != kDLCPU &&
        api->current_work_stream(t[0].device.device_type, t[0].device.device_id, &stream) != 0) {
      status = KAIO_ERR_CALLBACK;
      return;
    }
    status = KAIO_OK;
    plan->plan.launch(addr, n, values, n_values, stream);
  });
  return st ? st : status;
}

}  // extern "C"
