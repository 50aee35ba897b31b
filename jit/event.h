// CUDA events for timing work on a stream: RAII, no CUDA header needed. In interpret mode
// (launches are synchronous) an event is a host clock reading.
//
//   jit::Event start, stop;
//   start.record(&stream);
//   k.launch({... .stream = &stream}, ...);
//   stop.record(&stream);
//   float ms = jit::elapsed_ms(start, stop);   // waits for `stop`
#pragma once

namespace kaio::jit {

class Stream;

class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Records the event on `stream` (null: the default stream).
  void record(const Stream* stream = nullptr);
  // Waits until the work recorded before the event has finished.
  void synchronize() const;
  bool recorded() const { return recorded_; }
  void* handle() const { return h_; }  // CUevent (device backend)

 private:
  void* h_ = nullptr;
  bool recorded_ = false;
};

// Milliseconds between two recorded events (waits for `end`). UsageError when either has
// not been recorded.
float elapsed_ms(const Event& start, const Event& end);

}  // namespace kaio::jit
