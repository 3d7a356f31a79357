"""The GPU machine's entry points without a GPU: the driver's and the child's argparse
commands, the profiled range's profiler calls, the metric table and shape selection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure import child, driver, metrics
from iomodel.measure.records import IMPLS, KernelRecord
from iomodel.measure.sweep import load_sweep

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "sweeps" / "h200.toml"


def test_metric_table_states_each_name_once_and_derives_the_rest():
    names = [m.name for m in metrics.METRICS]
    assert len(names) == len(set(names))
    assert metrics.DEFAULT_METRICS[:3] == ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
    assert len(metrics.DEFAULT_METRICS) == 17
    assert metrics.QUANTITY_METRICS["dram_read_bytes"] == ("dram__bytes_read.sum", "dram__sectors_read.sum")
    assert metrics.QUANTITY_METRICS["sm_write_bytes"] == ("l1tex__m_l1tex2xbar_write_bytes.sum",
                                                          "l1tex__m_l1tex2xbar_write_sectors.sum")
    assert "programs_per_sm" not in metrics.QUANTITY_METRICS
    assert len(metrics.OCCUPANCY_METRICS) == 4 and all(m.startswith("launch__occupancy_limit_")
                                                       for m in metrics.OCCUPANCY_METRICS)
    assert metrics.DRAM_PASS_METRICS == ("dram__bytes_read.sum", "dram__bytes_write.sum")
    # first present wins: sectors stand in for bytes only when the byte counter is absent
    k = KernelRecord("k", {"dram__sectors_read.sum": 3.0}, {"dram__sectors_read.sum": "sector"})
    assert k.quantity("dram_read_bytes") == 3 * metrics.SECTOR_BYTES
    k.metrics["dram__bytes_read.sum"], k.units["dram__bytes_read.sum"] = 5.0, "byte"
    assert k.quantity("dram_read_bytes") == 5.0


def test_sweep_select_filters_limits_and_refuses():
    sw = load_sweep(SWEEP)
    sw.select(["baseline"], limit=2)
    assert [s.impl for s in sw.shapes] == ["baseline", "baseline"]
    with pytest.raises(IomodelError, match="unknown implementation.*'cudnn'"):
        load_sweep(SWEEP).select(["cudnn"])
    with pytest.raises(IomodelError, match=r"--limit must be 1 or more \(the first N shapes\), got 0"):
        load_sweep(SWEEP).select(None, limit=0)  # it said "no shapes left", as if the sweep were empty
    sw = load_sweep(SWEEP)
    sw.shapes = [s for s in sw.shapes if s.impl == "baseline"]
    with pytest.raises(IomodelError, match="no shapes left"):
        sw.select(["tiled"])


def test_child_command_is_the_child_module():
    argv = driver.child_command("python3", "s.json", "m.json")
    assert argv == ["python3", "-m", "iomodel.measure.child", "s.json", "m.json"]


def test_driver_main_on_a_cpu_machine_says_what_works(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    out = tmp_path / "r.json"
    assert driver.main([str(SWEEP), str(out), "--impl", "tiled", "--budget-s", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no CUDA GPU") and "--interpreter" in err and not out.exists()


def test_driver_main_refuses_bad_arguments(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        driver.main([str(SWEEP), str(tmp_path / "r.json"), "--impl", "cudnn"])
    assert exc.value.code == 2 and "invalid choice: 'cudnn'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        driver.main([str(SWEEP), str(tmp_path / "r.json"), "--colour"])
    assert exc.value.code == 2
    assert driver.main([str(tmp_path / "none.toml"), str(tmp_path / "r.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    pin = ROOT / "receipts" / "ncu-h200-holdout3-2026-11-29.json"
    assert driver.main([str(ROOT / "sweeps" / "h200-holdout4.toml"), str(tmp_path / "r.json"), "--pin", str(pin)]) == 2
    assert "no recorded config for 31 tiled shape(s)" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["iomodel.measure.driver", "iomodel.measure.child"])
def test_entry_points_run_as_modules(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"usage: python -m {module}" in r.stdout
    for name in ("torch", "sympy", "typer"):  # the GPU machine may have neither typer nor sympy
        probe = subprocess.run([sys.executable, "-c", f"import sys, {module}; print('{name}' in sys.modules)"],
                               capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=120)
        assert probe.stdout.strip() == "False", (module, name, probe.stderr)


def test_child_main_refuses_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        child.main(["only-one.json"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        child.main(["s.json", "m.json", "--device", "tpu"])
    assert exc.value.code == 2 and "invalid choice: 'tpu'" in capsys.readouterr().err


class _FakeCuda:
    """Records the profiler, NVTX and synchronize calls :func:`child.profiled_range` makes."""

    def __init__(self, log):
        self.log = log
        self.profiler = type("P", (), {"start": lambda _: log.append("start"), "stop": lambda _: log.append("stop")})()
        self.nvtx = type("N", (), {"range_push": lambda _, tag: log.append(f"push {tag}"),
                                   "range_pop": lambda _: log.append("pop")})()

    def synchronize(self):
        self.log.append("sync")


def test_profiled_range_opens_and_closes_the_region_in_order(monkeypatch):
    torch = pytest.importorskip("torch")
    log: list[str] = []
    monkeypatch.setattr(torch, "cuda", _FakeCuda(log))
    with child.profiled_range("b1-x"):
        log.append("call")
    assert log == ["sync", "start", "push iomodel@b1-x@", "call", "pop", "sync", "stop"]
    log.clear()
    with pytest.raises(RuntimeError, match="out of memory"):
        with child.profiled_range("b1-y"):
            raise RuntimeError("out of memory")
    assert log == ["sync", "start", "push iomodel@b1-y@", "pop", "stop"]  # closed, the error goes on


def test_impl_call_refuses_unknown_implementations():
    pytest.importorskip("torch")
    from iomodel.spec import LayerSpec

    spec = LayerSpec(1, 2, 2, 16, 8, 8, "fp16")
    with pytest.raises(IomodelError, match="unknown implementation 'sdpa-magic'"):
        child.impl_call("sdpa-magic", spec, None, None, None)
    assert "sdpa-math" in IMPLS
