#include "cublaslt_fp8.h"

#include <dlfcn.h>

#include <cstring>

#include <cublasLt.h>

namespace kaio::bench {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's heuristics may use

// The entry points, resolved by name from the dlopen'ed library (types from cublasLt.h).
struct Api {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
};
Api api;

template <class F>
bool sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

cudaDataType fp8_type(ir::Scalar s) { return s == ir::Scalar::E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

}  // namespace

CublasLtFp8::~CublasLtFp8() {
  release();
  if (handle_) api.destroy(static_cast<cublasLtHandle_t>(handle_));
}

bool CublasLtFp8::load() {
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13"})
    if ((lib_ = dlopen(name, RTLD_NOW))) break;
  if (!lib_) {
    why_ = "libcublasLt.so.13 not found";
    return false;
  }
  const bool ok = sym(lib_, "cublasLtCreate", api.create) && sym(lib_, "cublasLtDestroy", api.destroy) &&
                  sym(lib_, "cublasLtMatmulDescCreate", api.desc_create) &&
                  sym(lib_, "cublasLtMatmulDescDestroy", api.desc_destroy) &&
                  sym(lib_, "cublasLtMatmulDescSetAttribute", api.desc_set) &&
                  sym(lib_, "cublasLtMatrixLayoutCreate", api.layout_create) &&
                  sym(lib_, "cublasLtMatrixLayoutDestroy", api.layout_destroy) &&
                  sym(lib_, "cublasLtMatmulPreferenceCreate", api.pref_create) &&
                  sym(lib_, "cublasLtMatmulPreferenceDestroy", api.pref_destroy) &&
                  sym(lib_, "cublasLtMatmulPreferenceSetAttribute", api.pref_set) &&
                  sym(lib_, "cublasLtMatmulAlgoGetHeuristic", api.heuristic) && sym(lib_, "cublasLtMatmul", api.matmul) &&
                  sym(lib_, "cublasLtGetStatusName", api.status_name);
  if (!ok) {
    why_ = "libcublasLt lacks an entry point";
    return false;
  }
  cublasLtHandle_t h = nullptr;
  if (const int st = api.create(&h); st != 0) {
    why_ = "cublasLtCreate: " + status_name(st);
    return false;
  }
  handle_ = h;
  workspace_ = std::make_unique<jit::DeviceBuffer<uint8_t>>(kWorkspaceBytes);
  return true;
}

std::string CublasLtFp8::status_name(int status) {
  return api.status_name ? api.status_name(static_cast<cublasStatus_t>(status)) : "status " + std::to_string(status);
}

void CublasLtFp8::release() {
  if (desc_) api.desc_destroy(static_cast<cublasLtMatmulDesc_t>(desc_));
  for (void*& l : layout_)
    if (l) api.layout_destroy(static_cast<cublasLtMatrixLayout_t>(l)), l = nullptr;
  desc_ = nullptr;
}

int CublasLtFp8::prepare(ir::Scalar a_type, ir::Scalar b_type, uint32_t m, uint32_t n, uint32_t k, uint64_t scale_a,
                         uint64_t scale_b, bool fast_accum, void* stream) {
  release();
  stream_ = stream;
  cublasLtMatmulDesc_t desc = nullptr;
  if (int st = api.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) return st;
  desc_ = desc;
  // C^T (n x m, column-major = our row-major C) = op_T(Lt A: our B, k x n) * Lt B (our A, k x m)
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const void* sa = reinterpret_cast<const void*>(scale_b);  // Lt's A is our B
  const void* sb = reinterpret_cast<const void*>(scale_a);
  const int8_t fast = fast_accum ? 1 : 0;
  int st = api.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (!st) st = api.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (!st) st = api.desc_set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
  if (!st) st = api.desc_set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
  if (!st) st = api.desc_set(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
  if (st) return st;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  if ((st = api.layout_create(&la, fp8_type(b_type), k, n, k))) return st;
  layout_[0] = la;
  if ((st = api.layout_create(&lb, fp8_type(a_type), k, m, k))) return st;
  layout_[1] = lb;
  if ((st = api.layout_create(&lc, CUDA_R_16BF, n, m, n))) return st;
  layout_[2] = lc;
  cublasLtMatmulPreference_t pref = nullptr;
  if ((st = api.pref_create(&pref))) return st;
  const uint64_t ws = kWorkspaceBytes;
  st = api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (!st) st = api.heuristic(static_cast<cublasLtHandle_t>(handle_), desc, la, lb, lc, lc, pref, 1, &result, &found);
  api.pref_destroy(pref);
  if (st) return st;
  if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  static_assert(sizeof algo_ == sizeof result.algo);
  std::memcpy(algo_, &result.algo, sizeof algo_);
  return 0;
}

int CublasLtFp8::run(uint64_t a, uint64_t b, uint64_t c) const {
  const float alpha = 1.0f, beta = 0.0f;
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, algo_, sizeof algo);
  return api.matmul(static_cast<cublasLtHandle_t>(handle_), static_cast<cublasLtMatmulDesc_t>(desc_), &alpha,
                    reinterpret_cast<const void*>(b), static_cast<cublasLtMatrixLayout_t>(layout_[0]),
                    reinterpret_cast<const void*>(a), static_cast<cublasLtMatrixLayout_t>(layout_[1]), &beta,
                    reinterpret_cast<const void*>(c), static_cast<cublasLtMatrixLayout_t>(layout_[2]),
                    reinterpret_cast<void*>(c), static_cast<cublasLtMatrixLayout_t>(layout_[2]), &algo,
                    reinterpret_cast<void*>(workspace_->device_address()), kWorkspaceBytes,
                    static_cast<cudaStream_t>(stream_));
}

}  // namespace kaio::bench
