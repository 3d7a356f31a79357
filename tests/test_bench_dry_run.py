"""Dry runs of the GPU-only paths on a CPU, so they cannot rot between GPU sessions.

``benchmarks/gpu_kernel_check.py`` and ``iomodel bench --matrix <kernel-speed grid>``
(:func:`iomodel.bench.speed.run_speed`) run in a subprocess where ``torch.cuda`` is faked
(device ``cuda`` becomes ``cpu``, events read the wall clock), ``do_bench`` is a single
wall-clock call and the kernels run in Triton's interpreter, on tiny shapes. The numbers mean nothing; what is checked is that every
section runs, every configuration of the sweep is launched on its own path without an
error, correctness passes, and the JSON/Markdown outputs are written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.interpreter]

ROOT = Path(__file__).resolve().parent.parent

FAKE_CUDA = r'''
import os, sys, time
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, ROOT); sys.path.insert(0, ROOT + "/benchmarks")
import torch, triton
from torch.overrides import TorchFunctionMode

class CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)

_Gen = torch.Generator
torch.Generator = lambda device=None: _Gen()

class Props:
    major, minor, multi_processor_count, total_memory = 9, 0, 132, 141 * 10**9

class Ev:
    def __init__(self, enable_timing=True): self.t = 0.0
    def record(self): self.t = time.perf_counter()
    def elapsed_time(self, other): return (other.t - self.t) * 1e3

for name, val in dict(is_available=lambda: True, get_device_properties=lambda *a: Props(),
                      get_device_capability=lambda *a: (9, 0), get_device_name=lambda *a: "FAKE H200",
                      synchronize=lambda *a: None, empty_cache=lambda *a: None, _sleep=lambda *a: None,
                      Event=Ev).items():
    setattr(torch.cuda, name, val)

def fake_do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean", **kw):
    t = time.perf_counter(); fn(); ms = (time.perf_counter() - t) * 1e3 + 1e-3
    return [ms] * len(quantiles) if quantiles else ms
triton.testing.do_bench = fake_do_bench

import kernels.flash_attention as fa
import iomodel.bench.timing as tm
fa.INTERPRET = False            # the scripts refuse the interpreter; the kernels still run interpreted
fa._check_device = lambda q: None
fa._emulate_bf16 = lambda q: q.dtype == torch.bfloat16
_tuned = fa._tuned_kernel
def tuned(*a):
    fa.INTERPRET = True         # autotune with the wall-clock stand-in for do_bench
    try: return _tuned(*a)
    finally: fa.INTERPRET = False
fa._tuned_kernel = tuned
_tdi = tm.time_device_interleaved
tm.time_device_interleaved = lambda fns, rounds, reps=50, **kw: _tdi(fns, 1, reps=2, flush_bytes=1024)
_host = tm.host_overhead_s
tm.host_overhead_s = lambda fn, calls=50: _host(fn, 2)
'''

CHECK = FAKE_CUDA + r'''
import gpu_kernel_check as g
g.HEADLINE = [(64, "fp16", False), (64, "bf16", True)]
g.HEADLINE_TOKENS, g.HEADLINE_HEADS, g.HEADLINE_D = 128, 2, 32
g.TMA_SWEEP = [(32, 16, 4, 1, False, "forward"), (64, 32, 4, 2, False, "forward"), (32, 16, 4, 1, False, "reverse")]
g.POINTER_SWEEP = [(32, 16, 4, 1, "forward")]
g.CORRECTNESS_TMA_EXTRA = [(32, 16, 4, 1, "reverse")]
g.INTERLEAVED_ROUNDS = 1
g.DECODE_SHAPES = [(1, 96)]
g.DECODE_SWEEP = g.DECODE_SWEEP[:1]
g.CORRECTNESS = [(1, 4, 2, 40, 50, 128, "fp16", True, "top-left"), (1, 4, 2, 33, 20, 64, "bf16", True, "bottom-right"),
                 (1, 4, 2, 30, 31, 48, "fp32", False, "top-left"), (1, 8, 2, 3, 100, 32, "bf16", True, "bottom-right")]
sys.argv = ["gpu_kernel_check.py"]
with CudaToCpu():
    sys.exit(g.main())
'''

BENCH = FAKE_CUDA + r'''
torch.backends.cudnn.version = lambda: 0
from iomodel.cli import main
with CudaToCpu():
    main(["bench", "--device", "cuda", "--matrix", os.environ["OUT"] + "/tiny.toml", "-o",
          os.environ["OUT"] + "/receipt.json", "--no-progress"])
'''

def _run(script: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=str(out), TRITON_INTERPRET="1")
    code = f"ROOT = {str(ROOT)!r}\n" + script
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=out,
                          timeout=600)


def test_gpu_kernel_check_dry_run(tmp_path):
    res = _run(CHECK, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "================ SUMMARY ================" in res.stdout
    data = json.loads((tmp_path / "kernel_check.json").read_text())
    corr = data["sections"]["correctness"]
    # 2 prefill paths (+ autotuned mode for HEAD_DIM 128, + the other query-tile order when causal,
    # + the forced extra TMA configs at HEAD_DIM 128) for the fp16/bf16 shapes, pointer only for fp32, decode
    assert [(r["path"], r["mode"]) for r in corr] == [
        ("prefill", "default"), ("prefill", "autotuned"), ("prefill", "flip-order"),
        ("prefill-tma", "default"), ("prefill-tma", "autotuned"), ("prefill-tma", "flip-order"),
        ("prefill-tma", "forced 32x16x4x1xreverse"),
        ("prefill", "default"), ("prefill", "flip-order"), ("prefill-tma", "default"), ("prefill-tma", "flip-order"),
        ("prefill", "default"), ("decode-split-kv", "default")]
    assert all(r["status"] == "PASS" for r in corr), [r for r in corr if r["status"] != "PASS"]
    orders = {(r["path"], r["mode"]): (r["config"]["tile_order"], r["config"].get("grid_order", "tiles-fastest"))
              for r in corr if r["shape"][5] == 128}
    # the default tiles of a causal layer launch in the kernel's LPT order (B·H = 4 rows of 50 keys: one group of
    # 4, lpt_launch_order); a given config (flip-order: prefill_default's tiles in the other order) as given
    assert orders[("prefill", "default")] == orders[("prefill-tma", "default")] == ("reverse", "head-grouped:4")
    assert orders[("prefill", "flip-order")] == ("reverse", "tiles-fastest")
    assert orders[("prefill-tma", "flip-order")] == ("forward", "tiles-fastest")
    for rec in data["sections"]["sweep"]:
        # the reverse tile order is swept for causal shapes only
        assert [(c["path"], c["tile_order"]) for c in rec["configs"]] == [
            ("prefill-tma", "forward"), ("prefill-tma", "forward")] + [("prefill-tma", "reverse")] * rec["causal"] + [
            ("prefill", "forward")]
        assert all("tflops" in c and "error" not in c for c in rec["configs"]), rec["configs"]
        assert set(rec["interleaved"]) == {"flash", "autotuned", "auto_forced", "best"}, rec["interleaved"]  # no cuDNN on a CPU
        assert all(x["tflops"] > 0 for x in rec["interleaved"].values())
        assert rec["autotuned"]["config"]["path"] == "prefill"  # CPU tensors: kernel_path picks the pointer path
        assert set(rec["sdpa"]) == {"cudnn", "flash"}
    (dec,) = data["sections"]["decode"]
    assert "error" not in dec and dec["default"]["config"]["path"] == "decode-split-kv"
    assert all("GBps" in v for v in dec["variants"]) and dec["copy"]["GBps"] > 0


def test_bench_kernel_dry_run(tmp_path):
    from test_bench_speed import TINY  # a kernel-speed grid small enough for Triton's interpreter

    (tmp_path / "tiny.toml").write_text(TINY)
    res = _run(BENCH, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    receipt = json.loads((tmp_path / "receipt.json").read_text())
    assert [e["shape"]["causal"] for e in receipt["prefill"]] == [False, True]
    for e in receipt["prefill"]:
        assert e["results"]["tiled"]["status"] == "ran" and e["results"]["tiled"]["tflops"] > 0
        assert e["results"]["sdpa-flash"]["status"] == "ran"
        assert e["results"]["sdpa-cudnn"]["status"].startswith("refused")  # CUDA-only backends refuse on a CPU
    (d,) = receipt["decode"]
    assert d["results"]["tiled"]["config"]["path"] == "decode-split-kv"
    assert d["results"]["tiled"]["fraction_of_copy"] > 0
    assert receipt["acceptance"]["passed"] is False  # no target shape measured
    assert (tmp_path / "receipt.md").read_text().startswith("# Kernel benchmark receipt")
    assert receipt["matrix"]["name"] == "tiny" and receipt["command"].startswith("iomodel bench --device cuda")
    from iomodel.bench.receipt import check_receipt

    assert check_receipt(receipt) == []  # every stored number recomputes from the samples


TRAIN_BENCH = FAKE_CUDA + r'''
torch.Generator = _Gen
import torch.distributed.tensor  # imported lazily under autograd; its annotations need the real Generator class
torch.Generator = lambda device=None: _Gen()
import kernels.backward as bw
bw._check_device = lambda q: None
bw._emulate_bf16 = fa._emulate_bf16
import triton.experimental.gluon  # noqa: F401 - imported lazily by the interpreter, which asserts TRITON_INTERPRET then
os.environ["TRITON_INTERPRET"] = "0"   # the kernels were made interpreted at import; the bench now offers the kernel
Ev.synchronize = lambda self: None
for name in ("reset_peak_memory_stats", "memory_allocated", "max_memory_allocated"):
    setattr(torch.cuda, name, lambda *a: 0)
torch.backends.cudnn.version = lambda: 0
from iomodel.cli import main
with CudaToCpu():
    main(["bench", "--device", "cuda", "--matrix", os.environ["OUT"] + "/train.toml", "-o",
          os.environ["OUT"] + "/receipt.json", "--no-progress", "--reps", "3", "--warmup", "0"])
'''


def test_bench_training_dry_run(tmp_path):
    """``iomodel bench --device cuda`` on a training bucket: the CUDA path (events, the kernel's forward and
    backward, gradient checks, both baselines) is the CPU path's code; only the clock differs."""
    from iomodel.bench.matrix import MATRICES_DIR

    text = (MATRICES_DIR / "cuda-v2.toml").read_text()
    head = text[:text.index("\n[workload]\n") + 1].replace("l2_flush_bytes = 268435456", "l2_flush_bytes = 1024")
    tiny = (MATRICES_DIR / "cpu-v2.toml").read_text()
    (tmp_path / "train.toml").write_text(head + tiny[tiny.index('[[bucket]]\nname = "train-tiny"'):])
    res = _run(TRAIN_BENCH, tmp_path)
    assert res.returncode in (0, 1), res.stdout[-3000:] + res.stderr[-3000:]
    r = json.loads((tmp_path / "receipt.json").read_text())
    # exit 1 only for the speed floor, which timings of Triton's interpreter and of CPU SDPA cannot be held to
    assert all("below the policy's" in v for v in r["verdict"]["violations"]), r["verdict"]
    assert r["device"]["kind"] == "cuda" and r["policy"]["version"] == 3  # the matrix names policy v3 (issue 13)
    (s,) = r["buckets"][0]["shapes"]
    assert s["eager"]["status"] == "ok"
    assert s["results"]["tiled"]["status"] == "ok" and s["results"]["tiled"]["grad_accuracy"]["pass"]
    assert s["results"]["tiled"]["config"]["path"] == "prefill"
    assert s["results"]["tiled"]["speedup_vs_eager"] > 0 and s["results"]["tiled"]["tflops"] > 0
    for n in ("sdpa-efficient", "sdpa-cudnn"):  # CUDA-only backends refuse on a CPU, with their reasons
        assert s["results"][n]["status"] in ("unsupported", "error") and s["results"][n]["reasons"], s["results"][n]
    from iomodel.bench.receipt import check_training
    from iomodel.bench.policy import load_policy

    assert check_training(r, load_policy(3)) == []  # every training number recomputes from the samples
    assert "## Training steps (forward + backward)" in (tmp_path / "receipt.md").read_text()
