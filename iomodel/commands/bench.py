"""``iomodel bench``: fused attention backends against the SDPA MATH baseline, with a receipt.

Runs every shape of a versioned shape matrix on every backend available on the device
(see :mod:`iomodel.bench`), writes the receipt as JSON and Markdown, and exits 1 when the
receipt breaks its declared policy (the receipt is still written), 2 on bad input.
``--check RECEIPT`` re-checks an existing receipt against the bundled policy instead.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iomodel.errors import IomodelError


def _default_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def bench(
    device: str = typer.Option(None, "--device", help="cpu or cuda (default: cuda when a GPU is visible, else cpu)."),
    matrix: str = typer.Option(None, "--matrix", help="Shape matrix: a TOML path or a bundled name (cpu, cuda). "
                               "Default: the bundled matrix of the device."),
    policy: Path = typer.Option(None, "--policy", help="Policy TOML (default: the bundled policy, current version)."),
    output: Path = typer.Option(None, "-o", "--output", help="Receipt JSON path (default: receipts/bench-<device>.json); "
                                "the Markdown goes beside it with suffix .md."),
    markdown: Path = typer.Option(None, "--markdown", help="Markdown path (default: the JSON path with suffix .md)."),
    reps: int = typer.Option(None, "--reps", help="Timed samples per backend and shape (default: the matrix's)."),
    warmup: int = typer.Option(None, "--warmup", help="Untimed calls per backend and shape (default: the matrix's)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    check: Path = typer.Option(None, "--check", help="Check an existing receipt JSON against its policy and exit."),
) -> None:
    """Benchmark fused attention backends against SDPA MATH on a shape matrix and write a receipt."""
    from iomodel.bench.harness import check_device, run_bench
    from iomodel.bench.matrix import DEFAULT_MATRIX, load_matrix
    from iomodel.bench.policy import load_policy
    from iomodel.bench.receipt import check_output_paths, check_receipt, load_receipt, reconciliation, write_receipt

    console = Console()
    if check is not None:
        receipt = load_receipt(check)
        pol = load_policy(policy) if policy else None
        violations = check_receipt(receipt, pol)
        if violations:
            console.print(f"[bold red]{check}: FAIL[/] ({len(violations)} violations)")
            for v in violations:
                console.print(f"  - {v}", highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        console.print(f"[bold green]{check}: PASS[/] under policy v{receipt['policy']['version']}")
        return
    device = device or _default_device()
    check_device(device)
    if reps is not None and reps < 3:
        raise IomodelError(f"--reps {reps} is too few for a median and spread: use 3 or more")
    if warmup is not None and warmup < 0:
        raise IomodelError(f"--warmup {warmup} is negative: use 0 or more")
    mx = load_matrix(matrix or DEFAULT_MATRIX[device])
    pol = load_policy(policy) if policy else load_policy()
    out = output or Path("receipts") / f"bench-{device}.json"
    check_output_paths(out, markdown)  # fail now, not after the whole benchmark has run
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
    console.print(f"wrote {jp} and {mp} in {receipt['elapsed_s']:.1f} s", highlight=False)
    v = receipt["verdict"]
    if not v["pass"]:
        console.print(f"[bold red]receipt breaks policy v{pol.version}[/] ({len(v['violations'])} violations):")
        for x in v["violations"]:
            console.print(f"  - {x}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"[bold green]within policy v{pol.version}[/]")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
