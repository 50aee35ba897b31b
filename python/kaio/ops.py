"""kaio's op library (kaio::ops) on any DLPack arrays: torch, numpy (interpret mode), CuPy, JAX.

Each op reads its arrays without copying, checks dtype, shape, strides and device (a
kaio.UsageError naming the op and the argument), launches on the stream of the inputs'
framework (torch's current stream) unless `stream=` names one, and returns its output: `out`
when given (which may be an input: in place), else a new array of the inputs' framework.
Elementwise ops and row ops take contiguous arrays or rows with a unit inner stride.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any, Optional, Sequence

from . import _lib
from ._plans import call as _call
from ._plans import call_fast as _call_fast
from ._plans import fast as _fast
from ._plans import miss as _miss
from ._tensors import Tensor
from .errors import UsageError

Array = Any  # any object with __dlpack__

__all__ = [
    "add", "sub", "mul", "axpby", "relu", "silu", "gelu", "gelu_tanh", "exp",
    "silu_gate", "gelu_gate", "gelu_gate_tanh", "elementwise", "ELEMENTWISE_OPS",
    "Reduce", "reduce_rows", "argmax_rows", "reduce",
    "softmax", "log_softmax", "rms_norm", "layer_norm", "add_rms_norm", "rope",
    "matmul", "matmul_auto", "matmul_variants",
    "attention", "attention_backward", "attention_decode",
    "matmul_int8", "matmul_int8_qkv", "matmul_int8_tiles", "matmul_int4", "matmul_int4_qkv",
    "quant_matmul", "quant_matmul_workspace", "GGUF_FORMATS",
    "quantize_int8", "quantize_int4", "pack_int4", "dequantize_int4",
]  # fmt: skip

# name -> (input names, scalar names), as kaio::ops::elementwise_op names them.
ELEMENTWISE_OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "add": (("a", "b"), ()),
    "sub": (("a", "b"), ()),
    "mul": (("a", "b"), ()),
    "axpby": (("x", "y"), ("alpha", "beta")),
    "relu": (("x",), ()),
    "silu": (("x",), ()),
    "gelu": (("x",), ()),
    "gelu_tanh": (("x",), ()),
    "exp": (("x",), ()),
    "silu_gate": (("x", "gate"), ()),
    "gelu_gate": (("x", "gate"), ()),
    "gelu_gate_tanh": (("x", "gate"), ()),
}

# The cached-call paths by arity and output slot (kaio._plans.fast).
_F2_0, _F3_0, _F2_1, _F3_2, _F4_3 = _fast(2, 0), _fast(3, 0), _fast(2, 1), _fast(3, 2), _fast(4, 3)

_ADDRS = [ctypes.c_void_p * n for n in range(9)]  # array types made once (making one costs microseconds)
_FLOATS = [ctypes.c_float * n for n in range(9)]
_OP_BYTES = {name: name.encode() for name in ELEMENTWISE_OPS}
_EW_KEYS = {name: ("elementwise", name) for name in ELEMENTWISE_OPS}
_EW_NAMES = {name: ("out",) + ins for name, (ins, _) in ELEMENTWISE_OPS.items()}
_EW_OUT = (lambda ts: ts[1].shape, lambda ts: ts[1].dtype)


def _tensor_array(ts: Sequence[Tensor]) -> Any:
    return _ADDRS[len(ts)](*[t.addr for t in ts])


# Each op: the plan's arrays in its order (None: an output the plan makes), a key of the op
# and its options, the per-call numbers; a miss (kaio._plans.miss) reads the arrays, makes
# the outputs as the op always has, and makes the C plan.


def _ew_miss(key: Any, arrays: list, values: tuple, stream: Any, op: str) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            sc = _FLOATS[len(values)](*values) if values else None
            return _lib.lib.kaio_elementwise(_OP_BYTES[op], ts[0].addr, _tensor_array(ts[1:]), len(ts) - 1, sc,
                                             len(values), h)
        return _lib.lib.kaio_plan_elementwise(_OP_BYTES[op], ts[0].addr, _tensor_array(ts[1:]), len(ts) - 1,
                                              len(values), ph)

    return _miss(key, op, arrays, _EW_NAMES[op], {0: (1, arrays[0], *_EW_OUT)}, make, values, stream, ret=0, like=1)


def elementwise(op: str, *inputs: Array, scalars: Sequence[float] = (), out: Optional[Array] = None,
                stream: Any = None) -> Array:
    """out = op(inputs...; scalars) for one of ELEMENTWISE_OPS (computed in f32, rounded
    once to the dtype; f32, f16, bf16)."""
    if op not in ELEMENTWISE_OPS:
        raise UsageError.make("elementwise_op", f"no elementwise op named '{op}'")
    names, snames = ELEMENTWISE_OPS[op]
    if len(inputs) != len(names):
        raise UsageError.make(op, f"takes {len(names)} arrays ({', '.join(names)}), got {len(inputs)}")
    if len(scalars) != len(snames):
        raise UsageError.make(op, f"takes {len(snames)} scalars, got {len(scalars)}")
    return _call(_EW_KEYS[op], [out, *inputs], tuple(scalars), stream, _ew_miss, op)


def add(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a + b."""
    return _F3_0(_EW_KEYS["add"], out, a, b, (), stream, _ew_miss, "add")


def sub(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a - b."""
    return _F3_0(_EW_KEYS["sub"], out, a, b, (), stream, _ew_miss, "sub")


def mul(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a * b."""
    return _F3_0(_EW_KEYS["mul"], out, a, b, (), stream, _ew_miss, "mul")


def axpby(x: Array, y: Array, alpha: float, beta: float, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = alpha * x + beta * y."""
    return _F3_0(_EW_KEYS["axpby"], out, x, y, (alpha, beta), stream, _ew_miss, "axpby")


def relu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = max(x, 0) (NaN stays NaN)."""
    return _F2_0(_EW_KEYS["relu"], out, x, (), stream, _ew_miss, "relu")


def silu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / (1 + exp(-x))."""
    return _F2_0(_EW_KEYS["silu"], out, x, (), stream, _ew_miss, "silu")


def gelu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / 2 * (1 + erf(x / sqrt(2)))."""
    return _F2_0(_EW_KEYS["gelu"], out, x, (), stream, _ew_miss, "gelu")


def gelu_tanh(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    return _F2_0(_EW_KEYS["gelu_tanh"], out, x, (), stream, _ew_miss, "gelu_tanh")


def exp(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = exp(x)."""
    return _F2_0(_EW_KEYS["exp"], out, x, (), stream, _ew_miss, "exp")


def silu_gate(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = silu(x) * gate (SwiGLU)."""
    return _F3_0(_EW_KEYS["silu_gate"], out, x, gate, (), stream, _ew_miss, "silu_gate")


def gelu_gate(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = gelu(x) * gate (GEGLU)."""
    return _F3_0(_EW_KEYS["gelu_gate"], out, x, gate, (), stream, _ew_miss, "gelu_gate")


def gelu_gate_tanh(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = gelu_tanh(x) * gate."""
    return _F3_0(_EW_KEYS["gelu_gate_tanh"], out, x, gate, (), stream, _ew_miss, "gelu_gate_tanh")


class Reduce(str, enum.Enum):
    """kaio::ops::Reduce."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    MEAN = "mean"
    ARGMAX = "argmax"


def _reduce_name(op: "Reduce | str") -> str:
    try:
        return Reduce(op).value
    except ValueError:
        raise UsageError.make("reduce", f"argument 'op': '{op}' is not one of sum, max, min, mean, argmax") from None


def _reduce_rows_miss(key: Any, arrays: list, values: tuple, stream: Any, name: str) -> Any:
    opn = "argmax_rows" if name == "argmax" else "reduce_rows"
    dt = "int64" if name == "argmax" else "float32"

    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_reduce_rows(name.encode(), ts[0].addr, ts[1].addr, h)
        return _lib.lib.kaio_plan_reduce_rows(name.encode(), ts[0].addr, ts[1].addr, ph)

    outs = {0: (1, arrays[0], lambda ts: ts[1].shape[:-1], lambda ts: dt)}
    return _miss(key, opn, arrays, ("out", "x"), outs, make, values, stream, ret=0, like=1)


def reduce_rows(op: "Reduce | str", x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """op ("sum", "max", "min", "mean") of each row of x along its last axis, into float32 of
    x's shape without the last axis ("argmax": int64 indices of the first maximum)."""
    name = _reduce_name(op)
    return _F2_0(("reduce_rows", name), out, x, (), stream, _reduce_rows_miss, name)


def argmax_rows(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """The index of each row's maximum (int64; NaN counts as the largest, ties: the lowest index)."""
    return reduce_rows(Reduce.ARGMAX, x, out, stream=stream)


def _reduce_miss(key: Any, arrays: list, values: tuple, stream: Any, name: str) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_reduce(name.encode(), ts[0].addr, ts[1].addr, h)
        return _lib.lib.kaio_plan_reduce(name.encode(), ts[0].addr, ts[1].addr, ph)

    outs = {0: (1, arrays[0], lambda ts: (), lambda ts: "float32")}
    return _miss(key, "reduce", arrays, ("out", "x"), outs, make, values, stream, ret=0, like=1)


def reduce(op: "Reduce | str", x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """op ("sum", "max", "min") of all of x (contiguous) into a float32 array of shape ();
    deterministic: the same input gives the same bits on every run."""
    name = _reduce_name(op)
    return _F2_0(("reduce", name), out, x, (), stream, _reduce_miss, name)


_LIKE_X = (lambda ts: ts[0].shape, lambda ts: ts[0].dtype)  # an output of x's shape and dtype


def _softmax_miss(key: Any, arrays: list, values: tuple, stream: Any, log: int) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_softmax(ts[0].addr, ts[1].addr, log, h)
        return _lib.lib.kaio_plan_softmax(ts[0].addr, ts[1].addr, log, ph)

    op = "log_softmax" if log else "softmax"
    return _miss(key, op, arrays, ("x", "out"), {1: (0, arrays[1], *_LIKE_X)}, make, values, stream, ret=1)


_SOFTMAX, _LOG_SOFTMAX = ("softmax",), ("log_softmax",)


def softmax(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """softmax along the last axis (f32 inside, rounded once; out may be x)."""
    return _F2_1(_SOFTMAX, x, out, (), stream, _softmax_miss, 0)


def log_softmax(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """log_softmax along the last axis."""
    return _F2_1(_LOG_SOFTMAX, x, out, (), stream, _softmax_miss, 1)


def _rms_norm_miss(key: Any, arrays: list, values: tuple, stream: Any, _: Any) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_rms_norm(ts[0].addr, ts[1].addr, ts[2].addr, values[0], h)
        return _lib.lib.kaio_plan_rms_norm(ts[0].addr, ts[1].addr, ts[2].addr, ph)

    return _miss(key, "rms_norm", arrays, ("x", "w", "out"), {2: (0, arrays[2], *_LIKE_X)}, make, values, stream,
                 ret=2)


_RMS_NORM, _LAYER_NORM, _ADD_RMS_NORM = ("rms_norm",), ("layer_norm",), ("add_rms_norm",)


def rms_norm(x: Array, w: Array, eps: float = 1e-6, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """y = x * rsqrt(mean(x^2) + eps) * w along the last axis (w: a vector of x's last dimension)."""
    return _F3_2(_RMS_NORM, x, w, out, (eps,), stream, _rms_norm_miss, None)


def _layer_norm_miss(key: Any, arrays: list, values: tuple, stream: Any, _: Any) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_layer_norm(ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, values[0], h)
        return _lib.lib.kaio_plan_layer_norm(ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, ph)

    return _miss(key, "layer_norm", arrays, ("x", "w", "b", "out"), {3: (0, arrays[3], *_LIKE_X)}, make, values,
                 stream, ret=3)


def layer_norm(x: Array, w: Array, b: Array, eps: float = 1e-5, out: Optional[Array] = None, *,
               stream: Any = None) -> Array:
    """y = (x - mean(x)) * rsqrt(var(x) + eps) * w + b along the last axis (biased variance)."""
    return _F4_3(_LAYER_NORM, x, w, b, out, (eps,), stream, _layer_norm_miss, None)


def _add_rms_norm_miss(key: Any, arrays: list, values: tuple, stream: Any, _: Any) -> Any:
    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_add_rms_norm(ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, ts[4].addr, values[0], h)
        return _lib.lib.kaio_plan_add_rms_norm(ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, ts[4].addr, ph)

    outs = {4: (0, arrays[4], *_LIKE_X), 3: (0, arrays[3], *_LIKE_X)}
    return _miss(key, "add_rms_norm", arrays, ("x", "residual", "w", "out", "out"), outs, make, values, stream,
                 ret=(3, 4))


def add_rms_norm(x: Array, residual: Array, w: Array, eps: float = 1e-6, sum_out: Optional[Array] = None,
                 out: Optional[Array] = None, *, stream: Any = None) -> tuple[Array, Array]:
    """sum = x + residual; y = rms_norm(sum, w, eps). Returns (sum, y); sum_out may be x or
    residual, out may be x (in place)."""
    return _call(_ADD_RMS_NORM, [x, residual, w, sum_out, out], (eps,), stream, _add_rms_norm_miss, None)


def _rope_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    style, heads, head_dim, rotary_dim = opts
    tables = len(arrays) == 4

    def make(ts: list, ph: Any, h: int) -> int:
        p = _lib.RopeParams(style, heads, head_dim, rotary_dim, values[0], values[1])
        cos, sin = (ts[2].addr, ts[3].addr) if tables else (None, None)
        if ph is None:
            return _lib.lib.kaio_rope(ts[0].addr, ts[1].addr, cos, sin, ctypes.byref(p), h)
        return _lib.lib.kaio_plan_rope(ts[0].addr, ts[1].addr, cos, sin, ctypes.byref(p), ph)

    names = ("x", "out", "cos", "sin")[: len(arrays)]
    return _miss(key, "rope", arrays, names, {1: (0, arrays[1], *_LIKE_X)}, make, values, stream, ret=1)


def rope(x: Array, *, heads: int, head_dim: int, rotary_dim: int = 0, theta: float = 10000.0,
         position_offset: int = 0, style: str = "neox", cos: Optional[Array] = None, sin: Optional[Array] = None,
         out: Optional[Array] = None, stream: Any = None) -> Array:
    """Rotary position embedding of x (tokens x heads*head_dim, or tokens x heads x head_dim):
    style "neox" (half rotation) or "gptj" (interleaved); angles from theta, or cos / sin
    tables of positions x rotary_dim/2. Token t is at position position_offset + t."""
    if style not in ("neox", "gptj"):
        raise UsageError.make("rope", f"argument 'style': '{style}' is not 'neox' or 'gptj'")
    if (cos is None) != (sin is None):
        raise UsageError.make("rope", "argument 'cos'/'sin': give both tables or neither")
    opts = (1 if style == "gptj" else 0, heads, head_dim, rotary_dim)
    arrays = [x, out] if cos is None else [x, out, cos, sin]
    return _call_fast(("rope", *opts), arrays, 1, (theta, position_offset), stream, _rope_miss, opts)


_ACTIVATION_MAPS: list[Any] = []  # user maps used as epilogues: their bodies live as long as the process


def _matmul_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    variant, activation, tf32, fast_math, split_k, out_dtype, _ = opts
    op = "matmul" if variant else "matmul_auto"
    alpha, beta = values

    def shape_of(ts: list) -> tuple:
        ta, tb = ts[0], ts[1]
        if len(ta.shape) < 2 or len(tb.shape) < 2:
            raise UsageError.make(op, f"expected matrices, got shapes {list(ta.shape)} and {list(tb.shape)}")
        shape = ta.shape[:-1] + (tb.shape[-1],)
        if len(tb.shape) == 3 and len(ta.shape) == 2:
            shape = (tb.shape[0],) + shape
        if beta != 0:
            raise UsageError.make(op, "argument 'beta': beta != 0 reads c: pass out=")
        return shape

    o = _lib.MatmulOptions()
    o.alpha, o.beta, o.tf32, o.fast_math, o.split_k = alpha, beta, int(tf32), int(fast_math), split_k
    if activation is not None:
        if isinstance(activation, str):
            o.activation = activation.encode()
        else:
            handle = getattr(activation, "_handle", None)
            if handle is None:
                raise UsageError.make(op, "argument 'activation': expected an op name or a kaio.map")
            _ACTIVATION_MAPS.append(activation)
            o.activation_map = handle

    def make(ts: list, ph: Any, h: int) -> int:
        if len(ts) == 4:
            o.bias = ts[3].addr
        v = variant.encode() if variant else None
        if ph is None:
            return _lib.lib.kaio_matmul(v, ts[0].addr, ts[1].addr, ts[2].addr, ctypes.byref(o), h)
        return _lib.lib.kaio_plan_matmul(v, ts[0].addr, ts[1].addr, ts[2].addr, ctypes.byref(o), ph)

    outs = {2: (0, arrays[2], shape_of, lambda ts: out_dtype or ts[0].dtype)}
    return _miss(key, op, arrays, ("a", "b", "out", "bias")[: len(arrays)], outs, make, values, stream, ret=2)


def _matmul(variant: Optional[str], a: Array, b: Array, out: Optional[Array], alpha: float, beta: float,
            bias: Optional[Array], activation: Any, tf32: bool, fast_math: bool, split_k: int,
            out_dtype: Optional[str], stream: Any) -> Array:
    if activation is not None and not isinstance(activation, str) and getattr(activation, "_handle", None) is None:
        raise UsageError.make("matmul" if variant else "matmul_auto",
                              "argument 'activation': expected an op name or a kaio.map")
    # beta != 0 without out is an error of the miss: in the key, so that no plan serves it.
    opts = (variant, activation, tf32, fast_math, split_k, out_dtype, out is None and beta != 0)
    key = ("matmul", *opts)
    if bias is None:
        return _F3_2(key, a, b, out, (alpha, beta), stream, _matmul_miss, opts)
    return _call_fast(key, [a, b, out, bias], 2, (alpha, beta), stream, _matmul_miss, opts)


def matmul_auto(a: Array, b: Array, out: Optional[Array] = None, *, alpha: float = 1.0, beta: float = 0.0,
                bias: Optional[Array] = None, activation: Any = None, tf32: bool = False, fast_math: bool = False,
                split_k: int = 1, out_dtype: Optional[str] = None, stream: Any = None) -> Array:
    """out = activation(alpha * a @ b + beta * out + bias) with the variant kaio's autotuner
    chose for the problem (tuned on first use, the choice persisted). a: (m, k) or (batch,
    m, k), b: (k, n) or (batch, k, n), each row-major or a transposed view; out row-major,
    of out_dtype (default: a's). activation: an elementwise op name ("relu", "gelu", ...) or a
    kaio.map of one input."""
    return _matmul(None, a, b, out, alpha, beta, bias, activation, tf32, fast_math, split_k, out_dtype, stream)


def matmul(a: Array, b: Array, out: Optional[Array] = None, *, variant: str, alpha: float = 1.0,
           beta: float = 0.0, bias: Optional[Array] = None, activation: Any = None, tf32: bool = False,
           fast_math: bool = False, split_k: int = 1, out_dtype: Optional[str] = None, stream: Any = None) -> Array:
    """As matmul_auto with one named variant (see matmul_variants()); a UsageError says why
    a variant cannot serve the problem."""
    return _matmul(variant, a, b, out, alpha, beta, bias, activation, tf32, fast_math, split_k, out_dtype, stream)


def matmul_variants() -> list[str]:
    """The names of kaio's matmul variants, in order of preference."""
    need = ctypes.c_size_t(0)
    _lib.check(_lib.lib.kaio_matmul_variant_names(None, 0, ctypes.byref(need)))
    buf = ctypes.create_string_buffer(need.value)
    _lib.check(_lib.lib.kaio_matmul_variant_names(buf, need.value, ctypes.byref(need)))
    return [n for n in buf.value.decode().split("\n") if n]


# Attention and the quantized matmuls live in their own modules; kaio.ops is their namespace.
from ._attention import attention, attention_backward, attention_decode  # noqa: E402
from ._quant import (  # noqa: E402
    GGUF_FORMATS,
    dequantize_int4,
    matmul_int4,
    matmul_int4_qkv,
    matmul_int8,
    matmul_int8_qkv,
    matmul_int8_tiles,
    pack_int4,
    quant_matmul,
    quant_matmul_workspace,
    quantize_int4,
    quantize_int8,
)
