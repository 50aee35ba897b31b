#include "kaio/ops/map.h"
#include "kaio/ops/map_dtype.h"

#include <atomic>
#include <string>

#include "kaio/ir/half.h"
#include "kaio/ops/access.h"

namespace kaio::ops {

namespace detail {

namespace {

using ir::Scalar;
using ir::Value;

uint64_t next_serial() {
  static std::atomic<uint64_t> n{0};
  return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

thread_local Scalar t_building = Scalar::F32;

// Sets building_map_dtype() while a map kernel is built (restored on exit, also by a throw).
struct BuildingDtype {
  Scalar saved;
  explicit BuildingDtype(Scalar d) : saved(t_building) { t_building = d; }
  ~BuildingDtype() { t_building = saved; }
};

// Calls the body on one element's f32 inputs and checks what it returns.
Value apply(ir::KernelBuilder& b, const MapSpec& s, std::vector<Value> in, std::vector<Value>& scalars) {
  Value r = s.body(b, std::span<Value>(in), std::span<Value>(scalars));
  if (!r.valid() || r.builder() != &b)
    throw UsageError(b.name(), s.name, "the body of map '" + s.name + "' returned no value of this kernel");
  if (!(r.type() == ir::Type::scalar(Scalar::F32)))
    throw UsageError(b.name(), s.name, "the body of map '" + s.name + "' must return an f32 value, got " + r.type().str());
  return r;
}

}  // namespace

Scalar building_map_dtype() { return t_building; }

ir::Kernel build_map_kernel(const std::string& prefix, const MapSpec& s, const MapConfig& c) {
  check_float_dtype(s.name.c_str(), "dtype", c.dtype);
  if (c.inputs != s.inputs.size() || c.scalars != s.scalars.size())
    throw UsageError("", s.name, "config has " + std::to_string(c.inputs) + " inputs and " + std::to_string(c.scalars) +
                                     " scalars; map '" + s.name + "' has " + std::to_string(s.inputs.size()) + " and " +
                                     std::to_string(s.scalars.size()));
  const BuildingDtype building(c.dtype);
  const uint32_t W = c.vec;
  const uint64_t lw = log2_of(W);
  ir::KernelBuilder b(prefix + "_" + ir::scalar_name(c.dtype) + (c.rows ? "_rows" : "") + "_v" + std::to_string(W));
  std::vector<ArrayAccess> arrays;  // the inputs, then out
  for (const std::string& name : s.inputs) arrays.push_back(ArrayAccess::declare(b, name, c.dtype, W, true));
  arrays.push_back(ArrayAccess::declare(b, "out", c.dtype, W, false));
  for (ArrayAccess& a : arrays) a.declare_elements(b);
  const ArrayAccess& out = arrays.back();
  std::vector<Value> scalars;
  for (const std::string& name : s.scalars) scalars.push_back(b.param<float>(name));
  // 1-D: n elements. Rows: rows x cols elements, each array's rows ld_<name> elements apart.
  Value n, rows;
  std::vector<Value> ld;
  if (c.rows) {
    rows = b.param<uint32_t>("rows");
    n = b.param<uint64_t>("cols");
    for (const std::string& name : s.inputs) ld.push_back(b.param<uint64_t>("ld_" + name));
    ld.push_back(b.param<uint64_t>("ld_out"));
  } else {
    n = b.param<uint64_t>("n");
  }

  const uint64_t tile = uint64_t(kMapBlock) * kMapUnroll;  // chunks per block (per row)
  Value tid = ir::cast<uint64_t>(b.thread_idx_x());
  Value bid = ir::cast<uint64_t>(b.block_idx_x());
  Value nvec = W == 1 ? n : n >> lw;
  Value first = bid * tile + tid;  // this thread's first chunk; the others follow kMapBlock apart
  Value last_block = b.block_idx_x() == b.grid_dim_x() - 1u;

  // The tiles of one row (of the whole array in 1-D): base[k] is array k's first element.
  auto row = [&](const std::vector<Value>& base) {
    auto at = [&](size_t k, Value e) { return base.empty() ? e : base[k] + e; };
    auto chunk = [&](const std::vector<std::vector<Value>>& vals, Value ci) {
      std::vector<Value> res;
      for (uint32_t w = 0; w < W; ++w) {
        std::vector<Value> x;
        for (const auto& v : vals) x.push_back(v[w]);
        res.push_back(apply(b, s, x, scalars));
      }
      out.store_at(at(arrays.size() - 1, ci << lw), res);
    };
    auto load = [&](size_t k, Value ci) { return arrays[k].load_at(at(k, ci << lw)); };
    // Full tiles: every chunk of the block is in range, so all loads are issued before any
    // use (kMapUnroll x inputs x 16 bytes in flight per thread) and nothing is guarded.
    b.if_((bid + 1u) * tile <= nvec, [&] {
      std::vector<std::vector<std::vector<Value>>> vals(kMapUnroll);
      for (uint32_t u = 0; u < kMapUnroll; ++u)
        for (size_t k = 0; k + 1 < arrays.size(); ++k) vals[u].push_back(load(k, first + uint64_t(u) * kMapBlock));
      for (uint32_t u = 0; u < kMapUnroll; ++u) chunk(vals[u], first + uint64_t(u) * kMapBlock);
    }).else_([&] {  // the last, partial tile
      for (uint32_t u = 0; u < kMapUnroll; ++u) {
        Value ci = first + uint64_t(u) * kMapBlock;
        b.if_(ci < nvec, [&] {
          std::vector<std::vector<Value>> vals;
          for (size_t k = 0; k + 1 < arrays.size(); ++k) vals.push_back(load(k, ci));
          chunk(vals, ci);
        });
      }
    });
    if (W > 1) {
      // The elements past the last whole vector (fewer than W), done by the last block.
      Value e = (nvec << lw) + tid;
      b.if_(last_block && e < n, [&] {
        std::vector<Value> x;
        for (size_t k = 0; k + 1 < arrays.size(); ++k) x.push_back(arrays[k].load_element(at(k, e)));
        out.store_element(at(arrays.size() - 1, e), apply(b, s, x, scalars));
      });
    }
  };
  if (!c.rows) {
    row({});
  } else {
    // Rows along y, grid-strided (the grid's y extent is at most 65535).
    b.for_(b.block_idx_y(), rows, b.grid_dim_y(), [&](Value r) {
      std::vector<Value> base;
      Value r64 = ir::cast<uint64_t>(r);
      for (Value l : ld) base.push_back(r64 * l);
      row(base);
    });
  }
  b.launch_bounds(kMapBlock);  // lets ptxas budget registers for the block size used
  return b.build();
}

MapKernels::MapKernels(std::string family_name, std::string kernel_prefix, MapSpec spec, std::vector<Scalar> declared)
    : spec_(std::move(spec)), prefix_(std::move(kernel_prefix)), serial_(next_serial()) {
  if (!valid_name(spec_.name))
    throw UsageError("", "map", "map name '" + spec_.name + "' must be 1 to 64 letters, digits or '_', not starting with a digit");
  if (spec_.inputs.empty() || spec_.inputs.size() > kMapMaxInputs)
    throw UsageError("", spec_.name, "map '" + spec_.name + "' has " + std::to_string(spec_.inputs.size()) +
                                         " inputs; a map takes 1 to " + std::to_string(kMapMaxInputs));
  if (spec_.scalars.size() > kMapMaxScalars)
    throw UsageError("", spec_.name, "map '" + spec_.name + "' has " + std::to_string(spec_.scalars.size()) +
                                         " scalars; a map takes at most " + std::to_string(kMapMaxScalars));
  if (!spec_.body) throw UsageError("", spec_.name, "map '" + spec_.name + "' has no body");
  std::vector<MapConfig> configs;
  const uint32_t ni = static_cast<uint32_t>(spec_.inputs.size()), ns = static_cast<uint32_t>(spec_.scalars.size());
  for (Scalar d : declared) {
    configs.push_back({d, ni, ns, max_vec(d), false});
    configs.push_back({d, ni, ns, 1, false});
    configs.push_back({d, ni, ns, max_vec(d), true});
  }
  family_ = std::make_unique<jit::Family<MapConfig>>(
      std::move(family_name), [this](const MapConfig& c) { return build_map_kernel(prefix_, spec_, c); },
      std::move(configs));
}

void MapKernels::check_counts(size_t inputs, size_t scalars) const {
  if (inputs != spec_.inputs.size())
    throw UsageError("", spec_.name, "argument 'in': map '" + spec_.name + "' takes " +
                                         std::to_string(spec_.inputs.size()) + " inputs, got " + std::to_string(inputs));
  if (scalars != spec_.scalars.size())
    throw UsageError("", spec_.name, "argument 'scalars': map '" + spec_.name + "' takes " +
                                         std::to_string(spec_.scalars.size()) + " scalars, got " + std::to_string(scalars));
}

MapConfig MapKernels::config_for(Scalar dtype, uint64_t out, std::span<const uint64_t> in, uint64_t ld_bits) const {
  uint64_t all = out | ld_bits;
  for (uint64_t a : in) all |= a;
  return MapConfig{dtype, static_cast<uint32_t>(spec_.inputs.size()), static_cast<uint32_t>(spec_.scalars.size()),
                   vec_for_alignment(dtype, all), ld_bits != 0};
}

jit::LaunchConfig MapKernels::launch_shape(const MapConfig& c, size_t n, const jit::Stream* stream, uint32_t rows) const {
  const uint64_t tile = uint64_t(kMapBlock) * kMapUnroll;
  uint64_t chunks = n / c.vec;
  uint64_t grid = chunks ? (chunks + tile - 1) / tile : 1;
  return jit::LaunchConfig{.grid = {grid, rows < 65535u ? rows : 65535u}, .block = {kMapBlock}, .stream = stream};
}

ir::Kernel MapKernels::kernel(const MapConfig& c) const { return family_->kernel(c); }

void MapKernels::launch(Scalar dtype, uint64_t out, size_t out_size, std::span<const uint64_t> in,
                        std::span<const size_t> in_sizes, std::span<const float> scalars, size_t n,
                        const jit::Stream* stream) const {
  const char* op = spec_.name.c_str();
  check_counts(in.size(), scalars.size());
  check_float_dtype(op, "dtype", dtype);
  if (n == 0) throw UsageError("", spec_.name, "argument 'n': n = 0 elements (an op needs at least one)");
  if (n > (uint64_t(1) << 40))
    throw UsageError("", spec_.name, "argument 'n': n = " + std::to_string(n) + " elements is more than 2^40");
  for (size_t k = 0; k < in.size(); ++k) check_array(op, spec_.inputs[k].c_str(), in[k], in_sizes[k], n, ir::scalar_bytes(dtype));
  check_array(op, "out", out, out_size, n, ir::scalar_bytes(dtype));
  const MapConfig c = config_for(dtype, out, in);
  launch_config(c, out, in, scalars, {}, 0, n, stream);
}

void MapKernels::launch_rows(Scalar dtype, uint64_t out, size_t out_size, uint64_t ld_out, std::span<const uint64_t> in,
                             std::span<const size_t> in_sizes, std::span<const uint64_t> ld_in,
                             std::span<const float> scalars, uint32_t rows, uint32_t cols,
                             const jit::Stream* stream) const {
  const char* op = spec_.name.c_str();
  check_counts(in.size(), scalars.size());
  check_float_dtype(op, "dtype", dtype);
  if (rows == 0) throw UsageError("", spec_.name, "argument 'rows': rows = 0 (an op needs at least one row)");
  if (cols == 0) throw UsageError("", spec_.name, "argument 'cols': cols = 0 (an op needs at least one column)");
  const int eb = ir::scalar_bytes(dtype);
  uint64_t ld_bits = 0;
  auto check = [&](const char* name, uint64_t addr, size_t size, uint64_t ld) {
    if (ld < cols)
      throw UsageError("", spec_.name, std::string("argument '") + name + "': the row stride " + std::to_string(ld) +
                                           " is smaller than the row (" + std::to_string(cols) + " elements)");
    check_array(op, name, addr, size, size_t(rows - 1) * ld + cols, eb);
    ld_bits |= ld * static_cast<uint64_t>(eb);
  };
  for (size_t k = 0; k < in.size(); ++k) check(spec_.inputs[k].c_str(), in[k], in_sizes[k], ld_in[k]);
  check("out", out, out_size, ld_out);
  MapConfig c = config_for(dtype, out, in, ld_bits);
  c.rows = true;  // also when every stride is 0 mod 2^64 (ld_bits == 0 cannot happen: ld >= cols >= 1)
  uint64_t lds[kMapMaxInputs + 1];
  for (size_t k = 0; k < in.size(); ++k) lds[k] = ld_in[k];
  lds[in.size()] = ld_out;
  launch_config(c, out, in, scalars, std::span<const uint64_t>(lds, in.size() + 1), rows, cols, stream);
}

void MapKernels::launch_config(const MapConfig& c, uint64_t out, std::span<const uint64_t> in,
                               std::span<const float> scalars, std::span<const uint64_t> lds, uint32_t rows, size_t n,
                               const jit::Stream* stream) const {
  const jit::CompiledKernel& k = family_->get(c);
  // Arguments in parameter order: vector pointers, element pointers (f16/bf16 with 8-wide
  // vectors only), scalars, then n, or rows, cols and the row strides.
  jit::detail::Arg args[2 * (kMapMaxInputs + 1) + kMapMaxScalars + kMapMaxInputs + 3];
  size_t na = 0;
  for (uint64_t a : in) args[na++] = pointer_arg(a, c.dtype, c.vec);
  args[na++] = pointer_arg(out, c.dtype, c.vec);
  if (needs_element_params(c.dtype, c.vec)) {
    for (uint64_t a : in) args[na++] = pointer_arg(a, c.dtype, 1);
    args[na++] = pointer_arg(out, c.dtype, 1);
  }
  for (float s : scalars) args[na++] = jit::detail::make_arg(s);
  if (c.rows) args[na++] = jit::detail::make_arg(rows);
  args[na++] = jit::detail::make_arg(static_cast<uint64_t>(n));
  for (uint64_t l : lds) args[na++] = jit::detail::make_arg(l);
  k.launch_packed(launch_shape(c, n, stream, c.rows ? rows : 1), args, na);
}

}  // namespace detail

namespace {

std::vector<std::string> numbered(const char* base, uint32_t n) {
  std::vector<std::string> v;
  for (uint32_t i = 0; i < n; ++i) v.push_back(base + std::to_string(i));
  return v;
}

}  // namespace

template <class T>
Map<T> map(const std::string& name, uint32_t inputs, uint32_t scalars, MapBody body) {
  if (inputs > kMapMaxInputs || scalars > kMapMaxScalars)
    throw UsageError("", name, "map '" + name + "' asks for " + std::to_string(inputs) + " inputs and " +
                                   std::to_string(scalars) + " scalars; at most " + std::to_string(kMapMaxInputs) +
                                   " and " + std::to_string(kMapMaxScalars));
  constexpr ir::Scalar d = ir::ScalarOf<T>::value;
  MapSpec spec{name, numbered("in", inputs), numbered("s", scalars), std::move(body)};
  // User maps live beside the library's: their family and kernel names carry a "map" prefix.
  return Map<T>(std::make_shared<const detail::MapKernels>("map:" + name + ":" + ir::scalar_name(d), "map_" + name,
                                                           std::move(spec), std::vector<ir::Scalar>{d}));
}

template <class T>
Map<T> map(const std::string& name, uint32_t inputs, MapBodyNoScalars body) {
  if (!body) throw UsageError("", name, "map '" + name + "' has no body");
  return map<T>(name, inputs, 0, [f = std::move(body)](ir::KernelBuilder& b, std::span<ir::Value> in,
                                                       std::span<ir::Value>) { return f(b, in); });
}

template Map<float> map<float>(const std::string&, uint32_t, uint32_t, MapBody);
template Map<kaio::half> map<kaio::half>(const std::string&, uint32_t, uint32_t, MapBody);
template Map<kaio::bfloat16> map<kaio::bfloat16>(const std::string&, uint32_t, uint32_t, MapBody);
template Map<float> map<float>(const std::string&, uint32_t, MapBodyNoScalars);
template Map<kaio::half> map<kaio::half>(const std::string&, uint32_t, MapBodyNoScalars);
template Map<kaio::bfloat16> map<kaio::bfloat16>(const std::string&, uint32_t, MapBodyNoScalars);

}  // namespace kaio::ops
