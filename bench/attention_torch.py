#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes bench/attention measures, printed
beside kaio's.

    build/bench/attention --csv /tmp/kaio_attn.csv && python3 bench/attention_torch.py --kaio /tmp/kaio_attn.csv
    build/bench/attention --backward --csv /tmp/kaio_bwd.csv && python3 bench/attention_torch.py --backward --kaio /tmp/kaio_bwd.csv

Forward: TFLOP/s = 4 B Hq S^2 D (halved when causal) / the median time of one call; inputs
(B, H, S, D) as SDPA takes them (its flash backend on an H100). Decode: one query token per
sequence against a contiguous cache of `len` tokens, heads-major (B, Hkv, L, D) and
tokens-major (B, L, Hkv, D) through strides (SDPA has no paged cache: paged rows compare
against the contiguous times), enable_gqa for Hq != Hkv; KV GB/s = the K and V bytes
/ the time; caches smaller than four times L2 rotate among copies, and a decode time is the
median of --rounds rounds of 10 back-to-back calls, as bench/attention does. The copy
bandwidth (a 1 GB device-to-device copy, read + write bytes / time) is measured here too.
Forward timing: CUDA events around each call after 3 warm-up calls, median of --rounds (20).

Backward (--backward): the gradient call alone (torch.autograd.grad of SDPA's output with
respect to q, k and v, the forward run once outside the timing) with SDPA's flash and cuDNN
backends each; TFLOP/s = 2.5 x the forward's FLOPs / time, beside kaio's fast and
deterministic rows.
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
DECODE = [(b, 32, 8, n, 128) for b in (1, 8, 64) for n in (1024, 8192, 32768)]  # b, hq, hkv, len, d
PAGES = (16, 256)
BACKWARD = [(4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (1, 32, 32, 16384, 128, False),
            (1, 32, 32, 16384, 128, True), (4, 16, 16, 4096, 64, False),
            (4, 16, 16, 4096, 64, True)]  # bench/attention --backward's rows
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


def time_calls_ms(fns, rounds, calls=10):
    """Median ms per call of `calls` back-to-back calls of fns[i % len(fns)]."""
    for i in range(3):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    times, n = [], 0
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fns[n % len(fns)]()
            n += 1
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def copy_gbps(rounds):
    src = torch.ones(1 << 29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_calls_ms([lambda: dst.copy_(src)], rounds, 1)
    return 2.0 * src.numel() / ms / 1e6


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


def backward_ms(b, hq, hkv, s, d, causal, dt, backend, rounds):
    from torch.nn.attention import sdpa_kernel

    q = torch.randn(b, hq, s, d, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt, requires_grad=True)
    try:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)
            grad = torch.randn_like(out)
            return time_ms(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), rounds)
    except RuntimeError:  # the backend does not take this shape
        return float("nan")


def run_backward(args, kaio):
    from torch.nn.attention import SDPBackend

    print("backward: TFLOP/s = 2.5 x forward FLOPs / time (torch flash | torch cuDNN | kaio default path | kaio mma.sync kernels |"
          " kaio tuned row; all deterministic)")
    for b, hq, hkv, s, d, causal in BACKWARD:
        for name, dt in DTYPES.items():
            flops = 2.5 * 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0)
            rates = [flops / backward_ms(b, hq, hkv, s, d, causal, dt, be, args.rounds) / 1e9
                     for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION)]
            best = max([r for r in rates if r == r] or [float("nan")])
            mine = [kaio.get(("backward", kind, name, b, hq, hkv, s, d, int(causal), 0), float("nan")) for kind in ("auto", "mma", "tuned")]
            print(f"{name:5} B{b:<2} H{hq:2}:{hkv:<2} S{s:<6} D{d:<4} {'causal' if causal else 'full':7} "
                  f"flash {rates[0]:7.1f}   cudnn {rates[1]:7.1f}   kaio {mine[0]:7.1f}   mma {mine[1]:7.1f}   "
                  f"tuned {mine[2]:7.1f}   kaio/best {max(mine[0], mine[2]) / best:5.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--kaio", help="CSV from bench/attention --csv")
    ap.add_argument("--only", choices=["forward", "decode"], help="one table only")
    ap.add_argument("--backward", action="store_true", help="the backward table (bench/attention --backward)")
    args = ap.parse_args()
    kaio = kaio_rows(args.kaio)
    if args.backward:
        run_backward(args, kaio)
        return
    if args.only != "decode":
        forward(args, kaio)
    if args.only != "forward":
        decode(args, kaio)


def forward(args, kaio):
    print("forward: TFLOP/s (torch SDPA | kaio wgmma (or its grid and persistent forms) | kaio mma; "
          "wgmma nan: refused, the mma kernel runs those)")
    for b, hq, hkv, s, d, causal in FORWARD:
        for name, dt in DTYPES.items():
            q = torch.randn(b, hq, s, d, device="cuda", dtype=dt)
            k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
            v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
            ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv), args.rounds)
            tflops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0) / ms / 1e9
            kinds = ("wgmma", "grid", "persist", "persist_fill", "mma")
            mine = {k: kaio.get(("forward", k, name, b, hq, hkv, s, d, int(causal), 0)) for k in kinds}
            nan = float("nan")
            # bench/attention --persistent writes the Hopper kernel's forms (grid, persist; with
            # --filled-groups persist_fill) in place of its default path (wgmma)
            shown = [k for k in kinds[:4] if mine[k] is not None] or ["wgmma"]
            print(f"{name:5} B{b:<2} H{hq:2}:{hkv:<2} S{s:<6} D{d:<4} {'causal' if causal else 'full':7} "
                  f"torch {tflops:7.1f}   " +
                  "   ".join(f"{k} {mine[k] or nan:7.1f} ({(mine[k] or nan) / tflops:4.2f}x)" for k in shown) +
                  f"   mma {mine['mma'] or nan:7.1f}")


def decode(args, kaio):
    copy = copy_gbps(args.rounds)
    print("decode, one token: KV GB/s; torch SDPA on a heads-major cache (B, Hkv, L, D) and on a tokens-major one\n"
          f"(B, L, Hkv, D) | kaio heads-major, tokens-major (contiguous), paged {PAGES}; copy {copy:.1f} GB/s")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for b, hq, hkv, n, d in DECODE:
        for name, dt in DTYPES.items():
            kv_bytes = 2 * b * n * hkv * d * 2
            copies = min(64, max(1, -(-4 * l2 // kv_bytes)))
            q = torch.randn(b, hq, 1, d, device="cuda", dtype=dt)
            rates = []
            for heads_major in (True, False):
                # tokens-major: the (B, L, Hkv, D) buffer seen as (B, Hkv, L, D) through its strides
                shape = (b, hkv, n, d) if heads_major else (b, n, hkv, d)
                ks = [torch.randn(*shape, device="cuda", dtype=dt) for _ in range(copies)]
                vs = [torch.randn(*shape, device="cuda", dtype=dt) for _ in range(copies)]
                if not heads_major:
                    ks, vs = [k.transpose(1, 2) for k in ks], [v.transpose(1, 2) for v in vs]
                fns = [lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv) for k, v in zip(ks, vs)]
                ms = time_calls_ms(fns, args.rounds)
                rates.append(kv_bytes / ms / 1e6)
                del ks, vs, fns
            mine = [kaio.get(("decode", "auto/heads", name, b, hq, hkv, n, d, 0, 0), float("nan"))]
            mine += [kaio.get(("decode", "auto", name, b, hq, hkv, n, d, 0, page), float("nan")) for page in (0,) + PAGES]
            print(f"{name:5} B{b:<3} H{hq:2}:{hkv:<2} len {n:<6} D{d:<4} torch {rates[0]:7.1f} {rates[1]:7.1f} "
                  f"({100 * rates[0] / copy:5.1f}% of copy)   kaio " + " ".join(f"{x:7.1f}" for x in mine))


if __name__ == "__main__":
    main()
