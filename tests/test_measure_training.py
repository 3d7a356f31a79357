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


def test_group_splits_key_forces_s_on_tiled_training_steps_only():
    """``group_splits`` (S forced, 1..G) on a tiled training step: the id gains ``-sS`` and the child gets S."""
    sw = parse_sweep({"shape": [{**SHAPE, "pass": "fwd+bwd", "group_splits": [1, 2]},
                                {**SHAPE, "pass": "fwd+bwd"}]}, "t")
    assert [s.id for s in sw.shapes] == ["b1-h4-kv2-d16-fp16-q40-k40-tl-tiled-bwd-s1",
                                         "b1-h4-kv2-d16-fp16-q40-k40-tl-tiled-bwd-s2",
                                         "b1-h4-kv2-d16-fp16-q40-k40-tl-tiled-bwd"]
    assert [s.group_splits for s in sw.shapes] == [1, 2, 0]
    assert [s.to_dict().get("group_splits") for s in sw.shapes] == [1, 2, None]
    for bad, needle in [({"group_splits": 3}, "group_splits 3 is more than the 2 query heads per KV head: use 1"),
                        ({"group_splits": 0}, "group_splits must be a whole number, 1 or more, got 0"),
                        ({"group_splits": True}, "group_splits must be a whole number"),
                        ({"group_splits": 2, "pass": "fwd"}, "use impls = [\"tiled\"] and pass = \"fwd+bwd\""),
                        ({"group_splits": 2, "impls": ["tiled", "baseline"]}, "or drop group_splits")]:
        with pytest.raises(IomodelError) as exc:
            parse_sweep({"shape": [{**SHAPE, "pass": "fwd+bwd", **bad}]}, "t")
        assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.interpreter
def test_child_forces_the_group_split_in_the_interpreter(tmp_path):
    """The interpreter's own config picks S = 1; a forced S = 2 runs (the reduction is a fifth kernel) and the
    record says so, with gradients equal to the S = 1 step's in fp32 arithmetic (checked in test_dkdv_group_split)."""
    import kernels.flash_attention as fa
    from iomodel.measure.child import run_child

    if not fa.INTERPRET:
        pytest.skip("needs TRITON_INTERPRET=1")
    sw = parse_sweep({"shape": [{**SHAPE, "pass": "fwd+bwd", "group_splits": 2}, {**SHAPE, "pass": "fwd+bwd"}]}, "t")
    (tmp_path / "s.json").write_text(json.dumps([s.to_dict() for s in sw.shapes]))
    assert run_child(str(tmp_path / "s.json"), str(tmp_path / "m.json"), device="cpu") == 0
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert all(m["error"] is None for m in manifest.values()), manifest
    forced, default = (manifest[s.id]["config"]["backward"] for s in sw.shapes)
    assert (forced["group_splits"], default["group_splits"]) == (2, 1)
    assert expected_kernels("tiled", sw.shapes[0].spec, manifest[sw.shapes[0].id]["config"]) == 5


def test_committed_split_calibration_sweep_forces_the_launchers_s_one_waves_s_and_1():
    """sweeps/h200-dkdv-split-calib1.toml: per layer, the S the launcher picks on the H200 (Gluon tiles, 128 keys a
    program), the S that fills one wave of one program per SM, and 1; the layers are the Gluon hold-out's S > 1 steps."""
    from kernels import heuristics as hx

    sw = load_sweep("sweeps/h200-dkdv-split-calib1.toml")
    assert len(sw.shapes) == 25 and all(s.spec.backward and s.impl == "tiled" and s.group_splits for s in sw.shapes)
    layers: dict[str, list[int]] = {}
    for s in sw.shapes:
        layers.setdefault(s.id.rsplit("-s", 1)[0], []).append(s.group_splits)
    assert len(layers) == 10
    held = {s.id for s in load_sweep("sweeps/h200-gluon-dkdv-holdout1.toml").shapes}
    assert set(layers) <= held
    for s in sw.shapes:
        spec = s.spec
        programs = -(-spec.seqlen_k // hx.GLUON_DKDV_TILES.block_n) * spec.batch * spec.kv_heads
        picked = hx.dkdv_group_splits(programs, 132, spec.group)
        one_wave = min(spec.group, -(-132 // programs))
        assert layers[s.id.rsplit("-s", 1)[0]] == sorted({picked, one_wave, 1}, reverse=True)


def test_committed_long_split_probe_runs_one_head_a_program_beside_s_1():
    """sweeps/h200-long-split-probe1.toml: S = G (one query head a dK/dV program) beside S = 1 on long causal GQA."""
    sw = load_sweep("sweeps/h200-long-split-probe1.toml")
    got = [(s.spec.heads, s.spec.kv_heads, s.spec.seqlen_q, s.group_splits) for s in sw.shapes]
    assert got == [(32, 8, 65536, 1), (32, 8, 65536, 4), (32, 8, 131072, 4), (64, 8, 32768, 1), (64, 8, 32768, 8)]
    assert all(s.spec.causal and s.spec.backward and s.group_splits in (1, s.spec.group) for s in sw.shapes)
