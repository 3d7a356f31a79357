"""``iomodel plot``: PNGs of one layer's HBM bytes versus sequence length, tile sizes and SRAM size.

A thin layer over :func:`iomodel.report.plot.write_plots`; the layer options are
:class:`iomodel.commands.options.LayerOptions`, shared with ``iomodel worksheet``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iomodel.commands.options import LayerOptions, layer_options
from iomodel.errors import IomodelError


def _load_measured(path: Path | None) -> dict[str, list[dict[str, Any]]] | None:
    """Overlay points from a JSON file: ``{"seqlen": [...], "blocks": [...], "sram": [...]}``."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IomodelError(f"measured-points file {str(path)!r} does not exist: fix --measured") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IomodelError(f"measured-points file {str(path)!r} is not valid JSON ({exc}): fix the file") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise IomodelError(
            f"measured-points file {str(path)!r} must map plot kinds (seqlen, blocks, sram) to lists of points: "
            "fix the file"
        )
    return data


@layer_options
def plot(
    layer: LayerOptions,
    out_dir: Annotated[Path, typer.Option("--out-dir", "-o", help="Folder for the PNGs.")] = Path("plots"),
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
    from iomodel.report.plot import PLOT_KINDS, write_plots

    lay = layer.resolve()
    kinds = tuple(kind) if kind else PLOT_KINDS
    if "sram" in kinds and kind and lay.spec.phase != "prefill":
        raise IomodelError("the SRAM-size plot compares prefill schedules: drop --kind sram or use --phase prefill")
    for path in write_plots(lay.spec, lay.tiling, lay.hardware, out_dir, kinds=kinds,
                            measured=_load_measured(measured)):
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
