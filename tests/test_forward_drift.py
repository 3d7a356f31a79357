"""Programs that drift apart (docs/l2-calibration.md, "Programs that drift apart"): the forward's ``not a prediction``
read label (iomodel.cache.predict.forward_drifts) and the CPU simulation it rests on (benchmarks/drift_sim.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from iomodel.cache.params import FWD_DRIFT_KV_HEAD, FWD_DRIFT_RATIO, FWD_DRIFT_RUNS, L2Params
from iomodel.cache.predict import drift_kv_bytes, forward_drifts, predict_tiled
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware

_MiB = 2**20


def _read_capacity(preset: str) -> float:
    return L2Params.of(get_hardware(preset), 1).for_forward().read_capacity


def test_drift_bytes_by_hand():
    assert drift_kv_bytes(LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True)) == 2 * 132608 * 128 * 2
    # a bottom-right prefix: the tiles differ by 256 key rows
    assert drift_kv_bytes(LayerSpec(1, 32, 4, 128, 256, 100000, dtype="bf16", causal=True,
                                    causal_align="bottom-right")) == 2 * 256 * 128 * 2


def test_the_h200_read_capacity_and_the_threshold():
    cap = _read_capacity("H200")
    assert cap == int(0.5188 * 60 * _MiB) == 32640073  # bytes (31.13 MiB)
    # 1.4 x 31.13 MiB = 43.58 MiB of K+V of a head: 89,250 tokens at HEAD_DIM 128, bf16 (2 * N * 128 * 2 bytes)
    n_edge = int(FWD_DRIFT_KV_HEAD * cap) // (2 * 128 * 2)
    below = LayerSpec(1, 16, 16, 128, n_edge - 1, n_edge - 1, dtype="bf16", causal=True)
    at = LayerSpec(1, 16, 16, 128, n_edge + 1, n_edge + 1, dtype="bf16", causal=True)
    assert n_edge == 89250
    assert not forward_drifts(below, "forward", "tiles-fastest", None, cap)
    assert forward_drifts(at, "forward", "tiles-fastest", None, cap)


@pytest.mark.parametrize("spec,order,grid,persistent,drifts", [
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True), "forward", "tiles-fastest", None, True),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True), "forward", "tiles-fastest", "strided", True),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True), "reverse", "tiles-fastest", None, False),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True), "forward", "heads-fastest", None, False),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True), "forward", "tiles-fastest", "blocked", False),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=False), "forward", "tiles-fastest", None, False),
    (LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True, window_left=4096), "forward",
     "tiles-fastest", None, False),
    (LayerSpec(1, 32, 4, 128, 256, 100000, dtype="bf16", causal=True, causal_align="bottom-right"), "forward",
     "tiles-fastest", None, False),
    (LayerSpec(1, 16, 2, 128, 103424, 103424, dtype="bf16", causal=True), "forward", "tiles-fastest", None, True),
    (LayerSpec(1, 16, 16, 64, 132608, 132608, dtype="bf16", causal=True), "forward", "tiles-fastest", None, False),
])
def test_which_launches_drift(spec, order, grid, persistent, drifts):
    assert forward_drifts(spec, order, grid, persistent, _read_capacity("H200")) is drifts


def test_the_estimate_says_not_a_prediction_and_why():
    spec = LayerSpec(1, 16, 16, 128, 132608, 132608, dtype="bf16", causal=True)
    params = L2Params.of(get_hardware("H200"), 1)
    fwd = predict_tiled(spec, Tiling(128, 128), params, "forward")
    rev = predict_tiled(spec, Tiling(128, 128), params, "reverse")
    assert fwd.read_qualities == {"fwd kernel": "not a prediction"}
    assert rev.read_qualities == {"fwd kernel": "predicted"}
    said = [a for a in fwd.assumptions if a.startswith("NOT A PREDICTION: the forward's DRAM reads")]
    lo, hi = FWD_DRIFT_RATIO
    assert len(said) == 1 and "64.8 MiB" in said[0] and "2.08 times the read capacity" in said[0]
    assert f"{lo}-{hi}x this model on {FWD_DRIFT_RUNS} of {FWD_DRIFT_RUNS} runs" in said[0]
    assert not any(a.startswith("NOT A PREDICTION") for a in rev.assumptions)
    assert fwd.hbm_read_bytes == pytest.approx(rev.hbm_read_bytes, rel=0.1)  # the label moves no byte


def _drift_sim():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "drift_sim.py"
    spec = importlib.util.spec_from_file_location("drift_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("order,timing,want_misses", [("forward", "in-step", 6), ("forward", "as-freed", 9)])
def test_drift_sim_by_hand(order, timing, want_misses):
    """One head of 4 causal tiles (1, 2, 3, 4 key blocks), 2 programs, an LRU of one block. In step: waves (0, 1) and
    (2, 3) read keys 0 0 1 | 0 0 1 1 2 2 3: 6 misses. As freed: tile 2 starts at step 1 and tile 3 at step 2, the
    reads interleave 0 0 1 0 1 0 2 1 2 3: 9 misses. A block is 128 rows x 16 x 2 bytes x (K, V) = 8,192 bytes, Q
    512 x 16 x 2 = 16,384 bytes; no reuse: 10 blocks."""
    got, every = _drift_sim().simulate(1, 1, 512, 16, True, 128, 128, 2, 2, 8192, order, timing)
    assert (got, every) == (want_misses * 8192 + 16384, 10 * 8192 + 16384)
