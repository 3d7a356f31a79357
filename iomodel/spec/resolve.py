"""From a preset, a config.json and explicit sizes to one :class:`Layer`: spec, tiles, hardware.

:func:`resolve_layer` merges its sources in one order (explicit sizes over the config's,
the config over the preset, the preset over :data:`DEFAULT_PRESET`) and fills the phase's
defaults; the tiles are the bundled kernel's unless given. ``iomodel worksheet``,
``iomodel plot`` and the bundled worksheets all resolve their layer here, and tests and
notebooks call it directly. Errors name the option to change, so a command can print them
as they are. Nothing here imports sympy, numpy or torch.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import block_size_refusal
from iomodel.spec.config import DECODER_CAUSAL_HINT, AttentionConfig, load_config, load_preset
from iomodel.spec.dtypes import canonical_dtype
from iomodel.spec.hardware import Hardware, get_hardware
from iomodel.spec.layer import CAUSAL_ALIGNS, PASSES, PHASES, LayerSpec, Tiling, causal_right_refusal, window_masks_nothing
from iomodel.spec.ragged import RaggedSpec, parse_seqlens, read_seqlens_file
from iomodel.schedule.tiles import (decode_block_m_refusal, decode_splits_refusal, packing_of, page_block_refusal,
                                    prefill_packing_refusal, writes_lse_refusal)

#: Default layer of ``iomodel worksheet`` with no arguments (the README's quick start).
DEFAULT_PRESET = "llama-3-8b"
#: Default prefill length (tokens) and decode context length.
DEFAULT_SEQLEN = 8192
#: Default hardware preset.
DEFAULT_HARDWARE = "H200"
#: What a config's window or chunk that masks nothing at the layer's lengths is said to do (the sliding window's note
#: and the chunked or local one's).
HIDES_NOTHING = "it hides no key the mask shows (every query's keys lie within it), so the layer is modelled without"
#: Most sequences a ragged batch (``--seqlens``, ``--seqlens-file``) may list.
MAX_SEQUENCES = 10**6
#: Most distinct ``(N_q, N_k)`` lengths a ragged batch may hold: the worksheet sums each distinct length exactly, about
#: 0.4 ms each on a 2-core CPU (20,000: 7.7 s, 2026-12-05), so 10^6 distinct lengths ran for 351 s.
MAX_DISTINCT_LENGTHS = 20_000


#: How a tiling source says its tiles were given (flags, or a ``--schedule`` file's tile fields); the worksheet's
#: command repeats such tiles as flags.
GIVEN = "given (as flags or in a --schedule file)"


def seqlens_text(seqlens: tuple[tuple[int, int], ...]) -> str:
    """The ``--seqlens`` text of a ragged batch: one entry per run of equal sequences, ``LEN`` (or ``q:k``), with
    ``*COUNT`` for a run of more than one (at most :data:`iomodel.spec.ragged.MAX_HISTOGRAM_COUNT` a run), so the
    reproduce line of 40,000 sequences of 512 tokens is ``512*40000``, not a 160 KB argument a shell refuses."""
    from itertools import groupby

    from iomodel.spec.ragged import MAX_HISTOGRAM_COUNT

    out = []
    for (q, k), run in groupby(seqlens):
        entry, n = (str(q) if q == k else f"{q}:{k}"), sum(1 for _ in run)
        while n > 0:
            take = min(n, MAX_HISTOGRAM_COUNT)
            out.append(entry if take == 1 else f"{entry}*{take}")
            n -= take
    return ",".join(out)


@dataclass(frozen=True)
class Layer:
    """Everything a worksheet or plot needs: the layer, its tiles and the hardware.

    Attributes:
        spec: the attention call (shapes in elements, dtype, mask, phase, pass).
        tiling: the tiles evaluated (BLOCK_M, BLOCK_N, num_stages, num_splits, heads per program).
        hardware: the accelerator (HBM bandwidth, L2 and shared-memory bytes, peak FLOP/s).
        tiling_source: one sentence on where the tiles come from.
        config: the HF-style config the layer was read from (None for flags only).
        notes: extra header sentences (e.g. a length beyond the model's context window).
        preset: the bundled preset name, if one was used.
        overrides: the config fields replaced by flags (for the header).
        ragged: the ragged batch (``--seqlens``/``--seqlens-file``), else None; then ``spec``
            is the batch padded to its longest sequence (:meth:`RaggedSpec.padded`).
        seqlens_file: the ``--seqlens-file`` the ragged batch was read from (for the command).
        tiles: the tile flags given (``block_m``, ``block_n``, ``num_stages``, ``num_splits``, then ``writes`` and
            ``heads_per_program``, with their values), which the command repeats as given.
        inert_window: the sides (left, right tokens) of the config's sliding window where it hides no key at these
            lengths, so the layer is modelled without one (:func:`~iomodel.spec.layer.window_masks_nothing`; the
            command then adds no ``--window none``, and a plot over longer lengths, where it binds, is refused); None
            otherwise.
    """

    spec: LayerSpec
    tiling: Tiling
    hardware: Hardware
    tiling_source: str
    config: AttentionConfig | None = None
    notes: tuple[str, ...] = ()
    preset: str | None = None
    overrides: tuple[str, ...] = ()
    ragged: RaggedSpec | None = None
    seqlens_file: str | None = None
    tiles: tuple[tuple[str, Any], ...] = ()
    inert_window: tuple[int | None, int | None] | None = None

    @property
    def window_inert(self) -> bool:
        """Whether the config's sliding window hides no key at these lengths (:attr:`inert_window` is its sides)."""
        return self.inert_window is not None

    @property
    def splits_given(self) -> bool:
        """Whether ``--num-splits`` fixed the decode split count (else the launcher's, at each length a plot draws)."""
        return "num_splits" in dict(self.tiles)

    @property
    def title(self) -> str:
        """The layer's name for a header: the model's, with the config fields flags replaced named after it
        (``llama-3-8b with heads, head_dim from flags``), so a title never names a model whose shape it is not."""
        return self.spec.name + (f" with {', '.join(self.overrides)} from flags" if self.overrides else "")

    def command(self, tiles_given: bool | None = None) -> str:
        """The ``iomodel worksheet`` command line that reproduces this layer (paths quoted for a POSIX shell)."""
        s = self.spec
        parts = ["iomodel worksheet"]
        if self.preset:
            parts.append(f"--preset {self.preset}")
        elif self.config is not None:
            parts.append(f"--config {shlex.quote(str(self.config.source))}")
        if self.config is None or "heads" in self.overrides:
            parts.append(f"--heads {s.heads}")
        if self.config is None or "kv_heads" in self.overrides:
            parts.append(f"--kv-heads {s.kv_heads}")
        if self.config is None or "head_dim" in self.overrides:
            parts.append(f"--head-dim {s.head_dim}")
        if self.config is None or "dtype" in self.overrides:
            parts.append(f"--dtype {s.dtype}")
        parts.append(f"--phase {s.phase}")
        if self.seqlens_file is not None:
            parts.append(f"--seqlens-file {shlex.quote(str(self.seqlens_file))}")
        elif self.ragged is not None:
            parts.append("--seqlens " + shlex.quote(seqlens_text(self.ragged.seqlens)))  # "*" quoted for a shell
        elif s.phase == "prefill" and s.seqlen_q == s.seqlen_k:
            parts.append(f"--seqlen {s.seqlen_q}")
        else:
            parts.append(f"--seqlen-q {s.seqlen_q} --seqlen-k {s.seqlen_k}")
        if self.ragged is None:
            parts.append(f"--batch {s.batch}")
        windowed = s.window_left is not None or s.window_right is not None
        # without a causal mask the alignment still sets a window's offset: said whenever there is a window (the
        # config's too where it hides no key here: another alignment may make it bind)
        parts.append(f"--causal --causal-align {s.causal_align}" if s.causal else
                     "--no-causal" + (f" --causal-align {s.causal_align}" if windowed or self.window_inert else ""))
        if windowed:
            sides = [s.window_left, s.window_right] if s.window_right is not None else [s.window_left]
            parts.append("--window " + ",".join("-1" if v is None else str(v) for v in sides))
        elif self.config is not None and self.config.window is not None and not self.window_inert and (
                self.config.window_kind == "sliding-window" or max(s.seqlen_q, s.seqlen_k) > self.config.window):
            parts.append("--window none")  # the config's window, sliding, or chunked or local where it masks keys
        if s.page_size is not None:
            parts.append(f"--page-size {s.page_size}")
        if s.backward:
            parts.append("--pass fwd+bwd")
        if self.tiles and tiles_given is None:  # the tile flags as given: the same tiles, the same wording
            parts.append(" ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.tiles))
        elif tiles_given if tiles_given is not None else GIVEN in self.tiling_source:
            t = self.tiling
            parts.append(f"--block-m {t.block_m} --block-n {t.block_n} --num-stages {t.num_stages}")
            if s.phase == "decode":
                parts.append(f"--num-splits {t.num_splits}")
        parts.append(f"--hardware {self.hardware.name}")
        return " ".join(parts)


def _pick(value: Any, base: Any) -> Any:
    """``base`` where ``value`` was not given (None), else ``value``."""
    return base if value is None else value


def resolve_layer(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    batch: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    seqlen: int | None = None,
    seqlen_q: int | None = None,
    seqlen_k: int | None = None,
    dtype: str | None = None,
    causal: bool | None = None,
    causal_align: str | None = None,
    window: str | None = None,
    phase: str = "prefill",
    passes: str = "fwd",
    block_m: int | None = None,
    block_n: int | None = None,
    num_stages: int | None = None,
    num_splits: int | None = None,
    heads_per_program: int | str | None = None,
    writes: str | None = None,
    hardware: str = DEFAULT_HARDWARE,
    page_size: int | None = None,
    seqlens: str | None = None,
    seqlens_file: str | Path | None = None,
) -> Layer:
    """Build a :class:`Layer` from the options of ``iomodel worksheet`` / ``iomodel plot``.

    The base layer is ``config`` (a HF-style config.json), else ``preset``, else
    :data:`DEFAULT_PRESET` unless ``heads``, ``kv_heads``, ``head_dim`` and ``dtype`` are
    all given. Explicit sizes override the config's. Defaults: prefill of
    :data:`DEFAULT_SEQLEN` tokens (``seqlen`` sets seqlen_q = seqlen_k), decode of one
    query row against a KV cache of ``seqlen`` (default :data:`DEFAULT_SEQLEN`); causal,
    top-left for prefill and bottom-right for decode, except a prefill of a model whose
    self-attention is bidirectional (:attr:`AttentionConfig.causal_default` False: BERT, the
    encoder of T5), which is not causal unless ``causal`` says so, with a note saying why; batch 1; the config's dtype; H200;
    the tiles of :func:`iomodel.report.worksheet.kernel_tiling` unless ``block_m``/``block_n``/``num_stages``/
    ``num_splits`` are given (then checked against the hardware's shared memory per block).
    ``heads_per_program`` P (dense prefill forward only): each program packs P query heads of one KV head into its
    BLOCK_M rows (:func:`iomodel.schedule.tiles.prefill_packing_refusal`; FlashAttention-3's PackGQA), which the
    bundled pointer prefill runs from a given ``KernelConfig``; P = H/H_kv is one program per whole GQA group. ``writes`` (prefill forward only):
    ``"O,LSE"`` (every bundled kernel) or ``"O"`` (programs that keep no LSE: ``Tiling.writes_lse`` False).
    ``window`` (:func:`parse_window`): ``"L"``, ``"L,R"`` or ``"none"``; default a config's
    sliding window (``sliding_window`` W: left W − 1, HF transformers' flash-attention call;
    bidirectional: :attr:`AttentionConfig.window_each_side`, else W // 2, each side)
    on its windowed layers, with a note naming them (``--window none`` models its full layers).
    A full-attention layer (``--window none`` on a config with a sliding window, or a config
    without one) of a model whose full layers have their own KV heads and HEAD_DIM (Gemma-4,
    :meth:`AttentionConfig.full_geometry`, HF ``Gemma4TextAttention``) gets those sizes unless
    ``kv_heads``/``head_dim`` give them, with a note; a sliding layer's note says they differ.
    ``page_size``: decode over a paged KV cache of that many tokens per page
    (:attr:`LayerSpec.page_size`; None: dense).
    ``seqlens`` (``"512,3000,77"``; ``q:k`` for a sequence with other key length,
    :func:`iomodel.spec.ragged.parse_seqlens`) or ``seqlens_file``
    (:func:`iomodel.spec.ragged.read_seqlens_file`) make a ragged batch: :attr:`Layer.ragged`
    holds it and :attr:`Layer.spec` is the batch padded to its longest sequence (tiles, config
    checks and the eager baseline are the padded batch's).

    Raises:
        IomodelError: both a preset and a config; unknown preset, dtype, phase, pass,
            alignment or hardware; a malformed config.json; sizes that are zero or
            negative; heads not divisible by kv_heads; conflicting sequence lengths;
            tiles that are not powers of two or do not fit shared memory; a decode
            ``block_m`` other than the kernel's (:func:`iomodel.schedule.tiles.decode_block_m_refusal`)
            or more splits than key blocks (:func:`iomodel.schedule.tiles.decode_splits_refusal`);
            ``seqlens`` with ``seqlens_file``, ``batch`` or a sequence length; a bad length
            list (empty, a length below 1 or not a whole number, more than
            :data:`MAX_SEQUENCES` sequences, a file that cannot be read); a ragged batch
            with decode or backward; a full-attention layer whose HEAD_DIM (Gemma-4's ``global_head_dim``) the
            bundled kernel refuses, unless ``block_m`` and ``block_n`` are given (the message names the field).
    """
    ragged_pairs = _ragged_pairs(seqlens, seqlens_file, batch=batch, seqlen=seqlen, seqlen_q=seqlen_q,
                                 seqlen_k=seqlen_k)
    if ragged_pairs is not None:  # the padded batch is the dense layer resolved below
        batch, seqlen_q, seqlen_k = len(ragged_pairs), max(q for q, _ in ragged_pairs), max(k for _, k in ragged_pairs)
    if preset is not None and config is not None:
        raise IomodelError("pass either --preset or --config, not both")
    if preset is not None and not preset.strip():  # "" would be read as no preset: the default layer
        raise IomodelError("--preset is empty: name a preset (see `iomodel presets`), or leave it out for the default "
                           f"{DEFAULT_PRESET}")
    if phase not in PHASES:
        raise IomodelError(f"phase {phase!r} is unknown: use --phase prefill or --phase decode")
    if passes not in PASSES:
        raise IomodelError(f"pass {passes!r} is unknown: use --pass fwd or --pass fwd+bwd")
    if causal_align is not None and causal_align not in CAUSAL_ALIGNS:
        raise IomodelError(f"causal alignment {causal_align!r} is unknown: use --causal-align top-left or bottom-right")
    if dtype is not None:
        dtype = canonical_dtype(dtype)
    hw = get_hardware(hardware)

    given = {k: v for k, v in dict(heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype).items()
             if v is not None}
    cfg: AttentionConfig | None = None
    if config is not None:
        cfg = load_config(config, dtype=dtype, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    elif preset is not None or len(given) < 4:
        preset = preset or DEFAULT_PRESET
        cfg = load_preset(preset)
    # a config file read with the flags applied holds their values: every flag given is an override
    overrides = tuple(k for k, v in given.items() if cfg is not None and (config is not None or getattr(cfg, k) != v))

    if seqlen is not None and (isinstance(seqlen, bool) or not isinstance(seqlen, int) or seqlen <= 0):
        raise IomodelError(f"seqlen must be a positive integer, got {seqlen!r}: set --seqlen to 1 or more")
    for flag, v in (("seqlen-q", seqlen_q), ("seqlen-k", seqlen_k)):  # named as given: one alone sets both lengths
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise IomodelError(f"{flag.replace('-', '_')} must be a positive integer, got {v!r}: set --{flag} to 1 or "
                               "more")
    if phase == "prefill":
        if seqlen is not None and (seqlen_q is not None or seqlen_k is not None):
            raise IomodelError("give either --seqlen or --seqlen-q/--seqlen-k, not both")
        n = _pick(seqlen, DEFAULT_SEQLEN)
        nq = _pick(seqlen_q, n if seqlen_k is None else seqlen_k)
        nk = _pick(seqlen_k, nq)
    else:
        if seqlen is not None and seqlen_k is not None:
            raise IomodelError("for decode --seqlen is the KV-cache length: give either --seqlen or --seqlen-k")
        nk = _pick(seqlen_k, _pick(seqlen, DEFAULT_SEQLEN))
        nq = _pick(seqlen_q, 1)  # the decode limit is the kernel's: kernel_tiling refuses beyond it
    bidirectional = phase == "prefill" and cfg is not None and not cfg.causal_default and not causal
    if causal is None:
        causal = not bidirectional  # a decode step is a decoder's (causal over its KV cache)
    decoder_layer = cfg is not None and cfg.runs_decoder(phase, causal)  # an encoder-decoder's decoder layer
    if decoder_layer:
        cfg = cfg.for_decoder()  # LED, LongT5, BigBird-Pegasus: the encoder's local or sparse attention is not its
    elif cfg is not None and cfg.encoder_refusal is not None:  # the encoder's layer: refused as the file says
        raise IomodelError(cfg.encoder_refusal)
    align = _pick(causal_align, "top-left" if phase == "prefill" else "bottom-right")

    spec = LayerSpec(
        batch=_pick(batch, 1),
        heads=_pick(heads, cfg.heads if cfg else None),
        kv_heads=_pick(kv_heads, cfg.kv_heads if cfg else None),
        head_dim=_pick(head_dim, cfg.head_dim if cfg else None),
        seqlen_q=nq,
        seqlen_k=nk,
        dtype=_pick(dtype, cfg.dtype if cfg else None),
        causal=causal,
        causal_align=align,  # type: ignore[arg-type]
        phase=phase,  # type: ignore[arg-type]
        backward=passes == "fwd+bwd",
        name=(cfg.name if cfg else "custom"),
    )

    sliding = cfg is not None and cfg.window is not None and cfg.window_kind == "sliding-window"
    left, right = parse_window(window) if window is not None else (None, None)
    if (why := causal_right_refusal(bool(causal), right)) is not None:
        raise IomodelError(f"--window {window} {why}: use --window L (or L,0) for a causal layer, or add --no-causal "
                           "for a two-sided band")
    window_note = ""
    both_ways = sliding and not causal and not cfg.causal_default  # a bidirectional model's window
    # keys each side of a bidirectional window: HF transformers' Gemma3TextConfig sets sliding_window to W // 2 + 1
    # under use_bidirectional_attention and masks |q − k| < that (EmbeddingGemma); T5Gemma's encoder masks |q − k| < W
    reach = (cfg.window // 2 if cfg.window_each_side is None else cfg.window_each_side) if both_ways else None
    if sliding and window is not None and (left, right) == ((reach, reach) if both_ways else (cfg.window - 1, None)):
        window = None  # the config's own window, given as a flag (a Reproduce line): the same layer, the same note
    if window is None and both_ways:
        left = right = reach
        window_note = (f"{cfg.source or cfg.name}: sliding window of {cfg.window:,} tokens on {cfg.window_layers}, "
                       f"bidirectional: modelled as one of those layers (keys with |q − k| < {reach + 1:,}: "
                       f"{left:,} tokens each side of the diagonal, as transformers masks a bidirectional window of "
                       f"{cfg.window:,}); pass --window none to model a full-attention layer.")
    elif window is None and sliding:
        left = cfg.window - 1
        window_note = (f"{cfg.source or cfg.name}: sliding window of {cfg.window:,} tokens on {cfg.window_layers}: "
                       f"modelled as one of those layers (window {left:,} tokens left of the diagonal"
                       + ("; with --no-causal every key right of the diagonal too, as the model's window is causal: "
                          "pass --window L,R for a band of R keys right" if not causal else "")
                       + "); pass --window none to model a full-attention layer.")
    elif sliding and window is not None:
        window_note = (f"{cfg.source or cfg.name}: sliding window of {cfg.window:,} tokens on {cfg.window_layers}; "
                       f"--window {window} models the layer asked for.")
    inert = (window is None and sliding and ragged_pairs is None
             and window_masks_nothing(bool(causal), left, right, spec.seqlen_q, spec.seqlen_k, spec.causal_offset))
    inert_sides = (left, right) if inert else None
    if inert:  # the config's window hides no key at these lengths: the same attention as none, modelled so
        left = right = None
        window_note = (f"{cfg.source or cfg.name}: sliding window of {cfg.window:,} tokens on {cfg.window_layers}: at "
                       f"{spec.seqlen_q:,} queries and {spec.seqlen_k:,} keys {HIDES_NOTHING} a window.")
    if page_size is not None and window is None and sliding and not inert:  # the config's window, not a flag's
        raise IomodelError(f"{cfg.source or cfg.name} gives a sliding window of {cfg.window:,} tokens and the paged "
                           "decode has none: pass --window none (a full-attention layer) or drop --page-size")
    geometry, geometry_note = _full_layer_geometry(cfg, spec, kv_heads=kv_heads, head_dim=head_dim,
                                                   full=window is not None and (left, right) == (None, None))
    spec = spec.with_(window_left=left, window_right=right, page_size=page_size, **geometry)
    ragged = RaggedSpec(spec, ragged_pairs) if ragged_pairs is not None else None  # refuses decode, backward
    if cfg is not None:
        cfg.check_dense(spec.seqlen_q, spec.seqlen_k)  # long-context sparse attention past its dense length
    if cfg is not None and not sliding and window is None:
        cfg.check_seqlen(spec.seqlen_q, spec.seqlen_k, ragged=ragged is not None, spec=spec)  # chunked or local
        if cfg.window is not None:  # within it: those layers are full attention at these lengths, said
            longest = "the batch's longest, "
            window_note = (f"{cfg.source or cfg.name}: {cfg.window_kind} attention of {cfg.window_words()} on "
                           f"{cfg.window_layers}: at "
                           + (f"a KV cache of {spec.seqlen_k:,} keys" if phase == "decode" else
                              f"{longest if ragged else ''}{spec.seqlen_q:,} queries and {spec.seqlen_k:,} keys")
                           + f" {HIDES_NOTHING} one.")
    elif cfg is not None and not sliding and cfg.window is not None and (
            left is not None or right is not None or max(spec.seqlen_q, spec.seqlen_k) > cfg.window):
        # --window states the layer asked for (--window none within the config's window: the same full layer)
        window_note = (f"{cfg.source or cfg.name}: {cfg.window_kind} attention of {cfg.window_words()} on "
                       f"{cfg.window_layers}; --window {window} models the layer asked for.")
    if num_splits is not None and phase != "decode":
        raise IomodelError("--num-splits applies to decode only: add --phase decode or drop it")
    heads_per_program = packing_of(heads_per_program, spec.group) if heads_per_program is not None else None
    if heads_per_program is not None and phase != "prefill":
        raise IomodelError("--heads-per-program packs query heads into the programs of a dense prefill schedule; "
                           "decode packs its own (the kernel's decode_heads_per_program): drop it with --phase decode")
    from iomodel.report.worksheet import kernel_tiling  # the kernel heuristics' tiles; imported where used

    explicit = {k: v for k, v in dict(block_m=block_m, block_n=block_n, num_stages=num_stages,
                                       num_splits=num_splits).items() if v is not None}
    try:
        tiling, source = kernel_tiling(spec, hw, tiles_given={"block_m", "block_n"} <= explicit.keys(),
                                       varlen=ragged is not None,
                                       tiles=(block_m, block_n, num_stages) if explicit.keys() - {"num_splits"}
                                       else None,
                                       packed=isinstance(heads_per_program, int) and heads_per_program > 1)
    except IomodelError as exc:
        if "head_dim" not in geometry or "HEAD_DIM" not in str(exc):
            raise
        # the HEAD_DIM came from the config's full-attention layers, not a flag: say where, in the same line
        raise IomodelError(f"{cfg.source or cfg.name}: the full-attention layer asked for has HEAD_DIM "
                           f"{spec.head_dim} (global_head_dim): {exc}") from None
    if explicit:
        tiling = replace(tiling, **explicit)  # the rest (backward tiles, heads per program) as the kernel's
        named = ", ".join(f"{k.upper() if k.startswith('block') else k} = {v}" for k, v in explicit.items())
        unrun = [r for k in ("block_m", "block_n") if k in explicit
                 for r in [block_size_refusal(k, explicit[k])] if r is not None]
        if unrun:  # tiles the kernel's launcher refuses: modelled, never labelled as the bundled kernel's
            source = (f"{named} {GIVEN}; no bundled kernel runs these tiles "
                      f"({'; '.join(r.split(': change it')[0] for r in unrun)})")
        else:
            source = f"{named} {GIVEN}; the rest {source[0].lower()}{source[1:]}"
    if writes is not None:  # what each prefill forward program writes: O and LSE (every bundled kernel) or O alone
        from iomodel.schedule.launch import PROGRAM_WRITES, Schedule

        listed = [t.strip() for t in str(writes).split(",") if t.strip()]
        written = Schedule(writes=listed).writes  # one line naming the sets a schedule may write
        reason = writes_lse_refusal("LSE" in written, phase, passes == "fwd+bwd", ragged is not None)
        if reason is not None:
            raise IomodelError(f"--writes {writes}: {reason}")
        tiling = replace(tiling, writes_lse="LSE" in written)
        explicit["writes"] = ",".join(written)
        if written != PROGRAM_WRITES:
            source += (f"; --writes O {GIVEN}: each program writes O alone, no LSE (an inference "
                       "kernel's schedule no bundled kernel runs)")
    if heads_per_program is not None:  # FlashAttention-3's PackGQA: the pointer prefill runs it from a KernelConfig
        reason = prefill_packing_refusal(heads_per_program, spec.group, tiling.block_m, spec.backward,
                                         varlen=ragged is not None)
        if reason is not None:
            raise IomodelError(reason)
        tiling = replace(tiling, heads_per_program=heads_per_program)
        explicit["heads_per_program"] = heads_per_program
        if heads_per_program > 1:
            source += (f"; heads_per_program = {heads_per_program} {GIVEN}: each program packs "
                       f"{heads_per_program} query heads of one KV head (FlashAttention-3's PackGQA), which the bundled "
                       "pointer prefill runs through KernelConfig(heads_per_program=...) on path 'prefill' (its launcher "
                       "never picks it)")
    if phase == "decode":  # the decode tiles the kernel runs (iomodel.schedule.tiles, read by the kernel too)
        reason = (decode_block_m_refusal(tiling.block_m, tiling.heads_per_program, spec.seqlen_q,
                                         "use --block-m {value} or leave it out") if "block_m" in explicit else None)
        if reason is None and explicit.keys() & {"num_splits", "block_n"}:
            reason = decode_splits_refusal(tiling.num_splits, spec.seqlen_k, tiling.block_n)
        if reason is None:
            reason = page_block_refusal(tiling.block_n, spec.page_size, f"use --block-n {spec.page_size} or less")
        if reason is not None:
            raise IomodelError(reason)
    tiling.check_fits(spec, hw.smem_per_block, hw.name)

    notes: list[str] = list(cfg.notes) if cfg else []
    if window_note:
        notes.append(window_note)
    if geometry_note:
        notes.append(geometry_note)
    if bidirectional:
        notes.append(f"{cfg.bidirectional_source}: modelled without a causal mask; pass --causal to model a "
                     "causal layer.")
    if phase == "decode" and cfg is not None and cfg.decode_refusal is not None:  # DETR: no KV cache, no decode
        raise IomodelError(cfg.decode_refusal)
    if phase == "decode" and cfg is not None and not cfg.causal_default:  # an encoder has no KV cache to decode
        source = cfg.bidirectional_source.removesuffix(" " + DECODER_CAUSAL_HINT)  # this step is that causal layer
        notes.append(f"{source}: a decode step is a causal decoder's (an encoder keeps no KV "
                     "cache): modelled as a causal KV-cache decode of these sizes.")
    if cfg is not None and cfg.attention_dropout and passes == "fwd+bwd":
        notes.append(f"the model trains with attention dropout p = {cfg.attention_dropout:g}: modelled without it "
                     "(the bundled kernel has none; the eager chain would also write and read a keep-mask of the "
                     "scores' size).")
    short = [(q, k) for q, k in (ragged.seqlens if ragged is not None else ((spec.seqlen_q, spec.seqlen_k),)) if q < k]
    if spec.causal and spec.causal_align == "top-left" and phase == "prefill" and short:
        q, k = short[0]
        notes.append(
            "causal top-left (PyTorch is_causal, the prefill default) with fewer queries than keys"
            + (f" ({len(short):,} sequence{'s' * (len(short) > 1)} of the batch; the first, {q:,} over {k:,})"
               if ragged is not None else "")
            + f": query row m sees keys n <= m, so the last {k - q:,} of {k:,} keys are seen by no query. A chunk "
            "of new queries over a longer KV cache (chunked prefill, prefix caching: FlashAttention >= 2.1, vLLM) "
            "aligns bottom-right: pass --causal-align bottom-right for that layer.")
    # the decoder's layer (a decode step, or --causal on an encoder-decoder file): held to the decoder's context
    decoder = decoder_layer and cfg.decoder_context is not None
    limit = (cfg.decoder_context if decoder else cfg.max_position_embeddings) if cfg else None
    if limit and max(spec.seqlen_q, spec.seqlen_k) > int(limit):
        said = (f"{cfg.decoder_context_key} = {int(limit):,}, the decoder's" if decoder else
                f"{cfg.context_source or 'max_position_embeddings'} = {int(limit):,}")
        notes.append(
            f"seqlen {max(spec.seqlen_q, spec.seqlen_k):,} exceeds the model's context window "
            f"({said}): these are the layer's shapes at that length, not a configuration the checkpoint supports."
        )
    if decoder_layer:  # Whisper, T5, BART: a cross-attention beside it
        frames = cfg.max_position_embeddings
        enc = f"{int(frames)}" if frames else "N_enc"
        what = (f"up to {enc} positions, the encoder's context" if frames else "as long as the encoder's input")
        sizes = f"--heads {spec.heads} --kv-heads {spec.kv_heads} --head-dim {spec.head_dim} --dtype {spec.dtype}"
        how = (f"--phase decode --seqlen-k {enc}" if phase == "decode" else f"--no-causal --seqlen-q "
               f"{spec.seqlen_q} --seqlen-k {enc}")
        notes.append(
            "each decoder layer of this encoder-decoder also runs a cross-attention, not in this worksheet: the "
            f"decoder's queries over the encoder's output ({what}), no mask, its K/V computed once per input and "
            f"cached; model it as its own layer, without --config (whose context check is the decoder's): {sizes} "
            f"{how}.")
    return Layer(spec=spec, tiling=tiling, hardware=hw, tiling_source=source, config=cfg,
                 notes=tuple(notes), preset=preset if config is None else None, overrides=overrides,
                 ragged=ragged, seqlens_file=str(seqlens_file) if seqlens_file is not None else None,
                 tiles=tuple(explicit.items()), inert_window=inert_sides)


def _full_layer_geometry(cfg: AttentionConfig | None, spec: LayerSpec, *, kv_heads: int | None,
                         head_dim: int | None, full: bool) -> tuple[dict[str, int], str]:
    """The KV heads and HEAD_DIM (counts of heads and elements per head) of the layer modelled where the model's
    full-attention layers have their own (:meth:`AttentionConfig.full_geometry`: Gemma-4, HF transformers'
    ``Gemma4TextAttention``: ``global_head_dim``, ``num_global_key_value_heads`` under ``attention_k_eq_v``), and a
    note saying which layer's sizes are modelled.

    The layer modelled is a full-attention one when ``full`` (``--window none`` or ``-1``) or the config has no
    window; then its sizes replace ``spec``'s, except the ones ``kv_heads``/``head_dim`` (the flags) give. Otherwise
    (a sliding-window layer) nothing changes and the note names the full layers' sizes and ``--window none``.

    Returns:
        ``({"kv_heads": ..., "head_dim": ...} for the sizes to change, note)``; ``({}, "")`` for a model whose
        layers all have one geometry. Raises nothing.
    """
    full_sizes = cfg.full_geometry() if cfg is not None else None
    if full_sizes is None:
        return {}, ""
    full_kv, full_d = full_sizes
    where = cfg.source or cfg.name
    if not full and cfg.window is not None:
        return {}, (f"{where}: a sliding-window layer is modelled (H_kv {spec.kv_heads}, HEAD_DIM "
                    f"{spec.head_dim}); pass --window none to model a full-attention layer with its own sizes.")
    sizes = {k: v for k, v, flag in (("kv_heads", full_kv, kv_heads), ("head_dim", full_d, head_dim))
             if flag is None and v != getattr(spec, k)}
    if not sizes:
        return {}, ""
    why = "--window none" if cfg.window is not None else "no layer slides"
    said = " and ".join(f"{'H_kv' if k == 'kv_heads' else 'HEAD_DIM'} {v} (not {getattr(spec, k)})"
                        for k, v in sizes.items())
    return sizes, (f"{where}: a full-attention layer is modelled ({why}), with the full layers' own {said}, as HF "
                   "transformers' Gemma4TextAttention builds them.")


def _ragged_pairs(seqlens: str | None, seqlens_file: str | Path | None, **dense: Any
                  ) -> tuple[tuple[int, int], ...] | None:
    """The ``(N_q, N_k)`` pairs of ``--seqlens`` or ``--seqlens-file``, or None when neither is given.

    ``dense``: the dense-length options (``batch``, ``seqlen``, ``seqlen_q``, ``seqlen_k``);
    any of them given with a ragged batch is refused rather than overridden.

    Raises:
        IomodelError: both sources, a dense-length option beside them, a bad list (see
            :func:`iomodel.spec.ragged.parse_seqlens`), more than :data:`MAX_SEQUENCES` sequences or
            :data:`MAX_DISTINCT_LENGTHS` distinct lengths,
            a query length below 1 or a key length below 0, no sequence with a key, or a length above
            :data:`iomodel.traffic.model.PREDICT_MAX_SEQLEN`.
    """
    if seqlens is None and seqlens_file is None:
        return None
    if seqlens is not None and seqlens_file is not None:
        raise IomodelError("give either --seqlens or --seqlens-file, not both")
    flag = "--seqlens" if seqlens is not None else "--seqlens-file"
    given = [f"--{k.replace('_', '-')}" for k, v in dense.items() if v is not None]
    if given:
        raise IomodelError(f"{flag} sets the batch and every sequence length: drop {', '.join(given)}")
    pairs = parse_seqlens(seqlens) if seqlens is not None else read_seqlens_file(seqlens_file)
    if len(pairs) > MAX_SEQUENCES:
        raise IomodelError(f"{flag} lists {len(pairs):,} sequences, more than the {MAX_SEQUENCES:,} modelled: "
                           "split the batch")
    distinct = len(set(pairs))
    if distinct > MAX_DISTINCT_LENGTHS:
        raise IomodelError(f"{flag} holds {distinct:,} distinct lengths, more than the {MAX_DISTINCT_LENGTHS:,} the "
                           "worksheet sums one by one (about 0.4 ms each): round the lengths (e.g. up to a multiple of "
                           "16) or model a sample of the batch")
    bad = next((p for p in pairs if any(isinstance(n, bool) or not isinstance(n, int) for n in p)
                or p[0] < 1 or p[1] < 0), None)
    if bad is not None:
        shown = bad[0] if bad[0] == bad[1] else f"{bad[0]}:{bad[1]}"
        raise IomodelError(f"{flag}: {shown} is not a length: every length must be a whole number >= 1 (a key "
                           "length may be 0, q:0, for a sequence that uses no key)")
    if all(k == 0 for _, k in pairs):
        raise IomodelError(f"{flag}: every sequence uses 0 keys (each output is 0): give at least one sequence keys")
    from iomodel.traffic.model import PREDICT_MAX_SEQLEN

    long = max(max(p) for p in pairs)
    if long > PREDICT_MAX_SEQLEN:  # said here, naming the flag (the model's own line names --seqlen)
        raise IomodelError(f"{flag}: a sequence of {long:,} tokens is above the largest the exact model evaluates "
                           f"({PREDICT_MAX_SEQLEN:,}): give every length at most that")
    return pairs


def parse_window(text: str) -> tuple[int | None, int | None]:
    """``--window``: ``"L"`` (left only), ``"L,R"`` or ``"none"`` → ``(left, right)`` tokens (None = unbounded).

    -1 stands for an unbounded side (flash-attn's ``window_size`` convention).

    Raises:
        IomodelError: anything else, or a side below -1, naming the accepted spellings.
    """
    from iomodel.spec.layer import window_side

    raw = str(text).strip().lower()
    if raw == "none":
        return None, None
    parts = [p.strip() for p in raw.split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or len(values) != len(parts):
        raise IomodelError(f"--window {text!r} is not a window: use L (tokens left of the diagonal), L,R or none")
    left = window_side(values[0], "window left", "--window L (0 or more; -1 unbounded)", unbounded_minus_one=True)
    right = window_side(values[1], "window right", "--window L,R (0 or more; -1 unbounded)",
                        unbounded_minus_one=True) if len(values) == 2 else None
    return left, right


__all__ = ["DEFAULT_HARDWARE", "DEFAULT_PRESET", "DEFAULT_SEQLEN", "MAX_SEQUENCES", "Layer", "parse_window", "resolve_layer"]
