// The fused matmul epilogue's activations: configs name them by serial, and the builders
// find their bodies here.
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

struct Activations {
  std::shared_mutex m;
  std::unordered_map<uint64_t, detail::MatmulActivation> by_serial;
};
Activations& activations() {
  static Activations a;
  return a;
}

}  // namespace

uint64_t matmul_activation(const detail::MapKernels& map) {
  const MapSpec& s = map.spec();
  if (s.inputs.size() != 1 || !s.scalars.empty())
    throw UsageError("matmul", "matmul", "epilogue.activation: map '" + s.name + "' takes " +
                                             std::to_string(s.inputs.size()) + " inputs and " +
                                             std::to_string(s.scalars.size()) +
                                             " scalars; an activation takes one input and no scalars");
  Activations& a = activations();
  {
    std::shared_lock<std::shared_mutex> g(a.m);
    if (a.by_serial.count(map.serial())) return map.serial();
  }
  std::unique_lock<std::shared_mutex> g(a.m);
  a.by_serial.try_emplace(map.serial(), detail::MatmulActivation{s.name, s.body});
  return map.serial();
}

namespace detail {

const MatmulActivation& matmul_activation_of(uint64_t serial) {
  Activations& a = activations();
  std::shared_lock<std::shared_mutex> g(a.m);
  auto it = a.by_serial.find(serial);
  if (it == a.by_serial.end())
    throw UsageError("matmul", "matmul", "the config names activation " + std::to_string(serial) +
                                             ", which no matmul_activation() call registered");
  return it->second;  // entries are never erased: the reference stays valid
}

}  // namespace detail

}  // namespace kaio::ops
