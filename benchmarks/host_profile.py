"""Where the host time of one decode call of ``flash_attention`` goes (GPU only; issue 14).

    python3 benchmarks/host_profile.py

B = 1, H = 32, H_kv = 8, HEAD_DIM = 128, bf16, 8192 cached keys (split-KV decode): prints
whether the cached plan launches the compiled kernels directly, the mean wall time of 2000
back-to-back calls (host-bound at this size), the plan lookup and one ``torch.empty`` alone,
and cProfile's top functions by own time. Measured on the H200, 2026-12-01: 38 µs a call, of
which 4 ``torch.empty`` (o, lse, partial O, partial LSE) 19 µs, 2 launches through Triton's
``CudaLauncher`` 15 µs, the plan lookup 3.3 µs.
"""
import cProfile, pstats, time, torch, sys
sys.path.insert(0, '.')
from kernels import flash_attention as fa
q = torch.randn(1, 32, 1, 128, device='cuda', dtype=torch.bfloat16)
k = torch.randn(1, 8, 8192, 128, device='cuda', dtype=torch.bfloat16)
v = torch.randn_like(k)
for _ in range(5): fa.flash_attention(q, k, v, causal=True, causal_align='bottom-right')
torch.cuda.synchronize()
plan = next(iter(fa._PLANS.values()))
print('path', plan.path, 'main.compiled', plan.main.compiled is not None, 'tail', plan.main.tail is not None, 'direct', plan.main.direct,
      'combine', plan.combine and plan.combine.compiled is not None, 'hooks ok', fa._no_launch_hooks())
def loop(n):
    for _ in range(n): fa.flash_attention(q, k, v, causal=True, causal_align='bottom-right')
t = time.perf_counter(); loop(2000); torch.cuda.synchronize(); print('us/call', (time.perf_counter()-t)/2000*1e6)
# pieces
t = time.perf_counter()
for _ in range(2000): fa._plan(q, k, v, True, 'bottom-right', None)
print('plan us', (time.perf_counter()-t)/2000*1e6)
t = time.perf_counter()
for _ in range(2000): torch.empty((1,32,1,128), device='cuda', dtype=torch.bfloat16)
print('empty us', (time.perf_counter()-t)/2000*1e6)
pr = cProfile.Profile(); pr.enable(); loop(2000); pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats('tottime').print_stats(22)
