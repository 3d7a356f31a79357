"""H200 run of ``iomodel bench``: one command, two files, a summary table last.

Usage (on the GPU machine, from the repository root)::

    python benchmarks/gpu_bench.py            # writes $OUT/bench-h200.json and $OUT/bench-h200.md

It is ``iomodel bench --device cuda --matrix cuda -o $OUT/bench-h200.json`` through the
library API, so it needs torch (and triton for the project's kernel) but neither typer nor
rich. The receipt lists every bucket's backends, the SDPA backend that actually ran, the
refusal reasons, speed and peak allocated memory against SDPA MATH, and the drift against
float64 under the bundled policy. Commit both files under ``receipts/``; the receipt test
(``tests/test_bench_receipts.py``) then checks them. Exit status 1 if the receipt breaks the
policy (the files are still written).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iomodel.bench.harness import run_bench  # noqa: E402
from iomodel.bench.matrix import load_matrix  # noqa: E402
from iomodel.bench.policy import load_policy  # noqa: E402
from iomodel.bench.receipt import write_receipt  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402


def _pct(x: float) -> str:
    return f"{x * 100:.2g}%" if x < 0.1 else f"{x:.0%}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="H200 run of iomodel bench (defaults are the H200 run).")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only to try this script out")
    ap.add_argument("--matrix", default="cuda", help="bundled matrix name or TOML path (default: cuda)")
    ap.add_argument("--name", default="bench-h200", help="receipt file stem (default: bench-h200)")
    args = ap.parse_args(argv)
    out = Path(os.environ.get("OUT", "receipts"))
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{args.name}.json"
    t0 = time.perf_counter()
    last = [0.0]

    def progress(desc: str, done: int, total: int) -> None:
        now = time.perf_counter() - t0
        if now - last[0] > 5 or done == total:
            print(f"[{now:6.1f} s] {done}/{total} {desc}", flush=True)
            last[0] = now

    try:
        receipt = run_bench(load_matrix(args.matrix), args.device, load_policy(), progress=progress,
                            command=f"python benchmarks/gpu_bench.py  (= iomodel bench --device {args.device} "
                                    f"--matrix {args.matrix} -o $OUT/{args.name}.json)")
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    jp, mp = write_receipt(receipt, json_path)
    dev = receipt["device"]
    print(f"\nwrote {jp} and {mp} in {receipt['elapsed_s']:.0f} s on {dev.get('name')} "
          f"(torch {dev['torch']}, triton {dev.get('triton')}, cuDNN {dev.get('cudnn')})")
    for name, be in receipt["backends"].items():
        if not be["available"]:
            print(f"  {name}: {be['reason']}")
    verdict = receipt["verdict"]
    for v in verdict["violations"]:
        print(f"  violation: {v}")
    e2e = receipt.get("end_to_end") or {}
    if e2e.get("reconciliation"):
        print(f"  request estimate: {e2e['reconciliation']}")
    print()
    backends = [n for n in receipt["backends"] if n != "sdpa-math"]
    head = f"{'bucket':28s} {'weight':>6s} " + " ".join(f"{n:>16s}" for n in backends) + f" {'decision':>16s} {'min':>5s}"
    print(head)
    print("-" * len(head))
    for b in receipt["buckets"]:
        cells = []
        for n in backends:
            v = b["summary"]["backends"].get(n)
            if v is None:
                cells.append(f"{'n/a':>16s}")
            elif v["ok"] == 0:
                what = f"refused {v['unsupported']}" if v["unsupported"] else f"error {v['error']}"
                cells.append(f"{what + '/' + str(len(b['shapes'])):>16s}")
            else:
                sp, mem = v["speedup_geomean"], v["memory_ratio_geomean"]
                mark = "" if v["drift_pass"] else "!"
                cells.append(f"{(f'{sp:.2f}x' if sp else '-') + (f' {_pct(mem)}' if mem is not None else '') + mark:>16s}")
        d = b["summary"]["decision"]
        print(f"{b['name']:28s} {b['weight']:6.0%} " + " ".join(cells) + f" {d['backend'] or 'baseline':>16s} {d['min_speedup']:5.2g}")
    print(f"\nspeedup x, peak memory as % of SDPA MATH (geomean per bucket; ! = drift above policy); "
          f"verdict: {'PASS' if verdict['pass'] else 'FAIL'} under policy v{verdict['policy_version']}")
    return 0 if verdict["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
