"""GPU probe (issues 11 and 14): does starting causal programs heaviest first, in head groups,
speed the bundled kernels up? Writes JSON to ``--out``.

    python benchmarks/gpu_lpt_probe.py --out $OUT/lpt-probe.json [--quick]

A causal query tile i of the forward and the dQ kernel does work ∝ i + 1, a key tile j of the
dK/dV kernel ∝ T − j. Started tiles fastest (the bundled grid), every head ends on its heaviest
(forward, dQ) tiles, so the last programs of the launch are long ones and the SMs idle at the
end. ``grid_order`` "head-grouped:G" (``kernels.flash_attention._head_grouped``) starts the grid
rows in groups of G, rows fastest within a group; with the heaviest tile first it is
FlashAttention-3's LPT scheduler order (``hopper/tile_scheduler.hpp``, SingleTileLPTScheduler).

Per causal prefill shape: the autotuned config (launched tiles-fastest), the same tiles in
either tile order, head-grouped:G reverse for several G, and the plain call (``default``: the
kernel's own rule, ``kernels.flash_attention._lpt_config``), timed side by side with SDPA cuDNN
(``iomodel.bench.timing.do_bench_interleaved``: do_bench medians, L2 flushed, rounds rotated).
The receipt's ``training`` part (per causal training shape, B·N = 16k tokens, H = 16: one
forward+backward step with the TMA backward kernels' grid rows head-grouped and dQ tiles heaviest
first, beside SDPA FLASH and cuDNN) was measured by this script at commit dbd6b0e, where the
backward kernels took ``BackwardConfig.head_group`` / ``dq_reverse``; those knobs were taken out
again (the training-step L2 model does not describe them), and with them that part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_backward_tune import _inputs  # noqa: E402
from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402

FWD_SHAPES = [(2, 16, 8192, 128, torch.bfloat16), (8, 16, 2048, 128, torch.bfloat16),
              (4, 16, 4096, 64, torch.float16), (1, 16, 16384, 128, torch.bfloat16),
              (16, 16, 1024, 128, torch.bfloat16), (2, 16, 8192, 64, torch.bfloat16)]


def _med(xs):
    return float(statistics.median(xs))


def forward_part(quick: bool) -> list[dict]:
    rows = []
    for B, H, N, d, dt in (FWD_SHAPES[:2] if quick else FWD_SHAPES):
        q, k, v, _ = _inputs(B, H, N, d, dt, grad=False)
        _, _, cfg = flash_attention(q, k, v, True, return_config=True)  # autotunes
        variants = {"autotuned": cfg, "tiles-reverse": cfg.with_(tile_order="reverse"),
                    "tiles-forward": cfg.with_(tile_order="forward")}
        for g in (2, 4, 8, 16, 32, B * H):
            if g <= B * H:
                variants[f"head-grouped:{g}-reverse"] = cfg.with_(grid_order=f"head-grouped:{g}", tile_order="reverse")
        fns = {n: (lambda c=c: flash_attention(q, k, v, True, config=c)) for n, c in variants.items()}
        fns["default"] = lambda: flash_attention(q, k, v, True)  # the plain call: the kernel's own launch rule
        default_cfg = flash_attention(q, k, v, True, return_config=True)[2]
        fns["sdpa-cudnn"] = attention_call("sdpa-cudnn", dense_inputs(q, k, v, True))
        t = do_bench_interleaved(fns, rounds=3, warmup_ms=25, rep_ms=100)
        med = {n: _med(s) for n, s in t.items()}
        row = {"B": B, "H": H, "N": N, "d": d, "dtype": str(dt).split(".")[-1], "causal": True,
               "autotuned": cfg.to_dict(), "default": default_cfg.to_dict(), "median_s": med, "samples_s": t,
               "vs_cudnn": {n: med["sdpa-cudnn"] / m for n, m in med.items()},
               "vs_autotuned": {n: med["autotuned"] / m for n, m in med.items()}}
        print({n: round(r, 3) for n, r in row["vs_cudnn"].items()}, B, N, d, flush=True)
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="two shapes")
    args = ap.parse_args()
    if (rc := benchmark_start(args.out)) is not None:  # before any GPU time is spent
        return rc
    t0 = time.time()
    out = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
           "device": torch.cuda.get_device_name(), "environment": environment("cuda")}
    out["forward"] = forward_part(args.quick)
    out["seconds"] = time.time() - t0
    return benchmark_finish(args.out, out)


if __name__ == "__main__":
    sys.exit(main())
