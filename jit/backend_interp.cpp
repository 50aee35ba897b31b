// The interpreter backend (KAIO_INTERPRET=1): device memory is host RAM registered with the
// interpreter (so that it checks every access), launches run synchronously in
// ir/interp on the calling thread's pool, streams are names and events are host clocks.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <string>

#include "kaio/ir/interp/interp.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/kernel_state.h"

namespace kaio::jit::detail {

namespace {

constexpr std::align_val_t kHostAlign{256};  // like cuMemAlloc's

struct HostEvent {
  std::chrono::steady_clock::time_point t{};
  bool recorded = false;
};

class InterpreterBackend final : public Backend {
 public:
  bool interpreted() const override { return true; }
  const std::string& default_arch() override {
    static const std::string arch = "sm_90";  // nominal: no driver is asked
    return arch;
  }

  uint64_t alloc(size_t bytes) override {
    void* p = ::operator new(bytes, kHostAlign);
    uint64_t a = reinterpret_cast<uint64_t>(p);
    ir::interp::register_allocation(a, bytes);
    return a;
  }
  void free(uint64_t ptr) noexcept override {
    ir::interp::unregister_allocation(ptr);
    ::operator delete(reinterpret_cast<void*>(ptr), kHostAlign);
  }
  void copy_to_device(uint64_t dst, const void* src, size_t bytes) override {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void copy_to_host(void* dst, uint64_t src, size_t bytes) override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void fill(uint64_t dst, uint8_t byte, size_t bytes) override { std::memset(reinterpret_cast<void*>(dst), byte, bytes); }

  void load(KernelState&) override {}  // nothing to load: launches run the IR
  void resolve(KernelState&) override {}

  // Synchronous, on the host; any stream is ignored. A cluster shape changes nothing for
  // kernels that do not use cluster operations, so it was only validated.
  void launch(KernelState& s, const LaunchConfig& cfg, const uint64_t* slots, void* const*, size_t n) override {
    if (!s.kernel.valid())
      throw UsageError(s.name, "launch", "interpret mode: this compiled kernel carries no IR to interpret");
    if (dry_) return;  // KAIO_INTERPRET=dry: everything up to the kernel's run, for timing host paths
    ir::LaunchShape shape{cfg.grid, cfg.block, cfg.shared_bytes};
    ir::interp::run(s.kernel, shape, std::span<const uint64_t>(slots, n));
  }

  bool device_resources(KernelState&, int&, int&, int&, int&) override { return false; }

 private:
  const bool dry_ = [] {
    const char* v = std::getenv("KAIO_INTERPRET");
    return v && std::string(v) == "dry";
  }();

 public:

  void* stream_create() override { return nullptr; }
  void stream_destroy(void*) noexcept override {}
  void stream_synchronize(void*) override {}
  void synchronize() override {}

  // Launches are synchronous, so a host clock read at record time brackets the work.
  void* event_create() override { return new HostEvent; }
  void event_destroy(void* e) noexcept override { delete static_cast<HostEvent*>(e); }
  void event_record(void* e, void*) override {
    auto* h = static_cast<HostEvent*>(e);
    h->t = std::chrono::steady_clock::now();
    h->recorded = true;
  }
  void event_synchronize(void*) override {}
  float event_elapsed_ms(void* start, void* end) override {
    auto* a = static_cast<HostEvent*>(start);
    auto* b = static_cast<HostEvent*>(end);
    if (!a->recorded || !b->recorded)
      throw UsageError("", "Event::elapsed_ms", "both events must be recorded before their elapsed time is asked for");
    return std::chrono::duration<float, std::milli>(b->t - a->t).count();
  }
};

bool env_interpret() {
  const char* v = std::getenv("KAIO_INTERPRET");
  return v && *v && std::string(v) != "0";
}

}  // namespace

Backend& interpreter_backend() {
  static InterpreterBackend b;
  return b;
}

Backend& backend() {
  static Backend& b = env_interpret() ? interpreter_backend() : device_backend();
  return b;
}

}  // namespace kaio::jit::detail

namespace kaio::jit {

bool interpret_mode() { return detail::backend().interpreted(); }

}  // namespace kaio::jit
