"""The worksheet of a ragged (varlen) batch: Markdown, JSON or CSV.

``iomodel worksheet --seqlens 512,3000,77`` (or ``--seqlens-file``) resolves a
:class:`~iomodel.spec.resolve.Layer` whose ``ragged`` holds the sequences and whose ``spec``
is the batch padded to its longest sequence. This worksheet shows the length histogram; the
tiled kernel's bytes summed exactly per sequence (:func:`iomodel.traffic.ragged.predict_ragged`:
per tensor, read and write, HBM and SRAM_fill, and per distinct sequence kind); the compulsory
bytes summed per sequence plus the sequence table read once; and the eager baseline as the
padded batch (what an eager chain computes on a ragged batch); and the L2-aware DRAM estimate
of the one varlen launch (:func:`iomodel.cache.estimate.estimate_ragged`), or the one line that
says why it is not computed.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from iomodel.cache.estimate import (DIRTY_NOTE, L2_ESTIMATE_SOURCE, L2Estimate, estimate_ragged,
                                    ragged_not_estimated)
from iomodel.errors import IomodelError
from iomodel.format import fmt_bytes, fmt_flops, fmt_seconds
from iomodel.report.worksheet import _cell_bytes as _cell, _md, config_layers, csv_comment, kernel_path_of
from iomodel.spec.resolve import Layer
from iomodel.traffic.ragged import INDEX_WIDTH, RaggedPrediction
from iomodel.traffic.units import RowUnits

if TYPE_CHECKING:
    from iomodel.traffic import Prediction

#: Sequence kinds listed in the Markdown table (JSON and CSV list every kind).
MD_KINDS_SHOWN = 50
#: What the ragged L2-aware estimate is and what validates it (every format).
L2_RAGGED_NOTE = ("one varlen launch through one L2: the sequences' batch-1 waves in batch order, the L2 state "
                  "carried from one sequence to the next (iomodel.cache.predict.predict_ragged_launch); validated "
                  "on the H200 by the hold-out receipts/ncu-h200-ragged2-2026-12-01.json (10 varlen batches of 5-128 "
                  "sequences: DRAM reads and writes within ±10% in 10 of 10)")
#: The tensors of the sequence table (read once each in the compulsory bytes).
TABLE_TENSORS = ("cu_seqlens_q", "cu_seqlens_k")


@dataclass
class RaggedWorksheet:
    """A ragged batch's traffic, ready to render (bytes are exact ints).

    Attributes:
        layer: the resolved layer (``layer.ragged`` set; ``layer.spec`` the padded batch).
        prediction: the tiled model summed per sequence (:class:`RaggedPrediction`).
        padded: the dense model of the padded batch (its ``baseline`` is the eager baseline).
        compulsory_sequences: the dense model's compulsory bytes summed over the sequences.
        units: units check of the dense model's rows (the per-sequence rows are the same
            formulas evaluated at each sequence's lengths).
        l2_aware: the L2-aware DRAM estimate of the varlen launch
            (:func:`iomodel.cache.estimate.estimate_ragged`), or None.
        l2_not_computed: why ``l2_aware`` is None (one clause), else None.
    """

    layer: Layer
    prediction: RaggedPrediction
    padded: "Prediction"
    compulsory_sequences: int
    units: list[RowUnits] = field(default_factory=list)
    l2_aware: L2Estimate | None = None
    l2_not_computed: str | None = None

    @property
    def units_ok(self) -> bool:
        return all(u.ok for u in self.units)

    @property
    def compulsory_table(self) -> int:
        """cu_seqlens_q and cu_seqlens_k read once, (B + 1) int32 entries each, and seqused_k (B
        entries) when the launch passes it (a sequence with no key): bytes."""
        b = self.prediction.spec.batch
        seqused = b * INDEX_WIDTH if ("HBM", "seqused_k") in self.prediction.tensors else 0  # one entry a sequence
        return len(TABLE_TENSORS) * (b + 1) * INDEX_WIDTH + seqused

    @property
    def compulsory_bytes(self) -> int:
        return self.compulsory_sequences + self.compulsory_table

    def _level(self, level: str) -> dict[str, int]:
        rd, wr = self.prediction.level_bytes(level)
        return {"read_bytes": rd, "write_bytes": wr, "bytes": rd + wr}

    def _baseline(self) -> dict[str, int]:
        a = self.padded.algorithms["baseline"]
        return {"read_bytes": a.hbm_read_bytes, "write_bytes": a.hbm_write_bytes, "bytes": a.hbm_bytes}

    def padded_sentence(self) -> str:
        """The line that says the baseline is the padded batch."""
        s = self.layer.spec
        return (f"eager baseline = the padded batch: the {s.batch:,} sequences padded to seqlen_q {s.seqlen_q:,} x "
                f"seqlen_k {s.seqlen_k:,} (B = {s.batch:,}), kernels/baseline.py's op chain, as an eager chain "
                "runs a ragged batch")

    def to_dict(self) -> dict[str, Any]:
        """The ragged worksheet JSON.

        Top level: ``kind`` ("ragged"), ``spec`` (heads, head_dim, dtype, mask; no batch or
        lengths), ``seqlens`` ([[N_q, N_k], ...]), ``histogram`` (count; q and k: min, max,
        mean, total tokens), ``tiling``, ``hardware``, ``assumptions``, ``compulsory_bytes``
        and ``compulsory`` (``sequences``, ``sequence_table``), ``flops``, ``tiled`` (``hbm``,
        ``sram_fill`` totals, ``tensors`` rows, ``kinds``), ``padded_baseline`` (``hbm``, the
        padded shape, ``note``), ``padded_tiled_hbm_bytes``, ``l2_aware`` (the
        :class:`~iomodel.cache.estimate.L2Estimate` JSON: ``read_bytes``, ``write_bytes``,
        ``written_bytes``, ``dirty_at_end_bytes``, ``programs_per_sm`` and its source, the
        launch, ``assumptions``, plus ``note``; null where not computed, with
        ``l2_aware_not_computed`` saying why), ``worksheet`` (command, tile source, notes, units check).
        """
        p, s = self.prediction, self.layer.spec
        spec = {k: v for k, v in s.to_dict().items() if k not in ("batch", "seqlen_q", "seqlen_k")}
        tiled_hbm = self._level("HBM")["bytes"]
        return {
            "kind": "ragged",
            "spec": spec,
            "seqlens": [list(pair) for pair in p.spec.seqlens],
            "histogram": p.spec.histogram(),
            "tiling": self.padded.to_dict()["tiling"],
            "hardware": self.layer.hardware.to_dict(),
            "assumptions": self.assumptions(),
            "compulsory_bytes": self.compulsory_bytes,
            "compulsory": {"sequences": self.compulsory_sequences, "sequence_table": self.compulsory_table},
            "flops": p.flops,
            "tiled": {
                "hbm": self._level("HBM"),
                "sram_fill": self._level("SRAM_fill"),
                "tensors": [{"tensor": t, "level": lv, "read_bytes": rd, "write_bytes": wr}
                            for (lv, t), (rd, wr) in p.tensors.items()],
                "kinds": list(p.kinds),
            },
            "padded_baseline": {"hbm": self._baseline(), "batch": s.batch, "seqlen_q": s.seqlen_q,
                                "seqlen_k": s.seqlen_k, "note": self.padded_sentence(),
                                "ratio_vs_tiled": self._baseline()["bytes"] / tiled_hbm},
            "padded_tiled_hbm_bytes": p.padded_tiled_hbm_bytes,
            "l2_aware": self._l2_dict(),
            **({} if self.l2_aware else {"l2_aware_not_computed": self.l2_not_computed}),
            "worksheet": {
                "command": self.layer.command(),
                "tiling_source": self.layer.tiling_source,
                "kernel_path": kernel_path_of(self.layer),
                "config_layers": config_layers(self.layer),
                "notes": list(self.layer.notes),
                "units_check": {"ok": self.units_ok, "rows_checked": len(self.units),
                                "failures": [{"tensor": u.tensor, "step": u.step, "level": u.level,
                                              "reason": u.message} for u in self.units if not u.ok]},
            },
        }

    def _l2_dict(self) -> dict[str, Any] | None:
        """``l2_aware`` of the JSON: the estimate's JSON with :data:`L2_RAGGED_NOTE`, or None."""
        if self.l2_aware is None:
            return None
        return {**self.l2_aware.to_dict(), "note": L2_RAGGED_NOTE}

    def _l2_markdown(self) -> list[str]:
        """The summary lines of the L2-aware estimate, or the one line that says why there is none."""
        e = self.l2_aware
        if e is None:
            return [f"- L2-aware DRAM estimate ({L2_ESTIMATE_SOURCE}): not computed, {self.l2_not_computed}.", ""]
        total, comp = e.read_bytes + e.write_bytes, self.compulsory_bytes
        dirty = (f"; {fmt_bytes(e.dirty_bytes)} of the {fmt_bytes(e.written_bytes)} stored (O, LSE) stays dirty in L2 "
                 "at launch end and reaches DRAM only after the kernel, so neither this total nor ncu's dram__bytes "
                 "of this kernel counts it" if e.dirty_bytes else "; every stored byte reaches DRAM during the kernel")
        below = ("; that is why the total is below the compulsory bytes, which count every output written once "
                 "(every input byte is read from DRAM at least once: the L2 starts cold)" if total < comp else "")
        return [
            f"- **L2-aware DRAM estimate of `tiled`** (an estimate from {L2_ESTIMATE_SOURCE} `{e.function}`, not a "
            f"measurement): DRAM read {fmt_bytes(e.read_bytes)}"
            + ("" if e.read_bytes_quality == "predicted" else f" (**{e.read_bytes_quality.upper()}**: the assumptions "
               "below)") + f", written {fmt_bytes(e.write_bytes)}, total "
            f"{fmt_bytes(total)} ({total / comp:,.2f} x compulsory){dirty}{below}",
            f"  - {L2_RAGGED_NOTE}",
            f"  - roofline time {fmt_seconds(e.roofline_time_s)}, **{e.bound} bound** (intensity "
            f"{e.intensity:,.1f} FLOP/B); programs per SM = {e.programs_per_sm} ({e.programs_per_sm_source}); "
            f"num_warps = {e.num_warps}, {e.tile_order} query-tile order ({e.config_source})",
            "  - the L2 model's assumptions:",
            *[f"    - {_md(a)}" for a in e.assumptions],
            "",
        ]

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON (trailing newline)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def assumptions(self) -> list[str]:
        """The ragged model's assumptions, then the dense model's (its mask line is per sequence here)."""
        ragged = [
            "Each sequence is a batch-1 layer of its own N_q, N_k (tile rounding per sequence); the tiled bytes "
            "are the sum over distinct (N_q, N_k) kinds times their counts (iomodel.traffic.ragged.predict_ragged).",
            "The varlen kernel's grid is (cdiv(max N_q, BLOCK_M), B·H); every program reads 2 cu_seqlens_q and "
            f"2 cu_seqlens_k entries ({INDEX_WIDTH} B each, int32), programs past their sequence's end included "
            "(docs/traffic-contract.md, \"Ragged batches\").",
            "Compulsory bytes: each sequence's compulsory bytes (the dense rule below, at its own N_q, N_k), plus "
            f"cu_seqlens_q and cu_seqlens_k read once ((B + 1)·{INDEX_WIDTH} B each).",
            "The eager baseline is the padded batch (B sequences padded to the longest N_q and N_k).",
        ]
        keyless = self.prediction.spec.keyless()
        if keyless:
            ragged.append(
                f"{len(keyless):,} of the {self.prediction.spec.batch:,} sequences "
                f"{'uses' if len(keyless) == 1 else 'use'} no key (N_k = 0, passed as "
                "seqused_k[b] = 0): their rows see no key, o = 0 and LSE = -inf; their programs load Q and store O and "
                "LSE (the dense tiled rows, which do not depend on N_k), no K or V, no FLOPs; their compulsory bytes "
                f"are their O; every program also reads its seqused_k entry ({INDEX_WIDTH} B), and the compulsory "
                f"bytes read seqused_k once (B·{INDEX_WIDTH} B).")
        return ragged + [a for a in self.padded.assumptions if not a.startswith("Causal ")]

    def header_items(self) -> list[tuple[str, str]]:
        """The dense worksheet's header with sizes, shapes and mask said per sequence."""
        from iomodel.report.worksheet import Worksheet

        s, h = self.layer.spec, self.prediction.spec.histogram()
        items = dict(Worksheet(layer=self.layer, prediction=self.padded).header_items())
        items["sizes"] = (f"B = {h['count']:,} sequences (ragged), H = {s.heads}, H_kv = {s.kv_heads} (GQA group "
                          f"{s.group}), HEAD_DIM = {s.head_dim}")
        items["shapes"] = (f"packed Q, O (total_q = {h['q']['total']:,}, {s.heads}, {s.head_dim}); K, V (total_k = "
                           f"{h['k']['total']:,}, {s.kv_heads}, {s.head_dim}); LSE ({s.heads}, {h['q']['total']:,}) "
                           f"fp32; cu_seqlens_q, cu_seqlens_k ({h['count'] + 1:,},) int32"
                           + (f"; seqused_k ({h['count']:,},) int32" if self.prediction.spec.keyless() else ""))
        if s.causal:
            items["mask"] = (f"causal, {s.causal_align}, per sequence: query row m of sequence b sees keys n <= m + "
                             f"off_b with off_b = {'0' if s.causal_align == 'top-left' else 'N_k_b - N_q_b'}")
        if s.window:
            left, right = s.window
            items["mask"] += (f"; sliding window: keys m + off_b - {'inf' if left is None else f'{left:,}'} <= n <= "
                              f"m + off_b + {'inf' if right is None else f'{right:,}'}")
        return list(items.items())

    def histogram_lines(self) -> list[str]:
        """The length histogram as one line per axis (tokens)."""
        h = self.prediction.spec.histogram()
        return [f"{name}: min {h[ax]['min']:,}, max {h[ax]['max']:,}, mean {h[ax]['mean']:,.1f}, total "
                f"{h[ax]['total']:,} tokens" for name, ax in (("query lengths N_q", "q"), ("key lengths N_k", "k"))]

    def to_markdown(self) -> str:
        """Header, histogram, summary, per-tensor totals, per-kind table, units check."""
        lay, s, p = self.layer, self.layer.spec, self.prediction
        h = p.spec.histogram()
        mask = f"causal {s.causal_align}" if s.causal else "no mask"
        out = [f"# HBM traffic worksheet: {lay.title}, ragged batch of {h['count']:,} sequences, {s.phase} {s.passes}, "
               f"{s.dtype}, {mask}, {lay.hardware.name}", "",
               f"Reproduce: `{lay.command()}`", "",
               "Bytes are exact integers summed per sequence; the value in brackets uses binary prefixes "
               "(1 KiB = 1,024 B, 1 MiB = 2^20 B, 1 GiB = 2^30 B).", "",
               "## Assumptions", "", "| | |", "|---|---|"]
        out += [f"| {k} | {_md(v)} |" for k, v in self.header_items()]
        out.append("")
        for note in lay.notes:
            out += [f"> **Note:** {note}", ""]
        out += ["Model assumptions:", ""] + [f"{i}. {a}" for i, a in enumerate(self.assumptions(), 1)] + [""]

        out += ["## Sequence lengths", "", f"- sequences: {h['count']:,}"]
        out += [f"- {line}" for line in self.histogram_lines()] + [""]

        tiled, base = self._level("HBM"), self._baseline()
        sram = self._level("SRAM_fill")
        comp = self.compulsory_bytes
        out += ["## Summary", "",
                f"- **Compulsory bytes**: {fmt_bytes(comp)} (summed per sequence, "
                f"{fmt_bytes(self.compulsory_sequences)}; the sequence table read once, "
                f"{fmt_bytes(self.compulsory_table)})",
                f"- **`tiled`, summed per sequence**: HBM read {fmt_bytes(tiled['read_bytes'])}, written "
                f"{fmt_bytes(tiled['write_bytes'])}, total {fmt_bytes(tiled['bytes'])} "
                f"({tiled['bytes'] / comp:,.2f} x compulsory); SRAM_fill total {fmt_bytes(sram['bytes'])}",
                f"- **`baseline`, {self.padded_sentence()}**: HBM read {fmt_bytes(base['read_bytes'])}, written "
                f"{fmt_bytes(base['write_bytes'])}, total {fmt_bytes(base['bytes'])} "
                f"({base['bytes'] / tiled['bytes']:,.2f} x the ragged `tiled`)",
                f"- `tiled` on the padded batch (for comparison): HBM {fmt_bytes(p.padded_tiled_hbm_bytes)}",
                f"- **FLOPs** (fwd, summed per sequence): {fmt_flops(p.flops)}"]
        out += self._l2_markdown()

        out += ["## `tiled` per tensor (summed over the sequences)", "",
                "| tensor | HBM read | HBM written | SRAM_fill read | SRAM_fill written |",
                "|---|---:|---:|---:|---:|"]
        hbm, fill = p.by_tensor("HBM"), p.by_tensor("SRAM_fill")
        for t in dict.fromkeys([*hbm, *fill]):
            (hr, hw), (fr, fw) = hbm.get(t, (0, 0)), fill.get(t, (0, 0))
            out.append(f"| {t} | {_cell(hr)} | {_cell(hw)} | {_cell(fr)} | {_cell(fw)} |")
        out.append(f"| **total** | {_cell(tiled['read_bytes'])} | {_cell(tiled['write_bytes'])} | "
                   f"{_cell(sram['read_bytes'])} | {_cell(sram['write_bytes'])} |")
        out.append("")

        out += ["## `tiled` per sequence kind", "",
                "| N_q | N_k | sequences | HBM per sequence | SRAM_fill per sequence | HBM, all of this kind |",
                "|---:|---:|---:|---:|---:|---:|"]
        for k in p.kinds[:MD_KINDS_SHOWN]:
            out.append(f"| {k['seqlen_q']:,} | {k['seqlen_k']:,} | {k['count']:,} | {fmt_bytes(k['hbm_bytes'])} | "
                       f"{fmt_bytes(k['sram_fill_bytes'])} | {fmt_bytes(k['count'] * k['hbm_bytes'])} |")
        if len(p.kinds) > MD_KINDS_SHOWN:
            out += ["", f"{len(p.kinds) - MD_KINDS_SHOWN:,} more kinds are listed in the JSON and CSV formats."]
        out += ["", "The per-kind bytes exclude the sequence table (cu_seqlens_q, cu_seqlens_k), counted once per "
                "program in the per-tensor table.", ""]

        out += ["## Units check", ""]
        if self.units_ok:
            out.append(f"All {len(self.units)} rows of the dense model reduce to bytes (sympy.physics.units); the "
                       "per-sequence rows are the same formulas.")
        else:
            out += ["These rows do NOT reduce to bytes:", ""]
            out += [f"- {u.tensor}, {u.step} ({u.level}): {u.message}" for u in self.units if not u.ok]
        out.append("")
        return "\n".join(out)

    def to_csv(self) -> str:
        """One CSV line per statistic, tensor total, sequence kind and baseline.

        Leading ``# `` lines carry the assumptions (and the L2-aware estimate's, or why it is
        not computed). Columns: kind (histogram | row | total | sequence_kind | compulsory |
        padded_baseline | l2_aware | l2_aware_dirty_at_end), tensor (the statistic for histogram
        lines), level, seqlen_q, seqlen_k, count, read_bytes, write_bytes, bytes, note. A
        histogram line holds the statistic of the query lengths in seqlen_q and of the key
        lengths in seqlen_k; a sequence_kind line holds one sequence's bytes (count of them).
        The ``l2_aware`` line (level DRAM) holds the estimate's read and written bytes; the
        ``l2_aware_dirty_at_end`` line (level L2) the stored bytes still dirty at launch end in
        write_bytes. Neither is written where the estimate is not computed.
        """
        out = io.StringIO()
        for k, v in self.header_items():
            out.write(csv_comment(f"{k}: {v}"))
        for line in [*self.layer.notes, *self.assumptions()]:
            out.write(csv_comment(line))
        e = self.l2_aware
        if e is None:
            out.write(f"# L2-aware DRAM estimate ({L2_ESTIMATE_SOURCE}): not computed, {self.l2_not_computed}\n")
        else:
            out.write(f"# L2-aware DRAM estimate ({L2_ESTIMATE_SOURCE} {e.function}, not a measurement): "
                      f"{L2_RAGGED_NOTE}; programs per SM = {e.programs_per_sm} ({e.programs_per_sm_source}); "
                      f"num_warps = {e.num_warps}, {e.tile_order} query-tile order ({e.config_source})\n")
            for a in e.assumptions:
                out.write(csv_comment(f"L2 model: {a}"))
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["kind", "tensor", "level", "seqlen_q", "seqlen_k", "count", "read_bytes", "write_bytes", "bytes",
                    "note"])
        p, h = self.prediction, self.prediction.spec.histogram()
        w.writerow(["histogram", "count", "", h["count"], h["count"], h["count"], "", "", "", "sequences"])
        for stat in ("min", "max", "mean", "total"):
            w.writerow(["histogram", stat, "", h["q"][stat], h["k"][stat], "", "", "", "", "tokens"])
        w.writerow(["compulsory", "", "HBM", "", "", "", "", "", self.compulsory_bytes,
                    f"sequences {self.compulsory_sequences}, sequence table {self.compulsory_table}"])
        for (lv, t), (rd, wr) in p.tensors.items():
            w.writerow(["row", t, lv, "", "", "", rd, wr, rd + wr, "summed over the sequences"])
        for lv in ("HBM", "SRAM_fill"):
            tot = self._level(lv)
            w.writerow(["total", "", lv, "", "", "", tot["read_bytes"], tot["write_bytes"], tot["bytes"], "tiled"])
        for k in p.kinds:
            for lv, key in (("HBM", "hbm_bytes"), ("SRAM_fill", "sram_fill_bytes")):
                w.writerow(["sequence_kind", "", lv, k["seqlen_q"], k["seqlen_k"], k["count"], "", "", k[key],
                            "one sequence, sequence table excluded"])
        base = self._baseline()
        w.writerow(["padded_baseline", "", "HBM", self.layer.spec.seqlen_q, self.layer.spec.seqlen_k,
                    self.layer.spec.batch, base["read_bytes"], base["write_bytes"], base["bytes"],
                    self.padded_sentence()])
        if e is not None:
            w.writerow(["l2_aware", "", "DRAM", "", "", "", e.read_bytes, e.write_bytes, e.read_bytes + e.write_bytes,
                        "L2-aware DRAM estimate of tiled, one varlen launch (not a measurement)"])
            w.writerow(["l2_aware_dirty_at_end", "", "L2", "", "", "", "", e.dirty_bytes, e.dirty_bytes,
                        DIRTY_NOTE])
        return out.getvalue()


def make_ragged_worksheet(layer: Layer) -> RaggedWorksheet:
    """Evaluate the tiled model per sequence and the dense model of the padded batch.

    Args:
        layer: a layer with ``ragged`` set (:func:`iomodel.spec.resolve.resolve_layer` with
            ``seqlens`` or ``seqlens_file``).

    The L2-aware estimate (:func:`iomodel.cache.estimate.estimate_ragged`) runs with the launch
    :func:`iomodel.report.worksheet.l2_launch` gives for the varlen kernel's path, unless
    :func:`iomodel.cache.estimate.ragged_not_estimated` gives a reason, which the worksheet
    then shows instead.

    Raises:
        IomodelError: ``layer.ragged`` is None, or what the traffic model raises.
    """
    from iomodel.report.worksheet import l2_launch, units_check
    from iomodel.traffic import predict
    from iomodel.traffic.ragged import predict_ragged

    if layer.ragged is None:
        raise IomodelError("make_ragged_worksheet needs a ragged batch: pass --seqlens or --seqlens-file")
    r, t, hw = layer.ragged, layer.tiling, layer.hardware
    pred = predict_ragged(r, t, hw, seqused=bool(r.keyless()))  # a sequence with no key needs seqused_k = 0
    compulsory = pred.compulsory_bytes  # each sequence's compulsory bytes (a sequence with no key: its O only)
    padded = predict(layer.spec, t, hw)
    why = ragged_not_estimated(r, t)
    est = None
    if why is None:
        warps, order, cfg_src, _, _ = l2_launch(layer.spec, hw, varlen=True)  # the varlen prefill path: nothing fixed
        est = estimate_ragged(r, t, hw, flops=pred.flops, peak_flops=padded.algorithms["tiled"].peak_flops,
                              num_warps=warps, tile_order=order, config_source=cfg_src)
    return RaggedWorksheet(layer=layer, prediction=pred, padded=padded, compulsory_sequences=compulsory,
                           units=units_check(padded), l2_aware=est, l2_not_computed=why)


__all__ = ["L2_RAGGED_NOTE", "RaggedWorksheet", "make_ragged_worksheet"]
