#!/usr/bin/env python3
"""PyTorch's numbers for the ops bench/ops measures, with the same methodology, printed
beside kaio's.

    build/bench/ops --csv /tmp/kaio_ops.csv && python3 bench/ops_torch.py --kaio /tmp/kaio_ops.csv

Table 1: every op at 8192x8192 (--big) in float32 and bfloat16: GB/s = the bytes the op
must move (each input read once, each output written once) / the median time of one call.
Table 2: the decode shapes 1x4096, 16x4096, 128x4096 in bfloat16: us per call from --calls
back-to-back calls per round. Timing: CUDA events around each round after 3 warm-up calls,
median of --rounds (25) rounds, as bench/ops does. With --kaio, kaio's rows (from
`bench/ops --csv`) are printed beside PyTorch's and the byte counts are kaio's.

Row-op cases (softmax, norms, rope) come from bench/ops_torch_rows.py when that file
exists. Its contract, kept simple:

    CASES = [(op, fn, make_inputs), ...]
      op           the op's name as bench/ops prints it ("softmax", "rms_norm", ...)
      make_inputs  make_inputs(dtype, rows, cols) -> tuple of CUDA tensors, built once,
                   outside the timed loop (dtype: torch.float32 or torch.bfloat16)
      fn           fn(*inputs) -> a tensor or a tuple of tensors: one call of the op

The bytes of a case are those of its inputs and outputs, each counted once (kaio's count
when --kaio is given).
"""
import argparse
import csv
import importlib.util
import os
import statistics

import torch
import torch.nn.functional as F


# The targets: a bandwidth row is at memory speed at OF_COPY of the copy's GB/s or more, and
# ahead of PyTorch at AHEAD x or more (copy-speed ops vary about 3% from run to run).
OF_COPY, AHEAD = 0.90, 1.0


def verdict(of_copy, speedup):
    short, behind = of_copy < OF_COPY, speedup < AHEAD
    return "SHORT+BEHIND" if short and behind else "SHORT" if short else "BEHIND" if behind else "ok"


def elementwise_cases():
    def two(dtype, rows, cols):
        a = torch.randn(rows, cols, device="cuda", dtype=dtype)
        b = torch.randn(rows, cols, device="cuda", dtype=dtype)
        return a, b, torch.empty_like(a)

    def pair(dtype, rows, cols):
        return two(dtype, rows, cols)[:2]

    def one(dtype, rows, cols):
        return (torch.randn(rows, cols, device="cuda", dtype=dtype),)

    return [
        ("add", lambda a, b, o: torch.add(a, b, out=o), two),
        ("sub", lambda a, b, o: torch.sub(a, b, out=o), two),
        ("mul", lambda a, b, o: torch.mul(a, b, out=o), two),
        # alpha * x + beta * y has no single PyTorch kernel: a scaled copy, then add_.
        ("axpby", lambda a, b, o: torch.mul(a, 0.5, out=o).add_(b, alpha=2.0), two),
        ("relu", lambda x: torch.relu(x), one),
        ("silu", lambda x: F.silu(x), one),
        ("gelu", lambda x: F.gelu(x), one),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), one),
        ("exp", lambda x: torch.exp(x), one),
        ("silu_gate", lambda a, b: F.silu(a) * b, pair),
        ("gelu_gate", lambda a, b: F.gelu(a) * b, pair),
        ("gelu_gate_tanh", lambda a, b: F.gelu(a, approximate="tanh") * b, pair),
    ]


def reduction_cases():
    def one(dtype, rows, cols):
        return (torch.randn(rows, cols, device="cuda", dtype=dtype),)

    f32 = torch.float32
    return [
        ("row_sum", lambda x: torch.sum(x, dim=-1, dtype=f32), one),
        ("row_max", lambda x: torch.amax(x, dim=-1), one),
        ("row_min", lambda x: torch.amin(x, dim=-1), one),
        ("row_mean", lambda x: torch.mean(x, dim=-1, dtype=f32), one),
        ("row_argmax", lambda x: torch.argmax(x, dim=-1), one),
        ("sum", lambda x: torch.sum(x, dtype=f32), one),
        ("max", lambda x: torch.amax(x), one),
        ("min", lambda x: torch.amin(x), one),
    ]


def row_cases():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_torch_rows.py")
    if not os.path.exists(path):
        return []
    spec = importlib.util.spec_from_file_location("ops_torch_rows", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.cases_fn_first())


def tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for t in x if isinstance(t, torch.Tensor)]


def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def ms_per_call(fn, inputs, rounds, calls):
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*inputs)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return statistics.median(times)


def case_bytes(op, fn, inputs):
    """Inputs and outputs, each once; an output passed in as `out` is an input tensor that
    the op writes, so it is counted as the output."""
    out = tensors(fn(*inputs))
    ins = [t for t in tensors(inputs) if all(t.data_ptr() != o.data_ptr() for o in out)]
    return nbytes(ins) + nbytes(out)


def read_kaio(path):
    rows = {}
    if not path:
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[(r["table"], r["op"], r["dtype"], int(r["rows"]), int(r["cols"]))] = r
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kaio", help="CSV written by bench/ops --csv")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--big", default="8192x8192")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    big_rows, big_cols = (int(v) for v in args.big.split("x"))
    kaio = read_kaio(args.kaio)
    cases = [c for c in elementwise_cases() + reduction_cases() + row_cases() if args.only in c[0]]
    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

    print(f"Table 1: {args.big}, GB/s = bytes moved (counted once) / median time; {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    if kaio:
        print(f"verdict: ok at >= {100 * OF_COPY:.0f}% of copy and >= {AHEAD:.2f}x torch; else SHORT (copy), "
              f"BEHIND (torch) or both")
    print(f"{'op':<16} {'dtype':<5} {'torch us':>10} {'torch GB/s':>11}" +
          (f" {'kaio us':>10} {'kaio GB/s':>10} {'of copy':>8} {'speedup':>8} {'verdict':>12}" if kaio else ""))
    shortfalls = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for op, fn, make in cases:
            inputs = make(dtype, big_rows, big_cols)
            k = kaio.get(("bandwidth", op, names[dtype], big_rows, big_cols))
            nb = float(k["bytes"]) if k else case_bytes(op, fn, inputs)
            ms = ms_per_call(fn, inputs, args.rounds, 1)
            line = f"{op:<16} {names[dtype]:<5} {ms * 1e3:>10.1f} {nb / (ms * 1e6):>11.1f}"
            if k:
                kus, copy = float(k["us"]), float(k["copy_gbps"])
                kg = float(k["gbps"])
                of_copy, speedup = (kg / copy if copy else 0), ms * 1e3 / kus
                v = verdict(of_copy, speedup)
                if v != "ok":
                    shortfalls.append(f"{op} {names[dtype]} ({v}: {100 * of_copy:.0f}% of copy, {speedup:.2f}x)")
                line += f" {kus:>10.1f} {kg:>10.1f} {100 * of_copy:>7.1f}% {speedup:>7.2f}x {v:>12}"
            print(line, flush=True)
            del inputs
            torch.cuda.empty_cache()

    if kaio:  # the shortfalls again, so that none hides in the long table
        print(f"Table 1 verdict: {len(shortfalls)} row(s) short" + (":" if shortfalls else ""))
        for line in shortfalls:
            print(f"  {line}")

    print(f"\nTable 2: decode shapes, bf16, us per call ({args.calls} back-to-back calls per round)")
    header = f"{'op':<16}" + "".join(f" {'torch ' + s:>13}" for s in ("1x4096", "16x4096", "128x4096"))
    if kaio:
        header += "".join(f" {'kaio ' + s:>13}" for s in ("1x4096", "16x4096", "128x4096")) + f" {'speedup':>16}"
    print(header)
    for op, fn, make in cases:
        t, kk = [], []
        for rows in (1, 16, 128):
            inputs = make(torch.bfloat16, rows, 4096)
            t.append(ms_per_call(fn, inputs, args.rounds, args.calls) * 1e3)
            k = kaio.get(("decode", op, "bf16", rows, 4096))
            if k:
                kk.append(float(k["us"]))
        line = f"{op:<16}" + "".join(f" {v:>13.2f}" for v in t)
        if kk:
            line += "".join(f" {v:>13.2f}" for v in kk)
            line += " " + "/".join(f"{a / b:.1f}" for a, b in zip(t, kk)) + "x"
            behind = [s for s, a, b in zip(("1x4096", "16x4096", "128x4096"), t, kk) if a / b < AHEAD]
            line += "  ok" if not behind else "  BEHIND at " + ",".join(behind)
        print(line, flush=True)


if __name__ == "__main__":
    main()
