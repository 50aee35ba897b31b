"""The timing the matmul PyTorch benches share with bench/matmul: CUDA events around each
call after a warm-up call, the median of 5 to 20 calls (as many as fit in about 0.1 s),
call i using operand set i % sets."""
import statistics

import torch


def time_ms(fn, sets):
    fn(0)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(0)
    b.record()
    b.synchronize()
    first = a.elapsed_time(b)
    reps = min(max(int(100.0 / max(first, 1e-3)), 5), 20)
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn((i + 1) % sets)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
