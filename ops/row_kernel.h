// The kernel side of the row ops: the config that selects a row kernel and the builder code
// they share (which row and column a thread handles, loading a row or a chunk of it into
// f32 registers with 16-byte or scalar accesses, storing it back, reductions over the
// threads of a row). softmax.cpp, norm.cpp describe only what happens to the values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

// What a row kernel is: a dtype, the access width, the plan's team and registers, and the
// phase of a split row (0: the whole row in one kernel; 1: partial statistics of a part of
// a row into a workspace; 2: combine the partials, write the part's output).
struct RowKernelConfig {
  ir::Scalar dtype = ir::Scalar::F32;
  uint32_t vec = 1, team = 32, items = 1, phase = 0;
  bool stage = false;  // streamed, with the row kept in dynamic shared memory (cols x f32)
  bool persist = false;  // rows in registers, teams loop over rows (RowKernel::persistent_rows)
  auto fields() const { return std::tie(dtype, vec, team, items, phase, stage, persist); }
  uint32_t block() const { return team < 128 ? 128 : team; }
  std::string suffix() const;  // "_bf16_v8_t256_i4", "_f32_v1_t1024_s_p1", "_bf16_v8_t512_i2_pf"
};

// The kernel configs of `plan` for `dtype`: one, or two (phases 1 and 2) for a split row.
RowKernelConfig row_kernel_config(ir::Scalar dtype, const RowPlan& plan, uint32_t phase = 0);
// Declared configs for the catalog: every dtype, both access widths, the buckets of common
// row lengths (128 .. 16384 columns, plus a streamed and a split one).
std::vector<RowKernelConfig> common_row_configs(bool with_split);

// Launch shape of a row kernel for `rows` rows of `cols` (`split` blocks per row when
// phase != 0; staged rows get cols x 4 bytes of dynamic shared memory; persistent kernels
// get the blocks that stay resident, detail::sm_count() x 1024 threads, or fewer).
jit::LaunchConfig row_launch(const RowKernelConfig& c, uint32_t rows, uint32_t cols, uint32_t split,
                             const jit::Stream* stream);

// A chunk of a row in f32 registers: `n` accesses of `vec` elements per thread; access k
// covers columns col[k] .. col[k] + vec - 1 and is valid when col[k] < the limit.
struct RowChunk {
  std::optional<ir::RegArray> v;  // the values (absent in a chunk that only names columns)
  std::vector<ir::Value> valid;   // per access
  std::vector<ir::Value> col;     // per access: first column (u32)
  uint32_t n = 0, vec = 1;
  ir::Value at(uint32_t k, uint32_t e) const { return (*v)[k * vec + e].get(); }
  ir::Var var(uint32_t k, uint32_t e) const { return (*v)[k * vec + e]; }
};

class RowKernel {
 public:
  RowKernel(ir::KernelBuilder& b, const RowKernelConfig& c);

  // The row this thread's team handles and the thread's index in the team. `body` runs for
  // valid rows only (a warp-uniform guard when several rows share a block).
  void rows(ir::Value rows, const std::function<void(ir::Value row, ir::Value t)>& body);

  // A tensor read by a persistent row loop, with its row stride (elements, u64).
  struct Source {
    ir::Value p, stride;
  };
  // Persistent rows (config().persist): team i of the grid's handles rows i, i + teams, ...;
  // the loads of its next row (columns [0, cols), config().items accesses per thread, of
  // every source) are issued before `body` works on the current one, so they are in flight
  // during its reductions and stores. `in[s]` holds source s's row in f32 registers; `body`
  // may overwrite them. Team reductions inside `body` use shared slots alternating with
  // the row, so they need no barrier after reading them.
  void persistent_rows(ir::Value rows, ir::Value cols, const std::vector<Source>& src,
                       const std::function<void(ir::Value row, ir::Value t, std::vector<RowChunk>& in)>& body);

  // The u64 element offset of row `row` with stride `stride` (u64).
  ir::Value row_base(ir::Value row, ir::Value stride) const;

  // Loads `n` accesses per thread starting at column `first` (u32) of the row at element
  // offset `base` (u64) of `p`; columns at or past `limit` are not read (their registers
  // hold 0).
  RowChunk load(ir::Value p, ir::Value base, ir::Value first, ir::Value limit, uint32_t n) const;
  // The columns such a load covers, without loading.
  RowChunk columns(ir::Value first, ir::Value limit, uint32_t n) const;
  // Staged rows: keep a chunk's values in shared memory, at their columns; read them back.
  // A thread reads back only what it stored itself (same columns), so no barrier is needed.
  void stage_store(const RowChunk& ch) const;
  RowChunk stage_load(const RowChunk& where) const;
  // Element 0 of the row at `base`, in f32.
  ir::Value load_first(ir::Value p, ir::Value base) const;
  // The same columns of another tensor (a weight vector: base 0).
  RowChunk load_like(const RowChunk& where, ir::Value p, ir::Value base) const;
  // Stores value(k, e) to the chunk's valid columns of row `base` of `p`, rounded to the dtype.
  void store(ir::Value p, ir::Value base, const RowChunk& where,
             const std::function<ir::Value(uint32_t k, uint32_t e)>& value) const;

  // v rounded to the dtype and widened back to f32 (what storing and reloading it gives).
  ir::Value round_trip(ir::Value v) const;

  // f(k, e) summed (or maximised) over the valid elements of the chunk, per thread.
  ir::Value thread_sum(const RowChunk& c, const std::function<ir::Value(uint32_t, uint32_t)>& f) const;
  ir::Value thread_max(const RowChunk& c) const;
  // Reductions over the team (all its threads get the result). Every thread of the team
  // must reach them (block teams: every thread of the block).
  ir::Value team_sum(ir::Value v) const;
  ir::Value team_max(ir::Value v) const;

  // Streams [lo, hi) in chunks of chunk_items() accesses per thread.
  void stream(ir::Value lo, ir::Value hi, const std::function<void(ir::Value first)>& body) const;
  uint32_t chunk_items() const { return row_items(c_.vec); }
  uint32_t chunk_cols() const { return c_.team * c_.vec * chunk_items(); }

  ir::KernelBuilder& b() const { return b_; }
  const RowKernelConfig& config() const { return c_; }
  ir::Value t() const { return t_; }

 private:
  ir::KernelBuilder& b_;
  RowKernelConfig c_;
  ir::Value t_;
  ir::Value stage_;  // dynamic shared f32 (staged rows)
  ir::Type f32_;
  std::optional<ir::Var> parity_;  // inside persistent_rows: which shared slots the reductions use

  // Loads in two steps (load_like is both): issue the accesses of `where` into raw registers
  // (16-byte vectors as 4 x 32 bits, else one element each; columns not read keep their
  // values), then widen them to f32.
  ir::RegArray raw_array(ir::Scalar elem, uint32_t n) const;
  void load_raw(const ir::RegArray& raw, const RowChunk& where, ir::Value p, ir::Value base) const;
  RowChunk widen(const ir::RegArray& raw, ir::Scalar elem, const RowChunk& where) const;
  // A block reduction (Add or Max) over the team with one barrier (persistent rows).
  ir::Value block_reduce(bool sum, ir::Value v) const;
};

// The pointer parameter type of a row kernel's tensor (packed pairs for f16/bf16 vectors).
ir::Type row_pointer(const RowKernelConfig& c, bool read_only);

}  // namespace kaio::ops
