"""Float64 references and tolerances for the tests."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Relative error allowed per dtype: f32 results are computed in f32 (a few ulps of the
# operations involved), f16 results are rounded once to 11 bits.
TOL = {np.float32: 2e-5, np.float16: 2e-3}


def close(got: np.ndarray, ref: np.ndarray, dtype: type, scale: float = 1.0) -> None:
    got64 = np.asarray(got, dtype=np.float64)
    err = np.max(np.abs(got64 - ref) / (np.abs(ref) + scale)) if ref.size else 0.0
    assert err <= TOL[dtype] * 4, f"max relative error {err:.3g} > {TOL[dtype] * 4:.3g}"


def gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return x / 2 * (1 + erf(x / math.sqrt(2)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return x / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class TorchLike:
    """A numpy array behind torch.Tensor's reading interface (dtype, shape, stride(), device,
    data_ptr()), read as a torch tensor once registered: the per-arity fast paths of the plan
    cache (kaio._plans.fast) then serve it without torch installed."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr, self.dtype, self.shape, self.device = arr, arr.dtype, arr.shape, "cpu"

    def stride(self) -> tuple:
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def data_ptr(self) -> int:
        return self.arr.__array_interface__["data"][0]

    def __dlpack__(self, **kw: Any) -> Any:
        return self.arr.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self.arr.__dlpack_device__()
