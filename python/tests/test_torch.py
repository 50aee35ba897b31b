"""kaio.torch: custom ops (opcheck), gradients against torch's own, torch's current stream
and CUDA graph capture. The [gpu] tests run on CUDA tensors; those also marked cpu_ok run on
CPU tensors in interpret mode too (KAIO_INTERPRET=1 with torch installed)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import kaio  # noqa: E402
import kaio.torch as kt  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture
def dev() -> str:
    return "cpu" if kaio.interpret_mode() else "cuda"


def _r(dev: str, *shape: int, dtype: Any = None, grad: bool = False, seed: int = 0) -> Any:
    g = torch.Generator(device="cpu").manual_seed(seed + sum(shape))
    t = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype or torch.float32).to(dev)
    return t.requires_grad_(grad)


def _samples(dev: str) -> dict[str, list[tuple]]:
    x, y = _r(dev, 4, 64, seed=1), _r(dev, 4, 64, seed=2)
    w, b = _r(dev, 64, seed=3), _r(dev, 64, seed=4)
    xg, wg, bg = _r(dev, 4, 64, grad=True, seed=5), _r(dev, 64, grad=True, seed=6), _r(dev, 64, grad=True, seed=7)
    a, m = _r(dev, 8, 16, grad=True, seed=8), _r(dev, 16, 24, grad=True, seed=9)
    return {
        **{n: [(x,)] for n in ("relu", "silu", "gelu", "gelu_tanh", "exp", "argmax_rows")},
        **{n: [(x, y)] for n in ("add", "sub", "mul", "silu_gate", "gelu_gate", "gelu_gate_tanh")},
        "axpby": [(x, y, 2.0, -0.5)],
        "softmax": [(x,), (xg,)],
        "log_softmax": [(x,), (xg,)],
        "rms_norm": [(x, w, 1e-6), (xg, wg, 1e-6)],
        "layer_norm": [(x, w, b, 1e-5), (xg, wg, bg, 1e-5)],
        "add_rms_norm": [(x, y, w, 1e-6)],
        "rope": [(_r(dev, 5, 2 * 16, seed=10), 2, 16, 0, 10000.0, 3, "neox")],
        "reduce_rows": [(x, "sum"), (x, "max")],
        "matmul": [(a.detach(), m.detach()), (a, m), (_r(dev, 3, 8, 16, grad=True), _r(dev, 3, 16, 8, grad=True))],
        **_new_op_samples(dev),
    }


def _new_op_samples(dev: str) -> dict[str, list[tuple]]:
    """Samples of attention (with gradients too) and the quantized matmuls (forward only)."""
    import numpy as np

    half = torch.float32 if dev == "cpu" else torch.float16  # the interpreter's runs stay short in f32
    q, k, v = _r(dev, 1, 3, 2, 64, dtype=half, seed=20), _r(dev, 1, 5, 1, 64, dtype=half, seed=21), _r(
        dev, 1, 5, 1, 64, dtype=half, seed=22)
    lens = torch.tensor([4], dtype=torch.int32, device=dev)
    g = torch.Generator().manual_seed(23)
    a8 = torch.randint(-127, 128, (3, 32), generator=g, dtype=torch.int8).to(dev)
    b8 = torch.randint(-127, 128, (8, 32), generator=g, dtype=torch.int8).to(dev)
    sb = (torch.rand(8, generator=g) / 100).to(dev)
    qw, s, z = kaio.ops.quantize_int4(np.random.default_rng(24).standard_normal((64, 8)).astype(np.float32), group=32)
    x4 = _r(dev, 2, 64, dtype=torch.float16, seed=25)
    w_rows = np.zeros((8, 34), np.uint8)  # q8_0: per 32 elements an f16 scale and 32 int8 values
    w_rows[:, :2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    w_rows[:, 2:] = np.random.default_rng(26).integers(-127, 128, (8, 32)).astype(np.int8).view(np.uint8)
    o, lse = kaio.ops.attention(q, k, v, causal=True, return_lse=True)
    do = _r(dev, 1, 3, 2, 64, dtype=half, seed=28)
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    return {
        "attention": [(q, k, v, 0.0, True, -1, -1, 0.0, None), (qg, kg, vg, 0.0, True, -1, -1, 0.0, None)],
        "attention_lse": [(q, k, v, 0.0, True, -1, -1, 0.0, None), (qg, kg, vg, 0.0, False, -1, -1, 0.0, None)],
        "attention_backward": [(do, q, k, v, o, lse, 0.0, True, -1, -1, 0.0, None)],
        "attention_decode": [(q, k, v, lens, None, 0.0, True, -1, 0.0, 0)],
        "matmul_int8": [(a8, b8, None, None, None, ""), (a8, b8, None, sb, None, "float32")],
        "matmul_int4": [(x4, torch.from_numpy(qw.view(np.int32)).to(dev), torch.from_numpy(s).to(dev),
                         torch.from_numpy(z).to(dev), None)],
        "quant_matmul": [(_r(dev, 1, 32, seed=27), torch.from_numpy(w_rows).to(dev), 8, "")],
    }


@pytest.mark.cpu_ok
def test_opcheck_every_registered_op(dev: str) -> None:
    samples = _samples(dev)
    assert set(samples) == set(kt.OPS), "every registered op needs a sample"
    for name, op in kt.OPS.items():
        for args in samples[name]:
            torch.library.opcheck(op, args)


@pytest.mark.cpu_ok
def test_values_match_torch(dev: str) -> None:
    x, y = _r(dev, 6, 96, seed=11), _r(dev, 6, 96, seed=12)
    F = torch.nn.functional
    torch.testing.assert_close(kt.add(x, y), x + y)
    torch.testing.assert_close(kt.silu_gate(x, y), F.silu(x) * y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(kt.gelu(x), F.gelu(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(kt.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(kt.reduce_rows(x, "mean"), x.mean(-1), rtol=1e-5, atol=1e-5)
    assert torch.equal(kt.argmax_rows(x), x.argmax(-1))


@pytest.mark.cpu_ok
@pytest.mark.parametrize("name", ["matmul", "softmax", "log_softmax", "rms_norm", "layer_norm"])
def test_gradients_match_torch(dev: str, name: str) -> None:
    F = torch.nn.functional
    x = _r(dev, 5, 48, grad=True, seed=13)
    w = _r(dev, 48, grad=True, seed=14)
    b = _r(dev, 48, grad=True, seed=15)
    m = _r(dev, 48, 20, grad=True, seed=16)
    ref_fns = {
        "matmul": (lambda: kt.matmul(x, m), lambda: x @ m, (x, m)),
        "softmax": (lambda: kt.softmax(x), lambda: torch.softmax(x, -1), (x,)),
        "log_softmax": (lambda: kt.log_softmax(x), lambda: torch.log_softmax(x, -1), (x,)),
        "rms_norm": (lambda: kt.rms_norm(x, w, 1e-6), lambda: F.rms_norm(x, (48,), w, 1e-6), (x, w)),
        "layer_norm": (lambda: kt.layer_norm(x, w, b, 1e-5), lambda: F.layer_norm(x, (48,), w, b, 1e-5), (x, w, b)),
    }
    ours, theirs, inputs = ref_fns[name]
    y1, y2 = ours(), theirs()
    torch.testing.assert_close(y1, y2, rtol=1e-4, atol=1e-5)
    g = _r(dev, *y1.shape, seed=17)
    g1 = torch.autograd.grad(y1, inputs, g)
    g2 = torch.autograd.grad(y2, inputs, g)
    for a, c in zip(g1, g2):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-4)


@pytest.mark.cpu_ok
@pytest.mark.parametrize("op", ["attention", "attention_lse"])
def test_attention_gradients_match_float64(dev: str, op: str) -> None:
    # GQA 4:2, Sq < Sk with the causal mask at the bottom right, a window on the left too;
    # against torch's SDPA in float64 (an explicit mask, the KV heads repeated).
    dt = torch.float32 if dev == "cpu" else torch.float16
    q = _r(dev, 2, 70, 4, 64, dtype=dt, grad=True, seed=50)
    k, v = _r(dev, 2, 90, 2, 64, dtype=dt, grad=True, seed=51), _r(dev, 2, 90, 2, 64, dtype=dt, grad=True, seed=52)
    args = (0.0, True, 40, -1, 0.0, None)
    y = kt.attention(q, k, v, *args) if op == "attention" else kt.attention_lse(q, k, v, *args)[0]
    g = _r(dev, *y.shape, dtype=dt, seed=53)
    ours = torch.autograd.grad(y, (q, k, v), g)
    i, j = torch.arange(70, device=dev)[:, None] + 20, torch.arange(90, device=dev)[None, :]
    mask = (j <= i) & (j >= i - 40)
    q64, k64, v64 = (t.detach().double().transpose(1, 2).requires_grad_(True) for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q64, k64.repeat_interleave(2, 1), v64.repeat_interleave(2, 1),
                                                           attn_mask=mask)
    theirs = torch.autograd.grad(ref, (q64, k64, v64), g.double().transpose(1, 2))
    tol = 1e-4 if dt == torch.float32 else 2e-2
    torch.testing.assert_close(y.double(), ref.transpose(1, 2), rtol=tol, atol=tol)
    for a, b in zip(ours, theirs):
        assert a.dtype == dt
        torch.testing.assert_close(a.double(), b.transpose(1, 2), rtol=tol, atol=tol)


@pytest.mark.cpu_ok
def test_plans_with_torch_tensors(dev: str) -> None:
    from kaio import _plans

    _plans.clear()
    for k in range(3):  # fresh tensors of one metadata: the first call makes each plan, the others hit
        a, b = _r(dev, 6, 96, seed=30 + k), _r(dev, 6, 96, seed=40 + k)
        torch.testing.assert_close(kaio.ops.add(a, b), a + b)
        y = kaio.ops.softmax(a)
        assert y.is_contiguous() and y.dtype == a.dtype and y.device == a.device
        torch.testing.assert_close(y, torch.softmax(a, -1), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(kaio.ops.matmul_auto(a, b.t()), a @ b.t(), rtol=1e-4, atol=1e-4)
        out = torch.empty_like(a)
        assert kaio.ops.mul(a, b, out=out) is out
        torch.testing.assert_close(out, a * b)
    assert _plans.size() == 4
    # Rows of a wider tensor: a plan of their own, and a contiguous output as always.
    v = _r(dev, 6, 128, seed=50)[:, :96]
    for _ in range(2):
        y = kaio.ops.softmax(v)
        assert y.is_contiguous() and y.shape == v.shape
        torch.testing.assert_close(y, torch.softmax(v, -1), rtol=1e-5, atol=1e-6)
    # Another dtype, and a Parameter: plans of their own.
    h = a.to(torch.float16)
    for _ in range(2):
        torch.testing.assert_close(kaio.ops.relu(h), torch.relu(h))
        p = torch.nn.Parameter(a.clone())
        torch.testing.assert_close(kaio.ops.relu(p), torch.relu(a))
    assert _plans.size() == 7
    with pytest.raises(kaio.UsageError, match="float64"):
        kaio.ops.relu(a.double())


@pytest.mark.cpu_ok
def test_hits_through_torchs_exchange_table(dev: str) -> None:
    # torch 2.10 and later publish a DLPack exchange table: a hit hands the tensors to the
    # library, which reads them through it. Shapes alternate so that each call's plan is
    # first offered the other shape's tensors; outputs are views into guarded buffers (a
    # launch for the longer shape would write past them), made or given.
    from kaio import _plans

    _plans.clear()
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch publishes no DLPack exchange table")
    _plans._seen_modules()  # what a first call does (this test may run first)
    assert _plans._api
    for k in range(8):
        n = 96 if k % 2 else 97
        a, b = _r(dev, 4, n, seed=60 + k), _r(dev, 4, n, seed=70 + k)
        buf = torch.full((4 * n + 64,), float("nan"), device=dev)
        out = buf[: 4 * n].view(4, n)
        assert kaio.ops.add(a, b, out=out) is out
        torch.testing.assert_close(out, a + b)
        assert torch.isnan(buf[4 * n:]).all()
        torch.testing.assert_close(kaio.ops.softmax(a), torch.softmax(a, -1), rtol=1e-5, atol=1e-6)
        eps = 10.0 ** -(k % 4 + 2)  # the numbers of each call cross
        w = _r(dev, n, seed=80 + k)
        torch.testing.assert_close(kaio.ops.rms_norm(a, w, eps), torch.nn.functional.rms_norm(a, (n,), w, eps),
                                   rtol=1e-5, atol=1e-5)
    assert set(_plans._last) and set(_plans._last_made)  # learned: hits went through the table


@pytest.mark.cpu_ok
def test_made_outputs_on_hits(dev: str) -> None:
    # From the third call of one metadata on, a hit makes the output and launches on the
    # tensors through torch's exchange table: each output its own memory, alive as long as
    # the caller holds it, nothing else holding it, and right.
    import sys

    from kaio import _plans

    _plans.clear()
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch publishes no DLPack exchange table")
    kept = []
    for k in range(6):
        a, b = _r(dev, 5, 200, seed=90 + k), _r(dev, 5, 200, seed=100 + k)
        h = a.to(torch.bfloat16)
        made = [(kaio.ops.add(a, b), a + b), (kaio.ops.softmax(a), torch.softmax(a, -1)), (kaio.ops.relu(h), torch.relu(h))]
        for y, ref in made:
            assert type(y) is torch.Tensor and (y.dtype, y.shape, y.device) == (ref.dtype, ref.shape, ref.device)
            assert y.is_contiguous() and not y.requires_grad
            assert sys.getrefcount(y) == 3  # y, the list's tuple and getrefcount's argument
        kept += made
        del made, y
    assert len({y.data_ptr() for y, _ in kept}) == len(kept)
    for y, ref in kept:
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    assert len(_plans._last_made) == 3  # learned: the later calls went through the table


def test_plans_read_cuda_array_interface() -> None:
    from kaio import _plans

    class Wrapped:  # a producer known only by __cuda_array_interface__ and DLPack
        def __init__(self, t: Any) -> None:
            self.t = t

        @property
        def __cuda_array_interface__(self) -> Any:
            return self.t.__cuda_array_interface__

        def __dlpack__(self, **kw: Any) -> Any:
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self) -> Any:
            return self.t.__dlpack_device__()

    _plans.clear()
    for _ in range(3):
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        out = torch.empty_like(a)
        assert kaio.ops.add(Wrapped(a), Wrapped(b), out=out) is out
        torch.testing.assert_close(out, a + b)
        c = torch.randn(1001, device="cuda")
        with pytest.raises(kaio.UsageError, match="shape"):
            kaio.ops.add(Wrapped(a), Wrapped(c), out=out)
    assert _plans.size() == 1


def test_non_default_stream() -> None:
    # On a side stream, the input is written after a long sleep: a kaio op that ran on any
    # other stream would read it before it is written. Four times: later passes are served by
    # cached plans, which must read the current stream on every call.
    s = torch.cuda.Stream()
    for _ in range(4):  # a miss, then hits (from the third on through torch's exchange table)
        a = torch.zeros(1 << 20, device="cuda")
        b = torch.ones(1 << 20, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(200_000_000)
            a.fill_(2.0)
            y = kaio.ops.add(a, b)
            z = kaio.ops.softmax(y.view(1024, 1024))
        s.synchronize()
        assert torch.all(y == 3.0)
        torch.testing.assert_close(z, torch.full((1024, 1024), 1.0 / 1024, device="cuda"))
    # An explicit stream= wins over the current one.
    y2 = torch.empty_like(a)
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        a.fill_(5.0)
    kaio.ops.add(a, b, out=y2, stream=s)
    s.synchronize()
    assert torch.all(y2 == 6.0)


def test_cuda_graph_of_kaio_ops() -> None:
    x = torch.randn(64, 256, device="cuda")
    r = torch.randn(64, 256, device="cuda")
    w = torch.randn(256, device="cuda")
    m = torch.randn(256, 128, device="cuda")

    def step() -> Any:
        h = kaio.ops.add(x, r)
        h = kaio.ops.rms_norm(h, w, 1e-6)
        h = kaio.ops.matmul_auto(h, m)
        h = kaio.ops.gelu(h)
        return kaio.ops.softmax(h)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up on the capture stream: kernels loaded, matmul tuned, workspaces made
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = step()
    x.copy_(torch.randn(64, 256, device="cuda"))  # new input, replayed without any Python
    g.replay()
    torch.cuda.synchronize()
    F = torch.nn.functional
    ref = torch.softmax(F.gelu(F.rms_norm(x + r, (256,), w, 1e-6) @ m), -1)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_torch_compile_sees_the_ops() -> None:
    def f(x: Any, w: Any) -> Any:
        return kt.softmax(kt.rms_norm(x, w, 1e-6)) * 2

    x, w = torch.randn(8, 64, device="cuda"), torch.randn(64, device="cuda")
    cf = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(cf(x, w), f(x, w))
