// Kernel signatures as structs: a kernel's parameters are declared once, as members of a
// struct with fields(), and that one declaration both declares the IR parameters (in the
// builder, in fields() order) and packs the launch arguments (on the host, in the same
// order), so that no op hand-orders an argument list that must match its kernel.
//
//   struct AxpySig {
//     kernel::Ptr x{"x", ir::Scalar::F32, true}, y{"y", ir::Scalar::F32};
//     kernel::Param<float> alpha{"alpha"};
//     kernel::Param<uint32_t> n{"n"};
//     auto fields() { return std::tie(x, y, alpha, n); }
//   };
//   // build:   AxpySig s; kernel::declare(b, s);  ... s.x.ir, s.n.ir are the IR values
//   // launch:  AxpySig s; s.x.host = dx; s.n.host = n; auto a = kernel::pack(s);
//   //          k.launch_packed(lc, a.data(), a.size());
//
// pack() allocates nothing (a fixed array of kMaxArgs), so it stays on the call path.
//
// A member that only some configs have (an epilogue's bias, an FP8 scale) is an Opt<...>:
// declared and packed only where its `on` flag is set, the same flag on both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/tensor_map.h"

namespace kaio::ops::kernel {

// A scalar parameter of host type T (integers, float, double).
template <class T>
struct Param {
  const char* name;
  T host{};
  ir::Value ir{};
  void declare(ir::KernelBuilder& b) { ir = b.param<T>(name); }
  jit::detail::Arg arg() const { return jit::detail::make_arg(host); }
};

// A pointer parameter whose element type is chosen by a config (f16 / bf16 / f32 ...).
struct Ptr {
  const char* name;
  ir::Scalar elem = ir::Scalar::F32;
  bool is_const = false;
  uint64_t host = 0;  // the device address
  ir::Value ir{};
  void declare(ir::KernelBuilder& b) { ir = b.param(name, ir::Type::pointer(elem, is_const)); }
  jit::detail::Arg arg() const { return jit::detail::Arg{jit::detail::Arg::Pointer, elem, 0, host, 0}; }
};

// A CUtensorMap passed by value (128 bytes); the struct must outlive the launch call.
struct TensorMap {
  const char* name;
  jit::TensorMap host{};
  ir::Value ir{};
  void declare(ir::KernelBuilder& b) { ir = b.tensor_map_param(name); }
  jit::detail::Arg arg() const { return jit::detail::make_arg(host); }
};

// A parameter present only where `on` (a config's choice) is set.
template <class P>
struct Opt : P {
  bool on = false;
};

// Packed launch arguments: a fixed array, no allocation.
inline constexpr size_t kMaxArgs = 48;
class PackedArgs {
 public:
  void push(const jit::detail::Arg& a) {
    if (n_ == kMaxArgs) throw InternalError("a kernel signature has more than " + std::to_string(kMaxArgs) + " parameters");
    a_[n_++] = a;
  }
  const jit::detail::Arg* data() const { return a_; }
  size_t size() const { return n_; }
  const jit::detail::Arg& operator[](size_t i) const { return a_[i]; }

 private:
  jit::detail::Arg a_[kMaxArgs];
  size_t n_ = 0;
};

namespace detail {
template <class P>
void declare_one(ir::KernelBuilder& b, P& p) {
  if constexpr (requires { p.on; }) {
    if (!p.on) return;
  }
  p.declare(b);
}
template <class P>
void pack_one(PackedArgs& out, const P& p) {
  if constexpr (requires { p.on; }) {
    if (!p.on) return;
  }
  out.push(p.arg());
}
}  // namespace detail

// Declares every parameter of `sig`, in fields() order.
template <class Sig>
void declare(ir::KernelBuilder& b, Sig& sig) {
  std::apply([&](auto&... p) { (detail::declare_one(b, p), ...); }, sig.fields());
}

// The launch arguments of `sig`, in fields() order (the same order declare() used).
template <class Sig>
PackedArgs pack(Sig& sig) {
  PackedArgs out;
  std::apply([&](auto&... p) { (detail::pack_one(out, p), ...); }, sig.fields());
  return out;
}

}  // namespace kaio::ops::kernel
