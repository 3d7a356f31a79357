"""Registers per thread in the occupancy the worksheet assumes (``iomodel.schedule.registers``).

The register file's rule (65,536 registers an SM, allocated per warp in units of 256) is checked against every kernel
Nsight Compute measured in the committed receipts; the compiled table (``iomodel/data/registers-sm90.json``) against
the registers and occupancy limits those receipts measured for the bundled forward; the worksheet's HEAD_DIM 64 layer
of the rows hold-out (``receipts/ncu-h100-rows-holdout1-2026-12-07.json``), whose header assumed 3 programs an SM where
the kernel ran 2, against what the reconciliation predicts at the measured occupancy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iomodel.schedule.grid import estimate_programs_per_sm
from iomodel.schedule.registers import (compiled_registers, forward_key, group_class, programs_by_registers,
                                        registers_table)

ROOT = Path(__file__).resolve().parents[1]


def _receipt_kernels():
    """(receipt, shape, kernel metrics) of every kernel with registers, block size and a register limit recorded."""
    for path in sorted((ROOT / "receipts").glob("ncu-*.json")):
        data = json.loads(path.read_text())
        for s in data.get("shapes", []):
            for k in s.get("kernels", []):
                m = k.get("metrics", {})
                if all(m.get(x) is not None for x in ("launch__registers_per_thread", "launch__block_size",
                                                      "launch__occupancy_limit_registers")):
                    yield path.name, s, k["name"], m


def test_register_file_rule_by_hand():
    # 118 registers: 3,776 a warp, rounded to 3,840; 8 warps take 30,720 of 65,536
    assert programs_by_registers(118, 8) == 2
    assert programs_by_registers(168, 12) == 1  # 5,376 a warp x 12 = 64,512
    assert programs_by_registers(64, 4) == 8  # 2,048 x 4 = 8,192
    assert programs_by_registers(255, 4) == 2  # 8,160 rounds to 8,192 a warp
    assert programs_by_registers(249, 4) == 2 and programs_by_registers(250, 4) == 2  # 7,968 -> 8,192 both
    assert programs_by_registers(40, 1) == 51  # 1,280 a warp
    # shared memory alone would allow 3 (66,560 B each of 228 KiB), registers 2
    assert estimate_programs_per_sm(66_560, 8, 228 * 1024) == 3
    assert estimate_programs_per_sm(66_560, 8, 228 * 1024, registers=118) == 2
    assert estimate_programs_per_sm(66_560, 8, 228 * 1024, registers=64) == 3  # registers allow 4: not binding
    assert [group_class(g) for g in (1, 2, 4, 7, 8, 16, 32, 48)] == [1, 4, 4, 4, 4, 16, 16, 16]


def test_register_file_rule_equals_every_measured_limit():
    """Nsight Compute's ``launch__occupancy_limit_registers`` of every kernel in the receipts that records it (the
    bundled kernels, cuDNN, FlashAttention-2, cuBLAS ...): the rule gives the same count on each."""
    seen = 0
    for name, s, kernel, m in _receipt_kernels():
        warps = int(m["launch__block_size"]) // 32
        want = int(m["launch__occupancy_limit_registers"])
        got = min(programs_by_registers(int(m["launch__registers_per_thread"]), warps), 32)
        assert got == want, (name, s["id"], kernel)
        seen += 1
    assert seen == 696


def test_table_is_a_receipt():
    t = registers_table()
    assert t["kind"] == "compiled-registers" and t["environment"]["arch"] == "sm_90a"
    assert t["command"].startswith("python -m kernels.compile_check") and t["created"].startswith("2026-12-08")
    assert t["environment"]["triton"] == "triton 3.6.0" and t["environment"]["seqlen"] == 4096
    assert t["failed"] == {} and t["compiled"] == len(t["registers"]) == 744
    # the launch the rows hold-out's HEAD_DIM 64 run took: 118 registers, as ncu measured on the H100
    key = forward_key("prefill-tma", 64, "bf16", True, 1, 128, 64, 8, 3, False, True, False)
    assert compiled_registers((9, 0), key) == 118
    assert compiled_registers((8, 0), key) is None  # compiled for sm_90 only
    assert compiled_registers((9, 0), key.replace("128x64", "128x32")) is None


def _forward_key_of(s) -> str | None:
    cfg, spec = s["config"], s["spec"]
    if cfg.get("path") not in ("prefill", "prefill-tma") or cfg.get("heads_per_program", 1) != 1:
        return None
    if spec.get("window_left") is not None or spec.get("window_right") is not None or spec.get("phase") != "prefill":
        return None
    if cfg.get("grid_order", "tiles-fastest") != "tiles-fastest":
        return None
    return forward_key(cfg["path"], spec["head_dim"], spec["dtype"], spec["causal"], spec["heads"] // spec["kv_heads"],
                       cfg["block_m"], cfg["block_n"], cfg["num_warps"], cfg["num_stages"],
                       bool(cfg.get("warp_specialize")), cfg.get("tile_order") == "reverse", False)


def test_table_against_the_measured_forwards():
    """Every bundled TMA or pointer forward in the receipts whose launch the table holds: the programs per SM the
    table's registers allow equal the register limit ncu measured, on every one of the 96 runs (the registers
    themselves equal on 67: they differ by a few where the kernel has changed since, or Triton specialised a
    length)."""
    runs = same_regs = 0
    for name, s, kernel, m in _receipt_kernels():
        if kernel not in ("_attn_fwd", "_attn_fwd_tma"):
            continue
        key = _forward_key_of(s)
        regs = None if key is None else compiled_registers((9, 0), key)
        if regs is None:
            continue
        warps = int(m["launch__block_size"]) // 32
        assert programs_by_registers(regs, warps) == int(m["launch__occupancy_limit_registers"]), (name, s["id"])
        runs += 1
        same_regs += regs == int(m["launch__registers_per_thread"])
    assert (runs, same_regs) == (96, 67)  # as the receipts of 2026-12-08 hold


def test_worksheet_counts_registers_for_the_rows_holdout_d64_layer(reconciled_receipt):
    """The rows hold-out's HEAD_DIM 64 layer (H100, B 1, H 12, 180,224 tokens, causal, reverse): the worksheet now
    assumes the 2 programs a SM the kernel ran (it said 3), and its DRAM reads equal the reconciliation's prediction
    at the measured occupancy (the hold-out's bar)."""
    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.resolve import resolve_layer

    layer = resolve_layer(hardware="H100", batch=1, heads=12, kv_heads=12, head_dim=64, seqlen=180_224,
                          dtype="bf16", causal=True)
    ws = make_worksheet(layer, {"tile_order": "reverse"})
    l2 = ws.l2_aware
    assert l2.programs_per_sm == 2 and "118 registers a thread" in l2.programs_per_sm_source
    rec = reconciled_receipt("ncu-h100-rows-holdout1-2026-12-07.json")
    row = next(r for r in rec.rows if r.id.startswith("b1-h12-kv12-d64"))
    assert l2.read_bytes == row.level("HBM").predicted_read


def test_no_registers_off_sm90():
    """An A100 (compute capability 8.0): the table is sm_90's; the worksheet says registers are ignored."""
    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.resolve import resolve_layer

    layer = resolve_layer(hardware="A100-80GB", batch=1, heads=12, kv_heads=12, head_dim=64, seqlen=32_768,
                          dtype="bf16", causal=True)
    l2 = make_worksheet(layer).l2_aware
    assert "registers ignored" in l2.programs_per_sm_source
    assert l2.programs_per_sm == 2  # 164 KiB over a 64 KiB program: shared memory alone (registers unknown off sm_90)


def test_the_tile_order_run_is_the_one_looked_up():
    """A small causal grid runs the kernel's LPT launch (head-grouped, reverse tiles) where the candidate's own order is
    forward: its registers are the reverse compile's (182 a thread at HEAD_DIM 96, bf16, 128 x 64 tiles; the forward
    compile has 184: a reviewer found the forward one looked up). A non-causal layer given ``--tile-order reverse``,
    which the table compiles forward only, takes the forward compile and says so."""
    from iomodel.report.worksheet import l2_schedule
    from iomodel.spec.resolve import resolve_layer

    fwd = forward_key("prefill", 96, "bf16", True, 1, 128, 64, 8, 3, False, False, False)
    rev = forward_key("prefill", 96, "bf16", True, 1, 128, 64, 8, 3, False, True, False)
    assert (compiled_registers((9, 0), fwd), compiled_registers((9, 0), rev)) == (184, 182)
    causal = resolve_layer(hardware="H200", batch=1, heads=16, kv_heads=16, head_dim=96, seqlen=4096, dtype="bf16",
                           causal=True)
    sched, _ = l2_schedule(causal)
    assert (sched.tile_order, sched.grid_order) == ("reverse", "head-grouped:4")
    assert "and 182 registers a thread" in sched.programs_per_sm_source and sched.programs_per_sm == 1
    assert "the tiles-fastest grid's compile stands for the head-grouped:4 launch" in sched.programs_per_sm_source
    plain = causal.__class__(**{**causal.__dict__, "spec": causal.spec.with_(causal=False)})
    sched, _ = l2_schedule(plain, {"tile_order": "reverse"})
    assert "and 184 registers a thread" in sched.programs_per_sm_source and sched.programs_per_sm == 1
    assert "the forward tile order's compile: the table holds this launch in that order only" in \
        sched.programs_per_sm_source


def test_a_broken_table_is_one_error(monkeypatch, capsys, tmp_path):
    """A table of the wrong shape (a list, a count outside 1..255 or of another type, another architecture, no date)
    or a missing file: through ``iomodel worksheet``, one ``error:`` line naming the file and the whole command that
    remakes it, exit 2, nothing written (a fresh user found the command's path left out)."""
    import iomodel.schedule.registers as R
    from test_cli_errors import assert_one_line_error

    good = R.registers_table()
    for bad, said in (([], "it is not a JSON object"), ({**good, "registers": {"k": 0}}, "its count at 'k' is 0, not"),
                      ({**good, "registers": {"k": "118"}}, "its count at 'k' is '118', not a whole number"),
                      ({**good, "environment": {**good["environment"], "arch": "sm_100a"}}, "arch is not sm_90a"),
                      ({**good, "created": 5}, "no created date"), ({**good, "registers": {}}, "missing or empty")):
        assert R._table_refusal(bad) is not None and said in R._table_refusal(bad)
    assert R._table_refusal(good) is None
    argv = ["worksheet", "--hardware", "H100", "--heads", "12", "--kv-heads", "12", "--head-dim", "64", "--dtype",
            "bf16", "--causal", "--seqlen", "4096", "-o", str(tmp_path / "w.json")]
    table = tmp_path / "registers-sm90.json"

    class _Files:
        def joinpath(self, *parts):
            return table

    monkeypatch.setattr(R.resources, "files", lambda pkg: _Files())
    try:
        for text in (None, "[]", json.dumps({**good, "registers": {"k": 0}})):
            if text is not None:
                table.write_text(text)
            R.registers_table.cache_clear()
            assert_one_line_error(capsys, argv, "iomodel/data/registers-sm90.json",
                                  "python -m kernels.compile_check --registers-table iomodel/data/registers-sm90.json")
            assert not (tmp_path / "w.json").exists()
    finally:
        monkeypatch.undo()
        R.registers_table.cache_clear()


def test_warps_given_are_looked_up_with_them():
    """``--num-warps`` equal to the kernel's (8) keeps the registers' count (it had dropped it: 3 a SM again, a fresh
    user's finding); other warps look up their own launch, here none compiled (4 warps at 128 x 64), so shared memory
    and warps alone, said so; the Gluon prefill keeps its one program a SM at its own 20 warps only."""
    from iomodel.cache.estimate import launch_params
    from iomodel.report.worksheet import l2_schedule
    from iomodel.spec.resolve import resolve_layer

    d64 = resolve_layer(hardware="H100", batch=1, heads=12, kv_heads=12, head_dim=64, seqlen=180_224, dtype="bf16",
                        causal=True)
    for given in ({"tile_order": "reverse"}, {"tile_order": "reverse", "num_warps": 8}, {"num_warps": 8}):
        sched, _ = l2_schedule(d64, given)
        assert sched.programs_per_sm == 2 and "118 registers a thread" in sched.programs_per_sm_source, given
    sched, _ = l2_schedule(d64, {"num_warps": 4})
    assert sched.programs_per_sm is None  # estimated: shared memory and warps, registers ignored
    assert launch_params(d64.spec, d64.tiling, d64.hardware, 4).programs_per_sm == 3
    gluon = resolve_layer(hardware="H200", batch=4, heads=16, kv_heads=16, head_dim=64, seqlen=4096, dtype="fp16",
                          causal=False)
    assert l2_schedule(gluon, {"num_warps": 20})[0].programs_per_sm == 1
    assert l2_schedule(gluon, {"num_warps": 8})[0].programs_per_sm is None


@pytest.mark.slow
def test_table_equals_fresh_compiles():
    """Three of the table's launches compiled again on this machine (Triton 3.6's ptxas, sm_90): the same registers
    (a kernel change that moves them must regenerate the table: ``python -m kernels.compile_check
    --registers-table iomodel/data/registers-sm90.json``)."""
    pytest.importorskip("triton.backends.nvidia.driver")
    import triton

    from test_kernel_compile import _compiled

    if triton.__version__ != "3.6.0":
        pytest.skip(f"the table was compiled by triton 3.6.0, this is {triton.__version__}")
    got = _compiled("import json; from kernels import compile_check as cc; d = cc._install_fake_driver(90); "
                    "r = [cc.compile_prefill('prefill-tma', 64, 'bf16', True, 128, 64, 8, 3, reverse=True).registers, "
                    "cc.compile_prefill('prefill-tma', 128, 'fp16', False, 64, 64, 4, 3, group=4).registers, "
                    "cc.compile_prefill('prefill', 96, 'bf16', True, 128, 64, 8, 3, window=True).registers]; "
                    "print(json.dumps(r))")
    keys = [forward_key("prefill-tma", 64, "bf16", True, 1, 128, 64, 8, 3, False, True, False),
            forward_key("prefill-tma", 128, "fp16", False, 4, 64, 64, 4, 3, False, False, False),
            forward_key("prefill", 96, "bf16", True, 1, 128, 64, 8, 3, False, False, True)]
    assert got == [compiled_registers((9, 0), k) for k in keys]
