"""Compile and launch (kaio::jit): kaio.compile(kernel) goes through the same in-memory and
LMDB caches as C++'s jit::compile, so a kernel built from Python and the same kernel built
from C++ share one cache entry."""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Union

from . import _lib
from ._tensors import from_object, stream_handle
from .builder import Kernel
from .errors import UsageError

Dim3 = Union[int, Sequence[int]]


def _dim3(op: str, name: str, d: Dim3) -> Any:
    t = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(t) <= 3:
        raise UsageError.make(op, f"argument '{name}': expected 1 to 3 extents, got {len(t)}")
    t = t + (1,) * (3 - len(t))
    return (ctypes.c_uint32 * 3)(*t)


class CompiledKernel:
    """A compiled kernel: its key, PTX and cubin, and a checked launch."""

    def __init__(self, handle: ctypes.c_void_p) -> None:
        self._h = handle
        n = _lib.lib.kaio_compiled_num_params(handle)
        self.params: list[str] = [_lib.lib.kaio_compiled_param_type(handle, i).decode() for i in range(n)]

    def __del__(self) -> None:
        if getattr(self, "_h", None):
            _lib.lib.kaio_compiled_free(self._h)
            self._h = None

    def _str(self, what: bytes) -> str:
        return (_lib.lib.kaio_compiled_str(self._h, what) or b"").decode()

    @property
    def key(self) -> str:
        """The cache key (32 hex digits)."""
        return self._str(b"key")

    @property
    def name(self) -> str:
        return self._str(b"name")

    @property
    def arch(self) -> str:
        return self._str(b"arch")

    @property
    def ptx(self) -> str:
        return self._str(b"ptx")

    @property
    def info_log(self) -> str:
        return self._str(b"info_log")

    @property
    def cubin(self) -> bytes:
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.lib.kaio_compiled_cubin(self._h, ctypes.byref(data), ctypes.byref(size)))
        return ctypes.string_at(data, size.value) if size.value else b""

    @property
    def from_cache(self) -> bool:
        """True when this compile was answered by the in-memory or the on-disk cache."""
        return bool(_lib.lib.kaio_compiled_from_cache(self._h))

    def launch(self, grid: Dim3, block: Dim3, *args: Any, shared_bytes: int = 0, stream: Any = None) -> None:
        """Checks the arguments against the parameters (count and type) and launches,
        asynchronously on `stream` (default: the current stream of the first array's
        framework). Arrays (DLPack) go to pointer parameters of their dtype, Python ints
        and floats to scalar parameters."""
        like = next((a for a in args if hasattr(a, "__dlpack__")), None)
        h = stream_handle(stream, like) if like is not None else stream_handle(stream, object())
        packed = (_lib.Arg * max(1, len(args)))()
        keep = []
        for i, a in enumerate(args):
            p = packed[i]
            if isinstance(a, bool):
                p.kind, p.i = 1, int(a)
            elif isinstance(a, int):
                p.kind, p.i = 2, a
            elif isinstance(a, float):
                p.kind, p.f = 3, a
            else:
                t = from_object("launch", f"argument {i}", a, h)
                keep.append(t)
                p.kind, p.tensor = 0, t.addr
        _lib.check(
            _lib.lib.kaio_launch(self._h, _dim3("launch", "grid", grid), _dim3("launch", "block", block), shared_bytes,
                                 h, packed, len(args))
        )

    def __repr__(self) -> str:
        return f"<kaio.CompiledKernel {self.name} {self.arch} key={self.key}>"


def compile(kernel: Kernel, arch: Optional[str] = None, *, use_cache: bool = True, force: bool = False,
            cache_dir: Optional[str] = None) -> CompiledKernel:
    """kernel -> key -> (memory cache | disk cache | codegen + nvJitLink) -> CompiledKernel.
    arch: "sm_90", "sm_90a", ...; default: the current device's (sm_90 in interpret mode)."""
    o = _lib.CompileOptions(_lib.s(arch), int(use_cache), int(force), _lib.s(cache_dir))
    out = ctypes.c_void_p()
    _lib.check(_lib.lib.kaio_compile(kernel._h, ctypes.byref(o), ctypes.byref(out)))
    return CompiledKernel(out)


def synchronize() -> None:
    """Waits for all work on the device."""
    _lib.check(_lib.lib.kaio_synchronize())


def flush_cache_writes() -> None:
    """Waits for the background cache writes (also done at exit)."""
    _lib.check(_lib.lib.kaio_flush_cache_writes())


def toolchain_id() -> str:
    """The toolchain identity that enters every cache key."""
    return (_lib.lib.kaio_toolchain_id() or b"").decode()
