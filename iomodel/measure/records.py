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
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from iomodel import jsonvalues as jv
from iomodel.errors import IomodelError
from iomodel.measure.metrics import OCCUPANCY_METRICS, QUANTITY_METRICS, UNIT_KINDS, UNIT_SCALE
from iomodel.cache.physical import RECEIPTS as L2_RECEIPTS
from iomodel.spec.hardware import HARDWARE, RESIDENT_LIMITS, preset_names, preset_of_device

#: The most resident programs per SM of any compute capability iomodel knows (an occupancy limit above it is damage).
MOST_BLOCKS_PER_SM = max(blocks for blocks, _ in RESIDENT_LIMITS.values())
from iomodel.spec import LayerSpec, Tiling

#: Format tag written into every record file.
SCHEMA = "iomodel.measurement/1"
#: What made a record: Nsight Compute counters on a GPU, or loads counted by the Triton interpreter.
KINDS = ("ncu", "interpreter")

#: Implementations a sweep can measure: the bundled kernel, the eager chain (scores in the
#: input dtype / in fp32) and PyTorch SDPA pinned to one backend.
IMPLS = ("tiled", "baseline", "baseline-fp32", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")

#: The end of every message about a damaged record.
FIX = "regenerate the record with iomodel validate, or correct that value"
#: The ``settings`` key of a record's seal (:func:`record_digest`), written by :meth:`Measurement.save` and checked by
#: :meth:`Measurement.from_dict`: a value edited by hand that keeps every grid (the alignment in spec and id, a
#: backward tile the grids do not show) would otherwise reconcile as a model error. A checksum, not a signature:
#: code that loads a sealed record, changes it and saves it writes a new seal.
SEAL_KEY = "record_sha256"
#: The day records began to be sealed (:data:`SEAL_KEY`): a record read without a seal was written before it, or
#: had its seal dropped.
SEALED_SINCE = "2026-12-07"
#: Integers a float is read as in the seal (|x| < 2^53: exactly representable both ways), so a tool that rewrites
#: ``12.0`` as ``12`` does not break it; a value beyond it that such a tool rounds is an edit.
_SEAL_EXACT = 2**53


def _seal_form(value: Any) -> Any:
    """``value`` (JSON) with every integral float below :data:`_SEAL_EXACT` an int (:func:`record_digest`)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _SEAL_EXACT:
        return int(value)
    if isinstance(value, dict):
        return {k: _seal_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_seal_form(v) for v in value]
    return value


def record_digest(data: dict[str, Any]) -> str:
    """The seal of a record's JSON form ``data`` (a dict as :meth:`Measurement.to_dict` gives and ``json`` reads
    back): the sha256 (hex) of its JSON with sorted keys, no whitespace and ASCII escapes, integral floats written as
    integers, ``settings`` without the seal itself (:data:`SEAL_KEY`). Any change of a value, key or shape changes it;
    indentation, key order and ``12.0`` written as ``12`` do not.

    Raises:
        TypeError: ``data`` is not JSON (a dict whose keys are not all strings, a value ``json`` cannot write).
    """
    import hashlib

    body = dict(data)
    settings = body.get("settings")
    if isinstance(settings, dict) and SEAL_KEY in settings:
        body["settings"] = {k: v for k, v in settings.items() if k != SEAL_KEY}
    text = json.dumps(_seal_form(body), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


#: The largest metric value a record may hold (2^63: a 64-bit counter's range; 8 EiB of bytes, 292 years of
#: nanoseconds): a larger one is a corrupt record, reconciled as "867361737988.4 EiB" before.
METRIC_MAX = 2**63
#: What a metric value must be (ncu prints n/a for a metric it could not collect: null).
METRIC_VALUE = "a finite number, 0 or more (or null where ncu printed n/a)"
#: Kernel-configuration fields that are counts (tiles, warps, stages, splits, heads).
CONFIG_COUNTS = ("block_m", "block_n", "num_warps", "num_stages", "num_splits", "heads_per_program")
#: LayerSpec fields of a record and what each must be (the spec then validates itself).
SPEC_COUNTS = ("batch", "heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k")
SPEC_FLAGS = ("causal", "backward")
SPEC_WORDS = ("dtype", "causal_align", "phase", "name")
#: Sliding-window sides of a record's spec (tokens; null or absent: unbounded).
SPEC_WINDOW = ("window_left", "window_right")
#: Spec fields every record holds (``LayerSpec.to_dict`` always writes them): a record without one is damaged, not
#: a default (a missing ``dtype`` was read as bf16, a missing ``causal`` as non-causal: a fresh user's finding,
#: 2026-12-06; ``phase`` and a non-causal window's ``causal_align`` are not in the id, so only this catches them). The
#: window sides and ``page_size`` are written only when set, so their absence means unbounded and unpaged, which
#: :func:`shape_id` then cross-checks.
SPEC_REQUIRED = ("dtype", "causal", "causal_align", "phase", "backward")
#: An id in :func:`shape_id`'s form (``b1-h32-kv8-d128-...``): such an id must agree with its spec.
_SHAPE_ID_FORM = re.compile(r"b\d+-h\d+-kv\d+-d\d+-[a-z0-9_]+-q\d+-k\d+-")
#: Hardware fields of a record that are positive numbers (bytes, bytes/s, SMs).
HARDWARE_NUMBERS = ("hbm_bandwidth", "hbm_bytes", "l2_bytes", "smem_per_sm", "smem_per_block", "num_sms")
#: Those of them that count whole things (bytes, SMs).
HARDWARE_COUNTS = ("hbm_bytes", "l2_bytes", "smem_per_sm", "smem_per_block", "num_sms")


#: Parts of the metric names whose values need a unit to become bytes or seconds (``dram__bytes_read.sum``: byte,
#: ``lts__t_sectors_*``: sector, ``gpu__time_duration.sum``: nsecond), each with the kind of unit it must carry
#: (:data:`iomodel.measure.metrics.UNIT_KINDS`: a byte count in milliseconds or sectors would be read at another
#: scale, 1e-3 or 32 times).
UNIT_BEARING = {"bytes": "byte", "sectors": "sector", "time_duration": "time"}
#: How a message names each kind.
UNIT_KIND_WORDS = {"bytes": "bytes", "sectors": "32-byte sectors", "time_duration": "time"}


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
    def from_dict(cls, d: dict[str, Any], where: str = "kernel") -> "KernelRecord":
        """Inverse of :meth:`to_dict`, checking every field.

        Args:
            d: the JSON object.
            where: the file, shape and kernel, for messages.

        Raises:
            IomodelError: one line naming the field: a name that is not a string, a metric
                value that is not a finite number >= 0 or null, a unit that is not a string or
                not one :data:`~iomodel.measure.metrics.UNIT_SCALE` knows.
        """
        jv.mapping(d, where, fix=FIX)
        name = jv.string(jv.field(d, "name", where, fix=FIX), f"{where}.name", fix=FIX)
        metrics = jv.mapping(d.get("metrics", {}), f"{where}.metrics", fix=FIX)
        units = jv.mapping(d.get("units", {}), f"{where}.units", fix=FIX)
        for m, v in metrics.items():
            jv.number(v, f"{where}.metrics[{m!r}]", what=METRIC_VALUE, allow_none=True, fix=FIX)
            if v is not None and v > METRIC_MAX:  # no counter of one launch comes near: a corrupt record
                raise IomodelError(f"{where}.metrics[{m!r}] is {v!r}, above {METRIC_MAX:.3g} (2^63), more than any "
                                   f"counter of one kernel launch can hold: {FIX}")
            if m in OCCUPANCY_METRICS and v is not None and not (v == int(v) and v >= 1):
                raise IomodelError(f"{where}.metrics[{m!r}] is {v!r}: an occupancy limit is a whole number of programs "
                                   f"per SM, 1 or more: {FIX}")
        limits = {m: v for m, v in metrics.items() if m in OCCUPANCY_METRICS and v is not None}
        if limits and min(limits.values()) > MOST_BLOCKS_PER_SM:  # one limit may exceed it; the least may not
            raise IomodelError(f"{where}.metrics: the least occupancy limit is {min(limits.values())!r} "
                               f"({min(limits, key=limits.get)}), above the {MOST_BLOCKS_PER_SM} resident programs per "
                               f"SM of any GPU iomodel knows (iomodel.spec.hardware.RESIDENT_LIMITS): {FIX}")
        for m, u in units.items():
            jv.string(u, f"{where}.units[{m!r}]", fix=FIX)
            if u.strip().lower() not in UNIT_SCALE:
                raise IomodelError(f"{where}.units[{m!r}] is {u!r}, a unit iomodel does not know "
                                   f"(known: {', '.join(k for k in UNIT_SCALE if k)}): {FIX}")
        for m, v in metrics.items():  # a byte, sector or time without its unit would be read at scale 1
            if v is not None and any(part in m for part in UNIT_BEARING) and not str(units.get(m, "")).strip():
                raise IomodelError(f"{where}.units has no unit for {m!r} ({v!r}): a byte, sector or time count is "
                                   f"read through its unit (a sector is 32 bytes): {FIX}")
            kind = next((k for k in UNIT_BEARING if k in m), None)
            allowed = UNIT_KINDS[UNIT_BEARING[kind]] if kind is not None else ()
            if kind is not None and m in units and units[m].strip().lower() not in allowed:
                raise IomodelError(f"{where}.units[{m!r}] is {units[m]!r}, not a unit of {UNIT_KIND_WORDS[kind]} "
                                   f"({', '.join(sorted(allowed))}): the value would be read at another scale: {FIX}")
        grid = jv.string(d.get("grid", ""), f"{where}.grid", fix=FIX)
        block = jv.string(d.get("block", ""), f"{where}.block", fix=FIX)
        return cls(name=name, metrics=dict(metrics), units=dict(units), grid=grid, block=block)


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
            block_m, block_n, num_warps, num_stages, path, num_splits, heads_per_program, and since
            issue 14 fused_combine; absent: the two-launch split-KV decode).
        kernels: Nsight Compute records of the profiled kernels, in launch order.
        sram_fill: interpreter counts: tensor -> ``{"read_bytes", "write_bytes"}`` (bytes).
        error: why this shape has no data (a message), else None.
        seqlens: a ragged (varlen) batch: one ``(N_q, N_k)`` pair per sequence (tokens); ``spec``
            is then the batch padded to its longest sequence (:meth:`RaggedSpec.padded
            <iomodel.spec.ragged.RaggedSpec.padded>`). None for a dense batch.
    """

    id: str
    impl: str
    spec: LayerSpec
    config: dict[str, Any] | None = None
    kernels: list[KernelRecord] = field(default_factory=list)
    sram_fill: dict[str, dict[str, int]] | None = None
    error: str | None = None
    seqlens: tuple[tuple[int, int], ...] | None = None

    def ragged(self) -> Any:
        """The :class:`~iomodel.spec.ragged.RaggedSpec` of a ragged record (None for a dense one)."""
        return ragged_spec(self.spec, self.seqlens)

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
        bwd = c.get("backward") or {}  # the BackwardConfig of a training step (kernels/heuristics.py)
        back = {f: int(bwd[k]) for f, k in (("bwd_block_m", "block_m"), ("bwd_block_n", "block_n"),
                                             ("dq_block_m", "dq_block_m"), ("dq_block_n", "dq_block_n"),
                                             ("preprocess_block_m", "preprocess_block_m"),
                                             ("bwd_group_splits", "group_splits")) if k in bwd}  # absent S: 1
        if "dkdv_order" in bwd:  # absent: the heads-outer loop, the only one before 2026-12-04
            back["bwd_dkdv_order"] = str(bwd["dkdv_order"])
        if "dq_tile_order" in bwd:  # absent: query tiles first to last, the only order before 2026-12-05
            back["dq_tile_order"] = str(bwd["dq_tile_order"])
        if "dkdv_kernel" in bwd:  # absent: the Triton launch, the only one before 2026-12-05
            back["bwd_dkdv_kernel"] = str(bwd["dkdv_kernel"])
        return Tiling(block_m=int(c["block_m"]), block_n=int(c["block_n"]), num_stages=int(c.get("num_stages", 2)),
                      num_splits=int(c.get("num_splits", 1)), heads_per_program=int(c.get("heads_per_program", 1)),
                      fused_combine=bool(c.get("fused_combine", False)),  # absent: measured before the fused decode
                      **back)

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
            **({} if self.seqlens is None else {"seqlens": [list(p) for p in self.seqlens]}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "shape") -> "ShapeMeasurement":
        """Inverse of :meth:`to_dict`, checking every field the reconciliation reads.

        Args:
            d: the JSON object.
            where: the file and the shape (its id, or its index), for messages.

        Raises:
            IomodelError: one line naming the shape and the field: a missing ``id``, ``impl``
                or ``spec``; an ``impl`` not in :data:`IMPLS`; a spec field of the wrong type
                or that :class:`~iomodel.spec.LayerSpec` refuses; a configuration count that
                is not a positive integer; a kernel field (see :meth:`KernelRecord.from_dict`);
                interpreter counts that are not whole numbers of bytes, 0 or more.
        """
        jv.mapping(d, where, fix=FIX)
        sid = jv.name(jv.field(d, "id", where, fix=FIX), f"{where}: id", fix=FIX)
        impl = jv.string(jv.field(d, "impl", where, fix=FIX), f"{where}: impl", fix=FIX)
        if impl not in IMPLS:
            raise IomodelError(f"{where}: impl {impl!r} is not one iomodel measures ({', '.join(IMPLS)}): {FIX}")
        spec = dict(jv.mapping(jv.field(d, "spec", where, fix=FIX), f"{where}: spec", fix=FIX))
        spec.pop("pass", None)
        for k in SPEC_COUNTS:
            jv.number(jv.field(spec, k, f"{where}: spec", fix=FIX), f"{where}: spec.{k}", what="a positive integer",
                      positive=True, integer=True, fix=FIX)
        for k in SPEC_REQUIRED:
            jv.field(spec, k, f"{where}: spec", fix=FIX)
        for k in SPEC_FLAGS:
            if k in spec:
                jv.boolean(spec[k], f"{where}: spec.{k}", fix=FIX)
        for k in SPEC_WORDS:
            if k in spec:
                jv.string(spec[k], f"{where}: spec.{k}", fix=FIX)
        if spec.get("page_size") is not None:
            spec["page_size"] = jv.number(spec["page_size"], f"{where}: spec.page_size", what="a whole number of tokens per page",
                                          positive=True, integer=True, fix=FIX)
        for k in SPEC_WINDOW:
            if k in spec:
                spec[k] = jv.number(spec[k], f"{where}: spec.{k}", what="a whole number of tokens, 0 or more (null: unbounded)",
                          integer=True, allow_none=True, fix=FIX)
        try:
            layer = LayerSpec(**spec)
        except TypeError as exc:  # an unknown field
            raise IomodelError(f"{where}: spec has a field LayerSpec does not know ({exc}): {FIX}") from None
        except IomodelError as exc:
            raise IomodelError(f"{where}: spec: {exc}") from None
        config = jv.mapping(d.get("config"), f"{where}: config", allow_none=True, fix=FIX)
        for k in CONFIG_COUNTS:
            if config is not None and (k in config or (impl == "tiled" and k in ("block_m", "block_n"))):
                jv.number(config.get(k), f"{where}: config.{k}", what="a positive integer", positive=True,
                          integer=True, fix=FIX)
        if config is not None:
            _check_launch_fields(config, where)
        kernels = jv.array(d.get("kernels", []), f"{where}: kernels", fix=FIX)
        sram_fill = jv.mapping(d.get("sram_fill"), f"{where}: sram_fill", allow_none=True, fix=FIX)
        for t, v in (sram_fill or {}).items():
            jv.mapping(v, f"{where}: sram_fill[{t!r}]", fix=FIX)
            for k in ("read_bytes", "write_bytes"):
                jv.number(jv.field(v, k, f"{where}: sram_fill[{t!r}]", fix=FIX), f"{where}: sram_fill[{t!r}].{k}",
                          what="a whole number of bytes, 0 or more", integer=True, fix=FIX)
        seqlens = read_seqlens(d.get("seqlens"), layer, f"{where}: seqlens", FIX)
        _check_id_agrees(sid, layer, impl, seqlens, where, config)
        if impl == "tiled":  # a layer the bundled kernel refuses (an fp8 spec, HEAD_DIM 300) was not what it ran
            from iomodel.schedule.capabilities import kernel_refusal

            why = kernel_refusal(layer)
            if why is not None:
                raise IomodelError(f"{where}: impl 'tiled' but the bundled kernel does not run this spec ({why}): "
                                   f"{FIX}")
        return cls(
            id=sid,
            impl=impl,
            spec=layer,
            config=config,
            kernels=[KernelRecord.from_dict(k, f"{where}: kernels[{i}]") for i, k in enumerate(kernels)],
            sram_fill=sram_fill,
            error=jv.string(d.get("error"), f"{where}: error", allow_none=True, fix=FIX),
            seqlens=seqlens,
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
    #: The record's seal (``settings.record_sha256``, :func:`record_digest`): True read from a file whose seal holds,
    #: False read from one without a seal (written before :data:`SEALED_SINCE`, or its seal dropped: :meth:`save`
    #: keeps it unsealed), None built in memory (a run's record: :meth:`save` seals it).
    sealed: bool | None = field(default=None, compare=False)

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

        Every field the reconciliation reads is checked here, so a damaged record stops with
        one line naming the shape and the field, before anything is compared.

        Raises:
            IomodelError: the schema tag is missing or different; a ``kind`` not in :data:`KINDS`; a field of the wrong JSON
                type or out of range (see :meth:`ShapeMeasurement.from_dict`); two shapes with
                one id; a hardware entry whose sizes are not positive numbers, whose ``name`` is not a non-empty
                string, or (a profiled record, kind ``ncu``) whose preset (``hardware.name``, read as the predictions
                read it: :func:`iomodel.cache.params.hardware_preset`; a name of no preset too) or bracketed card is
                another GPU than ``environment.device`` (:func:`~iomodel.spec.hardware.preset_of_device`), or whose
                ``l2_bytes`` or ``num_sms`` is not the one the device reported (``environment.l2_bytes``,
                ``environment.sm_count``), whose ``hbm_bandwidth`` is not the device's preset's (``detect`` copies
                it), whose name is a preset's on a device of no preset, or whose L2 (either) is not the L2 of the
                device's preset where a card of
                that preset had its L2 read (:data:`iomodel.cache.physical.RECEIPTS`: the H200, the H100 SXM; a record
                relabelled as another GPU, name and device both edited; every committed profiled record holds, 69 on
                the H200 and H100); a profiled record without ``environment.device``;
                settings the
                reconciliation reads (``metrics``, ``dropped_metrics``, ``l2_model``,
                ``cache_control``, ``sweep_name``) of the wrong type; a seal (``settings.record_sha256``) that is not
                a string, or that does not match the record (:func:`record_digest`: edited since it was written), or
                a sealed ``d`` that is not JSON.
        """
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise IomodelError(f"{source} is not an iomodel measurement ({SCHEMA}): pass a file written by iomodel validate")
        words = {k: jv.string(d.get(k, ""), f"{source}: {k}", fix=FIX) for k in ("kind", "created", "command")}
        if words["kind"] not in KINDS:
            raise IomodelError(f"{source}: kind {words['kind']!r} is not a kind of measurement iomodel writes: use "
                               f"{' or '.join(repr(k) for k in KINDS)} (Nsight Compute counters or interpreter counts)")
        environment = jv.mapping(d.get("environment", {}), f"{source}: environment", fix=FIX)
        hardware = jv.mapping(d.get("hardware"), f"{source}: hardware", allow_none=True, fix=FIX)
        for k in HARDWARE_NUMBERS:
            if hardware is not None and k in hardware:
                jv.number(hardware[k], f"{source}: hardware.{k}", what="a positive number", positive=True, fix=FIX)
                if k in HARDWARE_COUNTS and hardware[k] != int(hardware[k]):
                    raise IomodelError(f"{source}: hardware.{k} must be a whole number, got {hardware[k]!r}: {FIX}")
        if hardware is not None and isinstance(hardware.get("smem_per_block"), (int, float)) and isinstance(
                hardware.get("smem_per_sm"), (int, float)) and hardware["smem_per_block"] > hardware["smem_per_sm"]:
            raise IomodelError(f"{source}: hardware.smem_per_block {hardware['smem_per_block']!r} is more than "
                               f"hardware.smem_per_sm {hardware['smem_per_sm']!r} (a block's shared memory is part of "
                               f"one SM's): {FIX}")
        if hardware is not None and "compute_capability" in hardware:
            cc = hardware["compute_capability"]
            if not (isinstance(cc, (list, tuple)) and len(cc) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                  and 0 <= x < 100 for x in cc)):
                raise IomodelError(f"{source}: hardware.compute_capability must be [major, minor] (e.g. [9, 0]), got "
                                   f"{jv.describe(cc)}: {FIX}")
        if hardware is not None:
            flops = jv.mapping(hardware.get("peak_flops", {}), f"{source}: hardware.peak_flops", fix=FIX)
            for dt, v in flops.items():
                jv.number(v, f"{source}: hardware.peak_flops[{dt!r}]", what="a positive number of FLOP/s",
                          positive=True, fix=FIX)
            device, preset = environment.get("device"), hardware.get("name")
            if not isinstance(preset, str) or not preset.strip():  # the predictions read their constants by it
                raise IomodelError(f"{source}: hardware.name must name the GPU (e.g. 'H200 (NVIDIA H200)'), got "
                                   f"{jv.describe(preset)}: {FIX}")
            profiled = words["kind"] == "ncu"  # interpreter counts do not depend on the GPU of the host
            if profiled and not (isinstance(device, str) and device.strip()):  # what the run saw: the checks need it
                raise IomodelError(f"{source}: environment.device must be the GPU the run saw (a string, e.g. 'NVIDIA "
                                   f"H200'), got {jv.describe(device)}: {FIX}")
            if profiled:  # a record predicted for another GPU than it ran on
                from iomodel.cache.params import card_of, hardware_preset  # the preset the predictions take

                ran, said, card = preset_of_device(device), hardware_preset(preset), card_of(preset)
                if card and card != device:
                    raise IomodelError(f"{source}: hardware.name {preset!r} names the card {card!r} but "
                                       f"environment.device is {device!r}: {FIX}")
                if ran is not None and said != ran:
                    raise IomodelError(
                        f"{source}: hardware.name {preset!r} is the {said} preset but environment.device {device!r} is "
                        f"an {ran}: the predictions would be for another GPU than the one measured: name it "
                        f"{f'{ran} ({device})'!r}, or {FIX}"
                        if said in HARDWARE else
                        f"{source}: hardware.name {preset!r} names no preset ({preset_names()}), so the predictions "
                        f"would take default L2 constants, but environment.device {device!r} is an {ran}: name it "
                        f"{f'{ran} ({device})'!r}, or {FIX}")
                if ran is None and said in HARDWARE:  # detect() names no preset for such a card (a GH200, a B200)
                    raise IomodelError(
                        f"{source}: hardware.name {preset!r} is the {said} preset but environment.device {device!r} is "
                        f"no preset's card ({preset_names()}): the predictions would be for another GPU than the one "
                        f"measured: drop the record's hardware entry and pass --hardware to reconcile, or {FIX}")
                bandwidth = hardware.get("hbm_bandwidth")  # detect() copies the preset's datasheet bandwidth
                if ran is not None and isinstance(bandwidth, (int, float)) and bandwidth != HARDWARE[ran].hbm_bandwidth:
                    raise IomodelError(
                        f"{source}: hardware.hbm_bandwidth {bandwidth:g} B/s is not the {ran}'s "
                        f"{HARDWARE[ran].hbm_bandwidth:g} B/s (environment.device {device!r}): the record names another "
                        f"GPU than the one measured: {FIX}")
            seen_l2 = environment.get("l2_bytes")
            if profiled and isinstance(seen_l2, (int, float)) and "l2_bytes" in hardware and seen_l2 != hardware["l2_bytes"]:
                raise IomodelError(f"{source}: hardware.l2_bytes {hardware['l2_bytes']!r} differs from the "
                                   f"environment.l2_bytes {seen_l2!r} the device reported: {FIX}")
            seen_sms = environment.get("sm_count")
            if (profiled and isinstance(seen_sms, (int, float)) and not isinstance(seen_sms, bool) and "num_sms" in hardware
                    and seen_sms != hardware["num_sms"]):
                raise IomodelError(f"{source}: hardware.num_sms {hardware['num_sms']!r} differs from the "
                                   f"environment.sm_count {seen_sms!r} the device reported: {FIX}")
            if profiled and ran is not None and ran in L2_RECEIPTS:  # name and device both edited: the L2 says which
                die = HARDWARE[ran]  # die ran, where a card of that preset had its L2 read (the H200's, the H100 SXM's)
                for field, value in (("hardware.l2_bytes", hardware.get("l2_bytes")), ("environment.l2_bytes", seen_l2)):
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and value != die.l2_bytes:
                        raise IomodelError(
                            f"{source}: environment.device {device!r} is an {ran}, whose L2 is {die.l2_bytes:,} bytes, "
                            f"but {field} is {value:,}: the record names another GPU than the one measured: {FIX}")
        settings = jv.mapping(d.get("settings", {}), f"{source}: settings", fix=FIX)
        _check_settings(settings, f"{source}: settings")
        sealed = SEAL_KEY in settings
        if sealed:
            drop = f"drop settings.{SEAL_KEY} (the record then reconciles as unsealed)"
            seal = jv.string(settings[SEAL_KEY], f"{source}: settings.{SEAL_KEY}", fix=f"restore it, or {drop}")
            try:
                digest = record_digest(d)
            except TypeError as exc:  # an in-memory dict that is not JSON (a key that is not a string)
                raise IomodelError(f"{source}: the record is not JSON ({exc}), so its seal cannot be checked: {drop}"
                                   ) from None
            if seal != digest:
                raise IomodelError(
                    f"{source}: its values are not the ones iomodel wrote (settings.{SEAL_KEY}, the sha256 of the "
                    f"record as written, no longer matches): it was edited since, or rewritten by a tool that changed "
                    f"a value. Restore the file iomodel wrote; for an edit you mean, {drop}")
        shapes, seen = [], set()
        for i, s in enumerate(jv.array(d.get("shapes", []), f"{source}: shapes", fix=FIX)):
            sid = s.get("id") if isinstance(s, dict) else None
            label = (sid if sid.isprintable() and sid and len(sid) <= jv.MAX_NAME_CHARS else f"shapes[{i}]") \
                if isinstance(sid, str) else f"shapes[{i}]"
            shape = ShapeMeasurement.from_dict(s, f"{source}, shape {label}")
            if shape.id in seen:
                raise IomodelError(f"{source}: shape id {shape.id!r} appears twice: {FIX}")
            seen.add(shape.id)
            shapes.append(shape)
        return cls(
            kind=words["kind"],
            created=words["created"],
            command=words["command"],
            environment=dict(environment),
            hardware=hardware,
            settings={k: v for k, v in settings.items() if k != SEAL_KEY},  # the seal is the file's: save writes it
            shapes=shapes,
            sealed=sealed,
        )

    def save(self, path: str | Path) -> Path:
        """Write the record as indented JSON (creating parent folders); returns the path. A run's record (built in
        memory) or one read sealed is written sealed: ``settings.record_sha256`` is :func:`record_digest` of what is
        written, so :meth:`load` refuses the file once a value in it is edited. One read unsealed stays unsealed
        (nothing vouches for its values).

        Raises:
            IomodelError: the file or its folder cannot be written.
        """
        from iomodel.paths import write_text  # whole or not at all

        data = json.loads(json.dumps(self.to_dict(), default=_json_default))  # as the file will read back
        if self.sealed is not False:
            data["settings"][SEAL_KEY] = record_digest(data)
        return write_text(path, json.dumps(data, indent=1) + "\n", "--out")

    @classmethod
    def load(cls, path: str | Path) -> "Measurement":
        """Read a record written by :meth:`save`.

        Raises:
            IomodelError: the file is missing, not JSON, or not a measurement record.
        """
        data = jv.read_json(path, "measurement file", "pass the JSON written by iomodel validate", "regenerate it")
        return cls.from_dict(data, source=f"measurement file {str(Path(path))!r}")

    def select(self, impls: Iterable[str] | None = None) -> list[ShapeMeasurement]:
        """The shapes of the given implementations (all if None), in record order."""
        wanted = None if impls is None else set(impls)
        return [s for s in self.shapes if wanted is None or s.impl in wanted]


def _check_settings(settings: dict[str, Any], where: str) -> None:
    """The settings the reconciliation reads: metric lists of strings, the L2 model's
    fraction (a number in (0, 1]) and source (a string), the cache control and sweep name.

    Raises:
        IomodelError: one of them of the wrong type, naming it.
    """
    for k in ("metrics", "dropped_metrics"):
        if k in settings:
            for i, m in enumerate(jv.array(settings[k], f"{where}.{k}", fix=FIX)):
                jv.string(m, f"{where}.{k}[{i}]", fix=FIX)
    l2 = jv.mapping(settings.get("l2_model"), f"{where}.l2_model", allow_none=True, fix=FIX) or {}
    if "l2_fraction" in l2:
        v = jv.number(l2["l2_fraction"], f"{where}.l2_model.l2_fraction", what="a number in (0, 1]", positive=True,
                      fix=FIX)
        if v > 1:
            raise IomodelError(f"{where}.l2_model.l2_fraction must be a number in (0, 1], got {v!r}: {FIX}")
    if "l2_source" in l2:
        jv.string(l2["l2_source"], f"{where}.l2_model.l2_source", fix=FIX)
    for k in ("cache_control", "sweep_name"):
        if k in settings:
            jv.string(settings[k], f"{where}.{k}", allow_none=True, fix=FIX)
    if settings.get("cache_control") is not None:  # ncu --cache-control: the model flushes between kernels for "all"
        from iomodel.measure.ncu import CACHE_CONTROLS

        jv.choice(settings["cache_control"], f"{where}.cache_control", CACHE_CONTROLS, fix=FIX)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def expected_kernels(impl: str, spec: LayerSpec, config: dict[str, Any] | None) -> int | None:
    """Kernels one call of the bundled kernel launches: 2 for split-KV decode with a separate
    combine kernel (``fused_combine`` false or absent: records measured before issue 14), 4 for a
    forward + backward step (5 when its dK/dV kernel split the GQA group,
    ``config["backward"]["group_splits"]`` > 1, adding its reduction), else 1 (the fused split-KV
    decode included); None for other implementations or without a config."""
    if impl != "tiled" or not config:
        return None
    if spec.backward:  # the prefill forward, then D = rowsum(dO ∘ O), dK/dV and dQ (kernels/backward.py)
        return 5 if int((config.get("backward") or {}).get("group_splits", 1)) > 1 else 4
    separate = not config.get("fused_combine", False)
    return 2 if spec.phase == "decode" and int(config.get("num_splits", 1)) > 1 and separate else 1


def ragged_spec(spec: LayerSpec, seqlens: tuple[tuple[int, int], ...] | None) -> Any:
    """The :class:`~iomodel.spec.ragged.RaggedSpec` of ``seqlens`` (``(N_q, N_k)`` pairs, tokens)
    over ``spec``'s heads, dtype and mask; None when ``seqlens`` is None.

    Raises:
        IomodelError: as :class:`~iomodel.spec.ragged.RaggedSpec` (no sequence, a length < 1,
            a backward or decode layer).
    """
    if seqlens is None:
        return None
    from iomodel.spec.ragged import RaggedSpec

    return RaggedSpec(spec, tuple(tuple(p) for p in seqlens))


#: Counts of a training step's ``config.backward`` (``kernels.heuristics.BackwardConfig``) the
#: model reads; absent ``group_splits`` means 1 (records before the dK/dV group split).
BACKWARD_COUNTS = ("block_m", "block_n", "dq_block_m", "dq_block_n", "preprocess_block_m", "group_splits")
#: Counts of ``config.backward`` every record written since the backward kernels existed carries (604 of 604 committed
#: training-step records) and the model's programs per SM reads: required, positive integers.
BACKWARD_REQUIRED = ("num_warps", "num_stages", "dq_num_warps", "dq_num_stages")


def _check_launch_fields(config: dict[str, Any], where: str) -> None:
    """The launch fields of a record's ``config`` the model reads, each its type or one line:
    ``path`` one of :data:`iomodel.schedule.capabilities.PATHS`, ``score_dtype`` a dtype iomodel knows,
    ``tile_order`` and ``grid_order`` names the kernel knows, ``fused_combine`` a boolean, and
    ``backward`` a mapping whose :data:`BACKWARD_COUNTS` are positive integers and whose
    ``dkdv_order`` (if any) is one of :data:`iomodel.spec.layer.DKDV_ORDERS`, ``dq_tile_order`` (if any) one of
    :data:`iomodel.schedule.launch.TILE_ORDERS`, ``dkdv_kernel`` (if any) one of
    :data:`iomodel.schedule.capabilities.DKDV_KERNELS`.

    Raises:
        IomodelError: a field of the wrong type or value, naming it.
    """
    from iomodel.schedule.launch import GRID_ORDERS, TILE_ORDERS, head_group_of
    from iomodel.schedule.capabilities import DKDV_KERNELS
    from iomodel.spec.layer import DKDV_ORDERS

    from iomodel.schedule.capabilities import PATHS
    from iomodel.spec.dtypes import DTYPES

    if "path" in config:  # the kernel path that ran (kernels.flash_attention.kernel_path)
        jv.choice(config["path"], f"{where}: config.path", PATHS, fix=FIX)
    if "score_dtype" in config:  # the eager chain's score dtype
        jv.choice(config["score_dtype"], f"{where}: config.score_dtype", tuple(DTYPES), fix=FIX)
    if "tile_order" in config:
        jv.choice(config["tile_order"], f"{where}: config.tile_order", TILE_ORDERS, fix=FIX)
    if "grid_order" in config and not head_group_of(config["grid_order"]):  # head-grouped:G, or one of GRID_ORDERS
        jv.choice(config["grid_order"], f"{where}: config.grid_order", GRID_ORDERS, fix=FIX)
    if "heads_per_program" in config:  # P query heads share a program's BLOCK_M rows (kernels.flash_attention)
        p = jv.number(config["heads_per_program"], f"{where}: config.heads_per_program", what="a positive integer",
                      positive=True, integer=True, fix=FIX)
        bm = config.get("block_m")
        if isinstance(bm, int) and not isinstance(bm, bool) and 0 < bm < p:  # a prefill program: BLOCK_M / P rows
            raise IomodelError(f"{where}: config.heads_per_program {p!r} is more than config.block_m {bm!r} (a "
                               f"program's BLOCK_M query rows hold at least one row of each of its P heads): {FIX}")
    if "fused_combine" in config:
        jv.boolean(config["fused_combine"], f"{where}: config.fused_combine", fix=FIX)
    if "backward" in config:
        bwd = jv.mapping(config["backward"], f"{where}: config.backward", fix=FIX)
        for k in BACKWARD_REQUIRED:
            jv.number(jv.field(bwd, k, f"{where}: config.backward", fix=FIX), f"{where}: config.backward.{k}",
                      what="a positive integer", positive=True, integer=True, fix=FIX)
        for k in BACKWARD_COUNTS:
            if k in bwd:
                jv.number(bwd[k], f"{where}: config.backward.{k}", what="a positive integer", positive=True,
                          integer=True, fix=FIX)
        if "dkdv_order" in bwd:
            jv.choice(bwd["dkdv_order"], f"{where}: config.backward.dkdv_order", DKDV_ORDERS, fix=FIX)
        if "dq_tile_order" in bwd:
            jv.choice(bwd["dq_tile_order"], f"{where}: config.backward.dq_tile_order", TILE_ORDERS, fix=FIX)
        if "dkdv_kernel" in bwd:  # absent: the Triton launch, the only one before 2026-12-05
            jv.choice(bwd["dkdv_kernel"], f"{where}: config.backward.dkdv_kernel", DKDV_KERNELS, fix=FIX)


def read_seqlens(value: Any, spec: LayerSpec, where: str, fix: str) -> tuple[tuple[int, int], ...] | None:
    """A record's ``seqlens``: None, or a list of ``[N_q, N_k]`` pairs (tokens) whose padded
    batch is ``spec`` (batch = the count, seqlen_q / seqlen_k = the longest).

    Raises:
        IomodelError: not a list of pairs of whole numbers >= 1, or a spec that is not their padded batch.
    """
    if value is None:
        return None
    items = jv.array(value, where, fix=fix)
    pairs = []
    for i, p in enumerate(items):
        if not isinstance(p, list) or len(p) != 2:
            raise IomodelError(f"{where}[{i}]: expected an [N_q, N_k] pair, got {jv.describe(p)}: {fix}")
        pairs.append(tuple(int(jv.number(n, f"{where}[{i}]", what="a whole number of tokens, 1 or more",
                                         positive=True, integer=True, fix=fix)) for n in p))
    rs = ragged_spec(spec, tuple(pairs))
    if rs.padded() != spec.with_(phase="prefill"):
        raise IomodelError(f"{where}: spec is not the batch padded to these sequences (batch {rs.batch}, "
                           f"seqlen_q {rs.max_seqlen_q}, seqlen_k {rs.max_seqlen_k}): {fix}")
    return rs.seqlens


def shape_tag(grid_order: str = "tiles-fastest", group_splits: int | None = None, heads_per_program: int = 1,
              tile_order: str | None = None) -> str:
    """The suffix a sweep appends to :func:`shape_id` for a launch it pins (``iomodel.measure.sweep``): ``-t{order}``
    for a query-tile order it sets (``-tforward``, ``-treverse``), then ``-{grid_order}`` unless tiles-fastest
    (``-heads-fastest``, ``-grouped:8``), then ``-s{S}`` for a dK/dV group split S it sets, then ``-p{P}`` for P > 1
    query heads packed into each prefill program."""
    return ((f"-t{tile_order}" if tile_order else "") + ("" if grid_order == "tiles-fastest" else f"-{grid_order}")
            + (f"-s{group_splits}" if group_splits else "") + (f"-p{heads_per_program}" if heads_per_program > 1 else ""))


_TAG = re.compile(r"(?:-t(?P<tile>forward|reverse))?"
                  r"(?:-(?![ps][0-9])(?P<grid>[a-z][a-z:-]*?[a-z0-9]))?(?:-s(?P<splits>[1-9][0-9]*))?"
                  r"(?:-p(?P<packed>[2-9]|[1-9][0-9]+))?")


def _is_tag(rest: str) -> bool:
    """Whether ``rest`` is a suffix :func:`shape_tag` writes (a known grid order, a group split, a packing, any of
    them or none)."""
    from iomodel.schedule.launch import grid_order_refusal

    m = _TAG.fullmatch(rest)
    return m is not None and (m["grid"] is None or (m["grid"] != "tiles-fastest"
                                                     and grid_order_refusal(m["grid"]) is None))


def _check_id_agrees(sid: str, spec: LayerSpec, impl: str, seqlens: tuple[tuple[int, int], ...] | None,
                     where: str, config: dict[str, Any] | None = None) -> None:
    """Refuse a shape whose id, in :func:`shape_id`'s form, names another layer than its spec: the id must be
    :func:`shape_id` of the spec followed by a :func:`shape_tag` (none, ``-heads-fastest``, ``-s3``). A spec field
    dropped or edited by hand (a window side, the alignment, the dtype, the impl) would otherwise be reconciled as
    a model error. Ids in another form (a user's own: not ``b<B>-h<H>-kv<H_kv>-d<d>-<dtype>-q<N_q>-k<N_k>-``) are not
    checked; ``phase`` and a non-causal window's alignment are not in the id (:data:`SPEC_REQUIRED` covers them).
    A tag names the launch a sweep pinned, so each of its parts must agree with the record's ``config`` where that
    records the same field (``-t{order}`` with ``tile_order``, ``-{grid}`` with ``grid_order``, ``-s{S}`` with
    ``backward.group_splits``, ``-p{P}`` with ``heads_per_program``; a field left out is its default): the model
    reads the config, and a tag that says otherwise would reconcile one launch under another's name. An untagged id
    says nothing of the launch (the launcher's own choice, recorded in the config).

    Raises:
        IomodelError: one line naming the shape and the parts its id and its spec (or its config) disagree on.
    """
    if not _SHAPE_ID_FORM.match(sid):
        return
    expected = shape_id(spec, impl, seqlens)
    if sid.startswith(expected) and _is_tag(sid[len(expected):]):
        if config is not None:  # none recorded (a shape not run: the time budget spent, a crashed child): no launch
            _check_tag_agrees(sid, _TAG.fullmatch(sid[len(expected):]), config, spec.backward, where)
        return
    got, want = sid.split("-"), expected.split("-")
    only_id = [t for t in got if t not in want]
    only_spec = [t for t in want if t not in got]
    said = "; ".join(x for x in (f"the id has {'-'.join(only_id)}" if only_id else "",
                                 f"the spec gives {'-'.join(only_spec)}" if only_spec else "") if x)
    raise IomodelError(f"{where}: the id {sid!r} names another layer than its spec, which gives {expected!r}"
                       f"{f' ({said})' if said else ''}: {FIX}")


#: The launch fields a record's writer drops at their defaults (``KernelConfig.to_dict``), read back by
#: :func:`recorded_launch`: query tiles first to last, the query tile fastest, one dK/dV group slice, one query head
#: a program.
LAUNCH_DEFAULTS = {"tile_order": "forward", "grid_order": "tiles-fastest", "group_splits": 1, "heads_per_program": 1}


def recorded_launch(config: dict[str, Any] | None) -> dict[str, Any]:
    """The launch a record's ``config`` names: ``tile_order``, ``grid_order`` (str), ``group_splits`` (of
    ``config.backward``) and ``heads_per_program`` (int), each its :data:`LAUNCH_DEFAULTS` value where left out (None:
    an empty config). Raises nothing."""
    c = config or {}
    bwd = c.get("backward") if isinstance(c.get("backward"), dict) else {}
    return {"tile_order": str(c.get("tile_order", LAUNCH_DEFAULTS["tile_order"])),
            "grid_order": str(c.get("grid_order", LAUNCH_DEFAULTS["grid_order"])),
            "group_splits": bwd.get("group_splits", LAUNCH_DEFAULTS["group_splits"]),
            "heads_per_program": c.get("heads_per_program", LAUNCH_DEFAULTS["heads_per_program"])}


def _check_tag_agrees(sid: str, tag: re.Match, config: dict[str, Any], backward: bool, where: str) -> None:
    """One line if a part of ``sid``'s tag (:func:`shape_tag`) names another launch than ``config`` records
    (:func:`_check_id_agrees`). A field the config leaves out is its default (:func:`recorded_launch`). A group split (``-sS``) names a training step's dK/dV launch: refused on a forward."""
    if tag["splits"] is not None and not backward:
        raise IomodelError(f"{where}: the id {sid!r} says -s{tag['splits']} (a dK/dV group split) but the spec is a "
                           f"forward, which has no dK/dV kernel: {FIX}")
    launch = recorded_launch(config)
    parts = (("tile", "-t", "tile_order", launch["tile_order"], str),
             ("grid", "-", "grid_order", launch["grid_order"], str),
             ("splits", "-s", "backward.group_splits", launch["group_splits"], int),
             ("packed", "-p", "heads_per_program", launch["heads_per_program"], int))
    for group, prefix, key, recorded, kind in parts:
        if tag[group] is None or kind(tag[group]) == recorded:
            continue
        raise IomodelError(f"{where}: the id {sid!r} says {prefix}{tag[group]} but config.{key} is {recorded!r}"
                           f"{' (left out: its default)' if _left_out(config, key) else ''}: the tag names the "
                           f"launch a sweep pinned, so the two must agree: {FIX}")


def _left_out(config: dict[str, Any], key: str) -> bool:
    """Whether ``config`` leaves ``key`` (dotted: ``backward.group_splits``) out."""
    head, _, rest = key.partition(".")
    if not rest:
        return head not in config
    sub = config.get(head)
    return not isinstance(sub, dict) or rest not in sub


def shape_id(spec: LayerSpec, impl: str, seqlens: tuple[tuple[int, int], ...] | None = None) -> str:
    """A readable unique id of a (shape, implementation), e.g. ``b1-h32-kv8-d128-bf16-q4096-k4096-tl-tiled``
    (``-bwd`` appended for a forward + backward step).

    The mask part is ``nc`` (not causal), ``tl`` (causal top-left) or ``br`` (causal bottom-right),
    followed by ``-wL_R`` when the spec gives a sliding window (a non-causal window with seqlen_q != seqlen_k names
    its alignment first, ``nc-br-w64_64``, as the alignment moves the band; the sides in tokens as given,
    ``inf`` for an unbounded one: ``...-tl-w4096_inf-tiled``) and ``-pN`` for a paged KV cache of
    N tokens per page (``...-br-p64-tiled``); no suffix without them, so the ids of dense
    windowless shapes are those of the committed receipts. A ragged batch (``seqlens``, ``spec``
    its padded batch) adds ``-ragCxQ_K``: C sequences of Q query and K key tokens in all
    (``b3-...-q3000-k3000-tl-rag3x3589_3589-tiled``).
    """
    align = "tl" if spec.causal_align == "top-left" else "br"
    mask = "nc" if not spec.causal else align
    if spec.window_left is not None or spec.window_right is not None:
        side = lambda v: "inf" if v is None else str(v)  # noqa: E731
        if not spec.causal and spec.seqlen_q != spec.seqlen_k:  # the alignment moves a window's band: said
            mask += f"-{align}"
        mask += f"-w{side(spec.window_left)}_{side(spec.window_right)}"
    if spec.page_size is not None:
        mask += f"-p{spec.page_size}"
    if seqlens is not None:
        mask += f"-rag{len(seqlens)}x{sum(q for q, _ in seqlens)}_{sum(k for _, k in seqlens)}"
    return (
        f"b{spec.batch}-h{spec.heads}-kv{spec.kv_heads}-d{spec.head_dim}-{spec.dtype}"
        f"-q{spec.seqlen_q}-k{spec.seqlen_k}-{mask}-{impl}" + ("-bwd" if spec.backward else "")
    )


__all__ = [
    "IMPLS",
    "KernelRecord",
    "Measurement",
    "SCHEMA",
    "SEAL_KEY",
    "SEALED_SINCE",
    "ShapeMeasurement",
    "expected_kernels",
    "ragged_spec",
    "read_seqlens",
    "record_digest",
    "shape_id",
    "shape_tag",
]
