"""GPU: forward + backward of the bundled kernels on MQA and large-group GQA layers, where the
dK/dV kernel splits the GQA group over S slices (``kernels.heuristics.dkdv_group_splits``),
against the same kernels forced to S = 1, SDPA FLASH and SDPA cuDNN (``enable_gqa``), timed
side by side in one run (:func:`iomodel.bench.timing.do_bench_interleaved`). Writes JSON to ``--out``.

    python benchmarks/gpu_mqa_backward.py --out $OUT/mqa.json [--quick] [--no-check]

Per row: the S the launcher chose, median seconds and TFLOP/s of each (FLOPs: forward
4·B·H·d·visible pairs, backward 2.5x that), ratios SDPA time / ours (> 1: ours faster) and
S = 1 time / ours, extra peak memory above the inputs, and (unless ``--no-check``) the
relative Frobenius errors of dq, dk, dv against the fp64 reference
(``kernels.reference.reference_attention_backward``) for the chosen S and for S = 1, and
whether a rerun gives the same bits.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gpu_backward_tune import bundled_step, extra_peak_bytes, sdpa_step  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402

#: (name, B, H, H_kv, HEAD_DIM, N, causal): the issue's MQA/GQA rows and one MHA row (S = 1, unchanged).
ROWS = [
    ("falcon-7b", 1, 71, 1, 64, 2048, True),
    ("mqa-b2-h16", 2, 16, 1, 64, 2048, True),
    ("mqa-h8-d128-8k", 1, 8, 1, 128, 8192, True),
    ("gqa-h64-kv8-4k", 1, 64, 8, 128, 4096, True),
    ("mha-b4-h16-4k", 4, 16, 16, 128, 4096, True),
]


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def row(name: str, B: int, H: int, Hkv: int, d: int, N: int, causal: bool, quick: bool, check: bool) -> dict:
    """One layer: every implementation timed in one interleaved run (see the module docstring)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(B, Hkv, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    auto = bw.backward_config(d, "bf16", causal)
    with torch.no_grad():
        o, lse = flash_attention(q, k, v, causal)
    ran = bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o, lse, causal, config=auto,
                                      return_config=True)[3]
    one = dataclasses.replace(auto, group_splits=1)

    fns = {"tiled": bundled_step(q, k, v, do, causal, auto), "tiled-S1": bundled_step(q, k, v, do, causal, one),
           "sdpa-flash": sdpa_step("sdpa-flash", q, k, v, do, causal),
           "sdpa-cudnn": sdpa_step("sdpa-cudnn", q, k, v, do, causal)}
    pairs = N * (N + 1) // 2 if causal else N * N
    flops = 3.5 * 4 * B * H * d * pairs
    out = dict(name=name, B=B, H=H, H_kv=Hkv, d=d, N=N, causal=causal, flops=flops,
               group_splits=ran.group_splits, config=ran.to_dict())
    peak = extra_peak_bytes(fns, out)
    samples = do_bench_interleaved(fns, rounds=2 if quick else 3, warmup_ms=10, rep_ms=50)
    med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
    out.update(samples_s=samples, median_s=med, tflops={n: flops / t / 1e12 for n, t in med.items()},
               extra_peak_bytes=peak,
               ratios={f"{ref}/tiled": med[ref] / med["tiled"] for ref in med if ref != "tiled"})
    if check:
        with torch.no_grad():
            o, lse = flash_attention(q, k, v, causal)
        refs = reference_attention_backward(do, q.detach(), k.detach(), v.detach(), causal)
        errs = {}
        for n, c in (("tiled", auto), ("tiled-S1", one)):
            grads = bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o, lse, causal, config=c)
            errs[n] = {t: _rel(x, r) for t, x, r in zip(("dq", "dk", "dv"), grads, refs)}
            if n == "tiled":
                again = bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o, lse, causal, config=c)
                out["rerun_bit_identical"] = all(torch.equal(a, b) for a, b in zip(grads, again))
        out["rel_error_vs_fp64"] = errs
        del refs
    print(name, f"S={ran.group_splits}", {n: round(x, 1) for n, x in out["tflops"].items()},
          {r: round(x, 3) for r, x in out["ratios"].items()}, {n: round(b / 2**20) for n, b in peak.items()},
          out.get("rel_error_vs_fp64", ""), flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="2 timing rounds instead of 3")
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip the fp64 error check")
    args = ap.parse_args()
    if (rc := benchmark_start(args.out)) is not None:  # before any GPU time is spent
        return rc
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv), "rows": []}
    for r in ROWS:
        res["rows"].append(row(*r, quick=args.quick, check=args.check))
        torch.cuda.empty_cache()
    res["seconds"] = time.time() - t0
    return benchmark_finish(args.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
