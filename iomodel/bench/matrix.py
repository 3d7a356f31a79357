"""Versioned shape-matrix files: the attention calls a benchmark sweeps.

A shape matrix is a TOML file (bundled ones live in ``iomodel/bench/matrices/``) of one of
two kinds:

* a bucket matrix (:class:`ShapeMatrix`, ``cpu-v1.toml``, ``cuda-v1.toml``, ``cpu-v2.toml``,
  ``cuda-v2.toml``): a ``version``, timing settings, a representative request
  (``[workload]``) and buckets with traffic weights. Each bucket fixes the phase (prefill or
  decode), the pass (``pass = "fwd"``, the default, or ``"fwd+bwd"``: a training bucket,
  timed as forward + backward with gradients checked; version 2 files only), masking (causal
  top-left / bottom-right, or a key-padding mask for padded ragged batches), the heads
  (H, H_kv for GQA), HEAD_DIM and dtype, and lists shapes ``(B, seqlen_q, seqlen_k)``;
  :mod:`iomodel.bench.harness` runs it against the accuracy and speedup policy. A version 2
  file may also name the policy version it is checked under (``policy = 2``).
* a kernel-speed matrix (:class:`SpeedMatrix`, ``kind = "kernel-speed"``,
  ``kernel-speed-v1.toml``): a prefill grid (B * seqlen tokens per call, HEAD_DIMs,
  seqlens, dtypes, causal) and a decode grid (batches, GQA heads, KV lengths);
  :mod:`iomodel.bench.speed` times the bundled kernel against every pinned SDPA backend
  on it.

Tensors: Q ``(B, H, seqlen_q, HEAD_DIM)``; K, V ``(B, H_kv, seqlen_k, HEAD_DIM)``.

Every schema error raises :class:`~iomodel.errors.IomodelError` with one sentence naming
the file, the bucket and the line where it can be found, and what to change.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from iomodel.errors import IomodelError
from iomodel.paths import toml_loads
from iomodel.spec import CAUSAL_ALIGNS, FP32_WIDTH, PASSES, PHASES, canonical_dtype

#: Folder of the bundled shape matrices (package data).
MATRICES_DIR = Path(__file__).resolve().parent / "matrices"

#: Bundled matrix per device when ``--matrix`` is not given.
DEFAULT_MATRIX = {"cpu": "cpu", "cuda": "cuda"}
#: What a bare bundled name means: the version the committed receipts were made with. Newer
#: versions are named in full (``--matrix cuda-v2``), so a new file never changes what an old
#: command runs.
MATRIX_ALIASES = {"cpu": "cpu-v1", "cuda": "cuda-v1", "kernel-speed": "kernel-speed-v1"}

#: Highest matrix-file schema version this code reads (2 adds ``pass`` per bucket and ``policy``).
MATRIX_SCHEMA_VERSION = 2
#: Keys a bucket matrix may use only from schema version 2 on (top level, then per bucket).
_V2_TOP_KEYS = {"policy"}
_V2_BUCKET_KEYS = {"pass"}

_TOP_KEYS = {"version", "name", "device", "seed", "description", "timing", "workload", "bucket", *_V2_TOP_KEYS}
#: ``kind`` of a kernel-speed matrix (a bucket matrix has no ``kind``).
SPEED_KIND = "kernel-speed"
_SPEED_TOP_KEYS = {"version", "kind", "name", "device", "description", "backends", "math_limit_bytes", "timing",
                   "prefill", "decode"}
_SPEED_TIMING_KEYS = {"rounds", "warmup_ms", "rep_ms", "decode_rep_ms"}
_PREFILL_GRID_KEYS = {"tokens", "heads", "head_dims", "seqlens", "dtypes", "causal"}
_DECODE_GRID_KEYS = {"batches", "heads", "kv_heads", "head_dim", "seqlens_k", "dtypes"}
#: Dtypes of the kernel-speed grids (the tensor-core dtypes both the kernel and SDPA's fused backends take).
SPEED_DTYPES = ("fp16", "bf16")
_TIMING_KEYS = {"warmup", "reps", "l2_flush_bytes"}
#: How far outside a workload bucket's measured sizes the request estimate may reach (a factor each way): the
#: prefill time extends the end segment's power law and decode scales linearly (``iomodel.bench.receipt._interp``),
#: which says nothing of a prompt 10^6 times the measured ones; further out the matrix is refused.
MAX_WORKLOAD_EXTRAPOLATION = 4
#: Most layers a workload's request may run through (the largest published models have a few hundred).
MAX_WORKLOAD_LAYERS = 10_000
_WORKLOAD_KEYS = {"prompt_len", "output_len", "layers", "prefill_bucket", "decode_bucket", "note"}
_BUCKET_KEYS = {
    "name", "weight", "phase", "causal", "causal_align", "heads", "kv_heads", "head_dim", "dtype",
    "shapes", "note", *_V2_BUCKET_KEYS,
}
_SHAPE_KEYS = {"batch", "seqlen_q", "seqlen_k", "lengths"}
#: Dtypes the harness can make tensors of (fp8 has no SDPA path).
BENCH_DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Shape:
    """One attention call of a bucket.

    ``lengths`` (optional, one per sequence) are the valid key lengths of a padded ragged
    batch: keys ``n >= lengths[b]`` are masked out with a key-padding ``attn_mask``; for
    prefill the same lengths also bound the valid query rows (padded query rows are
    computed, as a padded batch does, but excluded from the error statistics).
    """

    batch: int  # B, sequences in the call
    seqlen_q: int  # query rows per sequence (padded length)
    seqlen_k: int  # key rows per sequence (padded length)
    lengths: tuple[int, ...] | None = None  # valid lengths per sequence, None = dense

    @property
    def padded(self) -> bool:
        return self.lengths is not None

    def useful_tokens(self, phase: str) -> int:
        """Query tokens that are real (not padding): B*seqlen_q, or sum(lengths) for padded prefill."""
        if self.lengths is not None and phase == "prefill":
            return int(sum(self.lengths))
        return self.batch * self.seqlen_q

    def label(self) -> str:
        s = f"B={self.batch} Nq={self.seqlen_q} Nk={self.seqlen_k}"
        if self.lengths is not None:
            s += " lengths=" + ",".join(str(x) for x in self.lengths)
        return s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lengths"] = list(self.lengths) if self.lengths is not None else None
        return d


@dataclass(frozen=True)
class Bucket:
    """A class of attention calls with a traffic weight (fraction of calls in the workload)."""

    name: str
    weight: float  # traffic weight; the weights of a matrix sum to 1
    phase: str  # "prefill" or "decode"
    causal: bool
    causal_align: str  # "top-left" (PyTorch is_causal) or "bottom-right" (KV-cache decode)
    heads: int  # H
    kv_heads: int  # H_kv (GQA when < H)
    head_dim: int  # HEAD_DIM
    dtype: str  # canonical dtype name
    shapes: tuple[Shape, ...]
    note: str = ""
    line: int | None = None  # line of the bucket's [[bucket]] header in the file
    passes: str = "fwd"  # the file's ``pass``: "fwd" (inference call) or "fwd+bwd" (training step)

    @property
    def gqa(self) -> bool:
        return self.kv_heads < self.heads

    @property
    def training(self) -> bool:
        """Whether the bucket times forward + backward (``pass = "fwd+bwd"``)."""
        return self.passes == "fwd+bwd"

    def flops(self, shape: Shape) -> int:
        """Conventional FLOPs of one call of ``shape``: 4·B·H·HEAD_DIM·(visible pairs) forward,
        × 3.5 for a training bucket (backward 2.5× forward).

        The one formula is :func:`iomodel.traffic.bounds.useful_flops` (FlashAttention-2,
        Dao 2023, Section 4.1, with the causal pairs counted exactly); padded key lengths are
        not counted out (a training bucket has none). Units: FLOPs.
        """
        return step_flops(shape.batch, self.heads, self.kv_heads, self.head_dim, shape.seqlen_q, shape.seqlen_k,
                          self.causal, self.causal_align, self.training)

    def signal(self) -> str:
        """A one-line description of what characterises the bucket (for the receipt's Signal column)."""
        ns = sorted({s.seqlen_k for s in self.shapes})
        span = f"{_tokens(ns[0])}" if len(ns) == 1 else f"{_tokens(ns[0])}–{_tokens(ns[-1])}"
        parts = ["training step (fwd+bwd)" if self.training else self.phase, f"{span} keys"]
        if self.causal:
            parts.append(f"causal {self.causal_align}")
        if self.gqa:
            parts.append(f"GQA {self.heads}/{self.kv_heads}")
        if any(s.padded for s in self.shapes):
            parts.append("padded ragged batch")
        parts.append(f"d={self.head_dim} {self.dtype}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("shapes", "passes")}
        d["pass"] = self.passes
        d["shapes"] = [s.to_dict() for s in self.shapes]
        return d


def step_flops(batch: int, heads: int, kv_heads: int, head_dim: int, seqlen_q: int, seqlen_k: int, causal: bool,
               causal_align: str, backward: bool) -> int:
    """FLOPs of one attention call, forward or forward + backward (see :meth:`Bucket.flops`).

    Evaluates :func:`iomodel.traffic.bounds.useful_flops` (the one statement of the FLOP
    convention) for the layer, exactly in integers. Units: FLOPs.

    Raises:
        IomodelError: sizes the layer spec refuses (non-positive, H not divisible by H_kv).
    """
    from iomodel.spec import LayerSpec
    from iomodel.traffic.base import SYM
    from iomodel.traffic.bounds import useful_flops
    from iomodel.traffic.compile import python_function

    spec = LayerSpec(batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, seqlen_q=seqlen_q,
                     seqlen_k=seqlen_k, causal=causal, causal_align=causal_align, backward=backward)
    args = (SYM.B, SYM.H, SYM.d, SYM.N_q, SYM.N_k)
    (flops,) = python_function(args, [useful_flops(spec)])(batch, heads, head_dim, seqlen_q, seqlen_k)
    return int(flops)


@dataclass(frozen=True)
class Workload:
    """A representative request, for the phase-weighted end-to-end estimate.

    Attention time per request = layers * (prefill(prompt_len) + sum over t < output_len of
    decode(seqlen_k = prompt_len + t)), each interpolated from the named buckets.
    """

    prompt_len: int  # prompt tokens per request
    output_len: int  # generated tokens per request
    layers: int  # attention layers the request passes through
    prefill_bucket: str
    decode_bucket: str
    note: str = ""


@dataclass(frozen=True)
class ShapeMatrix:
    """A parsed, validated shape-matrix file."""

    name: str
    version: int
    device: str  # the device the sizes were chosen for ("cpu" or "cuda"); informational
    seed: int
    warmup: int  # untimed calls per backend and shape before timing
    reps: int  # timed samples per backend and shape (interleaved across backends)
    l2_flush_bytes: int  # CUDA: bytes zeroed before each sample to evict L2 (0 = no flush)
    workload: Workload | None
    buckets: tuple[Bucket, ...]
    path: str = ""
    sha256: str = ""
    description: str = ""
    policy: int | None = None  # the policy version the file asks to be checked under (None: the current one)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "policy": self.policy,
            "device": self.device,
            "seed": self.seed,
            "path": self.path,
            "sha256": self.sha256,
            "description": self.description,
            "timing": {"warmup": self.warmup, "reps": self.reps, "l2_flush_bytes": self.l2_flush_bytes},
            "workload": asdict(self.workload) if self.workload else None,
            "buckets": [b.to_dict() for b in self.buckets],
        }


@dataclass(frozen=True)
class PrefillShape:
    """One kernel-speed prefill shape (self-attention, seqlen_q = seqlen_k, H_kv = H)."""

    batch: int  # B
    heads: int  # H (= H_kv)
    seqlen: int  # N
    head_dim: int  # HEAD_DIM
    causal: bool  # top-left
    dtype: str  # fp16 / bf16

    @property
    def flops(self) -> float:
        """Forward FLOPs ``4 * B * H * N * N * HEAD_DIM``, x 0.5 when causal (FlashAttention-2 paper, Section 4.1)."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f * 0.5 if self.causal else f

    @property
    def math_score_bytes(self) -> int:
        """Bytes of the fp32 score matrix SDPA MATH materialises: ``B * H * N^2 * 4``."""
        return self.batch * self.heads * self.seqlen * self.seqlen * FP32_WIDTH


@dataclass(frozen=True)
class DecodeShape:
    """One kernel-speed decode shape (seqlen_q query rows against a KV cache of seqlen_k)."""

    batch: int  # B
    heads: int  # H
    kv_heads: int  # H_kv
    seqlen_k: int  # KV cache length
    head_dim: int  # HEAD_DIM
    dtype: str  # fp16 / bf16
    seqlen_q: int = 1

    def bytes(self, width: int) -> int:
        """Compulsory HBM bytes: Q and O (``B * H * seqlen_q * HEAD_DIM`` each) + K and V
        (``B * H_kv * seqlen_k * HEAD_DIM`` each), x ``width`` bytes per element."""
        return (2 * self.batch * self.heads * self.seqlen_q + 2 * self.batch * self.kv_heads * self.seqlen_k) \
            * self.head_dim * width

    @property
    def math_score_bytes(self) -> int:
        """Bytes of the fp32 scores SDPA MATH materialises: ``B * H * seqlen_q * seqlen_k * 4``."""
        return self.batch * self.heads * self.seqlen_q * self.seqlen_k * FP32_WIDTH


@dataclass(frozen=True)
class SpeedMatrix:
    """A parsed kernel-speed matrix: the prefill and decode shapes and how to time them."""

    name: str
    version: int
    prefill: tuple[PrefillShape, ...]  # empty when the file has no [prefill] grid
    decode: tuple[DecodeShape, ...]  # empty when the file has no [decode] grid
    backends: tuple[str, ...]  # the bundled kernel and the pinned SDPA backends to time
    rounds: int  # interleaved rounds per shape (the median over rounds is reported)
    warmup_ms: float  # do_bench warm-up per sample, milliseconds
    rep_ms: float  # do_bench repetitions per prefill sample, milliseconds
    decode_rep_ms: float  # do_bench repetitions per decode sample, milliseconds
    math_limit_bytes: int  # skip SDPA MATH when its fp32 scores would exceed this many bytes
    grids: dict[str, Any] = field(default_factory=dict)  # the [prefill] and [decode] tables as written
    path: str = ""
    sha256: str = ""
    description: str = ""
    device: str = "cuda"

    def with_(self, **changes: Any) -> "SpeedMatrix":
        """A copy with some fields replaced (e.g. ``rounds``)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "kind": SPEED_KIND, "path": self.path,
                "sha256": self.sha256, "description": self.description, "backends": list(self.backends),
                "math_limit_bytes": self.math_limit_bytes,
                "timing": {"rounds": self.rounds, "warmup_ms": self.warmup_ms, "rep_ms": self.rep_ms,
                           "decode_rep_ms": self.decode_rep_ms}, **self.grids}


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


# ------------------------------------------------------------------------------------
# Line locator: where in the text a bucket, a key or a shape sits (for error messages)
# ------------------------------------------------------------------------------------


class _Lines:
    """Finds the line numbers of ``[[bucket]]`` headers, keys and shape entries in a TOML text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.bucket_headers = [i + 1 for i, ln in enumerate(self.lines) if re.match(r"\s*\[\[\s*bucket\s*\]\]", ln)]
        self.headers = [i + 1 for i, ln in enumerate(self.lines) if re.match(r"\s*\[", ln)]

    def _section_end(self, start: int) -> int:
        later = [h for h in self.headers if h > start]
        return later[0] if later else len(self.lines) + 1

    def key(self, key: str, section_start: int | None) -> int | None:
        """Line of ``key = ...`` within the section that starts at ``section_start`` (None: top level)."""
        lo = section_start or 0
        hi = self._section_end(lo) if section_start else (self.headers[0] if self.headers else len(self.lines) + 1)
        pat = re.compile(rf"\s*\"?{re.escape(key)}\"?\s*=")
        for i in range(lo, hi - 1):
            if pat.match(self.lines[i]):
                return i + 1
        return None

    def section(self, name: str) -> int | None:
        for i, ln in enumerate(self.lines):
            if re.match(rf"\s*\[\s*{re.escape(name)}\s*\]", ln):
                return i + 1
        return None

    def shape(self, bucket_line: int | None, index: int) -> int | None:
        """Line of the ``index``-th inline table ``{...}`` of the bucket's ``shapes`` array."""
        start = self.key("shapes", bucket_line) if bucket_line else None
        if start is None:
            return None
        seen = -1
        for i in range(start - 1, self._section_end(bucket_line)  - 1):
            seen += self.lines[i].count("{")
            if seen >= index:
                return i + 1
        return start


def _at(path: str, line: int | None) -> str:
    return f"{path} line {line}" if line else path


# ------------------------------------------------------------------------------------
# Parsing and validation
# ------------------------------------------------------------------------------------


def resolve_matrix_path(name_or_path: str) -> Path:
    """Path of a bundled matrix name (``cpu``, ``cuda``; file stem under matrices/) or of a file.

    Raises:
        IomodelError: neither a bundled name nor an existing file.
    """
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = {f.stem: f for f in MATRICES_DIR.glob("*.toml")}
    bundled.update({alias: bundled[stem] for alias, stem in MATRIX_ALIASES.items() if stem in bundled})
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise IomodelError(
        f"shape matrix {name_or_path!r} is neither a file nor a bundled matrix: pass a TOML path "
        f"or one of {', '.join(sorted(bundled))}"
    )


def load_matrix(name_or_path: str | Path) -> ShapeMatrix | SpeedMatrix:
    """Read and validate a shape-matrix TOML file (or a bundled matrix by name).

    Args:
        name_or_path: a path to a ``.toml`` file, or a bundled name such as ``"cpu"`` or
            ``"kernel-speed"``.

    Returns:
        The :class:`ShapeMatrix` (or :class:`SpeedMatrix` for ``kind = "kernel-speed"``),
        with the file's path and SHA-256 recorded.

    Raises:
        IomodelError: the file is missing or not valid TOML (message gives the line and
            column from tomllib), or a schema rule is broken (message names the bucket and
            its line).
    """
    path = resolve_matrix_path(str(name_or_path))
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IomodelError(f"shape matrix {path} is not UTF-8 text: save it as UTF-8") from None
    return parse_matrix(text, str(path), sha256=hashlib.sha256(raw).hexdigest())


def mix_weight_totals(buckets: Iterable[tuple[str, float]]) -> dict[str, float]:
    """The traffic weights summed per mix, ``{pass: total}`` from ``(pass, weight)`` pairs: a serving mix (``fwd``)
    and a training mix (``fwd+bwd``) each sum to 1 in a matrix, and a receipt's buckets must still do
    (:func:`iomodel.bench.receipt.check_receipt`)."""
    out: dict[str, float] = {}
    for passes, weight in buckets:
        out[passes] = out.get(passes, 0.0) + float(weight)
    return out


def parse_matrix(text: str, path: str = "<matrix>", sha256: str = "") -> ShapeMatrix | SpeedMatrix:
    """Parse and validate the text of a shape-matrix file (see :func:`load_matrix`).

    Raises:
        IomodelError: invalid TOML or a schema error, naming the line.
    """
    try:
        data = toml_loads(tomllib.loads, text)
    except ValueError as exc:  # tomllib.TOMLDecodeError, or nesting too deep
        msg = str(exc)
        raise IomodelError(f"{path}: invalid TOML: {msg}: fix the file at that line") from None
    lines = _Lines(text)

    def fail(msg: str, line: int | None) -> IomodelError:
        return IomodelError(f"{_at(path, line)}: {msg}")

    if "kind" in data:
        if data["kind"] != SPEED_KIND:
            raise fail(f"kind {data['kind']!r} is unknown: use kind = {SPEED_KIND!r}, or no kind for a bucket matrix",
                       lines.key("kind", None))
        return _parse_speed(data, lines, fail, path, sha256)
    unknown = set(data) - _TOP_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise fail(f"unknown top-level key {k!r}: use only {', '.join(sorted(_TOP_KEYS))}", lines.key(k, None))
    version = _version(data, lines, fail)
    if version < 2:
        for k in sorted(_V2_TOP_KEYS & set(data)):
            raise fail(f"{k!r} needs matrix schema version 2: set version = 2", lines.key(k, None))
    policy = data.get("policy")
    if policy is not None:
        policy = _int(policy, "policy (the policy version this matrix is checked under)", 1, fail,
                      lines.key("policy", None))
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        # torch.manual_seed takes a 64-bit integer: a larger seed would fail after the run started
        raise fail(f"seed must be an integer from 0 to 2^63 - 1, got {seed!r}: fix it", lines.key("seed", None))
    device = data.get("device", "any")
    if device not in ("cpu", "cuda", "any"):
        raise fail(f"device {device!r} is unknown: use 'cpu', 'cuda' or 'any'", lines.key("device", None))

    timing, tline = _table(data, "timing", _TIMING_KEYS, lines, fail)
    warmup = _int(timing.get("warmup", 3), "timing.warmup", 0, fail, lines.key("warmup", tline))
    reps = _int(timing.get("reps", 15), "timing.reps", 3, fail, lines.key("reps", tline))
    flush = _int(timing.get("l2_flush_bytes", 256 * 2**20), "timing.l2_flush_bytes", 0, fail,
                 lines.key("l2_flush_bytes", tline))

    raw_buckets = data.get("bucket")
    if not isinstance(raw_buckets, list) or not raw_buckets:
        raise fail("no buckets: add at least one [[bucket]] table", None)
    buckets: list[Bucket] = []
    names: set[str] = set()
    for i, rb in enumerate(raw_buckets):
        bline = lines.bucket_headers[i] if i < len(lines.bucket_headers) else None
        b = _parse_bucket(rb, i, bline, lines, fail, version)
        if b.name in names:
            raise fail(f"bucket name {b.name!r} is used twice: give each bucket its own name", lines.key("name", bline))
        names.add(b.name)
        buckets.append(b)
    totals = mix_weight_totals((b.passes, b.weight) for b in buckets)
    for passes in ("fwd", "fwd+bwd"):  # a serving mix and a training mix are separate workloads
        group = [b for b in buckets if b.passes == passes]
        total = totals.get(passes, 0.0)
        if group and abs(total - 1.0) > 1e-6:
            which = "all buckets" if passes == "fwd" else "the fwd+bwd (training) buckets"
            raise fail(
                f"bucket weights sum to {total:.6g}, not 1: make the traffic weights of {which} sum to 1",
                group[0].line,
            )

    workload = None
    if "workload" in data:
        wl = data["workload"]
        wline = lines.section("workload")
        if not isinstance(wl, dict):
            raise fail("'workload' must be a table: write it as [workload]", wline)
        bad = set(wl) - _WORKLOAD_KEYS
        if bad:
            k = sorted(bad)[0]
            raise fail(f"unknown [workload] key {k!r}: use {', '.join(sorted(_WORKLOAD_KEYS))}", lines.key(k, wline))
        for k in ("prompt_len", "output_len", "layers", "prefill_bucket", "decode_bucket"):
            if k not in wl:
                raise fail(f"[workload] lacks {k!r}: add it", wline)
        by_name = {b.name: b for b in buckets}
        for k, phase in (("prefill_bucket", "prefill"), ("decode_bucket", "decode")):
            ref = wl[k]
            if ref not in by_name:
                raise fail(f"[workload] {k} {ref!r} names no bucket: use one of {', '.join(by_name)}", lines.key(k, wline))
            if by_name[ref].phase != phase:
                raise fail(f"[workload] {k} {ref!r} is a {by_name[ref].phase} bucket: name a {phase} bucket", lines.key(k, wline))
            size = "seqlen_q" if phase == "prefill" else "seqlen_k"  # the request's time is interpolated over it
            sizes = [getattr(sh, size) for sh in by_name[ref].shapes]
            if len(set(sizes)) < len(sizes):
                raise fail(f"[workload] {k} {ref!r} must hold one shape per {size} (the request's time is "
                           f"interpolated over {size}), got {size} {sizes}: split the bucket or drop a shape",
                           lines.key(k, wline))
        prompt = _int(wl["prompt_len"], "workload.prompt_len", 1, fail, lines.key("prompt_len", wline))
        output = _int(wl["output_len"], "workload.output_len", 1, fail, lines.key("output_len", wline))
        x = MAX_WORKLOAD_EXTRAPOLATION
        for k, size, lo, hi, what in (
                ("prefill_bucket", "seqlen_q", prompt, prompt, f"prompt_len {prompt:,}"),
                ("decode_bucket", "seqlen_k", prompt, prompt + output - 1,
                 f"the decode steps' seqlen_k {prompt:,}..{prompt + output - 1:,} (prompt_len + output_len - 1)")):
            sizes = [getattr(sh, size) for sh in by_name[wl[k]].shapes]
            if lo * x < min(sizes) or hi > x * max(sizes):
                key = "prompt_len" if lo * x < min(sizes) or k == "prefill_bucket" else "output_len"  # what to change
                raise fail(f"[workload] {what} lies more than {x}x outside the {size} of bucket {wl[k]!r} "
                           f"({min(sizes):,}..{max(sizes):,}), so the request estimate would be extrapolated that "
                           f"far: add a shape to the bucket nearer it, or bring {key} within {x}x of the measured "
                           "sizes", lines.key(key, wline))
        workload = Workload(
            prompt_len=prompt,
            output_len=output,
            layers=_int(wl["layers"], "workload.layers", 1, fail, lines.key("layers", wline), MAX_WORKLOAD_LAYERS),
            prefill_bucket=wl["prefill_bucket"],
            decode_bucket=wl["decode_bucket"],
            note=str(wl.get("note", "")),
        )
    return ShapeMatrix(name=str(data.get("name", Path(path).stem)), version=version, device=device, seed=seed,
                       warmup=warmup, reps=reps, l2_flush_bytes=flush, workload=workload, buckets=tuple(buckets),
                       path=path, sha256=sha256, description=str(data.get("description", "")), policy=policy)


def _int(value: Any, what: str, lo: int, fail, line: int | None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        raise fail(f"{what} must be an integer >= {lo}" + (f" and <= {hi:,}" if hi is not None else "")
                   + f", got {value!r}: fix it", line)
    return value


def _version(data: dict[str, Any], lines: _Lines, fail) -> int:
    if "version" not in data:
        raise fail("missing 'version': add 'version = 1' at the top", 1)
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MATRIX_SCHEMA_VERSION:
        raise fail(
            f"version {version!r} is not supported: this iomodel reads matrix versions 1..{MATRIX_SCHEMA_VERSION}",
            lines.key("version", None),
        )
    return version


def _table(data: dict[str, Any], key: str, allowed: set[str], lines: _Lines, fail) -> tuple[dict[str, Any], int | None]:
    """The TOML table ``[key]`` (empty when absent) and its line, refusing unknown keys."""
    line = lines.section(key)
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise fail(f"'{key}' must be a table: write it as [{key}]", lines.key(key, None))
    bad = set(table) - allowed
    if bad:
        k = sorted(bad)[0]
        raise fail(f"unknown [{key}] key {k!r}: use {', '.join(sorted(allowed))}", lines.key(k, line))
    return table, line


def _list(value: Any, what: str, ok, expect: str, fail, line: int | None) -> tuple:
    """A non-empty TOML array whose items all pass ``ok``, as a tuple."""
    if not isinstance(value, list) or not value or not all(ok(x) for x in value):
        raise fail(f"{what} must be a non-empty array of {expect}, got {value!r}: fix it", line)
    return tuple(value)


def _positive_ints(value: Any, what: str, fail, line: int | None) -> tuple[int, ...]:
    return _list(value, what, lambda x: not isinstance(x, bool) and isinstance(x, int) and x > 0,
                 "positive integers", fail, line)


def _ms(value: Any, what: str, fail, line: int | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise fail(f"{what} must be a positive number of milliseconds, got {value!r}: fix it", line)
    return float(value)


def _parse_speed(data: dict[str, Any], lines: _Lines, fail, path: str, sha256: str) -> SpeedMatrix:
    """A kernel-speed matrix from its parsed TOML (see the module docstring); errors name the line."""
    from iomodel.bench.backends import KERNEL, SDPA_BACKENDS

    unknown = set(data) - _SPEED_TOP_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise fail(f"unknown top-level key {k!r}: use only {', '.join(sorted(_SPEED_TOP_KEYS))}", lines.key(k, None))
    version = _version(data, lines, fail)
    impls = (KERNEL, *SDPA_BACKENDS)
    backends = _list(data.get("backends", list(impls)), "backends", lambda x: x in impls,
                     f"names among {', '.join(impls)}", fail, lines.key("backends", None))
    math_limit = _int(data.get("math_limit_bytes", 4 * 2**30), "math_limit_bytes", 0, fail,
                      lines.key("math_limit_bytes", None))
    timing, tline = _table(data, "timing", _SPEED_TIMING_KEYS, lines, fail)
    rounds = _int(timing.get("rounds", 3), "timing.rounds", 1, fail, lines.key("rounds", tline))
    ms = {k: _ms(timing.get(k, default), f"timing.{k}", fail, lines.key(k, tline))
          for k, default in (("warmup_ms", 10.0), ("rep_ms", 40.0), ("decode_rep_ms", 20.0))}
    if "prefill" not in data and "decode" not in data:
        raise fail("no shapes: add a [prefill] grid, a [decode] grid or both", None)

    def dtypes(table: dict[str, Any], what: str, line: int | None) -> tuple[str, ...]:
        return _list(table.get("dtypes", ["bf16"]), what, lambda x: x in SPEED_DTYPES,
                     f"dtype names among {', '.join(SPEED_DTYPES)}", fail, lines.key("dtypes", line))

    prefill: list[PrefillShape] = []
    if "prefill" in data:
        p, pline = _table(data, "prefill", _PREFILL_GRID_KEYS, lines, fail)
        for k in ("tokens", "heads", "head_dims", "seqlens"):
            if k not in p:
                raise fail(f"[prefill] lacks {k!r}: add it", pline)
        tokens = _int(p["tokens"], "prefill.tokens", 1, fail, lines.key("tokens", pline))
        heads = _int(p["heads"], "prefill.heads", 1, fail, lines.key("heads", pline))
        head_dims = _positive_ints(p["head_dims"], "prefill.head_dims", fail, lines.key("head_dims", pline))
        seqlens = _positive_ints(p["seqlens"], "prefill.seqlens", fail, lines.key("seqlens", pline))
        dts = dtypes(p, "prefill.dtypes", pline)
        causals = _list(p.get("causal", [False, True]), "prefill.causal", lambda x: isinstance(x, bool),
                        "true/false", fail, lines.key("causal", pline))
        for n in seqlens:
            if tokens % n:
                raise fail(f"prefill seqlen {n} does not divide {tokens} tokens (B = tokens / seqlen): pick seqlens "
                           "that divide tokens", lines.key("seqlens", pline))
            prefill += [PrefillShape(tokens // n, heads, n, d, c, dt) for d in head_dims for dt in dts for c in causals]
    decode: list[DecodeShape] = []
    if "decode" in data:
        d, dline = _table(data, "decode", _DECODE_GRID_KEYS, lines, fail)
        for k in ("batches", "heads", "kv_heads", "head_dim", "seqlens_k"):
            if k not in d:
                raise fail(f"[decode] lacks {k!r}: add it", dline)
        heads = _int(d["heads"], "decode.heads", 1, fail, lines.key("heads", dline))
        kv_heads = _int(d["kv_heads"], "decode.kv_heads", 1, fail, lines.key("kv_heads", dline))
        if heads % kv_heads:
            raise fail(f"decode heads ({heads}) is not divisible by kv_heads ({kv_heads}): pick a divisor",
                       lines.key("kv_heads", dline))
        head_dim = _int(d["head_dim"], "decode.head_dim", 1, fail, lines.key("head_dim", dline))
        batches = _positive_ints(d["batches"], "decode.batches", fail, lines.key("batches", dline))
        kv_lens = _positive_ints(d["seqlens_k"], "decode.seqlens_k", fail, lines.key("seqlens_k", dline))
        decode = [DecodeShape(b, heads, kv_heads, n, head_dim, dt)
                  for dt in dtypes(d, "decode.dtypes", dline) for n in kv_lens for b in batches]
    return SpeedMatrix(
        name=str(data.get("name", Path(path).stem)), version=version, prefill=tuple(prefill), decode=tuple(decode),
        backends=backends, rounds=rounds, math_limit_bytes=math_limit,
        grids={k: data[k] for k in ("prefill", "decode") if k in data}, path=path, sha256=sha256,
        description=str(data.get("description", "")), **ms,
    )


def _parse_bucket(rb: Any, index: int, bline: int | None, lines: _Lines, fail, version: int = 1) -> Bucket:
    if not isinstance(rb, dict):
        raise fail(f"bucket #{index + 1} is not a table: write it as [[bucket]]", bline)
    label = repr(rb.get("name", f"#{index + 1}"))
    unknown = set(rb) - _BUCKET_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise fail(f"bucket {label}: unknown key {k!r}: use only {', '.join(sorted(_BUCKET_KEYS))}", lines.key(k, bline))
    for k in ("name", "weight", "phase", "heads", "kv_heads", "head_dim", "dtype", "shapes"):
        if k not in rb:
            raise fail(f"bucket {label} lacks {k!r}: add it", bline)

    def kl(k: str) -> int | None:
        return lines.key(k, bline) or bline

    name = rb["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise fail(f"bucket name {name!r} must be letters, digits, '-', '_' or '.': rename it", kl("name"))
    label = repr(name)
    weight = rb["weight"]
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (weight > 0) or math.isinf(weight):
        raise fail(f"bucket {label}: weight must be a positive number, got {weight!r}: fix it", kl("weight"))
    phase = rb["phase"]
    if phase not in PHASES:
        raise fail(f"bucket {label}: phase {phase!r} is unknown: use 'prefill' or 'decode'", kl("phase"))
    passes = rb.get("pass", "fwd")
    if "pass" in rb and version < 2:
        raise fail(f"bucket {label}: 'pass' needs matrix schema version 2: set version = 2 at the top", kl("pass"))
    if passes not in PASSES:
        raise fail(f"bucket {label}: pass {passes!r} is unknown: use 'fwd' or 'fwd+bwd'", kl("pass"))
    if passes == "fwd+bwd" and phase != "prefill":
        raise fail(f"bucket {label}: a fwd+bwd (training) bucket must have phase 'prefill': decode has no backward",
                   kl("phase"))
    causal = rb.get("causal", False)
    if not isinstance(causal, bool):
        raise fail(f"bucket {label}: causal must be true or false, got {causal!r}: fix it", kl("causal"))
    align = rb.get("causal_align", "top-left")
    if align not in CAUSAL_ALIGNS:
        raise fail(f"bucket {label}: causal_align {align!r} is unknown: use 'top-left' or 'bottom-right'", kl("causal_align"))
    heads = _int(rb["heads"], f"bucket {label}: heads", 1, fail, kl("heads"))
    kv_heads = _int(rb["kv_heads"], f"bucket {label}: kv_heads", 1, fail, kl("kv_heads"))
    if heads % kv_heads:
        raise fail(f"bucket {label}: heads ({heads}) is not divisible by kv_heads ({kv_heads}): pick a divisor", kl("kv_heads"))
    head_dim = _int(rb["head_dim"], f"bucket {label}: head_dim", 1, fail, kl("head_dim"))
    try:
        dtype = canonical_dtype(str(rb["dtype"]))
    except IomodelError:
        dtype = None
    if dtype not in BENCH_DTYPES:
        raise fail(f"bucket {label}: dtype {rb['dtype']!r} cannot be benchmarked: use one of {', '.join(BENCH_DTYPES)}", kl("dtype"))
    raw_shapes = rb["shapes"]
    if not isinstance(raw_shapes, list) or not raw_shapes:
        raise fail(f"bucket {label}: shapes must be a non-empty array of {{batch, seqlen_q, seqlen_k}} tables: fix it", kl("shapes"))
    shapes = []
    for j, rs in enumerate(raw_shapes):
        sline = lines.shape(bline, j) or kl("shapes")
        if not isinstance(rs, dict):
            raise fail(f"bucket {label}: shape #{j + 1} is not a table: write {{ batch = 1, seqlen_q = 128, seqlen_k = 128 }}", sline)
        bad = set(rs) - _SHAPE_KEYS
        if bad:
            raise fail(f"bucket {label}: shape #{j + 1} has unknown key {sorted(bad)[0]!r}: use {', '.join(sorted(_SHAPE_KEYS))}", sline)
        for k in ("batch", "seqlen_q", "seqlen_k"):
            if k not in rs:
                raise fail(f"bucket {label}: shape #{j + 1} lacks {k!r}: add it", sline)
        batch = _int(rs["batch"], f"bucket {label}: shape #{j + 1} batch", 1, fail, sline)
        nq = _int(rs["seqlen_q"], f"bucket {label}: shape #{j + 1} seqlen_q", 1, fail, sline)
        nk = _int(rs["seqlen_k"], f"bucket {label}: shape #{j + 1} seqlen_k", 1, fail, sline)
        if phase == "decode" and nq > 16:
            raise fail(f"bucket {label}: shape #{j + 1} has seqlen_q={nq} in a decode bucket: use seqlen_q <= 16 or phase 'prefill'", sline)
        if phase == "prefill" and nq != nk:
            raise fail(f"bucket {label}: shape #{j + 1} has seqlen_q={nq} != seqlen_k={nk} in a prefill bucket: make them "
                       "equal" + ("" if passes == "fwd+bwd" else " (use a decode bucket for a KV cache)"), sline)
        if causal and align == "top-left" and nq < nk:
            raise fail(
                f"bucket {label}: shape #{j + 1} is causal top-left with seqlen_q < seqlen_k, so query row 0 sees only key 0: "
                "set causal_align = 'bottom-right' for a KV cache, or causal = false", sline)
        lengths = rs.get("lengths")
        if lengths is not None:
            if (not isinstance(lengths, list) or len(lengths) != batch
                    or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= nk for x in lengths)):
                raise fail(f"bucket {label}: shape #{j + 1} lengths must list {batch} integers in 1..{nk} (one valid length per sequence): fix it", sline)
            if passes == "fwd+bwd":
                raise fail(f"bucket {label}: shape #{j + 1} has lengths in a fwd+bwd bucket, but the gradient baseline "
                           "(the eager chain, kernels/baseline.py) takes no key-padding mask: drop lengths", sline)
            lengths = tuple(lengths)
        if causal and align == "bottom-right" and nq > min(lengths or (nk,)):
            raise fail(
                f"bucket {label}: shape #{j + 1} is causal bottom-right with more query rows than valid keys, so some rows "
                "see no key: use seqlen_q <= seqlen_k and <= every length", sline)
        shapes.append(Shape(batch=batch, seqlen_q=nq, seqlen_k=nk, lengths=lengths))
    return Bucket(
        name=name, weight=float(weight), phase=phase, causal=causal, causal_align=align, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, shapes=tuple(shapes), note=str(rb.get("note", "")),
        line=bline, passes=passes,
    )
