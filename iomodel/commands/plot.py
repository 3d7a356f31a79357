"""``iomodel plot``: PNGs of one layer's HBM bytes versus sequence length, tile sizes and SRAM size.

A thin layer over :func:`iomodel.report.plot.write_plots`; the layer options are
:class:`iomodel.commands.options.LayerOptions`, shared with ``iomodel worksheet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iomodel.commands.options import LayerOptions, layer_options
from iomodel.errors import IomodelError
from iomodel.paths import shown


def _load_measured(path: Path | None) -> dict[str, list[dict[str, Any]]] | None:
    """Overlay points from a JSON file: ``{"seqlen": [...], "blocks": [...], "sram": [...]}``.

    Each point is checked later by :func:`iomodel.report.plot._check_measured`; this checks
    the file: readable JSON, an object whose keys are plot kinds and whose values are lists.

    Raises:
        IomodelError: one line naming the file and what is wrong (missing, a folder,
            unreadable, not JSON, not an object, an unknown kind, a value that is not a list).
    """
    from iomodel.jsonvalues import describe, read_json
    from iomodel.report.plot import PLOT_KINDS

    if path is None:
        return None
    where = f"measured-points file {str(path)!r}"
    data = read_json(path, "measured-points file", "pass the JSON file of points to --measured", "fix the file")
    if not isinstance(data, dict):
        raise IomodelError(f"{where} must map plot kinds ({', '.join(PLOT_KINDS)}) to lists of points, "
                           f"got {describe(data)}: fix the file")
    for k, v in data.items():
        if k not in PLOT_KINDS:
            raise IomodelError(f"{where}: {k!r} is not a plot kind: use {', '.join(PLOT_KINDS)}")
        if not isinstance(v, list):
            raise IomodelError(f"{where}: {k!r} must be a list of points, got {describe(v)}: fix the file")
    return data


@layer_options
def plot(
    layer: LayerOptions,
    out_dir: Annotated[str, typer.Option("--out-dir", "-o", help="Folder for the PNGs.")] = "plots",
    kind: Annotated[Optional[list[str]], typer.Option("--kind", help="seqlen, blocks or sram (repeatable; "
                                                      "default all; sram is prefill only).")] = None,
    measured: Annotated[Optional[Path], typer.Option("--measured", help="JSON of points to overlay: "
                                                     "{\"seqlen\": [{\"seqlen\": N, \"bytes\": B, \"label\": ..., "
                                                     "\"level\": \"HBM\"}], \"blocks\": [...], \"sram\": [...]}.")]
    = None,
) -> None:
    """Write PNG plots of one layer: HBM bytes versus sequence length, BLOCK_M/BLOCK_N and SRAM size.

    Same layer defaults as `iomodel worksheet` (Llama-3-8B, prefill 8,192 tokens, causal top-left, H200, the bundled kernel's tiles). Files: bytes_vs_seqlen.png, bytes_vs_blocks.png, bytes_vs_sram.png (prefill only).
    """
    from iomodel.paths import check_output_dir
    from iomodel.report.plot import PLOT_KINDS, check_plots, write_plots

    lay = layer.resolve()
    if lay.ragged is not None:
        raise IomodelError("iomodel plot draws one dense layer: drop --seqlens/--seqlens-file (use iomodel "
                           "worksheet --seqlens for a ragged batch)")
    kinds = tuple(kind) if kind else PLOT_KINDS
    if "sram" in kinds and kind and lay.spec.phase != "prefill":
        raise IomodelError("the SRAM-size plot compares prefill schedules: drop --kind sram or use --phase prefill")
    # a file, a device or a read-only folder: said before any plot is drawn, after the layer is
    # known to be valid (the check creates the folder)
    check_plots(lay.spec, kinds, lay.config, "-o/--out-dir", lay.inert_window)  # a refused kind leaves no folder behind
    out_dir = check_output_dir(out_dir, "-o/--out-dir")  # a str: "" is refused, not read as the current folder
    for path in write_plots(lay.spec, lay.tiling, lay.hardware, out_dir, kinds=kinds, option="-o/--out-dir",
                            config=lay.config, launcher_splits=not lay.splits_given,
                            inert_window=lay.inert_window, measured=_load_measured(measured)):
        typer.echo(f"wrote {shown(path)}")


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
