"""kaio.ops.attention, attention_backward and attention_decode (kaio::ops::attention,
attention_backward, attention_decode)."""

from __future__ import annotations

import ctypes
from typing import Any, Optional

from . import _lib
from ._plans import call_fast as _call_fast
from ._plans import miss as _miss
from .errors import UsageError

Array = Any

_KERNELS = {"auto": 0, "rows": 1, "mma": 2, "wgmma": 3, "tuned": 4}


def _lse_shape(varlen: bool) -> Any:
    # (batch, heads_q, seq_q) from q (batch, seq_q, heads_q, head_dim); varlen: (heads_q, tokens).
    if varlen:
        return lambda ts: (ts[0].shape[1], ts[0].shape[0])
    return lambda ts: (ts[0].shape[0], ts[0].shape[2], ts[0].shape[1])


def _f32(ts: list) -> str:
    return "float32"


def _like_q(ts: list) -> Any:
    return ts[0].shape


def _dtype_q(ts: list) -> str:
    return ts[0].dtype


def _options(head: tuple, varlen: bool, alibi: bool, mq: int, mk: int, ts: list, i: int) -> tuple:
    """The C options of a plan: scale, causal, window, softcap and kernel from `head`, then the
    optional arrays after the fixed ones (from ts[i]: cu_seqlens_q and _k, alibi_slopes).
    Returns the options and the index of the next array."""
    scale, causal, wl, wr, softcap, kernel = head
    o = _lib.AttentionOptions(scale, int(causal), wl, wr, softcap, kernel, None, None, None, None, mq, mk)
    if varlen:
        o.cu_seqlens_q, o.cu_seqlens_k = ts[i].addr, ts[i + 1].addr
        i += 2
    if alibi:
        o.alibi_slopes = ts[i].addr
        i += 1
    return o, i


def _attention_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    varlen, alibi, lse, mq, mk = opts[6:]
    names = ["q", "k", "v", "out"] + (["cu_seqlens_q", "cu_seqlens_k"] if varlen else [])
    names += (["alibi_slopes"] if alibi else []) + (["lse"] if lse else [])

    def make(ts: list, ph: Any, h: int) -> int:
        o, i = _options(opts[:6], varlen, alibi, mq, mk, ts, 4)
        if lse:
            o.lse = ts[i].addr
        args = (ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, ctypes.byref(o))
        if ph is None:
            return _lib.lib.kaio_attention(*args, h)
        return _lib.lib.kaio_plan_attention(*args, ph)

    outs = {3: (0, arrays[3], _like_q, _dtype_q)}
    ret: Any = 3
    if lse:
        slot = len(arrays) - 1
        outs[slot] = (0, arrays[slot], _lse_shape(varlen), _f32)
        ret = (3, slot)
    return _miss(key, "attention", arrays, names, outs, make, values, stream, ret=ret)


def attention(q: Array, k: Array, v: Array, out: Optional[Array] = None, *, scale: float = 0.0, causal: bool = False,
              window: tuple[int, int] = (-1, -1), softcap: float = 0.0, alibi_slopes: Optional[Array] = None,
              return_lse: bool = False, lse: Optional[Array] = None, cu_seqlens_q: Optional[Array] = None,
              cu_seqlens_k: Optional[Array] = None, max_seqlen_q: int = 0, max_seqlen_k: int = 0,
              kernel: str = "auto", stream: Any = None) -> Any:
    """Scaled dot-product attention, o = softmax(mods(scale * q k^T)) v, per batch entry and
    query head (kaio::ops::attention).

    q (batch, seq_q, heads_q, head_dim), k and v (batch, seq_k, heads_kv, head_dim), out like q:
    any strides with the head dimension contiguous, so (B, H, S, D) arrays pass as their
    transposed view. f32, f16 or bf16; head_dim 64, 96, 128 or 256; heads_q a multiple of
    heads_kv (GQA, MQA). scale 0: 1/sqrt(head_dim). The modifiers, in order: softcap
    (s = softcap * tanh(s / softcap)), ALiBi (alibi_slopes: f32 [heads_q]), then the mask:
    causal and window = (left, right) (-1: unbounded), aligned to the bottom right when
    seq_q != seq_k. Varlen: cu_seqlens_q / cu_seqlens_k (int32 [batch + 1] prefix sums) pack
    the sequences along the first axis of q, k, v (tokens, heads, head_dim), with
    max_seqlen_q / max_seqlen_k the longest. kernel: "auto", "rows", "mma" (the
    mma.sync kernel), "wgmma" (the Hopper kernel; a UsageError says why one does not apply) or
    "tuned" (the tile shape the tuner chose for the bucket, timed on first use). Returns out, or (out, lse)
    with return_lse or lse= (f32 logsumexp [batch, heads_q, seq_q]; varlen [heads_q, tokens]).
    """
    if kernel not in _KERNELS:
        raise UsageError.make("attention", f"argument 'kernel': '{kernel}' is not auto, rows, mma, wgmma or tuned")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise UsageError.make("attention", "argument 'cu_seqlens_q'/'cu_seqlens_k': varlen needs both")
    want_lse = return_lse or lse is not None
    wl, wr = window
    opts = (float(scale), bool(causal), int(wl), int(wr), float(softcap), _KERNELS[kernel], varlen,
            alibi_slopes is not None, want_lse, int(max_seqlen_q), int(max_seqlen_k))
    arrays = [q, k, v, out]
    if varlen:
        arrays += [cu_seqlens_q, cu_seqlens_k]
    if alibi_slopes is not None:
        arrays.append(alibi_slopes)
    if want_lse:
        arrays.append(lse)
    return _call_fast(("attention", *opts), arrays, 3, (), stream, _attention_miss, opts)


def _backward_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    varlen, alibi, mq, mk = opts[6:]
    names = ["q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv"]
    names += (["cu_seqlens_q", "cu_seqlens_k"] if varlen else []) + (["alibi_slopes"] if alibi else [])

    def make(ts: list, ph: Any, h: int) -> int:
        o, _ = _options(opts[:6], varlen, alibi, mq, mk, ts, 9)
        args = (*(t.addr for t in ts[:9]), ctypes.byref(o))
        if ph is None:
            return _lib.lib.kaio_attention_backward(*args, h)
        return _lib.lib.kaio_plan_attention_backward(*args, ph)

    def like(slot: int) -> Any:
        return lambda ts: ts[slot].shape

    # dq, dk, dv made like q, k, v (contiguous, q's dtype) where not given.
    outs = {6 + i: (i, arrays[6 + i], like(i), _dtype_q) for i in range(3)}
    return _miss(key, "attention_backward", arrays, names, outs, make, values, stream, ret=(6, 7, 8))


def attention_backward(q: Array, k: Array, v: Array, out: Array, dout: Array, lse: Array, dq: Optional[Array] = None,
                       dk: Optional[Array] = None, dv: Optional[Array] = None, *, scale: float = 0.0,
                       causal: bool = False, window: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                       alibi_slopes: Optional[Array] = None, cu_seqlens_q: Optional[Array] = None,
                       cu_seqlens_k: Optional[Array] = None, max_seqlen_q: int = 0, max_seqlen_k: int = 0,
                       kernel: str = "auto", stream: Any = None) -> tuple:
    """The gradients of attention (kaio::ops::attention_backward): dq, dk, dv from q, k, v,
    the forward's out and lse (attention(..., return_lse=True)) and dout, the gradient of out.

    The arrays and options mean what they mean for attention (the same scale, masks, softcap,
    ALiBi and varlen as the forward that made out and lse); dq, dk, dv are shaped like q, k, v in
    q's dtype, made where not given. dk and dv of a KV head sum over the query heads that read
    it (GQA, MQA). Deterministic: the same gradients bit for bit run to run. kernel: "auto",
    "rows", "mma", "wgmma" (the Hopper kernels; a UsageError says why they do not apply) or
    "tuned" (the tile shapes the tuner chose for the bucket, timed on first use). Returns
    (dq, dk, dv).
    """
    if kernel not in _KERNELS:
        raise UsageError.make("attention_backward", f"argument 'kernel': '{kernel}' is not auto, rows, mma, wgmma or tuned")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise UsageError.make("attention_backward", "argument 'cu_seqlens_q'/'cu_seqlens_k': varlen needs both")
    wl, wr = window
    opts = (float(scale), bool(causal), int(wl), int(wr), float(softcap), _KERNELS[kernel], varlen,
            alibi_slopes is not None, int(max_seqlen_q), int(max_seqlen_k))
    arrays = [q, k, v, out, dout, lse, dq, dk, dv]
    if varlen:
        arrays += [cu_seqlens_q, cu_seqlens_k]
    if alibi_slopes is not None:
        arrays.append(alibi_slopes)
    return _call_fast(("attention_backward", *opts), arrays, -1, (), stream, _backward_miss, opts)


def _decode_miss(key: Any, arrays: list, values: tuple, stream: Any, opts: tuple) -> Any:
    scale, causal, wl, softcap, splits, validate, mk, paged, alibi, lse = opts
    names = ["q", "k_cache", "v_cache", "seqlens", "out"] + (["block_table"] if paged else [])
    names += (["alibi_slopes"] if alibi else []) + (["lse"] if lse else [])

    def make(ts: list, ph: Any, h: int) -> int:
        o = _lib.DecodeOptions(scale, int(causal), wl, softcap, splits, int(validate), mk, None, None, None)
        i = 5
        if paged:
            o.block_table = ts[5].addr
            i = 6
        if alibi:
            o.alibi_slopes = ts[i].addr
            i += 1
        if lse:
            o.lse = ts[i].addr
        args = (ts[0].addr, ts[1].addr, ts[2].addr, ts[3].addr, ts[4].addr, ctypes.byref(o))
        if ph is None:
            return _lib.lib.kaio_attention_decode(*args, h)
        return _lib.lib.kaio_plan_attention_decode(*args, ph)

    outs = {4: (0, arrays[4], _like_q, _dtype_q)}
    ret: Any = 4
    if lse:
        slot = len(arrays) - 1
        outs[slot] = (0, arrays[slot], _lse_shape(False), _f32)
        ret = (4, slot)
    return _miss(key, "attention_decode", arrays, names, outs, make, values, stream, ret=ret)


def attention_decode(q: Array, k_cache: Array, v_cache: Array, seqlens: Array, out: Optional[Array] = None, *,
                     block_table: Optional[Array] = None, scale: float = 0.0, causal: bool = True,
                     window_left: int = -1, softcap: float = 0.0, alibi_slopes: Optional[Array] = None,
                     return_lse: bool = False, lse: Optional[Array] = None, splits: int = 0, max_seqlen_k: int = 0,
                     validate: bool = False, stream: Any = None) -> Any:
    """Decoding against a KV cache (kaio::ops::attention_decode): q (batch, 1..16 new tokens,
    heads_q, head_dim), seqlens int32 [batch] (each cache's length, the new tokens
    included, on the device). Contiguous cache: k_cache, v_cache (batch, capacity, heads_kv,
    head_dim). Paged: block_table int32 (batch, max_pages) into a pool k_cache, v_cache of
    (pages, page_size, heads_kv, head_dim), page_size a power of two in 16..256. The new
    tokens are the last seq_q positions of their sequence (causal: they see themselves and
    what precedes them). max_seqlen_k: a bound on the longest cache (0: the cache's
    capacity; a tighter one splits the keys better). splits: 0 (by shape), 1 (no
    split-KV) or a count. validate: copy seqlens and block_table to the host and
    range-check them first (synchronous; for debugging). Returns out, or (out, lse)."""
    want_lse = return_lse or lse is not None
    opts = (float(scale), bool(causal), int(window_left), float(softcap), int(splits), bool(validate), int(max_seqlen_k),
            block_table is not None, alibi_slopes is not None, want_lse)
    arrays = [q, k_cache, v_cache, seqlens, out]
    if block_table is not None:
        arrays.append(block_table)
    if alibi_slopes is not None:
        arrays.append(alibi_slopes)
    if want_lse:
        arrays.append(lse)
    return _call_fast(("attention_decode", *opts), arrays, 4, (), stream, _decode_miss, opts)
