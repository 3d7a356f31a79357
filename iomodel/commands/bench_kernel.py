"""``iomodel bench-kernel``: the bundled Triton kernel against PyTorch SDPA (every backend pinned).

A thin layer over :func:`kernels.benchmark.run_benchmark` (same as
``python benchmarks/bench_kernel.py``): prefill TFLOP/s and decode HBM bandwidth, measured in
one process and interleaved, written as a JSON + Markdown receipt. Needs a CUDA GPU; bad
input or a missing GPU exits 2 with one line.
"""

from __future__ import annotations

import typer

from iomodel.errors import IomodelError


def bench_kernel(
    receipt: str = typer.Option(..., "--receipt", help="Receipt path: writes PATH.json and PATH.md."),
    tokens: str = typer.Option("16k", "--tokens", help="B * seqlen per prefill call."),
    heads: int = typer.Option(16, "--heads", help="Prefill heads H."),
    seqlens: str = typer.Option("512,1k,2k,4k,8k,16k", "--seqlens", help="Prefill seqlens (8k = 8192)."),
    head_dims: str = typer.Option("64,128", "--head-dims", help="Prefill HEAD_DIMs."),
    dtypes: str = typer.Option("fp16,bf16", "--dtypes", help="Prefill dtypes."),
    causal: str = typer.Option("false,true", "--causal", help="Prefill causal settings."),
    batches: str = typer.Option("1,2,4,8", "--batches", help="Decode batch sizes."),
    kv_lens: str = typer.Option("8k,16k,32k,64k,128k", "--kv-lens", help="Decode KV cache lengths."),
    decode_dtypes: str = typer.Option("bf16", "--decode-dtypes", help="Decode dtypes."),
    impls: str = typer.Option("triton,sdpa-flash,sdpa-efficient,sdpa-cudnn,sdpa-math", "--impls",
                              help="Implementations to time."),
    no_prefill: bool = typer.Option(False, "--no-prefill", help="Skip the prefill matrix."),
    no_decode: bool = typer.Option(False, "--no-decode", help="Skip the decode matrix."),
    rounds: int = typer.Option(3, "--rounds", help="Interleaved rounds per shape (median over rounds)."),
    warmup_ms: float = typer.Option(10.0, "--warmup-ms", help="do_bench warm-up per sample, ms."),
    rep_ms: float = typer.Option(40.0, "--rep-ms", help="do_bench repetitions per prefill sample, ms."),
    decode_rep_ms: float = typer.Option(20.0, "--decode-rep-ms", help="do_bench repetitions per decode sample, ms."),
    math_limit_gib: float = typer.Option(4.0, "--math-limit-gib", help="Skip SDPA MATH above this many GiB of fp32 scores."),
) -> None:
    """Benchmark the bundled kernel against SDPA FLASH/EFFICIENT/CUDNN/MATH and write a receipt (CUDA GPU)."""
    try:
        from kernels import benchmark as bk
    except ImportError as exc:
        raise IomodelError(f"bench-kernel needs torch and triton ({exc.name} is missing): pip install -e '.[kernels]'") from None
    flags = {"false": False, "true": True}
    causals = tuple(flags[c] for c in bk.parse_names(causal.lower(), ("false", "true"), "--causal"))
    prefill = [] if no_prefill else bk.prefill_matrix(
        tokens=bk.parse_ints(tokens, "--tokens")[0], heads=heads, head_dims=bk.parse_ints(head_dims, "--head-dims"),
        seqlens=bk.parse_ints(seqlens, "--seqlens"), dtypes=bk.parse_names(dtypes, ("fp16", "bf16"), "--dtypes"),
        causals=causals)
    decode = [] if no_decode else bk.decode_matrix(
        batches=bk.parse_ints(batches, "--batches"), kv_lens=bk.parse_ints(kv_lens, "--kv-lens"),
        dtypes=bk.parse_names(decode_dtypes, ("fp16", "bf16"), "--decode-dtypes"))
    bk.run_benchmark(receipt, prefill=prefill, decode=decode, impls=bk.parse_names(impls, bk.IMPLS, "--impls"),
                     rounds=rounds, warmup_ms=warmup_ms, rep_ms=rep_ms, decode_rep_ms=decode_rep_ms,
                     math_limit_bytes=int(math_limit_gib * 2**30))


def register(app: typer.Typer) -> None:
    app.command("bench-kernel")(bench_kernel)
