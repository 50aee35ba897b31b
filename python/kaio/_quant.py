"""kaio.ops' quantized matmuls: W8A8 int8 and W4A16 int4 (kaio::ops::matmul_int8 / int4, their
fused QKV forms), GGUF weights (kaio::ops::quant_matmul), and the host helpers that make
their inputs (numpy in, numpy out)."""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Union

from . import _lib
from ._plans import call_fast as _call_fast
from ._plans import miss as _miss
from .errors import UsageError

Array = Any

_TT3 = ctypes.c_void_p * 3
# ggml's type numbers of the GGUF block formats quant_matmul computes on.
GGUF_FORMATS = {"q8_0": 8, "q4_K": 12, "q6_K": 14}


def _shape_mn(a: int, b: int, b_axis: int) -> Any:
    # (rows of slot a, b_axis of slot b)
    return lambda ts: (ts[a].shape[0], ts[b].shape[b_axis]) if len(ts[a].shape) == 2 else ts[a].shape[:-1]


def _int8_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    has_sa, has_sb, has_bias, out_dtype, tile = opts
    names = ["a", "b", "out"] + (["scale_a"] if has_sa else []) + (["scale_b"] if has_sb else [])
    names += ["bias"] if has_bias else []

    def make(ts: list, ph: Any, h: int) -> int:
        i = 3
        opt = []
        for present in (has_sa, has_sb, has_bias):
            if present:
                opt.append(ts[i].addr)
                i += 1
            else:
                opt.append(None)
        if ph is None:
            return _lib.lib.kaio_matmul_int8(ts[0].addr, ts[1].addr, ts[2].addr, *opt, tile, h)
        return _lib.lib.kaio_plan_matmul_int8(ts[0].addr, ts[1].addr, ts[2].addr, *opt, tile, ph)

    outs = {2: (0, arrays[2], _shape_mn(0, 1, 0), lambda ts: out_dtype)}
    return _miss(key, "matmul_int8", arrays, names, outs, make, values, stream, ret=2)


def _int8_out_dtype(out_dtype: Optional[str], scaled: bool) -> str:
    return out_dtype or ("float16" if scaled else "int32")


def matmul_int8(a: Array, b: Array, out: Optional[Array] = None, *, scale_a: Optional[Array] = None,
                scale_b: Optional[Array] = None, bias: Optional[Array] = None, out_dtype: Optional[str] = None,
                tile: int = -1, stream: Any = None) -> Array:
    """W8A8: out (m, n) = scale_a * scale_b * (a @ b.T) + bias on int8 tensor cores
    (kaio::ops::matmul_int8). a (m, k) and b (n, k, a Linear weight) int8 row-major, k a
    multiple of 16; scale_a: one float32 or m (per row), scale_b: one or n (per column),
    bias: n float32. out_dtype: "int32" (the raw product, like torch._int_mm: no scales or
    bias), "float16", "bfloat16" or "float32"; default int32 without scales and bias, else
    float16. tile: -1 (by shape) or an index of matmul_int8_tiles()."""
    scaled = scale_a is not None or scale_b is not None or bias is not None
    opts = (scale_a is not None, scale_b is not None, bias is not None, _int8_out_dtype(out_dtype, scaled), int(tile))
    arrays = [a, b, out] + [x for x in (scale_a, scale_b, bias) if x is not None]
    return _call_fast(("matmul_int8", *opts), arrays, 2, (), stream, _int8_miss, opts)


def matmul_int8_tiles() -> list[str]:
    """The block tiles of the int8 kernels (the `tile` argument indexes this list)."""
    need = ctypes.c_size_t(0)
    _lib.check(_lib.lib.kaio_matmul_int8_tiles(None, 0, ctypes.byref(need)))
    buf = ctypes.create_string_buffer(need.value)
    _lib.check(_lib.lib.kaio_matmul_int8_tiles(buf, need.value, ctypes.byref(need)))
    return [n for n in buf.value.decode().split("\n") if n]


def _three(op: str, name: str, xs: Optional[Sequence[Any]], required: bool = False) -> list:
    if xs is None:
        if required:
            raise UsageError.make(op, f"argument '{name}': three arrays are needed (q, k, v parts)")
        return [None, None, None]
    xs = list(xs)
    if len(xs) != 3:
        raise UsageError.make(op, f"argument '{name}': three arrays are needed (q, k, v parts), got {len(xs)}")
    return xs


def _qkv(op: str, fixed: list, fixed_names: list, groups: dict, out_group: str, like: int, shape_of: Any,
         dtype_of: Any, call_c: Any, stream: Any) -> tuple:
    # The general path of a fused QKV op: the arrays flattened (fixed ones, then each group of
    # three in order, absent entries left out), the three outputs made where not given.
    arrays, names, slots = list(fixed), list(fixed_names), {}
    for g, xs in groups.items():
        slots[g] = []
        for i, x in enumerate(xs):
            if x is None and g != out_group:
                slots[g].append(None)
                continue
            slots[g].append(len(arrays))
            arrays.append(x)
            names.append(f"{g}[{i}]")
    outs = {}
    for i, s in enumerate(slots[out_group]):
        outs[s] = (like, arrays[s], shape_of(slots, i), dtype_of)

    def make(ts: list, ph: Any, h: int) -> int:
        def tt(g: str) -> Any:
            return _TT3(*[ts[s].addr if s is not None else None for s in slots[g]])

        return call_c(ts, tt, h)

    return _miss(None, op, arrays, names, outs, make, (), stream, ret=tuple(slots[out_group]), like=like)


def matmul_int8_qkv(a: Array, b: Sequence[Array], *, scale_a: Optional[Array] = None,
                    scale_b: Optional[Sequence[Array]] = None, bias: Optional[Sequence[Array]] = None,
                    out: Optional[Sequence[Array]] = None, out_dtype: str = "float16", stream: Any = None) -> tuple:
    """Three int8 products of one activation in one launch (Q, K and V projections):
    out[i] = scale_a * scale_b[i] * (a @ b[i].T) + bias[i]; b[i] (n_i, k). scale_b entries are
    all absent, all one value or all per column. Returns the three outputs."""
    op = "matmul_int8_qkv"
    groups = {"b": _three(op, "b", b, True), "out": _three(op, "out", out), "scale_b": _three(op, "scale_b", scale_b),
              "bias": _three(op, "bias", bias)}
    fixed, fixed_names = [a], ["a"]
    if scale_a is not None:
        fixed, fixed_names = [a, scale_a], ["a", "scale_a"]

    def shape_of(slots: dict, i: int) -> Any:
        return lambda ts: (ts[0].shape[0], ts[slots["b"][i]].shape[0])

    def call_c(ts: list, tt: Any, h: int) -> int:
        sa = ts[1].addr if scale_a is not None else None
        return _lib.lib.kaio_matmul_int8_qkv(ts[0].addr, tt("b"), tt("out"), sa, tt("scale_b"), tt("bias"), h)

    return _qkv(op, fixed, fixed_names, groups, "out", 0, shape_of, lambda ts: out_dtype, call_c, stream)


def _int4_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    has_zeros, has_bias = opts
    names = ["x", "q", "scales", "out"] + (["zeros"] if has_zeros else []) + (["bias"] if has_bias else [])

    def make(ts: list, ph: Any, h: int) -> int:
        z = ts[4].addr if has_zeros else None
        b = ts[4 + has_zeros].addr if has_bias else None
        if ph is None:
            return _lib.lib.kaio_matmul_int4(ts[0].addr, ts[1].addr, ts[2].addr, z, ts[3].addr, b, h)
        return _lib.lib.kaio_plan_matmul_int4(ts[0].addr, ts[1].addr, ts[2].addr, z, ts[3].addr, b, ph)

    outs = {3: (0, arrays[3], _shape_mn(0, 1, 1), lambda ts: ts[0].dtype)}
    return _miss(key, "matmul_int4", arrays, names, outs, make, values, stream, ret=3)


def matmul_int4(x: Array, q: Array, scales: Array, zeros: Optional[Array] = None, out: Optional[Array] = None, *,
                bias: Optional[Array] = None, stream: Any = None) -> Array:
    """W4A16: out (m, n) = x (m, k) @ dequant(W) + bias (kaio::ops::matmul_int4). x float16 or
    bfloat16 row-major; q uint32 or int32 (k / 8, n): the packed layout quantize_int4 and
    pack_int4 make; scales (k / group, n) of x's dtype (group 32, 64 or 128); zeros None
    (symmetric: 8) or uint8 (k / group, n); bias n of x's dtype. n a multiple of 8."""
    opts = (zeros is not None, bias is not None)
    arrays = [x, q, scales, out] + [t for t in (zeros, bias) if t is not None]
    return _call_fast(("matmul_int4", *opts), arrays, 3, (), stream, _int4_miss, opts)


def matmul_int4_qkv(x: Array, q: Sequence[Array], scales: Sequence[Array], zeros: Optional[Sequence[Array]] = None, *,
                    bias: Optional[Sequence[Array]] = None, out: Optional[Sequence[Array]] = None,
                    stream: Any = None) -> tuple:
    """Three int4 weights of one k and group against one activation in one launch; zeros and
    bias as for matmul_int4, per part (zeros for every part or none). Returns the three outputs."""
    op = "matmul_int4_qkv"
    groups = {"q": _three(op, "q", q, True), "scales": _three(op, "scales", scales, True),
              "zeros": _three(op, "zeros", zeros), "out": _three(op, "out", out), "bias": _three(op, "bias", bias)}

    def shape_of(slots: dict, i: int) -> Any:
        return lambda ts: (ts[0].shape[0], ts[slots["q"][i]].shape[1])

    def call_c(ts: list, tt: Any, h: int) -> int:
        return _lib.lib.kaio_matmul_int4_qkv(ts[0].addr, tt("q"), tt("scales"), tt("zeros"), tt("out"), tt("bias"), h)

    return _qkv(op, [x], ["x"], groups, "out", 0, shape_of, lambda ts: ts[0].dtype, call_c, stream)


def _gguf_format(fmt: Union[int, str]) -> int:
    if isinstance(fmt, str):
        if fmt not in GGUF_FORMATS:
            raise UsageError.make("quant_matmul", f"argument 'format': '{fmt}' is not one of {', '.join(GGUF_FORMATS)}")
        return GGUF_FORMATS[fmt]
    return int(fmt)


def quant_matmul_workspace(m: int, k: int) -> int:
    """Bytes of workspace quant_matmul needs for m rows of k activations."""
    return int(_lib.lib.kaio_quant_matmul_workspace(m, k))


def _gguf_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    fmt, warps, out_dtype = opts

    def make(ts: list, ph: Any, h: int) -> int:
        if ph is None:
            return _lib.lib.kaio_quant_matmul(ts[0].addr, ts[1].addr, fmt, ts[2].addr, ts[3].addr, warps, h)
        return _lib.lib.kaio_plan_quant_matmul(ts[0].addr, ts[1].addr, fmt, ts[2].addr, ts[3].addr, warps, ph)

    def ws_shape(ts: list) -> tuple:
        shape = ts[2].shape
        if len(shape) != 2:
            raise UsageError.make("quant_matmul", f"argument 'x': expected (m, k), got shape {list(shape)}")
        return (quant_matmul_workspace(shape[0], shape[1]),)

    def out_shape(ts: list) -> tuple:
        return (ts[2].shape[0], ts[1].shape[0]) if len(ts[2].shape) == 2 and len(ts[1].shape) == 2 else ()

    outs = {3: (2, arrays[3], ws_shape, lambda ts: "uint8"),
            0: (2, arrays[0], out_shape, lambda ts: out_dtype or ts[2].dtype)}
    return _miss(key, "quant_matmul", arrays, ["out", "w", "x", "workspace"], outs, make, values, stream, ret=0, like=2)


def quant_matmul(x: Array, w: Array, format: Union[int, str], out: Optional[Array] = None, *,
                 out_dtype: Optional[str] = None, workspace: Optional[Array] = None, warps_per_row: int = 0,
                 stream: Any = None) -> Array:
    """out (m, n) = x (m, k) @ W.T on GGUF-quantised weights (kaio::ops::quant_matmul): w uint8
    (n, row bytes), the rows of a GGUF tensor of dims [k, n] in blocks of `format` ("q8_0",
    "q4_K", "q6_K" or ggml's type number 8, 12, 14); x float32 / float16 / bfloat16; out of
    out_dtype (default x's). x is quantised to q8 per 32 elements into `workspace` (uint8 of
    quant_matmul_workspace(m, k) bytes, 16-byte aligned; made per call when not given)."""
    opts = (_gguf_format(format), int(warps_per_row), out_dtype)
    return _call_fast(("quant_matmul", *opts), [out, w, x, workspace], 0, (), stream, _gguf_miss, opts)


# ---- host helpers (numpy in, numpy out) ----


def _np() -> Any:
    import numpy

    return numpy


def _host(op: str, name: str, x: Any, dtype: Any, ndim: int = 2) -> Any:
    np = _np()
    try:
        a = np.ascontiguousarray(np.asarray(x), dtype=dtype)
    except (TypeError, ValueError) as e:
        raise UsageError.make(op, f"argument '{name}': cannot be read as a {np.dtype(dtype).name} array ({e})") from e
    if a.ndim != ndim:
        raise UsageError.make(op, f"argument '{name}': expected {ndim} dimensions, got shape {list(a.shape)}")
    return a


def _ptr(a: Any) -> int:
    return a.ctypes.data


def quantize_int8(x: Any) -> tuple[Any, Any]:
    """Symmetric int8 per row of a (rows, cols) matrix: (q int8 (rows, cols), scale float32
    (rows,)) with q = round(x / scale), scale = max |row| / 127 (1 for a zero row). For a
    Linear weight (n, k) the scales are per column of the product (scale_b); for activations
    per row (scale_a)."""
    np = _np()
    a = _host("quantize_int8", "x", x, np.float32)
    rows, cols = a.shape
    q = np.empty((rows, cols), np.int8)
    s = np.empty((rows,), np.float32)
    _lib.check(_lib.lib.kaio_quantize_int8(_ptr(a), rows, cols, _ptr(q), _ptr(s)))
    return q, s


def quantize_int4(w: Any, group: int = 128, dtype: str = "float16", zero_points: bool = True) -> tuple[Any, Any, Any]:
    """GPTQ-style 4-bit weights of W (k, n) (y = x @ W): (q uint32 (k / 8, n) packed for
    matmul_int4, scales (k / group, n), zeros uint8 (k / group, n) or None). Asymmetric with
    zero_points (scale = (max - min) / 15), else symmetric (zero 8, scale = max |w| / 7.5).
    scales are float16 for dtype "float16"; for "bfloat16" their bits as uint16 (numpy has no
    bfloat16: torch.from_numpy(s).view(torch.bfloat16))."""
    np = _np()
    a = _host("quantize_int4", "w", w, np.float32)
    k, n = a.shape
    if group <= 0 or k % group or k % 8:
        raise UsageError.make("quantize_int4", f"argument 'w': k = {k} is not a multiple of the group {group} and of 8")
    q = np.empty((k // 8, n), np.uint32)
    s = np.empty((k // group, n), np.uint16)
    z = np.empty((k // group, n), np.uint8) if zero_points else None
    _lib.check(_lib.lib.kaio_quantize_int4(_ptr(a), k, n, group, dtype.encode(), int(zero_points), _ptr(q), _ptr(s),
                                           _ptr(z) if z is not None else None))
    return q, (s.view(np.float16) if dtype in ("float16", "f16") else s), z


def pack_int4(v: Any) -> Any:
    """The kernel's layout of 4-bit values v (k, n), each 0..15: uint32 (k / 8, n) whose word
    (r, j) holds v[8r + i, j] in nibble (0, 4, 1, 5, 2, 6, 3, 7)[i]."""
    np = _np()
    a = _host("pack_int4", "v", v, np.uint8)
    k, n = a.shape
    if k % 8:
        raise UsageError.make("pack_int4", f"argument 'v': k = {k} is not a multiple of 8")
    if a.size and int(a.max()) > 15:
        raise UsageError.make("pack_int4", "argument 'v': values must be 0..15")
    q = np.empty((k // 8, n), np.uint32)
    _lib.check(_lib.lib.kaio_pack_int4(_ptr(a), k, n, _ptr(q)))
    return q


def dequantize_int4(q: Any, scales: Any, zeros: Any = None, dtype: Optional[str] = None,
                    round: bool = True) -> Any:
    """W (k, n) float32 from packed 4-bit weights, as the kernels compute it: (q - zero) *
    scale rounded once to the 16-bit dtype, or with round=False unrounded (exact in float32),
    the weights of the calls that apply the scales to their float32 sums (m <= 16, see
    docs/quantized-matmul.md). dtype: "float16" (default for float16 scales) or "bfloat16"
    (scales then as uint16 bits)."""
    np = _np()
    qa = _host("dequantize_int4", "q", q, np.uint32)
    sc = np.asarray(scales)
    if dtype is None:
        if sc.dtype != np.float16:
            raise UsageError.make("dequantize_int4", "argument 'dtype': give 'float16' or 'bfloat16' for scales that "
                                  "are not float16")
        dtype = "float16"
    sa = _host("dequantize_int4", "scales", sc.view(np.uint16) if sc.dtype == np.float16 else sc, np.uint16)
    k, n = qa.shape[0] * 8, qa.shape[1]
    if sa.shape[1] != n or sa.shape[0] == 0 or k % sa.shape[0]:
        raise UsageError.make("dequantize_int4", f"argument 'scales': shape {list(sa.shape)} does not fit k = {k}, n = {n}")
    za = None if zeros is None else _host("dequantize_int4", "zeros", zeros, np.uint8)
    if za is not None and za.shape != sa.shape:
        raise UsageError.make("dequantize_int4", f"argument 'zeros': has shape {list(za.shape)}; scales have {list(sa.shape)}")
    out = np.empty((k, n), np.float32)
    fn = _lib.lib.kaio_dequantize_int4 if round else _lib.lib.kaio_dequantize_int4_exact
    _lib.check(fn(_ptr(qa), _ptr(sa), _ptr(za) if za is not None else None, k, n, k // sa.shape[0],
                  dtype.encode(), _ptr(out)))
    return out
