"""GPU probe (issue 11, the bench's training rows): host seconds and device seconds of one bundled
training step (``flash_attention`` forward, then ``torch.autograd.grad``), the TMA backward (the GPU
default) against the pointer kernels, on the bench matrix's training shapes. Writes JSON to ``--out``.

    python benchmarks/gpu_train_host_probe.py --out $OUT/train-host-probe.json

Per shape and variant: ``host_us`` (:func:`iomodel.bench.timing.enqueue_seconds` over 30 steps: the
median host time to enqueue one step with the GPU idle before it), ``device_us``
from :func:`iomodel.bench.timing.do_bench_interleaved` (triton's do_bench per round, L2 flushed before
every repetition, rounds rotated; it does not hide host time, so a step whose host time exceeds its
device time reads as host time there), and ``queued_us`` (100 steps enqueued back to back, CUDA events / 100).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved, enqueue_seconds  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels import heuristics as hx  # noqa: E402
import kernels.flash_attention as fa  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402

SHAPES = [(8, 16, 2048, 64), (2, 16, 8192, 64), (8, 16, 2048, 128), (2, 16, 8192, 128)]


def _pointer_tiles() -> dict:
    return {k: dataclasses.replace(c, tma=False, mask_split=False, fused_launch=False) for k, c in hx.GPU_BACKWARD.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if (rc := benchmark_start(args.out)) is not None:  # before any GPU time is spent
        return rc
    default, pointer = dict(hx.GPU_BACKWARD), _pointer_tiles()
    rows = []
    for B, H, N, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                   for _ in range(3))
        do = torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16, generator=g)

        def step():
            o = flash_attention(q, k, v, causal=True)
            o = o[0] if isinstance(o, tuple) else o  # (o, lse)
            return torch.autograd.grad(o, (q, k, v), do)

        fns, host = {}, {}
        for name, tiles in (("tma", default), ("pointer", pointer)):
            def fn(tiles=tiles):
                if hx.GPU_BACKWARD != tiles:  # another variant: its own launch plans (kept per key)
                    hx.GPU_BACKWARD.clear()
                    hx.GPU_BACKWARD.update(tiles)
                    fa._PLANS.clear()
                return step()
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            host[name] = enqueue_seconds(fn, calls=30) * 1e6
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(100):
                fn()
            e1.record()
            torch.cuda.synchronize()
            host[name + "_queued"] = e0.elapsed_time(e1) * 10.0  # ms/100 -> us
            fns[name] = fn
        dev = do_bench_interleaved(fns, rounds=3, warmup_ms=50, rep_ms=200)
        row = {"B": B, "H": H, "N": N, "d": d, "causal": True, "dtype": "bf16"}
        for name in fns:
            med = statistics.median(dev[name])
            row[name] = {"host_us": round(host[name], 1), "queued_us": round(host[name + "_queued"], 1),
                         "device_us": round(float(med) * 1e6, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    hx.GPU_BACKWARD.clear()
    hx.GPU_BACKWARD.update(default)
    fa._PLANS.clear()
    return benchmark_finish(args.out, {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
                                       "device": torch.cuda.get_device_name(), "environment": environment("cuda"),
                                       "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
