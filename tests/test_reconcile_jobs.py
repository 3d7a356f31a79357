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


@pytest.mark.parametrize("jobs", [-1, 1.5, True, "2", None.__class__])
def test_bad_jobs_is_refused(jobs):
    m = Measurement.load(TRAIN)
    with pytest.raises(IomodelError, match="jobs must be 0"):
        compare.reconcile(m, jobs=jobs)


def test_a_short_record_is_not_forked_and_a_long_one_hands_on_the_rest(monkeypatch):
    """Automatic jobs: the shapes done within PARALLEL_AFTER_S stay in this process (lightest first); the rest go to
    the workers, heaviest first; the rows come back in the record's order either way."""
    m = Measurement.load(TRAIN)
    handed: list[list[int]] = []
    real = compare._in_processes

    def spy(job, order, workers):
        handed.append(list(order))
        return real(job, order, workers)

    monkeypatch.setattr(compare, "_in_processes", spy)
    monkeypatch.setattr(compare, "PARALLEL_AFTER_S", 1e9)
    one = compare.reconcile(m, jobs=1)
    _same(one, compare.reconcile(m))
    assert handed == []  # done within the time: no worker started
    if not compare._can_fork() or compare._cpus() < 2:
        return
    monkeypatch.setattr(compare, "PARALLEL_AFTER_S", 0.0)
    monkeypatch.setattr(compare, "_idle_cpus", compare._cpus)  # an idle host: every CPU a worker
    _same(one, compare.reconcile(m))
    assert len(handed) == 1 and sorted(handed[0]) == list(range(len(m.shapes)))  # no time here: all to the workers
    works = [compare._work(m.shapes[i].spec) for i in handed[0]]
    assert works == sorted(works, reverse=True)


def test_threads_reconciling_two_records_each_get_their_own():
    """No shared state between calls: two threads, each reconciling another record, get their own rows."""
    import threading

    recs = {"a": Measurement.load(TRAIN), "b": Measurement.load(ROOT / "receipts/ncu-h200-ragged1-2026-12-01.json")}
    got: dict[str, list[str]] = {}

    def run(key):
        got[key] = [r.id for r in compare.reconcile(recs[key], jobs=1).rows]

    threads = [threading.Thread(target=run, args=(k,)) for k in recs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {k: [s.id for s in m.shapes] for k, m in recs.items()}


def test_cli_refuses_negative_jobs(tmp_path, capsys):
    from iomodel.cli import main

    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        main(["reconcile", str(TRAIN), "--jobs", "-1", "--json", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and err[0].startswith("error: jobs must be 0"), err
    assert not out.exists()


def test_workers_are_capped_at_the_cpus_and_the_busy_ones_are_left_out(monkeypatch):
    m = Measurement.load(TRAIN)
    seen = []
    monkeypatch.setattr(compare, "_in_processes",
                        lambda job, order, workers: seen.append(workers) or {i: compare._reconcile_one(job, i)
                                                                             for i in order})
    monkeypatch.setattr(compare, "_can_fork", lambda: True)
    monkeypatch.setattr(compare, "_cpus", lambda: 4)
    compare.reconcile(m, jobs=1000)  # asked for 1000: one a CPU
    monkeypatch.setattr(compare, "PARALLEL_AFTER_S", 0.0)
    monkeypatch.setattr(compare, "_idle_cpus", lambda: 2)  # two of the four busy with other work
    compare.reconcile(m)
    monkeypatch.setattr(compare, "_idle_cpus", lambda: 1)  # every other CPU busy: one process, no pool
    compare.reconcile(m)
    assert seen == [4, 2]


def test_idle_cpus_leave_out_the_threads_running_beside_this_one(monkeypatch):
    """Three looks at /proc/loadavg's running threads (this one excluded), the least taken."""
    import builtins
    import io

    looks = iter(["0.1 0.1 0.1 3/120 9\n", "0.1 0.1 0.1 2/120 9\n", "0.1 0.1 0.1 4/120 9\n"])
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(next(looks)) if path == "/proc/loadavg"
                        else real_open(path, *a, **k))
    monkeypatch.setattr(compare, "_cpus", lambda: 4)
    assert compare._idle_cpus() == 3  # the least of 2, 1, 3 other running threads: one busy
