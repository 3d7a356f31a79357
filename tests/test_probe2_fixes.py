"""Inputs of the second fresh probe of issue 10, each with its one-line answer."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

from iomodel.errors import IomodelError
from iomodel.spec.config import load_config


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "iomodel.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_brackets_in_messages_survive_the_console(tmp_path):
    """Rich markup ate '[[shape]]' and '[defaults]' out of the messages that say where to fix a sweep."""
    sweep = tmp_path / "s.toml"
    sweep.write_text("shape = 5\n")
    p = _cli("validate", str(sweep), "--interpreter", "-o", str(tmp_path / "r.json"))
    assert p.returncode == 2 and "no [[shape]] entries" in p.stderr, p.stderr


@pytest.mark.parametrize("text, fragment", [
    ('{"num_attention_heads": 32, "num_attention_heads": 8, "hidden_size": 4096, "torch_dtype": "bf16"}',
     "gives the key 'num_attention_heads' twice in one object"),
    ('{"num_attention_heads": ' + "9" * 5000 + ', "hidden_size": 4096}', "holds a number iomodel cannot read"),
])
def test_json_the_reader_cannot_trust_is_one_line(tmp_path, text, fragment):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(IomodelError, match=fragment):
        load_config(path)


def test_an_existing_output_keeps_its_mode(tmp_path):
    from iomodel.paths import write_text

    out = tmp_path / "existing.md"
    out.write_text("old")
    os.chmod(out, 0o640)
    write_text(out, "new", "-o")
    assert out.read_text() == "new" and (out.stat().st_mode & 0o777) == 0o640


BASE = {"num_attention_heads": 32, "hidden_size": 4096, "num_hidden_layers": 24, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("fields, refusal", [
    ({**BASE, "model_type": "deci", "num_key_value_heads_per_layer": [4, 4, 2]}, "'num_key_value_heads_per_layer'"),
    ({**BASE, "model_type": "nemotron-nas", "block_configs": [{"attention": {"n_heads_in_group": 8}}]},
     "'block_configs'"),
    ({**BASE, "model_type": "mobilebert", "true_hidden_size": 128, "num_attention_heads": 4, "hidden_size": 512},
     "'true_hidden_size'"),
    ({**BASE, "model_type": "big_bird", "attention_type": "block_sparse"}, "'attention_type' = 'block_sparse'"),
])
def test_layer_shapes_the_model_cannot_represent_are_refused(tmp_path, fields, refusal):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    with pytest.raises(IomodelError, match=refusal) as exc:
        load_config(path)
    assert "\n" not in str(exc.value) and "--heads/--kv-heads/--head-dim" in str(exc.value)


@pytest.mark.parametrize("fields, want", [
    # Zamba2-2.7B: attention on 2 x hidden_size, 32 heads of attention_head_dim 160
    ({"model_type": "zamba2", "num_attention_heads": 32, "hidden_size": 2560, "attention_head_dim": 160,
      "torch_dtype": "bfloat16"}, (32, 32, 160, None)),
    # MPT through llm-foundry's multi-query attention: one KV head
    ({"model_type": "mpt", "n_heads": 32, "d_model": 4096, "attn_config": {"attn_type": "multiquery_attention"},
      "torch_dtype": "bfloat16"}, (32, 1, 128, None)),
    # GPT-Neo-1.3B: local layers of a 256-token causal window
    ({"model_type": "gpt_neo", "num_heads": 16, "hidden_size": 2048, "num_layers": 24, "window_size": 256,
      "attention_types": [[["global", "local"], 12]], "torch_dtype": "float32"},
     (16, 16, 128, (256, "12 of 24 layers (attention_types): layers 1, 3, …, 23 (every 2nd from 1)"))),
    # RecurrentGemma-2B: 2,048-token local attention blocks
    ({"model_type": "recurrent_gemma", "num_attention_heads": 10, "num_key_value_heads": 1, "hidden_size": 2560,
      "attention_window_size": 2048, "torch_dtype": "bfloat16"}, (10, 1, 256, (2048, "the attention blocks (block_types)"))),
    # ModernBERT-base: a 128-token span centred on the query: 64 keys each side; layers 0, 3, ..., 21 global
    ({"model_type": "modernbert", "num_attention_heads": 12, "hidden_size": 768, "num_hidden_layers": 22,
      "local_attention": 128, "global_attn_every_n_layers": 3, "torch_dtype": "float32"},
     (12, 12, 64, (64, "14 of 22 layers (global_attn_every_n_layers 3)"))),
    # Longformer-base: 512-token spans: 256 each side
    ({"model_type": "longformer", "num_attention_heads": 12, "hidden_size": 768, "num_hidden_layers": 12,
      "attention_window": [512] * 12, "torch_dtype": "float32"}, (12, 12, 64, (256, "all 12 layers"))),
])
def test_other_spellings_read_right(tmp_path, fields, want):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    cfg = load_config(path)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == want[:3]
    assert (None if cfg.window is None else (cfg.window, cfg.window_layers)) == want[3]


def test_no_seqlen_curve_past_a_models_window(tmp_path):
    """gpt-oss slides a 128-token window on half its layers: the seqlen plot would draw full attention to 128k."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt_oss", "num_attention_heads": 64, "num_key_value_heads": 8,
                               "head_dim": 64, "hidden_size": 2880, "num_hidden_layers": 4, "sliding_window": 128,
                               "layer_types": ["sliding_attention", "full_attention"] * 2, "torch_dtype": "bfloat16"}))
    p = _cli("plot", "--config", str(cfg), "--seqlen", "128", "-o", str(tmp_path / "pl"), "--kind", "seqlen")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "past the model's sliding-window attention (128 tokens on 2 of 4 layers (layer_types): layers 0, 2)" in p.stderr
    assert not (tmp_path / "pl").exists() or not list((tmp_path / "pl").iterdir())


def test_a_training_step_missing_a_kernel_is_not_reconciled(tmp_path):
    from iomodel.measure.records import Measurement
    from iomodel.reconcile import reconcile

    raw = json.loads(open("receipts/ncu-h200-train1-2026-12-01.json").read())
    sid = "b8-h16-kv16-d64-fp16-q1024-k1024-nc-tiled-bwd"
    shape = next(s for s in raw["shapes"] if s["id"] == sid)
    shape["kernels"] = [k for k in shape["kernels"] if "_bwd_preprocess" not in k["name"]]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    rec = reconcile(Measurement.load(path))
    row = next(r for r in rec.rows if r.id == sid)
    assert rec.within(row, "L2", "read") is False
    assert row.level("L2").missing == {"read": "kernels _bwd_preprocess not profiled",
                                       "write": "kernels _bwd_preprocess not profiled"}


@pytest.mark.interpreter
def test_validate_keeps_its_record_when_stdout_is_full(tmp_path):
    """The second probe lost the measurement when printing progress failed."""
    out = tmp_path / "r.json"
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "iomodel.cli", "validate", "sweeps/interpreter.toml", "--interpreter",
                            "-o", str(out)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=600,
                           env={**os.environ, "TRITON_INTERPRET": "1"})
    assert p.returncode == 0 and out.is_file() and json.loads(out.read_text())["shapes"]
    assert p.stderr.strip().endswith("its summary could not be printed (No space left on device)")


@pytest.mark.parametrize("shape, fragment", [
    ('seed = "abc"', 'shape 1: seed must be a whole number, 0 or more, got the string \'abc\''),
    ('impls = "tiled"', "shape 1: impls must be a list of names"),
    ('heads = "2"', "shape 1: heads must be a positive whole number, got the string '2'"),
    ('phase = "decode"\npass = "fwd+bwd"\nseqlen_q = 1', 'shape 1: a decode shape has no backward'),
])
def test_sweep_values_are_named_in_the_sweeps_words(tmp_path, shape, fragment):
    from iomodel.measure.sweep import load_sweep

    path = tmp_path / "s.toml"
    path.write_text(f"[[shape]]\nheads = 4\nkv_heads = 2\nhead_dim = 16\nseqlen = 64\n".replace("heads = 4\n", "heads = 4\n" if "heads =" not in shape or "kv" in shape else "") + shape + "\n")
    with pytest.raises(IomodelError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_sweep(path)


def test_sweep_ncu_batch_size_is_typed(tmp_path):
    from iomodel.measure.sweep import load_sweep

    path = tmp_path / "s.toml"
    path.write_text('[ncu]\nbatch_size = "a"\n[[shape]]\nheads = 4\nkv_heads = 2\nhead_dim = 16\nseqlen = 64\n')
    with pytest.raises(IomodelError, match="batch_size must be a whole number, 1 or more, got the string 'a'"):
        load_sweep(path)


def test_a_model_without_attention_is_refused(tmp_path):
    """Mamba2's num_heads/head_dim are state-space heads: no attention layer is invented (third probe)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba2", "num_heads": 80, "head_dim": 64, "hidden_size": 2560,
                                "state_size": 128, "torch_dtype": "bfloat16"}))
    with pytest.raises(IomodelError, match="model_type 'mamba2' has no attention layers"):
        load_config(path)


def test_the_reproduce_line_keeps_the_flags_given_with_a_config(tmp_path):
    path = tmp_path / "opt.json"
    path.write_text(json.dumps({"model_type": "opt", "num_attention_heads": 32, "hidden_size": 4096,
                                "torch_dtype": "float16"}))
    p = _cli("worksheet", "--config", str(path), "--heads", "16", "--kv-heads", "4", "--head-dim", "64",
             "--dtype", "fp32", "--format", "json")
    cmd = json.loads(p.stdout)["worksheet"]["command"]
    assert "--heads 16 --kv-heads 4 --head-dim 64 --dtype fp32" in cmd


def test_dash_is_standard_output(tmp_path):
    p = _cli("worksheet", "--format", "csv", "-o", "-", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("# ") and not (tmp_path / "-").exists()


def test_a_refused_backend_holding_numbers_is_refused(tmp_path):
    raw = json.loads(open("receipts/bench_kernel_h200.json").read())
    for e in raw["decode"]:
        e["results"]["triton"]["status"] = "refused: OOM"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    p = _cli("bench", "--check", str(path))
    assert p.returncode == 2 and "status 'refused: OOM' yet it holds measured numbers" in p.stderr


@pytest.mark.parametrize("change, fragment", [
    (lambda h: h.update(peak_flops=[1, 2]), "hardware.peak_flops must be"),
    (lambda h: h.update(num_sms=132.5), "hardware.num_sms must be a whole number, got 132.5"),
    (lambda h: h.update(l2_bytes=1e30), "hardware.l2_bytes 1e+30 differs from the environment.l2_bytes"),
])
def test_a_damaged_hardware_block_is_one_line(tmp_path, change, fragment):
    from iomodel.measure.records import Measurement

    raw = json.loads(open("receipts/ncu-h200-holdout4-flush-2026-11-29.json").read())
    raw["environment"]["l2_bytes"] = raw["hardware"]["l2_bytes"]
    change(raw["hardware"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(IomodelError, match=re.escape(fragment)):
        Measurement.load(path)


@pytest.mark.parametrize("fields, note", [
    ({"model_type": "bloom", "n_head": 32, "hidden_size": 4096, "torch_dtype": "bfloat16"},
     "model_type 'bloom' uses ALiBi position biases"),
    ({"model_type": "mllama", "torch_dtype": "bfloat16",
      "text_config": {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                      "cross_attention_layers": [3, 8, 13]}}, "'cross_attention_layers': those layers attend"),
    ({"num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "bfloat16",
      "text_config": {"num_attention_heads": 16, "hidden_size": 2048}},
     "the nested config gives hidden_size, num_attention_heads differently from the top level"),
])
def test_what_a_config_says_that_the_worksheet_does_not_model_is_noted(tmp_path, fields, note):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    assert any(n.startswith(note) for n in load_config(path).notes), load_config(path).notes


def test_an_impossible_decode_shape_in_a_speed_receipt_is_named(tmp_path):
    raw = json.loads(open("receipts/bench_kernel_h200.json").read())
    raw["decode"][0]["shape"]["kv_heads"] = 5  # 32 query heads
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    p = _cli("bench", "--check", str(path))
    assert p.returncode == 2 and "heads (32) is not a multiple of kv_heads (5)" in p.stderr


def test_a_format_that_contradicts_the_suffix_is_refused(tmp_path):
    p = _cli("worksheet", "--format", "csv", "-o", str(tmp_path / "x.md"))
    assert p.returncode == 2 and "--format csv does not match the suffix" in p.stderr
    assert not (tmp_path / "x.md").exists()


def test_plot_dir_equal_to_the_output_is_refused_before_anything_is_written(tmp_path):
    """Fourth probe: the plots were written into a folder named like -o, then -o failed."""
    p = _cli("worksheet", "-o", str(tmp_path / "x.md"), "--plot-dir", str(tmp_path / "x.md"))
    assert p.returncode == 2 and "name the same path" in p.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", ["b2\u202eexe", "a\nb", "x\x00y", "y" * 300, ""])
def test_shape_ids_must_be_printable_names(tmp_path, bad):
    from iomodel.measure.records import Measurement

    raw = json.loads(open("receipts/ncu-h200-holdout4-flush-2026-11-29.json").read())
    raw["shapes"][0]["id"] = bad
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(IomodelError, match="id must be a printable name of 1 to 200 characters") as exc:
        Measurement.load(path)
    assert str(exc.value).isprintable()


def test_bench_receipt_created_must_be_a_string(tmp_path):
    raw = json.loads(open("receipts/bench-h200.json").read())
    raw["created"] = 17
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    p = _cli("bench", "--check", str(path))
    assert p.returncode == 2 and "created must be a string or null, got 17" in p.stderr


def test_an_output_under_a_file_says_so(tmp_path):
    (tmp_path / "afile").write_text("x")
    p = _cli("worksheet", "-o", str(tmp_path / "afile" / "out.md"))
    assert p.returncode == 2 and f"{tmp_path / 'afile'} is a file, not a folder" in p.stderr
