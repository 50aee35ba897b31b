// TMA maps of attention tensors (q, k, v, o, do; 16-bit), shared by the Hopper forward
// (ops/attention_wgmma.cpp) and backward (ops/attention_backward_wgmma.cpp) kernels: 4-D in
// the order the tensor's strides grow, boxes of 64 head elements (one 128-byte swizzled row)
// by `rows` of the sequence.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/kernel/shared_tile.h"

namespace kaio::ops {

namespace {
constexpr uint32_t kElem = 2;                                 // 16-bit elements
constexpr uint32_t kBlock = kernel::kSwizzleBytes / kElem;  // head elements in a 128-byte swizzled row
}  // namespace

std::optional<detail::AttentionTmaPlan> detail::attention_tma_plan(const AttentionTensor& t, uint32_t seqlen, uint32_t heads, uint32_t batch,
                                      uint32_t head_dim, uint32_t rows, std::string* why) {
  std::string last;
  for (uint32_t order = 0; order < 2; ++order) {
    AttentionTmaPlan p;
    p.order = order;
    p.map.dtype = t.dtype;
    p.map.global_address = t.address;
    p.map.global_dims = {head_dim, order ? heads : seqlen, order ? seqlen : heads, batch};
    std::vector<uint64_t> st = {(order ? t.head_stride : t.seq_stride) * kElem, (order ? t.seq_stride : t.head_stride) * kElem,
                                t.batch_stride * kElem};
    // A dimension of extent 1 is never stepped: its stride only has to span the ones below.
    uint64_t below = uint64_t(head_dim) * kElem;
    for (size_t i = 0; i < 3; ++i) {
      if (p.map.global_dims[i + 1] == 1) st[i] = std::max(st[i], below);
      below = st[i] * p.map.global_dims[i + 1];
    }
    p.map.global_strides = st;
    p.map.box_dims = {kBlock, order ? 1u : rows, order ? rows : 1u, 1};
    p.map.swizzle = jit::TensorMapSwizzle::B128;
    p.map.l2_promotion = jit::TensorMapL2Promotion::B256;
    try {
      jit::validate_tensor_map_tiled(p.map);
      return p;
    } catch (const UsageError& e) {
      last = e.what();
    }
  }
  if (why) *why = "a TMA map cannot describe its strides (" + last + ")";
  return std::nullopt;
}

}  // namespace kaio::ops
