"""An output path never replaces an input, and the decode tiles follow a given BLOCK_N (a fresh user's audit of the
worksheet, plot and bench commands, twenty-first session, 2026-12-07: ``worksheet --config cfg.json -o cfg.json``
replaced the config with the worksheet; ``-o p/bytes_vs_seqlen.png --plot-dir p`` wrote Markdown over a plot;
``bench --matrix m.toml -o m.toml`` replaced the matrix; ``--phase decode --block-n 128`` kept the 16 splits the
launcher picks for BLOCK_N 64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cli_errors import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("flag, name, text, what", [
    ("--config", "cfg.json", (ROOT / "worksheets" / "presets" / "mistral-7b.json").read_text(), "the --config file"),
    ("--seqlens-file", "lens.json", "[512, [77, 4096]]", "the --seqlens-file"),
    ("--schedule", "s.toml", "block_m = 64\nblock_n = 64\n", "the --schedule file"),
])
def test_worksheet_output_that_is_an_input_is_refused(capsys, tmp_path, flag, name, text, what):
    path = tmp_path / name
    path.write_text(text)
    fmt = ["-f", "md"] if name.endswith(".toml") else []
    assert_one_line_error(capsys, ["worksheet", flag, str(path), "-o", str(path), *fmt],
                          f"-o {str(path)!r} is {what} this command reads")
    assert path.read_text() == text
    link = tmp_path / "link.md"  # a link to the input is the input
    link.symlink_to(path)
    assert_one_line_error(capsys, ["worksheet", flag, str(path), "-o", str(link)], f"is {what} this command reads")
    assert path.read_text() == text


def test_worksheet_output_that_is_one_of_its_plots_is_refused(capsys, tmp_path):
    plots = tmp_path / "p"
    assert_one_line_error(capsys, ["worksheet", "--seqlen", "256", "--plot-dir", str(plots), "-o",
                                   str(plots / "bytes_vs_seqlen.png"), "-f", "md"],
                          "is a plot that --plot-dir writes (bytes_vs_seqlen.png): give -o another path")
    (tmp_path / "q" / "bytes_vs_blocks.png").mkdir(parents=True)  # a plot path that is a folder: no partial set
    assert_one_line_error(capsys, ["worksheet", "--seqlen", "256", "--plot-dir", str(tmp_path / "q"), "-o",
                                   str(tmp_path / "q" / "ws.md")], "is a folder in --plot-dir's folder")
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["bytes_vs_blocks.png"]


def test_bench_receipt_that_is_its_matrix_is_refused(capsys, tmp_path):
    matrix = tmp_path / "m.toml"
    text = (ROOT / "iomodel" / "bench" / "matrices" / "cpu-v2.toml").read_text()
    matrix.write_text(text)
    assert_one_line_error(capsys, ["bench", "--device", "cpu", "--matrix", str(matrix), "-o", str(matrix)],
                          f"-o {str(matrix)!r} is the --matrix file this command reads")
    assert matrix.read_text() == text


@pytest.mark.parametrize("block_n", [16, 32, 64, 128])
def test_decode_tiles_take_the_split_count_the_launcher_picks_for_the_given_block_n(capsys, block_n):
    import kernels.heuristics as h
    from iomodel.spec.hardware import get_hardware

    hw = get_hardware("H200")
    want = h.decode_config(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192, head_dim=128,
                           num_sms=hw.num_sms, dtype="bf16", smem_per_sm=hw.smem_per_sm, block_n=block_n)
    code, out, err = run_cli(capsys, ["worksheet", "--phase", "decode", "--block-n", str(block_n), "-f", "json"])
    assert code == 0, err
    tiles = json.loads(out)["tiling"]
    assert (tiles["block_n"], tiles["num_splits"]) == (block_n, want.num_splits)
    assert {16: 64, 64: 16, 128: 8}.get(block_n, want.num_splits) == want.num_splits  # the audit's numbers


def test_a_ragged_reproduce_line_keeps_runs_as_len_times_count(capsys, tmp_path):
    """``--seqlens '512*40000'`` was written back as 40,000 lengths (a 160 KB argument: 'Argument list too long');
    runs of equal sequences are ``LEN*COUNT`` now, quoted for the shell, and the line regenerates the same JSON."""
    import shlex

    from iomodel.spec.resolve import seqlens_text

    assert seqlens_text(((512, 512),) * 40000 + ((77, 4096),) * 2 + ((3, 3),)) == "512*40000,77:4096*2,3"
    assert seqlens_text(((8, 8),) * 2_500_000) == "8*1000000,8*1000000,8*500000"  # a run past one entry's bound
    code, out, err = run_cli(capsys, ["worksheet", "--seqlens", "512*400,77:4096,77:4096,3", "-f", "json"])
    assert code == 0, err
    first = json.loads(out)
    command = first["worksheet"]["command"]
    assert "--seqlens '512*400,77:4096*2,3'" in command
    code, again, err = run_cli(capsys, shlex.split(command)[1:] + ["-f", "json"])
    assert code == 0, err
    assert json.loads(again) == first


def test_a_ragged_length_past_the_models_range_names_the_ragged_flag(capsys, tmp_path):
    """It named --seqlen (the dense model's own line), which the user had not given."""
    assert_one_line_error(capsys, ["worksheet", "--seqlens", "512,99999999999"],
                          "--seqlens: a sequence of 99,999,999,999 tokens is above the largest the exact model "
                          "evaluates (16,777,216): give every length at most that")
    lens = tmp_path / "lens.txt"
    lens.write_text("512\n77,99999999999\n")
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(lens)], "--seqlens-file: a sequence of "
                          "99,999,999,999 tokens is above")
