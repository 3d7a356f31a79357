"""Timing: every backend of a shape timed interleaved, in a rotating order, on one clock.

Three methods, each recorded in the receipt that uses it:

* :func:`time_interleaved` (shape matrices, ``iomodel bench``): one call per sample. CUDA:
  device time between two ``torch.cuda.Event``s after zeroing an L2-sized buffer (cold L2)
  and a GPU spin of at least :data:`CUDA_SPIN_CYCLES` and at least twice the call's host
  enqueue time (:func:`spin_cycles_for`); CPU: ``time.perf_counter`` around the
  synchronous call, repeated inside a sample when one call is shorter than
  :data:`CPU_MIN_SAMPLE_S`.
* :func:`do_bench_interleaved` (kernel-speed prefill): each sample is
  ``triton.testing.do_bench``'s median (it zeroes a 256 MB buffer before every repetition).
* :func:`time_device_interleaved` (kernel-speed decode, kernels of ~10 us): CUDA events
  around each call after an L2 flush and a GPU spin calibrated against the host seconds
  per call (:func:`host_overhead_s`), so the host's launch time is not timed.

Every function takes ``name -> zero-argument callable`` and rotates the order each round
(``a b c``, ``b c a``, ``c a b``), so slow drift of clocks or temperature spreads over all
backends alike.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Iterator

#: CPU: a timed sample repeats the call until it lasts at least this long (seconds).
CPU_MIN_SAMPLE_S = 1e-3
#: CUDA: the least GPU clock cycles of ``torch.cuda._sleep`` before each sample's start event
#: (about 1 ms at 2 GHz): the host enqueues the start event, every kernel of the call and the
#: end event while the GPU spins, so a multi-kernel call is not charged for host launch gaps
#: and the samples are device time of the call's kernels. A call whose host enqueue time is
#: longer gets a longer spin (:func:`spin_cycles_for`): a bundled training step enqueues in
#: 0.9-1.3 ms on the H200 (receipts/train-host-probe-h200-2026-12-02.json), which this fixed
#: spin alone let leak into the 2k-token training rows of receipts/bench-h200-v4-fixed-spin.json.
CUDA_SPIN_CYCLES = 2_000_000
#: Bytes zeroed before each decode call to evict L2 (the H200's L2 is 50 MiB), as ``do_bench`` does.
FLUSH_BYTES = 256 * 2**20


def rotations(names: list[str], rounds: int) -> Iterator[list[str]]:
    """The order of each round: ``names`` rotated left by the round index."""
    for r in range(rounds):
        yield names[r % len(names):] + names[: r % len(names)] if names else []


def spread(samples: list[float]) -> dict[str, float]:
    """Median and spread of timing samples, in seconds.

    Returns:
        ``{"median", "p10", "p90", "iqr", "min", "max", "n"}``; percentiles by linear
        interpolation (``statistics.quantiles`` "inclusive" method).
    """
    s = sorted(samples)
    if len(s) == 1:
        return {"median": s[0], "p10": s[0], "p90": s[0], "iqr": 0.0, "min": s[0], "max": s[0], "n": 1}
    dec = statistics.quantiles(s, n=10, method="inclusive")
    qua = statistics.quantiles(s, n=4, method="inclusive")
    return {"median": statistics.median(s), "p10": dec[0], "p90": dec[-1], "iqr": qua[2] - qua[0],
            "min": s[0], "max": s[-1], "n": len(s)}


def time_interleaved(calls: dict[str, Callable[[], Any]], device: str, warmup: int, reps: int,
                     l2_flush_bytes: int = 0) -> dict[str, dict[str, Any]]:
    """Time several calls fairly: warm up each, then ``reps`` rounds in a rotating order.

    Args:
        calls: backend name -> zero-argument callable.
        device: ``"cpu"`` or ``"cuda"``.
        warmup: untimed calls per backend before timing.
        reps: timed samples per backend.
        l2_flush_bytes: CUDA only: bytes zeroed before each sample (0: no flush).

    Returns:
        ``{name: {"samples_s": [seconds per call, ...], "inner": calls per sample}}``.
    """
    import torch

    names = list(calls)
    inner = {n: 1 for n in names}
    for n in names:
        for _ in range(warmup):
            calls[n]()
        if device == "cuda":
            torch.cuda.synchronize()
        elif warmup:
            t0 = time.perf_counter()
            calls[n]()
            dt = time.perf_counter() - t0
            inner[n] = max(1, min(1000, math.ceil(CPU_MIN_SAMPLE_S / max(dt, 1e-9))))
    samples: dict[str, list[float]] = {n: [] for n in names}
    flush = None
    if device == "cuda" and l2_flush_bytes:
        flush = torch.empty(l2_flush_bytes, dtype=torch.int8, device="cuda")
    sleep = getattr(torch.cuda, "_sleep", None) if device == "cuda" else None
    spin = {n: CUDA_SPIN_CYCLES for n in names}
    if sleep is not None:
        rate = sleep_cycles_per_s()
        spin = {n: spin_cycles_for(calls[n], CUDA_SPIN_CYCLES, rate) for n in names}
    for order in rotations(names, reps):
        for n in order:
            fn = calls[n]
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if flush is not None:
                    flush.zero_()
                if sleep is not None:
                    sleep(spin[n])  # the GPU spins while the host enqueues the call: launch overhead untimed
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples[n].append(start.elapsed_time(end) / 1e3)
            else:
                k = inner[n]
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                samples[n].append((time.perf_counter() - t0) / k)
    del flush
    return {n: {"samples_s": samples[n], "inner": inner[n]} for n in names}


def do_bench_interleaved(fns: dict[str, Callable[[], Any]], rounds: int, warmup_ms: float,
                         rep_ms: float) -> dict[str, list[float]]:
    """Median seconds per call of each function, ``rounds`` times in a rotating order.

    Each sample is ``triton.testing.do_bench(fn, warmup_ms, rep_ms, return_mode="median")``
    (milliseconds of warm-up and of repetitions; L2 flushed before every repetition).

    Returns:
        name -> list of per-round median seconds.
    """
    import triton

    out: dict[str, list[float]] = {n: [] for n in fns}
    for order in rotations(list(fns), rounds):
        for n in order:
            ms = triton.testing.do_bench(fns[n], warmup=warmup_ms, rep=rep_ms, return_mode="median")
            out[n].append(ms / 1e3)
    return out


def time_device_interleaved(fns: dict[str, Callable[[], Any]], rounds: int, reps: int = 50,
                            flush_bytes: int = FLUSH_BYTES, spin_cycles: int = 200_000,
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
    cycles_per_s = sleep_cycles_per_s()
    spin = _spin(host_s, spin_cycles, cycles_per_s)
    if info is not None:
        info.update(spin_cycles=spin, spin_s=spin / cycles_per_s, host_s=host_s)
    for order in rotations(names, rounds):
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
            out[n].append(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) / 1e3)
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


def sleep_cycles_per_s(probe: int = 1_000_000) -> float:
    """Cycles per second of ``torch.cuda._sleep`` on the current GPU (one timed spin of ``probe`` cycles)."""
    import torch

    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(probe)
    b.record()
    torch.cuda.synchronize()
    return probe / max(a.elapsed_time(b) / 1e3, 1e-6)


def enqueue_seconds(fn: Callable[[], Any], calls: int = 5) -> float:
    """Host seconds to enqueue one call of ``fn`` with the GPU idle before it: the median of
    ``calls`` single calls, each after ``torch.cuda.synchronize`` (so a full launch queue never
    blocks the host and device time is not counted)."""
    import torch

    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(samples)


def spin_cycles_for(fn: Callable[[], Any], least: int, cycles_per_s: float) -> int:
    """GPU spin (cycles) that hides the host enqueue time of ``fn``: at least ``least`` and at
    least 2x :func:`enqueue_seconds` + 50 us at ``cycles_per_s`` (the rule of
    :func:`time_device_interleaved`)."""
    return _spin(enqueue_seconds(fn), least, cycles_per_s)


def _spin(host_s: float, least: int, cycles_per_s: float) -> int:
    """Spin cycles hiding ``host_s`` host seconds: at least ``least``, at least 2x + 50 us."""
    return max(int(least), int((2.0 * host_s + 50e-6) * cycles_per_s))

