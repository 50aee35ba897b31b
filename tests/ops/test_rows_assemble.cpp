// The declared row configs cover every strategy of every dtype (the catalog assembly test,
// tests/codegen, assembles each of their kernels for sm_80 and sm_90).
#include <catch2/catch.hpp>

#include <set>
#include <tuple>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/ops/norm.h"
#include "kaio/ops/rope.h"
#include "kaio/ops/row_catalog.h"
#include "kaio/ops/softmax.h"

using namespace kaio;

TEST_CASE("the declared row configs cover every strategy of every dtype", "[ops][rows]") {
  std::set<std::tuple<ir::Scalar, bool, uint32_t, uint32_t>> seen;  // dtype, vector, team class, kind
  for (const ops::RowKernelConfig& c : ops::softmax_family().configs()) {
    uint32_t kind = c.phase ? 10 + c.phase : c.items ? 1 : c.stage ? 2 : 0;  // registers, staged, streamed, split
    seen.insert({c.dtype, c.vec > 1, c.team == 32 ? 0u : 1u, kind});
  }
  for (ir::Scalar s : {ir::Scalar::F32, ir::Scalar::F16, ir::Scalar::BF16})
    for (bool vec : {true, false}) {
      INFO(ir::scalar_name(s) << (vec ? " vector" : " scalar"));
      CHECK(seen.count({s, vec, 0u, 1u}));   // a warp per row
      CHECK(seen.count({s, vec, 1u, 1u}));   // a block per row, in registers
      CHECK(seen.count({s, vec, 1u, 2u}));   // staged in shared memory
      CHECK(seen.count({s, vec, 1u, 0u}));   // streamed
      CHECK(seen.count({s, vec, 1u, 11u}));  // split, both kernels
      CHECK(seen.count({s, vec, 1u, 12u}));
    }
  CHECK(ops::rope_family().configs().size() == 24);
}

TEST_CASE("row strategy: warp, block, streamed and split rows from the shape", "[ops][rows]") {
  using ops::plan_rows;
  using ops::row_holds;
  using ops::RowHolds;
  CHECK(plan_rows(8192, 128, 4).team == 32);            // short rows: a warp each
  CHECK(plan_rows(8192, 128, 4).items == 1);
  ops::RowPlan p = plan_rows(8192, 8192, 4);             // f32 8192: 512 threads x 4 float4
  CHECK(p.team == 512);
  CHECK(p.items == 4);
  p = plan_rows(8192, 8192, 8);                          // bf16 8192: 512 threads x 2 x 8 halves
  CHECK(p.team == 512);
  CHECK(p.items == 2);
  CHECK(p.persist);
  p = plan_rows(8192, 8192, 8, 132, RowHolds::AtMostOneVector);  // softmax, rms_norm: 256 x 4, one-shot
  CHECK(p.team == 256);
  CHECK(p.items == 4);
  CHECK_FALSE(p.persist);
  CHECK(plan_rows(8192, 4096, 8, 132, RowHolds::AtMostOneVector).items == 2);  // only 4097-8192 columns
  CHECK(plan_rows(8192, 8192, 4, 132, RowHolds::AtMostOneVector).team == 512);  // only 16-bit rows
  // Which ops hold at most one vector per row (what the ops and bench/ops_rows pass).
  for (const char* op : {"softmax", "log_softmax", "rms_norm"}) CHECK(row_holds(op) == RowHolds::AtMostOneVector);
  for (const char* op : {"layer_norm", "add_rms_norm", "row_sum"}) CHECK(row_holds(op) == RowHolds::More);
  CHECK(plan_rows(1, 4096, 8).team == 256);              // decode: one block of 256
  p = plan_rows(8192, 1u << 20, 4);                      // long rows, many of them: streamed
  CHECK(p.items == 0);
  CHECK(p.split == 1);
  CHECK_FALSE(p.stage);
  p = plan_rows(8192, 32000, 8);                         // a vocabulary: staged in shared memory
  CHECK(p.items == 0);
  CHECK(p.stage);
  CHECK_FALSE(plan_rows(1, 32000, 8, 132).stage);         // one row: split over blocks instead
  p = plan_rows(2, 1u << 22, 4, 132);                    // long rows, few: split to fill 132 SMs
  CHECK(p.items == 0);
  CHECK(p.split == 132);
  CHECK(plan_rows(1, 20000, 1, 132).split == 3);         // no block gets less than one chunk (8192)
  for (uint32_t cols : {1u, 17u, 1025u, 4095u, 70000u})  // every plan covers the row
    for (uint32_t vec : {1u, 4u}) {
      p = plan_rows(3, cols, vec);
      if (p.items) CHECK(uint64_t(p.team) * p.items * vec >= cols);
      CHECK(p.items * vec <= 16);  // 16 values per thread at most (8 scalar loads)
      CHECK((p.team == 32 || p.team % 128 == 0));
    }
}
