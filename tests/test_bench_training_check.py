"""``iomodel bench --check`` on damaged training rows: one line (exit 2) or a named failure (exit 1).

Each case edits one field of the committed H200 receipt's training bucket
``train-causal-d64`` (its first shape, the baseline result or the eager chain) and runs the
check through the CLI: a value of the wrong type or out of range is refused with one line
naming bucket, shape, backend and field; a well-typed value that breaks the receipt's
arithmetic (a non-finite error, a stored limit that is not k x eager + eps) fails the
check naming the field. Never a PASS, never a traceback.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from iomodel.bench.backends import BASELINE
from iomodel.bench.policy import load_policy
from iomodel.cli import main

RECEIPT = Path(__file__).resolve().parent.parent / "receipts" / "bench-h200-v2.json"
BUCKET = "train-causal-d64"
LABEL = "B=8 Nq=2048 Nk=2048"
WHERE = f"bucket {BUCKET!r} shape {LABEL!r}"  # as the field check names it
WHERE_T = f"bucket {BUCKET!r} shape {LABEL}"  # as the policy check (check_training) names it
FIX = "re-run iomodel bench, or correct that value"


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(RECEIPT.read_text())


def _check(tmp_path, capsys, committed, edit) -> tuple[int, str, str]:
    """Run ``iomodel bench --check`` on the committed receipt after ``edit(bucket, shape)``."""
    r = copy.deepcopy(committed)
    b = next(b for b in r["buckets"] if b["name"] == BUCKET)
    s = b["shapes"][0]
    assert s["label"] == LABEL
    edit(b, s)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(r))  # json writes float NaN as the literal NaN, which json.loads reads back
    with pytest.raises(SystemExit) as e:
        main(["bench", "--check", str(p)])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err and "PASS" not in cap.out
    return e.value.code, cap.out, cap.err


def _refused(tmp_path, capsys, committed, edit) -> str:
    """The one line ``--check`` refuses the edited receipt with (exit 2), without the file prefix."""
    code, out, err = _check(tmp_path, capsys, committed, edit)
    assert code == 2, (code, out, err)
    line = err.strip()
    assert "\n" not in line and line.startswith(f"error: receipt '{tmp_path / 'r.json'}': "), line
    return line.split("': ", 1)[1]


def _failed(tmp_path, capsys, committed, edit) -> str:
    """The report of a check that fails (exit 1)."""
    code, out, err = _check(tmp_path, capsys, committed, edit)
    assert code == 1, (code, out, err)
    return " ".join((out + err).split())  # the console wraps long lines


def _base_dq(s) -> dict:
    return s["results"][BASELINE]["grad_error"]["dq"]


NUM = 'a number, 0 or more (or "inf" / "nan")'


@pytest.mark.parametrize("edit, line", [
    (lambda b, s: _base_dq(s).update(p99_abs=float("nan")),
     f"{WHERE} {BASELINE}: grad_error.dq.p99_abs must be {NUM}, got nan (not a finite number): {FIX}"),
    (lambda b, s: _base_dq(s).update(max_abs=float("nan"), p99_abs=float("nan")),
     f"{WHERE} {BASELINE}: grad_error.dq.max_abs must be {NUM}, got nan (not a finite number): {FIX}"),
    (lambda b, s: _base_dq(s).update(max_abs=-1.0),
     f"{WHERE} {BASELINE}: grad_error.dq.max_abs must be {NUM}, got -1.0: {FIX}"),
    (lambda b, s: _base_dq(s).update(max_abs="0.007"),
     f"{WHERE} {BASELINE}: grad_error.dq.max_abs must be {NUM}, got the string '0.007': {FIX}"),
    (lambda b, s: _base_dq(s).update(nonfinite=-2),
     f"{WHERE} {BASELINE}: grad_error.dq.nonfinite must be a whole number, 0 or more, got -2: {FIX}"),
    (lambda b, s: s["eager"]["grad_error"]["dk"].update(p99_abs=float("inf")),
     f"{WHERE} eager: grad_error.dk.p99_abs must be {NUM}, got inf (not a finite number): {FIX}"),
    (lambda b, s: s["eager"]["grad_error"]["dq"].update(max_abs=-1e9),
     f"{WHERE} eager: grad_error.dq.max_abs must be {NUM}, got -1000000000.0: {FIX}"),
    (lambda b, s: b.update({"pass": "bwd"}),
     f"bucket {BUCKET!r}: pass must be \"fwd\" or \"fwd+bwd\", got the string 'bwd': {FIX}"),
    (lambda b, s: b.pop("pass"),
     f"bucket {BUCKET!r} has no 'pass' field but holds training fields (eager, flops, grad_accuracy, grad_error, "
     f"speedup_vs_eager, tflops): pass must be \"fwd\" or \"fwd+bwd\": {FIX}"),
    (lambda b, s: s["results"][BASELINE].pop("grad_error"),
     f"{WHERE} {BASELINE} has no 'grad_error' field: {FIX}"),
    (lambda b, s: s["results"][BASELINE]["grad_error"].pop("dq"),
     f"{WHERE} {BASELINE}: grad_error has no 'dq' field: {FIX}"),
    (lambda b, s: s["results"][BASELINE].update(grad_error=[1, 2, 3]),
     f"{WHERE} {BASELINE}: grad_error must be a JSON object, got a JSON array: {FIX}"),
    (lambda b, s: s.update(eager="ok"),
     f"{WHERE} eager must be a JSON object or null, got the string 'ok': {FIX}"),
    (lambda b, s: s["eager"].update(samples_s=[0.0] * len(s["eager"]["samples_s"]),
                                    time_s={**s["eager"]["time_s"], "median": 0.0}),
     f"{WHERE} eager: samples_s[0] must be a positive finite number, got 0.0: {FIX}"),
    (lambda b, s: (s["eager"].pop("samples_s"), s["eager"]["time_s"].update(median=0)),
     f"{WHERE} eager: time_s.median must be a positive number of seconds, got 0: {FIX}"),
    (lambda b, s: s.update(flops=str(s["flops"])),
     f"{WHERE}: flops must be a positive whole number of FLOPs, got the string '240635609088': {FIX}"),
    (lambda b, s: s["results"][BASELINE].update(tflops=str(s["results"][BASELINE]["tflops"])),
     f"{WHERE} {BASELINE}: tflops must be a finite number, 0 or more, got the string "
     f"'{{tflops}}': {FIX}"),
    (lambda b, s: s["results"][BASELINE]["grad_accuracy"]["limits"]["dq"].update(max_abs="0.06"),
     f"{WHERE} {BASELINE}: grad_accuracy.limits.dq.max_abs must be a finite number, 0 or more, got the string "
     f"'0.06': {FIX}"),
    (lambda b, s: b.update(head_dim="64"),
     f"bucket {BUCKET!r}: head_dim must be a positive integer, got the string '64': {FIX}"),
])
def test_damaged_training_field_is_refused_in_one_line(tmp_path, capsys, committed, edit, line):
    tflops = next(b for b in committed["buckets"] if b["name"] == BUCKET)["shapes"][0]["results"][BASELINE]["tflops"]
    assert _refused(tmp_path, capsys, committed, edit) == line.replace("{tflops}", str(tflops))


def test_huge_eager_error_fails_on_the_stored_limits(tmp_path, capsys, committed):
    """A finite 1e9 eager dQ error is legal data, but every backend's stored dQ limit was k x the real one + eps."""
    tol = load_policy(2).grad_tol("bf16")
    s0 = next(b for b in committed["buckets"] if b["name"] == BUCKET)["shapes"][0]
    stored = s0["results"][BASELINE]["grad_accuracy"]["limits"]["dq"]["max_abs"]
    assert stored == pytest.approx(tol.limit(s0["eager"]["grad_error"]["dq"]["max_abs"]), rel=1e-12)
    report = _failed(tmp_path, capsys, committed, lambda b, s: s["eager"]["grad_error"]["dq"].update(max_abs=1e9))
    want = (f"{WHERE_T} {BASELINE}: stored grad_accuracy.limits.dq.max_abs {stored:.6g} differs from "
            f"{tol.limit(1e9):.6g}, {tol.k:g} x the eager chain's dq max_abs + {tol.eps:g} recomputed")
    assert want in report
    n_fail = sum(1 for r in s0["results"].values() if r["status"] == "ok")
    assert report.count("stored grad_accuracy.limits.dq.max_abs") == n_fail == 5  # every backend of that shape
    assert "limits.dq.p99_abs" not in report and "limits.dk" not in report  # only the edited field moved


def test_edited_stored_limit_fails(tmp_path, capsys, committed):
    """A stored limit raised by hand (so a drifting backend would pass) fails naming the field."""
    report = _failed(tmp_path, capsys, committed,
                     lambda b, s: s["results"][BASELINE]["grad_accuracy"]["limits"]["dv"].update(p99_abs=1.0))
    assert f"{WHERE_T} {BASELINE}: stored grad_accuracy.limits.dv.p99_abs 1 differs from " in report


@pytest.mark.parametrize("who", ["eager", BASELINE])
def test_nan_string_gradient_error_fails_naming_the_field(tmp_path, capsys, committed, who):
    """``"nan"`` (as json_safe writes a NaN) is well-typed but passes no comparison: the check fails on it."""
    def edit(b, s):
        r = s["eager"] if who == "eager" else s["results"][BASELINE]
        r["grad_error"]["dq"]["p99_abs"] = "nan"

    report = _failed(tmp_path, capsys, committed, edit)
    assert f"{WHERE_T} {who}: grad_error.dq.p99_abs is nan, not a finite error" in report


def test_committed_receipt_still_passes(tmp_path, capsys, committed):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(committed))
    with pytest.raises(SystemExit) as e:
        main(["bench", "--check", str(p)])
    assert e.value.code in (0, None) and "PASS" in capsys.readouterr().out
