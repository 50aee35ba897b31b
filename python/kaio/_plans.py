"""The per-call fast path of kaio.ops: plans cached by the arrays' metadata.

A call first reads its arrays' metadata directly where that is cheap (torch tensors: dtype,
shape, strides, device; numpy arrays: their __array_interface__; on a device, objects with
__cuda_array_interface__ and __dlpack__, such as CuPy's) and looks the op up in a
cache keyed by the op, its options and that metadata. A hit holds a C plan (capi/kaio.h's
kaio_plan: the op checked and resolved once) and how to make the outputs, so the call is
one foreign call with the arrays' addresses, the op's numbers and the stream. A miss (or
an array of any other kind) takes the general path: every array through DLPack, the
outputs made as before, the plan made by the C ABI (which checks everything and raises the
errors the op's function raises) and launched; it is cached only when every array can be
read directly, so that a hit is only ever possible for metadata identical to what was
checked. Addresses are read on every call, never cached.

Where torch publishes a DLPack exchange table (torch.Tensor.__dlpack_c_exchange_api__), a hit
on torch tensors reads nothing in Python: each op's last plan is offered the tensors
themselves (kaio_plan_launch_objects), and the library reads them through the table and
compares their metadata with what the plan learned; a mismatch falls back to the lookup above.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import sys
import threading
from typing import Any, Callable, Optional, Sequence

from . import _lib
from ._tensors import Tensor, empty_like, from_object, interpret_mode, stream_handle

# The cache is cleared when it reaches this many plans (shapes that vary without bound would
# otherwise grow it without bound); a plan in use stays alive while its call runs.
MAX_PLANS = 4096
# False: every call takes the general path (for measuring it).
ENABLED = True

_cache: dict[Any, "Plan"] = {}
_lock = threading.Lock()  # only for inserting and clearing; lookups are dict reads
_INTERPRET = interpret_mode()
# Its own function object without argtypes: a bytes object crosses as its buffer, the
# cheapest ctypes call (one argument, nothing converted).
_launch_packed = _lib.lib["kaio_plan_launch_packed"]
_launch_packed.restype = ctypes.c_int
_free = _lib.lib.kaio_plan_free
# The launch on tensor objects (capi/kaio.h's kaio_plan_launch_objects): the library reads
# each tensor (by its address, id()) through its producer's DLPack exchange table, so a hit
# reads no field in Python. Called as a Python-API function: the interpreter lock stays held
# (the table's functions need it) and an error the producer sets is raised. One bytes
# argument, like _launch_packed: ctypes converts each argument at a cost.
_launch_objects = ctypes.PyDLL(_lib.lib._name)["kaio_plan_launch_objects"]
_launch_objects.restype = ctypes.c_int
_MISMATCH = 6  # KAIO_MISMATCH: the objects are not the plan's; nothing ran
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_torch_types: tuple[type, ...] = ()  # torch.Tensor and nn.Parameter once torch is imported
_raw_stream: Any = None
_ndarray: Any = None
_api: Optional[int] = None  # torch's DLPack exchange table, where torch has one (2.10 and later)
# The plan each op's last call on torch tensors ran, by op_key: out given, and out made.
# A call first offers its tensors to that plan (the library compares their metadata with
# the plan's); only a mismatch reads the fields in Python.
_last: dict[Any, "Plan"] = {}
_last_made: dict[Any, "Plan"] = {}


def _seen_modules() -> None:
    """Reads torch's and numpy's types once they are imported (kaio imports neither)."""
    global _torch_types, _raw_stream, _ndarray
    torch = sys.modules.get("torch")
    if torch is not None and not _torch_types and hasattr(torch, "Tensor"):
        _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        use_exchange_table(getattr(torch.Tensor, "__dlpack_c_exchange_api__", None))
        _torch_types = (torch.Tensor, torch.nn.Parameter)
    np = sys.modules.get("numpy")
    if np is not None and _ndarray is None:
        _ndarray = np.ndarray


def use_exchange_table(capsule: Any) -> None:
    """Launches hits on torch tensors through the DLPack exchange table in `capsule` (a
    "dlpack_exchange_api" capsule, as torch.Tensor.__dlpack_c_exchange_api__); None: reads
    the tensors' fields in Python."""
    global _api
    try:
        api = _capsule_pointer(capsule, b"dlpack_exchange_api") if capsule is not None else None
    except (ValueError, TypeError):  # not a capsule of that name: read the fields instead
        api = None
    with _lock:
        _last.clear()
        _last_made.clear()
        _api = api or None


def clear() -> None:
    """Drops every cached plan (plans in use finish their calls)."""
    with _lock:
        _cache.clear()
        _last.clear()
        _last_made.clear()


def size() -> int:
    """How many plans are cached."""
    return len(_cache)


class Plan:
    """A C plan and what a hit needs besides it: how to make the outputs and read their
    addresses, which arrays to return, and the default stream."""

    __slots__ = ("handle", "pack", "opack", "counts", "outs", "ret", "like", "stream_of", "check", "__weakref__")

    def __init__(self, handle: int, n_arrays: int, n_values: int, outs: tuple, ret: Any, like: int,
                 stream_of: Callable[[], int], check: Callable[[int], None]) -> None:
        self.handle = handle
        self.pack = struct.Struct(f"<{4 + n_arrays}Q{n_values}d").pack
        self.opack = struct.Struct(f"<{5 + n_arrays}Q{n_values}d").pack  # a launch on objects
        self.counts = (n_arrays, n_values)
        self.outs = outs  # ((slot, like's slot, make(like) -> array, address(array) -> int), ...)
        self.ret = ret  # the slot returned, or a pair of slots
        self.like = like  # the slot whose array new outputs are made like
        self.stream_of = stream_of
        self.check = check

    def __del__(self) -> None:
        try:
            if self.handle:
                _free(self.handle)
                self.handle = 0
        except Exception:  # noqa: BLE001  (at interpreter exit the library may be gone)
            pass


def call(op_key: tuple, arrays: list, values: tuple, stream: Any, miss: Callable[..., Any], extra: Any) -> Any:
    """Runs the op of op_key (its name and options) on arrays (exactly the plan's arrays, in
    its order; None where the plan makes an output) with the per-call numbers `values`: a
    cached plan when one matches, else miss(key, arrays, values, stream, extra) (key None:
    not cacheable)."""
    if not ENABLED:
        return miss(None, arrays, values, stream, extra)
    # The arrays' metadata and addresses, read directly (this is the hot path of every op).
    if not _torch_types or _ndarray is None:
        _seen_modules()
    key: list = [op_key, len(values)]  # a count that is not the plan's misses, and is refused there
    ptrs: list = []
    cai_streams: Optional[list] = None
    for x in arrays:
        t = x.__class__
        if t in _torch_types:
            key += (t, x.dtype, x.shape, x.stride(), x.device)
            ptrs.append(x.data_ptr())
        elif x is None:
            key.append(None)
            ptrs.append(0)
        elif t is _ndarray:
            ai = x.__array_interface__
            key += (t, ai["typestr"], ai["shape"], ai["strides"], ai["data"][1])
            ptrs.append(ai["data"][0])
        else:
            ci = None if _INTERPRET else _cai(x)
            if ci is None:
                return miss(None, arrays, values, stream, extra)
            key += (t, *ci[0])
            ptrs.append(ci[1])
            if ci[2] is not None:
                cai_streams = (cai_streams or []) + [ci[2]]
    k = tuple(key)
    plan = _cache.get(k)
    if plan is None:
        return miss(k, arrays, values, stream, extra)
    # Plan.launch, inlined.
    for slot, like_slot, make, address in plan.outs:
        o = make(arrays[like_slot])
        arrays[slot] = o
        ptrs[slot] = address(o)
    h = plan.stream_of() if stream is None else stream_handle(stream, arrays[plan.like])
    if cai_streams is not None and any(cs != h and not (cs == 1 and h == 0) for cs in cai_streams):
        # A producer's work pending on another stream: DLPack's stream= orders it (general path).
        return miss(None, arrays, values, stream, extra)
    st = _launch_packed(plan.pack(plan.handle, h, plan.counts[0], plan.counts[1], *ptrs, *values))
    if st:
        plan.check(st)
    r = plan.ret
    return arrays[r] if r.__class__ is int else tuple([arrays[i] for i in r])


_FAST: dict[tuple[int, int], Callable[..., Any]] = {}


def fast(n: int, out_slot: int = -1) -> Callable[..., Any]:
    """call() for an op of n arrays, passed one by one, whose slot `out_slot` (-1: none) the
    plan makes when it is None: generated once per (n, out_slot), so that a hit on torch
    tensors reads each tensor's fields straight into the key and the words (no loop, no list
    built and unpacked). Anything else (other kinds of arrays, a stream given, several outputs
    made) goes on to call(), which takes the same key."""
    f = _FAST.get((n, out_slot))
    if f is None:
        f = _FAST[(n, out_slot)] = _make_fast(n, out_slot)
    return f


def _make_fast(n: int, o: int) -> Callable[..., Any]:
    xs = [f"x{i}" for i in range(n)]
    xt = f"({', '.join(xs)},)"

    def key(made: int) -> str:  # call()'s key: each array's fields, None for the one made
        return ", ".join("None" if i == made else f"{x}.__class__, {x}.dtype, {x}.shape, {x}.stride(), {x}.device"
                         for i, x in enumerate(xs))

    def torch_all(made: int) -> str:
        return " and ".join([f"{x}.__class__ in tt" for i, x in enumerate(xs) if i != made] or ["True"])

    def returned(indent: str) -> list[str]:
        return [f"{indent}r = plan.ret", f"{indent}a = {xt}",
                f"{indent}return a[r] if r.__class__ is int else tuple([a[i] for i in r])"]

    def on_objects(indent: str, learn: int) -> list[str]:
        # The launch on the tensors themselves; the caller goes on when it returns. A tensor
        # the table cannot describe (torch raises) goes on to the path that reads its fields,
        # and from there to the general path's errors.
        return [f"{indent}try:",
                f"{indent}    st = _launch_objects(plan.opack(plan.handle, api, {learn}, {n}, len(values), "
                f"{', '.join(f'id({x})' for x in xs)}, *values))",
                f"{indent}except Exception:  # noqa: BLE001",
                f"{indent}    st = _MISMATCH",
                f"{indent}if not st:",
                *([f"{indent}    last[op_key] = plan"] if learn else []),
                *returned(indent + "    "),
                f"{indent}if st != _MISMATCH:", f"{indent}    plan.check(st)"]

    def launch(indent: str, last: str) -> list[str]:
        return [f"{indent}if api is not None:", f"{indent}    last = {last}", *on_objects(indent + "    ", 1),
                f"{indent}st = _launch_packed(plan.pack(plan.handle, plan.stream_of(), {n}, len(values), "
                f"{', '.join(x + '.data_ptr()' for x in xs)}, *values))",
                f"{indent}if st:", f"{indent}    plan.check(st)", *returned(indent)]

    def offer(indent: str, last: str, made: bool) -> list[str]:
        # The op's last plan, offered the tensors first (no field read in Python).
        mk = [f"{indent}        _, like, make, _ = plan.outs[0]", f"{indent}        {xs[o]} = make({xt}[like])"]
        return [f"{indent}api = _api",
                f"{indent}if api is not None:",
                f"{indent}    plan = {last}.get(op_key)",
                f"{indent}    if plan is not None and plan.counts[0] == {n} and plan.counts[1] == len(values):",
                *(mk if made else []),
                *on_objects(indent + "        ", 0),
                *([f"{indent}        {xs[o]} = None"] if made else [])]

    src = [f"def call_{n}_{o + 1}(op_key, {', '.join(xs)}, values, stream, miss, extra):",
           "    tt = _torch_types",
           "    if stream is None and ENABLED and tt:"]
    cond = "if"
    if o >= 0:
        src += [f"        if {xs[o]} is None:",
                f"            if {torch_all(o)}:",
                *offer("                ", "_last_made", True),
                f"                plan = _cache.get((op_key, len(values), {key(o)}))",
                "                if plan is not None and len(plan.outs) == 1:",
                "                    _, like, make, _ = plan.outs[0]",
                f"                    {xs[o]} = make({xt}[like])",
                *launch("                    ", "_last_made")]
        cond = "elif"
    src += [f"        {cond} {torch_all(-1)}:",
            *offer("            ", "_last", False),
            f"            plan = _cache.get((op_key, len(values), {key(-1)}))",
            "            if plan is not None and not plan.outs:",
            *launch("                ", "_last")]
    src += [f"    return call(op_key, [{', '.join(xs)}], values, stream, miss, extra)"]
    ns: dict[str, Any] = {}
    exec("\n".join(src), globals(), ns)  # noqa: S102  (our own template: the arity's names only)
    return ns[f"call_{n}_{o + 1}"]


def call_fast(op_key: tuple, arrays: list, out_slot: int, values: tuple, stream: Any, miss: Callable[..., Any],
              extra: Any) -> Any:
    """fast(len(arrays), out_slot) on a list of arrays (for ops whose count of arrays varies)."""
    return fast(len(arrays), out_slot)(op_key, *arrays, values, stream, miss, extra)


def _cai(x: Any) -> Optional[tuple[tuple, int, Optional[int]]]:
    """(metadata, element-0 address, the producer's stream or None) of an object with
    __cuda_array_interface__ (CuPy, Numba, ...) that also has __dlpack__ (what a miss reads);
    None for any other object, or for a masked array."""
    ci = getattr(x, "__cuda_array_interface__", None)
    if ci is None or not hasattr(x, "__dlpack__") or ci.get("mask") is not None:
        return None
    dev = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else None
    ptr, readonly = ci["data"]
    return (ci["typestr"], tuple(ci["shape"]), ci.get("strides"), readonly, dev), ptr, ci.get("stream")


def _stream_default(like: Any) -> Callable[[], int]:
    # C-level callables where possible (int() is 0; a partial of torch's raw-stream reader):
    # a hit calls one per call, and a Python lambda would add a frame.
    if _INTERPRET:
        return int
    if like.__class__ in _torch_types:
        idx = like.device.index or 0
        if _raw_stream is not None:
            return functools.partial(_raw_stream, idx)
        torch = sys.modules["torch"]
        return lambda: int(torch.cuda.current_stream(idx).cuda_stream)
    # What stream_handle(None, like) gives, without holding like (a plan must not keep arrays).
    if like.__class__.__module__.split(".")[0] == "cupy":
        cupy = sys.modules["cupy"]
        return lambda: int(cupy.cuda.get_current_stream().ptr)
    return lambda: 0


def _maker(op: str, like: Any, shape: Sequence[int], dtype: str) -> Optional[tuple[Callable, Callable]]:
    """How a hit makes an output that the miss made with empty_like(op, like, shape, dtype),
    and reads its address: the same array (type, dtype, shape, strides, device) for an input
    of like's metadata. None when the output's kind is not read directly."""
    t = like.__class__
    shape = tuple(shape)
    if t in _torch_types:
        torch = sys.modules["torch"]
        tdt = getattr(torch, dtype)
        dense = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            dense[i] = dense[i + 1] * shape[i + 1]
        if t is torch.Tensor and tdt == like.dtype and tuple(like.shape) == shape and like.stride() == tuple(dense):
            # empty_like keeps a dense row-major layout exactly: what torch.empty makes, faster.
            return torch.empty_like, torch.Tensor.data_ptr
        dev = like.device
        return (lambda _like: torch.empty(shape, dtype=tdt, device=dev)), torch.Tensor.data_ptr
    if t is _ndarray:
        np = sys.modules["numpy"]
        if dtype == "bfloat16":
            return None
        ndt = np.dtype(dtype)
        return (lambda _like: np.empty(shape, dtype=ndt)), (lambda a: a.__array_interface__["data"][0])
    return None


def miss(key: Optional[tuple], op: str, arrays: list, names: Sequence[str], outs: dict, make_plan: Callable,
         values: tuple, stream: Any, ret: Any, like: int = 0, check: Callable[[int], None] = _lib.check) -> Any:  # noqa: PLR0913
    """The general path: each array through from_object (DLPack, or torch's fields), each
    output made as the op made it (outs: slot -> (like's slot, given array or None, shape
    function of the read inputs, dtype function)), then make_plan(tensors, handle_out,
    stream): with a handle_out, the C plan is made, launched, and cached under key when
    every output's kind is read directly; with None (key None), the op's C function runs."""
    h = stream_handle(stream, arrays[like])
    ts: list[Optional[Tensor]] = [None] * len(arrays)
    for i, (x, name) in enumerate(zip(arrays, names)):
        if x is not None and i not in outs:
            ts[i] = from_object(op, name, x, h)
    makers = []
    arrays = list(arrays)
    for slot, (like_slot, given, shape_of, dtype_of) in outs.items():
        if given is None:
            shape, dtype = shape_of(ts), dtype_of(ts)
            arrays[slot] = empty_like(op, arrays[like_slot], shape, dtype)
            mk = _maker(op, arrays[like_slot], shape, dtype) if key is not None else None
            if mk is None:
                key = None
            makers.append((slot, like_slot, mk))
        ts[slot] = from_object(op, names[slot], arrays[slot], h)
    if key is None:  # not cacheable: the op's own C function, one call
        st = make_plan(ts, None, h)
        if st:
            check(st)
        return arrays[ret] if isinstance(ret, int) else tuple(arrays[i] for i in ret)
    handle = ctypes.c_void_p()
    check(make_plan(ts, ctypes.byref(handle), h))
    ptrs = [t.data for t in ts if t is not None]
    n = len(ptrs)  # the plan's count: the launch checks it
    try:
        st = _launch_packed(struct.pack(f"<{4 + n}Q{len(values)}d", handle.value, h, n, len(values), *ptrs, *values))
        if st:
            check(st)
        if _cache.get(key) is None:
            plan = Plan(handle.value or 0, n, len(values), tuple((s, ls, mk[0], mk[1]) for s, ls, mk in makers if mk), ret,
                        like, _stream_default(arrays[like]), check)
            handle = None  # the cached plan owns it
            with _lock:
                if len(_cache) >= MAX_PLANS:
                    _cache.clear()
                _cache[key] = plan
    finally:
        if handle is not None and handle.value:
            _free(handle)
    return arrays[ret] if isinstance(ret, int) else tuple(arrays[i] for i in ret)

