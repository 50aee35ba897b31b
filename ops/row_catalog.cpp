#include "kaio/ops/row_catalog.h"

#include "kaio/ops/norm.h"
#include "kaio/ops/rope.h"
#include "kaio/ops/softmax.h"

namespace kaio::ops {

std::vector<jit::FamilyBase*> row_op_families() {
  return {&softmax_family(),    &log_softmax_family(),  &rms_norm_family(),
          &layer_norm_family(), &add_rms_norm_family(), &rope_family()};
}

std::vector<ir::Kernel> row_op_catalog() {
  std::vector<ir::Kernel> out;
  for (jit::FamilyBase* f : row_op_families())
    for (size_t i = 0; i < f->config_count(); ++i) out.push_back(f->declared_kernel(i));
  return out;
}

}  // namespace kaio::ops
