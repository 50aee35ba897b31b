"""kaio from Python: the op library on any DLPack arrays (kaio.ops), kernels written in
Python (kaio.KernelBuilder, kaio.compile, kaio.map), PyTorch custom ops (kaio.torch), and
the cache tools (python -m kaio.cache, python -m kaio.precompile).

All of it goes through libkaio_c.so, kaio's C ABI (capi/kaio.h), shipped in this package.
With KAIO_INTERPRET=1 kernels run in kaio's CPU interpreter and numpy arrays are the
device arrays.
"""

from __future__ import annotations

from . import ops
from ._lib import lib as _clib
from ._tensors import interpret_mode
from .builder import (
    DType,
    IfChain,
    Kernel,
    KernelBuilder,
    Value,
    Var,
    abs_,
    atomic_add,
    atomic_cas,
    atomic_exch,
    atomic_max,
    atomic_min,
    ballot,
    bf16,
    bf16_ptr,
    cast,
    ceil,
    const_bf16_ptr,
    const_f16_ptr,
    const_f32_ptr,
    const_s32_ptr,
    const_s64_ptr,
    const_u32_ptr,
    copysign,
    cos,
    erf,
    exp,
    exp2,
    f16,
    f16_ptr,
    f32,
    f32_ptr,
    f64,
    floor,
    fma,
    isinf,
    isnan,
    log,
    log2,
    max_,
    min_,
    pow_,
    pred,
    ptr,
    rcp,
    rint,
    round_,
    rsqrt,
    s8,
    s16,
    s32,
    s32_ptr,
    s64,
    s64_ptr,
    select,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    sin,
    sqrt,
    tanh,
    trunc,
    u8,
    u16,
    u32,
    u32_ptr,
    u64,
    vote_all,
    vote_any,
)
from .errors import Error, InternalError, ToolError, UsageError
from .jit import CompiledKernel, compile, flush_cache_writes, synchronize, toolchain_id
from .map import Map, map

__version__: str = _clib.kaio_version().decode()

# C++-style spellings of the functions whose names Python's builtins take.
abs = abs_  # noqa: A001
min = min_  # noqa: A001
max = max_  # noqa: A001
pow = pow_  # noqa: A001
round = round_  # noqa: A001

__all__ = [
    "ops", "interpret_mode", "Error", "UsageError", "ToolError", "InternalError",
    "KernelBuilder", "Kernel", "Value", "Var", "IfChain", "DType", "CompiledKernel", "compile",
    "synchronize", "flush_cache_writes", "toolchain_id", "Map", "map",
]  # fmt: skip
