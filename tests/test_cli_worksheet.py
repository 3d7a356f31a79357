"""``iomodel worksheet`` and ``iomodel plot`` through the CLI, including the README's quick start."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from test_cli_errors import run_cli
from iomodel.report.worksheet import BUNDLED_CASES, bundled_layer, make_worksheet
from iomodel.spec.resolve import resolve_layer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_default_markdown(capsys):
    code, out, err = run_cli(capsys, ["worksheet"])
    assert code == 0, err
    assert out.startswith("# HBM traffic worksheet: llama-3-8b, prefill fwd, 8k tokens, bf16, causal top-left, H200")
    assert "B = 1, H = 32, H_kv = 8 (GQA group 4), HEAD_DIM = 128" in out
    assert "## `baseline`" in out and "## `tiled`" in out and "## Units check" in out


def test_json_output_file(capsys, tmp_path):
    path = tmp_path / "w.json"
    code, out, err = run_cli(capsys, ["worksheet", "--preset", "qwen2.5-7b", "--seqlen", "1024", "-o", str(path)])
    assert code == 0 and out == "" and f"wrote {path}" in err
    d = json.loads(path.read_text())
    want = make_worksheet(resolve_layer(preset="qwen2.5-7b", seqlen=1024)).to_dict()
    assert d == want
    # Qwen2.5-7B: 28 heads, 4 KV heads, hidden 3584 -> HEAD_DIM 128
    assert (d["spec"]["heads"], d["spec"]["kv_heads"], d["spec"]["head_dim"]) == (28, 4, 128)


def test_csv_to_stdout(capsys):
    code, out, _ = run_cli(capsys, ["worksheet", "--seqlen", "512", "--format", "csv"])
    assert code == 0
    assert out.startswith("# layer: llama-3-8b")
    assert "algorithm,kind,tensor,step,level,shape,dtype,width_bytes" in out


@pytest.mark.parametrize("case", [BUNDLED_CASES[0], BUNDLED_CASES[3]], ids=lambda c: c.name)
def test_reproduce_command_round_trip(capsys, case):
    """The command printed in a worksheet regenerates exactly that worksheet."""
    ws = make_worksheet(bundled_layer("llama-3-70b", case))
    argv = shlex.split(ws.layer.command())
    assert argv[0:2] == ["iomodel", "worksheet"]
    code, out, err = run_cli(capsys, [*argv[1:], "--format", "json"])
    assert code == 0, err
    assert out == ws.to_json()


@pytest.mark.parametrize("argv", [
    # a window without a causal mask: its offset is the alignment's (a reviewer found it dropped: 21,078,272 B
    # tiled by the layer, 19,734,784 by its printed command)
    ["--heads", "16", "--kv-heads", "4", "--head-dim", "64", "--dtype", "fp16", "--seqlen-q", "900", "--seqlen-k",
     "2500", "--no-causal", "--window", "300,77", "--causal-align", "bottom-right"],
    ["--heads", "16", "--kv-heads", "4", "--head-dim", "64", "--dtype", "fp16", "--phase", "decode", "--seqlen",
     "3000", "--seqlen-q", "8", "--window", "500,10", "--no-causal", "--causal-align", "top-left"],
    ["--heads", "16", "--kv-heads", "4", "--head-dim", "64", "--dtype", "fp16", "--seqlens", "900,300:2500",
     "--no-causal", "--window", "300,77", "--causal-align", "bottom-right"],
    # tile flags repeat as given (all three tiles pinned reworded the tiles' source line)
    ["--block-m", "64"],
    ["--phase", "decode", "--num-splits", "3"],
], ids=["prefill", "decode", "ragged", "block-m", "num-splits"])
def test_reproduce_command_keeps_a_windows_alignment_without_a_causal_mask(capsys, argv):
    code, first, err = run_cli(capsys, ["worksheet", *argv, "--format", "json"])
    assert code == 0, err
    command = json.loads(first)["command"] if "command" in json.loads(first) else None
    code, md, err = run_cli(capsys, ["worksheet", *argv])
    line = next(x for x in md.splitlines() if x.startswith("Reproduce: `"))
    again = shlex.split(line[len("Reproduce: `"):-1])
    assert command is None or shlex.split(command) == again
    code, second, err = run_cli(capsys, [*again[1:], "--format", "json"])
    assert code == 0, err
    assert second == first


def test_plot_command(capsys, tmp_path):
    code, out, err = run_cli(capsys, ["plot", "--seqlen", "1024", "--kind", "seqlen", "--kind", "blocks",
                                      "-o", str(tmp_path)])
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bytes_vs_blocks.png", "bytes_vs_seqlen.png"]
    meas = tmp_path / "m.json"
    meas.write_text(json.dumps({"seqlen": [{"seqlen": 1024, "bytes": 3e8, "label": "ncu", "level": "HBM"}]}))
    code, out, err = run_cli(capsys, ["plot", "--seqlen", "1024", "--kind", "seqlen", "--measured", str(meas),
                                      "-o", str(tmp_path / "m")])
    assert code == 0, err
    assert (tmp_path / "m" / "bytes_vs_seqlen.png").read_bytes()[:8] == PNG_MAGIC


def test_regenerate_bundled_into_a_folder(capsys, tmp_path, monkeypatch):
    import iomodel.report.worksheet as W

    monkeypatch.setattr(W, "WORKSHEETS_DIR", tmp_path)
    code, out, err = run_cli(capsys, ["worksheet", "--regenerate-bundled"])
    assert code == 0, err
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert "README.md" in written and "llama-3-8b/prefill-8k.md" in written and "qwen2.5-7b/decode-128k.json" in written
    # md + json per preset and case, the index, and the Fig. 2 layer (md + json on two GPUs, its README)
    assert len(written) == 2 * 5 * len(BUNDLED_CASES) + 1 + 5 and "fig2/README.md" in written


def test_readme_quick_start(tmp_path):
    """The README's first command on its own process: prints a worksheet for a real layer and writes the plots."""
    proc = subprocess.run([sys.executable, "-m", "iomodel.cli", "worksheet", "--preset", "llama-3-8b",
                           "--plot-dir", "plots"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# HBM traffic worksheet: llama-3-8b")
    assert "Traceback" not in proc.stderr
    pngs = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert pngs == ["bytes_vs_blocks.png", "bytes_vs_seqlen.png", "bytes_vs_sram.png"]
    for name in pngs:
        assert (tmp_path / "plots" / name).read_bytes()[:8] == PNG_MAGIC


def test_the_title_names_the_config_fields_flags_replaced(capsys):
    """A preset with its heads and HEAD_DIM replaced by flags is no longer that model: the title says which fields
    came from flags (a fresh user read "llama-3-8b" above a 16-head HEAD_DIM 64 layer); a flag equal to the
    config's value replaces nothing."""
    code, out, _ = run_cli(capsys, ["worksheet", "--head-dim", "64", "--heads", "16", "--kv-heads", "16",
                                    "--seqlen", "4096", "--no-causal"])
    assert code == 0
    assert out.startswith("# HBM traffic worksheet: llama-3-8b with heads, kv_heads, head_dim from flags, prefill fwd, "
                          "4k tokens, bf16, no mask, H200")
    code, out, _ = run_cli(capsys, ["worksheet", "--heads", "32"])
    assert code == 0 and out.startswith("# HBM traffic worksheet: llama-3-8b, prefill fwd, 8k tokens")
    code, out, _ = run_cli(capsys, ["worksheet", "--seqlens", "512,3000", "--kv-heads", "4"])
    assert code == 0 and out.startswith("# HBM traffic worksheet: llama-3-8b with kv_heads from flags, ragged batch of 2")
