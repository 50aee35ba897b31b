"""Tensors in and out through DLPack: any object with __dlpack__ (torch, numpy, CuPy, JAX)
is read without a copy; outputs are made by the inputs' own framework, so the caller reads
them the same way. Also: which CUDA stream a call runs on."""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, Sequence

from . import _lib
from .errors import UsageError

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]

KDL_CPU, KDL_CUDA = 1, 2

# DLPack (code, bits) of the dtypes kaio ops take and make.
DTYPES: dict[str, tuple[int, int]] = {
    "float32": (2, 32),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float64": (2, 64),
    "int64": (0, 64),
    "int32": (0, 32),
    "int16": (0, 16),
    "int8": (0, 8),
    "uint32": (1, 32),
    "uint16": (1, 16),
    "uint8": (1, 8),
    "bool": (6, 8),
}
_DTYPE_OF_CODE = {v: k for k, v in DTYPES.items()}

_torch: Any = None  # set once torch has been seen (never imported by kaio itself here)


def _torch_module() -> Any:
    global _torch
    if _torch is None:
        _torch = sys.modules.get("torch")
    return _torch


def interpret_mode() -> bool:
    """True when kaio runs kernels in its CPU interpreter (KAIO_INTERPRET=1): host arrays
    (numpy) are then the device arrays."""
    return bool(_INTERPRET)


_INTERPRET = _lib.lib.kaio_interpret_mode()

_TORCH_DTYPES: dict[Any, tuple[int, int]] = {}


def _torch_dtype_code(t: Any) -> tuple[int, int]:
    if not _TORCH_DTYPES:
        torch = _torch_module()
        _TORCH_DTYPES.update(
            {
                torch.float32: (2, 32),
                torch.float16: (2, 16),
                torch.bfloat16: (4, 16),
                torch.float64: (2, 64),
                torch.int64: (0, 64),
                torch.int32: (0, 32),
                torch.int16: (0, 16),
                torch.int8: (0, 8),
                torch.uint8: (1, 8),
                torch.bool: (6, 8),
            }
        )
        for name, code in (("uint16", (1, 16)), ("uint32", (1, 32))):  # torch 2.3+
            if hasattr(torch, name):
                _TORCH_DTYPES[getattr(torch, name)] = code
    code = _TORCH_DTYPES.get(t.dtype)
    if code is None:
        raise KeyError(str(t.dtype))
    return code


class Tensor:
    """One argument's DLTensor (at `addr`), its element 0's address (`data`) and what keeps
    it and its memory alive during the call."""

    __slots__ = ("addr", "obj", "keep", "shape", "dtype", "data")

    def __init__(self, addr: int, obj: Any, keep: Any, shape: tuple[int, ...], dtype: str, data: int) -> None:
        self.addr = addr
        self.obj = obj
        self.keep = keep
        self.shape = shape
        self.dtype = dtype
        self.data = data

    @property
    def ref(self) -> int:
        return self.addr


def _is_torch(x: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def from_object(op: str, arg: str, x: Any, stream: int | None = None) -> Tensor:
    """The DLTensor of x (no copy). UsageError naming op and arg when x is not an array."""
    if _is_torch(x):
        return _from_torch(op, arg, x)
    if not hasattr(x, "__dlpack__"):
        raise UsageError.make(op, f"argument '{arg}': {type(x).__name__} is not an array (it has no __dlpack__)")
    try:
        dev = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else KDL_CUDA
        if _INTERPRET or stream is None or dev == KDL_CPU:
            cap = x.__dlpack__()
        else:
            # The producer orders its pending work before `stream` (DLPack's contract); 1 is
            # the legacy default stream.
            cap = x.__dlpack__(stream=stream or 1)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        raise UsageError.make(op, f"argument '{arg}': cannot be read through DLPack ({e})") from e
    ptr = _capsule_get(cap, b"dltensor")
    if not ptr:
        raise UsageError.make(op, f"argument '{arg}': its DLPack capsule is empty or used")
    dl = _lib.DLTensor.from_address(ptr)  # DLManagedTensor starts with its DLTensor
    n = dl.ndim
    shape = tuple(dl.shape[i] for i in range(n))
    dtype = _DTYPE_OF_CODE.get((dl.dtype.code, dl.dtype.bits), f"dlpack({dl.dtype.code},{dl.dtype.bits})")
    # The capsule owns the DLManagedTensor: kept alive (and so its memory) while the call runs.
    return Tensor(ptr, x, cap, shape, dtype, (dl.data or 0) + dl.byte_offset)


# A DLTensor and its shape and strides packed in one buffer: data, device (type, id), ndim,
# dtype (code, bits, lanes), shape*, strides*, byte_offset, then shape[n], strides[n].
_DL_STRUCTS = [struct.Struct(f"<QiiiBBHQQQ{2 * n}q") for n in range(17)]
_DL_BYTES = 48
assert ctypes.sizeof(_lib.DLTensor) == _DL_BYTES


def _from_torch(op: str, arg: str, t: Any) -> Tensor:
    # torch tensors are read directly (what __dlpack__ would export) into one packed buffer:
    # several times cheaper per call than making and parsing a capsule.
    try:
        code, bits = _TORCH_DTYPES[t.dtype] if _TORCH_DTYPES else _torch_dtype_code(t)
    except KeyError:
        raise UsageError.make(op, f"argument '{arg}': has dtype {t.dtype}, which kaio does not support") from None
    if t.is_cuda:
        dev_type, dev_id = KDL_CUDA, t.get_device()
    else:
        dev_type, dev_id = (KDL_CPU if t.device.type == "cpu" else -1), 0
    shape = t.shape
    n = len(shape)
    if n > 16:
        raise UsageError.make(op, f"argument '{arg}': has {n} dimensions; kaio takes at most 16")
    buf = ctypes.create_string_buffer(_DL_BYTES + 16 * n)
    addr = ctypes.addressof(buf)
    data = t.data_ptr()
    _DL_STRUCTS[n].pack_into(buf, 0, data, dev_type, dev_id, n, code, bits, 1, addr + _DL_BYTES,
                             addr + _DL_BYTES + 8 * n, 0, *shape, *t.stride())
    return Tensor(addr, t, buf, tuple(shape), _DTYPE_OF_CODE[(code, bits)], data)


def empty_like(op: str, like: Any, shape: Sequence[int], dtype: str) -> Any:
    """A new uninitialised array from like's framework (torch, numpy, or an array-API
    namespace such as CuPy's or JAX's), on like's device."""
    if _is_torch(like):
        torch = _torch_module()
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=like.device)
    mod = type(like).__module__.split(".")[0]
    if mod == "numpy":
        import numpy

        if dtype == "bfloat16":
            raise UsageError.make(op, "numpy has no bfloat16: pass out= (an array of the result's dtype)")
        return numpy.empty(tuple(shape), dtype=dtype)
    ns = getattr(like, "__array_namespace__", None)
    if ns is not None:
        xp = ns()
        kwargs = {"device": like.device} if hasattr(like, "device") else {}
        return xp.empty(tuple(shape), dtype=getattr(xp, dtype), **kwargs)
    raise UsageError.make(op, f"cannot make an output array like a {type(like).__name__}: pass out=")


def stream_handle(stream: Any, like: Any) -> int:
    """The CUstream a call runs on. Explicit: an int handle, a torch.cuda.Stream
    (.cuda_stream), a CuPy stream (.ptr) or an object with __cuda_stream__. Default: the
    current stream of like's framework (torch's current_stream()), else the default stream."""
    if _INTERPRET:
        return 0
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attr in ("cuda_stream", "ptr", "handle"):
            h = getattr(stream, attr, None)
            if isinstance(h, int):
                return h
        cs = getattr(stream, "__cuda_stream__", None)
        if cs is not None:
            return int(cs()[1])
        raise UsageError.make("stream", f"{type(stream).__name__} is not a CUDA stream")
    if _is_torch(like):
        torch = _torch_module()
        idx = like.device.index or 0
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return int(raw(idx))
        return int(torch.cuda.current_stream(idx).cuda_stream)
    mod = type(like).__module__.split(".")[0]
    if mod == "cupy":
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.get_current_stream().ptr)
    return 0
