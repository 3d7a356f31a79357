"""Paged KV cache through the measurement pipeline: sweep files (page_size, ids -pN), records,
the GPU child's call (on CPU, interpreter) and the interpreter validation of
sweeps/interpreter-paged.toml (SRAM_fill exact, BLOCK_TABLE / CACHE_SEQLENS included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement, ShapeMeasurement, shape_id
from iomodel.measure.sweep import load_sweep, parse_sweep
from iomodel.spec import LayerSpec

ROOT = Path(__file__).resolve().parent.parent


def _sweep(**shape):
    base = {"heads": 4, "kv_heads": 2, "head_dim": 16, "seqlen_q": 1, "seqlen_k": 70, "causal": True,
            "causal_align": "bottom-right"}
    return parse_sweep({"shape": [{**base, **shape}]}, "t.toml")


def test_sweep_page_size_ids_and_expansion():
    shapes = _sweep(page_size=[16, 256]).shapes
    assert [s.spec.page_size for s in shapes] == [16, 256]
    assert [s.spec.phase for s in shapes] == ["decode", "decode"]
    assert [s.id for s in shapes] == ["b1-h4-kv2-d16-bf16-q1-k70-br-p16-tiled", "b1-h4-kv2-d16-bf16-q1-k70-br-p256-tiled"]
    assert _sweep().shapes[0].id == "b1-h4-kv2-d16-bf16-q1-k70-br-tiled"  # dense: the receipts' ids
    sw = load_sweep(ROOT / "sweeps" / "h200-serving1.toml")
    assert len(sw.shapes) == 10 and all(s.spec.page_size in (16, 64, 256) and s.spec.phase == "decode" for s in sw.shapes)
    assert sorted({s.spec.page_size for s in sw.shapes}) == [16, 64, 256]


@pytest.mark.parametrize("shape, needle", [
    ({"page_size": 48}, "page_size must be one of 16, 32, 64, 128, 256, 512, 1024 tokens, got 48: fix the file"),
    ({"page_size": True}, "page_size must be one of"),
    ({"page_size": 16, "seqlen_q": 64}, "page_size (a paged KV cache) is measured for decode only"),
    ({"page_size": 16, "impls": ["baseline"]}, "baseline reads no paged KV cache"),
    ({"page_size": 16, "window": 8}, "the paged decode has no sliding window"),
])
def test_sweep_refuses_bad_pages(shape, needle):
    with pytest.raises(IomodelError) as exc:
        _sweep(**shape)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_record_round_trip_and_bad_page_field():
    spec = LayerSpec(2, 4, 2, 16, 1, 70, causal=True, causal_align="bottom-right", phase="decode", page_size=16)
    sm = ShapeMeasurement(shape_id(spec, "tiled"), "tiled", spec, config={"block_m": 16, "block_n": 16})
    d = sm.to_dict()
    assert d["spec"]["page_size"] == 16 and sm.id.endswith("-br-p16-tiled")
    assert ShapeMeasurement.from_dict(json.loads(json.dumps(d))).spec == spec
    d["spec"]["page_size"] = "16"
    with pytest.raises(IomodelError, match=r"spec.page_size must be a whole number of tokens per page"):
        ShapeMeasurement.from_dict(d)
    d["spec"]["page_size"] = 48
    with pytest.raises(IomodelError, match=r"page_size must be one of 16, 32"):
        ShapeMeasurement.from_dict(d)


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_child_runs_one_paged_shape_on_cpu(tmp_path):
    """The child's CPU path builds the paged cache and calls the bundled kernel with its tables;
    the same call refuses a paged shape without tables and other implementations."""
    import torch

    from iomodel.measure.child import impl_call, run_child
    from kernels.reference import random_paged_cache

    sw = _sweep(page_size=16, dtype="fp32", batch=2)
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([s.to_dict() for s in sw.shapes]))
    assert run_child(str(shapes), str(tmp_path / "m.json"), device="cpu") == 0
    entry = json.loads((tmp_path / "m.json").read_text())[sw.shapes[0].id]
    assert entry["error"] is None and entry["config"]["block_n"] == 16

    spec = sw.shapes[0].spec
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 1, 16, generator=g)
    k, v, table, lens = random_paged_cache(2, 2, 16, 16, [70, 70], torch.float32, g)
    assert tuple(k.shape) == (2 * 5, 16, 2, 16) and tuple(table.shape) == (2, 5)
    got = impl_call("tiled", spec, q, k, v, None, (table, lens))[0]()
    # the dense cache the pages hold: sequence b's p-th page is k[table[b, p]]
    dense = lambda c: torch.stack([c[table[b]].reshape(80, 2, 16)[:70].transpose(0, 1) for b in range(2)])  # noqa: E731
    from kernels.baseline import eager_attention

    want = eager_attention(q, dense(k), dense(v), causal=True, causal_align="bottom-right")
    assert torch.allclose(got, want, atol=1e-4)
    with pytest.raises(IomodelError, match="exactly when spec.page_size is set"):
        impl_call("tiled", spec, q, k, v)
    with pytest.raises(IomodelError, match="sdpa-math reads no paged KV cache"):
        impl_call("sdpa-math", spec, q, k, v, None, (table, lens))


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_interpreter_paged_sweep_reconciles_sram_fill_exactly(tmp_path):
    from iomodel.commands.validate import run_interpreter
    from iomodel.reconcile import reconcile

    sw = load_sweep(ROOT / "sweeps" / "interpreter-paged.toml")
    assert [s.spec.page_size for s in sw.shapes] == [16, 32]
    meas = run_interpreter(sw, "test", lambda s: None)
    rec = reconcile(Measurement.load(meas.save(tmp_path / "p.json")))
    assert [s["fraction"] for s in rec.summary()] == [1.0, 1.0]
    assert all(r.explanation().startswith("exact") for r in rec.rows)
    first = meas.shapes[0].sram_fill
    # B 2, H_kv 2, 70 keys of d16 fp16 (K and V each), one program per KV head group (P = G = 2):
    # 2·2·70·16·2 = 8960 bytes; one int32 table entry per 16-key block (5 per program, 4 programs),
    # one cache_seqlens entry per program
    assert first["K"]["read_bytes"] == first["V"]["read_bytes"] == 2 * 2 * 70 * 16 * 2
    assert first["BLOCK_TABLE"]["read_bytes"] == 4 * 5 * 4
    assert first["CACHE_SEQLENS"]["read_bytes"] == 4 * 4
