"""kaio's ops as PyTorch custom ops (torch.ops.kaio.*): registered with
torch.library.custom_op and register_fake (so torch.compile and FakeTensor tracing see them),
with register_autograd where a backward exists (matmul, softmax, log_softmax, rms_norm,
layer_norm, attention, attention_lse). Importable only where torch is installed.

Training through attention: attention_lse returns (out, lse) and keeps the lse its backward
(kaio::ops::attention_backward) needs; attention's own backward recomputes it with a second
forward first.

    import kaio.torch
    y = torch.ops.kaio.rms_norm(x, w, 1e-6)     # or kaio.torch.rms_norm(x, w, 1e-6)

Kernels go on torch's current stream, so the ops need no synchronisation and CUDA graphs
capture them. Inputs that are not contiguous are made contiguous first (matmul takes
transposed views as they are).
"""

import torch  # noqa: F401  (ImportError here: kaio.torch needs torch)

from typing import Any, Callable

from . import ops as _ops

__all__ = [
    "add", "sub", "mul", "axpby", "relu", "silu", "gelu", "gelu_tanh", "exp", "silu_gate", "gelu_gate",
    "gelu_gate_tanh", "softmax", "log_softmax", "rms_norm", "layer_norm", "add_rms_norm", "rope",
    "reduce_rows", "argmax_rows", "matmul", "attention", "attention_lse", "attention_backward", "attention_decode",
    "matmul_int8", "matmul_int4",
    "quant_matmul", "OPS",
]  # fmt: skip

OPS: dict[str, Any] = {}  # name -> the registered op (torch.ops.kaio.<name>)


def _c(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def _register(name: str, schema: str, impl: Callable[..., Any], fake: Callable[..., Any]) -> Any:
    op = torch.library.custom_op(f"kaio::{name}", impl, mutates_args=(), schema=schema)
    op.register_fake(fake)
    OPS[name] = op
    return op


# ---- elementwise ----
def _unary(name: str) -> Any:
    fn = getattr(_ops, name)
    return _register(name, "(Tensor x) -> Tensor", lambda x: fn(_c(x)), lambda x: torch.empty_like(x))


def _binary(name: str, a: str, b: str) -> Any:
    fn = getattr(_ops, name)
    return _register(name, f"(Tensor {a}, Tensor {b}) -> Tensor", lambda x, y: fn(_c(x), _c(y)),
                     lambda x, y: torch.empty_like(x))


relu, silu, gelu, gelu_tanh, exp = (_unary(n) for n in ("relu", "silu", "gelu", "gelu_tanh", "exp"))
add, sub, mul = (_binary(n, "a", "b") for n in ("add", "sub", "mul"))
silu_gate, gelu_gate, gelu_gate_tanh = (_binary(n, "x", "gate") for n in ("silu_gate", "gelu_gate", "gelu_gate_tanh"))
axpby = _register(
    "axpby",
    "(Tensor x, Tensor y, float alpha, float beta) -> Tensor",
    lambda x, y, alpha, beta: _ops.axpby(_c(x), _c(y), alpha, beta),
    lambda x, y, alpha, beta: torch.empty_like(x),
)

# ---- rows ----
softmax = _register("softmax", "(Tensor x) -> Tensor", lambda x: _ops.softmax(_c(x)), lambda x: torch.empty_like(x))
log_softmax = _register("log_softmax", "(Tensor x) -> Tensor", lambda x: _ops.log_softmax(_c(x)),
                        lambda x: torch.empty_like(x))
rms_norm = _register(
    "rms_norm",
    "(Tensor x, Tensor w, float eps) -> Tensor",
    lambda x, w, eps: _ops.rms_norm(_c(x), _c(w), eps),
    lambda x, w, eps: torch.empty_like(x),
)
layer_norm = _register(
    "layer_norm",
    "(Tensor x, Tensor w, Tensor b, float eps) -> Tensor",
    lambda x, w, b, eps: _ops.layer_norm(_c(x), _c(w), _c(b), eps),
    lambda x, w, b, eps: torch.empty_like(x),
)
add_rms_norm = _register(
    "add_rms_norm",
    "(Tensor x, Tensor residual, Tensor w, float eps) -> (Tensor, Tensor)",
    lambda x, r, w, eps: _ops.add_rms_norm(_c(x), _c(r), _c(w), eps),
    lambda x, r, w, eps: (torch.empty_like(x), torch.empty_like(x)),
)
rope = _register(
    "rope",
    "(Tensor x, int heads, int head_dim, int rotary_dim, float theta, int position_offset, str style) -> Tensor",
    lambda x, heads, head_dim, rotary_dim, theta, position_offset, style: _ops.rope(
        _c(x), heads=heads, head_dim=head_dim, rotary_dim=rotary_dim, theta=theta, position_offset=position_offset,
        style=style),
    lambda x, *args: torch.empty_like(x),
)
reduce_rows = _register(
    "reduce_rows",
    "(Tensor x, str op) -> Tensor",
    lambda x, op: _ops.reduce_rows(op, _c(x)),
    lambda x, op: x.new_empty(x.shape[:-1], dtype=torch.float32),
)
argmax_rows = _register(
    "argmax_rows",
    "(Tensor x) -> Tensor",
    lambda x: _ops.argmax_rows(_c(x)),
    lambda x: x.new_empty(x.shape[:-1], dtype=torch.int64),
)


# ---- matmul (matmul_auto: the tuned variant) ----
def _mm_shape(a: torch.Tensor, b: torch.Tensor) -> tuple:
    lead = a.shape[:-2] if a.dim() == 3 else (b.shape[:-2] if b.dim() == 3 else ())
    return (*lead, a.shape[-2], b.shape[-1])


def _mm_operand(t: torch.Tensor) -> torch.Tensor:
    # Row-major and transposed (column-major) views are read as they are.
    if t.stride(-1) == 1 or t.stride(-2) == 1:
        return t
    return t.contiguous()


matmul = _register(
    "matmul",
    "(Tensor a, Tensor b) -> Tensor",
    lambda a, b: _ops.matmul_auto(_mm_operand(a), _mm_operand(b)),
    lambda a, b: a.new_empty(_mm_shape(a, b)),
)


# ---- attention ----
def _heads(t: torch.Tensor) -> torch.Tensor:
    # Any strides with the head dimension contiguous are read as they are.
    return t if t.stride(-1) == 1 else t.contiguous()


_ATTN = "float scale, bool causal, int window_left, int window_right, float softcap, Tensor? alibi_slopes"


def _attn_kw(scale: float, causal: bool, wl: int, wr: int, softcap: float, alibi: Any) -> dict:
    return dict(scale=scale, causal=causal, window=(wl, wr), softcap=softcap, alibi_slopes=None if alibi is None else _c(alibi))


attention = _register(
    "attention",
    "(Tensor q, Tensor k, Tensor v, float scale, bool causal, int window_left, int window_right, float softcap, "
    "Tensor? alibi_slopes) -> Tensor",
    lambda q, k, v, scale, causal, wl, wr, softcap, alibi: _ops.attention(
        _heads(q), _heads(k), _heads(v), scale=scale, causal=causal, window=(wl, wr), softcap=softcap,
        alibi_slopes=None if alibi is None else _c(alibi)),
    lambda q, k, v, *args: torch.empty_like(q, memory_format=torch.contiguous_format),
)
attention_lse = _register(
    "attention_lse",
    f"(Tensor q, Tensor k, Tensor v, {_ATTN}) -> (Tensor, Tensor)",
    lambda q, k, v, *opts: _ops.attention(_heads(q), _heads(k), _heads(v), return_lse=True, **_attn_kw(*opts)),
    lambda q, k, v, *args: (torch.empty_like(q, memory_format=torch.contiguous_format),
                            q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)),
)
attention_backward = _register(
    "attention_backward",
    f"(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, {_ATTN}) -> (Tensor, Tensor, Tensor)",
    lambda do, q, k, v, o, lse, *opts: _ops.attention_backward(_heads(q), _heads(k), _heads(v), _heads(o), _heads(do),
                                                               _c(lse), **_attn_kw(*opts)),
    lambda do, q, k, v, *args: tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v)),
)
attention_decode = _register(
    "attention_decode",
    "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor seqlens, Tensor? block_table, float scale, bool causal, "
    "int window_left, float softcap, int max_seqlen_k) -> Tensor",
    lambda q, kc, vc, lens, bt, scale, causal, wl, softcap, mk: _ops.attention_decode(
        _heads(q), _heads(kc), _heads(vc), _c(lens), block_table=None if bt is None else _c(bt), scale=scale,
        causal=causal, window_left=wl, softcap=softcap, max_seqlen_k=mk),
    lambda q, *args: torch.empty_like(q, memory_format=torch.contiguous_format),
)


# ---- quantized matmul (forward only) ----
def _opt(t: Any) -> Any:
    return None if t is None else _c(t)


def _int8_dtype(out_dtype: str, scaled: bool) -> torch.dtype:
    return getattr(torch, out_dtype or ("float16" if scaled else "int32"))


matmul_int8 = _register(
    "matmul_int8",
    "(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, Tensor? bias, str out_dtype) -> Tensor",
    lambda a, b, sa, sb, bias, out_dtype: _ops.matmul_int8(
        _c(a), _c(b), scale_a=_opt(sa), scale_b=_opt(sb), bias=_opt(bias), out_dtype=out_dtype or None),
    lambda a, b, sa, sb, bias, out_dtype: a.new_empty(
        (a.shape[0], b.shape[0]), dtype=_int8_dtype(out_dtype, sa is not None or sb is not None or bias is not None)),
)
matmul_int4 = _register(
    "matmul_int4",
    "(Tensor x, Tensor q, Tensor scales, Tensor? zeros, Tensor? bias) -> Tensor",
    lambda x, q, s, z, bias: _ops.matmul_int4(_c(x), _c(q), _c(s), _opt(z), bias=_opt(bias)),
    lambda x, q, s, z, bias: x.new_empty((x.shape[0], q.shape[1])),
)
quant_matmul = _register(
    "quant_matmul",
    "(Tensor x, Tensor w, int format, str out_dtype) -> Tensor",
    lambda x, w, fmt, out_dtype: _ops.quant_matmul(_c(x), _c(w), fmt, out_dtype=out_dtype or None),
    lambda x, w, fmt, out_dtype: x.new_empty((x.shape[0], w.shape[0]),
                                             dtype=getattr(torch, out_dtype) if out_dtype else x.dtype),
)


# ---- autograd ----
def _mm_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx: Any, g: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = matmul(g, b.transpose(-1, -2))
        if a.dim() == 2 and ga.dim() == 3:
            ga = ga.sum(0)
    if ctx.needs_input_grad[1]:
        gb = matmul(a.transpose(-1, -2), g)
        if b.dim() == 2 and gb.dim() == 3:
            gb = gb.sum(0)
    return ga, gb


def _softmax_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(output)


def _softmax_backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    y32, g32 = y.float(), g.float()
    return (y32 * (g32 - (g32 * y32).sum(-1, keepdim=True))).to(y.dtype)


def _log_softmax_backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    g32 = g.float()
    return (g32 - torch.exp(y.float()) * g32.sum(-1, keepdim=True)).to(y.dtype)


def _norm_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(*[t for t in inputs if isinstance(t, torch.Tensor)])
    ctx.eps = inputs[-1]


def _rms_backward(ctx: Any, g: torch.Tensor) -> tuple:
    x, w = ctx.saved_tensors
    x32, w32, g32 = x.float(), w.float(), g.float()
    r = torch.rsqrt((x32 * x32).mean(-1, keepdim=True) + ctx.eps)
    gw = g32 * w32
    gx = r * (gw - x32 * r * r * (gw * x32).mean(-1, keepdim=True))
    gwt = (g32 * x32 * r).reshape(-1, x.shape[-1]).sum(0)
    return gx.to(x.dtype), gwt.to(w.dtype), None


def _ln_backward(ctx: Any, g: torch.Tensor) -> tuple:
    x, w, b = ctx.saved_tensors
    x32, w32, g32 = x.float(), w.float(), g.float()
    mu = x32.mean(-1, keepdim=True)
    r = torch.rsqrt(((x32 - mu) ** 2).mean(-1, keepdim=True) + ctx.eps)
    xhat = (x32 - mu) * r
    gw = g32 * w32
    gx = r * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
    cols = x.shape[-1]
    return (gx.to(x.dtype), (g32 * xhat).reshape(-1, cols).sum(0).to(w.dtype),
            g32.reshape(-1, cols).sum(0).to(b.dtype), None)


def _attn_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    q, k, v, *opts = inputs
    ctx.opts = tuple(opts[:5])
    alibi = opts[5]
    if isinstance(output, tuple):  # attention_lse: the lse is kept for the backward, not differentiated
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(q, k, v, output[0], output[1], alibi)
    else:
        ctx.save_for_backward(q, k, v, output, None, alibi)


def _attn_backward(ctx: Any, g: Any, *unused: Any) -> tuple:
    q, k, v, o, lse, alibi = ctx.saved_tensors
    if lse is None:  # attention: the forward again, for its lse
        o, lse = attention_lse(q, k, v, *ctx.opts, alibi)
    dq, dk, dv = attention_backward(g, q, k, v, o, lse, *ctx.opts, alibi)
    return dq, dk, dv, None, None, None, None, None, None


attention.register_autograd(_attn_backward, setup_context=_attn_setup)
attention_lse.register_autograd(_attn_backward, setup_context=_attn_setup)
matmul.register_autograd(_mm_backward, setup_context=_mm_setup)
softmax.register_autograd(_softmax_backward, setup_context=_softmax_setup)
log_softmax.register_autograd(_log_softmax_backward, setup_context=_softmax_setup)
rms_norm.register_autograd(_rms_backward, setup_context=_norm_setup)
layer_norm.register_autograd(_ln_backward, setup_context=_norm_setup)
