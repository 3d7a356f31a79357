"""GPU probe (issue 11): the dK/dV kernel's two GQA loop orders side by side in one run.

    python3 benchmarks/gpu_dkdv_order_probe.py --out $OUT/dkdv-order-probe-h200-<date>.json [--rounds 5]

``heads-outer`` (each group head's query tiles from lo_j up, then the next head: the kernel before
2026-12-04) against ``tiles-descending`` (query tiles from the last down, the slice's heads inner:
FlashAttention-2's reverse ``m_block`` loop; ``Tiling.bwd_dkdv_order``), on causal GQA/MQA layers
of real models, bf16, the GPU default tiles and group split otherwise (``backward_config``).
Per shape: the backward alone (``flash_attention_backward``), each order timed by
:func:`iomodel.bench.timing.do_bench_interleaved` (L2 flushed before every repetition, rotating
order), and the ratio heads-outer / tiles-descending of the medians (> 1: descending faster);
the largest difference between the two orders' dq, dk, dv relative to the largest |dk| (another
summation order over the group's (tile, head) pairs, so not bitwise); and each order's error against
fp32 SDPA MATH's gradients (relative Frobenius norm).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402

#: (model, B, H, H_kv, N, HEAD_DIM): causal GQA/MQA training layers (top-left).
SHAPES = [
    ("Llama-3-8B 4k", 2, 32, 8, 4096, 128),
    ("Llama-3-8B 16k", 1, 32, 8, 16384, 128),
    ("Llama-2-70B 6k", 1, 64, 8, 6144, 128),
    ("Llama-2-70B 16k", 1, 64, 8, 16384, 128),
    ("Llama-3.1-405B 2k", 1, 128, 8, 2048, 128),
    ("Qwen2-7B 4k", 1, 28, 4, 4096, 128),
    ("Falcon-7B 6k", 1, 71, 1, 6144, 64),
    ("Mistral-like 8k", 1, 32, 8, 8192, 128),
]
ORDERS = ("heads-outer", "tiles-descending")


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def probe(rounds: int, quick: bool) -> list[dict]:
    rows = []
    for name, B, H, Hk, N, d in SHAPES[:3] if quick else SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, N, d, device="cuda", generator=g, dtype=torch.bfloat16)
        k, v = (torch.randn(B, Hk, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        do = torch.randn_like(q)
        o, lse = flash_attention(q, k, v, True)
        base = bw.backward_config(d, "bf16", True)
        fns, grads, ran = {}, {}, {}
        for order in ORDERS:
            cfg = dataclasses.replace(base, dkdv_order=order)
            *grads[order], ran[order] = bw.flash_attention_backward(do, q, k, v, o, lse, True, config=cfg,
                                                                     return_config=True)
            fns[order] = (lambda c: lambda: bw.flash_attention_backward(do, q, k, v, o, lse, True, config=c))(cfg)
        torch.cuda.synchronize()
        times = do_bench_interleaved(fns, rounds, warmup_ms=25, rep_ms=100)
        med = {o_: statistics.median(t) for o_, t in times.items()}
        scale = grads["heads-outer"][1].abs().max().item()
        diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(grads["heads-outer"],
                                                                                grads["tiles-descending"]))
        row = {"shape": name, "B": B, "H": H, "H_kv": Hk, "N": N, "head_dim": d,
               "group_splits": ran["tiles-descending"].group_splits,
               "ran": {o_: ran[o_].dkdv_order for o_ in ORDERS},
               "seconds": times, "median_us": {o_: m * 1e6 for o_, m in med.items()},
               "ratio_outer_over_descending": med["heads-outer"] / med["tiles-descending"],
               "max_abs_diff_over_max_dk": diff / scale}
        if B * H * N <= 2 * 32 * 4096:  # the fp32 MATH reference where its N x N scores fit
            qf, kf, vf = (t.float().requires_grad_(True) for t in (q, k, v))
            of = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True, enable_gqa=True)
            refs = torch.autograd.grad(of, (qf, kf, vf), do.float())
            row["rel_error_vs_fp32"] = {o_: [_rel(x, r) for x, r in zip(grads[o_], refs)] for o_ in ORDERS}
            del qf, kf, vf, of, refs
        rows.append(row)
        print(f"{name:22s} S={row['group_splits']:2d}  heads-outer {med['heads-outer'] * 1e6:9.1f} us  "
              f"tiles-descending {med['tiles-descending'] * 1e6:9.1f} us  ratio {row['ratio_outer_over_descending']:.3f}"
              f"  max diff {row['max_abs_diff_over_max_dk']:.1e}", flush=True)
        del q, k, v, do, o, lse, grads
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="receipt JSON to write")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per shape (>= 1)")
    ap.add_argument("--quick", action="store_true", help="the first three shapes only")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    if (rc := benchmark_start(args.out)) is not None:
        return rc
    rows = probe(args.rounds, args.quick)
    cmd = "python3 benchmarks/gpu_dkdv_order_probe.py " + " ".join(argv if argv is not None else sys.argv[1:])
    return benchmark_finish(args.out, {"command": cmd, "environment": environment("cuda"), "rows": rows})


if __name__ == "__main__":
    raise SystemExit(main())
