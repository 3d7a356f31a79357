"""The Gluon prefill's place on this CPU machine: when the launcher and the worksheet pick it, what it
refuses (one line each), its one configuration, and that it compiles for sm_90 (no GPU here: the
kernel itself is checked on the H200 by ``tests/test_gpu_gluon.py``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import GLUON_AUTO, PATHS, gluon_refusal, prefill_path
from iomodel.schedule.tiles import program_sram_bytes

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("dtype,d,windowed,sm,causal,expected", [
    ("bf16", 128, False, 9, False, "prefill-gluon"),
    ("fp16", 128, False, 9, True, "prefill-gluon"),
    ("bf16", 64, False, 9, False, "prefill-gluon"),  # four consumer warpgroups: 1.053x cuDNN against 0.947x (H100)
    # causal at 64: the H200's calibration had the Gluon prefill ahead from 2k rows, an H100 hold-out the TMA one
    ("fp16", 64, False, 9, True, "prefill-tma"),
    ("bf16", 64, True, 9, False, "prefill-tma"),  # no window band in the Gluon kernel
    ("bf16", 128, True, 9, True, "prefill-tma"),
    ("bf16", 32, False, 9, False, "prefill-tma"),
    ("fp32", 128, False, 9, False, "prefill"),
    ("bf16", 128, False, 8, False, "prefill"),
    ("bf16", 64, False, None, False, "prefill"),
])
def test_prefill_path_picks_gluon_where_it_was_measured_ahead(dtype, d, windowed, sm, causal, expected):
    assert prefill_path(dtype, d, sm, windowed=windowed, causal=causal) == expected
    assert GLUON_AUTO == {64: (False,), 128: (False, True)} and "prefill-gluon" in PATHS


def test_switches_turn_gluon_off():
    assert prefill_path("bf16", 128, 9, use_gluon=False, causal=True) == "prefill-tma"
    assert prefill_path("bf16", 128, 9, use_tma=False, causal=True) == "prefill"
    assert prefill_path("bf16", 128, 9, tma_aligned=False, causal=True) == "prefill"
    with pytest.raises(TypeError, match="causal"):  # no default: HEAD_DIM 64 picks by it
        prefill_path("bf16", 64, 9)


@pytest.mark.parametrize("args,match", [
    (("bf16", 128, True, False, 8), "Hopper \\(sm_90\\) only, not on an sm_8x GPU"),
    (("bf16", 128, True, False, None), "not on Triton's interpreter"),
    (("fp32", 128, True, False, 9), "needs fp16 or bf16, got fp32"),
    (("bf16", 96, True, False, 9), "runs HEAD_DIM 64 or 128, got 96"),
    (("bf16", 128, True, True, 9), "no sliding window"),
    (("bf16", 128, False, False, 9), "16-byte aligned"),
])
def test_gluon_refusal_says_what_to_change(args, match):
    import re

    reason = gluon_refusal(*args)
    assert reason is not None and re.search(match, reason) and "use path=" in reason
    assert "\n" not in reason
    assert gluon_refusal("bf16", 128, True, False, 9) is None


def test_one_configuration_and_its_shared_memory():
    from kernels import heuristics as hx

    for causal in (False, True):
        (c,) = hx.prefill_candidates(128, "bf16", causal, "prefill-gluon")
        assert (c.block_m, c.block_n, c.num_warps, c.num_stages, c.warp_specialize) == (128, 128, 12, 2, True)
        assert c.tile_order == ("reverse" if causal else "forward") and c.programs_per_sm == 1
        (c,) = hx.prefill_candidates(64, "fp16", causal, "prefill-gluon")  # four consumer warpgroups
        assert (c.block_m, c.block_n, c.num_warps, c.num_stages, c.programs_per_sm) == (256, 64, 20, 4, 1)
    with pytest.raises(IomodelError, match="runs HEAD_DIM 64 or 128, got 32"):
        hx.gluon_tiles(32)
    # every HEAD_DIM the Gluon prefill runs has its configuration, and no other
    from iomodel.schedule.capabilities import GLUON_HEAD_DIMS

    assert tuple(sorted(hx.GLUON_TILES)) == GLUON_HEAD_DIMS and set(GLUON_AUTO) <= set(GLUON_HEAD_DIMS)
    # Q (128 x 128) and two stages of K and V (128 x 128), bf16: 160 KiB, one program per SM
    assert program_sram_bytes(128, 128, 2, 128, 2) == 160 * 1024


def test_interpreter_refuses_the_gluon_path_in_one_line():
    from kernels.flash_attention import flash_attention

    q = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16)
    with pytest.raises(IomodelError, match="not on Triton's interpreter: use path='prefill'") as err:
        flash_attention(q, q, q, path="prefill-gluon")
    assert "\n" not in str(err.value)


def test_a_given_config_must_be_the_one_configuration():
    from kernels import heuristics as hx
    from kernels.flash_attention import _check_gluon_config

    default = hx.prefill_default(128, "bf16", True, "prefill-gluon").config("prefill-gluon")
    _check_gluon_config(default, 128)
    _check_gluon_config(default.with_(grid_order="head-grouped:4", tile_order="forward"), 128)
    with pytest.raises(IomodelError, match="runs one configuration .* config has block_n=64"):
        _check_gluon_config(default.with_(block_n=64), 128)
    with pytest.raises(IomodelError, match="grid orders 'tiles-fastest' and 'head-grouped:G'"):
        _check_gluon_config(default.with_(grid_order="heads-fastest"), 128)
    with pytest.raises(IomodelError, match="set config.path='prefill-gluon'"):
        _check_gluon_config(default.with_(path="prefill-tma"), 128)


def test_worksheet_models_the_gluon_tiles_on_the_h200():
    """The worksheet's prefill tiles on the H200 at HEAD_DIM 128 are the Gluon prefill's (2 stages)."""
    from iomodel.report.worksheet import kernel_tiling
    from iomodel.spec import LayerSpec
    from iomodel.spec.hardware import get_hardware

    spec = LayerSpec(batch=1, heads=32, kv_heads=8, head_dim=128, seqlen_q=8192, seqlen_k=8192, dtype="bf16",
                     causal=True)
    tiling, source = kernel_tiling(spec, get_hardware("H200"))
    assert (tiling.block_m, tiling.block_n, tiling.num_stages) == (128, 128, 2)
    assert "prefill-gluon path" in source


def test_worksheet_models_the_four_warpgroup_tiles_at_64_non_causal():
    """HEAD_DIM 64 non-causal runs the four-warpgroup Gluon prefill on the H200: the worksheet takes its
    256 x 64 tiles (K/V re-read once per 256 query rows) and one program per SM (its register file), not
    the two that shared memory alone would allow; causal keeps the TMA prefill's tiles."""
    from iomodel.report.worksheet import kernel_tiling, l2_launch
    from iomodel.spec import LayerSpec
    from iomodel.spec.hardware import get_hardware

    h200 = get_hardware("H200")
    spec = LayerSpec(batch=4, heads=16, kv_heads=16, head_dim=64, seqlen_q=4096, seqlen_k=4096, dtype="fp16",
                     causal=False)
    tiling, source = kernel_tiling(spec, h200)
    assert (tiling.block_m, tiling.block_n, tiling.num_stages) == (256, 64, 4) and "prefill-gluon path" in source
    warps, order, src, pps, pps_src = l2_launch(spec, h200, tiling=tiling)
    assert (warps, order, pps) == (20, "forward", 1) and "prefill-gluon path" in src and "setmaxnreg" in pps_src
    causal = spec.with_(causal=True)
    ctiling, source = kernel_tiling(causal, h200)
    # the TMA prefill fixes nothing: its programs per SM are counted, here with its 118 registers a thread (2, not the
    # 3 its shared memory allows)
    pps, pps_src = l2_launch(causal, h200, tiling=ctiling)[3:]
    assert "prefill-tma path" in source and pps == 2 and "118 registers a thread" in pps_src
    # other tiles are not the Gluon kernel's launch: nothing is fixed (a reviewer found 1 pinned for 64 x 64 tiles)
    pps, pps_src = l2_launch(spec, h200, tiling=dataclasses.replace(tiling, block_m=64, block_n=64, num_stages=2))[3:]
    assert pps_src is None or "registers a thread" in pps_src  # counted (or not), never the Gluon kernel's own 1


@pytest.mark.parametrize("given, pps, source", [
    ({}, 1, "the kernel's: its warp-specialised setmaxnreg split"),
    ({"num_warps": 8}, 2, "estimated from shared memory"),  # another launch: estimated again
    ({"programs_per_sm": 2}, 2, "given by the schedule"),
])
def test_the_gluon_launch_fixes_one_program_per_sm_unless_the_launch_is_given(given, pps, source):
    from iomodel.report.worksheet import l2_schedule
    from iomodel.spec.hardware import get_hardware
    from iomodel.spec.resolve import resolve_layer

    layer = resolve_layer(heads=16, kv_heads=16, head_dim=64, seqlen=4096, batch=4, causal=False, dtype="fp16",
                          hardware="H200")
    sched, _ = l2_schedule(layer, given)
    got, why = sched.resident_programs_per_sm(layer.spec, get_hardware("H200"))
    assert got == pps and why.startswith(source)
    assert "programs_per_sm_source" not in sched.to_dict()


@pytest.mark.slow
def test_gluon_prefill_compiles_for_sm90():
    """Compiled in a child without TRITON_INTERPRET (``kernels.compile_check``'s fake driver): warpgroup
    MMAs and TMA copies in the PTX, no spill, the shared memory of its tiles plus barriers: 160 KiB at
    HEAD_DIM 128 (128 x 128, 2 stages) and 96 KiB at 64 (256 x 64, 4 stages); the registers that fill the
    SM's register file (one program per SM: ``TileChoice.programs_per_sm``)."""
    from test_kernel_compile import _compiled

    reports = _compiled("import json; from kernels import compile_check as cc; cc._install_fake_driver(90); "
                        "print(json.dumps([cc.compile_gluon_prefill(d, 'bf16', c).__dict__ for d in (64, 128) "
                        "for c in (False, True)]))")
    assert all(r["ok"] for r in reports), [r["error"] for r in reports]
    for r in reports:
        d, c = r["config"]["head_dim"], r["config"]
        assert r["wgmma"] > 0 and r["tma"] > 0 and r["spill_bytes"] in (0, None)
        want = program_sram_bytes(c["block_m"], c["block_n"], c["num_stages"], d, 2)
        assert want == {64: 96, 128: 160}[d] * 1024 and want <= r["shared_bytes"] < want + 1024
        assert r["registers"] == 65536 // (32 * c["num_warps"]) // 8 * 8 == {64: 96, 128: 168}[d]


def test_kernel_speed_receipt_of_the_gluon_prefill():
    """``receipts/bench_kernel_h200-2026-12-04-gluon.json`` (the kernel-speed matrix after the Gluon
    prefill became the HEAD_DIM 128 default): every HEAD_DIM 128 row ran prefill-gluon; at N >= 2k
    it is at or above cuDNN on 9 of 16 rows (0.96-1.12x), HEAD_DIM 64 (the TMA prefill) on 4 of 16."""
    from iomodel.bench.receipt import check_receipt, load_receipt

    r = load_receipt(ROOT / "receipts" / "bench_kernel_h200-2026-12-04-gluon.json")
    assert check_receipt(r) == []
    for d, path, at_least, lowest in ((128, "prefill-gluon", 9, 0.96), (64, "prefill-tma", 4, 0.89)):
        rows = [e for e in r["prefill"] if e["shape"]["head_dim"] == d]
        assert {e["results"]["tiled"]["config"]["path"] for e in rows} == {path}
        long = [e["ratios"]["sdpa-cudnn"] for e in rows if e["shape"]["seqlen"] >= 2048]
        assert len(long) == 16 and sum(x >= 1.0 for x in long) == at_least and min(long) > lowest


def test_training_speed_receipt_with_the_gluon_forward():
    """``receipts/train-speed-gluon-fwd-h200-2026-12-04.json``: forward + backward at HEAD_DIM 128 at or
    above 0.8x cuDNN on 6 of 10 rows (issue 11's bar is every row), every HEAD_DIM 64 row; 1.3x FLASH on
    all 20; extra peak memory below FLASH's on every row."""
    r = json.loads((ROOT / "receipts" / "train-speed-gluon-fwd-h200-2026-12-04.json").read_text())
    rows = r["speed"]
    assert len(rows) == 20
    by_d = {d: [e["ratio_vs_sdpa-cudnn"] for e in rows if e["d"] == d] for d in (64, 128)}
    assert sum(x >= 0.8 for x in by_d[128]) == 6 and min(by_d[128]) > 0.74
    assert min(by_d[64]) >= 0.8
    assert all(e["ratio_vs_sdpa-flash"] >= 1.3 for e in rows)
    assert all(e["extra_peak_bytes"]["tiled"] < e["extra_peak_bytes"]["sdpa-flash"] for e in rows)
    for e in rows:  # each ratio from the medians it states
        assert e["ratio_vs_sdpa-cudnn"] == pytest.approx(e["median_s"]["sdpa-cudnn"] / e["median_s"]["tiled"])


def test_gluon_holdout_sweep_is_new_and_as_described():
    """``sweeps/h200-gluon-holdout1.toml`` (committed before measurement): 22 HEAD_DIM 128 shapes, the
    bundled kernel only, none in an earlier sweep (lengths, heads, dtype, mask, alignment, pass), 4
    training steps, 9 whose K/V of one KV head is 9.8-40 MiB."""
    from iomodel.measure.sweep import load_sweep

    sweeps = ROOT / "sweeps"
    new = load_sweep(sweeps / "h200-gluon-holdout1.toml")

    def key(s):
        p = s.spec
        return (p.batch, p.heads, p.kv_heads, p.head_dim, p.seqlen_q, p.seqlen_k, p.dtype, p.causal,
                p.causal_align if p.causal else None, p.backward)

    keys = {key(s) for s in new.shapes}
    assert len(new.shapes) == len(keys) == 22
    assert {s.impl for s in new.shapes} == {"tiled"} and {s.spec.head_dim for s in new.shapes} == {128}
    assert sum(s.spec.backward for s in new.shapes) == 4
    kv_mib = [s.spec.seqlen_k * 128 * 2 * 2 / 2**20 for s in new.shapes if s.spec.seqlen_q == s.spec.seqlen_k
              and not s.spec.backward]
    assert sum(9.5 < m <= 40 for m in kv_mib) == 9
    for path in sorted(sweeps.glob("*.toml")):
        if path.name != "h200-gluon-holdout1.toml":
            assert not keys & {key(s) for s in load_sweep(path).shapes}, path.name


def test_the_causal_64_rule_was_withdrawn_on_its_hold_out():
    """At HEAD_DIM 64 causal the Gluon prefill (its warpgroups skipping the key blocks they do not see) was ahead of the
    TMA prefill on the H200's calibration shapes from 2,048 rows, but its speed hold-out (8 shapes committed before
    they were measured, run on an H100) had the TMA prefill ahead on every shape of 2,048 rows or more: the launcher
    keeps ``prefill-tma`` there (``GLUON_AUTO``)."""
    cal = json.loads((ROOT / "receipts" / "gluon-causal64-probe-h200-2026-12-06.json").read_text())
    hold = json.loads((ROOT / "receipts" / "gluon-causal64-holdout-h100-2026-12-06.json").read_text())
    assert cal["device"] == "NVIDIA H200" and not cal.get("holdout") and "H100" in hold["device"] and hold["holdout"]
    assert all(r["gluon_over_tma"] > 1.0 for r in cal["rows"] if r["N"] >= 2048)
    long = [r for r in hold["rows"] if r["N"] >= 2048]
    assert len(long) == 5 and all(r["gluon_over_tma"] < 1.0 for r in long)
    assert min(r["gluon_over_tma"] for r in long) == pytest.approx(0.755, abs=0.001)
    assert False not in (r["max_abs_diff_lse_gluon_vs_tma"] < 1e-5 for r in cal["rows"] + hold["rows"])
    assert True not in GLUON_AUTO[64]
    # the same hold-out on the H200 (2026-12-06, later): the TMA prefill ahead on all 8 shapes there too
    h200 = json.loads((ROOT / "receipts" / "gluon-causal64-holdout-h200-2026-12-06.json").read_text())
    assert h200["device"] == "NVIDIA H200" and h200["holdout"] and len(h200["rows"]) == 8
    assert all(r["gluon_over_tma"] < 1.0 for r in h200["rows"])
    assert (round(min(r["gluon_over_tma"] for r in h200["rows"]), 3), round(max(r["gluon_over_tma"] for r in h200["rows"]), 3)) \
        == (0.755, 0.998)
    assert all(r["max_abs_diff_lse_gluon_vs_tma"] < 1e-5 for r in h200["rows"])


@pytest.mark.parametrize("flags, path", [
    (dict(head_dim=64, causal=True), "prefill-tma"),
    (dict(head_dim=64, causal=False), "prefill-gluon"),
    (dict(head_dim=128, causal=True), "prefill-gluon"),
    (dict(head_dim=128, causal=True, block_m=64, block_n=64), "prefill-tma"),  # not the Gluon prefill's tiles
    (dict(head_dim=128, causal=True, hardware="A100-80GB"), "prefill"),
    (dict(head_dim=128, causal=True, phase="decode", seqlen_q=1, seqlen_k=8192), "decode-split-kv"),
    (dict(head_dim=128, causal=True, block_m=8, block_n=64), None),  # tiles no launcher runs
    (dict(head_dim=512, causal=True, block_m=16, block_n=16), None),  # no bundled kernel runs the layer
])
def test_worksheet_json_names_the_kernel_path_it_models(flags, path):
    """``worksheet.kernel_path`` in the JSON: the bundled kernel's path whose launch the worksheet models (a fresh
    user found it only in the ``tiling_source`` sentence), null where no bundled kernel runs the layer or tiles."""
    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.resolve import resolve_layer

    kw = {"preset": "llama-3-8b", "hardware": "H200", **flags}
    if "seqlen_q" not in kw:
        kw["seqlen"] = 4096
    d = make_worksheet(resolve_layer(**kw)).to_dict()
    assert d["worksheet"]["kernel_path"] == path
    if path is not None and path != "decode-split-kv":
        assert f"{path} path" in d["worksheet"]["tiling_source"]
