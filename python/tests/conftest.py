"""Shared set-up: a private kaio cache per test session (before kaio is imported), and the
markers. Host tests run kaio's interpreter on numpy arrays (KAIO_INTERPRET=1); [gpu] tests
need torch with CUDA and no interpreter."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KAIO_CACHE_DIR", tempfile.mkdtemp(prefix="kaio-pytest-cache-"))

import pytest  # noqa: E402

import kaio  # noqa: E402


def _torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_ok = not kaio.interpret_mode() and _torch_cuda()
    cpu_torch_ok = kaio.interpret_mode() and _torch()
    for item in items:
        if "gpu" in item.keywords and not gpu_ok and not ("cpu_ok" in item.keywords and cpu_torch_ok):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device, torch and KAIO_INTERPRET unset"))
        if "interpret" in item.keywords and not kaio.interpret_mode():
            item.add_marker(pytest.mark.skip(reason="host arrays are device arrays only with KAIO_INTERPRET=1"))
