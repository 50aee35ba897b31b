#include "kaio/ops/catalog.h"

#include "kaio/ops/attention.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/ops/reduction.h"
#include "kaio/ops/row_catalog.h"

namespace kaio::ops {

std::vector<jit::FamilyBase*> families() {
  std::vector<jit::FamilyBase*> v = {&saxpy_family(), &silu_gate_family(), &axpby_2d_family(), &row_sum_family()};
  for (jit::FamilyBase* f : elementwise_families()) v.push_back(f);
  v.push_back(&reduce_rows_family());
  v.push_back(&reduce_all_family());
  for (jit::FamilyBase* f : row_op_families()) v.push_back(f);
  v.push_back(&attention_rows_family());
  v.push_back(&attention_mma_family());
  v.push_back(&attention_wgmma_family());  // sm_90a only (kaio-precompile skips it for other SMs)
  v.push_back(&attention_combine_family());
  v.push_back(&attention_decode_family());
  v.push_back(&attention_backward_rows_family());
  v.push_back(&attention_backward_mma_family());
  v.push_back(&attention_backward_wgmma_family());
  v.push_back(&quant_act_family());
  v.push_back(&quant_matvec_family());
  v.push_back(&quant_matvec_fused_family());
  v.push_back(&quant_matmul_mma_family());
  v.push_back(&matmul_int8_family());  // its wgmma tiles are sm_90a only, as attention_wgmma
  v.push_back(&matmul_int4_family());
  return v;
}

std::vector<ir::Kernel> catalog() {
  std::vector<ir::Kernel> out;
  for (jit::FamilyBase* f : families())
    for (size_t i = 0; i < f->config_count(); ++i) out.push_back(f->declared_kernel(i));
  return out;
}

}  // namespace kaio::ops
