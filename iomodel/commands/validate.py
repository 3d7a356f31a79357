"""``iomodel validate``: measure the bundled kernel's traffic on the shapes of a sweep file.

GPU: Nsight Compute, one profiler process per batch of shapes (:mod:`iomodel.measure.driver`).
CPU (``--interpreter``): Triton's interpreter with every load and store counted
(:mod:`iomodel.measure.interpret`), the measured SRAM_fill level. Both write a
:class:`~iomodel.measure.records.Measurement` JSON that ``iomodel reconcile`` reads.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from iomodel.errors import IomodelError
from iomodel.measure.records import IMPLS  # plain data: no torch, sympy or numpy
from iomodel.commands.options import refuse_flags
from iomodel.paths import shown

#: Interpreter cost guard: K/V blocks all programs load together (a few ms each on a CPU at HEAD_DIM 128).
INTERPRETER_MAX_BLOCKS = 2_000


def _interpreter_blocks(spec, tiling) -> int:
    from iomodel.schedule.grid import decode_split_rows, prefill_key_rows

    if spec.phase == "decode":
        rows = sum(decode_split_rows(spec, tiling)) * spec.batch * spec.kv_heads * (spec.group // tiling.heads_per_program)
    else:
        rows = sum(prefill_key_rows(spec, tiling)) * spec.batch * spec.heads
    return rows // tiling.block_n + 1


def run_interpreter(sweep, command: str, echo) -> "object":
    """Count every tiled shape of a sweep in the interpreter; returns a Measurement (kind ``interpreter``).

    Args:
        sweep: a :class:`~iomodel.measure.sweep.Sweep`; only its ``tiled`` shapes are counted.
        command: the command line to record.
        echo: progress callback (one line per shape).

    Raises:
        IomodelError: a shape is too large for the interpreter or a training shape (every shape
            is checked before the first is counted), or torch/triton are missing.
    """
    from iomodel.spec.hardware import get_hardware
    from iomodel.measure.interpret import count_flash_attention, count_flash_attention_varlen
    from iomodel.measure.ncu import environment
    from iomodel.measure.records import Measurement, ShapeMeasurement
    from kernels.heuristics import INTERPRETER_DECODE_BLOCK_N, INTERPRETER_PREFILL

    from iomodel.spec import Tiling

    tiled = [s for s in sweep.shapes if s.impl == "tiled"]
    for s in tiled:  # every shape is checked before any is counted: a refusal wastes no counting
        if s.spec.backward:
            raise IomodelError(f"shape {s.id}: --interpreter records forward shapes (the backward's counts are checked "
                               "by tests/test_traffic_backward_interpreter.py): drop pass = \"fwd+bwd\" from the sweep "
                               "or run it on a GPU without --interpreter")
        if s.heads_per_program > 1:  # the interpreter runs its own tiles: P must divide their BLOCK_M too
            from iomodel.schedule.tiles import prefill_packing_refusal

            why = prefill_packing_refusal(s.heads_per_program, s.spec.group, INTERPRETER_PREFILL.block_m,
                                          flag="heads_per_program =")
            if why is not None:
                raise IomodelError(f"shape {s.id}: {why} (the interpreter's tiles, kernels/heuristics.py "
                                   "INTERPRETER_PREFILL)")
        guess = Tiling(INTERPRETER_PREFILL.block_m, INTERPRETER_PREFILL.block_n) if s.spec.phase == "prefill" else \
            Tiling(16, INTERPRETER_DECODE_BLOCK_N)
        if _interpreter_blocks(s.spec, guess) > INTERPRETER_MAX_BLOCKS:
            raise IomodelError(
                f"shape {s.id} is too large for Triton's interpreter (~{_interpreter_blocks(s.spec, guess)} K/V blocks): "
                "use a small sweep such as sweeps/interpreter.toml"
            )
    shapes = []
    for s in tiled:
        pins = {**({"heads_per_program": s.heads_per_program} if s.heads_per_program > 1 else {}),
                **({"tile_order": s.tile_order} if s.tile_order else {}),
                **({"grid_order": s.grid_order} if s.grid_order != "tiles-fastest" else {})}
        pinned = (INTERPRETER_PREFILL.config("prefill").with_(**pins)  # the interpreter's tiles, the sweep's launch
                  if pins else None)  # (its record then carries what the id's tag says: records.shape_tag)
        counts, cfg, _ = (count_flash_attention(s.spec, seed=s.seed, config=pinned) if s.seqlens is None
                          else count_flash_attention_varlen(s.ragged(), seed=s.seed))
        shapes.append(ShapeMeasurement(
            id=s.id, impl="tiled", spec=s.spec, config=cfg.to_dict(),
            sram_fill={k: {"read_bytes": v.read_bytes, "write_bytes": v.write_bytes} for k, v in counts.items()},
            seqlens=s.seqlens,
        ))
        echo(f"{s.id}: counted")
    if not shapes:
        raise IomodelError("the sweep has no 'tiled' shapes: the interpreter counts the bundled kernel only")
    return Measurement(
        kind="interpreter",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command,
        environment=environment(None),
        hardware=get_hardware(sweep.hardware).to_dict() if sweep.hardware else None,
        settings={"sweep": sweep.source, "sweep_name": sweep.name},
        shapes=shapes,
    )


def validate(
    sweep_file: Annotated[Path, typer.Argument(help="TOML sweep file (see sweeps/).")],
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Result JSON (default: "
                                                "ncu-<sweep>-<date>.json or interp-<sweep>-<date>.json; missing folders are created).")] = None,
    impl: Annotated[Optional[list[str]], typer.Option("--impl", help="Only these implementations (repeatable): "
                                                      f"{', '.join(IMPLS)}.")] = None,
    interpreter: Annotated[bool, typer.Option("--interpreter", help="Count loads and stores in Triton's "
                                              "interpreter (CPU, SRAM_fill level) instead of Nsight Compute.")] = False,
    ncu: Annotated[Optional[str], typer.Option("--ncu", help="Path of the ncu executable (default: $NCU, PATH, "
                                               "/usr/local/cuda/bin/ncu).")] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", help="Shapes per Nsight Compute process "
                                                      "(default: the sweep's).")] = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="Comma-separated Nsight Compute metrics "
                                                   "(default: the sweep's [ncu] metrics).")] = None,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep the per-batch CSV and manifests "
                                                    "here (default: a temporary folder).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N shapes.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the Nsight Compute command of each batch and "
                                          "exit.")] = False,
    budget_s: Annotated[Optional[float], typer.Option("--budget-s", help="Wall-clock budget in seconds; batches "
                                                      "beyond it are recorded as not run (results are saved after "
                                                      "every batch).")] = None,
    pin: Annotated[Optional[Path], typer.Option("--pin", help="An earlier ncu result JSON: run the bundled "
                                                "kernel with the configs it recorded (same shape ids) instead of "
                                                "autotuning, e.g. to repeat a measurement.")] = None,
) -> None:
    """Measure the bundled kernel (and, on request, the eager chain and SDPA backends) on a sweep.

    Without ncu, without counter permission or without a GPU the command says so in one line and points to --interpreter, which works on any machine.
    """
    from iomodel.measure import driver
    from iomodel.measure.ncu import build_command
    from iomodel.measure.metrics import DRAM_PASS_METRICS, METRIC_NAME
    from iomodel.measure.sweep import load_sweep

    console = Console()
    sweep = load_sweep(sweep_file)
    if interpreter:  # Nsight Compute's options mean nothing to Triton's interpreter: said, not ignored
        refuse_flags((("--ncu", ncu is not None), ("--metrics", metrics is not None), ("--workdir", workdir is not None),
                      ("--budget-s", budget_s is not None), ("--pin", pin is not None), ("--dry-run", dry_run),
                      ("--batch-size", batch_size is not None)),
                     "to Nsight Compute runs, not to --interpreter (which counts loads in Triton's interpreter, every "
                     "shape in one process)")
    driver.check_budget(budget_s)  # before anything runs (driver.profile checks it too, for its other callers)
    sweep.select(impl, limit)
    if batch_size is not None:
        if batch_size < 1:
            raise IomodelError("--batch-size must be 1 or more")
        sweep.batch_size = batch_size
    if metrics is not None:
        names = tuple(m.strip() for m in metrics.split(",") if m.strip())
        odd = next((m for m in names if not METRIC_NAME.fullmatch(m)), None)
        if not names or odd is not None:
            raise IomodelError(f"--metrics {metrics!r}: {'no metric' if not names else repr(odd) + ' is not'} an Nsight "
                               "Compute metric name (unit__counter.rollup, e.g. dram__bytes_read.sum): give "
                               "comma-separated names, or leave it out for the sweep's [ncu] metrics")
        sweep.metrics = names
    command = shlex.join(["iomodel", "validate", *sys.argv[2:]]) if len(sys.argv) > 1 else "iomodel validate"
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    pinned = driver.load_pin(sweep, pin) if pin is not None else None
    if dry_run:
        for n, batch in enumerate(driver.batches(sweep.shapes, sweep.batch_size)):
            console.print(f"# batch {n}: {len(batch)} shapes ({', '.join(s.id for s in batch[:3])}...)", highlight=False)
            for dram, metric_names in ((False, sweep.metrics), (True, DRAM_PASS_METRICS))[: 1 + sweep.dram_pass]:
                shapes_f, manifest_f, log_f = driver.batch_files("", n, dram=dram)
                argv = build_command(ncu or "ncu", driver.child_command(sys.executable, shapes_f, manifest_f),
                                     log_f, list(metric_names), sweep.cache_control, sweep.clock_control)
                if dram:
                    console.print(f"# batch {n}, DRAM-only pass (the configs of the run above pinned)", highlight=False)
                console.print(shlex.join(argv), highlight=False, soft_wrap=True)
        return
    def echo(line: str) -> None:  # progress only: a closed or full standard output must not lose the run
        with contextlib.suppress(OSError):
            console.print(line, highlight=False)

    from iomodel.paths import check_output_file, refuse_input_as_output

    # the output must be writable before any profiling starts
    path = check_output_file(out or Path(f"{'interp' if interpreter else 'ncu'}-{sweep.name}-{date}.json"), "--out")
    refuse_input_as_output(path, "--out", {"the sweep": sweep_file, "the --pin record": pin})
    if workdir is not None and not interpreter:
        from iomodel.paths import check_output_dir

        check_output_dir(workdir, "--workdir")
    if interpreter:
        meas = run_interpreter(sweep, command, echo)
    else:
        meas = driver.profile(sweep, ncu=ncu, workdir=workdir, command=command, echo=echo, budget_s=budget_s,
                               save_to=path, pin=pinned, pin_source=str(pin) if pin else "")
    meas.save(path)
    try:
        _print_summary(console, meas, path)
    except OSError as exc:  # the record is written: say where, on standard error
        with contextlib.suppress(OSError):
            sys.stderr.write(f"wrote {shown(path)}; its summary could not be printed ({exc.strerror or exc})\n")


def _print_summary(console: Console, meas, path: Path) -> None:
    from functools import partial

    from iomodel.format import human_bytes

    size = partial(human_bytes, decimals=1)  # bytes, binary prefixes, one decimal

    t = Table(title=f"{meas.kind} measurement: {len(meas.shapes)} shapes -> {path}")
    console.width = max(console.width, 150)
    if meas.kind == "interpreter":
        for c in ("shape", "config", "SRAM_fill read", "SRAM_fill write"):
            t.add_column(c)
        for s in meas.shapes:
            r = sum(v["read_bytes"] for v in (s.sram_fill or {}).values())
            w = sum(v["write_bytes"] for v in (s.sram_fill or {}).values())
            cfg = s.config or {}
            t.add_row(s.id, f"{cfg.get('block_m')}x{cfg.get('block_n')} splits {cfg.get('num_splits')}"
                      + (f" P {cfg['heads_per_program']}" if (cfg.get("heads_per_program") or 1) > 1
                         and s.spec.phase == "prefill" else ""),
                      size(r), size(w))
    else:
        for c in ("shape", "kernels", "DRAM read", "DRAM write", "L2 read", "L2 write", "time"):
            t.add_column(c)
        for s in meas.shapes:
            if s.error:
                t.add_row(s.id, "error", s.error[:60], "", "", "", "")
                continue
            dur = s.quantity("duration_s")
            t.add_row(s.id, str(len(s.kernels)), size(s.quantity("dram_read_bytes")),
                      size(s.quantity("dram_write_bytes")), size(s.quantity("l2_read_bytes")),
                      size(s.quantity("l2_write_bytes")), f"{dur * 1e6:.0f} us" if dur else "-")
    console.print(t)
    console.print(f"reconcile with: iomodel reconcile {shlex.quote(str(path)) if str(path).isprintable() else shown(path)}",
                  highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add the command to the ``iomodel`` typer app."""
    app.command("validate")(validate)
