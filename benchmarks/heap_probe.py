"""What a page fault costs this machine, and how many the kept heap saves (``iomodel.cache.heap``).

Run: ``python benchmarks/heap_probe.py [--rounds 5]``. Each round runs, in two fresh interpreters (the setting is
process-wide and cannot be undone), 20 pairs of 1 MiB numpy temporaries (``np.minimum(128, 2**24 - i * 128)`` over
131,072 int64: one int64 per 128-row tile of a 2^24-token sequence), once with glibc's defaults and once after
:func:`iomodel.cache.heap.keep_freed_memory`, and prints each one's wall time (µs per pair), its minor page faults
(``getrusage``) and the cost of a fault: (time default − time kept) / (faults default − faults kept), in µs.
Wall-clock times: other load on the machine adds to them. On a machine without glibc it says so and exits 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iomodel.paths import one_line_parser  # noqa: E402

_PROBE = """
import resource, sys, time
import numpy as np
if sys.argv[1] == "kept":
    from iomodel.cache.heap import keep_freed_memory
    assert keep_freed_memory()
i = np.arange(131072, dtype=np.int64)
np.minimum(128, 2**24 - i * 128)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.perf_counter()
for _ in range(20):
    np.minimum(128, 2**24 - i * 128)
t = time.perf_counter() - t0
print(t * 1e6 / 20, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _run(mode: str) -> tuple[float, int]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode:
        raise SystemExit(f"error: the probe failed: {proc.stderr.strip().splitlines()[-1]}")
    us, faults = proc.stdout.split()
    return float(us), int(faults)


def main() -> None:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each a default and a kept interpreter (1-100)")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 100:
        ap.error(f"--rounds must be from 1 to 100, got {args.rounds}")
    import platform

    if platform.libc_ver()[0] != "glibc" or not sys.platform.startswith("linux"):
        print("error: glibc on Linux needed (mallopt): this machine has none", file=sys.stderr)
        raise SystemExit(2)
    print(f"{'round':>5} {'default us/pair':>16} {'faults':>7} {'kept us/pair':>13} {'faults':>7} {'us per fault':>13}")
    for r in range(1, args.rounds + 1):
        (td, fd), (tk, fk) = _run("default"), _run("kept")
        per = (td - tk) * 20 / (fd - fk) if fd != fk else float("nan")
        print(f"{r:>5} {td:>16.1f} {fd:>7} {tk:>13.1f} {fk:>7} {per:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
