"""Plots of the traffic model: HBM bytes versus sequence length, tile sizes and SRAM size.

Every curve comes from the compiled :func:`iomodel.traffic.sweep` (sympy ``lambdify``,
vectorised over numpy arrays), never from ``subs`` in a loop. Figures are built with
:class:`matplotlib.figure.Figure` (no pyplot state, no display needed) and carry their
assumptions (layer, dtype, heads, tiles, hardware) in a text box. Byte axes use binary
prefixes (1 KiB = 2^10 B, 1 MiB = 2^20 B, 1 GiB = 2^30 B, 1 TiB = 2^40 B).

Each plot function accepts ``measured`` points to overlay (profiling results): a list of
dicts with ``bytes`` (int, bytes moved), ``label`` (legend text), ``level`` (``HBM``,
``L2``, ``SRAM_fill``) and the x coordinate of that plot (``seqlen``; ``block_m`` and
``block_n``, or ``block_n`` and ``num_splits`` for decode; ``sram_bytes``).
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from iomodel import jsonvalues as jv
from iomodel.errors import IomodelError
from iomodel.spec.hardware import Hardware
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.layer import window_masks_nothing
from iomodel.format import human_bytes
from iomodel.paths import write_bytes
from iomodel.schedule.tiles import page_block_refusal
from iomodel.cache.params import forward_l2_of, read_fraction_of, read_fraction_source

#: Marker per measurement level of overlaid points.
LEVEL_MARKERS = {"HBM": "o", "DRAM": "o", "L2": "s", "SRAM_fill": "^", "SRAM": "^"}
#: Colours of the model's curves (colour-blind-safe Okabe-Ito palette).
COLORS = {"baseline": "#D55E00", "tiled": "#0072B2", "tiled_kv_stationary": "#009E73",
          "compulsory": "#000000", "measured": "#CC79A7", "grey": "#999999", "ref": "#E69F00"}
#: Files written by :func:`write_plots`, per plot kind.
PLOT_FILES = {"seqlen": "bytes_vs_seqlen.png", "blocks": "bytes_vs_blocks.png", "sram": "bytes_vs_sram.png"}
PLOT_KINDS = tuple(PLOT_FILES)
_DPI = 150


# ----------------------------------------------------------------------------------
# Axis helpers
# ----------------------------------------------------------------------------------


def _bytes_axis(axis: Any) -> None:
    """Log base-2 axis labelled in binary-prefixed bytes (``64 MiB``, ``1 GiB``)."""
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_minor_locator(LogLocator(base=2, subs=(1.0,), numticks=64))
    axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _pow2_label(v, "B")))


def _tokens_axis(axis: Any) -> None:
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _tokens_label(v)))


def _pow2_label(v: float, unit: str) -> str:
    if v <= 0:
        return ""
    text = human_bytes(v)
    return text if unit == "B" else text.replace("B", unit)


def _tokens_label(v: float) -> str:
    if v <= 0:
        return ""
    if v >= 1024 * 1024:
        return f"{v / 2**20:g}M"
    if v >= 1024:
        return f"{v / 1024:g}k"
    return f"{v:g}"


def _assumptions(spec: LayerSpec, tiling: Tiling | None, hardware: Hardware, extra: str = "") -> str:
    s = spec
    mask = f"causal {s.causal_align}" if s.causal else "no mask"
    parts = [
        f"{s.name or 'layer'}: B={s.batch}, H={s.heads}, H_kv={s.kv_heads}, HEAD_DIM={s.head_dim}, "
        f"{s.dtype} ({s.width} B), {mask}, {s.phase} {s.passes}"
        + (f", paged KV cache of {s.page_size}-token pages" if s.page_size is not None else ""),
    ]
    if tiling is not None:
        parts.append(f"tiles BLOCK_M={tiling.block_m}, BLOCK_N={tiling.block_n}, num_stages={tiling.num_stages}"
                     + (f", num_splits={tiling.num_splits}, heads/program={tiling.heads_per_program}"
                        if s.phase == "decode" else
                        f", heads/program={tiling.heads_per_program} (packed query heads)"
                        if tiling.heads_per_program > 1 else "")
                     + (", O written without LSE" if not tiling.writes_lse else ""))
    parts.append(f"{hardware.name} (L2 {human_bytes(hardware.l2_bytes)}, "
                 f"{human_bytes(hardware.smem_per_block)} shared memory per block)")
    parts.append("HBM bytes = no-reuse model (every load leaves the chip); 1 KiB = 1,024 B")
    if extra:
        parts.append(extra)
    return "\n".join(textwrap.fill(p, 150) for p in ("; ".join(parts[:2]), *parts[2:]))


def _figure(title: str, note: str, legend_rows: int = 0) -> tuple[Figure, Any]:
    """A figure with one axes, its title, and ``note`` (assumptions) at the bottom; with
    ``legend_rows`` > 0 room is kept between the axes and the note for a legend outside
    the plotting area (see :func:`_legend_below`), so it hides no curve."""
    fig = Figure(figsize=(11, 7 + 0.3 * legend_rows), dpi=_DPI)
    scale = 7 / (7 + 0.3 * legend_rows)  # figure fractions of the 7-inch layout
    lines = note.count("\n") + 1
    bottom = (0.11 + 0.022 * lines) * scale + 0.036 * legend_rows * scale
    ax = fig.add_axes((0.085, bottom, 0.895, 1 - 0.07 * scale - bottom))
    fig._iomodel_legend_top = bottom - 0.075 * scale  # type: ignore[attr-defined]  # below the x-axis label
    ax.set_title(title, fontsize=12)
    fig.text(0.01, 0.015, note, fontsize=8, family="monospace", va="bottom", ha="left")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return fig, ax


def _legend(fig: Figure, ax: Any, loc: str = "best") -> None:
    ax.legend(loc=loc, fontsize=8.5, framealpha=0.92)


def _legend_below(fig: Figure, ax: Any, ncol: int = 2) -> None:
    """The legend under the x axis, in the room :func:`_figure` kept (``legend_rows``)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.53, fig._iomodel_legend_top), ncol=ncol,
               fontsize=8.2, frameon=False)


#: The largest coordinate or byte count an overlay point may give (2^63: int64's range, which the curves are
#: evaluated in; a larger point could only be a unit error, and would squeeze every curve out of the figure).
MEASURED_MAX = 2**63


def _check_measured(measured: Iterable[dict[str, Any]] | None, keys: Sequence[str],
                    grid: dict[str, Sequence[int]] | None = None, kind: str = "") -> list[dict[str, Any]]:
    """The overlay points, each checked: ``keys`` and ``bytes`` present, finite and positive
    numbers (the axes are logarithmic: a zero, negative or NaN point cannot be drawn, and is
    refused rather than dropped); ``label`` a string and ``level`` one of :data:`LEVEL_MARKERS`
    if given; each key of ``grid`` one of its values (a heat-map cell that is drawn: a point
    off the grid would have no cell, and is refused rather than dropped).

    Args:
        measured: the points (a list of objects).
        keys: the coordinates every point must have (``("seqlen",)``).
        grid: for a heat map, the drawn values of each coordinate (``{"block_m": [16, ...]}``).
        kind: the plot kind, naming the point in messages (``"blocks"`` -> ``blocks: measured point 0``).

    Raises:
        IomodelError: naming the point and the field.
    """
    if measured is not None and not isinstance(measured, (list, tuple)):
        raise IomodelError(f"measured points must be a list of objects, got {type(measured).__name__}: fix the overlay data")
    name = f"{kind}: measured point" if kind else "measured point"
    out = []
    for i, m in enumerate(measured or []):
        if not isinstance(m, dict) or any(k not in m for k in (*keys, "bytes")):
            raise IomodelError(
                f"{name} {i} must be a dict with {', '.join(repr(k) for k in (*keys, 'bytes'))} "
                "(and optional 'label', 'level'): fix the overlay data"
            )
        for k in (*keys, "bytes"):
            v = m[k]
            jv.number(v, f"{name} {i}: {k!r}", what="a positive finite number (log axes cannot show zero, "
                      "negative or NaN values)", positive=True, fix="fix the overlay data")
            if v > MEASURED_MAX:  # a point far off every curve squeezes them out of the figure (and overflows exp2)
                raise IomodelError(f"{name} {i}: {k!r} = {v!r} is above 2^63, far beyond any layer these plots draw: "
                                   "fix the overlay data")
        for k in ("label", "level"):
            if k in m and not isinstance(m[k], str):
                raise IomodelError(f"{name} {i}: {k!r} must be a string, got {m[k]!r}: fix the overlay data")
        if "level" in m and m["level"] not in LEVEL_MARKERS:
            raise IomodelError(f"{name} {i}: level {m['level']!r} is not a measurement level the plots know: "
                               f"use one of {', '.join(LEVEL_MARKERS)}")
        for k, values in (grid or {}).items():
            if m[k] not in values:
                raise IomodelError(f"{name} {i}: {k} = {m[k]!r} is not on the drawn grid ({k} "
                                   f"{', '.join(str(v) for v in values)}): move the point to a drawn cell or drop it")
        out.append(m)
    return out


def _overlay(ax: Any, points: list[dict[str, Any]], x_of: Any) -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in points:
        groups.setdefault((str(m.get("label", "measured")), str(m.get("level", "HBM"))), []).append(m)
    for (label, level), pts in groups.items():
        xs = [x_of(m) for m in pts]
        ys = [float(m["bytes"]) for m in pts]
        ax.scatter(xs, ys, marker=LEVEL_MARKERS[level], s=46, facecolors="none", linewidths=1.6,
                   edgecolors=COLORS["measured"], zorder=5, label=f"measured {level}: {label}")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    return buf.getvalue()


def _save(fig: Figure, path: str | Path | None) -> Figure:
    """Write ``fig`` as PNG to ``path`` whole or not at all (:func:`iomodel.paths.write_bytes`)."""
    if path is not None:
        write_bytes(path, _png(fig), "the plot path")
    return fig


def _sweep(spec: LayerSpec, tiling: Tiling, hardware: Hardware, vary: dict[str, np.ndarray],
           **options: Any) -> dict[str, dict[str, np.ndarray]]:
    from iomodel.traffic import sweep
    from iomodel.traffic.model import SweepRangeError

    try:
        res = sweep(spec, tiling, hardware, vary, **options)
    except SweepRangeError:
        # the curves are evaluated in int64 (iomodel.traffic.sweep); the worksheet's one point is exact at any size
        raise IomodelError(
            f"the plot's points reach sizes too large for exact int64 evaluation (64·B·H·seqlen_q·seqlen_k·d must stay "
            f"below 2^63 at every point; this layer has B {spec.batch:,}, H {spec.heads:,}, HEAD_DIM {spec.head_dim:,} "
            "and the curves sweep lengths to 2^17 tokens for prefill, 2^20 for decode, or the layer's own): use a "
            "smaller --batch, --heads or --seqlen for the plot (iomodel worksheet evaluates this layer exactly)"
        ) from None
    n = len(next(iter(vary.values())))
    return {alg: {q: np.broadcast_to(np.asarray(v, dtype=float), (n,)) for q, v in quantities.items()}
            for alg, quantities in res.items()}


def decode_tilings(spec: LayerSpec, tiling: Tiling, hardware: Hardware,
                   seqlens: Sequence[int] | np.ndarray) -> list[Tiling] | None:
    """The decode tiles the bundled kernel's launcher picks at each KV-cache length (tokens) of ``seqlens``, with the
    layer's BLOCK_N: :func:`iomodel.report.worksheet.kernel_tiling` of the layer at ``seqlen_k = x`` (its split count,
    ``kernels/heuristics.py`` ``decode_num_splits``, and whether the merge is fused), as the worksheet takes it at the
    layer's own length. None where no launcher picks this layer's tiles: the kernel refuses the layer
    (:func:`iomodel.schedule.capabilities.kernel_refusal`: HEAD_DIM, dtype or seqlen_q, tiles given to model it
    anyway) or ``kernels/heuristics.py`` is not importable. Raises nothing."""
    from iomodel.report.worksheet import _heuristics, kernel_tiling
    from iomodel.schedule.capabilities import kernel_refusal

    if _heuristics() is None or kernel_refusal(spec, hardware) is not None:  # no refusal depends on seqlen_k
        return None
    return [kernel_tiling(spec.with_(seqlen_k=int(x)), hardware, tiles=(None, tiling.block_n, None))[0]
            for x in seqlens]


def _sweep_seqlens(spec: LayerSpec, tilings: Sequence[Tiling], hardware: Hardware, n: np.ndarray,
                   **options: Any) -> dict[str, dict[str, np.ndarray]]:
    """:func:`_sweep` over the KV-cache lengths ``n`` (tokens, decode), each length at its own tiles ``tilings[i]``:
    one sweep per distinct tiling, its lengths' values put in place (the same quantities and units as :func:`_sweep`:
    bytes, FLOPs, seconds, one value per length). Raises IomodelError as :func:`_sweep`."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for t in dict.fromkeys(tilings):
        at = np.array([i for i, u in enumerate(tilings) if u == t])
        part = _sweep(spec, t, hardware, {"seqlen_k": n[at]}, **options)
        for alg, quantities in part.items():
            for q, v in quantities.items():
                out.setdefault(alg, {}).setdefault(q, np.zeros(len(n)))[at] = v
    return out


# ----------------------------------------------------------------------------------
# Bytes versus sequence length
# ----------------------------------------------------------------------------------


def default_seqlens(spec: LayerSpec) -> np.ndarray:
    """Sequence lengths of the x axis: 256 to 128k tokens for prefill, 512 to 1M of KV cache for decode,
    widened to include the layer's own length; 8 points per octave (int64)."""
    own = spec.seqlen_k
    lo, hi = (2**8, 2**17) if spec.phase == "prefill" else (2**9, 2**20)
    lo, hi = min(lo, own), max(hi, own)
    pts = np.unique(np.round(np.geomspace(lo, hi, int(8 * np.log2(hi / lo)) + 1)).astype(np.int64))
    return np.unique(np.append(pts, own))


def seqlen_fields(spec: LayerSpec, n: Any) -> dict[str, Any]:
    """The fields the bytes-versus-seqlen curve sets to each length ``n`` (tokens; an array or one int): seqlen_q and
    seqlen_k for prefill, the KV-cache length seqlen_k for decode. Raises nothing."""
    return {"seqlen_q": n, "seqlen_k": n} if spec.phase == "prefill" else {"seqlen_k": n}


#: Programs the L2-aware curve of :func:`plot_seqlen` may simulate in all (B·H·T_r summed over
#: its simulated points): the worksheet's own bound for one layer, so the curve costs at most about
#: as much as one worksheet estimate (see :data:`iomodel.cache.estimate.L2_ESTIMATE_MAX_PROGRAMS`).
L2_CURVE_MAX_PROGRAMS = 2**17
L2_AWARE_LABEL = "tiled: L2-aware DRAM estimate (what ncu's dram__bytes counts)"
#: Why the seqlen plot draws no L2-aware line for a training step (the line is the forward kernel's, point by point).
L2_TRAINING_NOT_DRAWN = ("this line is the prefill forward kernel's; the training step's estimate, per kernel, "
                         "is in `iomodel worksheet --pass fwd+bwd`")
NO_REUSE_LABEL = "tiled (bundled kernel): HBM bytes transferred,\nno-reuse HBM bound (every load leaves the chip)"


def l2_aware_points(spec: LayerSpec, tiling: Tiling, hardware: Hardware,
                    seqlens: Sequence[int] | np.ndarray) -> tuple[list[int], list[int], list[tuple[int, str]]]:
    """The L2-aware DRAM estimate of the tiled prefill forward kernel at a subset of ``seqlens``.

    Candidates: the layer's own length (if within the range of ``seqlens``) and every power of
    two within that range (one point per octave), in that order (the own length first, then
    ascending). Each is evaluated with
    :func:`iomodel.cache.predict.predict_tiled` (``seqlen_q = seqlen_k = N``, the layer's
    tiles, the launch of :func:`iomodel.report.worksheet.l2_launch`, the L2 parameters of
    :func:`iomodel.cache.estimate.launch_params`): read + written DRAM bytes. A point is
    skipped where :func:`iomodel.cache.estimate.not_estimated` gives a reason (seqlen or
    program-count bound) or where its programs would take the curve past
    :data:`L2_CURVE_MAX_PROGRAMS` in all: the simulation's cost grows with B·H·T_r (points the fast
    evaluation covers, :func:`iomodel.cache.estimate.fast_refusal`, are not simulated and cost none).

    Args:
        spec, tiling, hardware: the layer (prefill forward), its tiles and hardware.
        seqlens: the plot's x values (tokens).

    Returns:
        (lengths in tokens, ascending; DRAM bytes at each; skipped ``(length, reason)`` pairs).
        All empty where the estimate does not cover the layer at all (decode, ``fwd+bwd``).
    """
    from iomodel.cache.estimate import fast_refusal, launch_params, not_estimated, simulated_programs
    from iomodel.cache.predict import predict_tiled
    from iomodel.report.worksheet import bundled_launch_order, l2_launch
    from iomodel.schedule.launch import Schedule

    xs = [int(x) for x in seqlens]
    lo, hi = (min(xs), max(xs)) if xs else (1, 0)
    pow2 = [1 << k for k in range((lo - 1).bit_length(), hi.bit_length()) if lo <= 1 << k <= hi]
    own = [spec.seqlen_k] if spec.seqlen_q == spec.seqlen_k and lo <= spec.seqlen_k <= hi else []
    candidates = own + [x for x in pow2 if x not in own]
    if spec.backward or spec.phase != "prefill" or not candidates:
        return [], [], []
    warps, order, _, pps, _ = l2_launch(spec, hardware, tiling=tiling)
    done: dict[int, int] = {}
    skipped: list[tuple[int, str]] = []
    spent = 0
    for x in candidates:
        at = spec.with_(seqlen_q=x, seqlen_k=x)
        lpt = bundled_launch_order(at, tiling)  # the kernel's causal launch order at this length
        at_pps = pps  # the programs per SM of the tile order run here (registers: l2_launch)
        if lpt and lpt["tile_order"] != order and pps is not None:
            at_pps = l2_launch(at, hardware, tiling=tiling, tile_order=lpt["tile_order"])[3]
        launch = (Schedule.for_tiling(tiling, num_warps=warps, programs_per_sm=at_pps, **{"tile_order": order, **lpt})
                  if lpt else None)
        why = not_estimated(at, tiling, launch, hardware.l2_bytes, read_fraction_of(hardware))
        cost = (0 if fast_refusal(at, tiling, launch, hardware.l2_bytes, read_fraction_of(hardware)) is None
                else simulated_programs(at, tiling))  # fast: not simulated
        if why is None and spent + cost > L2_CURVE_MAX_PROGRAMS:
            why = (f"the curve's simulation budget of {L2_CURVE_MAX_PROGRAMS:,} programs (B·H·T_r summed over "
                   "its points) is spent")
        if why is not None:
            skipped.append((x, why))
            continue
        spent += cost
        l2 = predict_tiled(at, tiling, launch_params(at, tiling, hardware, warps, at_pps), lpt.get("tile_order", order),
                           schedule=launch)
        done[x] = l2.hbm_read_bytes + l2.hbm_write_bytes
    got = sorted(done)
    return got, [done[x] for x in got], sorted(skipped)


def plot_seqlen(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    *,
    seqlens: Sequence[int] | np.ndarray | None = None,
    measured: Iterable[dict[str, Any]] | None = None,
    path: str | Path | None = None,
    launcher_splits: bool = False,
    **options: Any,
) -> Figure:
    """Transferred HBM bytes versus sequence length (log-log), with allocated bytes apart.

    Curves: baseline (materialised scores) and tiled HBM bytes (read + written, no-reuse
    model: every load leaves the chip), the tiled kernel's L2-aware DRAM estimate (what
    Nsight Compute's ``dram__bytes`` counts; a simulation, drawn at the points
    :func:`l2_aware_points` computes, the skipped ones named in the legend; prefill
    forward only), the compulsory floor (each input read once, each output written once), and
    allocated bytes (resident in HBM at the peak) of both as dashed curves (the tiled one
    with hollow markers, since it lies on the floor). Where the baseline's allocated bytes
    exceed ``hardware.hbm_bytes`` the points are marked with a cross and the capacity is
    drawn as a horizontal line. Prefill varies
    seqlen_q = seqlen_k = N; decode varies the KV-cache length seqlen_k with seqlen_q
    fixed. Tiles stay fixed at ``tiling``, but for a decode layer with ``launcher_splits``: there each length takes
    the split count (and fused merge) the bundled kernel's launcher picks for it (:func:`decode_tilings`), so the
    tiled curve is the kernel's; without it the layer's num_splits is held at every length, and the legend says so.

    Args:
        spec, tiling, hardware: the layer (its own length is marked), tiles and hardware.
        seqlens: x values in tokens (default :func:`default_seqlens`).
        measured: points ``{"seqlen": tokens, "bytes": B, "label": str, "level": "HBM"}``.
        path: PNG path to write (None: only return the figure).
        launcher_splits: decode: each length at the launcher's split count (the commands pass True unless
            ``--num-splits`` is given; held where no launcher picks this layer's tiles, :func:`decode_tilings`);
            ignored for prefill.
        **options: traffic-model options passed to :func:`iomodel.traffic.sweep`.

    Returns:
        The :class:`matplotlib.figure.Figure`.

    Raises:
        IomodelError: a measured point lacks ``seqlen`` or ``bytes``.
    """
    points = _check_measured(measured, ("seqlen",), kind="seqlen")
    n = np.asarray(default_seqlens(spec) if seqlens is None else seqlens, dtype=np.int64)
    tilings = decode_tilings(spec, tiling, hardware, n) if launcher_splits and spec.phase == "decode" else None
    runs = np.ones(len(n), dtype=bool)  # lengths the tiled curves are drawn at
    if spec.phase == "decode" and tilings is None:  # splits held: not where the cache has fewer key blocks
        from iomodel.schedule.tiles import decode_splits_refusal

        runs = np.array([decode_splits_refusal(tiling.num_splits, int(x), tiling.block_n) is None for x in n],
                        dtype=bool)
    too_few = [int(x) for x in n[~runs]]  # the kernel never runs more splits than key blocks
    vary = seqlen_fields(spec, n)
    res = (_sweep_seqlens(spec, tilings, hardware, n, **options) if tilings is not None
           else _sweep(spec, tiling, hardware, vary, **options))
    xlabel = ("sequence length N = seqlen_q = seqlen_k (tokens; 1k = 1,024)" if spec.phase == "prefill"
              else f"KV-cache length seqlen_k (tokens; 1k = 1,024), seqlen_q = {spec.seqlen_q}")
    title = f"{spec.name or 'layer'}: HBM bytes per attention call versus sequence length"
    l2_x, l2_y, skipped = l2_aware_points(spec, tiling, hardware, n)
    f = forward_l2_of(hardware)
    l2_note = ("" if not l2_x else  # the constants of the L2-aware line, where one is drawn
               "; L2-aware = iomodel/cache/predict.py predict_tiled (cold L2, the forward's own "
               f"constants: {f.ways} ways, a Q byte {f.q_share:g}, written bytes {f.write_share:g} at "
               f"{f.write_fraction:g}, reads judged at {read_fraction_of(hardware):g} of the L2, "
               f"{read_fraction_source(hardware)}), a simulation, not a measurement")
    fig, ax = _figure(title, _assumptions(spec, tiling, hardware,
                                          "allocated = bytes resident in HBM at the peak (not traffic)" + l2_note),
                      legend_rows=6 + (2 if skipped else 0) + 2 + bool(too_few))  # the multi-line labels
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.plot(n, res["baseline"]["hbm_bytes"], color=COLORS["baseline"], lw=2.2,
            label="baseline (eager, materialised scores): HBM bytes transferred")
    if tilings is not None:  # decode at the launcher's split count per length
        counts = sorted({t.num_splits for t in tilings})
        tiled_label = NO_REUSE_LABEL.replace(
            "tiled (bundled kernel)", "tiled (bundled kernel, the launcher's num_splits at each length: "
            + (f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}") + ")")
    else:
        from iomodel.schedule.capabilities import kernel_refusal

        bundled = kernel_refusal(spec, hardware) is None  # else no bundled kernel picks splits for this layer
        tiled_label = NO_REUSE_LABEL if spec.phase == "prefill" else NO_REUSE_LABEL.replace(  # decode: splits held
            "tiled (bundled kernel)", f"tiled (num_splits = {tiling.num_splits} held at every "
            + ("drawn " if too_few else "") + "length"
            + (";\nthe bundled kernel picks its splits per length)" if bundled else ")"))
    ax.plot(n[runs], res["tiled"]["hbm_bytes"][runs], color=COLORS["tiled"], lw=2.2, label=tiled_label)
    if too_few:  # the kernel never runs more splits than key blocks (iomodel.schedule.tiles.decode_splits_refusal)
        where = (", ".join(f"{x:,}" for x in too_few) if len(too_few) <= 3 else
                 f"{too_few[0]:,} to {too_few[-1]:,} ({len(too_few)} lengths)")
        ax.plot([], [], ls="none", label=f"tiled not drawn at {where} keys:\n"
                                          f"num_splits {tiling.num_splits} is more than their key blocks "
                                          f"(BLOCK_N = {tiling.block_n})")
    if l2_x:
        lx = np.asarray(l2_x, dtype=np.int64)
        at = _sweep(spec, tiling, hardware, {"seqlen_q": lx, "seqlen_k": lx} if spec.phase == "prefill"
                    else {"seqlen_k": lx}, **options)["compulsory"]["bytes"]
        under = [x for x, y, f in zip(l2_x, l2_y, at) if y < f]
        # stores still dirty in L2 at the kernel's end reach DRAM after it (Nsight Compute does not count them)
        below = ("" if not under else
                 f";\nbelow the floor at N = {', '.join(_tokens_label(x) for x in under)}: outputs still dirty in L2 "
                 "at the kernel's end\nreach DRAM after it, outside the kernel's dram__bytes")
        ax.plot(l2_x, l2_y, color=COLORS["tiled"], lw=1.6, ls="-.", marker="D", ms=5, zorder=5,
                label=f"{L2_AWARE_LABEL},\nsimulated at N = {', '.join(_tokens_label(x) for x in l2_x)}{below}")
    if skipped:
        ax.plot([], [], ls="none",
                label=f"{L2_AWARE_LABEL}\nnot computed at N = {', '.join(_tokens_label(x) for x, _ in skipped)}:\n"
                      + textwrap.fill(skipped[-1][1], 80))
    elif not l2_x:
        from iomodel.cache.estimate import not_estimated

        why = (L2_TRAINING_NOT_DRAWN if spec.backward and spec.phase == "prefill"
               else not_estimated(spec) or "no sequence length of the plot is a power of two or the layer's own")
        ax.plot([], [], ls="none", label=f"{L2_AWARE_LABEL}\n" + textwrap.fill(f"not drawn: {why}", 80))
    ax.plot(n, res["compulsory"]["bytes"], color=COLORS["compulsory"], lw=2.0, ls=":", zorder=4,
            label="compulsory floor: inputs read once, outputs written once")
    floor = np.asarray(res["compulsory"]["bytes"], dtype=float)
    for alg, label in (("baseline", "baseline"), ("tiled", "tiled")):
        at = runs if alg == "tiled" else np.ones(len(n), dtype=bool)
        alloc = np.asarray(res[alg]["allocated_bytes"], dtype=float)[at]
        # within 5% of the floor everywhere: the dashed curve hides under the dotted one, so
        # hollow markers show it and the legend says so
        on_floor = bool(np.all(np.abs(alloc - floor[at]) <= 0.05 * floor[at]))
        ax.plot(n[at], alloc, color=COLORS[alg], lw=1.2, ls="--", alpha=0.75,
                marker="o" if alg == "tiled" else None, markevery=max(1, len(n) // 16), ms=6, mfc="none", mew=1.2,
                zorder=5,
                label=f"{label}: allocated in HBM\n(resident, not transferred)"
                      + ("\n- lies on the compulsory floor" if on_floor else ""))
    over = np.asarray(res["baseline"]["allocated_bytes"], dtype=float) > hardware.hbm_bytes
    if over.any():
        first = int(n[over][0])
        ax.axhline(hardware.hbm_bytes, color=COLORS["grey"], lw=0.9, ls=(0, (1, 3)),
                   label=f"{hardware.name} HBM capacity ({hardware.hbm_bytes / 1e9:,.0f} GB = {_pow2_label(hardware.hbm_bytes, 'B')})")
        base_alloc = np.asarray(res["baseline"]["allocated_bytes"], dtype=float)
        ax.plot(n[over], base_alloc[over], color=COLORS["baseline"], lw=3.0, ls="--", zorder=6)
        ax.plot([first], [base_alloc[over][0]], ls="none", marker="X", ms=11, color=COLORS["baseline"],
                mec="black", zorder=7,
                label=f"baseline allocation exceeds HBM capacity\nfrom {first:,} tokens (thick dashes): cannot run")
    ax.axvline(spec.seqlen_k, color=COLORS["grey"], lw=1, ls="-.",
               label=f"this layer: {_tokens_label(spec.seqlen_k)} token{'s' if spec.seqlen_k != 1 else ''}")
    _overlay(ax, points, lambda m: float(m["seqlen"]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bytes per call (log scale, binary prefixes)")
    _tokens_axis(ax.xaxis)
    _bytes_axis(ax.yaxis)
    _legend_below(fig, ax)
    return _save(fig, path)


# ----------------------------------------------------------------------------------
# Bytes versus BLOCK_M / BLOCK_N
# ----------------------------------------------------------------------------------

#: Tile sizes swept by :func:`plot_blocks` (powers of two, Triton's tl.dot needs >= 16).
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: Split counts swept for decode.
SPLITS = (1, 2, 4, 8, 16, 32)


def _blocks_grid(spec: LayerSpec, tiling: Tiling, block_sizes: Sequence[int] = BLOCK_SIZES,
                 splits: Sequence[int] = SPLITS) -> tuple[list[int], str, list[int]]:
    """The tile grid :func:`plot_blocks` draws: ``(BLOCK_N columns, row name, row values)``.

    Rows are ``block_m`` (prefill: the column sizes and the layer's BLOCK_M; with packed programs,
    ``heads_per_program`` P > 1, only the BLOCK_M that P divides) or ``num_splits`` (decode:
    ``splits`` and the layer's num_splits); the layer's own tiles are always on the grid.

    Raises:
        IomodelError: a tile size is not a power of two (:class:`Tiling`).
    """
    sizes = sorted({Tiling(block_m=b, block_n=b).block_m for b in block_sizes} | {tiling.block_n})
    if spec.phase == "decode":
        return sizes, "num_splits", sorted({int(x) for x in splits} | {tiling.num_splits})
    p = tiling.heads_per_program  # a packed program holds BLOCK_M / P whole positions of P heads
    return sizes, "block_m", sorted({b for b in sizes if b % p == 0} | {tiling.block_m})


def plot_blocks(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    *,
    block_sizes: Sequence[int] = BLOCK_SIZES,
    splits: Sequence[int] = SPLITS,
    measured: Iterable[dict[str, Any]] | None = None,
    path: str | Path | None = None,
    **options: Any,
) -> Figure:
    """Tiled HBM bytes over the tile grid: a heat map with the bytes written in every cell.

    Prefill: rows BLOCK_M, columns BLOCK_N (K and V are read once per query tile, so
    BLOCK_M sets the traffic; BLOCK_N only rounds the causal edge). Decode: rows
    num_splits, columns BLOCK_N (Q and the partial outputs grow with the splits). Each
    cell gives the bytes (binary prefix) and their multiple of the compulsory floor; cells
    whose tiles do not fit the hardware's shared memory per block
    (:meth:`Tiling.sram_bytes`) are hatched and evaluated as hypotheticals; the layer's own
    tiles are framed.

    Args:
        block_sizes: BLOCK_M / BLOCK_N values (powers of two).
        splits: num_splits values (decode rows).
        measured: points with ``block_m`` and ``block_n`` (prefill) or ``block_n`` and
            ``num_splits`` (decode), ``bytes``, ``label``, ``level``: written into their cell.
        path, **options: as :func:`plot_seqlen`.

    Raises:
        IomodelError: a tile size is not a power of two, or a measured point lacks its keys
            or lies off the drawn grid.
    """
    decode = spec.phase == "decode"
    sizes, row_name, row_vals = _blocks_grid(spec, tiling, block_sizes, splits)
    points = _check_measured(measured, ("block_n", row_name), {"block_n": sizes, row_name: row_vals}, "blocks")
    grid_c, grid_r = np.meshgrid(np.asarray(sizes, dtype=np.int64), np.asarray(row_vals, dtype=np.int64))
    vary = {"block_n": grid_c.ravel(), row_name: grid_r.ravel()}
    # Tiles that do not fit are evaluated as hypotheticals (hatched): lift the sweep's
    # shared-memory check to the largest tile's need.
    biggest = Tiling(block_m=max(sizes + row_vals + [tiling.block_m]), block_n=max(sizes),
                     num_stages=tiling.num_stages)
    vary["smem_per_block"] = np.full(grid_c.size, max(hardware.smem_per_block, biggest.sram_bytes(spec)))
    res = _sweep(spec, tiling, hardware, vary, **options)
    hbm = res["tiled"]["hbm_bytes"].reshape(grid_c.shape)
    floor = float(res["compulsory"]["bytes"][0])

    def fits(row: int, col: int) -> bool:
        t = Tiling(block_m=tiling.block_m if decode else row, block_n=col, num_stages=tiling.num_stages,
                   num_splits=row if decode else tiling.num_splits, heads_per_program=tiling.heads_per_program)
        return t.sram_bytes(spec) <= hardware.smem_per_block

    def in_page(col: int) -> bool:  # the paged decode runs a key block within one page only
        return page_block_refusal(col, spec.page_size, "") is None

    title = (f"{spec.name or 'layer'}: tiled HBM bytes per call over "
             + ("BLOCK_N and num_splits (decode)" if decode else "BLOCK_M and BLOCK_N"))
    fig, ax = _figure(title, _assumptions(
        spec, tiling, hardware,
        f"seqlen_q={spec.seqlen_q:,}, seqlen_k={spec.seqlen_k:,}; cell = HBM bytes (x compulsory floor of "
        f"{human_bytes(floor)}); hatched: tiles need more than {human_bytes(hardware.smem_per_block)} of shared "
        "memory per block"
        + (f"; paged KV cache of {spec.page_size} tokens a page: BLOCK_N above it cannot run (hatched, no "
           "bytes)" if spec.page_size is not None else "")))
    # colour = multiple of the compulsory floor on a log scale from 1x to at least 2x, so a
    # spread of a few percent between cells shows as the near-uniform colour it is
    runnable = np.array([[in_page(c) for c in sizes] for _ in row_vals])  # a paged decode's BLOCK_N <= page
    rel = np.where(runnable, np.log2(hbm / floor), np.nan)  # a cell that cannot run has no colour
    lo, hi = 0.0, max(1.0, float(np.nanmax(rel)) if runnable.any() else 1.0)
    img = ax.imshow(rel, cmap="viridis_r", aspect="auto", origin="lower", vmin=lo, vmax=hi)
    x0, y0, w, h = ax.get_position().bounds
    ax.set_position((x0, y0, w - 0.17, h))
    cax = fig.add_axes((x0 + w - 0.15, y0, 0.018, h))
    cbar = fig.colorbar(img, cax=cax)
    cbar.set_label("tiled HBM bytes / compulsory floor (log colour scale, from 1x)")
    ticks = np.arange(0, np.floor(hi) + 1)
    if len(ticks) < 3:
        ticks = np.linspace(lo, hi, 5)
    cbar.set_ticks(ticks)
    cbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{2**v:.3g}x ({human_bytes(2**v * floor)})"))
    # cells that differ by less than a factor of ~2 need more digits to tell apart
    spread = float(np.log2(hbm[runnable]).max() - np.log2(hbm[runnable]).min()) if runnable.any() else 0.0
    digits = 3 if spread > 0.2 else 5
    meas: dict[tuple[int, int], list[str]] = {}
    for m in points:
        key = (int(m[row_name]), int(m["block_n"]))
        meas.setdefault(key, []).append(f"{m.get('level', 'HBM')} {human_bytes(float(m['bytes']))}")
    for i, rv in enumerate(row_vals):
        for j, cv in enumerate(sizes):
            ok = fits(rv, cv)
            dark = (rel[i, j] - lo) / (hi - lo) > 0.55
            color = "white" if dark else "black"
            ratio = hbm[i, j] / floor
            rtext = f"{ratio:.4f}" if digits > 3 else (f"{ratio:,.2f}" if ratio < 10 else f"{ratio:,.1f}")
            text = f"{human_bytes(hbm[i, j], digits)}\n{rtext}x floor"
            if not in_page(cv):
                text = f"cannot run:\nBLOCK_N > page\n({spec.page_size} tokens)"
                ax.add_patch(_hatch(j, i))
            elif not ok:
                text += "\nno fit"
                ax.add_patch(_hatch(j, i))
            for extra in meas.get((rv, cv), []):
                text += f"\nmeasured {extra}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7.5, color=color)
    own_r = tiling.num_splits if decode else tiling.block_m
    if own_r in row_vals and tiling.block_n in sizes:
        i, j = row_vals.index(own_r), sizes.index(tiling.block_n)
        from matplotlib.patches import Rectangle

        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=3, ec=COLORS["baseline"], zorder=5))
        ax.text(j, i - 0.44, "this layer's tiles", ha="center", va="bottom", fontsize=7.5,
                color=COLORS["baseline"], zorder=6, fontweight="bold",
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([str(x) for x in sizes])
    ax.set_yticks(range(len(row_vals)))
    ax.set_yticklabels([str(x) for x in row_vals])
    ax.set_xlabel("BLOCK_N (key rows per inner step)")
    ax.set_ylabel("num_splits (split-KV partitions)" if decode else "BLOCK_M (query rows per program)")
    ax.grid(False, which="both")
    return _save(fig, path)


def _hatch(j: int, i: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", ec=COLORS["grey"], lw=0, alpha=0.6)


# ----------------------------------------------------------------------------------
# Bytes versus SRAM size
# ----------------------------------------------------------------------------------


def default_sram_sizes() -> np.ndarray:
    """SRAM sizes M of the x axis: 16 KiB to 8 MiB, 4 points per octave (bytes, int64)."""
    return np.unique(np.round(np.geomspace(2**14, 2**23, 9 * 4 + 1)).astype(np.int64))


def largest_fitting_tiles(spec: LayerSpec, sram: np.ndarray, num_stages: int = 1,
                          sizes: Sequence[int] = tuple(2**k for k in range(4, 18))
                          ) -> tuple[np.ndarray, np.ndarray]:
    """For each SRAM size M (bytes), the largest Q-stationary tiles that fit.

    The largest BLOCK_M (the tile that sets how often K and V are re-read), capped at
    next_pow2(seqlen_q), then the largest BLOCK_N, such that :meth:`Tiling.sram_bytes`
    (Q tile + ``num_stages`` K and V tiles) <= M. Sizes where not even 16 x 16 fits get 0.

    Returns:
        ``(block_m, block_n)`` int64 arrays shaped like ``sram``.
    """
    cap = 1 << max(4, (spec.seqlen_q - 1).bit_length())
    bm_out = np.zeros(len(sram), dtype=np.int64)
    bn_out = np.zeros(len(sram), dtype=np.int64)
    cands = sorted(((bm, bn) for bm in sizes for bn in sizes if bm <= cap and bn <= max(cap, 16)),
                   reverse=True)
    need = {c: Tiling(block_m=c[0], block_n=c[1], num_stages=num_stages).sram_bytes(spec) for c in cands}
    for i, m in enumerate(sram):
        for c in cands:
            if need[c] <= m:
                bm_out[i], bn_out[i] = c
                break
    return bm_out, bn_out


def plot_sram(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    *,
    sram_bytes: Sequence[int] | np.ndarray | None = None,
    num_stages: int = 1,
    measured: Iterable[dict[str, Any]] | None = None,
    path: str | Path | None = None,
    **options: Any,
) -> Figure:
    """HBM bytes versus SRAM size M: FlashAttention-1 versus the Q-stationary kernel (prefill).

    FlashAttention-1 Algorithm 1 (K/V-stationary, ``tiled_kv_stationary``) with the paper's
    M-derived blocks B_c = ceil(M / 4d), B_r = min(ceil(M / 4d), d) (Dao et al. 2022,
    Section 3.1) moves Theta(N^2 d^2 / M) bytes (Theorem 2): its curve falls with slope -1,
    drawn next to a dotted reference proportional to N^2 d^2 / M. The Q-stationary kernel
    (``tiled``) runs, at each M, the largest tiles that fit (:func:`largest_fitting_tiles`),
    by default with one K/V stage like FlashAttention-1 (Q, K, V tiles in M). The
    hardware's shared memory per SM is marked.

    Args:
        sram_bytes: x values, bytes of SRAM per SM (default :func:`default_sram_sizes`).
        num_stages: K/V tiles the Q-stationary kernel keeps in flight (1: like-for-like with
            FlashAttention-1; the bundled kernel uses ``tiling.num_stages``).
        measured: points ``{"sram_bytes": B, "bytes": B, "label": str, "level": "HBM"}``.
        path, **options: as :func:`plot_seqlen`.

    Raises:
        IomodelError: the layer is a decode layer (FlashAttention-1 has no decode schedule:
            plot the prefill layer), or a measured point lacks its keys.
    """
    if spec.phase != "prefill":
        raise IomodelError("the SRAM-size plot compares prefill schedules: use --phase prefill for it")
    points = _check_measured(measured, ("sram_bytes",), kind="sram")
    # FlashAttention-1's K/V-stationary schedule is modelled for the forward pass only: the
    # figure compares forward passes and its title says so for a fwd+bwd layer
    forward_only = spec.backward
    spec = spec.with_(backward=False)
    m = np.asarray(default_sram_sizes() if sram_bytes is None else sram_bytes, dtype=np.int64)
    bm, bn = largest_fitting_tiles(spec, m, num_stages)
    fit = (bm > 0) & (bm % tiling.heads_per_program == 0)  # packed programs: BLOCK_M / P whole positions
    res_fa1 = _sweep(spec, tiling, hardware, {"smem_per_sm": m}, **options)
    fa1 = res_fa1["tiled_kv_stationary"]["hbm_bytes"]
    floor = float(res_fa1["compulsory"]["bytes"][0])
    qs = np.full(len(m), np.nan)
    if fit.any():
        # the tiles fit M by construction: M is the SRAM size of this hypothetical SM
        res_q = _sweep(spec, replace(tiling, num_stages=num_stages), hardware,
                       {"block_m": bm[fit], "block_n": bn[fit], "smem_per_sm": m[fit],
                                                "smem_per_block": np.maximum(m[fit], hardware.smem_per_block)},
                       **options)
        qs[fit] = res_q["tiled"]["hbm_bytes"]
    s = spec
    title = (f"{s.name or 'layer'}: HBM bytes versus SRAM size M (N = {s.seqlen_k:,}, d = {s.head_dim})"
             + (", forward pass only (FlashAttention-1's backward is not modelled)" if forward_only else ""))
    fig, ax = _figure(title, _assumptions(
        s, None, hardware,
        f"seqlen_q={s.seqlen_q:,}, seqlen_k={s.seqlen_k:,}; FlashAttention-1: B_c = ceil(M/4d), "
        f"B_r = min(B_c, d) (elements of {s.width} B); Q-stationary: largest BLOCK_M, then BLOCK_N, "
        f"with num_stages={num_stages}, that fit M"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.plot(m, fa1, color=COLORS["tiled_kv_stationary"], lw=2.2,
            label="FlashAttention-1 (K/V-stationary, Alg. 1)\nblocks from M")
    ref = fa1[0] * (m[0] / m.astype(float))
    ref = np.where(ref >= floor, ref, np.nan)  # a Θ reference has no meaning below the floor
    ax.plot(m, ref, color=COLORS["ref"], lw=1.2, ls="--", label="∝ N²·d²/M (Theorem 2)")
    ax.plot(m, qs, color=COLORS["tiled"], lw=2.2, drawstyle="steps-post",
            label="Q-stationary (FlashAttention-2 order)\nlargest tiles that fit M")
    ax.axhline(floor, color=COLORS["compulsory"], lw=1.4, ls=":", label="compulsory floor")
    ax.axvline(hardware.smem_per_sm, color=COLORS["grey"], lw=1, ls="-.",
               label=f"{hardware.name}: {human_bytes(hardware.smem_per_sm)} per SM")
    for i in np.flatnonzero(fit):
        if i == 0 or bm[i] != bm[i - 1]:
            ax.annotate(f"{bm[i]}x{bn[i]}", (m[i], qs[i]), textcoords="offset points", xytext=(2, 6),
                        fontsize=7, color=COLORS["tiled"])
    _overlay(ax, points, lambda p: float(p["sram_bytes"]))
    lo = min(np.nanmin(qs) if fit.any() else floor, floor)
    ax.set_ylim(bottom=lo / 1.6)
    ax.set_xlabel("SRAM per SM, M (bytes, binary prefixes); Q-stationary tiles BLOCK_M x BLOCK_N annotated")
    ax.set_ylabel("HBM bytes per call (log scale, binary prefixes)")
    _bytes_axis(ax.xaxis)
    _bytes_axis(ax.yaxis)
    _legend(fig, ax)
    return _save(fig, path)


# ----------------------------------------------------------------------------------
# All plots of one layer
# ----------------------------------------------------------------------------------


def _check_all_measured(spec: LayerSpec, tiling: Tiling, measured: dict[str, Any], options: dict[str, Any]) -> None:
    """Every kind's overlay points checked as its plot would (:func:`_check_measured`), drawn or not.

    Raises:
        IomodelError: a key that is not a plot kind, or a refused point (named with its kind).
    """
    for kind, points in measured.items():
        if kind == "seqlen":
            _check_measured(points, ("seqlen",), kind=kind)
        elif kind == "sram":
            _check_measured(points, ("sram_bytes",), kind=kind)
        elif kind == "blocks":
            sizes, row_name, row_vals = _blocks_grid(spec, tiling, options.get("block_sizes", BLOCK_SIZES),
                                                     options.get("splits", SPLITS))
            _check_measured(points, ("block_n", row_name), {"block_n": sizes, row_name: row_vals}, kind)
        else:
            raise IomodelError(f"measured points: {kind!r} is not a plot kind: use {', '.join(PLOT_KINDS)}")


def check_plots(spec: LayerSpec, kinds: Sequence[str], config: Any = None, option: str = "--plot-dir",
                inert_window: tuple[int | None, int | None] | None = None) -> None:
    """Refuse, before any folder is made or figure drawn, plot kinds that are unknown or that this layer cannot have:
    the seqlen curve past a model's window (full attention is not what runs there; where the config's window hides no
    key at the layer's own length, ``inert_window`` (its sides: :attr:`iomodel.spec.resolve.Layer.inert_window`), only
    if the curve's longest length, :func:`default_seqlens`, reaches where it binds), the SRAM-size figure of a windowed
    layer (FlashAttention-1's schedule, its reference, is modelled without a window). ``option`` names the command's
    output option (``-o/--out-dir`` for ``iomodel plot``), so the advice uses that command's flags.

    Raises:
        IomodelError: one line saying what to run instead.
    """
    unknown = [k for k in kinds if k not in PLOT_FILES]
    if unknown:
        raise IomodelError(f"unknown plot kind {unknown[0]!r}: use {', '.join(PLOT_KINDS)}")
    window = getattr(config, "window", None)
    windowed = spec.window_left is not None or spec.window_right is not None
    # what to do instead, in the words of the command that draws them (iomodel plot's --kind, or the worksheet's)
    instead = ("--kind blocks" if option == "-o/--out-dir" else "iomodel plot --kind blocks") + (
        ", or --window none to plot a full-attention layer") + ("" if option == "-o/--out-dir" else
                                                                 f", or drop {option} to write the worksheet alone")
    binds = False
    if inert_window is not None:  # the window binds somewhere along the curve: its longest length
        at = spec.with_(**seqlen_fields(spec, int(default_seqlens(spec).max())))
        binds = not window_masks_nothing(spec.causal, *inert_window, at.seqlen_q, at.seqlen_k, at.causal_offset)
    if "seqlen" in kinds and window is not None and (windowed or binds or config.window_kind != "sliding-window"):
        # the curve would model full attention past the window, where the windowed (or chunked) layer runs
        raise IomodelError(
            f"the bytes-versus-seqlen plot sweeps lengths past the model's {config.window_kind} attention "
            f"({config.window_words()} on {config.window_layers}), where full attention is not what runs: use {instead}")
    if "sram" in kinds and windowed and spec.phase == "prefill":
        # FlashAttention-1's K/V-stationary schedule, the figure's reference, is modelled without a window
        raise IomodelError("the SRAM-size plot compares FlashAttention-1's K/V-stationary schedule, which iomodel "
                           f"models without a window, and this layer has one: use {instead}")


def write_plots(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    out_dir: str | Path,
    *,
    kinds: Sequence[str] = PLOT_KINDS,
    measured: dict[str, list[dict[str, Any]]] | None = None,
    option: str = "--plot-dir",
    config: Any = None,
    launcher_splits: bool = False,
    inert_window: tuple[int | None, int | None] | None = None,
    **options: Any,
) -> list[Path]:
    """Write the PNGs of one layer into ``out_dir`` (created if missing); ``option`` is the
    command-line option that named the folder (for the error message); ``config`` the
    :class:`~iomodel.spec.AttentionConfig` the layer came from, if any (a model with a
    sliding window or attention chunks gets no seqlen curve past them).

    Files: ``bytes_vs_seqlen.png``, ``bytes_vs_blocks.png`` and (prefill only)
    ``bytes_vs_sram.png``.

    Args:
        kinds: subset of ``("seqlen", "blocks", "sram")``.
        measured: overlay points per kind, e.g. ``{"seqlen": [{"seqlen": 8192, "bytes": ...}]}``.
        launcher_splits: a decode layer's seqlen curve at the launcher's split count per length (:func:`plot_seqlen`;
            the commands pass True unless ``--num-splits`` fixes the count).
        inert_window: the sides of the config's window where it hides no key at the layer's length
            (:func:`check_plots`).

    Returns:
        The paths written.

    Raises:
        IomodelError: unknown kind, the folder cannot be created, or a measured point of any
            kind (drawn or not) is refused by :func:`_check_measured`; all are checked before
            anything is drawn.
    """
    check_plots(spec, kinds, config, option, inert_window)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IomodelError(f"cannot create the plot folder {str(out)!r} ({exc.strerror}): pick another {option}")
    measured = measured or {}
    if not isinstance(measured, dict):
        raise IomodelError("measured points must map plot kinds (seqlen, blocks, sram) to lists: fix the overlay data")
    _check_all_measured(spec, tiling, measured, options)
    funcs = {"seqlen": plot_seqlen, "blocks": plot_blocks, "sram": plot_sram}
    # every figure is drawn before any file is written: a failure leaves no partial set
    own = {"seqlen": {"launcher_splits": launcher_splits}}  # options of one kind of plot
    pngs = {out / PLOT_FILES[kind]: _png(funcs[kind](spec, tiling, hardware, measured=measured.get(kind),
                                                     **own.get(kind, {}), **options))
            for kind in kinds if kind != "sram" or spec.phase == "prefill"}
    busy = next((path for path in pngs if path.is_dir()), None)  # checked before any is written: no partial set
    if busy is not None:
        raise IomodelError(f"the plot {busy} is a folder in {option}'s folder: remove it, or give {option} another "
                           "folder")
    for path, data in pngs.items():
        write_bytes(path, data, option)
    return list(pngs)


__all__ = [
    "BLOCK_SIZES",
    "PLOT_FILES",
    "PLOT_KINDS",
    "decode_tilings",
    "default_seqlens",
    "default_sram_sizes",
    "largest_fitting_tiles",
    "plot_blocks",
    "plot_seqlen",
    "plot_sram",
    "check_plots",
    "write_plots",
]
