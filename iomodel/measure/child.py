"""What runs under Nsight Compute: one warm-up and one profiled, NVTX-tagged call per shape.

The driver (:mod:`iomodel.measure.driver`) starts ncu around
``python -m iomodel.measure.child SHAPES.json MANIFEST.json``, which, per shape:

1. builds Q, K, V on the GPU and runs the implementation once outside any profiled
   region (Triton compilation and any autotuning happen here, never under the profiler);
2. runs exactly one call inside :func:`profiled_range`: a ``cudaProfilerStart`` region
   (ncu runs with ``--profile-from-start off``) and an NVTX range ``iomodel@<shape id>@``,
   so every kernel of that call (the bundled kernel, its split-KV combine kernel, or each op
   of the eager chain) is profiled once and tagged with its shape;
3. writes the launcher's reported configuration (or the shape's error) to the manifest.

Before the shapes, :func:`flush_l2` runs one sacrificial profiled kernel that absorbs the
dirty L2 lines a fresh process starts with. torch is imported inside the functions only.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from iomodel.errors import IomodelError
from iomodel.measure.driver import CONFIG_KEYS
from iomodel.measure.ncu import FLUSH_TAG, nvtx_tag
from iomodel.measure.records import IMPLS
from iomodel.measure.sweep import SweepShape
from iomodel.spec import LayerSpec
from iomodel.spec.dtypes import torch_dtype

#: Bytes the sacrificial kernel reads: several times any L2 (the H200's is 60 MiB).
FLUSH_BYTES = 512 * 2**20


@contextlib.contextmanager
def profiled_range(tag: str) -> Iterator[None]:
    """Profile the block on the GPU: a ``cudaProfilerStart``/``Stop`` region around an NVTX
    range named :func:`~iomodel.measure.ncu.nvtx_tag` ``(tag)``.

    The GPU is synchronised before the region opens and before it closes, so the region holds
    exactly the kernels the block launches. When the block raises, the range and the region
    are closed quietly and the exception propagates.

    Args:
        tag: the shape id (or :data:`~iomodel.measure.ncu.FLUSH_TAG`) the kernels are tagged with.
    """
    import torch

    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    torch.cuda.nvtx.range_push(nvtx_tag(tag))
    popped = False
    try:
        yield
        torch.cuda.nvtx.range_pop()
        popped = True
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    except BaseException:
        if not popped:
            with contextlib.suppress(Exception):
                torch.cuda.nvtx.range_pop()
        with contextlib.suppress(Exception):
            torch.cuda.profiler.stop()
        raise


def flush_l2(device: Any) -> None:
    """Run the sacrificial first profiled kernel: a :data:`FLUSH_BYTES` read tagged
    :data:`~iomodel.measure.ncu.FLUSH_TAG`, left out of every shape.

    The first kernel Nsight Compute profiles in a fresh process finds 1.5-3.3 MiB of dirty
    lines in L2 that are not its own and writes them back (H200, 2026-11-29: in every
    single-pass receipt the decode shapes flagged with more DRAM writes than L2 writes were
    exactly the first shape of their batch, and the first-of-batch prefill b4-h12 q9000 /
    b1-h16 q32768 wrote 1.6 / 3.3 MiB more than in runs where they were not first). This
    kernel absorbs them. A failure is printed, not raised: the shapes still run, the first
    one's DRAM writes may then carry the residue.

    Args:
        device: a CUDA ``torch.device``.
    """
    import torch

    try:
        scratch = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=device)  # (FLUSH_BYTES / 4,) fp32
        with profiled_range(FLUSH_TAG):
            scratch.sum()
        del scratch
    except Exception as exc:
        print(f"[iomodel child] sacrificial first kernel failed ({type(exc).__name__}: {exc}); the first "
              "shape's DRAM writes may include dirty lines that are not its own", flush=True)
    torch.cuda.empty_cache()


def _sdpa_call(impl: str, spec: LayerSpec, q: Any, k: Any, v: Any) -> Callable[[], Any]:
    """PyTorch SDPA pinned to the backend ``impl`` names (``sdpa-flash`` ...), through the one
    dispatcher (:func:`iomodel.bench.backends.attention_call`); bottom-right causal alignment
    with seqlen_q != seqlen_k reaches SDPA as ``causal_lower_right``."""
    from iomodel.bench.backends import attention_call
    from iomodel.bench.inputs import AttentionInputs

    mask, is_causal, kind = None, spec.causal, "is_causal" if spec.causal else "none"
    if spec.causal and spec.causal_align == "bottom-right" and spec.seqlen_q != spec.seqlen_k:
        from torch.nn.attention.bias import causal_lower_right

        mask, is_causal, kind = causal_lower_right(spec.seqlen_q, spec.seqlen_k), False, "causal-bottom-right"
    inp = AttentionInputs(q=q, k=k, v=v, causal=spec.causal, causal_align=spec.causal_align, attn_mask=mask,
                          sdpa_is_causal=is_causal, lengths=None, valid_rows=None, mask_kind=kind)
    return attention_call(impl, inp)


def impl_call(impl: str, spec: LayerSpec, q: Any, k: Any, v: Any,
              pinned: dict[str, Any] | None = None,
              paged: tuple[Any, Any] | None = None,
              varlen: tuple[Any, Any, int, int] | None = None,
              grid_order: str = "tiles-fastest", group_splits: int = 0, heads_per_program: int = 1,
              tile_order: str | None = None,
              ) -> tuple[Callable[[], Any], Callable[[], dict | None]]:
    """The zero-argument call of one implementation, and a function giving its config.

    Args:
        impl: a name of :data:`~iomodel.measure.records.IMPLS`.
        spec: the layer call (its sliding window, ``LayerSpec.window``, goes to the bundled kernel,
            its backward and the eager chain; SDPA takes none).
        q: ``(B, H, seqlen_q, HEAD_DIM)``; k, v: ``(B, H_kv, seqlen_k, HEAD_DIM)``, on one device.
        pinned: (``tiled`` only) ``KernelConfig`` fields to run instead of autotuning.
        paged: (``tiled``, ``spec.page_size`` set) ``(block_table, cache_seqlens)``, int32
            ``(B, max_pages)`` and ``(B,)``; k, v are then the page pools
            ``(num_blocks, page_size, H_kv, HEAD_DIM)`` (:func:`kernels.reference.random_paged_cache`).
        varlen: (``tiled``, a ragged batch) ``(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)``,
            int32 ``(B + 1,)`` each and two ints; q is then packed ``(total_q, H, HEAD_DIM)`` and
            k, v ``(total_k, H_kv, HEAD_DIM)``, run by ``kernels.flash_attention.flash_attention_varlen``.
        grid_order: (``tiled`` prefill) the kernel's program order (``KernelConfig.grid_order``);
            other than ``tiles-fastest`` it runs the pinned config, else the first autotune
            candidate (``kernels.heuristics.prefill_default``), in that order.
        group_splits: (``tiled`` training step) the dK/dV kernel's GQA group slices S, forced
            (:func:`training_call`); 0 lets the launcher pick.
        heads_per_program: (``tiled`` dense prefill forward) P > 1: the pinned config, else the ``prefill`` path's
            first autotune candidate, with P query heads of one KV head packed into each program
            (``KernelConfig.heads_per_program``: only that path packs), in ``grid_order``.
        tile_order: (``tiled`` dense prefill forward) ``forward`` or ``reverse``: the pinned config, else the first
            autotune candidate, in that query-tile order (``KernelConfig.tile_order``); None: the kernel chooses.

    Returns:
        ``(call, config)``: ``call()`` returns O ``(B, H, seqlen_q, HEAD_DIM)`` (with
        ``spec.backward``: runs the forward and the backward of one training step and returns
        the gradients, see :func:`training_call`); ``config()``, after a call, the configuration
        the launcher reported (``KernelConfig`` fields for ``tiled``, the score dtype for the
        eager chain, the backend for SDPA).

    Raises:
        IomodelError: an unknown implementation, a pinned config that is not a ``KernelConfig``,
            or an SDPA implementation asked for a window, a paged shape without its tables or with an
            implementation other than ``tiled``.
    """
    if spec.page_size is not None and impl != "tiled":
        raise IomodelError(f"{impl} reads no paged KV cache: measure a page_size shape with tiled")
    if varlen is not None and (impl != "tiled" or spec.backward or paged is not None):
        raise IomodelError(f"{impl}: a packed ragged batch runs the tiled forward only (no backward, no paged cache): "
                           "measure a seqlens shape with tiled, pass fwd")
    if (spec.page_size is None) != (paged is None):
        raise IomodelError("pass paged = (block_table, cache_seqlens) exactly when spec.page_size is set")
    if spec.backward:
        return training_call(impl, spec, q, k, v, pinned, group_splits)
    if impl == "tiled":
        from dataclasses import asdict, is_dataclass

        from kernels.flash_attention import flash_attention
        from kernels.heuristics import KernelConfig

        state: dict[str, Any] = {}
        kc = None
        if pinned:
            try:
                # a config recorded before the fused decode has no fused_combine: it ran the combine kernel
                kc = KernelConfig(**{"fused_combine": False, **{k_: pinned[k_] for k_ in CONFIG_KEYS if k_ in pinned}})
            except TypeError as exc:
                raise IomodelError(f"pinned config {pinned} is not a KernelConfig ({exc}): pin a recorded config") from exc
        if grid_order != "tiles-fastest" or heads_per_program > 1 or tile_order:  # a fixed config (the autotuner runs its own)
            from kernels import heuristics as hx
            from kernels.flash_attention import kernel_path

            if kc is None:
                path = ("prefill" if heads_per_program > 1 else  # the one path that packs query heads
                        kernel_path(q, k, v, spec.window is not None, causal=spec.causal))
                kc = hx.prefill_default(spec.head_dim, spec.dtype, spec.causal, path).config(path)
            kc = kc.with_(grid_order=grid_order, heads_per_program=heads_per_program)
            if tile_order:
                kc = kc.with_(tile_order=tile_order)

        def call():
            if varlen is not None:
                from kernels.flash_attention import flash_attention_varlen

                o, lse, cfg = flash_attention_varlen(q, k, v, *varlen, causal=spec.causal,
                                                     causal_align=spec.causal_align, window=spec.window,
                                                     config=kc, return_config=True)  # o: (total_q, H, d)
                state["cfg"] = cfg
                return o
            o, lse, cfg = flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, return_config=True,
                                          config=kc, window=spec.window,
                                          **({} if paged is None else {"block_table": paged[0], "cache_seqlens": paged[1]}))
            state["cfg"] = cfg
            return o

        def config():
            cfg = state.get("cfg")
            if hasattr(cfg, "to_dict"):  # a KernelConfig (its grid_order only when not the default)
                return cfg.to_dict()
            return asdict(cfg) if is_dataclass(cfg) else (dict(cfg) if cfg is not None else None)

        return call, config
    if impl in ("baseline", "baseline-fp32"):
        import torch

        from iomodel.spec.dtypes import eager_score_dtype
        from kernels.baseline import eager_attention

        score = torch.float32 if impl == "baseline-fp32" else None
        return (lambda: eager_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, score_dtype=score,
                                        window=spec.window)), (
            lambda: {"score_dtype": "fp32" if score is not None else eager_score_dtype(spec.dtype)}
        )
    if impl.startswith("sdpa-") and impl in IMPLS:
        if spec.window is not None:
            raise IomodelError(f"{impl} takes no sliding window: measure a window shape with tiled or baseline")
        return _sdpa_call(impl, spec, q, k, v), (lambda: {"backend": impl})
    raise IomodelError(f"unknown implementation {impl!r}: use one of {', '.join(IMPLS)}")


def training_call(impl: str, spec: LayerSpec, q: Any, k: Any, v: Any,
                  pinned: dict[str, Any] | None = None,
                  group_splits: int = 0) -> tuple[Callable[[], Any], Callable[[], dict | None]]:
    """One forward + backward step of ``impl`` (``spec.backward``), every kernel on this thread.

    ``tiled``: the bundled forward, then :func:`kernels.backward.flash_attention_backward`
    (its three kernels: D = rowsum(dO ∘ O), dK/dV, dQ), called directly so the profiled
    region holds exactly those four kernels. Other implementations: their forward and
    ``torch.autograd.grad`` with autograd's device threads off
    (``torch.autograd.set_multithreading_enabled(False)``), so the backward's kernels run on
    the calling thread, inside the NVTX range that tags them. dO is a seeded random tensor
    like O ``(B, H, seqlen_q, HEAD_DIM)``. ``group_splits`` > 0 (``tiled`` only) forces the dK/dV
    kernel's GQA group slices S on the launcher's own config for this device
    (``kernels.heuristics.backward_config``); the config reported says the S that ran.

    Returns:
        ``(call, config)`` as :func:`impl_call`; ``call()`` returns ``(dq, dk, dv)``.

    Raises:
        IomodelError: an unknown implementation; ``group_splits`` with another implementation.
    """
    import torch

    if group_splits and impl != "tiled":
        raise IomodelError(f"group_splits forces the bundled backward's GQA group slices; {impl} has none: measure "
                           "it without group_splits")

    do = torch.randn_like(q)  # (B, H, N_q, d)
    if impl == "tiled":
        from dataclasses import asdict

        from kernels.backward import flash_attention_backward
        from kernels.flash_attention import flash_attention
        from kernels.heuristics import KernelConfig

        fwd, fwd_config = impl_call(impl, spec.with_(backward=False), q, k, v, pinned)
        fwd()  # the forward's tiles (autotuning) resolved once, outside any profiled region,
        fwd()  # then the launch later calls keep (a causal layer's LPT order, kernels.flash_attention._lpt_config)
        kc = KernelConfig(**{k_: v_ for k_, v_ in (fwd_config() or {}).items() if k_ in CONFIG_KEYS})
        state: dict[str, Any] = {}
        bwd_config = None
        if group_splits:  # the launcher's own tiles and switches for this device, S forced
            from dataclasses import replace

            from kernels.heuristics import backward_config

            sm_major = torch.cuda.get_device_capability(q.device)[0] if q.is_cuda else None
            bwd_config = replace(backward_config(spec.head_dim, spec.dtype, spec.causal, interpreter=not q.is_cuda,
                                                 sm_major=sm_major), group_splits=group_splits)

        def step():
            o, lse = flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, config=kc,
                                     window=spec.window)
            dq, dk, dv, state["backward"] = flash_attention_backward(do, q, k, v, o, lse, spec.causal,
                                                                     spec.causal_align, return_config=True,
                                                                     window=spec.window, config=bwd_config)
            return dq, dk, dv

        def config():
            return {**asdict(kc), **({"backward": asdict(state["backward"])} if "backward" in state else {})}

        return step, config
    fwd, fwd_config = impl_call(impl, spec.with_(backward=False), q, k, v, pinned)
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]

    def grad_step():
        with torch.autograd.set_multithreading_enabled(False):
            o = impl_call(impl, spec.with_(backward=False), *leaves)[0]()
            return torch.autograd.grad(o, leaves, do)

    return grad_step, fwd_config


def run_child(shapes_file: str, manifest_file: str, device: str = "cuda") -> int:
    """Body of the profiled process: one warm-up and one profiled, NVTX-tagged call per shape.

    Writes ``manifest_file``: shape id -> ``{"config": ..., "error": ...}``. A shape that
    fails (out of memory, unsupported by a backend) records its error and the run goes on.

    Args:
        shapes_file: JSON list of :class:`~iomodel.measure.sweep.SweepShape` dicts.
        manifest_file: where to write the manifest (rewritten after every shape).
        device: ``cuda`` (under ncu); ``cpu`` runs the same calls without the profiler
            region and NVTX (tests, with ``TRITON_INTERPRET=1``).

    Returns:
        process exit status (0 when the loop finished, even if some shapes failed).
    """
    import torch

    shapes = [SweepShape.from_dict(d) for d in json.loads(Path(shapes_file).read_text())]
    manifest: dict[str, dict[str, Any]] = {}
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    if gpu:
        flush_l2(dev)
    for s in shapes:
        sp = s.spec
        entry: dict[str, Any] = {"config": None, "error": None}
        q = k = v = paged = varlen = None
        try:
            torch.manual_seed(s.seed)
            dt = torch_dtype(sp.dtype)
            if s.seqlens is not None:  # a packed ragged batch: sequences back to back, int32 cu_seqlens
                lens_q, lens_k = [p[0] for p in s.seqlens], [p[1] for p in s.seqlens]
                q = torch.randn(sum(lens_q), sp.heads, sp.head_dim, device=dev, dtype=dt)  # (total_q, H, d)
                k = torch.randn(sum(lens_k), sp.kv_heads, sp.head_dim, device=dev, dtype=dt)  # (total_k, H_kv, d)
                v = torch.randn_like(k)  # (total_k, H_kv, d)
                cu = lambda xs: torch.tensor([0, *itertools.accumulate(xs)], dtype=torch.int32, device=dev)  # noqa: E731
                varlen = (cu(lens_q), cu(lens_k), max(lens_q), max(lens_k))  # (B + 1,) each
            else:
                q = torch.randn(sp.batch, sp.heads, sp.seqlen_q, sp.head_dim, device=dev, dtype=dt)  # (B, H, N_q, d)
            if s.seqlens is not None:
                pass  # packed above
            elif sp.page_size is not None:  # a tight table, pages in random order, every sequence seqlen_k keys
                from kernels.reference import random_paged_cache

                g = torch.Generator(device=dev).manual_seed(s.seed)
                k, v, table, lens = random_paged_cache(sp.batch, sp.kv_heads, sp.head_dim, sp.page_size,
                                                       [sp.seqlen_k] * sp.batch, dt, g)  # (pages, page_size, H_kv, d)
                paged = (table, lens)
            else:
                k = torch.randn(sp.batch, sp.kv_heads, sp.seqlen_k, sp.head_dim, device=dev, dtype=dt)  # (B, H_kv, N_k, d)
                v = torch.randn_like(k)  # (B, H_kv, N_k, d)
            call, config = impl_call(s.impl, sp, q, k, v, s.config, paged, varlen, grid_order=s.grid_order,
                                     group_splits=s.group_splits, heads_per_program=s.heads_per_program,
                                     tile_order=s.tile_order)
            call()  # warm-up: compilation and autotuning, outside the profiled region
            with profiled_range(s.id) if gpu else contextlib.nullcontext():
                call()
            entry["config"] = config()
        except Exception as exc:  # recorded per shape; the batch goes on
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        finally:
            del q, k, v, paged, varlen
            if gpu:
                torch.cuda.empty_cache()
        manifest[s.id] = entry
        Path(manifest_file).write_text(json.dumps(manifest, indent=1))
        print(f"[iomodel child] {s.id}: {'ok' if entry['error'] is None else entry['error']}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m iomodel.measure.child SHAPES.json MANIFEST.json [--device cuda|cpu]``.

    Returns:
        the exit status of :func:`run_child` (argparse exits 2 itself on bad arguments).
    """
    parser = argparse.ArgumentParser(prog="python -m iomodel.measure.child",
                                     description="The process Nsight Compute profiles (started by the driver).")
    parser.add_argument("shapes", help="JSON list of the batch's shapes")
    parser.add_argument("manifest", help="JSON written after every shape: its config or error")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: the same calls without profiler region or NVTX (tests)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return run_child(args.shapes, args.manifest, args.device)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["FLUSH_BYTES", "flush_l2", "impl_call", "main", "profiled_range", "run_child"]
