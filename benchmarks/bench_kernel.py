#!/usr/bin/env python
"""The bundled tiled kernel against PyTorch SDPA (every backend pinned): ``iomodel bench --matrix kernel-speed``.

The shapes, backends and timing budgets are data: ``iomodel/bench/matrices/kernel-speed-v1.toml``
(the targets: ``iomodel/bench/policies/kernel-speed-v1.toml``); see :mod:`iomodel.bench.speed`
for what is measured and how. Every argument goes to ``iomodel bench``.

Usage (on a CUDA GPU, from the repository root)::

    python benchmarks/bench_kernel.py -o receipts/bench_kernel_h200.json
    python benchmarks/bench_kernel.py --matrix my-quick-grid.toml -o /tmp/quick.json  # a smaller grid, same schema
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from iomodel.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    main(["bench", "--device", "cuda", *([] if "--matrix" in args else ["--matrix", "kernel-speed"]), *args])
