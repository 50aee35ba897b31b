"""Kernels written in Python: the builder, compile, launch; the same kernel built from C++
has the same cache key and shares its cache entry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kaio

from support import rng

BLOCK_SUM = textwrap.dedent(
    """
    import kaio

    def block_sum():
        # The twin of tests/py_reference_kernel.cpp, statement for statement.
        b = kaio.KernelBuilder("py_block_sum")
        x = b.param(kaio.const_f32_ptr, "x")
        out = b.param(kaio.f32_ptr, "out")
        n = b.param(kaio.u32, "n")
        sh = b.shared(kaio.f32, 8)
        tid = b.thread_idx_x()
        acc = b.var(kaio.f32, 0.0)
        bd = b.block_dim_x()
        gd = b.grid_dim_x()
        stride = bd * gd
        start = b.global_id_x()

        def body(i):
            nonlocal acc
            acc += x[i]

        b.for_(start, n, stride, body)
        s = b.warp_reduce_sum(acc)
        lane = b.lane_id()
        warp = b.warp_id()

        def first_lane():
            sh[warp] = s

        b.if_(lane == 0, first_lane)
        b.barrier()

        def first_warp():
            w = b.var(kaio.f32, 0.0)

            def load():
                w.set(sh[tid])

            b.if_(tid < 8, load)
            t = b.warp_reduce_sum(w)

            def store():
                out[b.block_idx_x()] = t

            b.if_(tid == 0, store)

        b.if_(tid < 32, first_warp)
        return b.build()
    """
)


def _block_sum() -> kaio.Kernel:
    ns: dict = {}
    exec(BLOCK_SUM, ns)
    return ns["block_sum"]()


@pytest.mark.interpret
def test_python_kernel_runs() -> None:
    k = kaio.compile(_block_sum())
    assert k.params == ["ptr<const f32>", "ptr<f32>", "u32"]
    x = rng(20).standard_normal(3000).astype(np.float32)
    out = np.zeros(4, np.float32)
    k.launch(4, 256, x, out, x.size)
    # Block g sums the elements i with (i mod 1024) // 256 == g (a grid-stride loop).
    idx = np.arange(x.size)
    ref = np.array([x[(idx % 1024) // 256 == g].astype(np.float64).sum() for g in range(4)])
    assert np.max(np.abs(out - ref)) < 1e-4 * np.abs(x).sum()
    assert np.any(out != 0)


def test_same_key_and_cache_entry_as_cpp(tmp_path: Path) -> None:
    ref = os.environ.get("KAIO_PY_REFERENCE")
    if not ref:
        pytest.skip("KAIO_PY_REFERENCE (the kaio_py_reference program of the C++ build) is not set")
    env = dict(os.environ, KAIO_CACHE_DIR=str(tmp_path), KAIO_INTERPRET="1")
    cpp = subprocess.run([ref], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert len(cpp) == 2 and cpp[0] == cpp[1] and len(cpp[0]) == 32
    # A fresh process (empty in-memory cache): the compile must be answered by the entry C++ wrote.
    script = BLOCK_SUM + textwrap.dedent(
        """
        k = block_sum()
        c = kaio.compile(k, arch="sm_90")
        print(k.cache_key("sm_90"), c.key, int(c.from_cache))
        """
    )
    py = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    key, ckey, from_cache = py.stdout.split()
    assert key == cpp[0] and ckey == cpp[0]
    assert from_cache == "1", "the Python compile did not find the C++ compile's cache entry"


def test_key_changes_with_the_kernel() -> None:
    k1 = _block_sum()
    b = kaio.KernelBuilder("py_block_sum")
    x = b.param(kaio.const_f32_ptr, "x")
    out = b.param(kaio.f32_ptr, "out")
    b.param(kaio.u32, "n")
    i = b.global_id_x()
    out[i] = x[i] * 2.0
    k2 = b.build()
    assert k1.cache_key("sm_90") != k2.cache_key("sm_90")
    assert _block_sum().cache_key("sm_90") == k1.cache_key("sm_90")
    assert "py_block_sum" in k1.ir


@pytest.mark.interpret
def test_control_flow_vars_and_atomics() -> None:
    b = kaio.KernelBuilder("py_flow")
    x = b.param(kaio.const_f32_ptr, "x")
    y = b.param(kaio.f32_ptr, "y")
    count = b.param(kaio.u32_ptr, "count")
    n = b.param(kaio.u32, "n")
    i = b.global_id_x()

    def inside() -> None:
        v = x[i]
        b.if_(v > 0.0, lambda: y.__setitem__(i, kaio.sqrt(v))).else_(lambda: y.__setitem__(i, -v))
        kaio.atomic_add(count, 0, 1)
        # while: halve until below 1 (an integer variable as the counter)
        k = b.var(kaio.u32, 0)
        m = b.var(kaio.f32, kaio.abs(v) * 8.0)
        b.while_(lambda: m > 1.0, lambda: (m.set(m * 0.5), k.__iadd__(1)))
        y[i + n] = kaio.cast(k.get(), kaio.f32)

    b.if_(i < n, inside)
    k = kaio.compile(b.build())
    xs = rng(21).standard_normal(100).astype(np.float32)
    ys = np.zeros(200, np.float32)
    cnt = np.zeros(1, np.uint32)
    k.launch(1, 128, xs, ys, cnt, 100)
    assert cnt[0] == 100
    ref = np.where(xs > 0, np.sqrt(np.abs(xs.astype(np.float64))), -xs)
    assert np.max(np.abs(ys[:100] - ref)) < 1e-6
    steps = np.array([np.ceil(max(0.0, np.log2(abs(v) * 8.0))) for v in xs.astype(np.float64)])
    assert np.array_equal(ys[100:], steps)


def test_builder_misuse_names_kernel_and_op() -> None:
    b = kaio.KernelBuilder("bad_store")
    x = b.param(kaio.const_f32_ptr, "x")
    with pytest.raises(kaio.UsageError) as e:
        x[0] = 1.0  # a store through a const pointer
    assert e.value.kernel == "bad_store" and e.value.op
    assert "bad_store" in str(e.value)
    with pytest.raises(kaio.UsageError, match="truth value"):
        if x[0] > 0.0:  # Python's if cannot build IR
            pass
    with pytest.raises(ValueError):  # UsageError is a ValueError
        b.param("f33", "y")


def test_exceptions_in_bodies_propagate() -> None:
    b = kaio.KernelBuilder("raising")
    n = b.param(kaio.u32, "n")

    class Boom(Exception):
        pass

    def body(i: kaio.Value) -> None:
        b.if_(i < n, lambda: (_ for _ in ()).throw(Boom("inner")))

    with pytest.raises(Boom, match="inner"):
        b.for_(0, n, body)


@pytest.mark.interpret
def test_launch_checks_arguments() -> None:
    b = kaio.KernelBuilder("scale2")
    x = b.param(kaio.f32_ptr, "x")
    n = b.param(kaio.u32, "n")
    i = b.global_id_x()
    b.if_(i < n, lambda: x.__setitem__(i, x[i] * 2.0))
    k = kaio.compile(b.build())
    with pytest.raises(kaio.UsageError, match="takes 2 arguments"):
        k.launch(1, 32, np.zeros(4, np.float32))
    with pytest.raises(kaio.UsageError, match="float64"):
        k.launch(1, 32, np.zeros(4, np.float64), 4)
    with pytest.raises(kaio.UsageError, match="'n'"):
        k.launch(1, 32, np.zeros(4, np.float32), 1.5)
    a = np.arange(4, dtype=np.float32)
    k.launch(1, 32, a, 4)
    assert np.array_equal(a, [0, 2, 4, 6])
    assert len(k.cubin) > 0 and ".entry" in k.ptx and k.arch == "sm_90"


@pytest.mark.interpret
def test_overlapping_views_of_one_array() -> None:
    # src is the whole array, dst one element inside it: the interpreter must see both as
    # one allocation (it finds an address in the registration with the nearest lower base).
    b = kaio.KernelBuilder("last_to_slot")
    src = b.param(kaio.const_f32_ptr, "src")
    dst = b.param(kaio.f32_ptr, "dst")
    n = b.param(kaio.u32, "n")
    b.if_(b.global_id_x() == 0, lambda: dst.__setitem__(0, src[n - 1]))
    k = kaio.compile(b.build())
    arr = np.arange(100, dtype=np.float32)
    k.launch(1, 32, arr, arr[4:5], 100)
    assert arr[4] == 99.0 and arr[5] == 5.0
