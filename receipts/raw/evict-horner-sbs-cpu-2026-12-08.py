"""Side by side in one run: the L2-aware estimate's wall time (ms, median of 3, old and new interleaved) with
evict_probabilities summed in log space (the tree of 5815066) and by Horner's rule (032649b), Llama-3-8B-like layers
(32 heads, 32 or 8 KV heads, HEAD_DIM 128, bf16, H200, causal), forward and training step.
Run from the repository root: python receipts/raw/evict-horner-sbs-cpu-2026-12-08.py (2-core CPU, 2026-12-08;
a reviewer helper read diffs beside it). Output: receipts/raw/evict-horner-sbs-cpu-2026-12-08.txt."""
import importlib.util, subprocess, sys, tempfile, time
from iomodel.cache.heap import keep_freed_memory
keep_freed_memory()
import numpy as np
import iomodel.cache.set_assoc as A, iomodel.cache.dkdv_closed as D
src = subprocess.run(["git", "show", "5815066:iomodel/cache/set_assoc.py"], capture_output=True, text=True, check=True).stdout
with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
    fh.write(src)
spec_ = importlib.util.spec_from_file_location("old_set_assoc", fh.name)
old_mod = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(old_mod)
new = A.evict_probabilities; old = old_mod.evict_probabilities
def use(f): A.evict_probabilities = f; D.evict_probabilities = f
from iomodel.cache.estimate import estimate_training_step, estimate_tiled
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware
from kernels.heuristics import layer_backward_config
hw = get_hardware("H200")
def run(n, kv, bwd=True):
    spec = LayerSpec(1, 32, kv, 128, n, n, dtype="bf16", causal=True, backward=bwd)
    if bwd:
        return estimate_training_step(spec, Tiling(), hw, flops=1, peak_flops=1.0, num_warps=4, tile_order="forward", backward=layer_backward_config(spec, hw), config_source="b")
    return estimate_tiled(spec, Tiling(), hw, flops=1, peak_flops=1.0, num_warps=4, tile_order="forward", config_source="b")
for f in (old, new):
    use(f); run(1024, 8); run(1024, 32); run(1024, 8, False)
print(f"{'seqlen':>9} {'kv':>3} {'pass':>8} {'old ms':>8} {'new ms':>8} {'new/old':>8}")
worst = [0.0, 0.0]
for n in (16384, 24576, 32768, 65536, 131072, 262144, 1048576, 4194304, 10485760, 12582912, 16777216):
    for kv in (32, 8):
        for bwd in (False, True):
            t = {0: [], 1: []}
            for rep in range(3):
                for i, f in enumerate((old, new)):
                    use(f); t0 = time.perf_counter(); run(n, kv, bwd); t[i].append((time.perf_counter() - t0) * 1e3)
            o, nw = np.median(t[0]), np.median(t[1])
            worst = [max(worst[0], o), max(worst[1], nw)]
            print(f"{n:>9} {kv:>3} {'fwd+bwd' if bwd else 'fwd':>8} {o:8.1f} {nw:8.1f} {nw / o:8.2f}", flush=True)
print(f"largest median: old {worst[0]:.1f} ms, new {worst[1]:.1f} ms")
