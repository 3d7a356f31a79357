"""The profile driver: a sweep's shapes in batches, one Nsight Compute process per batch.

:func:`profile` writes each batch's shapes to JSON, runs ``ncu`` (:func:`iomodel.measure.ncu.build_command`)
around the child process (:mod:`iomodel.measure.child`), joins the child's manifest and
ncu's CSV into :class:`~iomodel.measure.records.ShapeMeasurement` records by NVTX tag
(:func:`assemble`), retries without metrics the device does not know, keeps to a wall-clock
budget and saves after every batch. With the sweep's ``dram_pass`` each batch runs again
under a second ncu process that collects only the DRAM bytes in a single replay pass, with
the first run's kernel configs pinned (:func:`merge_dram_pass`); ``pin`` runs the configs of
an earlier record instead of autotuning (:func:`pinned_configs`).

On the GPU machine, which needs neither typer nor sympy::

    python -m iomodel.measure.driver SWEEP.toml OUT.json [--budget-s S] [--pin RESULT.json]
        [--batch-size N] [--impl NAME ...] [--ncu PATH]

profiles a sweep as ``iomodel validate SWEEP.toml -o OUT.json`` does, and prints a short table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from iomodel.errors import IomodelError
from iomodel.measure.metrics import DRAM_PASS_METRICS, DRAM_WRITE
from iomodel.measure.ncu import (
    FLUSH_TAG,
    CsvKernel,
    build_command,
    check_gpu,
    diagnose,
    environment,
    find_ncu,
    missing_metrics,
    parse_csv,
)
from iomodel.measure.records import (
    IMPLS,
    KernelRecord,
    Measurement,
    ShapeMeasurement,
    expected_kernels,
)
from iomodel.measure.sweep import Sweep, SweepShape, load_sweep


def batches(shapes: Sequence[SweepShape], size: int) -> list[list[SweepShape]]:
    """The shapes in order, cut into batches of ``size`` (one ncu process each; the last may be shorter)."""
    return [list(shapes[i: i + size]) for i in range(0, len(shapes), size)]


def assemble(shapes: Sequence[SweepShape], manifest: dict[str, dict[str, Any]], rows: Sequence[CsvKernel]) -> list[ShapeMeasurement]:
    """Join the child's manifest and ncu's rows into one :class:`ShapeMeasurement` per shape.

    Rows are assigned by their NVTX tag. Only if *no* row carries a tag (an ncu that prints no
    NVTX column) and every shape of the batch is the bundled kernel, whose kernel count is
    known from its configuration, are rows assigned by launch order, and only when the counts
    add up exactly, or up to one extra first row (the child's sacrificial kernel, dropped);
    each such shape then notes ``assigned by launch order`` in its config.

    Args:
        shapes: the batch, in order.
        manifest: shape id -> ``{"config": ..., "error": ...}`` as the child wrote it.
        rows: parsed CSV rows.

    Returns:
        measurements in the order of ``shapes``; a shape without kernels gets an error.
    """
    ordered = sorted(rows, key=lambda r: r.ident)
    by_tag: dict[str, list[KernelRecord]] = {}
    for r in ordered:
        if r.tag is not None:
            by_tag.setdefault(r.tag, []).append(r.record)
    if ordered and not by_tag:
        ran = [s for s in shapes if s.id in manifest and manifest[s.id].get("error") is None]
        counts = [expected_kernels(s.impl, s.spec, manifest[s.id].get("config")) for s in ran]
        if ran and None not in counts and sum(counts) == len(ordered) - 1:  # type: ignore[arg-type]
            ordered = ordered[1:]  # the child's sacrificial first kernel (flush_l2), untagged here
        if ran and None not in counts and sum(counts) == len(ordered):  # type: ignore[arg-type]
            it = iter(ordered)
            for s, n in zip(ran, counts):
                by_tag[s.id] = [next(it).record for _ in range(n)]  # type: ignore[arg-type]
                manifest[s.id] = {**manifest[s.id], "config": {**manifest[s.id]["config"],
                                                               "assigned": "by launch order (no NVTX tags in the CSV)"}}
    out = []
    for s in shapes:
        info = manifest.get(s.id, {})
        kernels = by_tag.get(s.id, [])
        error = info.get("error")
        if error is None and not kernels:
            error = "no profiled kernel carries this shape's NVTX tag" if info else "the profiled process never reached this shape"
        out.append(ShapeMeasurement(id=s.id, impl=s.impl, spec=s.spec, config=info.get("config"),
                                    kernels=kernels, error=error, seqlens=s.seqlens))
    return out


def _kernel_config_fields() -> tuple[str, ...]:
    from dataclasses import fields

    from kernels.heuristics import KernelConfig  # pure Python: no torch needed

    return tuple(f.name for f in fields(KernelConfig))


#: Config fields that must agree between the full-metric run and the DRAM-only run of a shape
#: (every field of ``kernels.heuristics.KernelConfig``).
CONFIG_KEYS = _kernel_config_fields()


def _config_core(cfg: dict[str, Any] | None) -> dict[str, Any]:
    return {k: cfg[k] for k in CONFIG_KEYS if cfg and k in cfg}


def pinned_configs(meas: Measurement) -> dict[str, dict[str, Any]]:
    """Shape id -> the bundled kernel's config that ran, for every tiled shape of a record.

    Feed it to :func:`profile` (``pin``) to run the same tiles again: the DRAM-only pass of a
    sweep and repeat measurements must profile the configuration the prediction is made for,
    not a fresh autotuning result.
    """
    return {s.id: _config_core(s.config) for s in meas.shapes
            if s.impl == "tiled" and s.error is None and _config_core(s.config).get("path")}


def batch_files(work: str | Path, n: int, dram: bool = False) -> tuple[Path, Path, Path]:
    """(shapes JSON, manifest JSON, ncu CSV log) of batch ``n`` under ``work``; ``dram``: the
    DRAM-only pass's files."""
    tag = "-dram" if dram else ""
    work = Path(work)
    return (work / f"batch{n:02d}-shapes{tag}.json", work / f"batch{n:02d}-manifest{tag}.json",
            work / f"batch{n:02d}-ncu{tag}.csv")


def child_command(python: str, shapes_file: str | Path, manifest_file: str | Path) -> list[str]:
    """argv of the profiled child process (:func:`iomodel.measure.child.main`)."""
    return [python, "-m", "iomodel.measure.child", str(shapes_file), str(manifest_file)]


def load_pin(sweep: Sweep, path: str | Path) -> dict[str, dict[str, Any]]:
    """The configs an earlier record ran (:func:`pinned_configs`), checked against ``sweep``.

    Raises:
        IomodelError: the record cannot be read, or it lacks a config for some tiled shape
            of the sweep (naming how many and the first of them).
    """
    pin = pinned_configs(Measurement.load(path))
    check_pin(sweep, pin, str(path))
    return pin


def check_pin(sweep: Sweep, pin: dict[str, dict[str, Any]], source: str) -> None:
    """Refuse a pin that lacks a config for some tiled shape of the sweep.

    Raises:
        IomodelError: naming how many shapes lack one and the first of them.
    """
    missing = [s.id for s in sweep.shapes if s.impl == "tiled" and s.id not in pin]
    if missing:
        raise IomodelError(f"--pin {source} has no recorded config for {len(missing)} tiled shape(s) of the sweep "
                           f"(first: {missing[0]}): pin a result of the same sweep")


def merge_dram_pass(results: Sequence[ShapeMeasurement], dram: Sequence[ShapeMeasurement]) -> None:
    """Take each kernel's DRAM bytes from the single-pass run, keeping the multi-pass values.

    Kernels are matched by shape id and launch order within the shape (the child launches the
    same sequence in both runs, the DRAM-only run with the first run's configs pinned). The
    multi-pass values move to ``<metric>@multipass``. A shape whose DRAM-only run differs
    (kernel count, kernel names, grid or block, or the bundled kernel's config) keeps its
    multi-pass values and gets a note saying what differed in its config (``dram_pass``).

    Args:
        results: the batch's measurements from the full-metric run (changed in place).
        dram: the same batch from the DRAM-only run.
    """
    by_id = {d.id: d for d in dram}
    for r in results:
        d = by_id.get(r.id)
        if r.error is not None:
            continue
        why = None
        if d is None or d.error is not None:
            why = "the DRAM-only run did not profile it"
        elif len(d.kernels) != len(r.kernels):
            why = f"{len(d.kernels)} kernels in the DRAM-only run, {len(r.kernels)} in the full one"
        elif any((a.name, a.grid, a.block) != (b.name, b.grid, b.block) for a, b in zip(r.kernels, d.kernels)):
            why = "different kernels, grids or blocks in the DRAM-only run"
        elif r.impl == "tiled" and _config_core(r.config) != _config_core(d.config):
            why = f"config {_config_core(d.config)} in the DRAM-only run, {_config_core(r.config)} in the full one"
        if why:
            r.config = {**(r.config or {}), "dram_pass": f"not applied: {why}"}
            continue
        for k, kd in zip(r.kernels, d.kernels):
            for m in DRAM_PASS_METRICS:
                if m in k.metrics and m in kd.metrics:
                    k.metrics[f"{m}@multipass"] = k.metrics[m]
                    k.metrics[m] = kd.metrics[m]
                    k.units[f"{m}@multipass"] = k.units.get(m, "byte")
        r.config = {**(r.config or {}), "dram_pass": "DRAM bytes from a single-pass ncu run (DRAM metrics only, "
                                                     "same config and launch geometry)"}


def _run_group(argv: list[str], timeout: float | None) -> int:
    """Run ``argv`` in its own process group; on timeout kill the whole group (ncu and its child).

    Returns:
        the exit status, or 124 after a timeout (as ``timeout(1)``).
    """
    import signal

    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        return 124


def _read_run(log: str, manifest_file: Path, metrics: Sequence[str]) -> tuple[list[CsvKernel], dict[str, Any]]:
    """What one ncu run left: the rows of its CSV (none when ncu printed no table) and the
    child's manifest (empty when the child never wrote one)."""
    try:
        rows = parse_csv(log, metrics)
    except IomodelError:
        rows = []
    return rows, json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}


def _flush_rows(rows: Sequence[CsvKernel], batch: int, run: str) -> list[dict[str, Any]]:
    """The child's sacrificial kernel in one run's rows (``run``: ``full`` or ``dram``), with
    the bytes it wrote back to DRAM, for the record's settings."""
    return [{"batch": batch, "run": run, "kernel": r.record.name, "dram_write_bytes": r.record.value(DRAM_WRITE)}
            for r in rows if r.tag == FLUSH_TAG]


def check_budget(budget_s: float | None) -> None:
    """Refuse a wall-clock budget (seconds) that is not a positive finite number; None (no budget) passes.

    Raises:
        IomodelError: NaN (it would become max(1, nan) = 1 s a batch), infinity, 0 or less (nothing measured), each
            silent before.
    """
    if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
        raise IomodelError(f"--budget-s must be a positive number of seconds, got {budget_s}: pass e.g. --budget-s 540, "
                           "or leave it out for no budget")


def profile(
    sweep: Sweep,
    *,
    ncu: str | None = None,
    workdir: str | Path | None = None,
    python: str = sys.executable,
    command: str = "",
    echo: Callable[[str], None] = lambda s: None,
    runner: Callable[[list[str], float | None], int] | None = None,
    budget_s: float | None = None,
    save_to: str | Path | None = None,
    pin: dict[str, dict[str, Any]] | None = None,
    pin_source: str = "",
) -> Measurement:
    """Profile every shape of a sweep under Nsight Compute, one ncu process per batch.

    Args:
        sweep: shapes and ncu settings.
        ncu: path of ncu (found by :func:`find_ncu` when None).
        workdir: folder for the per-batch files (a temporary folder when None).
        python: interpreter for the child process.
        command: the command line to record (the caller's).
        echo: progress callback (one line per batch).
        runner: runs one argv with a timeout in seconds (None: none) and returns its exit
            status, 124 on timeout (:func:`_run_group` when None; tests pass a fake).
        budget_s: wall-clock budget in seconds for all batches; a batch still running when
            it is spent is killed (its finished shapes are kept) and later batches are
            recorded as not run. None: no budget.
        save_to: write the measurement so far to this JSON after every batch, so a killed
            run leaves its finished batches behind.
        pin: shape id -> bundled-kernel config to run instead of autotuning
            (:func:`pinned_configs` of an earlier record); tiled shapes not in it autotune.
            With ``dram_pass`` the DRAM-only run always pins the full run's configs.
        pin_source: where ``pin`` came from (recorded in the settings).

    Returns:
        the :class:`~iomodel.measure.records.Measurement` (kind ``ncu``).

    Raises:
        IomodelError: ``budget_s`` is not a positive finite number; no GPU, no ncu, no counter permission, or ncu
            failed for another reason it explained in its log.
    """
    check_budget(budget_s)
    if runner is None:
        check_gpu()
    ncu_path = find_ncu(ncu) if runner is None else (ncu or "ncu")
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="iomodel-ncu-"))
    work.mkdir(parents=True, exist_ok=True)
    metrics = list(sweep.metrics)
    dropped: list[str] = []
    commands: list[str] = []
    flushes: list[dict[str, Any]] = []
    results: list[ShapeMeasurement] = []
    run = runner or _run_group
    t_start = time.time()
    env = environment(ncu_path if runner is None else None)
    hardware = None
    if runner is None:
        try:
            from iomodel.spec.hardware import detect

            hardware = detect().to_dict()
        except IomodelError:
            hardware = None

    def time_left() -> float | None:
        """Seconds of the budget left for the next ncu process (at least 1), None without a budget."""
        return None if budget_s is None else max(1.0, budget_s - (time.time() - t_start))

    def measurement() -> Measurement:
        return Measurement(
            kind="ncu",
            created=datetime.fromtimestamp(t_start, timezone.utc).isoformat(timespec="seconds"),
            command=command,
            environment=env,
            hardware=hardware,
            settings={
                "sweep": sweep.source,
                "sweep_name": sweep.name,
                "metrics": metrics,
                "dropped_metrics": dropped,
                "cache_control": sweep.cache_control,
                "clock_control": sweep.clock_control,
                "dram_pass": sweep.dram_pass,
                "batch_size": sweep.batch_size,
                "ncu_commands": commands,
                "l2_model": sweep.l2_model,
                "pinned_configs": pin_source or None,
                "flush_kernels": flushes,
                "wall_s": round(time.time() - t_start, 1),
            },
            shapes=list(results),
        )

    for n, batch in enumerate(batches(sweep.shapes, sweep.batch_size)):
        left = None if budget_s is None else budget_s - (time.time() - t_start)
        if left is not None and left <= 5:
            results += [ShapeMeasurement(s.id, s.impl, s.spec, error="not run: the time budget was spent", seqlens=s.seqlens)
                        for s in batch]
            continue
        shapes_file, manifest_file, log_file = batch_files(work, n)
        if pin:
            batch = [replace(s, config=pin[s.id]) if s.impl == "tiled" and s.id in pin else s for s in batch]
        shapes_file.write_text(json.dumps([s.to_dict() for s in batch]))
        child = child_command(python, shapes_file, manifest_file)
        t0 = time.time()
        tries = len(metrics) + 1  # ncu may name one unknown metric per run: drop them one run at a time
        for attempt in range(tries):
            argv = build_command(ncu_path, child, log_file, metrics, sweep.cache_control, sweep.clock_control)
            rc = run(argv, time_left())
            log = log_file.read_text() if log_file.is_file() else ""
            missing = [m for m in missing_metrics(log) if m in metrics]
            if missing and attempt < tries - 1 and rc != 124:
                dropped += missing
                metrics = [m for m in metrics if m not in missing]
                echo(f"batch {n}: ncu does not know {', '.join(missing)}; dropped, retrying")
                continue
            break
        commands.append(shlex.join(argv))
        why = diagnose(log, rc)
        if why and ("ERR_NVGPUCTRPERM" in why or "no CUDA-capable" in why):
            raise IomodelError(why)
        rows, manifest = _read_run(log, manifest_file, metrics)
        flushes += _flush_rows(rows, n, "full")
        if not rows and not manifest and rc != 124:
            tail = " | ".join(log.strip().splitlines()[-3:]) if log.strip() else f"exit status {rc}"
            raise IomodelError(f"Nsight Compute failed on batch {n} ({why or tail}): fix that and rerun")
        batch_results = assemble(batch, manifest, rows)
        if sweep.dram_pass and rc != 124:
            dram_shapes, dram_manifest, dram_log = batch_files(work, n, dram=True)
            ran = pinned_configs(Measurement(kind="ncu", created="", command="", shapes=batch_results))
            dram_batch = [replace(s, config=ran[s.id]) if s.id in ran else s for s in batch]
            dram_shapes.write_text(json.dumps([s.to_dict() for s in dram_batch]))
            child2 = child_command(python, dram_shapes, dram_manifest)
            argv2 = build_command(ncu_path, child2, dram_log, list(DRAM_PASS_METRICS), sweep.cache_control,
                                  sweep.clock_control)
            rc2 = run(argv2, time_left())
            commands.append(shlex.join(argv2))
            dram_rows, manifest2 = _read_run(dram_log.read_text() if dram_log.is_file() else "", dram_manifest,
                                             DRAM_PASS_METRICS)
            flushes += _flush_rows(dram_rows, n, "dram")
            merge_dram_pass(batch_results, assemble(dram_batch, manifest2, dram_rows) if rc2 != 124 else [])
        if rc == 124:
            for r in batch_results:
                if r.error == "the profiled process never reached this shape":
                    r.error = "not run: the time budget was spent"
        results += batch_results
        ok = sum(1 for r in batch_results if r.error is None)
        echo(f"batch {n}: {ok}/{len(batch)} shapes profiled in {time.time() - t0:.0f} s"
             + (" (killed: time budget)" if rc == 124 else ""))
        if save_to is not None:
            measurement().save(save_to)
    meas = measurement()
    if save_to is not None:
        meas.save(save_to)
    return meas


def summary_lines(meas: Measurement) -> list[str]:
    """A short plain-text table of a GPU measurement (one line per shape; bytes in MiB)."""
    mib = 2**20
    out = [f"{'shape':58s} {'kern':>4s} {'DRAM rd MiB':>12s} {'DRAM wr MiB':>12s} {'L2 rd MiB':>11s} {'L2 wr MiB':>10s} {'us':>9s}"]
    for s in meas.shapes:
        if s.error:
            out.append(f"{s.id:58s} error: {s.error[:70]}")
            continue

        def f(q: str, scale: float = mib) -> str:
            v = s.quantity(q)
            return "-" if v is None else f"{v / scale:.1f}"

        out.append(f"{s.id:58s} {len(s.kernels):4d} {f('dram_read_bytes'):>12s} {f('dram_write_bytes'):>12s} "
                   f"{f('l2_read_bytes'):>11s} {f('l2_write_bytes'):>10s} {f('duration_s', 1e-6):>9s}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m iomodel.measure.driver SWEEP.toml OUT.json ...``: profile a sweep on the GPU machine.

    Needs neither typer nor sympy. Saves after every batch, prints :func:`summary_lines`.

    Returns:
        0, or 2 after printing an ``error:`` line (argparse exits 2 itself on bad options).
    """
    parser = argparse.ArgumentParser(
        prog="python -m iomodel.measure.driver",
        description="Profile every shape of a sweep file under Nsight Compute (as `iomodel validate`).")
    parser.add_argument("sweep", help="TOML sweep file (see sweeps/)")
    parser.add_argument("out", help="result JSON, rewritten after every batch")
    parser.add_argument("--batch-size", type=int, help="shapes per ncu process (default: the sweep's)")
    parser.add_argument("--impl", action="append", choices=IMPLS, help="only this implementation (repeatable)")
    parser.add_argument("--ncu", help="path of the ncu executable (default: $NCU, PATH, /usr/local/cuda/bin/ncu)")
    parser.add_argument("--budget-s", type=float, help="wall-clock budget in seconds for all batches")
    parser.add_argument("--pin", help="an earlier result JSON: run the configs it recorded instead of autotuning")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = shlex.join([Path(sys.executable).name, "-m", "iomodel.measure.driver",
                          *(sys.argv[1:] if argv is None else argv)])
    try:
        sweep = load_sweep(args.sweep)
        if args.batch_size is not None:
            sweep.batch_size = args.batch_size
        sweep.select(args.impl)
        pin = load_pin(sweep, args.pin) if args.pin else None
        meas = profile(sweep, ncu=args.ncu, command=command, echo=lambda line: print(line, flush=True),
                       budget_s=args.budget_s, save_to=args.out, pin=pin, pin_source=args.pin or "")
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(meas)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "CONFIG_KEYS",
    "assemble",
    "batch_files",
    "batches",
    "check_pin",
    "child_command",
    "load_pin",
    "main",
    "merge_dram_pass",
    "pinned_configs",
    "profile",
    "summary_lines",
]
