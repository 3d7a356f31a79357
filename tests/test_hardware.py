"""Hardware presets: datasheet numbers, compute capability, derived presets, records, detection."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from iomodel.errors import IomodelError
from iomodel.report.worksheet import kernel_tiling, make_worksheet, resolve_layer
from iomodel.spec.hardware import (A100_40GB, A100_80GB, A100_80GB_PCIE, CALIBRATED_AS, H100_NVL, H100_PCIE, H100_SXM,
                                   H200, H200_NVL, HARDWARE, Hardware, detect, get_hardware, preset_of_device)

_KiB, _MiB, _TB = 1024, 1024 * 1024, 1e12


def test_h200_has_its_datasheet_numbers():
    """NVIDIA H200 datasheet (SXM 141GB HBM3e, 4.8 TB/s); GH100 SM (132 SMs, 228 KB / 227 KB
    shared memory); L2 60 MiB read from cudaDeviceProp; dense FP16/BF16 989.4 TFLOP/s, FP8 1,978.9."""
    h = get_hardware("H200")
    assert (h.hbm_bandwidth, h.hbm_bytes, h.l2_bytes) == (4.8e12, 141 * 1000**3, 60 * _MiB)
    assert (h.smem_per_sm, h.smem_per_block, h.num_sms) == (228 * _KiB, 227 * _KiB, 132)
    assert h.compute_capability == (9, 0)
    assert h.peak_flops == {"fp16": 989.4 * _TB, "bf16": 989.4 * _TB, "fp32": 66.9 * _TB,
                            "fp8_e4m3": 1978.9 * _TB, "fp8_e5m2": 1978.9 * _TB}
    assert "H200 datasheet" in h.source


def test_h200_is_derived_from_h100_sxm():
    """Only the memory system and the names differ: everything else is the H100 SXM's."""
    differs = {f.name for f in fields(Hardware) if getattr(H200, f.name) != getattr(H100_SXM, f.name)}
    assert differs == {"name", "hbm_bandwidth", "hbm_bytes", "l2_bytes", "source"}
    assert H200.peak_flops is H100_SXM.peak_flops  # derived, not copied
    assert replace(H200, name="H100-SXM", hbm_bandwidth=3.35e12, hbm_bytes=80 * 1000**3, l2_bytes=50 * _MiB,
                   source=H100_SXM.source) == H100_SXM


@pytest.mark.parametrize("name,cc", [("A100-80GB", (8, 0)), ("H100-SXM", (9, 0)), ("H200", (9, 0)),
                                     ("h100", (9, 0)), ("a100", (8, 0))])
def test_compute_capability(name, cc):
    """CUDA C Programming Guide, compute capabilities table: A100 8.0, H100 and H200 9.0."""
    assert get_hardware(name).compute_capability == cc


def test_presets_table():
    assert list(HARDWARE) == ["A100-80GB", "H100-SXM", "H200", "A100-40GB", "A100-80GB-PCIe", "H100-PCIe", "H100-NVL",
                              "H200-NVL"]
    assert HARDWARE["A100-80GB"] is A100_80GB and A100_80GB.num_sms == 108 and A100_80GB.l2_bytes == 40 * _MiB
    assert HARDWARE["H100-PCIe"] is H100_PCIE and get_hardware("h100-pcie") is H100_PCIE


# (variant, its SXM die's preset, the fields that differ, datasheet values): NVIDIA A100 datasheet (40GB SXM4 and PCIe:
# HBM2 1,555 GB/s; 80GB PCIe: HBM2e 1,935 GB/s), NVIDIA H100 datasheet and whitepaper (PCIe: HBM2e 2 TB/s, 114 SMs,
# 1,513 / 3,026 TFLOPS FP16 / FP8 with sparsity, FP32 51.2; NVL: 94 GB HBM3, 3.9 TB/s, 1,671 / 3,341, FP32 60), NVIDIA
# H200 datasheet (NVL: 141 GB, 4.8 TB/s, the NVL peaks)
_NVL = {"fp16": 835.5 * _TB, "bf16": 835.5 * _TB, "fp32": 60 * _TB, "fp8_e4m3": 1670.5 * _TB, "fp8_e5m2": 1670.5 * _TB}
VARIANTS = [
    (A100_40GB, A100_80GB, {"hbm_bandwidth": 1.555e12, "hbm_bytes": 40 * 1000**3}),
    (A100_80GB_PCIE, A100_80GB, {"hbm_bandwidth": 1.935e12}),
    (H100_PCIE, H100_SXM, {"hbm_bandwidth": 2.0e12, "num_sms": 114,
                           "peak_flops": {"fp16": 756.5 * _TB, "bf16": 756.5 * _TB, "fp32": 51.2 * _TB,
                                          "fp8_e4m3": 1513 * _TB, "fp8_e5m2": 1513 * _TB}}),
    (H100_NVL, H100_SXM, {"hbm_bandwidth": 3.9e12, "hbm_bytes": 94 * 1000**3, "peak_flops": _NVL}),
    (H200_NVL, H200, {"peak_flops": _NVL}),
]


@pytest.mark.parametrize("variant,base,values", VARIANTS, ids=[v.name for v, _, _ in VARIANTS])
def test_card_variants_have_their_datasheet_numbers_and_their_die(variant, base, values):
    """A PCIe or NVL card (or the A100 40GB) is its SXM die's preset with its own memory system, SMs and peaks: the
    fields that differ are exactly those, at the datasheet's values; its measured L2 constants are the die's
    (CALIBRATED_AS). An H100 PCIe was modelled at the SXM's 3.35 TB/s and 989 TFLOP/s (1.7x and 1.3x its own)."""
    differs = {f.name for f in fields(Hardware) if getattr(variant, f.name) != getattr(base, f.name)}
    assert differs == {"name", "source"} | set(values)
    assert {k: getattr(variant, k) for k in values} == values
    assert CALIBRATED_AS[variant.name] == base.name
    assert variant.l2_bytes == base.l2_bytes and variant.compute_capability == base.compute_capability


def test_l2_constants_of_a_card_variant_are_its_dies():
    """The H100 PCIe and NVL share the H100 SXM's die and 50 MB L2: its measured read fraction (0.5329) and forward
    constants (96 ways, Q weight 0.5), and the assumptions say on which card they were measured. The A100 40GB, like
    the A100 80GB, takes the H200's, said."""
    from iomodel.cache.params import forward_l2_of, read_fraction_of, read_fraction_source

    for hw in (H100_PCIE, H100_NVL):
        assert read_fraction_of(hw) == 0.5329 and forward_l2_of(hw).ways == 96 and forward_l2_of(hw).q_share == 0.5
        assert read_fraction_source(hw) == (
            f"the H100-SXM's (the {hw.name} shares its die and L2), measured on an NVIDIA H100 80GB HBM3, not on this "
            f"{hw.name}: receipts/l2-micro-h100-2026-12-06.json")
        assert forward_l2_of(hw).source.startswith(f"the H100-SXM's (the {hw.name} shares its die and L2): fitted on")
    detected = replace(H100_PCIE, name="H100-PCIe (NVIDIA H100 PCIe)")
    assert read_fraction_source(detected).endswith("not on this NVIDIA H100 PCIe: receipts/l2-micro-h100-2026-12-06.json")
    assert read_fraction_of(H200_NVL) == read_fraction_of(H200) and forward_l2_of(H200_NVL).ways == 192
    assert read_fraction_source(A100_40GB) == ("not measured on the A100-40GB: the H200's "
                                               "(receipts/l2-micro-h200-2026-12-01.json)")


@pytest.mark.parametrize("device,preset", [
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H100 NVL", "H100-NVL"), ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200-NVL"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-40GB"), ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("H100-PCIe (NVIDIA H100 PCIe)", "H100-PCIe"),
    ("NVIDIA GH200 480GB", None), ("NVIDIA H800", None), ("cpu", None),
    # a MIG slice: its profile ("3g.40gb") names no card (a reviewer's finding: it read as the A100 40GB)
    ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "A100-80GB"), ("NVIDIA A100 80GB PCIe MIG 3g.40gb", "A100-80GB-PCIe"),
    ("NVIDIA H100 PCIe MIG 1g.10gb", "H100-PCIe")])
def test_device_names_give_their_card_variant(device, preset):
    """torch.cuda.get_device_name of each card: the family, then the variant's word (NVL, PCIe, 40GB)."""
    assert preset_of_device(device) == preset


def test_record_round_trip_and_old_records():
    d = json.loads(json.dumps(H200.to_dict()))
    assert d["compute_capability"] == [9, 0]
    assert Hardware.from_dict(d) == H200
    # receipts written before compute_capability was kept: taken from the preset of that name
    old = {k: v for k, v in d.items() if k != "compute_capability"} | {"name": "H200 (NVIDIA H200)"}
    assert Hardware.from_dict(old).compute_capability == (9, 0)
    with pytest.raises(IomodelError, match="no compute_capability and matches no preset"):
        Hardware.from_dict(old | {"name": "MI300X"})
    with pytest.raises(IomodelError, match="malformed"):
        Hardware.from_dict(d | {"tensor_cores": 528})


def _fake_device(monkeypatch, name: str, sms: int, l2: int, total: int) -> SimpleNamespace:
    """A CUDA device of compute capability 9.0 as torch.cuda.get_device_properties reports it (GH100 shared memory)."""
    torch = pytest.importorskip("torch")
    props = SimpleNamespace(name=name, multi_processor_count=sms, L2_cache_size=l2,
                            shared_memory_per_block_optin=227 * _KiB, shared_memory_per_multiprocessor=228 * _KiB,
                            total_memory=total, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    return props


def test_detect_reads_the_compute_capability(monkeypatch):
    props = _fake_device(monkeypatch, "NVIDIA H200", 132, 60 * _MiB, 150109880320)
    h = detect()
    assert h.name == "H200 (NVIDIA H200)" and h.compute_capability == (9, 0) and h.hbm_bytes == 150109880320
    monkeypatch.setattr(props, "major", 8)
    assert detect().compute_capability == (8, 0)


def test_detect_takes_a_pcie_cards_own_bandwidth_and_peaks(monkeypatch):
    """An H100 PCIe was detected as the H100-SXM preset: 3.35 TB/s and 989.4 TFLOP/s, its roofline times 1.7x too
    short. Its own preset now: 2 TB/s, 756.5 TFLOP/s bf16; SMs, L2 and shared memory still read from the device."""
    _fake_device(monkeypatch, "NVIDIA H100 PCIe", 114, 50 * _MiB, 85029158912)
    h = detect()
    assert h.name == "H100-PCIe (NVIDIA H100 PCIe)" and h.hbm_bandwidth == 2.0e12 and h.num_sms == 114
    assert h.flops_for("bf16") == 756.5 * _TB and h.l2_bytes == 50 * _MiB


def test_the_worksheet_path_reads_the_compute_capability_not_the_name():
    pytest.importorskip("kernels.heuristics")
    spec = resolve_layer().spec  # llama-3-8b, bf16, HEAD_DIM 128: the Gluon prefill on sm_90
    assert "for the prefill-gluon path" in kernel_tiling(spec, H200)[1]
    assert "for the prefill path" in kernel_tiling(spec, A100_80GB)[1]
    # an H200 by name that reports sm_80 gets the pointer path; an A100 by name at sm_90 the Gluon path
    assert "for the prefill path" in kernel_tiling(spec, replace(H200, compute_capability=(8, 0)))[1]
    assert "for the prefill-gluon path" in kernel_tiling(spec, replace(A100_80GB, compute_capability=(9, 0)))[1]
    # HEAD_DIM 64 on sm_90: the TMA prefill
    assert "for the prefill-tma path" in kernel_tiling(replace(spec, head_dim=64), H200)[1]


def test_worksheet_json_states_the_compute_capability():
    d = make_worksheet(resolve_layer(seqlen=1024, hardware="A100-80GB")).to_dict()
    assert d["hardware"]["compute_capability"] == [8, 0]


def test_worksheet_of_a_pcie_card_states_its_own_memory_system():
    d = make_worksheet(resolve_layer(seqlen=1024, hardware="H100-PCIe")).to_dict()
    assert (d["hardware"]["name"], d["hardware"]["hbm_bandwidth"], d["hardware"]["num_sms"]) == ("H100-PCIe", 2.0e12, 114)


def test_detect_refuses_a_mig_slice(monkeypatch):
    """A MIG slice's bandwidth and L2 are a share of the card's; the preset's whole-card bandwidth was taken."""
    _fake_device(monkeypatch, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, 25 * _MiB, 42 * 1000**3)
    with pytest.raises(IomodelError, match=r"is a MIG slice: its HBM bandwidth and L2 are a share of the card's"):
        detect()


def test_an_estimate_for_a_preset_without_a_measured_l2_is_rough():
    """The A100s' L2 constants are the H200's (no A100 was measured): the estimate's reads and writes, the step's and
    each kernel's, are ``rough`` with the sentence that says why (the JSON said ``predicted``; a fresh user's finding,
    2026-12-07). The H100 PCIe takes its SXM die's measured constants: ``predicted`` on the same layer."""
    def l2_aware(hardware, passes="fwd"):
        return make_worksheet(resolve_layer(seqlen=4096, hardware=hardware, passes=passes)).to_dict()[
            "algorithms"]["tiled"]["l2_aware"]

    for hw in ("A100-40GB", "A100-80GB", "A100-80GB-PCIe"):
        est = l2_aware(hw)
        assert (est["read_bytes_quality"], est["write_bytes_quality"]) == ("rough", "rough")
        assert est["assumptions"][-1].startswith(f"ROUGH: the DRAM reads and writes on the {hw}. No card of this "
                                                 "preset had its L2 measured")
    step = l2_aware("A100-80GB", "fwd+bwd")
    assert {(k["read_bytes_quality"], k["write_bytes_quality"]) for k in step["kernels"]} == {("rough", "rough")}
    pcie = l2_aware("H100-PCIe")
    assert (pcie["read_bytes_quality"], pcie["write_bytes_quality"]) == ("predicted", "predicted")
    assert not any(a.startswith("ROUGH: the DRAM reads and writes on") for a in pcie["assumptions"])
