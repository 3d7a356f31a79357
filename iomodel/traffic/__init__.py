"""Symbolic byte-traffic models of attention, one module per algorithm.

* :mod:`~iomodel.traffic.baseline` — the eager chain (materialised scores), fwd and bwd.
* :mod:`~iomodel.traffic.tiled_fwd` — Q-stationary forward (FlashAttention-2, the bundled
  kernel) and K/V-stationary forward (FlashAttention-1 Algorithm 1).
* :mod:`~iomodel.traffic.tiled_bwd` — FlashAttention-2-order backward.
* :mod:`~iomodel.traffic.decode` — split-KV decode and its combine.
* :mod:`~iomodel.traffic.bounds` — compulsory bytes, FLOPs, lower-bound shape.
* :mod:`~iomodel.traffic.sums` / :mod:`~iomodel.traffic.compile` — exact tile sums and
  their compilation to Python and numpy.

Entry points: :func:`build_model` (symbolic), :func:`predict` (exact numbers),
:func:`sweep` (compiled, vectorized). See ``base`` for the shared structures.
"""

from iomodel.traffic.base import FIELD_SYMBOLS, LEVELS, SYM, AlgorithmModel, Allocation, Row
from iomodel.traffic.model import (
    DEFAULT_OPTIONS,
    QUANTITIES,
    AlgorithmPrediction,
    AllocationValue,
    Prediction,
    RowValue,
    TrafficModel,
    build_model,
    compile_sweep,
    predict,
    sweep,
    symbol_values,
)

__all__ = [
    "DEFAULT_OPTIONS",
    "FIELD_SYMBOLS",
    "LEVELS",
    "QUANTITIES",
    "SYM",
    "AlgorithmModel",
    "AlgorithmPrediction",
    "Allocation",
    "AllocationValue",
    "Prediction",
    "Row",
    "RowValue",
    "TrafficModel",
    "build_model",
    "compile_sweep",
    "predict",
    "sweep",
    "symbol_values",
]
