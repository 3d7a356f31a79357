"""Speed of the compiled traffic model: a 10,000-point sweep, compile time reported apart.

Run: ``python benchmarks/sweep_speed.py [--points 10000] [--repeats 5]``.

The sweep varies seqlen_q = seqlen_k (causal, so the exact per-tile sums are evaluated
through their vectorized closed forms), BLOCK_M and the batch over one Llama-3-8B-like
layer, forward and forward+backward. It prints the one-off build + lambdify time, the best
of ``--repeats`` evaluation times, and — side by side, for scale — the time of the exact
per-point ``predict`` (Python integers, tile sums as literal loops) on a few points. The
target is an evaluation under 1 s for 10,000 points on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from iomodel import LayerSpec, Tiling, get_hardware
from iomodel.traffic import compile_sweep, predict, sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    hw = get_hardware("H200")
    tiling = Tiling(128, 64)
    rng = np.random.default_rng(0)
    n = rng.integers(1, 131_072, size=args.points)  # tokens
    vary = {
        "seqlen_q": n,
        "seqlen_k": n,
        "block_m": rng.choice([64, 128], size=args.points),
        "batch": rng.integers(1, 9, size=args.points),
    }
    print(f"{'pass':<8} {'points':>7} {'compile s':>10} {'sweep s':>9} {'us/point':>9} "
          f"{'predict s/pt':>13} {'sweep vs predict':>17}")
    for backward in (False, True):
        spec = LayerSpec(1, 32, 8, 128, 8192, 8192, dtype="bf16", causal=True, backward=backward,
                         name="llama-3-8b-like")
        t0 = time.perf_counter()
        compile_sweep(spec, tiling)
        t_compile = time.perf_counter() - t0
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = sweep(spec, tiling, hw, vary)
            best = min(best, time.perf_counter() - t0)
        assert res["tiled"]["hbm_bytes"].shape == (args.points,)
        k = 20
        predict(spec, tiling, hw)  # compile the exact evaluator once, outside the timing
        t0 = time.perf_counter()
        for i in range(k):
            predict(spec.with_(seqlen_q=int(n[i]), seqlen_k=int(n[i]), batch=int(vary["batch"][i])),
                    Tiling(int(vary["block_m"][i]), 64), hw)
        t_pred = (time.perf_counter() - t0) / k
        print(f"{spec.passes:<8} {args.points:>7} {t_compile:>10.3f} {best:>9.4f} {1e6 * best / args.points:>9.2f} "
              f"{t_pred:>13.5f} {t_pred * args.points / best:>16.0f}x")
    print("target: sweep s < 1.0 for 10,000 points (compile time excluded)")


if __name__ == "__main__":
    main()
