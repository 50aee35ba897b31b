#include "kaio/ops/access.h"

#include <cstdio>

#include "kaio/ir/half.h"
#include "kaio/ops/device_arg.h"

namespace kaio::ops::detail {

using ir::Scalar;
using ir::Value;

void check_float_dtype(const char* op, const char* arg, Scalar dtype) {
  if (dtype != Scalar::F32 && dtype != Scalar::F16 && dtype != Scalar::BF16)
    throw UsageError("", op, std::string("argument '") + arg + "': dtype " + ir::scalar_name(dtype) +
                                 " is not supported (f32, f16, bf16)");
}

void check_array(const char* op, const char* arg, uint64_t address, size_t size, size_t needed, int elem_bytes) {
  if (address == 0) throw UsageError("", op, std::string("argument '") + arg + "' is a null device address");
  if (address % static_cast<uint64_t>(elem_bytes))
    throw UsageError("", op, std::string("argument '") + arg + "': address 0x" + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(address));
      return std::string(buf);
    }() + " is not aligned to its " + std::to_string(elem_bytes) + "-byte elements");
  if (size != kUnknownSize && size < needed)
    throw UsageError("", op, std::string("argument '") + arg + "' holds " + std::to_string(size) +
                                 " elements; the op needs " + std::to_string(needed));
}

uint32_t max_vec(Scalar dtype) { return 16u / static_cast<uint32_t>(ir::scalar_bytes(dtype)); }

uint32_t vec_for_alignment(Scalar dtype, uint64_t bits) {
  const uint32_t eb = static_cast<uint32_t>(ir::scalar_bytes(dtype));
  uint32_t w = max_vec(dtype);
  while (w > 1 && bits % (uint64_t(w) * eb)) w /= 2;
  return w;
}

bool needs_element_params(Scalar dtype, uint32_t vec) { return ir::scalar_bytes(dtype) == 2 && vec == 8; }

namespace {
Scalar pair_of(Scalar s) { return s == Scalar::BF16 ? Scalar::BF16x2 : Scalar::F16x2; }
}  // namespace

jit::detail::Arg pointer_arg(uint64_t address, Scalar dtype, uint32_t vec) {
  Scalar elem = needs_element_params(dtype, vec) ? pair_of(dtype) : dtype;
  return jit::detail::Arg{jit::detail::Arg::Pointer, elem, 0, address, 0};
}

uint32_t log2_of(uint32_t v) {
  uint32_t l = 0;
  while ((1u << l) < v) ++l;
  return l;
}

ArrayAccess ArrayAccess::declare(ir::KernelBuilder& b, const std::string& name, Scalar dtype, uint32_t vec,
                                 bool read_only) {
  ArrayAccess a;
  a.name_ = name;
  a.dtype_ = dtype;
  a.vec_ = vec;
  a.read_only_ = read_only;
  a.pairs_ = needs_element_params(dtype, vec);
  a.vptr_ = b.param(name, ir::Type::pointer(a.pairs_ ? pair_of(dtype) : dtype, read_only));
  a.eptr_ = a.vptr_;
  return a;
}

void ArrayAccess::declare_elements(ir::KernelBuilder& b) {
  if (pairs_) eptr_ = b.param(name_ + "_e", ir::Type::pointer(dtype_, read_only_));
}

Value ArrayAccess::scale(Value chunk) const { return vec_ == 1 ? chunk : chunk << uint64_t(log2_of(vec_)); }

Value ArrayAccess::to_f32(Value v) const { return dtype_ == Scalar::F32 ? v : ir::cast<float>(v); }

Value ArrayAccess::from_f32(Value v) const {
  return dtype_ == Scalar::F32 ? v : ir::cast(v, ir::Type::scalar(dtype_), ir::Rounding::Rn);
}

std::vector<Value> ArrayAccess::load_at(Value e, ir::CacheHint hint) const {
  std::vector<Value> out;
  if (vec_ == 1) {
    out.push_back(to_f32(ir::load(eptr_, e, hint)));
  } else if (pairs_) {
    for (Value p : ir::load_vec(vptr_, e >> uint64_t(1), 4, hint)) {
      out.push_back(to_f32(ir::unpack_lo(p)));
      out.push_back(to_f32(ir::unpack_hi(p)));
    }
  } else {
    for (Value v : ir::load_vec(vptr_, e, static_cast<int>(vec_), hint)) out.push_back(to_f32(v));
  }
  return out;
}

Value ArrayAccess::load_element(Value e) const { return to_f32(eptr_[e]); }

void ArrayAccess::store_at(Value e, const std::vector<Value>& vals) const {
  if (vec_ == 1) {
    eptr_[e] = from_f32(vals[0]);
  } else if (pairs_) {
    std::vector<Value> p;
    for (size_t k = 0; k < vals.size(); k += 2) p.push_back(ir::pack2(from_f32(vals[k]), from_f32(vals[k + 1])));
    ir::store_vec(vptr_, e >> uint64_t(1), p);
  } else {
    std::vector<Value> v;
    for (Value x : vals) v.push_back(from_f32(x));
    ir::store_vec(vptr_, e, v);
  }
}

void ArrayAccess::store_element(Value e, Value v) const { eptr_[e] = from_f32(v); }

}  // namespace kaio::ops::detail
