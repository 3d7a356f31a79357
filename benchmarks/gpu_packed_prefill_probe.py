"""GPU probe: the pointer prefill with packed query heads (``KernelConfig.heads_per_program`` P, FlashAttention-3's
PackGQA) against the same kernel unpacked, the launcher's default path and SDPA, on short-query GQA prefills.

A program of the packed prefill serves P query heads of one KV head (BLOCK_M / P positions of each), so each K/V
block it loads from L2 serves P heads; where a query is shorter than a tile (chunked prefill against a long KV cache)
the unpacked kernel streams the KV head's keys once per query head, the packed one once per P heads. This measures
whether that shows in time (calibration data: the launcher does not pick packing).

    python benchmarks/gpu_packed_prefill_probe.py --out $OUT/packed-prefill-probe.json [--rounds 5]

Shapes (:data:`SHAPES`): H 32 on 8 KV heads (G 4) and 64 on 8 (G 8), HEAD_DIM 128, bf16, causal bottom-right (a
chunk of new queries against a cache, its mask given to SDPA as a boolean tensor), 32-256 queries against 4k-64k
keys. Timing: ``do_bench`` medians interleaved
(``iomodel.bench.timing.do_bench_interleaved``, L2 flushed before every repetition, rounds in a rotating order).
Exactness: every variant's o against the default path's (max abs difference).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.paths import check_probe_start, exit_code_of, finish_probe_receipt, one_line_parser  # noqa: E402

#: (B, H, H_kv, N_q, N_k): short query chunks against a KV cache, GQA groups of 4 and 8; HEAD_DIM 128, bf16.
SHAPES = [(1, 32, 8, 32, 8192), (1, 32, 8, 64, 32768), (1, 32, 8, 128, 32768), (1, 32, 8, 256, 65536),
          (4, 32, 8, 64, 16384), (8, 32, 8, 32, 4096), (1, 64, 8, 64, 32768), (2, 64, 8, 128, 16384)]
HEAD_DIM = 128


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON receipt path")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import torch

    if exit_code_of(lambda: check_probe_start(args.out, args.rounds)):
        return 2
    started = time.time()
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from iomodel.bench.timing import do_bench_interleaved
    from kernels import heuristics as hx
    from kernels.flash_attention import flash_attention

    rows = []
    for B, H, Hk, Nq, Nk in SHAPES:
        G = H // Hk
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, Nq, HEAD_DIM, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(B, Hk, Nk, HEAD_DIM, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        base = hx.prefill_default(HEAD_DIM, "bf16", True, "prefill").config("prefill")
        variants = {"default": None, "pointer": base}
        for p in sorted({2, G // 2, G} - {1}):
            if base.block_m % p == 0 and G % p == 0:
                variants[f"packed{p}"] = base.with_(heads_per_program=p)
        ref, _, cfg_default = flash_attention(q, k, v, True, "bottom-right", return_config=True)
        fns, diff = {}, {}
        for name, cfg in variants.items():
            o = flash_attention(q, k, v, True, "bottom-right", config=cfg)[0]
            diff[name] = (o.float() - ref.float()).abs().max().item()
            fns[name] = (lambda c=cfg: flash_attention(q, k, v, True, "bottom-right", config=c))
        qe = q  # SDPA: bottom-right alignment is the causal mask of a chunk at the end of the cache
        mask = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril(Nk - Nq)

        def sdpa(backend):
            def f():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(qe, k, v, attn_mask=mask, enable_gqa=True)
            return f

        for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:  # a backend may refuse the boolean mask or the GQA call: said, the rest timed
                o = sdpa(backend)()
                diff[name] = (o.float() - ref.float()).abs().max().item()
                fns[name] = sdpa(backend)
            except RuntimeError as exc:
                diff[name] = f"refused: {str(exc).splitlines()[0][:120]}"
        torch.cuda.synchronize()
        times = do_bench_interleaved(fns, args.rounds, 25, 100)
        med = {n: statistics.median(ts) for n, ts in times.items()}
        row = {"B": B, "H": H, "H_kv": Hk, "N_q": Nq, "N_k": Nk, "d": HEAD_DIM, "dtype": "bf16", "causal": True,
               "causal_align": "bottom-right", "default_config": cfg_default.to_dict(),
               "configs": {n: (c.to_dict() if c is not None else None) for n, c in variants.items()},
               "max_abs_diff_vs_default": diff, "seconds": times, "median_s": med,
               "ratio_vs_pointer": {n: med["pointer"] / s for n, s in med.items()},
               "ratio_vs_default": {n: med["default"] / s for n, s in med.items()}}
        rows.append(row)
        print(f"B{B} H{H}/{Hk} q{Nq} k{Nk} default={cfg_default.path}: "
              + " ".join(f"{n}={s * 1e6:.1f}us" for n, s in med.items())
              + " diff " + " ".join(f"{n}={d:.1e}" if isinstance(d, float) else f"{n}={d}" for n, d in diff.items()),
              flush=True)
    rec = {"command": f"python3 benchmarks/gpu_packed_prefill_probe.py --out {args.out} --rounds {args.rounds}",
           "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
           "triton": triton.__version__, "rounds": args.rounds, "rows": rows}
    return exit_code_of(lambda: finish_probe_receipt(args.out, rec, started))


if __name__ == "__main__":
    raise SystemExit(main())
