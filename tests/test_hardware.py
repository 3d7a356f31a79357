"""Hardware presets: datasheet numbers, compute capability, derived presets, records, detection."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from iomodel.errors import IomodelError
from iomodel.report.worksheet import kernel_tiling, make_worksheet, resolve_layer
from iomodel.spec.hardware import A100_80GB, H100_SXM, H200, HARDWARE, Hardware, detect, get_hardware

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
    assert list(HARDWARE) == ["A100-80GB", "H100-SXM", "H200"]
    assert HARDWARE["A100-80GB"] is A100_80GB and A100_80GB.num_sms == 108 and A100_80GB.l2_bytes == 40 * _MiB


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


def test_detect_reads_the_compute_capability(monkeypatch):
    torch = pytest.importorskip("torch")
    props = SimpleNamespace(name="NVIDIA H200", multi_processor_count=132, L2_cache_size=60 * _MiB,
                            shared_memory_per_block_optin=227 * _KiB, shared_memory_per_multiprocessor=228 * _KiB,
                            total_memory=150109880320, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    h = detect()
    assert h.name == "H200 (NVIDIA H200)" and h.compute_capability == (9, 0) and h.hbm_bytes == 150109880320
    monkeypatch.setattr(props, "major", 8)
    assert detect().compute_capability == (8, 0)


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
