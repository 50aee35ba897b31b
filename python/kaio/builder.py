"""The fluent kernel builder from Python, as in C++ (kaio::ir::KernelBuilder):

    b = kaio.KernelBuilder("saxpy")
    a = b.param(kaio.f32, "a")
    x = b.param(kaio.const_f32_ptr, "x")
    y = b.param(kaio.f32_ptr, "y")
    n = b.param(kaio.u32, "n")
    i = b.global_id_x()
    b.if_(i < n, lambda: y.__setitem__(i, a * x[i] + y[i]))   # or a def
    kernel = b.build()

Operators on values append instructions; literals take the type of the value they meet;
`p[i]` loads, `p[i] = v` stores. Python's `and`, `or`, `not` and `if` cannot be overloaded:
use `&`, `|`, `~` and b.if_. Every misuse is a kaio.UsageError naming kernel and op.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional, Union

from . import _lib
from .errors import CallbackError, UsageError


class DType(str):
    """An IR type, written as the IR printer writes it: "f32", "ptr<const f32>"."""

    @property
    def is_pointer(self) -> bool:
        return self.startswith("ptr<")


pred = DType("pred")
s8, s16, s32, s64 = DType("s8"), DType("s16"), DType("s32"), DType("s64")
u8, u16, u32, u64 = DType("u8"), DType("u16"), DType("u32"), DType("u64")
f16, bf16, f32, f64 = DType("f16"), DType("bf16"), DType("f32"), DType("f64")


def ptr(elem: str, const: bool = False) -> DType:
    """The type of a global pointer to elem (const: read-only)."""
    return DType(f"ptr<{'const ' if const else ''}{elem}>")


f32_ptr, const_f32_ptr = ptr(f32), ptr(f32, True)
f16_ptr, const_f16_ptr = ptr(f16), ptr(f16, True)
bf16_ptr, const_bf16_ptr = ptr(bf16), ptr(bf16, True)
u32_ptr, const_u32_ptr = ptr(u32), ptr(u32, True)
s32_ptr, const_s32_ptr = ptr(s32), ptr(s32, True)
s64_ptr, const_s64_ptr = ptr(s64), ptr(s64, True)

Operand = Union["Value", "Var", bool, int, float]


class _Pending:
    """A Python exception raised inside a callback, re-raised once the C call returns."""

    def __init__(self) -> None:
        self.exc: Optional[BaseException] = None

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., int]:
        def cb(*args: Any) -> int:
            try:
                fn(*args)
                return 0
            except BaseException as e:  # re-raised by check() once the C call returns
                self.exc = e
                return 1

        return cb

    def check(self, status: int) -> None:
        if status == 5 and self.exc is not None:
            e, self.exc = self.exc, None
            raise e
        if status == 5:
            raise CallbackError("a builder callback failed")
        _lib.check(status)


class KernelBuilder:
    """Builds one kernel (kaio::ir::KernelBuilder). See the module's docstring."""

    def __init__(self, name: str, _borrowed: Optional[int] = None) -> None:
        self._pending = _Pending()
        self._keep: list[Any] = []  # callbacks of the current build
        self._params = 0
        if _borrowed is not None:
            self._h = ctypes.c_void_p(_borrowed)
            self._owned = False
            self.name = name
            return
        h = ctypes.c_void_p()
        _lib.check(_lib.lib.kaio_builder_new(name.encode(), ctypes.byref(h)))
        self._h = h
        self._owned = True
        self.name = name

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and self._h:
            _lib.lib.kaio_builder_free(self._h)
            self._h = ctypes.c_void_p()

    # ---- plumbing ----
    def _call(self, fn: Any, *args: Any) -> None:
        self._pending.check(fn(self._h, *args))

    def _value(self, fn: Any, *args: Any) -> "Value":
        out = ctypes.c_uint32()
        self._pending.check(fn(self._h, *args, ctypes.byref(out)))
        return Value(self, out.value)

    def _operand(self, x: Any) -> _lib.Operand:
        if isinstance(x, Var):
            x = x.get()
        if isinstance(x, Value):
            if x.b is not self:
                raise UsageError.make("operand", "a value of another builder", self.name)
            return _lib.Operand(0, x.id, 0, 0, 0.0)
        if isinstance(x, bool):
            return _lib.Operand(1, 0, int(x), int(x), float(x))
        if isinstance(x, int):
            if x >= 2**63:
                return _lib.Operand(3, 0, 0, x, 0.0)
            return _lib.Operand(2, 0, x, 0, 0.0)
        if isinstance(x, float):
            return _lib.Operand(4, 0, 0, 0, x)
        raise UsageError.make("operand", f"{type(x).__name__} is not a kernel value or a number", self.name)

    def type_of(self, v: "Value") -> DType:
        buf = ctypes.create_string_buffer(64)
        self._call(_lib.lib.kaio_builder_value_type, v.id, buf, 64)
        return DType(buf.value.decode())

    # ---- parameters, constants, special registers ----
    def param(self, type: str, name: Optional[str] = None) -> "Value":
        """The next kernel parameter (launch order) of `type`, e.g. kaio.f32_ptr."""
        if name is None:
            name = f"p{self._params}"
        self._params += 1
        return self._value(_lib.lib.kaio_builder_param, name.encode(), str(type).encode())

    def spec(self, name: str, type: str, value: Union[int, float, bool]) -> "Value":
        """A specialization constant: a named compile-time value that enters the cache key."""
        return self._value(_lib.lib.kaio_builder_spec, name.encode(), str(type).encode(), self._operand(value))

    def constant(self, type: str, value: Union[int, float, bool]) -> "Value":
        return self._value(_lib.lib.kaio_builder_constant, str(type).encode(), self._operand(value))

    def _special(self, which: str) -> "Value":
        return self._value(_lib.lib.kaio_builder_special, which.encode())

    def thread_idx_x(self) -> "Value": return self._special("thread_idx_x")
    def thread_idx_y(self) -> "Value": return self._special("thread_idx_y")
    def thread_idx_z(self) -> "Value": return self._special("thread_idx_z")
    def block_idx_x(self) -> "Value": return self._special("block_idx_x")
    def block_idx_y(self) -> "Value": return self._special("block_idx_y")
    def block_idx_z(self) -> "Value": return self._special("block_idx_z")
    def block_dim_x(self) -> "Value": return self._special("block_dim_x")
    def block_dim_y(self) -> "Value": return self._special("block_dim_y")
    def block_dim_z(self) -> "Value": return self._special("block_dim_z")
    def grid_dim_x(self) -> "Value": return self._special("grid_dim_x")
    def grid_dim_y(self) -> "Value": return self._special("grid_dim_y")
    def grid_dim_z(self) -> "Value": return self._special("grid_dim_z")
    def global_id_x(self) -> "Value": return self._special("global_id_x")
    def global_id_y(self) -> "Value": return self._special("global_id_y")
    def global_id_z(self) -> "Value": return self._special("global_id_z")
    def lane_id(self) -> "Value": return self._special("lane_id")
    def warp_id(self) -> "Value": return self._special("warp_id")

    # ---- variables and memory ----
    def var(self, type: str, init: Operand) -> "Var":
        """A mutable variable: acc = b.var(kaio.f32, 0.0); acc += x[i]."""
        out = ctypes.c_uint32()
        self._call(_lib.lib.kaio_builder_var, str(type).encode(), self._operand(init), ctypes.byref(out))
        return Var(self, out.value)

    def shared(self, elem: str, count: int, align: int = 16) -> "Value":
        """A shared-memory array of count elements (a ptr<shared elem>)."""
        if count <= 0:
            raise UsageError.make("shared", f"count = {count}: use dynamic_shared for dynamic shared memory", self.name)
        return self._value(_lib.lib.kaio_builder_shared, str(elem).encode(), count, align)

    def dynamic_shared(self, elem: str, align: int = 16) -> "Value":
        """The dynamic shared memory (sized at launch by shared_bytes)."""
        return self._value(_lib.lib.kaio_builder_shared, str(elem).encode(), 0, align)

    def barrier(self) -> None:
        """Every thread of the block waits here (bar.sync 0)."""
        self._call(_lib.lib.kaio_builder_barrier)

    def load(self, p: "Value", index: Operand, hint: str = "") -> "Value":
        return self._value(_lib.lib.kaio_builder_load, p.id, self._operand(index), hint.encode())

    def store(self, p: "Value", index: Operand, v: Operand, hint: str = "") -> None:
        self._call(_lib.lib.kaio_builder_store, p.id, self._operand(index), self._operand(v), hint.encode())

    # ---- warp and block collectives ----
    def _reduce(self, which: str, v: Operand) -> "Value":
        return self._value(_lib.lib.kaio_builder_reduce, which.encode(), _as_value(self, v).id)

    def warp_reduce_sum(self, v: Operand) -> "Value": return self._reduce("warp_sum", v)
    def warp_reduce_max(self, v: Operand) -> "Value": return self._reduce("warp_max", v)
    def warp_reduce_min(self, v: Operand) -> "Value": return self._reduce("warp_min", v)
    def block_reduce_sum(self, v: Operand) -> "Value": return self._reduce("block_sum", v)
    def block_reduce_max(self, v: Operand) -> "Value": return self._reduce("block_max", v)
    def block_reduce_min(self, v: Operand) -> "Value": return self._reduce("block_min", v)
    def block_scan_inclusive(self, v: Operand) -> "Value": return self._reduce("block_scan_inclusive", v)
    def block_scan_exclusive(self, v: Operand) -> "Value": return self._reduce("block_scan_exclusive", v)

    # ---- control flow ----
    def if_(self, cond: Operand, then: Callable[[], Any]) -> "IfChain":
        """Runs `then` (which builds the body) under cond; .else_(fn) adds the else body."""
        cb = _lib.BLOCK_FN(self._pending.wrap(lambda _u: then()))
        self._keep.append(cb)
        chain = ctypes.c_uint32()
        self._call(_lib.lib.kaio_builder_if, _as_value(self, cond).id, cb, None, ctypes.byref(chain))
        return IfChain(self, chain.value)

    def for_(self, lo: Operand, hi: Operand, *rest: Any) -> None:
        """for (i = lo; i < hi; i += step) body(i): b.for_(lo, hi, body) or b.for_(lo, hi, step, body)."""
        if len(rest) == 1:
            step, body = 1, rest[0]
        elif len(rest) == 2:
            step, body = rest
        else:
            raise UsageError.make("for_", "expected for_(lo, hi, body) or for_(lo, hi, step, body)", self.name)
        cb = _lib.LOOP_FN(self._pending.wrap(lambda _u, i: body(Value(self, i))))
        self._keep.append(cb)
        self._call(_lib.lib.kaio_builder_for, self._operand(lo), self._operand(hi), self._operand(step), cb, None)

    def while_(self, cond: Callable[[], Operand], body: Callable[[], Any]) -> None:
        """while (cond()) body(): cond builds and returns the condition each time round."""

        def c(_u: Any, out: Any) -> None:
            out[0] = _as_value(self, cond()).id

        ccb = _lib.COND_FN(self._pending.wrap(c))
        bcb = _lib.BLOCK_FN(self._pending.wrap(lambda _u: body()))
        self._keep += [ccb, bcb]
        self._call(_lib.lib.kaio_builder_while, ccb, None, bcb, None)

    def return_(self) -> None:
        self._call(_lib.lib.kaio_builder_return)

    # ---- attributes ----
    def launch_bounds(self, max_threads_per_block: int, min_blocks_per_sm: int = 0) -> None:
        self._call(_lib.lib.kaio_builder_launch_bounds, max_threads_per_block, min_blocks_per_sm)

    def max_registers(self, regs: int) -> None:
        self._call(_lib.lib.kaio_builder_max_registers, regs)

    def fast_math(self, on: bool = True) -> None:
        self._call(_lib.lib.kaio_builder_fast_math, int(on))

    def comment(self, text: str) -> None:
        self._call(_lib.lib.kaio_builder_comment, text.encode())

    def build(self) -> "Kernel":
        """The verified kernel (the builder is finished)."""
        out = ctypes.c_void_p()
        self._call(_lib.lib.kaio_builder_build, ctypes.byref(out))
        self._keep.clear()
        return Kernel(out)


class IfChain:
    def __init__(self, b: KernelBuilder, chain: int) -> None:
        self.b = b
        self.chain = chain

    def else_(self, body: Callable[[], Any]) -> None:
        """The else body; must directly follow its if_."""
        cb = _lib.BLOCK_FN(self.b._pending.wrap(lambda _u: body()))
        self.b._keep.append(cb)
        self.b._call(_lib.lib.kaio_builder_else, self.chain, cb, None)


class Kernel:
    """A verified, immutable kernel (kaio::ir::Kernel)."""

    def __init__(self, handle: ctypes.c_void_p) -> None:
        self._h = handle

    def __del__(self) -> None:
        if getattr(self, "_h", None):
            _lib.lib.kaio_kernel_free(self._h)
            self._h = None

    @property
    def name(self) -> str:
        return (_lib.lib.kaio_kernel_str(self._h, b"name") or b"").decode()

    @property
    def ir(self) -> str:
        """The kernel's canonical text form."""
        return (_lib.lib.kaio_kernel_str(self._h, b"ir") or b"").decode()

    def cache_key(self, arch: str = "") -> str:
        """The cache key (32 hex digits) kaio.compile() uses for arch (default: the device's)."""
        buf = ctypes.create_string_buffer(33)
        _lib.check(_lib.lib.kaio_kernel_cache_key(self._h, arch.encode(), buf))
        return buf.value.decode()


def _as_value(b: KernelBuilder, x: Any) -> "Value":
    if isinstance(x, Var):
        return x.get()
    if isinstance(x, Value):
        return x
    raise UsageError.make("operand", f"expected a kernel value, got {type(x).__name__}", b.name)


def _builder_of(*xs: Any) -> KernelBuilder:
    for x in xs:
        if isinstance(x, (Value, Var)):
            return x.b
    raise UsageError.make("operand", "at least one operand must be a kernel value")


def _binary(op: str, x: Any, y: Any) -> "Value":
    b = _builder_of(x, y)
    return b._value(_lib.lib.kaio_builder_binary, op.encode(), b._operand(x), b._operand(y))


def _unary(op: str, x: Any) -> "Value":
    b = _builder_of(x)
    return b._value(_lib.lib.kaio_builder_unary, op.encode(), _as_value(b, x).id)


class _Expr:
    """Operators shared by values and variables."""

    b: KernelBuilder

    def __add__(self, o: Any) -> "Value": return _binary("add", self, o)
    def __radd__(self, o: Any) -> "Value": return _binary("add", o, self)
    def __sub__(self, o: Any) -> "Value": return _binary("sub", self, o)
    def __rsub__(self, o: Any) -> "Value": return _binary("sub", o, self)
    def __mul__(self, o: Any) -> "Value": return _binary("mul", self, o)
    def __rmul__(self, o: Any) -> "Value": return _binary("mul", o, self)
    def __truediv__(self, o: Any) -> "Value": return _binary("div", self, o)
    def __rtruediv__(self, o: Any) -> "Value": return _binary("div", o, self)
    def __floordiv__(self, o: Any) -> "Value": return _binary("div", self, o)
    def __rfloordiv__(self, o: Any) -> "Value": return _binary("div", o, self)
    def __mod__(self, o: Any) -> "Value": return _binary("rem", self, o)
    def __rmod__(self, o: Any) -> "Value": return _binary("rem", o, self)
    def __and__(self, o: Any) -> "Value": return _binary("and", self, o)
    def __rand__(self, o: Any) -> "Value": return _binary("and", o, self)
    def __or__(self, o: Any) -> "Value": return _binary("or", self, o)
    def __ror__(self, o: Any) -> "Value": return _binary("or", o, self)
    def __xor__(self, o: Any) -> "Value": return _binary("xor", self, o)
    def __rxor__(self, o: Any) -> "Value": return _binary("xor", o, self)
    def __lshift__(self, o: Any) -> "Value": return _binary("shl", self, o)
    def __rshift__(self, o: Any) -> "Value": return _binary("shr", self, o)
    def __lt__(self, o: Any) -> "Value": return _binary("lt", self, o)
    def __le__(self, o: Any) -> "Value": return _binary("le", self, o)
    def __gt__(self, o: Any) -> "Value": return _binary("gt", self, o)
    def __ge__(self, o: Any) -> "Value": return _binary("ge", self, o)
    def __eq__(self, o: Any) -> "Value": return _binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> "Value": return _binary("ne", self, o)  # type: ignore[override]
    def __neg__(self) -> "Value": return _unary("neg", self)
    def __invert__(self) -> "Value": return _unary("not", self)
    def __abs__(self) -> "Value": return _unary("abs", self)
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise UsageError.make(
            "bool", "a kernel value has no truth value while the kernel is built: use b.if_ / kaio.select, "
            "and &, |, ~ instead of and, or, not", self.b.name)


class Value(_Expr):
    """An immutable SSA value of the kernel under construction."""

    __slots__ = ("b", "id")

    def __init__(self, b: KernelBuilder, id: int) -> None:
        self.b = b
        self.id = id

    @property
    def type(self) -> DType:
        return self.b.type_of(self)

    def __getitem__(self, index: Operand) -> "Value":
        return self.b.load(self, index)

    def __setitem__(self, index: Operand, v: Operand) -> None:
        self.b.store(self, index, v)

    def __repr__(self) -> str:
        return f"<kaio.Value %{self.id}: {self.type}>"


class Var(_Expr):
    """A mutable variable; reading it gives the value it holds at that point."""

    __slots__ = ("b", "id")

    def __init__(self, b: KernelBuilder, id: int) -> None:
        self.b = b
        self.id = id

    def get(self) -> Value:
        return self.b._value(_lib.lib.kaio_builder_var_get, self.id)

    def set(self, v: Operand) -> None:
        self.b._call(_lib.lib.kaio_builder_var_set, self.id, self.b._operand(v))

    def __iadd__(self, o: Any) -> "Var":
        self.set(self.get() + o)
        return self

    def __isub__(self, o: Any) -> "Var":
        self.set(self.get() - o)
        return self

    def __imul__(self, o: Any) -> "Var":
        self.set(self.get() * o)
        return self

    def __itruediv__(self, o: Any) -> "Var":
        self.set(self.get() / o)
        return self


# ---- free functions, as in C++ (kaio::ir::exp, ...) ----
def _mk_unary(op: str) -> Callable[[Any], Value]:
    def f(x: Any) -> Value:
        return _unary(op, x)

    f.__name__ = op
    f.__doc__ = f"The IR op '{op}' of a kernel value."
    return f


abs_ = _mk_unary("abs")
sqrt, rsqrt, exp, log, tanh = (_mk_unary(n) for n in ("sqrt", "rsqrt", "exp", "log", "tanh"))
sin, cos, rcp, exp2, log2, erf = (_mk_unary(n) for n in ("sin", "cos", "rcp", "exp2", "log2", "erf"))
floor, ceil, round_, trunc, rint = (_mk_unary(n) for n in ("floor", "ceil", "round", "trunc", "rint"))
isnan, isinf = _mk_unary("isnan"), _mk_unary("isinf")


def min_(x: Any, y: Any) -> Value: return _binary("min", x, y)
def max_(x: Any, y: Any) -> Value: return _binary("max", x, y)
def pow_(x: Any, y: Any) -> Value: return _binary("pow", x, y)
def copysign(x: Any, y: Any) -> Value: return _binary("copysign", x, y)


def fma(x: Any, y: Any, z: Any) -> Value:
    """x * y + z in one rounding."""
    b = _builder_of(x, y, z)
    return b._value(_lib.lib.kaio_builder_fma, b._operand(x), b._operand(y), b._operand(z))


def select(cond: Any, x: Any, y: Any) -> Value:
    """cond ? x : y."""
    b = _builder_of(cond)
    return b._value(_lib.lib.kaio_builder_select, _as_value(b, cond).id, b._operand(x), b._operand(y))


def cast(x: Any, to: str, rounding: str = "", saturate: bool = False) -> Value:
    """x converted to type `to` (rounding "", "rn", "rz", "rm", "rp"; saturate: cast_sat)."""
    b = _builder_of(x)
    return b._value(_lib.lib.kaio_builder_cast, _as_value(b, x).id, str(to).encode(), rounding.encode(), int(saturate))


def _shfl(mode: str, v: Any, lane: Any, width: int, mask: int) -> Value:
    b = _builder_of(v)
    return b._value(_lib.lib.kaio_builder_shfl, mode.encode(), _as_value(b, v).id, b._operand(lane), width, mask)


def shfl_down(v: Any, delta: Any, width: int = 32, mask: int = 0xFFFFFFFF) -> Value: return _shfl("down", v, delta, width, mask)
def shfl_up(v: Any, delta: Any, width: int = 32, mask: int = 0xFFFFFFFF) -> Value: return _shfl("up", v, delta, width, mask)
def shfl_xor(v: Any, lane_mask: Any, width: int = 32, mask: int = 0xFFFFFFFF) -> Value: return _shfl("xor", v, lane_mask, width, mask)
def shfl_idx(v: Any, lane: Any, width: int = 32, mask: int = 0xFFFFFFFF) -> Value: return _shfl("idx", v, lane, width, mask)


def _vote(mode: str, p: Any, mask: int) -> Value:
    b = _builder_of(p)
    return b._value(_lib.lib.kaio_builder_vote, mode.encode(), _as_value(b, p).id, mask)


def vote_all(p: Any, mask: int = 0xFFFFFFFF) -> Value: return _vote("all", p, mask)
def vote_any(p: Any, mask: int = 0xFFFFFFFF) -> Value: return _vote("any", p, mask)
def ballot(p: Any, mask: int = 0xFFFFFFFF) -> Value: return _vote("ballot", p, mask)


def _atomic(op: str, p: Value, index: Any, v: Any, cmp: Any = 0) -> Value:
    b = p.b
    return b._value(_lib.lib.kaio_builder_atomic, op.encode(), p.id, b._operand(index), b._operand(cmp), b._operand(v))


def atomic_add(p: Value, index: Any, v: Any) -> Value: return _atomic("add", p, index, v)
def atomic_min(p: Value, index: Any, v: Any) -> Value: return _atomic("min", p, index, v)
def atomic_max(p: Value, index: Any, v: Any) -> Value: return _atomic("max", p, index, v)
def atomic_exch(p: Value, index: Any, v: Any) -> Value: return _atomic("exch", p, index, v)
def atomic_cas(p: Value, index: Any, compare: Any, v: Any) -> Value: return _atomic("cas", p, index, v, compare)
