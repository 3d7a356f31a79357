"""The L2 microbenchmark receipts (H200, 2026-12-01; H100, 2026-12-06) and the constants that cite them."""

import json

import pytest

from dataclasses import replace

from iomodel.cache.params import (DEFAULT_L2_FRACTION, DEFAULT_L2_READ_FRACTION, MEASURED_L2_READ_FRACTION, L2Params,
                                  read_fraction_of)
from iomodel.cache.physical import H200_RECEIPT, RECEIPTS, measured_capacities, pattern_capacity
from iomodel.errors import IomodelError
from iomodel.spec.hardware import A100_80GB, H100_SXM, H200, get_hardware

MiB = 2**20


def test_receipt_says_what_made_it():
    r = json.loads(H200_RECEIPT.read_text())
    assert r["device"] == "NVIDIA H200" and r["num_sms"] == 132
    assert r["command"].startswith("python3 benchmarks/l2_microbench.py")
    assert r["created"].startswith("2026-12-01")
    assert r["environment"]["l2_bytes"] == H200.l2_bytes == 60 * MiB


def test_half_miss_points():
    caps = measured_capacities()
    # shared-read: 30 MiB -> 0.190, 32 MiB -> 0.739 per pass: 30 + 2 * 0.310 / 0.549 MiB
    assert caps["shared-read"].half_miss_bytes / MiB == pytest.approx(31.13, abs=0.01)
    assert caps["shared-read"].onset_bytes == 28 * MiB and caps["shared-read"].full_bytes == 34 * MiB
    assert caps["private-read"].half_miss_bytes / MiB == pytest.approx(46.74, abs=0.01)
    assert caps["private-write"].half_miss_bytes / MiB == pytest.approx(36.31, abs=0.01)


def test_l2_fraction_is_near_the_shared_read_capacity():
    """DEFAULT_L2_FRACTION (set before any measurement; since 2026-12-04 the written lines' capacity) agrees
    with the microbenchmark's shared-read capacity within 0.05; reads use that capacity itself (below)."""
    shared = measured_capacities()["shared-read"].half_miss_bytes
    assert abs(shared / H200.l2_bytes - DEFAULT_L2_FRACTION) < 0.05


def test_read_fraction_is_the_measured_shared_read_capacity():
    """DEFAULT_L2_READ_FRACTION is the shared-read half-miss point over the H200's L2 (31.13 / 60 MiB),
    to the 4 digits it is written with; L2Params judges reads against it and keeps l2_fraction's capacity."""
    shared = measured_capacities()["shared-read"].half_miss_bytes
    assert abs(shared / H200.l2_bytes - DEFAULT_L2_READ_FRACTION) < 5e-4
    p = L2Params(H200.l2_bytes, H200.num_sms)
    assert p.capacity == 30 * MiB and p.read_capacity == int(60 * MiB * 0.5188) == 32_640_073
    with pytest.raises(IomodelError, match="read_fraction must be in"):
        L2Params(H200.l2_bytes, H200.num_sms, read_fraction=0.0)


def test_corrupt_rows_refused():
    bad = {"summary": [{"pattern": "shared-read", "working_set_bytes": "8", "miss_per_pass": 0.0},
                       {"pattern": "shared-read", "working_set_bytes": 16, "miss_per_pass": 1.0}]}
    with pytest.raises(IomodelError, match="corrupt working_set_bytes"):
        pattern_capacity(bad, "shared-read")
    flat = {"summary": [{"pattern": "shared-read", "working_set_bytes": w, "miss_per_pass": 0.0} for w in (8, 16)]}
    with pytest.raises(IomodelError, match="never crosses 0.5"):
        pattern_capacity(flat, "shared-read")
    with pytest.raises(IomodelError, match="unknown"):
        pattern_capacity(flat, "shared")


def test_h100_receipt_says_what_made_it():
    r = json.loads(RECEIPTS["H100-SXM"].read_text())
    assert r["device"] == "NVIDIA H100 80GB HBM3" and r["num_sms"] == 132
    assert r["command"].startswith("python3 benchmarks/l2_microbench.py") and r["created"].startswith("2026-12-06")
    assert r["environment"]["l2_bytes"] == H100_SXM.l2_bytes == 50 * MiB


def test_h100_half_miss_points():
    caps = measured_capacities(RECEIPTS["H100-SXM"])
    # shared-read: 26 MiB -> 0.3467, 28 MiB -> 0.8216 per pass: 26 + 2 * 0.1533 / 0.4749 MiB
    assert caps["shared-read"].half_miss_bytes / MiB == pytest.approx(26.646, abs=0.001)
    assert caps["shared-read"].onset_bytes == 20 * MiB and caps["shared-read"].full_bytes == 32 * MiB
    assert caps["private-read"].half_miss_bytes / MiB == pytest.approx(39.81, abs=0.01)
    assert caps["private-write"].half_miss_bytes / MiB == pytest.approx(32.25, abs=0.01)


def test_each_measured_read_fraction_is_its_receipts():
    """Every preset's read fraction is the shared-read half-miss point of its own receipt over its L2, to the 4 digits
    it is written with; the H200's is DEFAULT_L2_READ_FRACTION."""
    assert set(MEASURED_L2_READ_FRACTION) == set(RECEIPTS) == {"H200", "H100-SXM"}
    assert MEASURED_L2_READ_FRACTION["H200"] == DEFAULT_L2_READ_FRACTION
    for preset, path in RECEIPTS.items():
        shared = measured_capacities(path)["shared-read"].half_miss_bytes
        assert abs(shared / get_hardware(preset).l2_bytes - MEASURED_L2_READ_FRACTION[preset]) < 5e-4, preset


def test_params_of_a_device_take_its_read_fraction():
    h100 = L2Params.of(H100_SXM, 2)
    assert (h100.l2_bytes, h100.num_sms, h100.programs_per_sm) == (50 * MiB, 132, 2)
    assert h100.read_capacity == int(50 * MiB * 0.5329) == 27_939_307 and h100.capacity == 25 * MiB
    assert h100.read_source == "measured on the H100-SXM: receipts/l2-micro-h100-2026-12-06.json"
    # a detected device or a measurement record names the preset first
    detected = replace(H100_SXM, name="H100-SXM (NVIDIA H100 80GB HBM3)")
    assert read_fraction_of(detected) == 0.5329 and L2Params.of(detected).read_capacity == 27_939_307
    assert L2Params.of(H200).read_capacity == L2Params(H200.l2_bytes, H200.num_sms).read_capacity == 32_640_073
    a100 = L2Params.of(A100_80GB)  # not measured: the H200's fraction, and the assumption says so
    assert a100.read_fraction == DEFAULT_L2_READ_FRACTION
    assert a100.read_source == "not measured on the A100-80GB: the H200's (receipts/l2-micro-h200-2026-12-01.json)"
    assert L2Params.of(H100_SXM, ways=None, l2_fraction=0.25).capacity == int(50 * MiB * 0.25)


def test_the_estimate_on_an_h100_judges_reads_at_its_own_capacity():
    """The worksheet's estimate (estimate_tiled) on H100-SXM names the H100's fraction and receipt, and its DRAM reads
    are the prediction with reads at 0.5329 of 50 MiB, fewer than with the H200's 0.5188 borrowed (a larger capacity
    keeps more K/V; the layer's K/V working set, 15 MiB a KV head, sits past both)."""
    from iomodel.cache.estimate import estimate_tiled
    from iomodel.cache.predict import predict_tiled
    from iomodel.spec import LayerSpec, Tiling

    spec, tiling = LayerSpec(1, 16, 16, 128, 30720, 30720, dtype="bf16"), Tiling(block_m=128, block_n=64)
    est = estimate_tiled(spec, tiling, H100_SXM, flops=1, peak_flops=1.0, num_warps=8, config_source="test")
    (clause,) = [a for a in est.assumptions if "for a read" in a]
    assert "(0.5329 × the L2: the half-miss point of a set every SM re-reads, measured on the H100-SXM: " \
           "receipts/l2-micro-h100-2026-12-06.json)" in clause
    pps = est.programs_per_sm
    own = predict_tiled(spec, tiling, L2Params.of(H100_SXM, pps))
    borrowed = predict_tiled(spec, tiling, L2Params.of(H100_SXM, pps, read_fraction=DEFAULT_L2_READ_FRACTION))
    assert est.read_bytes == own.hbm_read_bytes < borrowed.hbm_read_bytes
    assert L2Params.of(H100_SXM, read_fraction=0.45).read_origin == "as given"


def test_other_cards_of_a_preset_say_where_their_fraction_was_measured():
    """A detected H100 PCIe runs as the H100-SXM preset: it takes the H100 SXM's fraction and says it was measured on
    another card; an alias or a lower-case record name is its preset."""
    from iomodel.cache.params import hardware_preset, read_fraction_source

    pcie = replace(H100_SXM, name="H100-SXM (NVIDIA H100 PCIe)")
    assert read_fraction_of(pcie) == 0.5329
    assert read_fraction_source(pcie) == ("the H100-SXM's, measured on an NVIDIA H100 80GB HBM3, not on this NVIDIA H100 "
                                          "PCIe: receipts/l2-micro-h100-2026-12-06.json")
    assert hardware_preset(replace(H100_SXM, name="h100 (NVIDIA H100 80GB HBM3)")) == "H100-SXM"
    assert read_fraction_source(replace(H100_SXM, name="H100-SXM (NVIDIA H100 80GB HBM3)")).startswith("measured on")
    with pytest.raises(IomodelError, match="needs a Hardware entry"):
        L2Params.of(50 * MiB)


def test_a_forward_at_the_capacity_edge_says_its_reads_are_rough():
    """forward_read_quality: rough from 0.85 up to (not including) 2.5 times the read capacity (FWD_EDGE_WORKING_SET);
    a forward worksheet there marks its reads ROUGH in the JSON, the Markdown and one assumption with the receipts'
    numbers, and one below the band does not. Llama-3-8B non-causal on an H100: at 32k a wave of 132 programs spans 2
    query heads = 2 KV heads (G 4), 2 · 2 · 32768 · 128 · 2 B = 32 MiB, 1.20 x its 26.6 MiB; at 8k 0.30 x."""
    import json as _json

    from iomodel.cache.params import FWD_EDGE_RUNS, FWD_EDGE_WORKING_SET
    from iomodel.cache.predict import forward_read_quality
    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.resolve import resolve_layer

    assert FWD_EDGE_WORKING_SET == (0.85, 2.5)
    assert [forward_read_quality(x, 100.0) for x in (84.9, 85.0, 249.9, 250.0)] == ["predicted", "rough", "rough",
                                                                                   "predicted"]
    edges = {}
    for seqlen, q in ((32768, "rough"), (8192, "predicted")):
        ws = make_worksheet(resolve_layer(preset="llama-3-8b", seqlen=seqlen, causal=False, hardware="H100-SXM"))
        l2 = _json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"]
        assert l2["read_bytes_quality"] == q
        edges[seqlen] = [a for a in l2["assumptions"] if a.startswith("ROUGH: the forward's DRAM reads")]
        assert len(edges[seqlen]) == (q == "rough")
        assert ("(**ROUGH**: the assumptions below)" in ws.to_markdown()) == (q == "rough")
    (bundled, within), _ = FWD_EDGE_RUNS
    assert "is 1.20 times the read capacity" in edges[32768][0] and f"{within} of {bundled} runs" in edges[32768][0]
    # a window band: its programs read a band of keys, not seqlen_k: not labelled
    win = make_worksheet(resolve_layer(preset="llama-3-8b", seqlen=32768, causal=False, window="4096,4096",
                                       hardware="H100-SXM"))
    assert _json.loads(win.to_json())["algorithms"]["tiled"]["l2_aware"]["read_bytes_quality"] == "predicted"
