"""kaio.ops.attention and attention_decode against float64 references: numpy arrays in interpret
mode (KAIO_INTERPRET=1), torch CUDA tensors on a device ([gpu])."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pytest

import kaio
from support import rng

D = 64  # the smallest head dimension the kernels take


def ref_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: float = 0.0, causal: bool = False,
                  window: tuple[int, int] = (-1, -1), softcap: float = 0.0, alibi: Optional[np.ndarray] = None,
                  lengths: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """o and lse in float64; q (B, Sq, Hq, D), k, v (B, Sk, Hkv, D). lengths: each sequence's
    number of valid keys (decode: the new tokens are its last Sq positions)."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    B, Sq, Hq, Dh = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    sc = scale or 1 / math.sqrt(Dh)
    o = np.zeros_like(q)
    lse = np.full((B, Hq, Sq), -np.inf)
    for b in range(B):
        n = Sk if lengths is None else int(lengths[b])
        for h in range(Hq):
            kh = k[b, :n, h // (Hq // Hkv)]
            vh = v[b, :n, h // (Hq // Hkv)]
            s = sc * q[b, :, h] @ kh.T
            if softcap:
                s = softcap * np.tanh(s / softcap)
            i = np.arange(Sq)[:, None] + n - Sq  # each query's key position
            j = np.arange(n)[None, :]
            if alibi is not None:
                s = s - alibi[h] * np.abs(i - j)
            left, right = window
            right = 0 if causal else right
            ok = np.ones_like(s, bool)
            if left >= 0:
                ok &= j >= i - left
            if right >= 0:
                ok &= j <= i + right
            s = np.where(ok, s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            seen = np.isfinite(m[:, 0])
            p = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
            den = p.sum(axis=1, keepdims=True)
            o[b, :, h] = np.where(seen[:, None], (p / np.where(den > 0, den, 1)) @ vh, 0.0)
            lse[b, h] = np.where(seen, m[:, 0] + np.log(np.where(den[:, 0] > 0, den[:, 0], 1)), -np.inf)
    return o, lse


def ref_attention_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, dout: np.ndarray, *, scale: float = 0.0,
                           causal: bool = False, window: tuple[int, int] = (-1, -1),
                           alibi: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk, dv in float64 from the float64 forward's weights P: dv = P^T do, dP = do v^T,
    dS = P (dP - rowsum(do o)), dq = scale dS k, dk = scale dS^T q (dk, dv summed over a KV
    head's query heads)."""
    q, k, v, do = (np.asarray(t, np.float64) for t in (q, k, v, dout))
    B, Sq, Hq, Dh = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    group, sc = Hq // Hkv, scale or 1 / math.sqrt(Dh)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(B):
        for h in range(Hq):
            kh, vh = k[b, :, h // group], v[b, :, h // group]
            s = sc * q[b, :, h] @ kh.T
            i, j = np.arange(Sq)[:, None] + Sk - Sq, np.arange(Sk)[None, :]
            if alibi is not None:
                s = s - alibi[h] * np.abs(i - j)
            left, right = window[0], 0 if causal else window[1]
            ok = np.ones_like(s, bool)
            if left >= 0:
                ok &= j >= i - left
            if right >= 0:
                ok &= j <= i + right
            m = np.where(ok, s, -np.inf).max(axis=1, keepdims=True)
            p = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
            p /= np.where(p.sum(axis=1, keepdims=True) > 0, p.sum(axis=1, keepdims=True), 1)
            o, g = p @ vh, do[b, :, h]
            ds = p * (g @ vh.T - (g * o).sum(axis=1, keepdims=True))
            dq[b, :, h] = sc * ds @ kh
            dk[b, :, h // group] += sc * ds.T @ q[b, :, h]
            dv[b, :, h // group] += p.T @ g
    return dq, dk, dv


def close(got: Any, ref: np.ndarray, tol: float) -> None:
    g = np.asarray(got, np.float64)
    assert g.shape == ref.shape
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(g), fin), "infinities differ"
    err = np.max(np.abs(g[fin] - ref[fin])) if fin.any() else 0.0
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}"


def rand(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


@pytest.mark.interpret
def test_attention_causal_gqa_lse() -> None:
    q, k, v = rand(2, 5, 4, D, seed=1), rand(2, 7, 2, D, seed=2), rand(2, 7, 2, D, seed=3)
    o, lse = kaio.ops.attention(q, k, v, causal=True, return_lse=True)
    ro, rl = ref_attention(q, k, v, causal=True)
    close(o, ro, 2e-5)
    close(lse, rl, 2e-5)


@pytest.mark.interpret
def test_attention_modifiers_and_a_bhsd_view() -> None:
    # (B, H, S, D) storage passed as its (B, S, H, D) view; window, softcap and ALiBi; out= given.
    qh, kh, vh = rand(1, 2, 4, D, seed=4), rand(1, 2, 9, D, seed=5), rand(1, 2, 9, D, seed=6)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (qh, kh, vh))
    slopes = np.array([0.5, 0.25], np.float32)
    out = np.full(q.shape, np.nan, np.float32)
    r = kaio.ops.attention(q, k, v, out, window=(3, 1), softcap=5.0, alibi_slopes=slopes, scale=0.2)
    assert r is out
    ro, _ = ref_attention(q, k, v, window=(3, 1), softcap=5.0, alibi=slopes, scale=0.2)
    close(out, ro, 2e-5)


@pytest.mark.interpret
def test_attention_tuned_kernel() -> None:
    # kernel="tuned": the tile shape the tuner chose for the bucket (timed on this first call,
    # stored in the cache); a second call of the bucket reads it.
    q, k, v = (rand(1, 33, 2, D, seed=s, dtype=np.float16) for s in (13, 14, 15))
    ref = ref_attention(q, k, v, causal=True)[0]
    for _ in range(2):
        close(kaio.ops.attention(q, k, v, causal=True, kernel="tuned"), ref, 4e-3)


@pytest.mark.interpret
def test_attention_f16_and_varlen() -> None:
    q, k, v = rand(1, 3, 2, D, seed=7, dtype=np.float16), rand(1, 6, 2, D, seed=8, dtype=np.float16), rand(
        1, 6, 2, D, seed=9, dtype=np.float16)
    close(kaio.ops.attention(q, k, v, causal=True), ref_attention(q, k, v, causal=True)[0], 4e-3)
    # Two sequences packed along the token axis: lengths (2, 3) of q and (4, 2) of k.
    qs, ks, vs = rand(5, 2, D, seed=10), rand(6, 1, D, seed=11), rand(6, 1, D, seed=12)
    cq, ck = np.array([0, 2, 5], np.int32), np.array([0, 4, 6], np.int32)
    o, lse = kaio.ops.attention(qs, ks, vs, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=3,
                                max_seqlen_k=4, return_lse=True)
    assert lse.shape == (2, 5)
    for b in range(2):
        sl, kl = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        ro, rl = ref_attention(qs[None, sl], ks[None, kl], vs[None, kl], causal=True)
        close(o[sl], ro[0], 2e-5)
        close(lse[:, sl], rl[0], 2e-5)


@pytest.mark.interpret
def test_attention_backward_causal_gqa_window_alibi() -> None:
    q, k, v, do = rand(2, 5, 4, D, seed=31), rand(2, 7, 2, D, seed=32), rand(2, 7, 2, D, seed=33), rand(2, 5, 4, D, seed=34)
    o, lse = kaio.ops.attention(q, k, v, causal=True, return_lse=True)
    got = kaio.ops.attention_backward(q, k, v, o, do, lse, causal=True)
    for g, r in zip(got, ref_attention_backward(q, k, v, do, causal=True)):
        close(g, r, 1e-4)
    # A window and ALiBi, the gradients into given arrays (poisoned first), twice bit for bit.
    slopes = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    o, lse = kaio.ops.attention(q, k, v, window=(3, 1), alibi_slopes=slopes, scale=0.2, return_lse=True)
    ref = ref_attention_backward(q, k, v, do, window=(3, 1), alibi=slopes, scale=0.2)
    runs = []
    for _ in range(2):
        given = [np.full_like(t, np.nan) for t in (q, k, v)]
        got = kaio.ops.attention_backward(q, k, v, o, do, lse, *given, window=(3, 1), alibi_slopes=slopes, scale=0.2)
        assert all(a is b for a, b in zip(got, given))
        for g, r in zip(got, ref):
            close(g, r, 1e-4)
        runs.append(got)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


@pytest.mark.interpret
def test_attention_backward_varlen_and_errors() -> None:
    qs, ks, vs, dos = rand(5, 2, D, seed=35), rand(6, 1, D, seed=36), rand(6, 1, D, seed=37), rand(5, 2, D, seed=38)
    cq, ck = np.array([0, 2, 5], np.int32), np.array([0, 4, 6], np.int32)
    kw = dict(causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=3, max_seqlen_k=4)
    o, lse = kaio.ops.attention(qs, ks, vs, return_lse=True, **kw)
    dq, dk, dv = kaio.ops.attention_backward(qs, ks, vs, o, dos, lse, **kw)
    for b in range(2):
        sl, kl = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        rq, rk, rv = ref_attention_backward(qs[None, sl], ks[None, kl], vs[None, kl], dos[None, sl], causal=True)
        close(dq[sl], rq[0], 1e-4)
        close(dk[kl], rk[0], 1e-4)
        close(dv[kl], rv[0], 1e-4)
    q = rand(1, 3, 2, D, seed=39)
    o, lse = kaio.ops.attention(q, q, q, return_lse=True)
    with pytest.raises(kaio.UsageError, match=r"argument 'lse'") as e:
        kaio.ops.attention_backward(q, q, q, o, q, lse[:, :, :2])
    assert e.value.op == "attention_backward"
    with pytest.raises(kaio.UsageError, match=r"argument 'dout'"):
        kaio.ops.attention_backward(q, q, q, o, rand(1, 2, 2, D), lse)
    with pytest.raises(kaio.UsageError, match=r"argument 'kernel'"):
        kaio.ops.attention_backward(q, q, q, o, q, lse, kernel="fastest")


@pytest.mark.interpret
def test_attention_backward_tuned_kernel() -> None:
    # kernel="tuned": the tile shapes the tuner chose for the bucket (timed on this first call,
    # stored in the cache); a second call of the bucket reads it. f16 runs on tensor cores.
    q, k, v, do = (rand(1, 17, 2, D, seed=s, dtype=np.float16) for s in (41, 42, 43, 44))
    o, lse = kaio.ops.attention(q, k, v, causal=True, return_lse=True)
    ref = ref_attention_backward(q, k, v, do, causal=True)
    for _ in range(2):
        for g, r in zip(kaio.ops.attention_backward(q, k, v, o, do, lse, causal=True, kernel="tuned"), ref):
            close(g, r, 2e-2)


def _paged(kc: np.ndarray, page: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A contiguous cache (B, cap, H, D) as a pool of shuffled pages and its block table."""
    B, cap, H, Dh = kc.shape
    per = cap // page
    order = rng(seed).permutation(B * per)
    pool = np.zeros((B * per + 1, page, H, Dh), kc.dtype)  # one page more than used
    table = np.zeros((B, per), np.int32)
    for b in range(B):
        for p in range(per):
            table[b, p] = order[b * per + p]
            pool[order[b * per + p]] = kc[b, p * page:(p + 1) * page]
    return pool, table


@pytest.mark.interpret
@pytest.mark.parametrize("paged", [False, True])
def test_attention_decode_contiguous_and_paged(paged: bool) -> None:
    B, cap, Sq = 2, 32, 2
    q = rand(B, Sq, 4, D, seed=13)
    kc, vc = rand(B, cap, 2, D, seed=14), rand(B, cap, 2, D, seed=15)
    lens = np.array([5, 29], np.int32)
    ro, rl = ref_attention(q, kc, vc, causal=True, lengths=lens)
    if paged:
        kp, table = _paged(kc, 16, 1)
        vp, _ = _paged(vc, 16, 1)
        o, lse = kaio.ops.attention_decode(q, kp, vp, lens, block_table=table, return_lse=True, splits=2)
    else:
        o, lse = kaio.ops.attention_decode(q, kc, vc, lens, return_lse=True, max_seqlen_k=29)
    close(o, ro, 2e-5)
    close(lse, rl, 2e-5)


@pytest.mark.interpret
def test_attention_errors_name_op_and_argument() -> None:
    q = rand(1, 2, 2, 48)
    with pytest.raises(kaio.UsageError, match=r"attention.*head_dim"):
        kaio.ops.attention(q, q, q)
    q, k = rand(1, 2, 2, D), rand(2, 3, 2, D)
    with pytest.raises(kaio.UsageError, match=r"argument 'k'") as e:
        kaio.ops.attention(q, k, k)
    assert e.value.op == "attention"
    with pytest.raises(kaio.UsageError, match=r"argument 'v'"):
        kaio.ops.attention(q, q, rand(1, 3, 2, D))
    with pytest.raises(kaio.UsageError, match=r"argument 'seqlens'"):
        kaio.ops.attention_decode(q, q, q, np.array([2, 2], np.int32))
    with pytest.raises(kaio.UsageError, match=r"argument 'kernel'"):
        kaio.ops.attention(q, q, q, kernel="fast")


# ---- on a device: torch CUDA tensors ----


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_matches_float64_on_device(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(2, s, h, 128, generator=g).to(dt).cuda() for s, h in ((77, 8), (130, 2), (130, 2)))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # a non-default stream: the call follows torch's current stream
        o, lse = kaio.ops.attention(q, k, v, causal=True, return_lse=True)
    s.synchronize()
    ro, rl = ref_attention(q.float().cpu().numpy(), k.float().cpu().numpy(), v.float().cpu().numpy(), causal=True)
    close(o.float().cpu().numpy(), ro, 2e-2 if dtype == "bfloat16" else 4e-3)
    close(lse.cpu().numpy(), rl, 1e-3)
    # Decode, paged, against the contiguous reference.
    kc, vc = (torch.randn(2, 144, 2, 128, generator=g).to(dt) for _ in range(2))
    lens = torch.tensor([130, 17], dtype=torch.int32).cuda()
    kp, table = _paged(kc.float().numpy(), 16, 3)
    vp, _ = _paged(vc.float().numpy(), 16, 3)
    qd = q[:, :3]
    od = kaio.ops.attention_decode(qd, torch.from_numpy(kp).to(dt).cuda(), torch.from_numpy(vp).to(dt).cuda(), lens,
                                   block_table=torch.from_numpy(table).cuda())
    rd, _ = ref_attention(qd.float().cpu().numpy(), kc.float().numpy(), vc.float().numpy(), causal=True,
                          lengths=lens.cpu().numpy())
    close(od.float().cpu().numpy(), rd, 2e-2 if dtype == "bfloat16" else 4e-3)
