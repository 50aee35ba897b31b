// Fused elementwise maps: users write the per-element expression, kaio writes the rest.
//
//   auto swiglu = ops::map<kaio::bfloat16>("my_swiglu", 2, [](ir::KernelBuilder&, std::span<ir::Value> in) {
//     return in[0] / (1.0f + ir::exp(-in[0])) * in[1];
//   });
//   swiglu(out, {x, g}, n, &stream);      // out[i] = f(x[i], g[i]) for i < n
//
// The body sees f32 values (f16/bf16 data is converted on load) and returns an f32 value,
// rounded once to T on store. It is called several times while the kernel is built (once
// per element a thread computes: vector lanes, unrolled chunks, the scalar tail), so it
// must only build IR from its arguments. A map may also take f32 scalars passed per call:
//
//   auto axpby = ops::map<float>("axpby2", 2, 2, [](ir::KernelBuilder&, std::span<ir::Value> in,
//                                                   std::span<ir::Value> s) { return s[0] * in[0] + s[1] * in[1]; });
//   axpby(out, {x, y}, {2.0f, -1.0f}, n);
//
// kaio writes the indexing (64-bit: n may exceed 2^32), 16-byte vector loads and stores
// (f16/bf16 as 8 elements per access), four chunks in flight per thread, the scalar tail
// (n need not be a multiple of the vector width) and the grid. op.rows(...) does the same
// over rows x cols elements of arrays with row strides (rows along the grid's y). The vector width is chosen
// at call time from the pointers' alignment: 16-byte aligned pointers get 16-byte
// accesses, less aligned ones narrower accesses down to one element (a pointer offset by
// one element is correct, only slower). `out` may be one of the inputs (in place); other
// overlaps are not allowed.
//
// Each map is a kernel family (jit/family.h) with config (dtype, inputs, scalars, vector
// width): a call never runs the builder after the first call of a config; it checks its
// arguments (UsageError naming the map and the argument, before anything is launched),
// picks the config and launches. The library's elementwise ops (ops/elementwise.h) are
// maps too.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/family.h"
#include "kaio/ops/device_arg.h"

namespace kaio::ops {

struct MapConfig {
  ir::Scalar dtype = ir::Scalar::F32;  // f32, f16 or bf16
  uint32_t inputs = 1;                 // input arrays
  uint32_t scalars = 0;                // f32 scalars passed per call
  uint32_t vec = 1;                    // elements per access: 1, 2, 4 or 16 / element size
  bool rows = false;                   // rows x cols with row strides (else n contiguous elements)
  auto fields() const { return std::tie(dtype, inputs, scalars, vec, rows); }
};

// The per-element expression: f32 inputs and scalars in, the f32 result out.
using MapBody = std::function<ir::Value(ir::KernelBuilder&, std::span<ir::Value> in, std::span<ir::Value> scalars)>;
using MapBodyNoScalars = std::function<ir::Value(ir::KernelBuilder&, std::span<ir::Value> in)>;

// What defines a map: its name (kernel names derive from it), the names of its inputs and
// scalars (used in error messages and as kernel parameter names) and its body.
struct MapSpec {
  std::string name;
  std::vector<std::string> inputs;   // e.g. {"x", "gate"}
  std::vector<std::string> scalars;  // e.g. {"alpha", "beta"}
  MapBody body;
};

// Maps process the elements of a block's tile: kMapBlock threads, each kMapUnroll chunks.
// Two chunks, not four: a thread issues its loads, then computes every chunk before its
// block ends, and for the 16-bit activations (13-21 instructions an element) four chunks
// kept the loads idle through that compute. On an H200 at 8192^2 (bench/NOTES.md): the
// gated 16-bit forms 87-95% -> 102-103% of copy, gelu_tanh f16 / bf16 90% -> 95%, silu
// 16-bit 91% -> 94-95%; gelu bf16 94% -> 90%; f32 maps and add unchanged; eight chunks lose.
inline constexpr uint32_t kMapBlock = 256;
inline constexpr uint32_t kMapUnroll = 2;
inline constexpr uint32_t kMapMaxInputs = 8, kMapMaxScalars = 8;

namespace detail {

// The dtype-independent side of a map: its family and its call path.
class MapKernels {
 public:
  // `family_name` names the jit family; kernels are named `kernel_prefix`_<dtype>_v<vec>.
  // `declared`: the dtypes whose configs (widest vector, and one element per access) are
  // declared for precompilation.
  MapKernels(std::string family_name, std::string kernel_prefix, MapSpec spec, std::vector<ir::Scalar> declared);
  MapKernels(const MapKernels&) = delete;  // its family's builder refers to it
  MapKernels& operator=(const MapKernels&) = delete;

  // Checks and launches: out[i] = body(in[0][i], ...) for i < n. `in`/`in_sizes` hold
  // spec.inputs.size() entries, `scalars` spec.scalars.size().
  void launch(ir::Scalar dtype, uint64_t out, size_t out_size, std::span<const uint64_t> in,
              std::span<const size_t> in_sizes, std::span<const float> scalars, size_t n,
              const jit::Stream* stream) const;

  // UsageError (naming the map) unless the counts are the map's.
  void check_counts(size_t inputs, size_t scalars) const;
  // Checks and launches over rows x cols elements whose rows are ld_out / ld_in[k]
  // elements apart.
  void launch_rows(ir::Scalar dtype, uint64_t out, size_t out_size, uint64_t ld_out, std::span<const uint64_t> in,
                   std::span<const size_t> in_sizes, std::span<const uint64_t> ld_in, std::span<const float> scalars,
                   uint32_t rows, uint32_t cols, const jit::Stream* stream) const;

  // The config a call with these addresses uses (the vector width from their alignment and,
  // for rows, that of the row strides in bytes, OR-ed into ld_bits; rows when ld_bits != 0).
  MapConfig config_for(ir::Scalar dtype, uint64_t out, std::span<const uint64_t> in, uint64_t ld_bits = 0) const;
  // The launch shape for n elements (per row) at a config.
  jit::LaunchConfig launch_shape(const MapConfig& c, size_t n, const jit::Stream* stream, uint32_t rows = 1) const;
  ir::Kernel kernel(const MapConfig& c) const;
  jit::Family<MapConfig>& family() const { return *family_; }
  const MapSpec& spec() const { return spec_; }
  // Distinct for every map made in this process (a later map may reuse a dead one's name
  // and address): what identifies its body where kernels are cached by config.
  uint64_t serial() const { return serial_; }

 private:
  void launch_config(const MapConfig& c, uint64_t out, std::span<const uint64_t> in, std::span<const float> scalars,
                     std::span<const uint64_t> lds, uint32_t rows, size_t n, const jit::Stream* stream) const;
  MapSpec spec_;
  std::string prefix_;
  uint64_t serial_;
  std::unique_ptr<jit::Family<MapConfig>> family_;
};

// The kernel of a map at a config (what the family's builder runs).
ir::Kernel build_map_kernel(const std::string& kernel_prefix, const MapSpec& spec, const MapConfig& c);

}  // namespace detail

template <class T>
class Map {
 public:
  explicit Map(std::shared_ptr<const detail::MapKernels> k) : k_(std::move(k)) {}

  // out[i] = body(in[0][i], in[1][i], ...) for i < n, on `stream` (null: the default stream).
  void operator()(Out<T> out, std::initializer_list<In<T>> in, size_t n, const jit::Stream* stream = nullptr) const {
    call(out, in, {}, n, stream);
  }
  // The same with the map's f32 scalars.
  void operator()(Out<T> out, std::initializer_list<In<T>> in, std::initializer_list<float> scalars, size_t n,
                  const jit::Stream* stream = nullptr) const {
    call(out, in, scalars, n, stream);
  }

  // The same over rows x cols elements, each array's rows `ld` elements apart:
  //   op.rows({out, ld_out}, {{x, ld_x}, {g, ld_g}}, rows, cols, &stream);
  void rows(Strided<Out<T>> out, std::initializer_list<Strided<In<T>>> in, uint32_t rows, uint32_t cols,
            const jit::Stream* stream = nullptr) const {
    call_rows(out, in, {}, rows, cols, stream);
  }
  void rows(Strided<Out<T>> out, std::initializer_list<Strided<In<T>>> in, std::initializer_list<float> scalars,
            uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr) const {
    call_rows(out, in, scalars, rows, cols, stream);
  }

  const std::string& name() const { return k_->spec().name; }
  jit::Family<MapConfig>& family() const { return k_->family(); }
  const detail::MapKernels& kernels() const { return *k_; }

 private:
  void call(const Out<T>& out, std::initializer_list<In<T>> in, std::initializer_list<float> scalars, size_t n,
            const jit::Stream* stream) const {
    k_->check_counts(in.size(), scalars.size());  // at most kMapMaxInputs inputs from here on
    uint64_t addr[kMapMaxInputs] = {};
    size_t sizes[kMapMaxInputs] = {};
    size_t i = 0;
    for (const In<T>& a : in) {
      addr[i] = a.address;
      sizes[i++] = a.size;
    }
    k_->launch(ir::ScalarOf<T>::value, out.address, out.size, std::span<const uint64_t>(addr, i),
               std::span<const size_t>(sizes, i), std::span<const float>(scalars.begin(), scalars.size()), n,
               stream);
  }
  void call_rows(const Strided<Out<T>>& out, std::initializer_list<Strided<In<T>>> in,
                 std::initializer_list<float> scalars, uint32_t rows, uint32_t cols, const jit::Stream* stream) const {
    k_->check_counts(in.size(), scalars.size());
    uint64_t addr[kMapMaxInputs] = {}, ld[kMapMaxInputs] = {};
    size_t sizes[kMapMaxInputs] = {};
    size_t i = 0;
    for (const Strided<In<T>>& a : in) {
      addr[i] = a.array.address;
      sizes[i] = a.array.size;
      ld[i++] = a.ld;
    }
    k_->launch_rows(ir::ScalarOf<T>::value, out.array.address, out.array.size, out.ld,
                    std::span<const uint64_t>(addr, i), std::span<const size_t>(sizes, i),
                    std::span<const uint64_t>(ld, i), std::span<const float>(scalars.begin(), scalars.size()), rows,
                    cols, stream);
  }
  std::shared_ptr<const detail::MapKernels> k_;
};

// A user map named `name` (letters, digits, '_'; unique among the live maps of one T) over
// `inputs` arrays (1 to 8) of T = float, kaio::half or kaio::bfloat16.
template <class T>
Map<T> map(const std::string& name, uint32_t inputs, MapBodyNoScalars body);
// The same with `scalars` f32 scalars (0 to 8) passed per call.
template <class T>
Map<T> map(const std::string& name, uint32_t inputs, uint32_t scalars, MapBody body);

}  // namespace kaio::ops
