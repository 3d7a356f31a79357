"""Probe (issue 12, items 2 and 3, the capacity edge): the forward's L2 constants, varied on committed receipts.

The L2 model predicts every forward launch with its device's own constants (``iomodel.cache.params.FORWARD_L2``, since
2026-12-06: the ways, the weight of a Q byte, read by one program, the weight of a written byte and the fraction of the
L2 a dirty line's write-back is judged against, fitted on the forward-pattern microbenchmark,
``benchmarks/l2_split_microbench.py --fit``). This script re-runs ``iomodel reconcile`` on receipts with any of them
replaced (``--q-share``, ``--write-share``, ``--write-fraction``, ``--l2-ways``; each left out keeps the library's) for
the forward launches only (the backward kernels keep theirs), and prints each receipt's HBM agreement table rows. It
changes nothing in the library. Its results: docs/l2-calibration.md, "Capacity edge: private-line occupancy (probe)"
(2026-12-02, when every kernel had 24 ways, Q 1 and written bytes 0.5 at 0.5), "The H100's own read capacity" and "The
forward's constants from its own microbenchmark" (2026-12-06).

Run: ``python benchmarks/l2_occupancy_probe.py --q-share 0.5 --l2-ways 96 receipts/ncu-h200-edge-probe1-*.json``.
Non-dyadic weights (e.g. 0.6) are simulated access by access (slower); dyadic ones take the fast evaluation, the same
bytes.
"""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def forward_override(q_share: float | None = None, write_share: float | None = None,
                     write_fraction: float | None = None, ways: int | None = None):
    """A replacement of :meth:`iomodel.cache.params.L2Params.for_forward` that gives the forward launches the library's
    constants with those passed here (not None) in their place: ``q_share`` (a Q byte's weight), ``write_share`` (a
    written byte's, ``stored_share``), ``write_fraction`` (``l2_fraction``: the write-back capacity over the L2) and
    ``ways``. Raises nothing itself; a value out of range fails in :class:`~iomodel.cache.params.L2Params`."""
    from iomodel.cache.params import L2Params

    library = L2Params.for_forward
    given = {k: v for k, v in (("q_share", q_share), ("stored_share", write_share), ("l2_fraction", write_fraction),
                               ("ways", ways)) if v is not None}

    def for_forward(self: L2Params) -> L2Params:
        p = library(self)
        return replace(p, **given) if given and p.forward_source else p

    return for_forward


def main() -> None:
    from iomodel.cache.params import MAX_L2_WAYS, L2Params
    from iomodel.paths import one_line_parser

    ap = one_line_parser(__doc__.split("\n\n")[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("receipts", nargs="+", type=Path, help="ncu receipts (JSON) to reconcile")
    ap.add_argument("--q-share", type=float, default=None, help="L2 weight of a forward's Q byte (default: FORWARD_L2's)")
    ap.add_argument("--write-share", type=float, default=None,
                    help="L2 weight of a forward's written byte (default: FORWARD_L2's)")
    ap.add_argument("--write-fraction", type=float, default=None,
                    help="fraction of the L2 a forward's dirty line's write-back is judged against (default: FORWARD_L2's)")
    ap.add_argument("--l2-ways", type=int, default=None, help="the forward's associativity (default: FORWARD_L2's)")
    args = ap.parse_args()
    if any(x is not None and not 0 < x <= 1 for x in (args.q_share, args.write_share, args.write_fraction)):
        print("error: --q-share, --write-share and --write-fraction must be in (0, 1]", file=sys.stderr)
        sys.exit(2)
    if args.l2_ways is not None and not 1 <= args.l2_ways <= MAX_L2_WAYS:
        print(f"error: --l2-ways must be a number of ways from 1 to {MAX_L2_WAYS}, got {args.l2_ways}", file=sys.stderr)
        sys.exit(2)
    missing = [str(p) for p in args.receipts if not p.is_file()]
    if missing:
        print(f"error: no such receipt: {', '.join(missing)}: pass ncu receipt JSON files", file=sys.stderr)
        sys.exit(2)
    L2Params.for_forward = forward_override(args.q_share, args.write_share, args.write_fraction, args.l2_ways)
    from iomodel.cli import app

    def shown(x):
        return "FORWARD_L2's" if x is None else x

    print(f"the forward's Q share {shown(args.q_share)}, write share {shown(args.write_share)}, write fraction "
          f"{shown(args.write_fraction)}, ways {shown(args.l2_ways)}")
    for path in args.receipts:
        buf = io.StringIO()
        with redirect_stdout(buf):
            try:
                app(["reconcile", str(path)], standalone_mode=False)
            except SystemExit:
                pass
        rows = [" ".join(line.split()) for line in buf.getvalue().splitlines()
                if line.startswith("│ ") and "│ HBM" in line and ("±" in line)]
        print(path.name)
        for row in rows:
            print("   ", row)


if __name__ == "__main__":
    main()
