"""Reconciliation: the model's predicted bytes against measured bytes, level by level.

Only compares a :class:`~iomodel.traffic.Prediction` (plus the L2-aware refinement of
``iomodel/cache/``) with a :class:`~iomodel.measure.records.Measurement`; it never
runs a kernel, so ``iomodel reconcile RESULTS.json`` is a pure-CPU step.

Levels compared (read and write apart):

* ``HBM``: the L2-aware prediction (:func:`iomodel.cache.predict.predict_tiled` /
  :func:`~iomodel.cache.predict.predict_baseline`; a training step
  :func:`~iomodel.cache.predict.predict_training_step`, also per kernel as ``HBM <kernel>``) against ``dram__bytes_read.sum`` /
  ``dram__bytes_write.sum``. The compulsory floor and the model's no-reuse bound are shown
  beside it.
* ``L2``: the model's ``SRAM_fill`` rows (bytes the kernel's loads and stores request)
  against the L2 requests from the SMs, ``lts__t_sectors_srcunit_tex_op_read.sum`` and
  ``..._op_write.sum`` × 32 bytes (bundled kernel only; ``lts__t_bytes.sum``, all L2 traffic
  including the L2-fabric and DRAM-side transfers, is reported beside it, not compared).
* ``SRAM_fill``: interpreter counts (CPU records) against the same rows, exactly.

A value is *within* tolerance when ``|predicted − measured| <= rel × measured`` or
``<= abs_bytes`` (default 1 MiB: kernels that move less than that are dominated by counter
noise and by lines the previous replay left; see :data:`DEFAULT_ABS_TOL`).

A value the run collected but the record lacks for one shape (a metric ``null`` or absent
in one of its kernels) is *not measured*: it counts as not reconciled, stays in the
summary's count of shapes, and is listed with the metric and kernel
(:meth:`Reconciliation.not_reconciled`). So is every comparison of a shape the record or the
model could not reconcile at all (its ``error``). A level the run did not collect (the
DRAM-only repeats have no L2 metrics; ``settings.metrics``) is not compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

from iomodel.errors import IomodelError
from iomodel.format import human_bytes
from iomodel.measure.metrics import QUANTITY_METRICS
from iomodel.measure.records import Measurement, ShapeMeasurement, expected_kernels, recorded_launch
from iomodel.spec.hardware import Hardware, get_hardware, preset_names
from iomodel.spec import LayerSpec, Tiling
from iomodel.cache.params import (DEFAULT_L2_FRACTION, DEFAULT_L2_WAYS, MAX_L2_WAYS, L2Params,
                                  exact_write_share, forward_applies, forward_l2_of, l2_fraction_refusal,
                                  read_fraction_of)
from iomodel.schedule.launch import Schedule
from iomodel.cache.predict import (L2Prediction, compulsory_read_bytes, compulsory_write_bytes, predict_baseline,
                                   predict_ragged_launch, predict_tiled, predict_training_step, training_kernels,
                                   wave_cache)
from iomodel.schedule.grid import KERNEL_FIXED_PROGRAMS_SOURCE, backward_programs, estimate_programs_per_sm
from iomodel.schedule.tiles import packed_grid

#: Relative tolerance per level (issue 4: HBM ±10 %, L2 ±15 %, interpreter exact).
DEFAULT_TOLERANCES: dict[str, float] = {"HBM": 0.10, "L2": 0.15, "SRAM_fill": 0.0}
#: Absolute tolerance in bytes for the GPU levels (1 MiB, about 0.2 µs of H200 HBM time).
DEFAULT_ABS_TOL = 1 << 20



def l2_params(hardware: Hardware, programs_per_sm: int, forward_constants: bool = True, **kw: Any) -> L2Params:
    """:meth:`L2Params.of` for a reconciled shape (its plot too); without the forward's own constants
    (``FORWARD_L2``) where ``forward_constants`` is False (the legacy model, ``--no-forward-constants``).

    Raises:
        IomodelError: from :meth:`L2Params.of` (hardware without L2 or SMs, a bad fraction or ways)."""
    if not forward_constants:
        kw["forward"] = None
    return L2Params.of(hardware, programs_per_sm, **kw)

def _times(x: float) -> str:
    """A multiple of at least 2: one decimal below 100 (``2.6``), whole with separators from 100 (``1,741``)."""
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def gap_sentence(predicted: float, measured: float, moved: float, level: str) -> str:
    """One level and direction of one shape, predicted against measured, in words a kernel engineer reads.

    Args:
        predicted, measured: bytes (>= 0) of one direction (read or write) at ``level``.
        moved: every byte the shape moved at that level (read + write, measured), the scale a
            gap is judged against.
        level: the level's name (``HBM``, ``L2``, ``HBM _bwd_dq`` ...), for the sentence.

    Returns:
        ``"predicted P, measured M (miss); the gap is G, S of the T the shape moved at LEVEL"``.
        The miss is relative to the measured bytes (``+12%``, ``-40%``) while the two are within
        a factor of two, a multiple beyond (``5.0× measured`` for an over-prediction, ``measured
        1,741× predicted`` for an under-prediction, which a percentage would show as ``-100%``),
        and ``none predicted`` or ``none measured`` when one side is 0. S is the gap over T
        (``0.06%``; ``under 0.01%`` for a gap that is not 0 but rounds to it). Bytes in binary
        prefixes with one decimal (:func:`iomodel.format.human_bytes`).

    Raises:
        ValueError: a negative or non-finite byte count (a record that is not bytes).
    """
    for name, v in (("predicted", predicted), ("measured", measured), ("moved", moved)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} bytes must be finite and >= 0, got {v}: pass byte counts")
    if predicted == measured:
        miss = ""
    elif predicted == 0:
        miss = " (none predicted)"
    elif measured == 0:
        miss = " (none measured)"
    elif predicted >= 2 * measured:
        miss = f" ({_times(predicted / measured)}× measured)"
    elif measured >= 2 * predicted:
        miss = f" (measured {_times(measured / predicted)}× predicted)"
    else:
        miss = f" ({(predicted - measured) / measured:+.0%})"
    gap = abs(predicted - measured)
    share = gap / moved if moved else 0.0
    share_text = "under 0.01%" if 0 < share < 0.00005 else f"{share:.2%}"
    pb, mb, gb, tb = (human_bytes(v, decimals=1) for v in (predicted, measured, gap, moved))
    return (f"predicted {pb}, measured {mb}{miss}; the gap is {gb}, {share_text} of the {tb} "
            f"the shape moved at {level}")


@dataclass
class LevelCompare:
    """Predicted and measured bytes of one level of one shape (None where not available).

    Units: bytes. ``floor_*`` and ``bound_*`` are the compulsory floor and the model's
    no-reuse bound (HBM only). ``missing`` maps ``"read"`` / ``"write"`` to why that
    measured value is absent though the run collected it (a metric null or absent in a
    kernel): such a direction is not reconciled (:meth:`within` is False).
    """

    level: str
    predicted_read: int | None
    measured_read: float | None
    predicted_write: int | None
    measured_write: float | None
    floor_read: int | None = None
    floor_write: int | None = None
    bound_read: int | None = None
    bound_write: int | None = None
    extra: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def _ratio(measured: float | None, predicted: int | None) -> float | None:
        if measured is None or predicted is None:
            return None
        if predicted == 0:
            return math.inf if measured else 1.0
        return measured / predicted

    @property
    def ratio_read(self) -> float | None:
        """measured / predicted reads."""
        return self._ratio(self.measured_read, self.predicted_read)

    @property
    def ratio_write(self) -> float | None:
        """measured / predicted writes."""
        return self._ratio(self.measured_write, self.predicted_write)

    def within(self, which: str, rel: float, abs_bytes: float) -> bool | None:
        """Whether reads (``"read"``) or writes (``"write"``) agree within tolerance.

        None when not compared (no prediction, or a value the run did not collect); False
        when the run collected the value but the record lacks it (``missing``). The
        interpreter level also needs every tensor to match (``extra["per_tensor_match"]``).
        """
        p = self.predicted_read if which == "read" else self.predicted_write
        m = self.measured_read if which == "read" else self.measured_write
        if p is not None and which in self.missing:
            return False
        if p is None or m is None:
            return None
        if self.extra.get("per_tensor_match", 1.0) == 0.0:
            return False
        return abs(p - m) <= max(rel * abs(m), abs_bytes)


@dataclass
class ShapeReconciliation:
    """Everything reconciled for one measured shape.

    Attributes:
        id, impl, spec: from the measurement.
        tiling: the tiles the kernel ran (None for the eager chain and SDPA).
        programs_per_sm: occupancy used by the L2-aware prediction and where it came from.
        levels: :class:`LevelCompare` per level.
        l2: the L2-aware prediction (None where no model applies).
        notes: one sentence each (mismatches between model and kernel, extra kernels ...).
        error: why the shape could not be reconciled (None if it was).
        tile_order: grid order of the query tiles the kernel reported (``forward`` when absent).
        l2_metric: the measured quantity compared at the L2 level (``sm_read_bytes`` or ``l2_read_bytes``).
        labels: the (HBM level, ``"read"`` or ``"write"``) whose predicted DRAM bytes the model labels (``HBM``,
            ``HBM <kernel>``) mapped to (quality, sentence): ``rough`` or ``not a prediction``
            (:data:`iomodel.cache.predict.READ_QUALITIES`, :data:`~iomodel.cache.predict.WRITE_QUALITIES`) and the
            estimate's own assumption saying why (:func:`labels_of`); one absent is ``predicted``.
    """

    id: str
    impl: str
    spec: LayerSpec
    tiling: Tiling | None = None
    programs_per_sm: tuple[int, str] | None = None
    levels: list[LevelCompare] = field(default_factory=list)
    l2: L2Prediction | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    tile_order: str = "forward"
    l2_metric: str | None = None
    labels: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def quality(self, level: str, which: str = "read") -> str:
        """How far the model's DRAM bytes at ``level`` in direction ``which`` (``read`` or ``write``) can be taken
        (:data:`~iomodel.cache.predict.READ_QUALITIES`, :data:`~iomodel.cache.predict.WRITE_QUALITIES`): ``predicted``
        unless :attr:`labels` names them."""
        return self.labels.get((level, which), ("predicted", ""))[0]

    def level(self, name: str) -> LevelCompare | None:
        """The comparison at level ``name`` (``HBM``, ``L2``, ``SRAM_fill``), None if not compared."""
        return next((lv for lv in self.levels if lv.level == name), None)

    def explanation(self) -> str:
        """The dominant cause (key: detail), or the note/error that explains the row."""
        if self.error:
            return f"not reconciled: {self.error}"
        if self.l2 is not None and self.l2.dominant is not None:
            c = self.l2.dominant
            return f"{c.key}: {c.detail}"
        if self.l2 is not None:
            return "compulsory: every input read once and every output written once"
        if self.notes:
            return "; ".join(self.notes)
        if self.level("SRAM_fill") is not None:
            return "exact: the interpreter's per-tensor counts equal the model's SRAM_fill rows"
        return "no model for this implementation"

    def gap(self, level: str, which: str, floor_bytes: float = 0) -> str:
        """Why ``level``'s ``which`` (``read`` or ``write``) differs, in one clause: the measured bytes as a multiple
        of the prediction (or the bytes, where none were predicted), then the model's largest cause in that direction
        (key: detail; :data:`CAUSES`), or that the model puts that direction at its compulsory floor (no cause moves
        it by more than ``floor_bytes``, the reconciliation's absolute tolerance), or :meth:`explanation` where no
        L2-aware model applies. A level other than ``HBM`` gets the ratio alone: the causes split the HBM totals, not
        one kernel's bytes. Unlike :meth:`explanation` (the cause largest in reads and writes together), a read miss
        is never explained by a write-back cause (a reviewer's finding, 2026-12-06)."""
        lv = self.level(level)
        ratio = None if lv is None else (lv.ratio_read if which == "read" else lv.ratio_write)
        head = ""
        if ratio is not None:
            m = lv.measured_read if which == "read" else lv.measured_write
            head = (f"measured {ratio:.3g}x the prediction; " if math.isfinite(ratio) else
                    f"measured {human_bytes(m, decimals=1)} where none was predicted; ")
        if self.error or self.l2 is None or level == "SRAM_fill":
            return head + self.explanation()
        if level != "HBM":  # the causes split the HBM totals, not one kernel's bytes or the L2 level's
            return head + "the named causes split the HBM totals only, not one kernel's bytes or the L2 level's"
        attr = "read_bytes" if which == "read" else "write_bytes"
        causes = [c for c in self.l2.causes if abs(getattr(c, attr)) > floor_bytes]
        if not causes:
            return head + f"the model's {which}s are the compulsory floor (no cause moves them by more than " \
                          f"{human_bytes(int(floor_bytes), decimals=1)})"
        c = max(causes, key=lambda c: abs(getattr(c, attr)))
        return head + f"the model's largest {which} cause, {c.key}: {c.detail}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form with ratios (null where the prediction is 0 B and the measurement is not), the L2-aware prediction
        and the explanation."""
        return {
            "id": self.id,
            "impl": self.impl,
            "spec": self.spec.to_dict(),
            "tiling": asdict(self.tiling) if self.tiling else None,
            "programs_per_sm": list(self.programs_per_sm) if self.programs_per_sm else None,
            # a ratio over a prediction of 0 B is infinite: null in JSON (standard JSON has no Infinity; the bytes
            # themselves are beside it)
            "levels": [{**asdict(lv), **{f"ratio_{w}": (r if r is None or math.isfinite(r) else None)
                                         for w, r in (("read", lv.ratio_read), ("write", lv.ratio_write))},
                        **{f"{w}_bytes_quality": self.quality(lv.level, w) for w in ("read", "write")
                           if lv.level.startswith("HBM") and getattr(lv, f"predicted_{w}") is not None}}
                       for lv in self.levels],
            "l2_aware": self.l2.to_dict() if self.l2 else None,
            "explanation": self.explanation(),
            "notes": self.notes,
            "error": self.error,
        }


@dataclass
class Reconciliation:
    """All shapes of one measurement, reconciled.

    Attributes:
        measurement: the record.
        hardware: hardware the predictions used.
        l2_fraction: effective L2 fraction used.
        rows: one :class:`ShapeReconciliation` per measured shape.
        l2_ways: L2 associativity of the prediction (None: fully associative LRU).
        tolerances: relative tolerance per level.
        abs_tol: absolute tolerance in bytes.
        forward_constants: whether forward launches were to take their own constants (``FORWARD_L2``; they do where
            :attr:`forward_used`).
    """

    measurement: Measurement
    hardware: Hardware
    l2_fraction: float
    rows: list[ShapeReconciliation]
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    abs_tol: float = DEFAULT_ABS_TOL
    l2_ways: int | None = DEFAULT_L2_WAYS
    forward_constants: bool = True

    @property
    def forward_used(self) -> bool:
        """Whether the forward launches were predicted with their own constants (``FORWARD_L2``): asked for
        (``forward_constants``) and the L2 at the model's defaults (:func:`~iomodel.cache.params.forward_applies`)."""
        return self.forward_constants and forward_applies(self.l2_fraction, self.l2_ways)

    def _abs(self, level: str) -> float:
        return 0.0 if level == "SRAM_fill" else self.abs_tol

    def tolerance(self, level: str) -> float:
        """The relative tolerance of a level; a per-kernel level (``L2 _bwd_dq``) takes its level's."""
        return self.tolerances.get(level, self.tolerances.get(level.split(" ")[0], 0.0))

    def within(self, row: ShapeReconciliation, level: str, which: str) -> bool | None:
        """Whether a shape's level agrees within this reconciliation's tolerances (None if not compared)."""
        lv = row.level(level)
        if lv is None:
            return None
        return lv.within(which, self.tolerance(level), self._abs(level))

    def within_relative(self, row: ShapeReconciliation, level: str, which: str) -> bool | None:
        """Like :meth:`within` with the relative tolerance alone (no absolute floor)."""
        lv = row.level(level)
        if lv is None:
            return None
        return lv.within(which, self.tolerance(level), 0.0)

    def summary(self) -> list[dict[str, Any]]:
        """Per (impl, level, read/write): shapes compared and shapes within tolerance, both ways.

        Keys: ``shapes``; ``within_rel`` (within the relative tolerance ``tolerance`` alone)
        and ``fraction_rel``; ``within`` (within the relative tolerance or the absolute floor
        ``abs_tol_bytes``, the decision used everywhere else) and ``fraction``;
        ``not_reconciled``: of ``shapes``, those not measured (a metric the run collected is
        null or absent) or not reconciled at all (the shape's ``error``, counted in every
        level and direction its implementation is compared at), never within; ``labelled``: of
        ``shapes``, those the model labels, per quality other than ``predicted``, with how many of them are within
        (``{"not a prediction": {"shapes": n, "within": k}}``; :attr:`ShapeReconciliation.labels`).
        """
        out: dict[tuple[str, str, str], list[int]] = {}
        labelled: dict[tuple[str, str, str], dict[str, dict[str, int]]] = {}
        for r in self.rows:
            if r.error:
                continue
            for lv in r.levels:
                for which in ("read", "write"):
                    ok = self.within(r, lv.level, which)
                    if ok is None:
                        continue
                    acc = out.setdefault((r.impl, lv.level, which), [0, 0, 0, 0])
                    acc[0] += 1
                    acc[1] += int(ok)
                    acc[2] += int(bool(self.within_relative(r, lv.level, which)))
                    acc[3] += int(which in lv.missing)
                    if (q := r.quality(lv.level, which)) != "predicted":
                        got = labelled.setdefault((r.impl, lv.level, which), {}).setdefault(q, {"shapes": 0,
                                                                                                "within": 0})
                        got["shapes"] += 1
                        got["within"] += int(ok)
        for r in self.rows:
            if r.error:
                for key, acc in out.items():
                    if key[0] == r.impl:
                        acc[0] += 1
                        acc[3] += 1
        return [
            {"impl": k[0], "level": k[1], "which": k[2], "shapes": v[0],
             "within_rel": v[2], "fraction_rel": v[2] / v[0] if v[0] else 0.0,
             "within": v[1], "fraction": v[1] / v[0] if v[0] else 0.0, "not_reconciled": v[3],
             "labelled": labelled.get(k, {}), "tolerance": self.tolerance(k[1]), "abs_tol_bytes": self._abs(k[1])}
            for k, v in sorted(out.items())
        ]

    def outside(self) -> list[tuple[ShapeReconciliation, list[str]]]:
        """Shapes with any compared level outside tolerance or not measured, with the failing
        (level, direction)s (``"HBM read not measured"`` for a missing value)."""
        res = []
        for r in self.rows:
            bad = [f"{lv.level} {w}" + (" not measured" if w in lv.missing else "")
                   for lv in r.levels for w in ("read", "write") if self.within(r, lv.level, w) is False]
            if bad or r.error:
                res.append((r, bad or ["not reconciled"]))
        return res

    def not_reconciled(self) -> list[tuple[ShapeReconciliation, str, str]]:
        """Every comparison the summary counts as not reconciled, with why.

        Returns:
            (shape, ``"<level> <read|write>"`` or ``"every level"``, reason) for each value the
            run collected but the record lacks (the reason names the metric and kernel) and for
            each shape with an ``error`` (the reason is the error).
        """
        out = []
        for r in self.rows:
            if r.error:
                out.append((r, "every level", r.error))
                continue
            for lv in r.levels:
                for w in ("read", "write"):
                    if w in lv.missing and self.within(r, lv.level, w) is False:
                        out.append((r, f"{lv.level} {w}", f"not measured: {lv.missing[w]}"))
        return out

    def floor_only(self) -> list[tuple[ShapeReconciliation, str, str]]:
        """Comparisons within tolerance only by the absolute floor, each with one sentence.

        Returns:
            (shape, ``"<level> <read|write>"``, sentence) for every level and direction that is
            outside the relative tolerance but within ``abs_tol``; the sentence is
            :func:`gap_sentence` (predicted and measured bytes, the gap in bytes and its share of
            all bytes the shape moved at that level, read + write, measured).
        """
        out = []
        for r in self.rows:
            for lv in r.levels:
                for w in ("read", "write"):
                    if self.within(r, lv.level, w) and self.within_relative(r, lv.level, w) is False:
                        p = lv.predicted_read if w == "read" else lv.predicted_write
                        m = lv.measured_read if w == "read" else lv.measured_write
                        total = (lv.measured_read or 0) + (lv.measured_write or 0)
                        out.append((r, f"{lv.level} {w}", gap_sentence(p, m, total, lv.level)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form: settings, summary and every shape."""
        return {
            "measurement": {"kind": self.measurement.kind, "created": self.measurement.created,
                            "command": self.measurement.command, "environment": self.measurement.environment,
                            "sealed": self.measurement.sealed},  # Measurement.sealed: true, false, or null (not read from a file)
            "hardware": self.hardware.to_dict(),
            "l2_fraction": self.l2_fraction,
            "l2_read_fraction": read_fraction_of(self.hardware) if self.l2_ways else None,  # None: the LRU's one capacity
            "l2_ways": self.l2_ways,
            "l2_forward": (asdict(forward_l2_of(self.hardware)) if self.forward_used
                           else None),  # the forward launches' own constants (iomodel.cache.params.ForwardL2)
            "tolerances": self.tolerances,
            "abs_tol_bytes": self.abs_tol,
            "summary": self.summary(),
            "floor_only": [{"id": r.id, "level": what, "detail": why} for r, what, why in self.floor_only()],
            "not_reconciled": [{"id": r.id, "level": what, "detail": why} for r, what, why in self.not_reconciled()],
            "shapes": [r.to_dict() for r in self.rows],
        }


# ----------------------------------------------------------------------------------
# Building the comparison
# ----------------------------------------------------------------------------------


def hardware_of(measurement: Measurement, override: str | None = None) -> Hardware:
    """The hardware to predict for: ``override`` (a preset name), else the record's.

    Raises:
        IomodelError: the record has no hardware and no override is given, or the record's
            hardware entry is malformed.
    """
    if override:
        return get_hardware(override)
    hw = measurement.hardware
    if not hw:
        raise IomodelError(f"the measurement records no hardware: pass --hardware (one of {preset_names()})")
    return Hardware.from_dict(hw)


def _kernel_programs_per_sm(shape: ShapeMeasurement) -> int | None:
    """The forward's programs per SM where its recorded launch fixes them (the Gluon prefill in its own tiles:
    ``kernels.heuristics.TileChoice.programs_per_sm``), else None (also where ``kernels`` is not importable)."""
    cfg = shape.config or {}
    if cfg.get("path") != "prefill-gluon":
        return None
    try:
        from kernels.heuristics import GLUON_TILES
    except ImportError:
        return None
    c = GLUON_TILES.get(shape.spec.head_dim)
    return None if c is None else c.fixed_programs_per_sm(cfg.get("block_m"), cfg.get("block_n"), cfg.get("num_stages"))


def _programs_per_sm(shape: ShapeMeasurement, tiling: Tiling, hw: Hardware) -> tuple[int, str]:
    for k in shape.kernels:
        v = k.programs_per_sm()
        if v:
            return v, f"measured occupancy limit of {k.name}"
    fixed = _kernel_programs_per_sm(shape)
    if fixed is not None:
        return fixed, KERNEL_FIXED_PROGRAMS_SOURCE
    warps = int((shape.config or {}).get("num_warps", 4))
    est = estimate_programs_per_sm(tiling.sram_bytes(shape.spec), warps, hw.smem_per_sm)
    return est, "estimated from shared memory and warps"


def _sum_rows(rows: Iterable[Any], level: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        if r.level == level:
            acc = out.setdefault(r.tensor, [0, 0])
            acc[0] += int(r.read_bytes)
            acc[1] += int(r.write_bytes)
    return out


PredictFn = Callable[..., Any]


def collected_quantities(measurement: Measurement) -> frozenset[str]:
    """The quantities (keys of :data:`~iomodel.measure.metrics.QUANTITY_METRICS`) the run collected.

    From ``settings["metrics"]`` less ``settings["dropped_metrics"]`` (what ``iomodel
    validate`` asked ncu for and ncu could give); a record without a metrics list (written
    by hand or by a test): every quantity some kernel of some shape names a metric for.
    """
    names: set[str]
    if isinstance(measurement.settings.get("metrics"), list):
        names = set(measurement.settings["metrics"]) - set(measurement.settings.get("dropped_metrics") or ())
    else:
        names = {m for s in measurement.shapes for k in s.kernels for m in k.metrics}
    return frozenset(q for q, ms in QUANTITY_METRICS.items() if names.intersection(ms))


def _shape_collected(shape: ShapeMeasurement) -> frozenset[str]:
    names = {m for k in shape.kernels for m in k.metrics}
    return frozenset(q for q, ms in QUANTITY_METRICS.items() if names.intersection(ms))


def missing_reason(shape: ShapeMeasurement, quantity: str) -> str | None:
    """Why ``shape`` has no value of ``quantity`` (the first kernel lacking every metric of it), else None.

    Returns:
        e.g. ``"dram__bytes_read.sum is null in kernel 0 (_attn_fwd)"`` or ``"... is absent
        from kernel 1 (...)"``; None when every kernel has a value (or there are no kernels).
    """
    names = QUANTITY_METRICS[quantity]
    for i, k in enumerate(shape.kernels):
        if k.quantity(quantity) is None:
            how = "null in" if any(m in k.metrics for m in names) else "absent from"
            return f"{names[0]} is {how} kernel {i} ({k.name})"
    return None


def grid_mismatch(shape: ShapeMeasurement, tiling: Tiling) -> str | None:
    """Why the bundled forward's (or decode's: :func:`_decode_grid_mismatch`) recorded launch is not the record's
    spec, or None: its ``launch__grid_size`` must be
    T_r·B·H / P programs (T_r = ceil(seqlen_q / (block_m / P)), the config's tiles and P = heads_per_program query
    heads packed a program), as every committed
    prefill forward and training step on the H200 is (890 kernels, 2026-12-05); a training step's backward kernels
    their grids (:func:`iomodel.schedule.grid.backward_programs`: 1,940 committed launches hold, 2026-12-07). A spec
    edited after measuring (heads 71 -> 142) reconciled as a model gap before."""
    spec = shape.spec
    if shape.impl != "tiled" or shape.seqlens is not None:
        return None
    if spec.phase == "decode":
        return _decode_grid_mismatch(shape, tiling)
    t_r, rows = packed_grid(spec.seqlen_q, spec.batch * spec.heads, tiling.block_m, tiling.heads_per_program)
    want = t_r * rows
    backward = backward_programs(spec, tiling) if spec.backward else {}
    for k in shape.kernels:
        got = k.metrics.get("launch__grid_size")
        if got is None:
            continue
        if _kernel_of(k.name) == "_attn_fwd" and int(got) != want:
            return (f"the forward kernel's recorded grid, {int(got):,} programs, is not the spec's T_r·B·H"
                    + (" / P" if tiling.heads_per_program > 1 else "") + " = "
                    f"{t_r:,}·{spec.batch:,}·{spec.heads:,}"
                    + (f" / {tiling.heads_per_program}" if tiling.heads_per_program > 1 else "") + f" = {want:,}: the "
                    "spec or the record was edited after measuring")
        name = "_bwd_fused_tma" if "_bwd_fused" in k.name else _kernel_of(k.name)
        if name in backward and int(got) != backward[name][0]:
            n, formula, numbers = backward[name]
            return (f"the {name} kernel's recorded grid, {int(got):,} programs, is not the spec's {formula} = "
                    f"{numbers} = {n:,}: the spec or the record was edited after measuring")
    return None


def _decode_grid_mismatch(shape: ShapeMeasurement, tiling: Tiling) -> str | None:
    """Why the bundled decode's recorded launch is not the record's spec, or None: ``_attn_decode`` runs
    S·B·H_kv·(G / P) = S·B·H / P programs (S = num_splits, P = heads_per_program: kernels/flash_attention.py's decode
    plan, grid (S, B·H_kv·(G / P))), its combine B·H·N_q; every committed decode launch is (156 on the H200,
    2026-12-07). A spec edited after measuring (heads doubled) reconciled as a model gap before."""
    spec = shape.spec
    main = tiling.num_splits * spec.batch * spec.heads // max(1, tiling.heads_per_program)
    for k in shape.kernels:
        got = k.metrics.get("launch__grid_size")
        if got is None or DECODE_KERNEL not in k.name:
            continue
        combine = "combine" in k.name
        want = spec.batch * spec.heads * spec.seqlen_q if combine else main
        if int(got) != want:
            formula = ("B·H·N_q = " f"{spec.batch:,}·{spec.heads:,}·{spec.seqlen_q:,}" if combine else
                       f"S·B·H / P = {tiling.num_splits:,}·{spec.batch:,}·{spec.heads:,} / {tiling.heads_per_program}")
            return (f"the decode {'combine ' if combine else ''}kernel's recorded grid, {int(got):,} programs, is not "
                    f"the spec's {formula} = {want:,}: the spec or the record was edited after measuring")
    return None


def _kernel_count_differs(out: "ShapeReconciliation", shape: ShapeMeasurement, expected: int) -> bool:
    """Whether the shape profiled another number of kernels than ``expected``; if so, a note naming them and the
    shape marked not reconciled (:func:`_not_whole`)."""
    if len(shape.kernels) == expected:
        return False
    why = f"{len(shape.kernels)} kernels profiled, {expected} expected"
    out.notes.append(f"{why}: " + ", ".join(k.name for k in shape.kernels))
    _not_whole(out, why)
    return True


def _not_whole(out: "ShapeReconciliation", why: str) -> None:
    """Every level of ``out`` not reconciled, both directions: a shape whose profiled kernels are not the ones the
    record's config launches (one missing, doubled or foreign) is not measured whole, whatever its totals say."""
    for lv in out.levels:
        lv.missing = {"read": why, "write": why}


def _missing(shape: ShapeMeasurement, q_read: str, q_write: str, expected: Iterable[str]) -> dict[str, str]:
    """Per direction, why a collected quantity has no value for ``shape`` (see :func:`missing_reason`)."""
    out = {}
    for which, q in (("read", q_read), ("write", q_write)):
        why = missing_reason(shape, q) if q in expected else None
        if why:
            out[which] = why
    return out


def foreign_write_bytes(kernel: Any) -> float | None:
    """DRAM bytes one profiled kernel wrote beyond every sector written into L2 while it ran.

    ``dram__bytes_write.sum − 32 × lts__t_sectors_op_write.sum`` (all sources, not only the
    SMs). The L2 is write-back and every DRAM write is the eviction of a dirty L2 line, so a
    positive difference is lines that were already dirty when the kernel started (written
    before the measured range, e.g. by the profiler between replay passes) and that the
    kernel's own fills evicted: DRAM writes the kernel's stores cannot have caused.

    Args:
        kernel: a :class:`~iomodel.measure.records.KernelRecord`.

    Returns:
        bytes (> 0), or None when not positive or a metric is missing.
    """
    dw = kernel.quantity("dram_write_bytes")
    lw = kernel.quantity("l2_all_write_bytes")
    if dw is None or lw is None or dw <= lw:
        return None
    return dw - lw


def foreign_write_notes(shape: ShapeMeasurement) -> list[str]:
    """One sentence per kernel of ``shape`` whose DRAM writes exceed all its L2 writes (see
    :func:`foreign_write_bytes`); an explanation of measured writes no model of the kernel's
    stores can predict."""
    out = []
    for k in shape.kernels:
        x = foreign_write_bytes(k)
        if x:
            dram = human_bytes(k.quantity("dram_write_bytes"), decimals=1)
            l2 = human_bytes(k.quantity("l2_all_write_bytes"), decimals=1)
            out.append(f"{k.name} wrote {human_bytes(x, decimals=1)} more to DRAM than all sectors written into L2 during it "
                       f"({dram} vs {l2}): "
                       "lines dirty before the kernel started, evicted by its fills (measurement residue)")
    return out


def default_predict(spec: LayerSpec, tiling: Tiling, hardware: Hardware, **options: Any) -> Any:
    """:func:`iomodel.traffic.predict` (imported on first use: it pulls in sympy)."""
    from iomodel.traffic import predict

    return predict(spec, tiling, hardware, **options)


#: The paged decode's int32 tables (SRAM_fill rows of iomodel/traffic/decode.py) that the L2
#: simulation (iomodel.cache.predict) does not walk: a few KiB beside the K/V pages.
PAGE_TABLES = ("BLOCK_TABLE", "CACHE_SEQLENS")

def _interpreter_fill(out: "ShapeReconciliation", shape: ShapeMeasurement, model_fill: dict[str, list[int]],
                      model_read: int, model_write: int) -> None:
    """Append the SRAM_fill level of an interpreter record (bytes, exact per tensor) to ``out``,
    with a note naming the tensors whose counts differ from ``model_fill`` (tensor -> [read, write])."""
    counted = {k: [int(v.get("read_bytes", 0)), int(v.get("write_bytes", 0))] for k, v in shape.sram_fill.items()}
    nz = lambda d: {k: v for k, v in d.items() if v != [0, 0]}  # noqa: E731
    same = nz(counted) == nz(model_fill)
    if not same:
        out.notes.append(f"per-tensor SRAM_fill differs: counted {nz(counted)}, model {nz(model_fill)}")
    out.levels.append(LevelCompare("SRAM_fill", model_read, sum(v[0] for v in counted.values()),
                                   model_write, sum(v[1] for v in counted.values()),
                                   extra={"per_tensor_match": float(same)}))


def _reconcile_ragged(out: "ShapeReconciliation", shape: ShapeMeasurement, tiling: Tiling, hardware: Hardware,
                      expected: set[str], l2_source: str, l2_fraction: float, flush_between_kernels: bool,
                      l2_ways: int | None, forward_constants: bool = True) -> None:
    """The levels of a ragged (varlen) batch, appended to ``out`` (bytes).

    SRAM_fill (interpreter counts) and L2 (profiled) against
    :func:`iomodel.traffic.ragged.predict_ragged`'s SRAM_fill rows, exact per sequence plus the
    int32 cu_seqlens reads. HBM against the sum over sequences of each sequence's batch-1
    L2-aware estimate (:func:`iomodel.cache.predict.predict_tiled`): an approximation, said in a
    note, since the sequences share one launch and one L2 (their tiles run concurrently, and
    the cu_seqlens reads are left out); floor and bound summed the same way.

    Raises:
        IomodelError: from the model (the caller records it as the shape's error).
    """
    from iomodel.cache.estimate import ragged_drift_label
    from iomodel.traffic.ragged import predict_ragged

    rs = shape.ragged()
    pred = predict_ragged(rs, tiling, hardware)
    model_fill = {t: list(rw) for t, rw in pred.by_tensor("SRAM_fill").items()}
    fill_read, fill_write = pred.level_bytes("SRAM_fill")
    if shape.sram_fill is not None:  # interpreter record: exact per tensor
        _interpreter_fill(out, shape, model_fill, fill_read, fill_write)
    if not shape.kernels:
        return
    pps, src = _programs_per_sm(shape, tiling, hardware)
    out.programs_per_sm = (pps, src)
    params = l2_params(hardware, pps, forward_constants, l2_fraction=l2_fraction, flush_between_kernels=flush_between_kernels, ways=l2_ways)
    out.tile_order = recorded_launch(shape.config)["tile_order"]
    floor = [0, 0]  # floor read, write: each sequence's compulsory bytes
    seqs = rs.sequences()
    for seq in seqs:
        too_big = not_simulated(seq, tiling, fast=False)  # the varlen launch is simulated wave by wave
        if too_big is not None:
            out.error = f"the L2-aware prediction is not computed: {too_big}"
            return
        floor[0] += sum(compulsory_read_bytes(seq).values())
        floor[1] += compulsory_write_bytes(seq)
    launch = predict_ragged_launch(seqs, tiling, params, out.tile_order)
    quality, sentence = ragged_drift_label(seqs, tiling, params, out.tile_order)
    if sentence is not None:  # the estimate's own label (iomodel.cache.estimate.estimate_ragged)
        out.labels[("HBM", "read")] = (quality, sentence)
    hbm = [sum(launch.hbm_read.values()), sum(launch.hbm_write.values()), *floor]
    hbm_tiled = pred.level_bytes("HBM")
    out.notes.append(f"ragged batch of {rs.batch} sequences: the HBM estimate is one varlen launch through one L2, "
                     "the sequences' batch-1 waves in batch order (iomodel.cache.predict.predict_ragged_launch; the "
                     "int32 cu_seqlens reads are left out); SRAM_fill and L2 are the exact per-sequence sum "
                     "(iomodel/traffic/ragged.py)")
    out.levels.append(LevelCompare(
        "HBM", hbm[0], shape.quantity("dram_read_bytes"), hbm[1], shape.quantity("dram_write_bytes"),
        hbm[2], hbm[3], hbm_tiled[0], hbm_tiled[1],
        missing=_missing(shape, "dram_read_bytes", "dram_write_bytes", expected)))
    q_read, q_write = L2_SOURCES[l2_source]
    if l2_source == "auto" and q_read not in expected:  # the SM side was not collected
        q_read, q_write = L2_SOURCES["tex"]
    out.l2_metric = q_read
    out.levels.append(LevelCompare("L2", fill_read, shape.quantity(q_read), fill_write, shape.quantity(q_write),
                                   missing=_missing(shape, q_read, q_write, expected)))
    out.notes += foreign_write_notes(shape)
    _kernel_count_differs(out, shape, expected_kernels(shape.impl, shape.spec, shape.config))


#: ``--l2-source`` -> the measured quantities compared with SRAM_fill (see records.QUANTITY_METRICS).
L2_SOURCES: dict[str, tuple[str, str]] = {
    "auto": ("sm_read_bytes", "sm_write_bytes"),  # SM side if measured, else "tex" (see reconcile_shape)
    "sm": ("sm_read_bytes", "sm_write_bytes"),  # l1tex__m_xbar2l1tex_read_bytes / l1tex__m_l1tex2xbar_write_bytes
    "tex": ("l2_read_bytes", "l2_write_bytes"),  # lts__t_sectors_srcunit_tex_op_{read,write}
    "all": ("l2_all_read_bytes", "l2_all_write_bytes"),  # lts__t_sectors_op_{read,write}
}


#: The bundled decode kernels' name part (``_attn_decode`` and ``_attn_decode_combine``, kernels/flash_attention.py): a
#: decode record's profiled kernel without it is not the bundled decode.
DECODE_KERNEL = "_attn_decode"


def _kernel_of(name: str) -> str | None:
    """The modelled kernel a profiled kernel name is (``_attn_fwd`` for either forward variant)."""
    for k in ("_bwd_preprocess", "_bwd_reduce_dkdv", "_bwd_dkdv", "_bwd_dq", "_attn_fwd"):
        if k in name:
            return k
    return None


def _eager_kernel_note(shape: ShapeMeasurement, l2: Any, **options: Any) -> str:
    """One note: each profiled kernel of an eager training step beside the modelled launch it
    is (paired in launch order, :func:`iomodel.traffic.baseline.eager_launches`), predicted and
    measured DRAM reads and writes in MiB; a kernel whose name is not the launch's is named."""
    from iomodel.traffic.baseline import eager_launches

    mib = 2**20
    parts, odd = [], []
    for i, (la, k, got) in enumerate(zip(eager_launches(shape.spec, **options), l2.kernels, shape.kernels), 1):
        mr, mw = got.quantity("dram_read_bytes"), got.quantity("dram_write_bytes")
        meas = "n/a" if mr is None or mw is None else f"{mr / mib:.1f}/{mw / mib:.1f}"
        parts.append(f"{i} {la.step}: {sum(k.hbm_read.values()) / mib:.1f}/{sum(k.hbm_write.values()) / mib:.1f} vs {meas}")
        if not any(s in got.name for s in la.kernel):
            odd.append(f"{i} {got.name[:60]!r} is not {la.op}")
    return ("per kernel, DRAM read/write MiB predicted vs measured: " + "; ".join(parts)
            + (" (kernel names that differ from the modelled launch: " + "; ".join(odd) + ")" if odd else ""))


def _reconcile_training_step(out: "ShapeReconciliation", shape: ShapeMeasurement, pred: Any,
                             expected: set[str], params: L2Params, hardware: Hardware) -> None:
    """A forward + backward step of the bundled kernels, for the whole step and per kernel
    (levels ``L2 <kernel>``, ``HBM <kernel>``): the L2 level (bytes the SMs received from /
    sent to L2 over the crossbar against the model's SRAM_fill bytes) and the HBM level (DRAM
    bytes against :func:`iomodel.cache.predict.predict_training_step`, every kernel from a cold
    L2, programs per SM from each kernel's measured occupancy limit, else estimated from the
    record's forward and backward launch, :func:`iomodel.cache.estimate.training_programs_per_sm`)."""
    from types import SimpleNamespace

    from iomodel.cache.estimate import training_programs_per_sm
    from iomodel.traffic.tiled_bwd import sram_fill_by_kernel

    alg = pred.algorithms["tiled"]
    model = {k: [sum(v[0] for v in t.values()), sum(v[1] for v in t.values())]
             for k, t in sram_fill_by_kernel(pred).items()}
    q_read, q_write = L2_SOURCES["sm"]
    measured: dict[str, list[float | None]] = {}
    dram: dict[str, list[float | None]] = {}
    pps: dict[str, int] = {}
    launches: dict[str, int] = {}  # profiled records per modelled kernel: each is launched once a step
    for k in shape.kernels:
        name = _kernel_of(k.name)
        if name is None:
            out.notes.append(f"profiled kernel {k.name!r} is none of the modelled kernels")
            continue
        launches[name] = launches.get(name, 0) + 1
        if k.programs_per_sm():
            pps[name] = k.programs_per_sm()
        for acc, (qr, qw) in ((measured, (q_read, q_write)), (dram, ("dram_read_bytes", "dram_write_bytes"))):
            m = acc.setdefault(name, [0.0, 0.0])
            for i, q in enumerate((qr, qw)):
                v = k.quantity(q)
                m[i] = None if v is None or m[i] is None else m[i] + v
    out.l2_metric = q_read
    total = [None if any(m[i] is None for m in measured.values()) else sum(m[i] for m in measured.values())
             for i in (0, 1)]
    missing = _missing(shape, q_read, q_write, expected)
    n_expected = expected_kernels(shape.impl, shape.spec, shape.config)
    absent = sorted(set(model) - set(measured))
    whole = {}
    if absent or len(shape.kernels) != n_expected:  # a step with a kernel missing or doubled is not measured whole
        why = (f"kernels {', '.join(absent)} not profiled" if absent
               else f"{len(shape.kernels)} kernels profiled, {n_expected} expected")
        missing = whole = {"read": why, "write": why}
    out.levels.append(LevelCompare("L2", alg.sram_fill_read_bytes, total[0], alg.sram_fill_write_bytes, total[1],
                                   missing=missing))
    not_profiled = {"read": "kernel not profiled", "write": "kernel not profiled"}

    def kernel_missing(name: str, got: list[float | None], metrics: tuple[str, str]) -> dict[str, str]:
        """Why a kernel's row is not compared, per direction: not profiled, profiled more than once (a doubled
        record: its sum is no one launch's), or the direction's metric not recorded (kept in the summary's count
        and listed under 'Not reconciled', as the step's rows)."""
        if name not in launches:
            return not_profiled
        if launches[name] > 1:
            why = f"kernel {name} profiled {launches[name]} times, launched once a step"
            return {"read": why, "write": why}
        return {w: f"kernel {name}'s {q} not recorded" for w, q, v in zip(("read", "write"), metrics, got) if v is None}

    unmodelled = []
    for name in sorted(set(model) | set(measured)):
        mr, mw = model.get(name, [0, 0])
        got = measured.get(name, [None, None])
        out.levels.append(LevelCompare(f"L2 {name}", mr, got[0], mw, got[1],
                                       missing=kernel_missing(name, got, (q_read, q_write))))
        extra = [f"{which} {human_bytes(g - p, decimals=1)} ({g / p:.2f}x)" for which, p, g in
                 (("read", mr, got[0]), ("written", mw, got[1]))
                 if g is not None and p and g - p > max(DEFAULT_TOLERANCES["L2"] * p, DEFAULT_ABS_TOL)]
        if extra:
            unmodelled.append(f"{name} {' and '.join(extra)}")
    cfg = shape.config or {}
    est = ({} if not cfg.get("backward") else  # the record's BackwardConfig (kernels/heuristics.py)
           training_programs_per_sm(shape.spec, out.tiling, hardware, int(cfg.get("num_warps", 4)),
                                    SimpleNamespace(**cfg["backward"]), _kernel_programs_per_sm(shape)))
    n_kernels = len(training_kernels(out.tiling))
    src = ("measured occupancy limit of each kernel" if len(pps) == n_kernels else
           "estimated from shared memory and warps" if not pps else "measured occupancy limits, the rest estimated")
    if len(pps) + len(set(est) - set(pps)) < n_kernels:
        src += f"; {params.programs_per_sm} where neither is known (no backward launch in the record)"
    pps = {**est, **pps}
    out.programs_per_sm = (pps.get("_bwd_dkdv", params.programs_per_sm), f"_bwd_dkdv; {src}")
    recorded = recorded_launch(shape.config)
    l2 = predict_training_step(shape.spec, out.tiling, params, pps, recorded["tile_order"], recorded["grid_order"])
    out.l2 = l2
    dram_total = _missing(shape, "dram_read_bytes", "dram_write_bytes", expected) or whole
    out.levels.append(LevelCompare("HBM", l2.hbm_read_bytes, shape.quantity("dram_read_bytes"), l2.hbm_write_bytes,
                                   shape.quantity("dram_write_bytes"), l2.floor_read_bytes, l2.floor_write_bytes,
                                   alg.hbm_read_bytes, alg.hbm_write_bytes, missing=dram_total))
    for k in l2.kernels:
        got = dram.get(k.name, [None, None])
        out.levels.append(LevelCompare(f"HBM {k.name}", sum(k.hbm_read.values()), got[0], sum(k.hbm_write.values()),
                                       got[1], missing=kernel_missing(k.name, got, ("dram_read_bytes",
                                                                                    "dram_write_bytes"))))
    out.notes.append("training step: HBM from predict_training_step (each kernel from a cold L2; _attn_fwd at the "
                     "forward's own constants, FORWARD_L2, where they apply, the backward kernels at the legacy ones "
                     "and their fitted write shares)")
    if unmodelled:
        out.notes.append("unmodelled L2 requests (register spills to local memory, GQA dK/dV extra writes; not "
                         "predicted, so missing from the HBM estimate too): " + "; ".join(unmodelled))
    if len(shape.kernels) != n_expected:
        out.notes.append(f"{len(shape.kernels)} kernels profiled, {n_expected} expected: "
                         + ", ".join(k.name for k in shape.kernels))


def _peer_of(shape: ShapeMeasurement, hardware: Hardware) -> Any:
    """The :class:`~iomodel.schedule.peers.PeerLaunch` of an SDPA shape whose one profiled kernel is
    FlashAttention-2's or cuDNN's prefill forward (:func:`iomodel.schedule.peers.peer_launch`), else None."""
    if shape.impl not in ("sdpa-flash", "sdpa-cudnn") or len(shape.kernels) != 1:
        return None
    from iomodel.schedule.peers import peer_launch

    k = shape.kernels[0]
    return peer_launch(k.name, k.grid, k.block, k.metrics, shape.spec, hardware, k.programs_per_sm())


def _reconcile_peer(out: "ShapeReconciliation", shape: ShapeMeasurement, peer: Any, hardware: Hardware,
                    expected: Iterable[str], l2_fraction: float, flush_between_kernels: bool,
                    l2_ways: int | None, forward_constants: bool = True) -> None:
    """HBM of a peer's forward kernel against the L2-aware prediction of its recorded launch
    (:func:`iomodel.cache.predict.predict_tiled` with ``peer.schedule``); the L2 level is not
    compared (the peer's loads and stores are not in docs/traffic-contract.md). Notes the launch's
    source and, where recorded, the bytes the SMs wrote into L2 beyond O and LSE (register spills
    to local memory, which the model does not hold)."""
    spec = shape.spec
    tiling = peer.tiling()
    out.tiling = tiling
    sched = peer.schedule
    fast = (l2_ways is not None and exact_write_share(l2_fraction) and sched.persistent != "blocked"
            and (sched.grid_order, sched.key_order) == ("tiles-fastest", "ascending"))
    too_big = not_simulated(spec, tiling, sched, fast=fast)
    if too_big is not None:
        out.error = f"the L2-aware prediction is not computed: {too_big}"
        return
    out.programs_per_sm = (peer.programs_per_sm, "the recorded launch")
    params = l2_params(hardware, peer.programs_per_sm, forward_constants, l2_fraction=l2_fraction,
                         flush_between_kernels=flush_between_kernels, ways=l2_ways)
    l2 = predict_tiled(spec, tiling, params, schedule=sched)
    out.l2 = l2
    out.levels.append(LevelCompare(
        "HBM", l2.hbm_read_bytes, shape.quantity("dram_read_bytes"), l2.hbm_write_bytes,
        shape.quantity("dram_write_bytes"), l2.floor_read_bytes, l2.floor_write_bytes,
        l2.no_reuse_read_bytes, l2.no_reuse_write_bytes,
        missing=_missing(shape, "dram_read_bytes", "dram_write_bytes", expected)))
    out.notes.append(peer.source)
    to_l2 = shape.quantity("sm_write_bytes")
    outputs = compulsory_write_bytes(spec)
    if to_l2 is not None and to_l2 > 1.1 * outputs:
        out.notes.append(f"its SMs wrote {human_bytes(to_l2, decimals=1)} into L2, {to_l2 / outputs:.1f}x O and LSE "
                         f"({human_bytes(outputs, decimals=1)}): local-memory (register spill) traffic the model does "
                         "not hold, part of which reaches DRAM")


def not_simulated(spec: LayerSpec, tiling: Tiling, schedule: Schedule | None = None, *,
                  fast: bool = True) -> str | None:
    """Why the L2 prediction of a measured tiled forward shape is not computed (one clause), or None.

    Programs simulated: prefill ``B·H·T_r`` (:func:`iomodel.cache.estimate.simulated_programs`),
    decode the split-KV grid ``num_splits·B·H_kv·(G/P)`` (the combine kernel's ``B·H``
    programs are simulated a wave at a time). The simulation visits every program and, in prefill, every key tile of each, so its time
    and memory grow with batch × heads × length: a record's shape past the worksheet's bounds
    (:data:`iomodel.cache.estimate.L2_ESTIMATE_MAX_SEQLEN` tokens in prefill,
    :data:`iomodel.cache.estimate.L2_ESTIMATE_MAX_PROGRAMS` programs) is not reconciled, and
    said so, rather than run for minutes and gigabytes (a record with batch 10^6 took over
    20 GB), unless the fast evaluation covers it (``fast``; a prefill forward shape within
    :func:`iomodel.cache.estimate.fast_refusal`, in the launch ``schedule``: None the bundled
    kernel's). Every committed receipt is far inside both bounds (at most 16,384 programs).
    """
    from iomodel.cache.estimate import (L2_ESTIMATE_MAX_PROGRAMS, L2_ESTIMATE_MAX_SEQLEN, fast_refusal,
                                        simulated_programs)

    why = None
    if spec.phase == "prefill" and max(spec.seqlen_q, spec.seqlen_k) > L2_ESTIMATE_MAX_SEQLEN:
        why = (f"seqlen {max(spec.seqlen_q, spec.seqlen_k):,} is above {L2_ESTIMATE_MAX_SEQLEN:,} (the simulation "
               "grows with the square of the length)")
    else:
        if spec.phase == "decode":  # the split-KV grid num_splits·B·H_kv·(G/P) of iomodel.schedule.grid.decode_waves
            n = tiling.num_splits * spec.batch * spec.kv_heads * max(1, spec.group // tiling.heads_per_program)
        else:  # B·H·T_r
            n = simulated_programs(spec, tiling)
        if n > L2_ESTIMATE_MAX_PROGRAMS:
            why = (f"{n:,} programs (batch {spec.batch:,}, heads {spec.heads:,}) are above {L2_ESTIMATE_MAX_PROGRAMS:,}, "
                   "the most the simulation visits (its cost grows with batch × heads)")
    if why is None:
        return None
    if fast and spec.phase == "prefill":
        refusal = fast_refusal(spec.with_(backward=False), tiling, schedule)
        if refusal is None:
            return None
        why += f", and {refusal}"
    return why + ": check the record's spec"


def _record_schedule(tiling: Tiling, tile_order: str, grid_order: str) -> Schedule | None:
    """The forward launch a record ran (its grid order, ascending key blocks), or None where its
    fields name no launch (the prediction then says why)."""
    try:
        return Schedule.for_tiling(tiling, tile_order=tile_order, grid_order=grid_order)
    except IomodelError:
        return None


def labels_of(l2: L2Prediction) -> dict[tuple[str, str], tuple[str, str]]:
    """The (HBM level, direction) whose DRAM bytes an L2-aware prediction labels, as
    :attr:`ShapeReconciliation.labels`: each kernel's quality other than ``predicted`` (``l2.read_qualities``,
    ``l2.write_qualities``) at its level ``HBM <kernel>`` (a lone forward's ``fwd kernel`` is the level ``HBM``) with
    the estimate's sentence for it (``l2.label_sentences``); ``HBM`` of a training step takes the lowest of its
    kernels' (``l2.read_quality``, ``l2.write_quality``) and joins their sentences. Raises nothing."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for which, qualities, worst in (("read", l2.read_qualities, l2.read_quality),
                                    ("write", l2.write_qualities, l2.write_quality)):
        said = []
        for name, quality in qualities.items():
            if quality == "predicted":
                continue
            sentence = l2.label_sentences[(name, which)]
            if name != "fwd kernel":
                out[(f"HBM {name}", which)] = (quality, sentence)
            said.append(sentence)
        if said:
            out[("HBM", which)] = (worst, " ".join(said))
    return out


def reconcile_shape(
    shape: ShapeMeasurement,
    hardware: Hardware,
    *,
    l2_fraction: float = DEFAULT_L2_FRACTION,
    flush_between_kernels: bool = True,
    predict_fn: PredictFn = default_predict,
    l2_source: str = "tex",
    l2_ways: int | None = DEFAULT_L2_WAYS,
    collected: Iterable[str] | None = None,
    forward_constants: bool = True,
) -> ShapeReconciliation:
    """Reconcile one measured shape.

    Args:
        shape: the measurement (ncu kernels or interpreter counts).
        hardware: device description (L2 bytes, SMs, shared memory).
        l2_fraction: effective fraction of L2 (see :mod:`iomodel.cache.params`).
        flush_between_kernels: the profiler flushed caches before each kernel.
        predict_fn: the model's ``predict`` (tests pass a stand-in).
        l2_source: what stands for the SMs' requests: ``auto`` (default: the bytes the SMs
            received from / sent to the L2 over the crossbar when measured, else ``tex``),
            ``sm`` (those only), ``tex`` (L2 lookups from source unit TEX) or ``all`` (L2
            lookups from any source); see :data:`L2_SOURCES`.
        l2_ways: L2 associativity of the L2-aware prediction (None: fully associative LRU).
        collected: the quantities the run collected (:func:`collected_quantities`); default:
            those the shape's own kernels name. DRAM bytes are always expected of a profiled
            shape; a collected quantity null or absent in a kernel makes that direction
            *not measured* (``LevelCompare.missing``).
        forward_constants: forward launches at their own constants (``FORWARD_L2``) where they apply; False: the
            legacy model (:func:`reconcile`).

    Returns:
        :class:`ShapeReconciliation`; model errors, and a shape with nothing measured, become
        its ``error``, never an exception.
    """
    out = ShapeReconciliation(shape.id, shape.impl, shape.spec)
    if shape.error:
        out.error = shape.error
        return out
    if not shape.kernels and shape.sram_fill is None and shape.impl in ("tiled", "baseline", "baseline-fp32"):
        out.error = "the record has no profiled kernel and no interpreter counts for this shape"
        return out
    spec = shape.spec
    expected = set(_shape_collected(shape) if collected is None else collected) | {"dram_read_bytes", "dram_write_bytes"}
    try:
        if shape.impl == "tiled":
            tiling = shape.tiling()
            if tiling is None:
                out.error = "the record has no kernel configuration (config)"
                return out
            out.tiling = tiling
            if (edited := grid_mismatch(shape, tiling)) is not None:
                out.error = edited
                return out
            if shape.seqlens is not None:  # a ragged batch: its own model (iomodel/traffic/ragged.py)
                _reconcile_ragged(out, shape, tiling, hardware, expected, l2_source,
                                  l2_fraction, flush_between_kernels, l2_ways, forward_constants)
                return out
            pred = predict_fn(spec, tiling, hardware)
            alg = pred.algorithms["tiled"]
            model_fill = _sum_rows(alg.rows, "SRAM_fill")
            if shape.sram_fill is not None:  # interpreter record: exact per tensor
                _interpreter_fill(out, shape, model_fill, alg.sram_fill_read_bytes, alg.sram_fill_write_bytes)
            if shape.kernels and spec.backward:
                from iomodel.cache.estimate import not_estimated

                too_big = not_estimated(spec, tiling, None, hardware.l2_bytes, read_fraction_of(hardware))  # the worksheet's bounds, the record's S
                if too_big is not None:
                    out.error = f"the L2-aware prediction is not computed: {too_big}: check the record's spec"
                    return out
                _reconcile_training_step(out, shape, pred, expected,
                                         l2_params(hardware, 1, forward_constants, l2_fraction=l2_fraction,
                                                     flush_between_kernels=flush_between_kernels, ways=l2_ways),
                                         hardware)
            elif shape.kernels:
                recorded = recorded_launch(shape.config)
                out.tile_order, grid_order = recorded["tile_order"], recorded["grid_order"]
                launch = _record_schedule(tiling, out.tile_order, grid_order)
                too_big = not_simulated(spec, tiling, launch, fast=launch is not None and l2_ways is not None
                                        and exact_write_share(l2_fraction))  # the fast evaluation's L2
                if too_big is not None:
                    out.error = f"the L2-aware prediction is not computed: {too_big}"
                    return out
                pps, src = _programs_per_sm(shape, tiling, hardware)
                out.programs_per_sm = (pps, src)
                params = l2_params(hardware, pps, forward_constants, l2_fraction=l2_fraction,
                                     flush_between_kernels=flush_between_kernels, ways=l2_ways)
                l2 = (predict_tiled(spec, tiling, params, out.tile_order) if grid_order == "tiles-fastest" else
                      predict_tiled(spec, tiling, params, schedule=Schedule.for_tiling(
                          tiling, tile_order=out.tile_order, grid_order=grid_order)))  # the kernel's grid order
                out.l2 = l2
                sim_fill = {}
                for k in l2.kernels:
                    for t, v in k.requested_read.items():
                        sim_fill.setdefault(t, [0, 0])[0] += v
                    for t, v in k.requested_write.items():
                        sim_fill.setdefault(t, [0, 0])[1] += v
                tables = PAGE_TABLES if spec.page_size is not None else ()  # paged: not simulated (see the note)
                if {k: v for k, v in sim_fill.items() if v != [0, 0]} != {k: v for k, v in model_fill.items()
                                                                         if v != [0, 0] and k not in tables}:
                    out.notes.append("the L2 simulation's requests differ from the model's SRAM_fill rows")
                if tables:
                    table_bytes = sum(model_fill.get(t, [0, 0])[0] for t in tables)
                    out.notes.append(f"paged KV cache: the L2-aware HBM estimate leaves out the int32 block_table and "
                                     f"cache_seqlens reads ({human_bytes(table_bytes)} requested, in the SRAM_fill and L2 "
                                     "rows); the K/V pages, in random order, are the dense bytes")
                out.levels.append(LevelCompare(
                    "HBM", l2.hbm_read_bytes, shape.quantity("dram_read_bytes"),
                    l2.hbm_write_bytes, shape.quantity("dram_write_bytes"),
                    l2.floor_read_bytes, l2.floor_write_bytes, alg.hbm_read_bytes, alg.hbm_write_bytes,
                    missing=_missing(shape, "dram_read_bytes", "dram_write_bytes", expected)))
                q_read, q_write = L2_SOURCES[l2_source]
                if l2_source == "auto" and q_read not in expected:  # the SM side was not collected
                    q_read, q_write = L2_SOURCES["tex"]
                out.l2_metric = q_read
                extra = {name: v for name, v in (
                    ("lts__t_bytes", shape.quantity("l2_total_bytes")),
                    ("any_source_read", shape.quantity("l2_all_read_bytes")),
                    ("any_source_write", shape.quantity("l2_all_write_bytes")),
                    ("from_l2_fabric", shape.quantity("l2_fabric_bytes"))) if v is not None}
                out.levels.append(LevelCompare(
                    "L2", alg.sram_fill_read_bytes, shape.quantity(q_read),
                    alg.sram_fill_write_bytes, shape.quantity(q_write), extra=extra,
                    missing=_missing(shape, q_read, q_write, expected)))
                out.notes += foreign_write_notes(shape)
                expected = expected_kernels(shape.impl, spec, shape.config)
                modelled = {k.name for k in out.l2.kernels}  # the model's own names
                foreign = ([k.name for k in shape.kernels if _kernel_of(k.name) != "_attn_fwd" and k.name not in modelled]
                           if spec.phase == "prefill" else  # a prefill forward launches _attn_fwd (any variant)
                           [k.name for k in shape.kernels if DECODE_KERNEL not in k.name and k.name not in modelled])
                if not _kernel_count_differs(out, shape, expected) and foreign:
                    what = "forward (_attn_fwd)" if spec.phase == "prefill" else f"decode ({DECODE_KERNEL}, its combine)"
                    out.notes.append(f"profiled kernel(s) {', '.join(foreign)} are not the bundled {what}")
                    _not_whole(out, f"kernel {foreign[0][:60]} is not the bundled {what.split(' (')[0]}")
        elif shape.impl in ("baseline", "baseline-fp32"):
            opts = {"score_dtype": "fp32"} if shape.impl == "baseline-fp32" else {}
            tiling = Tiling()
            pred = predict_fn(spec, tiling, hardware, **opts)
            alg = pred.algorithms["baseline"]
            params = l2_params(hardware, 1, forward_constants, l2_fraction=l2_fraction, flush_between_kernels=flush_between_kernels,
                                 ways=l2_ways)
            l2 = predict_baseline(spec, alg.rows, params)
            out.l2 = l2
            out.levels.append(LevelCompare(
                "HBM", l2.hbm_read_bytes, shape.quantity("dram_read_bytes"),
                l2.hbm_write_bytes, shape.quantity("dram_write_bytes"),
                l2.floor_read_bytes, l2.floor_write_bytes, alg.hbm_read_bytes, alg.hbm_write_bytes,
                missing=_missing(shape, "dram_read_bytes", "dram_write_bytes", expected)))
            n_steps = len({r.step for r in alg.rows if r.level == "HBM"})
            if shape.kernels and len(shape.kernels) != n_steps:
                out.notes.append(f"{len(shape.kernels)} kernels profiled for {n_steps} modelled ops")
            elif shape.kernels and spec.backward:
                out.notes.append(_eager_kernel_note(shape, l2, **opts))
        elif (peer := _peer_of(shape, hardware)) is not None:  # FlashAttention-2 or cuDNN: its recorded launch
            _reconcile_peer(out, shape, peer, hardware, expected, l2_fraction, flush_between_kernels, l2_ways,
                            forward_constants)
        else:  # other SDPA backends: measured only, against the floor
            q = spec.batch * spec.heads * spec.seqlen_q * spec.head_dim * spec.width
            out.levels.append(LevelCompare("HBM", None, shape.quantity("dram_read_bytes"), None,
                                           shape.quantity("dram_write_bytes"),
                                           sum(compulsory_read_bytes(spec).values()), q))
            out.notes.append("no model for this backend: measured bytes beside the compulsory floor")
    except IomodelError as exc:
        out.error = str(exc)
    if out.l2 is not None and not out.error:
        out.labels = labels_of(out.l2)
    return out


def reconcile(
    measurement: Measurement,
    *,
    hardware: str | None = None,
    l2_fraction: float | None = None,
    impls: Sequence[str] | None = None,
    tolerances: dict[str, float] | None = None,
    abs_tol: float = DEFAULT_ABS_TOL,
    predict_fn: PredictFn = default_predict,
    l2_source: str | None = None,
    l2_ways: int | None = DEFAULT_L2_WAYS,
    forward_constants: bool = True,
    jobs: int | None = None,
) -> Reconciliation:
    """Reconcile every shape of a measurement record.

    Args:
        measurement: the record (``iomodel validate`` output or an interpreter record).
        hardware: preset name overriding the record's hardware.
        l2_fraction: effective L2 fraction; default: the record's ``settings.l2_model.l2_fraction``,
            else :data:`~iomodel.cache.params.DEFAULT_L2_FRACTION`.
        impls: only these implementations.
        tolerances: relative tolerance per level (default :data:`DEFAULT_TOLERANCES`).
        abs_tol: absolute tolerance in bytes for HBM and L2.
        predict_fn: the model's ``predict``.
        l2_source: ``tex`` or ``all``, see :func:`reconcile_shape`; default: the record's
            ``settings.l2_model.l2_source``, else ``auto``.
        l2_ways: L2 associativity of the L2-aware prediction (default
            :data:`~iomodel.cache.params.DEFAULT_L2_WAYS`; None: fully associative LRU).
        forward_constants: predict forward launches with their own constants (``FORWARD_L2``) where ``l2_fraction``
            and ``l2_ways`` are the defaults (True, the model); False: every kernel with the same constants (the
            legacy model, for comparison).
        jobs: processes the shapes are spread over (a speed setting: every number, note and label is the same): 1 one
            process; N > 1 N forked processes (at most one a CPU); None or 0 (the default) automatic: this process
            first, then one per idle CPU once the record has taken :data:`PARALLEL_AFTER_S`
            (:func:`_reconcile_shapes`). One process on a system other than Linux or in a pool's daemon worker.

    Returns:
        :class:`Reconciliation`.

    Raises:
        IomodelError: no hardware known, an l2_fraction outside (0, 1], an unknown
            l2_source or one whose quantities the record did not collect (where it collected other L2 ones),
            l2_ways not a positive integer, jobs not an integer of at least 0, no shape left, or a worker process
            that died.
    """
    if l2_source is None:
        l2_source = str((measurement.settings.get("l2_model") or {}).get("l2_source", "auto"))
    if l2_source not in L2_SOURCES:
        raise IomodelError(f"l2_source {l2_source!r} is unknown: use {' or '.join(L2_SOURCES)}")
    hw = hardware_of(measurement, hardware)
    frac = l2_fraction
    if frac is None:
        frac = float((measurement.settings.get("l2_model") or {}).get("l2_fraction", DEFAULT_L2_FRACTION))
    if (why := l2_fraction_refusal(frac, hw.l2_bytes, "pass e.g. --l2-fraction 0.5")) is not None:
        raise IomodelError(why)  # a fraction leaving no L2 line divided by zero
    flush = measurement.settings.get("cache_control", "all") == "all"
    shapes = measurement.select(impls)
    if not measurement.shapes:
        raise IomodelError("the record holds no measured shape (its 'shapes' list is empty): re-run the sweep that "
                           "wrote it (iomodel validate SWEEP) or pass a record with shapes")
    if not shapes:
        have = sorted({s.impl for s in measurement.shapes})
        raise IomodelError(f"no measured shape of implementation(s) {', '.join(map(repr, impls or []))}: this record "
                           f"holds {', '.join(map(repr, have)) or 'no shape'}: pass --impl among them")
    if l2_ways is not None and (not isinstance(l2_ways, int) or not 1 <= l2_ways <= MAX_L2_WAYS):
        raise IomodelError(f"l2_ways must be an integer from 1 to {MAX_L2_WAYS} (or 0 on the command line for a "
                           f"fully associative LRU), got {l2_ways!r}")
    collected = collected_quantities(measurement)
    has_l2 = bool(collected & {q for pair in L2_SOURCES.values() for q in pair})
    if l2_source != "auto" and has_l2 and not set(L2_SOURCES[l2_source]) & collected:
        others = [s for s, pair in L2_SOURCES.items() if s != "auto" and set(pair) & collected]
        raise IomodelError(f"l2_source {l2_source!r} compares {' and '.join(L2_SOURCES[l2_source])}, which this record "
                           f"did not collect, so its L2 level would be empty: use --l2-source "
                           f"{' or '.join(['auto'] + others)}")
    opts = dict(l2_fraction=frac, flush_between_kernels=flush, predict_fn=predict_fn, l2_source=l2_source,
                collected=collected, forward_constants=bool(forward_constants))
    tol = dict(DEFAULT_TOLERANCES)
    tol.update(tolerances or {})
    if jobs is not None and (isinstance(jobs, bool) or not hasattr(jobs, "__index__") or jobs < 0):
        raise IomodelError(f"jobs must be 0 (automatic: see --jobs) or a number of processes, got {jobs!r}: pass "
                           "e.g. --jobs 1 for one process")
    job = _ShapeJob(shapes, measurement, hw, frac, tol, abs_tol, l2_ways, forward_constants, opts)
    rows = _reconcile_shapes(job, None if jobs is None else int(jobs))
    return Reconciliation(measurement, hw, frac, rows, tol, abs_tol, l2_ways, forward_constants)


#: Seconds :func:`reconcile` spends on a record's shapes in its own process, lightest first, before it spreads the
#: rest over processes (``jobs`` automatic): a record done by then never forks (starting workers costs more than it
#: saves, and this process keeps its compiled formulas and memos for the next call); a longer one hands its workers
#: the formulas compiled so far. A speed choice, not a model constant.
PARALLEL_AFTER_S = 1.0
#: Most processes the automatic ``jobs`` starts (each compiles the formulas this process has not; a container's CPU
#: quota is not what ``sched_getaffinity`` reports). A speed choice.
PARALLEL_MAX_WORKERS = 8


@dataclass
class _ShapeJob:
    """What :func:`_reconcile_one` needs to reconcile one shape of a record (passed explicitly; a forked worker
    inherits it through its pool's initializer, not pickled)."""

    shapes: list[ShapeMeasurement]
    measurement: Measurement
    hw: Hardware
    frac: float
    tol: dict[str, float]
    abs_tol: float
    l2_ways: int | None
    forward_constants: bool
    opts: dict[str, Any]


def _cpus() -> int:
    """CPUs this process may run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _idle_cpus() -> int:
    """CPUs this process may run on less those other processes keep busy now: the runnable threads Linux counts in
    ``/proc/loadavg`` beyond this one, the least of three looks 20 ms apart (elsewhere the 1-minute load average
    beyond 1, ``os.getloadavg``, which also counts this process's own recent workers). Under pytest-xdist or beside
    another job, more workers than idle CPUs made a record slower, not faster (a fresh user's timings, 2026-12-07:
    10-20 % slower on a busy 2-core host)."""
    import os
    import time

    try:
        looks = []
        for k in range(3):
            if k:
                time.sleep(0.02)
            with open("/proc/loadavg") as f:
                looks.append(int(f.read().split()[3].split("/")[0]) - 1)  # running threads, this one excluded
        busy = min(looks)
    except (OSError, ValueError, IndexError):
        busy = round(os.getloadavg()[0] - 1.0) if hasattr(os, "getloadavg") else 0
    return max(1, _cpus() - max(0, busy))


def _can_fork() -> bool:
    """Whether shapes may be spread over forked processes: Linux (fork is the start method CPython deems safe
    there), and this process not a pool's daemon worker (which cannot start its own)."""
    import multiprocessing
    import sys

    return sys.platform.startswith("linux") and not multiprocessing.current_process().daemon


def _reconcile_shapes(job: _ShapeJob, jobs: int | None) -> list[ShapeReconciliation]:
    """Every shape of ``job``, in the record's order. ``jobs`` 1: one process; N > 1: N forked processes from the
    start (at most one a CPU and one a shape), the heaviest shapes first; None or 0 (automatic): this process
    reconciles the lightest shapes for :data:`PARALLEL_AFTER_S`, then the rest over one process per idle CPU
    (:func:`_idle_cpus`, at most :data:`PARALLEL_MAX_WORKERS`). One process wherever :func:`_can_fork` is false. Each shape is reconciled whole
    by one process with the same code, so the numbers, notes and labels do not depend on ``jobs``.

    Raises:
        IomodelError: a worker process died (killed for memory, say): run it again with jobs 1.
    """
    import time

    n = len(job.shapes)
    by_work = sorted(range(n), key=lambda i: _work(job.shapes[i].spec))  # lightest first
    done: dict[int, ShapeReconciliation] = {}
    if jobs == 1 or n < 2 or not _can_fork():
        return [_reconcile_one(job, i) for i in range(n)]
    if not jobs:  # automatic: the light shapes here, until it would pay to fork
        t0 = time.perf_counter()
        while by_work and time.perf_counter() - t0 < PARALLEL_AFTER_S:
            i = by_work.pop(0)
            done[i] = _reconcile_one(job, i)
        workers = min(_idle_cpus(), PARALLEL_MAX_WORKERS, len(by_work)) if by_work else 0  # done: no look at the CPUs
    else:
        workers = min(jobs, _cpus(), len(by_work))
    if workers > 1:
        done.update(_in_processes(job, by_work[::-1], workers))  # the heaviest first: no worker left with one at the end
    else:
        done.update((i, _reconcile_one(job, i)) for i in by_work)
    return [done[i] for i in range(n)]


def _in_processes(job: _ShapeJob, order: list[int], workers: int) -> dict[int, ShapeReconciliation]:
    """Shapes ``order`` of ``job`` reconciled in ``workers`` forked processes (they inherit the record, the options,
    ``predict_fn`` included, which need not pickle, and this process's compiled formulas); one process where the
    pool cannot start (no fork or shared memory here).

    Raises:
        IomodelError: a worker died while reconciling (killed for memory, say)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:  # the workers fork at the first task: a fork refused (no memory, a process limit) is an OSError there
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_set_job,
                                 initargs=(job,)) as pool:
            return dict(zip(order, pool.map(_reconcile_in_worker, order)))
    except BrokenProcessPool as exc:
        raise IomodelError(f"a process reconciling this record's shapes died ({exc}; killed for memory?): run it in "
                           "one process, --jobs 1") from None
    except OSError:
        return {i: _reconcile_one(job, i) for i in order}


#: The job a forked worker of :func:`_in_processes` reconciles (set in the worker only, by its initializer).
_WORKER_JOB: _ShapeJob | None = None


def _set_job(job: _ShapeJob) -> None:
    global _WORKER_JOB
    _WORKER_JOB = job


def _reconcile_in_worker(i: int) -> ShapeReconciliation:
    assert _WORKER_JOB is not None
    return _reconcile_one(_WORKER_JOB, i)


def _work(spec: LayerSpec) -> int:
    """A shape's relative reconciling time, for ordering only: its query-key pairs per KV head's schedule
    (B·H·N_q·N_k), three kernels' worth for a training step."""
    return spec.batch * spec.heads * spec.seqlen_q * spec.seqlen_k * (3 if spec.backward else 1)


def _reconcile_one(job: _ShapeJob, i: int) -> ShapeReconciliation:
    """Shape ``i`` of ``job``, with its replacement-policy band."""
    s = job.shapes[i]
    # one shape's kernels are built once for both of its predictions (the band's LRU below)
    with wave_cache():
        row = reconcile_shape(s, job.hw, l2_ways=job.l2_ways, **job.opts)
        if job.l2_ways is not None:  # the replacement-policy band of every HBM gap
            alone = Reconciliation(job.measurement, job.hw, job.frac, [row], job.tol, job.abs_tol, job.l2_ways,
                                   job.forward_constants)
            _add_band(row, s, alone, job.hw, job.l2_ways, job.opts)
    return row


#: Most touches (:func:`iomodel.cache.stream.dkdv_touches`) of a causal dK/dV kernel without a window for which the
#: replacement-policy band is computed: under the fully associative LRU that kernel is simulated access by access
#: (the fast evaluation covers its windowed form only), about 7 µs a touch on the 2-core development machine
#: (Llama-3-8B's layer, BWD 32×64 tiles, 2026-12-04: 2^15 tokens 262,144 touches 1.8 s, 2^16 1,048,576 touches 7.0 s;
#: 2^18 would take about 2 min). Past it the row says the band was not computed (no committed receipt comes near).
BAND_MAX_DKDV_TOUCHES = 1_100_000


def _band_refusal(shape: ShapeMeasurement) -> str | None:
    """Why the replacement-policy band of ``shape`` is not computed (one clause), or None."""
    spec = shape.spec
    if shape.impl != "tiled" or not (spec.backward and spec.causal and spec.band is None and spec.phase == "prefill"):
        return None  # the bundled kernel's dK/dV only (the eager chain and SDPA have none)
    tiling = shape.tiling()
    if tiling is None:
        return None
    from iomodel.cache.stream import dkdv_touches  # numpy: imported only here

    touches = dkdv_touches(spec, tiling)
    if touches <= BAND_MAX_DKDV_TOUCHES:
        return None
    return (f"its causal dK/dV kernel has {touches:,} touches, above {BAND_MAX_DKDV_TOUCHES:,}, and the fully associative "
            "LRU simulates them access by access")


def _add_band(row: ShapeReconciliation, shape: ShapeMeasurement, alone: Reconciliation, hw: Hardware, l2_ways: int,
              opts: dict[str, Any]) -> None:
    """Note on ``row``, when its HBM level is outside tolerance (``alone``: the reconciliation of
    that row by itself), what a fully associative LRU predicts beside the ``l2_ways``-way L2, or why
    that band is not computed (:func:`_band_refusal`)."""
    for _, bad in alone.outside():
        if row.error is None and row.l2 is not None and any(b.startswith("HBM") for b in bad):
            why = _band_refusal(shape)
            if why is not None:
                row.notes.append(f"replacement-policy band not computed: {why}")
                continue
            alt = reconcile_shape(shape, hw, l2_ways=None, **opts).level("HBM")
            if alt is not None:
                lru = [human_bytes(v, decimals=1) for v in (alt.predicted_read, alt.predicted_write)]
                hbm = row.level("HBM")
                ways = [human_bytes(v, decimals=1) for v in (hbm.predicted_read, hbm.predicted_write)]
                label = f"the {l2_ways}-way L2"
                if alone.forward_used:  # the forward's own constants, not only its ways
                    label = (f"the set-associative L2 (the forward's own constants, {forward_l2_of(hw).ways} ways"
                             + (f"; {l2_ways} ways for the backward kernels)" if shape.spec.backward else ")"))
                row.notes.append(
                    f"replacement-policy band: a fully associative LRU (one capacity, every byte read weighing 1) "
                    f"predicts {lru[0]} read, {lru[1]} written, {label} {ways[0]} and {ways[1]}")


def scan_l2_fraction(measurement: Measurement, fractions: Sequence[float], **kwargs: Any) -> list[dict[str, Any]]:
    """Within-tolerance fractions of the HBM level for several effective L2 fractions.

    A diagnostic for the one free parameter of the L2-aware prediction: it shows how much
    the agreement depends on it (a value chosen from this table must be recorded in the
    sweep file's ``[l2_model]`` and stated with the results).

    Every fraction is tried on one model for every kernel (``forward_constants=False``: the forward's own constants,
    ``FORWARD_L2``, would apply at the default fraction only, and the table would compare two models).

    Args:
        measurement: the record.
        fractions: values of ``l2_fraction`` to try, each in (0, 1].
        kwargs: passed to :func:`reconcile` (hardware, impls, tolerances ...).

    Returns:
        one dict per fraction: ``l2_fraction`` and ``(impl, level, which) -> fraction within``.
    """
    out = []
    kwargs = {**kwargs, "forward_constants": False}
    for f in fractions:
        rec = reconcile(measurement, l2_fraction=f, **kwargs)
        out.append({"l2_fraction": f, **{f"{s['impl']} {s['level']} {s['which']}": s["fraction"]
                                          for s in rec.summary() if s["level"] == "HBM"}})
    return out


__all__ = [
    "DEFAULT_ABS_TOL",
    "DEFAULT_TOLERANCES",
    "L2_SOURCES",
    "LevelCompare",
    "PredictFn",
    "Reconciliation",
    "ShapeReconciliation",
    "collected_quantities",
    "default_predict",
    "foreign_write_bytes",
    "foreign_write_notes",
    "gap_sentence",
    "hardware_of",
    "not_simulated",
    "missing_reason",
    "reconcile",
    "reconcile_shape",
    "scan_l2_fraction",
]
