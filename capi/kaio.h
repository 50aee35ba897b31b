/* The C ABI of kaio: a stable `extern "C"` interface over the library, for languages and
 * runtimes that cannot use its C++ API (the Python package calls it through ctypes).
 *
 * Shared library: libkaio_c.so (CMake target kaio_shared; the name keeps it apart from the
 * static libkaio.a). It exports only the kaio_* functions below; no C++ type crosses it.
 *
 *  - Every function returns a status (KAIO_OK or one of the KAIO_ERR_* codes). On an error
 *    kaio_last_error_message() and kaio_last_error_field() describe it (per thread, until
 *    the next failing call of that thread). The error kinds are kaio's C++ exceptions:
 *    UsageError (fields "kernel", "op"), ToolError ("tool", "code", "log"), InternalError.
 *  - Arrays come in as DLPack tensors (kaio_tensor has DLTensor's layout, DLPack 0.8 / 1.x):
 *    no copies; dtype, shape, strides and device are checked and a mismatch is a
 *    UsageError naming the op and the argument. With KAIO_INTERPRET=1 host (kDLCPU)
 *    tensors are the device arrays; otherwise tensors must be on CUDA device 0.
 *  - `stream` is a CUstream (NULL: the default stream). Launches are asynchronous on it.
 *  - Handles (builders, kernels, compiled kernels, maps) are opaque and freed by their
 *    kaio_*_free function.
 */
#ifndef KAIO_CAPI_KAIO_H
#define KAIO_CAPI_KAIO_H

#include <stddef.h>
#include <stdint.h>

#if defined(KAIO_CAPI_BUILD)
#define KAIO_API __attribute__((visibility("default")))
#else
#define KAIO_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KAIO_C_ABI_VERSION 1

enum {
  KAIO_OK = 0,
  KAIO_ERR_USAGE = 1,     /* kaio::UsageError: misuse of the API, bad arguments */
  KAIO_ERR_TOOL = 2,      /* kaio::ToolError: nvJitLink, the CUDA driver, LMDB, files */
  KAIO_ERR_INTERNAL = 3,  /* kaio::InternalError: a broken invariant */
  KAIO_ERR_OTHER = 4,     /* any other C++ exception (e.g. out of memory) */
  KAIO_ERR_CALLBACK = 5,  /* a caller's callback returned non-zero; its own error is the caller's */
  KAIO_MISMATCH = 6       /* kaio_plan_launch_objects: the objects are not the plan's; nothing ran */
};

/* ---- DLPack ---- */
typedef struct {
  int32_t device_type; /* kDLCPU = 1, kDLCUDA = 2, kDLCUDAManaged = 13 */
  int32_t device_id;
} kaio_dl_device;
typedef struct {
  uint8_t code; /* kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 */
  uint8_t bits;
  uint16_t lanes;
} kaio_dl_dtype;
typedef struct {
  void* data;
  kaio_dl_device device;
  int32_t ndim;
  kaio_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} kaio_tensor;

/* ---- library ---- */
KAIO_API int kaio_abi_version(void);
KAIO_API const char* kaio_version(void);
KAIO_API const char* kaio_last_error_message(void);
/* "kernel", "op" (UsageError), "tool", "code", "log" (ToolError); "" when absent. */
KAIO_API const char* kaio_last_error_field(const char* field);
KAIO_API int kaio_interpret_mode(void);
KAIO_API int kaio_synchronize(void);
/* The toolchain identity that enters every cache key. */
KAIO_API const char* kaio_toolchain_id(void);
/* Waits for the background cache writes. */
KAIO_API int kaio_flush_cache_writes(void);

/* ---- ops (kaio::ops) ---- */
/* out = op(in[0], ...; scalars): "add", "sub", "mul", "axpby" (scalars alpha, beta), "relu",
 * "silu", "gelu", "gelu_tanh", "exp", "silu_gate", "gelu_gate", "gelu_gate_tanh". Every
 * array has out's dtype (f32, f16, bf16) and shape; contiguous, or rows with a unit inner
 * stride; out may be an input. */
KAIO_API int kaio_elementwise(const char* op, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                              const float* scalars, size_t n_scalars, void* stream);
/* Along the last axis: op "sum", "max", "min", "mean" (out f32) or "argmax" (out int64);
 * out has x's shape without its last dimension. */
KAIO_API int kaio_reduce_rows(const char* op, const kaio_tensor* out, const kaio_tensor* x, void* stream);
/* Over all of x (contiguous): "sum", "max" or "min" into out (one f32). Deterministic. */
KAIO_API int kaio_reduce(const char* op, const kaio_tensor* out, const kaio_tensor* x, void* stream);
/* Row ops over the last axis (y may be x). */
KAIO_API int kaio_softmax(const kaio_tensor* x, const kaio_tensor* y, int log, void* stream);
KAIO_API int kaio_rms_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* y, float eps, void* stream);
KAIO_API int kaio_layer_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* b, const kaio_tensor* y,
                             float eps, void* stream);
KAIO_API int kaio_add_rms_norm(const kaio_tensor* x, const kaio_tensor* residual, const kaio_tensor* w,
                               const kaio_tensor* sum, const kaio_tensor* y, float eps, void* stream);
typedef struct {
  int32_t style; /* 0: NeoX (half rotation), 1: GPT-J (interleaved) */
  uint32_t heads, head_dim, rotary_dim;
  float theta;
  uint32_t position_offset;
} kaio_rope_params;
/* x, y: tokens x (heads * head_dim) (or tokens x heads x head_dim); cos, sin: NULL (computed in
 * the kernel) or tables of positions x rotary_dim / 2. */
KAIO_API int kaio_rope(const kaio_tensor* x, const kaio_tensor* y, const kaio_tensor* cos, const kaio_tensor* sin,
                       const kaio_rope_params* p, void* stream);

typedef struct kaio_map kaio_map;
typedef struct {
  float alpha, beta;
  int32_t tf32;                  /* f32 inputs may run on tensor cores as tf32 */
  int32_t fast_math;             /* the epilogue's activation in .approx forms */
  uint32_t split_k;              /* 0 or 1: none */
  const kaio_tensor* bias;       /* NULL or n elements of C's dtype */
  const char* activation;        /* NULL or an elementwise op of one input ("gelu", ...) */
  const kaio_map* activation_map; /* or a user map of one input and no scalars */
} kaio_matmul_options;
/* c = act(alpha * a @ b + beta * c + bias): a (m, k) or (batch, m, k), row- or column-major
 * (from its strides: a transposed view is column-major); b (k, n) likewise; c (m, n) or
 * (batch, m, n) row-major. variant NULL: matmul_auto (the tuned choice); else the named
 * variant. */
KAIO_API int kaio_matmul(const char* variant, const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                         const kaio_matmul_options* o, void* stream);
/* The variant names, separated by '\n' (into buf of cap bytes; *needed gets the size). */
KAIO_API int kaio_matmul_variant_names(char* buf, size_t cap, size_t* needed);

/* ---- attention (kaio::ops::attention, attention_decode) ----
 * q (batch, seq_q, heads_q, head_dim), k and v (batch, seq_k, heads_kv, head_dim), out like
 * q: any strides with the head dimension contiguous (a (B, H, S, D) array seen as (B, S, H, D)
 * through its strides passes as it is). f32, f16 or bf16, one dtype for all; head_dim 64,
 * 96, 128 or 256; heads_q a multiple of heads_kv (GQA, MQA). Causal and windowed masks are
 * aligned to the bottom right when seq_q != seq_k. */
typedef struct {
  float scale;                     /* 0: 1 / sqrt(head_dim) */
  int32_t causal;
  int32_t window_left, window_right; /* -1: unbounded */
  float softcap;                   /* 0: off */
  int32_t kernel;                  /* 0: auto, 1: the rows kernel, 2: the mma.sync kernel, 3: the wgmma
                                      kernel (sm_90), 4: the tile shape tuned per bucket */
  const kaio_tensor* alibi_slopes; /* NULL or f32 [heads_q] */
  const kaio_tensor* lse;          /* NULL or an f32 output [batch, heads_q, seq_q] (varlen: [heads_q, tokens_q]) */
  /* Varlen: int32 [batch + 1] prefix sums packing the sequences along q's and k's first
   * axis; q, k, v and out are then (tokens, heads, head_dim); max_seqlen_*: the longest. */
  const kaio_tensor* cu_seqlens_q;
  const kaio_tensor* cu_seqlens_k;
  uint32_t max_seqlen_q, max_seqlen_k;
} kaio_attention_options;
KAIO_API int kaio_attention(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* out,
                            const kaio_attention_options* o, void* stream);
/* The backward of kaio_attention: dq, dk, dv (shaped and strided like q, k, v, in their dtype)
 * from q, k, v, out, dout (the gradient of out, like out) and the forward's lse (f32, as
 * kaio_attention wrote it), with the forward's options (o->lse is not read: lse is an argument
 * here; kernel 4, tuned: the tile shapes tuned per bucket). Deterministic: the same gradients
 * bit for bit run to run. */
KAIO_API int kaio_attention_backward(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v,
                                     const kaio_tensor* out, const kaio_tensor* dout, const kaio_tensor* lse,
                                     const kaio_tensor* dq, const kaio_tensor* dk, const kaio_tensor* dv,
                                     const kaio_attention_options* o, void* stream);
/* Decoding: q (batch, 1..16 new tokens, heads_q, head_dim) against a KV cache whose length
 * per sequence is seqlens (int32 [batch], the new tokens included). Contiguous cache:
 * k_cache, v_cache (batch, capacity, heads_kv, head_dim). Paged (block_table given): a pool
 * of (pages, page_size, heads_kv, head_dim), page_size a power of two in 16..256, and
 * block_table int32 (batch, max_pages). */
typedef struct {
  float scale;                     /* 0: 1 / sqrt(head_dim) */
  int32_t causal;                  /* the new tokens see themselves and what precedes them */
  int32_t window_left;             /* -1: unbounded */
  float softcap;
  uint32_t splits;                 /* 0: chosen by shape; 1: no split-KV */
  int32_t validate;                /* copy seqlens and block_table to the host and range-check them */
  uint32_t max_seqlen_k;           /* the longest cache (0: the cache's capacity) */
  const kaio_tensor* block_table;  /* NULL: a contiguous cache */
  const kaio_tensor* alibi_slopes; /* NULL or f32 [heads_q] */
  const kaio_tensor* lse;          /* NULL or an f32 output [batch, heads_q, seq_q] */
} kaio_decode_options;
KAIO_API int kaio_attention_decode(const kaio_tensor* q, const kaio_tensor* k_cache, const kaio_tensor* v_cache,
                                   const kaio_tensor* seqlens, const kaio_tensor* out, const kaio_decode_options* o,
                                   void* stream);

/* ---- quantized matmul (kaio::ops::matmul_int8 / int4, ops::quant_matmul) ---- */
/* W8A8: c (m, n) = scale_a * scale_b * (a (m, k) . b (n, k)^T) + bias. a, b int8 row-major
 * (b: a Linear weight), k a multiple of 16; c row-major int32 (the raw product: no scales,
 * no bias), float16, bfloat16 or float32. scale_a: NULL, 1 or m f32; scale_b: NULL, 1 or n
 * f32; bias: NULL or n f32. tile: -1 (by shape) or an index of the tiles. */
KAIO_API int kaio_matmul_int8(const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                              const kaio_tensor* scale_a, const kaio_tensor* scale_b, const kaio_tensor* bias,
                              int32_t tile, void* stream);
/* Three weights b[i] (n_i, k), outputs c[i] (m, n_i) of one dtype, one activation, one
 * launch; scale_b[i] and bias[i] as above (all scale_b of one kind: absent, 1 or n_i). */
KAIO_API int kaio_matmul_int8_qkv(const kaio_tensor* a, const kaio_tensor* const* b, const kaio_tensor* const* c,
                                  const kaio_tensor* scale_a, const kaio_tensor* const* scale_b,
                                  const kaio_tensor* const* bias, void* stream);
/* The tiles' names, separated by '\n' (as kaio_matmul_variant_names). */
KAIO_API int kaio_matmul_int8_tiles(char* buf, size_t cap, size_t* needed);
/* W4A16: y (m, n) = x (m, k) . W + bias. x float16 / bfloat16 row-major; q uint32 (k / 8, n)
 * (the packed layout of ops/qmatmul.h); scales (k / group, n) of x's dtype (group 32, 64 or
 * 128); zeros NULL or uint8 (k / group, n); bias NULL or n of x's dtype; y (m, n). */
KAIO_API int kaio_matmul_int4(const kaio_tensor* x, const kaio_tensor* q, const kaio_tensor* scales,
                              const kaio_tensor* zeros, const kaio_tensor* y, const kaio_tensor* bias, void* stream);
/* Three packed weights of one k and group, three outputs, one launch (arrays of 3; zeros
 * and bias entries may be NULL, zeros all or none). */
KAIO_API int kaio_matmul_int4_qkv(const kaio_tensor* x, const kaio_tensor* const* q, const kaio_tensor* const* scales,
                                  const kaio_tensor* const* zeros, const kaio_tensor* const* y,
                                  const kaio_tensor* const* bias, void* stream);
/* GGUF weights: y (m, n) = x (m, k) . W^T, W uint8 (n, row bytes) of ggml type `format` (8:
 * q8_0, 12: q4_K, 14: q6_K); x f32 / f16 / bf16, y f32 / f16 / bf16, both row-major;
 * workspace uint8 of kaio_quant_matmul_workspace(m, k) bytes, 16-byte aligned.
 * warps_per_row: 0 (the form by shape), 1 or 8 (the pre-pass form, that many warps per weight row). */
KAIO_API size_t kaio_quant_matmul_workspace(size_t m, size_t k);
KAIO_API int kaio_quant_matmul(const kaio_tensor* y, const kaio_tensor* w, uint32_t format, const kaio_tensor* x,
                               const kaio_tensor* workspace, uint32_t warps_per_row, void* stream);
/* Host helpers (host memory, row-major). quantize_int8: x f32 rows x cols -> q int8 rows x
 * cols, scale f32 [rows]. quantize_int4: w f32 k x n -> q uint32 [k / 8][n], scales (the
 * bits of dtype "float16" / "bfloat16") [k / group][n], zeros uint8 [k / group][n] (written
 * when zero_points). pack_int4: v uint8 k x n (0..15) -> q uint32 [k / 8][n].
 * dequantize_int4: the inverse, as the kernels compute it, into w f32 k x n (zeros NULL:
 * symmetric): (q - zero) * scale rounded once to dtype. dequantize_int4_exact: the same
 * unrounded, (q - zero) * scale in f32 (exact): the weights of the calls that apply the
 * scales to their f32 sums (m <= 16, docs/quantized-matmul.md). */
KAIO_API int kaio_quantize_int8(const float* x, uint32_t rows, uint32_t cols, int8_t* q, float* scale);
KAIO_API int kaio_quantize_int4(const float* w, uint32_t k, uint32_t n, uint32_t group, const char* dtype,
                                int zero_points, uint32_t* q, uint16_t* scales, uint8_t* zeros);
KAIO_API int kaio_pack_int4(const uint8_t* v, uint32_t k, uint32_t n, uint32_t* q);
KAIO_API int kaio_dequantize_int4(const uint32_t* q, const uint16_t* scales, const uint8_t* zeros, uint32_t k,
                                  uint32_t n, uint32_t group, const char* dtype, float* w);
KAIO_API int kaio_dequantize_int4_exact(const uint32_t* q, const uint16_t* scales, const uint8_t* zeros,
                                        uint32_t k, uint32_t n, uint32_t group, const char* dtype, float* w);

/* ---- the kernel builder (kaio::ir::KernelBuilder) ----
 * Values and variables are numbered per builder (uint32_t ids). An operand is a value or
 * a host literal that takes the type of the value it meets. Types are written as in the
 * IR printer: "f32", "u32", "s64", "pred", "f16", "bf16", "ptr<f32>", "ptr<const f32>". */
typedef struct kaio_builder kaio_builder;
typedef struct kaio_kernel kaio_kernel;
enum { KAIO_OPERAND_VALUE = 0, KAIO_OPERAND_BOOL = 1, KAIO_OPERAND_INT = 2, KAIO_OPERAND_UINT = 3, KAIO_OPERAND_FLOAT = 4 };
typedef struct {
  int32_t kind;
  uint32_t value;
  int64_t i;
  uint64_t u;
  double f;
} kaio_operand;
typedef int (*kaio_block_fn)(void* user);
typedef int (*kaio_loop_fn)(void* user, uint32_t index_value);
typedef int (*kaio_cond_fn)(void* user, uint32_t* cond_value);

KAIO_API int kaio_builder_new(const char* name, kaio_builder** out);
KAIO_API void kaio_builder_free(kaio_builder* b);
/* The type of a value ("f32", "ptr<const f32>", ...) into buf. */
KAIO_API int kaio_builder_value_type(kaio_builder* b, uint32_t v, char* buf, size_t cap);
KAIO_API int kaio_builder_param(kaio_builder* b, const char* name, const char* type, uint32_t* out);
KAIO_API int kaio_builder_spec(kaio_builder* b, const char* name, const char* type, kaio_operand v, uint32_t* out);
KAIO_API int kaio_builder_constant(kaio_builder* b, const char* type, kaio_operand v, uint32_t* out);
/* "thread_idx_x" .. "_z", "block_idx_*", "block_dim_*", "grid_dim_*", "global_id_*",
 * "lane_id", "warp_id". */
KAIO_API int kaio_builder_special(kaio_builder* b, const char* which, uint32_t* out);
/* An IR op of the unary rule by name ("neg", "not", "abs", "sqrt", "rsqrt", "exp", "log",
 * "tanh", "sin", "cos", "rcp", "exp2", "log2", "erf", "floor", "ceil", "round", "trunc",
 * "rint", "isnan", "isinf"). */
KAIO_API int kaio_builder_unary(kaio_builder* b, const char* op, uint32_t a, uint32_t* out);
/* Binary and compare ops by name ("add", "sub", "mul", "div", "rem", "and", "or", "xor",
 * "shl", "shr", "min", "max", "pow", "copysign", "eq", "ne", "lt", "le", "gt", "ge"). */
KAIO_API int kaio_builder_binary(kaio_builder* b, const char* op, kaio_operand x, kaio_operand y, uint32_t* out);
KAIO_API int kaio_builder_select(kaio_builder* b, uint32_t cond, kaio_operand x, kaio_operand y, uint32_t* out);
KAIO_API int kaio_builder_fma(kaio_builder* b, kaio_operand x, kaio_operand y, kaio_operand z, uint32_t* out);
/* rounding: "" (default), "rn", "rz", "rm", "rp"; saturate: cast_sat. */
KAIO_API int kaio_builder_cast(kaio_builder* b, uint32_t v, const char* type, const char* rounding, int saturate,
                               uint32_t* out);
/* hint: "" (default), "readonly", "streaming", "global", "lastuse". */
KAIO_API int kaio_builder_load(kaio_builder* b, uint32_t ptr, kaio_operand index, const char* hint, uint32_t* out);
KAIO_API int kaio_builder_store(kaio_builder* b, uint32_t ptr, kaio_operand index, kaio_operand v, const char* hint);
/* op: "add", "min", "max", "exch"; "cas" uses cmp. */
KAIO_API int kaio_builder_atomic(kaio_builder* b, const char* op, uint32_t ptr, kaio_operand index, kaio_operand cmp,
                                 kaio_operand v, uint32_t* out);
/* mode: "up", "down", "xor", "idx". */
KAIO_API int kaio_builder_shfl(kaio_builder* b, const char* mode, uint32_t v, kaio_operand lane, uint32_t width,
                               uint32_t mask, uint32_t* out);
/* mode: "all", "any", "ballot". */
KAIO_API int kaio_builder_vote(kaio_builder* b, const char* mode, uint32_t p, uint32_t mask, uint32_t* out);
/* which: "warp_sum", "warp_max", "warp_min", "block_sum", "block_max", "block_min",
 * "block_scan_inclusive", "block_scan_exclusive". */
KAIO_API int kaio_builder_reduce(kaio_builder* b, const char* which, uint32_t v, uint32_t* out);
/* count 0: dynamic shared memory. */
KAIO_API int kaio_builder_shared(kaio_builder* b, const char* elem, uint32_t count, uint32_t align, uint32_t* out);
KAIO_API int kaio_builder_barrier(kaio_builder* b);
KAIO_API int kaio_builder_var(kaio_builder* b, const char* type, kaio_operand init, uint32_t* var_out);
KAIO_API int kaio_builder_var_get(kaio_builder* b, uint32_t var, uint32_t* out);
KAIO_API int kaio_builder_var_set(kaio_builder* b, uint32_t var, kaio_operand v);
/* Control flow: the callbacks build the bodies (a non-zero return stops the build with
 * KAIO_ERR_CALLBACK). kaio_builder_if gives the if's chain id (may be NULL), to which
 * kaio_builder_else adds the else body, right after it. */
KAIO_API int kaio_builder_if(kaio_builder* b, uint32_t cond, kaio_block_fn then_fn, void* then_user, uint32_t* chain);
KAIO_API int kaio_builder_else(kaio_builder* b, uint32_t chain, kaio_block_fn else_fn, void* else_user);
KAIO_API int kaio_builder_for(kaio_builder* b, kaio_operand lo, kaio_operand hi, kaio_operand step, kaio_loop_fn body,
                              void* user);
KAIO_API int kaio_builder_while(kaio_builder* b, kaio_cond_fn cond, void* cond_user, kaio_block_fn body,
                                void* body_user);
KAIO_API int kaio_builder_return(kaio_builder* b);
KAIO_API int kaio_builder_launch_bounds(kaio_builder* b, uint32_t max_threads, uint32_t min_blocks);
KAIO_API int kaio_builder_fast_math(kaio_builder* b, int on);
KAIO_API int kaio_builder_max_registers(kaio_builder* b, uint32_t regs);
KAIO_API int kaio_builder_comment(kaio_builder* b, const char* text);
/* Verifies and returns the kernel; the builder is finished. */
KAIO_API int kaio_builder_build(kaio_builder* b, kaio_kernel** out);

KAIO_API void kaio_kernel_free(kaio_kernel* k);
/* What of a kernel: "name", "ir" (the printed IR). */
KAIO_API const char* kaio_kernel_str(const kaio_kernel* k, const char* what);
/* The cache key (32 hex digits) compile() would use for arch ("" : the default target). */
KAIO_API int kaio_kernel_cache_key(const kaio_kernel* k, const char* arch, char* hex33);

/* ---- compile and launch (kaio::jit) ---- */
typedef struct kaio_compiled kaio_compiled;
typedef struct {
  const char* arch;      /* NULL or "": the device's (sm_90 in interpret mode) */
  int32_t use_cache;     /* the on-disk cache */
  int32_t force;         /* recompile and overwrite */
  const char* cache_dir; /* NULL or "": the default */
} kaio_compile_options;
KAIO_API int kaio_compile(const kaio_kernel* k, const kaio_compile_options* o, kaio_compiled** out);
KAIO_API void kaio_compiled_free(kaio_compiled* c);
/* "key", "name", "arch", "ptx", "info_log". */
KAIO_API const char* kaio_compiled_str(const kaio_compiled* c, const char* what);
KAIO_API int kaio_compiled_cubin(const kaio_compiled* c, const void** data, size_t* size);
KAIO_API int kaio_compiled_from_cache(const kaio_compiled* c);
KAIO_API size_t kaio_compiled_num_params(const kaio_compiled* c);
/* The type of parameter i ("f32", "ptr<const f32>"). */
KAIO_API const char* kaio_compiled_param_type(const kaio_compiled* c, size_t i);

enum { KAIO_ARG_TENSOR = 0, KAIO_ARG_BOOL = 1, KAIO_ARG_INT = 2, KAIO_ARG_FLOAT = 3, KAIO_ARG_ADDRESS = 4 };
typedef struct {
  int32_t kind;
  const kaio_tensor* tensor; /* KAIO_ARG_TENSOR: a pointer parameter of its dtype */
  int64_t i;                 /* BOOL, INT */
  double f;                  /* FLOAT: converted to the parameter's float type */
  uint64_t address;          /* ADDRESS: a raw device address for a pointer parameter */
} kaio_arg;
KAIO_API int kaio_launch(const kaio_compiled* c, const uint32_t grid[3], const uint32_t block[3],
                         uint32_t shared_bytes, void* stream, const kaio_arg* args, size_t n);

/* ---- maps (kaio::ops::map) ---- */
/* The body: builds out = f(in..., scalars...) in builder b from the f32 values in[] and
 * scalars[]; returns 0 and the result's value id, or non-zero to fail the build. */
typedef int (*kaio_map_body_fn)(void* user, kaio_builder* b, const uint32_t* in, size_t n_in,
                                const uint32_t* scalars, size_t n_scalars, uint32_t* result);
KAIO_API int kaio_map_new(const char* name, uint32_t inputs, uint32_t scalars, kaio_map_body_fn body, void* user,
                          kaio_map** out);
KAIO_API void kaio_map_free(kaio_map* m);
/* out[i] = body(in[0][i], ...) over arrays as for kaio_elementwise. */
KAIO_API int kaio_map_call(const kaio_map* m, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                           const float* scalars, size_t n_scalars, void* stream);

/* ---- plans: an op resolved once, launched many times ----
 * A plan is one op call checked and resolved for its arrays' metadata (dtype, shape,
 * strides, device) and its options, made from tensors exactly as the op's function takes
 * them, with the same checks and errors. A launch then gives only what changes from call
 * to call: the arrays' addresses, the op's numbers and the stream; it runs what the op's
 * function would run for tensors of that metadata at those addresses (the kernel is picked
 * for the addresses' alignment), so a caller that keeps plans keyed by its arrays' metadata
 * pays the checks once. kaio_<op>(...) is the same as making the plan and launching it once.
 *
 * Each kaio_plan_<op> takes the op function's arguments less its numbers and stream. The
 * launch's `data` holds the element-0 address (data + byte_offset) of each of the plan's
 * arrays, in the order they appear in the plan call's arguments; `values` holds the
 * numbers listed beside each function, as doubles. Plans are immutable: one plan may be
 * launched from several threads at once. A plan holds what it needs (a map it uses lives
 * as long as the plan). */
typedef struct kaio_plan kaio_plan;
/* data: out, in[0..n_in); values: the op's scalars (axpby: alpha, beta). */
KAIO_API int kaio_plan_elementwise(const char* op, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                                   size_t n_scalars, kaio_plan** plan);
/* data: out, in[0..n_in); values: the map's scalars. */
KAIO_API int kaio_plan_map(const kaio_map* m, const kaio_tensor* out, const kaio_tensor* const* in, size_t n_in,
                           size_t n_scalars, kaio_plan** plan);
/* data: out, x; no values. */
KAIO_API int kaio_plan_reduce_rows(const char* op, const kaio_tensor* out, const kaio_tensor* x, kaio_plan** plan);
KAIO_API int kaio_plan_reduce(const char* op, const kaio_tensor* out, const kaio_tensor* x, kaio_plan** plan);
/* data: x, y; no values. */
KAIO_API int kaio_plan_softmax(const kaio_tensor* x, const kaio_tensor* y, int log, kaio_plan** plan);
/* data: x, w, y; values: eps. */
KAIO_API int kaio_plan_rms_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* y, kaio_plan** plan);
/* data: x, w, b, y; values: eps. */
KAIO_API int kaio_plan_layer_norm(const kaio_tensor* x, const kaio_tensor* w, const kaio_tensor* b,
                                  const kaio_tensor* y, kaio_plan** plan);
/* data: x, residual, w, sum, y; values: eps. */
KAIO_API int kaio_plan_add_rms_norm(const kaio_tensor* x, const kaio_tensor* residual, const kaio_tensor* w,
                                    const kaio_tensor* sum, const kaio_tensor* y, kaio_plan** plan);
/* data: x, y (then cos, sin when given); values: theta, position_offset (p's own are not used). */
KAIO_API int kaio_plan_rope(const kaio_tensor* x, const kaio_tensor* y, const kaio_tensor* cos, const kaio_tensor* sin,
                            const kaio_rope_params* p, kaio_plan** plan);
/* data: a, b, c (then bias when o->bias is given); values: alpha, beta (o's own are not used). */
KAIO_API int kaio_plan_matmul(const char* variant, const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                              const kaio_matmul_options* o, kaio_plan** plan);
/* data: q, k, v, out (then cu_seqlens_q, cu_seqlens_k, alibi_slopes, lse when given). */
KAIO_API int kaio_plan_attention(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v,
                                 const kaio_tensor* out, const kaio_attention_options* o, kaio_plan** plan);
KAIO_API int kaio_plan_attention_backward(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v,
                                          const kaio_tensor* out, const kaio_tensor* dout, const kaio_tensor* lse,
                                          const kaio_tensor* dq, const kaio_tensor* dk, const kaio_tensor* dv,
                                          const kaio_attention_options* o, kaio_plan** plan);
/* data: q, k_cache, v_cache, seqlens, out (then block_table, alibi_slopes, lse when given). */
KAIO_API int kaio_plan_attention_decode(const kaio_tensor* q, const kaio_tensor* k_cache, const kaio_tensor* v_cache,
                                        const kaio_tensor* seqlens, const kaio_tensor* out,
                                        const kaio_decode_options* o, kaio_plan** plan);
/* data: a, b, c (then scale_a, scale_b, bias when given). */
KAIO_API int kaio_plan_matmul_int8(const kaio_tensor* a, const kaio_tensor* b, const kaio_tensor* c,
                                   const kaio_tensor* scale_a, const kaio_tensor* scale_b, const kaio_tensor* bias,
                                   int32_t tile, kaio_plan** plan);
/* data: x, q, scales, y (then zeros, bias when given). */
KAIO_API int kaio_plan_matmul_int4(const kaio_tensor* x, const kaio_tensor* q, const kaio_tensor* scales,
                                   const kaio_tensor* zeros, const kaio_tensor* y, const kaio_tensor* bias,
                                   kaio_plan** plan);
/* data: y, w, x, workspace. */
KAIO_API int kaio_plan_quant_matmul(const kaio_tensor* y, const kaio_tensor* w, uint32_t format, const kaio_tensor* x,
                                    const kaio_tensor* workspace, uint32_t warps_per_row, kaio_plan** plan);
/* Checks the counts and that no array with elements is at address 0, then launches. */
KAIO_API int kaio_plan_launch(const kaio_plan* plan, const uint64_t* data, size_t n_data, const double* values,
                              size_t n_values, void* stream);
/* The same with every argument in one array of words: {plan, stream, n_data, n_values,
 * data[0..n_data), values[0..n_values) as IEEE-754 double bits}. For callers whose foreign
 * calls cost per argument (Python's ctypes): one pointer crosses. */
KAIO_API int kaio_plan_launch_packed(const uint64_t* words);
/* The packed launch on a framework's tensor objects (e.g. the PyObject* of torch tensors),
 * read through the DLPack exchange table the framework publishes (DLPack 1.2+: the pointer
 * in its tensor type's __dlpack_c_exchange_api__ capsule). words: {plan, exchange_api,
 * learn, n_objects, n_values, objects[0..n_objects) (kaio_plan_launch's order),
 * values[0..n_values) as double bits}. It launches on the producer's current work stream of
 * the first array's device. Call it with the objects' interpreter lock held: the table's
 * functions run Python's C API.
 * learn != 0: the caller has checked that these objects have the metadata the plan was
 * made for; the plan keeps their metadata as the table reports it and launches. learn = 0:
 * the objects' metadata is compared with what was learned. KAIO_MISMATCH (nothing
 * launched, no error set): it differs, nothing was learned yet, or the table is not a
 * usable version. KAIO_ERR_CALLBACK: a function of the table failed; its error is set in
 * the caller's interpreter. */
KAIO_API int kaio_plan_launch_objects(const uint64_t* words);
KAIO_API size_t kaio_plan_arrays(const kaio_plan* plan); /* how many addresses a launch takes */
KAIO_API size_t kaio_plan_values(const kaio_plan* plan); /* how many numbers */
KAIO_API const char* kaio_plan_op(const kaio_plan* plan);
KAIO_API void kaio_plan_free(kaio_plan* plan);

#ifdef __cplusplus
}
#endif

#endif /* KAIO_CAPI_KAIO_H */
