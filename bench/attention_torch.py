#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes bench/attention measures, printed
beside kaio's.

    build/bench/attention --csv /tmp/kaio_attn.csv && python3 bench/attention_torch.py --kaio /tmp/kaio_attn.csv

Forward: TFLOP/s = 4 B Hq S^2 D (halved when causal) / the median time of one call; inputs
(B, H, S, D) as SDPA takes them (its flash backend on an H100). Decode: one query token per
sequence against a contiguous cache of `len` tokens (SDPA has no paged cache: paged rows
compare against the contiguous time), enable_gqa for Hq != Hkv; KV GB/s = the K and V bytes
/ the time. Timing: CUDA events around each call after 3 warm-up calls, median of
--rounds (20), as bench/attention does.
"""
import argparse
import csv
import statistics

import torch
import torch.nn.functional as F

FORWARD = [  # b, hq, hkv, s, d, causal (bench/attention's rows)
    (4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (1, 32, 32, 16384, 128, False),
    (1, 32, 32, 16384, 128, True), (4, 16, 16, 4096, 64, False), (4, 16, 16, 4096, 64, True),
    (4, 32, 8, 4096, 128, True), (2, 16, 16, 8192, 128, True), (4, 8, 8, 2048, 256, False), (4, 8, 8, 2048, 256, True),
    (4, 16, 16, 4096, 96, True),
]
DECODE = [(1, 32, 8, 32768, 128), (8, 32, 8, 32768, 128), (32, 32, 8, 32768, 128), (64, 32, 8, 4096, 128)]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def time_ms(fn, rounds):
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def kaio_rows(path):
    rows = {}
    if not path:
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["kind"], r["kernel"], r["dtype"], int(r["b"]), int(r["hq"]), int(r["hkv"]), int(r["s"]), int(r["d"]),
                   int(r["causal"]), int(r["page"]))
            rows[key] = float(r["rate"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--kaio", help="CSV from bench/attention --csv")
    args = ap.parse_args()
    kaio = kaio_rows(args.kaio)
    print("forward: TFLOP/s (torch SDPA | kaio wgmma | kaio mma; wgmma nan: refused, the mma kernel runs those)")
    for b, hq, hkv, s, d, causal in FORWARD:
        for name, dt in DTYPES.items():
            q = torch.randn(b, hq, s, d, device="cuda", dtype=dt)
            k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
            v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
            ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv), args.rounds)
            tflops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0) / ms / 1e9
            mine = {k: kaio.get(("forward", k, name, b, hq, hkv, s, d, int(causal), 0)) for k in ("wgmma", "mma")}
            nan = float("nan")
            print(f"{name:5} B{b:<2} H{hq:2}:{hkv:<2} S{s:<6} D{d:<4} {'causal' if causal else 'full':7} "
                  f"torch {tflops:7.1f}   wgmma {mine['wgmma'] or nan:7.1f} ({(mine['wgmma'] or nan) / tflops:4.2f}x)   "
                  f"mma {mine['mma'] or nan:7.1f}")
    print("decode, one token: KV GB/s (torch SDPA contiguous | kaio contiguous | kaio paged)")
    for b, hq, hkv, n, d in DECODE:
        dt = torch.bfloat16
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=dt)
        k = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
        v = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
        ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv), args.rounds)
        gbps = 2.0 * b * n * hkv * d * 2 / ms / 1e6
        cont = kaio.get(("decode", "rows", "bf16", b, hq, hkv, n, d, 0, 0))
        paged = [r for key, r in kaio.items() if key[:8] == ("decode", "rows", "bf16", b, hq, hkv, n, d) and key[9] != 0]
        print(f"bf16  B{b:<3} H{hq:2}:{hkv:<2} len {n:<6} D{d:<4} torch {gbps:7.1f} ({ms * 1e3:8.1f} us)   "
              f"kaio {cont if cont is not None else float('nan'):7.1f}   paged {paged[0] if paged else float('nan'):7.1f}")


if __name__ == "__main__":
    main()
