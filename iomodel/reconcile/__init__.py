"""Prediction against measurement, per shape, level and direction, with the cause of each gap.

``compare.py`` holds the comparison; it renders nothing (the tables, the Markdown report and
the plots are in :mod:`iomodel.report.reconcile_md` and :mod:`iomodel.report.reconcile_plot`).
"""

from iomodel.reconcile.compare import (
    DEFAULT_ABS_TOL,
    DEFAULT_TOLERANCES,
    L2_SOURCES,
    LevelCompare,
    Reconciliation,
    ShapeReconciliation,
    foreign_write_bytes,
    foreign_write_notes,
    hardware_of,
    reconcile,
    reconcile_shape,
    scan_l2_fraction,
)

__all__ = [
    "DEFAULT_ABS_TOL",
    "DEFAULT_TOLERANCES",
    "L2_SOURCES",
    "LevelCompare",
    "Reconciliation",
    "ShapeReconciliation",
    "foreign_write_bytes",
    "foreign_write_notes",
    "hardware_of",
    "reconcile",
    "reconcile_shape",
    "scan_l2_fraction",
]
