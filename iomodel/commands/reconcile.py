"""``iomodel reconcile RESULTS.json``: predicted against measured bytes, per shape and level.

A pure-CPU step over a record written by ``iomodel validate``: the comparison is
:mod:`iomodel.reconcile`, the tables and report :mod:`iomodel.report.reconcile_md`, the
plots :mod:`iomodel.report.reconcile_plot`. It prints the table (reads and writes apart,
ratio = measured / predicted, the dominant cause of each shape's gap), the fraction within
tolerance per level, the shapes outside with their explanation, and writes the
bytes-versus-seqlen plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from iomodel.errors import IomodelError
from iomodel.spec.hardware import preset_names
from iomodel.paths import check_output_dir, check_output_file, refuse_input_as_output, shown, write_text
from iomodel.cache.params import (DEFAULT_L2_FRACTION, DEFAULT_L2_READ_FRACTION, DEFAULT_L2_WAYS, MAX_L2_WAYS,
                                  MEASURED_L2_READ_FRACTION, forward_clause, hardware_preset, read_fraction_of,
                                  read_fraction_source)


def _check_distinct_outputs(json_out: Path | None, markdown_out: Path | None, plot_dir: Path | None) -> None:
    """Refuse outputs that would overwrite one another: --json and --markdown naming one file, or either naming a
    plot that --plot-dir writes (:data:`iomodel.report.reconcile_plot.PLOT_NAME`).

    Raises:
        IomodelError: such a clash (one line naming both options), or a path with the other format's suffix.
    """
    from iomodel.report.reconcile_plot import PLOT_NAME

    if json_out is not None and markdown_out is not None and json_out.resolve() == markdown_out.resolve():
        raise IomodelError(f"--json and --markdown name the same file {str(json_out)!r}: give each its own path")
    for flag, out, other in (("--json", json_out, (".md", ".markdown")), ("--markdown", markdown_out, (".json",))):
        if out is not None and out.suffix.lower() in other:  # a JSON file named .md (or the reverse): a swap
            raise IomodelError(f"{flag} {str(out)!r} has the suffix of the other format ({flag} writes "
                               f"{'JSON' if flag == '--json' else 'Markdown'}): name it "
                               f"{out.with_suffix('.json' if flag == '--json' else '.md').name}, or swap the options")
        if out is not None and plot_dir is not None and out.resolve().parent == plot_dir.resolve() \
                and PLOT_NAME.fullmatch(out.name):
            raise IomodelError(f"{flag} {str(out)!r} is a plot that --plot-dir writes: give {flag} another path")


def reconcile(
    results: Annotated[Path, typer.Argument(help="Measurement JSON written by `iomodel validate`.")],
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="Hardware preset to predict for: "
                                                    f"{preset_names()}, any case, h100 and a100 as aliases "
                                                    "(default: the one recorded with the measurement).")] = None,
    l2_fraction: Annotated[Optional[float], typer.Option("--l2-fraction", help="Effective fraction of L2 for the "
                                                         "L2-aware prediction: the room written lines take (so reads "
                                                         "move with it too), their write-back and the fully "
                                                         "associative LRU's capacity (default: the record's, else "
                                                         f"{DEFAULT_L2_FRACTION:g}). A read miss of the set-associative "
                                                         "L2 is judged at the fraction of the L2 measured on the "
                                                         f"device's preset ({DEFAULT_L2_READ_FRACTION:g} on an H200, "
                                                         f"{MEASURED_L2_READ_FRACTION['H100-SXM']:g} on an H100, the "
                                                         "PCIe and NVL cards their SXM die's; a "
                                                         "preset not measured, the A100, takes the H200's and the "
                                                         "report says so); no option changes it. At the default "
                                                         "the forward launches take their own constants "
                                                         "(FORWARD_L2: written lines at 0.4375); any other value "
                                                         "sets one model for every kernel.")] = None,
    impl: Annotated[Optional[list[str]], typer.Option("--impl", help="Only these implementations (repeatable).")] = None,
    tol_hbm: Annotated[float, typer.Option("--tol-hbm", help="Relative tolerance of the HBM level.")] = 0.10,
    tol_l2: Annotated[float, typer.Option("--tol-l2", help="Relative tolerance of the L2 level.")] = 0.15,
    abs_tol: Annotated[float, typer.Option("--abs-tol", help="Absolute tolerance floor in bytes (HBM and L2): a "
                                           "value also counts as within when |predicted - measured| is at most "
                                           "this; the summary shows the counts with and without it.")] = 1 << 20,
    plot_dir: Annotated[Optional[Path], typer.Option("--plot-dir", help="Write hbm-vs-seqlen.png and "
                                                     "l2-vs-seqlen.png here (and hbm-vs-seqlen-2.png ... when more "
                                                     "than 12 shape families).")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the reconciliation as JSON (missing folders are created).")] = None,
    markdown_out: Annotated[Optional[str], typer.Option("--markdown", help="Write a Markdown report (missing folders are created).")] = None,
    l2_source: Annotated[Optional[str], typer.Option("--l2-source", help="What is compared with SRAM_fill at the "
                                                     "L2 level: auto (sm when measured, else tex), sm (bytes the SMs "
                                                     "received from / sent to L2 over the crossbar), tex (L2 lookups "
                                                     "from the SMs' L1/TEX units) or all (L2 lookups from any source, "
                                                     "e.g. if TMA is not counted as TEX); default: the record's, "
                                                     "else auto.")] = None,
    l2_ways: Annotated[Optional[int], typer.Option("--l2-ways", help="Associativity of the L2 in the L2-aware prediction "
                                         f"(default {DEFAULT_L2_WAYS} for the backward kernels, fitted on the H200 "
                                         "calibration receipts, and the forward's own constants for every forward "
                                         "launch, iomodel.cache.params.FORWARD_L2; any other value sets one model for "
                                         "every kernel; 0: a fully associative LRU, the earlier model).")] = None,
    forward_constants: Annotated[bool, typer.Option("--forward-constants/--no-forward-constants",
                                                    help="Predict forward launches with their own L2 constants "
                                                    "(iomodel.cache.params.FORWARD_L2, fitted on the forward-pattern "
                                                    "microbenchmark; the default) or, --no-forward-constants, with the "
                                                    "backward kernels' (24 ways, written lines 0.5 at 0.5: the legacy "
                                                    "model, for comparison).")] = True,
    jobs: Annotated[int, typer.Option("--jobs", help="Processes the shapes are reconciled in (a speed setting; every "
                                      "number is the same): 0, the default, automatic: this process first, then, "
                                      "once the record has taken about a second, one forked process per idle CPU for "
                                      "the rest (a short record never forks); 1 one process; N N processes, at most "
                                      "one a CPU.")] = 0,
    scan_l2_fraction: Annotated[bool, typer.Option("--scan-l2-fraction", help="Also print the HBM agreement for "
                                                   "effective L2 fractions 0.25 to 1 (the read capacity stays at the "
                                                   "device's measured fraction).")] = False,
) -> None:
    """Compare predicted with measured bytes, level by level, and name each gap's cause."""
    import json

    import math

    from iomodel.format import human_bytes
    from iomodel.measure.records import Measurement
    from iomodel import reconcile as comparison
    from iomodel.report import reconcile_md as md

    for flag, val in (("--tol-hbm", tol_hbm), ("--tol-l2", tol_l2), ("--abs-tol", abs_tol)):
        if not math.isfinite(val) or val < 0:
            raise IomodelError(f"{flag} must be a finite number, 0 or more, got {val}: pass e.g. {flag} "
                               + ("1048576" if flag == "--abs-tol" else "0.1"))
    explicit_default_ways = l2_ways == DEFAULT_L2_WAYS
    l2_ways = DEFAULT_L2_WAYS if l2_ways is None else l2_ways
    if not 0 <= l2_ways <= MAX_L2_WAYS:
        raise IomodelError(f"--l2-ways must be 0 (fully associative) or a number of ways up to {MAX_L2_WAYS}, "
                           f"got {l2_ways}")
    # output paths first: a bad one fails before any work
    if plot_dir is not None:
        check_output_dir(plot_dir, "--plot-dir")
    if json_out is not None:  # a str, so "dir/" is refused as a folder
        json_out = check_output_file(json_out, "--json")
    if markdown_out is not None:
        markdown_out = check_output_file(markdown_out, "--markdown")
    _check_distinct_outputs(json_out, markdown_out, plot_dir)
    for flag, out in (("--json", json_out), ("--markdown", markdown_out)):
        if out is not None:
            refuse_input_as_output(out, flag, {"the receipt": results})
    if hardware is not None and not hardware.strip():
        raise IomodelError(f"--hardware is empty: name a preset ({preset_names()}) or leave the option out to "
                           "predict for the record's own hardware")
    meas = Measurement.load(results)
    common = dict(hardware=hardware, impls=impl, tolerances={"HBM": tol_hbm, "L2": tol_l2}, abs_tol=abs_tol,
                  l2_source=l2_source, l2_ways=l2_ways or None, jobs=jobs or None)
    rec = comparison.reconcile(meas, l2_fraction=l2_fraction, forward_constants=forward_constants, **common)
    console = Console(width=max(Console().width, 180))
    diagnostics = Console(width=max(Console().width, 180), stderr=True)  # notes and warnings: stderr, not the report
    if explicit_default_ways and rec.forward_used:
        diagnostics.print(f"note: --l2-ways {DEFAULT_L2_WAYS} is the backward kernels' default: the forward launches keep "
                      "their own constants (the title names them); another value, or --l2-fraction other than "
                      f"{DEFAULT_L2_FRACTION:g}, sets one model for every kernel", highlight=False, soft_wrap=True,
                      markup=False)
    recorded = (meas.hardware or {}).get("name")
    if hardware and recorded and hardware_preset(str(recorded)) != hardware_preset(rec.hardware):
        diagnostics.print(f"warning: predicting for --hardware {rec.hardware.name}, but the record was measured on "
                      f"{recorded}: the comparison is across devices", highlight=False, soft_wrap=True, markup=False)
    reads = (f", reads at {read_fraction_of(rec.hardware):g} of the L2 ({read_fraction_source(rec.hardware)})"
             if rec.l2_ways else "")
    fwd = forward_clause(rec.hardware, rec.l2_fraction, rec.l2_ways, rec.forward_constants)
    reads += f"; {fwd}" if fwd else ""
    t = Table(title=f"Predicted vs measured ({meas.kind}, {md.seal_word(meas.sealed)}, {rec.hardware.name}, L2 fraction "
                    f"{rec.l2_fraction:g}{reads}); ratio = measured / predicted")
    for c in md.TABLE_COLUMNS:
        t.add_column(c, overflow="fold", max_width=70 if c == "cause" else None)
    for row in md.table_rows(rec):
        t.add_row(*row)
    console.print(t)
    s = Table(title=f"Within tolerance: relative alone, and relative or the absolute floor of "
                    f"{human_bytes(rec.abs_tol, decimals=1)} (HBM and L2; SRAM_fill exact); shares rounded down to 0.1 %")
    for c in md.SUMMARY_COLUMNS:
        s.add_column(c)
    for row in md.summary_rows(rec):
        s.add_row(*row)
    console.print(s)
    outside = rec.outside()
    if outside:
        console.print(f"[bold]Outside tolerance ({len(outside)}):[/]")
        for r, bad in outside:
            console.print(escape(f"  {r.id} ({', '.join(bad)}): {md.outside_account(r, bad, rec.abs_tol)}"
                                 + (f" [{'; '.join(r.notes)}]" if r.notes else "")), highlight=False)
    missing = md.not_reconciled_lines(rec)
    if missing:
        console.print(f"[bold]Not reconciled, counted as not within ({len(missing)}):[/]")
        for line in missing:
            console.print(escape(f"  {line}"), highlight=False, soft_wrap=True)
    floor = rec.floor_only()
    if floor:
        console.print(f"[bold]Within only by the absolute floor of {human_bytes(rec.abs_tol, decimals=1)} ({len(floor)}):[/]")
        for r, what, why in floor:
            console.print(escape(f"  {r.id} ({what}): {why}"), highlight=False)
    if scan_l2_fraction:
        scan = comparison.scan_l2_fraction(meas, (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0), **common)
        st = Table(title="HBM within tolerance versus the effective L2 fraction (one model for every kernel: the "
                         "forward's own constants off at every fraction)")
        cols = [k for k in scan[0] if k != "l2_fraction"]
        st.add_column("l2_fraction")
        for c in cols:
            st.add_column(c)
        for e in scan:
            st.add_row(f"{e['l2_fraction']:g}", *[md.percent_down(e[c]) for c in cols])
        console.print(st)
    if plot_dir is not None:
        from iomodel.report.reconcile_plot import plot

        try:
            paths = plot(rec, plot_dir)
        except IomodelError as exc:
            if "no reconciled HBM" not in str(exc):
                raise
            console.print(f"no plot: {exc}", highlight=False, markup=False)
        else:
            console.print(f"wrote {len(paths)} plot files: " + ", ".join(shown(p) for p in paths), highlight=False,
                          markup=False, soft_wrap=True)  # one line, however long: a `wrote` line filters whole
    if json_out is not None:
        write_text(json_out, json.dumps(rec.to_dict(), indent=1, default=str) + "\n", "--json")
        console.print(f"wrote {shown(json_out)}", highlight=False, markup=False, soft_wrap=True)
    if markdown_out is not None:
        write_text(markdown_out, md.markdown(rec), "--markdown")
        console.print(f"wrote {shown(markdown_out)}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the command to the ``iomodel`` typer app."""
    app.command("reconcile")(reconcile)
