"""Sweeps and the profiled child take one training step (``pass = "fwd+bwd"``): issue 11."""

from __future__ import annotations

import json

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import expected_kernels, shape_id
from iomodel.measure.sweep import load_sweep, parse_sweep

SHAPE = {"heads": 4, "kv_heads": 2, "head_dim": 16, "dtype": "fp16", "seqlen": 40, "causal": True}


def test_pass_key_makes_training_steps_with_their_own_ids():
    sw = parse_sweep({"shape": [{**SHAPE, "pass": "fwd+bwd", "impls": ["tiled", "baseline"]}, SHAPE]}, "t")
    assert [s.id for s in sw.shapes] == ["b1-h4-kv2-d16-fp16-q40-k40-tl-tiled-bwd",
                                         "b1-h4-kv2-d16-fp16-q40-k40-tl-baseline-bwd",
                                         "b1-h4-kv2-d16-fp16-q40-k40-tl-tiled"]
    assert [s.spec.backward for s in sw.shapes] == [True, True, False]
    # the forward, D = rowsum(dO * O), dK/dV and dQ
    assert expected_kernels("tiled", sw.shapes[0].spec, {"num_splits": 1}) == 4
    assert expected_kernels("tiled", sw.shapes[2].spec, {"num_splits": 1}) == 1


def test_bad_pass_is_one_line():
    with pytest.raises(IomodelError, match=r"shape 1 has pass 'bwd': use one of fwd, fwd\+bwd"):
        parse_sweep({"shape": [{**SHAPE, "pass": "bwd"}]}, "t")


def test_committed_training_sweep():
    sw = load_sweep("sweeps/h200-train1.toml")
    assert len(sw.shapes) == 38 and all(s.spec.backward for s in sw.shapes)
    assert sum(s.impl == "tiled" for s in sw.shapes) == 31
    assert len({s.id for s in sw.shapes}) == 38


@pytest.mark.interpreter
def test_child_runs_a_training_step_in_the_interpreter(tmp_path):
    import kernels.flash_attention as fa
    from iomodel.measure.child import run_child

    if not fa.INTERPRET:
        pytest.skip("needs TRITON_INTERPRET=1")
    sw = parse_sweep({"shape": [{**SHAPE, "pass": "fwd+bwd", "impls": ["tiled", "baseline", "sdpa-math"]}]}, "t")
    (tmp_path / "s.json").write_text(json.dumps([s.to_dict() for s in sw.shapes]))
    assert run_child(str(tmp_path / "s.json"), str(tmp_path / "m.json"), device="cpu") == 0
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert all(m["error"] is None for m in manifest.values()), manifest
    tiled = manifest[shape_id(sw.shapes[0].spec, "tiled")]["config"]
    # the forward's KernelConfig and the BackwardConfig that ran (the interpreter's tiles)
    assert tiled["path"] == "prefill" and tiled["backward"]["block_n"] == 32 and tiled["backward"]["dq_block_m"] == 32
