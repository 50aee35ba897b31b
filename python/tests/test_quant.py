"""kaio.ops' quantized matmuls (int8, int4, fused QKV, GGUF) and host helpers against float64 /
integer references: numpy arrays in interpret mode, torch CUDA tensors on a device ([gpu])."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kaio
from support import rng


def s8(*shape: int, seed: int = 0) -> np.ndarray:
    return rng(seed).integers(-127, 128, shape, dtype=np.int8)


def f32(*shape: int, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return rng(seed).uniform(lo, hi, shape).astype(np.float32)


def int_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ b.astype(np.int64).T


@pytest.mark.interpret
def test_matmul_int8_raw_is_exact_and_scaled_within_bound() -> None:
    a, b = s8(7, 80, seed=1), s8(24, 80, seed=2)
    c = kaio.ops.matmul_int8(a, b)
    assert c.dtype == np.int32 and np.array_equal(c, int_product(a, b))
    sa, sb, bias = f32(7, seed=3, lo=0.004, hi=0.016), f32(24, seed=4, lo=0.004, hi=0.016), f32(24, seed=5)
    prod = sa[:, None].astype(np.float64) * sb[None, :] * int_product(a, b)
    for dtype, unit in (("float32", 2.0**-24), ("float16", 2.0**-11)):
        out = kaio.ops.matmul_int8(a, b, scale_a=sa, scale_b=sb, bias=bias, out_dtype=dtype)
        assert out.dtype == np.dtype(dtype)
        ref = prod + bias
        tol = (unit + 4 * 2.0**-24) * (np.abs(prod) + np.abs(bias)) + 2.0**-24
        assert np.all(np.abs(out.astype(np.float64) - ref) <= tol)
    # One scale for the whole tensor, no bias, out= given.
    out = np.full((7, 24), np.nan, np.float32)
    assert kaio.ops.matmul_int8(a, b, out, scale_a=np.float32([0.5]), out_dtype="float32") is out
    assert np.allclose(out, 0.5 * int_product(a, b), rtol=2e-7, atol=0)


@pytest.mark.interpret
def test_matmul_int8_qkv_equals_three_calls() -> None:
    a, sa = s8(3, 32, seed=6), f32(3, seed=7, lo=0.004, hi=0.016)
    bs = [s8(n, 32, seed=8 + n) for n in (16, 8, 8)]
    sbs = [f32(n, seed=20 + n, lo=0.004, hi=0.016) for n in (16, 8, 8)]
    biases = [f32(n, seed=30 + n) for n in (16, 8, 8)]
    outs = kaio.ops.matmul_int8_qkv(a, bs, scale_a=sa, scale_b=sbs, bias=biases)
    for o, b, sb, bias in zip(outs, bs, sbs, biases):
        one = kaio.ops.matmul_int8(a, b, scale_a=sa, scale_b=sb, bias=bias)
        assert o.dtype == np.float16 and np.array_equal(o.view(np.uint16), one.view(np.uint16))


@pytest.mark.interpret
def test_int4_helpers_round_trip() -> None:
    v = rng(9).integers(0, 16, (16, 8), dtype=np.uint8)
    q = kaio.ops.pack_int4(v)
    assert q.shape == (2, 8) and q.dtype == np.uint32
    # Scale 1, zero 0: dequantisation gives the values back.
    w = kaio.ops.dequantize_int4(q, np.ones((1, 8), np.float16), np.zeros((1, 8), np.uint8))
    assert np.array_equal(w, v.astype(np.float32))
    W = f32(64, 8, seed=10)
    q, s, z = kaio.ops.quantize_int4(W, group=32)
    assert q.shape == (8, 8) and s.shape == (2, 8) and s.dtype == np.float16 and z.shape == (2, 8)
    deq = kaio.ops.dequantize_int4(q, s, z)
    step = np.repeat(s.astype(np.float64), 32, axis=0)
    assert np.all(np.abs(deq - W) <= step * 0.5 + 1e-3 * np.abs(W) + 1e-6)
    qi, si = kaio.ops.quantize_int8(np.array([[1.0, -2.0], [0.0, 0.0]]))
    assert np.array_equal(qi, [[64, -127], [0, 0]]) and np.allclose(si, [2 / 127, 1.0])


@pytest.mark.interpret
def test_matmul_int4_within_bound_of_float64() -> None:
    m, k, n = 3, 64, 16
    W = f32(k, n, seed=11)
    q, s, z = kaio.ops.quantize_int4(W, group=32, zero_points=True)
    # m <= 16 applies the scales to the f32 sums, so its products are exact: (v - zero) * scale
    # unrounded. The exact decode against one made here from the values v (scale 1, zero 0).
    deq = kaio.ops.dequantize_int4(q, s, z, round=False).astype(np.float64)
    v = kaio.ops.dequantize_int4(q, np.ones(s.shape, np.float16), np.zeros(z.shape, np.uint8)).astype(np.float64)
    assert np.array_equal(deq, (v - np.repeat(z.astype(np.float64), 32, axis=0)) * np.repeat(s.astype(np.float64), 32, axis=0))
    assert not np.array_equal(deq, kaio.ops.dequantize_int4(q, s, z))  # the rounded form differs somewhere
    x = f32(m, k, seed=12).astype(np.float16)
    bias = f32(n, seed=13).astype(np.float16)
    y = kaio.ops.matmul_int4(x, q, s, z, bias=bias)
    assert y.dtype == np.float16 and y.shape == (m, n)
    terms = np.abs(x.astype(np.float64)) @ np.abs(deq)
    ref = x.astype(np.float64) @ deq + bias
    tol = 2.0**-11 * np.abs(ref) + k * 2.0**-24 * terms + 2.0**-24
    assert np.all(np.abs(y.astype(np.float64) - ref) <= tol + 2.0**-11 * np.abs(bias))
    # Symmetric weights as int32 words (a GPTQ checkpoint's type), and the fused QKV form.
    q2, s2, _ = kaio.ops.quantize_int4(W, group=64, zero_points=False)
    y2 = kaio.ops.matmul_int4(x, q2.view(np.int32), s2)
    ref2 = x.astype(np.float64) @ kaio.ops.dequantize_int4(q2, s2, round=False).astype(np.float64)
    assert np.all(np.abs(y2.astype(np.float64) - ref2) <= 2.0**-11 * np.abs(ref2) + k * 2.0**-24 * terms + 2.0**-24)
    outs = kaio.ops.matmul_int4_qkv(x, [q, q, q], [s, s, s], [z, z, z])
    assert all(np.array_equal(o.view(np.uint16), kaio.ops.matmul_int4(x, q, s, z).view(np.uint16)) for o in outs)


def q8_0(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GGUF q8_0 rows of W (n, k): per 32 elements an f16 scale d and 32 int8 values; also the
    dequantised W."""
    n, k = W.shape
    blk = W.reshape(n, k // 32, 32).astype(np.float64)
    d = (np.abs(blk).max(axis=2) / 127).astype(np.float16)
    dd = np.where(d == 0, 1, d.astype(np.float64))
    qs = np.clip(np.rint(blk / dd[..., None]), -127, 127).astype(np.int8)
    rec = np.zeros((n, k // 32), np.dtype([("d", "<f2"), ("qs", "i1", 32)]))
    rec["d"], rec["qs"] = d, qs
    return rec.view(np.uint8).reshape(n, -1), (d.astype(np.float64)[..., None] * qs).reshape(n, k)


def activation_rounding_bound(x: np.ndarray, deq: np.ndarray) -> np.ndarray:
    """quant_matmul rounds x (m, k) to q8 per 32 elements before the dot products: half a
    step (max |block| / 127) per element, times the |weights| of that block, summed."""
    m, k = x.shape
    n = deq.shape[0]
    dx = np.abs(x.astype(np.float64).reshape(m, k // 32, 32)).max(axis=2) / 127
    return np.einsum("mb,nb->mn", dx / 2, np.abs(deq).reshape(n, k // 32, 32).sum(axis=2))


def q8_0_exact(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What quant_matmul computes from x (m, k) f32 and q8_0 rows w, in float64: x quantised
    as the op does (per 32 values s = max |x| / 127 and q = rint(x * (127 / max |x|)), in
    f32), the integer dot products of each block exact, times both scales. Also the sum of
    |terms|."""
    m, k = x.shape
    blocks = w.reshape(w.shape[0], -1).view(np.dtype([("d", "<f2"), ("qs", "i1", 32)]))  # (n, k / 32)
    xb = x.astype(np.float32).reshape(m, k // 32, 32)
    amax = np.abs(xb).max(axis=2).astype(np.float32)
    s = (amax / np.float32(127)).astype(np.float32)
    inv = (np.float32(127) / np.where(amax > 0, amax, np.float32(1))).astype(np.float32)
    q = np.where(s[..., None] > 0, np.clip(np.rint((xb * inv[..., None]).astype(np.float32)), -127, 127), 0)
    dots = np.einsum("mbi,nbi->mnb", q.astype(np.int64), blocks["qs"].astype(np.int64))  # exact integers
    terms = dots * s.astype(np.float64)[:, None, :] * blocks["d"].astype(np.float64)[None, :, :]
    return terms.sum(axis=2), np.abs(terms).sum(axis=2)


@pytest.mark.interpret
@pytest.mark.parametrize("out_dtype", [None, "float16"])
def test_quant_matmul_q8_0_within_the_activation_rounding(out_dtype: Any) -> None:
    m, k, n = 2, 64, 8
    w, deq = q8_0(f32(n, k, seed=14))
    x = f32(m, k, seed=15)
    y = kaio.ops.quant_matmul(x, w, "q8_0", out_dtype=out_dtype)
    assert y.shape == (m, n) and y.dtype == np.dtype(out_dtype or "float32")
    ref = x.astype(np.float64) @ deq.T
    bound = activation_rounding_bound(x, deq)
    unit = 2.0**-11 if out_dtype == "float16" else 2.0**-22
    assert np.all(np.abs(y.astype(np.float64) - ref) <= bound * 1.01 + unit * np.abs(ref) + 1e-6)
    # Against the kernel's own formula (x quantised as the pre-pass does): f32 rounding only.
    exact, mag = q8_0_exact(x, w)
    unit = 2.0**-11 if out_dtype == "float16" else 0.0
    assert np.all(np.abs(y.astype(np.float64) - exact) <= unit * np.abs(exact) + (k // 32 + 32) * 2.0**-24 * mag + 1e-30)
    ws = np.empty(kaio.ops.quant_matmul_workspace(m, k), np.uint8)
    y2 = kaio.ops.quant_matmul(x, w, 8, workspace=ws, out_dtype=out_dtype)
    assert np.array_equal(y, y2)


@pytest.mark.interpret
def test_quant_errors_name_op_and_argument() -> None:
    a = s8(4, 32)
    with pytest.raises(kaio.UsageError, match=r"argument 'b'") as e:
        kaio.ops.matmul_int8(a, s8(4, 48))
    assert e.value.op == "matmul_int8"
    with pytest.raises(kaio.UsageError, match=r"argument 'scale_b'"):
        kaio.ops.matmul_int8(a, a, scale_b=f32(3))
    with pytest.raises(kaio.UsageError, match=r"argument 'a'"):
        kaio.ops.matmul_int8(a.astype(np.float32), a)
    x = f32(2, 64).astype(np.float16)
    q, s, _ = kaio.ops.quantize_int4(f32(64, 8), group=32, zero_points=False)
    with pytest.raises(kaio.UsageError, match=r"argument 'scales'") as e:
        kaio.ops.matmul_int4(x, q, s.astype(np.float32))
    assert e.value.op == "matmul_int4"
    with pytest.raises(kaio.UsageError, match=r"argument 'format'"):
        kaio.ops.quant_matmul(f32(1, 32), np.zeros((1, 34), np.uint8), "q2_K")
    with pytest.raises(kaio.UsageError, match=r"quant_matmul.*argument 'format'"):
        kaio.ops.quant_matmul(f32(1, 32), np.zeros((1, 34), np.uint8), 2)
    with pytest.raises(kaio.UsageError, match=r"argument 'w'"):
        kaio.ops.quant_matmul(f32(1, 32), np.zeros((1, 30), np.uint8), "q8_0")
    with pytest.raises(kaio.UsageError, match=r"quantize_int4.*argument 'w'"):
        kaio.ops.quantize_int4(f32(60, 8), group=32)


# ---- on a device: torch CUDA tensors ----


@pytest.mark.gpu
def test_quantized_matmuls_on_device() -> None:
    torch = pytest.importorskip("torch")
    a, b = torch.from_numpy(s8(33, 4096, seed=16)).cuda(), torch.from_numpy(s8(4096, 4096, seed=17)).cuda()
    assert torch.equal(kaio.ops.matmul_int8(a, b), torch._int_mm(a, b.t()))
    W = f32(4096, 1024, seed=18)
    q, s, z = kaio.ops.quantize_int4(W, group=128)
    # m <= 16 applies the scales to float32 sums of exact products: the unrounded weights
    # (round=True, each weight rounded to float16 first, is off by up to 0.03 at this k).
    deq = torch.from_numpy(kaio.ops.dequantize_int4(q, s, z, round=False)).cuda()
    x = torch.from_numpy(f32(5, 4096, seed=19)).half().cuda()
    y = kaio.ops.matmul_int4(x, torch.from_numpy(q.view(np.int32)).cuda(), torch.from_numpy(s).cuda(),
                             torch.from_numpy(z).cuda())
    ref = x.double() @ deq.double()
    # the float16 output's rounding (2**-11 relative) and float32 sums
    torch.testing.assert_close(y.double(), ref, rtol=5e-4, atol=1e-3)
    w, wdeq = q8_0(f32(512, 4096, seed=20))
    xg = torch.from_numpy(f32(1, 4096, seed=21)).cuda()
    yg = kaio.ops.quant_matmul(xg, torch.from_numpy(w).cuda(), "q8_0")
    # x is rounded to q8 before the dot products (0.24 away from the float64 product of the
    # unrounded x at this k): against the kernel's own formula, only f32 rounding remains.
    exact, mag = q8_0_exact(xg.cpu().numpy(), w)
    assert np.all(np.abs(yg.double().cpu().numpy() - exact) <= (4096 // 32 + 32) * 2.0**-24 * mag + 1e-30)
