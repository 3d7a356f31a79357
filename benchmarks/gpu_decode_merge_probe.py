"""GPU probe (issue 14, decode): how many software-pipeline stages the fused split-KV decode's merge loop gets (``kernels.heuristics.FUSED_MERGE_STAGES``), side by side in one run, against the
two-launch design (the same tiles with ``fused_combine=False``) and SDPA cuDNN. Writes JSON to ``--out``.

    python benchmarks/gpu_decode_merge_probe.py --out $OUT/decode-merge-probe.json [--merge-stages 1,2,3,4]

Shapes: the decode grid of the kernel-speed bench matrix (B 1..8, H 32 / H_kv 8, HEAD_DIM 128,
bf16, N_k 8k..128k) and the ``decode-gqa`` bucket of cuda-v2 (B 16, N_k 1k/4k/8k): 23, of which the
5 whose K exceeds ``FUSED_COMBINE_MAX_K_ELEMENTS`` with more than 8 splits run the combine kernel
(no fused merge: their variants differ only by noise). Per shape and
variant: ``device_us`` (:func:`iomodel.bench.timing.time_device_interleaved`: L2 flushed, the
host's launch time hidden; median of the rounds) and ``plain_us`` (back-to-back plain calls timed
by CUDA events, median of ``--repeats``, as ``benchmarks/host_overhead.py``); each fused variant's
output is compared (bitwise, and by max abs difference) with the first variant's. Each variant
keeps its own launch plan (its compiled MERGE_STAGES), swapped in per call (a dictionary update,
in the plain-call time of every fused variant alike).
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

from host_overhead import HOLDOUT_DECODE, _plain_us, decode_shapes  # noqa: E402
from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import time_device_interleaved  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.paths import check_output_file, finish_probe_receipt  # noqa: E402
from kernels import flash_attention as fa  # noqa: E402
from kernels import heuristics as hx  # noqa: E402


def _shapes() -> list[tuple[int, int, int, int, int]]:
    """(B, H, H_kv, N_k, HEAD_DIM): ``host_overhead.decode_shapes``'s bench rows (issue 14's two, the
    kernel-speed decode grid, the decode-gqa bucket; all bf16), its hold-out rows left out."""
    return [r[:5] for r in decode_shapes(False) if r not in HOLDOUT_DECODE]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--merge-stages", default="1,2,3,4", help="FUSED_MERGE_STAGES values, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    try:
        out_path = check_output_file(args.out, "--out")
        try:
            merges = [int(x) for x in args.merge_stages.split(",")]
        except ValueError:
            raise IomodelError(f"--merge-stages takes positive integers separated by ',', got {args.merge_stages!r}") from None
        if len(set(merges)) != len(merges):
            raise IomodelError(f"--merge-stages lists a value twice ({args.merge_stages!r}): list each once")
        if not merges or min(merges) < 1 or min(args.rounds, args.repeats, args.calls) < 1:
            raise IomodelError("--merge-stages values, --rounds, --repeats and --calls must be positive: raise them")
        if not torch.cuda.is_available():
            raise IomodelError("no CUDA GPU is visible: run this probe on a GPU machine")
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.time()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv), "merge_stages": merges, "rows": []}
    keep = hx.FUSED_MERGE_STAGES
    for B, H, Hk, N, D in _shapes():
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, 1, D, device="cuda", generator=g, dtype=torch.bfloat16)
        k, v = (torch.randn(B, Hk, N, D, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        fns, outs, cfg = {}, {}, None
        for ms in merges:
            hx.FUSED_MERGE_STAGES = ms
            fa._PLANS.clear()
            o, _, cfg = fa.flash_attention(q, k, v, True, "bottom-right", return_config=True)
            outs[ms] = o.clone()
            snap = dict(fa._PLANS)

            def call(snap=snap):
                fa._PLANS.clear()
                fa._PLANS.update(snap)
                return fa.flash_attention(q, k, v, True, "bottom-right")

            fns[f"fused-st{ms}"] = call
        hx.FUSED_MERGE_STAGES = keep
        fa._PLANS.clear()
        two = cfg.with_(fused_combine=False)
        fns["two-launch"] = lambda: fa.flash_attention(q, k, v, True, "bottom-right", config=two)
        fns["two-launch"]()
        cudnn = attention_call("sdpa-cudnn", dense_inputs(q, k, v, False))
        cudnn()
        fns["sdpa-cudnn"] = cudnn
        torch.cuda.synchronize()
        dev = time_device_interleaved(fns, rounds=args.rounds, reps=20)
        plain = {n: [] for n in fns}
        for _ in range(args.repeats):
            for n, f in fns.items():
                plain[n].append(_plain_us(f, args.calls))
        ref = outs[merges[0]].float()
        row = {"B": B, "H": H, "H_kv": Hk, "N_k": N, "head_dim": D, "config": cfg.to_dict(),
               "device_us": {n: statistics.median(s) * 1e6 for n, s in dev.items()},
               "plain_us": {n: statistics.median(s) for n, s in plain.items()},
               "plain_us_spread": {n: [min(s), max(s)] for n, s in plain.items()},
               "max_abs_diff_vs_first": {f"fused-st{ms}": (outs[ms].float() - ref).abs().max().item() for ms in merges},
               "bitwise_vs_first": {f"fused-st{ms}": bool(torch.equal(outs[ms], outs[merges[0]])) for ms in merges}}
        c = row["device_us"]["sdpa-cudnn"], row["plain_us"]["sdpa-cudnn"]
        row["ratio_vs_cudnn_device"] = {n: c[0] / t for n, t in row["device_us"].items()}
        row["ratio_vs_cudnn_plain"] = {n: c[1] / t for n, t in row["plain_us"].items()}
        res["rows"].append(row)
        print(f"B{B} N{N} S={cfg.num_splits}: device " + ", ".join(f"{n} {t:.1f}" for n, t in row["device_us"].items())
              + " | plain " + ", ".join(f"{n} {t:.1f}" for n, t in row["plain_us"].items()), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    finish_probe_receipt(out_path, res, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
