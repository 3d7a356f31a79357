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

import textwrap
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from iomodel.errors import IomodelError
from iomodel.hardware import Hardware
from iomodel.spec import LayerSpec, Tiling
from iomodel.units import human_bytes

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
        f"{s.dtype} ({s.width} B), {mask}, {s.phase} {s.passes}",
    ]
    if tiling is not None:
        parts.append(f"tiles BLOCK_M={tiling.block_m}, BLOCK_N={tiling.block_n}, num_stages={tiling.num_stages}"
                     + (f", num_splits={tiling.num_splits}, heads/program={tiling.heads_per_program}"
                        if s.phase == "decode" else ""))
    parts.append(f"{hardware.name} (L2 {human_bytes(hardware.l2_bytes)}, "
                 f"{human_bytes(hardware.smem_per_block)} shared memory per block)")
    parts.append("HBM bytes = no-reuse model (every load leaves the chip); 1 KiB = 1,024 B")
    if extra:
        parts.append(extra)
    return "\n".join(textwrap.fill(p, 130) for p in ("; ".join(parts[:2]), *parts[2:]))


def _figure(title: str, note: str) -> tuple[Figure, Any]:
    fig = Figure(figsize=(10, 6.8), dpi=_DPI)
    ax = fig.add_axes((0.1, 0.27, 0.62, 0.63))
    ax.set_title(title, fontsize=12)
    fig.text(0.01, 0.015, note, fontsize=8, family="monospace", va="bottom", ha="left")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return fig, ax


def _legend(fig: Figure, ax: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False, borderaxespad=0)


def _check_measured(measured: Iterable[dict[str, Any]] | None, keys: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for i, m in enumerate(measured or []):
        if not isinstance(m, dict) or any(k not in m for k in (*keys, "bytes")):
            raise IomodelError(
                f"measured point {i} must be a dict with {', '.join(repr(k) for k in (*keys, 'bytes'))} "
                "(and optional 'label', 'level'): fix the overlay data"
            )
        out.append(m)
    return out


def _overlay(ax: Any, points: list[dict[str, Any]], x_of: Any) -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in points:
        groups.setdefault((str(m.get("label", "measured")), str(m.get("level", "HBM"))), []).append(m)
    for (label, level), pts in groups.items():
        xs = [x_of(m) for m in pts]
        ys = [float(m["bytes"]) for m in pts]
        ax.scatter(xs, ys, marker=LEVEL_MARKERS.get(level, "D"), s=46, facecolors="none", linewidths=1.6,
                   edgecolors=COLORS["measured"], zorder=5, label=f"measured {level}: {label}")


def _save(fig: Figure, path: str | Path | None) -> Figure:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=_DPI)
    return fig


def _sweep(spec: LayerSpec, tiling: Tiling, hardware: Hardware, vary: dict[str, np.ndarray],
           **options: Any) -> dict[str, dict[str, np.ndarray]]:
    from iomodel.traffic import sweep

    res = sweep(spec, tiling, hardware, vary, **options)
    n = len(next(iter(vary.values())))
    return {alg: {q: np.broadcast_to(np.asarray(v, dtype=float), (n,)) for q, v in quantities.items()}
            for alg, quantities in res.items()}


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


def plot_seqlen(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    *,
    seqlens: Sequence[int] | np.ndarray | None = None,
    measured: Iterable[dict[str, Any]] | None = None,
    path: str | Path | None = None,
    **options: Any,
) -> Figure:
    """Transferred HBM bytes versus sequence length (log-log), with allocated bytes apart.

    Curves: baseline (materialised scores) and tiled HBM bytes (read + written, no-reuse
    model), the compulsory floor (each input read once, each output written once), and
    allocated bytes (resident in HBM at the peak) of both as dashed curves. Prefill varies
    seqlen_q = seqlen_k = N; decode varies the KV-cache length seqlen_k with seqlen_q
    fixed. Tiles stay fixed at ``tiling``.

    Args:
        spec, tiling, hardware: the layer (its own length is marked), tiles and hardware.
        seqlens: x values in tokens (default :func:`default_seqlens`).
        measured: points ``{"seqlen": tokens, "bytes": B, "label": str, "level": "HBM"}``.
        path: PNG path to write (None: only return the figure).
        **options: traffic-model options passed to :func:`iomodel.traffic.sweep`.

    Returns:
        The :class:`matplotlib.figure.Figure`.

    Raises:
        IomodelError: a measured point lacks ``seqlen`` or ``bytes``.
    """
    points = _check_measured(measured, ("seqlen",))
    n = np.asarray(default_seqlens(spec) if seqlens is None else seqlens, dtype=np.int64)
    vary = {"seqlen_q": n, "seqlen_k": n} if spec.phase == "prefill" else {"seqlen_k": n}
    res = _sweep(spec, tiling, hardware, vary, **options)
    xlabel = ("sequence length N = seqlen_q = seqlen_k (tokens; 1k = 1,024)" if spec.phase == "prefill"
              else f"KV-cache length seqlen_k (tokens; 1k = 1,024), seqlen_q = {spec.seqlen_q}")
    title = f"{spec.name or 'layer'}: HBM bytes per attention call versus sequence length"
    fig, ax = _figure(title, _assumptions(spec, tiling, hardware,
                                          "allocated = bytes resident in HBM at the peak (not traffic)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    for alg, label in (("baseline", "baseline (eager, materialised scores)"),
                       ("tiled", "tiled (bundled kernel)")):
        ax.plot(n, res[alg]["hbm_bytes"], color=COLORS[alg], lw=2.2, label=f"{label}: HBM transferred")
    ax.plot(n, res["compulsory"]["bytes"], color=COLORS["compulsory"], lw=1.4, ls=":",
            label="compulsory floor (inputs once, outputs once)")
    for alg, label in (("baseline", "baseline"), ("tiled", "tiled")):
        ax.plot(n, res[alg]["allocated_bytes"], color=COLORS[alg], lw=1.3, ls="--", alpha=0.8,
                label=f"{label}: allocated (resident, not moved)")
    ax.axvline(spec.seqlen_k, color=COLORS["grey"], lw=1, ls="-.",
               label=f"this layer: {_tokens_label(spec.seqlen_k)} tokens")
    _overlay(ax, points, lambda m: float(m["seqlen"]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bytes per call (log scale, binary prefixes)")
    _tokens_axis(ax.xaxis)
    _bytes_axis(ax.yaxis)
    _legend(fig, ax)
    return _save(fig, path)


# ----------------------------------------------------------------------------------
# Bytes versus BLOCK_M / BLOCK_N
# ----------------------------------------------------------------------------------

#: Tile sizes swept by :func:`plot_blocks` (powers of two, Triton's tl.dot needs >= 16).
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: Split counts swept for decode.
SPLITS = (1, 2, 4, 8, 16, 32)


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
    """Tiled HBM bytes versus tile size, one curve per BLOCK_N (prefill) or per num_splits (decode).

    Prefill: x = BLOCK_M, one line per BLOCK_N (K and V are read once per query tile, so
    BLOCK_M sets the traffic; BLOCK_N only rounds the causal edge). Decode: x = BLOCK_N,
    one line per num_splits (Q and the partial outputs scale with the splits). Tiles that
    do not fit the hardware's shared memory per block (:meth:`Tiling.sram_bytes`) are drawn
    as grey crosses; the tiles the layer runs are starred. The compulsory floor is dotted.

    Args:
        block_sizes: BLOCK_M / BLOCK_N values (powers of two).
        splits: num_splits values (decode).
        measured: points with ``block_m`` and ``block_n`` (prefill) or ``block_n`` and
            ``num_splits`` (decode), ``bytes``, ``label``, ``level``.
        path, **options: as :func:`plot_seqlen`.

    Raises:
        IomodelError: a tile size is not a power of two, or a measured point lacks its keys.
    """
    decode = spec.phase == "decode"
    points = _check_measured(measured, ("block_n", "num_splits") if decode else ("block_m", "block_n"))
    sizes = [Tiling(block_m=b, block_n=b).block_m for b in block_sizes]  # validates powers of two
    if decode:
        xs_name, line_name, line_vals = "block_n", "num_splits", [int(x) for x in splits]
    else:
        xs_name, line_name, line_vals = "block_m", "block_n", sizes
    grid_x, grid_l = np.meshgrid(np.asarray(sizes, dtype=np.int64), np.asarray(line_vals, dtype=np.int64))
    vary = {xs_name: grid_x.ravel(), line_name: grid_l.ravel()}
    res = _sweep(spec, tiling, hardware, vary, **options)
    hbm = res["tiled"]["hbm_bytes"].reshape(grid_x.shape)
    floor = float(res["compulsory"]["bytes"][0])

    def fits(x: int, line: int) -> bool:
        kw = {xs_name: int(x), line_name: int(line)}
        t = Tiling(block_m=kw.get("block_m", tiling.block_m), block_n=kw["block_n"],
                   num_stages=tiling.num_stages, num_splits=kw.get("num_splits", tiling.num_splits),
                   heads_per_program=tiling.heads_per_program)
        return t.sram_bytes(spec) <= hardware.smem_per_block

    what = "num_splits" if decode else "BLOCK_N"
    title = (f"{spec.name or 'layer'}: tiled HBM bytes versus "
             + ("BLOCK_N and num_splits (decode)" if decode else "BLOCK_M and BLOCK_N"))
    fig, ax = _figure(title, _assumptions(spec, tiling, hardware,
                                          f"seqlen_q={spec.seqlen_q:,}, seqlen_k={spec.seqlen_k:,}; grey x: tiles "
                                          f"need more than {human_bytes(hardware.smem_per_block)} of shared memory"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    cmap = [COLORS["tiled"], COLORS["baseline"], COLORS["tiled_kv_stationary"], COLORS["ref"],
            COLORS["measured"], "#56B4E9", "#F0E442"]
    no_fit_labelled = False
    for i, line in enumerate(line_vals):
        ys = hbm[i]
        ok = np.array([fits(x, line) for x in sizes])
        color = cmap[i % len(cmap)]
        ax.plot(sizes, ys, color=color, lw=1.6, alpha=0.9, label=f"{what} = {line}")
        ax.scatter(np.asarray(sizes)[ok], ys[ok], color=color, s=22, zorder=3)
        if (~ok).any():
            ax.scatter(np.asarray(sizes)[~ok], ys[~ok], marker="x", color=COLORS["grey"], s=40, zorder=4,
                       label=None if no_fit_labelled else "does not fit shared memory")
            no_fit_labelled = True
    ax.axhline(floor, color=COLORS["compulsory"], lw=1.4, ls=":", label="compulsory floor")
    own_x = tiling.block_n if decode else tiling.block_m
    own_l = tiling.num_splits if decode else tiling.block_n
    if own_x in sizes and own_l in line_vals:
        ax.scatter([own_x], [hbm[line_vals.index(own_l), sizes.index(own_x)]], marker="*", s=260,
                   facecolors="none", edgecolors="black", lw=1.3, zorder=6,
                   label=f"this layer's tiles ({'BLOCK_N' if decode else 'BLOCK_M'}={own_x}, {what}={own_l})")
    _overlay(ax, points, lambda m: float(m[xs_name]))
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(x) for x in sizes])
    ax.set_xlabel(("BLOCK_N (key rows per inner step)" if decode else "BLOCK_M (query rows per program)"))
    ax.set_ylabel("tiled HBM bytes per call (log scale, binary prefixes)")
    _bytes_axis(ax.yaxis)
    _legend(fig, ax)
    return _save(fig, path)


# ----------------------------------------------------------------------------------
# Bytes versus SRAM size
# ----------------------------------------------------------------------------------


def default_sram_sizes() -> np.ndarray:
    """SRAM sizes M of the x axis: 16 KiB to 4 MiB, 4 points per octave (bytes, int64)."""
    return np.unique(np.round(np.geomspace(2**14, 2**22, 8 * 4 + 1)).astype(np.int64))


def largest_fitting_tiles(spec: LayerSpec, tiling: Tiling, sram: np.ndarray,
                          sizes: Sequence[int] = (16, 32, 64, 128, 256, 512, 1024, 2048)
                          ) -> tuple[np.ndarray, np.ndarray]:
    """For each SRAM size M (bytes), the largest Q-stationary tiles that fit.

    The largest BLOCK_M (the tile that sets how often K and V are re-read), capped at
    next_pow2(seqlen_q), then the largest BLOCK_N, such that :meth:`Tiling.sram_bytes`
    (Q tile + num_stages K and V tiles) <= M. Sizes where not even 16 x 16 fits get 0.

    Returns:
        ``(block_m, block_n)`` int64 arrays shaped like ``sram``.
    """
    cap = 1 << max(4, (spec.seqlen_q - 1).bit_length())
    bm_out = np.zeros(len(sram), dtype=np.int64)
    bn_out = np.zeros(len(sram), dtype=np.int64)
    cands = sorted(((bm, bn) for bm in sizes for bn in sizes if bm <= cap and bn <= max(cap, 16)),
                   reverse=True)
    need = {c: Tiling(block_m=c[0], block_n=c[1], num_stages=tiling.num_stages).sram_bytes(spec) for c in cands}
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
    measured: Iterable[dict[str, Any]] | None = None,
    path: str | Path | None = None,
    **options: Any,
) -> Figure:
    """HBM bytes versus SRAM size M: FlashAttention-1 versus the Q-stationary kernel (prefill).

    FlashAttention-1 Algorithm 1 (K/V-stationary, ``tiled_kv_stationary``) with the paper's
    M-derived blocks B_c = ceil(M / 4d), B_r = min(ceil(M / 4d), d) (Dao et al. 2022,
    Section 3.1) moves Theta(N^2 d^2 / M) bytes (Theorem 2): its curve falls with slope -1,
    drawn next to a dotted reference proportional to N^2 d^2 / M. The Q-stationary kernel
    (``tiled``) runs, at each M, the largest tiles that fit (:func:`largest_fitting_tiles`).
    The hardware's shared memory per SM is marked.

    Args:
        sram_bytes: x values, bytes of SRAM per SM (default :func:`default_sram_sizes`).
        measured: points ``{"sram_bytes": B, "bytes": B, "label": str, "level": "HBM"}``.
        path, **options: as :func:`plot_seqlen`.

    Raises:
        IomodelError: the layer is a decode layer (FlashAttention-1 has no decode schedule:
            plot the prefill layer), or a measured point lacks its keys.
    """
    if spec.phase != "prefill":
        raise IomodelError("the SRAM-size plot compares prefill schedules: use --phase prefill for it")
    points = _check_measured(measured, ("sram_bytes",))
    m = np.asarray(default_sram_sizes() if sram_bytes is None else sram_bytes, dtype=np.int64)
    bm, bn = largest_fitting_tiles(spec, tiling, m)
    fit = bm > 0
    res_fa1 = _sweep(spec, tiling, hardware, {"smem_per_sm": m}, **options)
    fa1 = res_fa1["tiled_kv_stationary"]["hbm_bytes"]
    floor = float(res_fa1["compulsory"]["bytes"][0])
    qs = np.full(len(m), np.nan)
    if fit.any():
        res_q = _sweep(spec, tiling, hardware, {"block_m": bm[fit], "block_n": bn[fit], "smem_per_sm": m[fit]},
                       **options)
        qs[fit] = res_q["tiled"]["hbm_bytes"]
    s = spec
    title = f"{s.name or 'layer'}: HBM bytes versus SRAM size M (N = {s.seqlen_k:,}, d = {s.head_dim})"
    fig, ax = _figure(title, _assumptions(
        s, None, hardware,
        f"seqlen_q={s.seqlen_q:,}, seqlen_k={s.seqlen_k:,}; FlashAttention-1: B_c = ceil(M/4d), "
        f"B_r = min(B_c, d) (elements of {s.width} B); Q-stationary: largest BLOCK_M, then BLOCK_N, "
        f"with num_stages={tiling.num_stages}, that fit M"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.plot(m, fa1, color=COLORS["tiled_kv_stationary"], lw=2.2,
            label="FlashAttention-1 (K/V-stationary, Alg. 1)\nblocks from M")
    ref = fa1[0] * (m[0] / m.astype(float))
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


def write_plots(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    out_dir: str | Path,
    *,
    kinds: Sequence[str] = PLOT_KINDS,
    measured: dict[str, list[dict[str, Any]]] | None = None,
    **options: Any,
) -> list[Path]:
    """Write the PNGs of one layer into ``out_dir`` (created if missing).

    Files: ``bytes_vs_seqlen.png``, ``bytes_vs_blocks.png`` and (prefill only)
    ``bytes_vs_sram.png``.

    Args:
        kinds: subset of ``("seqlen", "blocks", "sram")``.
        measured: overlay points per kind, e.g. ``{"seqlen": [{"seqlen": 8192, "bytes": ...}]}``.

    Returns:
        The paths written.

    Raises:
        IomodelError: unknown kind, or the folder cannot be created.
    """
    unknown = [k for k in kinds if k not in PLOT_FILES]
    if unknown:
        raise IomodelError(f"unknown plot kind {unknown[0]!r}: use {', '.join(PLOT_KINDS)}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IomodelError(f"cannot create the plot folder {str(out)!r} ({exc.strerror}): pick another --plot-dir")
    measured = measured or {}
    funcs = {"seqlen": plot_seqlen, "blocks": plot_blocks, "sram": plot_sram}
    written = []
    for kind in kinds:
        if kind == "sram" and spec.phase != "prefill":
            continue
        path = out / PLOT_FILES[kind]
        funcs[kind](spec, tiling, hardware, measured=measured.get(kind), path=path, **options)
        written.append(path)
    return written


__all__ = [
    "BLOCK_SIZES",
    "PLOT_FILES",
    "PLOT_KINDS",
    "default_seqlens",
    "default_sram_sizes",
    "largest_fitting_tiles",
    "plot_blocks",
    "plot_seqlen",
    "plot_sram",
    "write_plots",
]
