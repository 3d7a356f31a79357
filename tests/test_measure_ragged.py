"""Ragged (varlen) batches through the measurement pipeline: sweep files (seqlens, ids
-ragCxQ_K), records, the GPU child's call (on CPU, interpreter) and the interpreter validation
of sweeps/interpreter-ragged.toml (SRAM_fill exact against predict_ragged, cu_seqlens included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement, ShapeMeasurement
from iomodel.measure.sweep import SweepShape, load_sweep, parse_sweep

ROOT = Path(__file__).resolve().parent.parent


def _sweep(defaults=None, **shape):
    base = {"heads": 4, "kv_heads": 2, "head_dim": 16, "causal": True, "causal_align": "bottom-right",
            "seqlens": [40, [3, 70], 17]}
    return parse_sweep({"defaults": defaults or {}, "shape": [{**base, **shape}]}, "t.toml")


def test_sweep_seqlens_padded_spec_ids_and_no_expansion():
    shapes = _sweep(causal=[True, False]).shapes  # causal expands, seqlens does not
    assert [s.id for s in shapes] == ["b3-h4-kv2-d16-bf16-q40-k70-br-rag3x60_127-tiled",
                                      "b3-h4-kv2-d16-bf16-q40-k70-nc-rag3x60_127-tiled"]
    s = shapes[0]
    assert s.seqlens == ((40, 40), (3, 70), (17, 17))
    assert (s.spec.batch, s.spec.seqlen_q, s.spec.seqlen_k, s.spec.phase) == (3, 40, 70, "prefill")
    assert SweepShape.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.ragged().seqlens == s.seqlens and s.ragged().batch == 3
    dense = parse_sweep({"shape": [{"heads": 4, "kv_heads": 2, "head_dim": 16, "seqlen": 40}]}, "t.toml").shapes[0]
    assert dense.seqlens is None and "seqlens" not in dense.to_dict()  # dense: the receipts' form
    sw = load_sweep(ROOT / "sweeps" / "h200-ragged1.toml")
    assert len(sw.shapes) == 8 and all(s.impl == "tiled" and 4 <= len(s.seqlens) <= 64 for s in sw.shapes)
    assert min(q for s in sw.shapes for q, _ in s.seqlens) == 77
    assert max(q for s in sw.shapes for q, _ in s.seqlens) == 8192
    assert {s.spec.dtype for s in sw.shapes} == {"bf16", "fp16"}
    assert {s.spec.causal_align for s in sw.shapes if s.spec.causal} == {"top-left", "bottom-right"}


@pytest.mark.parametrize("shape, defaults, needle", [
    ({"seqlen": 64}, None, "seqlens gives the batch and the lengths: drop seqlen"),
    ({"batch": 3}, None, "drop batch"),
    ({}, {"batch": 2}, "drop batch"),
    ({"pass": "fwd+bwd"}, None, "forward prefill only"),
    ({"phase": "decode"}, None, "forward prefill only"),
    ({"impls": ["baseline"]}, None, "baseline takes no packed ragged batch"),
    ({"seqlens": []}, None, "seqlens must be a non-empty list"),
    ({"seqlens": [40, 0]}, None, "seqlens[1] = 0: every length must be a whole number of tokens, 1 or more"),
    ({"seqlens": [40, "x"]}, None, "seqlens[1] = the string 'x' is text"),
    ({"seqlens": ["40"]}, None, "seqlens[0] = the string '40' is text: write the length as a number"),
    ({"seqlens": [[77, "4096"]]}, None, "seqlens[0] = "),
    ({"seqlens": [40, [1, 2, 3]]}, None, "is not a length or a [q, k] pair"),
])
def test_sweep_refuses_bad_ragged(shape, defaults, needle):
    with pytest.raises(IomodelError) as exc:
        _sweep(defaults, **shape)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_sweep_refuses_same_count_and_total():
    with pytest.raises(IomodelError, match="appears twice: remove the duplicate \\(a ragged id names the count"):
        parse_sweep({"shape": [{"heads": 2, "kv_heads": 2, "head_dim": 16, "seqlens": [10, 30]},
                               {"heads": 2, "kv_heads": 2, "head_dim": 16, "seqlens": [30, 10]}]}, "t.toml")


def test_record_round_trip_and_bad_seqlens():
    s = _sweep().shapes[0]
    sm = ShapeMeasurement(s.id, "tiled", s.spec, config={"block_m": 32, "block_n": 16}, seqlens=s.seqlens)
    d = json.loads(json.dumps(sm.to_dict()))
    assert d["seqlens"] == [[40, 40], [3, 70], [17, 17]]
    back = ShapeMeasurement.from_dict(d)
    assert back.seqlens == s.seqlens and back.spec == s.spec and back.ragged().max_seqlen_k == 70
    d["seqlens"] = [[40, 40], [3, 70]]  # batch 2, not the spec's 3
    with pytest.raises(IomodelError, match=r"seqlens: spec is not the batch padded to these sequences \(batch 2"):
        ShapeMeasurement.from_dict(d)
    d["seqlens"] = [[40, 40], [3, 70], [17, 0]]
    with pytest.raises(IomodelError, match=r"seqlens\[2\] must be a whole number of tokens, 1 or more"):
        ShapeMeasurement.from_dict(d)
    d["seqlens"] = [40, [3, 70], 17]
    with pytest.raises(IomodelError, match=r"seqlens\[0\]: expected an \[N_q, N_k\] pair"):
        ShapeMeasurement.from_dict(d)


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_child_runs_one_ragged_shape_on_cpu(tmp_path):
    """The child's CPU path packs the batch and calls flash_attention_varlen; its output equals
    the dense kernel run on each sequence alone; the call refuses other implementations."""
    import torch

    from iomodel.measure.child import impl_call, run_child
    from kernels.flash_attention import flash_attention

    sw = _sweep(dtype="fp32")
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([s.to_dict() for s in sw.shapes]))
    assert run_child(str(shapes), str(tmp_path / "m.json"), device="cpu") == 0
    entry = json.loads((tmp_path / "m.json").read_text())[sw.shapes[0].id]
    assert entry["error"] is None and entry["config"]["block_m"] >= 16

    spec = sw.shapes[0].spec
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(60, 4, 16, generator=g), torch.randn(127, 2, 16, generator=g), torch.randn(127, 2, 16, generator=g)
    cu_q, cu_k = torch.tensor([0, 40, 43, 60], dtype=torch.int32), torch.tensor([0, 40, 110, 127], dtype=torch.int32)
    got = impl_call("tiled", spec, q, k, v, None, None, (cu_q, cu_k, 40, 70))[0]()
    assert tuple(got.shape) == (60, 4, 16)
    for b in range(3):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        one = lambda t, s: t[s].transpose(0, 1)[None]  # noqa: E731  (1, H, N, d)
        want = flash_attention(one(q, qs), one(k, ks), one(v, ks), causal=True, causal_align="bottom-right")[0]
        assert torch.allclose(got[qs], want[0].transpose(0, 1), atol=1e-4)
    with pytest.raises(IomodelError, match="sdpa-math: a packed ragged batch runs the tiled forward only"):
        impl_call("sdpa-math", spec, q, k, v, None, None, (cu_q, cu_k, 40, 70))


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_interpreter_ragged_sweep_reconciles_sram_fill_exactly(tmp_path):
    from iomodel.commands.validate import run_interpreter
    from iomodel.reconcile import reconcile

    sw = load_sweep(ROOT / "sweeps" / "interpreter-ragged.toml")
    assert [len(s.seqlens) for s in sw.shapes] == [3, 2]
    meas = run_interpreter(sw, "test", lambda s: None)
    loaded = Measurement.load(meas.save(tmp_path / "r.json"))
    assert loaded.shapes[0].seqlens == ((40, 40), (3, 70), (17, 17))
    rec = reconcile(loaded)
    assert [s["fraction"] for s in rec.summary()] == [1.0, 1.0]
    assert all(r.explanation().startswith("exact") for r in rec.rows)
    first = meas.shapes[0].sram_fill
    # 60 query rows in all, H 4, d 16, fp16: Q read once, O written once; LSE fp32 per row and head
    assert first["Q"]["read_bytes"] == first["O"]["write_bytes"] == 60 * 4 * 16 * 2
    assert first["LSE"]["write_bytes"] == 60 * 4 * 4
    # grid: cdiv(max N_q 40, BLOCK_M 32) = 2 query tiles x 3 sequences x 4 heads = 24 programs,
    # each reading two int32 entries of cu_seqlens_q and of cu_seqlens_k
    assert meas.shapes[0].config["block_m"] == 32
    assert first["cu_seqlens_q"]["read_bytes"] == first["cu_seqlens_k"]["read_bytes"] == 24 * 2 * 4
