"""The hold-out of the forward's row waves (``sweeps/h100-rows-holdout1.toml``: 12 bundled forwards in the reverse tile
order, 10 long causal layers whose waves start at each head's first tile under :func:`iomodel.schedule.grid.row_waves`,
a top-left chunk of queries over a longer cache, and two controls the rule leaves in step: a bottom-right chunk and a
non-causal layer; committed at 5e7e9e5, after the model change 6d2f5ae and before any measurement), measured on an H100
(``receipts/ncu-h100-rows-holdout1-2026-12-07.json``, 2026-12-07, twenty-eighth session; the tree of 9561a36 by its
source digest, the same model as 6d2f5ae's). VALIDATION: nothing in the L2 model was fitted on it. The bar, written in
the sweep's header before measurement: DRAM reads and writes within ±10 % (or 1 MiB) on every run whose reads the model
labels ``predicted``; runs labelled ``rough`` counted apart. Every count below is what the committed receipt
reconciles to; a change of the model that moves one has to say so here."""

from __future__ import annotations

import json
from pathlib import Path

from receipt_cache import within_counts as _counts  # noqa: E402  (tests/ is on the path: conftest)

RECEIPT = "ncu-h100-rows-holdout1-2026-12-07.json"
ROOT = Path(__file__).resolve().parents[1]


def test_holdout_ran_the_committed_tree_on_an_h100():
    data = json.loads((ROOT / "receipts" / RECEIPT).read_text())
    assert data["environment"]["device"] == "NVIDIA H100 80GB HBM3" and data["environment"]["l2_bytes"] == 50 * 2**20
    assert data["settings"]["sweep_name"] == "h100-rows-holdout1" and len(data["shapes"]) == 12
    assert data["environment"]["source_sha256"].startswith("39f3a1a0")  # the tree of 9561a36
    assert {s["impl"] for s in data["shapes"]} == {"tiled"}
    assert {s["config"]["tile_order"] for s in data["shapes"]} == {"reverse"}


def test_holdout_counts(reconciled_receipt):
    """As measured: reads 11/12 within ±10 % or 1 MiB, writes 12/12; the one read miss is labelled ``rough``."""
    rec = reconciled_receipt(RECEIPT)
    assert _counts(rec, "HBM", "read") == (11, 12)
    assert _counts(rec, "HBM", "write") == (12, 12)
    assert _counts(rec, "L2", "read") == (12, 12) and _counts(rec, "L2", "write") == (12, 12)


def test_every_predicted_run_holds_and_the_rough_miss_is_the_bottom_right_chunk(reconciled_receipt):
    """The bar: every run whose reads are labelled ``predicted`` (10 of 12) within ±10 % or 1 MiB, reads and writes;
    as measured they read 1.001-1.052x the model (all a little above it; the non-causal control 1.001x) where the waves in step over the grid (the
    model before 6d2f5ae, reconciled on the same receipt at 9445fe6) predicted 0.878-1.001x, four of those ten outside (the fp16 layer 0.860x).
    The two ``rough`` runs: the fp16 GQA layer at the capacity edge (1.052x, within) and the control chunk of 65,536
    bottom-right queries under 98,304 keys, whose programs drift apart as they take tiles (1.186x: over, the direction
    its label says). The HEAD_DIM 64 layer ran 2 programs a SM (registers) where the header's worksheet number
    assumed 3: reconciled at the measured occupancy 1.018x, against the header's 1,425.1 MiB 1.28x (the header says
    the reconciliation takes the measured tiles and programs per SM)."""
    rec = reconciled_receipt(RECEIPT)
    ratio = {r.id: r.level("HBM").measured_read / r.level("HBM").predicted_read for r in rec.rows}
    predicted = [r for r in rec.rows if r.quality("HBM", "read") == "predicted"]
    assert len(predicted) == 10
    assert all(rec.within(r, "HBM", "read") and rec.within(r, "HBM", "write") for r in predicted)
    assert 1.0007 < min(ratio[r.id] for r in predicted) and max(ratio[r.id] for r in predicted) < 1.053
    rough = {r.id for r in rec.rows if r.quality("HBM", "read") == "rough"}
    assert rough == {"b1-h16-kv8-d128-fp16-q57344-k57344-tl-tiled-treverse",
                     "b1-h16-kv16-d128-bf16-q65536-k98304-br-tiled-treverse"}
    miss = [r.id for r in rec.rows if not rec.within(r, "HBM", "read")]
    assert miss == ["b1-h16-kv16-d128-bf16-q65536-k98304-br-tiled-treverse"]
    assert 1.18 < ratio[miss[0]] < 1.19
