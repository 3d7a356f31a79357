"""GPU probe (issue 11, speed): the fused dK/dV + TMA-reduce dQ backward (five dots per tile pair,
``kernels.backward._bwd_dkdv_tma``) against the current three-launch backward (seven dots) and SDPA
FLASH / cuDNN, side by side in one run. Writes JSON to ``--out``.

    python benchmarks/gpu_bwd_tma_probe.py --out $OUT/probe.json

1. Correctness: dq, dk, dv of the TMA variant against the fp64 reference (GQA, both alignments,
   ragged lengths, rows without keys), relative Frobenius errors, beside the current kernel's.
2. Backward alone (``do_bench`` median, interleaved): current vs each TMA tile candidate on the 20
   speed rows (B·N = 16k tokens, H = 16, HEAD_DIM 64/128, N 1k..16k, causal and not, bf16).
3. Forward + backward: the current kernels, the fastest TMA candidate of stage 2 per row, SDPA
   FLASH and SDPA cuDNN interleaved; TFLOP/s (forward 4·B·H·d·pairs, backward 2.5x) and ratios.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402

#: (BLOCK_M, BLOCK_N, num_warps, num_stages) of the fused TMA kernel, per HEAD_DIM; ptxas spill
#: bytes per thread on sm_90 (python -m kernels.compile_check style, bf16 MHA) in the comment.
TMA_CANDIDATES = {
    64: [(64, 128, 8, 2), (64, 128, 8, 3), (64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 8, 2)],  # 0 spills
    128: [(64, 128, 8, 2), (64, 64, 8, 2), (64, 64, 4, 2), (64, 64, 4, 3)],  # 68, 0, 12, 32
}


def _rel(a, r):
    return ((a.double() - r).norm() / r.norm().clamp_min(1e-30)).item()


def correctness() -> list[dict]:
    rows = []
    cases = [(2, 8, 2, 1000, 1000, 128, torch.bfloat16, True, "top-left"),
             (2, 4, 1, 513, 257, 64, torch.float16, True, "bottom-right"),
             (1, 4, 4, 300, 700, 64, torch.bfloat16, True, "top-left"),
             (1, 4, 4, 700, 300, 128, torch.bfloat16, True, "top-left"),  # rows without keys
             (2, 16, 16, 2048, 2048, 64, torch.bfloat16, False, "top-left"),
             (1, 8, 1, 777, 1333, 128, torch.float16, False, "top-left"),
             (1, 8, 2, 1111, 999, 128, torch.bfloat16, True, "bottom-right")]
    for B, H, Hkv, Nq, Nk, d, dt, causal, align in cases:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, do = (torch.randn(B, H, Nq, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        o, lse = flash_attention(q, k, v, causal, align)
        ref = reference_attention_backward(do, q, k, v, causal, align)
        cur = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align)
        for bm, bn, w, st in TMA_CANDIDATES[d][:2]:
            got = bw._backward_tma(do, q, k, v, o, lse, causal, align, block_m=bm, block_n=bn, num_warps=w,
                                   num_stages=st)
            row = dict(shape=[B, H, Hkv, Nq, Nk, d, str(dt), causal, align], tiles=[bm, bn, w, st],
                       rel_err={n: _rel(a, r) for n, a, r in zip(("dq", "dk", "dv"), got, ref)},
                       rel_err_current={n: _rel(a, r) for n, a, r in zip(("dq", "dk", "dv"), cur, ref)},
                       nan=any(bool(torch.isnan(a).any()) for a in got))
            print("check", row, flush=True)
            rows.append(row)
    return rows


def _inputs(B, H, N, d, dt=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(0)
    return tuple(torch.randn(B, H, N, d, device="cuda", generator=g, dtype=dt) for _ in range(4))


def backward_alone() -> tuple[list[dict], dict]:
    rows, best = [], {}
    for d, causal, N in itertools.product((64, 128), (False, True), (1024, 2048, 4096, 8192, 16384)):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, N, d)
        o, lse = flash_attention(q, k, v, causal)
        fns = {"current": lambda: bw.flash_attention_backward(do, q, k, v, o, lse, causal)}
        for c in TMA_CANDIDATES[d]:
            def f(c=c):
                return bw._backward_tma(do, q, k, v, o, lse, causal, block_m=c[0], block_n=c[1], num_warps=c[2],
                                        num_stages=c[3])
            try:
                f()
                torch.cuda.synchronize()
                fns["tma-%dx%dw%ds%d" % c] = f
            except Exception as exc:  # a candidate that does not compile or launch: recorded
                print("fail", d, causal, N, c, str(exc).splitlines()[0][:200], flush=True)
        samples = do_bench_interleaved(fns, rounds=3, warmup_ms=5, rep_ms=30)
        med = {n: sorted(s)[1] for n, s in samples.items()}
        win = min((n for n in med if n != "current"), key=med.get)
        best[(d, causal, N)] = win
        row = dict(d=d, causal=causal, N=N, B=B, samples_s=samples, median_s=med, best=win,
                   speedup_vs_current={n: med["current"] / t for n, t in med.items()})
        print("bwd", d, causal, N, {n: f"{t * 1e3:.3f}ms x{med['current'] / t:.3f}" for n, t in med.items()},
              flush=True)
        rows.append(row)
        del q, k, v, do, o, lse
        torch.cuda.empty_cache()
    return rows, best


def fwd_bwd(best: dict) -> list[dict]:
    out = []
    for d, causal, N in itertools.product((64, 128), (False, True), (1024, 2048, 4096, 8192, 16384)):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, N, d)
        c = tuple(int(x) for x in best[(d, causal, N)][4:].replace("x", " ").replace("w", " ").replace("s", " ").split())
        qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
        pairs = N * (N + 1) // 2 if causal else N * N
        flops = 3.5 * 4 * B * H * d * pairs

        def current():
            o, lse = flash_attention(q, k, v, causal)
            return bw.flash_attention_backward(do, q, k, v, o, lse, causal)

        def tma():
            o, lse = flash_attention(q, k, v, causal)
            return bw._backward_tma(do, q, k, v, o, lse, causal, block_m=c[0], block_n=c[1], num_warps=c[2],
                                    num_stages=c[3])

        def sdpa(name):
            call = attention_call(name, dense_inputs(qg, kg, vg, causal))
            return lambda: torch.autograd.grad(call(), (qg, kg, vg), do)

        fns = {"current": current, "tma": tma, "sdpa-flash": sdpa("sdpa-flash"), "sdpa-cudnn": sdpa("sdpa-cudnn")}
        peak = {}
        for n, f in fns.items():
            f()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            f()
            torch.cuda.synchronize()
            peak[n] = torch.cuda.max_memory_allocated() - base
        samples = do_bench_interleaved(fns, rounds=3, warmup_ms=5, rep_ms=40)
        med = {n: sorted(s)[1] for n, s in samples.items()}
        row = dict(B=B, H=H, N=N, d=d, causal=causal, flops=flops, tma_tiles=list(c), samples_s=samples,
                   median_s=med, tflops={n: flops / t / 1e12 for n, t in med.items()}, extra_peak_bytes=peak)
        for who in ("current", "tma"):
            for ref in ("sdpa-flash", "sdpa-cudnn"):
                row[f"{who}_vs_{ref}"] = med[ref] / med[who]
        print("fwdbwd", d, causal, N, c, {n: round(x) for n, x in row["tflops"].items()},
              {k2: round(x, 3) for k2, x in row.items() if "_vs_" in k2}, flush=True)
        out.append(row)
        del q, k, v, do, qg, kg, vg
        torch.cuda.empty_cache()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv)}
    res["correctness"] = correctness()
    res["backward"], best = backward_alone()
    res["fwd_bwd"] = fwd_bwd(best)
    res["seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print("wrote", args.out, f"{res['seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
