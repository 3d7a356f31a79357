"""Nsight Compute layer without a GPU: sweep files, ncu commands, raw-CSV parsing, the batch
driver against a fake ncu, and the messages of a machine without ncu or GPU."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure import child, driver, ncu
from iomodel.measure.sweep import load_sweep, parse_sweep
from iomodel.measure.records import KernelRecord, Measurement, ShapeMeasurement, shape_id
from iomodel.spec import LayerSpec

ROOT = Path(__file__).resolve().parent.parent
NVTX_COL = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def fake_csv(kernels: list[tuple[str | None, str, dict[str, str]]], units: dict[str, str]) -> str:
    """A raw-page ncu CSV: ==PROF== lines, header, units row, one row per kernel.

    kernels: (shape tag or None, kernel name, metric -> printed value).
    """
    metrics = list(units)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Process ID", "Process Name", "Host Name", NVTX_COL, "Kernel Name", "Context", "Stream",
                "Block Size", "Grid Size", "Device", "CC", *metrics])
    w.writerow([""] * 12 + [units[m] for m in metrics])
    for i, (tag, name, vals) in enumerate(kernels):
        nvtx = f'1  "<default domain>:{ncu.NVTX_PREFIX}{tag}@:none:none:none:none:none:none"' if tag else ""
        w.writerow([str(i), "4242", "python", "gpu", nvtx, name, "1", "7", "(256, 1, 1)", "(8, 64, 1)", "0", "9.0",
                    *[vals.get(m, "n/a") for m in metrics]])
    return "==PROF== Connected to process 4242\n==PROF== Profiling \"_attn_fwd\": 0%....100% - 6 passes\n" + buf.getvalue()


UNITS = {
    "dram__bytes_read.sum": "byte",
    "dram__bytes_write.sum": "byte",
    "lts__t_sectors_srcunit_tex_op_read.sum": "sector",
    "lts__t_sectors_srcunit_tex_op_write.sum": "sector",
    "lts__t_bytes.sum": "Mbyte",
    "gpu__time_duration.sum": "usecond",
    "launch__occupancy_limit_registers": "block",
    "launch__occupancy_limit_shared_mem": "block",
}


def test_parse_csv_units_separators_tags_and_na():
    text = fake_csv([
        ("s1", "_attn_decode", {"dram__bytes_read.sum": "1,048,576", "dram__bytes_write.sum": "2048",
                                "lts__t_sectors_srcunit_tex_op_read.sum": "40,000",
                                "lts__t_sectors_srcunit_tex_op_write.sum": "10",
                                "lts__t_bytes.sum": "3.5", "gpu__time_duration.sum": "12.5",
                                "launch__occupancy_limit_registers": "2", "launch__occupancy_limit_shared_mem": "3"}),
        ("s1", "_attn_decode_combine", {"dram__bytes_read.sum": "100", "dram__bytes_write.sum": "n/a"}),
        (None, "stray_kernel", {"dram__bytes_read.sum": "7"}),
    ], UNITS)
    rows = ncu.parse_csv(text, list(UNITS))
    assert [r.tag for r in rows] == ["s1", "s1", None]
    k = rows[0].record
    assert k.name == "_attn_decode" and k.grid == "(8, 64, 1)"
    assert k.quantity("dram_read_bytes") == 1_048_576
    assert k.quantity("l2_read_bytes") == 40_000 * 32  # sectors of 32 bytes
    assert k.quantity("l2_total_bytes") == 3.5e6  # Mbyte is decimal in ncu's output
    assert k.quantity("duration_s") == pytest.approx(12.5e-6)
    assert k.programs_per_sm() == 2
    assert rows[1].record.quantity("dram_write_bytes") is None  # n/a
    m = ShapeMeasurement("s1", "tiled", LayerSpec(1, 1, 1, 16, 1, 8, "fp16", phase="decode"),
                         kernels=[r.record for r in rows[:2]])
    assert m.quantity("dram_read_bytes") == 1_048_676
    assert m.quantity("dram_write_bytes") is None  # one kernel unmeasured: no total


def test_parse_csv_without_table_raises():
    with pytest.raises(IomodelError, match="no CSV table"):
        ncu.parse_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n")


def test_unknown_unit_is_refused():
    k = KernelRecord("x", {"dram__bytes_read.sum": 1.0}, {"dram__bytes_read.sum": "furlong"})
    with pytest.raises(IomodelError, match="print-units base"):
        k.quantity("dram_read_bytes")


def test_build_command_flags():
    cmd = ncu.build_command("/opt/ncu", ["python", "-m", "x"], "log.csv", ["a.sum", "b.sum"], kernel_regex="_attn")
    s = " ".join(cmd)
    for flag in ("--profile-from-start off", "--nvtx", "--clock-control none", "--cache-control all",
                 "--metrics a.sum,b.sum", "--csv --page raw --print-units base", "--log-file log.csv",
                 "-k regex:_attn"):
        assert flag in s
    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python", "-m", "x"]
    with pytest.raises(IomodelError, match="cache_control"):
        ncu.build_command("ncu", [], "l", ["a"], cache_control="some")
    with pytest.raises(IomodelError, match="no Nsight Compute metrics"):
        ncu.build_command("ncu", [], "l", [])


def test_missing_metrics_and_diagnose():
    log = '==ERROR== Failed to find metric lts__t_sectors_srcunit_ltcfabric.sum\n'
    assert ncu.missing_metrics(log) == ["lts__t_sectors_srcunit_ltcfabric.sum"]
    why = ncu.diagnose("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", 1)
    assert "NVreg_RestrictProfilingToAdminUsers" in why and "--interpreter" in why
    assert ncu.diagnose("all good", 0) is None


# ----- sweep files -----

def test_bundled_sweeps_meet_the_issue():
    sw = load_sweep(ROOT / "sweeps" / "h200.toml")
    tiled = [s.spec for s in sw.shapes if s.impl == "tiled"]
    assert len(tiled) >= 30
    assert min(s.seqlen_k for s in tiled) <= 512 and max(s.seqlen_k for s in tiled) >= 32768
    assert {s.causal_align for s in tiled if s.causal} == {"top-left", "bottom-right"}
    assert any(s.kv_heads < s.heads for s in tiled) and {s.head_dim for s in tiled} >= {64, 128}
    assert {s.dtype for s in tiled} >= {"fp16", "bf16"} and any(s.phase == "decode" for s in tiled)
    assert any(s.seqlen_q % 128 for s in tiled if s.phase == "prefill")  # ragged
    base = [s.spec for s in sw.shapes if s.impl == "baseline"]
    assert base and max(s.seqlen_k for s in base) <= 8192
    assert sw.cache_control == "all" and sw.clock_control == "none" and sw.l2_model["l2_fraction"] == 0.5
    small = load_sweep(ROOT / "sweeps" / "interpreter.toml")
    assert all(s.spec.seqlen_k <= 512 for s in small.shapes)


def test_parse_sweep_expands_and_validates():
    data = {"defaults": {"heads": 4, "kv_heads": 2, "head_dim": 16, "dtype": "fp16"},
            "shape": [{"seqlen": [32, 64], "causal": [False, True]}, {"seqlen_q": 1, "seqlen_k": 100, "impls": ["tiled", "baseline"]}]}
    sw = parse_sweep(data)
    assert len(sw.shapes) == 6
    dec = [s for s in sw.shapes if s.spec.seqlen_q == 1]
    assert all(s.spec.phase == "decode" for s in dec) and {s.impl for s in dec} == {"tiled", "baseline"}
    assert sw.shapes[0].id == shape_id(sw.shapes[0].spec, "tiled") == "b1-h4-kv2-d16-fp16-q32-k32-nc-tiled"
    bad = [
        ({"shape": []}, "no \\[\\[shape\\]\\]"),
        ({"shape": [{"seqlen": 8, "heads": 2, "kv_heads": 2, "head_dim": 8, "dtype": "fp16", "colour": 1}]}, "unknown key"),
        ({"shape": [{"seqlen": 8, "heads": 2, "kv_heads": 2, "head_dim": 8, "dtype": "fp16", "impls": ["cudnn"]}]}, "unknown implementation"),
        ({"shape": [{"seqlen": 8, "heads": 2}]}, "incomplete"),
        ({"shape": [{"seqlen": [8, 8], "heads": 2, "kv_heads": 2, "head_dim": 8, "dtype": "fp16"}]}, "twice"),
        ({"shape": [{"seqlen": 8}], "bogus": 1}, "top-level"),
        ({"shape": [{"seqlen": 8}], "ncu": {"metric": []}}, "\\[ncu\\]"),
    ]
    for d, msg in bad:
        with pytest.raises(IomodelError, match=msg):
            parse_sweep(d)


def test_load_sweep_errors(tmp_path):
    with pytest.raises(IomodelError, match="does not exist"):
        load_sweep(tmp_path / "nope.toml")
    p = tmp_path / "bad.toml"
    p.write_text("name = [\n")
    with pytest.raises(IomodelError, match="not valid TOML"):
        load_sweep(p)


# ----- the batch driver against a fake ncu -----

class FakeNcu:
    """Plays ncu + child: writes the manifest and a raw CSV for every shape of the batch."""

    def __init__(self, values, unknown=(), permission=False, skip_tag=None, kill_call=None, honour_pin=True):
        self.values = values  # shape id -> list of (kernel name, metric dict)
        self.honour_pin = honour_pin  # False: every run autotunes afresh (a different BLOCK_M each call)
        self.unknown = list(unknown)
        self.permission = permission
        self.skip_tag = skip_tag
        self.kill_call = kill_call  # index of the call that runs out of time (ncu printed nothing)
        self.calls: list[list[str]] = []

    def __call__(self, argv, timeout=None):
        self.calls.append(argv)
        log = Path(argv[argv.index("--log-file") + 1])
        metrics = argv[argv.index("--metrics") + 1].split(",")
        shapes_file, manifest_file = argv[-2], argv[-1]
        if self.kill_call is not None and len(self.calls) - 1 == self.kill_call:
            log.write_text("==PROF== Connected to process 4242\n")
            return 124
        if self.permission:
            log.write_text("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\n")
            return 1
        bad = [m for m in self.unknown if m in metrics]
        if bad:
            log.write_text("".join(f"==ERROR== Failed to find metric {m}\n" for m in bad))
            return 1
        shapes = json.loads(Path(shapes_file).read_text())
        manifest, rows = {}, []
        # the child's sacrificial first kernel (run_child on a GPU): it absorbs stale dirty lines
        rows.append((ncu.FLUSH_TAG, "reduce_kernel", {"dram__bytes_read.sum": "536870912",
                                                       "dram__bytes_write.sum": "2400000"}))
        for s in shapes:
            tuned = {"block_m": 64 * len(self.calls), "block_n": 32, "num_warps": 4, "num_stages": 2,
                     "path": "prefill", "num_splits": 1, "heads_per_program": 1}
            cfg = s["config"] if s.get("config") and self.honour_pin else tuned
            manifest[s["id"]] = {"config": cfg, "error": None}
            if s["id"] == self.skip_tag:
                continue
            for name, vals in self.values.get(s["id"], []):
                rows.append((s["id"], name, {m: v for m, v in vals.items() if m in metrics}))
        Path(manifest_file).write_text(json.dumps(manifest))
        log.write_text(fake_csv(rows, {m: UNITS.get(m, "byte") for m in metrics}))
        return 0


def _small_sweep():
    return parse_sweep({
        "defaults": {"heads": 2, "kv_heads": 2, "head_dim": 16, "dtype": "fp16"},
        "ncu": {"metrics": ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_ltcfabric.sum"],
                "batch_size": 2},
        "shape": [{"seqlen": [64, 128, 256]}],
    }, source="small")


def test_profile_batches_tags_and_drops_unknown_metrics(tmp_path):
    sw = _small_sweep()
    values = {s.id: [("_attn_fwd", {"dram__bytes_read.sum": str(1000 * (i + 1)), "dram__bytes_write.sum": "10"})]
              for i, s in enumerate(sw.shapes)}
    fake = FakeNcu(values, unknown=["lts__t_sectors_srcunit_ltcfabric.sum"], skip_tag=sw.shapes[2].id)
    meas = driver.profile(sw, workdir=tmp_path, runner=fake, command="iomodel validate small")
    assert len(fake.calls) == 3  # batch 0 retried once without the unknown metric; batch 1 runs without it
    assert meas.settings["dropped_metrics"] == ["lts__t_sectors_srcunit_ltcfabric.sum"]
    assert "lts__t_sectors_srcunit_ltcfabric.sum" not in meas.settings["metrics"]
    assert [s.quantity("dram_read_bytes") for s in meas.shapes[:2]] == [1000, 2000]
    assert meas.shapes[0].config["block_m"] == 128 and meas.shapes[0].tiling().block_n == 32  # the retried call
    assert meas.shapes[2].error == "no profiled kernel carries this shape's NVTX tag"
    assert meas.settings["cache_control"] == "all" and len(meas.settings["ncu_commands"]) == 2
    back = Measurement.load(meas.save(tmp_path / "m.json"))
    assert back.to_dict() == meas.to_dict()


def _dp_sweep():
    sw = _small_sweep()
    sw.metrics = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")
    sw.dram_pass = True
    sw.batch_size = 3
    return sw


def _dp_values(sw):
    return {s.id: [("_attn_fwd", {"dram__bytes_read.sum": "1000", "dram__bytes_write.sum": "777",
                                   "lts__t_bytes.sum": "5"})] for s in sw.shapes}


def test_dram_pass_pins_the_configs_of_the_full_run(tmp_path):
    """The DRAM-only run profiles the configs the full run recorded (pinned in its shapes
    file), so the DRAM bytes come from the tiles the prediction is made for."""
    sw = _dp_sweep()
    fake = FakeNcu(_dp_values(sw))
    meas = driver.profile(sw, workdir=tmp_path, runner=fake)
    assert len(fake.calls) == 2
    dram_shapes = json.loads((tmp_path / "batch00-shapes-dram.json").read_text())
    assert [d["config"]["block_m"] for d in dram_shapes] == [64, 64, 64]  # the first call's "autotuned" tiles
    assert all("same config" in s.config["dram_pass"] for s in meas.shapes)
    assert meas.shapes[0].kernels[0].metrics["dram__bytes_write.sum@multipass"] == 777.0
    # the sacrificial kernel of each child is recorded apart and belongs to no shape
    assert meas.settings["flush_kernels"] == [
        {"batch": 0, "run": "full", "kernel": "reduce_kernel", "dram_write_bytes": 2400000.0},
        {"batch": 0, "run": "dram", "kernel": "reduce_kernel", "dram_write_bytes": 2400000.0}]
    assert all(k.name == "_attn_fwd" for s in meas.shapes for k in s.kernels)


def test_dram_pass_not_applied_when_the_second_run_ran_other_tiles(tmp_path):
    sw = _dp_sweep()
    meas = driver.profile(sw, workdir=tmp_path, runner=FakeNcu(_dp_values(sw), honour_pin=False))
    for s in meas.shapes:
        assert s.config["dram_pass"].startswith("not applied: config")
        assert "dram__bytes_write.sum@multipass" not in s.kernels[0].metrics


def test_pin_runs_the_recorded_configs_and_is_recorded(tmp_path):
    sw = _small_sweep()
    sw.metrics = ("dram__bytes_read.sum", "dram__bytes_write.sum")
    first = driver.profile(sw, workdir=tmp_path / "a", runner=FakeNcu(_dp_values(sw)))
    pin = driver.pinned_configs(first)
    assert set(pin) == {s.id for s in sw.shapes}
    assert [pin[s.id]["block_m"] for s in sw.shapes] == [64, 64, 128]  # two batches, "autotuned" differently
    fresh = FakeNcu(_dp_values(sw))
    fresh.calls = [None, None]  # this "process" would autotune to 192 and 256
    again = driver.profile(sw, workdir=tmp_path / "b", runner=fresh, pin=pin, pin_source="first.json")
    assert [s.config["block_m"] for s in again.shapes] == [64, 64, 128]
    unpinned = driver.profile(sw, workdir=tmp_path / "c", runner=FakeNcu(_dp_values(sw)))
    assert again.settings["pinned_configs"] == "first.json" and unpinned.settings["pinned_configs"] is None
    assert again.settings["pinned_configs"] == "first.json"


def test_merge_refuses_other_launch_geometry():
    from iomodel.measure.records import KernelRecord, ShapeMeasurement
    from iomodel.spec import LayerSpec

    spec = LayerSpec(1, 2, 2, 64, 128, 128)
    cfg = {"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 2, "path": "prefill"}

    def shape(grid):
        k = KernelRecord("_attn_fwd", {"dram__bytes_write.sum": 1.0}, {"dram__bytes_write.sum": "byte"}, grid, "(128, 1, 1)")
        return ShapeMeasurement("s", "tiled", spec, dict(cfg), [k])

    full, other = shape("(2, 4, 1)"), shape("(1, 4, 1)")
    driver.merge_dram_pass([full], [other])
    assert full.config["dram_pass"] == "not applied: different kernels, grids or blocks in the DRAM-only run"


def test_assemble_falls_back_to_launch_order_only_when_counts_add_up():
    sw = parse_sweep({"defaults": {"heads": 2, "kv_heads": 2, "head_dim": 16, "dtype": "fp16"},
                          "shape": [{"seqlen": 64}, {"seqlen_q": 1, "seqlen_k": 512}]})
    cfg = {"block_m": 16, "block_n": 16, "num_warps": 4, "num_stages": 1, "path": "x", "heads_per_program": 1}
    manifest = {sw.shapes[0].id: {"config": {**cfg, "num_splits": 1}, "error": None},
                sw.shapes[1].id: {"config": {**cfg, "num_splits": 4}, "error": None}}
    rows = [ncu.CsvKernel(None, KernelRecord(name), i) for i, name in enumerate(["_attn_fwd", "_attn_decode", "_attn_decode_combine"])]
    got = driver.assemble(sw.shapes, json.loads(json.dumps(manifest)), rows)
    assert [[k.name for k in m.kernels] for m in got] == [["_attn_fwd"], ["_attn_decode", "_attn_decode_combine"]]
    assert got[0].config["assigned"].startswith("by launch order")
    got = driver.assemble(sw.shapes, json.loads(json.dumps(manifest)), rows[:2])  # counts do not add up
    assert all(m.error == "no profiled kernel carries this shape's NVTX tag" for m in got)
    # the child's sacrificial first kernel, untagged too, is the one extra first row: dropped
    flush = [ncu.CsvKernel(None, KernelRecord("reduce_kernel"), -1)]
    got = driver.assemble(sw.shapes, json.loads(json.dumps(manifest)), flush + rows)
    assert [[k.name for k in m.kernels] for m in got] == [["_attn_fwd"], ["_attn_decode", "_attn_decode_combine"]]


def test_profile_time_budget_keeps_finished_batches(tmp_path):
    sw = _small_sweep()
    sw.metrics = ("dram__bytes_read.sum", "dram__bytes_write.sum")
    values = {s.id: [("_attn_fwd", {"dram__bytes_read.sum": "1", "dram__bytes_write.sum": "2"})] for s in sw.shapes}
    out = tmp_path / "partial.json"
    meas = driver.profile(sw, workdir=tmp_path, runner=FakeNcu(values, kill_call=1), budget_s=600, save_to=out)
    assert [s.error for s in meas.shapes] == [None, None, "not run: the time budget was spent"]
    assert Measurement.load(out).to_dict() == meas.to_dict()
    meas = driver.profile(sw, workdir=tmp_path, runner=FakeNcu(values), budget_s=1e-9)  # spent before the first batch (0 is refused)
    assert all(s.error == "not run: the time budget was spent" for s in meas.shapes)


def test_profile_without_counter_permission_says_what_works(tmp_path):
    with pytest.raises(IomodelError, match="ERR_NVGPUCTRPERM.*--interpreter"):
        driver.profile(_small_sweep(), workdir=tmp_path, runner=FakeNcu({}, permission=True))


def test_no_ncu_and_no_gpu_messages(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setattr(ncu.Path, "is_file", lambda self: False)
    with pytest.raises(IomodelError, match="ncu.*not found.*--interpreter"):
        ncu.find_ncu()


def test_check_gpu_on_a_cpu_machine():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(IomodelError, match="no CUDA GPU.*--interpreter"):
        ncu.check_gpu()


def test_cli_validate_without_gpu_and_dry_run(capsys, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from iomodel.cli import main

    monkeypatch.chdir(tmp_path)  # a default output name must never land in the repository
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as exc:
            main(["validate", str(ROOT / "sweeps" / "h200.toml"), "--limit", "1", "--out", str(tmp_path / "n.json")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--interpreter" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(ROOT / "sweeps" / "h200.toml"), "--dry-run", "--impl", "tiled"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.count("--profile-from-start off") == 3  # 32 tiled shapes in batches of 12
    # a dram_pass sweep prints the DRAM-only command of each batch too (hold-out 4: 33 shapes, batches of 12)
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(ROOT / "sweeps" / "h200-holdout4.toml"), "--dry-run",
              "--pin", str(ROOT / "receipts" / "ncu-h200-holdout4-2026-11-29.json")])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.count("--profile-from-start off") == 6 and out.count("shapes-dram.json") == 3
    # pinning from a record of other shapes: one line, exit 2
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(ROOT / "sweeps" / "h200-holdout4.toml"), "--dry-run",
              "--pin", str(ROOT / "receipts" / "ncu-h200-holdout3-2026-11-29.json")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "no recorded config for 31 tiled shape(s)" in err and len(err.strip().splitlines()) == 1


def test_records_reject_foreign_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(IomodelError, match="not an iomodel measurement"):
        Measurement.load(p)
    p.write_text("{")
    with pytest.raises(IomodelError, match="not valid JSON"):
        Measurement.load(p)


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_child_runs_every_implementation_on_the_cpu(tmp_path):
    """The profiled child's calls (bundled kernel, eager chain, SDPA) on tiny CPU shapes."""
    import os

    pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs the interpreter for the bundled kernel on the CPU")
    sw = parse_sweep({
        "defaults": {"heads": 4, "kv_heads": 2, "head_dim": 16, "dtype": "fp16"},
        "shape": [
            {"seqlen": 40, "causal": True, "causal_align": "bottom-right", "impls": ["tiled", "baseline", "baseline-fp32"]},
            {"seqlen_q": 24, "seqlen_k": 40, "causal": True, "causal_align": "bottom-right", "impls": ["sdpa-math"]},
            {"seqlen_q": 1, "seqlen_k": 200, "impls": ["tiled"]},
            {"seqlen": 48, "impls": ["tiled"]},
        ],
    })
    pinned = {"block_m": 16, "block_n": 16, "num_warps": 4, "num_stages": 1, "path": "prefill", "num_splits": 1,
              "heads_per_program": 1, "warp_specialize": False, "tile_order": "reverse"}
    from dataclasses import replace

    sw.shapes[-1] = replace(sw.shapes[-1], config=pinned)
    shapes, manifest = tmp_path / "s.json", tmp_path / "m.json"
    shapes.write_text(json.dumps([s.to_dict() for s in sw.shapes]))
    assert child.run_child(str(shapes), str(manifest), device="cpu") == 0
    got = json.loads(manifest.read_text())
    assert list(got) == [s.id for s in sw.shapes]
    assert all(e["error"] is None for e in got.values()), got
    tiled = got[sw.shapes[0].id]["config"]
    assert tiled["path"] == "prefill" and tiled["block_m"] == 32
    assert got[sw.shapes[-2].id]["config"]["path"] == "decode-split-kv"
    assert got[sw.shapes[2].id]["config"] == {"score_dtype": "fp32"}
    # ran the pinned tiles, not the interpreter default 32x32; a pinned config recorded before issue 14 has no
    # fused_combine and runs (and records) the two-launch decode design (no effect on prefill)
    assert got[sw.shapes[-1].id]["config"] == {**pinned, "fused_combine": False}


def test_interpreter_refuses_gpu_sized_sweeps(capsys, tmp_path, monkeypatch):
    from iomodel.cli import main

    monkeypatch.chdir(tmp_path)  # were the guard to fail, interp-h200-<date>.json lands here, not in the repo
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(ROOT / "sweeps" / "h200.toml"), "--interpreter", "--impl", "tiled", "--limit", "1",
              "--out", str(tmp_path / "interp.json")])
    assert exc.value.code == 2
    assert "too large for Triton's interpreter" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_every_unit_of_the_h200_receipt_converts():
    """The units ncu 2025.3 printed on the H200 (ns, sector, byte, block, register/thread, '') all convert;
    the summary of gpu_validate.sh crashed on 'ns' before (IomodelError: unit 'ns' is not understood)."""
    path = ROOT / "receipts" / "ncu-h200-2026-11-29.json"
    meas = Measurement.load(path)
    units = {u for s in meas.shapes for k in s.kernels for u in k.units.values()}
    assert {"ns", "sector", "byte"} <= units
    for s in meas.shapes:
        for k in s.kernels:
            for m in k.metrics:
                assert k.value(m) is not None or k.metrics[m] is None
    first = meas.shapes[0]
    # gpu__time_duration.sum = 29216 ns -> 29.216 us; 1,025,484 TEX read sectors -> 32 B each
    assert first.quantity("duration_s") == pytest.approx(29216e-9)
    assert first.quantity("l2_read_bytes") == 1025484 * 32
    assert len(driver.summary_lines(meas)) >= len(meas.shapes)


def test_source_digest_hashes_paths_and_bytes_of_the_code_folders(tmp_path):
    """A receipt's ``source_sha256``: SHA-256 over (path, NUL, bytes, NUL) of every ``*.py`` under iomodel/ and
    kernels/ in path order, caches and other files skipped; one changed byte or a renamed file changes it."""
    import hashlib

    (tmp_path / "iomodel" / "sub").mkdir(parents=True)
    (tmp_path / "kernels" / "__pycache__").mkdir(parents=True)
    (tmp_path / "iomodel" / "sub" / "b.py").write_bytes(b"y = 2\n")
    (tmp_path / "iomodel" / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "kernels" / "k.py").write_bytes(b"k\n")
    (tmp_path / "kernels" / "__pycache__" / "k.py").write_bytes(b"cached\n")
    (tmp_path / "iomodel" / "notes.md").write_bytes(b"not code\n")
    want = hashlib.sha256(b"iomodel/a.py\0x = 1\n\0iomodel/sub/b.py\0y = 2\n\0kernels/k.py\0k\n\0").hexdigest()
    assert ncu.source_digest(tmp_path) == want
    (tmp_path / "kernels" / "k.py").write_bytes(b"K\n")
    assert ncu.source_digest(tmp_path) != want
    (tmp_path / "kernels" / "k.py").write_bytes(b"k\n")
    (tmp_path / "kernels" / "k.py").rename(tmp_path / "kernels" / "k2.py")
    assert ncu.source_digest(tmp_path) not in (want, None)
    assert ncu.source_digest(tmp_path / "empty") is None


def test_environment_records_the_source_digest_of_this_checkout():
    """Every receipt's environment names the code that produced it (the device's git history is not usable)."""
    from iomodel.bench.environment import environment as bench_environment

    here = ncu.source_digest()
    import re

    assert re.fullmatch(r"[0-9a-f]{64}", here)
    assert ncu.environment()["source_sha256"] == here
    assert bench_environment("cpu")["source_sha256"] == here
