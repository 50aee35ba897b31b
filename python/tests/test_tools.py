"""python -m kaio.cache and python -m kaio.precompile run the tools shipped in the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kaio


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env)


def test_help() -> None:
    for mod in ("kaio.cache", "kaio.precompile"):
        r = _run(mod, "--help")
        assert r.returncode == 0, r.stderr
        assert "Usage" in r.stdout or "usage" in r.stdout.lower()
    assert "ls" in _run("kaio.cache", "--help").stdout


@pytest.mark.interpret
def test_cache_ls_lists_a_python_kernel(tmp_path: Path) -> None:
    code = (
        "import kaio\n"
        "b = kaio.KernelBuilder('listed_from_python')\n"
        "p = b.param(kaio.f32_ptr, 'p')\n"
        "p[b.global_id_x()] = 1.0\n"
        "kaio.compile(b.build())\n"
        "kaio.flush_cache_writes()\n"
    )
    env = dict(os.environ, KAIO_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    r = _run("kaio.cache", "ls", env=env)
    assert r.returncode == 0, r.stderr
    assert "listed_from_python" in r.stdout


def test_bad_arguments_fail() -> None:
    r = _run("kaio.cache", "no-such-command")
    assert r.returncode != 0
