"""Errors: C++'s UsageError, ToolError and InternalError arrive as Python classes with the
same fields; messages name the op and the argument."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import kaio
from kaio import errors, ops


@pytest.mark.interpret
def test_usage_errors_name_op_and_argument() -> None:
    a = np.ones((4, 8), np.float32)
    cases = [
        (lambda: ops.add(a, np.ones((4, 8), np.float16)), "add", "'b'", "float16"),
        (lambda: ops.add(a, np.ones((4, 9), np.float32)), "add", "'b'", "shape"),
        (lambda: ops.relu(np.ones(4, np.float64)), "relu", "'out'", "float64"),
        (lambda: ops.softmax(a[:, ::2]), "softmax", "'x'", "strides"),
        (lambda: ops.add(a, [1, 2, 3]), "add", "'b'", "__dlpack__"),
        (lambda: ops.rms_norm(a, np.ones(7, np.float32)), "rms_norm", None, "w must be a vector of 8"),
        (lambda: ops.matmul_auto(a, np.ones((9, 3), np.float32)), "matmul_auto", "'b'", "rows"),
        (lambda: ops.reduce_rows("median", a), None, None, "median"),
        (lambda: ops.matmul(a, np.ones((8, 3), np.float32), variant="no_such_variant"), "matmul", None, "no_such"),
    ]
    for fn, op, arg, text in cases:
        with pytest.raises(kaio.UsageError) as e:
            fn()
        msg = str(e.value)
        assert isinstance(e.value, ValueError)
        if op is not None:
            assert e.value.op == op, msg
        if arg is not None:
            assert arg in msg, msg
        assert text in msg, msg


def test_tool_error_fields_from_a_real_failure() -> None:
    # Without the interpreter this machine has no CUDA driver: the device backend raises
    # kaio::ToolError("CUDA driver", "NO_DEVICE", ...), which must arrive with its fields.
    code = (
        "import kaio\n"
        "try:\n"
        "    kaio.synchronize()\n"
        "except kaio.ToolError as e:\n"
        "    print('TOOL', e.tool, '|', e.code, '|', isinstance(e, RuntimeError))\n"
        "else:\n"
        "    print('NO ERROR')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAIO_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    if out.startswith("NO ERROR"):
        pytest.skip("a CUDA device is present")
    assert out.startswith("TOOL CUDA driver | "), out
    assert "| True" in out


def test_device_mode_rejects_host_arrays() -> None:
    code = (
        "import numpy as np, kaio\n"
        "try:\n"
        "    kaio.ops.add(np.ones(4, np.float32), np.ones(4, np.float32))\n"
        "except kaio.UsageError as e:\n"
        "    print(e.op, '|', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAIO_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("add |"), out
    assert "host memory" in out and "argument 'a'" in out


class _FakeLib:
    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields

    def kaio_last_error_message(self) -> bytes:
        return self.fields["message"].encode()

    def kaio_last_error_field(self, name: bytes) -> bytes:
        return self.fields.get(name.decode(), "").encode()


def test_status_codes_map_to_classes() -> None:
    # The mapping for every status (InternalError cannot be caused from outside kaio).
    f = {"message": "m", "kernel": "k", "op": "o", "tool": "t", "code": "c", "log": "l"}
    u = errors.from_status(1, _FakeLib(f))
    assert type(u) is kaio.UsageError and (u.kernel, u.op) == ("k", "o")
    t = errors.from_status(2, _FakeLib(f))
    assert type(t) is kaio.ToolError and (t.tool, t.code, t.log) == ("t", "c", "l")
    assert type(errors.from_status(3, _FakeLib(f))) is kaio.InternalError
    assert type(errors.from_status(4, _FakeLib(f))) is kaio.Error
