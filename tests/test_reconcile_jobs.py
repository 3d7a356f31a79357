"""Reconciling a record's shapes in several processes (issue 12 item 4: a 30-shape receipt in under 5 s on a
2-core CPU) gives every number, note and label of the one-process loop, and refuses a bad ``jobs``."""

from __future__ import annotations

import multiprocessing
import pickle
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement
from iomodel.reconcile import compare

ROOT = Path(__file__).resolve().parents[1]
#: 12 training steps, 7 of them outside tolerance at HBM (so the replacement-policy band runs in the workers too).
TRAIN = ROOT / "receipts/ncu-h200-train-split1-2026-12-01.json"

needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")


def _same(a: compare.Reconciliation, b: compare.Reconciliation) -> None:
    assert [r.id for r in a.rows] == [r.id for r in b.rows]
    for x, y in zip(a.rows, b.rows):
        assert asdict(x) == asdict(y), x.id  # every level's bytes, the L2 prediction per kernel, notes, labels


@needs_fork
def test_two_processes_give_the_one_process_numbers():
    m = Measurement.load(TRAIN)
    one = compare.reconcile(m, jobs=1)
    two = compare.reconcile(m, jobs=2)
    _same(one, two)
    # the band ran in the workers: its note is there, on the rows outside tolerance at HBM
    bands = [r.id for r in two.rows if any(n.startswith("replacement-policy band:") for n in r.notes)]
    assert len(bands) == 7
    assert two.summary() == one.summary()


@needs_fork
def test_workers_inherit_an_unpicklable_predict_fn():
    """The workers are forked: a closure (which does not pickle) passed as predict_fn is the one they call."""
    m = Measurement.load(TRAIN)
    m = replace(m, shapes=m.shapes[:3])
    seen = []

    def predict(*a, **k):  # a closure: pickle refuses it
        seen.append(1)
        return compare.default_predict(*a, **k)

    with pytest.raises(Exception):
        pickle.dumps(predict)
    two = compare.reconcile(m, jobs=2, predict_fn=predict)
    _same(compare.reconcile(m, jobs=1), two)
    assert seen == []  # called in the workers only, not in this process
    compare.reconcile(m, jobs=1, predict_fn=predict)
    assert len(seen) >= 3


@pytest.mark.parametrize("jobs", [-1, 1.5, True, "2"])
def test_bad_jobs_is_refused(jobs):
    m = Measurement.load(TRAIN)
    with pytest.raises(IomodelError, match="jobs must be 0"):
        compare.reconcile(m, jobs=jobs)


def test_worker_count():
    cpus = compare._workers(10**6, 0)
    assert cpus >= 1
    assert compare._workers(3, 8) == 3  # never more workers than shapes
    assert compare._workers(compare.PARALLEL_MIN_SHAPES - 1, None) == 1  # a few shapes: one process
    assert compare._workers(compare.PARALLEL_MIN_SHAPES, None) == min(cpus, compare.PARALLEL_MIN_SHAPES)
    assert compare._workers(40, 1) == 1


def test_cli_refuses_negative_jobs(tmp_path, capsys):
    from iomodel.cli import main

    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        main(["reconcile", str(TRAIN), "--jobs", "-1", "--json", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and err[0].startswith("error: --jobs must be 0"), err
    assert not out.exists()
