// The C ABI over jit::compile and CompiledKernel::launch, and over user maps.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/capi/internal.h"
#include "kaio/capi/map_handle.h"
#include "kaio/ir/half.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::capi {
const ir::Kernel& kernel_of(const kaio_kernel* k);  // builder.cpp
}  // namespace kaio::capi

struct kaio_compiled {
  kaio::jit::CompiledKernel k;
  std::string key;
  std::vector<std::string> param_types;
};

using namespace kaio;

namespace {

// One launch argument, converted to the kernel's parameter `p`.
jit::detail::Arg convert(const std::string& kernel, size_t i, const ir::Param& p, const kaio_arg& a,
                         capi::HostRegions& regions) {
  using jit::detail::Arg;
  const std::string arg = "argument " + std::to_string(i) + " ('" + p.name + "')";
  const ir::Type t = p.type;
  switch (a.kind) {
    case KAIO_ARG_TENSOR: {
      capi::View v = capi::view("launch", arg.c_str(), a.tensor);
      if (!t.ptr) throw UsageError(kernel, "launch", arg + ": is an array, the parameter is " + t.str());
      if (v.dtype != t.elem && !(t.elem == ir::Scalar::F16x2 && v.dtype == ir::Scalar::F16) &&
          !(t.elem == ir::Scalar::BF16x2 && v.dtype == ir::Scalar::BF16))
        throw UsageError(kernel, "launch", arg + ": has dtype " + capi::dtype_name(v.dtype) + ", the parameter is " + t.str());
      regions.add(v);
      return Arg{Arg::Pointer, t.elem, 0, v.address, 0};
    }
    case KAIO_ARG_ADDRESS:
      if (!t.ptr) throw UsageError(kernel, "launch", arg + ": is an address, the parameter is " + t.str());
      return Arg{Arg::Pointer, t.elem, 0, a.address, 0};
    case KAIO_ARG_BOOL:
      if (t.ptr || t.elem != ir::Scalar::Pred) break;
      return jit::detail::make_arg(a.i != 0);
    case KAIO_ARG_INT:
      if (t.ptr || !t.is_int()) break;
      return t.is_signed() ? Arg{Arg::Int, {}, a.i, 0, 0} : Arg{Arg::UInt, {}, 0, static_cast<uint64_t>(a.i), 0};
    case KAIO_ARG_FLOAT:
      if (t.ptr) break;
      switch (t.elem) {
        case ir::Scalar::F32: return jit::detail::make_arg(static_cast<float>(a.f));
        case ir::Scalar::F64: return jit::detail::make_arg(a.f);
        case ir::Scalar::F16: return jit::detail::make_arg(kaio::half(static_cast<float>(a.f)));
        case ir::Scalar::BF16: return jit::detail::make_arg(kaio::bfloat16(static_cast<float>(a.f)));
        default: break;
      }
      break;
    default: throw UsageError(kernel, "launch", arg + ": unknown argument kind " + std::to_string(a.kind));
  }
  static const char* kinds[] = {"an array", "a bool", "an int", "a float", "an address"};
  throw UsageError(kernel, "launch", arg + ": is " + kinds[a.kind] + ", the parameter is " + t.str());
}

}  // namespace

extern "C" {

int kaio_kernel_cache_key(const kaio_kernel* k, const char* arch, char* hex33) {
  return capi::guard([&] {
    std::string a = arch ? arch : "";
    const ir::Kernel& kern = capi::kernel_of(k);
    if (a.empty()) {  // what compile() targets: the device's arch, with "a" for sm_90a-only kernels
      a = jit::detail::backend().default_arch();
      if (kern.arch_specific() && a == "sm_90") a += "a";
    }
    std::string h = jit::cache_key(kern, a).hex();
    std::memcpy(hex33, h.c_str(), h.size() + 1);
  });
}

int kaio_compile(const kaio_kernel* k, const kaio_compile_options* o, kaio_compiled** out) {
  return capi::guard([&] {
    jit::CompileOptions opt;
    if (o) {
      opt.arch = o->arch ? o->arch : "";
      opt.use_cache = o->use_cache != 0;
      opt.force = o->force != 0;
      opt.cache_dir = o->cache_dir ? o->cache_dir : "";
    }
    auto c = std::make_unique<kaio_compiled>();
    c->k = jit::compile(capi::kernel_of(k), opt);
    c->key = c->k.key().hex();
    for (const ir::Param& p : c->k.params()) c->param_types.push_back(p.type.str());
    *out = c.release();
  });
}

void kaio_compiled_free(kaio_compiled* c) { delete c; }

const char* kaio_compiled_str(const kaio_compiled* c, const char* what) {
  if (!c) return "";
  std::string w = what ? what : "";
  if (w == "key") return c->key.c_str();
  if (w == "name") return c->k.name().c_str();
  if (w == "arch") return c->k.arch().c_str();
  if (w == "ptx") return c->k.ptx().c_str();
  if (w == "info_log") return c->k.info_log().c_str();
  return "";
}

int kaio_compiled_cubin(const kaio_compiled* c, const void** data, size_t* size) {
  return capi::guard([&] {
    if (!c) throw UsageError("", "cubin", "null compiled kernel");
    *data = c->k.cubin().data();
    *size = c->k.cubin().size();
  });
}

int kaio_compiled_from_cache(const kaio_compiled* c) { return c && c->k.from_cache() ? 1 : 0; }

size_t kaio_compiled_num_params(const kaio_compiled* c) { return c ? c->param_types.size() : 0; }

const char* kaio_compiled_param_type(const kaio_compiled* c, size_t i) {
  return c && i < c->param_types.size() ? c->param_types[i].c_str() : "";
}

int kaio_launch(const kaio_compiled* c, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes,
                void* stream, const kaio_arg* args, size_t n) {
  return capi::guard([&] {
    if (!c) throw UsageError("", "launch", "null compiled kernel");
    const auto& params = c->k.params();
    if (n != params.size())
      throw UsageError(c->k.name(), "launch", "the kernel takes " + std::to_string(params.size()) + " arguments, got " +
                                                 std::to_string(n));
    capi::HostRegions regions;
    std::vector<jit::detail::Arg> packed;
    packed.reserve(n);
    for (size_t i = 0; i < n; ++i) packed.push_back(convert(c->k.name(), i, params[i], args[i], regions));
    jit::Stream s = capi::stream_of(stream);
    jit::LaunchConfig cfg{.grid = {grid[0], grid[1], grid[2]},
                          .block = {block[0], block[1], block[2]},
                          .shared_bytes = shared_bytes,
                          .stream = &s};
    c->k.launch_packed(cfg, packed.data(), packed.size());
  });
}

int kaio_map_new(const char* name, uint32_t inputs, uint32_t scalars, kaio_map_body_fn body, void* user, kaio_map** out) {
  return capi::guard([&] {
    std::string n = name ? name : "";
    if (!body) throw UsageError("", n, "map '" + n + "' has no body");
    if (inputs > ops::kMapMaxInputs || scalars > ops::kMapMaxScalars)
      throw UsageError("", n, "map '" + n + "' asks for " + std::to_string(inputs) + " inputs and " +
                                  std::to_string(scalars) + " scalars; at most " + std::to_string(ops::kMapMaxInputs) +
                                  " and " + std::to_string(ops::kMapMaxScalars));
    auto numbered = [](const char* base, uint32_t k) {
      std::vector<std::string> v;
      for (uint32_t i = 0; i < k; ++i) v.push_back(base + std::to_string(i));
      return v;
    };
    ops::MapSpec spec{n, numbered("in", inputs), numbered("s", scalars),
                      [body, user](ir::KernelBuilder& b, std::span<ir::Value> in, std::span<ir::Value> sc) {
                        kaio_builder h;
                        h.b = &b;
                        std::vector<uint32_t> ids_in, ids_sc;
                        for (const ir::Value& v : in) ids_in.push_back(h.add(v));
                        for (const ir::Value& v : sc) ids_sc.push_back(h.add(v));
                        uint32_t result = 0;
                        if (body(user, &h, ids_in.data(), ids_in.size(), ids_sc.data(), ids_sc.size(), &result))
                          throw capi::CallbackFailed{};
                        if (result >= h.values.size())
                          throw UsageError(b.name(), "map", "the body returned an unknown value id");
                        return h.values[result];
                      }};
    // Like ops::map's: user maps' families and kernels carry a "map" prefix; one family
    // serves every dtype (the dtype is part of the config).
    auto m = std::make_unique<kaio_map>();
    m->kernels = std::make_shared<const ops::detail::MapKernels>("map:" + n, "map_" + n, std::move(spec),
                                                                 std::vector<ir::Scalar>{ir::Scalar::F32});
    *out = m.release();
  });
}

void kaio_map_free(kaio_map* m) { delete m; }

int kaio_map_call(const kaio_map* m, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                  const float* scalars, size_t n_scalars, void* stream) {
  return capi::guard([&] {
    if (!m) throw UsageError("", "map", "null map");
    capi::launch_map(*m->kernels, m->kernels->spec().name.c_str(), out, in, n_in, scalars, n_scalars, stream);
  });
}

}  // extern "C"
