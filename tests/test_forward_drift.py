"""Programs that drift apart (docs/l2-calibration.md, "Programs that drift apart"): the forward's ``not a prediction``
read label (iomodel.cache.predict.forward_drift_quality) and the CPU simulation it rests on (benchmarks/drift_sim.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from iomodel.cache.params import FWD_DRIFT_KV_HEAD, FWD_DRIFT_RATIO, FWD_DRIFT_RUNS, L2Params
import iomodel.cache.predict as predict_mod
from iomodel.cache.predict import drift_kv_bytes, forward_drift_quality, predict_tiled
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware

_MiB = 2**20


def _read_capacity(preset: str) -> float:
    return L2Params.of(get_hardware(preset), 1).for_forward().read_capacity


def test_drift_bytes_by_hand():
    # the longest tile's key range: N_k rows (square), N_q rows (top-left, N_q < N_k), N_k rows (bottom-right)
    assert drift_kv_bytes(LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True)) == 2 * 132608 * 128 * 2
    assert drift_kv_bytes(LayerSpec(1, 16, 16, 128, 8192, 132608, dtype="bf16", causal=True)) == 2 * 8192 * 128 * 2
    assert drift_kv_bytes(LayerSpec(1, 32, 4, 128, 256, 100000, dtype="bf16", causal=True,
                                    causal_align="bottom-right")) == 2 * 100000 * 128 * 2
    assert drift_kv_bytes(LayerSpec(1, 8, 8, 64, 9000, 5000, dtype="fp16", causal=True,
                                    causal_align="bottom-right")) == 2 * 5000 * 64 * 2


_SQUARE = LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True)
_PROGRAMS = 16 * 1036  # 132,608 / 128 query tiles a head


def test_the_h200_read_capacity_and_the_threshold():
    cap = _read_capacity("H200")
    assert cap == int(0.5188 * 60 * _MiB) == 32640073  # bytes (31.13 MiB)
    # 1.4 x 31.13 MiB = 43.58 MiB of K+V of a head: 89,250 tokens at HEAD_DIM 128, bf16 (2 * N * 128 * 2 bytes)
    n_edge = int(FWD_DRIFT_KV_HEAD * cap) // (2 * 128 * 2)
    assert n_edge == 89250
    for n, want in ((n_edge - 1, None), (n_edge + 1, "not a prediction")):
        spec = LayerSpec(1, 16, 16, 128, n, n, dtype="bf16", causal=True)
        assert forward_drift_quality(spec, "forward", None, 16 * -(-n // 128), 132, cap) == want


@pytest.mark.parametrize("spec,order,persistent,programs,want", [
    (_SQUARE, "forward", None, _PROGRAMS, "not a prediction"),
    (_SQUARE, "forward", "strided", _PROGRAMS, "not a prediction"),
    (_SQUARE, "reverse", None, _PROGRAMS, None),  # each tile one block shorter: in step
    (_SQUARE, "forward", "blocked", _PROGRAMS, None),
    (_SQUARE, "forward", None, 132, None),  # one wave: started together
    (_SQUARE.with_(causal=False), "forward", None, _PROGRAMS, None),
    (_SQUARE.with_(window_left=4096), "forward", None, _PROGRAMS, None),
    (LayerSpec(1, 16, 2, 128, 103424, 103424, dtype="bf16", causal=True), "forward", None, 16 * 808, "not a prediction"),
    (_SQUARE.with_(head_dim=64), "forward", None, _PROGRAMS, None),  # 32.4 MiB: 1.04 times
    # a chunk of 16,384 queries over 132,608 keys, bottom-right: drifts in both orders (drift_sim.py), one unmeasured
    (LayerSpec(1, 16, 16, 128, 16384, 132608, dtype="bf16", causal=True, causal_align="bottom-right"), "forward", None,
     16 * 128, "not a prediction"),
    (LayerSpec(1, 16, 16, 128, 16384, 132608, dtype="bf16", causal=True, causal_align="bottom-right"), "reverse", None,
     16 * 128, "rough"),
    (LayerSpec(1, 16, 16, 128, 16384, 132608, dtype="bf16", causal=True), "reverse", None, 16 * 128, None),  # top-left
    # the packed hold-outs' prefix: 8 programs of 8 heads, one wave
    (LayerSpec(1, 32, 4, 128, 256, 100000, dtype="bf16", causal=True, causal_align="bottom-right"), "forward", None, 8,
     None),
])
def test_which_launches_drift(spec, order, persistent, programs, want):
    assert forward_drift_quality(spec, order, persistent, programs, 132, _read_capacity("H200")) == want


def test_the_estimate_says_not_a_prediction_and_why(monkeypatch):
    params = L2Params.of(get_hardware("H200"), 1)
    fwd = predict_tiled(_SQUARE, Tiling(128, 128), params, "forward")
    rev = predict_tiled(_SQUARE, Tiling(128, 128), params, "reverse")
    assert fwd.read_qualities == {"fwd kernel": "not a prediction"}
    assert rev.read_qualities == {"fwd kernel": "predicted"}
    said = [a for a in fwd.assumptions if a.startswith("NOT A PREDICTION: the forward's DRAM reads")]
    lo, hi = FWD_DRIFT_RATIO
    assert len(said) == 1 and "64.8 MiB" in said[0] and "2.08 times the read capacity" in said[0]
    assert f"{lo}-{hi}x the model's estimate of them, {FWD_DRIFT_RUNS} of {FWD_DRIFT_RUNS} runs" in said[0]
    assert not any(a.startswith("NOT A PREDICTION") for a in rev.assumptions)
    monkeypatch.setattr(predict_mod, "FWD_DRIFT_KV_HEAD", float("inf"))  # the label off: the same bytes
    off = predict_tiled(_SQUARE, Tiling(128, 128), params, "forward")
    assert off.read_qualities == {"fwd kernel": "predicted"}
    assert (off.hbm_read_bytes, off.hbm_write_bytes) == (fwd.hbm_read_bytes, fwd.hbm_write_bytes)


def test_a_chunk_over_a_long_cache_is_rough_in_reverse():
    spec = LayerSpec(1, 16, 16, 128, 16384, 132608, dtype="bf16", causal=True, causal_align="bottom-right")
    rev = predict_tiled(spec, Tiling(128, 128), L2Params.of(get_hardware("H200"), 1), "reverse")
    assert rev.read_qualities == {"fwd kernel": "rough"}
    said = [a for a in rev.assumptions if a.startswith("ROUGH: the forward's DRAM reads. A chunk of queries")]
    assert len(said) == 1 and "2.08 times the read capacity" in said[0]


def test_the_training_step_says_why_its_forward_is_not_a_prediction():
    from iomodel.cache.predict import predict_training_step

    step = _SQUARE.with_(backward=True)
    params = L2Params.of(get_hardware("H200"), 1)
    out = predict_training_step(step, Tiling(128, 128), params, tile_order="forward")
    assert out.read_qualities["_attn_fwd"] == "not a prediction"
    assert sum(a.startswith("NOT A PREDICTION: the forward's DRAM reads") for a in out.assumptions) == 1


def _drift_sim():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "drift_sim.py"
    spec = importlib.util.spec_from_file_location("drift_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("order,timing,want_misses", [("forward", "in-step", 6), ("forward", "as-freed", 9)])
def test_drift_sim_by_hand(order, timing, want_misses):
    """One head of 4 causal tiles (1, 2, 3, 4 key blocks), 2 programs, an LRU of one block. In step: waves (0, 1) and
    (2, 3) read keys 0 0 1 | 0 0 1 1 2 2 3: 6 misses. As freed: tile 2 starts at step 1 and tile 3 at step 2, the
    reads interleave 0 0 1 0 1 0 2 1 2 3: 9 misses. A block is 128 rows x 16 x 2 bytes x (K, V) = 8,192 bytes, Q
    512 x 16 x 2 = 16,384 bytes; no reuse: 10 blocks."""
    got, every = _drift_sim().simulate(1, 1, 512, 16, True, 128, 128, 2, 2, 8192, order, timing)
    assert (got, every) == (want_misses * 8192 + 16384, 10 * 8192 + 16384)


@pytest.mark.parametrize("miss_cost,want_misses", [(0.0, 9), (1.0, 6)])
def test_drift_sim_coupled_by_hand(miss_cost, want_misses):
    """The head of test_drift_sim_by_hand in the coupled timing. A miss costing nothing is the as-freed timing (9
    misses). A miss costing 2 time units: tile 0 misses key 0 (ends at 2, tile 2 starts there), tile 1 hits key 0 and
    misses key 1 (ends at 3, tile 3 starts there); tile 2 misses key 0 at 2, tile 3 hits it at 3; at 4 tile 2 misses
    key 1 and tile 3 hits it; tile 3 misses key 2 at 5, tile 2 hits it at 6; tile 3 misses key 3 at 7: 6 misses, the
    trailing program caught up (the in-step count)."""
    got, every = _drift_sim().simulate(1, 1, 512, 16, True, 128, 128, 2, 2, 8192, "forward", "coupled",
                                       miss_cost=miss_cost)
    assert (got, every) == (want_misses * 8192 + 16384, 10 * 8192 + 16384)


def test_drift_sim_coupled_at_no_cost_is_as_freed():
    sim = _drift_sim().simulate
    for args in ((4, 2, 3000, 64, True, 64, 32, 7, 2, 40000), (2, 2, 2500, 32, False, 128, 64, 5, 2, 30000)):
        for order in ("forward", "reverse"):
            assert sim(*args, order, "coupled", miss_cost=0.0) == sim(*args, order, "as-freed")


@pytest.mark.parametrize("dq_order,want", [("forward", "not a prediction"), ("reverse", "predicted")])
def test_the_dq_kernel_drifts_in_the_forward_order(dq_order, want):
    """The Q-stationary dQ kernel's programs drift as the forward's do (docs/l2-calibration.md, "The dQ kernel's tile
    order": 22.75x the model at 131,072 tokens in the grid order); the step's estimate labels and explains it."""
    from dataclasses import replace

    from iomodel.cache.predict import predict_training_step

    step = _SQUARE.with_(backward=True)
    tiling = replace(Tiling(128, 128), dq_tile_order=dq_order)
    out = predict_training_step(step, tiling, L2Params.of(get_hardware("H200"), 1), tile_order="reverse")
    assert out.read_qualities == {"_attn_fwd": "predicted", "_bwd_dkdv": "predicted", "_bwd_dq": want}
    said = [a for a in out.assumptions if a.startswith("NOT A PREDICTION: _bwd_dq's DRAM reads")]
    assert len(said) == (want != "predicted")
    if said:
        assert "22.75x the model's estimate at 131,072 tokens" in said[0] and "2.08 times the read capacity" in said[0]


def test_a_ragged_launch_with_a_long_sequence_is_labelled(capsys, monkeypatch):
    """The varlen launch runs the forward tile order (its pointer path), each sequence's programs consecutively:
    a sequence past the threshold drifts as its batch-1 layer does (twenty-first session; before, ragged launches
    carried no label). The default layer (Llama-3-8B: 8 KV heads, HEAD_DIM 128, bf16, causal) on the H200: 89,251
    tokens are past the 89,250 of test_the_h200_read_capacity_and_the_threshold, 89,249 are not."""
    import json

    import iomodel.cache.estimate as estimate_mod
    from test_cli_errors import run_cli

    def l2(seqlens, fmt="json"):
        code, out, err = run_cli(capsys, ["worksheet", "--seqlens", seqlens, "--format", fmt])
        assert code == 0, err
        return json.loads(out)["l2_aware"] if fmt == "json" else out

    past, below = l2("2048,89251"), l2("2048,89249")
    assert past["tile_order"] == below["tile_order"] == "forward"
    assert (past["read_bytes_quality"], below["read_bytes_quality"]) == ("not a prediction", "predicted")
    said = [a for a in past["assumptions"] if "NOT A PREDICTION" in a]
    assert len(said) == 1 and said[0].startswith("Sequence 2 of 2 (89,251 query and 89,251 key tokens): NOT A "
                                                 "PREDICTION: the forward's DRAM reads.")
    assert not any("NOT A PREDICTION" in a for a in below["assumptions"])
    assert "(**NOT A PREDICTION**: the assumptions below)" in l2("2048,89251", "md")
    monkeypatch.setattr(estimate_mod, "forward_drift_quality", lambda *a: None)  # the label off: the same bytes
    off = l2("2048,89251")
    assert off["read_bytes_quality"] == "predicted"
    assert (off["read_bytes"], off["write_bytes"]) == (past["read_bytes"], past["write_bytes"])


def test_reconcile_shows_the_estimates_read_label(reconciled_receipt, capsys, tmp_path):
    """``iomodel reconcile`` says where the model labelled its own DRAM bytes before the run (twenty-second session;
    before, a drifting run read as a plain NO). The H100 order probe: the bundled kernel's three far causal forwards in
    the forward order and cuDNN's 98k forward are ``not a prediction`` (their K+V of one KV head 48.0-64.8 MiB against
    the H100's 26.6 MiB read capacity, past FWD_DRIFT_KV_HEAD); the same layers in the reverse order, and the writes,
    are not labelled."""
    import json

    from iomodel.report.reconcile_md import markdown, summary_rows, table_rows
    from test_cli_errors import run_cli

    rec = reconciled_receipt("ncu-h100-order-probe1-2026-12-07.json")
    labelled = sorted(r.id for r in rec.rows if r.quality("HBM") != "predicted")
    assert labelled == ["b1-h16-kv16-d128-bf16-q132608-k132608-tl-tiled-tforward",
                        "b1-h16-kv16-d128-bf16-q98304-k98304-tl-sdpa-cudnn",
                        "b1-h16-kv16-d128-bf16-q98304-k98304-tl-tiled-tforward",
                        "b1-h16-kv2-d128-bf16-q103424-k103424-tl-tiled-tforward"]
    assert {r.quality("HBM") for r in rec.rows if r.id in labelled} == {"not a prediction"}
    assert all(r.labels[("HBM", "read")][1].startswith("NOT A PREDICTION: the forward's DRAM reads.")
               and r.labels[("HBM", "read")][1] in r.l2.assumptions for r in rec.rows if r.id in labelled)
    assert all(r.labels == {} for r in rec.rows if r.id.endswith("-treverse"))
    tiled_read = next(e for e in rec.summary() if (e["impl"], e["level"], e["which"]) == ("tiled", "HBM", "read"))
    assert tiled_read["labelled"] == {"not a prediction": {"shapes": 3, "within": 0}} and tiled_read["shapes"] == 9
    assert next(e for e in rec.summary() if (e["impl"], e["level"], e["which"]) == ("tiled", "HBM", "write")
                )["labelled"] == {}
    assert any(row[:3] == ["tiled", "HBM", "read"] and row[-1].endswith("; 3 labelled NOT A PREDICTION (0 within)")
               for row in summary_rows(rec))
    oks = {row[0]: row[8] for row in table_rows(rec) if row[0] and row[1] == "HBM"}
    assert oks["b1-h16-kv16-d128-bf16-q132608-k132608-tl-tiled-tforward"] == "NO (reads NOT A PREDICTION)"
    assert oks["b1-h16-kv16-d128-bf16-q132608-k132608-tl-tiled-treverse"] == "yes"
    md = markdown(rec)
    line = next(x for x in md.splitlines() if x.startswith("- `b1-h16-kv16-d128-bf16-q132608-k132608-tl-tiled-tforward`"))
    assert "measured 32.7x the prediction" in line and "; the model labels these reads: NOT A PREDICTION: " in line
    code, out, err = run_cli(capsys, ["reconcile", "receipts/ncu-h100-order-probe1-2026-12-07.json", "--json",
                                      str(tmp_path / "r.json")])
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads((tmp_path / "r.json").read_text())["shapes"]}
    hbm = lambda sid: next(lv for lv in rows[sid]["levels"] if lv["level"] == "HBM")  # noqa: E731
    assert (hbm("b1-h16-kv16-d128-bf16-q98304-k98304-tl-sdpa-cudnn")["read_bytes_quality"],
            hbm("b1-h16-kv16-d128-bf16-q98304-k98304-tl-sdpa-cudnn")["write_bytes_quality"]) == ("not a prediction",
                                                                                              "predicted")
    assert hbm("b1-h16-kv16-d128-bf16-q98304-k98304-tl-tiled-treverse")["read_bytes_quality"] == "predicted"


def test_reconcile_labels_name_the_direction_that_missed(reconciled_receipt):
    """The ok cell is the level's verdict, reads and writes together: a labelled direction that was within while the
    other missed is said so (a reviewer's finding: ``NO (reads ROUGH)`` on reads at 1.00x and writes at 1.54x read
    as an announced miss). The H200 hold-out's causal chunk over a 16k cache: its forward's reads are ``rough`` (the
    capacity edge) and within, its writes miss unlabelled. And a level the model does not predict (SDPA FLASH in a
    training receipt, measured beside the floor only) has no quality in the JSON."""
    from iomodel.report.reconcile_md import table_rows, verdict_labels

    rec = reconciled_receipt("ncu-h200-2026-11-29.json")
    r = next(r for r in rec.rows if r.id == "b1-h32-kv8-d128-bf16-q1024-k16384-br-tiled")
    oks = [rec.within(r, "HBM", w) for w in ("read", "write")]
    assert r.quality("HBM", "read") == "rough" and oks == [True, False]
    cells = {row[0]: row[8] for row in table_rows(rec) if row[0] and row[1] == "HBM"}
    assert cells[r.id] == "NO (reads ROUGH, within; writes miss)"
    # by hand, every case of the cell
    assert verdict_labels(r, "HBM", [False, True]) == " (reads ROUGH)"
    assert verdict_labels(r, "HBM", [True, True]) == " (reads ROUGH)"
    assert verdict_labels(r, "HBM", [None, None]) == ""
    assert verdict_labels(r, "L2", [True, False]) == ""  # an unlabelled level: the cell as before
    train = reconciled_receipt("ncu-h200-train1-2026-12-01.json")
    flash = next(r for r in train.rows if r.impl == "sdpa-flash")
    d = flash.to_dict()
    hbm = next(lv for lv in d["levels"] if lv["level"] == "HBM")
    assert hbm["predicted_read"] is None and "read_bytes_quality" not in hbm


def test_reconcile_labels_a_training_steps_kernels(reconciled_receipt):
    """A training step's label sits on the kernel's own level (``HBM _bwd_dkdv``) and on the step's ``HBM``: the H200
    long training hold-out's causal GQA steps are ``not a prediction`` at ``_bwd_dkdv`` (predict_training_step's
    dkdv_read_quality), the sentence the estimate's (``label_sentences``, written where the assumption is). A line of
    the Outside-tolerance list quotes each sentence once: the step's HBM read item leaves out the kernels that have an
    item of their own on the line."""
    from iomodel.report.reconcile_md import outside_account

    rec = reconciled_receipt("ncu-h200-long-train-holdout1-2026-12-05.json")
    dkdv = [r for r in rec.rows if r.quality("HBM _bwd_dkdv") == "not a prediction"]
    assert dkdv and all(r.spec.causal and r.spec.group > 1 for r in dkdv)
    for r in dkdv:
        sentence = r.labels[("HBM _bwd_dkdv", "read")][1]
        assert sentence.startswith("NOT A PREDICTION: _bwd_dkdv's DRAM reads. On the H200") and sentence in r.l2.assumptions
        assert r.quality("HBM") == "not a prediction" and sentence in r.labels[("HBM", "read")][1]
    assert all({lvl for lvl, _ in r.labels} <= {"HBM", "HBM _attn_fwd", "HBM _bwd_dkdv", "HBM _bwd_dq"} for r in rec.rows)
    for r, bad in rec.outside():
        if "HBM read" in bad and "HBM _bwd_dkdv read" in bad and ("HBM _bwd_dkdv", "read") in r.labels:
            text = outside_account(r, bad, rec.abs_tol)
            assert text.count(r.labels[("HBM _bwd_dkdv", "read")][1]) == 1 and ".;" not in text
            break
    else:
        raise AssertionError("no step with both its HBM and its dK/dV reads outside and labelled")
    # the step's quality leads, whatever kernel's sentence follows (a fresh user's finding: this step's line quoted the
    # forward's ROUGH sentence alone, while its HBM verdict said NOT A PREDICTION)
    r, bad = next((r, bad) for r, bad in rec.outside() if r.id == "b1-h40-kv8-d128-bf16-q262144-k300000-br-tiled-bwd")
    assert bad == ["HBM read", "HBM _bwd_dkdv read", "HBM _bwd_dq read"]
    text = outside_account(r, bad, rec.abs_tol)
    step = text[:text.index("HBM _bwd_dkdv read: ")]
    assert "the model labels the step's reads NOT A PREDICTION (its lowest kernel's): ROUGH: the forward's DRAM " in step
    assert step.endswith("(_bwd_dkdv, _bwd_dq: their own items on this line); ")


def test_reconcile_labels_a_ragged_launch_as_its_estimate_does(monkeypatch):
    """A ragged record's HBM row takes the varlen estimate's label and sentence (iomodel.cache.estimate.ragged_drift_label,
    one home with the worksheet's). No committed ragged run is long enough to drift (the longest sequence 15,980 tokens):
    unlabelled as they are; with the drift test patched to say so, the row names sequence 1 of 6, as the worksheet
    would."""
    import iomodel.cache.estimate as estimate_mod
    from iomodel.measure.records import Measurement
    from iomodel.reconcile.compare import reconcile

    m = Measurement.load(Path(__file__).resolve().parents[1] / "receipts/ncu-h200-ragged2-2026-12-01.json")
    ragged = [s for s in m.shapes if s.seqlens is not None]
    assert ragged
    assert all(r.labels == {} for r in reconcile(m).rows)
    monkeypatch.setattr(estimate_mod, "forward_drift_quality", lambda *a: "not a prediction")
    rows = {r.id: r for r in reconcile(m).rows}
    first = rows[ragged[0].id]
    assert first.quality("HBM") == "not a prediction"
    n = len(ragged[0].seqlens)
    assert first.labels[("HBM", "read")][1].startswith(
        f"Sequence 1 of {n} ({ragged[0].seqlens[0][0]:,} query and {ragged[0].seqlens[0][1]:,} key tokens): NOT A "
        "PREDICTION: the forward's DRAM reads.")


def test_the_capacity_edge_counts_the_keys_some_query_reads():
    """A top-left causal chunk over a longer cache reads the keys of its own rows only: its resident wave's K/V
    working set (iomodel.cache.predict.wave_kv_working_set) is of those rows, not of every key (a fresh user's finding,
    2026-12-07: 1,024 queries over 8,192 or 16,384 keys were ROUGH, over 4,096 or 65,536 not, the same 12 MiB read
    each time). B 1, H 32, H_kv 8, d 128, bf16 on the H200, W = 132 programs: T_r = 1,024 / 128 = 8 tiles a head, so
    the wave spans ceil(132 / 8) + 1 = 18 query heads = ceil(18 / 4) + 1 = 6 KV heads, 6 x 2 x 1,024 x 128 x 2 B =
    3 MiB, far below the read capacity at every cache length."""
    from iomodel.cache.params import L2Params
    from iomodel.cache.predict import wave_kv_working_set
    from iomodel.spec.hardware import get_hardware

    hw = get_hardware("H200")
    got = set()
    for n_k in (4096, 8192, 16384, 65536):
        spec = LayerSpec(1, 32, 8, 128, 1024, n_k, dtype="bf16", causal=True)
        assert spec.seen_key_rows == 1024
        params = L2Params.of(hw, 1).for_forward()
        l2 = predict_tiled(spec, Tiling(), params)
        got.add((l2.read_qualities["fwd kernel"], l2.hbm_read_bytes))
        assert wave_kv_working_set(spec, Tiling(), 132)[0] == 6 * 2 * 1024 * 128 * 2
    assert {q for q, _ in got} == {"predicted"} and len({b for _, b in got}) == 1
    br = LayerSpec(1, 32, 8, 128, 1024, 16384, dtype="bf16", causal=True, causal_align="bottom-right")
    assert br.seen_key_rows == 16384 and LayerSpec(1, 32, 8, 128, 1024, 16384, dtype="bf16").seen_key_rows == 16384
    # a window band's keys (a reviewer's finding: every key of a band layer was counted): bottom-right 8,192 queries
    # over 65,536 keys with 20,000 to the left see keys [65,536 - 8,192 - 20,000, 65,536) = [37,344, 65,536); a
    # non-causal band of (4,096, 0) over 1,024 queries sees keys [0, 1,024) of 16,384; each the compulsory K rows of
    # the traffic model (iomodel.traffic.bounds.compulsory_rows, its formula in sympy)
    from iomodel.traffic import predict

    band = LayerSpec(1, 16, 16, 128, 8192, 65536, dtype="bf16", causal=True, causal_align="bottom-right",
                     window_left=20000)
    wide = LayerSpec(1, 8, 8, 64, 1024, 16384, dtype="bf16", window_left=4096, window_right=0)
    assert (band.seen_keys, wide.seen_keys) == ((37344, 65536), (0, 1024))
    for spec in (band, wide, br, LayerSpec(1, 32, 8, 128, 1024, 4096, dtype="bf16", causal=True)):
        k = next(r for r in predict(spec, Tiling(), get_hardware("H200")).compulsory_rows if r.tensor == "K")
        assert k.read_bytes == spec.batch * spec.kv_heads * spec.seen_key_rows * spec.head_dim * spec.width
