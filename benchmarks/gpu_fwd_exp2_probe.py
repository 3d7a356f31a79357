"""GPU probe (issue 14, prefill): half or all of the forward's softmax exponentials on the FMA pipes
(``kernels.flash_attention._exp2_fma``, FlashAttention-4's trick) instead of the MUFU ``ex2`` unit,
against the same kernel with MUFU only, the autotuned bundled call and SDPA cuDNN, side by side
in one run. Writes JSON to ``--out``.

    python benchmarks/gpu_fwd_exp2_probe.py --out $OUT/exp2.json

Each variant launches ``_attn_fwd_tma`` directly with the first autotune candidate of its shape
class (``kernels.heuristics.prefill_candidates``) and ``EXP2_FMA`` 0 (MUFU), 1 (odd columns on the
FMA pipes) or 2 (all). Error: relative Frobenius error of batch 0, heads 0-1 against SDPA MATH in
fp32 on upcast inputs. TFLOP/s with 4·B·H·d·visible pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kernels.flash_attention as fa  # noqa: E402
from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from kernels import heuristics as hx  # noqa: E402

#: Issue 14's prefill table (B, H, N, HEAD_DIM, dtype, causal), then two more rows.
SHAPES = [(2, 16, 8192, 128, torch.bfloat16, False), (2, 16, 8192, 128, torch.bfloat16, True),
          (8, 16, 2048, 128, torch.bfloat16, True), (4, 16, 4096, 64, torch.float16, False),
          (1, 16, 16384, 128, torch.bfloat16, False), (2, 16, 8192, 64, torch.bfloat16, True)]


def direct(q, k, v, causal, variant):
    """A zero-argument launch of ``_attn_fwd_tma`` with the first candidate's tiles and EXP2_FMA=variant."""
    B, H, N, d = q.shape
    dt = "bf16" if q.dtype == torch.bfloat16 else "fp16"
    c = hx.prefill_candidates(d, dt, causal, "prefill-tma")[0]
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)
    descs = fa._descriptors([c.block_m, c.block_n, d], q, k, v, o)
    grid = (triton.cdiv(N, c.block_m), B * H, 1)
    kw = dict(H=H, G=1, N_Q=N, N_K=N, CAUSAL_OFF=0, N_Q_BUCKET=hx.seqlen_bucket(N), N_K_BUCKET=hx.seqlen_bucket(N),
              WIN_L=0, WIN_R=0, HEAD_DIM=d, BLOCK_M=c.block_m, BLOCK_N=c.block_n, CAUSAL=causal, IN_DTYPE=dt,
              WARP_SPECIALIZE=c.warp_specialize, EMULATE_BF16=False, REVERSE=c.tile_order == "reverse",
              EXP2_FMA=variant, num_warps=c.num_warps, num_stages=c.num_stages)

    def run():
        fa._attn_fwd_tma[grid](*descs, lse, d ** -0.5, **kw)
        return o
    return run, c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv), "rows": []}
    for B, H, N, d, dt, causal in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=dt) for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(),
                                                               v[:1, :2].float(), is_causal=causal)
        fns, errs, tiles = {}, {}, None
        fns["bundled"] = lambda: fa.flash_attention(q, k, v, causal)[0]
        for variant in (0, 1, 2):
            run, tiles = direct(q, k, v, causal, variant)
            out = run()
            torch.cuda.synchronize()
            fns[f"exp2-fma{variant}"] = run
            errs[f"exp2-fma{variant}"] = ((out[:1, :2].float() - ref).norm() / ref.norm()).item()
        out = fns["bundled"]()
        errs["bundled"] = ((out[:1, :2].float() - ref).norm() / ref.norm()).item()
        cud = attention_call("sdpa-cudnn", dense_inputs(q, k, v, causal))
        errs["sdpa-cudnn"] = ((cud()[:1, :2].float() - ref).norm() / ref.norm()).item()
        fns["sdpa-cudnn"] = cud
        samples = do_bench_interleaved(fns, rounds=3, warmup_ms=10, rep_ms=60)
        med = {n: sorted(s)[1] for n, s in samples.items()}
        pairs = N * (N + 1) // 2 if causal else N * N
        flops = 4 * B * H * d * pairs
        row = dict(B=B, H=H, N=N, d=d, dtype=str(dt), causal=causal, tiles=tiles.__dict__, samples_s=samples,
                   median_s=med, tflops={n: flops / t / 1e12 for n, t in med.items()}, rel_err=errs,
                   ratio_vs_cudnn={n: med["sdpa-cudnn"] / t for n, t in med.items()},
                   speedup_vs_mufu={n: med["exp2-fma0"] / t for n, t in med.items()})
        res["rows"].append(row)
        print(B, H, N, d, dt, causal, {n: round(x) for n, x in row["tflops"].items()},
              "x cuDNN", {n: round(x, 3) for n, x in row["ratio_vs_cudnn"].items()},
              "err", {n: f"{x:.1e}" for n, x in errs.items()}, flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    res["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print("wrote", args.out, f"{res['seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
