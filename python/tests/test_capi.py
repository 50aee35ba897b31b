"""The C ABI itself: the header is plain C, the library exports only kaio_* symbols and
needs only the C and C++ runtimes, LMDB (shipped beside it) and nvJitLink (libcuda is
opened at run time)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kaio import _lib

HEADER_DIR = Path(__file__).resolve().parents[2]  # the repository root holds capi/kaio.h
LIB = _lib.library_path()

C_PROGRAM = r"""
#include "capi/kaio.h"
#include <stdio.h>
#include <string.h>

int main(void) {
  if (kaio_abi_version() != KAIO_C_ABI_VERSION) return 1;
  /* A failing call reports through the last error. */
  kaio_builder* b = NULL;
  if (kaio_builder_new("from_c", &b) != KAIO_OK) return 2;
  uint32_t p;
  if (kaio_builder_param(b, "x", "no_such_type", &p) != KAIO_ERR_USAGE) return 3;
  if (strstr(kaio_last_error_message(), "no_such_type") == NULL) return 4;
  kaio_builder_free(b);
  printf("ok %s\n", kaio_version());
  return 0;
}
"""


def test_header_is_c_and_links(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "check.c"
    src.write_text(C_PROGRAM)
    exe = tmp_path / "check"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", f"-I{HEADER_DIR}", str(src), "-o",
                    str(exe), str(LIB), f"-Wl,-rpath,{LIB.parent}"], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert out.stdout.startswith("ok ")


def test_exports_and_dependencies() -> None:
    nm = shutil.which("nm")
    objdump = shutil.which("objdump")
    if nm is None or objdump is None:
        pytest.skip("no binutils")
    syms = subprocess.run([nm, "-D", "--defined-only", str(LIB)], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in syms.splitlines() if line.strip()]
    assert names and all(n.startswith("kaio_") for n in names), [n for n in names if not n.startswith("kaio_")][:10]
    assert "kaio_elementwise" in names and "kaio_compile" in names
    dyn = subprocess.run([objdump, "-p", str(LIB)], capture_output=True, text=True, check=True).stdout
    needed = {line.split()[1] for line in dyn.splitlines() if line.strip().startswith("NEEDED")}
    allowed = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "libdl.so.2",
               "libpthread.so.0", "liblmdb.so.0", "libcrypto.so.3"}
    extra = {n for n in needed if n not in allowed and not n.startswith(("libnvJitLink.so", "libhiredis.so"))}
    assert not extra, f"libkaio_c.so needs {sorted(extra)}"
    assert "libcuda.so.1" not in needed  # opened with dlopen when a device is used


def test_wheel_ships_lmdb_beside_the_library() -> None:
    if LIB.parent.name != "_lib":
        pytest.skip("not an installed package (KAIO_LIBRARY points elsewhere)")
    assert (LIB.parent / "liblmdb.so.0").is_file()
