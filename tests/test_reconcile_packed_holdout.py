"""The hold-out of the packed GQA prefill (``sweeps/h200-packed-holdout1.toml``: 12 shapes of the bundled pointer
prefill with P = heads_per_program query heads of one KV head in each program, 9 of them one program per whole GQA
group, 3 streaming K/V past the L2; committed at 698eb62 with the packed model and kernel, before any measurement),
measured on an H100 (``receipts/ncu-h100-packed-holdout1-2026-12-06.json``, the tree of 698eb62 by its source digest),
predicted for the record's hardware (H100-SXM). VALIDATION of issue 12 item 1's ``heads_per_program``: nothing in the
L2 model was fitted to packed launches. Every count below is what the committed receipt reconciles to, and any change
of the model that moves one has to say so here. The forward's own constants (2026-12-06,
iomodel.cache.params.FORWARD_L2) were chosen with these receipts seen: the counts under them are calibration since, the
validation results are those "as measured" (under the constants before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECEIPT = "ncu-h100-packed-holdout1-2026-12-06.json"
ROOT = Path(__file__).resolve().parents[1]


from receipt_cache import within_counts as _counts  # noqa: E402  (tests/ is on the path: conftest)


def test_holdout_ran_the_packed_pointer_prefill():
    """Every shape ran path ``prefill`` with its sweep's P, in a grid of ⌈N_q / (BLOCK_M / P)⌉ · B · H / P programs."""
    data = json.loads((ROOT / "receipts" / RECEIPT).read_text())
    assert "H100" in data["environment"]["device"] and len(data["shapes"]) == 12
    assert data["settings"]["sweep_name"] == "h200-packed-holdout1"
    for s in data["shapes"]:
        c, sp = s["config"], s["spec"]
        p = int(s["id"].rsplit("-p", 1)[1])
        assert (c["path"], c["heads_per_program"], c["block_m"]) == ("prefill", p, 128)
        (fwd,) = s["kernels"]
        m = c["block_m"] // p
        assert fwd["metrics"]["launch__grid_size"] == -(-sp["seqlen_q"] // m) * sp["batch"] * sp["heads"] // p


#: The same sweep measured again later that day on another H100 lease (the tree of 83ac387: the kernel and the model's
#: numbers as at 698eb62), a repeat: DRAM reads equal to the first run's within 0.3 %, writes within the floor.
REPEAT = "ncu-h100-packed-holdout1-2026-12-06-b.json"


@pytest.mark.parametrize("receipt", [RECEIPT, REPEAT])
@pytest.mark.parametrize("level, read, write", [
    # writes on +-10 % alone: 8/12 (the repeat 6/12) as measured; 7/12 (the repeat 7/12) under the forward's own
    # constants (2026-12-06, calibration since): small ones, within the 1 MiB floor
    ("HBM", (12, 12), (12, 12)),
    ("L2", (12, 12), (12, 12)),
])
def test_holdout_counts(reconciled_receipt, receipt, level, read, write):
    rec = reconciled_receipt(receipt)
    assert _counts(rec, level, "read") == read
    assert _counts(rec, level, "write") == write


def test_holdout_reads_past_l2_and_the_floor_cases(reconciled_receipt):
    """The three shapes whose K/V outgrow the H100's L2 (128-197 MiB) read within 1 % of the prediction: a KV head's
    packed programs stream its K/V together. The writes within the floor alone: three shapes whose outputs stay in
    L2 (0 predicted, 29-60 KiB measured) and, as measured, one at 0.65x of 1.3 MiB (B 4 H 16 on 2, d 64); under the
    forward's own constants (2026-12-06, calibration since) that one at 4.9x of 181 KiB predicted and B 2 H 32 on 4,
    1k against 8k, at 0.88x of 8.2 MiB."""
    rec = reconciled_receipt(RECEIPT)
    by_id = {r.id: r.level("HBM") for r in rec.rows}
    for sid in ("b1-h32-kv8-d128-bf16-q64-k32768-nc-tiled-p4", "b1-h32-kv4-d128-bf16-q256-k100000-br-tiled-p8",
                "b1-h16-kv1-d128-bf16-q128-k65536-nc-tiled-p16"):
        h = by_id[sid]
        assert h.measured_read > 32 * 2**20 and abs(h.measured_read / h.predicted_read - 1) < 0.01, sid
    floor_only = sorted(r.id for r in rec.rows if rec.within(r, "HBM", "write")
                        and not rec.within_relative(r, "HBM", "write"))
    assert floor_only == ["b1-h16-kv1-d128-bf16-q128-k65536-nc-tiled-p16", "b1-h32-kv4-d128-bf16-q256-k100000-br-tiled-p8",
                          "b1-h32-kv8-d128-bf16-q64-k32768-nc-tiled-p4", "b2-h32-kv4-d128-bf16-q1024-k8192-br-tiled-p8",
                          "b4-h16-kv2-d64-fp16-q2048-k2048-nc-tiled-p8"]
    ratio = {sid: h.measured_read / h.predicted_read for sid, h in by_id.items()}
    # B 1 H 64 on 8, 2k against 16k, P 2, the read furthest from the model: 0.932x at validation, with the H200's read
    # fraction borrowed for the H100; 0.945x with the H100's own (the lowest ratio, before 2026-12-06); under the
    # forward's own constants (2026-12-06, calibration since) 1.015x, the highest, and no shape reads below 1.000x
    assert max(ratio, key=ratio.get) == "b1-h64-kv8-d128-bf16-q2048-k16384-br-tiled-p2"
    assert round(ratio["b1-h64-kv8-d128-bf16-q2048-k16384-br-tiled-p2"], 3) == 1.015
    assert round(min(ratio.values()), 3) == 1.0


#: The same sweep on the H200 (2026-12-06, the first H200 of the day; the model's H200 bytes unchanged since 698eb62).
ON_H200 = "ncu-h200-packed-holdout1-2026-12-06.json"


@pytest.mark.parametrize("level, read, write", [
    # writes on +-10 % alone: 7/12 as measured, 5/12 under the forward's own constants (2026-12-06, calibration
    # since): small ones, within the 1 MiB floor
    ("HBM", (12, 12), (12, 12)),
    ("L2", (12, 12), (12, 12)),
])
def test_holdout_counts_on_the_h200(reconciled_receipt, level, read, write):
    rec = reconciled_receipt(ON_H200)
    assert "H200" in rec.measurement.environment["device"] and len(rec.rows) == 12
    assert _counts(rec, level, "read") == read
    assert _counts(rec, level, "write") == write
