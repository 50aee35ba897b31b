// How the op library's kernels reach their arrays (internal to ops/): a pointer parameter
// per array, read or written one vector (16 bytes when aligned) or one element at a time,
// with f16/bf16 data converted to f32 on load and rounded once on store.
//
// 16-byte vectors of f16/bf16 are four f16x2/bf16x2 pairs (load_vec moves at most four
// elements), so such an array has two parameters: the pair pointer for the vectors and an
// element pointer for single elements (tails), both holding the same address.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::ops::detail {

// UsageError naming op and argument unless dtype is f32, f16 or bf16.
void check_float_dtype(const char* op, const char* arg, ir::Scalar dtype);
// Elements in a 16-byte vector of dtype (4 for f32, 8 for f16/bf16).
uint32_t max_vec(ir::Scalar dtype);
// The widest vector (1, 2, 4, ... up to max_vec) that `address_bits` (the OR of every
// address and byte stride an access uses) is aligned to.
uint32_t vec_for_alignment(ir::Scalar dtype, uint64_t address_bits);
// True when an array of dtype accessed `vec` at a time has a second, element parameter.
bool needs_element_params(ir::Scalar dtype, uint32_t vec);
// The launch argument for an array's vector parameter (vec > 1) or element parameter (1).
jit::detail::Arg pointer_arg(uint64_t address, ir::Scalar dtype, uint32_t vec);
uint32_t log2_of(uint32_t pow2);

class ArrayAccess {
 public:
  // Declares the array's (vector) pointer parameter.
  static ArrayAccess declare(ir::KernelBuilder& b, const std::string& name, ir::Scalar dtype, uint32_t vec,
                             bool read_only);
  // Declares its element parameter when it needs one (call after every array's declare()).
  void declare_elements(ir::KernelBuilder& b);

  uint32_t vec() const { return vec_; }
  // vec() f32 values from element `e` on (e a multiple of vec(), u64).
  std::vector<ir::Value> load_at(ir::Value e, ir::CacheHint hint = ir::CacheHint::Default) const;
  std::vector<ir::Value> load_chunk(ir::Value chunk) const { return load_at(scale(chunk)); }
  ir::Value load_element(ir::Value e) const;  // one element as f32
  void store_at(ir::Value e, const std::vector<ir::Value>& f32_values) const;
  void store_chunk(ir::Value chunk, const std::vector<ir::Value>& f32_values) const { store_at(scale(chunk), f32_values); }
  void store_element(ir::Value e, ir::Value f32_value) const;

 private:
  ir::Value scale(ir::Value chunk) const;
  ir::Value to_f32(ir::Value v) const;
  ir::Value from_f32(ir::Value v) const;
  std::string name_;
  ir::Scalar dtype_ = ir::Scalar::F32;
  uint32_t vec_ = 1;
  bool read_only_ = true, pairs_ = false;
  ir::Value vptr_, eptr_;
};

}  // namespace kaio::ops::detail
