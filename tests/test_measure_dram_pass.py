"""The single-pass DRAM run replaces the multi-pass DRAM bytes and keeps them beside it."""

from __future__ import annotations

from iomodel.measure.driver import merge_dram_pass
from iomodel.measure.metrics import DRAM_PASS_METRICS
from iomodel.measure.sweep import load_sweep
from iomodel.measure.records import KernelRecord, ShapeMeasurement
from iomodel.spec import LayerSpec

SPEC = LayerSpec(batch=1, heads=2, kv_heads=2, head_dim=64, seqlen_q=1, seqlen_k=4096, phase="decode")


def _shape(writes: list[float], sid: str = "s") -> ShapeMeasurement:
    kernels = [KernelRecord(name=f"k{i}", metrics={"dram__bytes_read.sum": 100.0, "dram__bytes_write.sum": w,
                                                    "lts__t_bytes.sum": 7.0},
                            units={m: "byte" for m in ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")})
               for i, w in enumerate(writes)]
    return ShapeMeasurement(id=sid, impl="tiled", spec=SPEC, config={"path": "decode-split-kv"}, kernels=kernels)


def test_dram_pass_values_replace_multipass_ones():
    full, single = _shape([2_400_000.0, 0.0]), _shape([52_000.0, 0.0])
    merge_dram_pass([full], [single])
    k0 = full.kernels[0]
    assert k0.metrics["dram__bytes_write.sum"] == 52_000.0
    assert k0.metrics["dram__bytes_write.sum@multipass"] == 2_400_000.0
    assert k0.metrics["lts__t_bytes.sum"] == 7.0  # other metrics untouched
    assert "single-pass" in full.config["dram_pass"]
    assert set(DRAM_PASS_METRICS) == {"dram__bytes_read.sum", "dram__bytes_write.sum"}


def test_dram_pass_kernel_count_mismatch_keeps_multipass_values():
    full, single = _shape([2_400_000.0, 0.0]), _shape([52_000.0])
    merge_dram_pass([full], [single])
    assert full.kernels[0].metrics["dram__bytes_write.sum"] == 2_400_000.0
    assert "not applied" in full.config["dram_pass"]


def test_holdout2_dp_sweep_asks_for_the_dram_pass():
    assert load_sweep("sweeps/h200-holdout2-dp.toml").dram_pass is True
    assert load_sweep("sweeps/h200-holdout2.toml").dram_pass is False
