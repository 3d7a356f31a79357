"""From CLI options to a layer, tiles and hardware (iomodel.spec.resolve.resolve_layer)."""

from __future__ import annotations

import pytest

from iomodel.errors import IomodelError
from iomodel.spec import Tiling
from iomodel.report.worksheet import format_for, kernel_tiling
from iomodel.spec.resolve import resolve_layer


def test_quick_start_defaults():
    lay = resolve_layer()
    s = lay.spec
    # meta-llama/Meta-Llama-3-8B config.json: 32 heads, 8 KV heads, hidden 4096 -> HEAD_DIM 128, bfloat16
    assert (s.batch, s.heads, s.kv_heads, s.head_dim, s.dtype) == (1, 32, 8, 128, "bf16")
    assert (s.seqlen_q, s.seqlen_k, s.phase, s.backward) == (8192, 8192, "prefill", False)
    assert s.causal and s.causal_align == "top-left"
    assert lay.hardware.name == "H200" and lay.preset == "llama-3-8b" and s.name == "llama-3-8b"
    assert lay.notes == ()  # 8k is within max_position_embeddings 8192


def test_decode_defaults():
    s = resolve_layer(phase="decode", seqlen=131072).spec
    assert (s.seqlen_q, s.seqlen_k, s.causal, s.causal_align) == (1, 131072, True, "bottom-right")
    assert s.causal_offset == 131071


def test_seqlen_forms():
    assert (resolve_layer(seqlen=2048).spec.seqlen_q, resolve_layer(seqlen=2048).spec.seqlen_k) == (2048, 2048)
    s = resolve_layer(seqlen_q=512, seqlen_k=4096).spec
    assert (s.seqlen_q, s.seqlen_k) == (512, 4096)
    s = resolve_layer(seqlen_k=1000).spec  # one length given: the other follows it
    assert (s.seqlen_q, s.seqlen_k) == (1000, 1000)
    s = resolve_layer(phase="decode", seqlen_q=4, seqlen_k=1000).spec
    assert (s.seqlen_q, s.seqlen_k) == (4, 1000)


def test_overrides_and_flags_only():
    lay = resolve_layer(preset="mistral-7b", heads=16, kv_heads=16)
    assert (lay.spec.heads, lay.spec.kv_heads, lay.spec.head_dim) == (16, 16, 128)
    assert lay.overrides == ("heads", "kv_heads")
    lay = resolve_layer(heads=12, kv_heads=4, head_dim=64, dtype="float16", seqlen=1000, causal=False)
    assert lay.config is None and lay.spec.name == "custom" and lay.spec.dtype == "fp16"
    assert not lay.spec.causal
    # the reproducing command names every size when there is no config
    assert "--heads 12 --kv-heads 4 --head-dim 64 --dtype fp16" in lay.command()
    assert "--no-causal" in lay.command()


def test_config_file(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512, '
                   '"torch_dtype": "float16", "max_position_embeddings": 1024}')
    lay = resolve_layer(config=cfg, seqlen=4096)
    s = lay.spec
    assert (s.heads, s.kv_heads, s.head_dim, s.dtype, s.name) == (8, 2, 64, "fp16", tmp_path.name)
    # a file naming no family: the causal mask is a guess, said (twenty-first session: a diffusers transformer
    # given --dtype was modelled causal without a word), then the context note
    assert len(lay.notes) == 2 and lay.notes[0].startswith("the file names no 'model_type' and no 'architectures': "
                                                           "modelled causal, as a decoder;")
    assert "max_position_embeddings = 1,024" in lay.notes[1]
    assert f"--config {cfg}" in lay.command()


def test_kernel_tiles_come_from_the_kernel_heuristics():
    heuristics = pytest.importorskip("kernels.heuristics")
    lay = resolve_layer()
    c = heuristics.prefill_default(128, "bf16", True, "prefill-gluon")  # HEAD_DIM 128 on the H200
    assert lay.tiling == Tiling(block_m=c.block_m, block_n=c.block_n, num_stages=c.num_stages)
    assert (c.block_m, c.block_n, c.num_stages) == (128, 128, 2)
    assert "kernels/heuristics.py" in lay.tiling_source
    # decode, Llama-3-8B (G = 4), seqlen_q = 1: the traffic contract packs P = 4 heads of a
    # GQA group into one program (largest divisor of G with P * N_q <= 128), BLOCK_M =
    # next_pow2(max(16, 4)) = 16.
    t = resolve_layer(phase="decode", seqlen=8192).tiling
    assert (t.heads_per_program, t.block_m) == (4, 16)
    cfg = heuristics.decode_config(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192, head_dim=128,
                                   num_sms=132, dtype="bf16", smem_per_sm=228 * 1024)
    assert t == cfg.tiling()


def test_kernel_tiling_without_heuristics(monkeypatch):
    import iomodel.report.worksheet as W

    monkeypatch.setattr(W, "_heuristics", lambda: None)
    tiling, source = kernel_tiling(resolve_layer().spec, resolve_layer().hardware)
    assert tiling == Tiling() and "Tiling defaults" in source and "not importable" in source


def test_explicit_tiles():
    lay = resolve_layer(block_m=64, block_n=32, num_stages=2)
    assert (lay.tiling.block_m, lay.tiling.block_n, lay.tiling.num_stages) == (64, 32, 2)
    assert "given (as flags or in a --schedule file)" in lay.tiling_source
    assert "--block-m 64 --block-n 32 --num-stages 2" in lay.command()
    lay = resolve_layer(phase="decode", num_splits=8)
    assert lay.tiling.num_splits == 8 and "--num-splits 8" in lay.command()


def test_tiles_must_fit_shared_memory():
    # HEAD_DIM 128 bf16, 128 x 128 tiles with 4 stages: (128*128 + 2*4*128*128) * 2 B = 294,912 B
    # > 232,448 B (227 KiB per block on Hopper)
    with pytest.raises(IomodelError, match="294912 B of shared memory"):
        resolve_layer(block_m=128, block_n=128, num_stages=4)
    # the same tiles fit an fp8 layer: 147,456 B
    assert resolve_layer(block_m=128, block_n=128, num_stages=4, dtype="fp8_e4m3").tiling.block_n == 128


def test_format_for():
    assert format_for(None, None) == "md"
    assert format_for("w.json", None) == "json"
    assert format_for("w.CSV", None) == "csv"
    assert format_for("w.markdown", None) == "md"
    assert format_for("w.txt", "json") == "json"
    assert format_for(None, "markdown") == "md"
    with pytest.raises(IomodelError):
        format_for("w.txt", None)
