"""Speed of the bundled kernel against PyTorch SDPA on the same GPU, in one process, interleaved.

``iomodel bench-kernel --receipt PATH`` and ``python benchmarks/bench_kernel.py --receipt PATH``
run :func:`run_benchmark`:

* prefill: B * seqlen = 16k tokens, H = 16, HEAD_DIM 64 and 128, seqlen 512 .. 16k, causal
  (top-left) and not, fp16 and bf16. Our kernel (autotuned, the configuration it ran is
  recorded) next to ``F.scaled_dot_product_attention`` pinned to each backend
  (FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH). TFLOP/s with the FLOP
  convention ``4 * B * H * seqlen_q * seqlen_k * HEAD_DIM`` (x 0.5 causal; FlashAttention-2
  paper, Section 4.1 benchmark convention) and ratios ours / backend.
* decode: seqlen_q = 1, B 1..8, H = 32, H_kv = 8 (GQA), HEAD_DIM 128, KV 8k .. 128k. HBM
  bandwidth achieved = compulsory bytes (Q, K, V read once, O written once) / time, next
  to a device-to-device copy of a buffer the size of K + V measured in the same run
  (bandwidth = 2 x bytes / time: read + write).

Timing: prefill with ``triton.testing.do_bench`` (median; it zeroes a 256 MB buffer before
every repetition, so no run finds its inputs in L2), after one untimed call (which also
runs our autotuning), repeated for ``rounds`` rounds in a rotating order, and the median
over rounds is reported. Decode kernels take ~10 us, comparable to the host's launch
overhead, so decode is timed twice: device time with CUDA events (L2 flushed and a GPU spin
before each call so the launch is enqueued while the GPU is busy:
:func:`time_device_interleaved`; the headline numbers and the acceptance use it) and
``do_bench`` medians (recorded as ``do_bench_*``), plus the host seconds per call. A backend that refuses a shape (``RuntimeError`` from a pinned SDPA
backend, out of memory) is reported as refused with its reason, never substituted.
MATH materialises the fp32 scores: it is skipped, and the receipt says so, when they
would exceed ``math_limit_bytes``.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from iomodel.errors import IomodelError

#: Harness name -> ``torch.nn.attention.SDPBackend`` member.
SDPA_BACKENDS = {
    "sdpa-flash": "FLASH_ATTENTION",
    "sdpa-efficient": "EFFICIENT_ATTENTION",
    "sdpa-cudnn": "CUDNN_ATTENTION",
    "sdpa-math": "MATH",
}
OURS = "triton"
IMPLS = (OURS, *SDPA_BACKENDS)

#: Acceptance targets of issue 3 (the receipt checks them; the benchmark never asserts).
TARGET_VS_CUDNN = 0.9  # forward TFLOP/s >= 0.9 x CUDNN_ATTENTION
TARGET_VS_FLASH = 1.4  # forward TFLOP/s >= 1.4 x FLASH_ATTENTION
TARGET_MIN_SEQLEN = 2048  # ... at seqlen >= 2k, HEAD_DIM 128
TARGET_HEAD_DIM = 128
TARGET_DECODE_FRACTION = 0.7  # decode >= 70 % of the copy bandwidth at KV >= 8k
TARGET_DECODE_MIN_KV = 8192

DEFAULT_MATH_LIMIT_BYTES = 4 * 2**30  # skip MATH when its fp32 scores alone exceed 4 GiB


@dataclass(frozen=True)
class PrefillShape:
    """One prefill benchmark shape (self-attention, seqlen_q = seqlen_k)."""

    batch: int  # B
    heads: int  # H (= H_kv)
    seqlen: int  # N
    head_dim: int  # d
    causal: bool  # top-left
    dtype: str  # fp16 / bf16

    @property
    def flops(self) -> float:
        """4 * B * H * N * N * d FLOPs, x 0.5 when causal."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f * 0.5 if self.causal else f

    @property
    def math_score_bytes(self) -> int:
        """Bytes of the fp32 score matrix SDPA MATH materialises: B * H * N^2 * 4."""
        return self.batch * self.heads * self.seqlen * self.seqlen * 4


@dataclass(frozen=True)
class DecodeShape:
    """One decode benchmark shape (seqlen_q query rows against a KV cache of seqlen_k)."""

    batch: int  # B
    heads: int  # H
    kv_heads: int  # H_kv
    seqlen_k: int  # N_k (KV cache length)
    head_dim: int  # d
    dtype: str  # fp16 / bf16
    seqlen_q: int = 1  # N_q

    def bytes(self, width: int) -> int:
        """Compulsory HBM bytes: Q and O (B * H * N_q * d each) + K and V (B * H_kv * N_k * d each), x width."""
        return (2 * self.batch * self.heads * self.seqlen_q + 2 * self.batch * self.kv_heads * self.seqlen_k) \
            * self.head_dim * width

    @property
    def math_score_bytes(self) -> int:
        return self.batch * self.heads * self.seqlen_q * self.seqlen_k * 4


def prefill_matrix(
    tokens: int = 16384,
    heads: int = 16,
    head_dims: tuple[int, ...] = (64, 128),
    seqlens: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384),
    dtypes: tuple[str, ...] = ("fp16", "bf16"),
    causals: tuple[bool, ...] = (False, True),
) -> list[PrefillShape]:
    """The issue's prefill matrix: B = tokens / seqlen (16k tokens per call).

    Raises:
        IomodelError: a seqlen that does not divide ``tokens``.
    """
    out = []
    for n in seqlens:
        if tokens % n:
            raise IomodelError(f"seqlen {n} does not divide {tokens} tokens: pick seqlens that divide --tokens")
        for d in head_dims:
            for dt in dtypes:
                for c in causals:
                    out.append(PrefillShape(tokens // n, heads, n, d, c, dt))
    return out


def decode_matrix(
    batches: tuple[int, ...] = (1, 2, 4, 8),
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    kv_lens: tuple[int, ...] = (8192, 16384, 32768, 65536, 131072),
    dtypes: tuple[str, ...] = ("bf16",),
) -> list[DecodeShape]:
    """The issue's decode matrix (seqlen_q = 1, GQA H = 32 over H_kv = 8)."""
    return [DecodeShape(b, heads, kv_heads, n, head_dim, dt) for dt in dtypes for n in kv_lens for b in batches]


# ------------------------------------------------------------------------------------
# Timing (CUDA)
# ------------------------------------------------------------------------------------
def _torch_dtype(name: str) -> Any:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _sdpa(q: Any, k: Any, v: Any, causal: bool, backend: str) -> Callable[[], Any]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kw: dict[str, Any] = {"is_causal": causal}
    if k.shape[1] != q.shape[1]:
        kw["enable_gqa"] = True  # GQA by index mapping (PyTorch >= 2.5), never by copying K/V
    pinned = [getattr(SDPBackend, SDPA_BACKENDS[backend])]

    def run() -> Any:
        with sdpa_kernel(pinned):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    return run


def time_interleaved(fns: dict[str, Callable[[], Any]], rounds: int, warmup_ms: float, rep_ms: float) -> dict[str, list[float]]:
    """Median seconds per call of each function, ``rounds`` times in a rotating order.

    Each sample is ``triton.testing.do_bench(fn, warmup_ms, rep_ms, return_mode="median")``.

    Returns:
        name -> list of per-round median seconds.
    """
    import triton

    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            ms = triton.testing.do_bench(fns[n], warmup=warmup_ms, rep=rep_ms, return_mode="median")
            out[n].append(ms / 1e3)
    return out


def time_device_interleaved(fns: dict[str, Callable[[], Any]], rounds: int, reps: int = 50,
                            flush_bytes: int = 256 * 2**20, spin_cycles: int = 200_000,
                            info: dict[str, Any] | None = None) -> dict[str, list[float]]:
    """Device time of each function (CUDA events), ``rounds`` times in a rotating order.

    Each of ``reps`` timed calls is preceded by zeroing ``flush_bytes`` (so no call finds its
    inputs in L2, as in ``do_bench``) and by a GPU spin (``torch.cuda._sleep``), so the host's
    launch overhead is enqueued while the GPU spins and the events time only the device work.
    The spin is calibrated: at least ``spin_cycles`` and at least 2x the slowest function's
    host seconds per call (measured with :func:`host_overhead_s`) plus 50 us, converted to
    cycles with the measured rate of ``torch.cuda._sleep``. (A fixed ~0.1 ms spin let the
    ~0.1-0.2 ms host launch time of a two-kernel decode call leak into its device time:
    round 1 on the H200.) Used for decode, whose kernels take ~10 us.

    Args:
        fns: name -> a function that enqueues the work (no synchronisation inside).
        rounds: rotations of the order; reps: timed calls per function and round.
        flush_bytes: bytes zeroed before each call; spin_cycles: the smallest spin.
        info: if given, filled with ``spin_cycles``, ``spin_s`` and ``host_s`` (the
            calibration, seconds).

    Returns:
        name -> list of per-round median seconds.
    """
    import torch

    flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm-up
        for _ in range(3):
            fns[n]()
    torch.cuda.synchronize()
    host_s = max(host_overhead_s(fns[n], calls=10) for n in names)
    probe = 1_000_000
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(probe)
    b.record()
    torch.cuda.synchronize()
    cycles_per_s = probe / max(a.elapsed_time(b) / 1e3, 1e-6)
    spin = max(int(spin_cycles), int((2.0 * host_s + 50e-6) * cycles_per_s))
    if info is not None:
        info.update(spin_cycles=spin, spin_s=spin / cycles_per_s, host_s=host_s)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                flush.zero_()
                torch.cuda._sleep(spin)
                starts[i].record()
                fns[n]()
                ends[i].record()
            torch.cuda.synchronize()
            out[n].append(statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends)) / 1e3)
    del flush
    return out


def host_overhead_s(fn: Callable[[], Any], calls: int = 50) -> float:
    """Host (CPU) seconds per call to enqueue ``fn``: wall time of ``calls`` back-to-back calls."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    dt = (time.perf_counter() - t0) / calls
    torch.cuda.synchronize()
    return dt


def _probe(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """Run once; return (output, None) or (None, reason) if the implementation refuses."""
    import torch

    try:
        out = fn()
        torch.cuda.synchronize()
        return out, None
    except torch.cuda.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        return None, "refused: out of memory (" + _first_line(exc)[:120] + ")"
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        return None, "refused: " + _first_line(exc)


def _result(samples: list[float] | None, status: str, **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {"status": status, "samples_s": samples or []}
    r["median_s"] = statistics.median(samples) if samples else None
    r.update(extra)
    return r


def bench_prefill_shape(shape: PrefillShape, impls: tuple[str, ...], rounds: int, warmup_ms: float, rep_ms: float,
                        math_limit_bytes: int) -> dict[str, Any]:
    """Time one prefill shape for every implementation (interleaved). Returns its receipt entry."""
    import torch

    from kernels.flash_attention import flash_attention

    dt = _torch_dtype(shape.dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    size = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)
    q = torch.randn(size, device="cuda", dtype=dt, generator=g)
    k = torch.randn(size, device="cuda", dtype=dt, generator=g)
    v = torch.randn(size, device="cuda", dtype=dt, generator=g)
    fns: dict[str, Callable[[], Any]] = {}
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, Any] = {}
    for impl in impls:
        if impl == "sdpa-math" and shape.math_score_bytes > math_limit_bytes:
            results[impl] = _result(None, f"skipped: MATH would materialise {shape.math_score_bytes / 2**30:.1f} GiB "
                                          f"of fp32 scores (> {math_limit_bytes / 2**30:.1f} GiB limit)")
            continue
        if impl == OURS:
            try:
                o, _, cfg = flash_attention(q, k, v, causal=shape.causal, return_config=True)
                torch.cuda.synchronize()
            except Exception as exc:  # a kernel bug must not hide the SDPA numbers
                results[impl] = _result(None, "error: " + _first_line(exc))
                continue
            outputs[impl] = o
            results[impl] = {"config": cfg.to_dict()}
            fns[impl] = lambda: flash_attention(q, k, v, causal=shape.causal)
        else:
            fn = _sdpa(q, k, v, shape.causal, impl)
            out, why = _probe(fn)
            if why:
                results[impl] = _result(None, why)
                continue
            outputs[impl] = out
            fns[impl] = fn
    times = time_interleaved(fns, rounds, warmup_ms, rep_ms) if fns else {}
    for impl, samples in times.items():
        extra = results.get(impl, {})
        med = statistics.median(samples)
        results[impl] = _result(samples, "ran", tflops=shape.flops / med / 1e12, **extra)
    ref = next((outputs[b] for b in ("sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math") if b in outputs), None)
    if OURS in outputs and ref is not None:
        results[OURS]["max_abs_diff_vs_sdpa"] = (outputs[OURS].float() - ref.float()).abs().max().item()
    outputs.clear()
    return {"shape": asdict(shape), "flops": shape.flops, "results": results,
            "ratios": _ratios(results, "tflops")}


def bench_decode_shape(shape: DecodeShape, impls: tuple[str, ...], rounds: int, warmup_ms: float, rep_ms: float,
                       math_limit_bytes: int) -> dict[str, Any]:
    """Time one decode shape for every implementation and a D2D copy (interleaved)."""
    import torch

    from kernels.flash_attention import flash_attention

    dt = _torch_dtype(shape.dtype)
    width = torch.tensor([], dtype=dt).element_size()
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(shape.batch, shape.heads, shape.seqlen_q, shape.head_dim, device="cuda", dtype=dt, generator=g)
    k = torch.randn(shape.batch, shape.kv_heads, shape.seqlen_k, shape.head_dim, device="cuda", dtype=dt, generator=g)
    v = torch.randn_like(k)
    kv_bytes = 2 * k.numel() * width
    src = torch.empty(kv_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    fns: dict[str, Callable[[], Any]] = {"copy": lambda: dst.copy_(src)}
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, Any] = {}
    for impl in impls:
        if impl == "sdpa-math" and shape.math_score_bytes > math_limit_bytes:
            results[impl] = _result(None, "skipped: above the MATH size limit")
            continue
        if impl == OURS:
            try:
                o, _, cfg = flash_attention(q, k, v, return_config=True)
                torch.cuda.synchronize()
            except Exception as exc:
                results[impl] = _result(None, "error: " + _first_line(exc))
                continue
            outputs[impl] = o
            results[impl] = {"config": cfg.to_dict()}
            fns[impl] = lambda: flash_attention(q, k, v)
        else:
            fn = _sdpa(q, k, v, False, impl)
            out, why = _probe(fn)
            if why:
                results[impl] = _result(None, why)
                continue
            outputs[impl] = out
            fns[impl] = fn
    dev = time_device_interleaved(fns, rounds)
    bench = time_interleaved(fns, rounds, warmup_ms, rep_ms)
    copy_dev, copy_bench = dev.pop("copy"), bench.pop("copy")
    copy_s = statistics.median(copy_dev)
    copy_bw = 2 * kv_bytes / copy_s
    copy_bw_bench = 2 * kv_bytes / statistics.median(copy_bench)
    moved = shape.bytes(width)
    for impl, samples in dev.items():
        extra = results.get(impl, {})
        med = statistics.median(samples)
        bw = moved / med
        bw_bench = moved / statistics.median(bench[impl])
        results[impl] = _result(samples, "ran", bandwidth_Bps=bw, fraction_of_copy=bw / copy_bw,
                                do_bench_samples_s=bench[impl], do_bench_bandwidth_Bps=bw_bench,
                                do_bench_fraction_of_copy=bw_bench / copy_bw_bench,
                                host_overhead_s=host_overhead_s(fns[impl]), **extra)
    ref = next((outputs[b] for b in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math") if b in outputs), None)
    if OURS in outputs and ref is not None:
        results[OURS]["max_abs_diff_vs_sdpa"] = (outputs[OURS].float() - ref.float()).abs().max().item()
    outputs.clear()
    return {"shape": asdict(shape), "bytes": moved,
            "copy": {"bytes": 2 * kv_bytes, "median_s": copy_s, "bandwidth_Bps": copy_bw, "samples_s": copy_dev,
                     "do_bench_samples_s": copy_bench, "do_bench_bandwidth_Bps": copy_bw_bench},
            "results": results, "ratios": _ratios(results, "bandwidth_Bps")}


def _ratios(results: dict[str, dict[str, Any]], metric: str) -> dict[str, float | None]:
    ours = results.get(OURS, {}).get(metric)
    out: dict[str, float | None] = {}
    for impl in SDPA_BACKENDS:
        other = results.get(impl, {}).get(metric)
        out[impl] = ours / other if (ours and other) else None
    return out


# ------------------------------------------------------------------------------------
# Acceptance (issue 3) — computed from the raw numbers, never asserted by the benchmark
# ------------------------------------------------------------------------------------
def acceptance(receipt: dict[str, Any]) -> dict[str, Any]:
    """Check the issue's H200 targets on a receipt's numbers.

    Prefill: every shape with seqlen >= 2k and HEAD_DIM 128 must reach >= 0.9 x CUDNN and
    >= 1.4 x FLASH TFLOP/s (medians of the run); a refused backend makes its check
    ``None`` (not passed). Decode: every shape with KV >= 8k must reach >= 70 % of the
    copy bandwidth measured next to it.

    Returns:
        ``{"prefill": [...], "decode": [...], "passed": bool}``.
    """
    rows_p, rows_d = [], []
    ok = True
    for e in receipt.get("prefill", []):
        s = e["shape"]
        if s["seqlen"] < TARGET_MIN_SEQLEN or s["head_dim"] != TARGET_HEAD_DIM:
            continue
        rc, rf = e["ratios"].get("sdpa-cudnn"), e["ratios"].get("sdpa-flash")
        pc = rc is not None and rc >= TARGET_VS_CUDNN
        pf = rf is not None and rf >= TARGET_VS_FLASH
        ok &= pc and pf
        rows_p.append({"shape": s, "vs_cudnn": rc, "vs_flash": rf, "pass_cudnn": pc, "pass_flash": pf})
    for e in receipt.get("decode", []):
        s = e["shape"]
        if s["seqlen_k"] < TARGET_DECODE_MIN_KV:
            continue
        frac = e["results"].get(OURS, {}).get("fraction_of_copy")
        p = frac is not None and frac >= TARGET_DECODE_FRACTION
        ok &= p
        rows_d.append({"shape": s, "fraction_of_copy": frac, "pass": p})
    if not rows_p and not rows_d:
        ok = False
    return {"targets": {"vs_cudnn": TARGET_VS_CUDNN, "vs_flash": TARGET_VS_FLASH, "min_seqlen": TARGET_MIN_SEQLEN,
                        "head_dim": TARGET_HEAD_DIM, "decode_fraction": TARGET_DECODE_FRACTION,
                        "decode_min_kv": TARGET_DECODE_MIN_KV},
            "prefill": rows_p, "decode": rows_d, "passed": bool(ok)}


# ------------------------------------------------------------------------------------
# Environment, receipt, Markdown
# ------------------------------------------------------------------------------------
def environment() -> dict[str, Any]:
    """Device and versions: GPU name, SMs, torch, triton, CUDA, cuDNN, driver."""
    import torch
    import triton

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "triton": triton.__version__, "cuda": torch.version.cuda,
                           "cudnn": torch.backends.cudnn.version(), "host": platform.node()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update({"device": torch.cuda.get_device_name(0), "sm": f"{p.major}.{p.minor}",
                    "num_sms": p.multi_processor_count, "memory_bytes": int(p.total_memory)})
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    return env


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None else format(x, spec)


def render_markdown(receipt: dict[str, Any]) -> str:
    """The receipt as Markdown: header, prefill TFLOP/s table, decode bandwidth table, acceptance."""
    env = receipt["environment"]
    lines = [
        "# Kernel benchmark receipt",
        "",
        f"- command: `{receipt['command']}`",
        f"- date: {receipt['date']}",
        f"- device: {env.get('device')} (sm_{str(env.get('sm', '')).replace('.', '')}, {env.get('num_sms')} SMs)",
        f"- torch {env.get('torch')}, triton {env.get('triton')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
        f"driver {env.get('driver')}",
        f"- timing: {receipt['timing']}",
        f"- FLOPs: {receipt['flop_convention']}",
        "",
    ]
    if receipt.get("prefill"):
        lines += ["## Prefill forward (TFLOP/s, median of the run; ratio = ours / backend)", "",
                  "| B | N | d | dtype | causal | ours | FLASH | EFFICIENT | CUDNN | MATH | vs CUDNN | vs FLASH | ours config |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in receipt["prefill"]:
            s, r = e["shape"], e["results"]

            def cell(impl: str) -> str:
                x = r.get(impl, {})
                return _fmt(x.get("tflops")) if x.get("status") == "ran" else x.get("status", "—").split(":")[0]

            cfg = r.get(OURS, {}).get("config") or {}
            cfg_s = (f"{cfg.get('path')} {cfg.get('block_m')}x{cfg.get('block_n')} w{cfg.get('num_warps')} "
                     f"s{cfg.get('num_stages')}") if cfg else "—"
            lines.append(f"| {s['batch']} | {s['seqlen']} | {s['head_dim']} | {s['dtype']} | {s['causal']} | "
                         f"{cell(OURS)} | {cell('sdpa-flash')} | {cell('sdpa-efficient')} | {cell('sdpa-cudnn')} | "
                         f"{cell('sdpa-math')} | {_fmt(e['ratios'].get('sdpa-cudnn'), '.2f')} | "
                         f"{_fmt(e['ratios'].get('sdpa-flash'), '.2f')} | {cfg_s} |")
        lines.append("")
    if receipt.get("decode"):
        lines += ["## Decode (HBM GB/s = compulsory bytes / device time; copy = D2D copy of K+V bytes, read + write)",
                  "", "| B | KV | dtype | copy GB/s | ours GB/s | ours / copy | ours / copy (do_bench) | host us/call | "
                  "FLASH | EFFICIENT | CUDNN | MATH | splits |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in receipt["decode"]:
            s, r = e["shape"], e["results"]

            def gbs(impl: str) -> str:
                x = r.get(impl, {})
                return _fmt(x["bandwidth_Bps"] / 1e9, ".0f") if x.get("status") == "ran" else \
                    x.get("status", "—").split(":")[0]

            cfg = r.get(OURS, {}).get("config") or {}
            ours = r.get(OURS, {})
            host = ours.get("host_overhead_s")
            lines.append(f"| {s['batch']} | {s['seqlen_k']} | {s['dtype']} | {e['copy']['bandwidth_Bps'] / 1e9:.0f} | "
                         f"{gbs(OURS)} | {_fmt(ours.get('fraction_of_copy'), '.2f')} | "
                         f"{_fmt(ours.get('do_bench_fraction_of_copy'), '.2f')} | "
                         f"{_fmt(host * 1e6 if host else None, '.0f')} | {gbs('sdpa-flash')} | "
                         f"{gbs('sdpa-efficient')} | {gbs('sdpa-cudnn')} | {gbs('sdpa-math')} | "
                         f"{cfg.get('num_splits', '—')} |")
        lines.append("")
    refusals = sorted({f"{impl}: {x['status']}" for sec in ("prefill", "decode") for e in receipt.get(sec, [])
                       for impl, x in e["results"].items() if x.get("status", "ran") != "ran"})
    if refusals:
        lines += ["## Refused or skipped (reported as such, never substituted)", ""] + [f"- {x}" for x in refusals] + [""]
    acc = receipt.get("acceptance")
    if acc:
        t = acc["targets"]
        lines += ["## Acceptance (issue 3)", "",
                  f"Prefill, seqlen >= {t['min_seqlen']}, HEAD_DIM {t['head_dim']}: ours >= {t['vs_cudnn']} x CUDNN and "
                  f">= {t['vs_flash']} x FLASH. Decode, KV >= {t['decode_min_kv']}: ours >= "
                  f"{t['decode_fraction']:.0%} of the copy bandwidth.", ""]
        for row in acc["prefill"]:
            s = row["shape"]
            lines.append(f"- prefill N={s['seqlen']} {s['dtype']} causal={s['causal']}: vs CUDNN "
                         f"{_fmt(row['vs_cudnn'], '.2f')} ({'pass' if row['pass_cudnn'] else 'FAIL'}), vs FLASH "
                         f"{_fmt(row['vs_flash'], '.2f')} ({'pass' if row['pass_flash'] else 'FAIL'})")
        for row in acc["decode"]:
            s = row["shape"]
            lines.append(f"- decode B={s['batch']} KV={s['seqlen_k']} {s['dtype']}: "
                         f"{_fmt(row['fraction_of_copy'], '.2f')} of copy ({'pass' if row['pass'] else 'FAIL'})")
        lines += ["", f"**{'PASSED' if acc['passed'] else 'NOT PASSED'}**", ""]
    return "\n".join(lines)


def receipt_paths(path: str | Path) -> tuple[Path, Path]:
    """``(json_path, md_path)`` for a receipt path (``x.json`` -> ``x.json`` and ``x.md``; ``x`` -> ``x.json``, ``x.md``)."""
    p = Path(path)
    base = p.with_suffix("") if p.suffix.lower() in (".json", ".md") else p
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".md")


def write_receipt(receipt: dict[str, Any], path: str | Path) -> tuple[Path, Path]:
    """Write the receipt as JSON and Markdown next to each other.

    Raises:
        IomodelError: the folder cannot be created or written.
    """
    jp, mp = receipt_paths(path)
    try:
        jp.parent.mkdir(parents=True, exist_ok=True)
        jp.write_text(json.dumps(receipt, indent=1, default=str) + "\n")
        mp.write_text(render_markdown(receipt) + "\n")
    except OSError as exc:
        raise IomodelError(f"cannot write the receipt to {str(jp)!r} ({exc.strerror}): pass a writable --receipt path") from None
    return jp, mp


def run_benchmark(
    receipt_path: str | Path,
    *,
    prefill: list[PrefillShape] | None = None,
    decode: list[DecodeShape] | None = None,
    impls: tuple[str, ...] = IMPLS,
    rounds: int = 3,
    warmup_ms: float = 10.0,
    rep_ms: float = 40.0,
    decode_rep_ms: float = 20.0,
    math_limit_bytes: int = DEFAULT_MATH_LIMIT_BYTES,
    command: str | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the benchmark and write its receipt (JSON + Markdown).

    Args:
        receipt_path: where to write (see :func:`receipt_paths`).
        prefill, decode: shape lists (default: :func:`prefill_matrix`, :func:`decode_matrix`;
            pass ``[]`` to skip a part).
        impls: implementations to time (``triton`` and the ``sdpa-*`` names).
        rounds: interleaved rounds per shape (the median over rounds is reported).
        warmup_ms, rep_ms, decode_rep_ms: ``do_bench`` warm-up and repetition budgets (ms).
        math_limit_bytes: skip SDPA MATH when its fp32 scores would exceed this (bytes).
        command: the command line to record (default: ``sys.argv``).
        echo: progress printer.

    Returns:
        The receipt dictionary.

    Raises:
        IomodelError: no CUDA GPU, TRITON_INTERPRET set, an unknown implementation, or an
            unwritable receipt path.
    """
    import torch

    if not torch.cuda.is_available():
        raise IomodelError("bench-kernel times the compiled kernel on a CUDA GPU, and none is visible: run it on a GPU")
    from kernels.flash_attention import INTERPRET

    if INTERPRET:
        raise IomodelError("TRITON_INTERPRET is set, so the kernel would run in the interpreter: unset it to benchmark")
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        raise IomodelError(f"unknown implementation(s) {', '.join(bad)}: use {', '.join(IMPLS)}")
    if rounds < 1:
        raise IomodelError(f"rounds must be at least 1, got {rounds}: pass --rounds 1 or more")
    prefill = prefill_matrix() if prefill is None else prefill
    decode = decode_matrix() if decode is None else decode
    receipt: dict[str, Any] = {
        "schema": "iomodel.bench_kernel/1",
        "command": command or " ".join(shlex.quote(a) for a in sys.argv),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment(),
        "timing": (f"prefill: triton.testing.do_bench median (L2 flushed before every repetition), warm-up "
                   f"{warmup_ms} ms, rep {rep_ms} ms, {rounds} interleaved rounds in rotating order, median over rounds; "
                   "one untimed call first (our autotuning happens there). decode: device time by CUDA events "
                   "(256 MiB L2 flush and a GPU spin of at least 2x the host seconds per call + 50 us before each "
                   f"of 50 calls, so host launch overhead is not timed), {rounds} interleaved rounds, median; do_bench medians (rep {decode_rep_ms} ms) "
                   "and host seconds per call recorded beside"),
        "flop_convention": "4 * B * H * seqlen_q * seqlen_k * HEAD_DIM, x 0.5 causal",
        "math_limit_bytes": math_limit_bytes,
        "prefill": [],
        "decode": [],
    }
    t0 = time.time()
    for i, s in enumerate(prefill):
        e = bench_prefill_shape(s, impls, rounds, warmup_ms, rep_ms, math_limit_bytes)
        torch.cuda.empty_cache()  # the shape's tensors died with the call
        receipt["prefill"].append(e)
        r = e["results"]
        echo(f"[prefill {i + 1}/{len(prefill)} {time.time() - t0:.0f}s] B={s.batch} N={s.seqlen} d={s.head_dim} "
             f"{s.dtype} causal={s.causal}: " + ", ".join(
                 f"{k}={v['tflops']:.0f}" if v.get("status") == "ran" else f"{k}={v.get('status', '?').split(':')[0]}"
                 for k, v in r.items()) + " TFLOP/s")
    for i, s in enumerate(decode):
        e = bench_decode_shape(s, impls, rounds, warmup_ms, decode_rep_ms, math_limit_bytes)
        torch.cuda.empty_cache()
        receipt["decode"].append(e)
        r = e["results"]
        echo(f"[decode {i + 1}/{len(decode)} {time.time() - t0:.0f}s] B={s.batch} KV={s.seqlen_k}: copy "
             f"{e['copy']['bandwidth_Bps'] / 1e9:.0f} GB/s, " + ", ".join(
                 f"{k}={v['bandwidth_Bps'] / 1e9:.0f}" if v.get("status") == "ran"
                 else f"{k}={v.get('status', '?').split(':')[0]}" for k, v in r.items()) + " GB/s")
    receipt["elapsed_s"] = time.time() - t0
    receipt["acceptance"] = acceptance(receipt)
    jp, mp = write_receipt(receipt, receipt_path)
    echo(render_markdown(receipt))
    echo(f"receipt: {jp} and {mp}")
    return receipt


def parse_ints(text: str, what: str) -> tuple[int, ...]:
    """``"512,1024"`` -> ``(512, 1024)``; ``k`` suffix = x1024 (``"8k"`` -> 8192).

    Raises:
        IomodelError: a value that is not a positive integer.
    """
    out = []
    for part in str(text).split(","):
        part = part.strip().lower()
        if not part:
            continue
        mult = 1024 if part.endswith("k") else 1
        try:
            val = int(part[:-1] if mult > 1 else part) * mult
        except ValueError:
            raise IomodelError(f"{what} must be comma-separated positive integers (8k = 8192), got {text!r}: fix it") from None
        if val <= 0:
            raise IomodelError(f"{what} must be positive, got {val}: fix it")
        out.append(val)
    if not out:
        raise IomodelError(f"{what} is empty: give at least one value")
    return tuple(out)


def parse_names(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``"fp16,bf16"`` -> ``("fp16", "bf16")``, each checked against ``allowed``.

    Raises:
        IomodelError: an unknown name.
    """
    out = tuple(p.strip() for p in str(text).split(",") if p.strip())
    bad = [p for p in out if p not in allowed]
    if bad or not out:
        raise IomodelError(f"{what} {text!r} is not valid: use a comma-separated subset of {', '.join(allowed)}")
    return out


__all__ = [
    "DecodeShape",
    "IMPLS",
    "PrefillShape",
    "acceptance",
    "decode_matrix",
    "parse_ints",
    "parse_names",
    "prefill_matrix",
    "render_markdown",
    "run_benchmark",
    "write_receipt",
]
