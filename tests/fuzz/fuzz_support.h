// Iteration counts and seeds of the fuzz tests. CI runs a fixed budget from a fixed seed;
// KAIO_FUZZ_ITERATIONS and KAIO_FUZZ_SEED run longer or elsewhere locally, e.g.
//   KAIO_FUZZ_ITERATIONS=5000 KAIO_FUZZ_SEED=$RANDOM build/tests/kaio_tests "[fuzz]"
// Every failure message carries the seed and the case number that reproduce it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace kaio::test {

inline uint64_t fuzz_env(const char* name, uint64_t fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  return std::strtoull(s, nullptr, 0);
}
// `ci` iterations unless KAIO_FUZZ_ITERATIONS says otherwise.
inline uint64_t fuzz_iterations(uint64_t ci) { return fuzz_env("KAIO_FUZZ_ITERATIONS", ci); }
inline uint64_t fuzz_seed(uint64_t ci) { return fuzz_env("KAIO_FUZZ_SEED", ci); }

}  // namespace kaio::test
