// Timing pieces the device benches share: the median of a sample, milliseconds per call
// timed with CUDA events on a stream, and the driver's asynchronous device-to-device copy
// (the bandwidth baseline each bench measures in its own run).
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <vector>

#include "kaio/jit/driver.h"
#include "kaio/kaio.h"

namespace kaio::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds per call of `calls` back-to-back calls over `rounds` rounds, timed with
// events on `s` after three warm-up calls.
template <class F>
double ms_per_call(const jit::Stream& s, int rounds, int calls, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  s.synchronize();
  std::vector<double> r;
  for (int round = 0; round < rounds; ++round) {
    jit::Event start, stop;
    start.record(&s);
    for (int i = 0; i < calls; ++i) f();
    stop.record(&s);
    r.push_back(jit::elapsed_ms(start, stop) / calls);
  }
  return median(r);
}

// cuMemcpyDtoDAsync from libcuda (kaio's driver table has only the synchronous copy); null
// without a driver.
using CopyFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
inline CopyFn copy_fn() {
  static CopyFn f = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    return h ? reinterpret_cast<CopyFn>(dlsym(h, "cuMemcpyDtoDAsync_v2")) : nullptr;
  }();
  return f;
}

}  // namespace kaio::bench
