"""The fused-versus-baseline attention benchmark: shape matrices, tolerance policy, harness, receipts.

Typical use::

    from iomodel.bench import load_matrix, load_policy, run_bench, write_receipt, check_receipt
    receipt = run_bench(load_matrix("cpu"), "cpu", load_policy())
    write_receipt(receipt, "receipts/bench-cpu.json")   # and bench-cpu.md beside it
    assert not check_receipt(receipt)

Modules: :mod:`~iomodel.bench.matrix` (versioned TOML shape matrices),
:mod:`~iomodel.bench.policy` (tolerances and speedups as data, error arithmetic),
:mod:`~iomodel.bench.inputs` (seeded tensors, float64 reference),
:mod:`~iomodel.bench.backends` (SDPA backends and the Triton kernel),
:mod:`~iomodel.bench.harness` (timing, telemetry), :mod:`~iomodel.bench.downstream`
(logits of a small attention block), :mod:`~iomodel.bench.receipt` (end-to-end estimate,
policy check, JSON and Markdown). Backend telemetry lives in :mod:`iomodel.measure.sdpa`.
Importing this package does not import torch.
"""

from iomodel.bench.harness import run_bench
from iomodel.bench.matrix import Bucket, Shape, ShapeMatrix, load_matrix, parse_matrix
from iomodel.bench.policy import Policy, accuracy_verdict, error_stats, load_policy
from iomodel.bench.receipt import check_receipt, end_to_end, load_receipt, render_markdown, write_receipt

__all__ = [
    "Bucket",
    "Policy",
    "Shape",
    "ShapeMatrix",
    "accuracy_verdict",
    "check_receipt",
    "end_to_end",
    "error_stats",
    "load_matrix",
    "load_policy",
    "load_receipt",
    "parse_matrix",
    "render_markdown",
    "run_bench",
    "write_receipt",
]
