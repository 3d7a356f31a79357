"""Kernel speed: the bundled kernel against PyTorch SDPA on the same GPU, in one process, interleaved.

``iomodel bench --matrix kernel-speed`` runs :func:`run_speed` on a kernel-speed matrix
(:class:`~iomodel.bench.matrix.SpeedMatrix`, bundled ``matrices/kernel-speed-v1.toml``) and
evaluates the targets of ``policies/kernel-speed-v1.toml`` (:func:`acceptance`):

* prefill: each shape of the prefill grid; the tiled kernel (autotuned, the configuration
  it ran is recorded) next to ``F.scaled_dot_product_attention`` pinned to each backend
  (FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH), all called through
  :func:`iomodel.bench.backends.attention_call`. TFLOP/s with the FLOP convention
  ``4 * B * H * seqlen_q * seqlen_k * HEAD_DIM`` (x 0.5 causal; FlashAttention-2 paper,
  Section 4.1 benchmark convention) and ratios ours / backend.
* decode: each shape of the decode grid. HBM bandwidth achieved = compulsory bytes (Q, K,
  V read once, O written once) / time, next to a device-to-device copy of a buffer the size
  of K + V measured in the same run (bandwidth = 2 x bytes / time: read + write).

Timing (:mod:`iomodel.bench.timing`, called through the module so a dry run can stand in
for CUDA): prefill with ``triton.testing.do_bench`` medians
(:func:`~iomodel.bench.timing.do_bench_interleaved`) after one untimed call (which also runs
the kernel's autotuning), for ``rounds`` rounds in a rotating order, and the median over
rounds is reported. Decode kernels take ~10 us, comparable to the host's launch overhead,
so decode is timed twice: device time with CUDA events
(:func:`~iomodel.bench.timing.time_device_interleaved`; the headline numbers and the
acceptance use it) and ``do_bench`` medians (recorded as ``do_bench_*``), plus the host
seconds per call. A backend that refuses a shape (``RuntimeError`` from a pinned SDPA
backend, out of memory) is reported as refused with its reason, never substituted. MATH
materialises the fp32 scores: it is skipped, and the receipt says so, when they would
exceed the matrix's ``math_limit_bytes``.
"""

from __future__ import annotations

import datetime as _dt
import statistics
import time
from dataclasses import MISSING, asdict
from typing import Any, Callable

from iomodel.bench.backends import KERNEL, SDPA_BACKENDS, attention_call, kernel_config
from iomodel.bench.environment import environment
from iomodel.bench import timing
from iomodel.bench.inputs import AttentionInputs, dense_inputs
from iomodel.bench.matrix import DecodeShape, PrefillShape, SpeedMatrix
from iomodel.bench.policy import SpeedTargets, load_targets, same_number
from iomodel.errors import IomodelError
from iomodel import jsonvalues as jv
from iomodel.spec import dtype_width, torch_dtype

#: Schema of a kernel-speed receipt.
SPEED_SCHEMA = "iomodel.bench_kernel/1"
#: Implementations a kernel-speed matrix may time: the bundled kernel and every SDPA backend.
IMPLS = (KERNEL, *SDPA_BACKENDS)
#: Whose output the kernel's is compared with (the first that ran), prefill and decode.
PREFILL_REFERENCE = ("sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math")
DECODE_REFERENCE = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math")
FLOP_CONVENTION = "4 * B * H * seqlen_q * seqlen_k * HEAD_DIM, x 0.5 causal"
#: The end of every message about a damaged receipt (bucket or kernel-speed).
RECEIPT_FIX = "re-run iomodel bench, or correct that value"
#: Stored numbers of a result that ran, per section, that the check compares with their recomputation.
STORED_RESULT_NUMBERS = {"prefill": ("median_s", "tflops"), "decode": ("median_s", "bandwidth_Bps", "fraction_of_copy")}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


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


def _launch(inp: AttentionInputs, impls: tuple[str, ...], math_skip: str | None,
            fns: dict[str, Callable[[], Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run every implementation once on ``inp`` (untimed; the kernel autotunes here).

    Adds the callables of those that ran to ``fns``; returns the results of the others
    (refused, skipped, error) and the kernel's configuration, and the outputs of those that
    ran. ``math_skip``: the status of SDPA MATH when its scores exceed the limit, else None.
    """
    import torch

    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, Any] = {}
    for impl in impls:
        if impl == "sdpa-math" and math_skip:
            results[impl] = _result(None, math_skip)
            continue
        fn = attention_call(impl, inp)
        if impl == KERNEL:
            try:
                cfg = kernel_config(inp)
                o = fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a kernel bug must not hide the SDPA numbers
                results[impl] = _result(None, "error: " + _first_line(exc))
                continue
            results[impl] = {"config": cfg}
        else:
            o, why = _probe(fn)
            if why:
                results[impl] = _result(None, why)
                continue
        outputs[impl] = o
        fns[impl] = fn
    return results, outputs


def _max_diff(results: dict[str, dict[str, Any]], outputs: dict[str, Any], order: tuple[str, ...]) -> None:
    """Record the kernel's largest absolute difference from the first SDPA output of ``order`` that ran."""
    ref = next((outputs[b] for b in order if b in outputs), None)
    if KERNEL in outputs and ref is not None:
        results[KERNEL]["max_abs_diff_vs_sdpa"] = (outputs[KERNEL].float() - ref.float()).abs().max().item()
    outputs.clear()


def _randn(size: tuple[int, ...], dtype: str, gen: Any) -> Any:
    import torch

    return torch.randn(size, device="cuda", dtype=torch_dtype(dtype), generator=gen)


def bench_prefill_shape(shape: PrefillShape, impls: tuple[str, ...], rounds: int, warmup_ms: float, rep_ms: float,
                        math_limit_bytes: int) -> dict[str, Any]:
    """Time one prefill shape for every implementation (interleaved).

    Returns:
        Its receipt entry: ``{"shape", "flops", "results": {impl: {"status", "samples_s",
        "median_s", "tflops", ...}}, "ratios": {sdpa backend: ours / it}}`` (seconds, FLOPs).
    """
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    size = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)  # (B, H, N, d)
    q, k, v = (_randn(size, shape.dtype, g) for _ in range(3))
    skip = (f"skipped: MATH would materialise {shape.math_score_bytes / 2**30:.1f} GiB of fp32 scores "
            f"(> {math_limit_bytes / 2**30:.1f} GiB limit)") if shape.math_score_bytes > math_limit_bytes else None
    fns: dict[str, Callable[[], Any]] = {}
    results, outputs = _launch(dense_inputs(q, k, v, shape.causal), impls, skip, fns)
    times = timing.do_bench_interleaved(fns, rounds, warmup_ms, rep_ms) if fns else {}
    for impl, samples in times.items():
        extra = results.get(impl, {})
        med = statistics.median(samples)
        results[impl] = _result(samples, "ran", tflops=shape.flops / med / 1e12, **extra)
    _max_diff(results, outputs, PREFILL_REFERENCE)
    return {"shape": asdict(shape), "flops": shape.flops, "results": results, "ratios": _ratios(results, "tflops")}


def bench_decode_shape(shape: DecodeShape, impls: tuple[str, ...], rounds: int, warmup_ms: float, rep_ms: float,
                       math_limit_bytes: int) -> dict[str, Any]:
    """Time one decode shape for every implementation and a D2D copy of the K + V bytes (interleaved).

    Returns:
        Its receipt entry: ``{"shape", "bytes", "copy", "results": {impl: {"status",
        "samples_s", "median_s", "bandwidth_Bps", "fraction_of_copy", "do_bench_*",
        "host_overhead_s", ...}}, "ratios"}`` (bytes, seconds, bytes per second).
    """
    import torch

    width = dtype_width(shape.dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    q = _randn((shape.batch, shape.heads, shape.seqlen_q, shape.head_dim), shape.dtype, g)  # (B, H, N_q, d)
    k = _randn((shape.batch, shape.kv_heads, shape.seqlen_k, shape.head_dim), shape.dtype, g)  # (B, H_kv, N_k, d)
    v = torch.randn_like(k)
    kv_bytes = 2 * k.numel() * width
    src = torch.empty(kv_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    fns: dict[str, Callable[[], Any]] = {"copy": lambda: dst.copy_(src)}
    skip = "skipped: above the MATH size limit" if shape.math_score_bytes > math_limit_bytes else None
    results, outputs = _launch(dense_inputs(q, k, v, False), impls, skip, fns)
    dev = timing.time_device_interleaved(fns, rounds)
    bench = timing.do_bench_interleaved(fns, rounds, warmup_ms, rep_ms)
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
                                host_overhead_s=timing.host_overhead_s(fns[impl]), **extra)
    _max_diff(results, outputs, DECODE_REFERENCE)
    return {"shape": asdict(shape), "bytes": moved,
            "copy": {"bytes": 2 * kv_bytes, "median_s": copy_s, "bandwidth_Bps": copy_bw, "samples_s": copy_dev,
                     "do_bench_samples_s": copy_bench, "do_bench_bandwidth_Bps": copy_bw_bench},
            "results": results, "ratios": _ratios(results, "bandwidth_Bps")}


def _ratios(results: dict[str, dict[str, Any]], metric: str) -> dict[str, float | None]:
    """Ours / each SDPA backend for ``metric`` (TFLOP/s or bytes per second); None where either did not run."""
    ours = results.get(KERNEL, {}).get(metric)
    out: dict[str, float | None] = {}
    for impl in SDPA_BACKENDS:
        other = results.get(impl, {}).get(metric)
        out[impl] = ours / other if (ours and other) else None
    return out


# ------------------------------------------------------------------------------------
# Acceptance — computed from the raw numbers, never asserted by the benchmark
# ------------------------------------------------------------------------------------
def acceptance(receipt: dict[str, Any], targets: SpeedTargets | None = None) -> dict[str, Any]:
    """Check the kernel-speed targets on a receipt's numbers.

    Prefill: every shape with seqlen >= ``min_seqlen`` and HEAD_DIM = ``head_dim`` must reach
    >= ``vs_cudnn`` x CUDNN and >= ``vs_flash`` x FLASH TFLOP/s (medians of the run); a
    refused backend makes its check ``None`` (not passed). Decode: every shape with
    seqlen_k >= ``decode_min_kv`` must reach >= ``decode_fraction`` of the copy bandwidth
    measured next to it. Nothing measured passes nothing.

    Args:
        receipt: a kernel-speed receipt (``prefill``, ``decode`` entries).
        targets: the bars (default: the bundled current version, the bars of issue 3).

    Returns:
        ``{"version", "targets", "prefill": [...], "decode": [...], "passed": bool}``.
    """
    t = targets or load_targets()
    rows_p, rows_d = [], []
    ok = True
    for e in receipt.get("prefill", []):
        s = e["shape"]
        if s["seqlen"] < t.min_seqlen or s["head_dim"] != t.head_dim:
            continue
        rc, rf = e["ratios"].get("sdpa-cudnn"), e["ratios"].get("sdpa-flash")
        pc = rc is not None and rc >= t.vs_cudnn
        pf = rf is not None and rf >= t.vs_flash
        ok &= pc and pf
        rows_p.append({"shape": s, "vs_cudnn": rc, "vs_flash": rf, "pass_cudnn": pc, "pass_flash": pf})
    for e in receipt.get("decode", []):
        s = e["shape"]
        if s["seqlen_k"] < t.decode_min_kv:
            continue
        frac = e["results"].get(KERNEL, {}).get("fraction_of_copy")
        p = frac is not None and frac >= t.decode_fraction
        ok &= p
        rows_d.append({"shape": s, "fraction_of_copy": frac, "pass": p})
    if not rows_p and not rows_d:
        ok = False
    return {"version": t.version, "targets": t.to_dict(), "prefill": rows_p, "decode": rows_d, "passed": bool(ok)}


# ------------------------------------------------------------------------------------
# Check: every stored number against its recomputation
# ------------------------------------------------------------------------------------
def _shape_fields(shape: Any, make: type, where: str) -> Any:
    """A :class:`PrefillShape` / :class:`DecodeShape` from a receipt's ``shape`` object, every field checked."""
    jv.mapping(shape, where, fix=RECEIPT_FIX)
    fields = make.__dataclass_fields__
    for k, v in shape.items():
        if k not in fields:
            raise IomodelError(f"{where}: unknown field {k!r} (a {make.__name__} has {', '.join(fields)}): {RECEIPT_FIX}")
        if k == "dtype":
            dtype_width(jv.string(v, f"{where}.dtype", fix=RECEIPT_FIX))
        elif k == "causal":
            jv.boolean(v, f"{where}.causal", fix=RECEIPT_FIX)
        else:
            jv.number(v, f"{where}.{k}", what="a positive integer", positive=True, integer=True, fix=RECEIPT_FIX)
    missing = [k for k, f in fields.items() if k not in shape and f.default is MISSING]
    if missing:
        raise IomodelError(f"{where} has no {missing[0]!r} field: {RECEIPT_FIX}")
    made = make(**shape)
    heads, kv_heads = getattr(made, "heads", 1), getattr(made, "kv_heads", getattr(made, "heads", 1))
    if heads % kv_heads:  # an impossible layer: the bytes it implies mean nothing
        raise IomodelError(f"{where}: heads ({heads}) is not a multiple of kv_heads ({kv_heads}): {RECEIPT_FIX}")
    return made


def check_speed_fields(receipt: dict[str, Any], source: str = "the receipt") -> None:
    """Type-check every field of a kernel-speed receipt that :func:`check_speed_receipt` reads.

    Args:
        receipt: the parsed JSON.
        source: the file, for messages.

    Raises:
        IomodelError: one line naming the section, the shape and the field: a shape field of
            the wrong type; timing samples that are not a non-empty array of positive
            seconds; a stored median, TFLOP/s, bandwidth, fraction or ratio that is not a
            finite number >= 0 (or null); decode bytes that are not positive; an acceptance
            section of the wrong type.
    """
    fix = RECEIPT_FIX
    jv.mapping(receipt.get("environment") or {}, f"{source}: environment", fix=fix)
    acc = jv.mapping(receipt.get("acceptance") or {}, f"{source}: acceptance", fix=fix)
    if "version" in acc:
        jv.number(acc["version"], f"{source}: acceptance.version", what="a positive integer", positive=True,
                  integer=True, fix=fix)
    for sec in ("prefill", "decode"):
        for i, r in enumerate(jv.array(acc.get(sec, []), f"{source}: acceptance.{sec}", fix=fix)):
            jv.mapping(r, f"{source}: acceptance.{sec}[{i}]", fix=fix)
        for i, e in enumerate(jv.array(receipt.get(sec, []), f"{source}: {sec}", fix=fix)):
            jv.mapping(e, f"{source}: {sec}[{i}]", fix=fix)
            _shape_fields(jv.field(e, "shape", f"{source}: {sec}[{i}]", fix=fix),
                          PrefillShape if sec == "prefill" else DecodeShape, f"{source}: {sec}[{i}].shape")
            where = f"{source}: {sec} {', '.join(f'{k}={v}' for k, v in e['shape'].items())}"
            if sec == "prefill":
                jv.number(jv.field(e, "flops", where, fix=fix), f"{where}: flops", what="a positive number of FLOPs",
                          positive=True, fix=fix)
            else:
                jv.number(jv.field(e, "bytes", where, fix=fix), f"{where}: bytes", what="a positive number of bytes",
                          positive=True, fix=fix)
                c = jv.mapping(jv.field(e, "copy", where, fix=fix), f"{where}: copy", fix=fix)
                jv.numbers(jv.field(c, "samples_s", f"{where}: copy", fix=fix), f"{where}: copy.samples_s", fix=fix)
                jv.number(jv.field(c, "bytes", f"{where}: copy", fix=fix), f"{where}: copy.bytes",
                          what="a positive number of bytes", positive=True, fix=fix)
                for k in ("median_s", "bandwidth_Bps"):
                    jv.number(jv.field(c, k, f"{where}: copy", fix=fix), f"{where}: copy.{k}", allow_none=True, fix=fix)
            for impl, r in jv.mapping(jv.field(e, "results", where, fix=fix), f"{where}: results", fix=fix).items():
                jv.mapping(r, f"{where} {impl}", fix=fix)
                status = jv.string(r.get("status"), f"{where} {impl}: status", allow_none=True, fix=fix)
                if status != "ran" and (r.get("samples_s") or any(r.get(k) is not None
                                                                  for k in STORED_RESULT_NUMBERS[sec])):
                    raise IomodelError(f"{where} {impl}: status {status!r} yet it holds measured numbers (a backend "
                                       f"that did not run has none): {fix}")
                if status == "ran":
                    jv.numbers(jv.field(r, "samples_s", f"{where} {impl}", fix=fix), f"{where} {impl}: samples_s",
                               fix=fix)
                for k in STORED_RESULT_NUMBERS[sec]:
                    if status == "ran" or k in r:
                        jv.number(jv.field(r, k, f"{where} {impl}", fix=fix), f"{where} {impl}: {k}", allow_none=True,
                                  fix=fix)
            for impl, x in jv.mapping(jv.field(e, "ratios", where, fix=fix), f"{where}: ratios", fix=fix).items():
                jv.number(x, f"{where}: ratios[{impl!r}]", allow_none=True, fix=fix)


def check_speed_receipt(receipt: dict[str, Any], targets: SpeedTargets | None = None) -> list[str]:
    """Every stored number of a kernel-speed receipt that its samples or the targets do not give.

    Recomputes medians from ``samples_s``; FLOPs from the shape (:attr:`PrefillShape.flops`)
    and TFLOP/s from them; decode compulsory bytes (:meth:`DecodeShape.bytes`), bandwidths and
    fractions of the copy bandwidth; the ratios; and the acceptance under the bundled targets
    of the receipt's version. Whether the targets are met is the acceptance's verdict, not a
    violation: the benchmark never asserts them.

    Args:
        receipt: a kernel-speed receipt, as :func:`iomodel.bench.receipt.load_receipt` returns it.
        targets: the bars to hold it to (default: the bundled version the receipt names, 1 if none).

    Returns:
        One sentence per inconsistency; empty when every number recomputes.

    Raises:
        IomodelError: a field of the wrong type or out of range (:func:`check_speed_fields`).
    """
    if receipt.get("schema") != SPEED_SCHEMA:
        return [f"unknown kernel-speed receipt schema {receipt.get('schema')!r}: expected {SPEED_SCHEMA}"]
    check_speed_fields(receipt)
    stored_acc = receipt.get("acceptance") or {}
    if targets is None:
        try:
            targets = load_targets(int(stored_acc.get("version", 1)))
        except IomodelError as exc:
            return [f"receipt names kernel-speed targets version {stored_acc.get('version')!r}, which is not bundled ({exc})"]
    out: list[str] = []

    def same(where: str, what: str, stored: Any, fresh: float | None) -> None:
        if not same_number(stored, fresh):
            out.append(f"{where}: stored {what} {stored!r} differs from {fresh!r} recomputed from the samples")

    for sec, make in (("prefill", PrefillShape), ("decode", DecodeShape)):
        for e in receipt.get(sec, []):
            shape = make(**e["shape"])
            where = f"{sec} {', '.join(f'{k}={v}' for k, v in e['shape'].items())}"
            if sec == "prefill":
                same(where, "FLOPs", e.get("flops"), shape.flops)
            else:
                same(where, "bytes", e.get("bytes"), float(shape.bytes(dtype_width(shape.dtype))))
                c = e["copy"]
                copy_s = statistics.median(c["samples_s"])
                same(where + " copy", "median", c["median_s"], copy_s)
                same(where + " copy", "bandwidth", c["bandwidth_Bps"], c["bytes"] / copy_s)
            for impl, r in e["results"].items():
                if r.get("status") != "ran":
                    continue
                med = statistics.median(r["samples_s"])
                same(f"{where} {impl}", "median", r["median_s"], med)
                if sec == "prefill":
                    same(f"{where} {impl}", "TFLOP/s", r["tflops"], shape.flops / med / 1e12)
                else:
                    bw = e["bytes"] / med
                    same(f"{where} {impl}", "bandwidth", r["bandwidth_Bps"], bw)
                    same(f"{where} {impl}", "fraction of copy", r["fraction_of_copy"],
                         bw / (e["copy"]["bytes"] / statistics.median(e["copy"]["samples_s"])))
            fresh = _ratios(e["results"], "tflops" if sec == "prefill" else "bandwidth_Bps")
            for impl, x in fresh.items():
                same(f"{where} ours / {impl}", "ratio", e["ratios"].get(impl), x)
    acc = acceptance(receipt, targets)
    if stored_acc.get("targets") != acc["targets"]:
        out.append(f"acceptance: stored targets {stored_acc.get('targets')} differ from kernel-speed targets "
                   f"v{targets.version} {acc['targets']}")
    for sec in ("prefill", "decode"):
        flags = ("pass_cudnn", "pass_flash") if sec == "prefill" else ("pass",)
        got = [tuple(r[f] for f in flags) for r in acc[sec]]
        had = [tuple(r.get(f) for f in flags) for r in stored_acc.get(sec, [])]
        if got != had:
            out.append(f"acceptance {sec}: stored verdicts {had} differ from {got} recomputed from the numbers")
    if stored_acc.get("passed") != acc["passed"]:
        out.append(f"acceptance: stored passed={stored_acc.get('passed')} but the numbers give passed={acc['passed']}")
    return out


# ------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------
def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None else format(x, spec)


def round_ratio_range(results: dict[str, dict[str, Any]], other: str) -> tuple[float, float] | None:
    """Spread of ours / ``other`` over the interleaved rounds of one shape: (min, max) of the
    paired per-round ratios ``other's seconds / ours`` (round i of each was timed in the same
    rotation, so the pair shares the GPU's state; > 1: ours is faster). Dimensionless.

    Args:
        results: a receipt entry's ``results`` (impl -> ``samples_s``, seconds per call per round).
        other: the backend compared with (e.g. ``sdpa-cudnn``).

    Returns:
        (min, max), or None when either did not run or their round counts differ.
    """
    ours, them = results.get(KERNEL, {}), results.get(other, {})
    a, b = ours.get("samples_s") or [], them.get("samples_s") or []
    if ours.get("status") != "ran" or them.get("status") != "ran" or not a or len(a) != len(b):
        return None
    ratios = [y / x for x, y in zip(a, b) if x > 0]
    return (min(ratios), max(ratios)) if ratios else None


def _spread(rng: tuple[float, float] | None) -> str:
    return "—" if rng is None else f"{rng[0]:.2f}–{rng[1]:.2f}"


def render_speed_markdown(receipt: dict[str, Any]) -> str:
    """A kernel-speed receipt as Markdown: header, prefill TFLOP/s table, decode bandwidth table, acceptance.

    Returns:
        The document text, ending with a newline.
    """
    env = receipt["environment"]
    lines = [
        "# Kernel benchmark receipt",
        "",
        f"- command: `{receipt['command']}`",
        f"- date: {receipt['date']}",
        f"- device: {env.get('name')} (sm_{str(env.get('sm', '')).replace('.', '')}, {env.get('sms')} SMs)",
        f"- torch {env.get('torch')}, triton {env.get('triton')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
        f"driver {env.get('driver')}",
        f"- timing: {receipt['timing']}",
        f"- FLOPs: {receipt['flop_convention']}",
        "",
    ]
    if receipt.get("prefill"):
        lines += ["## Prefill forward (TFLOP/s, median of the run; ratio = ours / backend; rounds: the lowest "
                  "and highest of the per-round ratios, each round's two timings taken in the same rotation)", "",
                  "| B | N | d | dtype | causal | ours | FLASH | EFFICIENT | CUDNN | MATH | vs CUDNN | vs CUDNN, rounds "
                  "| vs FLASH | ours config |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in receipt["prefill"]:
            s, r = e["shape"], e["results"]

            def cell(impl: str) -> str:
                x = r.get(impl, {})
                return _fmt(x.get("tflops")) if x.get("status") == "ran" else x.get("status", "—").split(":")[0]

            cfg = r.get(KERNEL, {}).get("config") or {}
            cfg_s = (f"{cfg.get('path')} {cfg.get('block_m')}x{cfg.get('block_n')} w{cfg.get('num_warps')} "
                     f"s{cfg.get('num_stages')}") if cfg else "—"
            lines.append(f"| {s['batch']} | {s['seqlen']} | {s['head_dim']} | {s['dtype']} | {s['causal']} | "
                         f"{cell(KERNEL)} | {cell('sdpa-flash')} | {cell('sdpa-efficient')} | {cell('sdpa-cudnn')} | "
                         f"{cell('sdpa-math')} | {_fmt(e['ratios'].get('sdpa-cudnn'), '.2f')} | "
                         f"{_spread(round_ratio_range(r, 'sdpa-cudnn'))} | "
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

            ours = r.get(KERNEL, {})
            cfg = ours.get("config") or {}
            host = ours.get("host_overhead_s")
            lines.append(f"| {s['batch']} | {s['seqlen_k']} | {s['dtype']} | {e['copy']['bandwidth_Bps'] / 1e9:.0f} | "
                         f"{gbs(KERNEL)} | {_fmt(ours.get('fraction_of_copy'), '.2f')} | "
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
        if not acc["prefill"] and not acc["decode"]:
            lines.append("- no shape of this receipt falls under these targets (nothing measured passes nothing)")
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
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------
def _timing_text(m: SpeedMatrix) -> str:
    return (f"prefill: triton.testing.do_bench median (L2 flushed before every repetition), warm-up "
            f"{m.warmup_ms} ms, rep {m.rep_ms} ms, {m.rounds} interleaved rounds in rotating order, median over rounds; "
            "one untimed call first (our autotuning happens there). decode: device time by CUDA events "
            f"({timing.FLUSH_BYTES // 2**20} MiB L2 flush and a GPU spin of at least 2x the host seconds per call + 50 us "
            f"before each of 50 calls, so host launch overhead is not timed), {m.rounds} interleaved rounds, median; "
            f"do_bench medians (rep {m.decode_rep_ms} ms) and host seconds per call recorded beside")


def run_speed(matrix: SpeedMatrix, targets: SpeedTargets | None = None, *, command: str = "",
              echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Time every shape of a kernel-speed matrix and return its receipt (with the acceptance evaluated).

    Args:
        matrix: the kernel-speed matrix (shapes, backends, timing budgets, MATH limit).
        targets: the acceptance bars (default: the bundled current version).
        command: the command line recorded in the receipt.
        echo: progress printer, one line per shape (None: quiet).

    Returns:
        The receipt: ``schema``, ``command``, ``date``, ``environment``, ``matrix``,
        ``timing``, ``flop_convention``, ``math_limit_bytes``, ``prefill``, ``decode``,
        ``elapsed_s``, ``acceptance`` (seconds, FLOPs, bytes).

    Raises:
        IomodelError: no CUDA GPU, or TRITON_INTERPRET set.
    """
    import torch

    if not torch.cuda.is_available():
        raise IomodelError("the kernel-speed matrix times the compiled kernel on a CUDA GPU, and none is visible: "
                           "run it on a GPU")
    from kernels.flash_attention import INTERPRET

    if INTERPRET:
        raise IomodelError("TRITON_INTERPRET is set, so the kernel would run in the interpreter: unset it to benchmark")
    targets = targets or load_targets()
    say = echo or (lambda _: None)
    receipt: dict[str, Any] = {
        "schema": SPEED_SCHEMA,
        "command": command,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment("cuda"),
        "matrix": matrix.to_dict(),
        "timing": _timing_text(matrix),
        "flop_convention": FLOP_CONVENTION,
        "math_limit_bytes": matrix.math_limit_bytes,
        "prefill": [],
        "decode": [],
    }
    args = (matrix.backends, matrix.rounds, matrix.warmup_ms)
    t0 = time.time()
    for i, s in enumerate(matrix.prefill):
        e = bench_prefill_shape(s, *args, matrix.rep_ms, matrix.math_limit_bytes)
        torch.cuda.empty_cache()  # the shape's tensors died with the call
        receipt["prefill"].append(e)
        say(f"[prefill {i + 1}/{len(matrix.prefill)} {time.time() - t0:.0f}s] B={s.batch} N={s.seqlen} d={s.head_dim} "
            f"{s.dtype} causal={s.causal}: " + ", ".join(
                f"{k}={v['tflops']:.0f}" if v.get("status") == "ran" else f"{k}={v.get('status', '?').split(':')[0]}"
                for k, v in e["results"].items()) + " TFLOP/s")
    for i, s in enumerate(matrix.decode):
        e = bench_decode_shape(s, *args, matrix.decode_rep_ms, matrix.math_limit_bytes)
        torch.cuda.empty_cache()
        receipt["decode"].append(e)
        say(f"[decode {i + 1}/{len(matrix.decode)} {time.time() - t0:.0f}s] B={s.batch} KV={s.seqlen_k}: copy "
            f"{e['copy']['bandwidth_Bps'] / 1e9:.0f} GB/s, " + ", ".join(
                f"{k}={v['bandwidth_Bps'] / 1e9:.0f}" if v.get("status") == "ran"
                else f"{k}={v.get('status', '?').split(':')[0]}" for k, v in e["results"].items()) + " GB/s")
    receipt["elapsed_s"] = time.time() - t0
    receipt["acceptance"] = acceptance(receipt, targets)
    return receipt
