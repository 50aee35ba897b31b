// Magic numbers for unsigned division by a constant (codegen/div_magic.h).
#include "kaio/codegen/div_magic.h"

#include <bit>

namespace kaio::codegen {

DivMagic udiv_magic(uint64_t d, int bits) {
  using u128 = unsigned __int128;
  // l = ceil(log2 d); mul = floor(2^bits * (2^l - d) / d) + 1, below 2^bits because
  // 2^l < 2d for a d that is not a power of two.
  const uint32_t l = uint32_t(std::bit_width(d - 1));
  const u128 num = (u128(1) << bits) * ((u128(1) << l) - d);
  return {uint64_t(num / d + 1), l};
}

uint64_t udiv_by_magic(uint64_t x, const DivMagic& m, int bits) {
  using u128 = unsigned __int128;
  const uint64_t mask = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  x &= mask;
  const uint64_t t = uint64_t((u128(x) * m.mul) >> bits) & mask;
  return ((t + ((x - t) >> 1)) & mask) >> (m.shift - 1);
}

}  // namespace kaio::codegen
