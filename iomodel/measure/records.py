"""Measurement records: what was measured, on what, with which command; JSON in and out.

A :class:`Measurement` is one run of ``iomodel validate`` (Nsight Compute on a GPU) or of
the interpreter counter (CPU). It holds the environment (device, driver, torch, triton
and ncu versions, date, the exact command) and one :class:`ShapeMeasurement` per
(shape, implementation): the :class:`~iomodel.spec.LayerSpec`, the kernel configuration
the launcher reported, and either the Nsight Compute metrics of every profiled kernel
(:class:`KernelRecord`) or the interpreter's per-tensor ``SRAM_fill`` counts.

Levels and the metrics that measure them (:data:`~iomodel.measure.metrics.QUANTITY_METRICS`; Nsight Compute Kernel
Profiling Guide, "Metrics Reference" / "Memory Chart"):

* **HBM** (device memory): ``dram__bytes_read.sum`` and ``dram__bytes_write.sum``, the
  bytes the DRAM controllers read and wrote while the kernel ran. Lines the kernel leaves
  dirty in L2 when it ends are not in ``dram__bytes_write`` (L2 is write-back).
* **L2, requests from the SMs** (compared with the model's ``SRAM_fill`` level, the bytes
  the kernel's loads and stores ask for): ``lts__t_sectors_srcunit_tex_op_read.sum`` and
  ``lts__t_sectors_srcunit_tex_op_write.sum``, L2 tag lookups of 32-byte sectors whose
  source unit is TEX (the SM's L1/TEX unit, through which global loads, stores, cp.async
  and TMA requests travel), times 32 bytes per sector.
* **L2, all traffic** (reported, not compared): ``lts__t_bytes.sum``, every byte looked up
  in L2 from any source (SMs, the other L2 partition over the L2 fabric, copy engines);
  ``lts__t_sectors_op_read.sum`` / ``..._op_write.sum`` (read / write lookups from any
  source) and ``lts__t_sectors_srcunit_ltcfabric.sum`` (lookups arriving from the other L2
  partition) are kept to tell TMA and fabric traffic apart (``iomodel reconcile --l2-source all``
  compares the any-source read/write lookups instead of the TEX ones).

Units in the records: metric values are kept in the unit Nsight Compute printed (the
``units`` dict says which); :meth:`ShapeMeasurement.quantity` converts to bytes / seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from iomodel.errors import IomodelError
from iomodel.measure.metrics import OCCUPANCY_METRICS, QUANTITY_METRICS, UNIT_SCALE
from iomodel.spec import LayerSpec, Tiling

#: Format tag written into every record file.
SCHEMA = "iomodel.measurement/1"

#: Implementations a sweep can measure: the bundled kernel, the eager chain (scores in the
#: input dtype / in fp32) and PyTorch SDPA pinned to one backend.
IMPLS = ("tiled", "baseline", "baseline-fp32", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")


def _scale(unit: str) -> float:
    key = (unit or "").strip().lower()
    if key not in UNIT_SCALE:
        raise IomodelError(f"Nsight Compute unit {unit!r} is not understood: rerun with --print-units base")
    return UNIT_SCALE[key]


@dataclass
class KernelRecord:
    """One profiled kernel launch.

    Attributes:
        name: kernel name as Nsight Compute printed it (demangled function name).
        metrics: metric name -> value in ``units[name]`` (None where ncu printed n/a).
        units: metric name -> unit string (``byte``, ``sector``, ``nsecond`` ...).
        grid: grid size as printed, e.g. ``"(32, 64, 1)"``.
        block: block size as printed, e.g. ``"(256, 1, 1)"``.
    """

    name: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    grid: str = ""
    block: str = ""

    def value(self, metric: str) -> float | None:
        """A metric converted to base units (bytes for byte/sector metrics, seconds for times)."""
        v = self.metrics.get(metric)
        if v is None:
            return None
        return v * _scale(self.units.get(metric, ""))

    def quantity(self, quantity: str) -> float | None:
        """The first available metric of :data:`~iomodel.measure.metrics.QUANTITY_METRICS` for
        ``quantity``, in base units (bytes or seconds).

        Raises:
            KeyError: ``quantity`` is not a key of that table.
            IomodelError: the metric's unit is not understood.
        """
        for m in QUANTITY_METRICS[quantity]:
            if self.metrics.get(m) is not None:
                return self.value(m)
        return None

    def programs_per_sm(self) -> int | None:
        """Programs (CTAs) one SM runs at once: the minimum of the occupancy limits, if recorded."""
        vals = [self.metrics.get(m) for m in OCCUPANCY_METRICS]
        vals = [v for v in vals if v is not None and v > 0]
        return int(min(vals)) if vals else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.name, "grid": self.grid, "block": self.block, "metrics": self.metrics, "units": self.units}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "KernelRecord":
        """Inverse of :meth:`to_dict`."""
        return cls(name=d["name"], metrics=dict(d.get("metrics", {})), units=dict(d.get("units", {})),
                   grid=d.get("grid", ""), block=d.get("block", ""))


@dataclass
class ShapeMeasurement:
    """The measurement of one implementation on one shape.

    Attributes:
        id: unique id of the (shape, implementation) in its record.
        impl: ``tiled`` (the bundled kernel), ``baseline`` / ``baseline-fp32`` (the eager
            chain of ``kernels/baseline.py`` with scores in the input dtype / in fp32), or
            ``sdpa-<backend>`` (PyTorch SDPA forced to one backend).
        spec: the layer call.
        config: the configuration the launcher reported (``KernelConfig`` fields:
            block_m, block_n, num_warps, num_stages, path, num_splits, heads_per_program).
        kernels: Nsight Compute records of the profiled kernels, in launch order.
        sram_fill: interpreter counts: tensor -> ``{"read_bytes", "write_bytes"}`` (bytes).
        error: why this shape has no data (a message), else None.
    """

    id: str
    impl: str
    spec: LayerSpec
    config: dict[str, Any] | None = None
    kernels: list[KernelRecord] = field(default_factory=list)
    sram_fill: dict[str, dict[str, int]] | None = None
    error: str | None = None

    def quantity(self, quantity: str) -> float | None:
        """Sum over the profiled kernels of one quantity (bytes or seconds); None if unmeasured."""
        vals = [k.quantity(quantity) for k in self.kernels]
        if not vals or any(v is None for v in vals):
            return None
        return float(sum(vals))  # type: ignore[arg-type]

    def tiling(self) -> Tiling | None:
        """The :class:`~iomodel.spec.Tiling` the kernel ran, from :attr:`config` (None if absent)."""
        if not self.config:
            return None
        c = self.config
        return Tiling(
            block_m=int(c["block_m"]),
            block_n=int(c["block_n"]),
            num_stages=int(c.get("num_stages", 2)),
            num_splits=int(c.get("num_splits", 1)),
            heads_per_program=int(c.get("heads_per_program", 1)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the spec without its derived ``pass`` key)."""
        spec = self.spec.to_dict()
        spec.pop("pass", None)
        return {
            "id": self.id,
            "impl": self.impl,
            "spec": spec,
            "config": self.config,
            "kernels": [k.to_dict() for k in self.kernels],
            "sram_fill": self.sram_fill,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ShapeMeasurement":
        """Inverse of :meth:`to_dict`; the LayerSpec validates itself (IomodelError on bad fields)."""
        spec = dict(d["spec"])
        spec.pop("pass", None)
        return cls(
            id=d["id"],
            impl=d["impl"],
            spec=LayerSpec(**spec),
            config=d.get("config"),
            kernels=[KernelRecord.from_dict(k) for k in d.get("kernels", [])],
            sram_fill=d.get("sram_fill"),
            error=d.get("error"),
        )


@dataclass
class Measurement:
    """One measurement run: environment, settings and per-shape results.

    Attributes:
        kind: ``ncu`` (Nsight Compute on a GPU) or ``interpreter`` (counted loads, CPU).
        created: ISO-8601 UTC date and time of the run.
        command: the exact command line that produced the record.
        environment: versions and device (device, driver, cuda, torch, triton, ncu, python).
        hardware: the :class:`~iomodel.spec.hardware.Hardware` of the device, as a dict.
        settings: how it was measured (metrics, cache_control, clock_control, sweep file,
            the ncu command of each batch, metrics dropped as unavailable).
        shapes: one entry per (shape, implementation).
    """

    kind: str
    created: str
    command: str
    environment: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    shapes: list[ShapeMeasurement] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, tagged with :data:`SCHEMA`."""
        return {
            "schema": SCHEMA,
            "kind": self.kind,
            "created": self.created,
            "command": self.command,
            "environment": self.environment,
            "hardware": self.hardware,
            "settings": self.settings,
            "shapes": [s.to_dict() for s in self.shapes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "the record") -> "Measurement":
        """Rebuild a record from its JSON form.

        Raises:
            IomodelError: the schema tag is missing or different, or a shape is malformed.
        """
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise IomodelError(f"{source} is not an iomodel measurement ({SCHEMA}): pass a file written by iomodel validate")
        try:
            shapes = [ShapeMeasurement.from_dict(s) for s in d.get("shapes", [])]
        except (KeyError, TypeError) as exc:
            raise IomodelError(f"{source} has a malformed shape entry ({exc}): regenerate it with iomodel validate") from None
        return cls(
            kind=d.get("kind", ""),
            created=d.get("created", ""),
            command=d.get("command", ""),
            environment=dict(d.get("environment", {})),
            hardware=d.get("hardware"),
            settings=dict(d.get("settings", {})),
            shapes=shapes,
        )

    def save(self, path: str | Path) -> Path:
        """Write the record as indented JSON (creating parent folders); returns the path.

        Raises:
            IomodelError: the file or its folder cannot be written.
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.to_dict(), indent=1, default=_json_default) + "\n")
        except OSError as exc:
            raise IomodelError(f"cannot write {path} ({exc.strerror or exc}): pass a writable path to --out") from None
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Measurement":
        """Read a record written by :meth:`save`.

        Raises:
            IomodelError: the file is missing, not JSON, or not a measurement record.
        """
        path = Path(path)
        if path.is_dir():
            raise IomodelError(f"measurement file {str(path)!r} is a directory: pass the JSON written by iomodel validate")
        if not path.is_file():
            raise IomodelError(f"measurement file {str(path)!r} does not exist: pass the JSON written by iomodel validate")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IomodelError(f"measurement file {str(path)!r} is not valid JSON ({exc}): regenerate it") from None
        return cls.from_dict(data, source=f"measurement file {str(path)!r}")

    def select(self, impls: Iterable[str] | None = None) -> list[ShapeMeasurement]:
        """The shapes of the given implementations (all if None), in record order."""
        wanted = None if impls is None else set(impls)
        return [s for s in self.shapes if wanted is None or s.impl in wanted]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def expected_kernels(impl: str, spec: LayerSpec, config: dict[str, Any] | None) -> int | None:
    """Kernels one call of the bundled kernel launches: 2 for split-KV decode (the split
    kernel and its combine kernel), 4 for a forward + backward step, else 1; None for other
    implementations or without a config."""
    if impl != "tiled" or not config:
        return None
    if spec.backward:  # the prefill forward, then D = rowsum(dO ∘ O), dK/dV and dQ (kernels/backward.py)
        return 4
    return 2 if spec.phase == "decode" and int(config.get("num_splits", 1)) > 1 else 1


def shape_id(spec: LayerSpec, impl: str) -> str:
    """A readable unique id of a (shape, implementation), e.g. ``b1-h32-kv8-d128-bf16-q4096-k4096-tl-tiled``
    (``-bwd`` appended for a forward + backward step).

    The mask part is ``nc`` (not causal), ``tl`` (causal top-left) or ``br`` (causal bottom-right).
    """
    mask = "nc" if not spec.causal else ("tl" if spec.causal_align == "top-left" else "br")
    return (
        f"b{spec.batch}-h{spec.heads}-kv{spec.kv_heads}-d{spec.head_dim}-{spec.dtype}"
        f"-q{spec.seqlen_q}-k{spec.seqlen_k}-{mask}-{impl}" + ("-bwd" if spec.backward else "")
    )


__all__ = [
    "IMPLS",
    "KernelRecord",
    "Measurement",
    "SCHEMA",
    "ShapeMeasurement",
    "expected_kernels",
    "shape_id",
]
