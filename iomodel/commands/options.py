"""The one set of layer options: every command that takes one attention layer declares them here.

:class:`LayerOptions` holds the options (each field's typer option, help and panel is
written once, on the field) and :func:`layer_options` puts them in front of a command's
own options::

    @layer_options
    def plot(layer: LayerOptions, out_dir: ... = Path("plots")) -> None:
        lay = layer.resolve()  # iomodel.spec.resolve.resolve_layer: spec, tiles, hardware

The values are merged into a layer only by :meth:`LayerOptions.resolve`, so a command may
ignore them (``worksheet --regenerate-bundled``). Nothing here imports sympy, numpy or torch.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from iomodel.spec.resolve import DEFAULT_HARDWARE
from iomodel.spec.hardware import preset_names

if TYPE_CHECKING:
    from iomodel.spec.resolve import Layer

_LAYER = "Layer"
_TILES = "Tiles and hardware"


def refuse_flags(given: typing.Iterable[tuple[str, bool]], why: str) -> None:
    """Refuse the flags of ``given`` (``(flag, was it given)`` pairs) that were given, in one line: they apply
    to another mode of the command than the one asked for (``why``: "to a benchmark run, not to --check ...").

    Raises:
        IomodelError: "FLAGS appl(y|ies) WHY: drop it/them"; nothing when none was given.
    """
    from iomodel.errors import IomodelError

    flags = [flag for flag, was in given if was]
    if flags:
        raise IomodelError(f"{', '.join(flags)} appl{'ies' if len(flags) == 1 else 'y'} {why}: drop "
                           f"{'it' if len(flags) == 1 else 'them'}")


def layer_flags_given(layer: "LayerOptions") -> list[tuple[str, bool]]:
    """``(flag, was it given)`` for every layer option of ``layer`` (given: other than its default), for
    :func:`refuse_flags`."""
    return [("--pass" if f.name == "passes" else "--" + f.name.replace("_", "-"), getattr(layer, f.name) != f.default)
            for f in dataclasses.fields(layer)]


#: The flag of each tile field a schedule file may also give (``iomodel worksheet --schedule``; the launch fields'
#: flags: :data:`iomodel.report.worksheet.SCHEDULE_FLAGS`).
TILE_FLAGS = {"block_m": "--block-m", "block_n": "--block-n", "num_stages": "--num-stages",
              "heads_per_program": "--heads-per-program", "writes": "--writes"}


def _option(flag: str, help: str, panel: str = _LAYER) -> Any:
    """The typer option ``flag`` with its help line, listed under ``panel`` in ``--help``."""
    return typer.Option(flag, help=help, rich_help_panel=panel)


@dataclasses.dataclass(frozen=True)
class LayerOptions:
    """The layer options, named as :func:`iomodel.spec.resolve.resolve_layer`'s keywords.

    Sizes are element counts (HEAD_DIM, seqlen_q, seqlen_k) or counts of heads and
    sequences; None means "from the config, preset or kernel heuristics".
    """

    preset: Annotated[Optional[str], _option(
        "--preset", "Bundled layer preset (see `iomodel presets`); default llama-3-8b.")] = None
    config: Annotated[Optional[Path], _option(
        "--config", "HF-style config.json (or a model folder holding one) to read the layer from instead of a "
        "preset.")] = None
    batch: Annotated[Optional[int], _option("--batch", "B, sequences in the batch (default 1).")] = None
    heads: Annotated[Optional[int], _option("--heads", "H, query heads (overrides the config).")] = None
    kv_heads: Annotated[Optional[int], _option(
        "--kv-heads", "H_kv, key/value heads; H must be divisible by it (GQA).")] = None
    head_dim: Annotated[Optional[int], _option("--head-dim", "HEAD_DIM (d), elements per head.")] = None
    seqlen: Annotated[Optional[int], _option(
        "--seqlen", "Prefill: seqlen_q = seqlen_k = N; decode: the KV-cache length seqlen_k. Default 8192.")] = None
    seqlen_q: Annotated[Optional[int], _option(
        "--seqlen-q", "Query rows per sequence (decode: 1-16, default 1; prefill: given alone, seqlen_k "
        "equals it).")] = None
    seqlen_k: Annotated[Optional[int], _option(
        "--seqlen-k", "Key/value rows per sequence (prefill: given alone, seqlen_q equals it).")] = None
    seqlens: Annotated[Optional[str], _option(
        "--seqlens", "Ragged batch, one length per sequence: 512,3000,77 (q:k for other key lengths, 77:4096; "
        "LEN*COUNT for COUNT sequences of LEN, 512*100); sets the batch and lengths, so no --batch or --seqlen*. "
        "Forward prefill.")] = None
    seqlens_file: Annotated[Optional[Path], _option(
        "--seqlens-file", "Ragged batch from a file: one length or q,k pair per line (LEN*COUNT for a "
        "histogram bin), or a JSON list ([512, [77, 4096]]).")] = None
    dtype: Annotated[Optional[str], _option(
        "--dtype", "Element type of Q, K, V, O: fp32, fp16, bf16, fp8_e4m3, fp8_e5m2 (default: the config's "
        "torch_dtype).")] = None
    causal: Annotated[Optional[bool], _option("--causal/--no-causal", "Causal mask (default: causal).")] = None
    causal_align: Annotated[Optional[str], _option(
        "--causal-align", "top-left (PyTorch is_causal; prefill default) or bottom-right (flash-attn >= 2.1; "
        "decode default).")] = None
    window: Annotated[Optional[str], _option(
        "--window", "Sliding window: L (keys up to L tokens left of the diagonal), L,R (and up to R right of it; "
        "-1 = unbounded side) or none. Default: the config's sliding_window (W - 1 left) for its windowed layers.")] = None
    page_size: Annotated[Optional[int], _option(
        "--page-size", "Decode: tokens per page of a paged KV cache (16, 32, ..., 1024; default: a dense "
        "cache).")] = None
    phase: Annotated[str, _option("--phase", "prefill or decode (1-16 query rows against a KV cache).")] = "prefill"
    passes: Annotated[str, _option("--pass", "fwd or fwd+bwd.")] = "fwd"
    block_m: Annotated[Optional[int], _option(
        TILE_FLAGS["block_m"], "BLOCK_M, query rows per program (power of two; default: the bundled kernel's choice).",
        _TILES)] = None
    block_n: Annotated[Optional[int], _option(
        TILE_FLAGS["block_n"], "BLOCK_N, key rows per inner step (power of two).", _TILES)] = None
    num_stages: Annotated[Optional[int], _option(
        TILE_FLAGS["num_stages"], "K/V tiles in flight per program (pipelining depth).", _TILES)] = None
    num_splits: Annotated[Optional[int], _option(
        "--num-splits", "Decode split-KV partitions (default: the kernel's heuristic).", _TILES)] = None
    heads_per_program: Annotated[Optional[str], _option(
        TILE_FLAGS["heads_per_program"], "Prefill forward: query heads of one KV head packed into each program's "
        "BLOCK_M rows "
        "(FlashAttention-3's PackGQA): a whole number, or group (H/H_kv: one program per whole GQA group); the "
        "bundled pointer prefill runs it from a given KernelConfig. Default 1.", _TILES)] = None
    writes: Annotated[Optional[str], _option(
        TILE_FLAGS["writes"], "Prefill forward: what each program writes once: O,LSE (default; the backward reads "
        "the LSE) or "
        "O (an inference kernel that keeps no LSE; no bundled kernel).", _TILES)] = None
    hardware: Annotated[str, _option(
        "--hardware", f"Hardware preset: {preset_names()} (any case; h100, a100 and h200-sxm are aliases of the SXM cards; the PCIe and NVL cards have their own bandwidth, SMs and peaks, and take their SXM card's L2 constants: measured on the H100 and H200, the H200's for the A100s).", _TILES)] = DEFAULT_HARDWARE

    def resolve(self) -> Layer:
        """The layer, tiles and hardware these options name.

        Raises:
            IomodelError: see :func:`iomodel.spec.resolve.resolve_layer` (bad sizes, unknown
                names, tiles that do not fit shared memory ...).
        """
        from iomodel.spec.resolve import resolve_layer

        return resolve_layer(**dataclasses.asdict(self))


def _option_parameters() -> list[inspect.Parameter]:
    """:class:`LayerOptions`' fields as keyword parameters, with their typer annotations."""
    hints = typing.get_type_hints(LayerOptions, include_extras=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
            for f in dataclasses.fields(LayerOptions)]


def layer_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``command(layer: LayerOptions, **own)`` the layer options on the command line.

    The wrapper's signature (what typer reads) is the layer options, in
    :class:`LayerOptions`' order, followed by the command's own parameters; it calls
    ``command(layer=LayerOptions(...), **own)``.

    Raises:
        TypeError: ``command`` has no ``layer`` parameter, or one of its own parameters
            has the name of a layer option.
    """
    own = inspect.signature(command, eval_str=True)
    if "layer" not in own.parameters:
        raise TypeError(f"{command.__name__} must take a 'layer: LayerOptions' parameter")
    layer_params = _option_parameters()
    names = {p.name for p in layer_params}
    rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values() if p.name != "layer"]
    clash = names & {p.name for p in rest}
    if clash:
        raise TypeError(f"{command.__name__}'s parameters {sorted(clash)} clash with the layer options")

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        layer = LayerOptions(**{n: kwargs.pop(n) for n in list(kwargs) if n in names})
        return command(layer=layer, **kwargs)

    params = layer_params + rest
    wrapper.__signature__ = inspect.Signature(params, return_annotation=own.return_annotation)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


__all__ = ["LayerOptions", "layer_options"]
