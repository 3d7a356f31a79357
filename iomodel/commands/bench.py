"""``iomodel bench``: the one benchmark command; every run writes a receipt (JSON and Markdown).

* A bucket matrix (``--matrix cpu``, ``cuda``, the default of the device; ``cpu-v2``,
  ``cuda-v2`` add training buckets): fused attention backends against the SDPA MATH
  baseline (training buckets also against the eager chain; see :mod:`iomodel.bench.harness`),
  under the policy the matrix names (else the current one); exits 1 when the receipt
  breaks its declared policy (the receipt is still written).
* ``--matrix kernel-speed`` (CUDA GPU): the bundled tiled kernel against every pinned SDPA
  backend, prefill TFLOP/s and decode HBM bandwidth (see :mod:`iomodel.bench.speed`), with
  the acceptance of the kernel-speed targets evaluated, never asserted.

``--check RECEIPT`` re-checks an existing receipt of either kind instead. Bad input exits
2 with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iomodel.errors import IomodelError
from iomodel.commands.options import refuse_flags
from iomodel.paths import shown


#: The most timed samples per backend and shape --reps may ask (the bundled matrices take 7-50).
MAX_REPS = 10_000


def _refuse_inputs(json_out: Path, md_out: Path, matrix: str | None, policy: Path | None) -> None:
    """Refuse a receipt path (JSON or its Markdown) that is the matrix or policy file the run reads (one line, before
    the benchmark runs): writing it would replace the input.

    Raises:
        IomodelError: such a path, naming the option.
    """
    from iomodel.paths import refuse_input_as_output

    inputs = {"the --matrix file": Path(matrix) if matrix and Path(matrix).is_file() else None,
              "the --policy file": policy}
    for flag, path in (("-o", json_out), ("--markdown (or the Markdown beside -o)", md_out)):
        refuse_input_as_output(path, flag, inputs)


def _default_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def bench(
    device: str = typer.Option(None, "--device", help="cpu or cuda (default: cuda when a GPU is visible, else cpu)."),
    matrix: str = typer.Option(None, "--matrix", help="Shape matrix: a TOML path or a bundled name (cpu, cuda, "
                               "kernel-speed). Default: the bundled matrix of the device."),
    policy: Path = typer.Option(None, "--policy", help="Policy TOML (default: the bundled policy the matrix names, "
                                "else the current version; the kernel-speed targets for a kernel-speed matrix)."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Receipt JSON path (default: receipts/bench-<device>.json, "
                                "receipts/<matrix>-cuda.json for a kernel-speed matrix); the Markdown goes beside it "
                                "with suffix .md; missing folders are created."),
    markdown: Optional[str] = typer.Option(None, "--markdown", help="Markdown path (default: the JSON path with suffix .md)."),
    reps: int = typer.Option(None, "--reps", help="Timed samples per backend and shape (default: the matrix's; the "
                             "interleaved rounds of a kernel-speed matrix)."),
    warmup: int = typer.Option(None, "--warmup", help="Untimed calls per backend and shape (default: the matrix's)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    check: Path = typer.Option(None, "--check", help="Check an existing receipt JSON against its policy and exit."),
) -> None:
    """Benchmark attention backends on a shape matrix and write a receipt (bucket or kernel-speed matrix)."""
    from iomodel.bench.environment import check_device
    from iomodel.bench.harness import run_bench
    from iomodel.bench.matrix import DEFAULT_MATRIX, SpeedMatrix, load_matrix
    from iomodel.bench.policy import load_policy
    from iomodel.bench.receipt import check_output_paths, load_receipt, reconciliation, write_receipt

    console = Console()
    if check is not None:
        # --check recomputes a receipt's verdicts from its samples; it runs nothing
        refuse_flags(((flag, value is not None) for flag, value in (
            ("--device", device), ("--matrix", matrix), ("-o", output), ("--markdown", markdown), ("--reps", reps),
            ("--warmup", warmup))), "to a benchmark run, not to --check (which re-checks the receipt's recorded samples)")
        _check(console, load_receipt(check), check, policy)
        return
    device = device or _default_device()
    check_device(device)
    mx = load_matrix(matrix or DEFAULT_MATRIX[device])
    if not isinstance(mx, SpeedMatrix) and mx.device == "cuda" and device == "cpu":
        # its sizes were chosen for a GPU: on the CPU it runs for hours, and its receipt says nothing of a GPU
        raise IomodelError(f"matrix {mx.name!r} was sized for a CUDA GPU (device = \"cuda\") and this run is on the "
                           "CPU: run it on a GPU (--device cuda), or use --matrix "
                           + ("cpu-v2" if str(matrix or "").endswith("-v2") else "cpu"))
    if isinstance(mx, SpeedMatrix):
        _speed(console, mx, device, policy, output, markdown, reps, warmup, progress,
               f"iomodel bench --device {device} --matrix {matrix}", matrix)
        return
    if reps is not None and not 3 <= reps <= MAX_REPS:
        raise IomodelError(f"--reps {reps} is " + ("too few for a median and spread: use 3 or more" if reps < 3 else
                           f"more than {MAX_REPS:,} samples a backend and shape (a run of days): use {MAX_REPS:,} or "
                           "fewer"))
    if warmup is not None and warmup < 0:
        raise IomodelError(f"--warmup {warmup} is negative: use 0 or more")
    pol = load_policy(policy) if policy else (load_policy(mx.policy) if mx.policy else load_policy())
    out = output or Path("receipts") / f"bench-{device}.json"
    _refuse_inputs(*check_output_paths(out, markdown), matrix, policy)  # fail now, not after the whole benchmark
    command = f"iomodel bench --device {device} --matrix {matrix or DEFAULT_MATRIX[device]} -o {out}"
    if policy:
        command += f" --policy {policy}"
    if reps is not None:
        command += f" --reps {reps}"
    if warmup is not None:
        command += f" --warmup {warmup}"
    console.print(f"iomodel bench on [bold]{device}[/]: matrix {mx.name} v{mx.version} "
                  f"({sum(len(b.shapes) for b in mx.buckets)} shapes in {len(mx.buckets)} buckets), policy v{pol.version}",
                  highlight=False)
    if progress:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("starting", total=None)

            def hook(desc: str, done: int, total: int) -> None:
                bar.update(task, description=desc[:70], completed=done, total=total)

            receipt = run_bench(mx, device, pol, reps=reps, warmup=warmup, progress=hook, command=command)
    else:
        receipt = run_bench(mx, device, pol, reps=reps, warmup=warmup, command=command)
    jp, mp = write_receipt(receipt, out, markdown)
    t = Table(title=f"{receipt['device'].get('name', device)}: decision per bucket (policy v{pol.version})")
    for col in ("bucket", "weight", "decision", "speedup (geomean of shapes)", "memory", "min"):
        t.add_column(col)
    for b in receipt["buckets"]:
        d = b["summary"]["decision"]
        t.add_row(b["name"], f"{b['weight']:.0%}", d["backend"] or "keep baseline",
                  f"{d['speedup']:.2f}×" if d["speedup"] else "—",
                  f"{d['memory_ratio']:.2%}" if d.get("memory_ratio") is not None else "—", f"{d['min_speedup']:g}×")
    console.print(t)
    e2e = receipt.get("end_to_end")
    recon = reconciliation(e2e, receipt["buckets"]) if e2e and e2e.get("decision") else None
    if recon:
        wl = e2e["workload"]
        console.print(f"request estimate ({wl['prompt_len']}-token prompt, {wl['output_len']} output tokens, "
                      f"{wl['layers']} layers; kernel speedups read at this request's sizes, not the bucket "
                      f"geomeans above): {recon}", highlight=False, soft_wrap=True)
    console.print(f"wrote {shown(jp)} and {shown(mp)} in {receipt['elapsed_s']:.1f} s", highlight=False, markup=False)
    v = receipt["verdict"]
    if not v["pass"]:
        console.print(f"[bold red]receipt breaks policy v{pol.version}[/] ({len(v['violations'])} violations):")
        for x in v["violations"]:
            console.print(f"  - {x}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(1)
    console.print(f"[bold green]within policy v{pol.version}[/]")


def _check(console: Console, receipt: dict, path: Path, policy: Path | None) -> None:
    """``--check``: recompute a receipt of either kind; exit 1 on a violation."""
    from iomodel.bench.policy import load_policy, load_targets
    from iomodel.bench.receipt import check_receipt
    from iomodel.bench.speed import SPEED_SCHEMA, acceptance

    speed = receipt.get("schema") == SPEED_SCHEMA
    pol = None if not policy else (load_targets(policy) if speed else load_policy(policy))
    violations = check_receipt(receipt, pol)
    if violations:
        console.print(f"[bold red]{escape(shown(path))}: FAIL[/] ({len(violations)} violations)", soft_wrap=True)
        for v in violations:
            console.print(f"  - {v}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(1)
    if not speed:
        console.print(f"[bold green]{escape(shown(path))}: PASS[/] under policy v{receipt['policy']['version']}",
                      soft_wrap=True)
        return
    acc = acceptance(receipt, pol)
    console.print(f"[bold green]{escape(shown(path))}: PASS[/]: every number recomputes from its samples; "
                  f"{_acceptance_line(acc)}", highlight=False, soft_wrap=True)


def _acceptance_line(acc: dict) -> str:
    """The kernel-speed acceptance in one line: targets met per part, and the verdict (never asserted)."""
    p, d = acc["prefill"], acc["decode"]
    return (f"kernel-speed targets v{acc['version']}: prefill {sum(r['pass_cudnn'] for r in p)}/{len(p)} vs CUDNN, "
            f"{sum(r['pass_flash'] for r in p)}/{len(p)} vs FLASH; decode {sum(r['pass'] for r in d)}/{len(d)} "
            f"of copy: {'PASSED' if acc['passed'] else 'NOT PASSED'}")


def _speed(console: Console, mx, device: str, policy: Path | None, output: str | None, markdown: str | None,
           reps: int | None, warmup: int | None, progress: bool, command: str, matrix: str | None = None) -> None:
    """Run a kernel-speed matrix (CUDA GPU), write its receipt and print it (``matrix``: the --matrix given, a file
    the receipt must not replace)."""
    from iomodel.bench.policy import load_targets
    from iomodel.bench.receipt import check_output_paths, render_markdown, write_receipt
    from iomodel.bench.speed import run_speed

    if device != "cuda":
        raise IomodelError(f"matrix {mx.name} times the compiled kernel on a CUDA GPU: run it with --device cuda on "
                           "a machine with one")
    if warmup is not None:
        raise IomodelError(f"--warmup does not apply to matrix {mx.name}: its do_bench warm-up (ms) is in the "
                           "matrix's [timing]")
    if reps is not None and not 1 <= reps <= MAX_REPS:
        raise IomodelError(f"--reps {reps} is out of range: use 1 to {MAX_REPS:,} interleaved rounds")
    targets = load_targets(policy) if policy else load_targets()
    out = output or Path("receipts") / f"{mx.name}-{device}.json"
    _refuse_inputs(*check_output_paths(out, markdown), matrix, policy)  # fail now, not after the whole benchmark
    command += f" -o {out}" + (f" --policy {policy}" if policy else "") + (f" --reps {reps}" if reps else "")
    mx = mx.with_(rounds=reps) if reps else mx
    console.print(f"iomodel bench on [bold]cuda[/]: matrix {mx.name} v{mx.version} ({len(mx.prefill)} prefill, "
                  f"{len(mx.decode)} decode shapes), kernel-speed targets v{targets.version}", highlight=False)
    receipt = run_speed(mx, targets, command=command,
                        echo=(lambda line: console.print(line, highlight=False, markup=False)) if progress else None)
    jp, mp = write_receipt(receipt, out, markdown)
    console.print(render_markdown(receipt), highlight=False, markup=False)
    console.print(f"{_acceptance_line(receipt['acceptance'])} (targets are evaluated, never asserted)", highlight=False)
    console.print(f"wrote {shown(jp)} and {shown(mp)} in {receipt['elapsed_s']:.1f} s", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
