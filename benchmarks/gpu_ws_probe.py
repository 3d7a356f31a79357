"""GPU probe (issues 14 and 11, speed): Triton 3.6's automatic warp specialisation on Hopper.

Triton 3.6 forms a warp-specialised region on sm_90 (one producer warpgroup issuing TMA loads,
two consumer warpgroups each owning half of the tile's rows, ``setmaxnreg`` moving registers
to the consumers: FlashAttention-3's structure) for a ``tl.range(..., warp_specialize=True)``
loop whose loads are **device-side** tensor descriptors (``tl.make_tensor_descriptor``) and
whose program has ``num_warps=4``. With the host descriptors the bundled kernels use, or with
8 warps, it forms none (``kernels/README.md``); with two loops in one program (the bundled
causal split) or a ``reshape`` of a rank-3 box, the data-partitioning pass fails to compile.
So these probe kernels are single-loop, rank-2 descriptors over the ``(B·H·N, d)`` view
(sequence lengths multiples of the tiles here), and the causal ones mask every block.

    python benchmarks/gpu_ws_probe.py --compile-only          # this machine, no GPU: WS formed?
    python benchmarks/gpu_ws_probe.py --out $OUT/ws-probe.json  # the H200

1. Exactness: each WS variant's o (forward) and dq, dk, dv (backward) against the bundled
   kernels' on the same inputs: max |difference| / max |bundled|.
2. Forward: the bundled ``flash_attention`` (autotuned), the WS forward with BLOCK_N 64/128 and 2/3
   stages, SDPA FLASH and cuDNN, interleaved (``do_bench_interleaved``, L2 flushed per repetition).
3. Backward: the bundled ``flash_attention_backward`` (GPU tiles) against the bundled D kernel then the
   WS dK/dV and WS dQ kernels, and SDPA cuDNN's forward + backward minus its forward, interleaved.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOG2E = 1.4426950408889634


@triton.jit
def _rows(base, rows, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """A device-side descriptor over the ``(rows, HEAD_DIM)`` view of a contiguous (B, H, N, d) tensor,
    boxes of BLOCK rows (rank 2: the data-partitioning pass fails on a reshaped rank-3 box)."""
    return tl.make_tensor_descriptor(base, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK, HEAD_DIM])


@triton.jit
def _fwd_ws(Q, K, V, O, LSE, sm_scale, BH, N_Q, N_K, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr):
    """Forward of one query tile (grid (T_r, B·H); causal: heaviest tile first, top-left)."""
    if CAUSAL:
        pid = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid = tl.program_id(0)
    bh = tl.program_id(1)
    dq, do = _rows(Q, BH * N_Q, HEAD_DIM, BLOCK_M), _rows(O, BH * N_Q, HEAD_DIM, BLOCK_M)
    dk, dv = _rows(K, BH * N_K, HEAD_DIM, BLOCK_N), _rows(V, BH * N_K, HEAD_DIM, BLOCK_N)
    q = dq.load([bh * N_Q + pid * BLOCK_M, 0])
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        hi = tl.minimum((pid + 1) * BLOCK_M, N_K)
    else:
        hi = N_K
    kv0 = bh * N_K
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WS):
        k = dk.load([kv0 + start_n, 0]).T
        qk = tl.dot(q, k)
        if CAUSAL:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            qk = tl.where(offs_n[None, :] <= offs_m[:, None], qk, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = dv.load([kv0 + start_n, 0])
        acc = tl.dot(p.to(O.dtype.element_ty), v, acc)
        m_i = m_ij
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(LSE + bh * N_Q + offs_m, m_i * 0.6931471805599453)  # natural log, as the bundled kernel
    do.store([bh * N_Q + pid * BLOCK_M, 0], acc.to(O.dtype.element_ty))


@triton.jit
def _dkdv_ws(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, BH, N_Q, N_K, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr):
    """dK, dV of one key tile (grid (T_c, B·H), MHA; causal top-left: query tiles from the diagonal)."""
    j = tl.program_id(0)
    bh = tl.program_id(1)
    d_q, d_do = _rows(Q, BH * N_Q, HEAD_DIM, BLOCK_M), _rows(DO, BH * N_Q, HEAD_DIM, BLOCK_M)
    d_k, d_v = _rows(K, BH * N_K, HEAD_DIM, BLOCK_N), _rows(V, BH * N_K, HEAD_DIM, BLOCK_N)
    start_n = j * BLOCK_N
    k = d_k.load([bh * N_K + start_n, 0])
    v = d_v.load([bh * N_K + start_n, 0])
    offs_n = start_n + tl.arange(0, BLOCK_N)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        lo = start_n // BLOCK_M * BLOCK_M
    else:
        lo = 0
    q0 = bh * N_Q
    for start_m in tl.range(lo, N_Q, BLOCK_M, warp_specialize=WS):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = d_q.load([q0 + start_m, 0])
        do = d_do.load([q0 + start_m, 0])
        lse2 = tl.load(LSE + q0 + offs_m) * 1.4426950408889634
        delta = tl.load(DELTA + q0 + offs_m)
        s_t = tl.dot(k, tl.trans(q))
        p_t = tl.math.exp2(s_t * qk_scale - lse2[None, :])
        if CAUSAL:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :], p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)
        dk = tl.dot(ds_t, q, dk)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (bh * N_K + offs_n).to(tl.int64)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DK + rows, (dk * sm_scale).to(DK.dtype.element_ty))
    tl.store(DV + rows, dv.to(DV.dtype.element_ty))


@triton.jit
def _dq_ws(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, BH, N_Q, N_K, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
           BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr):
    """dQ of one query tile (grid (T_r, B·H), MHA; causal top-left, heaviest tile first)."""
    if CAUSAL:
        i = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        i = tl.program_id(0)
    bh = tl.program_id(1)
    d_q, d_do = _rows(Q, BH * N_Q, HEAD_DIM, BLOCK_M), _rows(DO, BH * N_Q, HEAD_DIM, BLOCK_M)
    d_k, d_v = _rows(K, BH * N_K, HEAD_DIM, BLOCK_N), _rows(V, BH * N_K, HEAD_DIM, BLOCK_N)
    q0 = bh * N_Q
    offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
    q = d_q.load([q0 + i * BLOCK_M, 0])
    do = d_do.load([q0 + i * BLOCK_M, 0])
    lse2 = tl.load(LSE + q0 + offs_m) * 1.4426950408889634
    delta = tl.load(DELTA + q0 + offs_m)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        hi = tl.minimum((i + 1) * BLOCK_M, N_K)
    else:
        hi = N_K
    kv0 = bh * N_K
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WS):
        k = d_k.load([kv0 + start_n, 0])
        v = d_v.load([kv0 + start_n, 0])
        s = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(s * qk_scale - lse2[:, None])
        if CAUSAL:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            p = tl.where(offs_n[None, :] <= offs_m[:, None], p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = (p * (dp - delta[:, None])).to(k.dtype)
        dq = tl.dot(ds, k, dq)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (q0 + offs_m).to(tl.int64)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DQ + rows, (dq * sm_scale).to(DQ.dtype.element_ty))


#: (BLOCK_M, BLOCK_N, num_stages) per kernel; num_warps 4 (12 with the producer and two consumers)
FWD_TILES = [(128, 64, 2), (128, 64, 3), (128, 128, 2)]
DKDV_TILES = [(64, 128, 2), (64, 128, 3), (32, 128, 2), (64, 64, 2)]
DQ_TILES = [(64, 128, 2), (64, 64, 2), (64, 64, 3)]

FWD_SHAPES = [  # (B, H, N, d, causal, dtype): issue 14's table, then 16k-token rows at 1k-16k
    (2, 16, 8192, 128, False, "bf16"), (2, 16, 8192, 128, True, "bf16"), (8, 16, 2048, 128, True, "bf16"),
    (4, 16, 4096, 64, False, "fp16"), (16, 16, 1024, 128, False, "bf16"), (16, 16, 1024, 128, True, "bf16"),
    (4, 16, 4096, 128, False, "bf16"), (1, 16, 16384, 128, True, "bf16"), (4, 16, 4096, 64, True, "bf16"),
]
BWD_SHAPES = [  # issue 11's speed rows at HEAD_DIM 128 (B·N = 16k, H = 16, bf16), and two at 64
    (16, 16, 1024, 128, False), (8, 16, 2048, 128, False), (2, 16, 8192, 128, False),
    (16, 16, 1024, 128, True), (8, 16, 2048, 128, True), (1, 16, 16384, 128, True),
    (4, 16, 4096, 64, False), (4, 16, 4096, 64, True),
]


def _dt(name: str) -> torch.dtype:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def _fwd_launch(q, k, v, causal, tiles, ws=True):
    B, H, N, d = q.shape
    bm, bn, st = tiles
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    _fwd_ws[(N // bm, B * H)](q, k, v, o, lse, d ** -0.5, B * H, N, N, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                              CAUSAL=causal, WS=ws, num_warps=4, num_stages=st)
    return o, lse


def _bwd_launch(do, q, k, v, o, lse, causal, kv_tiles, dq_tiles):
    from kernels import backward as bw

    B, H, N, d = q.shape
    delta = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    bw._bwd_preprocess[(triton.cdiv(N, 128), B * H)](o, do, delta, *o.stride(), *do.stride(), H, N, HEAD_DIM=d,
                                                      HEAD_DIM_PAD=d, BLOCK_M=128)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    bm, bn, st = kv_tiles
    _dkdv_ws[(N // bn, B * H)](q, k, v, do, lse, delta, dk, dv, d ** -0.5, B * H, N, N, HEAD_DIM=d, BLOCK_M=bm,
                               BLOCK_N=bn, CAUSAL=causal, WS=True, num_warps=4, num_stages=st)
    bm, bn, st = dq_tiles
    _dq_ws[(N // bm, B * H)](q, k, v, do, lse, delta, dq, d ** -0.5, B * H, N, N, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                             CAUSAL=causal, WS=True, num_warps=4, num_stages=st)
    return dq, dk, dv


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))


def compile_only() -> int:
    """Compile every probe variant for sm_90 on this machine (no GPU) and say whether Triton
    formed the warp-specialised region, the warps, shared memory, consumer registers, local memory."""
    from kernels.compile_check import _install_fake_driver

    _install_fake_driver(90)
    rows = []
    for d, causal in itertools.product((64, 128), (False, True)):
        t = torch.empty(2, 16, 4096, d, dtype=torch.bfloat16)
        lse = torch.empty(2, 16, 4096)
        for name, kern, tiles in (("fwd", _fwd_ws, FWD_TILES), ("dkdv", _dkdv_ws, DKDV_TILES), ("dq", _dq_ws, DQ_TILES)):
            for bm, bn, st in tiles:
                args = {"fwd": (t, t, t, t, lse), "dkdv": (t, t, t, t, lse, lse, t, t), "dq": (t, t, t, t, lse, lse, t)}[name]
                try:
                    c = kern.warmup(*args, 0.1, 32, 4096, 4096, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, WS=True,
                                    num_warps=4, num_stages=st, grid=(1,))
                    m = re.search(r"requestedRegisters = array<i32: ([^>]*)>", c.asm["ttgir"])
                    ptx = c.asm["ptx"]
                    rows.append(f"{name:5s} d{d} causal={causal!s:5s} {bm}x{bn} s{st}: ws={'ttg.warp_specialize' in c.asm['ttgir']} "
                                f"warps={c.metadata.num_warps} smem={c.metadata.shared} regs={m.group(1) if m else '-'} "
                                f"local={'ld.local' in ptx or 'st.local' in ptx} fits={c.metadata.shared <= 232448}")
                except Exception as exc:
                    rows.append(f"{name:5s} d{d} causal={causal!s:5s} {bm}x{bn} s{st}: ERROR {str(exc).strip().splitlines()[0][:100]}")
                print(rows[-1], flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON to write (GPU run)")
    ap.add_argument("--compile-only", action="store_true", help="compile for sm_90 here, no GPU")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per shape (>= 1)")
    args = ap.parse_args()
    if args.compile_only:
        return compile_only()
    if not args.out:
        print("error: --out OUT.json is required for the GPU run (or pass --compile-only)", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    from iomodel.bench.environment import environment
    from iomodel.bench.timing import do_bench_interleaved
    from iomodel.measure.ncu import benchmark_finish, benchmark_start
    from kernels import backward as bw
    from kernels.flash_attention import flash_attention
    from gpu_backward_tune import sdpa_step  # noqa: E402

    if (rc := benchmark_start(args.out)) is not None:
        return rc
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    t_start = time.time()
    out = {"environment": environment("cuda"), "command": " ".join(["benchmarks/gpu_ws_probe.py"] + sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"), "forward": [], "backward": []}
    from iomodel.bench.backends import attention_call
    from iomodel.bench.inputs import dense_inputs

    for B, H, N, d, causal, dts in FWD_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=_dt(dts)) for _ in range(3))
        o_ref, lse_ref = flash_attention(q, k, v, causal)
        fns = {"bundled": lambda: flash_attention(q, k, v, causal)}
        row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": dts, "err": {}, "compile_error": {}}
        for tiles in FWD_TILES:
            name = "ws-{}x{}s{}".format(*tiles)
            try:
                o, lse = _fwd_launch(q, k, v, causal, tiles)
                torch.cuda.synchronize()
                row["err"][name] = {"o": _rel(o, o_ref), "lse": float((lse - lse_ref).abs().max())}
                fns[name] = (lambda t=tiles: _fwd_launch(q, k, v, causal, t))
            except Exception as exc:
                row["compile_error"][name] = str(exc).strip().splitlines()[0][:200]
        for be in ("sdpa-cudnn", "sdpa-flash"):
            try:
                call = attention_call(be, dense_inputs(q, k, v, causal))
                call()
                fns[be] = call
            except Exception as exc:
                row["compile_error"][be] = str(exc).strip().splitlines()[0][:200]
        samples = do_bench_interleaved(fns, args.rounds, 25, 100)
        flops = 4 * B * H * d * N * N * (0.5 if causal else 1.0)
        row["median_s"] = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row["samples_s"] = samples
        row["tflops"] = {n: flops / s / 1e12 for n, s in row["median_s"].items()}
        if "sdpa-cudnn" in row["median_s"]:
            row["vs_cudnn"] = {n: row["median_s"]["sdpa-cudnn"] / s for n, s in row["median_s"].items()}
        out["forward"].append(row)
        print(json.dumps({k: row[k] for k in ("B", "N", "d", "causal", "dtype")}),
              {n: round(x, 3) for n, x in row.get("vs_cudnn", {}).items()}, row["compile_error"], flush=True)

    for B, H, N, d, causal in BWD_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(4))
        o, lse = flash_attention(q, k, v, causal)
        ref = bw.flash_attention_backward(do, q, k, v, o, lse, causal)
        fns = {"bundled": lambda: bw.flash_attention_backward(do, q, k, v, o, lse, causal)}
        row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "err": {}, "compile_error": {}}
        combos = [(kv, DQ_TILES[0]) for kv in DKDV_TILES] + [(DKDV_TILES[0], dq) for dq in DQ_TILES[1:]]
        for kv, dqt in combos:
            name = "ws-kv{}x{}s{}-dq{}x{}s{}".format(*kv, *dqt)
            try:
                got = _bwd_launch(do, q, k, v, o, lse, causal, kv, dqt)
                torch.cuda.synchronize()
                row["err"][name] = {n: _rel(a, b) for n, a, b in zip(("dq", "dk", "dv"), got, ref)}
                fns[name] = (lambda a=kv, b=dqt: _bwd_launch(do, q, k, v, o, lse, causal, a, b))
            except Exception as exc:
                row["compile_error"][name] = str(exc).strip().splitlines()[0][:200]
        qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        try:
            cud = sdpa_step("sdpa-cudnn", qg, kg, vg, do, causal)
            cud()
            fns["sdpa-cudnn-fwd+bwd"] = cud
            call = attention_call("sdpa-cudnn", dense_inputs(qg, kg, vg, causal))
            fns["sdpa-cudnn-fwd"] = lambda: call()
            fns["bundled-fwd"] = lambda: flash_attention(q, k, v, causal)
        except Exception as exc:
            row["compile_error"]["sdpa-cudnn"] = str(exc).strip().splitlines()[0][:200]
        samples = do_bench_interleaved(fns, args.rounds, 25, 100)
        row["median_s"] = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row["samples_s"] = samples
        med = row["median_s"]
        if "sdpa-cudnn-fwd+bwd" in med:
            # forward + backward of each variant (bundled forward + that backward) against cuDNN's step
            row["fwd_bwd_vs_cudnn"] = {n: med["sdpa-cudnn-fwd+bwd"] / (med["bundled-fwd"] + s) for n, s in med.items()
                                       if n == "bundled" or n.startswith("ws-")}
        out["backward"].append(row)
        print(json.dumps({k: row[k] for k in ("B", "N", "d", "causal")}),
              {n: round(x, 3) for n, x in row.get("fwd_bwd_vs_cudnn", {}).items()},
              {n: max(e.values()) for n, e in row["err"].items()}, row["compile_error"], flush=True)

    out["seconds"] = time.time() - t_start
    return benchmark_finish(args.out, out)


if __name__ == "__main__":
    raise SystemExit(main())
