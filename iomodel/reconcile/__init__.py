"""Prediction against measurement, per shape, level and direction, with the cause of each gap.

``compare.py`` holds the comparison (its ``__all__`` is this package's API); it renders
nothing: the tables and the Markdown report are :mod:`iomodel.report.reconcile_md`, the plots
:mod:`iomodel.report.reconcile_plot`.
"""

from iomodel.reconcile import compare
from iomodel.reconcile.compare import *  # noqa: F403  (LevelCompare, Reconciliation, reconcile, ...)

__all__ = list(compare.__all__)
