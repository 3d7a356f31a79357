"""Nsight Compute measurement of attention kernels: sweep files, ncu commands, CSV parsing.

The GPU path of ``iomodel validate``. For each batch of shapes of a sweep file it starts
**one** Nsight Compute process around a child Python process (``python -m
iomodel.measure.ncu child ...``) that, per shape:

1. builds Q, K, V on the GPU and runs the implementation once outside any profiled
   region (Triton compilation and any autotuning happen here, never under the profiler);
2. opens a profiled region (``cudaProfilerStart``, with ncu's ``--profile-from-start off``)
   and an NVTX range named ``iomodel@<shape id>@`` around exactly one call, so every
   kernel of that call (the bundled kernel, its split-KV combine kernel, or each op of the
   eager chain) is profiled once and tagged with its shape;
3. closes the region (``cudaProfilerStop``) and writes the launcher's reported
   configuration to a manifest.

ncu runs with ``--clock-control none`` (the GPU keeps its own clocks) and
``--cache-control all`` (its default: caches are flushed before every replay pass, so
every kernel starts with a cold L2 and its dirty lines are written back outside the
measurement). Metrics are collected raw (``--csv --page raw --print-units base``) and
parsed with the :mod:`csv` module; a metric the device does not know is dropped and
recorded in the result's settings (the list is data: the sweep file's ``[ncu] metrics``).

Nothing here imports torch at module level: building commands and parsing CSV work on any
machine, and ``tests/test_measure_ncu.py`` checks them without a GPU.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from iomodel.errors import IomodelError
from iomodel.measure.records import (
    IMPLS,
    KernelRecord,
    Measurement,
    ShapeMeasurement,
    shape_id,
)
from iomodel.spec import LayerSpec

#: Metrics collected by default (Hopper names; Nsight Compute Kernel Profiling Guide).
#: ``launch__*`` metrics need no replay; the others cost a few replay passes per kernel.
DEFAULT_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_op_write.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
    "launch__grid_size",
    "launch__registers_per_thread",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
)

#: Prefix of the NVTX range that tags every profiled call with its shape id.
NVTX_PREFIX = "iomodel@"
#: NVTX tag of the sacrificial kernel each profiled child runs first (see :func:`run_child`).
FLUSH_TAG = "_flush"
#: Bytes the sacrificial kernel reads: several times any L2 (the H200's is 60 MiB).
FLUSH_BYTES = 512 * 2**20
_TAG_RE = re.compile(re.escape(NVTX_PREFIX) + r"([A-Za-z0-9_.\-]+)@")
_MISSING_METRIC_RE = re.compile(r"Failed to (?:find|profile) metric[s]?\s*:?\s*\"?([A-Za-z0-9_.]+)")

#: What to do instead when the GPU path is not available (printed with every such error).
INSTEAD = (
    "meanwhile `iomodel validate SWEEP --interpreter` counts the SRAM_fill bytes in Triton's "
    "interpreter on the CPU"
)


# ----------------------------------------------------------------------------------
# Sweep files
# ----------------------------------------------------------------------------------

#: LayerSpec fields a sweep entry may set (plus ``seqlen`` = both lengths, ``impls``, ``seed``).
_SPEC_FIELDS = ("batch", "heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k", "dtype", "causal",
                "causal_align", "phase", "name")


@dataclass(frozen=True)
class SweepShape:
    """One (shape, implementation) of a sweep.

    Attributes:
        id: unique id (:func:`~iomodel.measure.records.shape_id`).
        impl: implementation name (see :data:`~iomodel.measure.records.IMPLS`).
        spec: the layer call.
        seed: torch seed for the random inputs.
        config: the bundled kernel's configuration to run (``KernelConfig`` fields), pinned
            instead of autotuned; None: the kernel chooses (autotuning on a GPU).
    """

    id: str
    impl: str
    spec: LayerSpec
    seed: int = 0
    config: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the child process reads it)."""
        spec = self.spec.to_dict()
        spec.pop("pass", None)
        out = {"id": self.id, "impl": self.impl, "spec": spec, "seed": self.seed}
        if self.config is not None:
            out["config"] = dict(self.config)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SweepShape":
        """Inverse of :meth:`to_dict` (the LayerSpec validates itself)."""
        spec = dict(d["spec"])
        spec.pop("pass", None)
        cfg = d.get("config")
        return cls(id=d["id"], impl=d["impl"], spec=LayerSpec(**spec), seed=int(d.get("seed", 0)),
                   config=dict(cfg) if cfg else None)


@dataclass
class Sweep:
    """A sweep file: shapes to measure and how to run Nsight Compute on them.

    Attributes:
        name: sweep name (file stem unless given).
        hardware: hardware preset the sweep was written for (``H200``), or "".
        shapes: every (shape, implementation), in file order, ids unique.
        metrics: Nsight Compute metrics to collect.
        batch_size: shapes per Nsight Compute process.
        cache_control: ncu ``--cache-control`` (``all`` flushes caches before each replay).
        clock_control: ncu ``--clock-control`` (``none`` keeps the GPU's clocks).
        dram_pass: also run each batch under a second ncu process that collects only
            :data:`DRAM_PASS_METRICS`, a single replay pass, and take the DRAM bytes from it.
            Kernel replay restores the memory a kernel writes before every further pass; the
            restore leaves dirty lines in L2 that the measured pass then writes back, which
            inflates ``dram__bytes_write`` by up to a few MiB (measured on the H200,
            2026-11-29: 2.3 MiB with 20 metrics against 0.05 MiB with 3, same decode kernel;
            receipts/raw/replay-probe-*). The multi-pass values are kept beside them.
        l2_model: parameters of the L2-aware prediction (see ``iomodel/cache/params.py``).
        source: the file path.
    """

    name: str
    hardware: str = ""
    shapes: list[SweepShape] = field(default_factory=list)
    metrics: tuple[str, ...] = DEFAULT_METRICS
    batch_size: int = 12
    cache_control: str = "all"
    clock_control: str = "none"
    dram_pass: bool = False
    l2_model: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def _expand(entry: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Cartesian product over the list-valued keys of one sweep entry (``impls`` stays a list)."""
    keys = [k for k, v in entry.items() if isinstance(v, list) and k != "impls"]
    for values in itertools.product(*(entry[k] for k in keys)):
        out = dict(entry)
        out.update(zip(keys, values))
        yield out


def parse_sweep(data: dict[str, Any], source: str = "sweep") -> Sweep:
    """Build a :class:`Sweep` from parsed TOML.

    Format::

        name = "h200-prefill"
        hardware = "H200"
        [defaults]                     # applied to every shape
        batch = 1; heads = 32; kv_heads = 32; head_dim = 128; dtype = "bf16"; impls = ["tiled"]
        [ncu]
        metrics = ["dram__bytes_read.sum", ...]; batch_size = 12
        [[shape]]                      # list values expand to their cartesian product
        seqlen = [512, 1024]; causal = [false, true]

    Keys of a shape: the :class:`~iomodel.spec.LayerSpec` fields (``batch`` defaults to 1,
    ``phase`` to decode when seqlen_q <= 16), ``seqlen`` (sets seqlen_q and seqlen_k),
    ``impls`` (list of implementations, default ``["tiled"]``) and ``seed`` (default 0).

    Raises:
        IomodelError: an unknown key, an invalid shape, an unknown implementation, a
            duplicate shape, or no shapes at all.
    """
    known_top = {"name", "hardware", "defaults", "ncu", "shape", "l2_model", "description"}
    bad = set(data) - known_top
    if bad:
        raise IomodelError(f"{source}: unknown top-level key(s) {sorted(bad)}: use {sorted(known_top)}")
    defaults = dict(data.get("defaults", {}))
    ncu = dict(data.get("ncu", {}))
    bad_ncu = set(ncu) - {"metrics", "batch_size", "cache_control", "clock_control", "dram_pass"}
    if bad_ncu:
        raise IomodelError(
            f"{source}: unknown [ncu] key(s) {sorted(bad_ncu)}: use metrics, batch_size, cache_control, clock_control, dram_pass"
        )
    shapes: list[SweepShape] = []
    seen: set[str] = set()
    entries = data.get("shape", [])
    if not isinstance(entries, list) or not entries:
        raise IomodelError(f"{source}: no [[shape]] entries: add at least one")
    for n, raw in enumerate(entries, 1):
        for entry in _expand({**defaults, **raw}):
            entry = {"batch": 1, **entry}
            impls = entry.pop("impls", ["tiled"])
            seed = int(entry.pop("seed", 0))
            if "seqlen" in entry:
                s = entry.pop("seqlen")
                entry.setdefault("seqlen_q", s)
                entry.setdefault("seqlen_k", s)
            unknown = set(entry) - set(_SPEC_FIELDS)
            if unknown:
                raise IomodelError(f"{source}: shape {n} has unknown key(s) {sorted(unknown)}: use {list(_SPEC_FIELDS)}, seqlen, impls, seed")
            if "seqlen_q" in entry and int(entry["seqlen_q"]) <= 16 and "phase" not in entry:
                entry["phase"] = "decode"
            try:
                spec = LayerSpec(**entry)
            except TypeError as exc:
                raise IomodelError(f"{source}: shape {n} is incomplete ({exc}): set it in the entry or in [defaults]") from None
            for impl in impls:
                if impl not in IMPLS:
                    raise IomodelError(f"{source}: shape {n} has unknown implementation {impl!r}: use one of {', '.join(IMPLS)}")
                sid = shape_id(spec, impl)
                if sid in seen:
                    raise IomodelError(f"{source}: shape {sid} appears twice: remove the duplicate")
                seen.add(sid)
                shapes.append(SweepShape(sid, impl, spec, seed))
    metrics = tuple(ncu.get("metrics", DEFAULT_METRICS))
    batch_size = int(ncu.get("batch_size", 12))
    if batch_size < 1:
        raise IomodelError(f"{source}: [ncu] batch_size must be 1 or more")
    return Sweep(
        name=str(data.get("name", Path(source).stem)),
        hardware=str(data.get("hardware", "")),
        shapes=shapes,
        metrics=metrics,
        batch_size=batch_size,
        cache_control=str(ncu.get("cache_control", "all")),
        clock_control=str(ncu.get("clock_control", "none")),
        dram_pass=bool(ncu.get("dram_pass", False)),
        l2_model=dict(data.get("l2_model", {})),
        source=source,
    )


def load_sweep(path: str | Path) -> Sweep:
    """Read a TOML sweep file (see :func:`parse_sweep` for the format).

    Raises:
        IomodelError: the file is missing, not TOML, or invalid.
    """
    path = Path(path)
    if not path.is_file():
        raise IomodelError(f"sweep file {str(path)!r} does not exist: pass a TOML file such as sweeps/h200.toml")
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise IomodelError("reading TOML sweep files needs Python >= 3.11 or the tomli package: pip install tomli") from None
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise IomodelError(f"sweep file {str(path)!r} is not valid TOML ({exc}): fix the file") from None
    return parse_sweep(data, source=str(path))


# ----------------------------------------------------------------------------------
# ncu command and CSV
# ----------------------------------------------------------------------------------


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
        child: argv of the profiled program (``python -m iomodel.measure.ncu child ...``).
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
    if cache_control not in ("all", "none"):
        raise IomodelError(f"cache_control {cache_control!r} is unknown: use 'all' or 'none'")
    if clock_control not in ("none", "base"):
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
    """Metric names Nsight Compute said it cannot find on this device (from its log)."""
    return sorted(set(_MISSING_METRIC_RE.findall(log)))


def diagnose(log: str, returncode: int) -> str | None:
    """A one-sentence explanation of a failed ncu run, or None if nothing known matched."""
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


# ----------------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------------


def _run_quiet(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(ncu: str | None = None) -> dict[str, Any]:
    """Versions and device of this machine (device, driver, CUDA, torch, triton, ncu, python).

    Missing pieces are recorded as None; nothing raises.
    """
    env: dict[str, Any] = {"python": sys.version.split()[0]}
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


def check_gpu() -> None:
    """Raise unless torch sees a CUDA GPU.

    Raises:
        IomodelError: torch is missing or no GPU is visible (the message says what works instead).
    """
    try:
        import torch
    except ImportError:
        raise IomodelError("measuring on a GPU needs torch: pip install -e '.[kernels]'; " + INSTEAD) from None
    if not torch.cuda.is_available():
        raise IomodelError("no CUDA GPU is visible to torch, so Nsight Compute has nothing to profile; " + INSTEAD)


# ----------------------------------------------------------------------------------
# Driver: batches of shapes, one ncu process each
# ----------------------------------------------------------------------------------


def _batches(shapes: Sequence[SweepShape], size: int) -> list[list[SweepShape]]:
    return [list(shapes[i: i + size]) for i in range(0, len(shapes), size)]


def expected_kernels(impl: str, spec: LayerSpec, config: dict[str, Any] | None) -> int | None:
    """Kernels one call of the bundled kernel launches (1, or 2 for split-KV decode); None if unknown."""
    if impl != "tiled" or not config:
        return None
    return 2 if spec.phase == "decode" and int(config.get("num_splits", 1)) > 1 else 1


def assemble(shapes: Sequence[SweepShape], manifest: dict[str, dict[str, Any]], rows: Sequence[CsvKernel]) -> list[ShapeMeasurement]:
    """Join the child's manifest and ncu's rows into one :class:`ShapeMeasurement` per shape.

    Rows are assigned by their NVTX tag. Only if *no* row carries a tag (an ncu that prints no
    NVTX column) and every shape of the batch is the bundled kernel, whose kernel count is
    known from its configuration, are rows assigned by launch order, and only when the counts
    add up exactly, or up to one extra first row (the child's sacrificial kernel, dropped);
    each such shape then notes ``assigned by launch order`` in its config.

    Args:
        shapes: the batch, in order.
        manifest: shape id -> ``{"config": ..., "error": ...}`` as the child wrote it.
        rows: parsed CSV rows.

    Returns:
        measurements in the order of ``shapes``; a shape without kernels gets an error.
    """
    ordered = sorted(rows, key=lambda r: r.ident)
    by_tag: dict[str, list[KernelRecord]] = {}
    for r in ordered:
        if r.tag is not None:
            by_tag.setdefault(r.tag, []).append(r.record)
    if ordered and not by_tag:
        ran = [s for s in shapes if s.id in manifest and manifest[s.id].get("error") is None]
        counts = [expected_kernels(s.impl, s.spec, manifest[s.id].get("config")) for s in ran]
        if ran and None not in counts and sum(counts) == len(ordered) - 1:  # type: ignore[arg-type]
            ordered = ordered[1:]  # the child's sacrificial first kernel (run_child), untagged here
        if ran and None not in counts and sum(counts) == len(ordered):  # type: ignore[arg-type]
            it = iter(ordered)
            for s, n in zip(ran, counts):
                by_tag[s.id] = [next(it).record for _ in range(n)]  # type: ignore[arg-type]
                manifest[s.id] = {**manifest[s.id], "config": {**manifest[s.id]["config"],
                                                               "assigned": "by launch order (no NVTX tags in the CSV)"}}
    out = []
    for s in shapes:
        info = manifest.get(s.id, {})
        kernels = by_tag.get(s.id, [])
        error = info.get("error")
        if error is None and not kernels:
            error = "no profiled kernel carries this shape's NVTX tag" if info else "the profiled process never reached this shape"
        out.append(ShapeMeasurement(id=s.id, impl=s.impl, spec=s.spec, config=info.get("config"),
                                    kernels=kernels, error=error))
    return out


#: Metrics of the single-pass DRAM run (see :attr:`Sweep.dram_pass`).
DRAM_PASS_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")


def _kernel_config_fields() -> tuple[str, ...]:
    from dataclasses import fields

    from kernels.heuristics import KernelConfig  # pure Python: no torch needed

    return tuple(f.name for f in fields(KernelConfig))


#: Config fields that must agree between the full-metric run and the DRAM-only run of a shape
#: (every field of ``kernels.heuristics.KernelConfig``).
CONFIG_KEYS = _kernel_config_fields()


def _config_core(cfg: dict[str, Any] | None) -> dict[str, Any]:
    return {k: cfg[k] for k in CONFIG_KEYS if cfg and k in cfg}


def pinned_configs(meas: Measurement) -> dict[str, dict[str, Any]]:
    """Shape id -> the bundled kernel's config that ran, for every tiled shape of a record.

    Feed it to :func:`profile` (``pin``) to run the same tiles again: the DRAM-only pass of a
    sweep and repeat measurements must profile the configuration the prediction is made for,
    not a fresh autotuning result.
    """
    return {s.id: _config_core(s.config) for s in meas.shapes
            if s.impl == "tiled" and s.error is None and _config_core(s.config).get("path")}


def batch_files(work: str | Path, n: int, dram: bool = False) -> tuple[Path, Path, Path]:
    """(shapes JSON, manifest JSON, ncu CSV log) of batch ``n`` under ``work``; ``dram``: the
    DRAM-only pass's files."""
    tag = "-dram" if dram else ""
    work = Path(work)
    return (work / f"batch{n:02d}-shapes{tag}.json", work / f"batch{n:02d}-manifest{tag}.json",
            work / f"batch{n:02d}-ncu{tag}.csv")


def child_command(python: str, shapes_file: str | Path, manifest_file: str | Path) -> list[str]:
    """argv of the profiled child process (:func:`run_child`)."""
    return [python, "-m", "iomodel.measure.ncu", "child", str(shapes_file), str(manifest_file)]


def check_pin(sweep: Sweep, pin: dict[str, dict[str, Any]], source: str) -> None:
    """Refuse a pin that lacks a config for some tiled shape of the sweep.

    Raises:
        IomodelError: naming how many shapes lack one and the first of them.
    """
    missing = [s.id for s in sweep.shapes if s.impl == "tiled" and s.id not in pin]
    if missing:
        raise IomodelError(f"--pin {source} has no recorded config for {len(missing)} tiled shape(s) of the sweep "
                           f"(first: {missing[0]}): pin a result of the same sweep")


def merge_dram_pass(results: Sequence[ShapeMeasurement], dram: Sequence[ShapeMeasurement]) -> None:
    """Take each kernel's DRAM bytes from the single-pass run, keeping the multi-pass values.

    Kernels are matched by shape id and launch order within the shape (the child launches the
    same sequence in both runs, the DRAM-only run with the first run's configs pinned). The
    multi-pass values move to ``<metric>@multipass``. A shape whose DRAM-only run differs
    (kernel count, kernel names, grid or block, or the bundled kernel's config) keeps its
    multi-pass values and gets a note saying what differed in its config (``dram_pass``).

    Args:
        results: the batch's measurements from the full-metric run (changed in place).
        dram: the same batch from the DRAM-only run.
    """
    by_id = {d.id: d for d in dram}
    for r in results:
        d = by_id.get(r.id)
        if r.error is not None:
            continue
        why = None
        if d is None or d.error is not None:
            why = "the DRAM-only run did not profile it"
        elif len(d.kernels) != len(r.kernels):
            why = f"{len(d.kernels)} kernels in the DRAM-only run, {len(r.kernels)} in the full one"
        elif any((a.name, a.grid, a.block) != (b.name, b.grid, b.block) for a, b in zip(r.kernels, d.kernels)):
            why = "different kernels, grids or blocks in the DRAM-only run"
        elif r.impl == "tiled" and _config_core(r.config) != _config_core(d.config):
            why = f"config {_config_core(d.config)} in the DRAM-only run, {_config_core(r.config)} in the full one"
        if why:
            r.config = {**(r.config or {}), "dram_pass": f"not applied: {why}"}
            continue
        for k, kd in zip(r.kernels, d.kernels):
            for m in DRAM_PASS_METRICS:
                if m in k.metrics and m in kd.metrics:
                    k.metrics[f"{m}@multipass"] = k.metrics[m]
                    k.metrics[m] = kd.metrics[m]
                    k.units[f"{m}@multipass"] = k.units.get(m, "byte")
        r.config = {**(r.config or {}), "dram_pass": "DRAM bytes from a single-pass ncu run (DRAM metrics only, "
                                                     "same config and launch geometry)"}


def _run_group(argv: list[str], timeout: float | None) -> int:
    """Run ``argv`` in its own process group; on timeout kill the whole group (ncu and its child).

    Returns:
        the exit status, or 124 after a timeout (as ``timeout(1)``).
    """
    import signal

    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        return 124


def profile(
    sweep: Sweep,
    *,
    ncu: str | None = None,
    workdir: str | Path | None = None,
    python: str = sys.executable,
    command: str = "",
    echo: Callable[[str], None] = lambda s: None,
    runner: Callable[[list[str], float | None], int] | None = None,
    budget_s: float | None = None,
    save_to: str | Path | None = None,
    pin: dict[str, dict[str, Any]] | None = None,
    pin_source: str = "",
) -> Measurement:
    """Profile every shape of a sweep under Nsight Compute, one ncu process per batch.

    Args:
        sweep: shapes and ncu settings.
        ncu: path of ncu (found by :func:`find_ncu` when None).
        workdir: folder for the per-batch files (a temporary folder when None).
        python: interpreter for the child process.
        command: the command line to record (the caller's).
        echo: progress callback (one line per batch).
        runner: runs one argv with a timeout in seconds (None: none) and returns its exit
            status, 124 on timeout (:func:`_run_group` when None; tests pass a fake).
        budget_s: wall-clock budget in seconds for all batches; a batch still running when
            it is spent is killed (its finished shapes are kept) and later batches are
            recorded as not run. None: no budget.
        save_to: write the measurement so far to this JSON after every batch, so a killed
            run leaves its finished batches behind.
        pin: shape id -> bundled-kernel config to run instead of autotuning
            (:func:`pinned_configs` of an earlier record); tiled shapes not in it autotune.
            With ``dram_pass`` the DRAM-only run always pins the full run's configs.
        pin_source: where ``pin`` came from (recorded in the settings).

    Returns:
        the :class:`~iomodel.measure.records.Measurement` (kind ``ncu``).

    Raises:
        IomodelError: no GPU, no ncu, no counter permission, or ncu failed for another
            reason it explained in its log.
    """
    if runner is None:
        check_gpu()
    ncu_path = find_ncu(ncu) if runner is None else (ncu or "ncu")
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="iomodel-ncu-"))
    work.mkdir(parents=True, exist_ok=True)
    metrics = list(sweep.metrics)
    dropped: list[str] = []
    commands: list[str] = []
    flushes: list[dict[str, Any]] = []
    results: list[ShapeMeasurement] = []
    run = runner or _run_group
    t_start = time.time()
    env = environment(ncu_path if runner is None else None)
    hardware = None
    if runner is None:
        try:
            from iomodel.spec.hardware import detect

            hardware = detect().to_dict()
        except IomodelError:
            hardware = None

    def measurement() -> Measurement:
        return Measurement(
            kind="ncu",
            created=datetime.fromtimestamp(t_start, timezone.utc).isoformat(timespec="seconds"),
            command=command,
            environment=env,
            hardware=hardware,
            settings={
                "sweep": sweep.source,
                "sweep_name": sweep.name,
                "metrics": metrics,
                "dropped_metrics": dropped,
                "cache_control": sweep.cache_control,
                "clock_control": sweep.clock_control,
                "dram_pass": sweep.dram_pass,
                "batch_size": sweep.batch_size,
                "ncu_commands": commands,
                "l2_model": sweep.l2_model,
                "pinned_configs": pin_source or None,
                "flush_kernels": flushes,
                "wall_s": round(time.time() - t_start, 1),
            },
            shapes=list(results),
        )

    for n, batch in enumerate(_batches(sweep.shapes, sweep.batch_size)):
        left = None if budget_s is None else budget_s - (time.time() - t_start)
        if left is not None and left <= 5:
            results += [ShapeMeasurement(s.id, s.impl, s.spec, error="not run: the time budget was spent")
                        for s in batch]
            continue
        shapes_file, manifest_file, log_file = batch_files(work, n)
        if pin:
            batch = [replace(s, config=pin[s.id]) if s.impl == "tiled" and s.id in pin else s for s in batch]
        shapes_file.write_text(json.dumps([s.to_dict() for s in batch]))
        child = child_command(python, shapes_file, manifest_file)
        t0 = time.time()
        tries = len(metrics) + 1  # ncu may name one unknown metric per run: drop them one run at a time
        for attempt in range(tries):
            argv = build_command(ncu_path, child, log_file, metrics, sweep.cache_control, sweep.clock_control)
            left = None if budget_s is None else max(1.0, budget_s - (time.time() - t_start))
            rc = run(argv, left)
            log = log_file.read_text() if log_file.is_file() else ""
            missing = [m for m in missing_metrics(log) if m in metrics]
            if missing and attempt < tries - 1 and rc != 124:
                dropped += missing
                metrics = [m for m in metrics if m not in missing]
                echo(f"batch {n}: ncu does not know {', '.join(missing)}; dropped, retrying")
                continue
            break
        commands.append(shlex.join(argv))
        why = diagnose(log, rc)
        if why and ("ERR_NVGPUCTRPERM" in why or "no CUDA-capable" in why):
            raise IomodelError(why)
        try:
            rows = parse_csv(log, metrics)
        except IomodelError:
            rows = []
        manifest = json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
        for r in rows:
            if r.tag == FLUSH_TAG:
                flushes.append({"batch": n, "run": "full", "kernel": r.record.name,
                                "dram_write_bytes": r.record.value("dram__bytes_write.sum")})
        if not rows and not manifest and rc != 124:
            tail = " | ".join(log.strip().splitlines()[-3:]) if log.strip() else f"exit status {rc}"
            raise IomodelError(f"Nsight Compute failed on batch {n} ({why or tail}): fix that and rerun")
        batch_results = assemble(batch, manifest, rows)
        if sweep.dram_pass and rc != 124:
            dram_shapes, dram_manifest, dram_log = batch_files(work, n, dram=True)
            ran = pinned_configs(Measurement(kind="ncu", created="", command="", shapes=batch_results))
            dram_batch = [replace(s, config=ran[s.id]) if s.id in ran else s for s in batch]
            dram_shapes.write_text(json.dumps([s.to_dict() for s in dram_batch]))
            child2 = child_command(python, dram_shapes, dram_manifest)
            argv2 = build_command(ncu_path, child2, dram_log, list(DRAM_PASS_METRICS), sweep.cache_control,
                                  sweep.clock_control)
            left = None if budget_s is None else max(1.0, budget_s - (time.time() - t_start))
            rc2 = run(argv2, left)
            commands.append(shlex.join(argv2))
            try:
                dram_rows = parse_csv(dram_log.read_text() if dram_log.is_file() else "", list(DRAM_PASS_METRICS))
            except IomodelError:
                dram_rows = []
            manifest2 = json.loads(dram_manifest.read_text()) if dram_manifest.is_file() else {}
            for r in dram_rows:
                if r.tag == FLUSH_TAG:
                    flushes.append({"batch": n, "run": "dram", "kernel": r.record.name,
                                    "dram_write_bytes": r.record.value("dram__bytes_write.sum")})
            merge_dram_pass(batch_results, assemble(dram_batch, manifest2, dram_rows) if rc2 != 124 else [])
        if rc == 124:
            for r in batch_results:
                if r.error == "the profiled process never reached this shape":
                    r.error = "not run: the time budget was spent"
        results += batch_results
        ok = sum(1 for r in batch_results if r.error is None)
        echo(f"batch {n}: {ok}/{len(batch)} shapes profiled in {time.time() - t0:.0f} s"
             + (" (killed: time budget)" if rc == 124 else ""))
        if save_to is not None:
            measurement().save(save_to)
    meas = measurement()
    if save_to is not None:
        meas.save(save_to)
    return meas


# ----------------------------------------------------------------------------------
# The profiled child process (runs on the GPU machine, under ncu)
# ----------------------------------------------------------------------------------


def _impl_call(impl: str, spec: LayerSpec, q: Any, k: Any, v: Any,
               pinned: dict[str, Any] | None = None) -> tuple[Callable[[], Any], Callable[[], dict | None]]:
    """The zero-argument call of one implementation, and a function giving its config.

    ``pinned`` (tiled only): ``KernelConfig`` fields to run instead of autotuning."""
    import torch

    state: dict[str, Any] = {}
    if impl == "tiled":
        from kernels.flash_attention import flash_attention
        from kernels.heuristics import KernelConfig

        kc = None
        if pinned:
            try:
                kc = KernelConfig(**{k_: pinned[k_] for k_ in CONFIG_KEYS if k_ in pinned})
            except TypeError as exc:
                raise IomodelError(f"pinned config {pinned} is not a KernelConfig ({exc}): pin a recorded config") from exc

        def call():
            o, lse, cfg = flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, return_config=True,
                                          config=kc)
            state["cfg"] = cfg
            return o

        def config():
            from dataclasses import asdict, is_dataclass

            cfg = state.get("cfg")
            return asdict(cfg) if is_dataclass(cfg) else (dict(cfg) if cfg is not None else None)

        return call, config
    if impl in ("baseline", "baseline-fp32"):
        from kernels.baseline import eager_attention

        score = torch.float32 if impl == "baseline-fp32" else None
        return (lambda: eager_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, score_dtype=score)), (
            lambda: {"score_dtype": "fp32" if score is not None else spec.dtype}
        )
    if impl.startswith("sdpa-"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F

        backend = {
            "sdpa-flash": SDPBackend.FLASH_ATTENTION,
            "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
            "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
            "sdpa-math": SDPBackend.MATH,
        }[impl]
        mask = None
        is_causal = spec.causal
        if spec.causal and spec.causal_align == "bottom-right" and spec.seqlen_q != spec.seqlen_k:
            from torch.nn.attention.bias import causal_lower_right

            mask, is_causal = causal_lower_right(spec.seqlen_q, spec.seqlen_k), False

        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                                      enable_gqa=spec.heads != spec.kv_heads)

        return call, (lambda: {"backend": impl})
    raise IomodelError(f"unknown implementation {impl!r}: use one of {', '.join(IMPLS)}")


def run_child(shapes_file: str, manifest_file: str, device: str = "cuda") -> int:
    """Body of the profiled process: one warm-up and one profiled, NVTX-tagged call per shape.

    Writes ``manifest_file``: shape id -> ``{"config": ..., "error": ...}``. A shape that
    fails (out of memory, unsupported by a backend) records its error and the run goes on.

    Args:
        shapes_file: JSON list of :class:`SweepShape` dicts.
        manifest_file: where to write the manifest (rewritten after every shape).
        device: ``cuda`` (under ncu); ``cpu`` runs the same calls without the profiler
            region and NVTX (tests, with ``TRITON_INTERPRET=1``).

    Returns:
        process exit status (0 when the loop finished, even if some shapes failed).
    """
    import torch

    shapes = [SweepShape.from_dict(d) for d in json.loads(Path(shapes_file).read_text())]
    manifest: dict[str, dict[str, Any]] = {}
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    if gpu:
        # Sacrificial first profiled kernel: the first kernel Nsight Compute profiles in a fresh
        # process finds 1.5-3.3 MiB of dirty lines in L2 that are not its own and writes them back
        # (H200, 2026-11-29: in every single-pass receipt the decode shapes flagged with more DRAM
        # writes than L2 writes were exactly the first shape of their batch, and the first-of-batch
        # prefill b4-h12 q9000 / b1-h16 q32768 wrote 1.6 / 3.3 MiB more than in runs where they were
        # not first). A 512 MiB read, tagged FLUSH_TAG and left out of every shape, absorbs them.
        try:
            scratch = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=dev)
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            torch.cuda.nvtx.range_push(f"{NVTX_PREFIX}{FLUSH_TAG}@")
            scratch.sum()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            del scratch
        except Exception as exc:  # the shapes still run; the log says the first one may carry residue
            try:
                torch.cuda.profiler.stop()
            except Exception:
                pass
            print(f"[iomodel child] sacrificial first kernel failed ({type(exc).__name__}: {exc}); the first "
                  "shape's DRAM writes may include dirty lines that are not its own", flush=True)
        torch.cuda.empty_cache()
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    for s in shapes:
        sp = s.spec
        entry: dict[str, Any] = {"config": None, "error": None}
        q = k = v = None
        try:
            torch.manual_seed(s.seed)
            dt = dtypes[sp.dtype]
            q = torch.randn(sp.batch, sp.heads, sp.seqlen_q, sp.head_dim, device=dev, dtype=dt)  # (B, H, N_q, d)
            k = torch.randn(sp.batch, sp.kv_heads, sp.seqlen_k, sp.head_dim, device=dev, dtype=dt)  # (B, H_kv, N_k, d)
            v = torch.randn_like(k)  # (B, H_kv, N_k, d)
            call, config = _impl_call(s.impl, sp, q, k, v, s.config)
            call()  # warm-up: compilation and autotuning, outside the profiled region
            if gpu:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
                torch.cuda.nvtx.range_push(f"{NVTX_PREFIX}{s.id}@")
            call()
            if gpu:
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
            entry["config"] = config()
        except Exception as exc:  # recorded per shape; the batch goes on
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            if gpu:
                try:
                    torch.cuda.profiler.stop()
                except Exception:
                    pass
        finally:
            del q, k, v
            if gpu:
                torch.cuda.empty_cache()
        manifest[s.id] = entry
        Path(manifest_file).write_text(json.dumps(manifest, indent=1))
        print(f"[iomodel child] {s.id}: {'ok' if entry['error'] is None else entry['error']}", flush=True)
    return 0


def summary_lines(meas: Measurement) -> list[str]:
    """A short plain-text table of a GPU measurement (one line per shape; bytes in MiB)."""
    mib = 2**20
    out = [f"{'shape':58s} {'kern':>4s} {'DRAM rd MiB':>12s} {'DRAM wr MiB':>12s} {'L2 rd MiB':>11s} {'L2 wr MiB':>10s} {'us':>9s}"]
    for s in meas.shapes:
        if s.error:
            out.append(f"{s.id:58s} error: {s.error[:70]}")
            continue

        def f(q: str, scale: float = mib) -> str:
            v = s.quantity(q)
            return "-" if v is None else f"{v / scale:.1f}"

        out.append(f"{s.id:58s} {len(s.kernels):4d} {f('dram_read_bytes'):>12s} {f('dram_write_bytes'):>12s} "
                   f"{f('l2_read_bytes'):>11s} {f('l2_write_bytes'):>10s} {f('duration_s', 1e-6):>9s}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry points that need neither typer nor sympy (for the GPU machine).

    ``python -m iomodel.measure.ncu profile SWEEP.toml OUT.json [--batch-size N] [--impl NAME ...]
    [--budget-s SECONDS] [--ncu PATH] [--pin RESULT.json]`` profiles a sweep (as ``iomodel validate``), saving
    after every batch, and prints a short table;
    ``python -m iomodel.measure.ncu child SHAPES.json MANIFEST.json`` is the profiled process.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 3 and args[0] == "child":
        return run_child(args[1], args[2])
    if len(args) >= 3 and args[0] == "profile":
        sweep_file, out_file, rest = args[1], args[2], args[3:]
        impls: list[str] = []
        budget: float | None = None
        pin_file: str | None = None
        try:
            sweep = load_sweep(sweep_file)
            while rest:
                flag = rest.pop(0)
                if flag == "--batch-size" and rest:
                    sweep.batch_size = int(rest.pop(0))
                elif flag == "--impl" and rest:
                    impls.append(rest.pop(0))
                elif flag == "--ncu" and rest:
                    os.environ["NCU"] = rest.pop(0)
                elif flag == "--budget-s" and rest:
                    budget = float(rest.pop(0))
                elif flag == "--pin" and rest:
                    pin_file = rest.pop(0)
                else:
                    raise IomodelError(f"unknown option {flag!r}: use --batch-size N, --impl NAME, --ncu PATH, "
                                       "--budget-s S, --pin RESULT.json")
            if impls:
                sweep.shapes = [s for s in sweep.shapes if s.impl in impls]
            command = shlex.join([Path(sys.executable).name, "-m", "iomodel.measure.ncu", *args])
            pin = pinned_configs(Measurement.load(pin_file)) if pin_file else None
            if pin is not None:
                check_pin(sweep, pin, pin_file)
            meas = profile(sweep, command=command, echo=lambda line: print(line, flush=True),
                           budget_s=budget, save_to=out_file, pin=pin, pin_source=pin_file or "")
        except IomodelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print("\n".join(summary_lines(meas)))
        print(f"wrote {out_file}")
        return 0
    print("usage: python -m iomodel.measure.ncu profile SWEEP.toml OUT.json [--batch-size N] [--impl NAME] "
          "[--budget-s S] [--ncu PATH] [--pin RESULT.json]\n"
          "       python -m iomodel.measure.ncu child SHAPES.json MANIFEST.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "CsvKernel",
    "DEFAULT_METRICS",
    "INSTEAD",
    "NVTX_PREFIX",
    "FLUSH_TAG",
    "Sweep",
    "SweepShape",
    "assemble",
    "build_command",
    "check_gpu",
    "diagnose",
    "environment",
    "expected_kernels",
    "find_ncu",
    "load_sweep",
    "missing_metrics",
    "parse_csv",
    "parse_sweep",
    "profile",
    "run_child",
    "summary_lines",
]
