"""Tiles of the bundled kernel's traffic contract (``docs/traffic-contract.md``), in numbers.

Each formula here is the one both sides read: the launcher in :mod:`kernels.flash_attention`
(through :mod:`kernels.heuristics`) runs these tiles, and the traffic model
(:mod:`iomodel.traffic`, :mod:`iomodel.cache.l2`) counts their bytes. Pure Python on ints;
:func:`program_sram_bytes` also takes numpy integer arrays (the compiled sweep).

Vocabulary: BLOCK_M query rows per program, BLOCK_N key rows per inner step, P =
heads_per_program (GQA packing: decode, and a prefill schedule's), num_splits (decode split-KV partitions), L keys per
split, HEAD_DIM (d), element width s in bytes.
"""

from __future__ import annotations

from typing import Any

from iomodel.spec.layer import cdiv

#: Largest seqlen_q that takes the decode (split-KV) path; longer queries run prefill.
DECODE_MAX_SEQLEN_Q = 16
#: Largest P * seqlen_q packed into one decode program's rows (traffic contract).
DECODE_MAX_ROWS = 128
#: Smallest padded HEAD_DIM: ``tl.dot`` needs a reduction dimension of at least 16.
MIN_HEAD_DIM_PAD = 16
#: Fewest rows of a decode program (BLOCK_M): ``tl.dot`` needs at least 16 rows.
DECODE_MIN_BLOCK_M = 16


#: Page sizes (tokens per KV-cache page) the paged decode runs: powers of two from 16 (the
#: smallest BLOCK_N a ``tl.dot`` takes) to 1024 (flash-attn's paged kvcache takes multiples
#: of 256, vLLM 16 or 32; both fall in this set when powers of two).
PAGE_SIZES = (16, 32, 64, 128, 256, 512, 1024)


def page_size_refusal(page_size: Any, fix: str = "use a power of two from 16 to 1024") -> str | None:
    """Why the paged decode does not run ``page_size`` (tokens per page), or None.

    Example:
        >>> page_size_refusal(48)
        'page_size must be one of 16, 32, 64, 128, 256, 512, 1024 tokens, got 48: use a power of two from 16 to 1024'
    """
    if not isinstance(page_size, bool) and isinstance(page_size, int) and page_size in PAGE_SIZES:
        return None
    return f"page_size must be one of {', '.join(map(str, PAGE_SIZES))} tokens, got {page_size!r}: {fix}"


def paged_block_n(block_n: int, page_size: int | None) -> int:
    """BLOCK_N of the paged decode: ``min(BLOCK_N, page_size)``, so every key block lies in one
    page (both are powers of two) and one block-table entry locates it. ``page_size`` None: ``block_n``.

    Example:
        >>> paged_block_n(64, 16), paged_block_n(64, 256), paged_block_n(64, None)
        (16, 64, 64)
    """
    return block_n if page_size is None else min(block_n, page_size)


def page_block_refusal(block_n: int, page_size: int | None, fix: str) -> str | None:
    """Why a forced BLOCK_N cannot run the paged decode over pages of ``page_size`` tokens, or None: a key block must
    lie in one page (one block-table entry locates it), so BLOCK_N <= page_size. The one rule the launcher, the
    worksheet and the plot apply; ``fix`` ends the sentence with the caller's spelling of the change.

    Example:
        >>> page_block_refusal(32, 16, "use --block-n 16 or less")
        'BLOCK_N 32 exceeds page_size 16 (a key block must lie in one page): use --block-n 16 or less'
    """
    if page_size is None or block_n <= page_size:
        return None
    return f"BLOCK_N {block_n} exceeds page_size {page_size} (a key block must lie in one page): {fix}"


def next_pow2(n: int) -> int:
    """Smallest power of two >= ``n`` (``n >= 1``; 1 for ``n <= 1``)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def head_dim_padded(head_dim: int) -> int:
    """HEAD_DIM the kernel computes with: ``max(16, next_pow2(head_dim))`` elements.

    Columns beyond ``head_dim`` are masked on every load and store, so they move no bytes
    (``tl.arange`` needs a power of two and ``tl.dot`` a reduction of at least 16).
    """
    return max(MIN_HEAD_DIM_PAD, next_pow2(head_dim))


def program_sram_bytes(block_m: Any, block_n: Any, num_stages: Any, head_dim: Any, width: Any) -> Any:
    """Shared memory one forward program holds, in bytes: ``(BLOCK_M·d + 2·num_stages·BLOCK_N·d)·s``.

    The Q tile ``(BLOCK_M, d)`` plus ``num_stages`` K tiles and V tiles of ``(BLOCK_N, d)``,
    all of element width s bytes (Triton tutorial 06 / FlashAttention-2 Section 3.1 layout;
    the score tile and the accumulators live in registers). Works on ints and on numpy
    integer arrays alike.

    Example:
        >>> program_sram_bytes(128, 64, 2, 128, 2)  # bf16, HEAD_DIM 128
        98304
    """
    return (block_m * head_dim + 2 * num_stages * block_n * head_dim) * width


def decode_heads_per_program(group: int, seqlen_q: int) -> int:
    """P: the largest divisor of the GQA group G with ``P * seqlen_q <= DECODE_MAX_ROWS`` (traffic contract).

    Args:
        group: G = H / H_kv query heads per KV head.
        seqlen_q: query rows per head (1..16).
    """
    best = 1
    for p in range(1, group + 1):
        if group % p == 0 and p * seqlen_q <= DECODE_MAX_ROWS:
            best = p
    return best


def decode_block_m(heads_per_program: int, seqlen_q: int) -> int:
    """BLOCK_M of a decode program: ``next_pow2(max(16, P * seqlen_q))`` rows (traffic contract)."""
    return next_pow2(max(DECODE_MIN_BLOCK_M, heads_per_program * seqlen_q))


def decode_block_m_refusal(block_m: Any, heads_per_program: int, seqlen_q: int,
                           fix: str = "set config.block_m={value}") -> str | None:
    """Why a decode program cannot run ``block_m`` rows, or None: BLOCK_M must be
    :func:`decode_block_m` (the P · seqlen_q packed query rows, padded to a power of two of at
    least 16), the one BLOCK_M the kernel's decode path runs (``kernels/flash_attention.py``
    refuses any other; the traffic model counts the same rows).

    Args:
        block_m: the BLOCK_M asked for (rows).
        heads_per_program: P, query heads packed per program.
        seqlen_q: query rows per head (1..16).
        fix: how to change it, with ``{value}`` for the right BLOCK_M (the kernel's config
            field by default; the CLI passes its flag).

    Returns:
        One sentence, or None.

    Example:
        >>> decode_block_m_refusal(16, 4, 16)
        'decode BLOCK_M must be next_pow2(max(16, P · seqlen_q)) = 64 rows (P = 4 heads per program × seqlen_q = 16), got 16: set config.block_m=64'
    """
    want = decode_block_m(heads_per_program, seqlen_q)
    if block_m == want:
        return None
    return (f"decode BLOCK_M must be next_pow2(max({DECODE_MIN_BLOCK_M}, P · seqlen_q)) = {want} rows "
            f"(P = {heads_per_program} heads per program × seqlen_q = {seqlen_q}), got {block_m!r}: "
            + fix.format(value=want))


def decode_splits_refusal(num_splits: int, seqlen_k: int, block_n: int,
                          fix: str = "use --num-splits {value} or fewer") -> str | None:
    """Why ``num_splits`` is more splits than the KV cache has key blocks, or None.

    With ``num_splits > cdiv(seqlen_k, BLOCK_N)`` the split length :func:`decode_split_len` is
    one block and every split past the last key block holds no keys: its programs only load Q
    and store empty partials (the kernel's heuristics never choose it,
    ``kernels/heuristics.py decode_num_splits``).

    Args:
        num_splits: splits asked for.
        seqlen_k: keys in the KV cache.
        block_n: BLOCK_N (key rows per block).
        fix: how to change it, with ``{value}`` for the number of key blocks.

    Example (one sentence when refused, None otherwise):
        >>> decode_splits_refusal(32, 1000, 64)
        'num_splits 32 is more than the 16 key blocks of seqlen_k 1,000 at BLOCK_N = 64 (splits past the last block hold no keys): use --num-splits 16 or fewer'
    """
    blocks = cdiv(seqlen_k, block_n)  # key blocks of BLOCK_N rows
    return None if num_splits <= blocks else (f"num_splits {num_splits} is more than the {blocks:,} key blocks of seqlen_k {seqlen_k:,} at "
            f"BLOCK_N = {block_n} (splits past the last block hold no keys): " + fix.format(value=blocks))


def decode_split_len(seqlen_k: int, num_splits: int, block_n: int) -> int:
    """L, keys per split: ``ceil(ceil(seqlen_k / num_splits) / BLOCK_N) * BLOCK_N`` (traffic contract).

    A multiple of BLOCK_N, so split sp covers keys ``[sp·L, min((sp+1)·L, seqlen_k))``.

    Example:
        >>> decode_split_len(8192, 3, 64)
        2752
    """
    return cdiv(cdiv(seqlen_k, num_splits), block_n) * block_n



def prefill_packing_refusal(heads_per_program: Any, group: int, block_m: int, backward: bool = False,
                            flag: str = "--heads-per-program", varlen: bool = False) -> str | None:
    """Why a prefill forward program cannot pack ``heads_per_program`` query heads of one GQA group, or None.

    Packing (FlashAttention-3's PackGQA, ``hopper/pack_gqa.h``): a program's BLOCK_M rows are
    BLOCK_M / P consecutive query positions of each of P query heads of one KV head (row r is
    position r // P of head r % P), so the K/V blocks one program streams serve P heads. P must be
    a whole number of at least 1; P > 1 needs a dense prefill forward (the backward kernels run one
    query head per program, the ragged launch its sequences' own grid) and P dividing the group G
    (whole programs per KV head) and BLOCK_M (a tile's rows are whole positions). The one home of
    the rule: the traffic model, the CLI, the sweeps and the kernel's launcher read it.

    Args:
        heads_per_program: P asked for (heads).
        group: G = H / H_kv query heads per KV head.
        block_m: BLOCK_M, rows per program.
        backward: the layer is a forward + backward step.
        flag: the option to change, named in the message (``--heads-per-program``; ``heads_per_program =`` in a sweep
            file, ``config.heads_per_program =`` for the kernel).
        varlen: a ragged (varlen) batch.

    Returns:
        One sentence, or None (P = 1 always runs).

    Example:
        >>> prefill_packing_refusal(3, 4, 128)
        'heads_per_program 3 must divide the GQA group H/H_kv = 4: use --heads-per-program 1, 2 or 4'
    """
    p = heads_per_program
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        return f"heads_per_program must be a whole number, 1 or more, got {p!r}: use {flag} 1 (one query head a program)"
    if p == 1:
        return None
    if backward:
        use = "--pass fwd" if flag.startswith("--") else 'pass = "fwd"'
        return (f"heads_per_program {p}: the model packs query heads in the prefill forward only (the bundled "
                f"backward kernels run one query head per program, whatever the forward did): use {use}, or "
                f"drop {flag.rstrip(' =')}")
    if varlen:
        return (f"heads_per_program {p}: packed query heads run in a dense prefill's programs, not a ragged batch's: "
                f"drop {flag.rstrip(' =')}")
    divisors = [d for d in range(1, group + 1) if group % d == 0]
    if group % p:
        listed = ", ".join(str(d) for d in divisors[:-1]) + f" or {divisors[-1]}" if len(divisors) > 1 else "1"
        return f"heads_per_program {p} must divide the GQA group H/H_kv = {group}: use {flag} {listed}"
    if block_m % p:
        fit = [d for d in divisors if block_m % d == 0]
        if p & (p - 1):
            wider = " (BLOCK_M is a power of two, so P must be a power of two too)"
        else:
            wider = f", or --block-m {p} or more" if flag.startswith("--") else f", or a BLOCK_M of {p} or more"
        return (f"heads_per_program {p} must divide BLOCK_M = {block_m} (each program holds BLOCK_M / P whole query "
                f"positions of P heads): use {flag} {max(fit)}{wider}")
    return None


#: The word for "one program per whole GQA group" (P = G = H / H_kv) where a whole number of heads per program goes.
WHOLE_GROUP = "group"


def packing_of(value: Any, group: int, flag: str = "--heads-per-program") -> int:
    """P from how a user gave it: a whole number (or its decimal string, as a flag gives it), or ``"group"``
    (:data:`WHOLE_GROUP`: P = ``group``, one program per whole GQA group). Anything else raises; whether P can run
    is :func:`prefill_packing_refusal`'s to say.

    Raises:
        IomodelError: not a whole number of at least 1 nor ``"group"`` (one line, naming ``flag``).
    """
    from iomodel.errors import IomodelError

    if isinstance(value, str):
        text = value.strip()
        if text.lower() == WHOLE_GROUP:
            return group
        if text.isascii() and text.isdecimal() and int(text) >= 1:
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise IomodelError(f"heads_per_program must be a whole number, 1 or more, or {WHOLE_GROUP!r} (the whole GQA group), "
                       f"got {value!r}: use {flag} 1 (one query head a program) or {flag} {WHOLE_GROUP}")


def writes_lse_refusal(writes_lse: bool, phase: str, backward: bool, varlen: bool = False) -> str | None:
    """Why a launch whose programs write O without its LSE (``Tiling.writes_lse`` False) is not modelled, or None:
    only a dense prefill forward may keep no LSE (the backward reads it; the decode kernel and the ragged launch are
    the bundled kernels', which write it). One home: the traffic model, the CLI and the ragged models read it."""
    if writes_lse or (phase == "prefill" and not backward and not varlen):
        return None
    return ("a forward that writes O without its LSE is modelled for a dense prefill forward only (the backward reads "
            "the LSE; the decode kernel and the ragged launch write it): write O and LSE (--writes O,LSE), or use "
            "--phase prefill --pass fwd on one dense layer")


def ragged_programs_refusal(heads_per_program: Any, writes_lse: bool) -> str | None:
    """Why a ragged (varlen) launch cannot run these programs, or None: it runs one query head a program and writes
    the LSE (:func:`prefill_packing_refusal` and :func:`writes_lse_refusal` with ``varlen``)."""
    if heads_per_program != 1 or isinstance(heads_per_program, bool):
        return prefill_packing_refusal(heads_per_program, 1, 1, varlen=True)
    return writes_lse_refusal(writes_lse, "prefill", False, varlen=True)


def packed_grid(seqlen_q: int, rows: int, block_m: int, heads_per_program: int = 1) -> tuple[int, int]:
    """The prefill forward's grid: (query tiles per grid row, grid rows) = (⌈N_q / (BLOCK_M / P)⌉, B·H / P) for
    ``rows`` = B·H query-head rows and P = ``heads_per_program`` (1: one head a program). Units: programs."""
    return cdiv(seqlen_q, block_m // heads_per_program), rows // heads_per_program

__all__ = [
    "DECODE_MAX_ROWS",
    "DECODE_MAX_SEQLEN_Q",
    "DECODE_MIN_BLOCK_M",
    "MIN_HEAD_DIM_PAD",
    "PAGE_SIZES",
    "decode_block_m",
    "decode_block_m_refusal",
    "decode_heads_per_program",
    "decode_split_len",
    "decode_splits_refusal",
    "head_dim_padded",
    "next_pow2",
    "page_size_refusal",
    "paged_block_n",
    "packed_grid",
    "packing_of",
    "WHOLE_GROUP",
    "prefill_packing_refusal",
    "ragged_programs_refusal",
    "writes_lse_refusal",
    "program_sram_bytes",
]
