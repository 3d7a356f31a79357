"""Count the global-memory traffic of Triton kernels run in Triton's interpreter (CPU).

This is the *measured* ``SRAM_fill`` level of iomodel (see ``iomodel/traffic/base.py``):
the bytes a kernel's programs request from global memory with ``tl.load`` and write with
``tl.store``, counted exactly, on any machine without a GPU.

How it counts (triton 3.6, ``triton/runtime/interpreter.py``): every load and store of the
interpreter funnels through ``InterpreterBuilder.create_masked_load`` and
``create_masked_store`` (plain ``create_load``/``create_store``, block-pointer loads and
stores, and tensor-descriptor (TMA) loads, stores, gathers and scatters all call them);
atomics go through ``create_atomic_rmw``/``create_atomic_cas``. While a
:class:`TrafficCounter` is active these methods are wrapped: for each call the counter
takes the addresses of the **mask-true** elements, multiplies their number by the element
size (``primitive_bitwidth / 8`` of the pointer's element type, 1 byte for ``int1``) and
attributes them to the kernel argument whose allocation the address falls in. Kernel
arguments are captured at launch (``GridExecutor._init_args_hst``), so each address is
mapped to the tensor argument it was derived from: first by the tensor's own extent
(``data_ptr`` to its last element), then by its whole storage (a view's base buffer).

Nothing here models caches: an element requested twice is counted twice, exactly as the
model's ``SRAM_fill`` rows count it (docs/traffic-contract.md).

Example::

    from iomodel.measure.interpret import TrafficCounter
    with TrafficCounter() as counter:
        o, lse = flash_attention(q, k, v)
    per_tensor = counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse})
    per_tensor["K"].read_bytes   # bytes of K requested by all programs of all launches

``TRITON_INTERPRET=1`` must be set before ``triton.jit`` decorates a kernel, i.e. before
the kernel's module is imported; :func:`require_interpreter` checks it.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

import numpy as np

from iomodel.errors import IomodelError
from iomodel.spec.dtypes import torch_dtype

#: Name under which bytes whose address lies in no kernel argument are recorded.
OUTSIDE = "<outside any argument>"


@dataclass
class TensorTraffic:
    """Bytes and elements one tensor (kernel argument) moved, summed over programs.

    Units: bytes and element counts; ``loads``/``stores`` count interpreter calls (one per
    ``tl.load``/``tl.store`` executed by one program).

    Attributes:
        name: kernel argument name, or the label given by :meth:`TrafficCounter.by_tensor`.
        read_bytes: mask-true elements loaded x element size, in bytes.
        write_bytes: mask-true elements stored x element size, in bytes.
        read_elements: mask-true elements loaded.
        write_elements: mask-true elements stored.
        atomic_bytes: bytes touched by atomics (also included in read and write bytes).
        loads: load operations that requested at least one element of this tensor.
        stores: store operations that wrote at least one element of this tensor.
    """

    name: str
    read_bytes: int = 0
    write_bytes: int = 0
    read_elements: int = 0
    write_elements: int = 0
    atomic_bytes: int = 0
    loads: int = 0
    stores: int = 0

    def add(self, other: "TensorTraffic") -> None:
        """Add another record's counts into this one (in place)."""
        for f in fields(self)[1:]:  # every count, after the name
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the counts in bytes, elements and operations (every field but the name)."""
        return {f.name: getattr(self, f.name) for f in fields(self)[1:]}


@dataclass
class _Region:
    """One tensor kernel argument's address ranges (bytes, host addresses in the interpreter)."""

    name: str
    lo: int  # first byte of the tensor's own extent
    hi: int  # one past its last byte
    storage_lo: int  # first byte of the whole storage (allocation)
    storage_hi: int
    dtype: str
    shape: tuple[int, ...]


@dataclass
class LaunchTraffic:
    """The counted traffic of one kernel launch (one grid), per kernel argument.

    Attributes:
        kernel: the ``@triton.jit`` function's name.
        grid: the launch grid ``(x, y, z)`` (programs per axis).
        regions: tensor arguments in signature order with their address ranges.
        tensors: kernel-argument name -> :class:`TensorTraffic` summed over all programs.
        programs: only with ``per_program=True``: ``(x, y, z)`` -> argument name ->
            :class:`TensorTraffic` of that program.
    """

    kernel: str
    grid: tuple[int, int, int]
    regions: list[_Region]
    tensors: dict[str, TensorTraffic] = field(default_factory=dict)
    programs: dict[tuple[int, int, int], dict[str, TensorTraffic]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: kernel name, grid and per-argument counts (bytes)."""
        return {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "tensors": {k: v.to_dict() for k, v in self.tensors.items()},
        }


def _extent(t: Any) -> tuple[int, int, int, int]:
    """Byte ranges ``(lo, hi, storage_lo, storage_hi)`` of a torch tensor's extent and storage."""
    es = t.element_size()
    lo = t.data_ptr()
    if t.numel() == 0:
        span = 0
    else:
        span = (sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) + 1) * es
    storage = t.untyped_storage()
    return lo, lo + span, storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _tensor_of(arg: Any) -> Any | None:
    """The torch tensor behind a kernel argument (tensor, TensorWrapper, TensorDescriptor)."""
    base = getattr(arg, "base", None)  # triton TensorWrapper / TensorDescriptor
    if base is not None and hasattr(base, "data_ptr"):
        return base
    if hasattr(arg, "data_ptr") and hasattr(arg, "untyped_storage"):
        return arg
    return None


def _regions(fn: Any, args: tuple, kwargs: dict) -> list[_Region]:
    try:
        bound = inspect.getcallargs(fn, *args, **kwargs)
    except TypeError:  # signature mismatch: fall back to positional names
        bound = {f"arg{i}": a for i, a in enumerate(args)} | dict(kwargs)
    out: list[_Region] = []
    for name, arg in bound.items():
        items = arg if isinstance(arg, tuple) else (arg,)
        for j, item in enumerate(items):
            t = _tensor_of(item)
            if t is None:
                continue
            lo, hi, slo, shi = _extent(t)
            label = name if len(items) == 1 else f"{name}[{j}]"
            out.append(_Region(label, lo, hi, slo, shi, str(t.dtype).removeprefix("torch."), tuple(t.shape)))
    return out


def _element_bytes(ptr_handle: Any) -> int:
    """Element size in bytes of what a pointer handle points to (int1 is stored as 1 byte)."""
    ty = ptr_handle.get_element_ty()
    return max(1, ty.primitive_bitwidth // 8)


class TrafficCounter:
    """Context manager that counts every global load and store of interpreted Triton kernels.

    Each launch inside the ``with`` block becomes one :class:`LaunchTraffic` in
    :attr:`launches`. Counting is exact: bytes = mask-true elements x element size.

    Args:
        per_program: also keep the counts of every program (``(x, y, z)`` grid index);
            costs memory proportional to the grid.

    Raises:
        IomodelError: triton is not installed, or counters are nested.
    """

    _active: "TrafficCounter | None" = None

    def __init__(self, per_program: bool = False) -> None:
        self.per_program = per_program
        self.launches: list[LaunchTraffic] = []
        self._current: LaunchTraffic | None = None
        self._saved: list[tuple[Any, str, Any]] = []

    # ----- patching -----
    def __enter__(self) -> "TrafficCounter":
        try:
            from triton.runtime import interpreter as interp
        except ImportError:  # pragma: no cover - triton is a declared extra
            raise IomodelError("counting loads needs triton: pip install -e '.[kernels]'") from None
        if TrafficCounter._active is not None:
            raise IomodelError("a TrafficCounter is already active: do not nest them")
        TrafficCounter._active = self
        counter = self
        B = interp.InterpreterBuilder
        GE = interp.GridExecutor
        orig_init, orig_call = GE._init_args_hst, GE.__call__

        def counted(name: str, kind: str, ptr: str, mask: str | None):
            """The builder method ``name``, counting the elements its ``ptr`` argument addresses."""
            orig = getattr(B, name)
            sig = inspect.signature(orig)

            def method(self, *args, **kwargs):
                bound = sig.bind(self, *args, **kwargs).arguments
                counter._count(self, bound[ptr], bound[mask] if mask else None, kind)
                return orig(self, *args, **kwargs)

            return method

        def _init_args_hst(self, args_dev, kwargs):
            args_hst, kwargs_hst = orig_init(self, args_dev, kwargs)
            grid = self.grid if not callable(self.grid) else None
            counter._begin(self.fn, args_hst, kwargs_hst, grid)
            return args_hst, kwargs_hst

        def __call__(self, *args_dev, **kwargs):
            try:
                return orig_call(self, *args_dev, **kwargs)
            finally:
                counter._end()

        for obj, name, new in (
            (B, "create_masked_load", counted("create_masked_load", "read", "ptrs", "mask")),
            (B, "create_masked_store", counted("create_masked_store", "write", "ptrs", "mask")),
            (B, "create_atomic_rmw", counted("create_atomic_rmw", "atomic", "ptr", "mask")),
            (B, "create_atomic_cas", counted("create_atomic_cas", "atomic", "ptr", None)),
            (GE, "_init_args_hst", _init_args_hst),
            (GE, "__call__", __call__),
        ):
            self._saved.append((obj, name, obj.__dict__[name]))
            setattr(obj, name, new)
        return self

    def __exit__(self, *exc: Any) -> None:
        for obj, name, old in reversed(self._saved):
            setattr(obj, name, old)
        self._saved.clear()
        TrafficCounter._active = None

    # ----- bookkeeping -----
    def _begin(self, fn: Any, args: Iterable, kwargs: dict, grid: Any) -> None:
        name = getattr(fn, "__name__", str(fn))
        self._current = LaunchTraffic(kernel=name, grid=(0, 0, 0), regions=_regions(fn, tuple(args), kwargs))

    def _end(self) -> None:
        if self._current is not None:
            self.launches.append(self._current)
            self._current = None

    def _attribute(self, addrs: np.ndarray) -> dict[str, int]:
        """Split addresses among the launch's regions; returns name -> element count."""
        launch = self._current
        assert launch is not None
        counts: dict[str, int] = {}
        left = np.ones(addrs.shape, dtype=bool)
        for attr_lo, attr_hi in (("lo", "hi"), ("storage_lo", "storage_hi")):
            for r in launch.regions:
                if not left.any():
                    break
                lo, hi = getattr(r, attr_lo), getattr(r, attr_hi)
                hit = left & (addrs >= lo) & (addrs < hi)
                n = int(np.count_nonzero(hit))
                if n:
                    counts[r.name] = counts.get(r.name, 0) + n
                    left &= ~hit
        n_out = int(np.count_nonzero(left))
        if n_out:
            counts[OUTSIDE] = n_out
        return counts

    def _count(self, builder: Any, ptrs: Any, mask: Any, kind: str) -> None:
        launch = self._current
        if launch is None:  # a load outside a launch (device-function call): ignore
            return
        data = np.asarray(ptrs.data)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask.data, dtype=bool), data.shape)
            addrs = data[m]
        else:
            addrs = data.reshape(-1)
        if launch.grid == (0, 0, 0):
            launch.grid = tuple(int(g) for g in builder.grid_dim)  # type: ignore[assignment]
        es = _element_bytes(ptrs)
        per_arg = self._attribute(addrs.astype(np.uint64, copy=False))
        targets = [launch.tensors]
        if self.per_program:
            targets.append(launch.programs.setdefault(tuple(builder.grid_idx), {}))
        for name, n in per_arg.items():
            for table in targets:
                rec = table.setdefault(name, TensorTraffic(name))
                if kind in ("read", "atomic"):
                    rec.read_bytes += n * es
                    rec.read_elements += n
                    rec.loads += 1
                if kind in ("write", "atomic"):
                    rec.write_bytes += n * es
                    rec.write_elements += n
                    rec.stores += 1
                if kind == "atomic":
                    rec.atomic_bytes += n * es

    # ----- results -----
    def by_argument(self, kernel: str | None = None) -> dict[str, TensorTraffic]:
        """Counts summed over launches (optionally of one kernel), keyed by kernel argument name.

        Units: bytes and elements (see :class:`TensorTraffic`).
        """
        out: dict[str, TensorTraffic] = {}
        for launch in self.launches:
            if kernel is not None and launch.kernel != kernel:
                continue
            for name, rec in launch.tensors.items():
                out.setdefault(name, TensorTraffic(name)).add(rec)
        return out

    def by_tensor(self, named: Mapping[str, Any], kernel: str | None = None) -> dict[str, TensorTraffic]:
        """Counts summed over launches, keyed by the caller's names for the tensors' allocations.

        Each kernel argument is relabelled with the name of the tensor in ``named`` whose
        extent (else whose storage) contains the argument's first byte (so ``O`` allocated inside a launcher
        and returned to the caller gets its name here). Arguments that match no named
        tensor keep their kernel argument name (e.g. a split-KV partial buffer).

        Args:
            named: label -> torch tensor (``{"Q": q, "K": k, "V": v, "O": o, "LSE": lse}``).
            kernel: only launches of this kernel name.

        Returns:
            label -> :class:`TensorTraffic` (bytes, elements).
        """
        ranges = [(label, *_extent(t)) for label, t in named.items()]
        out: dict[str, TensorTraffic] = {}
        for launch in self.launches:
            if kernel is not None and launch.kernel != kernel:
                continue
            relabel: dict[str, str] = {}
            for r in launch.regions:
                # the named tensor whose own extent holds the argument's first byte, else whose storage does
                for first, second in ((1, 2), (3, 4)):
                    hit = next((rg[0] for rg in ranges if rg[first] <= r.lo < rg[second] or r.lo == rg[first]), None)
                    if hit is not None:
                        relabel[r.name] = hit
                        break
            for name, rec in launch.tensors.items():
                label = relabel.get(name, name)
                tgt = out.setdefault(label, TensorTraffic(label))
                tgt.add(rec)
        return out

    def kernels(self) -> list[str]:
        """Names of the kernels launched, in launch order (repeats kept)."""
        return [launch.kernel for launch in self.launches]


def interpreter_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` is set to a true value in this process."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def require_interpreter(*jitted: Any) -> None:
    """Check that Triton kernels were decorated in interpreter mode.

    Args:
        jitted: ``@triton.jit`` objects (or objects with a ``.fn`` chain, e.g. autotuners).

    Raises:
        IomodelError: a kernel was compiled for the GPU (``TRITON_INTERPRET=1`` was not set
            before its module was imported).
    """
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover
        raise IomodelError("counting loads needs triton: pip install -e '.[kernels]'") from None
    for k in jitted:
        obj = k
        while not isinstance(obj, InterpretedFunction) and hasattr(obj, "fn"):
            obj = obj.fn
        if not isinstance(obj, InterpretedFunction):
            raise IomodelError(
                f"kernel {getattr(k, '__name__', k)!r} was compiled for the GPU, not the interpreter: "
                "set TRITON_INTERPRET=1 before importing the kernel module (e.g. run with TRITON_INTERPRET=1)"
            )


def _kernels_module() -> Any:
    """Import ``kernels.flash_attention`` in interpreter mode (setting TRITON_INTERPRET=1 first if unset)."""
    import sys

    mod = sys.modules.get("kernels.flash_attention")
    if mod is None:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        import kernels.flash_attention as mod  # noqa: F811
    if not getattr(mod, "INTERPRET", False):
        raise IomodelError(
            "kernels.flash_attention was imported for the GPU, not the interpreter: set TRITON_INTERPRET=1 "
            "before importing it (e.g. run with TRITON_INTERPRET=1)"
        )
    return mod


def count_flash_attention(spec: Any, seed: int = 0, config: Any = None, path: str | None = None) -> tuple[dict[str, TensorTraffic], Any, "TrafficCounter"]:
    """Run the bundled kernel on one shape in the interpreter and count its traffic per tensor.

    Inputs are random (seeded) CPU tensors: q ``(B, H, N_q, d)``, k and v ``(B, H_kv, N_k, d)``
    in ``spec.dtype``; the spec's sliding window (``LayerSpec.window``) is passed on. The kernel's launches (the forward or split-KV decode kernel, and the
    combine kernel when ``num_splits > 1``) are all counted; counts are labelled with the
    model's tensor names: ``Q, K, V, O, LSE`` by allocation, internal buffers by their kernel
    argument name (``O_PART``, ``LSE_PART``).

    Args:
        spec: an :class:`iomodel.spec.LayerSpec` (forward only).
        seed: torch seed of the random inputs.
        config: a ``KernelConfig`` to run instead of the launcher's choice (None: its choice).
        path: force a kernel path (``prefill``, ``prefill-tma``, ``decode-split-kv``); None: the launcher's.

    Returns:
        (per-tensor :class:`TensorTraffic` in bytes, the ``KernelConfig`` that ran, the counter).

    Raises:
        IomodelError: torch or triton is missing, the kernel module was compiled for the GPU,
            a backward pass is asked for, or the kernel rejects the shape.
    """
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise IomodelError("counting the kernel needs torch: pip install -e '.[kernels]'") from None
    if spec.backward:
        raise IomodelError("count_flash_attention counts the forward kernel only: use --pass fwd, or "
                           "count_flash_attention_backward for pass fwd+bwd")
    fa = _kernels_module()
    from iomodel.schedule.capabilities import kernel_refusal  # what the bundled kernel runs

    reason = kernel_refusal(spec)
    if reason is not None:
        raise IomodelError(reason)
    g = torch.Generator().manual_seed(seed)
    dt = torch_dtype(spec.dtype)
    q = torch.randn(spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, generator=g).to(dt)  # (B, H, N_q, d)
    if spec.page_size is not None:  # paged: a tight table, every sequence spec.seqlen_k keys
        return count_flash_attention_paged(q, spec, [spec.seqlen_k] * spec.batch, g, config=config)
    k = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g).to(dt)  # (B, H_kv, N_k, d)
    v = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g).to(dt)  # (B, H_kv, N_k, d)
    with TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align,
                                         return_config=True, config=config, path=path, window=spec.window)
    return counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse}), cfg, counter


def count_flash_attention_varlen(spec: Any, seed: int = 0, config: Any = None,
                                 seqused_k: Any = None) -> tuple[dict[str, TensorTraffic], Any, "TrafficCounter"]:
    """Run ``flash_attention_varlen`` on a ragged batch in the interpreter and count its traffic.

    Inputs are random (seeded) packed CPU tensors in ``spec.layer.dtype``: q ``(total_q, H, d)``,
    k and v ``(total_k, H_kv, d)`` with ``total_k`` = sum of the key lengths (or of
    ``seqused_k``'s sequence lengths when given: then sequence b holds ``seqused_k[b][1]`` keys
    of which the first ``spec.seqlens[b][1]`` are used); int32 cu_seqlens.

    Args:
        spec: a :class:`iomodel.spec.ragged.RaggedSpec`.
        seed: torch seed of the random inputs.
        config: a ``KernelConfig`` (None: the launcher's choice).
        seqused_k: None, or the key lengths stored per sequence (ints >= 1 and >= the used
            lengths of ``spec``): the call then passes ``seqused_k`` = the spec's key lengths. A
            spec with a sequence that uses no key (N_k = 0) needs it (cu_seqlens_k gives every
            sequence >= 1 stored key).

    Returns:
        (label -> :class:`TensorTraffic` in bytes with labels ``Q, K, V, O, LSE,
        cu_seqlens_q, cu_seqlens_k, seqused_k``, the ``KernelConfig`` that ran, the counter).

    Raises:
        IomodelError: torch or triton missing, the kernel module compiled for the GPU, or
            the kernel rejects the batch.
    """
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise IomodelError("counting the kernel needs torch: pip install -e '.[kernels]'") from None
    fa = _kernels_module()
    lay = spec.layer
    used = [k for _, k in spec.seqlens]
    stored = used if seqused_k is None else list(seqused_k)
    lens_q = [q for q, _ in spec.seqlens]
    g = torch.Generator().manual_seed(seed)
    dt = torch_dtype(lay.dtype)
    q = torch.randn(sum(lens_q), lay.heads, lay.head_dim, generator=g).to(dt)  # (total_q, H, d)
    k = torch.randn(sum(stored), lay.kv_heads, lay.head_dim, generator=g).to(dt)  # (total_k, H_kv, d)
    v = torch.randn(sum(stored), lay.kv_heads, lay.head_dim, generator=g).to(dt)  # (total_k, H_kv, d)
    cu_q = torch.tensor([0, *np.cumsum(lens_q).tolist()], dtype=torch.int32)  # (B + 1,)
    cu_k = torch.tensor([0, *np.cumsum(stored).tolist()], dtype=torch.int32)  # (B + 1,)
    su = None if seqused_k is None else torch.tensor(used, dtype=torch.int32)  # (B,)
    with TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention_varlen(q, k, v, cu_q, cu_k, spec.max_seqlen_q, max(stored),
                                                causal=lay.causal, causal_align=lay.causal_align,
                                                window=lay.window, seqused_k=su, config=config, return_config=True)
    named = {"Q": q, "K": k, "V": v, "O": o, "LSE": lse, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
    if su is not None:
        named["seqused_k"] = su
    return counter.by_tensor(named), cfg, counter


def count_flash_attention_paged(q: Any, spec: Any, seqlens: list[int], generator: Any, config: Any = None,
                                max_pages: int | None = None) -> tuple[dict[str, TensorTraffic], Any, "TrafficCounter"]:
    """Count the paged decode on ``q`` ``(B, H, N_q, d)`` over a random paged cache
    (:func:`kernels.reference.random_paged_cache`: ``spec.page_size`` tokens per page, sequence b
    holding ``seqlens[b]`` keys, pages in random order). Labels: ``Q, K, V, O, LSE, BLOCK_TABLE,
    CACHE_SEQLENS`` by allocation, the split-KV partials by argument name. Units: bytes.

    Returns and raises as :func:`count_flash_attention`.
    """
    fa = _kernels_module()
    from kernels.reference import random_paged_cache

    k, v, table, lens = random_paged_cache(spec.batch, spec.kv_heads, spec.head_dim, spec.page_size, seqlens, q.dtype,
                                           generator, max_pages)
    with TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align,
                                         return_config=True, config=config, block_table=table, cache_seqlens=lens)
    named = {"Q": q, "K": k, "V": v, "O": o, "LSE": lse, "BLOCK_TABLE": table, "CACHE_SEQLENS": lens}
    return counter.by_tensor(named), cfg, counter


#: Kernel-argument names of the backward's internal buffers -> the traffic model's tensor names.
#: DK, DV: the arguments of ``_bwd_dkdv`` (stores) and ``_bwd_reduce_dkdv`` (loads) that point at
#: the fp32 group-slice workspace when S > 1 (pointing at dk, dv they are relabelled dK, dV by
#: allocation first, :meth:`TrafficCounter.by_tensor`).
BACKWARD_BUFFERS = {"DELTA": "Delta", "DQ_ACC": "dQ_acc", "DK": "dK_part", "DV": "dV_part"}


def count_flash_attention_backward(
    spec: Any, seed: int = 0, config: Any = None, backward_config: Any = None,
) -> tuple[dict[str, dict[str, TensorTraffic]], Any, Any, "TrafficCounter"]:
    """Run the bundled forward then backward kernels on one shape in the interpreter; count per kernel.

    Inputs are random (seeded) CPU tensors: q, dO ``(B, H, N_q, d)``, k and v ``(B, H_kv, N_k, d)``
    in ``spec.dtype``. The forward runs its prefill path (``path="prefill"``, what the
    ``fwd+bwd`` model counts, also for seqlen_q <= 16), then
    ``kernels.backward.flash_attention_backward`` with ``backward_config``. Counts are
    labelled with the model's tensor names (``Q, K, V, O, LSE, dO, dQ, dK, dV`` by
    allocation, the internal buffers by :data:`BACKWARD_BUFFERS`), per launched kernel
    (``_attn_fwd``, ``_bwd_preprocess``, ``_bwd_dkdv``, ``_bwd_dq``), as
    :func:`iomodel.traffic.tiled_bwd.sram_fill_by_kernel` gives the model's.

    Args:
        spec: an :class:`iomodel.spec.LayerSpec` of a prefill layer (pass fwd+bwd or fwd).
        seed: torch seed of the random inputs.
        config: the forward's ``KernelConfig`` (None: the launcher's choice).
        backward_config: a ``kernels.heuristics.BackwardConfig`` (None: ``backward_config()``,
            the interpreter tiles ``INTERPRETER_BACKWARD``).

    Returns:
        (kernel name -> label -> :class:`TensorTraffic` in bytes, the forward ``KernelConfig``
        that ran, the ``BackwardConfig`` that ran, the counter).

    Raises:
        IomodelError: torch or triton is missing, the kernel modules were compiled for the
            GPU, a decode spec, or the kernels reject the shape.
    """
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise IomodelError("counting the kernel needs torch: pip install -e '.[kernels]'") from None
    if spec.phase != "prefill":
        raise IomodelError("the backward runs after a prefill forward: use --phase prefill")
    fa = _kernels_module()
    import kernels.backward as kb

    g = torch.Generator().manual_seed(seed)
    dt = torch_dtype(spec.dtype)
    q = torch.randn(spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, generator=g).to(dt)  # (B, H, N_q, d)
    k = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g).to(dt)  # (B, H_kv, N_k, d)
    v = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g).to(dt)  # (B, H_kv, N_k, d)
    do = torch.randn(spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, generator=g).to(dt)  # (B, H, N_q, d)
    with TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align,
                                         return_config=True, config=config, path="prefill", window=spec.window)
        dq, dk, dv, bcfg = kb.flash_attention_backward(do, q, k, v, o, lse, spec.causal, spec.causal_align,
                                                       config=backward_config, return_config=True,
                                                       window=spec.window)
    named = {"Q": q, "K": k, "V": v, "O": o, "LSE": lse, "dO": do, "dQ": dq, "dK": dk, "dV": dv}
    per_kernel: dict[str, dict[str, TensorTraffic]] = {}
    for name in dict.fromkeys(counter.kernels()):
        for label, rec in counter.by_tensor(named, kernel=name).items():
            label = BACKWARD_BUFFERS.get(label, label)
            per_kernel.setdefault(name, {}).setdefault(label, TensorTraffic(label)).add(rec)
    return per_kernel, cfg, bcfg, counter


__all__ = [
    "BACKWARD_BUFFERS",
    "LaunchTraffic",
    "count_flash_attention",
    "count_flash_attention_backward",
    "count_flash_attention_varlen",
    "count_flash_attention_paged",
    "OUTSIDE",
    "TensorTraffic",
    "TrafficCounter",
    "interpreter_enabled",
    "require_interpreter",
]
