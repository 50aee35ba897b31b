#include "kaio/ops/catalog.h"

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"

namespace kaio::ops {

std::vector<jit::FamilyBase*> families() {
  return {&saxpy_family(), &silu_gate_family(), &axpby_2d_family(), &row_sum_family()};
}

std::vector<ir::Kernel> catalog() {
  std::vector<ir::Kernel> out;
  for (jit::FamilyBase* f : families())
    for (size_t i = 0; i < f->config_count(); ++i) out.push_back(f->declared_kernel(i));
  return out;
}

}  // namespace kaio::ops
