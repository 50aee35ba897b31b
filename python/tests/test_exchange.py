"""Hits launched through a producer's DLPack exchange table (kaio_plan_launch_objects): the
library reads each tensor through the table's functions, so a hit reads no field in Python.
The producer here is a stand-in for torch: TorchLike arrays, registered as torch's tensor
type, and an exchange table whose reader is a Python callback over them. Every call gets
fresh inputs and a poisoned output and is compared with numpy in float64; other metadata,
unusable tables and many threads fall back to the field-reading path and stay right.
(Outputs the op makes are torch's own: python/tests/test_torch.py covers them on the device.)"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable

import numpy as np
import pytest

from kaio import _lib, _plans, errors, ops

from support import TorchLike, close, rng

pytestmark = pytest.mark.interpret

READER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_lib.DLTensor))
WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
CAPSULE_NAME = b"dlpack_exchange_api"  # outlives every capsule made with it
DL_CODES = {np.dtype(np.float32): (2, 32), np.dtype(np.float16): (2, 16), np.dtype(np.int64): (0, 64)}


class Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev", ctypes.c_void_p)]


class Table(ctypes.Structure):
    """DLPack's DLPackExchangeAPI (its published layout)."""

    _fields_ = [("header", Header), ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", READER), ("current_work_stream", WORK_STREAM)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Producer:
    """An exchange table over TorchLike arrays; `reads` counts the tensors it was asked for."""

    def __init__(self, major: int = 1, minor: int = 3, reader: bool = True, prev: Any = None) -> None:
        self.reads = 0
        self._reader, self._stream = READER(self._read), WORK_STREAM(self._work_stream)
        self.prev = prev  # kept alive: the table points at its header
        self.table = Table(Header(major, minor, ctypes.addressof(prev.table) if prev else None), None, None, None,
                           self._reader if reader else READER(), self._stream)
        self.capsule = _capsule_new(ctypes.addressof(self.table), CAPSULE_NAME, None)

    def _read(self, obj: int, out: Any) -> int:
        x = ctypes.cast(obj, ctypes.py_object).value
        self.reads += 1
        a = x.arr
        x.dl_dims = (ctypes.c_int64 * (2 * a.ndim))(*a.shape, *(s // a.itemsize for s in a.strides))
        d = out.contents
        d.data = a.__array_interface__["data"][0]
        d.device.device_type, d.device.device_id = 1, 0
        d.ndim = a.ndim
        d.dtype.code, d.dtype.bits = DL_CODES[a.dtype]
        d.dtype.lanes = 1
        base = ctypes.addressof(x.dl_dims)
        d.shape = ctypes.cast(base, ctypes.POINTER(ctypes.c_int64))
        d.strides = ctypes.cast(base + 8 * a.ndim, ctypes.POINTER(ctypes.c_int64))
        d.byte_offset = 0
        return 0

    def _work_stream(self, _type: int, _id: int, out: Any) -> int:
        out[0] = None
        return 0


class Counted(TorchLike):
    """TorchLike that counts the reads of its strides (what the field-reading path does)."""

    stride_reads = 0

    def stride(self) -> tuple:
        Counted.stride_reads += 1
        return super().stride()


def install(monkeypatch: pytest.MonkeyPatch, p: Producer) -> None:
    """p's table and TorchLike as torch's, until the test ends (torch's own come back)."""
    _plans._seen_modules()
    monkeypatch.setattr(_plans, "_torch_types", (TorchLike, Counted))
    monkeypatch.setattr(_plans, "_api", _plans._api)
    _plans.clear()
    _plans.use_exchange_table(p.capsule)


@pytest.fixture(autouse=True)
def fresh_cache() -> Any:
    yield
    _plans.clear()


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> Any:
    p = Producer()
    install(monkeypatch, p)
    Counted.stride_reads = 0
    return p


def f32(*shape: int, seed: int) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(np.float32)


def poisoned(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, np.float32)


def test_hits_go_through_the_table_and_read_no_field(producer: Producer) -> None:
    for call in range(6):
        a, b, out = f32(300, seed=call), f32(300, seed=100 + call), poisoned(300)
        reads, strides = producer.reads, Counted.stride_reads
        ops.add(Counted(a), Counted(b), out=Counted(out))
        close(out, a.astype(np.float64) + b, np.float32)
        if call == 0:
            assert producer.reads == reads  # the miss: the general path, no table
        elif call == 1:
            assert producer.reads == reads + 3  # the plan learns the tensors' metadata
        else:
            assert (producer.reads, Counted.stride_reads) == (reads + 3, strides), "a hit read the fields"


def test_each_calls_numbers_cross(producer: Producer) -> None:
    x, y, w = f32(4, 96, seed=1), f32(4, 96, seed=2), f32(96, seed=3)
    x64 = x.astype(np.float64)
    for call, (alpha, beta, eps) in enumerate([(0.5, 2.0, 1e-6), (-1.0, 0.25, 1e-2), (3.0, 0.0, 1.0), (1.5, -2, 4.0)]):
        out = poisoned(4, 96)
        ops.axpby(TorchLike(x), TorchLike(y), alpha, beta, out=TorchLike(out))
        close(out, alpha * x64 + beta * y, np.float32)
        out = poisoned(4, 96)
        ops.rms_norm(TorchLike(x), TorchLike(w), eps, out=TorchLike(out))
        close(out, x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w, np.float32)
    assert producer.reads >= 2 * (3 + 3)  # both ops reached the table on their later calls


def test_other_metadata_falls_back_and_is_learned(producer: Producer) -> None:
    shapes = [(5, 64), (5, 65), (7, 64), (5, 64), (5, 65), (5, 65), (7, 64), (5, 64)]
    for call, shape in enumerate(shapes):
        x, out = f32(*shape, seed=call), poisoned(*shape)
        ops.softmax(TorchLike(x), out=TorchLike(out))
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        close(out, e / e.sum(-1, keepdims=True), np.float32)
    # Strides alone differ: a column-major operand is another plan, never the row-major one's.
    a, b = f32(6, 40, seed=20), f32(40, 9, seed=21)
    ref = a.astype(np.float64) @ b
    for layout in [b, np.asfortranarray(b), b, np.asfortranarray(b)]:
        out = poisoned(6, 9)
        ops.matmul(TorchLike(a), TorchLike(layout), out=TorchLike(out), variant="simt_32x32x8_2x2")
        close(out, ref, np.float32, scale=8.0)


@pytest.mark.parametrize("table", ["old minor", "old major", "no reader", "newer major, 1.3 behind it"])
def test_unusable_tables_fall_back(monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    p = {"old minor": lambda: Producer(1, 1), "old major": lambda: Producer(0, 9),
         "no reader": lambda: Producer(reader=False),
         "newer major, 1.3 behind it": lambda: Producer(2, 0, prev=Producer(1, 3))}[table]()
    install(monkeypatch, p)
    for call in range(4):
        a, b, out = f32(33, seed=call), f32(33, seed=50 + call), poisoned(33)
        ops.mul(TorchLike(a), TorchLike(b), out=TorchLike(out))
        close(out, a.astype(np.float64) * b, np.float32)
    reader = p.prev if p.prev else p
    assert (reader.reads > 0) == (table == "newer major, 1.3 behind it")


def test_threads_with_two_shapes(producer: Producer) -> None:
    failures: list[str] = []

    def worker(t: int) -> None:
        for i in range(40):
            n = 128 if (t + i) % 2 else 129
            a, b, buf = f32(n, seed=1000 * t + i), f32(n, seed=5000 + 1000 * t + i), poisoned(n + 16)
            buf[n:] = 7.0  # past the output: a launch for the longer shape would write here
            out = buf[:n]
            ops.sub(TorchLike(a), TorchLike(b), out=TorchLike(out))
            if not np.allclose(out, a.astype(np.float64) - b, rtol=1e-6, atol=1e-6) or np.any(buf[n:] != 7.0):
                failures.append(f"thread {t} call {i} (n {n})")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert producer.reads > 0


def test_a_capsule_of_another_name_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plans, "_api", _plans._api)
    _plans.use_exchange_table(_capsule_new(ctypes.addressof(Producer().table), b"something_else", None))
    assert _plans._api is None
    _plans.use_exchange_table(object())
    assert _plans._api is None


def test_the_c_function_checks_its_words() -> None:
    x = np.zeros(8, np.float32)
    handle = ctypes.c_void_p()
    tx = _plans.from_object("relu", "x", x)
    tensors = (ctypes.c_void_p * 1)(tx.addr)
    _lib.check(_lib.lib.kaio_plan_elementwise(b"relu", tx.addr, tensors, 1, 0, ctypes.byref(handle)))
    try:
        launch: Callable[[bytes], int] = _plans._launch_objects
        st = launch(struct.pack("<5Q", handle.value, 0, 0, 3, 0))  # relu takes two arrays
        with pytest.raises(errors.UsageError, match="words"):
            _lib.check(st)
        # No table: nothing launched, no error.
        assert launch(struct.pack("<7Q", handle.value, 0, 0, 2, 0, id(x), id(x))) == _plans._MISMATCH
    finally:
        _lib.lib.kaio_plan_free(handle)
