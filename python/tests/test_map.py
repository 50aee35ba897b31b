"""kaio.map: Python functions of values as fused elementwise ops."""

from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import ops

from support import close, rng, silu

pytestmark = pytest.mark.interpret


def test_map_two_inputs() -> None:
    @kaio.map
    def swiglu(x, g):  # type: ignore[no-untyped-def]
        return x / (1.0 + kaio.exp(-x)) * g

    assert swiglu.inputs == 2 and swiglu.name == "swiglu"
    x = rng(30).standard_normal((3, 70)).astype(np.float32)
    g = rng(31).standard_normal((3, 70)).astype(np.float32)
    close(swiglu(x, g), silu(x.astype(np.float64)) * g, np.float32)
    # In place, and f16 (the same map serves every dtype).
    ref = silu(x.astype(np.float64)) * g
    assert swiglu(x, g, out=x) is x
    close(x, ref, np.float32)
    h = rng(32).standard_normal(33).astype(np.float16)
    close(swiglu(h, h), silu(h.astype(np.float64)) * h.astype(np.float64), np.float16)


def test_map_scalars_and_strides() -> None:
    poly = kaio.map(lambda x, a, b: kaio.fma(x, a, b) * x, scalars=2, name="poly2")
    assert poly.inputs == 1 and poly.scalars == 2
    big = rng(33).standard_normal((4, 64)).astype(np.float32)
    x = big[:, 8:40]
    ref = (x.astype(np.float64) * 3.0 - 1.0) * x
    close(poly(x, scalars=(3.0, -1.0)), ref, np.float32)
    with pytest.raises(kaio.UsageError):
        poly(x, scalars=(1.0,))


def test_map_as_matmul_epilogue() -> None:
    sq = kaio.map(lambda v: v * v, name="square_epi")
    a = rng(34).standard_normal((8, 16)).astype(np.float32)
    b = rng(35).standard_normal((16, 8)).astype(np.float32)
    close(ops.matmul_auto(a, b, activation=sq), (a.astype(np.float64) @ b) ** 2, np.float32, scale=10.0)


def test_map_errors() -> None:
    bad = kaio.map(lambda x: 1.0, name="returns_float")
    with pytest.raises(kaio.UsageError, match="not a kernel value"):
        bad(np.ones(4, np.float32))

    def raises(x):  # type: ignore[no-untyped-def]
        raise KeyError("from the body")

    m = kaio.map(raises)
    with pytest.raises(KeyError, match="from the body"):
        m(np.ones(4, np.float32))
    two = kaio.map(lambda x, y: x + y, name="plus")
    with pytest.raises(kaio.UsageError, match="takes 2 arrays"):
        two(np.ones(4, np.float32))
    with pytest.raises(kaio.UsageError, match="'in1'"):
        two(np.ones(4, np.float32), np.ones(5, np.float32))


def test_auto_names_do_not_clash() -> None:
    m1 = kaio.map(lambda x: x + 1.0)
    m2 = kaio.map(lambda x: x + 2.0)
    assert m1.name != m2.name
    x = np.zeros(8, np.float32)
    assert np.all(m1(x) == 1.0) and np.all(m2(x) == 2.0)
