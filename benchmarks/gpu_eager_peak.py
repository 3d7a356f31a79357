"""GPU check (issue 11, item 4): the eager chain's peak memory over one forward + backward step, measured
against the model's allocated bytes.

Written when ``iomodel.traffic.baseline.baseline_model`` counted three score-sized tensors live at the backward's
peak (P saved, dP and dS during ``softmax_backward``, and dQ, dK, dV). On CUDA, ``softmax_backward_cuda_out``
first writes T = dP * P in its own kernel (the model's HBM rows list it), so P, dP, T and dS may all be live at
once: four. The CPU fuses that product, so only a GPU can tell. Its first receipt
(receipts/eager-peak-h200-2026-12-05.json) measured four and no dQ, dK yet; its ``model_extra_peak_bytes`` are
the three-tensor model's, and the model now follows the measurement (``tests/test_traffic.py`` compares the
current one with it). Per shape this prints the measured extra peak (bytes
above the inputs Q, K, V and dO, after a warm-up step so that cuBLAS's workspace is already allocated), the
model's (allocated bytes less Q, K, V, dO) and their difference in score tensors.

    python3 benchmarks/gpu_eager_peak.py --out $OUT/eager-peak-h200-<date>.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_backward_tune import extra_peak_bytes  # noqa: E402  (peak above the allocation before a call, after a warm-up)
from iomodel import LayerSpec, Tiling, get_hardware  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start  # noqa: E402
from iomodel.traffic import predict  # noqa: E402
from kernels.baseline import eager_attention  # noqa: E402

#: (B, H, H_kv, N, d, dtype, causal)
SHAPES = [
    (2, 16, 16, 2048, 64, "fp16", False),
    (2, 16, 16, 2048, 64, "fp16", True),
    (1, 32, 8, 2048, 128, "bf16", True),
    (4, 8, 8, 1024, 128, "bf16", False),
]
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON receipt path")
    args = ap.parse_args()
    if (rc := benchmark_start(args.out)) is not None:  # a GPU, and a writable --out, before any work
        return rc
    hw = get_hardware("H200")
    rows = []
    for B, H, Hkv, N, d, dt, causal in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, H, N, d, device="cuda", dtype=TORCH[dt], generator=g).requires_grad_()
        k = torch.randn(B, Hkv, N, d, device="cuda", dtype=TORCH[dt], generator=g).requires_grad_()
        v = torch.randn(B, Hkv, N, d, device="cuda", dtype=TORCH[dt], generator=g).requires_grad_()
        do = torch.randn(B, H, N, d, device="cuda", dtype=TORCH[dt], generator=g)

        def step():
            o = eager_attention(q, k, v, causal)
            return torch.autograd.grad(o, (q, k, v), do)

        row = {}
        peak = extra_peak_bytes({"eager": step}, row)["eager"]  # the first call warms cuBLAS's workspace up
        spec = LayerSpec(B, H, Hkv, d, N, N, dtype=dt, causal=causal, backward=True)
        base = predict(spec, Tiling(64, 64), hw).algorithms["baseline"]
        inputs = {"Q", "K", "V", "dO"}
        alloc = {a.tensor: int(a.bytes) for a in base.allocations}
        model = sum(b for t, b in alloc.items() if t not in inputs)
        score = B * H * N * N * q.element_size()
        row.update({"B": B, "H": H, "H_kv": Hkv, "N": N, "d": d, "dtype": dt, "causal": causal,
                    "measured_extra_peak_bytes": int(peak), "model_extra_peak_bytes": model,
                    "difference_in_score_tensors": (peak - model) / score, "score_tensor_bytes": score,
                    "model_allocations": alloc})
        rows.append(row)
        print(json.dumps({k_: row[k_] for k_ in ("B", "H", "H_kv", "N", "d", "dtype", "causal",
                                                  "measured_extra_peak_bytes", "model_extra_peak_bytes",
                                                  "difference_in_score_tensors")}), flush=True)
        del q, k, v, do
    rec = {"command": f"python3 benchmarks/gpu_eager_peak.py --out {args.out}", "device": torch.cuda.get_device_name(),
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "rows": rows}
    return benchmark_finish(args.out, rec)


if __name__ == "__main__":
    raise SystemExit(main())
