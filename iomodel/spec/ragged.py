"""A ragged (varlen) batch: one attention layer over sequences of different lengths.

Plain data, as :class:`~iomodel.spec.layer.LayerSpec`: the shared head/dtype/mask fields and
one ``(N_q, N_k)`` pair per sequence (``N_k`` = the keys the sequence uses, i.e.
``seqused_k`` when keys are padded). The model treats each sequence as a batch-1 layer of
its own lengths (:meth:`RaggedSpec.sequences`), as ``kernels.flash_attention.
flash_attention_varlen`` runs it; the eager baseline of a ragged batch is the batch padded
to the longest sequence (:meth:`RaggedSpec.padded`), which is what an eager chain
(``kernels/baseline.py``) computes on a padded batch.

A sequence may use no key (``N_k = 0``: ``seqused_k[b] = 0``, an empty cache slot in serving):
its rows see no key, and the kernel gives them o = 0 and LSE = −inf, as a paged decode does
for ``cache_seqlens[b] = 0``. It has no batch-1 :class:`LayerSpec` (a layer has >= 1 key);
:func:`iomodel.traffic.ragged.predict_ragged` models its bytes (the Q loads and O, LSE stores
of its programs), and the L2-aware estimate, which simulates batch-1 layers, is not made for
a batch that holds one (:func:`iomodel.cache.estimate.ragged_not_estimated` says so).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.jsonvalues import describe, parse_json
from iomodel.spec.layer import LayerSpec


@dataclass(frozen=True)
class RaggedSpec:
    """A layer over a ragged batch.

    Fields: ``layer`` carries heads, kv_heads, head_dim, dtype, causal, causal_align and the
    window (its batch and seqlen fields are ignored); ``seqlens`` one ``(N_q, N_k)`` pair per
    sequence (element counts: N_q >= 1, N_k >= 0, at least one sequence with N_k >= 1; N_k = 0
    is a sequence that uses no key, see the module docstring). Forward prefill only.

    Raises:
        IomodelError: no sequence, a query length that is not an int >= 1, a key length that is
            not an int >= 0, every sequence without keys, a backward or decode layer.
    """

    layer: LayerSpec
    seqlens: tuple[tuple[int, int], ...]  # ((N_q, N_k), ...) per sequence

    def __post_init__(self) -> None:
        pairs = tuple(tuple(p) for p in self.seqlens)
        if not pairs:
            raise IomodelError("a ragged batch needs at least one sequence: pass --seqlens 512,3000,77")
        for p in pairs:
            if len(p) != 2 or any(isinstance(n, bool) or not isinstance(n, int) for n in p) or p[0] < 1 or p[1] < 0:
                raise IomodelError(f"every sequence needs an int >= 1 of query rows and an int >= 0 of keys (q or "
                                   f"q,k), got {p!r}: fix the list")
        if all(k == 0 for _, k in pairs):
            raise IomodelError("every sequence of the ragged batch uses 0 keys (each output is 0, its LSE -inf): "
                               "give at least one sequence keys")
        if self.layer.backward or self.layer.phase != "prefill":
            raise IomodelError("ragged batches are modelled for the forward prefill only: use --pass fwd "
                               "--phase prefill with --seqlens")
        object.__setattr__(self, "seqlens", pairs)

    @property
    def batch(self) -> int:
        """B, the number of sequences."""
        return len(self.seqlens)

    @property
    def max_seqlen_q(self) -> int:
        return max(q for q, _ in self.seqlens)

    @property
    def max_seqlen_k(self) -> int:
        return max(k for _, k in self.seqlens)

    def kinds(self) -> list[tuple[tuple[int, int], int]]:
        """Distinct ``(N_q, N_k)`` pairs with their counts, in first-seen order."""
        return list(Counter(self.seqlens).items())

    def keyless(self) -> list[int]:
        """Indices of the sequences that use no key (N_k = 0), in batch order."""
        return [i for i, (_, k) in enumerate(self.seqlens) if k == 0]

    def sequence(self, n_q: int, n_k: int) -> LayerSpec:
        """The batch-1 :class:`LayerSpec` of one sequence (phase prefill: the varlen kernel
        runs its prefill path whatever N_q).

        Raises:
            IomodelError: ``n_k`` = 0 (a layer has at least one key; the sequence's bytes are
                :func:`iomodel.traffic.ragged.predict_ragged`'s).
        """
        if n_k == 0:
            raise IomodelError(f"a sequence with no key (N_q {n_q:,}, N_k 0) has no batch-1 layer: its bytes are "
                               "iomodel.traffic.ragged.predict_ragged's; drop it for a per-layer model")
        return self.layer.with_(batch=1, seqlen_q=n_q, seqlen_k=n_k, phase="prefill")

    def sequences(self) -> list[LayerSpec]:
        """One batch-1 layer per sequence, in batch order.

        Raises:
            IomodelError: a sequence uses no key (:meth:`sequence`).
        """
        return [self.sequence(q, k) for q, k in self.seqlens]

    def padded(self) -> LayerSpec:
        """The dense layer of the batch padded to the longest sequence: ``(B, H, max N_q, d)``
        queries against ``(B, H_kv, max N_k, d)`` keys (the eager baseline's input)."""
        return self.layer.with_(batch=self.batch, seqlen_q=self.max_seqlen_q, seqlen_k=self.max_seqlen_k,
                                phase="prefill")

    def histogram(self) -> dict[str, Any]:
        """Count, min, max, mean of the query and key lengths (tokens)."""
        out: dict[str, Any] = {"count": self.batch}
        for name, i in (("q", 0), ("k", 1)):
            xs = [p[i] for p in self.seqlens]
            out[name] = {"min": min(xs), "max": max(xs), "mean": sum(xs) / len(xs), "total": sum(xs)}
        return out


def _pair(item: Any, where: str) -> tuple[int, int]:
    """``n`` -> (n, n); ``(q, k)`` -> (q, k); strings as ``"n"`` or ``"q,k"``."""
    if isinstance(item, str):
        parts = [p.strip() for p in item.split(",")]
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise IomodelError(f"{where}: {item!r} is not a length or a q,k pair of whole numbers: "
                               "write e.g. 512 or 512,4096") from None
        item = nums if len(nums) > 1 else nums[0]
    nums = list(item) if isinstance(item, (list, tuple)) and len(item) == 2 else [item]
    if all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        return nums[0], nums[-1]
    raise IomodelError(f"{where}: {describe(item) if not isinstance(item, (list, tuple)) else repr(item)} is not a "
                       "length or a [q, k] pair of whole numbers: write e.g. 512 or [512, 4096]")


def parse_seqlens(text: str) -> tuple[tuple[int, int], ...]:
    """``--seqlens 512,3000,77``: one length per sequence (N_q = N_k), comma separated; ``q:k``
    (``77:4096``) for a sequence of q query rows against k keys; ``*COUNT`` after an entry
    (``512*100``) for COUNT such sequences (a histogram of lengths).

    Raises:
        IomodelError: an empty list or an entry that is not a whole number or a q:k pair.
    """
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise IomodelError("--seqlens is empty: give one length per sequence, e.g. --seqlens 512,3000,77")
    if not all(items):
        raise IomodelError(f"--seqlens {text!r} has an empty entry (two commas, or a trailing one): give one "
                           "length per sequence, e.g. --seqlens 512,3000,77")
    pairs: list[tuple[int, int]] = []
    for t in items:
        t, count = _histogram_count(t, f"--seqlens: {t!r}")
        parts = t.split(":")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            nums = []
        if len(nums) not in (1, 2):
            raise IomodelError(f"--seqlens: {t!r} is not a length or a q:k pair of whole numbers: write e.g. "
                               "--seqlens 512,3000,77:4096 (or 512*100 for 100 sequences of 512)")
        pairs += [(nums[0], nums[-1])] * count
        _check_total(len(pairs), "--seqlens")
    return tuple(pairs)


#: Most sequences one histogram entry (``LEN*COUNT``) may stand for.
MAX_HISTOGRAM_COUNT = 1_000_000
#: Most sequences a ragged batch may hold in all (each is a tuple in memory).
MAX_SEQUENCES = 10_000_000


def _check_total(n: int, where: str) -> None:
    """Raise (one line) once a ragged batch lists more than :data:`MAX_SEQUENCES` sequences."""
    if n > MAX_SEQUENCES:
        raise IomodelError(f"{where} lists more than {MAX_SEQUENCES:,} sequences: model a sample of the batch "
                           "(bytes add up per sequence)")


def _histogram_count(text: str, where: str) -> tuple[str, int]:
    """Split a histogram entry ``LEN*COUNT`` (or ``q:k*COUNT``, ``q,k*COUNT`` in a file) into the
    entry and its count of sequences (1 without ``*``).

    Raises:
        IomodelError: a count that is not a whole number from 1 to :data:`MAX_HISTOGRAM_COUNT`.
    """
    if "*" not in text:
        return text, 1
    entry, _, count = text.rpartition("*")
    try:
        n = int(count.strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_HISTOGRAM_COUNT:
        raise IomodelError(f"{where}: the count after '*' must be a whole number from 1 to {MAX_HISTOGRAM_COUNT:,} "
                           "(LEN*COUNT: COUNT sequences of LEN tokens), e.g. 512*100")
    return entry.strip(), n


def read_seqlens_file(path: str | Path) -> tuple[tuple[int, int], ...]:
    """``--seqlens-file FILE``: a JSON list (``[512, [77, 4096], ...]``), or text with one length
    (``512``) or one ``q,k`` pair (``77,4096``) per line, each optionally with ``*COUNT`` for COUNT
    such sequences (``512*100``: a histogram bin); blank lines and ``#`` comments skipped.

    Raises:
        IomodelError: the file cannot be read, is empty, or has an entry that is not a length or a pair.
    """
    from iomodel.jsonvalues import input_file_problem

    p = Path(path)
    problem = input_file_problem(p)
    if problem is not None:
        raise IomodelError(f"--seqlens-file {path} {problem[0]}: give a readable text or JSON file")
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors write one) is not a length
    except (OSError, UnicodeDecodeError) as exc:
        raise IomodelError(f"--seqlens-file {path}: cannot read it ({exc.__class__.__name__}): give a readable "
                           "UTF-8 text or JSON file") from None
    if text.lstrip().startswith("["):
        items = parse_json(text, f"--seqlens-file {path}", "fix it")
        if isinstance(items, list) and any(isinstance(x, str) for x in items):
            raise IomodelError(f"--seqlens-file {path}: a JSON length is a string "
                               f"({next(x for x in items if isinstance(x, str))!r}): write it as a number")
        if not isinstance(items, list):
            raise IomodelError(f"--seqlens-file {path}: the JSON must be a list of lengths or [q, k] pairs")
        where = lambda i: f"--seqlens-file {path} entry {i}"  # noqa: E731
    else:
        lines = [(i, ln.split("#")[0].strip()) for i, ln in enumerate(text.splitlines(), 1)]
        numbered = [(i, ln) for i, ln in lines if ln]
        items = [ln for _, ln in numbered]
        where = lambda j: f"--seqlens-file {path} line {numbered[j][0]}"  # noqa: E731
    if not items:
        raise IomodelError(f"--seqlens-file {path} lists no sequence: one length (or q,k pair) per line")
    pairs: list[tuple[int, int]] = []
    for j, item in enumerate(items):
        count = 1
        if isinstance(item, str):  # a text line: LEN, q,k, or either with *COUNT (a histogram bin)
            item, count = _histogram_count(item, where(j))
        pairs += [_pair(item, where(j))] * count
        _check_total(len(pairs), f"--seqlens-file {path}")
    return tuple(pairs)
