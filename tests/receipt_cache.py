"""The reconciliation of a committed receipt, computed once per test session (not once per test file or worker).

Several test files reconcile the same receipts/ncu-*.json with the default options (the windowed
ones take 10-20 s each), and pytest-xdist runs their tests on every worker. :class:`ReceiptReconciliations`
(the session fixture ``reconciled_receipt`` of conftest.py) computes each one in the first worker
that asks for it, under a per-receipt file lock, and pickles it into a folder of this session's base
temporary directory (new for every run, shared by its workers); a later request in any worker
unpickles it. Every request returns its own copy, so no test sees another's changes. Nothing
outlives the session: a change to the model is always measured by a fresh reconciliation.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from pathlib import Path

RECEIPTS = Path(__file__).resolve().parents[1] / "receipts"


class ReceiptReconciliations:
    def __init__(self, folder: Path | None):
        """``folder``: where this session's workers share the pickles; None without xdist (one process)."""
        self.folder = folder
        self._local: dict[str, bytes] = {}
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, name: str):
        """``reconcile(Measurement.load(receipts/<name>))``, a fresh copy per call."""
        if name not in self._local:
            self._local[name] = self._shared(name) if self.folder is not None else self._compute(name)
        return pickle.loads(self._local[name])

    @staticmethod
    def _compute(name: str) -> bytes:
        from iomodel.measure.records import Measurement
        from iomodel.reconcile import reconcile

        return pickle.dumps(reconcile(Measurement.load(RECEIPTS / name)), protocol=pickle.HIGHEST_PROTOCOL)

    def _shared(self, name: str) -> bytes:
        done = self.folder / f"{name}.pickle"
        with open(self.folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker computing it: wait for its pickle
            try:
                if done.exists():
                    return done.read_bytes()
                data = self._compute(name)
                tmp = done.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, done)
                return data
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def within_counts(rec, level, which, impl="tiled"):
    """(shapes within tolerance, shapes compared) of ``impl`` at ``level`` in one direction of a reconciliation:
    the counts the hold-out tests pin (a shape counts where the level was compared)."""
    rows = [r for r in rec.rows if r.impl == impl and r.level(level) is not None]
    return sum(bool(rec.within(r, level, which)) for r in rows), len(rows)
