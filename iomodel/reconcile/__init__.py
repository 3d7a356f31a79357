"""Prediction against measurement, per shape, level and direction, with the cause of each gap.

``compare.py`` holds the comparison (:func:`reconcile`, :func:`reconcile_shape`).
"""

from iomodel.reconcile.compare import Reconciliation, reconcile, reconcile_shape

__all__ = ["Reconciliation", "reconcile", "reconcile_shape"]
