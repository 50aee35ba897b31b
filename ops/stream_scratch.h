// Zeroed device words kept per stream for kernels that coordinate their blocks through
// memory (a counter the launch's last block resets, partials read by that block): the
// whole-array reductions and the Hopper attention forward's persistent form.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kaio/jit/buffer.h"

namespace kaio::ops::detail {

// The device address of `words` 32-bit words, zeroed when first made, for this owner (any
// address unique to the caller, e.g. of a static in its file) and stream (null: the default
// stream). One allocation per (owner, stream), kept for the life of the process: a stream's
// kernels may still run while the application tears down, so it is never freed. A later call
// with the same owner must ask for the same number of words.
uint64_t stream_scratch(const void* owner, const jit::Stream* stream, size_t words);

}  // namespace kaio::ops::detail
