"""Start-up latency of the ``iomodel`` CLI, as a ratio to a bare ``python -c pass``.

Each command runs in a fresh subprocess (the interpreter start, the imports and the work
all count), ``--repeats`` times, interleaved so that a burst of load on the machine hits
every command alike; the median wall time of each is printed in seconds and as a ratio to
the median of ``python -c pass``, with the median CPU seconds (user + system; less
sensitive than wall time to other work on a shared machine). The issue's targets (issue 9): ``iomodel --help`` and
``iomodel presets`` import no sympy, matplotlib or torch; ``iomodel worksheet`` on the
default layer takes under 1 s on a quiet 2-core CPU.

    python benchmarks/cli_latency.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

#: (label, argv) of each timed command; the first is the baseline of the ratios.
COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("iomodel --help", [sys.executable, "-m", "iomodel.cli", "--help"]),
    ("iomodel presets", [sys.executable, "-m", "iomodel.cli", "presets"]),
    ("iomodel worksheet", [sys.executable, "-m", "iomodel.cli", "worksheet"]),
)


def time_once(argv: list[str]) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of one run of ``argv`` (output discarded); cpu is the child's user + system time.

    Raises:
        subprocess.CalledProcessError: the command exits non-zero.
    """
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    wall = time.perf_counter() - t0
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def measure(repeats: int) -> dict[str, tuple[float, float]]:
    """Median ``(wall, cpu)`` seconds of each of :data:`COMMANDS` over ``repeats`` interleaved runs.

    Each command runs once untimed first, to warm the file cache and the bytecode caches.
    """
    for _, argv in COMMANDS:
        time_once(argv)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in COMMANDS}
    for _ in range(repeats):
        for label, argv in COMMANDS:
            times[label].append(time_once(argv))
    return {label: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
            for label, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7, help="timed runs of each command (default 7)")
    args = ap.parse_args(argv)
    medians = measure(args.repeats)
    base = medians[COMMANDS[0][0]][0]
    print(f"{'command':<20} {'wall (median)':>14} {'x python -c pass':>17} {'CPU (median)':>13}")
    for label, (wall, cpu) in medians.items():
        print(f"{label:<20} {wall:>13.3f}s {wall / base:>16.1f}x {cpu:>12.3f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
