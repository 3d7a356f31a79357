"""What a page fault costs this machine, and how many the kept heap saves (``iomodel.cache.heap``).

Run: ``python benchmarks/heap_probe.py [--rounds 5]``. Each round runs :func:`iomodel.cache.heap.probe_temporaries`
twice (20 pairs of 1 MiB numpy temporaries in a fresh interpreter), once with glibc's defaults and once after
:func:`iomodel.cache.heap.keep_freed_memory`, and prints each one's wall time (µs per pair), its minor page faults
(``getrusage``) and the cost of a fault: (time default − time kept) / (faults default − faults kept), in µs.
Wall-clock times: other load on the machine adds to them. On a machine without glibc it says so and exits 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iomodel.cache.heap import probe_temporaries  # noqa: E402
from iomodel.paths import exit_code_of, one_line_parser  # noqa: E402


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
        got: list = []
        if exit_code_of(lambda: got.extend((probe_temporaries(False), probe_temporaries(True)))):
            raise SystemExit(2)
        (_, td, fd), (_, tk, fk) = got
        per = (td - tk) * 20 / (fd - fk) if fd != fk else float("nan")
        print(f"{r:>5} {td:>16.1f} {fd:>7} {tk:>13.1f} {fk:>7} {per:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
