"""A fresh user's findings of 2026-12-06 (sixth probe), each a misleading line or a silently different model.

The reconcile findings (a dropped spec field read with its default) are in ``tests/test_reconcile_integrity.py`` and
the fp8 eager chain in ``tests/test_baseline.py``.
"""

from __future__ import annotations

import json

import pytest

from test_cli_errors import assert_one_line_error, run_cli


@pytest.mark.parametrize("argv, needle", [
    (["worksheet", "--seqlen-k", "0"], "seqlen_k must be a positive integer, got 0: set --seqlen-k to 1 or more"),
    (["worksheet", "--seqlen-q", "-4"], "seqlen_q must be a positive integer, got -4: set --seqlen-q to 1 or more"),
])
def test_a_bad_length_names_the_flag_given(capsys, argv, needle):
    """``--seqlen-k 0`` said "seqlen_q must be a positive integer ... set --seqlen-q", a flag the user had not given
    (in prefill one length given alone sets both, which the help now says)."""
    assert_one_line_error(capsys, argv, needle)


def test_one_length_alone_sets_both_in_prefill_and_the_help_says_so(capsys):
    code, out, _ = run_cli(capsys, ["worksheet", "--seqlen-k", "100", "--format", "json"])
    spec = json.loads(out)["spec"]
    assert code == 0 and (spec["seqlen_q"], spec["seqlen_k"]) == (100, 100)
    code, out, _ = run_cli(capsys, ["worksheet", "--help"])
    flat = " ".join(out.replace("│", " ").split())
    assert "given alone, seqlen_q equals it" in flat and "given alone, seqlen_k equals it" in flat


@pytest.mark.parametrize("tiles, path, warps", [
    (["--block-m", "64"], "prefill-tma", 8),  # not the Gluon prefill's one configuration: the launcher refuses it there
    (["--block-m", "256", "--block-n", "16"], "prefill-tma", 8),
    (["--num-stages", "3"], "prefill-tma", 8),
    (["--block-m", "128", "--block-n", "128"], "prefill-gluon", 12),  # GLUON_TILES at HEAD_DIM 128: still Gluon's
    ([], "prefill-gluon", 12),
])
def test_explicit_tiles_off_the_gluon_configuration_are_modelled_on_the_tma_prefill(capsys, tiles, path, warps):
    """Llama-3-8B (HEAD_DIM 128) on the H200: the launcher runs prefill-gluon by default, with one configuration
    (128 x 128, 2 stages, 12 warps, one program per SM). Other tiles were labelled as that path and their L2 estimate
    took its 12 warps; the kernel refuses them there and runs them with path='prefill-tma' (8 warps at HEAD_DIM 128)."""
    code, out, _ = run_cli(capsys, ["worksheet", "--seqlen", "4096", "--format", "json", *tiles])
    assert code == 0
    data = json.loads(out)
    assert f"prefill_default for the {path} path" in data["worksheet"]["tiling_source"]
    l2 = data["algorithms"]["tiled"]["l2_aware"]
    assert l2["num_warps"] == l2["schedule"]["num_warps"] == warps
    assert l2["config_source"].startswith(f"kernels/heuristics.py prefill_default, {path} path")


@pytest.mark.parametrize("text, needle", [
    # the README's [schedule] form beside a top-level field: "unknown key(s) schedule" before
    ('grid_order = "heads-fastest"\n[schedule]\nkey_order = "descending"\n',
     "gives fields both at the top level (grid_order) and in a [schedule] table: put them all in one of the two"),
    # a bad value in the file said "set --block-m"
    ("block_m = 0\n", "block_m must be a positive whole number, got 0: fix that value in the file"),
    ('tile_order = "sideways"\n', "tile order 'sideways' is unknown: use tile_order = forward or reverse"),
    ("[schedule]\nnum_warps = 0\n", "num_warps must be a positive whole number, got 0: fix that value in the file"),
])
def test_a_schedule_file_error_points_at_the_file(capsys, tmp_path, text, needle):
    path = tmp_path / "s.toml"
    path.write_text(text)
    line = assert_one_line_error(capsys, ["worksheet", "--schedule", str(path)], needle)
    assert "set --" not in line


def test_the_readme_names_every_formula_symbol():
    """The README's JSON key table listed the forward symbols only; every fwd+bwd formula also holds BWD_BLOCK_M,
    BWD_BLOCK_N, DQ_BLOCK_M, DQ_BLOCK_N and BWD_SPLITS. Every symbol in a formula of a forward, a training step, a
    decode and a GQA causal layer (all algorithms' rows) is named there."""
    from pathlib import Path

    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import get_hardware
    from iomodel.traffic.model import predict

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if "formulas are sympy expressions in" in ln]
    named = line.split("formulas are sympy expressions in", 1)[1]
    hw, free = get_hardware("H200"), set()
    for spec in (LayerSpec(1, 4, 4, 64, 256, 256), LayerSpec(2, 8, 2, 64, 300, 500, causal=True, backward=True),
                 LayerSpec(2, 8, 2, 64, 1, 4096, causal=True, causal_align="bottom-right", phase="decode")):
        tiling = (Tiling(block_m=16, block_n=64, num_splits=4) if spec.phase == "decode"
                  else Tiling(bwd_group_splits=2) if spec.backward else Tiling())
        for alg in predict(spec, tiling, hw).algorithms.values():
            for r in alg.rows:
                free |= {str(x) for e in (r.read_expr, r.write_expr) for x in getattr(e, "free_symbols", ())}
    assert {"BWD_BLOCK_M", "BWD_SPLITS", "splits", "s"} <= free
    assert sorted(sym for sym in free if f" {sym}," not in named and f" {sym} " not in named) == []


@pytest.mark.parametrize("drop, needle", [
    (lambda r: r.pop("policy"), "has no 'policy' field"),
    (lambda r: r["policy"].pop("version"), "policy has no 'version' field"),
])
def test_a_bench_receipt_without_its_policy_is_bad_input_not_a_violation(capsys, tmp_path, drop, needle):
    """``bench --check`` on a receipt without ``policy`` exited 1 (a policy violation) naming 'policy-v-1.toml';
    the receipt is damaged: one line, exit 2."""
    from pathlib import Path

    receipt = json.loads((Path(__file__).resolve().parents[1] / "receipts" / "bench-cpu.json").read_text())
    drop(receipt)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(receipt))
    assert_one_line_error(capsys, ["bench", "--check", str(path)], needle)


@pytest.mark.parametrize("argv, needle", [
    (["worksheet", "-o", ""], "the output file path is empty: pass a file path with -o"),  # was "path  is a folder"
    (["worksheet", "-o", "{tmp}"], "is a folder: pass a file path in it with -o"),  # suggested out.json for a .md
])
def test_an_empty_or_folder_output_path_says_what_it_is(capsys, tmp_path, argv, needle):
    assert_one_line_error(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], needle)


def test_a_non_causal_window_names_its_alignment_where_it_moves_the_band():
    """Without a causal mask the alignment still offsets a window's band when seqlen_q != seqlen_k (the tiled model
    reads 20,971,520 B top-left and 38,666,240 B bottom-right for B 1, H 8, d 64, q 1024, k 4096, window (1024, 64):
    a reviewer's numbers), so the two are two shapes with two ids; with equal lengths the ids stay as committed."""
    from iomodel.measure.records import shape_id
    from iomodel.spec import LayerSpec

    def sid(align, q=1024, k=4096):
        return shape_id(LayerSpec(1, 8, 8, 64, q, k, causal=False, causal_align=align, window_left=1024,
                                  window_right=64), "tiled")

    assert (sid("top-left"), sid("bottom-right")) == ("b1-h8-kv8-d64-bf16-q1024-k4096-nc-tl-w1024_64-tiled",
                                                      "b1-h8-kv8-d64-bf16-q1024-k4096-nc-br-w1024_64-tiled")
    assert sid("top-left", 4096) == sid("bottom-right", 4096) == "b1-h8-kv8-d64-bf16-q4096-k4096-nc-w1024_64-tiled"
