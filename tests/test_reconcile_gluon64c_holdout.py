"""The hold-out of the Gluon prefill at HEAD_DIM 64 causal (``sweeps/h200-gluon64c-holdout1.toml``: 17 shapes of at
least 2,048 query rows, 14 forwards and 3 training steps, committed at 46dc5e1 before any measurement, after ad9aef8
made the Gluon prefill the launcher's choice there (withdrawn since: a speed hold-out found the TMA prefill faster on an
H100; the Gluon prefill is still forceable there) and after the last change of the model), measured on an H100 (the
H200 did not start): ``receipts/ncu-h100-gluon64c-holdout1-2026-12-06.json``, predicted for the record's hardware
(H100-SXM, L2 50 MiB, read capacity 25.9 MiB then, the H100's own 26.6 MiB since 2026-12-06). VALIDATION on the H100:
every count below is what the committed receipt reconciles to, and any change of the model that moves one has to say
so here. The forward's own constants (2026-12-06, iomodel.cache.params.FORWARD_L2) were chosen with this receipt seen:
the counts under them are calibration since; the validation results are those "as measured" (the constants before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECEIPT = "ncu-h100-gluon64c-holdout1-2026-12-06.json"
ROOT = Path(__file__).resolve().parents[1]


from receipt_cache import within_counts as _counts  # noqa: E402  (tests/ is on the path: conftest)


def test_holdout_ran_the_causal_gluon_prefill_in_the_lpt_order():
    """Every forward ran ``prefill-gluon`` (256 x 64 tiles, 4 stages, 20 warps, one program per SM by the register
    limit) with the heaviest causal tiles first, as the launcher picked it from 2,048 query rows then; the tree that ran is
    the committed one (its source digest)."""
    data = json.loads((ROOT / "receipts" / RECEIPT).read_text())
    assert "H100" in data["environment"]["device"] and len(data["shapes"]) == 17
    assert data["settings"]["sweep_name"] == "h200-gluon64c-holdout1"
    for s in data["shapes"]:
        c = s["config"]
        assert (c["path"], c["block_m"], c["block_n"], c["num_stages"], c["tile_order"]) == (
            "prefill-gluon", 256, 64, 4, "reverse")
        assert s["spec"]["causal"] and s["spec"]["head_dim"] == 64 and s["spec"]["seqlen_q"] >= 2048
        (fwd,) = [k for k in s["kernels"] if k["name"] == "_attn_fwd_gluon"]
        assert fwd["metrics"]["launch__occupancy_limit_registers"] == 1 and fwd["metrics"]["launch__block_size"] == 640


@pytest.mark.parametrize("level, read, write", [
    # as measured: reads 16/17, writes 17/17; the read miss a forward past the H100's read capacity, 0.897x (15/17
    # while the H200's read fraction was borrowed for the H100: 0.906x and 0.863x; since 2026-12-06 reads are judged
    # at the H100's own, measured). Under the forward's own constants (2026-12-06, calibration since): reads 15/17,
    # two forwards of 11 and 17 MiB of K+V a KV head reading 1.115x and 1.259x the model; writes 15/17, two
    # bidirectional forwards at 0.551x of 2.8 MiB and 0.901x of 10.2 MiB
    ("HBM", (15, 17), (15, 17)),
    # the training steps' forwards; writes 1/3 on +-10 % alone, 3/3 by the floor as measured; 2/3 under the forward's
    # own constants (the bidirectional b4 q2500 k3000 step's forward, 0.634x of 3.2 MiB)
    ("HBM _attn_fwd", (3, 3), (2, 3)),
    ("HBM _bwd_dkdv", (2, 3), (3, 3)),  # the read miss: the causal GQA dK/dV class (0.871x)
    ("HBM _bwd_dq", (3, 3), (3, 3)),
    ("HBM _bwd_preprocess", (3, 3), (3, 3)),
    ("HBM _bwd_reduce_dkdv", (1, 1), (1, 1)),
    ("L2", (17, 17), (17, 17)),
])
def test_holdout_counts(reconciled_receipt, level, read, write):
    rec = reconciled_receipt(RECEIPT)
    assert _counts(rec, level, "read") == read
    assert _counts(rec, level, "write") == write


def test_holdout_misses_are_the_capacity_edge_and_the_dkdv_class(reconciled_receipt):
    """The forward read misses are among the six shapes whose K+V of one KV head (11-34 MiB) sits around or past the
    H100's read capacity (issue 12 item 3's class). As measured: one miss, over-predicted (the MQA q100000 shape,
    0.897x), the five others within 10 % (four with the H200's read fraction, which the model borrowed for the H100
    until 2026-12-06: the MQA shape then read 0.863x). Under the forward's own constants (2026-12-06, calibration
    since): two misses, under-predicted (the GQA q45000 and q70000 shapes, 1.115x and 1.259x), the four others within
    (the MQA shape 0.979x). Since the forward's waves start at each head in the reverse order
    (iomodel.schedule.grid.row_waves, 2026-12-07) the q70000 shape reads 1.188x, the H4 q140000 one 1.019x (0.954x)."""
    rec = reconciled_receipt(RECEIPT)
    miss = {r.id: round(r.level("HBM").measured_read / r.level("HBM").predicted_read, 3)
            for r in rec.rows if not rec.within(r, "HBM", "read")}
    assert miss == {"b1-h8-kv2-d64-bf16-q45000-k45000-tl-tiled": pytest.approx(1.115, abs=0.002),
                    "b1-h16-kv4-d64-fp16-q70000-k70000-tl-tiled": pytest.approx(1.188, abs=0.002)}
    big = [r for r in rec.rows if 2 * r.spec.seqlen_k * r.spec.head_dim * r.spec.width >= 10 * 2**20]
    assert len(big) == 6 and sum(bool(rec.within(r, "HBM", "read")) for r in big) == 4  # 5 as measured
    (dkdv,) = [r for r in rec.rows if r.level("HBM _bwd_dkdv") is not None
               and not rec.within(r, "HBM _bwd_dkdv", "read")]
    assert dkdv.id == "b2-h16-kv4-d64-bf16-q4000-k4000-tl-tiled-bwd"
