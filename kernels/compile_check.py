"""Compile the bundled kernels for a GPU architecture on any machine, without a GPU.

Triton compiles through its bundled ``ptxas``; only loading and launching need a driver.
:class:`_FakeCudaDriver` stands in for the CUDA driver (it reports a target and device 0
and is never asked to launch), so ``kernel.warmup(...)`` produces the TTGIR, PTX and cubin
of a configuration. This answers, on a CPU machine, whether a configuration compiles for
sm_90 and what it costs: shared memory (bytes), registers per thread and spills (from
``ptxas -v``), and whether the Hopper instructions are there (``wgmma.mma_async``,
``cp.async.bulk.tensor`` = TMA).

Usage (TRITON_INTERPRET must be unset)::

    python -m kernels.compile_check               # the autotune candidates of heuristics.py and the
                                                  # backward's GPU_BACKWARD tiles (MHA and GQA), sm_90
    python -m kernels.compile_check --quick       # one configuration per kernel
    python -m kernels.compile_check --arch 80     # Ampere (pointer path only)

Not a timing tool: a configuration that compiles without spills can still be slow.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.schedule.tiles import decode_block_m, decode_heads_per_program, head_dim_padded
from iomodel.spec import torch_dtype


def _install_fake_driver(arch: int) -> Any:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver

    class _FakeCudaDriver(CudaDriver):
        """A CUDA driver that reports a target and never loads or launches anything."""

        def __init__(self, cap: int) -> None:  # no super().__init__: it would dlopen libcuda
            self._target = GPUTarget("cuda", cap, 32)

        def get_current_target(self) -> Any:
            return self._target

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: Any = None) -> int:
            return 0

        def get_active_torch_device(self) -> Any:
            import torch

            return torch.device("cpu")

        def is_active(self) -> bool:
            return True

    triton.runtime.driver.set_active(_FakeCudaDriver(arch))
    return triton.runtime.driver


@dataclass
class CompileReport:
    """What one configuration costs when compiled (units: bytes, registers per thread)."""

    kernel: str
    config: dict[str, Any]
    ok: bool
    error: str = ""
    shared_bytes: int | None = None  # shared memory per program
    registers: int | None = None  # per thread (ptxas -v)
    spill_bytes: int | None = None  # spill stores + spill loads (ptxas -v)
    wgmma: int = 0  # wgmma.mma_async instructions in the PTX (Hopper tensor cores)
    tma: int = 0  # cp.async.bulk.tensor instructions in the PTX (TMA)
    # bytes per thread of the local-memory (spill) instructions in the SASS, by loop depth:
    # {"store@0": outside every loop, "load@1": inside one loop, ...} (:func:`local_memory_sites`)
    local_bytes: dict[str, int] | None = None


def _ptxas_info(ptx: str, arch: int) -> tuple[int | None, int | None]:
    """(registers, spill bytes) from the bundled ptxas in verbose mode."""
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    gpu = f"sm_{arch}a" if arch == 90 else f"sm_{arch}"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(ptxas), "-v", f"-arch={gpu}", str(src), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", text)
    return (int(regs.group(1)) if regs else None), (sum(int(s) for s in spills) if spills else None)


def local_memory_sites(cubin: bytes) -> dict[str, int]:
    """Bytes per thread of the local-memory instructions (``STL``/``LDL``, where ptxas puts
    spills) in a cubin, by loop depth, from the bundled ``nvdisasm``.

    A loop is the address range of a backward branch; an instruction's depth is the number of
    such ranges around it. In warp-specialised (Gluon) kernels the barrier spin-waits and the partitions'
    dispatch are backward branches too, some spanning most of the kernel, so a depth there counts those as
    well: read the SASS (``nvdisasm -c``) before calling a site "in the loop". Keys ``"store@<depth>"``, ``"load@<depth>"``; values: bytes one
    thread moves each time the instructions at that depth run (``STL`` 4 B, ``STL.64`` 8 B,
    ``STL.128`` 16 B). Local memory is interleaved by thread, so a warp's access of 4 B is
    128 contiguous bytes: local bytes of a launch = threads × Σ bytes × times each depth runs.
    Empty when nothing spills.
    """
    import triton

    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cubin"
        src.write_bytes(cubin)
        sass = subprocess.run([str(nvdisasm), "-c", str(src)], capture_output=True, text=True, timeout=300).stdout
    labels: dict[str, int] = {}
    pending: list[str] = []
    code: list[tuple[int, str]] = []  # (address, instruction)
    for line in sass.splitlines():
        if m := re.match(r"\s*\.(L_x_\d+):", line):
            pending.append(m.group(1))
        elif m := re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line):
            addr = int(m.group(1), 16)
            labels.update((name, addr) for name in pending)
            pending = []
            code.append((addr, m.group(2)))
    loops = [(labels[m.group(1)], addr) for addr, ins in code
             if (m := re.search(r"\bBRA\s+`\(\.(L_x_\d+)\)", ins)) and labels.get(m.group(1), addr + 1) <= addr]
    out: dict[str, int] = {}
    for addr, ins in code:
        if m := re.search(r"\b(STL|LDL)((?:\.[A-Z0-9]+)*)", ins):  # e.g. LDL.LU.64: width = the number
            depth = sum(1 for lo, hi in loops if lo <= addr <= hi)
            key = f"{'store' if m.group(1) == 'STL' else 'load'}@{depth}"
            bits = [int(x) for x in m.group(2).split(".") if x.isdigit()]
            out[key] = out.get(key, 0) + (bits[0] // 8 if bits else 4)
    return out


def _error_line(exc: Exception) -> str:
    """One line (at most 300 characters) naming a compile failure: its type and last message line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}"[:300]


def _report(kernel: str, config: dict[str, Any], compiled: Any, arch: int) -> CompileReport:
    ptx = compiled.asm.get("ptx", "")
    regs, spills = _ptxas_info(ptx, arch)
    return CompileReport(kernel, config, True, shared_bytes=int(compiled.metadata.shared), registers=regs,
                         spill_bytes=spills, wgmma=ptx.count("wgmma.mma_async"), tma=ptx.count("cp.async.bulk.tensor"),
                         local_bytes=local_memory_sites(compiled.asm["cubin"]) if spills else {})


def compile_report(kernel: str, config: dict[str, Any], build: Any, arch: int = 90) -> CompileReport:
    """Compile one configuration by ``build()`` (a ``warmup`` call returning the compiled kernel, nothing
    launched) and report it as :func:`run`'s reports are; a failure is reported (``ok`` False, one error line),
    never raised. For the probes' own kernels (``benchmarks/gpu_gluon_*_probe.py``).

    Args:
        kernel: the name printed; config: what it was compiled with; build: the compile call.
        arch: compute capability × 10 the PTX was compiled for (ptxas's target).

    Returns:
        A :class:`CompileReport` (shared memory in bytes, registers per thread, spill bytes, instruction counts).
    """
    try:
        compiled = build()
    except Exception as exc:  # report, never abort the sweep
        return CompileReport(kernel, config, False, error=_error_line(exc))
    return _report(kernel, config, compiled, arch)


def print_reports(reports: list[CompileReport]) -> int:
    """Print one table row per report (shared memory in KiB, registers, spill bytes, warpgroup MMAs, TMA
    copies, local-memory bytes per thread by loop depth); 1 if any failed to compile, else 0."""
    bad = 0
    print(f"{'kernel':22s} {'config':64s} {'smem KiB':>8s} {'regs':>5s} {'spill B':>7s} {'wgmma':>5s} {'tma':>4s} local B/thread by loop depth")
    for r in reports:
        c = r.config
        desc = " ".join(f"{k}={v}" for k, v in c.items() if k not in ("path",))[:64]
        if not r.ok:
            bad += 1
            print(f"{r.kernel:22s} {desc:64s} ERROR {r.error}")
            continue
        local = " ".join(f"{k}={v}" for k, v in sorted((r.local_bytes or {}).items()))
        print(f"{r.kernel:22s} {desc:64s} {r.shared_bytes / 1024:8.1f} {r.registers!s:>5s} {r.spill_bytes!s:>7s} "
              f"{r.wgmma:5d} {r.tma:4d} {local}")
    return 1 if bad else 0


def compile_prefill(path: str, head_dim: int, dtype: str, causal: bool, block_m: int, block_n: int, num_warps: int,
                    num_stages: int, warp_specialize: bool = False, arch: int = 90,
                    window: bool = False, varlen: bool = False, pack: int = 1, reverse: bool = False,
                    group: int = 1) -> CompileReport:
    """Compile one prefill configuration (``prefill`` or ``prefill-tma``) for ``sm_<arch>``; ``window``:
    the sliding-window variant (``WINDOW=True``, a band of 1024 keys); ``varlen`` (path ``prefill``):
    the ragged-batch variant (``VARLEN=True`` with ``seqused_k``, as ``flash_attention_varlen`` runs it);
    ``pack`` (path ``prefill``): query heads per program (``PACK``, ``KernelConfig.heads_per_program``) of a
    GQA group of 4; ``reverse``: the reverse query-tile order (``REVERSE``); ``group``: the GQA group G passed
    (Triton specialises it: 1, a multiple of 16, other; a ``pack`` > 1 compiles G = 4)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    import kernels.flash_attention as fa
    from kernels import heuristics as hx

    cfg = dict(path=path, head_dim=head_dim, dtype=dtype, causal=causal, block_m=block_m, block_n=block_n,
               num_warps=num_warps, num_stages=num_stages, warp_specialize=warp_specialize)
    if window:
        cfg["window"] = True
    if varlen:
        cfg["varlen"] = True
    if pack > 1:
        cfg["pack"] = pack
    if reverse:
        cfg["reverse"] = True
    if group != 1:
        cfg["group"] = group
    from iomodel.schedule.registers import TABLE_SEQLEN

    dt = torch_dtype(dtype)
    B, H, N = 2, 16, TABLE_SEQLEN
    q = torch.empty(B, H, N, head_dim, dtype=dt)
    k, v, o = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)
    lse = torch.empty(B, H, N)
    common = dict(H=H, G=4 if pack > 1 else group, N_Q=N, N_K=N, CAUSAL_OFF=0, N_Q_BUCKET=hx.seqlen_bucket(N), N_K_BUCKET=hx.seqlen_bucket(N),
                  WIN_L=1024 if window else 0, WIN_R=0, WINDOW=window, REVERSE=reverse)
    try:
        if path == "prefill-tma":
            descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, bm, head_dim])
                     for t, bm in ((q, block_m), (k, block_n), (v, block_n), (o, block_m))]
            compiled = fa._attn_fwd_tma.warmup(
                *descs, lse, 0.125, **common, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                IN_DTYPE=dtype, WARP_SPECIALIZE=warp_specialize, EMULATE_BF16=False, num_warps=num_warps,
                num_stages=num_stages, grid=(1,))
        else:
            cu = torch.zeros(B + 1, dtype=torch.int32)
            compiled = fa._attn_fwd.warmup(
                q, k, v, o, lse, cu, cu, cu[:B], 0.125, *q.stride(), *k.stride(), *v.stride(), *o.stride(), **common,
                HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_padded(head_dim), BLOCK_M=block_m, BLOCK_N=block_n,
                CAUSAL=causal, DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", EMULATE_BF16=False,
                VARLEN=varlen, SEQUSED=varlen, PACK=pack, num_warps=num_warps, num_stages=num_stages, grid=(1,))
    except Exception as exc:  # report, never abort the sweep
        return CompileReport("_attn_fwd_tma" if path == "prefill-tma" else "_attn_fwd", cfg, False,
                             error=_error_line(exc))
    return _report("_attn_fwd_tma" if path == "prefill-tma" else "_attn_fwd", cfg, compiled, arch)


def compile_gluon_prefill(head_dim: int, dtype: str, causal: bool, arch: int = 90) -> CompileReport:
    """Compile the Gluon prefill (``kernels/gluon_attention.py``, path ``prefill-gluon``) in its one
    configuration at ``head_dim`` (``heuristics.GLUON_TILES``) for ``sm_<arch>``, nothing launched: q ``(2, 4, 1000, d)``,
    k and v ``(2, 2, 1000, d)`` (GQA, ragged lengths: MASK_TAIL on), the head-grouped launch order's
    code included.

    Args:
        head_dim: HEAD_DIM d (64 or 128 run on the GPU), elements.
        dtype: ``fp16`` or ``bf16``.
        causal: the causal variant (reverse tile order).
        arch: compute capability × 10 (90: Hopper; Gluon's warpgroup MMAs need it).

    Returns:
        A :class:`CompileReport`: shared memory (bytes), registers per thread, spill bytes,
        warpgroup-MMA and TMA instruction counts in the PTX; ``ok`` False with one error line
        (never raised) when Triton lacks Gluon or the compile fails.
    """
    import torch

    from kernels import gluon_attention as ga
    from kernels import heuristics as hx

    c = hx.prefill_default(head_dim, dtype, causal, "prefill-gluon")
    cfg = dict(path="prefill-gluon", head_dim=head_dim, dtype=dtype, causal=causal, block_m=c.block_m,
               block_n=c.block_n, num_warps=c.num_warps, num_stages=c.num_stages, warp_specialize=True)
    if ga.GLUON_IMPORT_ERROR is not None:
        return CompileReport("_attn_fwd_gluon", cfg, False, error=ga.GLUON_IMPORT_ERROR[:300])
    B, H, G, N = 2, 4, 2, 1000

    def build() -> Any:
        dt = torch_dtype(dtype)
        q = torch.empty(B, H, N, head_dim, dtype=dt)
        k = torch.empty(B, H // G, N, head_dim, dtype=dt)
        descs = [ga.gluon_descriptor(t, box) for t, box in zip((q, k, k, q), ga.descriptor_boxes(head_dim, c.block_n))]
        return ga._attn_fwd_gluon.warmup(
            *descs, torch.empty(B, H, N), 0.125, H, G, N, N, 0, 2, HEAD_DIM=head_dim, BLOCK_M=c.block_m,
            BLOCK_N=c.block_n, NUM_STAGES=c.num_stages, CAUSAL=causal, REVERSE=c.tile_order == "reverse",
            MASK_TAIL=True,
            CONSUMER_REGS=ga.consumer_regs(c.block_m), PRODUCER_REGS=ga.PRODUCER_REGS,
            PRODUCER_WARPS=ga.PRODUCER_WARPS, num_warps=4, grid=(1,))

    return compile_report("_attn_fwd_gluon", cfg, build, arch)


def compile_gluon_dkdv(dtype: str, causal: bool, group: int = 1, split: bool = False, descend: bool = False,
                       arch: int = 90) -> CompileReport:
    """Compile the Gluon dK/dV launch (``kernels/gluon_backward.py``, ``BackwardConfig.dkdv_kernel = "gluon"``) in
    its one configuration (``heuristics.GLUON_DKDV_TILES``, HEAD_DIM 128) for ``sm_<arch>``, nothing launched:
    q ``(2, 2·group, 1000, 128)``, k and v ``(2, 2, 1000, 128)`` (ragged lengths; ``group`` > 1 compiles the loop
    over the group's heads, ``split`` the fp32-partials store, ``descend`` the tiles-descending order).

    Returns:
        A :class:`CompileReport` (shared memory in bytes, registers per thread, spill bytes, warpgroup-MMA and
        TMA counts); ``ok`` False with one error line (never raised) when Triton lacks Gluon or the compile fails.
    """
    import torch

    from kernels import gluon_attention as ga
    from kernels import gluon_backward as gb
    from kernels import heuristics as hx

    t = hx.GLUON_DKDV_TILES
    d = 128
    cfg = dict(kernel="gluon-dkdv", head_dim=d, dtype=dtype, causal=causal, group=group, split=split,
               descend=descend, block_m=t.block_m, block_n=t.block_n, num_stages=t.num_stages)
    if ga.GLUON_IMPORT_ERROR is not None:
        return CompileReport("_bwd_dkdv_gluon", cfg, False, error=ga.GLUON_IMPORT_ERROR[:300])
    B, H_kv, N = 2, 2, 1000

    def build() -> Any:
        dt = torch_dtype(dtype)
        q = torch.empty(B, H_kv * group, N, d, dtype=dt)
        k = torch.empty(B, H_kv, N, d, dtype=dt)
        descs = [ga.gluon_descriptor(x, box) for x, box in zip((q, k, k, q, k, k), gb.descriptor_boxes(d, t.block_m))]
        lse = torch.empty(B, H_kv * group, N)
        out = torch.empty(B, H_kv * (2 if split else 1), N, d, dtype=torch.float32 if split else dt)
        return gb._bwd_dkdv_gluon.warmup(
            *descs, lse, lse, out, out, 0.125, *out.stride()[:3], *out.stride()[:3], H_kv * group, H_kv, group, N, N,
            0, 2 if split else 1, HEAD_DIM=d, BLOCK_M=t.block_m, NUM_STAGES=t.num_stages, CAUSAL=causal, SPLIT=split,
            DESCEND=descend, GQA=group > 1, MASK_Q=True, NO_KEY_ROWS=False, CONSUMER_REGS=gb.CONSUMER_REGS, PRODUCER_REGS=gb.PRODUCER_REGS,
            PRODUCER_WARPS=gb.PRODUCER_WARPS, num_warps=4, grid=(1,))

    return compile_report("_bwd_dkdv_gluon", cfg, build, arch)


def compile_decode(head_dim: int = 128, dtype: str = "bf16", group: int = 4, seqlen_q: int = 1, block_n: int = 64,
                   num_warps: int = 4, num_stages: int = 3, split: bool = True, arch: int = 90,
                   window: bool = False, page_size: int | None = None, fused: bool = True) -> list[CompileReport]:
    """Compile the split-KV decode kernel and its combine kernel for ``sm_<arch>`` (``window``: the
    sliding-window variant; ``page_size``: the paged-KV-cache variant, BLOCK_N = min(block_n, page_size);
    ``fused``: the decode kernel merges its partials itself, FUSED, the default since issue 14)."""
    import torch

    import kernels.flash_attention as fa
    from kernels import heuristics as hx

    dt = torch_dtype(dtype)
    B, H_kv, N_k, S = 1, 8, 8192, 32
    H = H_kv * group
    P = decode_heads_per_program(group, seqlen_q)
    BM = decode_block_m(P, seqlen_q)
    q = torch.empty(B, H, seqlen_q, head_dim, dtype=dt)
    paged = page_size is not None
    if paged:
        block_n = min(block_n, page_size)
        k = torch.empty(B * N_k // page_size, page_size, H_kv, head_dim, dtype=dt)  # (num_blocks, page_size, H_kv, d)
        kst = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))  # the kernel's (page, head, row, d) strides
    else:
        k = torch.empty(B, H_kv, N_k, head_dim, dtype=dt)
        kst = k.stride()
    table = torch.empty(B, max(1, N_k // (page_size or 1)), dtype=torch.int32)
    seqlens = torch.empty(B, dtype=torch.int32)
    v, o = torch.empty_like(k), torch.empty_like(q)
    lse = torch.empty(B, H, seqlen_q)
    op = torch.empty(B, H, S, seqlen_q, head_dim)
    lp = torch.empty(B, H, S, seqlen_q)
    sem = torch.zeros(B * H_kv * (group // P), dtype=torch.int32)
    cfg = dict(head_dim=head_dim, dtype=dtype, group=group, seqlen_q=seqlen_q, block_m=BM, block_n=block_n,
               num_warps=num_warps, num_stages=num_stages, heads_per_program=P, fused=split and fused)
    if window:
        cfg["window"] = True
    if paged:
        cfg["page_size"] = page_size
    reports = []
    try:
        c = fa._attn_decode.warmup(
            q, k, v, o, lse, op, lp, sem, table, seqlens, 0.125, *q.stride(), *kst, *kst, *o.stride(), *table.stride(),
            H, H_kv, group, seqlen_q, N_k, -seqlen_q if paged else 0, 256, S, 1024 if window else 0, 0,
            1 if paged else 0, WINDOW=window, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_padded(head_dim),
            BLOCK_M=BM, BLOCK_N=block_n, HEADS_PER_PROGRAM=P, CAUSAL=paged, SPLIT=split,
            PAGED=paged, PAGE_SIZE=page_size or 16, FUSED=split and fused,
            DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", EMULATE_BF16=False,
            num_warps=num_warps, num_stages=num_stages, grid=(1,))
        reports.append(_report("_attn_decode", cfg, c, arch))
        c2 = fa._attn_decode_combine.warmup(
            o, lse, op, lp, *o.stride(), H, seqlen_q, S, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_padded(head_dim),
            BLOCK_S=hx.combine_block_s(S, head_dim), EMULATE_BF16=False, num_warps=4, grid=(1,))
        reports.append(_report("_attn_decode_combine", dict(seqlen_q=seqlen_q, head_dim=head_dim), c2, arch))
    except Exception as exc:
        reports.append(CompileReport("_attn_decode", cfg, False,
                                     error=_error_line(exc)))
    return reports


def compile_backward(head_dim: int, dtype: str, causal: bool, group: int = 1, block_m: int = 32, block_n: int = 128,
                     num_warps: int = 4, num_stages: int = 3, dq_block_m: int = 128, dq_block_n: int = 64,
                     dq_num_warps: int = 8, dq_num_stages: int = 3, arch: int = 90,
                     seqlen: int = 4096, window: bool = False) -> list[CompileReport]:
    """Compile the backward's ``_bwd_dkdv`` and ``_bwd_dq`` kernels (``kernels/backward.py``) for
    ``sm_<arch>``: B = 2, H = 16 · ``group`` query heads over H_kv = 16 KV heads, N = ``seqlen``
    (Triton specialises integers divisible by 16, so 3000 and 4096 may compile differently).
    ``group`` matters: Triton specialises an integer argument equal to 1, so MHA (G = 1) compiled
    without the dK/dV kernel's loop over the group's heads and GQA (G > 1) with it. ``window``:
    the sliding-window variant (``WINDOW=True``, a band of 1024 keys)."""
    import torch

    import kernels.backward as bw

    dt = torch_dtype(dtype)
    B, H_kv, N = 2, 16, seqlen
    H = H_kv * group
    q = torch.empty(B, H, N, head_dim, dtype=dt)
    k = torch.empty(B, H_kv, N, head_dim, dtype=dt)
    v, do = torch.empty_like(k), torch.empty_like(q)
    lse, delta = torch.empty(B, H, N), torch.empty(B, H, N)
    pad = head_dim_padded(head_dim)
    flags = dict(HEAD_DIM=head_dim, HEAD_DIM_PAD=pad, CAUSAL=causal,
                 DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", EMULATE_BF16=False)
    base = dict(head_dim=head_dim, dtype=dtype, causal=causal, group=group, **({"window": True} if window else {}))
    win = (1024 if window else 0, 0)  # WIN_L, WIN_R (tokens)
    reports = []
    for kernel, cfg in (("_bwd_dkdv", dict(block_m=block_m, block_n=block_n, num_warps=num_warps,
                                           num_stages=num_stages)),
                        ("_bwd_dq", dict(block_m=dq_block_m, block_n=dq_block_n, num_warps=dq_num_warps,
                                         num_stages=dq_num_stages))):
        try:
            tiles = dict(BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], num_warps=cfg["num_warps"],
                         num_stages=cfg["num_stages"], grid=(1,))
            if kernel == "_bwd_dkdv":
                c = bw._bwd_dkdv.warmup(q, k, v, do, lse, delta, k, v, 0.125, delta, *q.stride(), *k.stride(),
                                        *v.stride(), *do.stride(), *k.stride(), *v.stride(), H, H_kv, group, N, N,
                                        0, *win, ATOMIC_DQ=False, WINDOW=window, GQA=group > 1, **flags, **tiles)
            else:
                c = bw._bwd_dq.warmup(q, k, v, do, lse, delta, q, 0.125, *q.stride(), *k.stride(), *v.stride(),
                                      *do.stride(), *q.stride(), H, group, N, N, 0, *win, WINDOW=window, **flags,
                                      **tiles)
        except Exception as exc:  # report, never abort the sweep
            reports.append(CompileReport(kernel, {**base, **cfg}, False, error=_error_line(exc)))
            continue
        reports.append(_report(kernel, {**base, **cfg}, c, arch))
    return reports


def compile_backward_tma(head_dim: int, dtype: str, causal: bool, group: int = 2, block_m: int = 32,
                         block_n: int = 64, num_warps: int = 8, num_stages: int = 2, dq_block_m: int = 128,
                         dq_block_n: int = 32, dq_num_warps: int = 8, dq_num_stages: int = 2,
                         arch: int = 90, seqlen: int = 4096, mask_split: bool = False) -> list[CompileReport]:
    """Compile the TMA backward's ``_bwd_dkdv_tma`` and ``_bwd_dq_tma`` (``kernels/backward.py``,
    the GPU default for fp16/bf16 and a power-of-two HEAD_DIM on sm_90) for ``sm_<arch>``: B = 2,
    H_kv = 8, H = 8 · ``group`` (G > 1 compiles the dK/dV loop over the group's heads), N =
    ``seqlen``; tensor descriptors with the kernels' boxes ``(1, 1, rows, HEAD_DIM)``. ``mask_split``:
    the causal MHA dK/dV loop split at the diagonal (``BackwardConfig.mask_split``; the launcher runs
    it for causal G = 1 only). Units: elements (tiles), bytes and registers per thread (the reports)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    import kernels.backward as bw

    dt = torch_dtype(dtype)
    B, H_kv, N = 2, 8, seqlen
    H = H_kv * group
    q = torch.empty(B, H, N, head_dim, dtype=dt)
    k = torch.empty(B, H_kv, N, head_dim, dtype=dt)
    lse = torch.empty(B, H, N)

    def desc(t: Any, rows: int) -> Any:
        return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, head_dim])

    split = bool(mask_split and causal and group == 1)
    base = dict(head_dim=head_dim, dtype=dtype, causal=causal, group=group, path="tma", **({"mask_split": True} if split else {}))
    reports = []
    for kernel, cfg in (("_bwd_dkdv_tma", dict(block_m=block_m, block_n=block_n, num_warps=num_warps,
                                               num_stages=num_stages)),
                        ("_bwd_dq_tma", dict(block_m=dq_block_m, block_n=dq_block_n, num_warps=dq_num_warps,
                                             num_stages=dq_num_stages))):
        bm, bn, st = cfg["block_m"], cfg["block_n"], cfg["num_stages"]
        common = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, EMULATE_BF16=False, STAGES=st,
                      num_warps=cfg["num_warps"], num_stages=st, grid=(1,))
        try:
            if kernel == "_bwd_dkdv_tma":
                c = bw._bwd_dkdv_tma.warmup(desc(q, bm), desc(k, bn), desc(k, bn), desc(q, bm), lse, lse, k, k, 0.125,
                                            *k.stride(), *k.stride(), H, H_kv, group, N, N, 0, GQA=group > 1,
                                            MASK_SPLIT=split, **common)
            else:
                c = bw._bwd_dq_tma.warmup(desc(q, bm), desc(k, bn), desc(k, bn), desc(q, bm), lse, lse, q, 0.125,
                                          *q.stride(), H, group, N, N, 0, **common)
        except Exception as exc:  # report, never abort the sweep
            reports.append(CompileReport(kernel, {**base, **cfg}, False, error=_error_line(exc)))
            continue
        reports.append(_report(kernel, {**base, **cfg}, c, arch))
    return reports


def run(arch: int = 90, quick: bool = False) -> list[CompileReport]:
    """Compile the kernels (the autotune candidates of ``heuristics``, or one each with ``quick``).

    Raises:
        IomodelError: TRITON_INTERPRET is set (kernels would be interpreted, not compiled).
    """
    if os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes"):
        raise IomodelError("TRITON_INTERPRET is set, so the kernels are interpreted: unset it to compile them")
    driver = _install_fake_driver(arch)
    from kernels import heuristics as hx

    reports: list[CompileReport] = []
    try:
        paths = ["prefill-tma", "prefill"] if arch >= 90 else ["prefill"]
        for path in paths:
            for d in ((128,) if quick else (64, 128)):
                for dtype in (("bf16",) if quick else ("fp16", "bf16")):
                    for causal in ((True,) if quick else (False, True)):
                        cands = hx.prefill_candidates(d, dtype, causal, path)
                        for c in (cands[:1] if quick else cands):
                            reports.append(compile_prefill(path, d, dtype, causal, c.block_m, c.block_n, c.num_warps,
                                                           c.num_stages, c.warp_specialize, arch,
                                                           reverse=c.tile_order == "reverse"))
            c = hx.prefill_candidates(128, "bf16", True, path)[0]  # the sliding-window variant, once per path
            reports.append(compile_prefill(path, 128, "bf16", True, c.block_m, c.block_n, c.num_warps, c.num_stages,
                                           c.warp_specialize, arch, window=True))
        if arch == 90:  # the Gluon prefill (Hopper only)
            for d in ((128,) if quick else (64, 128)):
                for dtype in (("bf16",) if quick else ("fp16", "bf16")):
                    for causal in ((True,) if quick else (False, True)):
                        reports.append(compile_gluon_prefill(d, dtype, causal, arch))
        c = hx.prefill_candidates(128, "bf16", True, "prefill")[0]  # the ragged-batch variant (pointer path only)
        reports.append(compile_prefill("prefill", 128, "bf16", True, c.block_m, c.block_n, c.num_warps, c.num_stages,
                                       False, arch, varlen=True))
        # the packed GQA variant (KernelConfig.heads_per_program, pointer path only): 4 heads a program
        reports.append(compile_prefill("prefill", 128, "bf16", True, c.block_m, c.block_n, c.num_warps, c.num_stages,
                                       False, arch, pack=4))
        reports += compile_decode(block_n=hx.decode_block_n(128), arch=arch)
        # the backward's GPU tiles, MHA and GQA (a group of 4 compiles the loop over the group's heads)
        for (d, causal), c in hx.GPU_BACKWARD.items():
            if quick and (d, causal) != (128, True):
                continue
            for group in ((4,) if quick else (1, 4)):
                reports += compile_backward(d, "bf16", causal, group, c.block_m, c.block_n, c.num_warps, c.num_stages,
                                            c.dq_block_m, c.dq_block_n, c.dq_num_warps, c.dq_num_stages, arch)
                if arch >= 90 and c.tma:  # what the GPU runs for bf16 at this power-of-two HEAD_DIM
                    reports += compile_backward_tma(d, "bf16", causal, max(group, 1), c.block_m, c.block_n,
                                                    c.num_warps, c.num_stages, c.dq_block_m, c.dq_block_n,
                                                    c.dq_num_warps, c.dq_num_stages, arch, mask_split=c.mask_split)
        if arch == 90:  # the backward's Gluon dK/dV launch (Hopper only): MHA; GQA with the split and descending order
            reports.append(compile_gluon_dkdv("bf16", True, arch=arch))
            if not quick:
                reports.append(compile_gluon_dkdv("bf16", False, arch=arch))
                reports.append(compile_gluon_dkdv("fp16", True, 4, True, True, arch=arch))
        reports += compile_decode(block_n=hx.decode_block_n(128), arch=arch, window=True)[:1]
        for page_size in ((16,) if quick else (16, 256)):  # the paged variant: BLOCK_N 16 and 64
            reports += compile_decode(block_n=hx.decode_block_n(128), arch=arch, page_size=page_size)[:1]
    finally:
        try:
            driver.reset_active()
        except RuntimeError:  # no real driver on this machine: nothing to restore
            pass
    return reports


#: HEAD_DIMs the registers table compiles the forward launches of (common model head sizes; the worksheet gets no
#: registers at others, and says so).
TABLE_HEAD_DIMS = (32, 64, 80, 96, 128, 256)


def table_launches() -> list[tuple[str, int, str, bool, Any, int, bool]]:
    """The forward launches the registers table compiles: (path, HEAD_DIM, dtype, causal, TileChoice, group, window).

    Per HEAD_DIM of :data:`TABLE_HEAD_DIMS`, dtype and mask: the path the worksheet models on an H200 with the
    launcher's switches at their defaults (``iomodel.report.worksheet._modelled_prefill_path``; where that is the
    Gluon prefill, which fixes its own programs per SM, the TMA prefill that runs given tiles), every autotune
    candidate of it (``heuristics.prefill_candidates``) in its own tile order (a causal one also in the other), at
    each GQA group of
    :data:`iomodel.schedule.registers.GROUP_CLASSES`, the first candidate also with a sliding window; and where that
    path is not the pointer prefill (``prefill``: ``IOMODEL_TMA=0``, a training step's short forward), the pointer
    prefill's first candidate the same ways. Units: elements (HEAD_DIM, tiles)."""
    from iomodel.report.worksheet import _modelled_prefill_path
    from iomodel.schedule.registers import GROUP_CLASSES
    from iomodel.spec import LayerSpec
    from iomodel.spec.hardware import H200
    from kernels import heuristics as hx

    out = []

    def add(path: str, d: int, dtype: str, causal: bool, cands: list[Any]) -> None:
        for i, c in enumerate(cands):
            other = "reverse" if c.tile_order == "forward" else "forward"
            for order in dict.fromkeys((c.tile_order, other) if causal else (c.tile_order,)):
                for group in GROUP_CLASSES:
                    for window in ((False, True) if i == 0 else (False,)):
                        out.append((path, d, dtype, causal, replace(c, tile_order=order), group, window))

    for d in TABLE_HEAD_DIMS:
        for dtype in ("fp16", "bf16", "fp32"):
            for causal in (False, True):
                spec = LayerSpec(1, 16, 16, d, 4096, 4096, dtype=dtype, causal=causal)
                try:
                    path = _modelled_prefill_path(spec, H200, False, None)
                except IomodelError:
                    continue
                if path == "prefill-gluon":
                    path = "prefill-tma"
                if path not in ("prefill", "prefill-tma"):
                    continue
                add(path, d, dtype, causal, hx.prefill_candidates(d, dtype, causal, path))
                if path != "prefill":
                    add("prefill", d, dtype, causal, hx.prefill_candidates(d, dtype, causal, "prefill")[:1])
    return out


def registers_table(arch: int = 90) -> dict[str, Any]:
    """Compile :func:`table_launches` for sm_90 and return the registers receipt
    (``iomodel/data/registers-sm90.json``): ``command``, ``created`` (UTC), ``environment`` (Triton, ptxas, Python,
    the architecture, the compiles' sequence length), ``compiled`` (launches compiled), ``failed`` (key: the
    error's last line) and ``registers`` ({:func:`iomodel.schedule.registers.forward_key`: registers per thread}).

    Raises:
        IomodelError: ``arch`` other than 90 (the worksheet reads an sm_90 table only); TRITON_INTERPRET is set
            (kernels would be interpreted, not compiled); the launcher's switches ``IOMODEL_TMA``/``IOMODEL_GLUON``
            are set (the table is of the default launches); no ptxas in Triton's install.
    """
    import datetime
    import platform

    import triton

    from iomodel.schedule.capabilities import GLUON_SWITCH, TMA_SWITCH
    from iomodel.schedule.registers import REGISTERS_FILE, TABLE_SEQLEN, forward_key

    if arch != 90:
        raise IomodelError(f"the registers table is sm_90's (iomodel.schedule.registers), got --arch {arch}: "
                           "use --arch 90")
    if os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes"):
        raise IomodelError("TRITON_INTERPRET is set, so the kernels are interpreted: unset it to compile them")
    switches = [k for k in (TMA_SWITCH, GLUON_SWITCH) if k in os.environ]
    if switches:
        raise IomodelError(f"{' and '.join(switches)} set: the table holds the default launches; unset them")
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    try:  # before the compiles (about 15 minutes), not after
        version = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise IomodelError(f"Triton's ptxas cannot run ({exc}): reinstall triton") from None
    driver = _install_fake_driver(arch)
    regs: dict[str, int] = {}
    failed: dict[str, str] = {}
    try:
        for path, d, dtype, causal, c, group, window in table_launches():
            key = forward_key(path, d, dtype, causal, group, c.block_m, c.block_n, c.num_warps, c.num_stages,
                              c.warp_specialize, c.tile_order == "reverse", window)
            if key in regs or key in failed:
                continue
            r = compile_prefill(path, d, dtype, causal, c.block_m, c.block_n, c.num_warps, c.num_stages,
                                c.warp_specialize, arch, window=window, reverse=c.tile_order == "reverse",
                                group=group)
            if r.ok and r.registers is not None:
                regs[key] = r.registers
            else:
                failed[key] = r.error or "ptxas reported no register count"
    finally:
        try:
            driver.reset_active()
        except RuntimeError:  # no real driver on this machine: nothing to restore
            pass
    return {"schema": 1, "kind": "compiled-registers",
            "command": f"python -m kernels.compile_check --registers-table iomodel/data/{REGISTERS_FILE}",
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "environment": {"triton": f"triton {triton.__version__}", "ptxas": version[-1] if version else "",
                            "python": platform.python_version(), "arch": "sm_90a",
                            "machine": "compiled without a GPU (kernels/compile_check.py's fake CUDA driver)",
                            "seqlen": TABLE_SEQLEN, "switches": "the launcher's defaults (no IOMODEL_TMA, "
                                                                "IOMODEL_GLUON)"},
            "compiled": len(regs) + len(failed), "failed": failed, "registers": dict(sorted(regs.items()))}

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Compile the bundled kernels for a GPU architecture without a GPU")
    ap.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90 = H100/H200, 80 = A100)")
    ap.add_argument("--quick", action="store_true", help="one configuration per kernel")
    ap.add_argument("--registers-table", metavar="FILE", default=None,
                    help="compile the forward launches the worksheet models and write their registers per thread "
                         "as JSON (iomodel/data/registers-sm90.json)")
    args = ap.parse_args(argv)
    if args.registers_table:
        import json

        try:
            table = registers_table(args.arch)
        except IomodelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        Path(args.registers_table).write_text(json.dumps(table, indent=1) + "\n")
        print(f"{len(table['registers'])} launches compiled ({len(table['failed'])} failed): {args.registers_table}")
        return 1 if table["failed"] else 0
    try:
        reports = run(args.arch, args.quick)
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return print_reports(reports)


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["CompileReport", "compile_backward", "registers_table", "table_launches", "compile_backward_tma", "compile_decode", "compile_gluon_dkdv",
           "compile_gluon_prefill",
           "compile_prefill", "local_memory_sites", "run"]


