// The reductions' call paths: argument checks, strategy, scratch, launch.
#include <memory>
#include <string>

#include "kaio/ir/half.h"
#include "kaio/ops/access.h"
#include "kaio/ops/reduction.h"
#include "kaio/ops/stream_scratch.h"

namespace kaio::ops {

namespace {

using ir::Scalar;

const std::vector<Scalar> kFloatTypes = {Scalar::F32, Scalar::F16, Scalar::BF16};

// Threads per row from the vectors per row: at least 8 vectors per thread before the team
// grows (enough loads in flight per thread, and fewer, fuller blocks).
uint32_t team_for(uint64_t vectors) {
  if (vectors <= 256) return 32;
  if (vectors <= 1024) return 128;
  if (vectors <= 4096) return 256;
  return 1024;
}

std::vector<RowReduceConfig> declared_rows() {
  std::vector<RowReduceConfig> v;
  for (Scalar d : kFloatTypes)
    for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Min, Reduce::Mean, Reduce::ArgMax})
      for (uint32_t team : {32u, 128u, 256u, 1024u}) v.push_back({d, op, team, detail::max_vec(d)});
  return v;
}

std::vector<ReduceAllConfig> declared_all() {
  std::vector<ReduceAllConfig> v;
  for (Scalar d : kFloatTypes)
    for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Min}) v.push_back({d, op, detail::max_vec(d)});
  return v;
}

// Per-stream scratch of the whole-array reduction: kReduceMaxBlocks partials and the
// counter (zeroed once; the last block resets it). Never freed: a stream's kernels may
// still run when the application tears down.
struct Scratch {
  uint64_t partials = 0, counter = 0;
};

Scratch scratch_for(const jit::Stream* stream) {
  static const char owner = 0;
  const uint64_t base = detail::stream_scratch(&owner, stream, kReduceMaxBlocks + 32);  // the counter in its own 128 bytes
  return Scratch{base, base + kReduceMaxBlocks * 4};
}

void check_shape(const char* op, uint32_t rows, uint32_t cols, uint64_t ld) {
  if (rows == 0) throw UsageError("", op, "argument 'rows': rows = 0 (an op needs at least one row)");
  if (cols == 0) throw UsageError("", op, "argument 'cols': cols = 0 (an op needs at least one column)");
  if (ld < cols)
    throw UsageError("", op, "argument 'ld': the row stride " + std::to_string(ld) + " is smaller than the row (" +
                                 std::to_string(cols) + " elements)");
}

template <class T>
void launch_rows(const char* opname, Reduce op, uint64_t out, size_t out_size, int out_bytes, const In<T>& x,
                 uint32_t rows, uint32_t cols, uint64_t ld, const jit::Stream* stream) {
  constexpr Scalar d = ir::ScalarOf<T>::value;
  detail::check_float_dtype(opname, "x", d);
  check_shape(opname, rows, cols, ld);
  detail::check_array(opname, "x", x.address, x.size, size_t(rows - 1) * ld + cols, sizeof(T));
  detail::check_array(opname, "out", out, out_size, rows, out_bytes);
  const RowReduceConfig c = row_reduce_config(d, op, rows, cols, ld, x.address);
  const jit::CompiledKernel& k = reduce_rows_family().get(c);
  jit::detail::Arg args[7];
  size_t na = 0;
  args[na++] = detail::pointer_arg(x.address, d, c.vec);
  if (detail::needs_element_params(d, c.vec)) args[na++] = detail::pointer_arg(x.address, d, 1);
  args[na++] = jit::detail::Arg{jit::detail::Arg::Pointer, op == Reduce::ArgMax ? Scalar::S64 : Scalar::F32, 0, out, 0};
  args[na++] = jit::detail::make_arg(rows);
  args[na++] = jit::detail::make_arg(cols);
  args[na++] = jit::detail::make_arg(ld);
  const uint64_t grid = c.team == 32 ? (uint64_t(rows) + 7) / 8 : rows;
  k.launch_packed({.grid = {grid}, .block = {c.team == 32 ? 256u : c.team}, .stream = stream}, args, na);
}

}  // namespace

RowReduceConfig row_reduce_config(Scalar dtype, Reduce op, uint32_t rows, uint32_t cols, uint64_t ld, uint64_t address) {
  (void)rows;  // rows do not change the strategy yet: a block per row fills the GPU from ~1000 rows
  const uint64_t eb = static_cast<uint64_t>(ir::scalar_bytes(dtype));
  const uint32_t vec = detail::vec_for_alignment(dtype, address | (ld * eb));
  return RowReduceConfig{dtype, op, team_for(cols / vec), vec};
}

ReduceAllConfig reduce_all_config(Scalar dtype, Reduce op, uint64_t address) {
  return ReduceAllConfig{dtype, op, detail::vec_for_alignment(dtype, address)};
}

uint32_t reduce_all_blocks(const ReduceAllConfig& c, size_t n) {
  // At least 8 vectors per thread before a second block is used; then as many blocks as
  // that gives, up to kReduceMaxBlocks. A function of n alone: the result does not depend
  // on the device.
  const uint64_t per_block = uint64_t(256) * 8 * c.vec;
  uint64_t g = (n + per_block - 1) / per_block;
  return static_cast<uint32_t>(g < 1 ? 1 : g > kReduceMaxBlocks ? kReduceMaxBlocks : g);
}

jit::Family<RowReduceConfig>& reduce_rows_family() {
  static auto* f = new jit::Family<RowReduceConfig>("reduce_rows", build_reduce_rows, declared_rows());
  return *f;
}

jit::Family<ReduceAllConfig>& reduce_all_family() {
  static auto* f = new jit::Family<ReduceAllConfig>("reduce_all", build_reduce_all, declared_all());
  return *f;
}

template <class T>
void reduce_rows(Reduce op, Out<float> out, In<T> x, uint32_t rows, uint32_t cols, uint64_t ld,
                 const jit::Stream* stream) {
  if (op == Reduce::ArgMax)
    throw UsageError("", "reduce_rows", "argument 'op': argmax writes indices; use ops::argmax_rows");
  launch_rows<T>("reduce_rows", op, out.address, out.size, 4, x, rows, cols, ld, stream);
}

template <class T>
void reduce_rows(Reduce op, Out<float> out, In<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream) {
  reduce_rows<T>(op, out, x, rows, cols, cols, stream);
}

template <class T>
void argmax_rows(Out<int64_t> out, In<T> x, uint32_t rows, uint32_t cols, uint64_t ld, const jit::Stream* stream) {
  launch_rows<T>("argmax_rows", Reduce::ArgMax, out.address, out.size, 8, x, rows, cols, ld, stream);
}

template <class T>
void argmax_rows(Out<int64_t> out, In<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream) {
  argmax_rows<T>(out, x, rows, cols, cols, stream);
}

template <class T>
void reduce(Reduce op, Out<float> out, In<T> x, size_t n, const jit::Stream* stream) {
  constexpr Scalar d = ir::ScalarOf<T>::value;
  if (op != Reduce::Sum && op != Reduce::Max && op != Reduce::Min)
    throw UsageError("", "reduce", std::string("argument 'op': ") + reduce_name(op) +
                                       " is not a whole-array reduction (sum, max, min)");
  detail::check_float_dtype("reduce", "x", d);
  if (n == 0) throw UsageError("", "reduce", "argument 'n': n = 0 elements (an op needs at least one)");
  if (n > (uint64_t(1) << 40))
    throw UsageError("", "reduce", "argument 'n': n = " + std::to_string(n) + " elements is more than 2^40");
  detail::check_array("reduce", "x", x.address, x.size, n, sizeof(T));
  detail::check_array("reduce", "out", out.address, out.size, 1, 4);
  const ReduceAllConfig c = reduce_all_config(d, op, x.address);
  const uint32_t grid = reduce_all_blocks(c, n);
  const jit::CompiledKernel& k = reduce_all_family().get(c);
  const Scratch s = grid > 1 ? scratch_for(stream) : Scratch{};
  jit::detail::Arg args[6];
  size_t na = 0;
  args[na++] = detail::pointer_arg(x.address, d, c.vec);
  if (detail::needs_element_params(d, c.vec)) args[na++] = detail::pointer_arg(x.address, d, 1);
  args[na++] = jit::detail::Arg{jit::detail::Arg::Pointer, Scalar::F32, 0, out.address, 0};
  args[na++] = jit::detail::Arg{jit::detail::Arg::Pointer, Scalar::F32, 0, s.partials, 0};
  args[na++] = jit::detail::Arg{jit::detail::Arg::Pointer, Scalar::U32, 0, s.counter, 0};
  args[na++] = jit::detail::make_arg(static_cast<uint64_t>(n));
  k.launch_packed({.grid = {grid}, .block = {256u}, .stream = stream}, args, na);
}

#define KAIO_RED_INSTANTIATE(T)                                                                              \
  template void reduce_rows<T>(Reduce, Out<float>, In<T>, uint32_t, uint32_t, uint64_t, const jit::Stream*); \
  template void reduce_rows<T>(Reduce, Out<float>, In<T>, uint32_t, uint32_t, const jit::Stream*);           \
  template void argmax_rows<T>(Out<int64_t>, In<T>, uint32_t, uint32_t, uint64_t, const jit::Stream*);       \
  template void argmax_rows<T>(Out<int64_t>, In<T>, uint32_t, uint32_t, const jit::Stream*);                 \
  template void reduce<T>(Reduce, Out<float>, In<T>, size_t, const jit::Stream*);
KAIO_RED_INSTANTIATE(float)
KAIO_RED_INSTANTIATE(kaio::half)
KAIO_RED_INSTANTIATE(kaio::bfloat16)
#undef KAIO_RED_INSTANTIATE

}  // namespace kaio::ops
