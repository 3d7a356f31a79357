"""A fresh-user probe of issue 10, input by input: each damaged file is refused in one line
(exit 2) or fails the check naming the field (exit 1), never passes or shows a traceback."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.test_cli_errors import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
BENCH_CPU = json.loads((ROOT / "receipts" / "bench-cpu.json").read_text())
FIRST = "prefill-causal-gqa"  # the first bucket of bench-cpu.json (and the workload's prefill bucket)


def _result(r: dict, backend: str) -> dict:
    """The first shape's result of ``backend`` in the first bucket."""
    return r["buckets"][0]["shapes"][0]["results"][backend]


def _check(tmp_path, capsys, edit):
    r = copy.deepcopy(BENCH_CPU)
    edit(r)
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(r))
    return p, run_cli(capsys, ["bench", "--check", str(p)])


# ----- bench --check: every field it reads is type-checked (exit 2, one line) -----

@pytest.mark.parametrize("edit, needles", [
    (lambda r: _result(r, "sdpa-math").__setitem__("peak_allocated_bytes", -1),
     ["sdpa-math: peak_allocated_bytes must be a whole number of bytes", "got -1"]),
    (lambda r: _result(r, "sdpa-math").__setitem__("peak_allocated_bytes", "7MB"),
     ["sdpa-math: peak_allocated_bytes must be a whole number of bytes", "the string '7MB'"]),
    (lambda r: _result(r, "sdpa-flash")["accuracy"].__setitem__("pass", "yes"),
     ["sdpa-flash: accuracy.pass must be true or false", "the string 'yes'"]),
    (lambda r: r["buckets"][1].__setitem__("weight", -5),
     ["bucket 'prefill-fp32-mha': weight must be a positive number", "got -5"]),
    (lambda r: r.__setitem__("buckets", []), ["buckets is empty, a receipt holds at least one bucket"]),
    (lambda r: r["buckets"][1].__setitem__("name", FIRST), ["buckets[1] repeats the bucket name 'prefill-causal-gqa'"]),
    (lambda r: r["buckets"].pop(0),
     ["matrix.workload.prefill_bucket names bucket 'prefill-causal-gqa', which is not among the receipt's buckets"]),
    (lambda r: r["verdict"].__setitem__("pass", "true"), ["verdict.pass must be true or false", "the string 'true'"]),
])
def test_bench_check_refuses_a_damaged_field_in_one_line(tmp_path, capsys, edit, needles):
    r = copy.deepcopy(BENCH_CPU)
    edit(r)
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(r))
    line = assert_one_line_error(capsys, ["bench", "--check", str(p)], *needles)
    assert "KeyError" not in line


def test_the_committed_cpu_receipt_passes(capsys):
    code, out, _ = run_cli(capsys, ["bench", "--check", str(ROOT / "receipts" / "bench-cpu.json")])
    assert code == 0 and "PASS under policy v1" in out


# ----- bench --check: stored booleans that disagree with the recomputation fail (exit 1) -----

def test_a_stored_verdict_false_that_the_numbers_contradict_fails(tmp_path, capsys):
    _, (code, out, _) = _check(tmp_path, capsys, lambda r: r["verdict"].__setitem__("pass", False))
    assert code == 1
    assert "(1 violations)" in out
    assert "verdict.pass: the receipt states false, but the recomputation finds no policy violation under policy v1" in out


def test_a_stored_accuracy_false_that_the_errors_contradict_fails(tmp_path, capsys):
    _, (code, out, _) = _check(tmp_path, capsys, lambda r: _result(r, "sdpa-flash")["accuracy"].__setitem__("pass", False))
    assert code == 1
    label = BENCH_CPU["buckets"][0]["shapes"][0]["label"]
    assert (f"bucket '{FIRST}' shape {label} sdpa-flash: stored accuracy.pass false differs from true, recomputed "
            "from the error statistics under the policy's tolerance") in out
    assert "(1 violations)" in out  # the stored verdict true agrees with the policy check: not a second line


def test_a_stored_drift_pass_false_fails(tmp_path, capsys):
    _, (code, out, _) = _check(tmp_path, capsys, lambda r: r["buckets"][0]["summary"]["backends"]["sdpa-flash"]
                               .__setitem__("drift_pass", False))
    assert code == 1
    assert f"bucket '{FIRST}' sdpa-flash: stored summary drift_pass false differs from true" in out


# ----- plot --measured: points off the grid, unknown levels and undrawn kinds are refused -----

@pytest.mark.parametrize("points, kind, needles", [
    ({"blocks": [{"block_m": 100, "block_n": 128, "bytes": 1e9}]}, "blocks",
     ["blocks: measured point 0: block_m = 100 is not on the drawn grid (block_m 16, 32, 64, 128, 256)"]),
    ({"blocks": [{"block_m": 64, "block_n": 48, "bytes": 1e9}]}, "blocks",
     ["blocks: measured point 0: block_n = 48 is not on the drawn grid (block_n 16, 32, 64, 128, 256)"]),
    ({"seqlen": [{"seqlen": 1024, "bytes": 1e9, "level": "L3"}]}, "seqlen",
     ["seqlen: measured point 0: level 'L3' is not a measurement level the plots know: "
      "use one of HBM, DRAM, L2, SRAM_fill, SRAM"]),
    # points of a kind that is not drawn are checked all the same
    ({"blocks": [{"block_m": 100, "block_n": 128, "bytes": 1e9}]}, "seqlen",
     ["blocks: measured point 0: block_m = 100 is not on the drawn grid"]),
    ({"seqlen": [{"seqlen": 1024, "bytes": 1e9}], "sram": [{"sram_bytes": 0, "bytes": 1e9}]}, "seqlen",
     ["sram: measured point 0: 'sram_bytes' must be a positive finite number", "got 0"]),
])
def test_plot_overlay_refused_in_one_line_and_nothing_written(tmp_path, capsys, points, kind, needles):
    m = tmp_path / "m.json"
    m.write_text(json.dumps(points))
    out = tmp_path / "plots"
    assert_one_line_error(capsys, ["plot", "-o", str(out), "--kind", kind, "--measured", str(m)], *needles)
    assert not out.exists() or not any(out.iterdir())


def test_a_point_on_the_grid_is_drawn(tmp_path, capsys):
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"blocks": [{"block_m": 64, "block_n": 128, "bytes": 1e9, "level": "L2"}]}))
    code, out, _ = run_cli(capsys, ["plot", "-o", str(tmp_path), "--kind", "blocks", "--measured", str(m)])
    assert code == 0 and (tmp_path / "bytes_vs_blocks.png").stat().st_size > 0


# ----- reconcile: a record of an unknown kind is refused -----

def test_reconcile_refuses_an_unknown_record_kind(tmp_path, capsys):
    rec = json.loads((ROOT / "receipts" / "ncu-h200-2026-11-29.json").read_text())
    rec["kind"] = "nsys"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    assert_one_line_error(capsys, ["reconcile", str(p)],
                          f"measurement file {str(p)!r}: kind 'nsys' is not a kind of measurement iomodel writes: "
                          "use 'ncu' or 'interpreter'")
