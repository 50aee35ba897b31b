#include "kaio/ops/catalog.h"

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"

namespace kaio::ops {

std::vector<ir::Kernel> catalog() {
  return {saxpy_kernel(), silu_gate_kernel(), axpby_2d_kernel(), row_sum_kernel()};
}

}  // namespace kaio::ops
