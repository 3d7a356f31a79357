"""``iomodel worksheet``: the HBM-traffic worksheet of one attention layer (Markdown, JSON or CSV).

A thin layer over :mod:`iomodel.report.worksheet` (and :mod:`iomodel.report.plot` for ``--plot-dir``);
the layer options are :class:`iomodel.commands.options.LayerOptions`, shared with ``iomodel plot``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from iomodel.errors import IomodelError

from iomodel.commands.options import TILE_FLAGS, LayerOptions, layer_options

_SCHEDULE = "Launch schedule (L2-aware estimate)"

@layer_options
def worksheet(
    layer: LayerOptions,
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="md (default), json or csv; default from "
                                               "the -o suffix.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write to this file instead of "
                                                  "standard output (missing folders are created).")] = None,
    plot_dir: Annotated[Optional[str], typer.Option("--plot-dir", help="Also write this layer's plots "
                                                     "(PNG) into this folder.")] = None,
    regenerate_bundled: Annotated[bool, typer.Option("--regenerate-bundled", help="Regenerate every bundled "
                                                     "worksheet under worksheets/ and exit (no other "
                                                     "flag is taken).")] = False,
    grid_order: Annotated[Optional[str], typer.Option(
        "--grid-order", help="Program order of the forward grid: tiles-fastest, heads-fastest, grouped:N (N query "
        "tiles per group) or head-grouped:G (G grid rows per group, rows fastest; the bundled kernel's causal "
        "prefill launch, default: its rule).", rich_help_panel=_SCHEDULE)] = None,
    tile_order: Annotated[Optional[str], typer.Option(
        "--tile-order", help="Query-tile order within a head: forward or reverse (default: the bundled kernel's).",
        rich_help_panel=_SCHEDULE)] = None,
    key_order: Annotated[Optional[str], typer.Option(
        "--key-order", help="Each program's key-block loop: ascending (the bundled kernel) or descending.",
        rich_help_panel=_SCHEDULE)] = None,
    persistent: Annotated[Optional[str], typer.Option(
        "--persistent", help="A persistent loop of num_SMs x programs-per-SM programs over the tiles in grid order: "
        "strided (program j runs tiles j, j+P, ...; FlashAttention-3, cuDNN) or blocked (a contiguous share each); "
        "none (the default): one program per tile.", rich_help_panel=_SCHEDULE)] = None,
    programs_per_sm: Annotated[Optional[int], typer.Option(
        "--programs-per-sm", help="Programs one SM runs at once (default: estimated from shared memory and warps).",
        rich_help_panel=_SCHEDULE)] = None,
    num_warps: Annotated[Optional[int], typer.Option(
        "--num-warps", help="Warps per program, 1..32 (default: the bundled kernel's; its Gluon prefill runs 12 at "
        "HEAD_DIM 128, 20 at 64).",
        rich_help_panel=_SCHEDULE)] = None,
    schedule: Annotated[Optional[Path], typer.Option(
        "--schedule", help="TOML file of schedule fields (block_m, block_n, num_stages, heads_per_program, num_warps, "
        "programs_per_sm, grid_order, tile_order, key_order, persistent, reads, writes); the flags override it.",
        rich_help_panel=_SCHEDULE)] = None,
) -> None:
    """Print the HBM-traffic worksheet of one attention layer: every tensor, step and byte.

    Default: one Llama-3-8B layer, prefill of 8,192 tokens, batch 1, causal top-left, bf16, H200, the bundled kernel's tiles. Prints Markdown; --format json|csv or -o FILE write the other formats (schema in the README). --seqlens 512,3000,77 (or --seqlens-file) models a ragged batch, summed exactly per sequence, against the padded batch's eager baseline.
    """
    from iomodel.report import worksheet as W

    if regenerate_bundled:  # it writes the bundled files in place, each from its own layer: any other flag is ignored
        from iomodel.commands.options import layer_flags_given, refuse_flags

        given = [("-o", output), ("--plot-dir", plot_dir), ("--format", fmt), ("--grid-order", grid_order),
                 ("--tile-order", tile_order), ("--key-order", key_order), ("--persistent", persistent),
                 ("--programs-per-sm", programs_per_sm), ("--num-warps", num_warps), ("--schedule", schedule)]
        refuse_flags([(flag, value is not None) for flag, value in given] + layer_flags_given(layer),
                     f"to one layer's worksheet; --regenerate-bundled rewrites every bundled worksheet under "
                     f"{W.WORKSHEETS_DIR} in place, each from its own layer")
        paths = W.regenerate_bundled()
        typer.echo(f"wrote {len(paths)} files under {W.WORKSHEETS_DIR}")
        return
    from iomodel.paths import check_output_dir, check_output_file, refuse_folder, refuse_input_as_output, shown

    if output is not None and str(output) == "-":  # the usual spelling of standard output
        output = None
    if output is not None:  # before its suffix is read for the format
        refuse_folder(output, "-o")
    fmt = W.format_for(output, fmt)
    if output is not None and plot_dir is not None and Path(output).resolve() == Path(plot_dir).resolve():
        raise IomodelError(f"-o {output} and --plot-dir {plot_dir} name the same path: give the plots a folder of "
                           "their own")
    if output is not None and plot_dir is not None:  # -o must not be one of the plots --plot-dir writes
        from iomodel.report.plot import PLOT_FILES

        if Path(output).resolve().parent == Path(plot_dir).resolve() and Path(output).name in PLOT_FILES.values():
            raise IomodelError(f"-o {output} is a plot that --plot-dir writes ({Path(output).name}): give -o another "
                               "path")
    if output is not None:  # both destinations checked before anything is written; a str, so "dir/" is a folder
        from iomodel.spec.config import config_file

        refuse_input_as_output(output, "-o", {"the --config file": layer.config and config_file(layer.config),
                                              "the --seqlens-file": layer.seqlens_file, "the --schedule file": schedule})
        output = check_output_file(output, "-o")
    flags = {"num_warps": num_warps, "programs_per_sm": programs_per_sm, "grid_order": grid_order,
             "tile_order": tile_order, "key_order": key_order, "persistent": persistent}
    given_flags = {k: v for k, v in flags.items() if v is not None}
    by_flag = set(given_flags) | {f for f in _TILE_FIELDS if getattr(layer, f) is not None}  # before the file's
    layer, launch, from_file = _with_schedule(layer, schedule, given_flags)
    try:
        lay = layer.resolve()
        if lay.ragged is None:
            ws = W.make_worksheet(lay, schedule=launch)
    except IomodelError as exc:
        raise _named_file(exc, schedule, from_file, by_flag) from None
    if lay.ragged is not None:  # summed per sequence (iomodel.report.ragged); no dense plots of it
        from iomodel.report.ragged import make_ragged_worksheet

        if plot_dir is not None:
            raise IomodelError("--plot-dir draws one dense layer: drop it with --seqlens/--seqlens-file")
        if launch:
            in_file = [f for f in launch if f in from_file]
            said = W.schedule_flags({f: v for f, v in launch.items() if f not in from_file}) + [
                f"{f} = {launch[f]!r} (schedule file {str(schedule)!r})" for f in in_file]
            raise IomodelError(f"{', '.join(said)}: the launch schedule describes one dense layer: drop it with "
                               "--seqlens/--seqlens-file" + (" (take those fields out of the file, or drop --schedule)"
                                                             if in_file else ""))
        ws = make_ragged_worksheet(lay)
    if plot_dir is not None:  # plots this layer cannot have: refused before the folder is made
        from iomodel.report.plot import PLOT_KINDS, check_plots

        check_plots(lay.spec, PLOT_KINDS, lay.config, "--plot-dir", lay.inert_window)
        made = next((q for q in reversed([Path(plot_dir), *Path(plot_dir).parents]) if not q.exists()), None)
        plot_dir = check_output_dir(plot_dir, "--plot-dir")  # a str: "" is refused, not read as the current folder
    text = W.render(ws, fmt)
    plots: list[Path] = []
    if plot_dir is not None:  # the plots first: a plot that fails leaves no worksheet behind either
        from iomodel.report.plot import write_plots

        plots = write_plots(lay.spec, lay.tiling, lay.hardware, plot_dir, config=lay.config,
                            launcher_splits=not lay.splits_given,  # else --num-splits is held
                            inert_window=lay.inert_window)
    if output is not None:
        try:
            _write(output, text)
        except IomodelError:  # the worksheet could not be written (a full disk, /dev/full): no plots left behind
            for path in plots:
                Path(path).unlink(missing_ok=True)
            folder = Path(plot_dir) if plot_dir is not None and made is not None else None
            while folder is not None and not any(folder.iterdir()):  # the folders -o's failure would leave, emptied
                folder.rmdir()
                folder = None if folder.resolve() == made.resolve() else folder.parent
            raise
    for path in plots:
        typer.echo(f"wrote {shown(path)}", err=True)
    if output is not None:
        typer.echo(f"wrote {shown(output)}", err=True)
    else:
        sys.stdout.write(text)
    if not ws.units_ok:  # a model defect, not bad input: exit 1
        typer.echo("error: some rows do not reduce to bytes (see the units check): report it", err=True)
        raise typer.Exit(1)


#: Schedule fields that are the layer's tiles (:class:`LayerOptions` fields of the same name): the traffic model's
#: SRAM_fill rows read them as well as the L2-aware estimate.
_TILE_FIELDS = tuple(TILE_FLAGS)  # the schedule file's fields that are the layer's tiles


def _with_schedule(layer: LayerOptions, path: Optional[Path], flags: dict) -> tuple[LayerOptions, dict, dict]:
    """The layer options with the tiles of the schedule file ``path`` where no flag gives them,
    the launch fields (file, then ``flags`` over it) for :func:`iomodel.report.worksheet.l2_schedule`, and the
    file's fields no flag overrode (for :func:`_named_file`).

    Raises:
        IomodelError: the file is missing, not TOML, or has an unknown key or a bad value
            (:func:`iomodel.schedule.launch.read_schedule_file`, one line).
    """
    if path is None:
        return layer, flags, {}
    from iomodel.schedule.launch import read_schedule_file

    given = read_schedule_file(path)
    given.pop("reads", None)  # checked by the file's reader: a Q-stationary program's Q, K and V, nothing to carry
    if isinstance(given.get("writes"), list):  # the flag's spelling: O,LSE
        given["writes"] = ",".join(given["writes"])
    tiles = {f: v for f, v in given.items() if f in _TILE_FIELDS and getattr(layer, f) is None}
    launch = {f: v for f, v in given.items() if f not in _TILE_FIELDS}
    kept = {**tiles, **{f: v for f, v in launch.items() if f not in flags}}
    return dataclasses.replace(layer, **tiles), {**launch, **flags}, kept


def _named_file(exc: IomodelError, path: Optional[Path], from_file: dict, by_flag: set) -> IomodelError:
    """``exc`` naming the schedule file ``path``'s values it is about (``from_file``: the fields no flag overrode): a
    refusal checked once the layer is known (programs per SM over the device's limit, tiles over its shared memory, a
    packing that does not divide the GQA group) names the flags that set the fields it is about, some of which the
    user may not have passed. The message keeps the flags (a flag overrides the file); where no flag it names was
    given (``by_flag``: the fields flags set), it adds that the file's value may be changed instead. Raises nothing."""
    from iomodel.report.worksheet import SCHEDULE_FLAGS

    msg = str(exc)
    about = [f for f, flag in {**TILE_FLAGS, **SCHEDULE_FLAGS}.items() if flag in msg]
    named = [f for f in about if f in from_file]
    if path is None or not named:
        return exc
    values = ", ".join(f"{f} = {from_file[f]!r}" for f in named)
    tail = "" if set(about) & by_flag else " (or change the value in the file; a flag overrides it)"
    return IomodelError(f"schedule file {str(path)!r} gives {values}: {msg}{tail}")


def _write(path: Path, text: str) -> None:
    from iomodel.paths import write_text  # whole or not at all

    write_text(path, text, "-o")


def register(app: typer.Typer) -> None:
    app.command("worksheet")(worksheet)
