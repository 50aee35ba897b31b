// Integer division by a constant, lowered in the emitted PTX. ptxas divides by a constant
// (even a power of two given as an immediate) with the generic sequence (a reciprocal, a
// conversion and a correction: ~20 instructions, a MUFU among them), so the emitter lowers
// it as compilers do: a shift for a power of two, else a multiply-high by a magic number and
// two shifts (Granlund and Montgomery, "Division by invariant integers using
// multiplication", the round-up form that needs no 33-bit multiplier).
#pragma once

#include <cstdint>

namespace kaio::codegen {

// For an unsigned divisor d > 1 that is not a power of two, at 32 or 64 bits:
//   t = mulhi(x, mul);  q = (t + ((x - t) >> 1)) >> (shift - 1)
// is x / d for every x of that width.
struct DivMagic {
  uint64_t mul = 0;
  uint32_t shift = 0;
};
DivMagic udiv_magic(uint64_t d, int bits);

// The emitted sequence evaluated on the host (tests check it against x / d).
uint64_t udiv_by_magic(uint64_t x, const DivMagic& m, int bits);

}  // namespace kaio::codegen
