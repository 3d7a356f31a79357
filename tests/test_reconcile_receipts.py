"""Issue 4 on the committed GPU receipts (receipts/ncu-*.json), without a GPU.

* The fourth hold-out receipt (``receipts/ncu-h200-holdout4-*.json``: shapes of
  sweeps/h200-holdout4.toml, in none of the earlier sweeps, chosen before any was measured and
  opened only after session 2's model change, the set-associative L2 fitted on the calibration
  receipts, was committed; DRAM bytes from a single-pass ncu run, ``dram_pass``) carries the
  acceptance: the bundled kernel's L2-aware DRAM read and write bytes each within ±10 % (or
  1 MiB) on at least 90 % of the shapes, the L2 level within ±15 %, the eager chain within
  ±10 % up to 8k tokens, every shape outside explained.
* The earlier receipts are calibration data; their counts under the current model are pinned
  as regression guards. The first three measured DRAM bytes in a multi-pass ncu run, whose
  memory restore between replay passes adds write-backs the model does not (and should not)
  predict, so their write counts are low; ncu-h200-calib-dram-* re-measures their shapes in
  one pass, and holdout2-dp, holdout3 and calib-dram are the data the L2 associativity
  (``l2_ways`` = 24) was fitted on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.measure.records import Measurement
from iomodel.reconcile import foreign_write_notes

RECEIPTS_DIR = Path(__file__).resolve().parent.parent / "receipts"
#: The acceptance receipt: hold-out 4 measured with the final pipeline (DRAM-only pass on the
#: full run's configs, sacrificial first kernel per ncu process).
HOLDOUT = RECEIPTS_DIR / "ncu-h200-holdout4-flush-2026-11-29.json"
HOLDOUT2_DP = RECEIPTS_DIR / "ncu-h200-holdout2-dp-2026-11-29.json"
CALIBRATION = RECEIPTS_DIR / "ncu-h200-2026-11-29.json"
HOLDOUT1 = RECEIPTS_DIR / "ncu-h200-holdout-2026-11-29.json"
ALL = sorted(RECEIPTS_DIR.glob("ncu-*.json"))
#: Receipts of one feature, smaller than the 30-shape hold-outs: their own committed shape count.
FEATURE_SHAPES = {"ncu-h200-readcap-holdout1-2026-12-04.json": 24, "ncu-h200-window1-2026-12-01.json": 16, "ncu-h200-train-holdout2-2026-12-01.json": 14,
                  # the dK/dV loop order's calibration (14 causal GQA steps, 2026-12-04)
                  "ncu-h200-train-order-calib1-2026-12-04.json": 14,
                  # the four-warpgroup HEAD_DIM 64 Gluon prefill's hold-out (17 shapes, on an H100, 2026-12-05)
                  "ncu-h100-gluon64-holdout1-2026-12-05.json": 17,
                  # the same hold-out on the H200 (17 shapes, 2026-12-05)
                  "ncu-h200-gluon64-holdout1-2026-12-05.json": 17,
                  # the causal HEAD_DIM 64 Gluon prefill's hold-out (17 shapes, on an H100, 2026-12-06)
                  "ncu-h100-gluon64c-holdout1-2026-12-06.json": 17,
                  # the packed GQA prefill's hold-out (12 shapes, on an H100, 2026-12-06)
                  "ncu-h100-packed-holdout1-2026-12-06.json": 12, "ncu-h100-packed-holdout1-2026-12-06-b.json": 12,
                  "ncu-h200-packed-holdout1-2026-12-06.json": 12,
                  # the H100's own read capacity: its hold-out (14 forward shapes by cuDNN and the bundled kernel)
                  "ncu-h100-readcap-holdout1-2026-12-06.json": 14,
                  # the forward's own L2 constants: its hold-out on an H100 (17 shapes) and the H200 sweep's 17
                  # shapes, measured on an H100 when no H200 could be had
                  "ncu-h100-fwdl2-holdout1-2026-12-06.json": 17, "ncu-h100-fwdl2-holdout1-h200shapes-2026-12-06.json": 17,
                  # and the H200 sweep on an H200 (17 shapes, 2026-12-06, nineteenth session)
                  "ncu-h200-fwdl2-holdout1-2026-12-06.json": 17,
                  # the tile-order probe (calibration, 9 bundled runs and 2 cuDNN, on an H100, 2026-12-07)
                  "ncu-h100-order-probe1-2026-12-07.json": 9,
                  # its repeat on another H100 lease (the H200 probe's sweep, an H100 given), the cuDNN-long probe on
                  # that lease (no bundled shape) and the drift label's H100 hold-out (2026-12-07)
                  "ncu-h100-order-probe1-2026-12-07-b.json": 9, "ncu-h100-cudnn-long-probe1-2026-12-07.json": 0,
                  "ncu-h100-drift-holdout1-2026-12-07.json": 9,
                  # the row waves' hold-out on an H100 (12 bundled forwards, 2026-12-07, twenty-eighth session)
                  "ncu-h100-rows-holdout1-2026-12-07.json": 12,
                  "ncu-h200-serving1-2026-12-01.json": 10, "ncu-h200-ragged1-2026-12-01.json": 8,
                  "ncu-h200-ragged2-2026-12-01.json": 10,
                  # calibration probes of issue 12 (capacity edge, peers): bundled-kernel shapes in each
                  "ncu-h200-edge-probe1-tma-2026-12-01.json": 5, "ncu-h200-edge-probe1-notma-2026-12-01.json": 5,
                  "ncu-h200-peers-calib1-2026-12-01.json": 12,
                  # hold-outs of the fused decode merge, the grid-order model and the dK/dV group split
                  "ncu-h200-serving1-fused-2026-12-01.json": 10, "ncu-h200-grid-order1-2026-12-01.json": 12,
                  "ncu-h200-train-split1-2026-12-01.json": 12, "ncu-h200-window2-2026-12-01.json": 14,
                  # the decode hold-out of the one-round split rule (issue 14)
                  "ncu-h200-decode-splits1-2026-12-01.json": 12,
                  # the eager-chain training hold-out: no bundled-kernel shape (its 6 eager steps are
                  # pinned in tests/test_reconcile_train_holdout.py)
                  "ncu-h200-train-eager-holdout1-2026-12-02.json": 0,
                  "ncu-h100-train-eager-holdout2-2026-12-05.json": 0,
                  "ncu-h200-train-eager-holdout2-2026-12-06.json": 0,
                  # the hold-out of the causal LPT launch (head-grouped:G): 16 forwards, 4 steps
                  "ncu-h200-lpt-holdout1-2026-12-02.json": 20,
                  # the HEAD_DIM 256 training hold-outs (Gemma's layers), after the spill-free 256 tiles
                  "ncu-h200-train-d256-holdout1-2026-12-03.json": 7, "ncu-h200-train-d256-holdout2-2026-12-03.json": 6,
                  # hold-outs measured 2026-12-05: the Gluon prefill (22 shapes) and long causal steps (7)
                  "ncu-h200-gluon-holdout1-2026-12-05.json": 22, "ncu-h200-long-train-holdout1-2026-12-05.json": 7,
                  # the diagnostic that followed (16k-128k tokens, calibration data)
                  "ncu-h200-long-train-probe1-2026-12-05.json": 4,
                  # the hold-out of the dQ kernel's reverse tile order (12 causal steps, 2k-164k tokens)
                  "ncu-h200-dq-order-holdout1-2026-12-05.json": 12}


def test_the_receipts_are_committed():
    """The receipts are data the tests stand on: a missing one fails here, never skips (the
    parametrised tests below would otherwise lose their cases silently)."""
    assert len(ALL) >= 15, [p.name for p in ALL]
    for path in (CALIBRATION, HOLDOUT1, HOLDOUT, HOLDOUT2_DP):
        assert path in ALL, path.name


def test_the_shared_reconciliation_is_the_direct_one(reconciled_receipt):
    """conftest's ``reconciled_receipt`` (computed once per session, pickled between xdist workers) gives
    what ``reconcile(Measurement.load(...))`` gives, field for field, and a fresh copy per call."""
    from iomodel.reconcile import reconcile

    name = "ncu-h200-edge-probe1-tma-2026-12-01.json"  # small: 5 shapes, 0.05 s
    direct = reconcile(Measurement.load(RECEIPTS_DIR / name))
    shared = reconciled_receipt(name)
    assert shared.to_dict() == direct.to_dict() and shared.summary() == direct.summary()
    assert [(r.id, r.notes, r.explanation()) for r in shared.rows] == [(r.id, r.notes, r.explanation()) for r in direct.rows]
    assert reconciled_receipt(name) is not shared


def _fractions(rec):
    return {(s["impl"], s["level"], s["which"]): (s["within"], s["shapes"]) for s in rec.summary()}


@pytest.fixture(scope="module", params=ALL, ids=lambda p: p.name)
def any_rec(request, reconciled_receipt):
    rec = reconciled_receipt(request.param.name)
    rec.receipt_name = request.param.name
    return rec


def test_receipt_is_complete_and_every_shape_outside_is_explained(any_rec):
    m = any_rec.measurement
    assert m.kind == "ncu" and m.command and m.created
    for key in ("device", "driver", "torch", "triton", "ncu"):
        assert m.environment.get(key), key
    tiled = len([r for r in any_rec.rows if r.impl == "tiled" and r.error is None])
    assert tiled >= FEATURE_SHAPES.get(any_rec.receipt_name, 30)
    for row, _ in any_rec.outside():
        assert row.explanation() and not row.explanation().startswith("no model")


def test_decode_kernels_write_more_to_dram_than_into_l2_on_the_first_holdout(reconciled_receipt):
    """The measured residue the decode misses rest on: the unsplit-output decode kernel of
    b4-h16-kv16 d64 (partials 112 KiB) wrote more to DRAM than every sector written into L2
    while it ran; no prefill kernel of the receipt does."""
    rec = reconciled_receipt(HOLDOUT1.name)
    flagged = {r.id for r in rec.rows if any("more to DRAM than all sectors" in n for n in r.notes)}
    assert "b4-h16-kv16-d64-bf16-q1-k16384-nc-tiled" in flagged
    assert all(r.spec.phase == "decode" for r in rec.rows if r.id in flagged)


@pytest.fixture(scope="module")
def holdout(reconciled_receipt):
    return reconciled_receipt(HOLDOUT.name)


def test_holdout_bundled_kernel_reads_and_l2_within_tolerance(holdout):
    """Acceptance on the fourth hold-out: DRAM reads within ±10 % and the L2 level
    (SM-side crossbar bytes) within ±15 % on at least 90 % of the bundled kernel's shapes."""
    f = _fractions(holdout)
    for level, which in (("HBM", "read"), ("L2", "read"), ("L2", "write")):
        within, shapes = f[("tiled", level, which)]
        assert within >= 0.9 * shapes, (level, which, within, shapes)


@pytest.mark.parametrize(
    "name, counts",
    [
        # the calibration receipt (44 shapes). Round 1 (pure LRU, whole-KV-head items): tiled HBM
        # read 30/32, write 20/32; eager write 10/12. Round 2 (chunked K/V streams, written lines
        # one copy, dirty-line survival): read 32/32, write 22/32. Round 3 (survival off): write
        # 18/32. Session 2 (24-way set-associative L2): write 16/32; its multi-pass DRAM writes
        # carry the replay residue (ncu-h200-calib-dram-* re-measures these shapes in one pass).
        # The L2 level compares lts__t_sectors_srcunit_tex_op_* here (no SM-side crossbar bytes
        # in the receipt): the L2 merges simultaneous lookups of one sector, so reads fall short
        # of the requests on small one-wave shapes (18/32).
        (CALIBRATION.name, {"tHr": (31, 32), "tHw": (17, 32), "tLr": (18, 32), "tLw": (32, 32), "bHr": (12, 12), "bHw": (10, 12)}),
        # the first hold-out (40 shapes): its HBM writes miss the acceptance (16/33 < 90 %): the
        # six decode shapes (the decode kernel writes 1-2.5 MiB more than the model's stores
        # explain, most of it beyond every sector written into L2 during the kernel: see
        # foreign_write_notes) and small prefill write-backs (1-3 MiB, > 10 %). The L2 level
        # compares the SM-side crossbar bytes.
        (HOLDOUT1.name, {"tHr": (33, 33), "tHw": (17, 33), "tLr": (33, 33), "tLw": (33, 33), "bHr": (7, 7), "bHw": (6, 7)}),
        # multi-pass DRAM bytes (replay residue in the writes)
        ("ncu-h200-holdout2-2026-11-29.json", {"tHr": (31, 31), "tHw": (16, 31), "tLr": (31, 31), "tLw": (30, 31), "bHr": (5, 6), "bHw": (4, 6)}),
        # the same shapes, DRAM bytes from a single-pass run (dram_pass)
        ("ncu-h200-holdout2-dp-2026-11-29.json", {"tHr": (31, 31), "tHw": (27, 31), "tLr": (31, 31), "tLw": (30, 31), "bHr": (5, 6), "bHw": (5, 6)}),
        # hold-out 3 (acceptance evidence of session 1, calibration data since session 2's l2_ways fit)
        ("ncu-h200-holdout3-2026-11-29.json", {"tHr": (30, 30), "tHw": (27, 30), "tLr": (30, 30), "tLw": (30, 30), "bHr": (2, 2), "bHw": (2, 2)}),
        # the calibration shapes of h200 + h200-holdout re-measured in one pass (DRAM metrics only);
        # reads 64/65 before the measured read capacity (2026-12-04), 65/65 with it, 64/65 with the forward's own
        # constants (2026-12-06, writes 63 -> 62/65)
        ("ncu-h200-calib-dram-2026-11-29.json", {"tHr": (64, 65), "tHw": (62, 65), "bHr": (19, 19), "bHw": (16, 19)}),
        # the fourth hold-out, first run (DRAM-only pass could autotune other tiles; first-kernel residue)
        ("ncu-h200-holdout4-2026-11-29.json", {"tHr": (31, 31), "tHw": (27, 31), "tLr": (31, 31), "tLw": (31, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        # its shapes twice more, DRAM metrics only, each run autotuning afresh
        ("ncu-h200-holdout4-repeat-a-2026-11-29.json", {"tHr": (31, 31), "tHw": (28, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        ("ncu-h200-holdout4-repeat-b-2026-11-29.json", {"tHr": (31, 31), "tHw": (29, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        # second run: the DRAM-only pass pinned to the full run's configs (first-kernel residue left)
        ("ncu-h200-holdout4-pinned-2026-11-29.json", {"tHr": (31, 31), "tHw": (28, 31), "tLr": (31, 31), "tLw": (31, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        ("ncu-h200-holdout4-repeat-pinned-a-2026-11-29.json", {"tHr": (31, 31), "tHw": (30, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        ("ncu-h200-holdout4-repeat-pinned-b-2026-11-29.json", {"tHr": (31, 31), "tHw": (29, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        # third run, the acceptance evidence: pinned DRAM pass and a sacrificial first kernel per process
        ("ncu-h200-holdout4-flush-2026-11-29.json", {"tHr": (31, 31), "tHw": (29, 31), "tLr": (31, 31), "tLw": (31, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        ("ncu-h200-holdout4-flush-repeat-a-2026-11-29.json", {"tHr": (31, 31), "tHw": (28, 31), "bHr": (2, 2), "bHw": (2, 2)}),
        ("ncu-h200-holdout4-flush-repeat-b-2026-11-29.json", {"tHr": (31, 31), "tHw": (28, 31), "bHr": (2, 2), "bHw": (2, 2)}),
    ],
)
def test_receipts_pin_the_counts_the_model_reaches(reconciled_receipt, name, counts):
    """Regression guard: within-tolerance counts on each receipt under the current model."""
    f = _fractions(reconciled_receipt(name))
    keys = {"tHr": ("tiled", "HBM", "read"), "tHw": ("tiled", "HBM", "write"), "tLr": ("tiled", "L2", "read"),
            "tLw": ("tiled", "L2", "write"), "bHr": ("baseline", "HBM", "read"), "bHw": ("baseline", "HBM", "write")}
    assert {k: f[v] for k, v in keys.items() if v in f} == counts


def test_single_pass_dram_bytes_remove_the_replay_residue():
    """Same 37 shapes, same kernels: the single-pass DRAM run writes less than the multi-pass one
    on the decode shapes (the kernel-replay restore residue), and reads the same."""
    a = {s.id: s for s in Measurement.load(RECEIPTS_DIR / "ncu-h200-holdout2-2026-11-29.json").shapes}
    b = {s.id: s for s in Measurement.load(RECEIPTS_DIR / "ncu-h200-holdout2-dp-2026-11-29.json").shapes}
    dec = [i for i in a if a[i].spec.phase == "decode" and a[i].error is None and b[i].error is None]
    assert dec
    assert sum(b[i].quantity("dram_write_bytes") for i in dec) < 0.8 * sum(a[i].quantity("dram_write_bytes") for i in dec)
    for i in dec:
        ra, rb = a[i].quantity("dram_read_bytes"), b[i].quantity("dram_read_bytes")
        assert abs(ra - rb) <= 0.02 * ra


def test_holdout_bundled_kernel_writes_within_tolerance(holdout):
    """DRAM writes within ±10 % or 1 MiB on at least 90 % of the shapes (31/31 on the receipt of
    2026-11-29, 20/31 on ±10 % alone), and every write within only by the floor is either an
    immaterial write-back (under 0.5 % of the shape's DRAM bytes) or a miss under 15 % on a shape
    whose own three measurements (this run and the two pinned repeats) spread by 10 % or more; under the forward's own
    constants (2026-12-06; 29/31 within) one more, B1 H32 KV8 d128 2k causal, is within only by the floor with neither
    excuse: predicted 0.1 MiB, measured 1.05 MiB (the model keeps more of its O dirty in L2 to the kernel's end)."""
    within, shapes = _fractions(holdout)[("tiled", "HBM", "write")]
    assert within >= 0.9 * shapes, (within, shapes)
    runs = [{s.id: s for s in Measurement.load(RECEIPTS_DIR / f"ncu-h200-holdout4-flush{x}-2026-11-29.json").shapes}
            for x in ("", "-repeat-a", "-repeat-b")]
    noisy = 0
    for r in holdout.rows:
        if r.impl != "tiled" or holdout.within_relative(r, "HBM", "write") or not holdout.within(r, "HBM", "write"):
            continue
        h = r.level("HBM")
        if h.measured_write < 0.005 * (h.measured_read + h.measured_write):
            continue
        w = [run[r.id].quantity("dram_write_bytes") for run in runs]
        if r.id == "b1-h32-kv8-d128-fp16-q2048-k2048-tl-tiled":
            assert (round(h.predicted_write / 2**20, 2), round(h.measured_write / 2**20, 2)) == (0.09, 1.05)
            continue
        assert abs(h.predicted_write - h.measured_write) < 0.15 * h.measured_write, r.id
        assert (max(w) - min(w)) >= 0.10 * min(w), (r.id, w)
        noisy += 1
    # 3 noisy misses under the constants before 2026-12-06; under the forward's own none: of those three, the 1k and 2.2k
    # prefills now fall within ±10 % or, B1 H16 d128 3,328 tokens (1.6x predicted), outside, as does the split-KV decode
    # below (predicted 1.9 MiB, measured 246 KiB; 1.2 MiB before, within by the floor)
    assert noisy == 0
    outside = sorted(r.id for r in holdout.rows if r.impl == "tiled" and not holdout.within(r, "HBM", "write"))
    assert outside == ["b1-h16-kv16-d128-bf16-q3328-k3328-nc-tiled", "b2-h28-kv4-d128-fp16-q8-k20000-br-tiled"]
    # the tool lists those comparisons itself, with their numbers (report and JSON)
    floor = holdout.floor_only()
    assert len(floor) == 6  # 11 before 2026-12-06
    assert all(what == "HBM write" and "the gap is" in why for _, what, why in floor)
    from iomodel.report.reconcile_md import markdown

    md = markdown(holdout)
    assert "## Within only by the absolute floor of 1.0 MiB (6)" in md
    assert ("`b1-h32-kv8-d128-fp16-q2048-k2048-tl-tiled` (HBM write): predicted 94.6 KiB, measured 1.0 MiB "
            "(measured 11.3× predicted); the gap is 975.7 KiB, 3.80% of the 25.1 MiB the shape moved at HBM") in md
    assert ("`b1-h64-kv8-d128-bf16-q1-k131072-nc-tiled` (HBM write): predicted 0 B, measured 321.2 KiB "
            "(none predicted); the gap is 321.2 KiB, 0.06% of the 513.9 MiB the shape moved at HBM") in md
    assert "-100%" not in md and "−100" not in md
    assert len(holdout.to_dict()["floor_only"]) == 6
    outside = [(r, bad) for r, bad in holdout.outside() if r.impl == "tiled"]
    assert len(outside) == shapes - within
    for r, bad in outside:  # every HBM gap carries the fully associative LRU's prediction beside it
        assert any(n.startswith("replacement-policy band") for n in r.notes), r.id


def test_holdout_eager_chain_within_tolerance_up_to_8k(holdout):
    rows = [r for r in holdout.rows if r.impl == "baseline" and r.spec.seqlen_k <= 8192 and r.error is None]
    assert rows, "the hold-out sweep has eager-chain shapes"
    bad = [r.id for r in rows for w in ("read", "write") if holdout.within(r, "HBM", w) is False]
    assert not bad, bad


def test_first_kernel_residue_and_its_cure():
    """Before session 2's sacrificial kernel, every single-pass kernel with more DRAM writes than
    L2 writes (the foreign-write residue) was the first shape of its ncu process (batch position
    0); with it, no shape of the three hold-out 4 runs has any, and the sacrificial 512 MiB read,
    a kernel that writes nothing, wrote 2.0-2.4 MiB back in every process."""
    for name in ("holdout2-dp", "holdout3", "holdout4", "holdout4-pinned"):
        m = Measurement.load(RECEIPTS_DIR / f"ncu-h200-{name}-2026-11-29.json")
        bs = m.settings["batch_size"]
        flagged = [i for i, s in enumerate(m.shapes) if s.error is None and foreign_write_notes(s)]
        assert flagged and all(i % bs == 0 for i in flagged), (name, flagged)
    for x in ("", "-repeat-a", "-repeat-b"):
        m = Measurement.load(RECEIPTS_DIR / f"ncu-h200-holdout4-flush{x}-2026-11-29.json")
        assert not [s.id for s in m.shapes if s.error is None and foreign_write_notes(s)]
        fl = m.settings["flush_kernels"]
        assert fl and all(2.0 * 2**20 < f["dram_write_bytes"] < 2.45 * 2**20 for f in fl), fl


def test_holdout4_repeats_on_the_same_configs_bound_the_measurement_noise():
    """Hold-out 4's shapes profiled three times on the same configs (the acceptance run and two
    DRAM-only repeats pinned to it): reads repeat within 1 %; of the 18 writes of 1 MiB or more
    the median spread is about 1 %, but three near the L2 capacity edge spread by 10-30 %
    (b8-h8 1k wrote 6.48, 5.38 and 5.02 MiB): there the ±10 % write tolerance is tighter than
    the measurement's own repeatability."""
    runs = [Measurement.load(RECEIPTS_DIR / f"ncu-h200-holdout4-flush{x}-2026-11-29.json")
            for x in ("", "-repeat-a", "-repeat-b")]
    by_id = [{s.id: s for s in m.shapes} for m in runs]
    spreads = {}
    for i, s in by_id[0].items():
        assert all(b[i].config.get(k) == s.config.get(k) for b in by_id[1:]
                   for k in ("block_m", "block_n", "num_warps", "num_stages", "tile_order", "num_splits")), i
        r = [b[i].quantity("dram_read_bytes") for b in by_id]
        assert max(r) - min(r) <= 0.01 * min(r), i
        w = [b[i].quantity("dram_write_bytes") for b in by_id]
        if min(w) >= 2**20:
            spreads[i] = (max(w) - min(w)) / min(w)
    assert len(spreads) == 18
    assert sorted(spreads.values())[9] < 0.02
    assert sorted(i for i, v in spreads.items() if v >= 0.10) == [
        "b1-h16-kv16-d128-bf16-q3328-k3328-nc-tiled", "b1-h48-kv8-d128-bf16-q2200-k2200-nc-tiled",
        "b8-h8-kv8-d128-fp16-q1024-k1024-nc-tiled"]
    assert 0.25 < max(spreads.values()) < 0.35
    assert runs[1].settings["pinned_configs"].endswith("ncu-h200-holdout4-flush-2026-11-29.json")


#: In reverse name order, against ``any_rec``'s forward order: under xdist the two tests of one receipt then
#: seldom run at once on two workers, one of them idle on the other's reconciliation (receipt_cache.py).
_REPORTS = sorted((p for p in RECEIPTS_DIR.glob("reconcile-h[12]00-*.md")
                   if (RECEIPTS_DIR / p.name.replace("reconcile-", "ncu-").replace(".md", ".json")).exists()),
                  reverse=True)


@pytest.mark.parametrize("report", _REPORTS, ids=[p.name for p in _REPORTS])
def test_committed_reconcile_report_is_the_current_models(report, reconciled_receipt):
    """Each committed ``receipts/reconcile-h200-*.md`` (and ``reconcile-h100-*.md``) of an ncu receipt is what ``iomodel reconcile
    RECEIPT --markdown`` writes under the current model: a model change that moves a count must
    regenerate the reports (the README calls them the reconciliation under the current model)."""
    from iomodel.report.reconcile_md import markdown

    rec = reconciled_receipt(report.name.replace("reconcile-", "ncu-").replace(".md", ".json"))
    assert markdown(rec).rstrip("\n") == report.read_text().rstrip("\n"), f"regenerate {report.name}"


def test_the_capacity_edge_label_is_what_the_receipts_measured(reconciled_receipt):
    """The forward's ``rough`` read label (iomodel.cache.predict.forward_read_quality: a resident wave's K/V working set
    at FWD_EDGE_WORKING_SET times the read capacity) holds what iomodel/cache/params.py says of the committed forward
    runs (prefill, no backward): in the band the bundled kernel and SDPA cuDNN read FWD_EDGE_RATIO of the model,
    FWD_EDGE_RUNS within ±10 % or 1 MiB; outside it the bundled kernel and cuDNN held as FWD_EDGE_OUTSIDE_RUNS says
    (windowed layers are not labelled: they count as outside; cuDNN's causal HEAD_DIM 128 forward beyond 86k tokens read
    5.5-25x the model on the H100 and 7.9-19.3x on the H200: those runs are ``not a prediction`` since 2026-12-06's
    twentieth session, iomodel.cache.predict.forward_drift_quality, FWD_DRIFT_RUNS of them at FWD_DRIFT_RATIO)."""
    from iomodel.cache.params import FWD_DRIFT_RATIO, FWD_DRIFT_RUNS, FWD_EDGE_OUTSIDE_RUNS, FWD_EDGE_RATIO, FWD_EDGE_RUNS

    runs = {i: {"rough": [], "predicted": [], "not a prediction": []} for i in ("tiled", "sdpa-cudnn", "sdpa-flash")}
    for path in ALL:
        rec = reconciled_receipt(path.name)
        for r in rec.rows:
            if r.impl not in runs or r.spec.backward or r.spec.phase != "prefill" or r.l2 is None:
                continue
            h = r.level("HBM")
            if h is None or not h.predicted_read or h.measured_read is None:
                continue
            runs[r.impl][r.l2.read_qualities["fwd kernel"]].append(
                (h.measured_read / h.predicted_read, bool(rec.within(r, "HBM", "read"))))
    band = runs["tiled"]["rough"] + runs["sdpa-cudnn"]["rough"]
    assert ((len(runs["tiled"]["rough"]), sum(ok for _, ok in runs["tiled"]["rough"])),
            (len(runs["sdpa-cudnn"]["rough"]), sum(ok for _, ok in runs["sdpa-cudnn"]["rough"]))) == FWD_EDGE_RUNS
    assert (round(min(x for x, _ in band), 3), round(max(x for x, _ in band), 3)) == FWD_EDGE_RATIO
    assert ((len(runs["tiled"]["predicted"]), sum(ok for _, ok in runs["tiled"]["predicted"])),
            (len(runs["sdpa-cudnn"]["predicted"]), sum(ok for _, ok in runs["sdpa-cudnn"]["predicted"]))
            ) == FWD_EDGE_OUTSIDE_RUNS
    drift = runs["tiled"]["not a prediction"] + runs["sdpa-cudnn"]["not a prediction"] + runs["sdpa-flash"]["not a prediction"]
    assert (len(drift), sum(ok for _, ok in drift)) == (FWD_DRIFT_RUNS, 0)
    assert (round(min(x for x, _ in drift), 3), round(max(x for x, _ in drift), 3)) == FWD_DRIFT_RATIO
