"""A reconciliation as text: the summary and per-shape tables, and the Markdown report.

Renders a :class:`~iomodel.reconcile.Reconciliation` (what ``iomodel reconcile`` prints and
writes with ``--markdown``); it computes nothing. Bytes in binary prefixes with one decimal
(:func:`iomodel.format.human_bytes`); ratios are measured / predicted.
"""

from __future__ import annotations

import math
from typing import Any

from iomodel.cache.params import forward_clause, read_fraction_of, read_fraction_source
from iomodel.format import human_bytes
from iomodel.reconcile.compare import Reconciliation


def fmt_ratio(r: float | None) -> str:
    """A measured/predicted ratio with two decimals; ``inf`` when the prediction is 0, ``-`` for None."""
    if r is None:
        return "-"
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}"


#: Columns of the summary table: counts within the relative tolerance alone, then within
#: relative-or-absolute (the absolute floor ``abs_tol``, 0 for the exact SRAM_fill level).
SUMMARY_COLUMNS = ("impl", "level", "direction", "shapes", "relative tol", "within relative",
                   "relative or absolute tol", "within relative or absolute")

TABLE_COLUMNS = ("shape", "level", "pred R", "meas R", "R ratio", "pred W", "meas W", "W ratio", "ok", "cause")


def percent_down(fraction: float) -> str:
    """``fraction`` (0-1) as a percentage rounded down to one decimal (``"94.9%"``): a share never reads as a bar it
    misses (189/199 is 94.9 %, not 95.0 %; 43/48 is 89.5 %, not the whole 90 % it once read)."""
    return f"{math.floor(1000 * fraction) / 10:.1f}%"


def share(k: int, n: int) -> str:
    """``k/n (p%)``, p :func:`percent_down` of k/n."""
    return f"{k}/{n} ({percent_down(k / n)})" if n else f"{k}/{n}"


def summary_rows(rec: Reconciliation) -> list[list[str]]:
    """The printed summary table (columns :data:`SUMMARY_COLUMNS`), one line per (impl, level, direction).

    Shapes not reconciled (a value not measured, or the shape's error) stay in the count and
    the last column says how many there are (listed by :func:`not_reconciled_lines`), and how many of the shapes the
    model labels ROUGH or NOT A PREDICTION in that direction, and of them how many are within (``labelled`` of
    :meth:`~iomodel.reconcile.compare.Reconciliation.summary`: a hit there is no evidence for the model, a miss no
    evidence against it). Shares: :func:`share`.
    """
    out = []
    for e in rec.summary():
        n = e["shapes"]
        floor = human_bytes(e["abs_tol_bytes"], decimals=1)
        absc = f"±{e['tolerance']:.0%} or ±{floor}" if e["abs_tol_bytes"] else "exact"
        missing = f"; {e['not_reconciled']} not reconciled" if e.get("not_reconciled") else ""
        missing += "".join(f"; {c['shapes']} labelled {q.upper()} ({c['within']} within)"
                           for q, c in sorted(e.get("labelled", {}).items()))
        out.append([e["impl"], e["level"], e["which"], str(n), f"±{e['tolerance']:.0%}",
                    share(e["within_rel"], n), absc, share(e["within"], n) + missing])
    return out


def not_reconciled_lines(rec: Reconciliation) -> list[str]:
    """One line per comparison the summary counts as not reconciled: shape, level and direction, why."""
    return [f"{r.id} ({what}): {why}" for r, what, why in rec.not_reconciled()]


def table_rows(rec: Reconciliation) -> list[list[str]]:
    """The printed table: one line per (shape, level), reads and writes apart; ratio = measured / predicted. The ok
    cell of an HBM level whose bytes the model labels says so, by direction (:func:`verdict_labels`). The shape's
    cause (:meth:`~iomodel.reconcile.compare.ShapeReconciliation.explanation`, the HBM gap's) sits on its HBM row
    (a training step lists its L2 rows first), else on its first."""
    out = []
    for r in rec.rows:
        if r.error or not r.levels:
            out.append([r.id, "-", "-", "-", "-", "-", "-", "-", "-", r.explanation()])
            continue
        said_at = next((i for i, lv in enumerate(r.levels) if lv.level == "HBM"), 0)  # the cause is the HBM gap's
        for i, lv in enumerate(r.levels):
            oks = [rec.within(r, lv.level, w) for w in ("read", "write")]
            ok = "-" if all(o is None for o in oks) else ("yes" if all(o in (True, None) for o in oks) else "NO")
            if any(o is False and w in lv.missing for o, w in zip(oks, ("read", "write"))):
                ok = "not measured"
            elif ok != "-":
                ok += verdict_labels(r, lv.level, oks)
            out.append([
                r.id if i == 0 else "",
                lv.level,
                human_bytes(lv.predicted_read, decimals=1), human_bytes(lv.measured_read, decimals=1),
                fmt_ratio(lv.ratio_read),
                human_bytes(lv.predicted_write, decimals=1), human_bytes(lv.measured_write, decimals=1),
                fmt_ratio(lv.ratio_write),
                ok,
                r.explanation() if i == said_at else "",
            ])
    return out


def verdict_labels(r: Any, level: str, oks: list[bool | None]) -> str:
    """What the ok cell of ``level`` adds where the model labels its DRAM bytes
    (:meth:`~iomodel.reconcile.compare.ShapeReconciliation.quality`), by direction: ``" (reads NOT A PREDICTION)"``
    for a labelled direction that missed (a miss the model announced), ``" (reads ROUGH, within; writes miss)"`` where
    the other direction missed and the labelled one is within; "" where nothing compared is labelled (the cell as
    before). ``oks``: the level's read and write verdicts (True, False, None: not compared)."""
    dirs = ("read", "write")
    labelled = {w: q for w, o in zip(dirs, oks) if o is not None and (q := r.quality(level, w)) != "predicted"}
    if not labelled:
        return ""
    missed = any(o is False for o in oks)
    parts = []
    for w, o in zip(dirs, oks):
        if w in labelled:
            parts.append(f"{w}s {labelled[w].upper()}" + (", within" if missed and o else ""))
        elif o is False:
            parts.append(f"{w}s miss")
    return f" ({'; '.join(parts)})"


def _joined(parts: list[str]) -> str:
    """Clauses joined by "; ", but after one that ends a sentence (the estimate's labels end with a full stop)."""
    out = ""
    for part in parts:
        out += ("" if not out else " " if out.endswith(".") else "; ") + part
    return out


def _label_clause(r: Any, level: str, which: str, bad: list[str]) -> str:
    """The Outside-tolerance clause of a labelled ``level`` and direction: the estimate's sentence; for a training
    step's ``HBM`` (its kernels labelled on levels of their own), the step's quality, then the sentences of the
    labelled kernels that have no item of their own on this line, and the names of those that do (their sentence is
    quoted there: each sentence once a line)."""
    quality, sentence = r.labels[(level, which)]
    kernels = [lvl for lvl, w in r.labels if w == which and lvl.startswith("HBM ")]
    if level != "HBM" or not kernels:
        return f"the model labels these {which}s: {sentence}"
    here = [lvl for lvl in kernels if f"{lvl} {which}" in bad]
    said = [r.labels[(lvl, which)][1] for lvl in kernels if lvl not in here]
    names = ", ".join(lvl.split(" ", 1)[1] for lvl in here)
    return (f"the model labels the step's {which}s {quality.upper()} (its lowest kernel's)"
            + (": " + " ".join(said) if said else "")
            + (f" ({names}: {'its own item' if len(here) == 1 else 'their own items'} on this line)"
               if here else ""))


def outside_account(r: Any, bad: list[str], floor_bytes: float = 0) -> str:
    """The Outside-tolerance line's account of each failing ``"<level> <read|write>"`` of ``bad``: the direction's own
    cause (:meth:`~iomodel.reconcile.compare.ShapeReconciliation.gap`, causes within ``floor_bytes`` counted as the
    floor); a value not measured, or a shape not reconciled, keeps the row's explanation. With one item the line's
    parentheses already name it, so the account is not prefixed with it again."""
    parts = []
    for item in bad:
        level, _, which = item.rpartition(" ")  # the level may hold a space: "HBM _bwd_dkdv read"
        if item.endswith(" not measured") or which not in ("read", "write"):
            why = r.explanation()
        else:
            why = r.gap(level, which, floor_bytes)
            if (level, which) in r.labels:  # the estimate said so before the run: its sentence, once per line
                why += "; " + _label_clause(r, level, which, bad)
        parts.append(why if len(bad) == 1 else f"{item}: {why}")
    return _joined(parts)


def seal_word(sealed: bool | None) -> str:
    """The record's seal in a few words (the console table's title): ``sealed``, ``unsealed`` or ``not read from a file``
    (:attr:`iomodel.measure.records.Measurement.sealed`). Raises nothing."""
    return {True: "sealed", False: "unsealed"}.get(sealed, "not read from a file")


def seal_sentence(sealed: bool | None) -> str:
    """The record's seal in one sentence (the Markdown report): what :attr:`~iomodel.measure.records.Measurement.sealed`
    says and what it does not prove (a checksum against edits by hand since iomodel wrote the file, not a signature).
    Raises nothing."""
    from iomodel.measure.records import SEAL_KEY, SEALED_SINCE

    if sealed is None:
        return "Not read from a file: no seal to check."
    if sealed:
        return (f"Sealed: unchanged since iomodel wrote it (settings.{SEAL_KEY} holds: a checksum against edits by hand, "
                "not a signature).")
    return (f"Unsealed (written before {SEALED_SINCE}, when seals began, or its seal dropped): an edit of its values "
            "cannot be detected.")


def markdown(rec: Reconciliation) -> str:
    """A Markdown report: environment, summary, the table, the shapes outside tolerance and
    those within only by the absolute floor; bytes in binary prefixes with one decimal."""
    m = rec.measurement
    env = m.environment
    lines = [
        f"# Reconciliation: {m.settings.get('sweep_name') or m.kind} ({m.created})",
        "",
        f"Device {env.get('device', '-')}, driver {env.get('driver', '-')}, CUDA {env.get('cuda', '-')}, "
        f"torch {env.get('torch', '-')}, triton {env.get('triton', '-')}, ncu {env.get('ncu', '-')}.",
        f"Command: `{m.command}`",
        seal_sentence(m.sealed),
        "",
        f"Hardware for the predictions: {rec.hardware.name} (L2 {human_bytes(rec.hardware.l2_bytes, decimals=1)}, "
        f"{rec.hardware.num_sms} SMs); effective L2 fraction {rec.l2_fraction:g}; L2 "
        + (f"{rec.l2_ways}-way set-associative, a read judged against {read_fraction_of(rec.hardware):g} of the L2 "
           f"(the shared-read capacity, {read_fraction_source(rec.hardware)})" if rec.l2_ways else "fully associative LRU")
        + (f"; {forward_clause(rec.hardware, rec.l2_fraction, rec.l2_ways, rec.forward_constants)}" if rec.l2_ways
           else "")  # the LRU is named just before
        + "; relative tolerances "
        + ", ".join(f"{k} ±{v:.0%}" if v else f"{k} exact" for k, v in rec.tolerances.items())
        + f"; absolute floor {human_bytes(rec.abs_tol, decimals=1)} ({int(rec.abs_tol)} bytes) for HBM and L2 only "
        "(SRAM_fill is exact). A value is within when |predicted − measured| <= relative × measured, "
        "or, in the last column, <= the absolute floor. Shares are rounded down to 0.1 %.",
        "",
        "| " + " | ".join(SUMMARY_COLUMNS) + " |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in summary_rows(rec):
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for row in table_rows(rec):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in row) + " |")
    outside = rec.outside()
    lines += ["", f"## Outside tolerance ({len(outside)})", ""]
    for r, bad in outside:
        why = outside_account(r, bad, rec.abs_tol)
        lines.append(f"- `{r.id}` ({', '.join(bad)}): {why}" + ("" if why.endswith(".") or not r.notes else ".")
                     + (f" Notes: {'; '.join(r.notes)}" if r.notes else ""))
    missing = rec.not_reconciled()
    lines += ["", f"## Not reconciled ({len(missing)})", ""]
    if missing:
        lines += ["Counted in the summary as not within: values the run collected that the record lacks, "
                  "and shapes that could not be reconciled:", ""]
    for r, what, why in missing:
        lines.append(f"- `{r.id}` ({what}): {why}")
    floor = rec.floor_only()
    lines += ["", f"## Within only by the absolute floor of {human_bytes(rec.abs_tol, decimals=1)} ({len(floor)})", "",
              "Outside the relative tolerance, inside the absolute one:", ""]
    for r, what, why in floor:
        lines.append(f"- `{r.id}` ({what}): {why}")
    return "\n".join(lines) + "\n"


__all__ = ["SUMMARY_COLUMNS", "TABLE_COLUMNS", "fmt_ratio", "markdown", "not_reconciled_lines", "outside_account",
           "percent_down", "share", "summary_rows", "table_rows", "verdict_labels"]
