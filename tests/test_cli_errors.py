"""Bad input through the CLI: one line saying what to change, exit status 2, no traceback (issue item 7)."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

from iomodel.cli import main


def run_cli(capsys, argv):
    """Run ``iomodel <argv>`` in-process through the console-script entry point; (code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def assert_one_line_error(capsys, argv, *needles):
    code, out, err = run_cli(capsys, argv)
    assert code == 2, (argv, code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err + out
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("cmd", ["worksheet", "plot"])
@pytest.mark.parametrize(
    "args, needles",
    [
        (["--batch", "0"], ["batch", "--batch"]),
        (["--batch", "-3"], ["batch", "--batch"]),
        (["--heads", "0"], ["heads", "--heads"]),
        (["--head-dim", "-64"], ["head_dim", "--head-dim"]),
        (["--seqlen", "0"], ["seqlen must be a positive integer", "--seqlen to 1"]),
        (["--seqlen-q", "1024", "--seqlen-k", "-1"], ["seqlen_k", "--seqlen-k"]),
        (["--heads", "32", "--kv-heads", "5"], ["divisible", "--kv-heads"]),
        (["--heads", "10", "--kv-heads", "4", "--head-dim", "64", "--dtype", "fp16"], ["divisible"]),
        (["--dtype", "fp64"], ["unsupported dtype 'fp64'", "bf16"]),
        (["--preset", "llama-9"], ["unknown preset 'llama-9'", "llama-3-8b"]),
        (["--block-m", "100"], ["BLOCK_M must be a power of two", "64 or 128"]),
        (["--block-n", "48"], ["BLOCK_N must be a power of two", "32 or 64"]),
        (["--block-m", "0"], ["block_m", "--block-m"]),
        (["--block-m", "256", "--block-n", "256"], ["shared memory", "HEAD_DIM=128", "lower --block-m"]),
        (["--preset", "gpt2-medium", "--block-m", "256", "--block-n", "128", "--num-stages", "3"], ["HEAD_DIM=64 fp32"]),
        (["--hardware", "TPU"], ["unknown hardware 'TPU'", "H200"]),
        (["--phase", "training"], ["phase 'training'", "--phase prefill"]),
        (["--pass", "bwd"], ["pass 'bwd'", "fwd+bwd"]),
        (["--causal-align", "middle"], ["causal alignment 'middle'", "bottom-right"]),
        (["--phase", "decode", "--seqlen-q", "64"], ["1 to 16 query rows", "--phase prefill"]),
        (["--phase", "decode", "--pass", "fwd+bwd"], ["decode has no backward pass"]),
        (["--num-splits", "4"], ["--num-splits applies to decode only"]),
        (["--seqlen", "1024", "--seqlen-q", "512"], ["either --seqlen or --seqlen-q"]),
        (["--preset", "llama-3-8b", "--config", "x.json"], ["either --preset or --config"]),
    ],
)
def test_bad_layer_options(capsys, cmd, args, needles):
    assert_one_line_error(capsys, [cmd, *args], *needles)


@pytest.mark.parametrize(
    "content, needles",
    [
        ("{not json", ["is not valid JSON", "fix the file"]),
        ("[1, 2]", ["must hold a JSON object"]),
        (json.dumps({"hidden_size": 4096, "torch_dtype": "bfloat16"}), ["num_attention_heads", "add it"]),
        (json.dumps({"num_attention_heads": 32, "torch_dtype": "bfloat16"}), ["head_dim", "hidden_size"]),
        (json.dumps({"num_attention_heads": 30, "hidden_size": 4096, "torch_dtype": "bf16"}), ["not divisible"]),
        (json.dumps({"num_attention_heads": 32, "num_key_value_heads": 6, "hidden_size": 4096,
                     "torch_dtype": "bfloat16"}), ["not divisible by num_key_value_heads"]),
        (json.dumps({"num_attention_heads": 32, "hidden_size": 4096}), ["torch_dtype", "--dtype"]),
        (json.dumps({"num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "int8"}), ["unsupported dtype"]),
        # a sliding window is modelled (tests/test_window.py); chunked attention is still refused
        (json.dumps({"num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "bfloat16",
                     "attention_chunk_size": 4096}), ["chunked"]),
        (json.dumps({"num_attention_heads": -8, "hidden_size": 4096, "torch_dtype": "bfloat16"}),
         ["positive integer"]),
    ],
)
def test_malformed_config(capsys, tmp_path, content, needles):
    cfg = tmp_path / "config.json"
    cfg.write_text(content)
    assert_one_line_error(capsys, ["worksheet", "--config", str(cfg)], *needles)


def test_missing_config_file(capsys, tmp_path):
    assert_one_line_error(capsys, ["worksheet", "--config", str(tmp_path / "nope.json")], "does not exist")


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--format", "xml"], ["format 'xml' is unknown", "md, json or csv"]),
        (["-o", "out.txt"], ["cannot tell the format", "--format"]),
    ],
)
def test_bad_worksheet_output(capsys, tmp_path, args, needles):
    args = [a if a != "out.txt" else str(tmp_path / "out.txt") for a in args]
    assert_one_line_error(capsys, ["worksheet", *args], *needles)


def test_bad_plot_options(capsys, tmp_path):
    assert_one_line_error(capsys, ["plot", "--phase", "decode", "--kind", "sram", "-o", str(tmp_path)],
                          "prefill schedules")
    assert_one_line_error(capsys, ["plot", "--kind", "roofline", "-o", str(tmp_path)], "unknown plot kind")
    bad = tmp_path / "measured.json"
    bad.write_text("{oops")
    assert_one_line_error(capsys, ["plot", "--measured", str(bad), "-o", str(tmp_path)], "not valid JSON")
    bad.write_text(json.dumps({"seqlen": [{"bytes": 5}]}))
    assert_one_line_error(capsys, ["plot", "--kind", "seqlen", "--measured", str(bad), "-o", str(tmp_path)],
                          "measured point 0", "'seqlen'")


def _registered_commands():
    from iomodel.cli import app

    return sorted(c.name or c.callback.__name__ for c in app.registered_commands)


def test_every_command_is_registered():
    """The CLI imports each command module plainly, so all of them are there (none skipped quietly)."""
    assert _registered_commands() == ["bench", "plot", "presets", "reconcile", "validate",
                                      "worksheet"]


@pytest.mark.parametrize("cmd", [[]] + [[c] for c in _registered_commands()], ids=lambda c: " ".join(c) or "iomodel")
def test_help(capsys, cmd):
    """Every registered command answers --help (exit 0, its usage line)."""
    code, out, err = run_cli(capsys, [*cmd, "--help"])
    assert code == 0, err
    assert "Usage: iomodel" in out and "Traceback" not in out + err
    if cmd in (["worksheet"], ["plot"]):
        for flag in ("--preset", "--config", "--batch", "--heads", "--kv-heads", "--head-dim", "--seqlen-q",
                     "--seqlen-k", "--dtype", "--causal", "--causal-align", "--block-m", "--block-n", "--pass",
                     "--hardware", "--phase", "--num-splits"):
            assert flag in out, flag
    if cmd == ["worksheet"]:
        for flag in ("--format", "--output", "--plot-dir", "--regenerate-bundled"):
            assert flag in out, flag


def test_console_script_bad_input_subprocess():
    """The installed entry point itself (not only main()): exit 2, one line, no traceback."""
    proc = subprocess.run([sys.executable, "-c", "from iomodel.cli import main; main()", "worksheet",
                           "--heads", "32", "--kv-heads", "5"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "divisible" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["--seqlen", "99999999999"], ["--seqlen", str(2**24 + 1), "--no-causal"],
                                  ["--phase", "decode", "--seqlen", "99999999999"]])
def test_worksheet_seqlen_too_long_for_exact_sums(capsys, args):
    """Above 2^24 rows (where the model's tests and the worksheet's L2-aware estimate stop) the
    CLI refuses at once (one line, exit 2)."""
    from iomodel.traffic.model import PREDICT_MAX_SEQLEN

    assert PREDICT_MAX_SEQLEN == 16_777_216
    line = assert_one_line_error(capsys, ["worksheet", *args], "16,777,216", "seqlen of at most")
    assert f"seqlen {int(args[args.index('--seqlen') + 1]):,}" in line


def test_predict_accepts_the_largest_seqlen_without_the_loop_cost():
    """Exactly 2^24 is accepted; the guard is strict '>'."""
    from iomodel.spec.hardware import get_hardware
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.traffic.model import predict

    n = 2**24
    spec = LayerSpec(batch=1, heads=2, kv_heads=2, head_dim=64, seqlen_q=n, seqlen_k=n, dtype="bf16",
                     causal=False)
    p = predict(spec, Tiling(block_m=64, block_n=64), get_hardware("H200"))
    assert p.compulsory_bytes == 4 * 2 * n * 64 * 2  # read Q, K, V and write O once, bf16


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["worksheet"], ["presets"]])
def test_stdout_on_a_full_device_is_one_line(args):
    """Issue 10: standard output on a full device gave an OSError traceback."""
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "iomodel.cli", *args], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: cannot write the output (No space left on device): write it to a file with -o, or to a device with space"]


@pytest.mark.parametrize("argv, needles", [
    (["worksheet", "--batch", "1.5"], ["Invalid value for '--batch'", "valid integer", "'iomodel worksheet --help'"]),
    (["worksheet", "--programs-per-sm", "nan"], ["Invalid value for '--programs-per-sm'", "iomodel worksheet --help"]),
    (["plot", "--nosuch"], ["No such option: --nosuch", "'iomodel plot --help'"]),
    (["nosuchcmd"], ["No such command 'nosuchcmd'", "'iomodel --help'"]),
    (["reconcile"], ["Missing argument", "'iomodel reconcile --help'"]),
])
def test_typer_usage_errors_are_one_line(capsys, argv, needles):
    """Usage errors that typer itself finds (a float where an integer goes, an unknown option or
    command, a missing argument) are one line naming the option and the command's --help, exit 2,
    not typer's six-line box."""
    assert_one_line_error(capsys, argv, *needles)


def test_bare_iomodel_prints_the_help_and_no_empty_error(capsys):
    """``iomodel`` alone prints the help (typer's no_args_is_help) and exits 2, with no error line."""
    code, out, err = run_cli(capsys, [])
    assert code == 2 and "Usage: iomodel" in out and "error:" not in err


def test_a_command_exit_status_survives_the_entry_point(capsys, monkeypatch):
    """typer.Exit(1) of a command (the worksheet's failed units check, a model defect) still exits
    1 through the entry point, and a normal run exits 0."""
    import iomodel.report.worksheet as W

    assert run_cli(capsys, ["presets"])[0] == 0
    monkeypatch.setattr(W.Worksheet, "units_ok", property(lambda self: False))
    code, _, err = run_cli(capsys, ["worksheet"])
    assert code == 1 and "do not reduce to bytes" in err


@pytest.mark.parametrize("argv, needles", [
    (["worksheet", "--batch", "1.5", "--batch", "2"], ["option --batch is given more than once: give it once",
                                                      "'iomodel worksheet --help'"]),
    (["worksheet", "--batch=2", "--seqlen", "4", "--batch", "3"], ["option --batch is given more than once"]),
    (["worksheet", "-o", "a.md", "--output", "b.md"], ["option --output/-o is given more than once"]),
    (["worksheet", "-oa.md", "-o", "b.md"], ["option --output/-o is given more than once"]),  # attached value
    (["worksheet", "--causal", "--no-causal"], ["option --causal/--no-causal is given more than once"]),
])
def test_a_single_valued_option_given_twice_is_one_line(capsys, argv, needles):
    """typer keeps the last of a repeated option, so ``--batch 1.5 --batch 2`` ran at batch 2 and never said 1.5 was
    bad (a reviewer, 2026-12-05): the entry point refuses the repetition before typer parses."""
    assert_one_line_error(capsys, argv, *needles)


def test_a_repeatable_option_may_repeat(capsys, tmp_path):
    """``plot --kind`` takes several values: given twice it runs; a value that looks like an option is a value
    (``--config --batch``: the config path), and ``--help`` prints the help even after a repetition."""
    code, out, _ = run_cli(capsys, ["worksheet", "--batch", "1", "--batch", "2", "--help"])
    assert code == 0 and "Usage" in out
    code, _, err = run_cli(capsys, ["worksheet", "--config", "--batch", "--batch", "2"])
    assert code == 2 and "given more than once" not in err and "--batch" in err
    code, _, err = run_cli(capsys, ["plot", "--kind", "seqlen", "--kind", "blocks", "-o", str(tmp_path)])
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bytes_vs_blocks.png", "bytes_vs_seqlen.png"]


@pytest.mark.parametrize("argv, option", [
    (["worksheet", "-o", "{d}/new/"], "-o"),
    (["worksheet", "--format", "json", "-o", "{d}/new/"], "-o"),
    (["bench", "--device", "cpu", "-o", "{d}/new/"], "-o"),
    (["bench", "--device", "cpu", "-o", "{d}/r.json", "--markdown", "{d}/new/"], "--markdown"),
    (["validate", str(Path(__file__).resolve().parents[1] / "sweeps/h200-train-holdout9.toml"), "--interpreter", "-o", "{d}/new/"], "--out"),
    (["reconcile", str(Path(__file__).resolve().parents[1] / "receipts/ncu-h100-gluon64-holdout1-2026-12-05.json"),
      "--json", "{d}/new/"], "--json"),
    (["reconcile", str(Path(__file__).resolve().parents[1] / "receipts/ncu-h100-gluon64-holdout1-2026-12-05.json"),
      "--markdown", "{d}/new/"], "--markdown"),
])
def test_an_output_path_ending_in_a_slash_is_a_folder_not_a_file(tmp_path, capsys, argv, option):
    """``-o dir/`` names a folder even where none exists: refused, and no file named ``dir`` is written (typer's Path
    dropped the slash, and the worksheet wrote a file called ``new``)."""
    argv = [a.format(d=tmp_path) for a in argv]
    assert_one_line_error(capsys, argv, "is a folder", option)
    assert not (tmp_path / "new").exists()


def test_an_output_that_cannot_be_written_leaves_no_plots_and_a_bad_schedule_table_is_one_line(capsys, tmp_path):
    """A fresh user's findings (2026-12-07): ``-o /dev/full --format json --plot-dir D`` wrote the three plots, said so,
    then failed on the worksheet, leaving them; ``schedule = 3`` in a schedule file was a traceback."""
    import os

    if os.path.exists("/dev/full"):
        code, out, err = run_cli(capsys, ["worksheet", "-o", "/dev/full", "--format", "json",
                                          "--plot-dir", str(tmp_path / "new" / "plots")])
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: cannot write /dev/full")
        assert not (tmp_path / "new").exists()
    bad = tmp_path / "s.toml"
    bad.write_text("schedule = 3\n")
    code, out, err = run_cli(capsys, ["worksheet", "--schedule", str(bad)])
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert "schedule must be a [schedule] table of fields, got 3" in err
