"""PyTorch's side of the row ops in bench/ops (the same ops, shapes and byte counts as
bench/ops_rows.cpp).

CASES: a list of (op_name, make_inputs, fn, bytes):
  make_inputs(rows, cols, dtype, device) -> tuple of tensors (made once, outside the timing)
  fn(*inputs) -> result                  (one call: what is timed)
  bytes(rows, cols, dtype) -> float      (bytes the op must move, counted once)
op_name matches the kaio row's name. Run alone, it prints its own tables:
  python3 bench/ops_torch_rows.py [--quick]
"""
import sys

import torch
import torch.nn.functional as F


def _size(dtype):
    return torch.tensor([], dtype=dtype).element_size()


def _x(rows, cols, dtype, device, lo=-4.0, hi=4.0):
    return (torch.rand(rows, cols, device=device, dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def _rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):  # torch >= 2.4
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def _add_rms_norm(x, r, w):
    s = x + r
    return s, _rms_norm(s, w, 1e-6)


def _rope_inputs(rows, cols, dtype, device):
    # NeoX, heads of 128, token t at position t, f32 cos/sin tables of rows x 64.
    pos = torch.arange(rows, device=device, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-2.0 * torch.arange(64, device=device, dtype=torch.float64) / 128)
    ang = pos * inv
    return (_x(rows, cols, dtype, device), torch.cos(ang).float(), torch.sin(ang).float())


def _rope(x, cos, sin):
    rows, cols = x.shape
    h = x.view(rows, cols // 128, 128)
    c = cos[:, None, :].to(x.dtype)
    s = sin[:, None, :].to(x.dtype)
    x1, x2 = h[..., :64], h[..., 64:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).view(rows, cols)


CASES = [
    ("softmax", lambda r, c, dt, dev: (_x(r, c, dt, dev),),
     lambda x: torch.softmax(x, dim=-1),
     lambda r, c, dt: 2.0 * r * c * _size(dt)),
    ("log_softmax", lambda r, c, dt, dev: (_x(r, c, dt, dev),),
     lambda x: torch.log_softmax(x, dim=-1),
     lambda r, c, dt: 2.0 * r * c * _size(dt)),
    ("rms_norm", lambda r, c, dt, dev: (_x(r, c, dt, dev), _x(1, c, dt, dev, -2, 2)[0]),
     lambda x, w: _rms_norm(x, w, 1e-6),
     lambda r, c, dt: (2.0 * r * c + c) * _size(dt)),
    ("layer_norm", lambda r, c, dt, dev: (_x(r, c, dt, dev), _x(1, c, dt, dev, -2, 2)[0], _x(1, c, dt, dev, -1, 1)[0]),
     lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
     lambda r, c, dt: (2.0 * r * c + 2.0 * c) * _size(dt)),
    ("add_rms_norm", lambda r, c, dt, dev: (_x(r, c, dt, dev), _x(r, c, dt, dev), _x(1, c, dt, dev, -2, 2)[0]),
     _add_rms_norm,
     lambda r, c, dt: (4.0 * r * c + c) * _size(dt)),
    ("rope", _rope_inputs, _rope,
     lambda r, c, dt: 2.0 * r * c * _size(dt) + 2.0 * r * 64 * 4),
]


def cases_fn_first(device="cuda"):
    """CASES as (op, fn, make_inputs(dtype, rows, cols)) triples, for a harness that takes
    that order (the bytes are then counted from the tensors, which gives the same totals)."""
    return [(op, fn, lambda dt, r, c, make=make: make(r, c, dt, device)) for op, make, fn, _ in CASES]


def _time_ms(fn, inputs, calls=1):
    for _ in range(3):
        fn(*inputs)
    times = []
    for _ in range(21):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn(*inputs)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return sorted(times)[len(times) // 2]


def main():
    quick = "--quick" in sys.argv
    dev = "cuda"
    big = 256 if quick else 8192
    print(f"## PyTorch {torch.__version__}: row ops at {big}x{big}\n")
    print("| op | dtype | ms | GB/s |\n|---|---|---|---|")
    for dt in (torch.float32, torch.bfloat16):
        for name, make, fn, nbytes in CASES:
            inputs = make(big, big, dt, dev)
            ms = _time_ms(fn, inputs)
            print(f"| {name} | {str(dt).replace('torch.', '')} | {ms:.3f} | {nbytes(big, big, dt) / (ms * 1e6):.0f} |")
    print("\n## PyTorch decode shapes, bf16: µs per call\n\n| op | 1x4096 | 16x4096 | 128x4096 |\n|---|---|---|---|")
    for name, make, fn, nbytes in CASES:
        row = [1e3 * _time_ms(fn, make(r, 4096, torch.bfloat16, dev), calls=20) for r in (1, 16, 128)]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in row) + " |")


if __name__ == "__main__":
    main()
