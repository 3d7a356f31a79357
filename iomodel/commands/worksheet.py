"""``iomodel worksheet``: the HBM-traffic worksheet of one attention layer (Markdown, JSON or CSV).

A thin layer over :mod:`iomodel.report.worksheet` (and :mod:`iomodel.report.plot` for ``--plot-dir``).
The layer options are shared with ``iomodel plot`` (:data:`LAYER_OPTIONS`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iomodel.errors import IomodelError

_LAYER = "Layer"
_TILES = "Tiles and hardware"

Preset = Annotated[Optional[str], typer.Option("--preset", help="Bundled layer preset (see `iomodel presets`); "
                                               "default llama-3-8b.", rich_help_panel=_LAYER)]
Config = Annotated[Optional[Path], typer.Option("--config", help="HF-style config.json to read the layer from "
                                                "instead of a preset.", rich_help_panel=_LAYER)]
Batch = Annotated[int, typer.Option("--batch", help="B, sequences in the batch.", rich_help_panel=_LAYER)]
Heads = Annotated[Optional[int], typer.Option("--heads", help="H, query heads (overrides the config).",
                                              rich_help_panel=_LAYER)]
KvHeads = Annotated[Optional[int], typer.Option("--kv-heads", help="H_kv, key/value heads; H must be divisible "
                                                "by it (GQA).", rich_help_panel=_LAYER)]
HeadDim = Annotated[Optional[int], typer.Option("--head-dim", help="HEAD_DIM (d), elements per head.",
                                                rich_help_panel=_LAYER)]
Seqlen = Annotated[Optional[int], typer.Option("--seqlen", help="Prefill: seqlen_q = seqlen_k = N; decode: the "
                                               "KV-cache length seqlen_k. Default 8192.", rich_help_panel=_LAYER)]
SeqlenQ = Annotated[Optional[int], typer.Option("--seqlen-q", help="Query rows per sequence (decode: 1-16, "
                                                "default 1).", rich_help_panel=_LAYER)]
SeqlenK = Annotated[Optional[int], typer.Option("--seqlen-k", help="Key/value rows per sequence.",
                                                rich_help_panel=_LAYER)]
Dtype = Annotated[Optional[str], typer.Option("--dtype", help="Element type of Q, K, V, O: fp32, fp16, bf16, "
                                              "fp8_e4m3, fp8_e5m2 (default: the config's torch_dtype).",
                                              rich_help_panel=_LAYER)]
Causal = Annotated[Optional[bool], typer.Option("--causal/--no-causal", help="Causal mask (default: causal).",
                                                rich_help_panel=_LAYER)]
CausalAlign = Annotated[Optional[str], typer.Option("--causal-align", help="top-left (PyTorch is_causal; "
                                                    "prefill default) or bottom-right (flash-attn >= 2.1; decode "
                                                    "default).", rich_help_panel=_LAYER)]
Phase = Annotated[str, typer.Option("--phase", help="prefill or decode (1-16 query rows against a KV cache).",
                                    rich_help_panel=_LAYER)]
Pass = Annotated[str, typer.Option("--pass", help="fwd or fwd+bwd.", rich_help_panel=_LAYER)]
BlockM = Annotated[Optional[int], typer.Option("--block-m", help="BLOCK_M, query rows per program (power of two; "
                                               "default: the bundled kernel's choice).", rich_help_panel=_TILES)]
BlockN = Annotated[Optional[int], typer.Option("--block-n", help="BLOCK_N, key rows per inner step (power of "
                                               "two).", rich_help_panel=_TILES)]
NumStages = Annotated[Optional[int], typer.Option("--num-stages", help="K/V tiles in flight per program "
                                                  "(pipelining depth).", rich_help_panel=_TILES)]
NumSplits = Annotated[Optional[int], typer.Option("--num-splits", help="Decode split-KV partitions (default: the "
                                                  "kernel's heuristic).", rich_help_panel=_TILES)]
HardwareOpt = Annotated[str, typer.Option("--hardware", help="Hardware preset: H200, H100-SXM, A100-80GB.",
                                          rich_help_panel=_TILES)]


def layer_kwargs(**kw: Any) -> dict[str, Any]:
    """Map the shared CLI options onto :func:`iomodel.report.worksheet.resolve_layer` keywords."""
    kw["passes"] = kw.pop("pass_")
    return kw


def worksheet(
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

    Default: one Llama-3-8B layer, prefill of 8,192 tokens, batch 1, causal top-left, bf16, H200, the bundled kernel's tiles. Prints Markdown; --format json|csv or -o FILE write the other formats (schema in the README).
    """
    from iomodel.report import worksheet as W

    if regenerate_bundled:
        paths = W.regenerate_bundled()
        typer.echo(f"wrote {len(paths)} files under {W.WORKSHEETS_DIR}")
        return
    fmt = W.format_for(output, fmt)
    layer = W.resolve_layer(**layer_kwargs(
        preset=preset, config=config, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        seqlen=seqlen, seqlen_q=seqlen_q, seqlen_k=seqlen_k, dtype=dtype, causal=causal,
        causal_align=causal_align, phase=phase, pass_=pass_, block_m=block_m, block_n=block_n,
        num_stages=num_stages, num_splits=num_splits, hardware=hardware))
    ws = W.make_worksheet(layer)
    text = W.render(ws, fmt)
    if output is not None:
        _write(output, text)
        typer.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)
    if plot_dir is not None:
        from iomodel.report.plot import write_plots

        for path in write_plots(layer.spec, layer.tiling, layer.hardware, plot_dir):
            typer.echo(f"wrote {path}", err=True)
    if not ws.units_ok:  # a model defect, not bad input: exit 1
        typer.echo("error: some rows do not reduce to bytes (see the units check): report it", err=True)
        raise typer.Exit(1)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise IomodelError(f"cannot write {str(path)!r} ({exc.strerror}): pick another -o path") from None


def register(app: typer.Typer) -> None:
    app.command("worksheet")(worksheet)
