// The arrays the op library's functions take: a device address, and the element count
// when it is known (from a DeviceBuffer), so that an op can check its extent before it
// launches anything. In<T> is read, Out<T> is written; both accept a DeviceBuffer<T>, a
// DevicePtr<T> (DevicePtr<const T> for In), a raw device address (uint64_t, e.g. a
// CUdeviceptr or a framework tensor's data pointer) or a typed device pointer:
//
//   ops::add<float>(out, a, b, n, &stream);                  // DeviceBuffer<float>s
//   ops::add<float>(y.ptr(), x.ptr(), x.ptr(), n);           // DevicePtr<float>s
//   ops::add<float>(out_addr, a_addr, b_addr, n);            // raw addresses
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kaio/jit/buffer.h"

namespace kaio::ops {

inline constexpr size_t kUnknownSize = std::numeric_limits<size_t>::max();

template <class T>
struct In {
  uint64_t address = 0;
  size_t size = kUnknownSize;  // elements from `address`, when known

  In(const jit::DeviceBuffer<T>& b) : address(b.device_address()), size(b.size()) {}
  In(jit::DevicePtr<T> p) : address(p.address) {}
  In(jit::DevicePtr<const T> p) : address(p.address) {}
  In(uint64_t a) : address(a) {}
  In(const T* p) : address(reinterpret_cast<uint64_t>(p)) {}
  In(uint64_t a, size_t n) : address(a), size(n) {}
};

template <class T>
struct Out {
  uint64_t address = 0;
  size_t size = kUnknownSize;

  Out(jit::DeviceBuffer<T>& b) : address(b.device_address()), size(b.size()) {}
  Out(jit::DevicePtr<T> p) : address(p.address) {}
  Out(uint64_t a) : address(a) {}
  Out(T* p) : address(reinterpret_cast<uint64_t>(p)) {}
  Out(uint64_t a, size_t n) : address(a), size(n) {}
};

// A rows x cols matrix in an array whose rows start `ld` elements apart (ld >= cols):
// ops::add<float>({out, ld_out}, {a, lda}, {b, ldb}, rows, cols).
template <class A>
struct Strided {
  A array;
  uint64_t ld;
  Strided(A a, uint64_t l) : array(a), ld(l) {}
};

namespace detail {

// The checks every op runs on its array arguments before launching: a UsageError naming
// the op and the argument for a null address, an address not aligned to the element, or
// an extent (`needed` elements) past a known size.
void check_array(const char* op, const char* arg, uint64_t address, size_t size, size_t needed, int elem_bytes);

}  // namespace detail

}  // namespace kaio::ops
