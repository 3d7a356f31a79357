"""The ragged worksheet's L2-aware DRAM estimate (issue 13): one varlen launch through one L2.

``iomodel worksheet --seqlens`` shows :func:`iomodel.cache.estimate.estimate_ragged`, i.e.
:func:`iomodel.cache.predict.predict_ragged_launch` with programs per SM from shared memory and
warps, in JSON, Markdown and CSV alike; past the simulation's bounds it shows one line instead.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from test_cli_errors import run_cli
from iomodel.cache.estimate import (L2_ESTIMATE_MAX_PROGRAMS, RAGGED_ESTIMATE_MAX_SEQUENCES, estimate_ragged,
                                    ragged_not_estimated)
from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_ragged_launch
from iomodel.errors import IomodelError
from iomodel.format import fmt_bytes
from iomodel.schedule.grid import estimate_programs_per_sm
from iomodel.spec.resolve import resolve_layer

#: The default layer (Llama-3-8B: H = 32, H_kv = 8, d = 128, bf16, causal top-left, H200, the varlen
#: kernel's tiles): O is 8 KiB and LSE 128 B per query row, so the 4,789 query rows store 39.8 MB,
#: more than the effective L2 of written lines (31.5 MB at 0.5 of the 60 MiB under the constants before 2026-12-06;
#: 27.5 MB at the forward's own 0.4375 since 2026-12-06): some stores reach DRAM during the launch.
LAYER: list[str] = []
SEQLENS = "3000,77,1200:2500,512"


def _run(capsys, fmt, *args):
    code, out, err = run_cli(capsys, ["worksheet", *LAYER, *args, "--format", fmt])
    assert code == 0, err
    return out


def _expected(layer):
    """predict_ragged_launch computed here, with the launch and programs per SM derived independently."""
    import kernels.heuristics as h

    s, t, hw = layer.spec, layer.tiling, layer.hardware
    c = h.prefill_default(s.head_dim, s.dtype, s.causal, "prefill")  # flash_attention_varlen's path
    pps = estimate_programs_per_sm(t.sram_bytes(s), c.num_warps, hw.smem_per_sm)
    # L2Params.of: the device's forward constants (ForwardL2, 2026-12-06), which the worksheet's estimate applies
    k = predict_ragged_launch(layer.ragged.sequences(), t, L2Params.of(hw, pps), c.tile_order)
    return k, pps, c


def test_json_equals_predict_ragged_launch(capsys):
    d = json.loads(_run(capsys, "json", "--seqlens", SEQLENS))
    layer = resolve_layer(seqlens=SEQLENS)
    k, pps, c = _expected(layer)
    e = d["l2_aware"]
    read, write = sum(k.hbm_read.values()), sum(k.hbm_write.values())
    assert (e["read_bytes"], e["write_bytes"]) == (read, write)
    assert e["written_bytes"] == sum(k.requested_write.values()) == 32 * (128 * 2 + 4) * 4789 == 39_844_480
    assert e["dirty_at_end_bytes"] == sum(k.dirty_at_end.values()) == e["written_bytes"] - write
    assert (e["programs_per_sm"], e["num_warps"], e["tile_order"]) == (pps, c.num_warps, c.tile_order)
    assert e["programs_per_sm_source"].startswith("estimated from shared memory per program and warps")
    assert 0 < write < e["written_bytes"]
    assert e["source"].endswith("predict_ragged_launch (not a measurement)")
    assert any("One varlen launch, one L2" in a for a in e["assumptions"])
    assert "l2_aware_not_computed" not in d


def test_markdown_and_csv_carry_the_json_numbers(capsys):
    e = json.loads(_run(capsys, "json", "--seqlens", SEQLENS))["l2_aware"]
    md = _run(capsys, "md", "--seqlens", SEQLENS)
    total = e["read_bytes"] + e["write_bytes"]
    assert (f"DRAM read {fmt_bytes(e['read_bytes'])}, written {fmt_bytes(e['write_bytes'])}, total "
            f"{fmt_bytes(total)}") in md
    assert f"{fmt_bytes(e['dirty_at_end_bytes'])} of the {fmt_bytes(e['written_bytes'])} stored (O, LSE)" in md
    assert f"programs per SM = {e['programs_per_sm']}" in md and "ncu-h200-ragged2-2026-12-01.json" in md
    out = _run(capsys, "csv", "--seqlens", SEQLENS)
    rows = list(csv.DictReader(io.StringIO("".join(ln + "\n" for ln in out.splitlines() if not ln.startswith("#")))))
    by = {r["kind"]: r for r in rows if r["kind"].startswith("l2_aware")}
    assert (int(by["l2_aware"]["read_bytes"]), int(by["l2_aware"]["write_bytes"]), int(by["l2_aware"]["bytes"])) == (
        e["read_bytes"], e["write_bytes"], total)
    assert int(by["l2_aware_dirty_at_end"]["write_bytes"]) == e["dirty_at_end_bytes"]
    assert any(ln.startswith("# L2-aware DRAM estimate (") and "ragged2" in ln for ln in out.splitlines())


def test_varlen_tiles_and_launch_are_the_prefill_path():
    """flash_attention_varlen runs the 'prefill' path on every GPU: on the H200 (bf16, d = 128) its first
    candidate is 128 x 64, 8 warps, forward order (the ragged2 receipt's config), not prefill-tma's 128 x 128."""
    layer = resolve_layer(seqlens="512,3000,77")
    assert (layer.tiling.block_m, layer.tiling.block_n, layer.tiling.num_stages) == (128, 64, 3)
    assert "prefill path, which flash_attention_varlen runs" in layer.tiling_source
    dense = resolve_layer(batch=3, seqlen=3000)
    assert (dense.tiling.block_m, dense.tiling.block_n) == (128, 128)  # the dense layer keeps the TMA path
    from iomodel.report.ragged import make_ragged_worksheet

    e = make_ragged_worksheet(layer).l2_aware
    assert (e.num_warps, e.tile_order, e.programs_per_sm) == (8, "forward", 1)


@pytest.mark.parametrize("seqlens, needle", [
    ("300000,77", "sequence 0 (N_q 300,000, N_k 300,000): seqlen above 262,144"),
    (",".join(["16384"] * 33), "the launch runs 135,168 programs that do work"),
    (",".join(["1"] * 4097), "4,097 sequences, above 4,096"),
])
def test_refusal_is_one_line_in_every_format(capsys, seqlens, needle):
    """32 heads x ceil(16,384 / 128) = 4,096 programs per sequence; 33 sequences: 135,168 > 2^17."""
    assert (L2_ESTIMATE_MAX_PROGRAMS, RAGGED_ESTIMATE_MAX_SEQUENCES) == (131072, 4096)
    d = json.loads(_run(capsys, "json", "--seqlens", seqlens))
    assert d["l2_aware"] is None and needle in d["l2_aware_not_computed"]
    assert "\n" not in d["l2_aware_not_computed"]
    md = [ln for ln in _run(capsys, "md", "--seqlens", seqlens).splitlines() if "L2-aware DRAM estimate" in ln]
    assert md == [f"- L2-aware DRAM estimate (iomodel/cache/predict.py): not computed, {d['l2_aware_not_computed']}."]
    out = _run(capsys, "csv", "--seqlens", seqlens)
    assert f"# L2-aware DRAM estimate (iomodel/cache/predict.py): not computed, {d['l2_aware_not_computed']}" in out
    assert "\nl2_aware" not in out


def test_estimate_ragged_refuses_in_one_line():
    layer = resolve_layer(seqlens="77,300000")
    why = ragged_not_estimated(layer.ragged, layer.tiling)
    assert why is not None and why.startswith("sequence 1 (N_q 300,000, N_k 300,000)")
    with pytest.raises(IomodelError, match=r"^no L2-aware estimate for this ragged batch: sequence 1 ") as exc:
        estimate_ragged(layer.ragged, layer.tiling, layer.hardware, flops=1, peak_flops=1.0, num_warps=4,
                        tile_order="forward", config_source="test")
    assert "\n" not in str(exc.value)
