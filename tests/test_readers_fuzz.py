"""Random JSON values in the readers of measurement records, benchmark receipts and overlays (issue 10).

Each test takes a real committed file, puts a random JSON value (null, a boolean, a huge or
negative integer, NaN, infinity, a string, a list, an object) at a random place in it, or
removes a field, and asserts that the reader either refuses it with one :class:`IomodelError`
line or gives a correct result: never another exception. The config reader has its own
(tests/test_config_wild.py).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from iomodel.bench.receipt import check_receipt, receipt_from_json
from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile
from iomodel.report.plot import _check_measured
from iomodel.report.reconcile_md import markdown

RECEIPTS = Path(__file__).resolve().parent.parent / "receipts"

#: Any JSON value Python's json module can produce (NaN, Infinity and integers beyond float range included).
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.just(10**400)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=5)
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document: the key path of each container element."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.append(prefix + (k,))
        out += _paths(v, prefix + (k,))
    return out


def _mutate(doc: Any, path: tuple, value: Any, delete: bool) -> Any:
    out = copy.deepcopy(doc)
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def _one_line(exc: IomodelError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text, text


# ------------------------------------------------------------------------------ measurement records


def _record() -> dict:
    """The acceptance receipt cut to its first two shapes (reconciled in a few milliseconds)."""
    data = json.loads((RECEIPTS / "ncu-h200-holdout4-flush-2026-11-29.json").read_text())
    data["shapes"] = data["shapes"][:2]
    data["settings"]["ncu_commands"] = data["settings"]["ncu_commands"][:1]
    return data


RECORD = _record()
RECORD_PATHS = _paths(RECORD)
#: Mutations under these keys change the modelled layer or device: the record is read, but not
#: reconciled (the model's own bounds on work are tested elsewhere).
MODEL_INPUTS = ("spec", "config", "hardware")


@FUZZ
@given(where=st.sampled_from(RECORD_PATHS), value=VALUES, delete=st.booleans())
def test_measurement_reader_refuses_in_one_line_or_reconciles(where, value, delete):
    data = _mutate(RECORD, where, value, delete)
    try:
        meas = Measurement.from_dict(data)
    except IomodelError as exc:
        _one_line(exc)
        return
    for s in meas.shapes:  # what was read is what the reconciliation may rely on
        for k in s.kernels:
            assert all(v is None or (not isinstance(v, bool) and math.isfinite(v) and v >= 0) for v in k.metrics.values())
    if any(k in MODEL_INPUTS for k in where):
        return
    try:
        rec = reconcile(meas)
    except IomodelError as exc:
        _one_line(exc)
        return
    for e in rec.summary():
        assert 0 <= e["within"] <= e["shapes"] - e["not_reconciled"]
    listed = {(r.id, what) for r, what, _ in rec.not_reconciled()}
    for r in rec.rows:
        for lv in r.levels:
            for w in lv.missing:
                assert (r.id, f"{lv.level} {w}") in listed
    md = markdown(rec)
    assert "nan" not in md.lower().replace("nanosecond", "")


# ------------------------------------------------------------------------------ benchmark receipts


BENCH = json.loads((RECEIPTS / "bench-cpu.json").read_text())
SPEED = json.loads((RECEIPTS / "bench_kernel_h200.json").read_text())


def _check_bench(data: Any) -> None:
    try:
        violations = check_receipt(receipt_from_json(data))
    except IomodelError as exc:
        _one_line(exc)
        return
    assert isinstance(violations, list) and all(isinstance(v, str) and v for v in violations)


@FUZZ
@given(where=st.sampled_from(_paths(BENCH)), value=VALUES, delete=st.booleans())
def test_bucket_receipt_reader_refuses_in_one_line_or_checks(where, value, delete):
    _check_bench(_mutate(BENCH, where, value, delete))


@FUZZ
@given(where=st.sampled_from(_paths(SPEED)), value=VALUES, delete=st.booleans())
def test_kernel_speed_receipt_reader_refuses_in_one_line_or_checks(where, value, delete):
    _check_bench(_mutate(SPEED, where, value, delete))


# ------------------------------------------------------------------------------ overlay points


POINT = st.dictionaries(st.sampled_from(["seqlen", "bytes", "label", "level", "x"]), VALUES | st.integers(1, 10**6),
                        max_size=5)


@FUZZ
@given(points=st.lists(POINT, max_size=4) | VALUES)
def test_overlay_points_refused_in_one_line_or_all_drawable(points):
    try:
        out = _check_measured(points, ("seqlen",))
    except IomodelError as exc:
        _one_line(exc)
        return
    for m in out:  # each point can be drawn on log axes
        for k in ("seqlen", "bytes"):
            v = m[k]
            assert not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
        assert all(isinstance(m[k], str) for k in ("label", "level") if k in m)
