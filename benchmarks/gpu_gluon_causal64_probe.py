"""GPU probe (issue 14): the Gluon prefill at HEAD_DIM 64 causal, its warpgroups draining the masked key blocks.

In a 256-row query tile on the causal diagonal the four consumer warpgroups of ``kernels/gluon_attention.py`` see
1, 2, 3 and 4 of the tile's last four 64-key blocks. Until 2026-12-06 each computed all four (3 + 2 + 1 = 6 fully
masked block-steps a diagonal tile); since then each stops at its own last key block and takes the remaining turns
without a product (it releases each slot once its block has landed, so the producer's loads and the tile's bytes
are unchanged). The probe's ``ws4e`` measured that design on an H100 (``receipts/gluon-fwd-probe-h100-2026-12-05-ws4e.json``:
0.986x cuDNN against the TMA prefill's 0.998x, in the probe's own grid order); this runs it through the launcher
(its LPT order) on the kernel-speed matrix's HEAD_DIM 64 causal prefill shapes (H 16, B·N = 16k tokens), beside the
TMA prefill (the launcher's default there; from 2,048 query rows the Gluon prefill for a few hours of 2026-12-06,
until this probe's hold-out, run on an H100, found the TMA prefill faster on all 5 of its shapes of 2k rows or more),
SDPA cuDNN and SDPA FLASH, timed interleaved
(``iomodel.bench.timing.do_bench_interleaved``: do_bench medians, L2 flushed before every repetition, rounds in a
rotating order). Exactness: the Gluon o and LSE against the TMA prefill's on the same inputs.

    python benchmarks/gpu_gluon_causal64_probe.py --out $OUT/gluon-causal64-probe.json [--rounds 5]
    python benchmarks/gpu_gluon_causal64_probe.py --holdout --out $OUT/gluon-causal64-holdout.json
    python benchmarks/gpu_gluon_causal64_probe.py --grid-scan --out $OUT/gluon-causal64-grid-scan.json --rounds 3

``--holdout`` times :data:`HOLDOUT_SHAPES` instead: shapes chosen after the rule (the Gluon prefill from 2,048 query
rows, then ``capabilities.GLUON_AUTO_MIN_SEQLEN_Q``, withdrawn at c3e5e64 after this hold-out) was set from the first run and committed before they were measured, to test it: at each, is the
path the rule picks the faster of the two? Their grids vary: 128 to 672 programs of 256 rows (128 to 576 at 2k rows or
more), where the calibration's had 1,024 from 2k rows.

``--grid-scan`` times :data:`GRID_SCAN_SHAPES` (calibration for a rule in the grid's size: programs of 256 rows from
256 to 4,096 at three lengths).

FLOPs: 4·B·H·d·(visible pairs), N·(N+1)/2 pairs a head causal top-left.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.errors import IomodelError  # noqa: E402
from iomodel.paths import check_probe_start, exit_code_of, finish_probe_receipt, one_line_parser  # noqa: E402

#: (B, N) of the kernel-speed matrix's prefill buckets (H 16, HEAD_DIM 64, causal), both dtypes.
SHAPES = [(32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384)]
HEADS, HEAD_DIM = 16, 64
#: The speed hold-out of the 2,048-row rule (B, H, N, dtype; HEAD_DIM 64, causal top-left), committed on 2026-12-06
#: before any was measured: 5 at or above the threshold (one of 128 programs on 132 SMs), 3 below it.
HOLDOUT_SHAPES = [(1, 16, 2048, "fp16"), (1, 32, 2048, "bf16"), (3, 12, 2560, "bf16"), (2, 24, 3072, "fp16"),
                  (1, 8, 12288, "bf16"), (4, 8, 1536, "bf16"), (6, 16, 1792, "fp16"), (2, 20, 1280, "bf16")]
#: ``--grid-scan`` (2026-12-06, second attempt; calibration, to choose a rule in the grid's size, not to test one):
#: H 16, bf16, the Gluon prefill's programs of 256 rows B·H·N/256 from 256 to 4,096 at N 2k, 4k and 8k, so the
#: programs and the length vary apart (the first hold-out's losses were all at 128-576 programs).
GRID_SCAN_SHAPES = [(B, 16, N, "bf16") for N, Bs in ((2048, (2, 4, 8, 16, 32)), (4096, (1, 2, 3, 4, 6, 8, 16)),
                                                    (8192, (1, 2, 4, 8))) for B in Bs]


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON receipt path")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--holdout", action="store_true", help="time HOLDOUT_SHAPES (the rule's speed hold-out)")
    ap.add_argument("--grid-scan", action="store_true", help="time GRID_SCAN_SHAPES (calibration of a grid-size rule)")
    args = ap.parse_args()
    import torch

    def preflight() -> None:  # an unwritable --out, bad rounds or no GPU: one line before any timing
        if args.holdout and args.grid_scan:
            raise IomodelError("--holdout and --grid-scan time different shape lists: give one")
        check_probe_start(args.out, args.rounds)

    if exit_code_of(preflight):
        return 2
    started = time.time()
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from iomodel.bench.timing import do_bench_interleaved
    from kernels.flash_attention import flash_attention

    rows = []
    shapes = (HOLDOUT_SHAPES if args.holdout else GRID_SCAN_SHAPES if args.grid_scan
              else [(B, HEADS, N, dts) for dts in ("bf16", "fp16") for B, N in SHAPES])
    for B, H, N, dts in shapes:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dts]
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, HEAD_DIM, device="cuda", dtype=dt, generator=g) for _ in range(3))
        o_t, lse_t, cfg_t = flash_attention(q, k, v, True, return_config=True, path="prefill-tma")
        o_g, lse_g, cfg_g = flash_attention(q, k, v, True, return_config=True, path="prefill-gluon")
        default = flash_attention(q, k, v, True, return_config=True)[2].path
        torch.cuda.synchronize()

        def sdpa(backend):
            def f():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return f

        fns = {"tma": lambda: flash_attention(q, k, v, True, path="prefill-tma"),
               "gluon": lambda: flash_attention(q, k, v, True, path="prefill-gluon"),
               "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION)}
        times = do_bench_interleaved(fns, args.rounds, 25, 100)
        flops = 4 * B * H * HEAD_DIM * N * (N + 1) / 2
        med = {n: statistics.median(ts) for n, ts in times.items()}
        per_round = {n: [c / t for c, t in zip(times["sdpa_cudnn"], ts)] for n, ts in times.items()}
        row = {"B": B, "H": H, "N": N, "d": HEAD_DIM, "dtype": dts, "causal": True, "default_path": default,
               "gluon_programs": B * H * -(-N // 256), "sms": torch.cuda.get_device_properties(0).multi_processor_count,
               "configs": {"tma": dataclasses.asdict(cfg_t), "gluon": dataclasses.asdict(cfg_g)},
               "max_abs_diff_o_gluon_vs_tma": (o_g.float() - o_t.float()).abs().max().item(),
               "max_abs_diff_lse_gluon_vs_tma": (lse_g - lse_t).abs().max().item(),
               "finite": bool(torch.isfinite(o_g).all()),
               "seconds": times, "tflops": {n: flops / s / 1e12 for n, s in med.items()},
               "ratio_vs_cudnn": {n: med["sdpa_cudnn"] / s for n, s in med.items()},
               "ratio_vs_cudnn_rounds": {n: [min(r), max(r)] for n, r in per_round.items()},
               "gluon_over_tma": med["tma"] / med["gluon"]}
        rows.append(row)
        print(f"B{B} H{H} N{N} {dts} default={default}: " + " ".join(f"{n}={row['tflops'][n]:.0f}TF/{row['ratio_vs_cudnn'][n]:.3f}"
                                               for n in med)
              + f" gluon/tma={row['gluon_over_tma']:.3f} diff_o={row['max_abs_diff_o_gluon_vs_tma']:.2e}",
              flush=True)
    rec = {"command": f"python3 benchmarks/gpu_gluon_causal64_probe.py --out {args.out} --rounds {args.rounds}"
                      + (" --holdout" if args.holdout else "") + (" --grid-scan" if args.grid_scan else ""),
           "holdout": args.holdout, "grid_scan": args.grid_scan,
           "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
           "triton": triton.__version__, "rounds": args.rounds, "rows": rows}
    return exit_code_of(lambda: finish_probe_receipt(args.out, rec, started))


if __name__ == "__main__":
    raise SystemExit(main())
