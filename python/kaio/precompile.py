"""python -m kaio.precompile ...: kaio-precompile, which compiles the op library's declared
kernels into the cache ahead of time. Run `python -m kaio.precompile --help`."""

from __future__ import annotations

import sys

from ._tools import run


def main() -> None:
    run("kaio-precompile", sys.argv[1:])


if __name__ == "__main__":
    main()
