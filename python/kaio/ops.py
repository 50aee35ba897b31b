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
from ._tensors import Tensor, empty_like, from_object, stream_handle
from .errors import UsageError

Array = Any  # any object with __dlpack__

__all__ = [
    "add", "sub", "mul", "axpby", "relu", "silu", "gelu", "gelu_tanh", "exp",
    "silu_gate", "gelu_gate", "gelu_gate_tanh", "elementwise", "ELEMENTWISE_OPS",
    "Reduce", "reduce_rows", "argmax_rows", "reduce",
    "softmax", "log_softmax", "rms_norm", "layer_norm", "add_rms_norm", "rope",
    "matmul", "matmul_auto", "matmul_variants",
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

_ADDRS = [ctypes.c_void_p * n for n in range(9)]  # array types made once (making one costs microseconds)
_FLOATS = [ctypes.c_float * n for n in range(9)]
_OP_BYTES = {name: name.encode() for name in ELEMENTWISE_OPS}


def _tensor_array(ts: Sequence[Tensor]) -> Any:
    return _ADDRS[len(ts)](*[t.addr for t in ts])


def _out(op: str, out: Optional[Array], like: Any, shape: Sequence[int], dtype: str, stream: int) -> tuple[Any, Tensor]:
    if out is None:
        out = empty_like(op, like, shape, dtype)
    return out, from_object(op, "out", out, stream)


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
    h = stream_handle(stream, inputs[0])
    ts = [from_object(op, n, x, h) for n, x in zip(names, inputs)]
    res, to = _out(op, out, inputs[0], ts[0].shape, ts[0].dtype, h)
    sc = _FLOATS[len(scalars)](*scalars) if scalars else None
    _lib.check(_lib.lib.kaio_elementwise(_OP_BYTES[op], to.addr, _tensor_array(ts), len(ts), sc, len(scalars), h))
    return res


def add(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a + b."""
    return elementwise("add", a, b, out=out, stream=stream)


def sub(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a - b."""
    return elementwise("sub", a, b, out=out, stream=stream)


def mul(a: Array, b: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = a * b."""
    return elementwise("mul", a, b, out=out, stream=stream)


def axpby(x: Array, y: Array, alpha: float, beta: float, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = alpha * x + beta * y."""
    return elementwise("axpby", x, y, scalars=(alpha, beta), out=out, stream=stream)


def relu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = max(x, 0) (NaN stays NaN)."""
    return elementwise("relu", x, out=out, stream=stream)


def silu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / (1 + exp(-x))."""
    return elementwise("silu", x, out=out, stream=stream)


def gelu(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / 2 * (1 + erf(x / sqrt(2)))."""
    return elementwise("gelu", x, out=out, stream=stream)


def gelu_tanh(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    return elementwise("gelu_tanh", x, out=out, stream=stream)


def exp(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = exp(x)."""
    return elementwise("exp", x, out=out, stream=stream)


def silu_gate(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = silu(x) * gate (SwiGLU)."""
    return elementwise("silu_gate", x, gate, out=out, stream=stream)


def gelu_gate(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = gelu(x) * gate (GEGLU)."""
    return elementwise("gelu_gate", x, gate, out=out, stream=stream)


def gelu_gate_tanh(x: Array, gate: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """out = gelu_tanh(x) * gate."""
    return elementwise("gelu_gate_tanh", x, gate, out=out, stream=stream)


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


def reduce_rows(op: "Reduce | str", x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """op ("sum", "max", "min", "mean") of each row of x along its last axis, into float32 of
    x's shape without the last axis ("argmax": int64 indices of the first maximum)."""
    name = _reduce_name(op)
    h = stream_handle(stream, x)
    opn = "argmax_rows" if name == "argmax" else "reduce_rows"
    tx = from_object(opn, "x", x, h)
    res, to = _out(opn, out, x, tx.shape[:-1], "int64" if name == "argmax" else "float32", h)
    _lib.check(_lib.lib.kaio_reduce_rows(name.encode(), to.ref, tx.ref, h))
    return res


def argmax_rows(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """The index of each row's maximum (int64; NaN counts as the largest, ties: the lowest index)."""
    return reduce_rows(Reduce.ARGMAX, x, out, stream=stream)


def reduce(op: "Reduce | str", x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """op ("sum", "max", "min") of all of x (contiguous) into a float32 array of shape ();
    deterministic: the same input gives the same bits on every run."""
    name = _reduce_name(op)
    h = stream_handle(stream, x)
    tx = from_object("reduce", "x", x, h)
    res, to = _out("reduce", out, x, (), "float32", h)
    _lib.check(_lib.lib.kaio_reduce(name.encode(), to.ref, tx.ref, h))
    return res


def _row_op(op: str, x: Array, out: Optional[Array], stream: Any) -> tuple[int, Tensor, Any, Tensor]:
    h = stream_handle(stream, x)
    tx = from_object(op, "x", x, h)
    res, ty = _out(op, out, x, tx.shape, tx.dtype, h)
    return h, tx, res, ty


def softmax(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """softmax along the last axis (f32 inside, rounded once; out may be x)."""
    h, tx, res, ty = _row_op("softmax", x, out, stream)
    _lib.check(_lib.lib.kaio_softmax(tx.ref, ty.ref, 0, h))
    return res


def log_softmax(x: Array, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """log_softmax along the last axis."""
    h, tx, res, ty = _row_op("log_softmax", x, out, stream)
    _lib.check(_lib.lib.kaio_softmax(tx.ref, ty.ref, 1, h))
    return res


def rms_norm(x: Array, w: Array, eps: float = 1e-6, out: Optional[Array] = None, *, stream: Any = None) -> Array:
    """y = x * rsqrt(mean(x^2) + eps) * w along the last axis (w: a vector of x's last dimension)."""
    h, tx, res, ty = _row_op("rms_norm", x, out, stream)
    tw = from_object("rms_norm", "w", w, h)
    _lib.check(_lib.lib.kaio_rms_norm(tx.ref, tw.ref, ty.ref, eps, h))
    return res


def layer_norm(x: Array, w: Array, b: Array, eps: float = 1e-5, out: Optional[Array] = None, *,
               stream: Any = None) -> Array:
    """y = (x - mean(x)) * rsqrt(var(x) + eps) * w + b along the last axis (biased variance)."""
    h, tx, res, ty = _row_op("layer_norm", x, out, stream)
    tw = from_object("layer_norm", "w", w, h)
    tb = from_object("layer_norm", "b", b, h)
    _lib.check(_lib.lib.kaio_layer_norm(tx.ref, tw.ref, tb.ref, ty.ref, eps, h))
    return res


def add_rms_norm(x: Array, residual: Array, w: Array, eps: float = 1e-6, sum_out: Optional[Array] = None,
                 out: Optional[Array] = None, *, stream: Any = None) -> tuple[Array, Array]:
    """sum = x + residual; y = rms_norm(sum, w, eps). Returns (sum, y); sum_out may be x or
    residual, out may be x (in place)."""
    h, tx, res, ty = _row_op("add_rms_norm", x, out, stream)
    tr = from_object("add_rms_norm", "residual", residual, h)
    tw = from_object("add_rms_norm", "w", w, h)
    sres, ts = _out("add_rms_norm", sum_out, x, tx.shape, tx.dtype, h)
    _lib.check(_lib.lib.kaio_add_rms_norm(tx.ref, tr.ref, tw.ref, ts.ref, ty.ref, eps, h))
    return sres, res


def rope(x: Array, *, heads: int, head_dim: int, rotary_dim: int = 0, theta: float = 10000.0,
         position_offset: int = 0, style: str = "neox", cos: Optional[Array] = None, sin: Optional[Array] = None,
         out: Optional[Array] = None, stream: Any = None) -> Array:
    """Rotary position embedding of x (tokens x heads*head_dim, or tokens x heads x head_dim):
    style "neox" (half rotation) or "gptj" (interleaved); angles from theta, or cos / sin
    tables of positions x rotary_dim/2. Token t is at position position_offset + t."""
    if style not in ("neox", "gptj"):
        raise UsageError.make("rope", f"argument 'style': '{style}' is not 'neox' or 'gptj'")
    h, tx, res, ty = _row_op("rope", x, out, stream)
    p = _lib.RopeParams(1 if style == "gptj" else 0, heads, head_dim, rotary_dim, theta, position_offset)
    tc = from_object("rope", "cos", cos, h) if cos is not None else None
    tsn = from_object("rope", "sin", sin, h) if sin is not None else None
    _lib.check(_lib.lib.kaio_rope(tx.ref, ty.ref, tc.ref if tc else None, tsn.ref if tsn else None,
                                  ctypes.byref(p), h))
    return res


_ACTIVATION_MAPS: list[Any] = []  # user maps used as epilogues: their bodies live as long as the process


def _matmul(variant: Optional[str], a: Array, b: Array, out: Optional[Array], alpha: float, beta: float,
            bias: Optional[Array], activation: Any, tf32: bool, fast_math: bool, split_k: int,
            out_dtype: Optional[str], stream: Any) -> Array:
    op = "matmul" if variant else "matmul_auto"
    h = stream_handle(stream, a)
    ta = from_object(op, "a", a, h)
    tb = from_object(op, "b", b, h)
    if out is None:
        if len(ta.shape) < 2 or len(tb.shape) < 2:
            raise UsageError.make(op, f"expected matrices, got shapes {list(ta.shape)} and {list(tb.shape)}")
        shape = ta.shape[:-1] + (tb.shape[-1],)
        if len(tb.shape) == 3 and len(ta.shape) == 2:
            shape = (tb.shape[0],) + shape
        if beta != 0:
            raise UsageError.make(op, "argument 'beta': beta != 0 reads c: pass out=")
    res, tc = _out(op, out, a, shape if out is None else (), out_dtype or ta.dtype, h)
    o = _lib.MatmulOptions()
    o.alpha, o.beta, o.tf32, o.fast_math, o.split_k = alpha, beta, int(tf32), int(fast_math), split_k
    tbias = None
    if bias is not None:
        tbias = from_object(op, "bias", bias, h)
        o.bias = tbias.addr
    if activation is not None:
        if isinstance(activation, str):
            o.activation = activation.encode()
        else:
            handle = getattr(activation, "_handle", None)
            if handle is None:
                raise UsageError.make(op, "argument 'activation': expected an op name or a kaio.map")
            _ACTIVATION_MAPS.append(activation)
            o.activation_map = handle
    _lib.check(_lib.lib.kaio_matmul(variant.encode() if variant else None, ta.ref, tb.ref, tc.ref, ctypes.byref(o), h))
    return res


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
