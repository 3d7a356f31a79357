"""Backend telemetry: which attention kernel actually ran, and why a fused one was refused.

PyTorch's ``scaled_dot_product_attention`` (SDPA) dispatches to one of several backends.
Pinning one with :func:`torch.nn.attention.sdpa_kernel` either runs it or raises
``RuntimeError("No available kernel...")`` after emitting one ``UserWarning`` per reason
the backend refused the inputs (``sdp_utils.cpp`` "debug" checks). This module

* identifies the SDPA backend that ran from the ATen ops of a profiler trace (the ops of
  each backend are in :data:`iomodel.bench.backends.SDPA_BACKENDS`, the one table),
* runs a call once under :mod:`torch.profiler` and reports the ATen ops, the device
  kernels (CUDA) and the peak bytes *allocated* during the call (:func:`profile_call`),
* runs a call with warnings captured and turns a refusal into its reasons
  (:func:`probe_call`).

Nothing here is timed: profiling and probing happen once per shape and backend, outside
the timed loops of :mod:`iomodel.bench.harness`.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from iomodel.bench.backends import SDPA_BACKENDS

_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?\s*$")


def clean_warning(message: str) -> str:
    """A PyTorch warning without its ``(Triggered internally at file:line.)`` suffix."""
    return _TRIGGERED.sub("", str(message)).strip()


def identify_backend(op_names: list[str] | set[str]) -> tuple[str | None, str | None]:
    """Which SDPA backend ran, from the ATen op names of a profiler trace.

    Args:
        op_names: names of the profiler's CPU-side events of one call.

    Returns:
        ``(backend, op)``: backend ``"sdpa-flash"``, ``"sdpa-efficient"``, ``"sdpa-cudnn"``
        or ``"sdpa-math"`` and the ATen op that identifies it; ``(None, None)`` when no SDPA
        implementation op is in the trace (e.g. a Triton kernel).
    """
    names = set(op_names)
    for backend, sdpa in SDPA_BACKENDS.items():
        for op in sdpa.ops:
            if op in names:
                return backend, op
    return None, None


@contextlib.contextmanager
def quiet_profiler_stderr() -> Iterator[None]:
    """Drop the ``USDT: ... profiler_start/stop`` lines some torch builds print on fd 2.

    Everything else written to file descriptor 2 while the block runs is written back.
    Does nothing where fd 2 cannot be duplicated.
    """
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().splitlines(keepends=True) if not ln.lstrip().startswith(b"USDT:")]
            if kept:
                os.write(2, b"".join(kept))


@dataclass
class CallTelemetry:
    """What one profiled call did.

    Attributes:
        ran: the SDPA backend identified from the ATen ops (None if no SDPA op ran).
        op: the ATen op that identified it (e.g. ``aten::_scaled_dot_product_flash_attention_for_cpu``).
        ops: distinct attention-related ATen op names seen, in first-seen order.
        kernels: distinct device kernel names (CUDA only), longest-running first.
        peak_allocated_bytes: peak bytes allocated during the call above what was
            allocated before it, in bytes (CUDA: caching-allocator statistics; CPU: the
            running sum of the profiler's allocation and free events). Allocation, not traffic.
        note: how the numbers were obtained, or why some are missing.
    """

    ran: str | None
    op: str | None
    ops: list[str]
    kernels: list[str] = field(default_factory=list)
    peak_allocated_bytes: int | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _interesting(name: str) -> bool:
    """Ops worth listing: attention implementations, and GQA K/V expansion copies."""
    low = name.lower()
    return "attention" in low or "sdpa" in low or "flash" in low or "repeat_interleave" in low


def profile_call(fn: Callable[[], Any], device: str) -> CallTelemetry:
    """Run ``fn`` once under :mod:`torch.profiler` and report which kernels ran and peak memory.

    Args:
        fn: a zero-argument callable that launches one attention call.
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        :class:`CallTelemetry`. On CUDA the peak comes from
        ``torch.cuda.max_memory_allocated`` in a separate, unprofiled call; on CPU from the
        profiler's memory events (``profile_memory=True``).

    Raises:
        Whatever ``fn`` raises (callers probe a call first with :func:`probe_call`).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    note = []
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with quiet_profiler_stderr():
        try:
            with profile(activities=activities, profile_memory=(device == "cpu")) as prof:
                fn()
                if device == "cuda":
                    torch.cuda.synchronize()
        except RuntimeError as exc:  # CUPTI unavailable: CPU-side ops still identify the backend
            if device != "cuda":
                raise
            note.append(f"CUDA activity not profiled ({str(exc).splitlines()[0][:120]})")
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                fn()
                torch.cuda.synchronize()
    ops: list[str] = []
    kernel_time: dict[str, float] = {}
    peak = None
    events = prof.events()
    for e in events:
        dev = str(getattr(e, "device_type", "")).upper()
        if "CUDA" in dev:
            kname = e.name if len(e.name) <= 160 else e.name[:157] + "..."
            kernel_time[kname] = kernel_time.get(kname, 0.0) + float(e.time_range.elapsed_us())
        elif e.name.startswith("aten::") and _interesting(e.name) and e.name not in ops:
            ops.append(e.name)
    all_ops = {e.name for e in events}
    if device == "cpu":
        mem = []
        try:
            for ev in prof.profiler.kineto_results.events():
                if ev.name() == "[memory]":
                    mem.append((ev.start_ns(), ev.nbytes()))
        except AttributeError:  # pragma: no cover - profiler internals changed
            note.append("no memory events from the profiler")
        if mem or not note:
            cur = top = 0
            for _, nbytes in sorted(mem):
                cur += nbytes
                top = max(top, cur)
            peak = int(top)
            note.append("peak allocated from profiler memory events")
    else:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        peak = int(torch.cuda.max_memory_allocated() - before)
        note.append("peak allocated from torch.cuda.max_memory_allocated")
    kernels = [k for k, _ in sorted(kernel_time.items(), key=lambda kv: -kv[1])]
    ran, op = identify_backend(all_ops)
    return CallTelemetry(ran=ran, op=op, ops=ops, kernels=kernels[:8], peak_allocated_bytes=peak,
                         note="; ".join(note))


@dataclass
class Probe:
    """The outcome of one call made with warnings captured.

    Attributes:
        output: the call's result (None if it raised).
        refused: True when the backend refused the inputs (``RuntimeError`` from SDPA's
            dispatcher, or the callable's own documented refusal).
        reasons: why the pinned backend refused: PyTorch's debug warnings for that backend
            (without their ``Triggered internally`` suffix), then the exception's first line.
        reasons_by_backend: the debug warnings grouped by the backend they explain (SDPA
            prints the reasons of every fused backend when none can run).
        warnings: every warning raised during the call, cleaned, deduplicated.
        error: the exception's ``Type: first line`` when the call failed for another reason
            (out of memory, a bug): an error, not a refusal.
    """

    output: Any
    refused: bool
    reasons: list[str]
    reasons_by_backend: dict[str, list[str]]
    warnings: list[str]
    error: str | None = None


#: Exception messages that mean "this backend does not take these inputs".
_REFUSAL_PATTERNS = ("No available kernel", "No viable backend")

_HEADER_RE = re.compile(r"^(.*?) kernel not used because:?$", re.IGNORECASE)


def group_reasons(messages: list[str]) -> dict[str, list[str]]:
    """Group SDPA debug warnings under the backend whose header precedes them.

    Args:
        messages: cleaned warning messages in emission order.

    Returns:
        ``{backend name: [reason, ...]}``; messages before any header go under ``"other"``.
    """
    out: dict[str, list[str]] = {}
    current = "other"
    for m in messages:
        h = _HEADER_RE.match(m.strip())
        if h:
            header = h.group(1).strip().lower()
            current = next((n for n, b in SDPA_BACKENDS.items() if b.header == header), header)
            out.setdefault(current, [])
            continue
        out.setdefault(current, []).append(m)
    return out


def probe_call(
    fn: Callable[[], Any],
    backend: str | None = None,
    refusal_types: tuple[type[BaseException], ...] = (),
) -> Probe:
    """Call ``fn`` once with warnings captured, classifying a failure as refusal or error.

    Args:
        fn: zero-argument callable (one attention call, or a training step returning a tuple).
        backend: the harness name of the pinned SDPA backend (selects which debug reasons
            are reported as ``reasons``); None for a non-SDPA callable.
        refusal_types: exception types that also mean a documented refusal (e.g. the
            Triton kernel's own input checks).

    Returns:
        :class:`Probe`. Out-of-memory and other exceptions (a compiler's resource error, a
        bug) are errors, not refusals; no exception propagates.
    """
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
            if any(getattr(t, "is_cuda", False) for t in (out if isinstance(out, tuple) else (out,))):
                torch.cuda.synchronize()  # an asynchronous kernel error surfaces here, inside the probe
            exc: BaseException | None = None
        except torch.OutOfMemoryError as e:  # not a refusal: the shape needs more memory
            out, exc = None, e
        except Exception as e:  # classified below: a refusal, or an error to report (never raised past here)
            out, exc = None, e
    msgs: list[str] = []
    for w in caught:
        m = clean_warning(str(w.message))
        if m and m not in msgs:
            msgs.append(m)
    grouped = group_reasons(msgs)
    if exc is None:
        return Probe(output=out, refused=False, reasons=[], reasons_by_backend=grouped, warnings=msgs)
    first = (str(exc).strip().splitlines() or [""])[0].strip()
    refused = not isinstance(exc, torch.OutOfMemoryError) and (
        any(p in first for p in _REFUSAL_PATTERNS) or isinstance(exc, refusal_types)
    )
    if refused:
        own = grouped.get(backend, []) if backend else []
        if not own:  # a non-SDPA callable, or reasons without a header: report them all
            own = [m for ms in grouped.values() for m in ms]
        return Probe(output=None, refused=True, reasons=own + [first], reasons_by_backend=grouped, warnings=msgs)
    return Probe(output=None, refused=False, reasons=[], reasons_by_backend=grouped, warnings=msgs,
                 error=f"{type(exc).__name__}: {first}")
