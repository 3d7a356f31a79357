"""Where the host time of one plain ``flash_attention`` call goes (GPU only; issue 14).

    python3 benchmarks/host_profile.py

Two host-bound calls: a decode (B = 1, H = 32, H_kv = 8, HEAD_DIM = 128, bf16, 8192 cached keys,
split-KV) and a TMA prefill (B = 1, H = 16, N = 1024, HEAD_DIM = 128, bf16, causal). Per call it
prints whether the cached plan launches through Triton's C launcher (``_Launch.raw``), the mean
wall time of 2000 back-to-back calls, then the same with every launch through
``CompiledKernel.run`` (the wrapped launcher; TMA: four ``TensorDescriptor`` objects encoded per
call), the pieces alone (plan lookup, one ``torch.empty``, encoding the four tensor maps) and
cProfile's top functions by own time. Measured on the H200, 2026-12-01, before the C launcher:
decode 38 µs a call, of which 4 ``torch.empty`` 19 µs, 2 launches through ``CudaLauncher`` 15 µs,
the plan lookup 3.3 µs.
"""
import cProfile
import pstats
import sys
import time

import torch

sys.path.insert(0, '.')
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.measure.ncu import BENCHMARK_NEEDS, check_gpu  # noqa: E402

try:
    check_gpu(*BENCHMARK_NEEDS)  # one line and exit 2 on a machine without a GPU
except IomodelError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
from kernels import flash_attention as fa  # noqa: E402


def _us(fn, n=2000):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return dt


CASES = {
    "decode B1 H32/8 Nk8192 d128 bf16": ((1, 32, 1), (1, 8, 8192), True, "bottom-right"),
    "prefill-tma B1 H16 N1024 d128 bf16 causal": ((1, 16, 1024), (1, 16, 1024), True, "top-left"),
}
for name, (qs, ks, causal, align) in CASES.items():
    fa._PLANS.clear()
    q = torch.randn(*qs, 128, device='cuda', dtype=torch.bfloat16)
    k = torch.randn(*ks, 128, device='cuda', dtype=torch.bfloat16)
    v = torch.randn_like(k)

    def call():
        return fa.flash_attention(q, k, v, causal, align)

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    plan = next(iter(fa._PLANS.values()))
    launches = [x for x in (plan.main, plan.combine) if x is not None]
    print(f"== {name}: path {plan.path}, launches {len(launches)}, C launcher "
          f"{[x.raw is not None for x in launches]}, hooks ok {fa._no_launch_hooks()}")
    print(f"us/call (C launcher)       {_us(call):.2f}")
    saved = [x.raw for x in launches]
    for x in launches:
        x.raw = None
    print(f"us/call (wrapped launcher) {_us(call):.2f}")
    for x, r in zip(launches, saved):
        x.raw = r
    print(f"us/call (C launcher again) {_us(call):.2f}")
    print(f"plan lookup us             {_us(lambda: fa._plan(q, k, v, causal, align, None)):.2f}")
    print(f"torch.empty us             {_us(lambda: torch.empty(qs + (128,), device='cuda', dtype=q.dtype)):.2f}")
    print("pieces of one call, us (each alone, 2000 calls):")
    o_shape, lse_shape = plan.o_shape, plan.lse_shape
    n_o = q.numel() * q.element_size()
    n_all = n_o + 4 * (n_o // (q.element_size() * q.shape[-1]))
    device = q.device

    def one_buffer():
        buf = torch.empty(n_all, dtype=torch.uint8, device=device)
        return buf[:n_o].view(q.dtype).view(o_shape), buf[n_o:].view(torch.float32).view(lse_shape)

    pieces = {
        "python call of a no-op": lambda: None,
        "_needs_grad": lambda: fa._needs_grad(q, k, v),
        "_plan_key": lambda: fa._plan_key(q, k, v, causal, align, None, None, None, None, None),
        "_no_launch_hooks": fa._no_launch_hooks,
        "_stream_key": fa._stream_key,
        "torch.empty(o, dtype, device obj)": lambda: torch.empty(o_shape, dtype=q.dtype, device=device),
        "torch.empty(lse, dtype, device obj)": lambda: torch.empty(lse_shape, dtype=torch.float32, device=device),
        "q.new_empty(o)": lambda: q.new_empty(o_shape),
        "q.new_empty(lse, fp32)": lambda: q.new_empty(lse_shape, dtype=torch.float32),
        "torch.empty_like(q)": lambda: torch.empty_like(q),
        "one uint8 buffer + 4 views": one_buffer,
    }
    for label, fn in pieces.items():
        print(f"  {label:36s} {_us(fn):.2f}")
    if plan.main.boxes:
        o = torch.empty_like(q)
        print(f"4 tensor maps us           {_us(lambda: plan.main._tensor_maps((q, k, v, o), plan.main.raw[3])):.2f}")
        print(f"4 TensorDescriptor us      {_us(lambda: plan.main._host_descriptors((q, k, v, o))):.2f}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        call()
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats('tottime').print_stats(14)
