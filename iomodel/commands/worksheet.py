"""``iomodel worksheet``: the HBM-traffic worksheet of one attention layer (Markdown, JSON or CSV).

A thin layer over :mod:`iomodel.report.worksheet` (and :mod:`iomodel.report.plot` for ``--plot-dir``);
the layer options are :class:`iomodel.commands.options.LayerOptions`, shared with ``iomodel plot``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from iomodel.errors import IomodelError

from iomodel.commands.options import LayerOptions, layer_options

@layer_options
def worksheet(
    layer: LayerOptions,
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="md (default), json or csv; default from "
                                               "the -o suffix.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of "
                                                   "standard output.")] = None,
    plot_dir: Annotated[Optional[Path], typer.Option("--plot-dir", help="Also write this layer's plots "
                                                     "(PNG) into this folder.")] = None,
    regenerate_bundled: Annotated[bool, typer.Option("--regenerate-bundled", help="Regenerate every bundled "
                                                     "worksheet under worksheets/ and exit (layer options "
                                                     "are ignored).")] = False,
) -> None:
    """Print the HBM-traffic worksheet of one attention layer: every tensor, step and byte.

    Default: one Llama-3-8B layer, prefill of 8,192 tokens, batch 1, causal top-left, bf16, H200, the bundled kernel's tiles. Prints Markdown; --format json|csv or -o FILE write the other formats (schema in the README). --seqlens 512,3000,77 (or --seqlens-file) models a ragged batch, summed exactly per sequence, against the padded batch's eager baseline.
    """
    from iomodel.report import worksheet as W

    if regenerate_bundled:
        paths = W.regenerate_bundled()
        typer.echo(f"wrote {len(paths)} files under {W.WORKSHEETS_DIR}")
        return
    from iomodel.paths import check_output_dir, check_output_file, shown

    if output is not None and str(output) == "-":  # the usual spelling of standard output
        output = None
    fmt = W.format_for(output, fmt)
    if output is not None and plot_dir is not None and Path(output).resolve() == Path(plot_dir).resolve():
        raise IomodelError(f"-o {output} and --plot-dir {plot_dir} name the same path: give the plots a folder of "
                           "their own")
    if output is not None:  # both destinations checked before anything is written
        check_output_file(output, "-o")
    if plot_dir is not None:
        check_output_dir(plot_dir, "--plot-dir")
    lay = layer.resolve()
    if lay.ragged is not None:  # summed per sequence (iomodel.report.ragged); no dense plots of it
        from iomodel.report.ragged import make_ragged_worksheet

        if plot_dir is not None:
            raise IomodelError("--plot-dir draws one dense layer: drop it with --seqlens/--seqlens-file")
        ws = make_ragged_worksheet(lay)
    else:
        ws = W.make_worksheet(lay)
    text = W.render(ws, fmt)
    if plot_dir is not None:  # the plots first: a plot that fails leaves no worksheet behind either
        from iomodel.report.plot import write_plots

        for path in write_plots(lay.spec, lay.tiling, lay.hardware, plot_dir, config=lay.config):
            typer.echo(f"wrote {shown(path)}", err=True)
    if output is not None:
        _write(output, text)
        typer.echo(f"wrote {shown(output)}", err=True)
    else:
        sys.stdout.write(text)
    if not ws.units_ok:  # a model defect, not bad input: exit 1
        typer.echo("error: some rows do not reduce to bytes (see the units check): report it", err=True)
        raise typer.Exit(1)


def _write(path: Path, text: str) -> None:
    from iomodel.paths import write_text  # whole or not at all

    write_text(path, text, "-o")


def register(app: typer.Typer) -> None:
    app.command("worksheet")(worksheet)
