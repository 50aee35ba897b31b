"""python -m kaio.cache ...: kaio-cache, the cache inspection tool (ls, show, rm, gc, ...).
Run `python -m kaio.cache --help` for its commands."""

from __future__ import annotations

import sys

from ._tools import run


def main() -> None:
    run("kaio-cache", sys.argv[1:])


if __name__ == "__main__":
    main()
