"""``iomodel worksheet --seqlens`` / ``--seqlens-file``: a ragged batch summed exactly per sequence."""

from __future__ import annotations

import csv
import io
import json

import pytest

from test_cli_errors import assert_one_line_error, run_cli
from iomodel.report.worksheet import make_worksheet
from iomodel.spec.resolve import resolve_layer

#: H = 2, H_kv = 1, d = 16, fp16 (s = 2), BLOCK_M = BLOCK_N = 16, causal top-left.
LAYER = ["--heads", "2", "--kv-heads", "1", "--head-dim", "16", "--dtype", "fp16", "--block-m", "16",
         "--block-n", "16"]
DENSE = dict(heads=2, kv_heads=1, head_dim=16, dtype="fp16", block_m=16, block_n=16)


def _json(capsys, *args):
    code, out, err = run_cli(capsys, ["worksheet", *LAYER, *args, "--format", "json"])
    assert code == 0, err
    return json.loads(out)


def test_ragged_json_hand_computed(capsys):
    """Sequences 40, 17 and 5 queries against 33 keys.

    Per sequence (H·d·s = 64 B per row of Q, O, K, V; LSE H·4 = 8 B per row): key rows loaded
    per query tile i = min(N_k, 16·ceil(min(N_q, 16(i+1)) / 16)):
    N=40: 16 + 32 + 40 = 88; N=17: 16 + 17 = 33; 5:33: 16. So K = V = 64·(88 + 33 + 16) = 8,768;
    Q = O = 64·(40 + 17 + 5) = 3,968; LSE 8·62 = 496. Sequence table: cdiv(40, 16)·3·2 = 18
    programs x 2 entries x 4 B = 144 B per cu_seqlens tensor.
    """
    d = _json(capsys, "--seqlens", "40,17,5:33")
    assert d["kind"] == "ragged" and d["seqlens"] == [[40, 40], [17, 17], [5, 33]]
    assert d["histogram"]["count"] == 3
    assert d["histogram"]["q"] == {"min": 5, "max": 40, "mean": 62 / 3, "total": 62}
    assert d["histogram"]["k"] == {"min": 17, "max": 40, "mean": 30.0, "total": 90}
    hbm = {r["tensor"]: (r["read_bytes"], r["write_bytes"]) for r in d["tiled"]["tensors"] if r["level"] == "HBM"}
    assert hbm == {"Q": (3968, 0), "K": (8768, 0), "V": (8768, 0), "O": (0, 3968), "LSE": (0, 496),
                   "cu_seqlens_q": (144, 0), "cu_seqlens_k": (144, 0)}
    assert d["tiled"]["hbm"] == {"read_bytes": 21792, "write_bytes": 4464, "bytes": 26256}
    assert d["tiled"]["sram_fill"] == d["tiled"]["hbm"]
    assert [(k["seqlen_q"], k["seqlen_k"], k["count"], k["hbm_bytes"]) for k in d["tiled"]["kinds"]] == [
        (40, 40, 1, 16704), (17, 17, 1, 6536), (5, 33, 1, 2728)]
    # compulsory: Q + O 64 B per query row, K + V 32 B per key row some query sees (5:33 top-left: 5 keys);
    # (40 + 17 + 5)·128 + (40 + 17 + 5)·64 = 11,904, plus 2 x (3 + 1) x 4 B of cu_seqlens
    assert d["compulsory"] == {"sequences": 11904, "sequence_table": 32}
    assert d["compulsory_bytes"] == 11936
    # L2-aware estimate, by hand: the batch (11 KiB) fits the H200's L2, so every byte some program loads is read
    # from DRAM once and every store stays dirty at launch end. Q 3,968; K = V = 32 B per key row of the one KV
    # head (H_kv d s) x the rows some tile loads: 40 + 17 + 16 (5:33 top-left: one 16-row key tile) = 2,336 each.
    e = d["l2_aware"]
    assert "l2_aware_not_computed" not in d
    assert (e["read_bytes"], e["write_bytes"]) == (3968 + 2 * 2336, 0) == (8640, 0)
    assert (e["written_bytes"], e["dirty_at_end_bytes"]) == (3968 + 496, 4464)
    assert "receipts/ncu-h200-ragged2-2026-12-01.json" in e["note"] and "one varlen launch" in e["note"]


def test_ragged_equals_sum_of_batch_one_worksheets(capsys):
    d = _json(capsys, "--seqlens", "40,17,40")
    singles = [_json(capsys, "--seqlen", str(n)) for n in (40, 17, 40)]
    table = sum(r["read_bytes"] for r in d["tiled"]["tensors"] if r["level"] == "HBM"
                and r["tensor"].startswith("cu_seqlens"))
    assert table == 2 * (3 * 3 * 2) * 2 * 4  # cdiv(40, 16)·B·H programs, 2 entries, 2 tensors, 4 B
    for key in ("read_bytes", "write_bytes"):
        want = sum(w["algorithms"]["tiled"]["hbm"][key] for w in singles)
        assert d["tiled"]["hbm"][key] == want + (table if key == "read_bytes" else 0)
    assert d["compulsory"]["sequences"] == sum(w["compulsory_bytes"] for w in singles) == 7680 * 2 + 3264
    assert d["flops"] == sum(w["algorithms"]["tiled"]["flops"] for w in singles)
    # two sequences of one kind: counted, not evaluated twice
    assert [(k["seqlen_q"], k["count"]) for k in d["tiled"]["kinds"]] == [(40, 2), (17, 1)]


def test_padded_baseline_is_the_batch_at_max_length(capsys):
    d = _json(capsys, "--seqlens", "40,17,5:33")
    dense = make_worksheet(resolve_layer(**DENSE, batch=3, seqlen=40)).to_dict()
    base = dense["algorithms"]["baseline"]["hbm"]
    assert d["padded_baseline"]["hbm"] == base
    assert (d["padded_baseline"]["batch"], d["padded_baseline"]["seqlen_q"], d["padded_baseline"]["seqlen_k"]) == (
        3, 40, 40)
    assert base["bytes"] == 216960
    assert d["padded_tiled_hbm_bytes"] == dense["algorithms"]["tiled"]["hbm"]["bytes"]


def test_markdown_states_histogram_and_baseline(capsys):
    code, out, err = run_cli(capsys, ["worksheet", *LAYER, "--seqlens", "40,17,5:33"])
    assert code == 0, err
    assert out.startswith("# HBM traffic worksheet: custom, ragged batch of 3 sequences, prefill fwd, fp16")
    assert "- query lengths N_q: min 5, max 40, mean 20.7, total 62 tokens" in out
    assert "- key lengths N_k: min 17, max 40, mean 30.0, total 90 tokens" in out
    assert ("- **`baseline`, eager baseline = the padded batch: the 3 sequences padded to seqlen_q 40 x seqlen_k 40 "
            "(B = 3)") in out
    assert "total 216,960 B (212 KiB)" in out
    assert "- **Compulsory bytes**: 11,936 B (11.7 KiB)" in out
    assert "| K | 8,768 B (8.56 KiB) | 0 | 8,768 B (8.56 KiB) | 0 |" in out
    assert "| 5 | 33 | 1 | 2,728 B (2.66 KiB) |" in out
    assert ("- **L2-aware DRAM estimate of `tiled`** (an estimate from iomodel/cache/predict.py "
            "`predict_ragged_launch`, not a measurement): DRAM read 8,640 B (8.44 KiB), written 0 B, total 8,640 B "
            "(8.44 KiB)") in out
    assert "not computed" not in out
    assert "--seqlens 40,17,5:33" in out  # the reproduce command


def test_csv_and_file_and_reproduce(capsys, tmp_path):
    f = tmp_path / "lens.txt"
    f.write_text("# three sequences\n40\n17\n5,33\n")
    code, out, err = run_cli(capsys, ["worksheet", *LAYER, "--seqlens-file", str(f), "--format", "csv"])
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO("".join(ln + "\n" for ln in out.splitlines() if not ln.startswith("#")))))
    by = {(r["kind"], r["tensor"], r["level"]): r for r in rows}
    assert by[("total", "", "HBM")]["bytes"] == "26256"
    assert by[("row", "K", "SRAM_fill")]["read_bytes"] == "8768"
    assert by[("histogram", "total", "")]["seqlen_q"] == "62"
    assert by[("padded_baseline", "", "HBM")]["bytes"] == "216960"
    assert by[("compulsory", "", "HBM")]["bytes"] == "11936"
    json_file = tmp_path / "lens.json"
    json_file.write_text("[40, 17, [5, 33]]")
    from_json = _json(capsys, "--seqlens-file", str(json_file))
    assert from_json["tiled"] == _json(capsys, "--seqlens", "40,17,5:33")["tiled"]
    assert f"--seqlens-file {json_file}" in from_json["worksheet"]["command"]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--seqlens", ""], ["--seqlens is empty"]),
        (["--seqlens", "512,0"], ["--seqlens: 0 is not a length", "whole number >= 1"]),
        (["--seqlens", "512,-3"], ["--seqlens: -3 is not a length"]),
        (["--seqlens", "512,3.5"], ["not a length or a q:k pair"]),
        (["--seqlens", "512,x"], ["not a length or a q:k pair"]),
        (["--seqlens", "512", "--batch", "2"], ["drop --batch"]),
        (["--seqlens", "512", "--seqlen", "512"], ["drop --seqlen"]),
        (["--seqlens", "512", "--seqlen-k", "512"], ["drop --seqlen-k"]),
        (["--seqlens", "512", "--seqlens-file", "x.txt"], ["either --seqlens or --seqlens-file"]),
        (["--seqlens", "512", "--phase", "decode"], ["forward prefill only"]),
        (["--seqlens", "512", "--pass", "fwd+bwd"], ["forward prefill only"]),
        (["--seqlens-file", "/nonexistent/lens.txt"], ["does not exist: give a readable text or JSON file"]),
    ],
)
def test_cli_errors(capsys, args, needles):
    assert_one_line_error(capsys, ["worksheet", *args], *needles)


def test_cli_file_errors(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(empty)], "lists no sequence")
    floats = tmp_path / "f.json"
    floats.write_text("[512, 3.5]")
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(floats)], "3.5 is not a length")
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(tmp_path)], "is a folder: give a readable text or JSON file")
    big = tmp_path / "big.txt"
    big.write_text("1\n" * (10**6 + 1))
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(big)], "1,000,001 sequences",
                          "more than the 1,000,000")
    assert_one_line_error(capsys, ["worksheet", "--seqlens", "40", "--plot-dir", str(tmp_path / "p")],
                          "--plot-dir draws one dense layer")
    assert_one_line_error(capsys, ["plot", "--seqlens", "40", "-o", str(tmp_path / "p")],
                          "drop --seqlens")


def test_seqlens_file_json_too_deep_or_duplicated_is_one_line(tmp_path):
    """The JSON form is read by the project's one JSON reader (iomodel.jsonvalues.parse_json):
    nesting too deep for Python's parser was a RecursionError traceback."""
    from iomodel.errors import IomodelError
    from iomodel.spec.ragged import read_seqlens_file

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(IomodelError, match="is not valid JSON") as e:
        read_seqlens_file(deep)
    assert "\n" not in str(e.value)
    ok = tmp_path / "ok.json"
    ok.write_text("[512, [77, 4096]]")
    assert read_seqlens_file(ok) == ((512, 512), (77, 4096))


@pytest.mark.parametrize("text, needle", [("512,,77", "has an empty entry"), ("512,", "has an empty entry")])
def test_seqlens_empty_entries_are_refused(text, needle):
    """An empty entry was dropped silently (512,,77 ran as 2 sequences)."""
    from iomodel.errors import IomodelError
    from iomodel.spec.ragged import parse_seqlens

    with pytest.raises(IomodelError, match=needle):
        parse_seqlens(text)


@pytest.mark.parametrize("body, needle", [('["512"]', "a JSON length is a string"),
                                          ("[null]", "entry 0: null is not a length"),
                                          ('[[3, "x"]]', r"entry 0: \[3, 'x'\] is not a length")])
def test_seqlens_file_json_wrong_types_name_the_entry(tmp_path, body, needle):
    from iomodel.errors import IomodelError
    from iomodel.spec.ragged import read_seqlens_file

    f = tmp_path / "s.json"
    f.write_text(body)
    with pytest.raises(IomodelError, match=needle):
        read_seqlens_file(f)


def test_histogram_entries_equal_the_listed_sequences(tmp_path):
    """``LEN*COUNT`` (``--seqlens`` and ``--seqlens-file``) is COUNT sequences of LEN: the same pairs,
    hence the same bytes, as listing them; a bad count is one line."""
    from iomodel.errors import IomodelError
    from iomodel.spec.ragged import parse_seqlens, read_seqlens_file

    assert parse_seqlens("512*3,77:4096*2,9") == parse_seqlens("512,512,512,77:4096,77:4096,9")
    f = tmp_path / "hist.txt"
    f.write_text("# length * count\n512*3\n77,4096 * 2\n9\n")
    assert read_seqlens_file(f) == ((512, 512),) * 3 + ((77, 4096),) * 2 + ((9, 9),)
    for bad in ("512*0", "512*x", "512*1000001"):
        with pytest.raises(IomodelError) as exc:
            parse_seqlens(bad)
        assert "the count after '*' must be a whole number from 1 to 1,000,000" in str(exc.value)
        assert "\n" not in str(exc.value)


def test_a_histogram_of_more_than_ten_million_sequences_is_one_line():
    from iomodel.errors import IomodelError
    from iomodel.spec.ragged import MAX_SEQUENCES, parse_seqlens

    assert len(parse_seqlens(",".join(["1*1000000"] * 10))) == MAX_SEQUENCES
    with pytest.raises(IomodelError, match="lists more than 10,000,000 sequences: model a sample"):
        parse_seqlens(",".join(["1*1000000"] * 11))
