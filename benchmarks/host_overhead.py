"""Host overhead of one ``flash_attention`` call: plain call vs the same call replayed from a CUDA graph.

Per shape (issue 14): ``plain_us`` = device time per call of back-to-back plain calls (CUDA
events around ``--calls`` calls, so a host slower than the kernel shows as gaps between
launches); ``graph_us`` = the same calls captured once in a CUDA graph and replayed (no
Python, no launch work); ``host_overhead_us = plain_us - graph_us``; ``enqueue_us`` = host
wall seconds per call to enqueue (``iomodel.bench.timing.host_overhead_s``). Each number is
the median of ``--repeats`` samples, with its spread (min, max). The graph output is checked
bitwise against the plain call's.

Every row also records ``wrapped_launch``: ``enqueue_us`` and ``plain_us`` with every compiled
launch taken through Triton's ``CompiledKernel.run`` (the design before the C launcher and the
cached TMA tensor maps), ``empty_o``: the same with o allocated by ``torch.empty`` instead of
``torch.empty_like(q)`` (the allocation before 2026-12-03), and ``enqueue_us_again``, a second
sample of the default after both.

Decode rows are measured twice, side by side: the default fused split-KV decode (one launch,
partials in a cached workspace) and, in ``two_launch``, the same tiles with
``fused_combine=False`` (the decode kernel plus the separate combine kernel, partials allocated
per call: the design before issue 14), each with its own ``host_overhead_us``.

``--python-only`` (no GPU; TRITON_INTERPRET=1 is set for it) times the Python side of one call
of issue 14's 8k decode shape on the CPU with the kernel launches replaced by a no-op, and
counts the launches and ``torch.empty`` calls per call, fused and two-launch; the receipt then
has ``kind`` ``host-python``.

Every row also times SDPA CUDNN_ATTENTION (GQA as ``enable_gqa=True``) the same way in the same
run: ``sdpa_cudnn.plain_us`` (back-to-back plain calls) and ``ratio_vs_cudnn`` = cuDNN's plain_us /
ours (> 1: ours is faster); decode rows add ``device_us`` of both with L2 flushed before each call
and the host's launch time hidden (:func:`iomodel.bench.timing.time_device_interleaved`) and
``ratio_vs_cudnn_device``.

Shapes: the decode shapes of issue 14 (B = 1, H = 32, H_kv = 8, HEAD_DIM 128, bf16, N_k = 8192
and 65536), the decode grid of the kernel-speed bench matrix
(``iomodel/bench/matrices/kernel-speed-v1.toml``), the ``decode-gqa`` bucket of
``iomodel/bench/matrices/cuda-v2.toml`` (B = 16, N_k 1k/4k/8k), :data:`HOLDOUT_DECODE` (decode
shapes outside the split rule's calibration, chosen before they were measured), and the prefill
rows of issue 14's table.

    python benchmarks/host_overhead.py --out receipts/host-overhead-h200.json [--quick]
    python benchmarks/host_overhead.py --out /tmp/host-python.json --python-only

Needs a CUDA GPU (one line and exit 2 otherwise). Runs in well under 60 s on an H200.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any, Callable
from pathlib import Path

#: Prefill rows of issue 14's table: (B, H, N, HEAD_DIM, dtype, causal).
PREFILL = ((2, 16, 8192, 128, "bf16", False), (2, 16, 8192, 128, "bf16", True),
           (8, 16, 2048, 128, "bf16", True), (4, 16, 4096, 64, "fp16", False))
#: Decode rows of issue 14 (B, H, H_kv, N_k, HEAD_DIM, dtype); the bench matrix's grid is added.
ISSUE_DECODE = ((1, 32, 8, 8192, 128, "bf16"), (1, 32, 8, 65536, 128, "bf16"))
MATRIX = "kernel-speed"
#: The decode-gqa bucket of the cuda-v2 bench matrix (B, H, H_kv, N_k, HEAD_DIM, dtype).
BENCH_DECODE = ((16, 32, 8, 1024, 128, "bf16"), (16, 32, 8, 4096, 128, "bf16"), (16, 32, 8, 8192, 128, "bf16"))
#: Decode shapes outside the calibration of ``kernels.heuristics.decode_num_splits`` (the 8 shapes
#: of receipts/decode-tune-h200-2026-12-01.json), committed before they were measured: other
#: groups (Llama-70B's 64/8, MHA 32/32, MQA-like 16/2), HEAD_DIM 64, fp16, odd lengths and batches.
HOLDOUT_DECODE = ((4, 64, 8, 8192, 128, "bf16"), (8, 32, 32, 4096, 128, "fp16"), (16, 16, 2, 2048, 64, "bf16"),
                  (3, 28, 4, 20000, 128, "bf16"), (32, 32, 8, 1024, 128, "bf16"), (2, 40, 8, 12345, 128, "fp16"),
                  (6, 32, 8, 6000, 64, "bf16"), (1, 64, 8, 100000, 128, "bf16"))


def decode_shapes(quick: bool) -> list[tuple[int, int, int, int, int, str]]:
    """Issue 14's decode rows, then the bench matrix's decode grid (duplicates dropped)."""
    from iomodel.bench.matrix import load_matrix

    shapes = list(ISSUE_DECODE)
    if not quick:
        for s in load_matrix(MATRIX).decode:
            row = (s.batch, s.heads, s.kv_heads, s.seqlen_k, s.head_dim, s.dtype)
            if row not in shapes:
                shapes.append(row)
        shapes += [r for r in BENCH_DECODE + HOLDOUT_DECODE if r not in shapes]
    return shapes


def _median(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def _plain_us(fn: Callable[[], Any], calls: int) -> float:
    """Device microseconds per call of ``calls`` back-to-back calls of ``fn`` (CUDA events)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def measure(fn: Callable[[], Any], calls: int, repeats: int) -> dict[str, Any]:
    """Plain-call and graph-replay device microseconds per call of ``fn`` (already warmed up).

    Returns ``plain_us``, ``graph_us``, ``enqueue_us`` (each ``{median, min, max}``),
    ``host_overhead_us`` (median plain - median graph) and ``graph_bitwise`` (the replayed
    output equals the plain call's, bit for bit).
    """
    import torch

    from iomodel.bench.timing import host_overhead_s

    ref = [t.clone() for t in fn()]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream, as torch.cuda.graphs asks
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # capture on the warmed-up stream: the fused decode's workspace of that stream exists, so
    # no allocation (and no counter memset) is captured into the graph
    with torch.cuda.graph(graph, stream=stream):
        outs = [fn() for _ in range(calls)]  # the same calls, captured back to back
    graph.replay()
    torch.cuda.synchronize()
    bitwise = all(torch.equal(a, b) for out in outs for a, b in zip(out, ref))
    plain, replay, enqueue = [], [], []
    for _ in range(repeats):
        plain.append(_plain_us(fn, calls))
        replay.append(_plain_us(graph.replay, 1) / calls)
        enqueue.append(host_overhead_s(fn, calls) * 1e6)
    del graph, outs
    rec = {"plain_us": _median(plain), "graph_us": _median(replay), "enqueue_us": _median(enqueue)}
    rec["host_overhead_us"] = rec["plain_us"]["median"] - rec["graph_us"]["median"]
    rec["graph_bitwise"] = bitwise
    return rec


def _launches(fa: Any) -> list[Any]:
    """Every kernel launch of the cached plans (forward main and combine, backward kernels)."""
    found = []
    for plan in fa._PLANS.values():
        for name in ("main", "combine", "preprocess", "dkdv", "reduce", "dq"):
            launch = getattr(plan, name, None)
            if isinstance(launch, fa._Launch):
                found.append(launch)
    return found


def _switched(fn: Callable[[], Any], calls: int, repeats: int, objects: list[Any], attr: str,
              value: Any) -> dict[str, Any]:
    """``plain_us`` and ``enqueue_us`` (medians with spread, µs per call) of ``fn`` while attribute
    ``attr`` of every object in ``objects`` is ``value``; each object's own value is restored after,
    also on error."""
    from iomodel.bench.timing import host_overhead_s

    saved = [getattr(o, attr) for o in objects]
    plain, enqueue = [], []
    try:
        for o in objects:
            setattr(o, attr, value)
        fn()
        for _ in range(repeats):
            plain.append(_plain_us(fn, calls))
            enqueue.append(host_overhead_s(fn, calls) * 1e6)
    finally:
        for o, v in zip(objects, saved):
            setattr(o, attr, v)
    return {"plain_us": _median(plain), "enqueue_us": _median(enqueue)}


def wrapped_launch(fa: Any, fn: Callable[[], Any], calls: int, repeats: int) -> dict[str, Any]:
    """``enqueue_us`` and ``plain_us`` of ``fn`` with every compiled launch taken through
    Triton's ``CompiledKernel.run`` (its Python ``CudaLauncher`` frame, and for the TMA kernels
    four fresh ``TensorDescriptor`` objects encoded per call): the launch design before the C
    launcher and the cached tensor maps, measured in the same run as the default."""
    launches = [launch for launch in _launches(fa) if launch.raw is not None]
    return {"direct_launches": len(launches), **_switched(fn, calls, repeats, launches, "raw", None)}


def empty_o(fa: Any, fn: Callable[[], Any], calls: int, repeats: int) -> dict[str, Any]:
    """``enqueue_us`` and ``plain_us`` of ``fn`` with o allocated by ``torch.empty(shape, dtype, device)``
    (``_alloc``) in every plan instead of ``torch.empty_like(q)`` (``_Plan.o_like_q``): the allocation
    before 2026-12-03's change, measured in the same run as the default.

    Args:
        fa: the ``kernels.flash_attention`` module; fn: one plain call; calls: calls per sample;
        repeats: samples.

    Returns:
        ``{"plans_switched": n, "plain_us": ..., "enqueue_us": ...}``: the plans switched (every cached plan
        that allocates o like q, so the count grows with the rows measured before) and the medians
        with their spread, µs per call. Every switched plan is restored, also on error.
    """
    plans = [p for p in fa._PLANS.values() if p.o_like_q]
    return {"plans_switched": len(plans), **_switched(fn, calls, repeats, plans, "o_like_q", False)}


def sdpa_cudnn(q: Any, k: Any, v: Any, causal: bool, calls: int,
               repeats: int) -> tuple[dict[str, Any], Callable[[], Any] | None]:
    """SDPA CUDNN_ATTENTION on the same tensors (``iomodel.bench.backends.attention_call``, GQA as
    ``enable_gqa=True``; decode rows unmasked: one query row sees every key).

    Returns:
        ``({"plain_us": {median, min, max}}, call)`` over ``repeats`` samples of ``calls``
        back-to-back calls (CUDA events), or ``({"error": its first line}, None)`` when cuDNN
        refuses the shape.
    """
    import torch

    from iomodel.bench.backends import attention_call
    from iomodel.bench.inputs import dense_inputs

    try:
        fn = attention_call("sdpa-cudnn", dense_inputs(q, k, v, causal))
        fn()
        torch.cuda.synchronize()
    except Exception as exc:  # a refusal is data, not a crash
        return {"error": str(exc).splitlines()[0][:200]}, None
    return {"plain_us": _median([_plain_us(fn, calls) for _ in range(repeats)])}, fn


def python_side(calls: int, repeats: int) -> list[dict[str, Any]]:
    """CPU microseconds of the Python side of one plain decode call (issue 14's 8k shape: B = 1,
    H = 32, H_kv = 8, HEAD_DIM 128, bf16, causal bottom-right), launches replaced by a no-op, for
    the fused decode and the two-launch design. Needs TRITON_INTERPRET=1 before the import.

    Returns one dict per design: ``design``, ``launches_per_call``, ``torch_empty_per_call``,
    ``python_us`` (``{median, min, max}`` over ``repeats`` samples of ``calls`` calls).
    """
    import torch

    import kernels.flash_attention as fa

    launches = [0]
    fa._Launch.__call__ = lambda self, *ptrs: launches.__setitem__(0, launches[0] + 1)  # type: ignore[method-assign]
    q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 8192, 128, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    rows = []
    _, _, cfg = fa.flash_attention(q, k, v, True, "bottom-right", return_config=True)
    for design, config in (("fused", None), ("two-launch", cfg.with_(fused_combine=False))):
        def call(config=config):
            return fa.flash_attention(q, k, v, True, "bottom-right", config=config)

        call()
        empty, n_empty = torch.empty, [0]

        def counting(*a: Any, **kw: Any) -> Any:
            n_empty[0] += 1
            return empty(*a, **kw)

        launches[0] = 0
        torch.empty = counting  # type: ignore[assignment]
        try:
            call()
        finally:
            torch.empty = empty  # type: ignore[assignment]
        n_launch = launches[0]
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            for _ in range(calls):
                call()
            samples.append((time.perf_counter() - t) / calls * 1e6)
        rows.append({"design": design, "config": (config or cfg).to_dict(), "launches_per_call": n_launch,
                     "torch_empty_per_call": n_empty[0], "python_us": _median(samples)})
        print(f"{design:10} launches {n_launch}  torch.empty {n_empty[0]}  python "
              f"{statistics.median(samples):.2f} us/call (min {min(samples):.2f}, max {max(samples):.2f})")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON receipt path")
    ap.add_argument("--calls", type=int, default=20, help="calls per sample (and per captured graph)")
    ap.add_argument("--repeats", type=int, default=5, help="samples per shape (median and spread reported)")
    ap.add_argument("--quick", action="store_true", help="issue 14's rows only (no bench-matrix grid)")
    ap.add_argument("--python-only", action="store_true",
                    help="no GPU: time the Python side of a decode call with the launches stubbed (interpreter)")
    args = ap.parse_args(argv)
    if args.python_only:
        import os

        os.environ["TRITON_INTERPRET"] = "1"  # before kernels.flash_attention is imported
    try:
        import torch

        from iomodel.errors import IomodelError
        from iomodel.measure.ncu import benchmark_preflight
        from iomodel.paths import check_output_file, write_text
    except ImportError as e:  # pragma: no cover
        print(f"error: {e}: install the project's dependencies", file=sys.stderr)
        return 2
    try:
        if args.calls < 1 or args.repeats < 1:
            raise IomodelError("--calls and --repeats must be at least 1: raise them")
        if args.python_only:
            out = check_output_file(args.out, "--out")
            import triton

            t0 = time.perf_counter()
            rows_py = python_side(max(args.calls, 2000), args.repeats)
            receipt = {"kind": "host-python", "issue": 14, "command": "python3 " + " ".join(sys.argv),
                       "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "torch": torch.__version__,
                       "triton": triton.__version__, "python": platform.python_version(),
                       "method": "CPU wall time of plain calls under TRITON_INTERPRET=1 with every kernel launch "
                                 "replaced by a no-op (the Python side only; CUDA allocations and launches cost more)",
                       "seconds": round(time.perf_counter() - t0, 1), "rows": rows_py}
            write_text(out, json.dumps(receipt, indent=1) + "\n", "--out")
            print(f"wrote {out}")
            return 0
        benchmark_preflight(args.out)  # a GPU, then a writable --out: a refused run makes no folder
        out = Path(args.out)
        import kernels.flash_attention as fa
        from iomodel.bench.timing import host_overhead_s, time_device_interleaved

        if fa.INTERPRET:
            raise IomodelError("TRITON_INTERPRET is set: unset it to time the compiled kernels")
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    cases = [("decode", (B, H, H_kv, 1, N_k, d, dt), True) for B, H, H_kv, N_k, d, dt in decode_shapes(args.quick)]
    cases += [("prefill", (B, H, H, N, N, d, dt), causal) for B, H, N, d, dt, causal in PREFILL]
    print(f"{'phase':8} {'B':>2} {'H':>3} {'H_kv':>4} {'N_q':>5} {'N_k':>7} {'d':>4} {'dtype':5} {'causal':6} "
          f"{'plain us':>9} {'graph us':>9} {'host us':>8} {'enqueue us':>10} {'config'}")
    for phase, (B, H, H_kv, N_q, N_k, d, dt), causal in cases:
        q = torch.randn(B, H, N_q, d, device="cuda", dtype=dtypes[dt], generator=gen)
        k = torch.randn(B, H_kv, N_k, d, device="cuda", dtype=dtypes[dt], generator=gen)
        v = torch.randn(B, H_kv, N_k, d, device="cuda", dtype=dtypes[dt], generator=gen)
        align = "bottom-right" if phase == "decode" else "top-left"
        o, lse, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True)  # compile (and autotune)

        def call(q=q, k=k, v=v, causal=causal, align=align):
            return fa.flash_attention(q, k, v, causal, align)

        call()
        rec = measure(call, args.calls, args.repeats)
        rec["wrapped_launch"] = wrapped_launch(fa, call, args.calls, args.repeats)
        rec["empty_o"] = empty_o(fa, call, args.calls, args.repeats)
        rec["enqueue_us_again"] = _median([host_overhead_s(call, args.calls) * 1e6 for _ in range(args.repeats)])
        row = {"phase": phase, "batch": B, "heads": H, "kv_heads": H_kv, "seqlen_q": N_q, "seqlen_k": N_k,
               "head_dim": d, "dtype": dt, "causal": causal, "causal_align": align, "config": cfg.to_dict(), **rec}
        row["set"] = ("holdout" if (B, H, H_kv, N_k, d, dt) in HOLDOUT_DECODE else "bench") if phase == "decode" \
            else "prefill"
        cudnn, cudnn_call = sdpa_cudnn(q, k, v, causal and phase == "prefill", args.calls, args.repeats)
        row["sdpa_cudnn"] = cudnn
        if cudnn_call is not None:
            row["ratio_vs_cudnn"] = cudnn["plain_us"]["median"] / rec["plain_us"]["median"]
            if phase == "decode":  # device time, L2 flushed, host hidden: ours and cuDNN interleaved
                dev = time_device_interleaved({"ours": call, "cudnn": cudnn_call}, rounds=3, reps=20)
                med = {n: statistics.median(t) * 1e6 for n, t in dev.items()}
                row["device_us"] = med["ours"]
                cudnn["device_us"] = med["cudnn"]
                row["ratio_vs_cudnn_device"] = med["cudnn"] / med["ours"]
        if phase == "decode" and cfg.num_splits > 1 and cfg.fused_combine:  # the two-launch design, same tiles
            two = cfg.with_(fused_combine=False)

            def call2(q=q, k=k, v=v, causal=causal, align=align, two=two):
                return fa.flash_attention(q, k, v, causal, align, config=two)

            call2()
            row["two_launch"] = {"config": two.to_dict(), **measure(call2, args.calls, args.repeats)}
            tl_rec = row["two_launch"]
            print(f"{'':8} two-launch: plain {tl_rec['plain_us']['median']:.1f} graph {tl_rec['graph_us']['median']:.1f}"
                  f" host {tl_rec['host_overhead_us']:.1f} us", flush=True)
        rows.append(row)
        print(f"{phase:8} {B:>2} {H:>3} {H_kv:>4} {N_q:>5} {N_k:>7} {d:>4} {dt:5} {str(causal):6} "
              f"{rec['plain_us']['median']:9.1f} {rec['graph_us']['median']:9.1f} {rec['host_overhead_us']:8.1f} "
              f"{rec['enqueue_us']['median']:10.1f} {cfg.path} S={cfg.num_splits} "
              f"x cuDNN {row.get('ratio_vs_cudnn', float('nan')):.3f} (plain)"
              + (f" {row['ratio_vs_cudnn_device']:.3f} (device)" if "ratio_vs_cudnn_device" in row else "")
              + f" [{row['set']}]" + ("" if rec["graph_bitwise"] else "  GRAPH OUTPUT DIFFERS"), flush=True)
        wr = rec["wrapped_launch"]
        print(f"{'':8} enqueue: C launcher {rec['enqueue_us']['median']:.1f} / {rec['enqueue_us_again']['median']:.1f}"
              f" us, wrapped launcher (descriptors per call) {wr['enqueue_us']['median']:.1f} us"
              f" ({wr['direct_launches']} cached launches switched), o by torch.empty"
              f" {rec['empty_o']['enqueue_us']['median']:.1f} us", flush=True)
        del q, k, v, o, lse
        torch.cuda.empty_cache()
    import triton

    receipt = {
        "kind": "host-overhead", "issue": 14, "command": "python3 " + " ".join(sys.argv), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "python": platform.python_version(), "calls_per_sample": args.calls, "repeats": args.repeats,
        "method": "CUDA events around back-to-back calls: plain calls vs one CUDA graph of the same calls "
                  "replayed; host_overhead_us = median plain_us - median graph_us; enqueue_us = host wall time per call",
        "seconds": round(time.perf_counter() - t_start, 1), "rows": rows,
    }
    write_text(out, json.dumps(receipt, indent=1) + "\n", "--out")
    print(f"wrote {out} ({len(rows)} shapes, {receipt['seconds']} s)")
    return 0 if all(r["graph_bitwise"] and r.get("two_launch", r)["graph_bitwise"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
