#!/usr/bin/env python3
"""PyTorch's FP8 matmul (torch._scaled_mm) on the shapes `bench/matmul --dtype e4m3` runs,
with the same methodology, printed in the same summary columns.

    build/bench/matmul --dtype e4m3 && python3 bench/matmul_fp8_torch.py

A (m x k) e4m3 row-major, B (k x n) e4m3 column-major (the layout _scaled_mm and
cuBLASLt require), per-tensor f32 scales 0.5 and 2 on the device, bf16 out; once with
the default accumulation and once with use_fast_accum=True (no periodic promotion of the
tensor cores' accumulator, which is what kaio's kernels do). Timing: CUDA events around
each call after a warm-up call, the median of 5 to 20 calls (as many as fit in about
0.1 s); inputs rotate over up to 8 sets when one set is smaller than 64 MB, as
bench/matmul does, so that L2 does not hold them.
"""
import argparse

import torch

from torch_timing import time_ms

SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (16, 4096, 4096), (128, 11008, 4096), (4096, 4096, 128), (1000, 1000, 1008)]
QUICK = [(1024, 1024, 1024), (4096, 4096, 4096), (16, 4096, 4096)]


def fp8(dtype, rows, cols):
    return (torch.rand(rows, cols, device="cuda") * 2 - 1).to(dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1024^3, 4096^3 and 16x4096x4096 only")
    ap.add_argument("--dtype", default="e4m3", choices=["e4m3", "e5m2"],
                    help="input type (e5m2 x e5m2 is not a _scaled_mm form: e5m2 runs as e5m2 x e4m3)")
    args = ap.parse_args()
    ta = torch.float8_e4m3fn if args.dtype == "e4m3" else torch.float8_e5m2
    tb = torch.float8_e4m3fn
    scale_a = torch.tensor(0.5, device="cuda")
    scale_b = torch.tensor(2.0, device="cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for m, n, k in QUICK if args.quick else SHAPES:
        set_bytes = m * k + k * n + 2 * m * n
        sets = 1 if set_bytes >= 64 << 20 else min(max((256 << 20) // set_bytes + 1, 1), 8)
        A = [fp8(ta, m, k) for _ in range(sets)]
        B = [fp8(tb, n, k).t() for _ in range(sets)]  # k x n, column-major
        flop = 2.0 * m * n * k
        for fast in (False, True):
            def run(i, fast=fast):
                return torch._scaled_mm(A[i], B[i], scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                        use_fast_accum=fast)
            try:
                ms = time_ms(run, sets)
            except RuntimeError as e:  # a shape _scaled_mm refuses
                print(f"{args.dtype}>bf16 {m:5d} x {n:5d} x {k:5d}  refused: {str(e).splitlines()[0]}")
                continue
            name = "torch._scaled_mm" + (" (fast accum)" if fast else "")
            print(f"{args.dtype}>bf16 {m:5d} x {n:5d} x {k:5d}  {name:<32s} {flop / ms / 1e9:8.2f} TFLOP/s  {ms:7.3f} ms")
            rows.append((f"{m}x{n}x{k}", name, flop / ms / 1e9))
    print(f"\nsummary (torch._scaled_mm, {torch.cuda.get_device_name()})")
    print("| dtype | shape | op | TFLOP/s |\n|---|---|---|---|")
    for shape, name, tf in rows:
        print(f"| {args.dtype}>bf16 | {shape} | {name} | {tf:.1f} |")


if __name__ == "__main__":
    main()
