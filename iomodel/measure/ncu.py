"""The Nsight Compute command line: the ncu argv, its raw CSV, what went wrong, the environment.

For each batch of shapes :mod:`iomodel.measure.driver` starts **one** Nsight Compute process
(:func:`build_command`) around a child Python process (:mod:`iomodel.measure.child`) that
wraps each profiled call in an NVTX range named ``iomodel@<shape id>@``
(:data:`NVTX_PREFIX`) inside a ``cudaProfilerStart``/``Stop`` region (ncu runs with
``--profile-from-start off``), so every kernel of that call is profiled once and tagged with
its shape.

ncu runs with ``--clock-control none`` (the GPU keeps its own clocks) and
``--cache-control all`` (its default: caches are flushed before every replay pass, so
every kernel starts with a cold L2 and its dirty lines are written back outside the
measurement). Metrics (:mod:`iomodel.measure.metrics`) are collected raw (``--csv --page raw
--print-units base``) and parsed with the :mod:`csv` module (:func:`parse_csv`); a metric the
device does not know is named in ncu's log (:func:`missing_metrics`).

Nothing here imports torch at module level: building commands and parsing CSV work on any
machine, and ``tests/test_measure_ncu.py`` checks them without a GPU.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from iomodel.errors import IomodelError
from iomodel.measure.metrics import DEFAULT_METRICS
from iomodel.measure.records import KernelRecord

#: Prefix of the NVTX range that tags every profiled call with its shape id.
NVTX_PREFIX = "iomodel@"
#: NVTX tag of the sacrificial kernel each profiled child runs first (see :mod:`iomodel.measure.child`).
FLUSH_TAG = "_flush"
_TAG_RE = re.compile(re.escape(NVTX_PREFIX) + r"([A-Za-z0-9_.\-]+)@")
_MISSING_METRIC_RE = re.compile(r"Failed to (?:find|profile) metric[s]?\s*:?\s*\"?([A-Za-z0-9_.]+)")

#: What to do instead when the GPU path is not available (printed with every such error).
INSTEAD = (
    "meanwhile `iomodel validate SWEEP --interpreter` counts the SRAM_fill bytes in Triton's "
    "interpreter on the CPU"
)


#: Nsight Compute's ``--cache-control`` values: ``all`` flushes the caches before every replay pass (the cold L2 the
#: reconciliation models), ``none`` does not. A sweep's ``[ncu] cache_control`` and a record's ``settings.cache_control``
#: take these (iomodel.measure.sweep, iomodel.measure.records).
CACHE_CONTROLS = ("all", "none")
#: Nsight Compute's ``--clock-control`` values (``none``: the GPU's own clocks, what the sweeps use; ``base``: locked).
CLOCK_CONTROLS = ("none", "base")

def nvtx_tag(shape: str) -> str:
    """The NVTX range name that tags one shape's profiled call: ``iomodel@<shape>@``."""
    return f"{NVTX_PREFIX}{shape}@"


def find_ncu(ncu: str | None = None) -> str:
    """Path of the Nsight Compute CLI.

    Looks at ``ncu`` (an explicit path), then ``$NCU``, then ``PATH``, then
    ``/usr/local/cuda/bin/ncu``.

    Raises:
        IomodelError: ncu is not installed (the message says what works instead).
    """
    for cand in (ncu, os.environ.get("NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return str(cand)
    raise IomodelError(
        "Nsight Compute (ncu) was not found: install it (CUDA toolkit) or pass --ncu PATH; " + INSTEAD
    )


def build_command(
    ncu: str,
    child: Sequence[str],
    log_file: str | Path,
    metrics: Sequence[str] = DEFAULT_METRICS,
    cache_control: str = "all",
    clock_control: str = "none",
    kernel_regex: str | None = None,
) -> list[str]:
    """The argv of one Nsight Compute process around ``child``.

    Args:
        ncu: path of the ncu executable.
        child: argv of the profiled program (:func:`iomodel.measure.driver.child_command`).
        log_file: where ncu writes its output (the raw CSV), kept apart from the child's stdout.
        metrics: metric names to collect.
        cache_control: ``all`` (flush caches before each replay pass) or ``none``.
        clock_control: ``none`` (GPU clocks untouched) or ``base`` (locked to base clock).
        kernel_regex: optional kernel-name filter (``-k regex:...``) on top of the profiled region.

    Returns:
        argv list (no shell quoting needed).

    Raises:
        IomodelError: no metrics, or an unknown cache/clock control value.
    """
    if not metrics:
        raise IomodelError("no Nsight Compute metrics to collect: list some under [ncu] metrics")
    if cache_control not in CACHE_CONTROLS:
        raise IomodelError(f"cache_control {cache_control!r} is unknown: use 'all' or 'none'")
    if clock_control not in CLOCK_CONTROLS:
        raise IomodelError(f"clock_control {clock_control!r} is unknown: use 'none' or 'base'")
    cmd = [
        ncu,
        "--target-processes", "all",
        "--profile-from-start", "off",
        "--nvtx",
        "--clock-control", clock_control,
        "--cache-control", cache_control,
        "--metrics", ",".join(metrics),
        "--csv", "--page", "raw", "--print-units", "base",
        "--log-file", str(log_file),
    ]
    replay = os.environ.get("IOMODEL_NCU_REPLAY_MODE", "").strip()
    if replay:  # experiment knob: ncu --replay-mode kernel|application (default kernel)
        if replay not in ("kernel", "application"):
            raise IomodelError(f"IOMODEL_NCU_REPLAY_MODE {replay!r} is unknown: use 'kernel' or 'application'")
        cmd += ["--replay-mode", replay]
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    return cmd + list(child)


@dataclass
class CsvKernel:
    """One row of Nsight Compute's raw CSV page.

    Attributes:
        tag: shape id from the enclosing ``iomodel@<id>@`` NVTX range (None if untagged).
        record: the kernel's name, grid, block, metrics and units.
        ident: ncu's running ``ID`` of the profiled launch.
    """

    tag: str | None
    record: KernelRecord
    ident: int


def _number(text: str) -> float | None:
    t = (text or "").strip().replace(",", "")
    if t in ("", "n/a", "N/A", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_csv(text: str, metrics: Sequence[str] | None = None) -> list[CsvKernel]:
    """Parse the output of ``ncu --csv --page raw`` into kernel rows.

    Lines that ncu itself prints (``==PROF==``, ``==WARNING==`` ...) are skipped; the first
    row whose first field is ``ID`` is the header, an optional second row of units
    follows (its ``ID`` field is empty), then one row per profiled kernel. Numbers may carry
    thousands separators. The shape tag is searched in every field, so it is found in
    whichever NVTX column ncu writes (``thread Domain:Push/Pop_Range:...``).

    Args:
        text: ncu's output (the ``--log-file``).
        metrics: metric columns to keep (all columns containing ``__`` when None).

    Returns:
        one :class:`CsvKernel` per data row, in ncu's order.

    Raises:
        IomodelError: no CSV header (ncu profiled nothing or failed).
    """
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    if start is None:
        raise IomodelError("Nsight Compute printed no CSV table (it profiled no kernel): see the ncu log for why")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = {h: i for i, h in enumerate(header)}
    wanted = [h for h in header if "__" in h] if metrics is None else [m for m in metrics if m in col]
    units: dict[str, str] = {}
    body = rows[1:]
    if body and not body[0][0].strip():
        units = {m: body[0][col[m]] for m in wanted if col[m] < len(body[0])}
        body = body[1:]
    out: list[CsvKernel] = []
    for row in body:
        if not row or not row[0].strip() or len(row) < len(header):
            continue
        tag = None
        for f in row:
            m = _TAG_RE.search(f)
            if m:
                tag = m.group(1)
                break

        def get(name: str) -> str:
            return row[col[name]] if name in col else ""

        rec = KernelRecord(
            name=get("Kernel Name"),
            metrics={m: _number(row[col[m]]) for m in wanted},
            units={m: units.get(m, "") for m in wanted},
            grid=get("Grid Size"),
            block=get("Block Size"),
        )
        ident = int(_number(get("ID")) or 0)
        out.append(CsvKernel(tag=tag, record=rec, ident=ident))
    return out


def missing_metrics(log: str) -> list[str]:
    """Metric names Nsight Compute said it cannot find on this device (from its log), sorted."""
    return sorted(set(_MISSING_METRIC_RE.findall(log)))


def diagnose(log: str, returncode: int) -> str | None:
    """A one-sentence explanation of a failed ncu run, or None if nothing known matched.

    Args:
        log: ncu's output (the ``--log-file``).
        returncode: ncu's exit status.
    """
    if "ERR_NVGPUCTRPERM" in log or "permission to access NVIDIA GPU Performance Counters" in log:
        return (
            "this user may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root or set "
            "the driver option NVreg_RestrictProfilingToAdminUsers=0; " + INSTEAD
        )
    if "No kernels were profiled" in log:
        return "Nsight Compute profiled no kernel: check that the child ran (see its stderr above) and that the GPU is visible"
    if returncode != 0 and "CUDA" in log and "no CUDA-capable device" in log:
        return "no CUDA-capable GPU is visible to the profiled process; " + INSTEAD
    return None


def _run_quiet(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


#: The folders whose Python files :func:`source_digest` hashes: the model and the kernels a receipt measured.
SOURCE_FOLDERS = ("iomodel", "kernels")


def source_digest(root: str | Path | None = None) -> str | None:
    """SHA-256 (hex) of the ``*.py`` files under :data:`SOURCE_FOLDERS` of a checkout, so a receipt
    records which code produced it where the machine that ran it has no usable git history.

    Each file contributes its path relative to ``root`` (POSIX form), a NUL byte, its bytes and a NUL
    byte, in sorted path order; caches (``__pycache__``) are skipped. To check a receipt against a
    commit: ``git archive <commit> iomodel kernels | tar -x -C /tmp/at`` then
    ``python -c "from iomodel.measure.ncu import source_digest; print(source_digest('/tmp/at'))"``.

    Args:
        root: the checkout's top folder (default: the one this package was imported from).

    Returns:
        64 hex digits, or None where no file is found (an installed copy without ``kernels/``
        still hashes ``iomodel/``). Nothing raises: an unreadable file is hashed as its path alone.
    """
    import hashlib

    base = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    files = sorted(p for folder in SOURCE_FOLDERS for p in (base / folder).rglob("*.py")
                   if "__pycache__" not in p.parts)
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(base).as_posix().encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            pass
        h.update(b"\0")
    return h.hexdigest()


def environment(ncu: str | None = None) -> dict[str, Any]:
    """Versions and device of this machine (device, driver, CUDA, torch, triton, ncu, python) and
    ``source_sha256``, the :func:`source_digest` of the code that ran.

    Missing pieces are recorded as None; nothing raises.
    """
    env: dict[str, Any] = {"python": sys.version.split()[0], "source_sha256": source_digest()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            env["device"] = torch.cuda.get_device_name(0)
            p = torch.cuda.get_device_properties(0)
            env["sm_count"] = p.multi_processor_count
            env["l2_bytes"] = int(getattr(p, "L2_cache_size", 0)) or None
    except ImportError:
        env["torch"] = None
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    smi = shutil.which("nvidia-smi")
    env["driver"] = _run_quiet([smi, "--query-gpu=driver_version", "--format=csv,noheader"]).splitlines()[0] if smi else None
    if env.get("driver") == "":
        env["driver"] = None
    if ncu:
        lines = _run_quiet([ncu, "--version"]).splitlines()
        env["ncu"] = lines[-1] if lines else None
    return env


def check_gpu(why: str = "Nsight Compute has nothing to profile", instead: str = INSTEAD) -> None:
    """Raise unless torch sees a CUDA GPU.

    Args:
        why: what has no GPU to run on (the message's middle); instead: what works instead.

    Raises:
        IomodelError: torch is missing or no GPU is visible (the message says what works instead).
    """
    try:
        import torch
    except ImportError:
        raise IomodelError("measuring on a GPU needs torch: pip install -e '.[kernels]'; " + instead) from None
    if not torch.cuda.is_available():
        raise IomodelError(f"no CUDA GPU is visible to torch, so {why}; {instead}")


#: What a GPU benchmark script (benchmarks/gpu_*.py) says it needs and where to run it instead.
BENCHMARK_NEEDS = ("this GPU benchmark has nothing to time", "run it on the GPU machine (no file was written)")


def benchmark_preflight(out: str, what: str = "receipt JSON") -> None:
    """Before any GPU time: a GPU is visible, then ``out`` (``--out``) is a writable file path (its
    folders are made only when a GPU is there, so a refused run leaves nothing behind).

    Raises:
        IomodelError: no GPU (:func:`check_gpu`), or ``out`` is a folder or cannot be written
            (:func:`iomodel.paths.check_output_file`).
    """
    from iomodel.paths import check_output_file

    check_gpu(*BENCHMARK_NEEDS)
    check_output_file(out, "--out", what)


def benchmark_start(out: str) -> int | None:
    """:func:`benchmark_preflight` for a script's ``main``: None when it may run, else 2 after one
    ``error:`` line on stderr (``if (rc := benchmark_start(args.out)) is not None: return rc``)."""
    try:
        benchmark_preflight(out)
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return None


def benchmark_finish(out: str, result: dict[str, Any]) -> int:
    """Write a GPU benchmark's ``result`` as JSON to ``out`` atomically (:func:`iomodel.paths.write_text`)
    and print ``wrote PATH``; returns the exit status: 0, or 2 after one ``error:`` line."""
    import json

    from iomodel.paths import write_text

    try:
        path = write_text(out, json.dumps(result, indent=1, default=str) + "\n", "--out")
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


__all__ = [
    "CsvKernel",
    "FLUSH_TAG",
    "INSTEAD",
    "NVTX_PREFIX",
    "build_command",
    "benchmark_finish",
    "benchmark_preflight",
    "benchmark_start",
    "check_gpu",
    "diagnose",
    "environment",
    "source_digest",
    "find_ncu",
    "missing_metrics",
    "nvtx_tag",
    "parse_csv",
]
