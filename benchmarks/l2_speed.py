"""Speed of the L2-aware estimate (issue 12, item 4): per shape, and per hold-out receipt.

Run: ``python benchmarks/l2_speed.py [--max-log2 24] [--receipts FILE ...]``.

Part 1 prints, for seqlen 2^10 .. 2^max-log2 (Llama-3-8B-like layer: 32 query heads, MHA with
32 KV heads or GQA with 8, HEAD_DIM 128, bf16, H200; from 2^14 also the causal training step at 1.25 and 1.5 times
each power of two, where the dK/dV kernel's rules, which switch on its touches, can land otherwise), causal and not, forward
(:func:`iomodel.cache.estimate.estimate_tiled`) and forward + backward
(:func:`~iomodel.cache.estimate.estimate_training_step`), the estimate's wall time in ms (one run,
after a warm-up estimate of each layer structure that compiles the traffic model's formulas) and the minor page faults
it took, or why the worksheet does
not compute it (:func:`~iomodel.cache.estimate.not_estimated`). The target is at most 50 ms per
shape. The streaming kernels are evaluated fast (:mod:`iomodel.cache.stream`); a causal dK/dV
kernel is taken in closed form where :func:`~iomodel.cache.estimate.dkdv_closed_form_applies` (long sequences
past :data:`~iomodel.cache.estimate.L2_DKDV_CLOSED_FORM_MIN_TOUCHES` touches; since 2026-12-06 MHA and the GQA steps whose
dK/dV reads are not a prediction past :data:`~iomodel.cache.estimate.L2_DKDV_ANY_LENGTH_MIN_TOUCHES` touches from 16k-32k
query rows: this layer's MHA from about 22k tokens, its GQA from 2^15;
:mod:`iomodel.cache.dkdv_closed`; docs/l2-calibration.md, "The causal dK/dV kernel in closed form", "The previous
wave's copy" and "Faster") and touch by touch elsewhere, up to :data:`~iomodel.cache.estimate.L2_CAUSAL_DKDV_MAX_TOUCHES`
touches. The Q-stationary kernels (the forward, ``_bwd_dq``) run every head's processed waves in one engine call
(:func:`iomodel.cache.stream._drive_segments`).

Part 2 reconciles each receipt (:func:`iomodel.reconcile.compare.reconcile`) cold in a fresh Python process (the
traffic model's sympy formulas compiled on first use), in one process (``jobs=1``) and as ``iomodel reconcile`` does
by default (``jobs`` automatic: this process first, the rest over one process per CPU once the record has taken
:data:`~iomodel.reconcile.compare.PARALLEL_AFTER_S`), one after the other in this run, and prints
their ratio; then in this process, warm (compiled formulas cached, one process), with the part of that time spent in
the L2 model (:mod:`iomodel.cache.predict`). The target is under 5 s for a 30-shape receipt on a 2-core CPU. Times
are wall-clock seconds; other load on the machine adds to them. The default receipts are the two the benchmark
started with (33 and 44 shapes) and the two heaviest training hold-outs per shape (32 and 48 shapes).

As the ``iomodel`` command does, the benchmark first keeps freed heap memory mapped
(:func:`iomodel.cache.heap.keep_freed_memory`: the long estimates' temporaries of about 1 MiB then reuse the heap
instead of paging it in again); ``--heap default`` leaves glibc's allocator as it is (the times a library caller
gets without that call). The first line says which.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import iomodel.reconcile.compare as compare
from iomodel.paths import exit_code_of, one_line_parser
from iomodel.cache.estimate import estimate_tiled, estimate_training_step, not_estimated
from iomodel.cache.heap import keep_freed_memory
from iomodel.measure.records import Measurement
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware

ROOT = Path(__file__).resolve().parents[1]
RECEIPTS = ("receipts/ncu-h200-holdout4-2026-11-29.json", "receipts/ncu-h200-train-holdout1-2026-12-01.json",
            "receipts/ncu-h200-train-holdout9-2026-12-05.json", "receipts/ncu-h200-train-holdout11-2026-12-05.json")
#: One cold reconcile in a fresh process: keeps freed memory mapped as the iomodel command does (``{heap}``), loads
#: the record and prints the seconds reconcile took with ``jobs={jobs}``.
_COLD = ("import sys, time\n"
         "from iomodel.cache.heap import keep_freed_memory\n"
         "if {heap}: keep_freed_memory()\n"
         "from iomodel.measure.records import Measurement\n"
         "from iomodel.reconcile.compare import reconcile\n"
         "m = Measurement.load(sys.argv[1])\n"
         "t0 = time.perf_counter()\n"
         "reconcile(m, jobs={jobs})\n"
         "print(time.perf_counter() - t0)\n")



def _estimate_ms(spec: LayerSpec, tiling: Tiling) -> str:
    """The estimate's wall time in ms (one run) and the minor page faults it took (``getrusage``; each pages in 4 KiB
    the process had not mapped, or had given back), or the worksheet's reason for skipping it."""
    from kernels.heuristics import layer_backward_config

    why = not_estimated(spec, tiling)
    if why is not None:
        return "skipped: " + why
    hw = get_hardware("H200")
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    if spec.backward:
        estimate_training_step(spec, tiling, hw, flops=1, peak_flops=1.0, num_warps=4, tile_order="forward",
                               backward=layer_backward_config(spec, hw), config_source="bench")
    else:
        estimate_tiled(spec, tiling, hw, flops=1, peak_flops=1.0, num_warps=4, tile_order="forward",
                       config_source="bench")
    ms = (time.perf_counter() - t0) * 1e3
    return f"{ms:12.1f} {resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults:>7}"


def _cold_seconds(path: Path, jobs: int | None, heap: bool) -> float:
    """Seconds of one cold :func:`~iomodel.reconcile.compare.reconcile` of ``path`` in a fresh Python process."""
    import subprocess
    import sys

    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    res = subprocess.run([sys.executable, "-c", _COLD.format(jobs=jobs, heap=heap), str(path)], capture_output=True,
                         text=True, cwd=ROOT, env=env, check=False)
    if res.returncode:
        last = (res.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"error: the cold reconcile of {path.name} failed: {last}")
    return float(res.stdout.split()[-1])


def _reconcile_times(path: Path) -> tuple[int, float, float]:
    """(shapes, warm s, L2-model s of the warm run) of one receipt, in this process, one process."""
    m = Measurement.load(path)
    spent = [0.0]

    def timed(fn):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0
        return run

    compare.reconcile(m, jobs=1)  # compiles the formulas this record needs
    saved = {n: getattr(compare, n) for n in ("predict_tiled", "predict_training_step", "predict_baseline")}
    for n, fn in saved.items():
        setattr(compare, n, timed(fn))
    try:
        t0 = time.perf_counter()
        compare.reconcile(m, jobs=1)  # one process: the L2 model's time is counted in this one
        warm = time.perf_counter() - t0
    finally:
        for n, fn in saved.items():
            setattr(compare, n, fn)
    return len(m.select(None)), warm, spent[0]


def main() -> None:
    ap = one_line_parser(__doc__.splitlines()[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("--max-log2", type=int, default=24, help="longest seqlen, as a power of two (10..24)")
    ap.add_argument("--receipts", nargs="*", default=list(RECEIPTS), help="receipts to reconcile")
    ap.add_argument("--heap", choices=("kept", "default"), default="kept",
                    help="kept: freed heap memory stays mapped, as the iomodel command sets it (default); "
                         "default: glibc's allocator as it is")
    args = ap.parse_args()
    if not 10 <= args.max_log2 <= 24:
        ap.error(f"--max-log2 must be from 10 to 24 (seqlen 2^10 .. 2^24), got {args.max_log2}")
    for r in args.receipts:  # every receipt readable before any line is printed
        if exit_code_of(lambda: Measurement.load(ROOT / r)):
            raise SystemExit(2)
    kept = args.heap == "kept" and keep_freed_memory()
    print(f"heap: {'freed memory kept mapped (iomodel.cache.heap)' if kept else 'the allocator as it is'}"
          + (" (glibc's mallopt not found)" if args.heap == "kept" and not kept else ""))
    for kv in (32, 8):  # warm-up: compiles the traffic model's formulas of each structure once
        for causal in (False, True):
            for backward in (False, True):
                _estimate_ms(LayerSpec(1, 32, kv, 128, 1024, 1024, dtype="bf16", causal=causal, backward=backward),
                             Tiling())
    print(f"{'seqlen':>9} {'kv':>3} {'causal':>6} {'pass':>8} {'estimate ms':>12} {'faults':>7}")
    for log2 in range(10, args.max_log2 + 1):
        for kv in (32, 8):
            for causal in (False, True):
                for backward in (False, True):
                    spec = LayerSpec(1, 32, kv, 128, 2**log2, 2**log2, dtype="bf16", causal=causal, backward=backward)
                    print(f"{2**log2:>9} {kv:>3} {str(causal):>6} {spec.passes:>8} {_estimate_ms(spec, Tiling())}",
                          flush=True)
        if 14 <= log2 < args.max_log2:  # the causal training step between powers of two (its rules switch on touches)
            for n in (5 * 2**log2 // 4, 3 * 2**log2 // 2):
                for kv in (32, 8):
                    spec = LayerSpec(1, 32, kv, 128, n, n, dtype="bf16", causal=True, backward=True)
                    print(f"{n:>9} {kv:>3} {'True':>6} {spec.passes:>8} {_estimate_ms(spec, Tiling())}", flush=True)
    if not args.receipts:
        print("\nno receipt named (--receipts with no file): part 2 skipped")
        return
    print(f"\n{'receipt':<52} {'shapes':>6} {'cold 1 proc s':>13} {'cold default s':>14} {'ratio':>6} "
          f"{'warm 1 proc s':>13} {'L2 s':>6}")
    for r in args.receipts:
        path = ROOT / r
        one = _cold_seconds(path, 1, kept)
        default = _cold_seconds(path, None, kept)
        n, warm, l2 = _reconcile_times(path)
        print(f"{Path(r).name:<52} {n:>6} {one:>13.2f} {default:>14.2f} {default / one:>6.2f} "
              f"{warm:>13.2f} {l2:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
