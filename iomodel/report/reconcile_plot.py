"""A reconciliation as figures: predicted curves and measured points over sequence length.

One panel per shape family (everything but the sequence length equal), for the HBM level
(DRAM bytes against the L2-aware prediction) and the L2 level (requests from the SMs against
SRAM_fill). Log-log axes, bytes in binary prefixes. matplotlib is imported inside
:func:`plot`.
"""

from __future__ import annotations

import io

import math
import re
from pathlib import Path
from typing import Any

from iomodel.cache.params import forward_l2_of
from iomodel.cache.predict import predict_baseline, predict_tiled
from iomodel.errors import IomodelError
from iomodel.paths import check_output_dir, write_bytes
from iomodel.reconcile.compare import PredictFn, Reconciliation, ShapeReconciliation, default_predict, l2_params
from iomodel.format import human_bytes
from iomodel.spec import Tiling


#: The files :func:`plot` writes: ``<level>-vs-seqlen.png``, then ``-2``, ``-3`` ... for further pages.
PLOT_NAME = re.compile(r"(hbm|l2)-vs-seqlen(-\d+)?\.png")


def _family(r: ShapeReconciliation, ragged: frozenset[str] = frozenset()) -> tuple:
    """Shapes that differ only in sequence length: N_q = N_k prefill varies both, else seqlen_k. The pass, the window,
    the page size and a ragged batch (its id in ``ragged``) each make their own family."""
    s = r.spec
    fixed_q = None if (s.phase == "prefill" and s.seqlen_q == s.seqlen_k) else s.seqlen_q
    return (r.impl, s.batch, s.heads, s.kv_heads, s.head_dim, s.dtype, s.causal, s.causal_align, s.phase, fixed_q,
            s.backward, s.window_left, s.window_right, s.page_size, r.id in ragged)


def _family_label(r: ShapeReconciliation, ragged: frozenset[str] = frozenset()) -> str:
    s = r.spec
    mask = "non-causal" if not s.causal else f"causal {s.causal_align}"
    if s.phase == "decode":
        kind = f"decode, seqlen_q={s.seqlen_q}"
    elif r.id in ragged:
        kind = "ragged prefill (varlen), the batch's longest sequence"
    else:
        kind = "prefill, seqlen_q = seqlen_k" if s.seqlen_q == s.seqlen_k else f"prefill, seqlen_q={s.seqlen_q}"
    extra = "".join([", fwd+bwd" if s.backward else "",
                     (f", window {'none' if s.window_left is None else s.window_left} left, "
                      f"{'none' if s.window_right is None else s.window_right} right") if s.window else "",
                     f", paged {s.page_size}" if s.page_size else ""])
    return f"{r.impl}: B={s.batch} H={s.heads} H_kv={s.kv_heads} d={s.head_dim} {s.dtype}, {mask}, {kind}{extra}"


def _x(r: ShapeReconciliation) -> int:
    """The x coordinate: seqlen_k (equal to seqlen_q in square prefill families)."""
    return r.spec.seqlen_k


def _wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (plot titles)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, break_on_hyphens=False)) or text


def plot(rec: Reconciliation, out_dir: str | Path, max_panels: int = 12,
         predict_fn: PredictFn = default_predict) -> list[Path]:
    """Write ``hbm-vs-seqlen.png`` and ``l2-vs-seqlen.png``: predicted curves and measured points.

    One panel per shape family (everything but the sequence length equal); every family
    appears: when a level has more than ``max_panels`` families, the further panels go to
    ``hbm-vs-seqlen-2.png``, ``hbm-vs-seqlen-3.png`` ... (same for L2). Lines: the L2-aware
    HBM prediction (reads solid, writes dashed), the compulsory floor (the worksheet's
    compulsory reads) and the model's no-reuse bound (reads), evaluated on the measured
    lengths and the powers of two between them with the tiles and occupancy of the nearest
    measured shape; markers: the measured DRAM (or L2-request) bytes. Implementations
    without a model (SDPA backends) show the measured points and the floor only. Log-log
    axes, bytes in binary prefixes; panel titles are wrapped to the panel's width.

    Args:
        rec: the reconciliation.
        out_dir: folder to write into (created if missing).
        max_panels: panels per figure file (at least 1).
        predict_fn: the model's ``predict``.

    Returns:
        the paths written, in order.

    Raises:
        IomodelError: nothing to plot (no reconciled HBM level), ``max_panels`` below 1, or
            ``out_dir`` cannot be created or written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if max_panels < 1:
        raise IomodelError(f"max_panels must be 1 or more, got {max_panels}")
    out = check_output_dir(out_dir, "--plot-dir")
    fams: dict[tuple, list[ShapeReconciliation]] = {}
    ragged = _ragged_ids(rec)
    for r in rec.rows:
        if r.error is None and r.level("HBM") is not None:
            fams.setdefault(_family(r, ragged), []).append(r)
    if not fams:
        raise IomodelError("no reconciled HBM measurements to plot: check the record has ncu data")
    paths = []
    for level in ("HBM", "L2"):
        keys_l = [k for k in fams if any(r.level(level) and r.level(level).measured_read is not None for r in fams[k])]
        pages = [keys_l[i:i + max_panels] for i in range(0, len(keys_l), max_panels)]
        for page_no, keys in enumerate(pages, 1):
            paths.append(_plot_page(rec, fams, keys, level, out, page_no, len(pages), predict_fn, plt, matplotlib,
                                    ragged))
    return paths


def _plot_page(rec: Reconciliation, fams: dict, keys: list, level: str, out: Path, page_no: int, pages: int,
               predict_fn: PredictFn, plt: Any, matplotlib: Any, ragged: frozenset[str]) -> Path:
    n = len(keys)
    cols = min(3, n)
    rows_n = math.ceil(n / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.6 * cols, 4.2 * rows_n + 0.6), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        members = sorted(fams[key], key=_x)
        mx = [_x(r) for r in members]
        lv0 = members[0].level(level)
        if members[0].l2 is not None or (lv0 is not None and lv0.predicted_read is not None):  # a ragged batch: no l2
            # zero bytes cannot sit on a log axis: leave those points out (no line to the bottom)
            curve = [tuple(float("nan") if (i and not v) else v for i, v in enumerate(c))
                     for c in _curve(members, rec, level, predict_fn, ragged)]
            xs = [c[0] for c in curve]
            tol = rec.tolerances.get(level, 0.0)
            for j, color in ((1, "#0072B2"), (2, "#D55E00")):  # the relative tolerance around each prediction
                ys = [c[j] for c in curve]
                ax.fill_between(xs, [y * (1 - tol) for y in ys], [y * (1 + tol) for y in ys], color=color, alpha=0.12,
                                lw=0, label=f"±{tol:.0%} of the prediction" if j == 1 else None)
            if all(not (c[2] == c[2] and c[2]) for c in curve):  # every predicted write is 0 (or nan)
                ax.text(0.02, 0.10, "predicted write: 0 B at every length (no line on a log axis)",
                        transform=ax.transAxes, fontsize=6, color="#D55E00")
            if level == "HBM":
                dot = "x" if len(xs) < 2 else None  # a lone prediction (a training step's, a ragged batch's): a mark
                ax.plot(xs, [c[1] for c in curve], "-", marker=dot, color="#0072B2", label="predicted read (L2-aware)")
                ax.plot(xs, [c[2] for c in curve], "--", marker=dot, color="#D55E00",
                        label="predicted write (L2-aware)")
                ax.plot(xs, [c[3] for c in curve], ":", marker=dot, color="#999999", label="no-reuse bound (read)")
                ax.plot(xs, [c[4] for c in curve], "-", marker=dot, lw=0.8, color="#000000",
                        label="compulsory floor (read)")
            else:
                ax.plot(xs, [c[1] for c in curve], "-", color="#0072B2", label="predicted read (SRAM_fill)")
                ax.plot(xs, [c[2] for c in curve], "--", color="#D55E00", label="predicted write (SRAM_fill)")
        elif level == "HBM":  # no model: the floor at the measured lengths
            ax.plot(mx, [r.level("HBM").floor_read or float("nan") for r in members], "-", lw=0.8,
                    color="#000000", label="compulsory floor (read)")
        mr = [r.level(level).measured_read for r in members]
        mw = [r.level(level).measured_write for r in members]
        ax.scatter(mx, [v if v else float("nan") for v in mr], marker="o", s=36, facecolors="none",
                   edgecolors="#0072B2", zorder=5, label="measured read")
        ax.scatter(mx, [v if v else float("nan") for v in mw], marker="s", s=30, facecolors="none",
                   edgecolors="#D55E00", zorder=5, label="measured write")
        # measured 0 B cannot sit on a log axis either: a triangle on the bottom edge marks it
        edge = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
        for vals, color, what in ((mr, "#0072B2", "read"), (mw, "#D55E00", "write")):
            zx = [x for x, v in zip(mx, vals) if v == 0]
            if zx:
                ax.scatter(zx, [0.02] * len(zx), marker="v", s=30, color=color, transform=edge, zorder=6,
                           clip_on=False, label=f"measured {what} 0 B (bottom edge)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("seqlen_k (KV cache)" if members[0].spec.phase == "decode" else
                      "seqlen_q = seqlen_k" if members[0].spec.seqlen_q == members[0].spec.seqlen_k else "seqlen_k")
        ax.set_ylabel("bytes")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: human_bytes(v, decimals=1)))
        ax.set_title(_wrap(_family_label(members[0], ragged), 62), fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    what = ("DRAM bytes (dram__bytes_read/write.sum) vs the L2-aware prediction" if level == "HBM"
            else "L2 requests from the SMs vs SRAM_fill")
    page = f" (figure {page_no} of {pages})" if pages > 1 else ""
    ways = f"{rec.l2_ways}-way" if rec.l2_ways else "fully associative"
    if level == "HBM" and rec.forward_used:  # the forward's own constants (iomodel.cache.params.FORWARD_L2)
        f = forward_l2_of(rec.hardware)
        ways += f"; forward launches {f.ways}-way, written lines at {f.write_fraction:g}"
    fig.suptitle(_wrap(f"{what}{page}; {rec.hardware.name}, effective L2 {rec.l2_fraction:g} × "
                       f"{human_bytes(rec.hardware.l2_bytes, decimals=1)} ({ways}); {rec.measurement.environment.get('device', '')} "
                       f"{rec.measurement.created}", 40 * cols), fontsize=9)
    fig.tight_layout()
    suffix = f"-{page_no}" if page_no > 1 else ""
    path = out / f"{level.lower()}-vs-seqlen{suffix}.png"
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        write_bytes(path, buf.getvalue(), "--plot-dir")  # whole or not at all
    finally:
        plt.close(fig)
    return path


def _ragged_ids(rec: Reconciliation) -> frozenset[str]:
    """Ids of the record's ragged (varlen) batches."""
    return frozenset(m.id for m in rec.measurement.shapes if m.seqlens is not None)


def _curve(members: list[ShapeReconciliation], rec: Reconciliation, level: str, predict_fn: PredictFn,
           ragged: frozenset[str] | None = None) -> list[tuple]:
    """(x, read, write, bound_read, floor_read) at the measured lengths and powers of two between them (``ragged``:
    :func:`_ragged_ids` of ``rec``, computed where not given)."""
    xs = sorted({_x(r) for r in members})
    lo, hi = xs[0], xs[-1]
    if lo == hi:  # a lone shape: draw the curve over two octaves around it
        lo, hi = max(1, lo // 4), hi * 4
    p2 = [1 << k for k in range(max(0, lo.bit_length() - 1), hi.bit_length() + 1) if lo <= (1 << k) <= hi]
    grid = sorted(set(xs) | set(p2))
    ragged = _ragged_ids(rec) if ragged is None else ragged
    if any(r.id in ragged for r in members) or (level == "HBM" and any(r.spec.backward for r in members)):
        grid = xs  # a ragged batch's or a training step's prediction exists at its measured lengths only
    pts = []
    for x in grid:
        near = min(members, key=lambda r: abs(math.log2(max(1, _x(r))) - math.log2(max(1, x))))
        s = near.spec
        spec = s.with_(seqlen_q=x, seqlen_k=x) if (s.phase == "prefill" and s.seqlen_q == s.seqlen_k) else s.with_(seqlen_k=x)
        if spec == s:
            lv = near.level(level)
            pts.append((x, lv.predicted_read, lv.predicted_write, lv.bound_read, lv.floor_read))
            continue
        try:
            if near.impl == "tiled":
                tiling = near.tiling
                if level == "L2":
                    alg = predict_fn(spec, tiling, rec.hardware).algorithms["tiled"]
                    pts.append((x, alg.sram_fill_read_bytes, alg.sram_fill_write_bytes, None, None))
                    continue
                pps = near.programs_per_sm[0] if near.programs_per_sm else 1
                params = l2_params(rec.hardware, pps, rec.forward_constants, l2_fraction=rec.l2_fraction,
                                   ways=rec.l2_ways)
                l2 = predict_tiled(spec, tiling, params, near.tile_order)
                pts.append((x, l2.hbm_read_bytes, l2.hbm_write_bytes, l2.no_reuse_read_bytes, l2.floor_read_bytes))
            else:
                opts = {"score_dtype": "fp32"} if near.impl == "baseline-fp32" else {}
                alg = predict_fn(spec, Tiling(), rec.hardware, **opts).algorithms["baseline"]
                params = l2_params(rec.hardware, 1, rec.forward_constants, l2_fraction=rec.l2_fraction,
                                   ways=rec.l2_ways)
                l2 = predict_baseline(spec, alg.rows, params)
                pts.append((x, l2.hbm_read_bytes, l2.hbm_write_bytes, l2.no_reuse_read_bytes, l2.floor_read_bytes))
        except IomodelError:
            continue
    return pts


__all__ = ["plot"]
