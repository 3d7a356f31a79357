"""``benchmarks/gpu_bwd_tma_loads.py`` runs what its variant names say (GPU probe, checked on a CPU).

``backward_config`` has the TMA kernels (and, causal, the mask split) on for the GPU, so the
probe's ``pointer`` baseline must switch them off itself: every name is checked against the
three switches of its config, in stage 1 (exactness) and stages 2-3 (speed), on the GPU tiles.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_bwd_tma_loads as probe  # noqa: E402
from kernels.heuristics import backward_config  # noqa: E402


def _switches(cfg):
    return cfg.tma, cfg.mask_split, cfg.fused_launch


@pytest.mark.parametrize("d, causal", list(itertools.product((64, 128), (False, True))))
def test_variant_names_match_their_switches(d, causal, monkeypatch):
    gpu = backward_config(d, "bf16", causal)
    assert gpu.tma and gpu.mask_split == causal  # the GPU default the pointer rows must undo
    # the script compares Triton's launches: the Gluon dK/dV launch (the d 128 default) is switched off in every row
    tiles = {**{k: v for k, v in gpu.to_dict().items() if k not in ("tma", "mask_split", "fused_launch")},
             "dkdv_kernel": "triton"}
    for S in (0, 4):
        ex = probe.exactness_variants(d, causal, S)
        assert {n: _switches(c) for n, c in ex.items()} == {
            "pointer": (False, False, False), "tma": (True, False, False), "tma-ms": (True, True, False),
            "tma-fused": (True, True, True)}
        assert all(c.group_splits == S for c in ex.values())
        assert {k: v for k, v in ex["pointer"].to_dict().items() if k in tiles} == {**tiles, "group_splits": S}
    for rnd in probe.ROUNDS:
        monkeypatch.setattr(probe, "ROUND", rnd)
        speed = probe._variants(d, causal)
        assert _switches(speed["pointer"]) == (False, False, False)
        assert {k: v for k, v in speed["pointer"].to_dict().items() if k in tiles} == tiles  # the GPU tiles
        assert _switches(speed["tma"]) == (True, False, False)
        assert ("tma-ms" in speed) == causal and (not causal or _switches(speed["tma-ms"]) == (True, True, False))
        for name, cfg in speed.items():
            if name != "pointer":
                assert _switches(cfg) == (True, name.endswith(("-ms", "-ms-fused")), name.endswith("-fused")), name
