"""Inputs of the fifth fresh probe of issue 10 (real configs, damaged files, absurd sizes, odd
paths), each with the right value or its one-line answer."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from iomodel.bench.receipt import check_receipt_fields
from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement
from iomodel.measure.records import shape_id as make_shape_id
from iomodel.paths import shown
from iomodel.reconcile import reconcile
from iomodel.spec import LayerSpec
from iomodel.spec.config import load_config
from test_cli_errors import run_cli  # in-process: (exit code, stdout, stderr)

RECEIPTS = Path(__file__).resolve().parent.parent / "receipts"
RECORD = RECEIPTS / "ncu-h200-holdout4-repeat-a-2026-11-29.json"  # 33 shapes: tiled prefill and decode, baseline


def one_line_error(capsys, argv) -> str:
    code, out, err = run_cli(capsys, argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out, err)
    return lines[0]


def _config(tmp_path, fields, name="config.json", prefix=b""):
    path = tmp_path / name
    path.write_bytes(prefix + json.dumps(fields).encode())
    return path


# Fields from the published config.json files.
BLOOM_176B = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_embed": 14336,
              "num_attention_heads": 112, "n_layer": 70, "torch_dtype": "bfloat16"}
WHISPER_LARGE_V3 = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "d_model": 1280,
                    "encoder_attention_heads": 20, "decoder_attention_heads": 20, "encoder_layers": 32,
                    "is_encoder_decoder": True, "torch_dtype": "float16"}
GEMMA3_27B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "num_attention_heads": 32,
                              "num_key_value_heads": 16, "head_dim": 128, "num_hidden_layers": 62,
                              "sliding_window": 1024, "query_pre_attn_scalar": 168}}


def test_bloom_n_embed_is_the_hidden_size(tmp_path):
    """BLOOM-176B states its width as n_embed (HF BloomConfig): it was refused for a missing hidden_size."""
    c = load_config(_config(tmp_path, BLOOM_176B))
    assert (c.heads, c.kv_heads, c.head_dim, c.dtype) == (112, 112, 14336 // 112, "bf16") == (112, 112, 128, "bf16")


def test_encoder_decoder_heads_are_read(tmp_path):
    """Whisper/BART give encoder_attention_heads (HF attribute_map: num_attention_heads): it was refused."""
    c = load_config(_config(tmp_path, WHISPER_LARGE_V3))
    assert (c.heads, c.kv_heads, c.head_dim, c.dtype, c.causal_default) == (20, 20, 64, "fp16", False)
    assert c.notes == ()
    bart = load_config(_config(tmp_path, {"d_model": 1024, "encoder_attention_heads": 16, "decoder_attention_heads": 8,
                                          "is_encoder_decoder": True, "torch_dtype": "float32"}, "bart.json"))
    assert (bart.heads, bart.head_dim) == (16, 64)
    assert any("'decoder_attention_heads' = 8 differs from the encoder's 16 heads" in n for n in bart.notes)


def test_gemma3_without_a_pattern_slides_five_layers_of_six(tmp_path):
    """Gemma-3-27B's published text_config gives sliding_window but not sliding_window_pattern (HF default 6):
    it was described as sliding on all 62 layers; 62 - 62 // 6 = 52 slide."""
    c = load_config(_config(tmp_path, GEMMA3_27B))
    assert (c.heads, c.kv_heads, c.head_dim, c.window) == (32, 16, 128, 1024)
    assert c.window_layers == "52 of 62 layers (Gemma-3's default sliding_window_pattern 6): all but layers 5, 11, …, 59 (every 6th from 5)"


def test_config_with_a_byte_order_mark_is_read(tmp_path):
    """A config saved by a Windows editor (UTF-8 with BOM, or UTF-16) was refused as invalid JSON."""
    fields = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"}
    bom = load_config(_config(tmp_path, fields, prefix=b"\xef\xbb\xbf"))
    (tmp_path / "u16.json").write_bytes(json.dumps(fields).encode("utf-16"))
    u16 = load_config(tmp_path / "u16.json")
    assert (bom.heads, bom.kv_heads, bom.head_dim) == (u16.heads, u16.kv_heads, u16.head_dim) == (32, 8, 128)


@pytest.mark.parametrize("dtype", ["auto", "int8"])
def test_a_config_dtype_iomodel_does_not_model_names_the_field(tmp_path, dtype):
    """'torch_dtype': 'auto' said only "unsupported dtype 'auto'", not which file or that --dtype overrides it."""
    path = _config(tmp_path, {"num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": dtype})
    with pytest.raises(IomodelError, match=rf"{path}: 'torch_dtype' = '{dtype}' is an unsupported dtype \(iomodel models "
                                           r"fp32, fp16, bf16, fp8_e4m3, fp8_e5m2\): pass --dtype$"):
        load_config(path)
    assert load_config(path, dtype="fp16").dtype == "fp16"


def _record(tmp_path, shape_id, **spec):
    data = json.loads(RECORD.read_text())
    shape = copy.deepcopy(next(s for s in data["shapes"] if s["id"] == shape_id))
    shape["spec"].update(spec)
    shape["id"] = make_shape_id(LayerSpec(**{k: v for k, v in shape["spec"].items() if k != "pass"}), shape["impl"])
    if shape["spec"].get("phase", "prefill") == "prefill" and "block_m" in shape["config"]:  # as a GPU would record it
        t_r = -(-shape["spec"]["seqlen_q"] // shape["config"]["block_m"])
        for k in shape["kernels"]:  # (iomodel.reconcile.compare.grid_mismatch refuses an edited spec)
            if "_attn_fwd" in k["name"] and "launch__grid_size" in k["metrics"]:
                k["metrics"]["launch__grid_size"] = t_r * shape["spec"]["batch"] * shape["spec"]["heads"]
    if shape["spec"].get("phase") == "decode":  # S·B·H / P decode programs, B·H·N_q combine ones (grid_mismatch)
        bh = shape["spec"]["batch"] * shape["spec"]["heads"]
        for k in shape["kernels"]:
            if "launch__grid_size" in k["metrics"]:
                k["metrics"]["launch__grid_size"] = (bh * shape["spec"]["seqlen_q"] if "combine" in k["name"] else
                                                     shape["config"]["num_splits"] * bh
                                                     // shape["config"].get("heads_per_program", 1))
    data["shapes"] = [shape]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("shape_id, spec, why", [
    ("b1-h16-kv16-d128-bf16-q512-k512-nc-tiled", {"batch": 10**6},
     "64,000,000 programs (batch 1,000,000, heads 16) are above 131,072"),
    ("b1-h16-kv16-d128-bf16-q512-k512-nc-tiled", {"heads": 10**5, "kv_heads": 10**5},
     "400,000 programs (batch 1, heads 100,000) are above 131,072"),
    ("b1-h16-kv16-d128-bf16-q512-k512-nc-tiled", {"seqlen_q": 2**24, "seqlen_k": 2**24, "heads": 2048, "kv_heads": 2048},
     "seqlen 16,777,216 is above 262,144 (the simulation grows with the square of the length), and B·H = 1·2,048 = "
     "2,048 grid rows, above 1,024"),
    ("b32-h32-kv8-d128-fp16-q1-k2048-nc-tiled", {"batch": 10**6},
     "16,000,000 programs (batch 1,000,000, heads 32) are above 131,072"),
])
def test_a_record_shape_too_large_to_simulate_is_not_reconciled_in_seconds(tmp_path, shape_id, spec, why):
    """A record whose spec says batch 10^6 ran `iomodel reconcile` past 20 GB (the L2 simulation visits every
    program); it is now listed as not reconciled, with the reason, at once."""
    t0 = time.perf_counter()
    path = _record(tmp_path, shape_id, **spec)
    rec = reconcile(Measurement.load(path))
    assert time.perf_counter() - t0 < 10
    (row,) = rec.rows
    assert row.error.startswith("the L2-aware prediction is not computed: " + why), row.error
    assert [r.id for r, _, _ in rec.not_reconciled()] == [json.loads(path.read_text())["shapes"][0]["id"]]


def test_a_long_record_shape_the_fast_evaluation_covers_is_reconciled_in_seconds(tmp_path):
    """Past the simulation's 2^18 tokens a bandless forward shape is predicted by the fast evaluation
    (iomodel/cache/stream.py, issue 12 item 4) instead of refused: 2^24 tokens, 16 heads, in seconds."""
    t0 = time.perf_counter()
    rec = reconcile(Measurement.load(_record(tmp_path, "b1-h16-kv16-d128-bf16-q512-k512-nc-tiled",
                                             seqlen_q=2**24, seqlen_k=2**24)))
    assert time.perf_counter() - t0 < 10
    (row,) = rec.rows
    assert row.error is None and row.l2 is not None
    assert row.l2.floor_read_bytes < row.l2.hbm_read_bytes <= row.l2.no_reuse_read_bytes


def test_validate_checks_every_shape_before_counting_any(tmp_path, capsys):
    """A sweep whose last shape is too large for the interpreter counted the others first (20 s), then failed."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "s"\nhardware = "H200"\n[defaults]\nbatch = 1\ndtype = "fp16"\nhead_dim = 16\n'
                     'impls = ["tiled"]\n[[shape]]\nheads = 2\nkv_heads = 2\nseqlen = [64, 1024]\ncausal = false\n')
    t0 = time.perf_counter()
    line = one_line_error(capsys, ["validate", str(sweep), "--interpreter", "-o", str(tmp_path / "r.json")])
    assert time.perf_counter() - t0 < 10
    assert "shape b1-h2-kv2-d16-fp16-q1024-k1024-nc-tiled is too large for Triton's interpreter" in line
    assert "counted" not in capsys.readouterr().out and not (tmp_path / "r.json").exists()


def test_a_written_path_with_a_newline_stays_on_one_line(tmp_path, capsys):
    out = tmp_path / "a\nb.md"
    code, _, err = run_cli(capsys, ["worksheet", "-o", str(out)])
    assert code == 0 and out.is_file()
    assert err == f"wrote {shown(out)}\n" and shown(out) == repr(str(out)) and "\n" not in shown(out)


def test_an_error_naming_a_path_with_a_newline_is_one_line(tmp_path, capsys):
    line = one_line_error(capsys, ["worksheet", "--config", str(tmp_path / "x\ny.json")])
    assert "x\\ny.json" in line and "does not exist" in line


def test_plot_into_a_file_is_refused_before_any_work(capsys):
    """`plot -o /dev/null` resolved the layer, then said "(File exists)"."""
    assert one_line_error(capsys, ["plot", "-o", "/dev/null"]) == \
        "error: -o/--out-dir /dev/null is a file, not a folder: pass a folder path"


def test_bench_check_on_a_path_with_brackets(tmp_path, capsys):
    """A receipt named '[/]x.json' gave a Rich MarkupError traceback; '[red]y.json' was printed as 'y.json'."""
    (tmp_path / "[").mkdir()
    for name in ("[/]x.json", "[red]y.json"):
        path = tmp_path / name
        path.write_bytes((RECEIPTS / "bench-cpu.json").read_bytes())
        code, out, err = run_cli(capsys, ["bench", "--check", str(path)])
        assert code == 0 and out == f"{path}: PASS under policy v1\n", (out, err)


def _bench(edit):
    data = json.loads((RECEIPTS / "bench-cpu.json").read_text())
    edit(data)
    return data


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["buckets"][0].__setitem__("heads", 10**5),
     "bucket 'prefill-causal-gqa' shape 'B=1 Nq=256 Nk=256' sdpa-math: error.elements is 131,072, but an output of "
     "B·seqlen_q = 1·256 rows × H·HEAD_DIM = 100,000·64 has 1,638,400,000 elements"),
    (lambda d: d["buckets"][0]["shapes"][0]["shape"].__setitem__("batch", 10**6),
     "error.elements is 131,072, but an output of B·seqlen_q = 1,000,000·256 rows"),
    (lambda d: d["buckets"][0].__setitem__("head_dim", "64"), "bucket 'prefill-causal-gqa': head_dim must be a "
     "positive integer, got the string '64'"),
    (lambda d: d.__setitem__("date", 5), "date must be a string or null, got 5"),
    (lambda d: d.__setitem__("elapsed_s", -1), "elapsed_s must be a number of seconds, 0 or more, got -1"),
    (lambda d: d.__setitem__("buckets", [dict(d["buckets"][0], name=f"b{i}") for i in range(30)]),
     "which is not among the receipt's buckets ('b0', 'b1', 'b10', 'b11', 'b12', 'b13', 'b14', 'b15', ... (30 in all))"),
])
def test_bench_receipt_edits_are_refused(edit, message):
    """bench --check passed a receipt whose bucket said 10^5 heads beside the results of 8, and a date of 5."""
    with pytest.raises(IomodelError) as exc:
        check_receipt_fields(_bench(edit), "receipt 'r.json'")
    assert message in str(exc.value), str(exc.value)


def test_every_committed_bucket_receipt_holds_its_element_counts():
    for name in ("bench-cpu.json", "bench-h200.json", "bench-h200-v2.json"):
        check_receipt_fields(json.loads((RECEIPTS / name).read_text()), name)


def test_bench_check_on_a_file_that_is_no_bench_receipt_is_bad_input(tmp_path):
    """An ncu measurement or {} given to `bench --check` was a policy FAIL (exit 1, two lines)."""
    from iomodel.bench.receipt import check_receipt
    from iomodel.errors import IomodelError

    for receipt in ({}, {"schema": "iomodel.measurement/1"}):
        with pytest.raises(IomodelError, match="unknown receipt schema"):
            check_receipt(receipt)


def test_plot_refusing_the_layer_creates_no_output_folder(capsys, tmp_path):
    """The output folder was created before the layer was refused (an empty -o folder left behind)."""
    out = tmp_path / "plots"
    code, _, err = run_cli(capsys, ["plot", "--pass", "fwd+bwd", "--phase", "decode", "-o", str(out)])
    assert code == 2 and "decode has no backward pass" in err and not out.exists()
