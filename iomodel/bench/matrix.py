"""Versioned shape-matrix files: the buckets of attention calls a benchmark sweeps.

A shape matrix is a TOML file (bundled ones live in ``iomodel/bench/matrices/``) with a
``version``, timing settings, a representative request (``[workload]``) and buckets with
traffic weights. Each bucket fixes the phase (prefill or decode), masking (causal
top-left / bottom-right, or a key-padding mask for padded ragged batches), the heads
(H, H_kv for GQA), HEAD_DIM and dtype, and lists shapes ``(B, seqlen_q, seqlen_k)``.
Tensors: Q ``(B, H, seqlen_q, HEAD_DIM)``; K, V ``(B, H_kv, seqlen_k, HEAD_DIM)``.

Every schema error raises :class:`~iomodel.errors.IomodelError` with one sentence naming
the file, the bucket and the line where it can be found, and what to change.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from iomodel.errors import IomodelError
from iomodel.spec import CAUSAL_ALIGNS, DTYPES, PHASES, canonical_dtype

#: Folder of the bundled shape matrices (package data).
MATRICES_DIR = Path(__file__).resolve().parent / "matrices"

#: Bundled matrix per device when ``--matrix`` is not given.
DEFAULT_MATRIX = {"cpu": "cpu", "cuda": "cuda"}

#: Highest matrix-file schema version this code reads.
MATRIX_SCHEMA_VERSION = 1

_TOP_KEYS = {"version", "name", "device", "seed", "description", "timing", "workload", "bucket"}
_TIMING_KEYS = {"warmup", "reps", "l2_flush_bytes"}
_WORKLOAD_KEYS = {"prompt_len", "output_len", "layers", "prefill_bucket", "decode_bucket", "note"}
_BUCKET_KEYS = {
    "name", "weight", "phase", "causal", "causal_align", "heads", "kv_heads", "head_dim", "dtype",
    "shapes", "note",
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

    @property
    def gqa(self) -> bool:
        return self.kv_heads < self.heads

    def signal(self) -> str:
        """A one-line description of what characterises the bucket (for the receipt's Signal column)."""
        ns = sorted({s.seqlen_k for s in self.shapes})
        span = f"{_tokens(ns[0])}" if len(ns) == 1 else f"{_tokens(ns[0])}–{_tokens(ns[-1])}"
        parts = [self.phase, f"{span} keys"]
        if self.causal:
            parts.append(f"causal {self.causal_align}")
        if self.gqa:
            parts.append(f"GQA {self.heads}/{self.kv_heads}")
        if any(s.padded for s in self.shapes):
            parts.append("padded ragged batch")
        parts.append(f"d={self.head_dim} {self.dtype}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "shapes"}
        d["shapes"] = [s.to_dict() for s in self.shapes]
        return d


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "device": self.device,
            "seed": self.seed,
            "path": self.path,
            "sha256": self.sha256,
            "description": self.description,
            "timing": {"warmup": self.warmup, "reps": self.reps, "l2_flush_bytes": self.l2_flush_bytes},
            "workload": asdict(self.workload) if self.workload else None,
            "buckets": [b.to_dict() for b in self.buckets],
        }


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
    bundled = {f.stem.rsplit("-v", 1)[0]: f for f in sorted(MATRICES_DIR.glob("*.toml"))}
    bundled.update({f.stem: f for f in MATRICES_DIR.glob("*.toml")})
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise IomodelError(
        f"shape matrix {name_or_path!r} is neither a file nor a bundled matrix: pass a TOML path "
        f"or one of {', '.join(sorted(bundled))}"
    )


def load_matrix(name_or_path: str | Path) -> ShapeMatrix:
    """Read and validate a shape-matrix TOML file (or a bundled matrix by name).

    Args:
        name_or_path: a path to a ``.toml`` file, or a bundled name such as ``"cpu"``.

    Returns:
        The :class:`ShapeMatrix`, with the file's path and SHA-256 recorded.

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


def parse_matrix(text: str, path: str = "<matrix>", sha256: str = "") -> ShapeMatrix:
    """Parse and validate the text of a shape-matrix file (see :func:`load_matrix`).

    Raises:
        IomodelError: invalid TOML or a schema error, naming the line.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        raise IomodelError(f"{path}: invalid TOML: {msg}: fix the file at that line") from None
    lines = _Lines(text)

    def fail(msg: str, line: int | None) -> IomodelError:
        return IomodelError(f"{_at(path, line)}: {msg}")

    unknown = set(data) - _TOP_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise fail(f"unknown top-level key {k!r}: use only {', '.join(sorted(_TOP_KEYS))}", lines.key(k, None))
    if "version" not in data:
        raise fail("missing 'version': add 'version = 1' at the top", 1)
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MATRIX_SCHEMA_VERSION:
        raise fail(
            f"version {version!r} is not supported: this iomodel reads matrix versions 1..{MATRIX_SCHEMA_VERSION}",
            lines.key("version", None),
        )
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise fail(f"seed must be a non-negative integer, got {seed!r}: fix it", lines.key("seed", None))
    device = data.get("device", "any")
    if device not in ("cpu", "cuda", "any"):
        raise fail(f"device {device!r} is unknown: use 'cpu', 'cuda' or 'any'", lines.key("device", None))

    timing = data.get("timing", {})
    tline = lines.section("timing")
    if not isinstance(timing, dict):
        raise fail("'timing' must be a table: write it as [timing]", lines.key("timing", None))
    bad = set(timing) - _TIMING_KEYS
    if bad:
        k = sorted(bad)[0]
        raise fail(f"unknown [timing] key {k!r}: use {', '.join(sorted(_TIMING_KEYS))}", lines.key(k, tline))
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
        b = _parse_bucket(rb, i, bline, lines, fail)
        if b.name in names:
            raise fail(f"bucket name {b.name!r} is used twice: give each bucket its own name", lines.key("name", bline))
        names.add(b.name)
        buckets.append(b)
    total = sum(b.weight for b in buckets)
    if abs(total - 1.0) > 1e-6:
        raise fail(
            f"bucket weights sum to {total:.6g}, not 1: make the traffic weights of all buckets sum to 1",
            lines.bucket_headers[0] if lines.bucket_headers else None,
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
        workload = Workload(
            prompt_len=_int(wl["prompt_len"], "workload.prompt_len", 1, fail, lines.key("prompt_len", wline)),
            output_len=_int(wl["output_len"], "workload.output_len", 1, fail, lines.key("output_len", wline)),
            layers=_int(wl["layers"], "workload.layers", 1, fail, lines.key("layers", wline)),
            prefill_bucket=wl["prefill_bucket"],
            decode_bucket=wl["decode_bucket"],
            note=str(wl.get("note", "")),
        )
    return ShapeMatrix(
        name=str(data.get("name", Path(path).stem)),
        version=version,
        device=device,
        seed=seed,
        warmup=warmup,
        reps=reps,
        l2_flush_bytes=flush,
        workload=workload,
        buckets=tuple(buckets),
        path=path,
        sha256=sha256,
        description=str(data.get("description", "")),
    )


def _int(value: Any, what: str, lo: int, fail, line: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise fail(f"{what} must be an integer >= {lo}, got {value!r}: fix it", line)
    return value


def _parse_bucket(rb: Any, index: int, bline: int | None, lines: _Lines, fail) -> Bucket:
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
            raise fail(f"bucket {label}: shape #{j + 1} has seqlen_q={nq} != seqlen_k={nk} in a prefill bucket: make them equal (use a decode bucket for a KV cache)", sline)
        if causal and align == "top-left" and nq < nk:
            raise fail(
                f"bucket {label}: shape #{j + 1} is causal top-left with seqlen_q < seqlen_k, so query row 0 sees only key 0: "
                "set causal_align = 'bottom-right' for a KV cache, or causal = false", sline)
        lengths = rs.get("lengths")
        if lengths is not None:
            if (not isinstance(lengths, list) or len(lengths) != batch
                    or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= nk for x in lengths)):
                raise fail(f"bucket {label}: shape #{j + 1} lengths must list {batch} integers in 1..{nk} (one valid length per sequence): fix it", sline)
            lengths = tuple(lengths)
        if causal and align == "bottom-right" and nq > min(lengths or (nk,)):
            raise fail(
                f"bucket {label}: shape #{j + 1} is causal bottom-right with more query rows than valid keys, so some rows "
                "see no key: use seqlen_q <= seqlen_k and <= every length", sline)
        shapes.append(Shape(batch=batch, seqlen_q=nq, seqlen_k=nk, lengths=lengths))
    return Bucket(
        name=name, weight=float(weight), phase=phase, causal=causal, causal_align=align, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, shapes=tuple(shapes), note=str(rb.get("note", "")),
        line=bline,
    )
