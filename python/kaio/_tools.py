"""Runs the tool binaries shipped in the package (kaio-cache, kaio-precompile)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence


def tool_path(name: str) -> Path:
    env = os.environ.get("KAIO_TOOLS_DIR")
    dirs = [Path(env)] if env else []
    from . import __path__ as pkg_path  # type: ignore[attr-defined]

    dirs += [Path(d) / "_bin" for d in pkg_path]
    for d in dirs:
        p = d / name
        if p.exists():
            return p
    raise FileNotFoundError(f"kaio: the tool {name} is not in this installation ({', '.join(map(str, dirs))})")


def run(name: str, argv: Sequence[str]) -> NoReturn:
    """Replaces this process with the tool, so that its exit code and output are the tool's."""
    p = tool_path(name)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(str(p), [name, *argv])
