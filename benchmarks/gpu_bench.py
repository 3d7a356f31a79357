"""H200 run of ``iomodel bench``: one command, two files, the decision table last.

Usage (on the GPU machine, from the repository root)::

    python benchmarks/gpu_bench.py            # writes $OUT/bench-h200.json and $OUT/bench-h200.md

It is ``iomodel bench --device cuda --matrix cuda -o $OUT/bench-h200.json --no-progress``;
further arguments go to ``iomodel bench``. The receipt lists every bucket's backends, the
SDPA backend that actually ran, the refusal reasons, speed and peak allocated memory
against SDPA MATH, and the drift against float64 under the bundled policy. Commit both
files under ``receipts/``; the receipt test (``tests/test_bench_receipts.py``) then checks
them. Exit status 1 if the receipt breaks the policy (the files are still written).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from iomodel.cli import main  # noqa: E402

if __name__ == "__main__":
    out = Path(os.environ.get("OUT", "receipts")) / "bench-h200.json"
    main(["bench", "--device", "cuda", "--matrix", "cuda", "-o", str(out), "--no-progress", *sys.argv[1:]])
