"""GPU probe (issues 11 and 12): the HEAD_DIM 256 backward's tiles without register spills.

Hold-out 6 (``receipts/ncu-h200-train-holdout6-2026-12-03.json``) measured Gemma-2's training steps
(HEAD_DIM 256) with L2 writes 1.4-1.5x the model's: the TMA dK/dV and dQ kernels of
``GPU_BACKWARD[(256, *)]`` (one stage) spill registers inside their loops (``ptxas``: 132 and 316
bytes per thread). Compiled on a CPU (``kernels.compile_check`` machinery), two stages remove the
spills of both kernels with the same tiles (195 and 171 registers). This probe times the
candidates side by side in one run and checks them against the fp64 gradients. Writes JSON to
``--out``.

    python benchmarks/gpu_bwd_d256_probe.py --out $OUT/bwd-d256-probe.json [--rounds 5] [--round 1|2|3]

1. Exactness: dq, dk, dv of each candidate against ``reference_attention_backward`` (fp64) on a
   GQA shape of each mask (relative Frobenius errors beside the current tiles' errors).
2. Backward alone (``flash_attention_backward`` with the candidate's config, o and lse computed
   once) on Gemma-2's layers and two more, interleaved (``do_bench_interleaved``), bf16.
3. Forward + backward of the fastest candidate beside the current tiles, SDPA FLASH and SDPA
   cuDNN (``torch.autograd.grad``), interleaved; a backend that refuses HEAD_DIM 256 is recorded
   with its one-line reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_backward_tune import bundled_step, sdpa_step  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.measure.ncu import benchmark_preflight  # noqa: E402
from iomodel.paths import finish_probe_receipt  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels import heuristics as hx  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402

# (name, B, H, H_kv, N, causal): Gemma-2-9B and Gemma-2-2B's layers (hold-out 6), a Gemma-3-style
# 8k causal layer and a non-causal MHA layer
ROWS = [("gemma2-9b-4k", 1, 16, 8, 4096, True), ("gemma2-2b-2k-b2", 2, 8, 4, 2048, True),
        ("h8-kv4-8k", 1, 8, 4, 8192, True), ("mha-4k-nc-b2", 2, 16, 16, 4096, False)]


def candidates(causal: bool, round_: int = 1) -> dict[str, hx.BackwardConfig]:
    """The tiles each round compares (spill-free by a CPU compile for sm_90, except the first tiles).

    Round 1: the first, untuned 256 tiles (``current`` in that receipt) with two stages, and three
    other tilings. Round 2 (after round 1's receipt): every spill-free dK/dV tiling found on the
    CPU with round 1's best dQ tiles, then every spill-free dQ tiling with round 1's best dK/dV tiles
    (one kernel varied at a time). Round 3: the tiles ``GPU_BACKWARD`` took from round 2 (both
    winners together, ``current``) beside the first tiles and round 2's best row.

    Args:
        causal: the mask of the rows the tiles are for; round_: 1, 2 or 3.

    Returns:
        name -> ``BackwardConfig`` (tiles in elements), ``current`` first.

    Raises:
        IomodelError: an unknown round.
    """
    if round_ not in (1, 2, 3):
        raise IomodelError(f"round must be 1, 2 or 3, got {round_!r}")
    first = hx.GPU_BACKWARD_FP32[(256, causal)]  # the first tiles (fp32 keeps them)
    if round_ == 3:
        cur = hx.backward_config(256, "bf16", causal)
        return {"current": cur, "first-tiles": first,
                "r2-dq-winner": dataclasses.replace(cur, num_stages=1)}  # round 2's best row: dK/dV in one stage
    cur = first  # rounds 1 and 2 ran before GPU_BACKWARD changed: their "current" is the first tiles
    if round_ == 1:
        return {
            "current": cur,
            "stages2": dataclasses.replace(cur, num_stages=2, dq_num_stages=2),  # same tiles: 0 B spills both
            "kv16x32w8-dq-s2": dataclasses.replace(cur, block_m=16, block_n=32, num_stages=1, dq_num_stages=2),
            "kv32x64w8-dq-s2": dataclasses.replace(cur, block_m=32, block_n=64, num_stages=1, dq_num_stages=2),
            "stages2-dq16x64": dataclasses.replace(cur, num_stages=2, dq_block_m=16, dq_block_n=64, dq_num_stages=1),
        }
    base = dataclasses.replace(cur, block_m=32, block_n=64, num_warps=8, num_stages=1, dq_block_m=64, dq_block_n=16,
                               dq_num_warps=8, dq_num_stages=2)
    out = {"current": cur, "kv32x64s1-dq64x16s2": base}
    for bm, bn, st in ((32, 64, 2), (64, 32, 1), (16, 64, 2)):
        out[f"kv{bm}x{bn}s{st}"] = dataclasses.replace(base, block_m=bm, block_n=bn, num_stages=st)
    for bm, bn, st in ((64, 32, 2), (64, 64, 2), (128, 16, 2), (64, 16, 3), (128, 32, 2), (64, 32, 3)):
        out[f"dq{bm}x{bn}s{st}"] = dataclasses.replace(base, dq_block_m=bm, dq_block_n=bn, dq_num_stages=st)
    return out


def _gqa_inputs(B, H, H_kv, N, dt, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, H, N, 256, device="cuda", generator=g, dtype=dt)
    k, v = (torch.randn(B, H_kv, N, 256, device="cuda", generator=g, dtype=dt) for _ in range(2))
    do = torch.randn(B, H, N, 256, device="cuda", generator=g, dtype=dt)
    return q, k, v, do


def _rel(a, ref):
    return float((a.double() - ref).norm() / ref.norm().clamp_min(1e-300))


def exactness(round_: int) -> list[dict]:
    out = []
    for causal, align in ((True, "top-left"), (True, "bottom-right"), (False, "top-left")):
        q, k, v, do = _gqa_inputs(1, 8, 2, 1024, torch.bfloat16, seed=1)
        if align == "bottom-right":
            q, do = q[:, :, :700].contiguous(), do[:, :, :700].contiguous()
        ref = reference_attention_backward(do, q, k, v, causal, align)
        o, lse = flash_attention(q, k, v, causal, align)
        for name, cfg in candidates(causal, round_).items():
            got = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)
            errs = {t: _rel(x, r) for t, x, r in zip(("dq", "dk", "dv"), got, ref)}
            out.append(dict(causal=causal, align=align, variant=name, **errs,
                            nan=any(bool(torch.isnan(x).any()) for x in got)))
            print(f"exact {align if causal else 'none':12s} {name:18s} " + " ".join(f"{t} {e:.2e}" for t, e in errs.items()))
    return out


def speed(round_: int, rounds: int) -> list[dict]:
    rows = []
    for name, B, H, H_kv, N, causal in ROWS:
        q, k, v, do = _gqa_inputs(B, H, H_kv, N, torch.bfloat16)
        o, lse = flash_attention(q, k, v, causal)
        fns = {n: (lambda c=c: bw.flash_attention_backward(do, q, k, v, o, lse, causal, config=c))
               for n, c in candidates(causal, round_).items()}
        t = do_bench_interleaved(fns, rounds, 25, 100)
        med = {n: statistics.median(s) for n, s in t.items()}
        row = dict(row=name, B=B, H=H, H_kv=H_kv, N=N, causal=causal, backward_us={n: m * 1e6 for n, m in med.items()},
                   vs_current={n: med["current"] / m for n, m in med.items()})
        rows.append(row)
        print(f"bwd {name:18s} " + " ".join(f"{n} {m * 1e6:.0f}us ({med['current'] / m:.3f}x)" for n, m in med.items()))
    return rows


def step_speed(round_: int, best: str, rounds: int) -> list[dict]:
    rows = []
    for name, B, H, H_kv, N, causal in ROWS:
        q, k, v, do = _gqa_inputs(B, H, H_kv, N, torch.bfloat16)
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
        cands = candidates(causal, round_)
        fns = {n: bundled_step(q, k, v, do, causal, cands[n]) for n in ("current", best)}
        refused = {}
        for backend in ("sdpa-flash", "sdpa-cudnn"):
            try:
                kk, vv = (t.repeat_interleave(H // H_kv, 1).detach().requires_grad_(True) for t in (k, v))
                fn = sdpa_step(backend, q, kk, vv, do, causal)
                fn()
                torch.cuda.synchronize()
                fns[backend] = fn
            except Exception as exc:  # noqa: BLE001 - record why the backend did not run
                refused[backend] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        t = do_bench_interleaved(fns, rounds, 25, 100)
        med = {n: statistics.median(s) for n, s in t.items()}
        row = dict(row=name, step_us={n: m * 1e6 for n, m in med.items()}, refused=refused,
                   best_vs={n: m / med[best] for n, m in med.items()})
        rows.append(row)
        print(f"step {name:18s} " + " ".join(f"{n} {m * 1e6:.0f}us" for n, m in med.items()) + (f" refused {refused}" if refused else ""))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--round", type=int, choices=(1, 2, 3), default=1, help="the candidate list (candidates())")
    args = ap.parse_args()
    try:
        if args.rounds < 1:
            raise IomodelError(f"--rounds must be at least 1, got {args.rounds}")
        benchmark_preflight(args.out)  # a GPU first, then a writable --out (nothing made without a GPU)
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    receipt = dict(probe="bwd-d256", command=" ".join(sys.argv), environment=environment("cuda"),
                   round=args.round,
                   candidates={n: dataclasses.asdict(c) for n, c in candidates(True, args.round).items()})
    receipt["exactness"] = exactness(args.round)
    receipt["backward"] = speed(args.round, args.rounds)
    geo = {n: statistics.geometric_mean([r["vs_current"][n] for r in receipt["backward"]])
           for n in receipt["backward"][0]["vs_current"]}
    best = max(geo, key=geo.get)
    receipt["geomean_vs_current"], receipt["best"] = geo, best
    print(f"best {best}: geomean {geo[best]:.3f}x the current tiles")
    receipt["step"] = step_speed(args.round, best, args.rounds)
    finish_probe_receipt(args.out, receipt, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
