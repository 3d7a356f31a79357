"""Sweep files: the shapes and implementations to measure, and how to run Nsight Compute on them.

A sweep file is TOML (see :func:`parse_sweep` for the format; ``sweeps/`` holds the bundled
ones). It names a hardware preset, defaults for every shape, ``[[shape]]`` entries whose list
values expand to their cartesian product, the ``[ncu]`` settings (metrics, batch size, cache
and clock control, the single-pass DRAM run) and the ``[l2_model]`` parameters the
reconciliation uses. Nothing here imports torch.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from iomodel import jsonvalues as jv
from iomodel.errors import IomodelError
from iomodel.paths import read_toml
from iomodel.schedule.tiles import DECODE_MAX_SEQLEN_Q
from iomodel.measure.metrics import DEFAULT_METRICS
from iomodel.measure.records import IMPLS, ragged_spec, read_seqlens, shape_id, shape_tag
from iomodel.spec import PASSES, LayerSpec
from iomodel.spec.layer import causal_right_refusal

#: LayerSpec fields a sweep entry may set (plus ``seqlen`` = both lengths, ``pass`` = "fwd" or
#: "fwd+bwd" (one training step), ``window`` = L or [L, R] (the sliding window), ``impls``, ``seed``).
#: ``page_size``: decode over a paged KV cache of that many tokens per page (bundled kernel only).
_SPEC_FIELDS = ("batch", "heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k", "dtype", "causal",
                "causal_align", "phase", "name", "backward", "page_size")  # backward: set from ``pass`` only


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
        seqlens: a ragged (varlen) batch: one ``(N_q, N_k)`` pair per sequence (tokens), ``spec``
            then being the batch padded to its longest sequence; None for a dense batch.
        grid_order: the bundled kernel's program order (``KernelConfig.grid_order``;
            :data:`iomodel.schedule.launch.KERNEL_GRID_ORDERS`); ``heads-fastest`` runs the
            kernel's first autotune candidate (``kernels.heuristics.prefill_default``) in that
            order unless a config is pinned.
        group_splits: (``tiled`` training step) the GQA group slices S of the dK/dV kernel, forced
            (``kernels.heuristics.BackwardConfig.group_splits``, 1..G); 0: the launcher picks S
            (``heuristics.dkdv_group_splits``), as a user's call does.
        heads_per_program: (``tiled`` dense prefill forward) P > 1: the pointer prefill's first tiles with P query
            heads of one KV head packed into each program (``KernelConfig.heads_per_program``, path ``prefill``).
        tile_order: (``tiled`` dense prefill forward) ``forward`` or ``reverse``: the kernel's first autotune
            candidate run in that query-tile order (``KernelConfig.tile_order``), in ``grid_order``; None: the kernel
            chooses (a causal launch's LPT rule or the autotuner's order).
    """

    id: str
    impl: str
    spec: LayerSpec
    seed: int = 0
    config: dict[str, Any] | None = None
    seqlens: tuple[tuple[int, int], ...] | None = None
    grid_order: str = "tiles-fastest"
    group_splits: int = 0
    heads_per_program: int = 1
    tile_order: str | None = None

    def ragged(self) -> Any:
        """The :class:`~iomodel.spec.ragged.RaggedSpec` of a ragged shape (None for a dense one)."""
        return ragged_spec(self.spec, self.seqlens)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the child process reads it)."""
        spec = self.spec.to_dict()
        spec.pop("pass", None)
        out = {"id": self.id, "impl": self.impl, "spec": spec, "seed": self.seed}
        if self.config is not None:
            out["config"] = dict(self.config)
        if self.seqlens is not None:
            out["seqlens"] = [list(p) for p in self.seqlens]
        if self.grid_order != "tiles-fastest":
            out["grid_order"] = self.grid_order
        if self.group_splits:
            out["group_splits"] = self.group_splits
        if self.heads_per_program > 1:
            out["heads_per_program"] = self.heads_per_program
        if self.tile_order is not None:
            out["tile_order"] = self.tile_order
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SweepShape":
        """Inverse of :meth:`to_dict` (the LayerSpec validates itself)."""
        spec = dict(d["spec"])
        spec.pop("pass", None)
        cfg = d.get("config")
        layer = LayerSpec(**spec)
        return cls(id=d["id"], impl=d["impl"], spec=layer, seed=int(d.get("seed", 0)),
                   config=dict(cfg) if cfg else None,
                   seqlens=read_seqlens(d.get("seqlens"), layer, "shape seqlens", "rewrite the shapes file"),
                   grid_order=str(d.get("grid_order", "tiles-fastest")),
                   group_splits=int(d.get("group_splits", 0)),
                   heads_per_program=int(d.get("heads_per_program", 1)),
                   tile_order=d.get("tile_order"))


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
            :data:`~iomodel.measure.metrics.DRAM_PASS_METRICS`, a single replay pass, and take the DRAM bytes from it.
            Kernel replay restores the memory a kernel writes before every further pass; the
            restore leaves dirty lines in L2 that the measured pass then writes back, which
            inflates ``dram__bytes_write`` by up to a few MiB (measured on the H200,
            2026-11-29: 2.3 MiB with 20 metrics against 0.05 MiB with 3, same decode kernel;
            receipts/raw/replay-probe-*). The multi-pass values are kept beside them.
        l2_model: parameters of the L2-aware prediction (see :mod:`iomodel.cache.params`).
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

    def select(self, impls: Sequence[str] | None = None, limit: int | None = None) -> None:
        """Keep only the shapes of ``impls`` (all when None or empty), then the first ``limit``.

        Raises:
            IomodelError: an implementation name is unknown, ``limit`` is below 1, or no shape is left.
        """
        if impls:
            bad = [i for i in impls if i not in IMPLS]
            if bad:
                raise IomodelError(f"unknown implementation(s) {bad}: use {', '.join(IMPLS)}")
            self.shapes = [s for s in self.shapes if s.impl in impls]
        if limit is not None:
            if limit < 1:
                raise IomodelError(f"--limit must be 1 or more (the first N shapes), got {limit}: drop it to measure "
                                   "every shape")
            self.shapes = self.shapes[:limit]
        if not self.shapes:
            raise IomodelError("no shapes left to measure: check --impl and --limit")


#: Implementations that take a sliding window (SDPA has no window argument).
WINDOW_IMPLS = ("tiled", "baseline", "baseline-fp32")
#: Implementations that read a paged KV cache (block_table / cache_seqlens): the bundled kernel only.
PAGED_IMPLS = ("tiled",)
#: Implementations that take a packed ragged batch (cu_seqlens): the bundled kernel's varlen entry only.
RAGGED_IMPLS = ("tiled",)


def _ragged_entry(entry: dict[str, Any], where: str) -> tuple[tuple[int, int], ...]:
    """Pop a sweep entry's ``seqlens`` (a list of lengths ``n`` or ``[N_q, N_k]`` pairs, tokens)
    and set the entry's batch and lengths to the padded batch (count, longest q, longest k;
    phase prefill).

    Raises:
        IomodelError: seqlens not a non-empty list of such items, or the entry also sets batch,
            seqlen, seqlen_q, seqlen_k, page_size, a decode phase or pass = "fwd+bwd" (a ragged batch
            is a forward prefill whose sequences give batch and lengths).
    """
    from iomodel.spec.ragged import _pair

    raw = entry.pop("seqlens")
    if not isinstance(raw, list) or not raw:
        raise IomodelError(f"{where}: seqlens must be a non-empty list of lengths or [q, k] pairs such as "
                           f"[512, 3000, 77], got {jv.describe(raw)}: fix the file")
    clash = [k for k in ("batch", "seqlen", "seqlen_q", "seqlen_k", "page_size") if entry.get(k) is not None]
    if clash:
        raise IomodelError(f"{where}: seqlens gives the batch and the lengths: drop {', '.join(clash)} from the entry "
                           "(and from [defaults])")
    if entry.get("phase", "prefill") != "prefill" or entry.get("backward"):
        raise IomodelError(f"{where}: a ragged batch (seqlens) is measured for the forward prefill only: drop "
                           "phase = \"decode\" and pass = \"fwd+bwd\"")
    pairs = []
    for i, item in enumerate(raw):
        if isinstance(item, str) or (isinstance(item, list) and any(isinstance(n, str) for n in item)):
            raise IomodelError(f"{where}: seqlens[{i}] = {jv.describe(item)} is text: write the length as a number "
                               "(512) or a [q, k] pair of numbers ([77, 4096]) in the sweep file")
        q, k = _pair(item, f"{where}: seqlens[{i}]")
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in (q, k)):
            shown = repr(item) if isinstance(item, list) and len(item) <= 2 else jv.describe(item)  # [3, 0], not "array"
            raise IomodelError(f"{where}: seqlens[{i}] = {shown}: every length must be a whole number "
                               "of tokens, 1 or more: fix the file")
        pairs.append((q, k))
    entry.update(batch=len(pairs), seqlen_q=max(q for q, _ in pairs), seqlen_k=max(k for _, k in pairs),
                 phase="prefill")
    return tuple(pairs)


def _window_sides(value: Any, where: str) -> tuple[int | None, int | None]:
    """A sweep's ``window``: ``L`` (keys up to L tokens left of the diagonal, right side
    unbounded, as ``iomodel worksheet --window L``) or ``[L, R]`` (-1: that side unbounded,
    flash-attn's ``window_size``), as ``(window_left, window_right)`` in tokens (None: unbounded).

    Raises:
        IomodelError: anything else (a bool, a fraction, a list of another length, a side below -1).
    """
    sides = [value, -1] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(sides, list) or len(sides) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < -1
                                                               for v in sides):
        raise IomodelError(f"{where}: window must be L or [L, R], whole numbers of tokens (-1: that side unbounded), "
                           f"got {jv.describe(value)}: fix the file")
    return tuple(None if v == -1 else v for v in sides)  # type: ignore[return-value]


def _dense_tiled_prefill(entry: dict[str, Any], impls: Any, window_ok: bool = True) -> bool:
    """Whether a raw sweep entry is a dense prefill forward measured with ``tiled`` alone (no backward pass, no decode
    length or phase, no ragged ``seqlens``, and no ``window`` unless ``window_ok``): where the bundled kernel's launch
    options (``grid_order``, ``tile_order``) apply."""
    n_q = entry.get("seqlen_q", entry.get("seqlen"))
    # a short query runs the decode path whatever the phase (kernels.flash_attention.kernel_path), where these launch
    # options do not exist
    decode = entry.get("phase") == "decode" or (isinstance(n_q, int) and n_q <= DECODE_MAX_SEQLEN_Q)
    return not (impls != ["tiled"] or entry.get("backward") or decode or "seqlens" in entry
                or (not window_ok and "window" in entry))


def _grid_order(value: Any, entry: dict[str, Any], impls: Any, where: str) -> str:
    """A sweep entry's ``grid_order``, checked: one of the bundled kernel's grid orders, on a prefill
    forward shape measured with ``tiled`` only.

    Raises:
        IomodelError: one line naming the entry and what to change.
    """
    from iomodel.schedule.launch import KERNEL_GRID_ORDERS

    if value not in KERNEL_GRID_ORDERS:
        raise IomodelError(f"{where}: grid_order must be one of {', '.join(map(repr, KERNEL_GRID_ORDERS))}, got "
                           f"{jv.describe(value)}: fix the file")
    if value != KERNEL_GRID_ORDERS[0]:
        if not _dense_tiled_prefill(entry, impls):
            raise IomodelError(f"{where}: grid_order {value!r} is an option of the bundled kernel's dense prefill "
                               "forward: use impls = [\"tiled\"], pass = \"fwd\" and a dense prefill shape, or drop "
                               "grid_order")
    return value


def _tile_order(value: Any, entry: dict[str, Any], impls: Any, where: str) -> str:
    """A sweep entry's ``tile_order``, checked: ``forward`` or ``reverse``, on a dense prefill forward shape measured
    with ``tiled`` only (the order the kernel's first autotune candidate runs in: :attr:`SweepShape.tile_order`).

    Raises:
        IomodelError: one line naming the entry and what to change.
    """
    from iomodel.schedule.launch import TILE_ORDERS

    if value not in TILE_ORDERS:
        raise IomodelError(f"{where}: tile_order must be one of {', '.join(map(repr, TILE_ORDERS))}, got "
                           f"{jv.describe(value)}: fix the file")
    if not _dense_tiled_prefill(entry, impls, window_ok=False):
        raise IomodelError(f"{where}: tile_order is an option of the bundled kernel's dense prefill forward: use "
                           "impls = [\"tiled\"], pass = \"fwd\" and a dense prefill shape without a window, or drop "
                           "tile_order")
    return value


def _heads_per_program(value: Any, spec: LayerSpec, impls: Any, ragged: bool, where: str) -> int:
    """A sweep entry's ``heads_per_program`` P (query heads of one KV head packed into each program of the bundled
    pointer prefill, ``KernelConfig.heads_per_program``), checked on the entry's layer ``spec``: a whole number, and
    P > 1 only on a dense prefill forward measured with ``tiled`` alone, P dividing the GQA group and the ``prefill``
    path's BLOCK_M on the GPU (:func:`iomodel.schedule.tiles.prefill_packing_refusal`; ``iomodel validate
    --interpreter`` checks its own tiles before counting).

    Raises:
        IomodelError: one line naming the entry and what to change.
    """
    from iomodel.schedule.tiles import prefill_packing_refusal
    from kernels import heuristics as hx  # pure Python: the prefill path's tiles, which the child runs

    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise IomodelError(f"{where}: heads_per_program must be a whole number, 1 or more, got {jv.describe(value)}: "
                           "fix the file")
    if value != 1:
        if impls != ["tiled"] or spec.phase != "prefill":
            raise IomodelError(f"{where}: heads_per_program {jv.describe(value)} packs query heads in the bundled "
                               "kernel's dense prefill forward: use impls = [\"tiled\"] and a prefill shape (the decode "
                               "kernel packs its own), or drop heads_per_program")
        block_m = hx.prefill_default(spec.head_dim, spec.dtype, spec.causal, "prefill").block_m
        why = prefill_packing_refusal(value, spec.group, block_m, spec.backward, "heads_per_program =", ragged)
        if why is not None:
            raise IomodelError(f"{where}: {why}")
    return value


def _l2_model(table: dict[str, Any], source: str, l2_bytes: int) -> dict[str, Any]:
    """A sweep's ``[l2_model]`` table, checked before any measurement: ``l2_fraction`` a number that
    :func:`iomodel.cache.params.l2_fraction_refusal` accepts on the sweep's L2 (``l2_bytes``), ``l2_source`` one of
    :data:`iomodel.reconcile.compare.L2_SOURCES`; no other key (``iomodel reconcile`` reads only these two).

    Raises:
        IomodelError: one line naming the key and what to write.
    """
    from iomodel.cache.params import MIN_L2_BYTES, l2_fraction_refusal
    from iomodel.reconcile.compare import L2_SOURCES

    bad = sorted(set(table) - {"l2_fraction", "l2_source"})
    if bad:
        raise IomodelError(f"{source}: unknown [l2_model] key(s) {bad}: use l2_fraction, l2_source (the L2 ways are "
                           "an option of iomodel reconcile, --l2-ways)")
    if "l2_fraction" in table:
        v = table["l2_fraction"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or l2_fraction_refusal(v, l2_bytes) is not None:
            raise IomodelError(f"{source}: [l2_model] l2_fraction must be a number in (0, 1] that leaves at least one "
                               f"{MIN_L2_BYTES}-byte L2 line, got {jv.describe(v)}: write e.g. 0.5")
    if "l2_source" in table and table["l2_source"] not in L2_SOURCES:
        raise IomodelError(f"{source}: [l2_model] l2_source must be one of {', '.join(map(repr, L2_SOURCES))}, got "
                           f"{jv.describe(table['l2_source'])}: fix the file")
    return table


def _group_splits(value: Any, entry: dict[str, Any], impls: Any, where: str) -> int:
    """A sweep entry's ``group_splits`` (S, forced), checked: a whole number from 1 to the GQA group G on a training
    step (``pass = "fwd+bwd"``) measured with ``tiled`` only.

    Raises:
        IomodelError: one line naming the entry and what to change.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise IomodelError(f"{where}: group_splits must be a whole number, 1 or more, got {jv.describe(value)}: "
                           "fix the file")
    if impls != ["tiled"] or not entry.get("backward"):
        raise IomodelError(f"{where}: group_splits forces the bundled backward's GQA group slices: use impls = "
                           "[\"tiled\"] and pass = \"fwd+bwd\", or drop group_splits")
    heads, kv_heads = entry.get("heads"), entry.get("kv_heads")
    if isinstance(heads, int) and isinstance(kv_heads, int) and kv_heads > 0 and heads % kv_heads == 0 \
            and value > heads // kv_heads:
        raise IomodelError(f"{where}: group_splits {value} is more than the {heads // kv_heads} query heads per KV "
                           "head: use 1 to that many")
    return value


#: The most shapes (after every [[shape]] entry's cartesian product) a sweep may hold: counted before any is built,
#: so a few lists of a thousand values each are refused at once, not after minutes and gigabytes of expansion.
MAX_SWEEP_SHAPES = 100_000


def _expanded_keys(entry: dict[str, Any]) -> list[str]:
    """The keys of one sweep entry whose lists expand (``impls`` stays a list; ``window`` expands only when it holds a
    list: ``window = [[4096, 0], 256]`` is two windows, ``window = [4096, 0]`` is one; ``seqlens`` never expands: it
    is one ragged batch)."""
    return [k for k, v in entry.items() if isinstance(v, list) and k not in ("impls", "seqlens")
            and (k != "window" or any(isinstance(x, list) for x in v))]


def _expand(entry: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Cartesian product over the keys of one sweep entry that :func:`_expanded_keys` names."""
    keys = _expanded_keys(entry)
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
    ``window`` (the sliding window in tokens: ``L``, or ``[L, R]`` with -1 for an unbounded
    side; a list of such pairs expands like any list; see :func:`_window_sides`),
    ``page_size`` (decode over a paged KV cache of that many tokens per page, 16 ... 1024;
    :attr:`~iomodel.spec.LayerSpec.page_size`),
    ``seqlens`` (one ragged batch: a list of lengths, or ``[N_q, N_k]`` pairs, in tokens, e.g.
    ``[512, 3000, 77]``; the forward prefill of ``tiled`` only, run by
    ``kernels.flash_attention.flash_attention_varlen``; it gives batch and lengths, the spec
    being the batch padded to its longest sequence; never expanded: one entry per batch),
    ``impls`` (list of implementations, default ``["tiled"]``), ``seed`` (default 0) and
    ``grid_order`` (the bundled kernel's program order, ``"tiles-fastest"`` (default) or
    ``"heads-fastest"``; prefill forward of ``tiled`` only; the shape id gains ``-heads-fastest``) and
    ``group_splits`` (S, 1..G: the dK/dV kernel's GQA group slices forced on a ``tiled`` training step; the shape id
    gains ``-sS``; absent, the launcher picks S) and ``heads_per_program`` (P: query heads of one KV head packed into
    each program of the bundled pointer prefill, a dense ``tiled`` prefill forward; the shape id gains ``-pP``) and
    ``tile_order`` (``"forward"`` or ``"reverse"``: the kernel's first autotune candidate in that query-tile order, a
    dense ``tiled`` prefill forward without a window; the shape id gains ``-tforward`` or ``-treverse``).

    Raises:
        IomodelError: an unknown key, an invalid shape or window, an unknown implementation, an
            SDPA implementation on a window shape (SDPA has no window), a page_size on a prefill shape
            or with an implementation other than ``tiled``, a seqlens entry that also sets the
            batch or a length, page_size, decode or backward, or names an implementation other than
            ``tiled``, a duplicate shape, a group_splits that is not 1..G or not on a ``tiled`` training
            step, a tile_order that is not forward or reverse or not on a dense ``tiled`` prefill forward, or no
            shapes at all.
    """
    from iomodel.schedule.capabilities import kernel_refusal  # the bundled kernel's refusal of a tiled shape

    known_top = {"name", "hardware", "defaults", "ncu", "shape", "l2_model", "description"}
    bad = set(data) - known_top
    if bad:
        raise IomodelError(f"{source}: unknown top-level key(s) {sorted(bad)}: use {sorted(known_top)}")
    for key in ("defaults", "ncu", "l2_model"):
        if key in data and not isinstance(data[key], dict):
            raise IomodelError(f"{source}: [{key}] must be a table, got {jv.describe(data[key])}: fix the file")
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
    total = 0
    for n, raw in enumerate(entries, 1):
        if not isinstance(raw, dict):
            raise IomodelError(f"{source}: shape {n} must be a table, got {jv.describe(raw)}: fix the file")
        merged = {**defaults, **raw}
        total += math.prod(len(merged[k]) for k in _expanded_keys(merged)) * max(
            len(merged["impls"]) if isinstance(merged.get("impls"), list) else 1, 1)
        if total > MAX_SWEEP_SHAPES:
            raise IomodelError(f"{source}: the [[shape]] entries expand to more than {MAX_SWEEP_SHAPES:,} shapes "
                               f"(their lists' cartesian products, from shape {n} on): split the sweep or shorten the "
                               "lists")
        empty = sorted(k for k, v in merged.items() if v == [] and k not in ("seqlens",))
        if empty:  # an empty list expands to no shape at all
            raise IomodelError(f"{source}: shape {n} gives an empty list for {', '.join(empty)}: give at least one "
                               "value or drop the key")
        for entry in _expand(merged):
            entry = {"batch": 1, **entry}
            where = f"{source}: shape {n}"
            impls = entry.pop("impls", ["tiled"])
            if not isinstance(impls, list) or not all(isinstance(i, str) for i in impls):
                raise IomodelError(f"{where}: impls must be a list of names such as [\"tiled\"], got "
                                   f"{jv.describe(impls)}: fix the file")
            seed = entry.pop("seed", 0)
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise IomodelError(f"{where}: seed must be a whole number, 0 or more, got {jv.describe(seed)}: fix the file")
            if "backward" in entry:
                raise IomodelError(f"{source}: shape {n} sets 'backward': write pass = \"fwd+bwd\" (or \"fwd\") instead")
            passes = entry.pop("pass", "fwd")
            if passes not in PASSES:
                raise IomodelError(f"{source}: shape {n} has pass {passes!r}: use one of {', '.join(PASSES)}")
            entry["backward"] = passes == "fwd+bwd"
            grid_order = _grid_order(entry.pop("grid_order", "tiles-fastest"), entry, impls, where)
            group_splits = (_group_splits(entry.pop("group_splits"), entry, impls, where)
                            if "group_splits" in entry else 0)
            packed = entry.pop("heads_per_program", 1)  # checked on the layer below
            tile_order = (_tile_order(entry.pop("tile_order"), entry, impls, where)
                          if "tile_order" in entry else None)
            seqlens = None
            if "seqlens" in entry:
                if "batch" not in raw and "batch" not in defaults:
                    entry.pop("batch")  # the implicit batch = 1: the sequences give the batch
                seqlens = _ragged_entry(entry, where)
            if "seqlen" in entry:
                s = entry.pop("seqlen")
                entry.setdefault("seqlen_q", s)
                entry.setdefault("seqlen_k", s)
            unknown = set(entry) - set(_SPEC_FIELDS) - {"window"}
            if unknown:
                keys = [k for k in _SPEC_FIELDS if k != "backward"] + ["pass"]  # backward is written as pass
                raise IomodelError(f"{source}: shape {n} has unknown key(s) {sorted(unknown)}: use {keys}, seqlen, "
                                   "seqlens, window, impls, seed, grid_order, group_splits, heads_per_program, tile_order")
            if "window" in entry:
                entry["window_left"], entry["window_right"] = _window_sides(entry.pop("window"), where)
            q = entry.get("seqlen_q")
            if isinstance(q, int) and not isinstance(q, bool) and q <= DECODE_MAX_SEQLEN_Q and "phase" not in entry:
                entry["phase"] = "decode"
            missing = [k for k in ("heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k") if k not in entry]
            if missing:
                raise IomodelError(f"{where} is incomplete: it does not give {', '.join(missing)}: set it in the entry or in [defaults]")
            for k, v in entry.items():  # the sweep's own words, not the worksheet's flags
                if k in ("batch", "heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k") and (
                        isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                    raise IomodelError(f"{where}: {k} must be a positive whole number, got {jv.describe(v)}: fix the file")
                if k == "causal" and not isinstance(v, bool):  # "false" or 0.5 would be read as causal
                    raise IomodelError(f"{where}: causal must be true or false, got {jv.describe(v)}: fix the file")
                if k in ("name", "dtype", "phase", "causal_align") and not isinstance(v, str):  # the record's strings
                    raise IomodelError(f"{where}: {k} must be a string, got {jv.describe(v)}: fix the file")
            if entry.get("page_size") is not None:
                from iomodel.schedule.tiles import page_size_refusal

                reason = page_size_refusal(entry["page_size"], "fix the file")
                if reason is not None:
                    raise IomodelError(f"{where}: {reason}")
            if entry.get("page_size") is not None and entry.get("phase") != "decode":
                raise IomodelError(f"{where}: page_size (a paged KV cache) is measured for decode only: set seqlen_q "
                                   "<= 16 or phase = \"decode\", or drop page_size")
            if entry.get("phase") == "decode" and entry.get("backward"):
                raise IomodelError(f"{where}: a decode shape has no backward: drop pass = \"fwd+bwd\" or set phase = "
                                   "\"prefill\"")
            try:
                spec = LayerSpec(**entry)
            except TypeError as exc:
                raise IomodelError(f"{where} is incomplete ({exc}): set it in the entry or in [defaults]") from None
            except IomodelError as exc:
                raise IomodelError(f"{where}: {exc}") from None
            packed = _heads_per_program(packed, spec, impls, seqlens is not None, where)
            if (why := causal_right_refusal(spec.causal, spec.window_right)) is not None:
                raise IomodelError(f"{where}: window [{spec.window_left}, {spec.window_right}] {why}: use window = L "
                                   "(or [L, 0]) for a causal shape, or causal = false for a two-sided band")
            for impl in impls:
                if impl not in IMPLS:
                    raise IomodelError(f"{source}: shape {n} has unknown implementation {impl!r}: use one of {', '.join(IMPLS)}")
                if spec.window is not None and impl not in WINDOW_IMPLS:
                    raise IomodelError(f"{where}: {impl} takes no sliding window: use impls among {', '.join(WINDOW_IMPLS)} "
                                       "for a window shape")
                if spec.page_size is not None and impl not in PAGED_IMPLS:
                    raise IomodelError(f"{where}: {impl} reads no paged KV cache: use impls = [\"tiled\"] for a "
                                       "page_size shape")
                if impl == "tiled":  # the bundled kernel's own refusal (HEAD_DIM, dtype, decode limit), before the GPU
                    why = kernel_refusal(spec)
                    if why is not None:
                        raise IomodelError(f"{where}: the bundled kernel does not run this shape: {why}")
                if seqlens is not None and impl not in RAGGED_IMPLS:
                    raise IomodelError(f"{where}: {impl} takes no packed ragged batch: use impls = [\"tiled\"] for a "
                                       "seqlens shape")
                sid = shape_id(spec, impl, seqlens) + shape_tag(grid_order, group_splits, packed, tile_order)
                if sid in seen:
                    raise IomodelError(f"{source}: shape {sid} appears twice: remove the duplicate"
                                       + (" (a ragged id names the count and total tokens: change a length)"
                                          if seqlens is not None else "")
                                       + (" (without a causal mask or a window causal_align changes nothing, so a "
                                          "list of alignments gives one shape twice: give one alignment)"
                                          if not spec.causal and spec.window is None else ""))
                seen.add(sid)
                shapes.append(SweepShape(sid, impl, spec, seed, seqlens=seqlens, grid_order=grid_order,
                                         group_splits=group_splits, heads_per_program=packed, tile_order=tile_order))
    from iomodel.spec.hardware import get_hardware
    from iomodel.spec.resolve import DEFAULT_HARDWARE

    try:  # the preset the predictions will use: known before any measurement
        hardware = get_hardware(str(data.get("hardware") or DEFAULT_HARDWARE))
    except IomodelError as exc:
        raise IomodelError(f"{source}: hardware: {exc}") from None
    l2_model = _l2_model(dict(data.get("l2_model", {})), source, hardware.l2_bytes)
    metrics = ncu.get("metrics", DEFAULT_METRICS)
    if not isinstance(metrics, (list, tuple)) or not all(isinstance(m, str) for m in metrics):
        raise IomodelError(f"{source}: [ncu] metrics must be a list of metric names, got {jv.describe(metrics)}")
    metrics = tuple(metrics)
    odd = next((m for m in metrics if not m or any(c.isspace() or c == "," for c in m)), None)
    if odd is not None:  # ncu takes a comma-separated list: "" or "a,b" would be read as something else
        raise IomodelError(f"{source}: [ncu] metrics has {odd!r}, not one metric name: give each metric as its own "
                           "string, without spaces or commas")
    from iomodel.measure.metrics import METRIC_NAME

    odd = next((m for m in metrics if not METRIC_NAME.fullmatch(m)), None)
    if odd is not None:  # as validate --metrics refuses it
        raise IomodelError(f"{source}: [ncu] metrics has {odd!r}, not an Nsight Compute metric name "
                           "(unit__counter.rollup, e.g. dram__bytes_read.sum): fix the file")
    sweep_name = data.get("name", Path(source).stem)
    if not isinstance(sweep_name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", sweep_name):
        # the name becomes part of output paths (interp-<name>/, <name>-<date>.json): no folders, no "..", no spaces
        raise IomodelError(f"{source}: name must be letters, digits, '.', '_' and '-' (not starting with '.' or '-'), "
                           f"got {jv.describe(sweep_name)}: fix the file")
    dram_pass = ncu.get("dram_pass", False)
    if not isinstance(dram_pass, bool):  # bool("no") is True
        raise IomodelError(f"{source}: [ncu] dram_pass must be true or false, got {jv.describe(dram_pass)}: fix the "
                           "file")
    from iomodel.measure.ncu import CACHE_CONTROLS, CLOCK_CONTROLS

    jv.choice(ncu.get("cache_control", "all"), f"{source}: [ncu] cache_control", CACHE_CONTROLS)  # ncu --cache-control
    jv.choice(ncu.get("clock_control", "none"), f"{source}: [ncu] clock_control", CLOCK_CONTROLS)  # --clock-control
    batch_size = ncu.get("batch_size", 12)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise IomodelError(f"{source}: [ncu] batch_size must be a whole number, 1 or more, got {jv.describe(batch_size)}")
    return Sweep(
        name=sweep_name,
        hardware=str(data.get("hardware", "")),
        shapes=shapes,
        metrics=metrics,
        batch_size=batch_size,
        cache_control=str(ncu.get("cache_control", "all")),
        clock_control=str(ncu.get("clock_control", "none")),
        dram_pass=dram_pass,
        l2_model=l2_model,
        source=source,
    )


def load_sweep(path: str | Path) -> Sweep:
    """Read a TOML sweep file (see :func:`parse_sweep` for the format).

    Raises:
        IomodelError: the file is missing, not TOML, or invalid.
    """
    path = Path(path)
    data = read_toml(path, f"sweep file {str(path)!r}", "pass a TOML file such as sweeps/h200.toml")
    return parse_sweep(data, source=str(path))


__all__ = ["Sweep", "SweepShape", "load_sweep", "parse_sweep"]
