"""The plan cache of kaio.ops (kaio._plans) and the C ABI's plans (kaio_plan_*): a hit gives
what the general path gives, new addresses are read on every call, any change of dtype,
shape, strides or options is a different plan, errors are the general path's, and many
threads may share the cache."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from typing import Any, Callable

import numpy as np
import pytest

import kaio
from kaio import _lib, _plans, ops

from support import TorchLike, close, rng, silu

pytestmark = pytest.mark.interpret


@pytest.fixture(autouse=True)
def fresh_cache() -> Any:
    _plans.clear()
    yield
    _plans.ENABLED = True
    _plans.clear()


def general(fn: Callable[[], Any]) -> Any:
    """fn() through the general path (no plan read from or put in the cache)."""
    _plans.ENABLED = False
    try:
        return fn()
    finally:
        _plans.ENABLED = True


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(np.float32)


def test_a_hit_gives_the_general_paths_bits_for_every_op() -> None:
    x, r, w, b = f32(6, 40, seed=1), f32(6, 40, seed=2), f32(40, seed=3), f32(40, seed=4)
    m1, m2 = f32(8, 16, seed=5), f32(16, 12, seed=6)
    calls: dict[str, Callable[[], Any]] = {
        "add": lambda: ops.add(x, r),
        "axpby": lambda: ops.axpby(x, r, 2.5, -0.5),
        "silu_gate": lambda: ops.silu_gate(x, r),
        "softmax": lambda: ops.softmax(x),
        "log_softmax": lambda: ops.log_softmax(x),
        "rms_norm": lambda: ops.rms_norm(x, w, 1e-5),
        "layer_norm": lambda: ops.layer_norm(x, w, b, 1e-5),
        "add_rms_norm": lambda: ops.add_rms_norm(x, r, w, 1e-6),
        "rope": lambda: ops.rope(x, heads=2, head_dim=20, position_offset=3),
        "reduce_rows": lambda: ops.reduce_rows("sum", x),
        "argmax_rows": lambda: ops.argmax_rows(x),
        "reduce": lambda: ops.reduce("max", x),
        "matmul_auto": lambda: ops.matmul_auto(m1, m2),
        "matmul": lambda: ops.matmul(m1, m2, variant="simt_32x32x8_2x2"),
    }
    for name, fn in calls.items():
        ref = general(fn)
        before = _plans.size()
        miss = fn()  # makes and caches the plan
        assert _plans.size() == before + 1, name
        hit = fn()  # served by it
        assert _plans.size() == before + 1, name
        for got in (miss, hit):
            for g, e in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
                assert g.dtype == e.dtype and g.shape == e.shape, name
                assert g.tobytes() == e.tobytes(), name


def test_new_addresses_every_call() -> None:
    # Fresh arrays of one metadata hit one plan; each call must read its own arrays.
    for seed in range(5):
        a, b = f32(3, 33, seed=seed), f32(3, 33, seed=seed + 10)
        out = np.zeros_like(a)
        assert ops.add(a, b, out=out) is out
        assert np.array_equal(out, a + b)
        assert np.array_equal(ops.add(a, b), a + b)
    assert _plans.size() == 2  # with out=, and with an output made by the plan


def test_unaligned_addresses_share_a_plan_and_stay_right() -> None:
    # The kernel is picked per launch for the addresses' alignment, not stored in the plan.
    big = f32(130, seed=7)
    for off in (0, 1, 2, 3, 4):
        x = big[off : off + 100]
        assert np.array_equal(ops.relu(x), np.maximum(x, 0))


def test_changed_metadata_is_another_plan() -> None:
    a = f32(4, 32, seed=8)
    ops.softmax(a)
    n = _plans.size()
    variants = [
        f32(4, 33, seed=8),  # shape
        a.astype(np.float16),  # dtype
        f32(4, 64, seed=9)[:, :32],  # strides: rows 64 apart
    ]
    for k, v in enumerate(variants):
        got = ops.softmax(v)
        e = np.exp(v.astype(np.float64) - v.max(-1, keepdims=True))
        close(got, e / e.sum(-1, keepdims=True), v.dtype.type)
        assert _plans.size() == n + k + 1
    # A stride that the op refuses is refused, whatever plans exist for the shape.
    wide = f32(4, 64, seed=10)
    with pytest.raises(kaio.UsageError, match="strides"):
        ops.softmax(wide[:, ::2])
    with pytest.raises(kaio.UsageError, match="strides"):
        ops.softmax(wide[:, ::2])


def test_a_read_only_array_is_not_served_by_a_writable_ones_plan() -> None:
    a = f32(8, seed=21)
    assert np.array_equal(ops.relu(a), np.maximum(a, 0))
    r = a.copy()
    r.flags.writeable = False
    ref = general(lambda: pytest.raises(kaio.UsageError, ops.relu, r).value.args)
    with pytest.raises(kaio.UsageError) as e:
        ops.relu(r)
    assert e.value.args == ref


def test_options_and_numbers() -> None:
    x, y = f32(50, seed=11), f32(50, seed=12)
    for alpha, beta in [(1.0, 2.0), (-3.0, 0.25), (0.0, 1.0)]:  # numbers: one plan, read per call
        close(ops.axpby(x, y, alpha, beta), alpha * x.astype(np.float64) + beta * y, np.float32)
    assert _plans.size() == 1
    m = f32(6, 8, seed=13)
    w = f32(8, 4, seed=14)
    bias = f32(4, seed=15)
    ref = m.astype(np.float64) @ w
    close(ops.matmul_auto(m, w), ref, np.float32, scale=4.0)
    close(ops.matmul_auto(m, w, bias=bias), ref + bias, np.float32, scale=4.0)  # an option: another plan
    close(ops.matmul_auto(m, w, activation="relu"), np.maximum(ref, 0), np.float32, scale=4.0)
    close(ops.matmul_auto(m, w, alpha=2.0), 2 * ref, np.float32, scale=4.0)
    assert _plans.size() == 4
    c = f32(6, 4, seed=16)
    want = 0.5 * ref + 2.0 * c
    ops.matmul_auto(m, w, out=c, alpha=0.5, beta=2.0)
    close(c, want, np.float32, scale=4.0)
    # beta != 0 without out: refused even though a plan for these arrays with beta = 0 exists.
    with pytest.raises(kaio.UsageError, match="beta"):
        ops.matmul_auto(m, w, beta=1.0)


def test_map_plans() -> None:
    @kaio.map(scalars=1)
    def scaled_silu(x: Any, s: Any) -> Any:
        return x / (1.0 + kaio.exp(-x)) * s

    x = f32(3, 20, seed=17)
    for s in (1.0, 2.0):
        close(scaled_silu(x, scalars=(s,)), silu(x.astype(np.float64)) * s, np.float32)
    assert _plans.size() == 1


ERROR_CASES: list[Callable[[np.ndarray], Any]] = [
    lambda a: ops.add(a, np.ones((4, 8), np.float16)),
    lambda a: ops.add(a, np.ones((4, 9), np.float32)),
    lambda a: ops.add(a, [1, 2, 3]),
    lambda a: ops.relu(np.ones(4, np.float64)),
    lambda a: ops.softmax(a, out=np.ones((4, 8), np.float16)),
    lambda a: ops.rms_norm(a, np.ones(7, np.float32)),
    lambda a: ops.matmul_auto(a, np.ones((9, 3), np.float32)),
    lambda a: ops.matmul(a, np.ones((8, 3), np.float32), variant="no_such_variant"),
    lambda a: ops.reduce_rows("sum", a, out=np.ones(5, np.float32)),
    lambda a: ops.rope(a, heads=2, head_dim=4, cos=a),
]


@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_errors_are_the_general_paths(case: int) -> None:
    a = np.ones((4, 8), np.float32)
    fn = ERROR_CASES[case]

    def message() -> tuple[str, str]:
        with pytest.raises(kaio.UsageError) as e:
            fn(a)
        return e.value.op, str(e.value)

    ref = general(message)
    # Valid calls of the same op on the same arrays first, so that plans for them exist.
    ops.add(a, a), ops.relu(a), ops.softmax(a), ops.rms_norm(a, np.ones(8, np.float32))
    ops.reduce_rows("sum", a)
    assert message() == ref
    assert message() == ref  # and again, with whatever the first raise left cached


def test_threads_share_the_cache() -> None:
    shapes = [(4, 32), (5, 32), (4, 48)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def worker(k: int) -> None:
        try:
            barrier.wait()
            for i in range(30):
                a = f32(*shapes[(k + i) % 3], seed=k * 100 + i)
                b = f32(*shapes[(k + i) % 3], seed=k * 100 + i + 50)
                assert np.array_equal(ops.add(a, b), a + b)
                out = np.empty_like(a)
                ops.mul(a, b, out=out)
                assert np.array_equal(out, a * b)
                if i % 10 == 0:
                    _plans.clear()  # plans in use finish their calls
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plans, "MAX_PLANS", 3)
    for n in range(1, 9):
        x = f32(n, seed=n)
        assert np.array_equal(ops.relu(x), np.maximum(x, 0))
        assert _plans.size() <= 3


def test_c_plan_checks_its_launch() -> None:
    lib = _lib.lib
    x, y = f32(2, 16, seed=20), np.empty((2, 16), np.float32)
    tx = kaio._tensors.from_object("softmax", "x", x)
    ty = kaio._tensors.from_object("softmax", "y", y)
    h = ctypes.c_void_p()
    _lib.check(lib.kaio_plan_softmax(tx.addr, ty.addr, 0, ctypes.byref(h)))
    try:
        assert lib.kaio_plan_op(h) == b"softmax"
        assert lib.kaio_plan_arrays(h) == 2 and lib.kaio_plan_values(h) == 0
        addr = (ctypes.c_uint64 * 2)(x.ctypes.data, y.ctypes.data)
        assert lib.kaio_plan_launch(h, addr, 1, None, 0, None) == 1  # a count that is not the plan's
        assert "takes 2 arrays, got 1" in lib.kaio_last_error_message().decode()
        null = (ctypes.c_uint64 * 2)(x.ctypes.data, 0)
        assert lib.kaio_plan_launch(h, null, 2, None, 0, None) == 1
        assert lib.kaio_last_error_message().decode().endswith("argument 'y': has a null data pointer")
        assert lib.kaio_last_error_field(b"op") == b"softmax"
        _lib.check(lib.kaio_plan_launch(h, addr, 2, None, 0, None))
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        close(y, e / e.sum(-1, keepdims=True), np.float32)
    finally:
        lib.kaio_plan_free(h)


def test_dry_interpret_checks_and_drops_launches() -> None:
    code = (
        "import numpy as np, kaio\n"
        "a = np.ones(64, np.float32); out = np.zeros(64, np.float32)\n"
        "kaio.ops.add(a, a, out=out)\n"
        "print('ZEROS' if not out.any() else 'WRITTEN')\n"
        "try:\n"
        "    kaio.ops.add(a, np.ones(3, np.float32))\n"
        "except kaio.UsageError as e:\n"
        "    print('CHECKED', e.op)\n"
    )
    env = dict(os.environ, KAIO_INTERPRET="dry")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ZEROS", "CHECKED", "add"]


def test_fast_paths_hit_without_the_general_call(monkeypatch: pytest.MonkeyPatch) -> None:
    _plans._seen_modules()
    monkeypatch.setattr(_plans, "_torch_types", (TorchLike,))
    monkeypatch.setattr(_plans, "_api", None)  # the path that reads the fields (no exchange table)
    general_calls = []
    real_call = _plans.call
    monkeypatch.setattr(_plans, "call", lambda *a: general_calls.append(a[0]) or real_call(*a))
    x, g = f32(3, 40, seed=30), f32(3, 40, seed=31)
    w = f32(40, seed=32)
    outs = {n: np.full((3, 40), np.nan, np.float32) for n in ("silu_gate", "rms_norm", "softmax")}
    b = f32(40, 8, seed=33)
    outs["matmul"] = mm_out = np.full((3, 8), np.nan, np.float32)
    tx, tg, tw, tb = TorchLike(x), TorchLike(g), TorchLike(w), TorchLike(b)
    runs = {
        "silu_gate": lambda: ops.silu_gate(tx, tg, out=TorchLike(outs["silu_gate"])),
        "rms_norm": lambda: ops.rms_norm(tx, tw, 1e-6, out=TorchLike(outs["rms_norm"])),
        "softmax": lambda: ops.softmax(tx, out=TorchLike(outs["softmax"])),
        "matmul": lambda: ops.matmul(tx, tb, out=TorchLike(mm_out), variant="simt_32x32x8_2x2", alpha=0.5),
    }
    for name, run in runs.items():
        general_calls.clear()
        run()  # a miss: the general call makes the plan
        assert len(general_calls) == 1, name
        outs[name][:] = np.nan
        run()  # a hit: the fast path alone
        assert general_calls == [general_calls[0]], f"{name}: a hit went to the general call"
    close(outs["silu_gate"], silu(x.astype(np.float64)) * g, np.float32)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    close(outs["softmax"], e / e.sum(-1, keepdims=True), np.float32)
    x64 = x.astype(np.float64)
    close(outs["rms_norm"], x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w, np.float32)
    close(mm_out, 0.5 * x64 @ b, np.float32, scale=8.0)
    # Other metadata (a transposed operand: new strides) is another plan, through the general call.
    general_calls.clear()
    bt = np.ascontiguousarray(b.T).T  # b's values, column-major
    ops.matmul(tx, TorchLike(bt), out=TorchLike(mm_out), variant="simt_32x32x8_2x2", alpha=0.5)
    assert len(general_calls) == 1
    close(mm_out, 0.5 * x64 @ b, np.float32, scale=8.0)
