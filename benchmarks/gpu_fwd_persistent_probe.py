"""GPU probe (issue 14, prefill): a persistent TMA forward against the bundled one and SDPA cuDNN,
side by side in one run. Writes JSON to ``--out``.

    python benchmarks/gpu_fwd_persistent_probe.py --out $OUT/fwd-persistent-probe.json

The persistent kernel (:func:`_attn_fwd_persistent`, here only: an attempt, not the shipped kernel)
launches ``programs_per_sm × num_SMs`` programs; program p runs tiles p, p + P, p + 2P, ... of
the ``T_r · B·H`` query tiles (FlashAttention-3's static persistent schedule; Triton tutorial 06's
``_attn_fwd_persist`` loop), tiles fastest within a head and, causal, the heaviest tile of a head
first. Each tile is the body of the bundled ``_attn_fwd_tma`` (its helpers, its tiles: the
bundled kernel's autotuned BLOCK_M, BLOCK_N, warps and stages for the shape), so the two differ
only in how tiles reach the SMs. Per shape: ``triton.testing.do_bench`` medians (L2 flushed,
``--rounds`` interleaved rounds, default 3: :func:`iomodel.bench.timing.do_bench_interleaved`), TFLOP/s (4·B·H·N²·d,
×0.5 causal), ratios to cuDNN, and the persistent output's largest absolute difference from the
bundled one (``max_abs_diff_vs_bundled``; 0.0 does not tell −0 from +0).
Shapes: issue 14's prefill table and the kernel-speed matrix's HEAD_DIM 128 bf16 rows at N ≥ 2k.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_overhead import PREFILL  # noqa: E402
from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.paths import check_output_file, finish_probe_receipt  # noqa: E402
from kernels import flash_attention as fa  # noqa: E402

#: (B, H, N, HEAD_DIM, dtype, causal): issue 14's table, then the kernel-speed d 128 bf16 rows at N >= 2k.
SHAPES = [*PREFILL, (8, 16, 2048, 128, "bf16", False), (4, 16, 4096, 128, "bf16", False),
          (4, 16, 4096, 128, "bf16", True), (1, 16, 16384, 128, "bf16", False), (1, 16, 16384, 128, "bf16", True)]


@triton.jit
def _attn_fwd_persistent(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, H, G, N_Q, N_K, CAUSAL_OFF, T_R, N_TILES,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, EMULATE_BF16: tl.constexpr):
    """``_attn_fwd_tma``'s tile body in a static persistent loop: program p runs tiles p, p + P, ..."""
    offs_n = tl.arange(0, BLOCK_N)
    qk_scale = sm_scale * 1.4426950408889634
    for tile in tl.range(tl.program_id(0), N_TILES, tl.num_programs(0), num_stages=1):  # the outer loop not pipelined
        bh = tile // T_R
        i = tile - bh * T_R
        if CAUSAL:
            i = T_R - 1 - i  # the heaviest tile of a head first
        b, h, hk = fa._head_of(bh, H, G)
        offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
        q = desc_q.load([b, h, i * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        full_end, hi = fa._causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M, BLOCK_N, CAUSAL)
        for start_n in tl.range(0, full_end, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k = desc_k.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            v = desc_v.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            acc, l_i, m_i = fa._online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K,
                                                    CAUSAL_OFF, False, CAUSAL, "tf32", EMULATE_BF16)
        acc, l_i, m_i = fa._tma_masked_blocks(acc, l_i, m_i, q, desc_k, desc_v, b, hk, qk_scale, full_end, hi, N_K,
                                              offs_m, offs_n, CAUSAL_OFF, 0, 0, HEAD_DIM, BLOCK_N, CAUSAL,
                                              EMULATE_BF16, False)
        o, lse = fa._finish_rows(acc, l_i, m_i)
        desc_o.store([b, h, i * BLOCK_M, 0], fa._to_dtype(o, desc_o.dtype, EMULATE_BF16).reshape(1, 1, BLOCK_M, HEAD_DIM))
        tl.store(LSE + bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)


def persistent_call(q, k, v, causal: bool, cfg, programs_per_sm: int):
    """A function that runs the persistent kernel on (q, k, v) with the tiles of ``cfg`` (returns o)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    B, H, N, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)
    bm, bn = cfg.block_m, cfg.block_n
    descs = (TensorDescriptor(q, list(q.shape), list(q.stride()), [1, 1, bm, d]),
             TensorDescriptor(k, list(k.shape), list(k.stride()), [1, 1, bn, d]),
             TensorDescriptor(v, list(v.shape), list(v.stride()), [1, 1, bn, d]),
             TensorDescriptor(o, list(o.shape), list(o.stride()), [1, 1, bm, d]))
    t_r = triton.cdiv(N, bm)
    tiles = t_r * B * H
    grid = (min(tiles, programs_per_sm * torch.cuda.get_device_properties(0).multi_processor_count),)
    off = 0  # N_q = N_k: either alignment's offset is 0

    def run():
        _attn_fwd_persistent[grid](*descs, lse, d ** -0.5, H, H // k.shape[1], N, N, off, t_r, tiles,
                                   HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, EMULATE_BF16=False,
                                   num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        return o

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        out_path = check_output_file(args.out, "--out")
        if args.rounds < 1:
            raise IomodelError(f"--rounds must be at least 1, got {args.rounds}: raise it")
        if not torch.cuda.is_available():
            raise IomodelError("no CUDA GPU is visible: run this probe on a GPU machine")
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv), "rows": []}
    for B, H, N, d, dt, causal in SHAPES:
        dtype = torch.bfloat16 if dt == "bf16" else torch.float16
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=dtype) for _ in range(3))
        ref, _, cfg = fa.flash_attention(q, k, v, causal, "top-left", return_config=True)
        fns = {"bundled": lambda: fa.flash_attention(q, k, v, causal, "top-left")}
        diffs = {}
        for pps in (1, 2):
            run = persistent_call(q, k, v, causal, cfg, pps)
            try:
                got = run()
                torch.cuda.synchronize()
            except Exception as exc:  # a tile that does not fit twice per SM: recorded, skipped
                print("skip", B, N, d, causal, pps, str(exc).splitlines()[0][:160], flush=True)
                continue
            diffs[f"persistent-{pps}"] = (got.float() - ref.float()).abs().max().item()
            fns[f"persistent-{pps}"] = run
        cudnn = attention_call("sdpa-cudnn", dense_inputs(q, k, v, causal))
        cudnn()
        fns["sdpa-cudnn"] = cudnn
        samples = do_bench_interleaved(fns, args.rounds, 10.0, 40.0)
        med = {n: statistics.median(s) for n, s in samples.items()}
        flops = 4 * B * H * N * N * d * (0.5 if causal else 1.0)
        row = {"B": B, "H": H, "N": N, "head_dim": d, "dtype": dt, "causal": causal, "config": cfg.to_dict(),
               "median_s": med, "samples_s": samples, "tflops": {n: flops / t / 1e12 for n, t in med.items()},
               "ratio_vs_cudnn": {n: med["sdpa-cudnn"] / t for n, t in med.items()},
               "ratio_vs_bundled": {n: med["bundled"] / t for n, t in med.items()},
               "max_abs_diff_vs_bundled": diffs}
        res["rows"].append(row)
        print(f"B{B} N{N} d{d} {dt} causal={causal} ({cfg.block_m}x{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}): "
              + ", ".join(f"{n} {row['tflops'][n]:.0f} TF ({row['ratio_vs_cudnn'][n]:.3f}x cuDNN)" for n in med)
              + f" | diff {diffs}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    finish_probe_receipt(out_path, res, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
