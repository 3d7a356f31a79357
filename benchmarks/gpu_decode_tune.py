"""GPU probe (issue 14, decode): split-KV decode tiles and split counts against SDPA cuDNN, side by
side in one run. Writes JSON to ``--out``.

    python benchmarks/gpu_decode_tune.py --out $OUT/decode-tune.json
    python benchmarks/gpu_decode_tune.py --out $OUT/t.json --shapes 1:16384,1:32768 --block-n 64 --warps 4 \
        --stages 3 --splits 8,16,24,32 --rounds 5   # chosen shapes, tiles and split counts only

For each decode shape (the ``decode-gqa`` bucket of ``iomodel/bench/matrices/cuda-v2.toml``, B = 16,
N_k 1k/4k/8k, and a sample of the kernel-speed matrix's decode grid, B 1..8, N_k 8k..128k; H = 32,
H_kv = 8, HEAD_DIM 128, bf16, one query row), every candidate :class:`kernels.heuristics.KernelConfig`
(BLOCK_N, num_warps, num_stages, num_splits as a multiple of :func:`kernels.heuristics.decode_config`'s,
fused merge or combine kernel) and SDPA cuDNN / FLASH are timed interleaved on the device
(:func:`iomodel.bench.timing.time_device_interleaved`: L2 flushed, host launch time hidden). Each
candidate's output is checked against the default's (max abs difference). ``ratio_vs_cudnn`` > 1:
faster than cuDNN. The HBM floor is K + V bytes over the copy bandwidth measured in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.bench.backends import attention_call  # noqa: E402
from iomodel.bench.environment import environment  # noqa: E402
from iomodel.bench.inputs import dense_inputs  # noqa: E402
from iomodel.bench.timing import time_device_interleaved  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.paths import check_output_file, finish_probe_receipt  # noqa: E402
from kernels import heuristics as hx  # noqa: E402
from kernels.flash_attention import flash_attention  # noqa: E402

#: (B, N_k): the cuda-v2 decode-gqa bucket, then a sample of the kernel-speed decode grid.
SHAPES = [(16, 1024), (16, 4096), (16, 8192), (1, 8192), (1, 65536), (4, 32768), (8, 16384), (8, 131072)]
H, H_KV, D = 32, 8, 128
BLOCK_N = (32, 64, 128)
WARPS = (4, 8)
STAGES = (2, 3, 4)
SPLIT_FACTORS = (0.5, 1.0, 2.0)


def copy_bandwidth() -> float:
    """Bytes per second of a 1 GiB device-to-device copy (read + write counted), median of 10."""
    a = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(12):
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    return 2 * a.numel() / sorted(ts[2:])[5]


def _ints(text: str, flag: str, sep: str = ",") -> list[int]:
    """Positive integers from ``text`` split at ``sep``; one clear error otherwise."""
    try:
        vals = [int(x) for x in text.split(sep)]
    except ValueError:
        raise IomodelError(f"{flag} takes positive integers separated by {sep!r}, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise IomodelError(f"{flag} takes positive integers, got {text!r}")
    return vals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default=None, help="B:N_k,... (default: the 8 shapes of SHAPES)")
    ap.add_argument("--block-n", default=None, help="BLOCK_N values, comma-separated (default 32,64,128)")
    ap.add_argument("--warps", default=None, help="num_warps values (default 4,8)")
    ap.add_argument("--stages", default=None, help="num_stages values (default 2,3,4)")
    ap.add_argument("--splits", default=None,
                    help="split counts to try, comma-separated (default: 0.5, 1 and 2 times the rule's)")
    args = ap.parse_args()
    try:  # bad arguments, an unwritable --out or no GPU: one line before any timing (nothing half-written)
        out = check_output_file(args.out, "--out")
        if args.rounds < 1:
            raise IomodelError(f"--rounds must be at least 1, got {args.rounds}: raise it")
        shapes = SHAPES if args.shapes is None else [tuple(_ints(x, "--shapes", ":")) for x in args.shapes.split(",")]
        if any(len(x) != 2 for x in shapes):
            raise IomodelError(f"--shapes takes B:N_k pairs, got {args.shapes!r}: e.g. --shapes 1:16384,2:32768")
        block_ns = BLOCK_N if args.block_n is None else _ints(args.block_n, "--block-n")
        warps = WARPS if args.warps is None else _ints(args.warps, "--warps")
        stages = STAGES if args.stages is None else _ints(args.stages, "--stages")
        fixed = None if args.splits is None else _ints(args.splits, "--splits")
        bad = [f"{flag} {x}" for flag, xs in (("--block-n", block_ns), ("--warps", warps)) for x in xs if x & (x - 1)]
        if bad:
            raise IomodelError(f"{', '.join(bad)}: BLOCK_N and num_warps must be powers of two (e.g. 32, 64, 128; 4, 8)")
        if any(len(set(xs)) != len(xs) for xs in (block_ns, warps, stages, fixed or [])):
            raise IomodelError("a value is given twice in --block-n, --warps, --stages or --splits: list each once")
        if not torch.cuda.is_available():
            raise IomodelError("no CUDA GPU is visible: run this benchmark on a GPU machine")
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.time()
    bw = copy_bandwidth()
    res = {"environment": environment("cuda"), "command": " ".join(sys.argv), "copy_bytes_per_s": bw, "rows": []}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    smem = torch.cuda.get_device_properties(0).shared_memory_per_multiprocessor
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s, {sms} SMs", flush=True)
    for B, N in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, 1, D, device="cuda", generator=g, dtype=torch.bfloat16)
        k, v = (torch.randn(B, H_KV, N, D, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        base = hx.decode_config(batch=B, heads=H, kv_heads=H_KV, seqlen_q=1, seqlen_k=N, head_dim=D, num_sms=sms,
                                dtype="bf16", smem_per_sm=smem)
        ref = flash_attention(q, k, v, True, "bottom-right", config=base)[0]
        fns = {"default": (lambda: flash_attention(q, k, v, True, "bottom-right", config=base))}
        configs = {"default": base}
        counts = fixed or [max(1, round(base.num_splits * f)) for f in SPLIT_FACTORS]
        for bn, w, st, splits in itertools.product(block_ns, warps, stages, counts):
            c = hx.decode_config(batch=B, heads=H, kv_heads=H_KV, seqlen_q=1, seqlen_k=N, head_dim=D, num_sms=sms,
                                 dtype="bf16", smem_per_sm=smem, num_splits=splits, block_n=bn, num_warps=w, num_stages=st)
            for fused in ((True, False) if c.num_splits > 1 else (True,)):
                c2 = c.with_(fused_combine=fused)
                name = f"bn{bn}w{w}s{st}x{c2.num_splits}{'f' if fused else 'c'}"
                if name in fns or c2 == base:
                    continue
                try:
                    got = flash_attention(q, k, v, True, "bottom-right", config=c2)[0]
                    torch.cuda.synchronize()
                    err = (got.float() - ref.float()).abs().max().item()
                except Exception as exc:  # a config that does not compile or fit: recorded, skipped
                    print("skip", B, N, name, str(exc).splitlines()[0][:160], flush=True)
                    continue
                if err > 2e-2:
                    print("wrong", B, N, name, err, flush=True)
                    continue
                fns[name] = (lambda c2=c2: flash_attention(q, k, v, True, "bottom-right", config=c2))
                configs[name] = c2
        for sdpa in ("sdpa-cudnn", "sdpa-flash"):
            try:
                call = attention_call(sdpa, dense_inputs(q, k, v, False))
                call()
                fns[sdpa] = call
            except Exception as exc:
                print("skip", sdpa, str(exc).splitlines()[0][:160], flush=True)
        samples = time_device_interleaved(fns, rounds=args.rounds, reps=20)
        med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        kv_bytes = 2 * B * H_KV * N * D * 2
        floor = kv_bytes / (bw / 2)
        best = min((n for n in med if not n.startswith("sdpa")), key=med.get)
        row = dict(B=B, N_k=N, kv_bytes=kv_bytes, floor_s=floor, default=base.to_dict(), best=best,
                   best_config=configs[best].to_dict(), median_s=med,
                   ratio_vs_cudnn={n: med["sdpa-cudnn"] / t for n, t in med.items()} if "sdpa-cudnn" in med else {})
        res["rows"].append(row)
        top = sorted((n for n in med if not n.startswith("sdpa")), key=med.get)[:5]
        print(f"B{B} N{N}: floor {floor * 1e6:.1f}us cudnn {med.get('sdpa-cudnn', 0) * 1e6:.1f} "
              f"flash {med.get('sdpa-flash', 0) * 1e6:.1f} default {med['default'] * 1e6:.1f} ({base.block_n},"
              f"{base.num_warps},{base.num_stages},x{base.num_splits}) best "
              + ", ".join(f"{n} {med[n] * 1e6:.1f}" for n in top), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    finish_probe_receipt(out, res, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
