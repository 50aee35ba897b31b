#!/usr/bin/env python3
"""PyTorch's fused matmul epilogues on the shapes `bench/matmul --epilogue` runs, with the
same methodology, printed in the same summary columns.

    build/bench/matmul --dtype bf16 --epilogue gelu_tanh && python3 bench/matmul_epilogue_torch.py

C = act(A @ B + bias) with A (m x k) and B (k x n) row-major, bias (n) and C in the input
type: torch._addmm_activation(bias, A, B, use_gelu=True) (cuBLASLt's GELU_BIAS epilogue,
the tanh form of gelu) for gelu_tanh; torch.addmm(bias, A, B) (its BIAS epilogue) for
none; and the unfused sequence torch.nn.functional.gelu(torch.addmm(...), approximate="tanh")
beside them. Timing: CUDA events around each call after a warm-up call, the median of 5 to
20 calls (as many as fit in about 0.1 s); inputs rotate over up to 8 sets when one set is
smaller than 64 MB, as bench/matmul does, so that L2 does not hold them.
"""
import argparse

import torch

from torch_timing import time_ms

SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (128, 11008, 4096),
          (4096, 4096, 128), (1000, 1000, 1000)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", action="append", choices=["bf16", "f16"], help="input type (repeatable; default both)")
    ap.add_argument("--shape", action="append", help="only this MxNxK (repeatable)")
    args = ap.parse_args()
    dtypes = args.dtype or ["bf16", "f16"]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shape] if args.shape else SHAPES
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for name in dtypes:
        dt = torch.bfloat16 if name == "bf16" else torch.float16
        for m, n, k in shapes:
            elem = 2
            set_bytes = (m * k + k * n + m * n) * elem
            sets = 1 if set_bytes >= (64 << 20) else min(max((256 << 20) // set_bytes + 1, 1), 8)
            A = [(torch.rand(m, k, device="cuda") * 2 - 1).to(dt) for _ in range(sets)]
            B = [(torch.rand(k, n, device="cuda") * 2 - 1).to(dt) for _ in range(sets)]
            bias = (torch.rand(n, device="cuda") * 2 - 1).to(dt)
            flop = 2.0 * m * n * k
            forms = {
                "addmm (bias)": lambda i: torch.addmm(bias, A[i], B[i]),
                "_addmm_activation (bias, gelu_tanh)": lambda i: torch._addmm_activation(bias, A[i], B[i], use_gelu=True),
                "addmm + gelu_tanh (unfused)": lambda i: torch.nn.functional.gelu(torch.addmm(bias, A[i], B[i]),
                                                                                  approximate="tanh"),
                "mm (no epilogue)": lambda i: torch.mm(A[i], B[i]),
            }
            for form, fn in forms.items():
                ms = time_ms(fn, sets)
                tf = flop / ms / 1e9
                print(f"{name:5} {m:5} x {n:5} x {k:5}  {form:38} {tf:8.2f} TFLOP/s  {ms:7.3f} ms")
                rows.append((name, f"{m}x{n}x{k}", form, tf))
            del A, B
            torch.cuda.empty_cache()
    print("\nsummary (torch)\n| dtype | shape | form | TFLOP/s |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} |")


if __name__ == "__main__":
    main()
