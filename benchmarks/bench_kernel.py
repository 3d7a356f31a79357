#!/usr/bin/env python
"""Benchmark the bundled Triton FlashAttention kernel against PyTorch SDPA (all backends pinned).

Same as ``iomodel bench-kernel``; see ``kernels/benchmark.py`` for what is measured and how.

Usage (on a CUDA GPU, from the repository root)::

    python benchmarks/bench_kernel.py --receipt receipts/bench_kernel_h200
    python benchmarks/bench_kernel.py --receipt /tmp/quick --seqlens 2k,4k --head-dims 128 --kv-lens 8k --batches 1

writes ``<receipt>.json`` and ``<receipt>.md`` and prints the Markdown last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from iomodel.errors import IomodelError  # noqa: E402
from kernels import benchmark as bk  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--receipt", required=True, help="receipt path: writes PATH.json and PATH.md")
    ap.add_argument("--tokens", default="16k", help="B * seqlen per prefill call (default 16k)")
    ap.add_argument("--heads", type=int, default=16, help="prefill heads H (default 16)")
    ap.add_argument("--seqlens", default="512,1k,2k,4k,8k,16k", help="prefill seqlens")
    ap.add_argument("--head-dims", default="64,128", help="prefill HEAD_DIMs")
    ap.add_argument("--dtypes", default="fp16,bf16", help="prefill dtypes")
    ap.add_argument("--causal", default="false,true", help="prefill causal settings")
    ap.add_argument("--batches", default="1,2,4,8", help="decode batch sizes")
    ap.add_argument("--kv-lens", default="8k,16k,32k,64k,128k", help="decode KV cache lengths")
    ap.add_argument("--decode-dtypes", default="bf16", help="decode dtypes")
    ap.add_argument("--impls", default=",".join(bk.IMPLS), help="implementations to time")
    ap.add_argument("--no-prefill", action="store_true", help="skip the prefill matrix")
    ap.add_argument("--no-decode", action="store_true", help="skip the decode matrix")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per shape")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--decode-rep-ms", type=float, default=20.0)
    ap.add_argument("--math-limit-gib", type=float, default=4.0, help="skip MATH above this many GiB of fp32 scores")
    args = ap.parse_args(argv)
    try:
        causal = tuple({"false": False, "true": True}[c] for c in bk.parse_names(args.causal, ("false", "true"), "--causal"))
        prefill = [] if args.no_prefill else bk.prefill_matrix(
            tokens=bk.parse_ints(args.tokens, "--tokens")[0], heads=args.heads,
            head_dims=bk.parse_ints(args.head_dims, "--head-dims"), seqlens=bk.parse_ints(args.seqlens, "--seqlens"),
            dtypes=bk.parse_names(args.dtypes, ("fp16", "bf16"), "--dtypes"), causals=causal)
        decode = [] if args.no_decode else bk.decode_matrix(
            batches=bk.parse_ints(args.batches, "--batches"), kv_lens=bk.parse_ints(args.kv_lens, "--kv-lens"),
            dtypes=bk.parse_names(args.decode_dtypes, ("fp16", "bf16"), "--decode-dtypes"))
        bk.run_benchmark(args.receipt, prefill=prefill, decode=decode,
                         impls=bk.parse_names(args.impls, bk.IMPLS, "--impls"), rounds=args.rounds,
                         warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, decode_rep_ms=args.decode_rep_ms,
                         math_limit_bytes=int(args.math_limit_gib * 2**30))
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
