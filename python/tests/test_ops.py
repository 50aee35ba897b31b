"""Every bound op on numpy arrays (DLPack, interpret mode) against float64 references."""

from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import ops

from support import TOL, close, gelu, gelu_tanh, rng, silu

pytestmark = pytest.mark.interpret

UNARY = {
    "relu": lambda x: np.maximum(x, 0),
    "silu": silu,
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "exp": np.exp,
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "silu_gate": lambda x, g: silu(x) * g,
    "gelu_gate": lambda x, g: gelu(x) * g,
    "gelu_gate_tanh": lambda x, g: gelu_tanh(x) * g,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, dtype: type) -> None:
    x = rng(1).standard_normal((5, 37)).astype(dtype)
    y = getattr(ops, name)(x)
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == x.shape
    close(y, UNARY[name](x.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str, dtype: type) -> None:
    a = rng(2).standard_normal(1001).astype(dtype)
    b = rng(3).standard_normal(1001).astype(dtype)
    y = getattr(ops, name)(a, b)
    close(y, BINARY[name](a.astype(np.float64), b.astype(np.float64)), dtype)


def test_axpby_scalars() -> None:
    x = rng(4).standard_normal(300).astype(np.float32)
    y = rng(5).standard_normal(300).astype(np.float32)
    close(ops.axpby(x, y, 2.5, -0.5), 2.5 * x.astype(np.float64) - 0.5 * y, np.float32)


def test_in_place_and_out() -> None:
    a = rng(6).standard_normal(257).astype(np.float32)
    b = rng(7).standard_normal(257).astype(np.float32)
    ref = a.astype(np.float64) + b
    out = np.zeros_like(a)
    r = ops.add(a, b, out=out)
    assert r is out
    close(out, ref, np.float32)
    r = ops.add(a, b, out=a)  # in place
    assert r is a
    close(a, ref, np.float32)


def test_strided_rows() -> None:
    # Rows with a unit inner stride, a row stride past the row length (a column slice).
    big = rng(8).standard_normal((6, 40)).astype(np.float32)
    x = big[:, 3:35]
    g = rng(9).standard_normal((6, 32)).astype(np.float32)
    out = np.full((6, 50), 7.0, np.float32)
    ops.silu_gate(x, g, out=out[:, :32])
    close(out[:, :32], silu(x.astype(np.float64)) * g, np.float32)
    assert np.all(out[:, 32:] == 7.0), "elements outside the rows were written"


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_rows(dtype: type) -> None:
    x = rng(10).standard_normal((7, 300)).astype(dtype)
    x64 = x.astype(np.float64)
    for op, ref in [("sum", x64.sum(-1)), ("max", x64.max(-1)), ("min", x64.min(-1)), ("mean", x64.mean(-1))]:
        got = ops.reduce_rows(op, x)
        assert got.dtype == np.float32 and got.shape == (7,)
        close(got, ref, np.float32, scale=10.0)
    idx = ops.argmax_rows(x)
    assert idx.dtype == np.int64
    assert np.array_equal(idx, x64.argmax(-1))


def test_reduce_rows_batched_and_enum() -> None:
    x = rng(11).standard_normal((2, 3, 50)).astype(np.float32)
    got = ops.reduce_rows(ops.Reduce.SUM, x)
    assert got.shape == (2, 3)
    close(got, x.astype(np.float64).sum(-1), np.float32, scale=10.0)


def test_reduce_all_is_deterministic() -> None:
    x = rng(12).standard_normal(5000).astype(np.float32)
    s1 = ops.reduce("sum", x)
    s2 = ops.reduce("sum", x)
    assert s1.shape == () and s1.dtype == np.float32
    assert s1.tobytes() == s2.tobytes()
    close(np.array([s1]), np.array([x.astype(np.float64).sum()]), np.float32, scale=100.0)
    assert float(ops.reduce("max", x)) == float(x.max())
    assert float(ops.reduce("min", x)) == float(x.min())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softmax(dtype: type) -> None:
    x = (rng(13).standard_normal((9, 130)) * 3).astype(dtype)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    close(ops.softmax(x), e / e.sum(-1, keepdims=True), dtype)
    ls = x64 - x64.max(-1, keepdims=True) - np.log(e.sum(-1, keepdims=True))
    close(ops.log_softmax(x), ls, dtype, scale=1.0)
    y = x.copy()
    ops.softmax(y, out=y)  # in place
    close(y, e / e.sum(-1, keepdims=True), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_norms(dtype: type) -> None:
    r = rng(14)
    x = r.standard_normal((5, 96)).astype(dtype)
    res = r.standard_normal((5, 96)).astype(dtype)
    w = r.standard_normal(96).astype(dtype)
    b = r.standard_normal(96).astype(dtype)
    x64, w64, b64 = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    rms = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w64
    close(ops.rms_norm(x, w, 1e-6), rms, dtype)
    mu = x64.mean(-1, keepdims=True)
    ln = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w64 + b64
    close(ops.layer_norm(x, w, b, 1e-5), ln, dtype)
    s, y = ops.add_rms_norm(x, res, w, 1e-6)
    s64 = (x64 + res).astype(dtype).astype(np.float64)  # the sum is rounded to the dtype, then normed
    close(s, s64, dtype)
    close(y, s64 / np.sqrt((s64**2).mean(-1, keepdims=True) + 1e-6) * w64, dtype)


def _rope_ref(x: np.ndarray, heads: int, hd: int, style: str, offset: int, theta: float = 10000.0) -> np.ndarray:
    t = x.shape[0]
    x64 = x.astype(np.float64).reshape(t, heads, hd)
    y = x64.copy()
    half = hd // 2
    for tok in range(t):
        pos = tok + offset
        for i in range(half):
            a = pos * theta ** (-2 * i / hd)
            c, s = np.cos(a), np.sin(a)
            if style == "neox":
                i0, i1 = i, i + half
            else:
                i0, i1 = 2 * i, 2 * i + 1
            x0, x1 = x64[tok, :, i0], x64[tok, :, i1]
            y[tok, :, i0] = x0 * c - x1 * s
            y[tok, :, i1] = x1 * c + x0 * s
    return y.reshape(t, heads * hd)


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_rope(style: str) -> None:
    heads, hd, tokens = 2, 16, 5
    x = rng(15).standard_normal((tokens, heads * hd)).astype(np.float32)
    y = ops.rope(x, heads=heads, head_dim=hd, style=style, position_offset=3)
    close(y, _rope_ref(x, heads, hd, style, 3), np.float32, scale=1.0)
    # Tables of positions x rotary_dim / 2 (computed in double here).
    pos = np.arange(16)[:, None]
    ang = pos * 10000.0 ** (-2 * np.arange(hd // 2)[None, :] / hd)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    y2 = ops.rope(x, heads=heads, head_dim=hd, style=style, position_offset=3, cos=cos, sin=sin)
    close(y2, _rope_ref(x, heads, hd, style, 3), np.float32, scale=1.0)


def test_matmul_auto_layouts_and_batches() -> None:
    r = rng(16)
    a = r.standard_normal((12, 20)).astype(np.float32)
    b = r.standard_normal((20, 9)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    close(ops.matmul_auto(a, b), ref, np.float32, scale=5.0)
    # A transposed view is column-major: no copy.
    at = np.ascontiguousarray(a.T)
    close(ops.matmul_auto(at.T, b), ref, np.float32, scale=5.0)
    # Batches, alpha and beta (beta reads out).
    ab = r.standard_normal((3, 12, 20)).astype(np.float32)
    bb = r.standard_normal((3, 20, 9)).astype(np.float32)
    c = r.standard_normal((3, 12, 9)).astype(np.float32)
    ref_b = 2.0 * np.matmul(ab.astype(np.float64), bb) + 0.5 * c
    out = c.copy()
    ops.matmul_auto(ab, bb, out=out, alpha=2.0, beta=0.5)
    close(out, ref_b, np.float32, scale=5.0)


def test_matmul_epilogue_and_variant() -> None:
    r = rng(17)
    a = r.standard_normal((8, 16)).astype(np.float32)
    b = r.standard_normal((16, 24)).astype(np.float32)
    bias = r.standard_normal(24).astype(np.float32)
    ref = gelu(a.astype(np.float64) @ b + bias)
    close(ops.matmul_auto(a, b, bias=bias, activation="gelu"), ref, np.float32, scale=5.0)
    v = next(n for n in ops.matmul_variants() if n.startswith("simt_"))
    close(ops.matmul(a, b, variant=v), a.astype(np.float64) @ b, np.float32, scale=5.0)


def test_matmul_f16_in_f32_out() -> None:
    r = rng(18)
    a = r.standard_normal((16, 32)).astype(np.float16)
    b = r.standard_normal((32, 16)).astype(np.float16)
    out = np.empty((16, 16), np.float32)
    ops.matmul_auto(a, b, out=out)
    close(out, a.astype(np.float64) @ b.astype(np.float64), np.float32, scale=5.0)


def test_empty_arrays_do_nothing() -> None:
    x = np.empty((0, 4), np.float32)
    assert ops.relu(x).shape == (0, 4)
    assert ops.softmax(x).shape == (0, 4)


def test_tolerances_are_tight_enough_to_fail() -> None:
    # The checks above would catch an op off by one ulp-scale error of f16 in f32 results.
    x = np.ones(4, np.float32)
    with pytest.raises(AssertionError):
        close(x * (1 + 1e-3), np.ones(4), np.float32)
    assert TOL[np.float32] < 1e-4
