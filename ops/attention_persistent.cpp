// The host side of the Hopper forward's persistent form (ops/attention_wgmma.cpp builds and
// launches the kernel): when a call takes it, how its items are grouped, and the counter its
// blocks take items from.
#include <algorithm>
#include <cstdint>

#include "kaio/jit/buffer.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/stream_scratch.h"

namespace kaio::ops {

// Its own 128 bytes a stream (ops/stream_scratch.h): zeroed once, reset by each launch's last take.
uint64_t detail::attention_item_counter(const jit::Stream* stream) {
  static const char owner = 0;
  return stream_scratch(&owner, stream, 32);
}

namespace {
thread_local int persistent_mode = -1;      // detail::set_attention_wgmma_persistent
thread_local bool equal_groups = true;      // detail::set_attention_equal_groups
}  // namespace

void detail::set_attention_wgmma_persistent(int mode) { persistent_mode = mode < 0 ? -1 : mode > 0 ? 1 : 0; }
void detail::set_attention_equal_groups(bool on) { equal_groups = on; }

uint32_t detail::attention_item_group(uint32_t tiles_m, uint64_t pairs, uint32_t blocks, uint64_t kv_bytes, uint64_t l2_bytes,
                                      bool uneven) {
  if (!uneven || tiles_m == 0) return 1;
  // About four blocks' worth of items a group, at most half the L2 of K and V: a model of the
  // blocks taking items in turn (each a cost of its key tiles plus one) finishes 8% sooner on
  // average over 13 causal shapes than with one head a group. The groups are of equal size
  // (as many as four blocks' worth makes, the last at most one pair smaller): filled to four
  // blocks' worth, the last group of some shapes is small and ends the launch on its long items
  // (D 256 causal on the H200's 60 MB: 15, 15 and 2 pairs, 7% slower than the grid, where
  // groups of 11, 11 and 10 are 17% faster; "Equal item groups" in bench/NOTES.md).
  uint64_t g = (4ull * blocks + tiles_m - 1) / tiles_m;
  if (kv_bytes) g = std::min<uint64_t>(g, std::max<uint64_t>(1, l2_bytes / 2 / kv_bytes));
  g = std::clamp<uint64_t>(g, 1, std::max<uint64_t>(pairs, 1));
  if (equal_groups) {  // as many groups, of equal size
    const uint64_t n = (pairs + g - 1) / g;
    g = (pairs + n - 1) / n;
  }
  return uint32_t(g);
}

bool attention_wgmma_persistent(const AttentionWgmmaConfig& c, bool causal, uint64_t items, uint32_t sm_count) {
  if (c.varlen || persistent_mode == 0) return false;
  // Measured on the H200 against the grid, alternated in one call (bench/NOTES.md, "The
  // persistent Hopper forward measured" and "Equal item groups"): causal +3 to +17% (D 256 the
  // most: its causal items differ the most in length), level where one causal head is already
  // more items than the SMs (S 16384); not causal level to 3% slower, nothing to gain.
  return persistent_mode > 0 || (causal && items > sm_count);
}

}  // namespace kaio::ops
