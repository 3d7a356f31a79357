"""The one benchmark harness: shape matrices and policies as data, one backend dispatcher, one receipt writer.

Typical use::

    from iomodel.bench import load_matrix, load_policy, run_bench, write_receipt, check_receipt
    receipt = run_bench(load_matrix("cpu"), "cpu", load_policy())
    write_receipt(receipt, "receipts/bench-cpu.json")   # and bench-cpu.md beside it
    assert not check_receipt(receipt)

    from iomodel.bench import load_targets, run_speed    # on a CUDA GPU
    receipt = run_speed(load_matrix("kernel-speed"), load_targets())

Modules: :mod:`~iomodel.bench.matrix` (versioned TOML shape matrices: bucket matrices and
kernel-speed grids), :mod:`~iomodel.bench.policy` (tolerances, speedups and kernel-speed
targets as data, error arithmetic), :mod:`~iomodel.bench.inputs` (seeded tensors, float64
reference), :mod:`~iomodel.bench.backends` (the SDPA backend table and the one dispatcher,
:func:`~iomodel.bench.backends.attention_call`), :mod:`~iomodel.bench.telemetry` (which
backend ran, refusal reasons), :mod:`~iomodel.bench.timing` (interleaved timing),
:mod:`~iomodel.bench.environment` (what it ran on), :mod:`~iomodel.bench.harness` (a bucket
matrix against the accuracy and speedup policy), :mod:`~iomodel.bench.speed` (the kernel
against every SDPA backend: TFLOP/s, decode bandwidth, acceptance),
:mod:`~iomodel.bench.downstream` (logits of a small attention block),
:mod:`~iomodel.bench.receipt` (end-to-end estimate, policy check, JSON and Markdown of both
kinds). Importing this package does not import torch.
"""

from iomodel.bench.harness import run_bench
from iomodel.bench.matrix import Bucket, Shape, ShapeMatrix, SpeedMatrix, load_matrix, parse_matrix
from iomodel.bench.policy import Policy, SpeedTargets, accuracy_verdict, error_stats, load_policy, load_targets
from iomodel.bench.receipt import check_receipt, end_to_end, load_receipt, render_markdown, write_receipt
from iomodel.bench.speed import acceptance, run_speed

__all__ = [
    "Bucket",
    "Policy",
    "Shape",
    "ShapeMatrix",
    "SpeedMatrix",
    "SpeedTargets",
    "acceptance",
    "accuracy_verdict",
    "check_receipt",
    "end_to_end",
    "error_stats",
    "load_matrix",
    "load_policy",
    "load_receipt",
    "load_targets",
    "parse_matrix",
    "render_markdown",
    "run_bench",
    "run_speed",
    "write_receipt",
]
