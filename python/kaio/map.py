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

from . import _lib, _plans
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
        # A cached plan holds the map (its key does), so that its kernels can still be built.
        return _plans.call(("map", self), [out, *arrays], tuple(scalars), stream, self._miss, None)

    def _miss(self, key: Any, arrays: list, values: tuple, stream: Any, _: Any) -> Any:
        def make(ts: list, ph: Any, h: int) -> int:
            arr = (ctypes.c_void_p * (len(ts) - 1))(*[t.addr for t in ts[1:]])
            if ph is None:
                sc = (ctypes.c_float * len(values))(*values) if values else None
                return _lib.lib.kaio_map_call(self._handle, ts[0].addr, arr, len(ts) - 1, sc, len(values), h)
            return _lib.lib.kaio_plan_map(self._handle, ts[0].addr, arr, len(ts) - 1, len(values), ph)

        names = ("out",) + tuple(f"in{i}" for i in range(len(arrays) - 1))
        outs = {0: (1, arrays[0], lambda ts: ts[1].shape, lambda ts: ts[1].dtype)}
        return _plans.miss(key, self.name, arrays, names, outs, make, values, stream, ret=0, like=1,
                           check=self._pending.check)

    def __repr__(self) -> str:
        return f"<kaio.map {self.name}: {self.inputs} inputs, {self.scalars} scalars>"


def map(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None, inputs: Optional[int] = None,
        scalars: int = 0) -> Any:
    """Makes a Map from fn; usable as @kaio.map or @kaio.map(name=..., scalars=...)."""
    if fn is None:
        return lambda f: Map(f, name, inputs, scalars)
    return Map(fn, name, inputs, scalars)
