// Per-stream device scratch (ops/stream_scratch.h).
#include "kaio/ops/stream_scratch.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kaio/ir/error.h"

namespace kaio::ops::detail {

uint64_t stream_scratch(const void* owner, const jit::Stream* stream, size_t words) {
  static std::mutex m;
  // Reachable through this static and never destroyed (see the header).
  static auto* buffers = new std::map<std::pair<const void*, const void*>, jit::DeviceBuffer<uint32_t>>;
  const std::pair<const void*, const void*> key{owner, stream ? stream->handle() : nullptr};
  std::lock_guard<std::mutex> g(m);
  auto it = buffers->find(key);
  if (it == buffers->end()) {
    it = buffers->emplace(key, jit::DeviceBuffer<uint32_t>(words)).first;
    it->second.fill_bytes(0);
  } else if (it->second.size() != words) {
    throw InternalError("stream_scratch: an owner asked for " + std::to_string(words) + " words after " +
                        std::to_string(it->second.size()));
  }
  return it->second.device_address();
}

}  // namespace kaio::ops::detail
