"""kaio.map: a Python function of values becomes a fused elementwise op (kaio::ops::map).

    @kaio.map
    def swiglu(x, g):
        return x / (1.0 + kaio.exp(-x)) * g

    y = swiglu(x_arr, g_arr)             # out[i] = swiglu(x[i], g[i]), a new array
    swiglu(x_arr, g_arr, out=x_arr)      # in place

The function sees f32 values (f16 / bf16 data converted on load) and returns an f32 value,
rounded once on store. It is called while kernels are built (several times per kernel:
vector lanes, unrolled chunks, the tail), so it must only build IR from its arguments.
`scalars=k`: its last k parameters are f32 scalars passed per call (scalars=(...)).
"""

from __future__ import annotations

import ctypes
import inspect
import re
import weakref
from typing import Any, Callable, Optional, Sequence

from . import _lib
from ._tensors import empty_like, from_object, stream_handle
from .builder import KernelBuilder, Value, _Pending
from .errors import UsageError

_live: "weakref.WeakValueDictionary[str, Map]" = weakref.WeakValueDictionary()


def _name_for(fn: Callable[..., Any], name: Optional[str]) -> str:
    if name is not None:
        return name
    base = re.sub(r"[^A-Za-z0-9_]", "_", getattr(fn, "__name__", "map")).strip("_") or "map"
    if base[0].isdigit():
        base = "m" + base
    n, k = base, 2
    while n in _live:  # another live map has it: the next free name, in creation order
        n, k = f"{base}_{k}", k + 1
    return n


class Map:
    """A fused elementwise op made from a Python function (see the module's docstring)."""

    def __init__(self, fn: Callable[..., Any], name: Optional[str] = None, inputs: Optional[int] = None,
                 scalars: int = 0) -> None:
        if inputs is None:
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            inputs = len(params) - scalars
        self.fn = fn
        self.name = _name_for(fn, name)
        self.inputs = inputs
        self.scalars = scalars
        self._pending = _Pending()

        def body(_user: Any, bh: Any, ins: Any, n_in: int, scs: Any, n_sc: int, result: Any) -> None:
            b = KernelBuilder(self.name, _borrowed=bh)
            vals = [Value(b, ins[i]) for i in range(n_in)] + [Value(b, scs[i]) for i in range(n_sc)]
            r = fn(*vals)
            if not isinstance(r, Value):
                raise UsageError.make(self.name, f"the map's body returned {type(r).__name__}, not a kernel value")
            result[0] = r.id

        self._cb = _lib.MAP_BODY_FN(self._pending.wrap(body))
        h = ctypes.c_void_p()
        _lib.check(_lib.lib.kaio_map_new(self.name.encode(), inputs, scalars, self._cb, None, ctypes.byref(h)))
        self._handle = h
        _live[self.name] = self
        self.__doc__ = fn.__doc__
        self.__name__ = self.name

    def __del__(self) -> None:
        if getattr(self, "_handle", None):
            _lib.lib.kaio_map_free(self._handle)
            self._handle = None

    def __call__(self, *arrays: Any, out: Any = None, scalars: Sequence[float] = (), stream: Any = None) -> Any:
        """out[i] = fn(arrays[0][i], ..., *scalars) over arrays of one dtype and shape."""
        if len(arrays) != self.inputs:
            raise UsageError.make(self.name, f"map '{self.name}' takes {self.inputs} arrays, got {len(arrays)}")
        h = stream_handle(stream, arrays[0])
        ts = [from_object(self.name, f"in{i}", a, h) for i, a in enumerate(arrays)]
        res = out if out is not None else empty_like(self.name, arrays[0], ts[0].shape, ts[0].dtype)
        to = from_object(self.name, "out", res, h)
        arr = (ctypes.c_void_p * len(ts))(*[t.addr for t in ts])
        sc = (ctypes.c_float * len(scalars))(*scalars) if scalars else None
        self._pending.check(_lib.lib.kaio_map_call(self._handle, to.ref, arr, len(ts), sc, len(scalars), h))
        return res

    def __repr__(self) -> str:
        return f"<kaio.map {self.name}: {self.inputs} inputs, {self.scalars} scalars>"


def map(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None, inputs: Optional[int] = None,
        scalars: int = 0) -> Any:
    """Makes a Map from fn; usable as @kaio.map or @kaio.map(name=..., scalars=...)."""
    if fn is None:
        return lambda f: Map(f, name, inputs, scalars)
    return Map(fn, name, inputs, scalars)
