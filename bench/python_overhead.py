#!/usr/bin/env python3
"""Microseconds per call of kaio.ops.add / softmax / matmul_auto on small torch CUDA tensors,
beside torch's own op, kaio's C++ call (bench/python_overhead_cpp, the same shapes) and a
Triton kernel of the same body where Triton is importable.

Each figure is the wall time of N back-to-back calls on torch's current stream plus one
synchronize, over N (best of 5 rounds, every column once per round): at these sizes every call is bound by its host cost, so the table
shows what each binding adds per call. "kaio.ops" is the steady state (a cached plan: one
foreign call); "general" is the path every call took before plans were cached (DLPack or
torch's fields, the checks, a plan made, launched and freed), with the cache turned off.

--host measures the host path alone, without a device: KAIO_INTERPRET=dry runs everything
up to each kernel's run (reading the arrays, the checks, the kernel's lookup, argument
packing and launch checks) on CPU tensors (torch's when torch is importable, else numpy's).

--parts times the pieces of one cached call on the host (KAIO_INTERPRET=dry): the arrays'
metadata reads, the plan lookup, the argument packing, the foreign call with its arguments
packed beforehand, the output allocation, the stream read, and kaio's C++ call in the same
dry mode (the floor). With torch it reads torch tensors (CPU, or CUDA when a device is
there and KAIO_INTERPRET is unset); without torch, stand-ins with torch's reading
interface (plain Python attributes, cheaper than torch's) wrapping numpy arrays, so that
the machinery of the call shows rather than numpy's __array_interface__.

    python bench/python_overhead.py [--cpp build/bench/python_overhead_cpp] [-n 2000]
    python bench/python_overhead.py --host [-n 20000]
    python bench/python_overhead.py --parts [--cpp build/bench/python_overhead_cpp] [-n 20000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import timeit
from typing import Any, Callable, Optional

ELEMS, ROWS, COLS, MM = 4096, 8, 128, 64


def us_per_call(fn: Callable[[], Any], n: int, repeat: int = 5) -> float:
    """Best of `repeat` rounds of n calls (the least disturbed round; the C++ side does the same)."""
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def triton_ops() -> Optional[dict[str, Callable[..., Any]]]:
    import torch

    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(c + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m), mask=m)

    @triton.jit
    def softmax_kernel(x, y, cols, BLOCK: tl.constexpr):
        r = tl.program_id(0)
        j = tl.arange(0, BLOCK)
        m = j < cols
        v = tl.load(x + r * cols + j, mask=m, other=-float("inf"))
        e = tl.exp(v - tl.max(v, 0))
        tl.store(y + r * cols + j, e / tl.sum(e, 0), mask=m)

    @triton.jit
    def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
            w = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, w, input_precision="ieee")
        tl.store(c + rm[:, None] * N + rn[None, :], acc)

    def add(a: Any, b: Any) -> Any:
        c = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)
        return c

    def softmax(x: Any) -> Any:
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y

    def mm(a: Any, b: Any) -> Any:
        c = torch.empty(a.shape[0], b.shape[1], device=a.device)
        mm_kernel[(a.shape[0] // 32, b.shape[1] // 32)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BM=32, BN=32, BK=32)
        return c

    return {"add": add, "softmax": softmax, "matmul_auto": mm}


def cpp_times(path: Optional[str], n: int) -> dict[str, float]:
    if not path or not os.path.exists(path):
        return {}
    out = subprocess.run([path, str(n)], capture_output=True, text=True, check=True).stdout
    return {op: float(us) for op, us in (line.split() for line in out.splitlines() if line.strip())}


def general(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn with kaio's plan cache turned off for its calls."""
    from kaio import _plans

    def run() -> Any:
        _plans.ENABLED = False
        try:
            return fn()
        finally:
            _plans.ENABLED = True

    return run


def host_main(n: int) -> None:
    """us per call of the host path (KAIO_INTERPRET=dry: no kernel runs), best of 5."""
    if os.environ.get("KAIO_INTERPRET") != "dry":
        os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, KAIO_INTERPRET="dry"))
    try:
        import torch

        def arr(*shape: int) -> Any:
            return torch.randn(*shape)

        kind = f"torch {torch.__version__} CPU tensors"
    except ImportError:
        import numpy as np

        def arr(*shape: int) -> Any:
            return np.random.default_rng(0).standard_normal(shape).astype(np.float32)

        kind = "numpy arrays"
    import kaio

    a, b, x = arr(ELEMS), arr(ELEMS), arr(ROWS, COLS)
    ma, mb = arr(MM, MM), arr(MM, MM)
    out_add, out_sm, out_mm = arr(ELEMS), arr(ROWS, COLS), arr(MM, MM)
    has_plans = hasattr(kaio, "_plans") and hasattr(kaio._plans, "ENABLED")
    rows = {
        "add": (lambda: kaio.ops.add(a, b), lambda: kaio.ops.add(a, b, out=out_add)),
        "softmax": (lambda: kaio.ops.softmax(x), lambda: kaio.ops.softmax(x, out=out_sm)),
        "matmul_auto": (lambda: kaio.ops.matmul_auto(ma, mb), lambda: kaio.ops.matmul_auto(ma, mb, out=out_mm)),
    }
    cols = ["kaio.ops", "kaio.ops out=", "general", "general out="]
    print(f"host path, us per call (KAIO_INTERPRET=dry, {kind}, best of 5 x {n})")
    print(f"{'op':<12}" + "".join(f"{c:>16}" for c in cols))
    for op, (plain, with_out) in rows.items():
        fns = {"kaio.ops": plain, "kaio.ops out=": with_out}
        if has_plans:
            fns["general"], fns["general out="] = general(plain), general(with_out)
        t = {}
        for name, fn in fns.items():
            fn()
            t[name] = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
        print(f"{op:<12}" + "".join(f"{t[c]:>16.2f}" if c in t else f"{'-':>16}" for c in cols))


class StandIn:
    """A numpy array behind torch.Tensor's reading interface (dtype, shape, stride(), device,
    data_ptr()), registered with kaio's plan cache as a torch type: the cached call then
    reads it as it reads a torch tensor. Its methods are C-level callables (no Python frame),
    as torch's are."""

    __slots__ = ("arr", "dtype", "shape", "stride", "device", "data_ptr")

    def __init__(self, arr: Any) -> None:
        import functools

        self.arr = arr
        self.dtype = arr.dtype
        self.shape = arr.shape
        self.stride = functools.partial(tuple, [st // arr.itemsize for st in arr.strides])
        self.device = "cpu"
        self.data_ptr = functools.partial(int, arr.__array_interface__["data"][0])

    def __dlpack__(self, **kw: Any) -> Any:
        return self.arr.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self.arr.__dlpack_device__()


def best_us(fns: dict[str, Callable[[], Any]], n: int, repeat: int = 7) -> dict[str, float]:
    """us per call of each fn, best of `repeat` rounds that interleave the fns (a loaded
    host slows them alike)."""
    for f in fns.values():
        f()
    t = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t[k] = min(t[k], timeit.timeit(f, number=n) / n * 1e6)
    return t


def parts_main(n: int, cpp: Optional[str]) -> None:
    """The pieces of one cached call, host side."""
    device = os.environ.get("KAIO_INTERPRET") is None
    try:
        import torch

        device = device and torch.cuda.is_available()
    except ImportError:
        torch = None
        device = False
    if not device and os.environ.get("KAIO_INTERPRET") != "dry":
        os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, KAIO_INTERPRET="dry"))
    import struct

    import numpy as np

    import kaio
    from kaio import _plans

    if torch is not None:
        dev = "cuda" if device else "cpu"
        kind = f"torch {torch.__version__} {dev} tensors"

        def arr(*shape: int) -> Any:
            return torch.randn(*shape, device=dev)
    else:
        kind = "stand-ins with torch's interface over numpy arrays"
        _plans._seen_modules()
        _plans._torch_types = (StandIn,)

        def arr(*shape: int) -> Any:
            return StandIn(np.random.default_rng(0).standard_normal(shape).astype(np.float32))

    a, b, out = arr(ELEMS), arr(ELEMS), arr(ELEMS)
    x, y = arr(ROWS, COLS), arr(ROWS, COLS)
    ma, mb, mc = arr(MM, MM), arr(MM, MM), arr(MM, MM)
    kaio.ops.add(a, b, out=out)
    key = next(k for k in _plans._cache if k[0] == ("elementwise", "add"))
    plan = _plans._cache[key]
    ptrs = [out.data_ptr(), a.data_ptr(), b.data_ptr()]
    words = struct.pack("<7Q", plan.handle, 0, 3, 0, *ptrs)
    fns: dict[str, Callable[[], Any]] = {
        "add out= (whole call)": lambda: kaio.ops.add(a, b, out=out),
        "softmax out= (whole call)": lambda: kaio.ops.softmax(x, out=y),
        "matmul_auto out= (whole call)": lambda: kaio.ops.matmul_auto(ma, mb, out=mc),
        "read 3 arrays' metadata": lambda: [(t.__class__, t.dtype, t.shape, t.stride(), t.device) for t in (out, a, b)],
        "read 3 data_ptr()": lambda: [t.data_ptr() for t in (out, a, b)],
        "plan lookup (dict get)": lambda: _plans._cache.get(key),
        "pack the words": lambda: struct.pack("<7Q", plan.handle, 0, 3, 0, *ptrs),
        "foreign call, words packed": lambda: _plans._launch_packed(words),
    }
    if torch is not None:
        fns["add (whole call, makes out)"] = lambda: kaio.ops.add(a, b)
        fns["torch.empty_like"] = lambda: torch.empty_like(a)
        fns["torch.empty(shape, dtype, device)"] = lambda: torch.empty((ELEMS,), dtype=a.dtype, device=a.device)
        fns["x.new_empty(shape)"] = lambda: a.new_empty((ELEMS,))
        fns["torch.add(out=)"] = lambda: torch.add(a, b, out=out)
        fns["read 3 get_device()"] = lambda: [t.get_device() for t in (out, a, b)]
        # Each field of the key alone, three arrays unrolled (no list built): what a hit pays.
        fns["3 x .dtype"] = lambda: (out.dtype, a.dtype, b.dtype)
        fns["3 x .shape"] = lambda: (out.shape, a.shape, b.shape)
        fns["3 x .stride()"] = lambda: (out.stride(), a.stride(), b.stride())
        fns["3 x .device"] = lambda: (out.device, a.device, b.device)
        fns["3 x .get_device()"] = lambda: (out.get_device(), a.get_device(), b.get_device())
        fns["3 x .data_ptr()"] = lambda: (out.data_ptr(), a.data_ptr(), b.data_ptr())
        k3 = tuple(x for t in (out, a, b) for x in (t.__class__, t.dtype, t.shape, t.stride(), t.device))
        fns["hash of a 3-array key"] = lambda: hash(tuple(k3))
        fast3 = _plans.fast(3, 0)
        akey = ("elementwise", "add")
        miss = kaio.ops._ew_miss
        fns["add's fast path, called directly"] = lambda: fast3(akey, out, a, b, (), None, miss, "add")
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if device and raw is not None:
            fns["current raw stream"] = lambda: raw(0)
        if _plans._api:  # torch's DLPack exchange table: the hit's one foreign call on the tensors
            kaio.ops.add(a, b, out=out)
            oplan = _plans._last.get(akey)
            if oplan is not None:
                owords = oplan.opack(oplan.handle, _plans._api, 0, 3, 0, id(out), id(a), id(b))
                fns["foreign call on the tensors (table)"] = lambda: _plans._launch_objects(owords)
    t = best_us(fns, n)
    print(f"host path parts, us per call ({kind}, KAIO_INTERPRET={os.environ.get('KAIO_INTERPRET', '')}, "
          f"best of 7 x {n})")
    for name, us in t.items():
        print(f"{name:<36}{us:>10.3f}")
    if cpp and os.path.exists(cpp):
        env = dict(os.environ, KAIO_INTERPRET=os.environ.get("KAIO_INTERPRET", ""))
        out_cpp = subprocess.run([cpp, str(n)], capture_output=True, text=True, check=True, env=env).stdout
        for line in out_cpp.splitlines():
            op, us = line.split()
            print(f"{'C++ ' + op + ' (out given)':<36}{float(us):>10.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpp", default="build/bench/python_overhead_cpp", help="the C++ bench binary")
    ap.add_argument("-n", type=int, default=None, help="calls per measurement (2000; --host: 20000)")
    ap.add_argument("--host", action="store_true", help="the host path alone, on the CPU (no device)")
    ap.add_argument("--parts", action="store_true", help="the pieces of one cached call, host side")
    args = ap.parse_args()
    if args.parts:
        parts_main(args.n or 20000, args.cpp)
        return
    if args.host:
        host_main(args.n or 20000)
        return
    args.n = args.n or 2000

    import torch

    import kaio
    import kaio.torch as kt

    dev = "cuda"
    a, b = torch.randn(ELEMS, device=dev), torch.randn(ELEMS, device=dev)
    x = torch.randn(ROWS, COLS, device=dev)
    ma, mb = torch.randn(MM, MM, device=dev), torch.randn(MM, MM, device=dev)
    out_add, out_sm, out_mm = torch.empty_like(a), torch.empty_like(x), torch.empty(MM, MM, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False

    rows: dict[str, dict[str, Callable[[], Any]]] = {
        "add": {
            "kaio.ops": lambda: kaio.ops.add(a, b),
            "kaio.ops out=": lambda: kaio.ops.add(a, b, out=out_add),
            "general": general(lambda: kaio.ops.add(a, b)),
            "torch.ops.kaio": lambda: kt.add(a, b),
            "torch": lambda: torch.add(a, b),
        },
        "softmax": {
            "kaio.ops": lambda: kaio.ops.softmax(x),
            "kaio.ops out=": lambda: kaio.ops.softmax(x, out=out_sm),
            "general": general(lambda: kaio.ops.softmax(x)),
            "torch.ops.kaio": lambda: kt.softmax(x),
            "torch": lambda: torch.softmax(x, -1),
        },
        "matmul_auto": {
            "kaio.ops": lambda: kaio.ops.matmul_auto(ma, mb),
            "kaio.ops out=": lambda: kaio.ops.matmul_auto(ma, mb, out=out_mm),
            "general": general(lambda: kaio.ops.matmul_auto(ma, mb)),
            "torch.ops.kaio": lambda: kt.matmul(ma, mb),
            "torch": lambda: torch.matmul(ma, mb),
        },
    }
    # Decode shapes: one token's rms_norm (bf16, 4096) and attention against a 1024-token KV
    # cache (bf16, 32 query heads on 8 KV heads, head_dim 128), beside torch's own.
    F = torch.nn.functional
    xd, wd = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16), torch.randn(4096, device=dev, dtype=torch.bfloat16)
    out_rms = torch.empty_like(xd)
    qd = torch.randn(1, 1, 32, 128, device=dev, dtype=torch.bfloat16)
    kc, vc = (torch.randn(1, 1024, 8, 128, device=dev, dtype=torch.bfloat16) for _ in range(2))
    lens = torch.tensor([1024], device=dev, dtype=torch.int32)
    out_dec = torch.empty_like(qd)
    qt, kt_, vt = qd.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
    rows["rms_norm 1x4096"] = {
        "kaio.ops": lambda: kaio.ops.rms_norm(xd, wd, 1e-6),
        "kaio.ops out=": lambda: kaio.ops.rms_norm(xd, wd, 1e-6, out=out_rms),
        "general": general(lambda: kaio.ops.rms_norm(xd, wd, 1e-6)),
        "torch.ops.kaio": lambda: kt.rms_norm(xd, wd, 1e-6),
        "torch": lambda: F.rms_norm(xd, (4096,), wd, 1e-6),
    }
    rows["decode 1x1024"] = {
        "kaio.ops": lambda: kaio.ops.attention_decode(qd, kc, vc, lens),
        "kaio.ops out=": lambda: kaio.ops.attention_decode(qd, kc, vc, lens, out=out_dec),
        "general": general(lambda: kaio.ops.attention_decode(qd, kc, vc, lens)),
        "torch.ops.kaio": lambda: kt.attention_decode(qd, kc, vc, lens, None, 0.0, True, -1, 0.0, 0),
        "torch": lambda: F.scaled_dot_product_attention(qt, kt_, vt, enable_gqa=True),
    }
    tr = triton_ops()
    if tr:
        rows["add"]["triton"] = lambda: tr["add"](a, b)
        rows["softmax"]["triton"] = lambda: tr["softmax"](x)
        rows["matmul_auto"]["triton"] = lambda: tr["matmul_auto"](ma, mb)
    side = torch.cuda.Stream()

    def on_side(fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with torch.cuda.stream(side):
                return fn()

        return run

    for impls in rows.values():
        impls["out= side stream"] = on_side(impls["kaio.ops out="])
    cpp = cpp_times(args.cpp, args.n)

    # "kaio C++" runs on a stream of its own, "C++ null stream" on the legacy default stream
    # (torch's current stream, where the kaio.ops columns run); "out= side stream" is kaio.ops
    # with out= under `with torch.cuda.stream(s)` (the with statement's cost included).
    cols = ["kaio C++", "C++ null stream", "kaio.ops", "kaio.ops out=", "out= side stream", "general",
            "torch.ops.kaio", "torch", "triton"]
    print(f"us per call ({torch.cuda.get_device_name()}, torch {torch.__version__}, n = {args.n}); "
          f"add {ELEMS} f32, softmax {ROWS}x{COLS} f32, matmul {MM}^3 f32, rms_norm 1x4096 bf16, "
          f"decode: 1 token, 32:8 heads of 128, a 1024-token bf16 cache")
    print(f"{'op':<16}" + "".join(f"{c:>17}" for c in cols))
    # Round-robin: every (op, column) once per round, best of 5 rounds, so that no column
    # gets the process's cold start or a disturbed stretch to itself.
    for impls in rows.values():
        for fn in impls.values():
            us_per_call(fn, 50, repeat=1)
    best: dict[str, dict[str, float]] = {op: {} for op in rows}
    for _ in range(5):
        for op, impls in rows.items():
            for name, fn in impls.items():
                us = us_per_call(fn, args.n, repeat=1)
                best[op][name] = min(best[op].get(name, us), us)
    for op in rows:
        t = best[op]
        if op in cpp:
            t["kaio C++"] = cpp[op]
        if op + "@null" in cpp:
            t["C++ null stream"] = cpp[op + "@null"]
        print(f"{op:<16}" + "".join(f"{t[c]:>17.2f}" if c in t else f"{'-':>17}" for c in cols))


if __name__ == "__main__":
    main()
