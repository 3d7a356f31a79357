"""CLI start-up: ``iomodel --help`` and ``iomodel presets`` import no heavy library; commands import plainly.

Each check runs in a fresh interpreter (``sys.modules`` of the test process already holds
sympy and numpy). Timings are in ``benchmarks/cli_latency.py``, not here: a shared CI
machine makes wall-clock assertions flaky.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Libraries ``iomodel --help`` and ``iomodel presets`` must not import (issue 9, CLI latency).
HEAVY = ("sympy", "numpy", "matplotlib", "torch", "triton")

_PROBE = """
import contextlib, io, json, sys
from iomodel.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["presets"], ["--version"], ["worksheet", "--help"]],
                         ids=" ".join)
def test_light_commands_import_no_heavy_library(argv):
    got = _run(argv)
    assert got["code"] == 0
    heavy = sorted({m.split(".")[0] for m in got["modules"]} & set(HEAVY))
    assert heavy == [], f"iomodel {' '.join(argv)} imported {heavy}"
    assert not [m for m in got["modules"] if m.startswith(("iomodel.traffic", "iomodel.report", "kernels"))]


def test_the_probe_sees_heavy_imports():
    """The check above can fail: the default worksheet does import sympy (and, since the model
    imports numpy only where a sweep uses it, no numpy for one layer)."""
    got = _run(["worksheet", "--seqlen", "128"])
    assert got["code"] == 0
    tops = {m.split(".")[0] for m in got["modules"]}
    assert "sympy" in tops and "numpy" not in tops


def test_a_command_that_fails_to_import_fails_the_cli():
    """No command is skipped quietly: importing iomodel.cli re-raises the command module's import error
    (the ModuleNotFoundError naming the command's own module is the case the old loader skipped)."""
    code = ("import sys; sys.modules['iomodel.commands.plot'] = None\n"
            "from iomodel.cli import main")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "ModuleNotFoundError: import of iomodel.commands.plot halted" in proc.stderr


def test_version_is_the_package_metadata(capsys):
    from importlib.metadata import version

    from iomodel.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"iomodel {version('iomodel')}\n"
    import iomodel

    assert iomodel.__version__ == version("iomodel")
