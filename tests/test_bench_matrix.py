"""Shape-matrix files: the bundled ones parse; every bad file names its line and what to change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iomodel.bench.matrix import MATRICES_DIR, load_matrix, parse_matrix
from iomodel.errors import IomodelError

GOOD = (Path(__file__).parent / "data" / "matrix-good.toml").read_text()


def _line(msg: str) -> int:
    m = re.search(r"line (\d+)", msg)
    assert m, msg
    return int(m.group(1))


def _err(text: str) -> str:
    with pytest.raises(IomodelError) as e:
        parse_matrix(text, "m.toml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_good_matrix_parses_with_all_fields():
    m = parse_matrix(GOOD, "m.toml")
    assert (m.version, m.name, m.seed, m.warmup, m.reps) == (1, "t", 3, 1, 3)
    p, d = m.buckets
    assert (p.heads, p.kv_heads, p.gqa, p.causal, p.causal_align, p.dtype) == (4, 2, True, True, "top-left", "bf16")
    assert d.dtype == "fp32" and d.causal is False and d.line == 30
    assert p.shapes[1].lengths == (64, 10) and p.shapes[1].useful_tokens("prefill") == 74
    assert d.shapes[0].useful_tokens("decode") == 2
    assert m.workload.prefill_bucket == "p" and m.workload.layers == 2
    assert p.line == 16


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_bundled_matrices_are_versioned_and_weighted(name):
    m = load_matrix(name)
    assert m.version == 1 and m.device == name
    assert abs(sum(b.weight for b in m.buckets) - 1) < 1e-9
    assert {b.phase for b in m.buckets} == {"prefill", "decode"}
    assert any(b.gqa for b in m.buckets) and any(not b.gqa for b in m.buckets)
    assert any(b.causal for b in m.buckets) and any(not b.causal for b in m.buckets)
    assert any(s.padded for b in m.buckets for s in b.shapes)
    assert len({b.head_dim for b in m.buckets}) >= 2 and len({b.dtype for b in m.buckets}) >= 2
    assert len(m.sha256) == 64
    text = (MATRICES_DIR / f"{name}-v1.toml").read_text()
    assert "Changelog" in text and "version = 1" in text


def test_matrix_by_path(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text(GOOD)
    assert load_matrix(str(p)).name == "t"
    with pytest.raises(IomodelError, match="neither a file nor a bundled matrix"):
        load_matrix(str(tmp_path / "missing.toml"))


def test_invalid_toml_names_line_and_column():
    bad = GOOD.replace("reps = 3", "reps = = 3")
    msg = _err(bad)
    assert "invalid TOML" in msg and "line 7" in msg and "column" in msg


@pytest.mark.parametrize(
    "old, new, expected_line, words",
    [
        ('phase = "decode"', 'phase = "decoding"', 33, ["'d'", "phase", "prefill"]),
        ("kv_heads = 2\n", "kv_heads = 3\n", 22, ["'p'", "not divisible"]),
        ('dtype = "bf16"', 'dtype = "fp8_e4m3"', 24, ["'p'", "cannot be benchmarked"]),
        ("causal = true\n", "causal = true\nwindow = 4\n", 21, ["'p'", "unknown key 'window'"]),
        ("{ batch = 2, seqlen_q = 64, seqlen_k = 64, lengths = [64, 10] }",
         "{ batch = 2, seqlen_q = 64, seqlen_k = 64, lengths = [64] }", 27, ["shape #2", "lengths"]),
        ("{ batch = 2, seqlen_q = 1, seqlen_k = 48 }", "{ batch = 2, seqlen_q = 32, seqlen_k = 48 }", 39,
         ["'d'", "seqlen_q=32", "decode"]),
        ("{ batch = 1, seqlen_q = 32, seqlen_k = 32 }", "{ batch = 1, seqlen_q = 16, seqlen_k = 32 }", 26,
         ["prefill", "equal"]),
        ("{ batch = 1, seqlen_q = 32, seqlen_k = 32 }", "{ batch = 0, seqlen_q = 32, seqlen_k = 32 }", 26,
         ["shape #1 batch", ">= 1"]),
        ('decode_bucket = "d"', 'decode_bucket = "dd"', 14, ["names no bucket"]),
        ('prefill_bucket = "p"', 'prefill_bucket = "d"', 13, ["decode bucket"]),
        ("version = 1", "version = 7", 1, ["version 7"]),
        ('name = "d"', 'name = "p"', 31, ["used twice"]),
        ("weight = 0.5\nphase = \"decode\"", "weight = 0.25\nphase = \"decode\"", 16, ["sum to 0.75"]),
        ("seed = 3", "seed = 3\ncolour = 1", 4, ["unknown top-level key 'colour'"]),
        # the request estimate reaches at most MAX_WORKLOAD_EXTRAPOLATION = 4x outside a bucket's measured sizes
        # (prefill seqlen_q 32..64, decode seqlen_k 48); a prompt 10^6x the buckets' was extrapolated, labelled
        ("prompt_len = 64", "prompt_len = 257", 10, ["prompt_len 257 lies more than 4x outside the seqlen_q of bucket "
                                                     "'p' (32..64)", "add a shape to the bucket nearer it"]),
        ("prompt_len = 64", "prompt_len = 7", 10, ["prompt_len 7 lies more than 4x outside the seqlen_q of bucket 'p'"]),
        ("output_len = 4", "output_len = 130", 11, ["the decode steps' seqlen_k 64..193 (prompt_len + output_len - 1) "
                                                    "lies more than 4x outside the seqlen_k of bucket 'd' (48..48)",
                                                    "bring output_len within 4x"]),
        ("layers = 2", "layers = 100000000000000000000", 12, ["workload.layers must be an integer >= 1 and <= 10,000"]),
    ],
)
def test_schema_errors_name_bucket_and_line(old, new, expected_line, words):
    assert old in GOOD
    msg = _err(GOOD.replace(old, new, 1))
    assert msg.startswith("m.toml line"), msg
    assert _line(msg) == expected_line, msg
    for w in words:
        assert w in msg, msg


def test_causal_top_left_kv_cache_is_rejected_bottom_right_accepted():
    text = GOOD.replace('phase = "decode"', 'phase = "decode"\ncausal = true', 1)
    assert "causal_align = 'bottom-right'" in _err(text)
    ok = parse_matrix(text.replace("causal = true\nheads = 4\nkv_heads = 1",
                                   "causal = true\ncausal_align = \"bottom-right\"\nheads = 4\nkv_heads = 1"), "m.toml")
    assert ok.buckets[1].causal_align == "bottom-right"


def test_missing_version_and_buckets():
    assert "missing 'version'" in _err('name = "x"\n')
    assert "no buckets" in _err("version = 1\n")


def test_cli_reports_bad_matrix_on_one_line(tmp_path, capsys):
    from iomodel.cli import main

    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace("kv_heads = 2\n", "kv_heads = 3\n"))
    with pytest.raises(SystemExit) as e:
        main(["bench", "--device", "cpu", "--matrix", str(p), "-o", str(tmp_path / "r.json"), "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 22" in err and "kv_heads" in err
