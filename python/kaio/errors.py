"""kaio's errors: the C++ library's UsageError, ToolError and InternalError as Python classes
with the same fields."""

from __future__ import annotations

from typing import Any


class Error(Exception):
    """Base of kaio's errors."""


class UsageError(Error, ValueError):
    """Misuse of the API or bad arguments (a wrong dtype, shape, device, ...). `kernel` and
    `op` name where it happened ("" when not tied to one); the message names the argument."""

    def __init__(self, message: str, kernel: str = "", op: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.kernel = kernel
        self.op = op

    @classmethod
    def make(cls, op: str, message: str, kernel: str = "") -> "UsageError":
        """The error C++ would raise: 'kaio usage error at op 'OP': MESSAGE'."""
        text = "kaio usage error"
        if kernel:
            text += f" in kernel '{kernel}'"
        if op:
            text += f" at op '{op}'"
        return cls(f"{text}: {message}", kernel, op)


class ToolError(Error, RuntimeError):
    """A failure of an outside tool (nvJitLink, the CUDA driver, LMDB, the file system):
    `tool`, its `code` name and its full `log`."""

    def __init__(self, message: str, tool: str = "", code: str = "", log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.code = code
        self.log = log


class InternalError(Error, RuntimeError):
    """A broken invariant inside kaio."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallbackError(Error):
    """Raised only when a callback failed without a Python exception to re-raise."""


def from_status(status: int, lib: Any) -> Error:
    msg = (lib.kaio_last_error_message() or b"").decode(errors="replace")

    def field(name: str) -> str:
        return (lib.kaio_last_error_field(name.encode()) or b"").decode(errors="replace")

    if status == 1:
        return UsageError(msg, field("kernel"), field("op"))
    if status == 2:
        return ToolError(msg, field("tool"), field("code"), field("log"))
    if status == 3:
        return InternalError(msg)
    if status == 5:
        return CallbackError(msg)
    return Error(msg)
