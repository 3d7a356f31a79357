"""Probe (issue 12, item 3, the capacity edge): what if lines used by one SM occupy less of L2?

The L2 model lets a line read by every SM count 1 (it is held in both L2 partitions) and a
written line ``l2_fraction`` = 0.5 (its home partition only). A Q tile is read by one program,
i.e. one SM: physically it too may be held once. The microbenchmarks
(``receipts/l2-micro-h200-2026-12-01.json``, docs/l2-calibration.md "Microbenchmarks") lose half
of a set at 31.1 MiB shared, 46.7 MiB private-read and 36.3 MiB private-write, i.e. private
reads weigh about 31.1/46.7 = 0.67 and writes 31.1/36.3 = 0.86 of a shared line.

This script re-runs ``iomodel reconcile`` on receipts with the forward kernel's Q reads weighted
``--q-share`` and its writes ``--write-share`` (default: the model's 1 and 0.5), through the
simulation (the fast evaluation is switched off, so it is slow: all receipts take minutes), and
prints each receipt's HBM agreement table rows. It changes nothing in the library; the result
of 2026-12-02 is in docs/l2-calibration.md, "Capacity edge: private-line occupancy (probe)".

Run: ``python benchmarks/l2_occupancy_probe.py --q-share 0.5 receipts/ncu-h200-edge-probe1-*.json`` (``--l2-ways A`` tries
another associativity, as ``iomodel reconcile --l2-ways``).
"""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

import iomodel.cache.predict as predict
import iomodel.cache.simulate as simulate_mod
from iomodel.cache.set_assoc import SetAssoc
from iomodel.schedule.grid import ReadGroup

ROOT = Path(__file__).resolve().parents[1]


def _weighted_simulation(q_share: float, write_share: float | None, write_fraction: float | None = None):
    """A drop-in for :func:`iomodel.cache.simulate.simulate` that weighs the forward's Q reads
    ``q_share`` (and its writes ``write_share`` when given); other kernels as the library does."""
    original = simulate_mod.simulate

    def read_weighted(cache: SetAssoc, key, tensor: str, nbytes: int, weight: float) -> float:
        item, p = cache._touch(key, tensor, weight)
        miss = min(item[0], nbytes) * p + max(0, nbytes - item[0])
        item[0] = max(item[0], nbytes)
        item[1] = weight
        cache._push(item)
        return miss

    def simulate(name, waves, capacity, share=1.0, ways=None, read_capacity=None):
        if ways is None or name != "fwd kernel":
            return original(name, waves, capacity, share, ways, read_capacity)
        if write_fraction is not None:  # the written lines' capacity: capacity is l2_fraction (0.5) of the L2
            capacity = int(capacity / 0.5 * write_fraction)
        cache = SetAssoc(capacity, share if write_share is None else write_share, ways, read_capacity)
        reads: dict[str, float] = {}
        out = simulate_mod.KernelL2(name)
        for wave in waves:
            out.waves += 1
            for a in wave:
                if a.__class__ is ReadGroup:
                    if a.tensors == ("Q",):
                        reads["Q"] = reads.get("Q", 0.0) + read_weighted(cache, a.keys[0], "Q", a.nbytes[0], q_share)
                    else:
                        for t, m in zip(a.tensors, cache.read_group(a.keys, a.nbytes)):
                            reads[t] = reads.get(t, 0.0) + m
                    continue
                tensor, key, nbytes, is_write, whole = a
                if is_write:
                    cache.write(key, tensor, nbytes)
                elif tensor == "Q":
                    reads["Q"] = reads.get("Q", 0.0) + read_weighted(cache, key, "Q", nbytes, q_share)
                else:
                    reads[tensor] = reads.get(tensor, 0.0) + cache.read(key, tensor, nbytes, whole)
        return simulate_mod._close(cache, out, reads)

    return simulate


def main() -> None:
    from iomodel.cache.params import MAX_L2_WAYS
    from iomodel.paths import one_line_parser

    ap = one_line_parser(__doc__.split("\n\n")[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("receipts", nargs="+", type=Path, help="ncu receipts (JSON) to reconcile")
    ap.add_argument("--q-share", type=float, default=1.0, help="L2 weight of a Q byte (the model: 1)")
    ap.add_argument("--write-share", type=float, default=None, help="L2 weight of a written byte (the model: 0.5)")
    ap.add_argument("--write-fraction", type=float, default=None,
                    help="fraction of the L2 a dirty line's write-back is judged against (the model: l2_fraction, 0.5)")
    ap.add_argument("--l2-ways", type=int, default=None, help="associativity to try (reconcile --l2-ways; the model: 24)")
    args = ap.parse_args()
    if not 0 < args.q_share <= 1 or (args.write_share is not None and not 0 < args.write_share <= 1):
        print("error: --q-share and --write-share must be in (0, 1]", file=sys.stderr)
        sys.exit(2)
    if args.l2_ways is not None and not 0 <= args.l2_ways <= MAX_L2_WAYS:
        print(f"error: --l2-ways must be 0 (fully associative) or a number of ways up to {MAX_L2_WAYS}, got "
              f"{args.l2_ways}", file=sys.stderr)
        sys.exit(2)
    missing = [str(p) for p in args.receipts if not p.is_file()]
    if missing:
        print(f"error: no such receipt: {', '.join(missing)}: pass ncu receipt JSON files", file=sys.stderr)
        sys.exit(2)
    predict._fast_pays = lambda *a, **k: False  # the simulation, which the weights change
    predict.simulate = simulate_mod.simulate = _weighted_simulation(args.q_share, args.write_share, args.write_fraction)
    from iomodel.cli import app

    print(f"Q share {args.q_share}, write share {args.write_share or 'the model (l2_fraction)'}, write fraction "
          f"{args.write_fraction or 'the model (l2_fraction)'}")
    for path in args.receipts:
        buf = io.StringIO()
        with redirect_stdout(buf):
            try:
                app(["reconcile", str(path)] + ([] if args.l2_ways is None else ["--l2-ways", str(args.l2_ways)]),
                    standalone_mode=False)
            except SystemExit:
                pass
        rows = [" ".join(line.split()) for line in buf.getvalue().splitlines()
                if line.startswith("│ ") and "│ HBM" in line and ("±" in line)]
        print(path.name)
        for row in rows:
            print("   ", row)


if __name__ == "__main__":
    main()
