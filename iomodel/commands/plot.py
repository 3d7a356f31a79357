"""``iomodel plot``: PNGs of one layer's HBM bytes versus sequence length, tile sizes and SRAM size.

A thin layer over :func:`iomodel.report.plot.write_plots`; the layer options are those of
``iomodel worksheet``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iomodel.commands.worksheet import (
    Batch,
    BlockM,
    BlockN,
    Causal,
    CausalAlign,
    Config,
    Dtype,
    HardwareOpt,
    HeadDim,
    Heads,
    KvHeads,
    NumSplits,
    NumStages,
    Pass,
    Phase,
    Preset,
    Seqlen,
    SeqlenK,
    SeqlenQ,
    layer_kwargs,
)
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


def plot(
    preset: Preset = None,
    config: Config = None,
    batch: Batch = 1,
    heads: Heads = None,
    kv_heads: KvHeads = None,
    head_dim: HeadDim = None,
    seqlen: Seqlen = None,
    seqlen_q: SeqlenQ = None,
    seqlen_k: SeqlenK = None,
    dtype: Dtype = None,
    causal: Causal = None,
    causal_align: CausalAlign = None,
    phase: Phase = "prefill",
    pass_: Pass = "fwd",
    block_m: BlockM = None,
    block_n: BlockN = None,
    num_stages: NumStages = None,
    num_splits: NumSplits = None,
    hardware: HardwareOpt = "H200",
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
    from iomodel.report.worksheet import resolve_layer

    layer = resolve_layer(**layer_kwargs(
        preset=preset, config=config, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        seqlen=seqlen, seqlen_q=seqlen_q, seqlen_k=seqlen_k, dtype=dtype, causal=causal,
        causal_align=causal_align, phase=phase, pass_=pass_, block_m=block_m, block_n=block_n,
        num_stages=num_stages, num_splits=num_splits, hardware=hardware))
    kinds = tuple(kind) if kind else PLOT_KINDS
    if "sram" in kinds and kind and layer.spec.phase != "prefill":
        raise IomodelError("the SRAM-size plot compares prefill schedules: drop --kind sram or use --phase prefill")
    for path in write_plots(layer.spec, layer.tiling, layer.hardware, out_dir, kinds=kinds,
                            measured=_load_measured(measured)):
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
