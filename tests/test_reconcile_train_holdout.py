"""The training hold-outs (issue 11, item 5) and the sliding-window receipt (issue 13): validation receipts.

``receipts/ncu-h200-train-holdout1-2026-12-01.json`` (sweeps/h200-train-holdout1.toml, 38
bundled training steps and 6 eager steps, chosen and committed before they were measured and
after the last change to the models they test). Its counts are pinned: a change of the model
that moves them must say so here. Tolerances: DRAM ±10 % or 1 MiB; L2 ±15 % or 1 MiB.

2026-12-06: every forward launch (the training steps' ``_attn_fwd`` among them) is predicted with the forward's own
L2 constants (iomodel.cache.params.FORWARD_L2), chosen with every receipt here seen: each hold-out's counts under them
are calibration since, no longer validation. Where a count moved, its comment keeps the value "as measured" (the
validation result, under the constants before) beside the one under the forward's own constants.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from receipt_cache import within_counts  # noqa: E402


HOLDOUT1, HOLDOUT2 = "ncu-h200-train-holdout1-2026-12-01.json", "ncu-h200-train-holdout2-2026-12-01.json"
WINDOW, SERVING = "ncu-h200-window1-2026-12-01.json", "ncu-h200-serving1-2026-12-01.json"
HOLDOUT3, RAGGED1 = "ncu-h200-train-holdout3-2026-12-01.json", "ncu-h200-ragged1-2026-12-01.json"
RAGGED2 = "ncu-h200-ragged2-2026-12-01.json"
SERVING_FUSED, GRID_ORDER = "ncu-h200-serving1-fused-2026-12-01.json", "ncu-h200-grid-order1-2026-12-01.json"
SPLIT1 = "ncu-h200-train-split1-2026-12-01.json"
WINDOW2 = "ncu-h200-window2-2026-12-01.json"
DECODE_SPLITS1 = "ncu-h200-decode-splits1-2026-12-01.json"
HOLDOUT4 = "ncu-h200-train-holdout4-2026-12-02.json"


@pytest.fixture(scope="module")
def rec_of(reconciled_receipt):
    """``rec_of(name)``: the reconciliation of one committed receipt (once per test session: conftest.py)."""
    return reconciled_receipt


def _assert_counts(rec, impl, level, read, write):
    assert _counts(rec, impl, level, "read") == read
    assert _counts(rec, impl, level, "write") == write


@pytest.fixture(scope="module")
def rec(rec_of):
    return rec_of(HOLDOUT1)


def _assert_each_within_10_percent(rows):
    """Every row's DRAM reads and writes within ±10 % of the measurement, without the 1 MiB floor."""
    for r in rows:
        lv = r.level("HBM")
        assert abs(lv.predicted_read - lv.measured_read) <= 0.1 * lv.measured_read
        assert abs(lv.predicted_write - lv.measured_write) <= 0.1 * lv.measured_write


def _counts(rec, impl, level, which):
    return within_counts(rec, level, which, impl)


@pytest.mark.parametrize("impl, level, read, write", [
    # the eager chain, every kernel autograd launches (up to 8k tokens): 6/6
    ("baseline", "HBM", (6, 6), (6, 6)),
    # the bundled step: reads 95 %, writes 84 % (the 6 misses: 4 causal GQA HEAD_DIM 128 steps
    # whose _bwd_dkdv makes 1.2-2.2x the modelled L2 requests, one MHA d64 causal +14 % write, and
    # a GQA d64 step writing 1.8 MiB whose dK/dV writes back 1.2 MiB more than predicted). Since
    # DQ_WRITE_SHARE (fitted on this receipt among six) this receipt is CALIBRATION data. Under the
    # forward's own constants (2026-12-06) writes 31/38, 82 % (32/38 before): the MHA d64 causal step is
    # within (+11 %), and two non-causal steps miss, an MHA d64 one 1.4 MiB under and a GQA d128 one
    # 1.2 MiB over the prediction
    ("tiled", "HBM", (36, 38), (31, 38)),
    ("tiled", "HBM _attn_fwd", (38, 38), (37, 38)),  # reads 37/38 before the measured read capacity (2026-12-04)
    ("tiled", "HBM _bwd_preprocess", (38, 38), (38, 38)),
    ("tiled", "HBM _bwd_dkdv", (35, 38), (30, 38)),
    ("tiled", "HBM _bwd_dq", (38, 38), (38, 38)),
    ("tiled", "L2", (38, 38), (34, 38)),
    ("tiled", "L2 _bwd_dkdv", (38, 38), (24, 38)),
    ("tiled", "L2 _bwd_dq", (38, 38), (38, 38)),
])
def test_holdout_counts(rec_of, impl, level, read, write):
    _assert_counts(rec_of(HOLDOUT1), impl, level, read, write)


def test_step_misses_are_the_named_ones(rec):
    missed = sorted(r.id for r in rec.rows if r.impl == "tiled"
                    and not (rec.within(r, "HBM", "read") and rec.within(r, "HBM", "write")))
    # under the constants before 2026-12-06 "b2-h16-kv16-d64-bf16-q3072-k3072-tl-tiled-bwd" missed in place of the
    # two non-causal steps b8-h16-kv16-d64 q768 and b2-h16-kv2-d128 q2048
    assert missed == sorted([
        "b2-h32-kv8-d128-bf16-q3000-k3000-tl-tiled-bwd",
        "b1-h40-kv8-d128-bf16-q4096-k4096-br-tiled-bwd",
        "b1-h64-kv8-d128-bf16-q2048-k2048-tl-tiled-bwd",
        "b1-h32-kv8-d128-bf16-q2048-k2048-tl-tiled-bwd",
        "b4-h24-kv8-d64-fp16-q1024-k1024-nc-tiled-bwd",
        "b8-h16-kv16-d64-bf16-q768-k768-nc-tiled-bwd",
        "b2-h16-kv2-d128-bf16-q2048-k2048-nc-tiled-bwd",
    ])




@pytest.mark.parametrize("level, read, write", [
    # the second hold-out, after the spill-free dK/dV loop (14 steps, 9 of them causal GQA)
    # reads 12/14 before the measured read capacity (2026-12-04); writes 14/14 as measured, 12/14 under the
    # forward's own constants (2026-12-06, calibration since): a causal GQA d64 step 1.6 MiB over (1.28x) and a
    # non-causal MHA d128 step 1.6 MiB under (0.89x; its forward 1.0 MiB under)
    ("HBM", (13, 14), (12, 14)),
    ("L2 _bwd_dkdv", (14, 14), (14, 14)),
    ("L2", (14, 14), (14, 14)),
])
def test_second_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT2), "tiled", level, read, write)


def test_second_holdout_gqa_d128_dkdv_writes_are_exact(rec_of):
    """No register spills: the dK/dV kernel of every GQA HEAD_DIM 128 step writes exactly dK and dV
    (the first hold-out measured 1.2-2.2x with the nested-loop kernel)."""
    rows = [r for r in rec_of(HOLDOUT2).rows if r.spec.head_dim == 128 and r.spec.group > 1]
    assert len(rows) == 9
    for r in rows:
        lv = r.level("L2 _bwd_dkdv")
        assert lv.measured_write == lv.predicted_write == 2 * r.spec.batch * r.spec.kv_heads * r.spec.seqlen_k * 128 * 2


# --- the sliding-window receipt (issue 13, item 4): sweeps/h200-window1.toml, 16 bundled-kernel
# shapes (forward, decode, training steps) and 3 eager-chain shapes, committed before measurement


@pytest.mark.parametrize("impl, level, read, write", [
    ("baseline", "HBM", (3, 3), (3, 3)),
    # misses as measured: Mistral-like 32k with a 4096 window reads 0.85x the prediction (GQA K/V re-fetch
    # predicted at the L2 capacity edge, issue 12's kind); a B=16 decode wrote 2.9 MiB, 19 KiB predicted. Under the
    # forward's own constants (2026-12-06, calibration since) the 32k read is within (1.10x), and the decode's
    # writes miss (2.9 MiB, none predicted)
    ("tiled", "HBM", (16, 16), (15, 16)),
    ("tiled", "L2", (16, 16), (16, 16)),
])
def test_window_counts(rec_of, impl, level, read, write):
    _assert_counts(rec_of(WINDOW), impl, level, read, write)


# --- the paged KV cache receipt (issue 13, item 4): sweeps/h200-serving1.toml, 10 decode shapes
# over a paged cache (pages 16/64/256), committed before measurement


@pytest.mark.parametrize("level, read, write", [("HBM", (10, 10), (10, 10)), ("L2", (10, 10), (10, 10))])
def test_paged_counts(rec_of, level, read, write):
    _assert_counts(rec_of(SERVING), "tiled", level, read, write)


#: The training sweeps before hold-out 5, in the order they were chosen (train1 first).
EARLIER_TRAINING = ("h200-train1", "h200-train-holdout1", "h200-train-holdout2", "h200-train-holdout3",
                    "h200-train-split1", "h200-train-holdout4")


def _sweep_ids(*names: str) -> list[str]:
    """The step ids of ``sweeps/<name>.toml`` for each name, in order."""
    from iomodel.measure.sweep import load_sweep

    sweeps = Path(__file__).resolve().parents[1] / "sweeps"
    return [s.id for name in names for s in load_sweep(sweeps / f"{name}.toml").shapes]


def _assert_new_steps(sweep: str, earlier: tuple[str, ...], count: int = 32) -> None:
    """``sweeps/<sweep>.toml`` has ``count`` distinct bundled training steps, none of them a step
    (same id: batch, heads, KV heads, HEAD_DIM, dtype, lengths, mask) of the ``earlier`` sweeps."""
    new = _sweep_ids(sweep)
    assert len(new) == len(set(new)) == count
    assert all(i.endswith("-tiled-bwd") for i in new)
    assert not set(new) & set(_sweep_ids(*earlier))


@pytest.mark.parametrize("sweep, earlier", [
    # hold-out 3 was chosen after the first two hold-outs and the calibration sweep (train1)
    ("h200-train-holdout3", ("h200-train1", "h200-train-holdout1", "h200-train-holdout2")),
    # hold-out 4 (32 steps on the TMA backward): after those, hold-out 3 and the split hold-out
    ("h200-train-holdout4", ("h200-train1", "h200-train-holdout1", "h200-train-holdout2", "h200-train-holdout3",
                             "h200-train-split1")),
    # hold-out 5: chosen after DQ_WRITE_SHARE was fitted on the six earlier training receipts
    ("h200-train-holdout5", EARLIER_TRAINING),
    # hold-out 6: chosen after the LPT launch and the padded-HEAD_DIM occupancy, the first hold-out of
    # the current model; the LPT hold-out and the window sweeps hold earlier training steps too
    ("h200-train-holdout6", EARLIER_TRAINING + ("h200-train-holdout5", "h200-lpt-holdout1", "h200-window1", "h200-window2")),
    # hold-out 7: chosen after the dK/dV loop order (and its calibration sweep, h200-train-order-calib1)
    ("h200-train-holdout7", EARLIER_TRAINING + ("h200-train-holdout5", "h200-train-holdout6", "h200-lpt-holdout1",
                                                "h200-window1", "h200-window2", "h200-train-d256-holdout1",
                                                "h200-train-d256-holdout2", "h200-train-order-calib1")),
])
def test_holdout_repeats_no_earlier_training_shape(sweep, earlier):
    _assert_new_steps(sweep, earlier)


def test_gluon_dkdv_holdout_repeats_no_step_of_any_earlier_sweep():
    """The hold-out after the Gluon dK/dV launch (sweeps/h200-gluon-dkdv-holdout1.toml, 32 HEAD_DIM 128 steps)
    repeats no step of any sweep committed before it, training or not."""
    sweeps = Path(__file__).resolve().parents[1] / "sweeps"
    earlier = sorted(p.stem for p in sweeps.glob("h200-*.toml") if p.stem != "h200-gluon-dkdv-holdout1")
    _assert_new_steps("h200-gluon-dkdv-holdout1", tuple(earlier))


#: every sweep committed before the ninth training hold-out (2026-12-05)
BEFORE_HOLDOUT9 = (
    "h200-calib-dram", "h200-decode-splits1", "h200-dkdv-split-calib1", "h200-dq-order-holdout1", "h200-edge-probe1",
    "h200-gluon-dkdv-holdout1", "h200-gluon-holdout1", "h200-grid-order1", "h200-holdout", "h200-holdout2-dp",
    "h200-holdout2", "h200-holdout3", "h200-holdout4-repeat", "h200-holdout4", "h200-long-split-probe1",
    "h200-long-train-holdout1", "h200-long-train-probe1", "h200-lpt-holdout1", "h200-peers-calib1",
    "h200-peers-holdout1", "h200-ragged1", "h200-ragged2", "h200-readcap-holdout1", "h200-replay-probe",
    "h200-serving1", "h200-train-d256-holdout1", "h200-train-d256-holdout2", "h200-train-eager-holdout1",
    "h200-train-holdout1", "h200-train-holdout2", "h200-train-holdout3", "h200-train-holdout4", "h200-train-holdout5",
    "h200-train-holdout6", "h200-train-holdout7", "h200-train-order-calib1", "h200-train-split1", "h200-train1",
    "h200-window1", "h200-window2")


def _draw_module():
    """sweeps/draw_training_holdout.py as a module (the sweeps folder is not a package)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("draw_training_holdout", root / "sweeps" / "draw_training_holdout.py")
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    return draw


def _assert_seeds_draw(name, seed, before, count=32):
    """Assert that sweeps/<name>.toml holds exactly the ``count`` steps sweeps/draw_training_holdout.py draws from
    ``seed`` beside the sweeps ``before`` it, in order; return those steps ((comment, fields) pairs)."""
    from iomodel.measure.sweep import parse_sweep

    draw = _draw_module()
    steps = draw.draw(seed, count, set(_sweep_ids(*before)))
    assert [draw._id(parse_sweep, s) for _, s in steps] == _sweep_ids(name)
    return steps


def test_ninth_holdout_repeats_no_earlier_step_and_is_the_seeds_draw():
    """sweeps/h200-train-holdout9.toml: 32 new steps, and exactly what sweeps/draw_training_holdout.py draws from its
    seed beside the sweeps committed before it (so no step was picked or dropped by hand)."""
    _assert_new_steps("h200-train-holdout9", BEFORE_HOLDOUT9)
    steps = _assert_seeds_draw("h200-train-holdout9", 2026120509, BEFORE_HOLDOUT9)
    # the mix the rules gave this seed: 23 HEAD_DIM 128 steps (the Gluon dK/dV launch), 5 at 64, 2 at 256, 80 and 96
    d = sorted(s["head_dim"] for _, s in steps)
    assert (d.count(128), d.count(64), d.count(256), d.count(80), d.count(96)) == (23, 5, 2, 1, 1)


#: every sweep committed before the tenth training hold-out (2026-12-05, after commit 2981147)
BEFORE_HOLDOUT10 = BEFORE_HOLDOUT9 + ("h200-gluon64-holdout1", "h200-train-holdout9")


def test_tenth_holdout_repeats_no_earlier_step_and_is_the_seeds_draw():
    """sweeps/h200-train-holdout10.toml (drawn after the four-warpgroup HEAD_DIM 64 forward and the kernel-fixed
    programs per SM, commit 2981147): 32 new steps, exactly what sweeps/draw_training_holdout.py draws from seed
    2026120510 beside every sweep committed before it; the rules gave this seed 19 HEAD_DIM 128 steps, 4 at 64, 6 at
    256, 2 at 80 and 1 at 96, and 2 non-causal steps."""
    _assert_new_steps("h200-train-holdout10", BEFORE_HOLDOUT10)
    steps = _assert_seeds_draw("h200-train-holdout10", 2026120510, BEFORE_HOLDOUT10)
    d = sorted(s["head_dim"] for _, s in steps)
    assert (d.count(128), d.count(64), d.count(256), d.count(80), d.count(96)) == (19, 4, 6, 2, 1)
    assert sum(not s["causal"] for _, s in steps) == 2


#: every sweep committed before the eleventh training hold-out (2026-12-05, the model and kernels of 2981147)
BEFORE_HOLDOUT11 = BEFORE_HOLDOUT10 + ("h200-train-holdout10",)


def test_eleventh_holdout_repeats_no_earlier_step_and_is_the_seeds_draw():
    """sweeps/h200-train-holdout11.toml (48 steps, drawn after hold-out 10 missed the write bar, with the model and
    kernels unchanged since 2981147): new steps, exactly what sweeps/draw_training_holdout.py draws from seed
    2026120511 beside every sweep committed before it: 23 HEAD_DIM 128 steps, 16 at 64, 4 at 256, 2 at 80 and 3 at 96;
    14 non-causal."""
    _assert_new_steps("h200-train-holdout11", BEFORE_HOLDOUT11, count=48)
    steps = _assert_seeds_draw("h200-train-holdout11", 2026120511, BEFORE_HOLDOUT11, count=48)
    d = sorted(s["head_dim"] for _, s in steps)
    assert (d.count(128), d.count(64), d.count(256), d.count(80), d.count(96)) == (23, 16, 4, 2, 3)
    assert sum(not s["causal"] for _, s in steps) == 14


#: every sweep committed before the twelfth training hold-out (2026-12-05, with GLUON_DKDV_PARTIAL_WRITE_SHARE)
BEFORE_HOLDOUT12 = BEFORE_HOLDOUT11 + ("h200-train-holdout11",)


def test_twelfth_holdout_repeats_no_earlier_step_and_is_the_seeds_draw():
    """sweeps/h200-train-holdout12.toml (48 steps, drawn after GLUON_DKDV_PARTIAL_WRITE_SHARE was fitted on hold-outs
    9-11 and the Gluon dK/dV hold-out, committed with it before any measurement): new steps, exactly what
    sweeps/draw_training_holdout.py draws from seed 2026120512: 31 HEAD_DIM 128 steps, 4 at 64, 7 at 256, 2 at 80 and
    4 at 96; 8 non-causal."""
    _assert_new_steps("h200-train-holdout12", BEFORE_HOLDOUT12, count=48)
    steps = _assert_seeds_draw("h200-train-holdout12", 2026120512, BEFORE_HOLDOUT12, count=48)
    d = sorted(s["head_dim"] for _, s in steps)
    assert (d.count(128), d.count(64), d.count(256), d.count(80), d.count(96)) == (31, 4, 7, 2, 4)
    assert sum(not s["causal"] for _, s in steps) == 8


#: every sweep committed before the thirteenth training hold-out (2026-12-05, GLUON_DKDV_PARTIAL_WRITE_SHARE = 0.75;
#: hold-out 12, void and never measured, and the second eager hold-out among them)
BEFORE_HOLDOUT13 = BEFORE_HOLDOUT12 + ("h200-train-holdout12", "h200-train-eager-holdout2")


def test_thirteenth_holdout_repeats_no_earlier_step_and_is_the_seeds_draw():
    """sweeps/h200-train-holdout13.toml (48 steps, committed with GLUON_DKDV_PARTIAL_WRITE_SHARE = 0.75 before any
    measurement; it replaces hold-out 12, void): new steps, exactly what sweeps/draw_training_holdout.py draws from seed
    2026120514: 25 HEAD_DIM 128 steps, 12 at 64, 5 at 256, 5 at 80 and 1 at 96; 17 non-causal."""
    _assert_new_steps("h200-train-holdout13", BEFORE_HOLDOUT13, count=48)
    steps = _assert_seeds_draw("h200-train-holdout13", 2026120514, BEFORE_HOLDOUT13, count=48)
    d = sorted(s["head_dim"] for _, s in steps)
    assert (d.count(128), d.count(64), d.count(256), d.count(80), d.count(96)) == (25, 12, 5, 5, 1)
    assert sum(not s["causal"] for _, s in steps) == 17
    head = (Path(__file__).resolve().parents[1] / "sweeps" / "h200-train-holdout12.toml").read_text()
    assert head.startswith("# VOID, NEVER MEASURED")


def test_second_eager_holdout_is_the_stated_filter_of_the_seeds_draw():
    """sweeps/h200-train-eager-holdout2.toml: the first 6 steps of seed 2026120513's draw (24 steps beside every sweep
    committed before it and hold-out 12, committed with it) with B x seqlen_k <= 8,192 tokens, at most 32 heads and HEAD_DIM <= 128, run as the eager
    chain (impls = ["baseline"]); no eager step of an earlier sweep repeats."""
    from iomodel.measure.sweep import load_sweep, parse_sweep

    root = Path(__file__).resolve().parents[1]
    draw = _draw_module()
    steps = draw.draw(2026120513, 24, set(_sweep_ids(*BEFORE_HOLDOUT12, "h200-train-holdout12")))
    kept = [f for _, f in steps if f.get("batch", 1) * f.get("seqlen_k", f.get("seqlen")) <= 8192
            and f["heads"] <= 32 and f["head_dim"] <= 128][:6]
    want = [draw._id(parse_sweep, f).replace("-tiled-bwd", "-baseline-bwd") for f in kept]
    sweep = load_sweep(root / "sweeps" / "h200-train-eager-holdout2.toml")
    assert [s.id for s in sweep.shapes] == want and len(want) == 6
    earlier = {s.id for p in (root / "sweeps").glob("h200-*.toml") if p.stem != "h200-train-eager-holdout2"
               for s in load_sweep(p).shapes}
    assert not set(want) & earlier


def test_d256_holdout_repeats_no_earlier_training_shape():
    """The HEAD_DIM 256 hold-out (7 steps, after the spill-free 256 backward tiles) repeats none."""
    _assert_new_steps("h200-train-d256-holdout1", EARLIER_TRAINING + (
        "h200-train-holdout5", "h200-train-holdout6", "h200-lpt-holdout1", "h200-window1", "h200-window2"), count=7)
    _assert_new_steps("h200-train-d256-holdout2", EARLIER_TRAINING + (
        "h200-train-holdout5", "h200-train-holdout6", "h200-lpt-holdout1", "h200-window1", "h200-window2",
        "h200-train-d256-holdout1"), count=6)


# --- the third training hold-out (issue 11, item 5): sweeps/h200-train-holdout3.toml, 32 steps of
# real models' layers on the current kernels, committed before measurement (2cf2954)


@pytest.mark.parametrize("level, read, write", [
    ("HBM", (30, 32), (31, 32)),  # reads 93.75 %, writes 97 % (calibration since DQ_WRITE_SHARE)
    # writes 32/32 as measured; under the forward's own constants (2026-12-06) 31/32: the forward of a causal GQA-8
    # d128 8k step wrote 2.2 MiB more (1.16x)
    ("HBM _attn_fwd", (32, 32), (31, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (29, 32), (30, 32)),
    ("HBM _bwd_dq", (32, 32), (32, 32)),
    ("L2", (32, 32), (32, 32)),
])
def test_third_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT3), "tiled", level, read, write)


def test_third_holdout_misses_are_the_named_ones(rec_of):
    """Reads: two causal GQA-8 HEAD_DIM 128 steps whose dK/dV Q/dO re-reads the model predicts
    for programs drifting apart and the GPU does not pay (0.87x, 0.61x measured / predicted).
    Write: a causal MHA HEAD_DIM 80 step whose three kernels each write back 0.2-0.5 MiB more than
    predicted (1.2 MiB of 10.5). Before DQ_WRITE_SHARE the misses were two MQA steps whose dQ
    kernel wrote back 1.3-1.8 MiB less than predicted; the share was fitted on them among others."""
    rec = rec_of(HOLDOUT3)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h16-kv2-d128-bf16-q8192-k8192-tl-tiled-bwd",
                             "b2-h32-kv4-d128-bf16-q2048-k2048-br-tiled-bwd"],
                    "write": ["b1-h32-kv32-d80-fp16-q2048-k2048-tl-tiled-bwd"]}
    for r in rec.rows:
        if r.id in miss["read"]:
            lv = r.level("HBM")
            assert lv.measured_read < lv.predicted_read  # over-predicted, never under


# --- the fourth training hold-out (issue 11, item 5): sweeps/h200-train-holdout4.toml, 32 steps of
# real models' layers on the TMA backward (the GPU default), committed (481abe0) before measurement and
# after the last change to the training model: VALIDATION. The launcher chose S > 1 on 9 of the 32.


@pytest.mark.parametrize("level, read, write", [
    # reads 97 %, writes 94 % with DQ_WRITE_SHARE (84 % before it, the model it validated): since the
    # share was fitted on this receipt among six, these counts are CALIBRATION, not validation
    ("HBM", (31, 32), (30, 32)),
    # writes 32/32 as measured; under the forward's own constants (2026-12-06) 29/32: two short non-causal MHA d64
    # forwards 1.2-1.4 MiB under (0.79x, 0.83x) and a causal GQA d128 one 1.1 MiB over (0.7 MiB predicted)
    ("HBM _attn_fwd", (32, 32), (29, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (30, 32), (27, 32)),  # reads 29/32 before the measured read capacity (2026-12-04)
    ("HBM _bwd_dq", (32, 32), (32, 32)),
    ("L2", (31, 32), (32, 32)),
])
def test_fourth_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT4), "tiled", level, read, write)


def test_fourth_holdout_misses_are_the_named_ones(rec_of):
    """Read: StarCoder's MQA step (S > 1), whose dK/dV K/V and Q/dO re-reads the model over-predicts
    (0.61x measured / predicted at the step). Writes (with DQ_WRITE_SHARE): a non-causal MQA step
    whose fp32 dK/dV partials write back 3.4 MiB more than predicted, and a 257-token MHA HEAD_DIM
    80 step writing 8.8 MiB whose three kernels write back 1.4 MiB less than predicted. The three
    dQ write-back misses and Falcon's MQA step of the model it validated are gone: the share was
    fitted on them among others."""
    rec = rec_of(HOLDOUT4)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h48-kv1-d128-bf16-q4096-k4096-tl-tiled-bwd"],
                    "write": ["b16-h16-kv16-d80-fp16-q257-k257-nc-tiled-bwd",
                              "b2-h16-kv1-d128-bf16-q2048-k2048-nc-tiled-bwd"]}


# --- the first ragged receipt (issue 13): sweeps/h200-ragged1.toml, 8 varlen batches. Measured as a
# hold-out of the sum of batch-1 estimates (DRAM writes 0/8); it then CALIBRATED the one-launch
# estimate (predict_ragged_launch), so these counts are calibration, not validation.


@pytest.mark.parametrize("level, read, write", [("HBM", (8, 8), (8, 8)), ("L2", (8, 8), (8, 8))])
def test_ragged1_counts(rec_of, level, read, write):
    _assert_counts(rec_of(RAGGED1), "tiled", level, read, write)


# --- the second ragged receipt (issue 13, item 4): sweeps/h200-ragged2.toml, 10 varlen batches of
# 5-128 sequences, committed (ae3e360) after the one-launch estimate and before measurement: VALIDATION


@pytest.mark.parametrize("level, read, write", [("HBM", (10, 10), (10, 10)), ("L2", (10, 10), (10, 10))])
def test_ragged2_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(RAGGED2), "tiled", level, read, write)


# --- three hold-outs measured 2026-12-01 after their models, on shapes committed before measurement:
# the fused split-KV merge (serving1's 10 paged decode shapes re-measured with the one-launch kernel),
# the grid-order model (sweeps/h200-grid-order1.toml: 6 shapes, tiles-fastest and heads-fastest) and
# the dK/dV group split (sweeps/h200-train-split1.toml: 12 training steps with S > 1)


@pytest.mark.parametrize("name, level, read, write", [
    (SERVING_FUSED, "HBM", (10, 10), (10, 10)),
    (SERVING_FUSED, "L2", (10, 10), (10, 10)),
    # miss as measured: B8 H32 KV8 1k causal heads-fastest, reads 0.81x and writes 0.83x the prediction; under the
    # forward's own constants (2026-12-06, calibration since) it reads 0.80x and writes 0.82x, and B4 H16 d64 2k
    # non-causal heads-fastest reads 0.88x: reads 10/12
    (GRID_ORDER, "HBM", (10, 12), (11, 12)),
    (GRID_ORDER, "L2", (12, 12), (12, 12)),
    # L2 exact for every kernel (the reduction included); DRAM writes miss on 3 steps by the write-back
    # of the dK/dV kernel's fp32 partials (5 before DQ_WRITE_SHARE, fitted on this receipt among six:
    # calibration); reads miss Falcon-7B at 4k (0.83x)
    (SPLIT1, "HBM", (11, 12), (9, 12)),
    (SPLIT1, "L2", (12, 12), (12, 12)),
    (SPLIT1, "L2 _bwd_reduce_dkdv", (12, 12), (12, 12)),
])
def test_hold_outs_of_the_third_session(rec_of, name, level, read, write):
    _assert_counts(rec_of(name), "tiled", level, read, write)


def test_second_window_holdout_every_shape_within_both_ways(rec_of):
    """sweeps/h200-window2.toml (14 shapes on the current kernels: 7 prefill, 3 decode, 4 training
    steps), committed before measurement: every shape's DRAM reads AND writes within ±10 % or 1 MiB."""
    rec = rec_of(WINDOW2)
    rows = [r for r in rec.rows if r.impl == "tiled"]
    assert len(rows) == 14
    assert all(rec.within(r, "HBM", "read") and rec.within(r, "HBM", "write") for r in rows)
    _assert_counts(rec_of(WINDOW2), "tiled", "L2", (14, 14), (13, 14))


@pytest.mark.parametrize("level, read, write", [
    # reads within ±10 % on every shape; the writes (KiB of partials, O and counters) stay dirty in
    # L2 and pass by the 1 MiB floor, as in the earlier decode receipts
    ("HBM", (12, 12), (12, 12)),
    ("L2", (12, 12), (12, 12)),
])
def test_decode_hold_out_of_the_one_round_split_rule(rec_of, level, read, write):
    """sweeps/h200-decode-splits1.toml (committed before measurement, fourth session): 12 decode
    shapes under kernels.heuristics' one-round split rule, 1 to 32 splits, fused and combine."""
    _assert_counts(rec_of(DECODE_SPLITS1), "tiled", level, read, write)


# --- the fifth training hold-out (issue 11, item 5): sweeps/h200-train-holdout5.toml, 32 steps of real
# models' layers, committed (ebfda75) before measurement and after the last change to the training model
# (DQ_WRITE_SHARE, fitted on the six earlier training receipts): VALIDATION. Measured 2026-12-02 on the
# H200 (receipts/ncu-h200-train-holdout5-2026-12-02.json); the launcher chose S > 1 on 7 of the 32.
HOLDOUT5 = "ncu-h200-train-holdout5-2026-12-02.json"


@pytest.mark.parametrize("level, read, write", [
    # as measured: reads 91 %, writes 94 % (30/32): both over the 90 % bar. Under the forward's own constants
    # (2026-12-06, calibration since) writes 31/32 (the chunked-prefill step within), the forward's writes 31/32 (a
    # 257-token MHA d80 forward 1.1 MiB under, 0.90x)
    ("HBM", (29, 32), (31, 32)),
    ("HBM _attn_fwd", (32, 32), (31, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (28, 32), (29, 32)),  # reads 29/32 before the measured read capacity (2026-12-04)
    ("HBM _bwd_dq", (32, 32), (32, 32)),  # every dQ write-back within, the fitted share validated
    ("HBM _bwd_reduce_dkdv", (7, 7), (7, 7)),
    ("L2", (32, 32), (32, 32)),
])
def test_fifth_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT5), "tiled", level, read, write)


def test_fifth_holdout_misses_are_the_named_ones(rec_of):
    """Reads: the dK/dV kernel's K/V and Q/dO re-reads of three large-group causal steps, predicted
    both ways wrong (Llama-3-70B G = 8 at 2.5k and Falcon-7B MQA read 0.59x and 0.68x of the predicted
    dK/dV bytes, StarCoder2-15B G = 12 1.39x). Writes: a non-causal GQA step with S > 1 whose fp32
    dK/dV partials write back 1.25x the prediction, and, as measured, a bottom-right chunked-prefill step writing
    4.8 MiB, 1.3 MiB less than predicted (under the forward's own constants, 2026-12-06, 0.8 MiB less: within)."""
    rec = rec_of(HOLDOUT5)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h48-kv4-d128-bf16-q4096-k4096-tl-tiled-bwd",
                             "b1-h64-kv8-d128-bf16-q2560-k2560-tl-tiled-bwd",
                             "b2-h71-kv1-d64-bf16-q2048-k2048-tl-tiled-bwd"],
                    "write": ["b2-h12-kv2-d128-bf16-q2048-k2048-nc-tiled-bwd"]}


# --- the eager-chain hold-out at 6k-8k tokens (issue 11, item 5): sweeps/h200-train-eager-holdout1.toml,
# 6 eager training steps committed (1a1b33f) before measurement and after the last change to the eager
# model: VALIDATION. Measured 2026-12-02 on the H200 (receipts/ncu-h200-train-eager-holdout1-2026-12-02.json).
EAGER_HOLDOUT1 = "ncu-h200-train-eager-holdout1-2026-12-02.json"


def test_eager_holdout_reaches_8k_tokens_and_is_within(rec_of):
    """DRAM reads and writes of every eager step within +-10 % (0.98-1.01x reads, 1.00-1.02x writes);
    the largest steps are 8,192 tokens (B x seqlen_q), two of them 8,192-token sequences."""
    rec = rec_of(EAGER_HOLDOUT1)
    rows = [r for r in rec.rows if r.impl == "baseline"]
    assert len(rows) == 6
    assert max(r.spec.batch * r.spec.seqlen_q for r in rows) == 8192
    assert sum(r.spec.seqlen_q == 8192 for r in rows) == 2
    _assert_counts(rec, "baseline", "HBM", (6, 6), (6, 6))
    _assert_each_within_10_percent(rows)


def test_fifth_holdout_without_its_byte_identical_steps(rec_of):
    """Two hold-out 5 steps differ from calibration steps only in fp16 against bf16 (2 bytes each:
    the same bytes for the model): without them the step DRAM reads are 27/30, writes 28/30 (93 %) as measured; 27/30
    and 29/30 under the forward's own constants (2026-12-06, calibration since), 28 of the 32 steps within both ways
    (27 before)."""
    import re

    def width_id(i):
        return re.sub(r"-(fp16|bf16)-", "-2B-", i)

    old = {width_id(i) for i in _sweep_ids(*EARLIER_TRAINING)}
    rec = rec_of(HOLDOUT5)
    rows = [r for r in rec.rows if r.impl == "tiled"]
    same = sorted(r.id for r in rows if width_id(r.id) in old)
    assert same == ["b24-h16-kv16-d64-fp16-q512-k512-nc-tiled-bwd", "b8-h16-kv16-d64-bf16-q1024-k1024-nc-tiled-bwd"]
    rest = [r for r in rows if r.id not in same]
    assert (sum(bool(rec.within(r, "HBM", "read")) for r in rest),
            sum(bool(rec.within(r, "HBM", "write")) for r in rest), len(rest)) == (27, 29, 30)
    assert sum(bool(rec.within(r, "HBM", "read") and rec.within(r, "HBM", "write")) for r in rows) == 28


LPT_HOLDOUT1 = "ncu-h200-lpt-holdout1-2026-12-02.json"


@pytest.mark.parametrize("level, read, write", [
    # 16 causal forwards in head-grouped:G (G 2..64, the kernel's LPT rule) and 4 training steps; reads 19/20 as
    # measured, 18/20 under the forward's own constants (2026-12-06, calibration since)
    ("HBM", (18, 20), (20, 20)),
    ("HBM _attn_fwd", (4, 4), (4, 4)),
    ("HBM _bwd_dkdv", (3, 4), (4, 4)),
    ("L2", (20, 20), (20, 20)),
])
def test_lpt_holdout_counts(rec_of, level, read, write):
    """sweeps/h200-lpt-holdout1.toml, committed (25a9f1e) before it was measured, after the model of
    head-grouped:G (program_runs) was written: validation, every head-grouped forward within. Under the forward's own
    constants (2026-12-06, calibration since) one is not: 28 heads on 4 at 16k tokens reads 1.115x the model."""
    _assert_counts(rec_of(LPT_HOLDOUT1), "tiled", level, read, write)


def test_lpt_holdout_forwards_are_head_grouped_and_the_miss_is_the_named_backward(rec_of):
    rec = rec_of(LPT_HOLDOUT1)
    fwd = [r for r in rec.rows if r.impl == "tiled" and not r.id.endswith("-bwd")]
    assert len(fwd) == 16
    assert all(r.spec.causal for r in fwd)
    missed = [r.id for r in rec.rows if r.impl == "tiled" and not rec.within(r, "HBM", "read")]
    # the named backward alone as measured; under the forward's own constants (2026-12-06) a forward too, 1.115x
    assert missed == ["b1-h28-kv4-d128-bf16-q16384-k16384-tl-tiled", "b1-h28-kv4-d128-bf16-q8192-k8192-tl-tiled-bwd"]
    (fwd_miss,) = [r for r in fwd if r.id in missed]
    assert round(fwd_miss.level("HBM").ratio_read, 3) == 1.115


def test_lpt_holdout_every_launch_ran_head_grouped():
    """The receipt records the launch the kernel's rule chose: every forward (and every training
    step's forward) ran head-grouped:G, G from 2 to 64."""
    import json

    shapes = json.loads((Path(__file__).parent.parent / "receipts" / LPT_HOLDOUT1).read_text())["shapes"]
    orders = [s["config"]["grid_order"] for s in shapes]
    assert len(orders) == 20 and all(o.startswith("head-grouped:") for o in orders)
    assert sorted({int(o.split(":")[1]) for o in orders}) == [2, 4, 8, 16, 32, 64]


# --- the sixth training hold-out (issue 11, item 5): sweeps/h200-train-holdout6.toml, 32 steps of real
# models' layers committed (94f845c) before measurement and after the last change to the model it tests
# (the causal forward's LPT launch, shared memory at the padded HEAD_DIM): VALIDATION. Measured
# 2026-12-03 on the H200 (receipts/ncu-h200-train-holdout6-2026-12-03.json); S > 1 on 8 of the 32.
HOLDOUT6 = "ncu-h200-train-holdout6-2026-12-03.json"


@pytest.mark.parametrize("level, read, write", [
    ("HBM", (27, 32), (28, 32)),  # under the 90 % bar; reads 28/32 before the measured read capacity (2026-12-04)
    # writes 31/32 as measured; 30/32 under the forward's own constants (2026-12-06, calibration since): two d64
    # causal forwards 1.1-1.7 MiB under (0.90x)
    ("HBM _attn_fwd", (32, 32), (30, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (26, 32), (28, 32)),  # reads 27/32 before the measured read capacity
    ("HBM _bwd_dq", (32, 32), (30, 32)),
    ("HBM _bwd_reduce_dkdv", (7, 8), (7, 8)),
    ("L2", (32, 32), (28, 32)),
])
def test_sixth_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT6), "tiled", level, read, write)


def test_sixth_holdout_misses_are_the_named_ones(rec_of):
    """Reads: the dK/dV kernel's re-reads of four large-group causal steps (Llama-2-70B G = 8 at 5k and
    6k tokens read 0.68x and 0.65x the predicted dK/dV bytes, Falcon-7B MQA at 6k, S = 6, 0.20x;
    Llama-3.1-405B G = 16, S = 2, 1.40x), and since the measured read capacity (2026-12-04) Llama-2-70B
    at 16k (heads-outer, 1.18x the predicted step reads: the model, with 3.7 % more read capacity,
    holds more of the trailing programs' re-reads than the H200 did). Writes: register spills the model does not count, at
    HEAD_DIM 256 (Gemma-2: the TMA dK/dV and dQ kernels at 255 registers, dQ's L2 writes 2.22x dQ)
    and HEAD_DIM 40 (SD 1.5: dK/dV L2 writes 1.58x), and a chunked-prefill step's dK/dV write-back
    (1.3 MiB of 8.0 MiB)."""
    rec = rec_of(HOLDOUT6)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h128-kv8-d128-bf16-q2048-k2048-tl-tiled-bwd",
                             "b1-h64-kv8-d128-bf16-q16384-k16384-tl-tiled-bwd",
                             "b1-h64-kv8-d128-bf16-q5120-k5120-tl-tiled-bwd",
                             "b1-h64-kv8-d128-bf16-q6144-k6144-tl-tiled-bwd",
                             "b1-h71-kv1-d64-bf16-q6144-k6144-tl-tiled-bwd"],
                    "write": ["b1-h16-kv8-d256-bf16-q4096-k4096-tl-tiled-bwd",
                              "b1-h28-kv4-d128-bf16-q1024-k4096-br-tiled-bwd",
                              "b2-h8-kv4-d256-bf16-q2048-k2048-tl-tiled-bwd",
                              "b4-h8-kv8-d40-fp16-q4096-k4096-nc-tiled-bwd"]}


# --- the HEAD_DIM 256 hold-out (issue 11, item 5): sweeps/h200-train-d256-holdout1.toml, 7 Gemma training
# steps committed (e85214f) before measurement, after the spill-free 256 dK/dV and dQ tiles: VALIDATION.
# Measured 2026-12-03 on the H200 (receipts/ncu-h200-train-d256-holdout1-2026-12-03.json).
D256_HOLDOUT1 = "ncu-h200-train-d256-holdout1-2026-12-03.json"


def test_d256_holdout_reads_within_and_the_write_misses_are_the_reduce_kernels_spills(rec_of):
    """Reads 7/7; writes 5/7: the two misses are steps with S > 1, whose ``_bwd_reduce_dkdv`` ran
    4 warps at HEAD_DIM 256 and spilled (L2 writes 2.2-3.7x dK + dV, 12.1 MiB of DRAM writes each;
    it has 8 warps since, ``dkdv_reduce_num_warps``); the bottom-right one also writes back 4.3 MiB
    more dK/dV partials than predicted (the S > 1 class of hold-out 2). The dK/dV and dQ kernels'
    L2 writes within on 7/7."""
    rec = rec_of(D256_HOLDOUT1)
    _assert_counts(rec, "tiled", "HBM", (7, 7), (5, 7))
    _assert_counts(rec, "tiled", "L2 _bwd_dq", (7, 7), (7, 7))
    _assert_counts(rec, "tiled", "L2 _bwd_dkdv", (7, 7), (7, 7))
    miss = sorted(r.id for r in rec.rows if not rec.within(r, "HBM", "write"))
    assert miss == ["b1-h8-kv4-d256-bf16-q1024-k4096-br-tiled-bwd", "b4-h8-kv4-d256-bf16-q1024-k1024-nc-tiled-bwd"]
    for r in rec.rows:
        red = r.level("L2 _bwd_reduce_dkdv")
        assert red is None or red.measured_write > 2 * red.predicted_write


# --- the second HEAD_DIM 256 hold-out: sweeps/h200-train-d256-holdout2.toml, 6 steps (S > 1 on 5) committed
# (4bbf774) before measurement, after the 8-warp reduction: VALIDATION. Measured 2026-12-03 on the H200.
D256_HOLDOUT2 = "ncu-h200-train-d256-holdout2-2026-12-03.json"


def test_second_d256_holdout_l2_exact_and_the_write_misses_are_partial_write_backs(rec_of):
    """L2 6/6 both ways (the reduction no longer spills: its L2 writes within on 5/5); DRAM reads
    6/6, writes 4/6: a non-causal MQA step (S = 4) and a bottom-right chunked-prefill step (S = 2)
    whose dK/dV kernel writes back its fp32 partials 2.2x and 1.5x the prediction (the class of
    hold-outs 4-6: S > 1 with every program's query range equal)."""
    rec = rec_of(D256_HOLDOUT2)
    _assert_counts(rec, "tiled", "HBM", (6, 6), (4, 6))
    _assert_counts(rec, "tiled", "L2", (6, 6), (6, 6))
    _assert_counts(rec, "tiled", "L2 _bwd_reduce_dkdv", (5, 5), (5, 5))
    miss = sorted(r.id for r in rec.rows if not rec.within(r, "HBM", "write"))
    assert miss == ["b1-h8-kv4-d256-bf16-q512-k3072-br-tiled-bwd", "b2-h4-kv1-d256-bf16-q2048-k2048-nc-tiled-bwd"]


# --- the dK/dV loop order's calibration (2026-12-04): sweeps/h200-train-order-calib1.toml, 14 causal GQA
# steps of hold-outs 3-6 measured again with every causal GQA step on tiles-descending (the default before
# heuristics.dkdv_order_for's threshold): CALIBRATION (the threshold was set on it).
ORDER_CALIB1 = "ncu-h200-train-order-calib1-2026-12-04.json"


def test_order_calibration_fits_below_the_threshold_and_misses_beyond_it(rec_of):
    """Step DRAM reads within on 13/14: every step whose slice's query rows fit the effective L2; the
    miss is Llama-2-70B at 16k (64 MiB of rows), whose trailing programs read 9.3 GiB where the lock-step
    waves predict 1.0 GiB: why ``dkdv_order_for`` keeps heads-outer there. Writes 14/14."""
    import kernels.heuristics as kh

    rec = rec_of(ORDER_CALIB1)
    _assert_counts(rec, "tiled", "HBM", (13, 14), (14, 14))
    assert [r.id for r in rec.rows if not rec.within(r, "HBM", "read")] == [
        "b1-h64-kv8-d128-bf16-q16384-k16384-tl-tiled-bwd"]
    fits = {r.id: kh.dkdv_order_for(r.spec.group, r.tiling.bwd_group_splits, r.spec.seqlen_q, r.spec.head_dim,
                                    r.spec.width, rec.hardware.l2_bytes) for r in rec.rows}
    assert sorted(i for i, o in fits.items() if o == "heads-outer") == [
        "b1-h32-kv8-d128-bf16-q16384-k16384-tl-tiled-bwd", "b1-h64-kv8-d128-bf16-q16384-k16384-tl-tiled-bwd"]


# --- the seventh training hold-out (issue 11, item 5): sweeps/h200-train-holdout7.toml, 32 steps of real
# models' layers committed (a7f6abf) before measurement and after the last change to the model it tests
# (the dK/dV loop order and its L2 model): VALIDATION. Measured 2026-12-04 on the H200
# (receipts/ncu-h200-train-holdout7-2026-12-04.json); 22 causal GQA steps ran tiles-descending, S > 1 on 3.
HOLDOUT7 = "ncu-h200-train-holdout7-2026-12-04.json"


@pytest.mark.parametrize("level, read, write", [
    # as measured 93.75 % and 96.9 % (writes 31/32): over the 90 % bar each way (29/32 both ways). Under the
    # forward's own constants (2026-12-06, calibration since) writes 30/32, the forward's 31/32: a 384-token MHA d64
    # step's forward 1.4 MiB under (0.50x)
    ("HBM", (30, 32), (30, 32)),
    ("HBM _attn_fwd", (32, 32), (31, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (25, 32), (27, 32)),
    ("HBM _bwd_dq", (32, 32), (32, 32)),
    ("HBM _bwd_reduce_dkdv", (3, 3), (3, 3)),
])
def test_seventh_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT7), "tiled", level, read, write)


def test_seventh_holdout_misses_are_the_named_ones(rec_of):
    """Reads: the two large-group causal steps beyond the order's threshold, which run heads-outer
    (Llama-3-70B G = 8 at 9k tokens and StarCoder2-15B G = 12 at 8k: the dK/dV kernel read 0.31x and
    0.23x the heads-outer lock-step estimate, the class of hold-outs 1-6). Writes: Gemma-2B's MQA step at
    HEAD_DIM 256 with S = 5 (its fp32 partials written back 1.12x the step's prediction, the S > 1 class; 1.14x
    under the forward's own constants, 2026-12-06), and under those constants a non-causal MHA d64 step of 384 tokens
    1.6 MiB under (0.89x: its forward 1.4 MiB under). Every tiles-descending step's reads are within."""
    rec = rec_of(HOLDOUT7)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h48-kv4-d128-bf16-q8192-k8192-tl-tiled-bwd",
                             "b1-h64-kv8-d128-bf16-q9216-k9216-tl-tiled-bwd"],
                    "write": ["b1-h8-kv1-d256-bf16-q4096-k4096-tl-tiled-bwd",
                              "b16-h16-kv16-d64-fp16-q384-k384-nc-tiled-bwd"]}
    desc = [r for r in rec.rows if r.tiling is not None and r.tiling.bwd_dkdv_order == "tiles-descending"]
    assert len(desc) == 22 and all(rec.within(r, "HBM", "read") for r in desc)


# --- the hold-out after the Gluon dK/dV launch (issue 11, items 3 and 5): sweeps/h200-gluon-dkdv-holdout1.toml,
# 32 HEAD_DIM 128 steps of real models' layers committed (b703f64) before measurement, after the last change to
# the kernels and model it tests: VALIDATION. Measured 2026-12-05 on the H200
# (receipts/ncu-h200-gluon-dkdv-holdout1-2026-12-05.json); every step ran the register-spilling _bwd_dkdv_gluon
# (64 x 128 tiles, replaced since), S > 1 on 10. Left out of GLUON_DKDV_PARTIAL_WRITE_SHARE's fit (a kernel that no
# longer ships), whose 0.75 gives these steps the same counts as the model they validated.
GLUON_DKDV = "ncu-h200-gluon-dkdv-holdout1-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    ("HBM", (31, 32), (27, 32)),  # reads 96.9 %; writes 84.4 %: UNDER the 90 % bar (26/32 both ways)
    # writes 32/32 as measured; 30/32 under the forward's own constants (2026-12-06, calibration since): a causal
    # GQA 1k forward 3.1 MiB under (0.88x) and a bottom-right 512-row one 1.7 MiB under (0.45x)
    ("HBM _attn_fwd", (32, 32), (30, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (26, 32), (20, 32)),
    ("HBM _bwd_dq", (32, 32), (32, 32)),
    ("HBM _bwd_reduce_dkdv", (10, 10), (8, 10)),
    ("L2 _bwd_dkdv", (32, 32), (18, 32)),
])
def test_gluon_dkdv_holdout_counts(rec_of, level, read, write):
    _assert_counts(rec_of(GLUON_DKDV), "tiled", level, read, write)


def test_gluon_dkdv_holdout_misses_are_the_named_ones(rec_of):
    """Reads: one heads-outer causal step of a large group past the order's threshold (Llama-3-70B, G = 8, 12k
    tokens: the dK/dV kernel read 0.36x the lock-step estimate, the class of every earlier hold-out). Writes: the
    five steps of about 1k tokens; four split the group (S = 4-5) and write 1.8-2.3x their whole dK/dV L2 excess
    (the register spills') beyond the model to DRAM (their fp32 partials above the effective L2 going back: a
    reading, not measured), the fifth misses by 1.25 MiB over the forward, dK/dV and dQ kernels. The same five under
    the model with GLUON_DKDV_PARTIAL_WRITE_SHARE, 2.8-4.1 MiB over on the split ones; under the forward's own
    constants too (2026-12-06), 2.8-4.2 MiB, the fifth 1.6 MiB. The Gluon launch ran on every step (the records'
    config and kernel name)."""
    rec = rec_of(GLUON_DKDV)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h64-kv8-d128-bf16-q12288-k12288-tl-tiled-bwd"],
                    "write": ["b1-h32-kv8-d128-bf16-q512-k982-br-tiled-bwd",
                              "b1-h40-kv10-d128-fp16-q959-k959-tl-tiled-bwd",
                              "b1-h40-kv40-d128-bf16-q1024-k1024-tl-tiled-bwd",
                              "b1-h40-kv8-d128-bf16-q943-k943-nc-tiled-bwd",
                              "b1-h56-kv8-d128-bf16-q1024-k1024-tl-tiled-bwd"]}
    assert all(r.tiling is not None and (r.tiling.bwd_block_m, r.tiling.bwd_block_n) == (64, 128) for r in rec.rows)
    import json

    shapes = json.loads((Path(__file__).resolve().parents[1] / "receipts" / GLUON_DKDV).read_text())["shapes"]
    assert len(shapes) == 32 and all(s["config"]["backward"]["dkdv_kernel"] == "gluon" for s in shapes)
    assert all(any(k["name"] == "_bwd_dkdv_gluon" for k in s["kernels"]) for s in shapes)
    split = [s["id"] for s in shapes if s["config"]["backward"]["group_splits"] > 1]
    assert len(split) == 10 and set(miss["write"]) - set(split) == {"b1-h40-kv40-d128-bf16-q1024-k1024-tl-tiled-bwd"}


# The ninth training hold-out (sweeps/h200-train-holdout9.toml: 32 steps drawn by seed 2026120509, committed before the
# spill-free dK/dV kernel was swapped in and before any measurement; the model unchanged since), measured on an H100
# (the device tool gave one for an H200 call): receipts/ncu-h100-train-holdout9-2026-12-05.json, predicted for the
# record's hardware (H100-SXM, L2 50 MiB). VALIDATION on the H100, not the H200 issue 11 names.
HOLDOUT9_H100 = "ncu-h100-train-holdout9-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    # at validation, under the model of then, dK/dV reads were 22/32 (the current model weighs the Gluon launch's
    # partials GLUON_DKDV_PARTIAL_WRITE_SHARE, fitted on the H200: they evict one more step's query rows)
    ("HBM", (29, 32), (32, 32)),  # reads 90.6 %, writes 100 %: both over issue 11's 90 % (on an H100)
    # writes 32/32 as measured; 31/32 under the forward's own constants (2026-12-06, calibration since): a
    # bottom-right d256 forward 1.2 MiB under (0.86x)
    ("HBM _attn_fwd", (32, 32), (31, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (21, 32), (32, 32)),
    ("HBM _bwd_dq", (32, 32), (31, 32)),
    ("HBM _bwd_reduce_dkdv", (7, 7), (5, 7)),
    ("L2", (32, 32), (32, 32)),
    ("L2 _bwd_dkdv", (32, 32), (32, 32)),  # 18/32 writes on the H200 with the spilling kernel (gluon-dkdv-holdout1)
])
def test_ninth_holdout_h100_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT9_H100), "tiled", level, read, write)


def test_ninth_holdout_h100_misses_are_the_large_causal_groups(rec_of):
    """The three step-read misses are causal heads-outer steps of large GQA groups, the class the worksheet marks
    ROUGH (G >= 7 from 6,000 rows): 64 heads on 8 at 8k and 12k tokens, Falcon-7B's 71 on 1 at 12k; each read less
    than the lock-step wave model (0.43-0.62x with the H100's own read fraction, 0.40-0.61x with the H200's borrowed
    before 2026-12-06). The dK/dV kernel's eleven read misses (ten at validation, 0.25-0.88x) are all below the model
    (0.27-0.90x), on causal GQA steps of 4k-12k tokens and one non-causal MHA step. Every HEAD_DIM 128 step ran the
    spill-free Gluon dK/dV kernel (23 of 32), the others the Triton one; the record names the H100 it ran on."""
    rec = rec_of(HOLDOUT9_H100)
    miss = sorted(r.id for r in rec.rows if not rec.within(r, "HBM", "read"))
    assert miss == ["b1-h64-kv8-d128-bf16-q8192-k8192-tl-tiled-bwd", "b1-h64-kv8-d128-fp16-q12288-k12288-tl-tiled-bwd",
                    "b1-h71-kv1-d64-fp16-q12288-k12288-tl-tiled-bwd"]
    ratios = [r.level("HBM").measured_read / r.level("HBM").predicted_read for r in rec.rows if r.id in miss]
    assert all(0.43 <= x <= 0.62 for x in ratios)
    dkdv = [r.level("HBM _bwd_dkdv") for r in rec.rows if not rec.within(r, "HBM _bwd_dkdv", "read")]
    assert len(dkdv) == 11 and all(0.27 <= lv.measured_read / lv.predicted_read <= 0.90 for lv in dkdv)
    import json

    data = json.loads((Path(__file__).resolve().parents[1] / "receipts" / HOLDOUT9_H100).read_text())
    assert "H100" in data["environment"]["device"] and len(data["shapes"]) == 32
    ran = {s["id"]: s["config"]["backward"]["dkdv_kernel"] for s in data["shapes"]}
    assert sorted(k for k, v in ran.items() if v == "gluon") == sorted(
        s["id"] for s in data["shapes"] if s["spec"]["head_dim"] == 128)
    assert sum(v == "gluon" for v in ran.values()) == 23
    assert all(any(k["name"] == "_bwd_dkdv_gluon" for k in s["kernels"]) for s in data["shapes"]
               if s["config"]["backward"]["dkdv_kernel"] == "gluon")


# The ninth training hold-out on the H200 (2026-12-05): receipts/ncu-h200-train-holdout9-2026-12-05.json, measured with
# the tree of 73913b0 (the kernels and model the sweep was committed to test; its predictions equal the current model's on
# every row and level), predicted for the H200. VALIDATION on the device issue 11 names then (writes 31/32); calibration
# of GLUON_DKDV_PARTIAL_WRITE_SHARE since: the counts below are the current model's.
HOLDOUT9_H200 = "ncu-h200-train-holdout9-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    # at validation: writes 31/32; 32/32 with GLUON_DKDV_PARTIAL_WRITE_SHARE; 31/32 under the forward's own constants
    # (2026-12-06), the forward's writes 30/32 (two bottom-right forwards 1.9 and 3.1 MiB under, 0.77x and 0.53x)
    ("HBM", (29, 32), (31, 32)),
    ("HBM _attn_fwd", (32, 32), (30, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (22, 32), (32, 32)),  # at validation: writes 31/32
    ("HBM _bwd_dq", (32, 32), (31, 32)),
    ("HBM _bwd_reduce_dkdv", (7, 7), (5, 7)),
    ("L2", (32, 32), (32, 32)),
    ("L2 _bwd_dkdv", (32, 32), (32, 32)),
])
def test_ninth_holdout_h200_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT9_H200), "tiled", level, read, write)


def test_ninth_holdout_h200_misses(rec_of):
    """Reads: the same three causal heads-outer steps of large groups as on the H100 (the worksheet's ROUGH class),
    0.54-0.77x the model. Writes: at validation one step of 12 heads on 2 (S > 1 fp32 partials, 2k tokens), 1.29x: its
    dK/dV kernel wrote 4.7 MiB more than the model of then; none with GLUON_DKDV_PARTIAL_WRITE_SHARE; under the
    forward's own constants (2026-12-06) one, a bottom-right HEAD_DIM 256 step of 16 heads on 8, 4.8 MiB under
    (0.84x: its forward 3.1 MiB under). The record names the H200."""
    rec = rec_of(HOLDOUT9_H200)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h64-kv8-d128-bf16-q8192-k8192-tl-tiled-bwd",
                             "b1-h64-kv8-d128-fp16-q12288-k12288-tl-tiled-bwd",
                             "b1-h71-kv1-d64-fp16-q12288-k12288-tl-tiled-bwd"],
                    "write": ["b4-h16-kv8-d256-bf16-q512-k1024-br-tiled-bwd"]}
    ratios = [r.level("HBM").measured_read / r.level("HBM").predicted_read for r in rec.rows if r.id in miss["read"]]
    assert all(0.53 <= x <= 0.78 for x in ratios)
    import json

    data = json.loads((Path(__file__).resolve().parents[1] / "receipts" / HOLDOUT9_H200).read_text())
    assert data["environment"]["device"] == "NVIDIA H200" and len(data["shapes"]) == 32


# The tenth training hold-out on the H200 (sweeps/h200-train-holdout10.toml, committed at ea526f7 before any
# measurement, after the last kernel and model change 2981147): receipts/ncu-h200-train-holdout10-2026-12-05.json.
# VALIDATION of the kernels and model of 2981147 then (writes 27/32, dK/dV reads 26/32 and writes 27/32 under that model);
# calibration of GLUON_DKDV_PARTIAL_WRITE_SHARE since: the counts below are the current model's.
HOLDOUT10_H200 = "ncu-h200-train-holdout10-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    ("HBM", (29, 32), (30, 32)),  # at validation: writes 27/32, UNDER issue 11's 90 % bar
    # (30, 32), (32, 32) under the constants before 2026-12-06; under the forward's own constants (2026-12-06) reads
    # 32/32 and writes 29/32 (three forwards 1.1-1.2 MiB under, 0.70-0.83x)
    ("HBM _attn_fwd", (32, 32), (29, 32)),
    ("HBM _bwd_preprocess", (32, 32), (32, 32)),
    ("HBM _bwd_dkdv", (25, 32), (30, 32)),  # at validation: reads 26/32, writes 27/32
    ("HBM _bwd_dq", (30, 32), (32, 32)),
    ("HBM _bwd_reduce_dkdv", (12, 12), (11, 12)),
    ("L2", (32, 32), (32, 32)),
    ("L2 _bwd_dkdv", (32, 32), (32, 32)),
])
def test_tenth_holdout_h200_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT10_H200), "tiled", level, read, write)


def test_tenth_holdout_h200_misses(rec_of):
    """Reads: Falcon-7B's 71 heads on one at 16k (the ROUGH large-group class, 0.70x) and two HEAD_DIM 256 causal steps
    of 2 heads per KV head at 8k and 16k tokens (0.79x and 0.83x: their forward, dK/dV and dQ kernels all read less than
    modelled; under the forward's own constants, 2026-12-06, 0.84x and 0.81x, the 8k step's forward read 1.00x it).
    Writes, with GLUON_DKDV_PARTIAL_WRITE_SHARE: two split steps, a Triton launch at HEAD_DIM 64 (S = 3, +1.9 MiB of
    dK/dV, 2.00x the step's writes; 2.01x under the forward's own constants) and a Gluon one (S = 9, +2.2 MiB, 1.15x).
    At validation, under the model of then, five split steps missed, all above it (+1.9 to +7.4 MiB): less of the fp32
    partials stayed dirty in L2 at the dK/dV kernel's end than that model kept."""
    rec = rec_of(HOLDOUT10_H200)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h16-kv8-d256-bf16-q16293-k16293-tl-tiled-bwd",
                             "b1-h16-kv8-d256-fp16-q8192-k8192-tl-tiled-bwd",
                             "b1-h71-kv1-d64-fp16-q16384-k16384-tl-tiled-bwd"],
                    "write": ["b1-h32-kv4-d64-bf16-q3072-k3072-tl-tiled-bwd",
                              "b1-h48-kv4-d128-bf16-q1024-k1024-tl-tiled-bwd"]}
    over = {r.id: ((r.level("HBM _bwd_dkdv").measured_write - r.level("HBM _bwd_dkdv").predicted_write) / 2**20,
                   r.level("HBM").ratio_write, r.tiling.bwd_group_splits, r.tiling.bwd_dkdv_kernel)
            for r in rec.rows if r.id in miss["write"]}
    assert [(round(e, 1), round(x, 2), S, k) for e, x, S, k in over.values()] == [
        (1.9, 2.01, 3, "triton"), (2.2, 1.15, 9, "gluon")]  # 2.0 before 2026-12-06
    ratios = sorted(r.level("HBM").measured_read / r.level("HBM").predicted_read for r in rec.rows
                    if r.id in miss["read"])
    # 0.70, 0.79 and 0.83 under the constants before 2026-12-06
    assert ratios == [pytest.approx(0.70, abs=0.01), pytest.approx(0.81, abs=0.01), pytest.approx(0.84, abs=0.01)]


# The eleventh training hold-out on the H200 (sweeps/h200-train-holdout11.toml, 48 steps, committed at 36c9c62 before
# any measurement; the kernels and model of 2981147, unchanged since): receipts/ncu-h200-train-holdout11-2026-12-05.json,
# the first receipt that records the code it ran (environment.source_sha256, the tree of 15458ed). VALIDATION then
# (dK/dV writes 43/48 under that model); calibration of GLUON_DKDV_PARTIAL_WRITE_SHARE since: current model's counts.
HOLDOUT11_H200 = "ncu-h200-train-holdout11-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    # the same at validation (46 and 44): reads 95.8 %, writes 91.7 %; under the forward's own constants (2026-12-06,
    # calibration since) writes 46/48, the forward's 46/48 (two forwards 1.7 and 3.0 MiB under, 0.86x and 0.89x)
    ("HBM", (46, 48), (46, 48)),
    ("HBM _attn_fwd", (48, 48), (46, 48)),
    ("HBM _bwd_preprocess", (48, 48), (48, 48)),
    ("HBM _bwd_dkdv", (41, 48), (44, 48)),
    ("HBM _bwd_dq", (47, 48), (46, 48)),
    ("HBM _bwd_reduce_dkdv", (13, 13), (10, 13)),
    ("L2", (48, 48), (48, 48)),
    ("L2 _bwd_dkdv", (48, 48), (48, 48)),
])
def test_eleventh_holdout_h200_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT11_H200), "tiled", level, read, write)


def test_eleventh_holdout_h200_misses_and_floor_cases(rec_of):
    """Reads: the worksheet's ROUGH class (32 heads on 4 at 16k causal: its dK/dV kernel read 0.41x the heads-outer
    wave model, the step 0.63x) and one HEAD_DIM 256 causal MHA step at 16k (0.88x; forward 0.92x, dK/dV 0.96x; under
    the forward's own constants, 2026-12-06, 0.89x, forward 0.95x).
    Writes (the same four steps at validation and with GLUON_DKDV_PARTIAL_WRITE_SHARE): an S = 4 Gluon step of fp32
    partials above the effective L2 (+5.5 MiB at validation, +2.3 MiB since, the DKDV_PARTIAL_WRITE_EXCESS_MIB class),
    an S = 3 Triton step of 18 MiB partials (+1.46 MiB; +1.47 since 2026-12-06) and two HEAD_DIM 64 causal MHA steps
    of 6k tokens 1.9-2.1 MiB (12-14 %) over on the step: their forward kernel wrote about 0.9 MiB more than modelled
    (within) and their dQ kernel 1.06 MiB more (the dQ kernel's two write misses). Under the forward's own constants
    (2026-12-06) those two steps' forwards are 0.05-0.13 MiB off, the steps 1.2-1.3 MiB (7-8 %) over, within: two write
    misses remain. Three steps' writes are within only by the 1 MiB floor (issue 11 asks for each such case to be
    listed; at validation 0.41, 0.0002 and 0.32 MiB over tiny predictions)."""
    rec = rec_of(HOLDOUT11_H200)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": ["b1-h16-kv16-d256-fp16-q16287-k16287-tl-tiled-bwd",
                             "b1-h32-kv4-d64-bf16-q16384-k16384-tl-tiled-bwd"],
                    "write": ["b1-h32-kv4-d64-bf16-q3033-k3033-tl-tiled-bwd",
                              "b1-h32-kv8-d128-bf16-q512-k983-br-tiled-bwd"]}
    by_id = {r.id: r for r in rec.rows}
    reads = [by_id[i].level("HBM").ratio_read for i in miss["read"]]
    assert reads == [pytest.approx(0.888, abs=0.001), pytest.approx(0.630, abs=0.001)]  # 0.881 before 2026-12-06
    mha6k = ["b1-h16-kv16-d64-fp16-q6032-k6032-tl-tiled-bwd", "b1-h16-kv16-d64-fp16-q6144-k6144-tl-tiled-bwd"]
    over = {i: (by_id[i].level("HBM").measured_write - by_id[i].level("HBM").predicted_write) / 2**20
            for i in mha6k + miss["write"]}
    # 2.14, 1.95 (the 6k MHA steps, then misses), 1.46, 2.28 under the constants before 2026-12-06
    assert [round(v, 2) for v in over.values()] == [1.31, 1.19, 1.47, 2.28]
    assert all(rec.within(by_id[i], "HBM", "write") for i in mha6k)
    dq = {i: by_id[i].level("HBM _bwd_dq") for i in mha6k}
    assert all(1.0 * 2**20 < lv.measured_write - lv.predicted_write < 1.1 * 2**20 for lv in dq.values())
    floor_only = sorted(r.id for r in rec.rows
                        if rec.within(r, "HBM", "write") and not r.level("HBM").within("write", 0.10, 0))
    assert floor_only == ["b1-h12-kv2-d128-fp16-q2020-k2020-nc-tiled-bwd",
                          "b2-h14-kv2-d64-bf16-q1024-k1024-tl-tiled-bwd",
                          "b2-h16-kv16-d128-fp16-q1024-k1024-tl-tiled-bwd"]
    assert all(r.level("HBM").within("read", 0.10, 0) for r in rec.rows if r.id not in miss["read"])


def test_training_holdouts_10_and_11_pooled(rec_of, monkeypatch):
    """Hold-outs 10 and 11 tested the same kernels and model (2981147), each committed before it was measured; 11 was
    drawn after 10 missed the write bar, so they are read together: at validation 80 steps, reads 75 (93.8 %), writes
    71 (88.75 %), UNDER issue 11's 90 %. The model of then is today's with the Gluon launch's partials at 0.5 (the
    share fitted on these receipts since) and, since 2026-12-06, without the forward's own constants (every forward
    launch at 24 ways, as then): reconciled that way here. Under the current model (calibration now, not a
    validation) the writes are 76 (74 with the Gluon share alone, before 2026-12-06)."""
    import iomodel.cache.predict as predict
    from iomodel.measure.records import Measurement
    from iomodel.reconcile.compare import reconcile

    got = [_counts(rec_of(name), "tiled", "HBM", w) for w in ("read", "write") for name in (HOLDOUT10_H200, HOLDOUT11_H200)]
    assert got == [(29, 32), (46, 48), (30, 32), (46, 48)]  # (44, 48) for 11's writes before 2026-12-06
    monkeypatch.setattr(predict, "GLUON_DKDV_PARTIAL_WRITE_SHARE", 0.5)
    from iomodel.cache.params import L2Params

    monkeypatch.setattr(L2Params, "for_forward", lambda self: self)  # the forward at the backward's constants, as then
    root = Path(__file__).resolve().parents[1] / "receipts"
    recs = {name: reconcile(Measurement.load(root / name)) for name in (HOLDOUT10_H200, HOLDOUT11_H200)}  # once each
    then = [_counts(recs[name], "tiled", "HBM", w) for w in ("read", "write") for name in (HOLDOUT10_H200, HOLDOUT11_H200)]
    assert then == [(29, 32), (46, 48), (27, 32), (44, 48)]
    assert (then[0][0] + then[1][0], then[2][0] + then[3][0]) == (75, 71)


def _tree_digest(commit):
    """iomodel.measure.ncu.source_digest of ``commit``'s iomodel/ and kernels/, read from git; skips the test where
    this checkout lacks git or that commit."""
    import shutil
    import subprocess
    import tempfile

    from iomodel.measure.ncu import SOURCE_FOLDERS, source_digest

    root = Path(__file__).resolve().parents[1]
    git = shutil.which("git")
    if git is None or subprocess.run([git, "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"],
                                     capture_output=True).returncode != 0:
        pytest.skip(f"no git history of commit {commit} in this checkout")
    listing = subprocess.run([git, "-C", str(root), "ls-tree", "-r", "--name-only", commit, *SOURCE_FOLDERS],
                             capture_output=True, text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        for path in listing:
            if path.endswith(".py"):
                blob = subprocess.run([git, "-C", str(root), "show", f"{commit}:{path}"], capture_output=True,
                                      check=True).stdout
                (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / path).write_bytes(blob)
        return source_digest(tmp)


def test_eleventh_holdout_records_the_tree_it_ran():
    """The receipt's environment.source_sha256 is the source_digest of commit 15458ed's iomodel/ and kernels/ (the
    sweep's commit 36c9c62 plus the plot legend); checked from git where the history is there."""
    import json

    root = Path(__file__).resolve().parents[1]
    data = json.loads((root / "receipts" / HOLDOUT11_H200).read_text())
    assert data["environment"]["device"] == "NVIDIA H200" and len(data["shapes"]) == 48
    assert data["environment"]["source_sha256"] == "407e295fce130a79dbde41f6db4d9acee3322289b22ec7db96d91cb66547bfdb"
    assert _tree_digest("15458ed") == data["environment"]["source_sha256"]


def test_gluon_partial_share_and_write_band_follow_from_the_receipts(rec_of):
    """GLUON_DKDV_PARTIAL_FIT_STEPS, the fit's stated outcome and DKDV_PARTIAL_WRITE_EXCESS_MIB/_STEPS recomputed from
    the committed H200 training receipts under the current model: the spill-free Gluon launch's split steps (hold-outs
    9-11) are 19, 17 of them with step writes within ±10 % or 1 MiB, mean dK/dV write excess +0.51 MiB; the steps whose
    fp32 partials exceed the effective L2 are 61, -2.40 to +6.88 MiB, 36 more than 1 MiB above and 5 more than 1 MiB
    below."""
    import json

    from iomodel.cache.params import (DKDV_PARTIAL_WRITE_EXCESS_MIB, DKDV_PARTIAL_WRITE_EXCESS_STEPS,
                                      GLUON_DKDV_PARTIAL_FIT_STEPS)
    from iomodel.cache.predict import training_floor

    root = Path(__file__).resolve().parents[1] / "receipts"
    names = sorted(p.name for p in root.glob("ncu-h200-*.json")  # the set the constants cite: not hold-out 13's
                   if p.name != HOLDOUT13_H200  # H200 run (2026-12-06), which validates the model they are part of
                   and any((s.get("spec") or {}).get("backward") for s in json.loads(p.read_text())["shapes"]))
    fit, band = [], []
    for name in names:
        rec = rec_of(name)
        for r in rec.rows:
            lv = r.level("HBM _bwd_dkdv")
            if r.error or r.tiling is None or r.tiling.bwd_group_splits <= 1 or lv is None or lv.measured_write is None:
                continue
            excess = (lv.measured_write - lv.predicted_write) / 2**20
            if training_floor(r.spec, r.tiling)["_bwd_dkdv"][1] > 0.5 * 60 * 2**20:
                band.append(excess)
            if r.tiling.bwd_dkdv_kernel == "gluon" and "gluon-dkdv-holdout1" not in name:
                fit.append((excess, bool(rec.within(r, "HBM", "write"))))
    assert len(fit) == GLUON_DKDV_PARTIAL_FIT_STEPS == 19 and sum(ok for _, ok in fit) == 17
    assert sum(e for e, _ in fit) / len(fit) == pytest.approx(0.51, abs=0.005)
    lo, hi = DKDV_PARTIAL_WRITE_EXCESS_MIB
    assert (round(min(band), 1), round(max(band), 1)) == (lo, hi)
    assert (len(band), sum(e > 1 for e in band), sum(e < -1 for e in band)) == DKDV_PARTIAL_WRITE_EXCESS_STEPS


# The thirteenth training hold-out (sweeps/h200-train-holdout13.toml, 48 steps, committed at 6900c5d with
# GLUON_DKDV_PARTIAL_WRITE_SHARE = 0.75 before any measurement; the model and kernels unchanged since) and the second
# eager hold-out (sweeps/h200-train-eager-holdout2.toml, 6 steps), measured on 2026-12-05 ON AN H100 (no H200 could be
# started in eleven tries that session), predicted for the record's H100-SXM: VALIDATION.
HOLDOUT13_H100 = "ncu-h100-train-holdout13-2026-12-05.json"
EAGER_HOLDOUT2_H100 = "ncu-h100-train-eager-holdout2-2026-12-05.json"


@pytest.mark.parametrize("level, read, write", [
    # issue 11 item 5's step bar, 90 %: as measured reads 100 %, writes 91.7 % (44/48); under the forward's own
    # constants (2026-12-06, calibration since) writes 43/48 (89.6 %), the forward's 45/48 (47/48 before)
    ("HBM", (48, 48), (43, 48)),
    ("HBM _attn_fwd", (47, 48), (45, 48)),
    ("HBM _bwd_preprocess", (48, 48), (48, 48)),
    ("HBM _bwd_dkdv", (39, 48), (44, 48)),
    ("HBM _bwd_dq", (47, 48), (47, 48)),
    ("HBM _bwd_reduce_dkdv", (12, 12), (10, 12)),
    ("L2", (48, 48), (48, 48)),
    ("L2 _bwd_dkdv", (48, 48), (48, 48)),
])
def test_thirteenth_holdout_h100_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT13_H100), "tiled", level, read, write)


def test_thirteenth_holdout_h100_misses_and_floor_cases(rec_of):
    """No step read misses. The four step write misses as measured are the Triton dK/dV launch's group split (HEAD_DIM
    64, S = 3 or 5 slices of fp32 partials that the model keeps in L2): the steps write 1.11-1.33 MiB more than
    predicted (1.11-1.33 MiB under the forward's own constants, 2026-12-06, too), just past the 1 MiB floor, their
    dK/dV kernel 1.11-1.65 MiB. Under the forward's own constants a fifth: a causal MHA HEAD_DIM 256 step 3.5 MiB under
    (its forward 2.8 MiB under, 0.65x). Three steps' writes are within only by the floor (listed, as issue 11 asks).
    The dK/dV kernel's nine read misses are causal GQA steps of groups 4 to 8 at 2k-16k tokens, all below the model
    (0.79-0.90x), eight of them in the tiles-descending order, as on the H200 (hold-outs 10 and 11); the steps they
    belong to are within."""
    rec = rec_of(HOLDOUT13_H100)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": [],
                    "write": ["b1-h32-kv4-d64-fp16-q3072-k3072-tl-tiled-bwd",
                              "b2-h14-kv2-d64-bf16-q2048-k2048-tl-tiled-bwd",
                              "b2-h16-kv16-d256-fp16-q1024-k1024-tl-tiled-bwd",
                              "b4-h14-kv2-d64-bf16-q1000-k1024-br-tiled-bwd",
                              "b4-h14-kv2-d64-fp16-q512-k2048-br-tiled-bwd"]}
    by_id = {r.id: r for r in rec.rows}
    split = [i for i in miss["write"] if by_id[i].spec.head_dim == 64]
    assert len(split) == 4
    for i in split:
        r = by_id[i]
        assert r.tiling.bwd_dkdv_kernel == "triton" and r.tiling.bwd_group_splits in (3, 5) and r.spec.head_dim == 64
    over = [[(by_id[i].level(lv).measured_write - by_id[i].level(lv).predicted_write) / 2**20 for i in split]
            for lv in ("HBM", "HBM _bwd_dkdv")]
    # the steps' first: 1.168 under the constants before 2026-12-06
    assert over == [pytest.approx([1.226, 1.109, 1.323, 1.331], abs=0.001),
                    pytest.approx([1.645, 1.110, 1.323, 1.329], abs=0.001)]
    d256 = by_id["b2-h16-kv16-d256-fp16-q1024-k1024-tl-tiled-bwd"]
    assert [round((d256.level(lv).measured_write - d256.level(lv).predicted_write) / 2**20, 3)
            for lv in ("HBM", "HBM _attn_fwd")] == [-3.517, -2.843]
    floor_only = sorted(r.id for r in rec.rows
                        if rec.within(r, "HBM", "write") and not r.level("HBM").within("write", 0.10, 0))
    assert floor_only == ["b1-h14-kv2-d64-fp16-q1024-k1024-tl-tiled-bwd",
                          "b1-h32-kv32-d80-bf16-q1024-k1024-nc-tiled-bwd",
                          "b2-h32-kv8-d64-bf16-q1000-k2974-br-tiled-bwd"]
    assert all(r.level("HBM").within("read", 0.10, 0) for r in rec.rows)  # every read within ±10 % alone
    ratios = sorted(round(r.level("HBM _bwd_dkdv").ratio_read, 2) for r in rec.rows
                    if not rec.within(r, "HBM _bwd_dkdv", "read"))
    assert len(ratios) == 9 and ratios[0] == 0.79 and ratios[-1] == 0.90
    dkdv_miss = [r for r in rec.rows if not rec.within(r, "HBM _bwd_dkdv", "read")]
    assert all(r.spec.causal and 4 <= r.spec.heads // r.spec.kv_heads <= 8 for r in dkdv_miss)
    assert sorted(r.tiling.bwd_dkdv_order for r in dkdv_miss) == ["heads-outer"] + ["tiles-descending"] * 8


def test_thirteenth_holdout_and_eager_holdout_ran_the_committed_tree_on_an_h100():
    """Both receipts record the tree hold-out 13's header names (source digest 8cb64332..., the tree of 6900c5d and of
    45f02d3, the session's base: checked from git where the history is there) and the device they ran on, an H100, not
    the H200 the sweeps were drawn for."""
    import json

    root = Path(__file__).resolve().parents[1] / "receipts"
    header = (root.parent / "sweeps" / "h200-train-holdout13.toml").read_text()
    for name, shapes in ((HOLDOUT13_H100, 48), (EAGER_HOLDOUT2_H100, 6)):
        data = json.loads((root / name).read_text())
        env = data["environment"]
        assert env["device"] == "NVIDIA H100 80GB HBM3" and len(data["shapes"]) == shapes
        assert env["source_sha256"] == "8cb643325250570518bf72ee9bd21cc92d2ed8b0c64a09aaf9c3b521f76b4ae6"
        assert env["source_sha256"] in header
    assert _tree_digest("6900c5d") == _tree_digest("45f02d3") == env["source_sha256"]


def test_second_eager_holdout_h100_is_within(rec_of):
    """The eager chain on the six steps of the second eager hold-out, up to 8,192 tokens: DRAM reads and writes within
    ±10 % on 6/6 each way, without the 1 MiB floor (issue 11 item 5's eager bar)."""
    rec = rec_of(EAGER_HOLDOUT2_H100)
    rows = [r for r in rec.rows if r.impl == "baseline"]
    assert len(rows) == 6 and max(r.spec.batch * r.spec.seqlen_k for r in rows) <= 8192
    _assert_counts(rec, "baseline", "HBM", (6, 6), (6, 6))
    _assert_each_within_10_percent(rows)


def test_tiles_descending_dkdv_reads_sit_on_the_compulsory_floor(rec_of):
    """docs/l2-calibration.md, "The tiles-descending dK/dV reads sit on the floor": on the 33 causal top-left GQA steps
    of hold-outs 9-11 (H200) and 13 (H100) whose dK/dV kernel ran tiles-descending with one group slice, the kernel
    read 1.001-1.035x its compulsory bytes; the model predicts 1.000-1.470x (the trailing programs' re-reads)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import dkdv_descending_floor as diag

    rows = [(m, p) for _, _, t, m, p in diag.steps(list(diag.RECEIPTS), rec_of) if t.bwd_group_splits == 1]
    assert len(rows) == 33
    assert (round(min(m for m, _ in rows), 3), round(max(m for m, _ in rows), 3)) == (1.001, 1.035)
    assert (round(min(p for _, p in rows), 3), round(max(p for _, p in rows), 3)) == (1.0, 1.47)


# Hold-out 13 and the second eager hold-out ON THE H200 (2026-12-06, eleventh session): the same sweeps, measured from
# the tree of d80fb5d (digest d0326a5e...: the model and kernels of 6900c5d for these steps; what changed since in
# iomodel/ and kernels/ moves none of their predictions or launches: the sweep's header), predicted for the record's
# H200, nothing refitted: VALIDATION, issue 11 item 5 on the GPU it names.
HOLDOUT13_H200 = "ncu-h200-train-holdout13-2026-12-06.json"
EAGER_HOLDOUT2_H200 = "ncu-h200-train-eager-holdout2-2026-12-06.json"


@pytest.mark.parametrize("level, read, write", [
    ("HBM", (48, 48), (47, 48)),  # issue 11 item 5's step bar, 90 %: reads 100 %, writes 97.9 %
    # writes 48/48 as measured; 46/48 under the forward's own constants (2026-12-06, calibration since): a causal
    # HEAD_DIM 256 forward 1.3 MiB under (0.81x) and a bottom-right HEAD_DIM 128 one 1.8 MiB under (0.53x)
    ("HBM _attn_fwd", (48, 48), (46, 48)),
    ("HBM _bwd_preprocess", (48, 48), (48, 48)),
    ("HBM _bwd_dkdv", (39, 48), (47, 48)),
    ("HBM _bwd_dq", (47, 48), (47, 48)),
    ("HBM _bwd_reduce_dkdv", (12, 12), (10, 12)),
    ("L2", (48, 48), (48, 48)),
    ("L2 _bwd_dkdv", (48, 48), (48, 48)),
])
def test_thirteenth_holdout_h200_counts(rec_of, level, read, write):
    _assert_counts(rec_of(HOLDOUT13_H200), "tiled", level, read, write)


def test_thirteenth_holdout_h200_misses_and_floor_cases(rec_of):
    """No step read misses. The one step write miss is the class the H100 showed: the Triton dK/dV group split at
    HEAD_DIM 64 (S = 3), 3.17 MiB written against 1.72 MiB predicted (1.71 MiB under the forward's own constants,
    2026-12-06). Five steps' writes are within only by the 1 MiB floor (listed, as issue 11 asks). The dK/dV kernel's
    nine read misses are causal GQA steps, all below the model (0.79-0.90x), eight of them tiles-descending
    (docs/l2-calibration.md, "The tiles-descending dK/dV reads sit on the floor")."""
    rec = rec_of(HOLDOUT13_H200)
    miss = {w: sorted(r.id for r in rec.rows if not rec.within(r, "HBM", w)) for w in ("read", "write")}
    assert miss == {"read": [], "write": ["b1-h32-kv4-d64-fp16-q3072-k3072-tl-tiled-bwd"]}
    (r,) = [r for r in rec.rows if r.id in miss["write"]]
    assert r.tiling.bwd_dkdv_kernel == "triton" and r.tiling.bwd_group_splits == 3 and r.spec.head_dim == 64
    hbm = r.level("HBM")
    assert (round(hbm.measured_write / 2**20, 3), round(hbm.predicted_write / 2**20, 3)) == (3.167, 1.711)  # 1.718
    floor_only = sorted(r.id for r in rec.rows
                        if rec.within(r, "HBM", "write") and not r.level("HBM").within("write", 0.10, 0))
    assert floor_only == ["b1-h32-kv32-d80-bf16-q1024-k1024-nc-tiled-bwd",
                          "b2-h14-kv2-d64-bf16-q2048-k2048-tl-tiled-bwd",
                          "b2-h32-kv8-d64-bf16-q1000-k2974-br-tiled-bwd",
                          "b4-h14-kv2-d64-bf16-q1000-k1024-br-tiled-bwd",
                          "b4-h14-kv2-d64-fp16-q512-k2048-br-tiled-bwd"]
    assert all(r.level("HBM").within("read", 0.10, 0) for r in rec.rows)  # every read within ±10 % alone
    dkdv_miss = [r for r in rec.rows if not rec.within(r, "HBM _bwd_dkdv", "read")]
    ratios = sorted(round(r.level("HBM _bwd_dkdv").ratio_read, 2) for r in dkdv_miss)
    assert len(ratios) == 9 and ratios[0] == 0.79 and ratios[-1] == 0.90
    assert all(r.spec.causal and r.spec.heads > r.spec.kv_heads for r in dkdv_miss)
    assert sorted(r.tiling.bwd_dkdv_order for r in dkdv_miss) == ["heads-outer"] + ["tiles-descending"] * 8


def test_thirteenth_holdout_and_eager_holdout_ran_on_the_h200_from_the_recorded_tree():
    """Both receipts record the H200 and the digest of d80fb5d's iomodel/ and kernels/ (checked from git where the
    history is there)."""
    import json

    root = Path(__file__).resolve().parents[1] / "receipts"
    for name, shapes in ((HOLDOUT13_H200, 48), (EAGER_HOLDOUT2_H200, 6)):
        data = json.loads((root / name).read_text())
        env = data["environment"]
        assert env["device"] == "NVIDIA H200" and len(data["shapes"]) == shapes
        assert env["source_sha256"] == "d0326a5e33132a82d7663d2019395273dbb3430b2913e506a94228f8be7f7ccc"
    assert _tree_digest("d80fb5d") == env["source_sha256"]


def test_second_eager_holdout_h200_is_within(rec_of):
    """The eager chain on the six steps of the second eager hold-out on the H200, up to 8,192 tokens: DRAM reads and
    writes within ±10 % on 6/6 each way, without the 1 MiB floor (issue 11 item 5's eager bar; reads 0.92-0.99x)."""
    rec = rec_of(EAGER_HOLDOUT2_H200)
    rows = [r for r in rec.rows if r.impl == "baseline"]
    assert len(rows) == 6 and max(r.spec.batch * r.spec.seqlen_k for r in rows) <= 8192
    _assert_counts(rec, "baseline", "HBM", (6, 6), (6, 6))
    _assert_each_within_10_percent(rows)
