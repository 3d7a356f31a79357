"""GPU probe (issue 11, speed): the backward kernels with Q, dO, K, V loaded through tensor
descriptors (TMA) instead of pointers, same tiles, loop order and bytes, side by side with the
pointer kernels, SDPA FLASH and SDPA cuDNN in one run. Writes JSON to ``--out``.

    python benchmarks/gpu_bwd_tma_loads.py --out $OUT/bwd-tma-loads.json [--quick]

1. Exactness: dq, dk, dv of the TMA kernels against ``reference_attention_backward`` (fp64)
   and against the pointer kernels, on GQA/MQA, both causal alignments, ragged lengths, and
   the S > 1 group split (relative Frobenius errors; NaN flagged).
2. Backward alone on the 20 speed rows of ``gpu_backward_tune.py`` (B·N = 16k tokens, H = 16,
   HEAD_DIM 64/128, N 1k..16k, causal and not, bf16): the pointer kernels with the GPU tiles of
   ``GPU_BACKWARD`` (``pointer``), the TMA kernels with the same tiles (``tma``), with the
   causal mask split (``tma-ms``), and with other tiles (:data:`TMA_TILES`), interleaved
   (:func:`iomodel.bench.timing.do_bench_interleaved`); ratio pointer time / candidate time.
3. Forward + backward (``torch.autograd.grad``) on the same rows: the pointer kernels, the
   best TMA candidate of each (HEAD_DIM, causal) from stage 2 (geometric mean over its five
   rows), SDPA FLASH and SDPA cuDNN, interleaved; TFLOP/s with forward 4·B·H·d·visible pairs
   and backward 2.5× that (issue 11's count); peak memory above the inputs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_backward_tune import _inputs, bundled_step, extra_peak_bytes, sdpa_step  # noqa: E402
from iomodel.paths import one_line_parser  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402

#: Stage 2, round 1: other dK/dV tiles (BLOCK_M, BLOCK_N, num_warps, num_stages) and dQ tiles to
#: try with TMA loads, per (HEAD_DIM, causal); None keeps the GPU_BACKWARD value. Each entry is
#: (dK/dV tiles, dQ tiles, fused launch). Receipt: receipts/bwd-tma-loads-h200-2026-12-02.json.
ROUND1 = {
    (64, False): [((64, 128, 8, 3), None, False), ((32, 128, 4, 3), None, False), ((64, 128, 4, 3), None, False),
                  (None, (128, 128, 8, 2), False), (None, (64, 64, 4, 3), False)],
    (64, True): [((64, 128, 8, 3), None, False), ((32, 128, 4, 4), None, False), ((64, 64, 4, 3), None, False),
                 (None, (128, 64, 8, 3), False), (None, (128, 128, 8, 2), False)],
    (128, False): [((64, 128, 8, 2), None, False), ((32, 128, 8, 3), None, False), ((64, 64, 4, 3), None, False),
                   (None, (64, 64, 4, 3), False), (None, (128, 128, 8, 2), False)],
    (128, True): [((64, 128, 8, 3), None, False), ((32, 128, 8, 3), None, False), ((64, 64, 4, 3), None, False),
                  ((32, 64, 4, 2), None, False), (None, (64, 64, 4, 3), False)],
}
#: Round 2: round 1's winners, and the dK/dV and dQ programs in one launch (``fused_launch``:
#: one num_warps for both, so the dQ tiles are chosen to match).
ROUND2 = {
    (64, False): [((32, 128, 4, 3), None, False), ((32, 128, 4, 3), (64, 64, 4, 3), False),
                  ((32, 128, 4, 3), (64, 64, 4, 3), True), ((32, 128, 4, 4), (64, 64, 4, 3), True),
                  ((64, 128, 8, 3), (128, 64, 8, 3), True)],
    (64, True): [((32, 128, 4, 4), None, False), ((32, 128, 4, 3), None, True), ((32, 128, 4, 4), None, True),
                 ((32, 128, 4, 4), (64, 128, 4, 3), True)],
    (128, False): [(None, (128, 128, 8, 2), False), (None, None, True), (None, (128, 128, 8, 2), True),
                   ((64, 128, 8, 2), (128, 64, 8, 3), True)],
    (128, True): [((64, 128, 8, 3), None, False), ((32, 64, 4, 3), (64, 64, 4, 3), True),
                  ((64, 128, 8, 3), (128, 64, 8, 3), True), ((32, 64, 4, 2), (64, 64, 4, 3), True),
                  ((32, 128, 8, 3), (128, 64, 8, 3), True)],
}
ROUNDS = {1: ROUND1, 2: ROUND2}
ROUND = 1


def _pointer(cfg: bw.BackwardConfig) -> bw.BackwardConfig:
    """``cfg``'s tiles on the pointer kernels: ``backward_config`` has tma (and the causal mask
    split, and at HEAD_DIM 128 the Gluon dK/dV launch) on for the GPU, so every variant sets the switches itself
    (the Triton launches throughout: this script compares Triton's pointer and TMA kernels)."""
    return dataclasses.replace(cfg, tma=False, mask_split=False, fused_launch=False, dkdv_kernel="triton")


def _variants(d: int, causal: bool) -> dict[str, bw.BackwardConfig]:
    cur = _pointer(bw.backward_config(d, "bf16", causal))
    out = {"pointer": cur, "tma": dataclasses.replace(cur, tma=True)}
    if causal:
        out["tma-ms"] = dataclasses.replace(cur, tma=True, mask_split=True)
    for kv, dq, fused in ROUNDS[ROUND][(d, causal)]:
        c = dataclasses.replace(cur, tma=True, mask_split=causal, fused_launch=fused)
        name = "tma"
        if kv:
            c = dataclasses.replace(c, block_m=kv[0], block_n=kv[1], num_warps=kv[2], num_stages=kv[3])
            name += f"-kv{kv[0]}x{kv[1]}w{kv[2]}s{kv[3]}"
        if dq:
            c = dataclasses.replace(c, dq_block_m=dq[0], dq_block_n=dq[1], dq_num_warps=dq[2], dq_num_stages=dq[3])
            name += f"-dq{dq[0]}x{dq[1]}w{dq[2]}s{dq[3]}"
        if fused and c.num_warps != c.dq_num_warps:
            raise ValueError(f"fused variant {name} of {(d, causal)} has num_warps {c.num_warps} != {c.dq_num_warps}")
        out[name + ("-ms" if causal else "") + ("-fused" if fused else "")] = c
    return out


def exactness_variants(d: int, causal: bool, S: int) -> dict[str, bw.BackwardConfig]:
    """Stage 1's configs: the GPU tiles with S group slices on the pointer kernels, the TMA
    kernels, with the mask split, and fused (dQ tiles 64 x 64 on the dK/dV warps)."""
    base = _pointer(dataclasses.replace(bw.backward_config(d, "bf16", causal), group_splits=S))
    return {"pointer": base, "tma": dataclasses.replace(base, tma=True),
            "tma-ms": dataclasses.replace(base, tma=True, mask_split=True),
            "tma-fused": dataclasses.replace(base, tma=True, mask_split=True, fused_launch=True, dq_block_m=64,
                                             dq_block_n=64, dq_num_warps=base.num_warps)}


def exactness() -> list[dict]:
    rows = []
    cases = [(2, 8, 2, 1000, 1000, 128, torch.bfloat16, True, "top-left", 0),
             (2, 4, 1, 513, 257, 64, torch.float16, True, "bottom-right", 0),
             (1, 4, 4, 300, 700, 64, torch.bfloat16, True, "top-left", 0),
             (2, 16, 16, 2048, 2048, 64, torch.bfloat16, False, "top-left", 0),
             (1, 16, 16, 1000, 1000, 128, torch.bfloat16, True, "top-left", 0),
             (1, 16, 2, 777, 777, 128, torch.bfloat16, True, "bottom-right", 4),
             (1, 8, 1, 600, 900, 64, torch.float16, False, "top-left", 8)]
    for B, H, Hkv, Nq, Nk, d, dt, causal, align, S in cases:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, do = (torch.randn(B, H, Nq, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        o, lse = flash_attention(q, k, v, causal, align)
        ref = reference_attention_backward(do, q, k, v, causal, align)
        got = {}
        for name, cfg in exactness_variants(d, causal, S).items():
            got[name] = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)
        row = dict(shape=[B, H, Hkv, Nq, Nk, d, str(dt), causal, align, S])
        for name, t in got.items():
            row[name] = {n: ((a.double() - r).norm() / r.norm().clamp_min(1e-30)).item()
                         for n, a, r in zip(("dq", "dk", "dv"), t, ref)}
            row[name]["nan"] = any(bool(torch.isnan(a).any()) for a in t)
            row[name]["max_abs_vs_pointer"] = max((a.float() - b.float()).abs().max().item()
                                                  for a, b in zip(t, got["pointer"]))
        print("check", row, flush=True)
        rows.append(row)
    return rows


def _rows(quick: bool):
    seqlens = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    return list(itertools.product((64, 128), (False, True), seqlens))


def backward_alone(quick: bool) -> list[dict]:
    out = []
    for d, causal, N in _rows(quick):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, N, d, torch.bfloat16, grad=False)
        o, lse = flash_attention(q, k, v, causal)
        fns, refused = {}, {}
        for name, cfg in _variants(d, causal).items():
            fn = (lambda c=cfg: bw.flash_attention_backward(do, q, k, v, o, lse, causal, config=c))
            try:
                fn()
                torch.cuda.synchronize()
                fns[name] = fn
            except Exception as exc:  # a candidate that does not compile or fit: recorded, skipped
                refused[name] = str(exc).splitlines()[0][:200]
        med = {n: sorted(t)[len(t) // 2] for n, t in do_bench_interleaved(fns, rounds=3, warmup_ms=5,
                                                                          rep_ms=30).items()}
        host = {}
        for n, fn in fns.items():  # host time of one call (no synchronisation inside), microseconds
            ts = []
            for _ in range(15):
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t1) * 1e6)
            host[n] = sorted(ts)[len(ts) // 2]
        row = dict(N=N, B=B, H=H, d=d, causal=causal, median_s=med, refused=refused, host_us=host,
                   speedup_vs_pointer={n: med["pointer"] / t for n, t in med.items()})
        print("bwd", d, causal, N, {n: round(x, 3) for n, x in row["speedup_vs_pointer"].items()}, refused or "",
              "host_us", {n: round(x) for n, x in host.items()}, flush=True)
        out.append(row)
        del q, k, v, do, o, lse
        torch.cuda.empty_cache()
    return out


def best_per_class(rows: list[dict]) -> dict[str, str]:
    best = {}
    for d, causal in itertools.product((64, 128), (False, True)):
        rs = [r for r in rows if r["d"] == d and r["causal"] == causal]
        names = set.intersection(*(set(r["speedup_vs_pointer"]) for r in rs)) - {"pointer"}
        gm = {n: math.exp(sum(math.log(r["speedup_vs_pointer"][n]) for r in rs) / len(rs)) for n in names}
        best[f"{d}-{causal}"] = max(gm, key=gm.get)
        print("best", d, causal, best[f"{d}-{causal}"], round(gm[best[f"{d}-{causal}"]], 3), flush=True)
    return best


def fwd_bwd(best: dict[str, str], quick: bool) -> list[dict]:
    out = []
    for d, causal, N in _rows(quick):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, N, d, torch.bfloat16)
        pairs = N * (N + 1) // 2 if causal else N * N
        flops = 3.5 * 4 * B * H * d * pairs
        variants = _variants(d, causal)
        pick = best[f"{d}-{causal}"]

        fns = {"pointer": bundled_step(q, k, v, do, causal, variants["pointer"]),
               "tma": bundled_step(q, k, v, do, causal, variants["tma-ms" if causal else "tma"]),
               "tma-best": bundled_step(q, k, v, do, causal, variants[pick]),
               **{n: sdpa_step(n, q, k, v, do, causal) for n in ("sdpa-flash", "sdpa-cudnn")}}
        row = dict(B=B, H=H, N=N, d=d, causal=causal, flops=flops, tma_best=pick,
                   tma_best_config=variants[pick].to_dict())
        peak = extra_peak_bytes(fns, row)
        samples = do_bench_interleaved(fns, rounds=3, warmup_ms=10, rep_ms=50)
        med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row.update(samples_s=samples, median_s=med, tflops={n: flops / t / 1e12 for n, t in med.items()},
                   extra_peak_bytes=peak)
        for ours_name in ("pointer", "tma", "tma-best"):
            for ref in ("sdpa-flash", "sdpa-cudnn"):
                if ref in med and ours_name in med:
                    row[f"{ours_name}_vs_{ref}"] = med[ref] / med[ours_name]
        print("fwdbwd", d, causal, N, {n: round(x, 1) for n, x in row["tflops"].items()},
              {k2: round(v2, 3) for k2, v2 in row.items() if "_vs_" in k2}, flush=True)
        out.append(row)
        del q, k, v, do
        torch.cuda.empty_cache()
    return out


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--round", type=int, choices=sorted(ROUNDS), default=1, help="the candidate list (ROUND1, ROUND2)")
    ap.add_argument("--skip-exactness", action="store_true")
    args = ap.parse_args()
    global ROUND
    ROUND = args.round
    if (rc := benchmark_start(args.out)) is not None:  # before any GPU time is spent
        return rc
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv),
           "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if not args.skip_exactness:
        res["exactness"] = exactness()
    res["backward"] = backward_alone(args.quick)
    res["best"] = best_per_class(res["backward"])
    res["fwd_bwd"] = fwd_bwd(res["best"], args.quick)
    res["seconds"] = time.time() - t0
    return benchmark_finish(args.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
