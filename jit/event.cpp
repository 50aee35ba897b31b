#include "kaio/jit/event.h"

#include <utility>

#include "kaio/ir/error.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/buffer.h"

namespace kaio::jit {

Event::Event() : h_(detail::backend().event_create()) {}

Event::~Event() {
  if (h_) detail::backend().event_destroy(h_);
}

Event::Event(Event&& o) noexcept : h_(std::exchange(o.h_, nullptr)), recorded_(std::exchange(o.recorded_, false)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (h_) detail::backend().event_destroy(h_);
    h_ = std::exchange(o.h_, nullptr);
    recorded_ = std::exchange(o.recorded_, false);
  }
  return *this;
}

void Event::record(const Stream* stream) {
  if (!h_) throw UsageError("", "Event::record", "this Event was moved from");
  detail::backend().event_record(h_, stream ? stream->handle() : nullptr);
  recorded_ = true;
}

void Event::synchronize() const {
  if (!recorded_) throw UsageError("", "Event::synchronize", "the event has not been recorded");
  detail::backend().event_synchronize(h_);
}

float elapsed_ms(const Event& start, const Event& end) {
  if (!start.recorded() || !end.recorded())
    throw UsageError("", "elapsed_ms", std::string(start.recorded() ? "the end" : "the start") +
                                           " event has not been recorded");
  end.synchronize();
  return detail::backend().event_elapsed_ms(start.handle(), end.handle());
}

}  // namespace kaio::jit
