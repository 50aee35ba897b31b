#!/usr/bin/env python3
"""torch._int_mm (s8 x s8 -> s32, cuBLASLt) on the shapes `bench/quant` times for W8A8, and
the same product with per-row / per-column f32 scales and a bias applied after it in bf16
(what a W8A8 layer costs in eager PyTorch), in the same columns.

    build/bench/quant && python3 bench/quant_torch.py

A (m x k) s8 row-major, B (k x n) s8 column-major (a Linear weight n x k transposed, the
layout _int_mm's fast path takes). Timing as bench/matmul (bench/torch_timing.py): CUDA
events after a warm-up call, the median of 5 to 20 calls.
"""
import argparse

import torch

from torch_timing import time_ms

SHAPES = [(4096, 4096, 4096), (128, 11008, 4096), (16, 4096, 4096), (8192, 8192, 8192)]


def s8(rows, cols):
    return torch.randint(-127, 128, (rows, cols), dtype=torch.int8, device="cuda")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the first three shapes only")
    args = ap.parse_args()
    shapes = SHAPES[:3] if args.quick else SHAPES
    print(f"device: {torch.cuda.get_device_name()}")
    print(f"{'shape':18s} {'torch._int_mm TOPS':>20s} {'+ scales, bias bf16 TOPS':>26s}")
    for m, n, k in shapes:
        a, w = s8(m, k), s8(n, k)
        b = w.t()  # k x n, column-major
        sa = torch.rand(m, 1, device="cuda") / 127
        sb = torch.rand(1, n, device="cuda") / 127
        bias = torch.rand(n, device="cuda")
        ops = 2.0 * m * n * k
        shape = f"{m}x{n}x{k}"
        try:
            raw = time_ms(lambda i: torch._int_mm(a, b), 1)
            scaled = time_ms(lambda i: (torch._int_mm(a, b).float() * sa * sb + bias).to(torch.bfloat16), 1)
        except RuntimeError as e:  # _int_mm refuses some shapes (e.g. m <= 16 on some versions)
            print(f"{shape:18s} refused: {str(e).splitlines()[0]}")
            continue
        print(f"{shape:18s} {ops / raw / 1e9:20.1f} {ops / scaled / 1e9:26.1f}")


if __name__ == "__main__":
    main()
