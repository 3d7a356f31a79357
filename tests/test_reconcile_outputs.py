"""Output paths, summary disclosure and plot coverage of ``iomodel reconcile`` / ``iomodel validate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.cli import main
from iomodel.report.reconcile_plot import _family, plot

RECEIPT = Path(__file__).resolve().parent.parent / "receipts" / "ncu-h200-holdout3-2026-11-29.json"
SWEEP = Path(__file__).resolve().parent.parent / "sweeps" / "interpreter.toml"


def _run(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    err = capsys.readouterr().err
    return e.value.code, err


@pytest.mark.parametrize("opt, path, words", [
    ("--plot-dir", "/proc/x", "--plot-dir"),
    ("--plot-dir", "/etc/passwd", "is a file"),
    ("--json", "/proc/x/r.json", "--json"),
    ("--markdown", "/proc/x/r.md", "--markdown"),
])
def test_reconcile_unwritable_outputs_are_one_line_errors(capsys, opt, path, words):
    code, err = _run(capsys, "reconcile", str(RECEIPT), opt, path)
    assert code == 2 and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_validate_checks_the_output_before_counting(capsys):
    code, err = _run(capsys, "validate", str(SWEEP), "--interpreter", "-o", "/proc/x/i.json")
    assert code == 2 and "--out" in err and "Traceback" not in err
    assert "counted" not in capsys.readouterr().out  # no shape was counted before the check


def test_summary_shows_relative_and_absolute_counts_and_markdown_labels_the_floor(reconciled_receipt):
    from iomodel.report.reconcile_md import markdown

    rec = reconciled_receipt(RECEIPT.name)
    s = {(e["impl"], e["level"], e["which"]): e for e in rec.summary()}
    tw = s[("tiled", "HBM", "write")]
    # recount by hand from the rows: relative alone vs relative or 1 MiB
    rows = [r for r in rec.rows if r.impl == "tiled" and r.level("HBM")]
    rel = sum(abs(r.level("HBM").predicted_write - r.level("HBM").measured_write)
              <= 0.10 * r.level("HBM").measured_write for r in rows)
    either = sum(abs(r.level("HBM").predicted_write - r.level("HBM").measured_write)
                 <= max(0.10 * r.level("HBM").measured_write, 1 << 20) for r in rows)
    assert (tw["within_rel"], tw["within"], tw["shapes"]) == (rel, either, len(rows))
    assert tw["within_rel"] < tw["within"]  # the absolute floor matters on this receipt
    assert tw["abs_tol_bytes"] == 1 << 20
    md = markdown(rec)
    assert "SRAM_fill ±0% or" not in md and "absolute floor 1.0 MiB" in md
    assert f"| tiled | HBM | write | {len(rows)} | ±10% | {rel}/{len(rows)} " in md
    d = rec.to_dict()["summary"]
    assert all("within_rel" in e and "abs_tol_bytes" in e for e in d)


def test_plot_shows_every_family_across_files(tmp_path, reconciled_receipt):
    import matplotlib.image as mpimg

    rec = reconciled_receipt(RECEIPT.name)
    fams = {_family(r) for r in rec.rows if r.level("HBM") is not None and r.error is None}
    paths = plot(rec, tmp_path, max_panels=12)
    names = [p.name for p in paths]
    n_hbm = -(-len(fams) // 12)
    assert names[:n_hbm] == ["hbm-vs-seqlen.png"] + [f"hbm-vs-seqlen-{i}.png" for i in range(2, n_hbm + 1)]
    assert len(fams) > 12 and n_hbm >= 2
    for p in paths:
        assert mpimg.imread(p).shape[0] > 100


def test_foreign_hardware_warns(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["reconcile", str(RECEIPT), "--hardware", "H100-SXM", "--impl", "baseline"])
    got = capsys.readouterr()
    assert "warning: predicting for --hardware H100-SXM" in got.err and "warning" not in got.out  # a diagnostic


def test_reconcile_l2_ways_option(capsys, tmp_path):
    """--l2-ways -1 is one clear line (exit 2); --l2-ways 0 is the fully associative LRU, whose
    JSON records l2_ways null and differs from the 24-way default on this receipt's DRAM writes."""
    code, err = _run(capsys, "reconcile", str(RECEIPT), "--l2-ways", "-1")
    assert code == 2 and "--l2-ways" in err and len(err.strip().splitlines()) == 1
    import json

    out = {}
    for ways in ("0", "24"):
        with pytest.raises(SystemExit) as e:
            main(["reconcile", str(RECEIPT), "--l2-ways", ways, "--json", str(tmp_path / f"w{ways}.json")])
        assert e.value.code in (0, None)
        out[ways] = json.loads((tmp_path / f"w{ways}.json").read_text())
    assert out["0"]["l2_ways"] is None and out["24"]["l2_ways"] == 24
    w = {k: sum(s["levels"][0]["predicted_write"] or 0 for s in v["shapes"] if s["impl"] == "tiled") for k, v in out.items()}
    assert w["0"] != w["24"]


@pytest.mark.parametrize("argv, words", [
    (["--l2-ways", "100000000"], "--l2-ways"),
    (["--tol-hbm", "nan"], "--tol-hbm"),
    (["--abs-tol", "-5"], "--abs-tol"),
    (["--abs-tol", "inf"], "--abs-tol"),
])
def test_reconcile_bad_numbers_are_one_line_errors(capsys, argv, words):
    code, err = _run(capsys, "reconcile", str(RECEIPT), *argv)
    assert code == 2 and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_reconcile_of_a_directory_says_so(capsys, tmp_path):
    code, err = _run(capsys, "reconcile", str(tmp_path))
    assert code == 2 and "is a folder" in err


def test_evict_probability_tends_to_the_fully_associative_step():
    """Many ways: ~0 below the capacity, ~1 above it (the log-space tail; the plain sum underflowed
    past lambda = 700 and returned 1 where the answer is 0); above MAX_L2_WAYS is refused."""
    from iomodel.errors import IomodelError
    from iomodel.cache.params import MAX_L2_WAYS, L2Params
    from iomodel.cache.set_assoc import evict_probability

    assert evict_probability(80, 100, 1000) < 1e-9 and evict_probability(120, 100, 1000) > 1 - 1e-8
    assert abs(evict_probability(100, 100, 4096) - 0.5) < 0.01  # the median of Poisson(A) is about A
    assert evict_probability(99, 100, 4096) < evict_probability(100, 100, 4096) < evict_probability(101, 100, 4096)
    with pytest.raises(IomodelError, match="4096"):
        L2Params(1 << 20, 4, ways=MAX_L2_WAYS + 1)


def test_the_hbm_plot_draws_a_training_step_s_own_prediction_and_keeps_passes_and_windows_apart():
    """A training step (and a ragged batch) is predicted at its measured length only: the plot's curve is that
    prediction (a fresh user saw only the measured points); a forward and a training step, or two windows, are never
    one family (window2's first panel joined a 6,144-token step with window 2047 to a 12,288-token forward)."""
    from pathlib import Path

    from iomodel.measure.records import Measurement
    from iomodel.reconcile import compare
    from iomodel.report import reconcile_plot as rp

    root = Path(__file__).resolve().parents[1] / "receipts"
    rec = compare.reconcile(Measurement.load(root / "ncu-h200-train-holdout2-2026-12-01.json"), jobs=1)
    r = next(x for x in rec.rows if x.error is None and x.spec.backward and x.level("HBM") is not None)
    hbm = r.level("HBM")
    assert rp._curve([r], rec, "HBM", compare.default_predict) == [
        (r.spec.seqlen_k, hbm.predicted_read, hbm.predicted_write, hbm.bound_read, hbm.floor_read)]
    assert "fwd+bwd" in rp._family_label(r)
    rec = compare.reconcile(Measurement.load(root / "ncu-h200-window2-2026-12-01.json"), jobs=1)
    fams: dict = {}
    for x in rec.rows:
        if x.error is None and x.level("HBM") is not None:
            fams.setdefault(rp._family(x), []).append(x)
    for members in fams.values():
        assert len({(m.spec.backward, m.spec.window_left, m.spec.window_right) for m in members}) == 1


def test_the_hbm_plot_draws_a_ragged_batch_s_prediction(tmp_path, monkeypatch):
    """A ragged batch's row has no L2 object but a predicted HBM level: its panel draws that prediction (a fresh
    user's second finding: every ragged panel showed the measured points alone)."""
    from pathlib import Path

    from iomodel.measure.records import Measurement
    from iomodel.reconcile import compare
    from iomodel.report import reconcile_plot as rp

    m = Measurement.load(Path(__file__).resolve().parents[1] / "receipts" / "ncu-h200-ragged1-2026-12-01.json")
    rec = compare.reconcile(m, jobs=1)
    drawn = []
    real = rp._curve
    monkeypatch.setattr(rp, "_curve", lambda members, *a: drawn.append((members, a[1])) or real(members, *a))
    rp.plot(rec, tmp_path / "p")
    hbm = [members for members, level in drawn if level == "HBM"]
    ragged = {s.id for s in m.shapes if s.seqlens is not None}
    assert ragged and ragged <= {r.id for members in hbm for r in members}
    for members in hbm:
        lv = members[0].level("HBM")
        assert real(members, rec, "HBM", compare.default_predict)[0][1:3] == (lv.predicted_read, lv.predicted_write)
