"""GPU: the backward kernels checked against fp64, their tiles tuned, and forward+backward timed
against SDPA FLASH and cuDNN in one run (issue 11). Writes JSON to ``--out``.

    python benchmarks/gpu_backward_tune.py --out $OUT/bwd.json [--quick]
    python benchmarks/gpu_backward_tune.py --out $OUT/bwd-configs.json --configs   # stage 4 alone, < 2 min

1. Correctness: dq, dk, dv of a few shapes (GQA, both alignments, ragged, empty rows) against
   ``kernels.reference.reference_attention_backward``: relative Frobenius errors.
2. Tiles: for each (HEAD_DIM, causal) at B = 4, H = 16, N = 4096, bf16, every candidate
   :class:`kernels.backward.BackwardConfig` of :func:`candidates` timed on the backward alone
   (``triton.testing.do_bench`` median); the fastest is kept.
3. Speed: forward + backward (``torch.autograd.grad``) at B·N = 16k tokens, H = 16, HEAD_DIM 64
   and 128, N 1k..16k, causal and not, bf16: the bundled kernels with the tuned tiles, SDPA
   FLASH_ATTENTION and SDPA CUDNN_ATTENTION, interleaved (:func:`iomodel.bench.timing.do_bench_interleaved`);
   TFLOP/s with forward 4·B·H·d·visible pairs and backward 2.5x that; peak memory above the
   inputs (``torch.cuda.max_memory_allocated``).
4. ``--configs`` (alone): the GPU tiles of :data:`kernels.heuristics.GPU_BACKWARD` against the
   candidates of :data:`CONFIG_CANDIDATES` that compile without register spills on sm_90
   (``python -m kernels.compile_check``), side by side in one run: the backward alone on the
   GQA shapes of the training hold-out (``sweeps/h200-train-holdout1.toml``, the steps whose
   dK/dV writes the model missed), and forward + backward against SDPA FLASH on the 20 speed
   rows of stage 3 (ratios, with the committed receipt's ratio of the kernel before its group
   loop was flattened).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.paths import one_line_parser  # noqa: E402
from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import do_bench_interleaved  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from kernels import backward as bw  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402


KV_CANDIDATES = {  # dK/dV kernel: (BLOCK_M, BLOCK_N, num_warps, num_stages)
    64: [(32, 128, 4, 3), (32, 128, 4, 4), (32, 128, 4, 2), (64, 128, 8, 3), (64, 64, 4, 3), (32, 64, 4, 3),
         (64, 128, 4, 3), (16, 128, 4, 3)],
    128: [(32, 64, 4, 3), (32, 64, 4, 4), (32, 64, 4, 2), (64, 64, 4, 3), (16, 64, 4, 3), (64, 128, 8, 3),
          (32, 128, 8, 3), (32, 64, 8, 3), (64, 64, 8, 3)],
    256: [(16, 32, 4, 2), (32, 32, 4, 2), (16, 64, 8, 1), (32, 64, 8, 1)],
}
DQ_CANDIDATES = {  # dQ kernel: (BLOCK_M, BLOCK_N, num_warps, num_stages)
    64: [(128, 64, 8, 3), (64, 64, 4, 3), (128, 64, 4, 3), (128, 128, 8, 2), (64, 128, 4, 3), (128, 32, 4, 3),
         (64, 64, 4, 4)],
    128: [(64, 64, 4, 2), (64, 64, 4, 3), (64, 32, 4, 3), (128, 64, 8, 2), (64, 128, 8, 2), (32, 64, 4, 3),
          (128, 32, 8, 3), (128, 64, 8, 3)],
    256: [(32, 32, 4, 2), (64, 32, 8, 1), (32, 64, 8, 1)],
}


#: Stage 4: per (HEAD_DIM, causal), dK/dV tiles (BLOCK_M, BLOCK_N, num_warps, num_stages) to time
#: against GPU_BACKWARD's (dQ tiles unchanged). ptxas spill bytes per thread of the one-loop
#: kernel, bf16, MHA / GQA group 4 (``python -m kernels.compile_check``): GPU_BACKWARD (64, F)
#: 24 / 0, (64, T) 8 / 56 (every store outside the loop), (128, *) 0 / 0; the nested-loop kernel of the
#: hold-out receipt: 24 / 308, 80 / 580, 0 / 176, 0 / 536.
CONFIG_CANDIDATES = {
    (64, False): [(32, 128, 8, 4), (32, 128, 8, 3), (32, 64, 4, 3)],
    (64, True): [(16, 128, 4, 3), (32, 128, 8, 3), (64, 128, 8, 3), (32, 64, 4, 3)],
    (128, False): [(32, 64, 4, 3)],
    (128, True): [(32, 64, 8, 3), (64, 128, 8, 3)],
}
#: Stage 4: the GQA training steps of the hold-out (B, H, H_kv, N, HEAD_DIM, causal, alignment).
HOLDOUT_GQA = [(2, 32, 8, 3000, 128, True, "top-left"), (4, 24, 8, 1024, 64, False, "top-left"),
               (1, 40, 8, 4096, 128, True, "bottom-right"), (2, 16, 2, 2048, 128, False, "top-left"),
               (4, 8, 1, 2048, 64, True, "top-left"), (1, 64, 8, 2048, 128, True, "top-left"),
               (1, 28, 4, 8000, 128, False, "top-left"), (1, 32, 8, 2048, 128, True, "top-left")]
RECEIPT = Path(__file__).resolve().parents[1] / "receipts" / "bwd-tune-h200-2026-12-01.json"


def config_of(kv: tuple, dq: tuple, atomic: bool = False) -> bw.BackwardConfig:
    """A :class:`BackwardConfig` from a dK/dV and a dQ candidate tuple."""
    return bw.BackwardConfig(block_m=kv[0], block_n=kv[1], num_warps=kv[2], num_stages=kv[3], dq_block_m=dq[0],
                             dq_block_n=dq[1], dq_num_warps=dq[2], dq_num_stages=dq[3], atomic_dq=atomic)


def correctness() -> list[dict]:
    rows = []
    cases = [(2, 8, 2, 1000, 1000, 128, torch.bfloat16, True, "top-left"),
             (2, 4, 1, 513, 257, 64, torch.float16, True, "bottom-right"),
             (1, 4, 4, 300, 700, 64, torch.bfloat16, True, "top-left"),
             (1, 4, 2, 150, 170, 96, torch.float16, True, "bottom-right"),
             (2, 16, 16, 2048, 2048, 64, torch.bfloat16, False, "top-left"),
             (1, 2, 2, 257, 333, 32, torch.float32, True, "top-left"),
             (1, 4, 2, 300, 300, 256, torch.bfloat16, True, "top-left"),
             (1, 4, 2, 200, 260, 200, torch.float16, True, "bottom-right")]
    for B, H, Hkv, Nq, Nk, d, dt, causal, align in cases:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, do = (torch.randn(B, H, Nq, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
        o, lse = flash_attention(q, k, v, causal, align, path="prefill")
        ref = reference_attention_backward(do, q, k, v, causal, align)
        for atomic in (False, True):
            cfg = dataclasses.replace(bw.backward_config(d, "bf16", causal), atomic_dq=atomic,
                                      dkdv_kernel="triton")  # the Triton launches, with and without atomic dQ
            got = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)
            errs = {n: ((a.double() - r).norm() / r.norm().clamp_min(1e-30)).item()
                    for n, a, r in zip(("dq", "dk", "dv"), got, ref)}
            nan = any(bool(torch.isnan(a).any()) for a in got)
            rows.append(dict(shape=[B, H, Hkv, Nq, Nk, d, str(dt), causal, align], atomic_dq=atomic, rel_err=errs,
                             nan=nan))
            print("check", rows[-1], flush=True)
    return rows


def bundled_step(q, k, v, do, causal, config):
    """A callable of one training step of the bundled kernels: the forward, then
    ``flash_attention_backward`` with ``config`` (tiles forced, not the heuristics')."""
    def fn():
        o, lse = flash_attention(q, k, v, causal)
        return bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o.detach(), lse, causal,
                                           config=config)
    return fn


def sdpa_step(name, q, k, v, do, causal):
    """A callable of one training step of SDPA backend ``name`` (the harness's one dispatcher, then the gradients)."""
    call = attention_call(name, dense_inputs(q, k, v, causal))
    return lambda: torch.autograd.grad(call(), (q, k, v), do)


def _inputs(B, H, N, d, dt, grad=True):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=dt) for _ in range(4))
    if grad:
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    return q, k, v, do


def tune(quick: bool) -> dict:
    """Per (HEAD_DIM, causal): the dK/dV candidates with the first dQ candidate, then the dQ
    candidates with the fastest dK/dV tiles, then the atomic-dQ variant of the winner."""
    import triton

    best, rows = {}, []
    for d, causal in itertools.product((64, 128), (False, True)):
        q, k, v, do = _inputs(4, 16, 4096, d, torch.bfloat16, grad=False)
        o, lse = flash_attention(q, k, v, causal)

        def timed(cfg):
            try:
                fn = lambda: bw.flash_attention_backward(do, q, k, v, o, lse, causal, config=cfg)  # noqa: E731
                fn()
                torch.cuda.synchronize()
                ms = triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")
            except Exception as exc:  # a config that does not compile or fit: recorded, skipped
                ms = None
                print("tune-fail", d, causal, cfg, str(exc).splitlines()[0][:200], flush=True)
            rows.append(dict(d=d, causal=causal, config=cfg.to_dict(), ms=ms))
            print("tune", d, causal, cfg.to_dict(), ms, flush=True)
            return float("inf") if ms is None else ms

        kvs, dqs = KV_CANDIDATES[d][: 2 if quick else None], DQ_CANDIDATES[d][: 2 if quick else None]
        kv = min(kvs, key=lambda c: timed(config_of(c, dqs[0])))
        dq = min(dqs, key=lambda c: timed(config_of(kv, c)))
        timed(config_of(kv, dq, atomic=True))
        best[f"{d}-{causal}"] = config_of(kv, dq).to_dict()
    return {"rows": rows, "best": best}


def speed(best: dict, quick: bool) -> list[dict]:
    out = []
    seqlens = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    for d, causal, N in itertools.product((64, 128), (False, True), seqlens):
        B, H = 16384 // N, 16
        cfg = bw.BackwardConfig(**best[f"{d}-{causal}"])
        q, k, v, do = _inputs(B, H, N, d, torch.bfloat16)
        pairs = N * (N + 1) // 2 if causal else N * N
        flops = 3.5 * 4 * B * H * d * pairs

        def ours():
            o, lse = flash_attention(q, k, v, causal)
            return torch.autograd.grad(o, (q, k, v), do)

        orig = bw.backward_config
        bw.backward_config = lambda *a, **k: cfg  # the tuned tiles for this (d, causal)
        fns = {"tiled": ours, **{n: sdpa_step(n, q, k, v, do, causal) for n in ("sdpa-flash", "sdpa-cudnn")}}
        o, lse = flash_attention(q.detach(), k.detach(), v.detach(), causal)
        ran = bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o, lse, causal, config=cfg,
                                          return_config=True)[3]
        if cfg.dkdv_kernel == "gluon":  # the same step with each dK/dV kernel, config given: side by side
            for kernel in ("gluon", "triton"):
                fns[f"tiled-{kernel}-dkdv"] = bundled_step(q, k, v, do, causal,
                                                           dataclasses.replace(cfg, dkdv_kernel=kernel))
        row = dict(B=B, H=H, N=N, d=d, causal=causal, flops=flops, config=cfg.to_dict(), ran=ran.to_dict())
        peak = extra_peak_bytes(fns, row)
        samples = do_bench_interleaved(fns, rounds=2 if quick else 3, warmup_ms=10, rep_ms=50)
        bw.backward_config = orig
        med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row.update(samples_s=samples, median_s=med, tflops={n: flops / t / 1e12 for n, t in med.items()},
                   extra_peak_bytes=peak)
        for ref in ("sdpa-flash", "sdpa-cudnn"):
            if ref in med:
                row[f"ratio_vs_{ref}"] = med[ref] / med["tiled"]
        if "tiled-triton-dkdv" in med and "tiled-gluon-dkdv" in med:
            row["ratio_gluon_vs_triton_dkdv"] = med["tiled-triton-dkdv"] / med["tiled-gluon-dkdv"]
        print("speed", {k: row[k] for k in ("N", "d", "causal")}, {n: round(x, 1) for n, x in row["tflops"].items()},
              {k: round(v, 3) for k, v in row.items() if k.startswith("ratio")},
              {n: round(b / 2**20) for n, b in peak.items()}, flush=True)
        out.append(row)
        del q, k, v, do
        torch.cuda.empty_cache()
    return out


def extra_peak_bytes(fns: dict, row: dict) -> dict[str, int]:
    """Peak memory above the allocation before the call (bytes) of each function, run twice
    (the first warms up); a function that raises is dropped from ``fns`` and its first error
    line recorded in ``row`` as ``<name>_refused``."""
    peak = {}
    for name, fn in list(fns.items()):
        try:
            fn()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            peak[name] = torch.cuda.max_memory_allocated() - base
        except Exception as exc:  # a backend that refuses the layer: said in the row, not fatal
            row[f"{name}_refused"] = str(exc).splitlines()[0][:200]
            fns.pop(name)
    return peak


def _candidates(d: int, causal: bool) -> dict[str, bw.BackwardConfig]:
    """Stage 4's configurations of one (HEAD_DIM, causal): ``current`` (GPU_BACKWARD) first."""
    cur = dataclasses.replace(bw.backward_config(d, "bf16", causal), dkdv_kernel="triton")  # Triton's tiles tuned
    out = {"current": cur}
    for bm, bn, w, st in CONFIG_CANDIDATES[(d, causal)]:
        out[f"{bm}x{bn}w{w}s{st}"] = dataclasses.replace(cur, block_m=bm, block_n=bn, num_warps=w, num_stages=st)
    return out


def configs(quick: bool) -> dict:
    """Stage 4: the backward alone on the hold-out's GQA shapes (ms; ratio current / candidate,
    > 1 = the candidate is faster), then forward + backward on the speed rows against SDPA FLASH
    (ratio SDPA time / ours, as stage 3), every candidate of one row interleaved in one run."""
    rows_gqa, rows_speed = [], []
    for B, H, Hkv, N, d, causal, align in HOLDOUT_GQA[: 3 if quick else None]:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(B, Hkv, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        o, lse = flash_attention(q, k, v, causal, align)
        fns = {name: (lambda c=c: bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=c))
               for name, c in _candidates(d, causal).items()}
        med = {n: sorted(t)[len(t) // 2] for n, t in do_bench_interleaved(fns, rounds=3, warmup_ms=5,
                                                                          rep_ms=30).items()}
        row = dict(shape=[B, H, Hkv, N, d, causal, align], median_s=med,
                   speedup_vs_current={n: med["current"] / t for n, t in med.items()})
        print("gqa", row["shape"], {n: f"{t * 1e3:.3f}ms x{row['speedup_vs_current'][n]:.3f}" for n, t in med.items()},
              flush=True)
        rows_gqa.append(row)
        del q, k, v, do, o, lse
    before = {}
    if RECEIPT.exists():
        for r in json.loads(RECEIPT.read_text()).get("speed", []):
            before[(r["d"], r["causal"], r["N"])] = r.get("ratio_vs_sdpa-flash")
    seqlens = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    for d, causal, N in itertools.product((64, 128), (False, True), seqlens):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, N, d, torch.bfloat16)
        fns = {name: bundled_step(q, k, v, do, causal, c) for name, c in _candidates(d, causal).items()}
        fns["sdpa-flash"] = sdpa_step("sdpa-flash", q, k, v, do, causal)
        med = {n: sorted(t)[len(t) // 2] for n, t in do_bench_interleaved(fns, rounds=3, warmup_ms=5,
                                                                          rep_ms=30).items()}
        ratio = {n: med["sdpa-flash"] / t for n, t in med.items() if n != "sdpa-flash"}
        row = dict(N=N, d=d, causal=causal, median_s=med, ratio_vs_sdpa_flash=ratio,
                   receipt_ratio_vs_sdpa_flash=before.get((d, causal, N)))
        print("speed", d, causal, N, {n: round(r, 3) for n, r in ratio.items()}, "receipt",
              None if row["receipt_ratio_vs_sdpa_flash"] is None else round(row["receipt_ratio_vs_sdpa_flash"], 3),
              flush=True)
        rows_speed.append(row)
        del q, k, v, do
        torch.cuda.empty_cache()
    return {"candidates": {f"{d}-{c}": {n: x.to_dict() for n, x in _candidates(d, c).items()}
                           for d, c in CONFIG_CANDIDATES}, "gqa": rows_gqa, "speed": rows_speed}


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--configs", action="store_true", help="stage 4 alone: GPU_BACKWARD vs CONFIG_CANDIDATES")
    ap.add_argument("--skip", default="", help="comma list of stages to skip: check,tune,speed")
    args = ap.parse_args()
    if (rc := benchmark_start(args.out)) is not None:  # before any GPU time is spent
        return rc
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv)}
    if args.configs:
        skip = {"check", "tune", "speed"}
        res["configs"] = configs(args.quick)
    if "check" not in skip:
        res["correctness"] = correctness()
    if "tune" not in skip:
        res["tune"] = tune(args.quick)
        best = res["tune"]["best"]
    else:
        best = {f"{d}-{c}": bw.backward_config(d, "bf16", c).to_dict() for d in (64, 128) for c in (False, True)}
    if "speed" not in skip:
        res["speed"] = speed(best, args.quick)
    res["seconds"] = time.time() - t0
    return benchmark_finish(args.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
