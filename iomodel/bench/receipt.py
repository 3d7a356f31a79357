"""Benchmark receipts: the end-to-end estimate, the policy check, JSON and Markdown; the one writer and reader.

:func:`write_receipt`, :func:`load_receipt`, :func:`check_receipt` and
:func:`render_markdown` take both kinds of receipt: a bucket receipt (below) and a
kernel-speed receipt (:mod:`iomodel.bench.speed`, schema ``iomodel.bench_kernel/1``), told
apart by their ``schema``. Receipts written before the bundled kernel was named ``tiled``
call it ``triton``; :func:`load_receipt` renames it (:data:`~iomodel.bench.backends.LEGACY_BACKEND_NAMES`),
and the kernel-speed receipts of then name the device ``device`` and its SM count
``num_sms`` (:data:`LEGACY_ENVIRONMENT_KEYS`). The committed files stay as measured.

A bucket receipt is the JSON dictionary :func:`iomodel.bench.harness.run_bench` returns. Its
keys, in order: ``schema``, ``command``, ``date``, ``device`` (what ran it), ``policy``
(declared before any result), ``matrix``, ``timing`` (method), ``backends`` (available or
not, with the reason), ``buckets`` (per shape: ``results[backend]`` with ``status``,
``reasons``, ``ran``/``ops``/``kernels``, ``time_s`` (median and spread, seconds),
``samples_s``, ``peak_allocated_bytes``, ``error`` (against float64), ``accuracy``,
``speedup``; per bucket: ``summary`` with counts, fallbacks and the decision),
``downstream``, ``end_to_end``, ``verdict``. A training bucket (``"pass": "fwd+bwd"``)
adds per shape ``flops`` (of one step) and ``eager`` (the eager chain's result), and per
result ``grad_error``, ``grad_accuracy``, ``speedup_vs_eager`` and ``tflops``
(:mod:`iomodel.bench.harness`); :func:`check_training` re-checks them.

:func:`check_receipt` recomputes every verdict from the raw numbers (timing samples,
error statistics) and the *bundled* policy of the receipt's version, so a receipt cannot
pass by editing its own flags or its embedded policy.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from iomodel import jsonvalues as jv
from iomodel.bench.backends import BASELINE, EAGER, LEGACY_BACKEND_NAMES, TITLES
from iomodel.bench.harness import RECEIPT_SCHEMA
from iomodel.bench.policy import (GRADIENTS, Policy, SpeedTargets, Tolerance, accuracy_verdict, gradient_verdict,
                                  load_policy, same_number)
from iomodel.bench.speed import RECEIPT_FIX, SPEED_SCHEMA, check_speed_fields, check_speed_receipt, render_speed_markdown
from iomodel.bench.timing import spread
from iomodel.errors import IomodelError
from iomodel.format import fmt_seconds, human_bytes
from iomodel.paths import check_output_file, write_text


# ------------------------------------------------------------------------------------
# Phase-weighted end-to-end estimate
# ------------------------------------------------------------------------------------


def _interp(points: list[tuple[float, float]], x: float, log: bool) -> tuple[float, bool]:
    """Piecewise-linear interpolation (in log-log space when ``log``) of time against size.

    Outside the measured sizes: ``log`` (prefill) extends the end segment's power law; linear
    (decode) scales the nearest end point in proportion to x (decode time grows with the
    K/V bytes, proportional to N_k), so an estimate is never negative. One point: time
    proportional to x**2 (``log``: prefill FLOPs grow as N^2) or to x. Returns
    ``(value, extrapolated)``.
    """
    pts = sorted(points)
    if len(pts) == 1:
        x0, y0 = pts[0]
        return y0 * (x / x0) ** (2 if log else 1), x != x0
    extrap = x < pts[0][0] or x > pts[-1][0]
    if extrap and not log:
        x0, y0 = pts[0] if x < pts[0][0] else pts[-1]
        return y0 * x / x0, True
    if x <= pts[0][0]:
        (x0, y0), (x1, y1) = pts[0], pts[1]
    elif x >= pts[-1][0]:
        (x0, y0), (x1, y1) = pts[-2], pts[-1]
    else:
        i = next(i for i in range(1, len(pts)) if pts[i][0] >= x)
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    if log:
        lx0, lx1, ly0, ly1 = math.log(x0), math.log(x1), math.log(y0), math.log(y1)
        return math.exp(ly0 + (ly1 - ly0) * (math.log(x) - lx0) / (lx1 - lx0)), extrap
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0), extrap


def _points(bucket: dict[str, Any], backend: str, key: str) -> list[tuple[float, float]] | None:
    pts = []
    for s in bucket["shapes"]:
        r = s["results"].get(backend, {})
        if r.get("status") != "ok":
            return None
        pts.append((float(s["shape"][key]), _median(r)))
    return pts


def _median(result: dict[str, Any]) -> float:
    """Median time of a result, recomputed from its samples when present (seconds)."""
    samples = result.get("samples_s")
    return float(statistics.median(samples)) if samples else float(result["time_s"]["median"])


def end_to_end(receipt: dict[str, Any]) -> dict[str, Any] | None:
    """Phase-weighted attention time of one representative request, per path.

    ``request_s = layers * (prefill(prompt_len) + sum_{t < output_len} decode(prompt_len + t))``
    with prefill interpolated in log-log over the prefill bucket's seqlen and decode
    linearly over the decode bucket's seqlen_k (see :func:`_interp` for sizes outside the
    measured ones), at each bucket's own batch size. Paths:
    the baseline, each fused backend that ran every shape of both buckets, and the
    decision (the chosen backend of each phase's bucket). The request speedup equals
    ``1 / (share_prefill / s_prefill + share_decode / s_decode)`` with the baseline's
    phase shares (Amdahl over phases), which the result states next to it.

    Returns:
        None when the matrix declares no workload; else ``{"workload", "paths", "decision",
        "reconciliation", "extrapolated", "method"}`` (seconds).
    """
    wl = (receipt.get("matrix") or {}).get("workload")
    if not wl:
        return None
    by = {b["name"]: b for b in receipt["buckets"]}
    pb, db = by[wl["prefill_bucket"]], by[wl["decode_bucket"]]
    L, P, O = wl["layers"], wl["prompt_len"], wl["output_len"]
    extrap_any = False

    def path(pre_backend: str, dec_backend: str) -> dict[str, Any] | None:
        nonlocal extrap_any
        pp, dp = _points(pb, pre_backend, "seqlen_q"), _points(db, dec_backend, "seqlen_k")
        if pp is None or dp is None:
            return None
        t_pre, e1 = _interp(pp, P, log=True)
        steps = [_interp(dp, P + t, log=False) for t in range(O)]
        t_dec = sum(v for v, _ in steps)
        extrap_any |= e1 or any(e for _, e in steps)
        total = L * (t_pre + t_dec)
        return {"prefill_backend": pre_backend, "decode_backend": dec_backend,
                "prefill_call_s": t_pre, "decode_calls_s": t_dec,
                "ttft_attention_s": L * t_pre, "per_output_token_s": L * t_dec / O,
                "request_s": total, "prefill_share": L * t_pre / total if total else None}

    paths: dict[str, Any] = {}
    base = path(BASELINE, BASELINE)
    if base is None:
        return {"workload": wl, "paths": {}, "decision": None, "extrapolated": False,
                "reconciliation": "the baseline did not run every shape of both workload buckets", "method": ""}
    paths[BASELINE] = base
    names = sorted({n for b in (pb, db) for s in b["shapes"] for n in s["results"]} - {BASELINE})
    for n in names:
        p = path(n, n)
        if p is not None:
            paths[n] = p
    dp_name = pb["summary"]["decision"]["backend"]
    dd_name = db["summary"]["decision"]["backend"]
    decision = path(dp_name or BASELINE, dd_name or BASELINE)
    if decision and decision["request_s"] > 0:
        decision["speedup"] = base["request_s"] / decision["request_s"]
    for n, p in paths.items():
        p["speedup"] = base["request_s"] / p["request_s"]
    out = {
        "workload": wl,
        "batch": {"prefill": pb["shapes"][0]["shape"]["batch"], "decode": db["shapes"][0]["shape"]["batch"]},
        "paths": paths,
        "decision": decision,
        "reconciliation": None,
        "extrapolated": extrap_any,
        "method": ("layers x (prefill(prompt_len) + sum of decode(prompt_len + t) for t < output_len); prefill "
                   "interpolated in log-log over the prefill bucket's seqlen, decode linearly over the decode "
                   "bucket's seqlen_k; attention kernels only, at each bucket's batch size"),
    }
    out["reconciliation"] = reconciliation(out, receipt["buckets"])
    return out


def _at(lo: int, hi: int, sizes: list[int]) -> str:
    """'interpolated between' or 'extrapolated beyond' the measured sizes, for the range lo..hi."""
    inside = min(sizes) <= lo and hi <= max(sizes)
    return "interpolated between" if inside else "extrapolated beyond"


def _sizes(xs: list[int]) -> str:
    return ", ".join(str(x) for x in sorted(set(xs)))


def reconciliation(e2e: dict[str, Any], buckets: list[dict[str, Any]]) -> str | None:
    """The request speedup as Amdahl over phases, in words, saying where each kernel speedup was read.

    ``1 / (share_prefill / s_prefill + share_decode / s_decode)`` with the baseline's phase
    shares of one request's attention time (``layers`` layers). ``s_prefill`` and
    ``s_decode`` are kernel speedups *at this request's sizes* (prefill at ``prompt_len``
    tokens, decode summed over ``prompt_len .. prompt_len + output_len - 1`` keys), read off
    the interpolation of :func:`end_to_end`: they differ from the per-bucket decisions, which
    are geometric means over every shape of a bucket, and the text gives both.

    Args:
        e2e: the :func:`end_to_end` result (``workload``, ``paths``, ``decision``; seconds).
        buckets: the receipt's ``buckets`` (for the measured sizes and the bucket decisions).

    Returns:
        One sentence (no final period), or None when there is no decision path or a phase
        time is zero.
    """
    dec = e2e.get("decision")
    base = (e2e.get("paths") or {}).get(BASELINE)
    if not dec or not base or not (dec["prefill_call_s"] > 0 and dec["decode_calls_s"] > 0
                                   and base["decode_calls_s"] > 0 and dec["request_s"] > 0):
        return None
    wl = e2e["workload"]
    by = {b["name"]: b for b in buckets}
    pb, db = by[wl["prefill_bucket"]], by[wl["decode_bucket"]]
    L, P, O = wl["layers"], wl["prompt_len"], wl["output_len"]
    s_p = base["prefill_call_s"] / dec["prefill_call_s"]
    s_d = base["decode_calls_s"] / dec["decode_calls_s"]
    share = base["prefill_share"]
    speedup = base["request_s"] / dec["request_s"]
    amdahl = 1.0 / (share / s_p + (1 - share) / s_d)
    pq = [int(s["shape"]["seqlen_q"]) for s in pb["shapes"]]
    dk = [int(s["shape"]["seqlen_k"]) for s in db["shapes"]]

    def geo(b: dict[str, Any]) -> str:
        x = (b.get("summary") or {}).get("decision", {}).get("speedup")
        return f"{x:.3g}x" if x else "none"

    return (f"request speedup {speedup:.3g}x = 1 / ({share:.3f} / {s_p:.3g} + {1 - share:.3f} / {s_d:.3g}) "
            f"= {amdahl:.3g}x per request of {L} layers: the prefill kernel speedup {s_p:.3g}x at this request's "
            f"{P}-token prompt ({_at(P, P, pq)} bucket {pb['name']}'s measured seqlen {_sizes(pq)}; that bucket's "
            f"geomean over its shapes is {geo(pb)}) weighs {share:.1%} of the baseline request's attention time, "
            f"the decode speedup {s_d:.3g}x at this request's {P}–{P + O - 1} keys ({_at(P, P + O - 1, dk)} bucket "
            f"{db['name']}'s measured seqlen_k {_sizes(dk)}; that bucket's geomean over its shapes is {geo(db)}) "
            f"the other {1 - share:.1%}")


# ------------------------------------------------------------------------------------
# Policy check
# ------------------------------------------------------------------------------------

def _gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _x(v: Any) -> str:
    try:
        return f"{float(v):.4g}x"
    except (TypeError, ValueError):
        return "none" if v is None else repr(v)


def _check_whole(receipt: dict[str, Any], policy: Any) -> list[str]:
    """What a whole run of the harness writes and the receipt lacks: the downstream logits check of every bucket
    dtype the policy bounds (``iomodel bench`` always runs it; a run asked not to writes ``"downstream": null``),
    the request estimate when the matrix declares a
    workload, and traffic weights that sum to 1 per pass (a serving mix and a training mix; a bucket removed leaves
    them short)."""
    out = []
    dtypes = sorted({b.get("dtype") for b in receipt.get("buckets", []) if isinstance(b.get("dtype"), str)})
    results = (receipt.get("downstream") or {}).get("results") or {}
    skipped = "downstream" in receipt and receipt["downstream"] is None  # a run asked not to (harness downstream=False)
    for dt in dtypes:
        if not skipped and dt in policy.downstream.bound and not results.get(dt):
            out.append(f"downstream: no logits check for {dt}, which policy v{policy.version} bounds (iomodel bench "
                       "runs it for every bucket dtype): the receipt is not a whole run")
    if (receipt.get("matrix") or {}).get("workload") and not (receipt.get("end_to_end") or {}).get("paths"):
        out.append("end_to_end: the matrix declares a workload, but the receipt holds no request estimate: the "
                   "receipt is not a whole run")
    out.extend(_check_matrix(receipt))
    from iomodel.bench.matrix import mix_weight_totals

    totals = mix_weight_totals(("fwd+bwd" if _training(b) else "fwd", b["weight"]) for b in receipt.get("buckets", [])
                               if isinstance(b.get("weight"), (int, float)) and not isinstance(b.get("weight"), bool))
    for passes, total in totals.items():
        if not math.isclose(total, 1.0, rel_tol=1e-6):
            key = "training" if passes == "fwd+bwd" else "serving"
            out.append(f"the {key} buckets' weights sum to {total:.6g}, not 1: a bucket is missing or a weight was "
                       "edited")
    return out


def _check_matrix(receipt: dict[str, Any]) -> list[str]:
    """The receipt's buckets against the matrix it embeds (``matrix.buckets``: what the run was asked), each bucket once
    with that weight and as many shapes; and, where ``matrix.name``/``version`` name a bundled matrix file
    (``iomodel/bench/matrices``) whose sha256 is the one stored, each embedded bucket against the file's bucket of
    that name (a run of some of its buckets is allowed; a bucket re-weighted or given other shapes is not)."""

    def table(buckets: Any) -> dict[Any, tuple[Any, int]]:
        return {b.get("name"): (b.get("weight"), len(b.get("shapes") or [])) for b in buckets if isinstance(b, dict)}

    matrix = receipt.get("matrix") or {}
    if not isinstance(matrix.get("buckets"), list):
        return []
    embedded, got = table(matrix["buckets"]), table(receipt.get("buckets", []))
    out = []
    for n in sorted(set(embedded) | set(got), key=str):
        if n not in got:
            out.append(f"bucket {n!r} of the matrix the receipt embeds is missing from its results")
        elif n not in embedded:
            out.append(f"bucket {n!r} is not in the matrix the receipt embeds")
        elif not same_number(got[n][0], embedded[n][0]) or got[n][1] != embedded[n][1]:
            out.append(f"bucket {n!r}: weight {got[n][0]} and {got[n][1]} shapes, where the matrix the receipt embeds "
                       f"has weight {embedded[n][0]} and {embedded[n][1]} shapes")
    name, version = matrix.get("name"), matrix.get("version")
    from iomodel.bench.matrix import MATRICES_DIR, load_matrix

    bundled = MATRICES_DIR / f"{name}-v{version}.toml"
    if isinstance(name, str) and isinstance(version, int) and bundled.is_file():
        filed_matrix = load_matrix(bundled)  # read and hashed once
        if filed_matrix.sha256 == matrix.get("sha256"):
            filed = {bk.name: (bk.weight, len(bk.shapes)) for bk in filed_matrix.buckets}
            for n, (w, k) in embedded.items():
                if n not in filed or not same_number(w, filed[n][0]) or k != filed[n][1]:
                    out.append(f"bucket {n!r} of the embedded matrix differs from {bundled.name}, whose sha256 the "
                               f"receipt states (weight {w}, {k} shapes against "
                               + (f"{filed[n][0]}, {filed[n][1]})" if n in filed else "no such bucket)"))
    return out


def _check_end_to_end(receipt: dict[str, Any]) -> list[str]:
    """The stored request-level speedups (every path and the decision) against :func:`end_to_end` recomputed."""
    stored = receipt.get("end_to_end")
    if not stored:
        return []
    try:
        fresh = end_to_end(receipt)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, StopIteration) as exc:
        return [f"end_to_end: the request estimate cannot be recomputed from the buckets ({type(exc).__name__}: {exc})"]
    out = []
    rows = [(f"path {n}", p, (fresh or {}).get("paths", {}).get(n)) for n, p in (stored.get("paths") or {}).items()]
    if stored.get("decision"):
        rows.append(("decision", stored["decision"], (fresh or {}).get("decision")))
    for label, p, f in rows:
        got = None if f is None else f.get("speedup")
        if not same_number(p.get("speedup"), got):
            out.append(f"end_to_end {label}: stored request speedup {_x(p.get('speedup'))} differs from {_x(got)} "
                       f"recomputed from the samples")
    return out



#: Schema tag of a bucket receipt.
BUCKET_SCHEMA = RECEIPT_SCHEMA
#: Error statistics that are counts (elements, out-of-tolerance elements, non-finite outputs).
ERROR_COUNTS = ("nonfinite", "elements")
#: The per-element violation count: ``allclose_violations`` (policies v1/v2) or ``element_violations`` (v3 on).
VIOLATION_COUNTS = ("allclose_violations", "element_violations")
#: Error statistics that are magnitudes: a number >= 0, or "inf" / "nan" as :func:`json_safe` writes them.
ERROR_MAGNITUDES = ("max_abs", "p99_abs")


def _magnitude(value: Any, where: str) -> None:
    """An error magnitude: a finite number >= 0, or the strings ``"inf"`` / ``"nan"`` of :func:`json_safe`."""
    if value not in ("inf", "nan"):
        jv.number(value, where, what='a number, 0 or more (or "inf" / "nan")', fix=RECEIPT_FIX)


def _check_result_fields(r: Any, where: str) -> None:
    """One backend's result in a bucket shape: status, reasons, and for a run the timing and error statistics."""
    fix = RECEIPT_FIX
    jv.mapping(r, where, fix=fix)
    status = jv.string(r.get("status"), f"{where}: status", allow_none=True, fix=fix)
    for i, x in enumerate(jv.array(r.get("reasons", []), f"{where}: reasons", fix=fix)):
        jv.string(x, f"{where}: reasons[{i}]", allow_none=True, fix=fix)
    for k in ("speedup", "memory_ratio"):
        if k in r:
            jv.number(r[k], f"{where}: {k}", allow_none=True, fix=fix)
    if "peak_allocated_bytes" in r:
        jv.number(r["peak_allocated_bytes"], f"{where}: peak_allocated_bytes",
                  what="a whole number of bytes, 0 or more (or null)", integer=True, allow_none=True, fix=fix)
    for k in ("accuracy", "grad_accuracy"):
        if k in r:
            acc = jv.mapping(r[k], f"{where}: {k}", fix=fix)
            jv.boolean(jv.field(acc, "pass", f"{where}: {k}", fix=fix), f"{where}: {k}.pass", fix=fix)
    if r.get("samples_s"):  # read for every result that has them, run or not
        jv.numbers(r["samples_s"], f"{where}: samples_s", fix=fix)
    elif status == "ok" and "samples_s" in r:  # a run keeps its samples: an emptied list hides them
        raise IomodelError(f"{where}: samples_s is empty, but the result ran (status ok): its timing samples are what "
                           f"the medians and speedups are recomputed from: {fix}")
    if "time_s" in r or status == "ok":
        t = jv.mapping(jv.field(r, "time_s", where, fix=fix), f"{where}: time_s", fix=fix)
        jv.number(jv.field(t, "median", f"{where}: time_s", fix=fix), f"{where}: time_s.median",
                  what="a positive number of seconds", positive=True, fix=fix)
    if status != "ok":
        return
    err = jv.mapping(jv.field(r, "error", where, fix=fix), f"{where}: error", fix=fix)
    _check_error_counts(err, f"{where}: error")
    for k in ERROR_MAGNITUDES:
        _magnitude(jv.field(err, k, f"{where}: error", fix=fix), f"{where}: error.{k}")


def _check_error_counts(err: dict[str, Any], where: str) -> None:
    """The counts of one error-statistics object: :data:`ERROR_COUNTS` and those of
    :data:`VIOLATION_COUNTS` present (a v1/v2 forward result has ``allclose_violations``; a v3
    fused result ``element_violations``, the reference backend's neither).

    Raises:
        IomodelError: a count missing, or not a whole number >= 0.
    """
    fix = RECEIPT_FIX
    for k in ERROR_COUNTS:
        jv.number(jv.field(err, k, where, fix=fix), f"{where}.{k}", what="a whole number, 0 or more", integer=True,
                  fix=fix)
    for k in VIOLATION_COUNTS:
        if k in err:
            jv.number(err[k], f"{where}.{k}", what="a whole number, 0 or more", integer=True, fix=fix)
    if "abs_floor" not in err and "allclose_violations" not in err:
        jv.field(err, "allclose_violations", where, fix=fix)  # a v1/v2 result: the count must be there


def _check_elements(r: dict[str, Any], shape: Any, bucket: dict[str, Any], sizes: dict[str, int], where: str) -> None:
    """A result's ``error.elements`` must be the output's element count (elements): query rows
    ``B·seqlen_q`` (a padded prefill bucket: the sum of its ``lengths``, the valid rows; a
    decode bucket's ``lengths`` are key lengths) times ``H·HEAD_DIM`` of its bucket. A receipt
    whose shape or sizes were edited after the run (heads 10^5 beside the results of a run
    with 8) is refused here; every committed receipt holds to it.

    Raises:
        IomodelError: the counts disagree (the line names the shape, backend and both counts).
    """
    err = r.get("error")
    if r.get("status") != "ok" or not isinstance(err, dict) or "elements" not in err or not isinstance(shape, dict) \
            or "heads" not in sizes or "head_dim" not in sizes or not {"batch", "seqlen_q"} <= shape.keys():
        return
    lengths = shape.get("lengths")
    padded = bucket.get("phase") == "prefill" and isinstance(lengths, list) and lengths and all(
        isinstance(n, int) and not isinstance(n, bool) for n in lengths)
    rows = sum(lengths) if padded else shape["batch"] * shape["seqlen_q"]
    said = f"sum(lengths) = {rows:,}" if padded else f"B·seqlen_q = {shape['batch']:,}·{shape['seqlen_q']:,}"
    want = rows * sizes["heads"] * sizes["head_dim"]
    if err["elements"] != want:
        raise IomodelError(f"{where}: error.elements is {err['elements']:,}, but an output of {said} rows × H·HEAD_DIM "
                           f"= {sizes['heads']:,}·{sizes['head_dim']:,} has {want:,} elements: the shape, the bucket's "
                           f"sizes or the result was changed after the run: {RECEIPT_FIX}")


#: The values of a bucket's ``pass``: forward only, or a training step (forward + backward).
PASSES = ("fwd", "fwd+bwd")
#: Fields that only a training bucket's shapes and results hold.
TRAINING_SHAPE_KEYS = ("eager", "flops")
TRAINING_RESULT_KEYS = ("grad_error", "grad_accuracy", "speedup_vs_eager", "tflops")


def _check_pass_field(b: dict[str, Any], wb: str) -> bool:
    """Whether bucket ``b`` is a training bucket; its ``pass`` must be one of :data:`PASSES`.

    A bucket without ``pass`` (receipts older than training buckets) is a forward bucket,
    unless it holds training fields: then the missing ``pass`` is refused, so gradient
    results are never skipped silently.

    Raises:
        IomodelError: ``pass`` not ``"fwd"`` or ``"fwd+bwd"``; ``pass`` missing beside training fields.
    """
    fix = RECEIPT_FIX
    if "pass" in b:
        return jv.choice(b["pass"], f"{wb}: pass", PASSES, fix=fix) == "fwd+bwd"
    shapes = b.get("shapes") if isinstance(b.get("shapes"), list) else []
    for s in shapes:
        if not isinstance(s, dict):
            continue
        results = s.get("results") if isinstance(s.get("results"), dict) else {}
        keys = [k for k in TRAINING_SHAPE_KEYS if k in s] + sorted(
            {k for r in results.values() if isinstance(r, dict) for k in TRAINING_RESULT_KEYS if k in r})
        if keys:
            raise IomodelError(f"{wb} has no 'pass' field but holds training fields ({', '.join(keys)}): pass must "
                               f'be "fwd" or "fwd+bwd": {fix}')
    return False


def _check_training_bucket_fields(b: dict[str, Any], wb: str) -> None:
    """A training bucket's layer sizes (for the step's FLOPs) and its stored speedups over eager."""
    fix = RECEIPT_FIX
    for k in ("heads", "kv_heads", "head_dim"):
        jv.number(jv.field(b, k, wb, fix=fix), f"{wb}: {k}", what="a positive integer", positive=True, integer=True,
                  fix=fix)
    jv.boolean(jv.field(b, "causal", wb, fix=fix), f"{wb}: causal", fix=fix)
    jv.string(jv.field(b, "causal_align", wb, fix=fix), f"{wb}: causal_align", fix=fix)
    summary = b.get("summary", {})
    for n, v in summary.get("backends", {}).items():
        jv.number(v.get("speedup_vs_eager_geomean"), f"{wb}: summary.backends[{n!r}].speedup_vs_eager_geomean",
                  allow_none=True, fix=fix)
    jv.number(summary.get("decision", {}).get("speedup_vs_eager"), f"{wb}: summary.decision.speedup_vs_eager",
              allow_none=True, fix=fix)


def _check_training_shape_fields(s: dict[str, Any], ws: str) -> None:
    """A training shape's sizes, its step's FLOPs and its eager chain (the gradient baseline)."""
    fix = RECEIPT_FIX
    shape = jv.mapping(jv.field(s, "shape", ws, fix=fix), f"{ws}: shape", fix=fix)
    for k in ("batch", "seqlen_q", "seqlen_k"):
        jv.field(shape, k, f"{ws}: shape", fix=fix)  # typed by check_receipt_fields
    if "flops" in s:
        jv.number(s["flops"], f"{ws}: flops", what="a positive whole number of FLOPs", positive=True, integer=True,
                  fix=fix)
    eager = jv.mapping(s.get("eager"), f"{ws} {EAGER}", allow_none=True, fix=fix)
    if eager is not None:
        _check_result_fields(eager, f"{ws} {EAGER}")
        _check_gradient_fields(eager, f"{ws} {EAGER}")


def _check_gradient_fields(r: dict[str, Any], where: str) -> None:
    """One training result's gradient fields: ``grad_error`` per tensor, ``grad_accuracy``, ``tflops``, ``speedup_vs_eager``.

    Raises:
        IomodelError: for a result that ran, ``grad_error`` missing or not an object, a tensor
            (dq, dk, dv) missing, a count that is not a whole number >= 0, a magnitude that is
            not a number >= 0 (or "inf" / "nan"); a stored limit, ``tflops`` or
            ``speedup_vs_eager`` that is not a number.
    """
    fix = RECEIPT_FIX
    for k in ("tflops", "speedup_vs_eager"):
        if k in r:
            jv.number(r[k], f"{where}: {k}", allow_none=True, fix=fix)
    if "grad_accuracy" in r:
        acc = r["grad_accuracy"]  # a JSON object with a boolean pass: _check_result_fields
        for i, x in enumerate(jv.array(acc.get("reasons", []), f"{where}: grad_accuracy.reasons", fix=fix)):
            jv.string(x, f"{where}: grad_accuracy.reasons[{i}]", fix=fix)
        if "limits" in acc:
            for g, lim in jv.mapping(acc["limits"], f"{where}: grad_accuracy.limits", fix=fix).items():
                for k, x in jv.mapping(lim, f"{where}: grad_accuracy.limits.{g}", fix=fix).items():
                    jv.number(x, f"{where}: grad_accuracy.limits.{g}.{k}", fix=fix)
    if r.get("status") != "ok":
        return
    ge = jv.mapping(jv.field(r, "grad_error", where, fix=fix), f"{where}: grad_error", fix=fix)
    for g in GRADIENTS:
        st = jv.mapping(jv.field(ge, g, f"{where}: grad_error", fix=fix), f"{where}: grad_error.{g}", fix=fix)
        _check_error_counts(st, f"{where}: grad_error.{g}")
        for k in ERROR_MAGNITUDES:
            _magnitude(jv.field(st, k, f"{where}: grad_error.{g}", fix=fix), f"{where}: grad_error.{g}.{k}")


def check_receipt_fields(receipt: Any, source: str = "the receipt") -> None:
    """Type-check every field of a receipt that :func:`check_receipt` reads (either kind).

    A kernel-speed receipt goes to :func:`iomodel.bench.speed.check_speed_fields`; an
    unknown schema is left to :func:`check_receipt`, which reports it.

    Args:
        receipt: the parsed JSON.
        source: the file, for messages.

    Raises:
        IomodelError: one line naming the bucket, the shape, the backend and the field: the
            receipt not a JSON object; no ``policy`` or ``policy.version`` (the policy it is checked
            against), or a policy version that is not a positive integer; a
            bucket without a name or dtype string; a result's status or reasons of the wrong
            type; for a result that ran, timing samples that are not positive seconds, a
            median that is not a positive number, error statistics of the wrong type; a
            stored speedup that is not a number or null; a workload size that is not a
            positive integer; a downstream logit error that is not a number; a peak memory that is
            not a whole number of bytes >= 0 or null; an ``accuracy.pass``, ``grad_accuracy.pass``,
            ``drift_pass`` or ``verdict.pass`` that is not a boolean; a bucket weight that is not a
            positive number; an empty bucket list, a repeated bucket name, or a workload bucket
            that names no bucket of the receipt.
    """
    fix = RECEIPT_FIX
    jv.mapping(receipt, source, fix=fix)
    if receipt.get("schema") == SPEED_SCHEMA:
        check_speed_fields(receipt, source)
        return
    if receipt.get("schema") != BUCKET_SCHEMA:
        return
    pol = jv.mapping(jv.field(receipt, "policy", source, fix=fix), f"{source}: policy", fix=fix)
    jv.number(jv.field(pol, "version", f"{source}: policy", fix=fix), f"{source}: policy.version",
              what="a positive integer", positive=True, integer=True, fix=fix)  # the policy it is checked against
    jv.string(pol.get("sha256"), f"{source}: policy.sha256", allow_none=True, fix=fix)
    jv.string(jv.mapping(receipt.get("device", {}), f"{source}: device", fix=fix).get("kind"),
              f"{source}: device.kind", allow_none=True, fix=fix)
    matrix = jv.mapping(receipt.get("matrix") or {}, f"{source}: matrix", fix=fix)
    wl = jv.mapping(matrix.get("workload"), f"{source}: matrix.workload", allow_none=True, fix=fix) or {}
    for k in ("layers", "prompt_len", "output_len"):
        if k in wl:
            jv.number(wl[k], f"{source}: matrix.workload.{k}", what="a positive integer", positive=True, integer=True,
                      fix=fix)
    for k in ("prefill_bucket", "decode_bucket"):
        if k in wl:
            jv.string(wl[k], f"{source}: matrix.workload.{k}", fix=fix)
    jv.mapping(receipt.get("backends", {}), f"{source}: backends", fix=fix)
    jv.string(receipt.get("created"), f"{source}: created", allow_none=True, fix=fix)
    jv.string(receipt.get("date"), f"{source}: date", allow_none=True, fix=fix)
    jv.number(receipt.get("elapsed_s"), f"{source}: elapsed_s", what="a number of seconds, 0 or more", allow_none=True,
              fix=fix)
    buckets = jv.array(jv.field(receipt, "buckets", source, fix=fix), f"{source}: buckets", fix=fix)
    if not buckets:
        raise IomodelError(f"{source}: buckets is empty, a receipt holds at least one bucket: {fix}")
    names: set[str] = set()
    for i, b in enumerate(buckets):
        jv.mapping(b, f"{source}: buckets[{i}]", fix=fix)
        name = jv.name(jv.field(b, "name", f"{source}: buckets[{i}]", fix=fix), f"{source}: buckets[{i}].name",
                       fix=fix)
        if name in names:
            raise IomodelError(f"{source}: buckets[{i}] repeats the bucket name {name!r}, each bucket is named once: "
                               f"{fix}")
        names.add(name)
        wb = f"{source}: bucket {name!r}"
        jv.string(jv.field(b, "dtype", wb, fix=fix), f"{wb}: dtype", fix=fix)
        sizes = {k: jv.number(b[k], f"{wb}: {k}", what="a positive integer", positive=True, integer=True, fix=fix)
                 for k in ("heads", "kv_heads", "head_dim") if k in b}
        jv.number(jv.field(b, "weight", wb, fix=fix), f"{wb}: weight",
                  what="a positive number (the bucket's fraction of the workload's calls)", positive=True, fix=fix)
        training = _check_pass_field(b, wb)
        summary = jv.mapping(b.get("summary", {}), f"{wb}: summary", fix=fix)
        for n, v in jv.mapping(summary.get("backends", {}), f"{wb}: summary.backends", fix=fix).items():
            jv.number(jv.mapping(v, f"{wb}: summary.backends[{n!r}]", fix=fix).get("speedup_geomean"),
                      f"{wb}: summary.backends[{n!r}].speedup_geomean", allow_none=True, fix=fix)
            jv.boolean(v.get("drift_pass"), f"{wb}: summary.backends[{n!r}].drift_pass", allow_none=True, fix=fix)
        fallbacks = jv.mapping(summary.get("fallbacks", {}), f"{wb}: summary.fallbacks", fix=fix)
        jv.mapping(fallbacks.get("refused", {}), f"{wb}: summary.fallbacks.refused", fix=fix)
        dec = jv.mapping(summary.get("decision", {}), f"{wb}: summary.decision", fix=fix)
        jv.string(dec.get("backend"), f"{wb}: summary.decision.backend", allow_none=True, fix=fix)
        jv.number(dec.get("speedup"), f"{wb}: summary.decision.speedup", allow_none=True, fix=fix)
        if training:
            _check_training_bucket_fields(b, wb)
        shapes = jv.array(jv.field(b, "shapes", wb, fix=fix), f"{wb}: shapes", fix=fix)
        if not shapes:
            raise IomodelError(f"{wb}: shapes is empty, a bucket holds at least one shape: {fix}")
        for j, s in enumerate(shapes):
            jv.mapping(s, f"{wb}: shapes[{j}]", fix=fix)
            label = jv.string(jv.field(s, "label", f"{wb}: shapes[{j}]", fix=fix), f"{wb}: shapes[{j}].label", fix=fix)
            ws = f"{wb} shape {label!r}"
            for k, v in jv.mapping(s.get("shape", {}), f"{ws}: shape", fix=fix).items():
                if k in ("batch", "seqlen_q", "seqlen_k"):
                    jv.number(v, f"{ws}: shape.{k}", what="a positive integer", positive=True, integer=True, fix=fix)
            jv.string(s.get("error"), f"{ws}: error", allow_none=True, fix=fix)
            for n, r in jv.mapping(jv.field(s, "results", ws, fix=fix), f"{ws}: results", fix=fix).items():
                _check_result_fields(r, f"{ws} {n}")
                _check_elements(r, s["shape"], b, sizes, f"{ws} {n}")
                if training:
                    _check_gradient_fields(r, f"{ws} {n}")
            if training:
                _check_training_shape_fields(s, ws)
    for k in ("prefill_bucket", "decode_bucket"):
        if k in wl and wl[k] not in names:
            listed = sorted(names)
            some = ", ".join(repr(n) for n in listed[:8]) + (f", ... ({len(listed)} in all)" if len(listed) > 8 else "")
            raise IomodelError(f"{source}: matrix.workload.{k} names bucket {wl[k]!r}, which is not among the "
                               f"receipt's buckets ({some}): {fix}")
    verdict = jv.mapping(receipt.get("verdict", {}), f"{source}: verdict", fix=fix)
    if "pass" in verdict:
        jv.boolean(verdict["pass"], f"{source}: verdict.pass", fix=fix)
    for i, x in enumerate(jv.array(verdict.get("violations", []), f"{source}: verdict.violations", fix=fix)):
        jv.string(x, f"{source}: verdict.violations[{i}]", fix=fix)
    e2e = jv.mapping(receipt.get("end_to_end"), f"{source}: end_to_end", allow_none=True, fix=fix) or {}
    for n, p in jv.mapping(e2e.get("paths") or {}, f"{source}: end_to_end.paths", fix=fix).items():
        jv.number(jv.mapping(p, f"{source}: end_to_end.paths[{n!r}]", fix=fix).get("speedup"),
                  f"{source}: end_to_end.paths[{n!r}].speedup", allow_none=True, fix=fix)
    d = jv.mapping(e2e.get("decision"), f"{source}: end_to_end.decision", allow_none=True, fix=fix) or {}
    jv.number(d.get("speedup"), f"{source}: end_to_end.decision.speedup", allow_none=True, fix=fix)
    ds = jv.mapping(receipt.get("downstream"), f"{source}: downstream", allow_none=True, fix=fix) or {}
    for dt, results in jv.mapping(ds.get("results", {}), f"{source}: downstream.results", fix=fix).items():
        for n, r in jv.mapping(results, f"{source}: downstream.results[{dt!r}]", fix=fix).items():
            where = f"{source}: downstream {dt} {n}"
            jv.mapping(r, where, fix=fix)
            if jv.string(r.get("status"), f"{where}: status", allow_none=True, fix=fix) == "ok":
                _magnitude(jv.field(r, "max_abs", where, fix=fix), f"{where}: max_abs")


def check_receipt(receipt: dict[str, Any], policy: Policy | SpeedTargets | None = None) -> list[str]:
    """Every way the receipt breaks its declared policy; empty when it passes.

    A kernel-speed receipt goes to :func:`iomodel.bench.speed.check_speed_receipt` (with
    ``policy`` its targets); the rest of this describes a bucket receipt.

    Recomputes from raw numbers: medians from ``samples_s``; per-shape speedups as baseline
    median / fused median; accuracy verdicts from the error statistics with the bundled
    policy's tolerance; the per-bucket decision (best geometric-mean speedup among fused
    backends that ran every shape within the accuracy policy) against the policy's minimum
    speedup for the device and bucket; the downstream logits bounds. Every stored speedup
    (per shape ``speedup``, per bucket ``summary.backends[*].speedup_geomean`` and
    ``summary.decision.speedup``, and the request-level ``end_to_end`` speedups) must equal
    the one recomputed from the samples within :data:`~iomodel.bench.policy.RECOMPUTE_REL_TOL` (float rounding), so a
    receipt cannot claim a speedup its samples do not give. Every stored boolean must equal its
    recomputation too (each result's ``accuracy.pass`` and ``grad_accuracy.pass``, a forward
    bucket's ``summary.backends[*].drift_pass``, and, under the bundled policy, ``verdict.pass``
    against "no violation"); a disagreement is a line naming the field, after the policy
    violations.

    Args:
        receipt: a receipt dictionary (e.g. ``json.load`` of a ``bench-*.json``).
        policy: the policy to hold it to; default: the bundled policy of the receipt's
            declared version.

    Returns:
        One sentence per violation.

    Raises:
        IomodelError: a field of the wrong type or out of range (:func:`check_receipt_fields`).
    """
    check_receipt_fields(receipt)
    if receipt.get("schema") == SPEED_SCHEMA:
        return check_speed_receipt(receipt, policy)  # type: ignore[arg-type]
    out: list[str] = []
    if receipt.get("schema") != BUCKET_SCHEMA:  # not a bench receipt at all: bad input, not a violation
        raise IomodelError(f"unknown receipt schema {receipt.get('schema')!r}: pass a receipt written by "
                           f"`iomodel bench` (schema {BUCKET_SCHEMA} or {SPEED_SCHEMA})")
    declared = receipt.get("policy", {})
    bundled = policy is None
    flags: list[str] = []  # stored booleans that disagree with their recomputation
    if policy is None:
        try:
            policy = load_policy(int(declared.get("version", -1)))
        except IomodelError as exc:
            return [f"receipt declares policy version {declared.get('version')!r}, which is not bundled ({exc})"]
    if declared.get("sha256") and declared.get("sha256") != policy.sha256:
        out.append(f"the receipt's embedded policy (sha256 {declared.get('sha256', '')[:12]}) differs from policy "
                   f"v{policy.version} ({policy.sha256[:12]}): re-run the benchmark under the bundled policy")
    device = receipt.get("device", {}).get("kind")
    if device not in policy.speedup:
        out.append(f"policy v{policy.version} declares no speedup for device {device!r}")
        return out
    for b in receipt.get("buckets", []):
        name = b["name"]
        tol: Tolerance = policy.tol(b["dtype"])
        per_backend: dict[str, list[float]] = {}
        ok_all: dict[str, bool] = {}
        drift: dict[str, list[bool]] = {}  # per fused backend, the recomputed accuracy verdict of each shape it ran
        for s in b["shapes"]:
            res = s["results"]
            base = res.get(BASELINE, {})
            where = f"bucket {name!r} shape {s['label']}"
            if base.get("status") != "ok":
                why = "; ".join(x for x in base.get("reasons", []) if x) or s.get("error") or "no result"
                out.append(f"{where}: the baseline {BASELINE} did not run ({why})")
                continue
            for key, r in res.items():
                if r.get("samples_s") and "time_s" in r and not math.isclose(
                        statistics.median(r["samples_s"]), r["time_s"]["median"], rel_tol=1e-9):
                    out.append(f"{where} {key}: median {r['time_s']['median']:.4g} s does not match its samples "
                               f"({statistics.median(r['samples_s']):.4g} s)")
                elif r.get("samples_s") and isinstance(r.get("time_s"), dict):
                    # the whole spread, not only the median: timing.spread of the same samples
                    want = spread(list(r["samples_s"]))
                    odd = [k for k, v in want.items() if k in r["time_s"] and not (
                        isinstance(r["time_s"][k], (int, float)) and math.isclose(v, r["time_s"][k], rel_tol=1e-9,
                                                                                  abs_tol=1e-15))]
                    if odd:
                        out.append(f"{where} {key}: time_s {', '.join(odd)} do not match its samples "
                                   f"({', '.join(f'{k} {want[k]:.4g}' for k in odd)})")
            bv = accuracy_verdict(base["error"], None, tol)
            if not bv["pass"]:
                out.append(f"{where} {BASELINE}: {'; '.join(bv['reasons'])}")
            flags.extend(_stored_flag(f"{where} {BASELINE}", "accuracy.pass", base.get("accuracy"), bv["pass"],
                                    "the error statistics under the policy's tolerance"))
            bmed = _median(base)
            for key, r in res.items():
                if key == BASELINE:
                    continue
                ok_all.setdefault(key, True)
                if r.get("status") != "ok":
                    ok_all[key] = False
                    continue
                v = accuracy_verdict(r["error"], base["error"], tol)
                if not v["pass"]:
                    ok_all[key] = False
                    out.append(f"{where} {key}: drift above policy: {'; '.join(v['reasons'])}")
                flags.extend(_stored_flag(f"{where} {key}", "accuracy.pass", r.get("accuracy"), v["pass"],
                                        "the error statistics under the policy's tolerance"))
                drift.setdefault(key, []).append(v["pass"])
                sp = bmed / _median(r)
                per_backend.setdefault(key, []).append(sp)
                if not same_number(r.get("speedup"), sp):
                    out.append(f"{where} {key}: stored speedup {_x(r.get('speedup'))} differs from {sp:.4g}x, the "
                               f"baseline median over its median, both recomputed from the samples")
        summary = b.get("summary", {})
        if not _training(b):  # a training bucket's drift_pass adds the gradient verdicts (check_training)
            for key, stored in summary.get("backends", {}).items():
                if "drift_pass" in stored and key in drift:
                    flags.extend(_stored_flag(f"bucket {name!r} {key}", "summary drift_pass", stored["drift_pass"],
                                            all(drift[key]), "the accuracy verdicts of the shapes it ran"))
        for key, xs in per_backend.items():  # every backend's geometric mean over the shapes it ran
            stored = summary.get("backends", {}).get(key, {}).get("speedup_geomean")
            if not same_number(stored, _gmean(xs)):
                out.append(f"bucket {name!r} {key}: stored geometric-mean speedup {_x(stored)} differs from "
                           f"{_gmean(xs):.4g}x recomputed from the samples")
        decision = summary.get("decision", {})
        claimed = decision.get("backend")
        if claimed is not None:
            xs = per_backend.get(claimed, [])
            got = _gmean(xs) if len(xs) == len(b["shapes"]) else None
            if got is None or not same_number(decision.get("speedup"), got):
                out.append(f"bucket {name!r}: stored decision speedup {_x(decision.get('speedup'))} for {claimed} "
                           f"differs from {_x(got)}, the geometric mean recomputed from the samples")
        elif decision.get("speedup") is not None:
            out.append(f"bucket {name!r}: the decision keeps the baseline but states a speedup "
                       f"{_x(decision.get('speedup'))}")
        need = policy.min_speedup(device, name)
        reason = policy.no_floor_reason(device, name)
        if reason is not None and decision.get("no_floor") != reason:
            out.append(f"bucket {name!r}: policy v{policy.version} claims no speedup here because: {reason}; the "
                       "receipt must repeat that reason (summary.decision.no_floor)")
        cands = {k: _gmean(xs) for k, xs in per_backend.items() if ok_all.get(k) and len(xs) == len(b["shapes"])}
        if not cands:
            if need > 0:
                out.append(f"bucket {name!r}: no fused backend ran every shape within the accuracy policy, "
                           f"so the required {need:g}x speedup is not shown")
            if claimed is not None:
                out.append(f"bucket {name!r}: receipt names {claimed} as the decision but no fused backend ran "
                           f"every shape within the accuracy policy")
            continue
        best = max(cands, key=cands.get)
        if cands[best] < need:
            out.append(f"bucket {name!r}: best fused backend {best} is {cands[best]:.3g}x the baseline "
                       f"(geometric mean), below the policy's {need:g}x for {device}")
        if claimed != best:
            out.append(f"bucket {name!r}: receipt names {claimed} as the decision but the numbers make it {best}")
    out.extend(_check_end_to_end(receipt))
    out.extend(check_training(receipt, policy, flags))
    ds = receipt.get("downstream")
    if ds:
        for dt, results in ds.get("results", {}).items():
            bound = policy.downstream.bound.get(dt)
            for key, r in results.items():
                if r.get("status") != "ok":
                    continue
                if bound is None or not (float(r["max_abs"]) <= bound):
                    out.append(f"downstream {dt} {key}: max |logit - logit64| {float(r['max_abs']):.3g} exceeds "
                               f"the declared bound {bound}")
    out.extend(_check_whole(receipt, policy))
    verdict = receipt.get("verdict", {})
    if verdict.get("pass") is True and verdict.get("violations"):
        flags.append(f"verdict: pass is true but it lists {len(verdict['violations'])} violation(s): the stored "
                     "verdict was edited")
    if bundled and "pass" in verdict and verdict["pass"] != (not out):  # the harness's verdict is under this policy
        flags.append(f"verdict.pass: the receipt states {str(verdict['pass']).lower()}, but the recomputation "
                     + (f"finds {len(out)} policy violation(s)" if out else "finds no policy violation")
                     + f" under policy v{policy.version}: the stored verdict was edited or is stale")
    return out + flags


def _stored_flag(where: str, field: str, stored: Any, fresh: bool, source: str) -> list[str]:
    """A violation when a stored boolean disagrees with its recomputation; none when it agrees or is absent.

    Args:
        where: the bucket, shape and backend, for the message.
        field: the field's name (``"accuracy.pass"``); a ``.pass`` field is read from the
            dictionary ``stored`` (``{"pass": bool, ...}``), any other from ``stored`` itself.
        stored: the stored dictionary or boolean (None: absent, nothing to compare).
        fresh: the recomputed value.
        source: what ``fresh`` was recomputed from, for the message.
    """
    flag = stored.get("pass") if isinstance(stored, dict) and field.endswith(".pass") else stored
    if flag is None or flag == fresh:
        return []
    return [f"{where}: stored {field} {str(flag).lower()} differs from {str(fresh).lower()}, recomputed from {source}"]


# ------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------


#: Environment keys of older kernel-speed receipts -> the names :func:`iomodel.bench.environment.environment` uses.
LEGACY_ENVIRONMENT_KEYS = {"device": "name", "num_sms": "sms"}


def _renamed(d: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``d`` with its keys renamed by ``names``, in the same order."""
    return {names.get(k, k): v for k, v in d.items()}


def upgrade_receipt(receipt: dict[str, Any]) -> dict[str, Any]:
    """Rename, in place, what older receipts call differently (the bundled kernel ``triton`` -> ``tiled``).

    Touches only names, never a measured number. Returns the receipt.
    """
    old = LEGACY_BACKEND_NAMES

    def name(x: Any) -> Any:
        return old.get(x, x) if isinstance(x, str) else x

    if receipt.get("schema") == SPEED_SCHEMA:
        env = receipt.get("environment") or {}
        receipt["environment"] = _renamed(env, {k: v for k, v in LEGACY_ENVIRONMENT_KEYS.items() if v not in env})
        for sec in ("prefill", "decode"):
            for e in receipt.get(sec, []):
                e["results"] = _renamed(e["results"], old)
        return receipt
    if "backends" in receipt:
        receipt["backends"] = _renamed(receipt["backends"], old)
    for b in receipt.get("buckets", []):
        for s in b.get("shapes", []):
            s["results"] = _renamed(s["results"], old)
        sm = b.get("summary") or {}
        if "backends" in sm:
            sm["backends"] = _renamed(sm["backends"], old)
        if "refused" in sm.get("fallbacks", {}):
            sm["fallbacks"]["refused"] = _renamed(sm["fallbacks"]["refused"], old)
        if "decision" in sm:
            sm["decision"]["backend"] = name(sm["decision"].get("backend"))
    e2e = receipt.get("end_to_end") or {}
    if "paths" in e2e:
        e2e["paths"] = _renamed(e2e["paths"], old)
    for p in [*(e2e.get("paths") or {}).values(), e2e.get("decision") or {}]:
        for k in ("prefill_backend", "decode_backend"):
            if k in p:
                p[k] = name(p[k])
    for dt, results in ((receipt.get("downstream") or {}).get("results") or {}).items():
        receipt["downstream"]["results"][dt] = _renamed(results, old)
    return receipt


def load_receipt(path: str | Path) -> dict[str, Any]:
    """Read a receipt JSON file (bucket or kernel-speed), with older names upgraded (:func:`upgrade_receipt`).

    Raises:
        IomodelError: missing or unreadable file, invalid JSON, or a field of the wrong type
            (:func:`check_receipt_fields`, one line naming bucket, shape and field).
    """
    data = jv.read_json(path, "receipt", "pass a receipt JSON written by iomodel bench", "re-run iomodel bench")
    return receipt_from_json(data, f"receipt {str(Path(path))!r}")


def receipt_from_json(data: Any, source: str = "the receipt") -> dict[str, Any]:
    """A parsed receipt, type-checked (:func:`check_receipt_fields`) and then upgraded (:func:`upgrade_receipt`).

    A receipt of an unknown schema is returned as it is: :func:`check_receipt` names it.

    Raises:
        IomodelError: a field of the wrong type, naming it.
    """
    check_receipt_fields(data, source)
    if data.get("schema") not in (BUCKET_SCHEMA, SPEED_SCHEMA):
        return data
    return upgrade_receipt(data)


def json_safe(obj: Any) -> Any:
    """A copy of ``obj`` in which non-finite floats are the strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def check_output_paths(json_path: str | Path, md_path: str | Path | None = None) -> tuple[Path, Path]:
    """Make sure both receipt files can be written, before a benchmark spends minutes on them.

    Creates the missing parent folders, then opens each file for appending (an existing
    file is left as it is) or creates and removes it (a new one), so a read-only or missing
    location fails now rather than after the run.

    Args:
        json_path: the receipt JSON path (``-o``).
        md_path: the Markdown path (``--markdown``); default: ``json_path`` with suffix ``.md``.

    Returns:
        ``(json_path, md_path)`` as :class:`~pathlib.Path`.

    Raises:
        IomodelError: the two paths are the same file, a path is a folder, or a folder
            cannot be created or a file cannot be written there.
    """
    jp = Path(json_path)
    mp = Path(md_path) if md_path else jp.with_suffix(".md")
    md_flag = "--markdown" if md_path else "-o (the Markdown goes beside it with suffix .md) or --markdown"
    if jp.resolve() == mp.resolve():
        raise IomodelError(f"the receipt JSON and its Markdown would both be {jp}: give -o a .json name or pass "
                           "--markdown a different path")
    for path, what, flag in ((json_path, "receipt JSON", "-o"), (md_path or mp, "receipt Markdown", md_flag)):
        check_output_file(path, flag, what)  # the given str: "dir/" names a folder
    return jp, mp


def write_receipt(receipt: dict[str, Any], json_path: str | Path, md_path: str | Path | None = None) -> tuple[Path, Path]:
    """Write the receipt as JSON and its Markdown rendering (default: same stem, ``.md``).

    Call :func:`check_output_paths` before the benchmark so that this cannot fail after it.

    Returns:
        ``(json_path, md_path)``.

    Raises:
        IomodelError: a file cannot be written (the message names it).
    """
    jp = Path(json_path)
    mp = Path(md_path) if md_path else jp.with_suffix(".md")
    safe = json_safe(receipt)
    for path, text in ((jp, lambda: json.dumps(safe, indent=1, allow_nan=False) + "\n"),
                       (mp, lambda: render_markdown(safe))):
        write_text(path, text(), "-o / --markdown")  # whole or not at all
    return jp, mp


# ------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------


def fmt_time(s: float | None) -> str:
    """Seconds as a short string with a unit (ns, µs, ms, s); ``—`` for None."""
    return fmt_seconds(s, missing="—")


def fmt_bytes(b: int | None) -> str:
    """Bytes as KiB/MiB/GiB with three significant digits; ``—`` for None."""
    return human_bytes(b, missing="—")


def _pct(x: float) -> str:
    """A ratio as a percentage with two significant digits (0.00026 -> '0.026%')."""
    return f"{x * 100:.2g}%" if x < 0.1 else f"{x:.0%}"


def _evidence(r: dict[str, Any]) -> str:
    """What identifies the implementation that ran: the SDPA ATen op, else the top device kernel."""
    return r.get("op") or (r.get("kernels") or [r.get("ran") or "?"])[0]


def _e(x: Any) -> str:
    return "—" if x is None else (x if isinstance(x, str) else f"{float(x):.2g}")


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def refusal_log(bucket: dict[str, Any]) -> dict[tuple[str, str, tuple[str, ...]], list[str]]:
    """A bucket's refusals and errors, one entry per (backend, status, reason lines), counted per shape.

    A refused SDPA call carries several reason lines (PyTorch's debug reasons, then the
    ``No available kernel`` line): they stay together in one entry, so the count of an
    entry is the number of shapes, as in the bucket summary.

    Returns:
        ``{(backend, status, reason lines): [shape label, ...]}`` in first-seen order.
    """
    out: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for s in bucket["shapes"]:
        for n, r in s["results"].items():
            st = r.get("status")
            if st == "ok":
                continue
            key = (n, str(st), tuple(x for x in r.get("reasons", []) if x))
            out.setdefault(key, []).append(s["label"])
    return out


def render_markdown(receipt: dict[str, Any]) -> str:
    """The receipt as Markdown: header, declared policy, Signal → Decision → Proof, details, backend log.

    A kernel-speed receipt renders with :func:`iomodel.bench.speed.render_speed_markdown`.

    Returns:
        The document text.
    """
    if receipt.get("schema") == SPEED_SCHEMA:
        return render_speed_markdown(receipt)
    dev = receipt["device"]
    pol = receipt["policy"]
    mx = receipt["matrix"]
    L: list[str] = []
    w = L.append
    verdict = receipt.get("verdict", {})
    w(f"# iomodel bench receipt — {dev.get('name', dev['kind'])}")
    w("")
    w(f"- command: `{receipt.get('command', '')}`")
    w(f"- date: {receipt['date']}; elapsed {receipt.get('elapsed_s', 0):.1f} s")
    w(f"- device: {dev['kind']} — {dev.get('name', '')}; torch {dev['torch']}, triton {dev.get('triton')}, "
      f"threads {dev.get('threads')}" + (f", CUDA {dev.get('cuda')}, cuDNN {dev.get('cudnn')}, sm {dev.get('sm')}"
                                         if dev["kind"] == "cuda" else "")
      + (f"; load average {dev['load_average_1m_at_start']} at start, {dev.get('load_average_1m_at_end')} at end"
         if "load_average_1m_at_start" in dev else ""))
    w(f"- shape matrix: `{mx['name']}` version {mx['version']} (sha256 {mx['sha256'][:12]})")
    w(f"- timing: {receipt['timing']['method']}; warmup {receipt['timing']['warmup']}, "
      f"{receipt['timing']['reps']} interleaved reps; {receipt['timing']['statistic']}")
    w(f"- memory: {receipt['timing']['memory']}")
    w(f"- verdict under policy v{pol['version']}: **{'PASS' if verdict.get('pass') else 'FAIL'}**")
    for v in verdict.get("violations", []):
        w(f"  - {v}")
    w("")
    w(f"## Policy v{pol['version']} (declared before the results)")
    w("")
    if _elementwise(pol["tolerance"]):
        w("Error = |O − O64| against a float64 reference. A fused backend passes when every element satisfies "
          "|O − O64| ≤ k × |O_MATH − O64| + floor × u × max|O64| (u = the dtype's unit roundoff; SDPA MATH is the "
          "reference backend, held only to finite outputs).")
        w("")
        w("| dtype | k | floor | rationale |")
        w("|---|---|---|---|")
        for dt, t in pol["tolerance"].items():
            w(f"| {dt} | {t['k']:g} | {t['floor']:g} | {_cell(t.get('rationale', ''))} |")
    else:
        w("Error = |O − O64| against a float64 reference. A fused backend passes when every element is within "
          "atol + rtol·|O64| and its max and p99 errors are ≤ k × the baseline's own (max, p99) error + ε.")
        w("")
        w("| dtype | atol | rtol | k | ε | rationale |")
        w("|---|---|---|---|---|---|")
        for dt, t in pol["tolerance"].items():
            w(f"| {dt} | {t['atol']:g} | {t['rtol']:g} | {t['k']:g} | {t['eps']:g} | {_cell(t.get('rationale', ''))} |")
    L.extend(_gradient_policy_lines(pol))
    sp = pol["speedup"].get(dev["kind"], {})
    w("")
    w(f"Minimum speedup of the chosen fused backend on {dev['kind']}: default {sp.get('default')}×"
      + "".join(f"; `{k}` {v}×" for k, v in sp.get("buckets", {}).items())
      + "".join(f"; `{k}` none ({v})" for k, v in sp.get("no_floor", {}).items()) + f". {sp.get('rationale', '')}")
    ds = pol.get("downstream", {})
    w("")
    w(f"Downstream: logits of a {ds.get('batch')}×{ds.get('seqlen')} token attention block (H={ds.get('heads')}, "
      f"H_kv={ds.get('kv_heads')}, d={ds.get('head_dim')}, vocab {ds.get('vocab')}) within "
      + ", ".join(f"{k} {v:g}" for k, v in ds.get("bound", {}).items()) + f" of float64. {ds.get('rationale', '')}")
    w("")
    w("## Signal → Decision → Proof")
    w("")
    w("| Signal | Decision | Proof |")
    w("|---|---|---|")
    for b in receipt["buckets"]:
        if _training(b):
            w(_training_proof_row(b))
            continue
        d = b["summary"]["decision"]
        per = b["summary"]["backends"]
        signal = f"{b['signal']} (traffic weight {b['weight']:.0%})"
        if d["backend"]:
            r0 = next(s["results"][d["backend"]] for s in b["shapes"])
            ran = _evidence(r0)
            errs = [float(s["results"][d["backend"]]["error"]["max_abs"]) for s in b["shapes"]]
            lims = [float(x) for s in b["shapes"]
                    if (x := s["results"][d["backend"]]["accuracy"]["limits"].get("max_abs")) is not None]
            ratios = [float(x) for s in b["shapes"]
                      if (x := s["results"][d["backend"]]["error"].get("worst_ratio")) is not None]
            mem = d.get("memory_ratio")
            decision = (f"use {TITLES.get(d['backend'], d['backend'])} (fused and tiled: no seqlen_q × seqlen_k "
                        "scores in memory)")
            floor = (f"policy ≥ {d['min_speedup']:g}×" if d.get("no_floor") is None
                     else f"no speedup floor: {d['no_floor']}")
            limit = (f"limit {min(lims):.2g}" if lims else
                     f"worst element at {max(ratios):.2g}× its limit" if ratios else "no limit recorded")
            proof = (f"{d['speedup']:.2f}× faster (geomean of {len(b['shapes'])} shape{'s' if len(b['shapes']) != 1 else ''}; {floor})"
                     + (f", {_pct(mem)} of baseline peak memory" if mem is not None else "")
                     + f"; max error {max(errs):.2g} ({limit}); ran `{ran}`")
        else:
            decision = "keep SDPA MATH (baseline)"
            why = [f"{n}: {v['unsupported']} refused, {v['error']} errors" + ("" if v["drift_pass"] in (None, True) else ", drift")
                   for n, v in per.items()]
            proof = ("no fused backend ran every shape within policy (" + "; ".join(why) + ")"
                     + (f"; no speedup floor: {d['no_floor']}" if d.get("no_floor") else ""))
        w(f"| {_cell(signal)} | {_cell(decision)} | {_cell(proof)} |")
    e2e = receipt.get("end_to_end")
    if e2e and e2e.get("decision"):
        wl, dd, bb = e2e["workload"], e2e["decision"], e2e["paths"][BASELINE]
        w(f"| request: {wl['prompt_len']}-token prompt, {wl['output_len']} output tokens, {wl['layers']} layers "
          f"(prefill batch {e2e['batch']['prefill']}, decode batch {e2e['batch']['decode']}) | prefill on "
          f"{dd['prefill_backend']}, decode on {dd['decode_backend']} | attention per request of {wl['layers']} layers "
          f"{fmt_time(bb['request_s'])} → {fmt_time(dd['request_s'])} ({dd['speedup']:.2f}×); prefill share "
          f"{bb['prefill_share']:.0%} → {dd['prefill_share']:.0%} |")
    ws = [(b["weight"], b["summary"]["decision"]["speedup"]) for b in receipt["buckets"] if not _training(b)]
    L.extend(_training_weighted_row(receipt))
    if ws and all(s for _, s in ws):
        g = math.exp(sum(wt * math.log(s) for wt, s in ws) / sum(wt for wt, _ in ws))
        w(f"| all buckets, traffic-weighted | per-bucket decisions above | {g:.2f}× (weighted geometric mean) |")
    w("")
    if e2e:
        w("## Prefill and decode: from kernel time to request time")
        w("")
        w(f"Method: {e2e['method']}." + (" Some points are extrapolated beyond the measured sizes." if e2e.get("extrapolated") else ""))
        w("")
        nl = e2e["workload"]["layers"]
        w(f"Units: the two call columns are one layer's attention kernel time; TTFT, per output token and request "
          f"are attention time summed over the request's {nl} layers.")
        w("")
        w(f"| path | prefill call (1 layer) | Σ decode calls (1 layer) | TTFT attention ({nl} layers) | "
          f"per output token ({nl} layers) | request attention ({nl} layers) | prefill share | request speedup |")
        w("|---|---|---|---|---|---|---|---|")
        rows = list(e2e["paths"].items()) + ([("decision", e2e["decision"])] if e2e.get("decision") else [])
        for n, p in rows:
            label = n if n != "decision" else f"decision ({p['prefill_backend']} / {p['decode_backend']})"
            w(f"| {label} | {fmt_time(p['prefill_call_s'])} | {fmt_time(p['decode_calls_s'])} | {fmt_time(p['ttft_attention_s'])} | "
              f"{fmt_time(p['per_output_token_s'])} | {fmt_time(p['request_s'])} | {p['prefill_share']:.1%} | {p.get('speedup', 1):.2f}× |")
        recon = reconciliation(e2e, receipt["buckets"]) if e2e.get("decision") else None
        if recon:
            w("")
            w(f"Reconciliation: {recon}.")
        w("")
    w("## Per shape")
    w("")
    w("| bucket | shape | mask | backend | status | ran | median | p10–p90 | per token | speedup | peak allocated | memory vs baseline | max err | p99 err | limit (max) | verdict |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b in receipt["buckets"]:
        if _training(b):  # listed under "Training steps" below
            continue
        for s in b["shapes"]:
            if s.get("error"):
                w(f"| {b['name']} | {s['label']} | {s['mask']} | — | error | — | — | — | — | — | — | — | — | — | — | "
                  f"{_cell(s['error'])} |")
            for n, r in s["results"].items():
                st = r.get("status")
                if st != "ok":
                    w(f"| {b['name']} | {s['label']} | {s['mask']} | {n} | {st} | — | — | — | — | — | — | — | — | — | — | "
                      f"{_cell('; '.join(x for x in r.get('reasons', []) if x)[:300])} |")
                    continue
                t = r["time_s"]
                acc = r.get("accuracy", {})
                spd = "baseline" if n == BASELINE else (f"{r['speedup']:.2f}×" if r.get("speedup") else "—")
                w(f"| {b['name']} | {s['label']} | {s['mask']} | {n} | ok | `{_evidence(r)}` | "
                  f"{fmt_time(t['median'])} | {fmt_time(t['p10'])}–{fmt_time(t['p90'])} | {fmt_time(r.get('per_token_s'))} | "
                  f"{spd} | "
                  f"{fmt_bytes(r.get('peak_allocated_bytes'))} | "
                  f"{'—' if r.get('memory_ratio') is None else _pct(r['memory_ratio'])} | "
                  f"{_e(r['error']['max_abs'])} | {_e(r['error']['p99_abs'])} | {_e(acc.get('limits', {}).get('max_abs'))} | "
                  f"{'pass' if acc.get('pass') else _cell('FAIL: ' + '; '.join(acc.get('reasons', [])))} |")
    w("")
    L.extend(_training_section(receipt))
    w("## Backend log")
    w("")
    w("Backends on this device:")
    w("")
    for n, be in receipt["backends"].items():
        w(f"- `{n}` ({be['title']}, {be['role']}): " + ("available" + (f", {be['version']}" if be.get("version") else "")
                                                         if be["available"] else be["reason"]))
    w("")
    for b in receipt["buckets"]:
        sm = b["summary"]
        w(f"### {b['name']}")
        w("")
        auto = ", ".join(f"{k} ×{v}" for k, v in sm["auto_dispatch"].items())
        w(f"- unpinned SDPA dispatch ran: {auto}; fallbacks to MATH when unpinned: {sm['fallbacks']['auto_to_math']}; "
          f"pinned-backend refusals: {sm['fallbacks']['refused_total']}")
        for n, v in sm["backends"].items():
            w(f"- `{n}`: {v['ok']} ran, {v['unsupported']} refused, {v['error']} errors")
        ops: dict[str, set[str]] = {}
        for s in b["shapes"]:
            for n, r in s["results"].items():
                if r.get("status") == "ok":
                    ops.setdefault(n, set()).update(r.get("ops", []))
                    ops[n].update(r.get("kernels", [])[:3])
        for n, names in ops.items():
            w(f"- `{n}` ops/kernels seen: " + ", ".join(f"`{_cell(x)}`" for x in sorted(names)))
        for (n, st, why), labels in refusal_log(b).items():
            w(f"- `{n}` {'refused' if st == 'unsupported' else 'failed'} ×{len(labels)} ({', '.join(labels)}): "
              + _cell(" / ".join(why)))
        w("")
    ds = receipt.get("downstream")
    if ds:
        w("## Downstream logits check")
        w("")
        w("| dtype | backend | status | max abs logit error | p99 | argmax agreement | bound | verdict |")
        w("|---|---|---|---|---|---|---|---|")
        for dt, results in ds["results"].items():
            for n, r in results.items():
                if r.get("status") != "ok":
                    w(f"| {dt} | {n} | {r.get('status')} | — | — | — | — | {_cell('; '.join(x for x in r.get('reasons', []) if x)[:200])} |")
                else:
                    w(f"| {dt} | {n} | ok | {r['max_abs']:.3g} | {r['p99_abs']:.3g} | {r['argmax_agreement']:.1%} | "
                      f"{r['bound']} | {'pass' if r['pass'] else 'FAIL'} |")
        w("")
    return "\n".join(L) + "\n"


# ------------------------------------------------------------------------------------
# Training buckets (pass = "fwd+bwd"): check and Markdown
# ------------------------------------------------------------------------------------


def _training(bucket: dict[str, Any]) -> bool:
    """Whether a receipt bucket is a training bucket (older receipts have no ``pass``: forward)."""
    return bucket.get("pass", "fwd") == "fwd+bwd"


def _receipt_step_flops(bucket: dict[str, Any], shape: dict[str, Any]) -> int:
    """FLOPs of one training step of a receipt shape, recomputed (:func:`iomodel.bench.matrix.step_flops`)."""
    from iomodel.bench.matrix import step_flops

    return step_flops(shape["batch"], bucket["heads"], bucket["kv_heads"], bucket["head_dim"], shape["seqlen_q"],
                      shape["seqlen_k"], bucket["causal"], bucket["causal_align"], True)


def check_training(receipt: dict[str, Any], policy: Policy, flags: list[str] | None = None) -> list[str]:
    """Every way the training buckets of a bucket receipt break the policy; empty when they pass.

    The forward rules (baseline, output drift, speedups over SDPA MATH, the decision and its
    minimum speedup) are :func:`check_receipt`'s, as for any bucket. This adds, recomputed
    from the raw numbers: the eager chain ran and its median matches its samples; each
    result's dQ, dK, dV errors within the policy's gradient rule (``k x`` the eager chain's
    own max and p99 error ``+ eps``, :func:`iomodel.bench.policy.gradient_verdict`); the
    step's FLOPs (:func:`iomodel.bench.matrix.step_flops`), ``tflops`` (FLOPs / median /
    1e12) and ``speedup_vs_eager`` (eager median / median) per result, their geometric means
    per backend and for the decision; a peak memory for every result that ran; every
    gradient error magnitude finite (a ``"nan"`` passes no comparison, and the eager chain's
    sets every limit); each stored ``grad_accuracy.limits`` equal to the recomputed limit.

    A stored ``grad_accuracy.pass`` that disagrees with its recomputed verdict is a line in
    ``flags`` (in the returned list when ``flags`` is None).

    Args:
        receipt: a bucket receipt; policy: the policy it is held to (its ``[gradient.*]``).
        flags: where to put the stored-flag disagreements (default: with the violations).

    Returns:
        One sentence per violation.
    """
    out: list[str] = []
    flags = out if flags is None else flags
    for b in receipt.get("buckets", []):
        if not _training(b):
            continue
        name = b["name"]
        try:
            tol = policy.grad_tol(b["dtype"])
        except IomodelError as exc:
            out.append(f"bucket {name!r}: {exc}")
            continue
        vs_eager: dict[str, list[float]] = {}
        for s in b["shapes"]:
            where = f"bucket {name!r} shape {s['label']}"
            eager = s.get("eager") or {}
            if eager.get("status") != "ok":
                why = "; ".join(x for x in eager.get("reasons", []) if x) or s.get("error") or "no result"
                out.append(f"{where}: the eager chain (the gradient baseline) did not run ({why}), so no gradient "
                           "is checked")
                continue
            flops = _receipt_step_flops(b, s["shape"])
            if s.get("flops") != flops:
                out.append(f"{where}: stored FLOPs {s.get('flops')} differ from {flops}, 3.5 x 4·B·H·HEAD_DIM·visible "
                           "pairs recomputed from the shape")
            if eager.get("samples_s") and not same_number(eager["time_s"]["median"], statistics.median(eager["samples_s"])):
                out.append(f"{where} {EAGER}: median {eager['time_s']['median']:.4g} s does not match its samples")
            emed = _median(eager)
            for key, r in ((EAGER, eager), *s["results"].items()):
                if r.get("status") != "ok":
                    continue
                v = gradient_verdict(r["grad_error"], None if key == EAGER else eager["grad_error"], tol)
                if not v["pass"]:
                    out.append(f"{where} {key}: gradient drift above policy: {'; '.join(v['reasons'])}")
                out.extend(_gradient_magnitude_lines(f"{where} {key}", r["grad_error"], key == EAGER))
                out.extend(_gradient_limit_lines(f"{where} {key}", r.get("grad_accuracy"), v["limits"], tol))
                flags.extend(_stored_flag(f"{where} {key}", "grad_accuracy.pass", r.get("grad_accuracy"), v["pass"],
                                        "the gradient error statistics under the policy's gradient rule"))
                med = _median(r)
                if not same_number(r.get("tflops"), flops / med / 1e12):
                    out.append(f"{where} {key}: stored {r.get('tflops')} TFLOP/s differs from {flops / med / 1e12:.4g}, "
                               "the FLOPs over the median recomputed from the samples")
                if r.get("peak_allocated_bytes") is None:
                    out.append(f"{where} {key}: no peak memory of the step was recorded")
                if key == EAGER:
                    continue
                sp = emed / med
                vs_eager.setdefault(key, []).append(sp)
                if not same_number(r.get("speedup_vs_eager"), sp):
                    out.append(f"{where} {key}: stored speedup over eager {_x(r.get('speedup_vs_eager'))} differs "
                               f"from {sp:.4g}x, the eager median over its median, both recomputed from the samples")
        summary = b.get("summary", {})
        for key, stored in summary.get("backends", {}).items():
            xs = vs_eager.get(key)
            if xs and not same_number(stored.get("speedup_vs_eager_geomean"), _gmean(xs)):
                out.append(f"bucket {name!r} {key}: stored geometric-mean speedup over eager "
                           f"{_x(stored.get('speedup_vs_eager_geomean'))} differs from {_gmean(xs):.4g}x recomputed "
                           "from the samples")
        decision = summary.get("decision", {})
        if decision.get("backend") is not None:
            xs = vs_eager.get(decision["backend"], [])
            got = _gmean(xs) if len(xs) == len(b["shapes"]) else None
            if not same_number(decision.get("speedup_vs_eager"), got):
                out.append(f"bucket {name!r}: stored decision speedup over eager {_x(decision.get('speedup_vs_eager'))} "
                           f"differs from {_x(got)}, the geometric mean recomputed from the samples")
    return out


def _gradient_magnitude_lines(where: str, grad_error: dict[str, Any], baseline: bool) -> list[str]:
    """A line per gradient error magnitude stored as ``"inf"`` / ``"nan"``: no limit can hold it
    (``nan > limit`` is false), and an eager chain's sets every backend's limit to that value."""
    out = []
    for g in GRADIENTS:
        for k in ERROR_MAGNITUDES:
            x = float(grad_error[g][k])
            if not math.isfinite(x):
                out.append(f"{where}: grad_error.{g}.{k} is {x}, not a finite error"
                           + (", so it sets no gradient limit for the other backends" if baseline else
                              ", so it cannot be held to the gradient limit"))
    return out


def _g6(x: float | None) -> str:
    return "none" if x is None else f"{x:.6g}"


def _gradient_limit_lines(where: str, grad_accuracy: dict[str, Any] | None, fresh: dict[str, dict[str, float]],
                          tol: Tolerance) -> list[str]:
    """A line per stored gradient limit (``grad_accuracy.limits``) that is not ``k x`` the eager chain's error
    ``+ eps`` recomputed (``fresh``: :func:`iomodel.bench.policy.gradient_verdict`'s limits); none when the
    receipt stores no limits."""
    stored = (grad_accuracy or {}).get("limits")
    if stored is None:
        return []
    out = []
    for g in GRADIENTS:
        st, fr = stored.get(g) or {}, fresh.get(g, {})
        for k in sorted(set(st) | set(fr)):
            if not same_number(st.get(k), fr.get(k)):
                rule = (f"{tol.floor:g} x u x max|{g}64|" if tol.elementwise
                        else f"{tol.k:g} x the eager chain's {g} {k} + {tol.eps:g}")
                out.append(f"{where}: stored grad_accuracy.limits.{g}.{k} {_g6(st.get(k))} differs from "
                           f"{_g6(fr.get(k))}, {rule} recomputed")
    return out


def _elementwise(tables: dict[str, Any]) -> bool:
    """Whether a policy's ``tolerance`` (or ``gradient``) tables are v3's element-wise ones (``floor``, no ``atol``)."""
    return any("floor" in t for t in tables.values())


def _gradient_policy_lines(pol: dict[str, Any]) -> list[str]:
    """The policy's gradient rule as Markdown lines (none when the policy has no ``[gradient.*]``)."""
    grad = pol.get("gradient") or {}
    if not grad:
        return []
    if _elementwise(grad):
        lines = ["", f"Training buckets (fwd+bwd): each element of {', '.join(GRADIENTS)} passes when "
                 "|g − g64| ≤ k × |g_eager − g64| + floor × u × max|g64| (the eager chain in the input dtype is the "
                 "gradient reference).", "", "| dtype | k | floor | rationale |", "|---|---|---|---|"]
        return lines + [f"| {dt} | {t['k']:g} | {t['floor']:g} | {_cell(t.get('rationale', ''))} |"
                        for dt, t in grad.items()]
    lines = ["", f"Training buckets (fwd+bwd): each of {', '.join(GRADIENTS)} passes when its max and p99 errors "
             "against the float64 gradients are ≤ k × the eager chain's own (max, p99) error + ε "
             "(the eager chain in the input dtype is the gradient baseline; no element-wise rule).", "",
             "| dtype | k | ε | rationale |", "|---|---|---|---|"]
    lines += [f"| {dt} | {t['k']:g} | {t['eps']:g} | {_cell(t.get('rationale', ''))} |" for dt, t in grad.items()]
    return lines


def _times(v: Any) -> str:
    """A speedup as ``1.23×``; ``—`` for None."""
    return "—" if v is None else f"{float(v):.2f}×"


def _grad_limit(lim: dict[str, Any]) -> str:
    """One gradient's limit for a decision line: the max-abs limit (policy v2), else the element
    rule's absolute floor (policy v3: ``|g - g64| <= k x |g_eager - g64| + floor``), else a dash."""
    if lim.get("max_abs") is not None:
        return _e(lim["max_abs"])
    if lim.get("abs_floor") is not None:
        return f"per element, floor {_e(lim['abs_floor'])}"
    return "—"


def _grad_errors(r: dict[str, Any]) -> str:
    """``dq a / dk b / dv c`` max errors of a training result."""
    return " / ".join(f"{g} {_e(r['grad_error'][g]['max_abs'])}" for g in GRADIENTS)


def _training_proof_row(b: dict[str, Any]) -> str:
    """A training bucket's Signal → Decision → Proof row: per shape the chosen backend's fwd+bwd
    time, TFLOP/s, peak memory, speedups over both baselines and gradient errors against their limits."""
    d = b["summary"]["decision"]
    signal = f"{b['signal']} (training weight {b['weight']:.0%})"
    if not d["backend"]:
        per = b["summary"]["backends"]
        why = [f"{n}: {v['unsupported']} refused, {v['error']} errors" + ("" if v["drift_pass"] in (None, True) else ", drift")
               for n, v in per.items()]
        return (f"| {_cell(signal)} | keep SDPA MATH (baseline) | no fused backend ran every shape within policy "
                f"(forward and gradients): {_cell('; '.join(why))} |")
    parts = []
    for s in b["shapes"]:
        r = s["results"][d["backend"]]
        lim = r["grad_accuracy"]["limits"]
        parts.append(f"N={s['shape']['seqlen_q']} B={s['shape']['batch']}: fwd+bwd {fmt_time(r['time_s']['median'])}, "
                     f"{r['tflops']:.3g} TFLOP/s, peak {fmt_bytes(r.get('peak_allocated_bytes'))}, "
                     f"{_times(r.get('speedup_vs_eager'))} vs eager, {_times(r.get('speedup'))} vs math; gradient max error "
                     f"{_grad_errors(r)} (limits " + " / ".join(_grad_limit(lim.get(g, {})) for g in GRADIENTS) + ")")
    proof = (f"{d['speedup']:.2f}× faster than SDPA MATH (fp32 intermediates; geomean, policy ≥ {d['min_speedup']:g}×), "
             f"{_times(d.get('speedup_vs_eager'))} vs the eager chain in {b['dtype']}; " + "; ".join(parts))
    decision = f"train with {TITLES.get(d['backend'], d['backend'])} (forward + backward, no N × N scores in memory)"
    return f"| {_cell(signal)} | {_cell(decision)} | {_cell(proof)} |"


def _training_weighted_row(receipt: dict[str, Any]) -> list[str]:
    """The training buckets' weighted geometric-mean speedups (both baselines), as a table row; none without any."""
    tb = [b for b in receipt["buckets"] if _training(b)]
    ws = [(b["weight"], b["summary"]["decision"]["speedup"], b["summary"]["decision"].get("speedup_vs_eager")) for b in tb]
    if not ws or not all(m and e for _, m, e in ws):
        return []
    tot = sum(wt for wt, _, _ in ws)
    gm = math.exp(sum(wt * math.log(m) for wt, m, _ in ws) / tot)
    ge = math.exp(sum(wt * math.log(e) for wt, _, e in ws) / tot)
    return [f"| training buckets, weighted | per-bucket decisions above | {gm:.2f}× vs SDPA MATH, {ge:.2f}× vs eager "
            "(weighted geometric means) |"]


def _training_section(receipt: dict[str, Any]) -> list[str]:
    """The "Training steps" section: every result of every training bucket, the eager chain first."""
    tb = [b for b in receipt["buckets"] if _training(b)]
    if not tb:
        return []
    L = ["## Training steps (forward + backward)", "",
         "One call = the backend's forward, then torch.autograd.grad(o, (q, k, v), dO) with a seeded dO. TFLOP/s = "
         "3.5 × 4·B·H·HEAD_DIM·visible pairs / median. Speedups: baseline median / median, against the eager chain in "
         "the input dtype (kernels/baseline.py, \"vs eager\") and SDPA MATH with fp32 intermediates (\"vs math\"). "
         "Gradient errors are max |g − g64|, with the policy's limit (k × eager's + ε) in parentheses.", "",
         "| bucket | shape | backend | status | fwd+bwd median | p10–p90 | TFLOP/s | peak allocated | vs eager | vs math | "
         "o max err | dq max err | dk max err | dv max err | verdict |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b in tb:
        for s in b["shapes"]:
            head = f"| {b['name']} | {s['label']} "
            if s.get("error"):
                L.append(head + "| — | error |" + " — |" * 10 + f" {_cell(s['error'])} |")
                continue
            for n, r in ((EAGER, s.get("eager") or {}), *s["results"].items()):
                if r.get("status") != "ok":
                    L.append(head + f"| {n} | {r.get('status')} |" + " — |" * 10
                             + f" {_cell('; '.join(x for x in r.get('reasons', []) if x)[:300])} |")
                    continue
                t, lim = r["time_s"], r["grad_accuracy"]["limits"]
                errs = " | ".join(f"{_e(r['grad_error'][g]['max_abs'])}"
                                  + (f" ({_e(lim[g]['max_abs'])})" if lim.get(g, {}).get("max_abs") is not None
                                     else "") for g in GRADIENTS)
                bad = r.get("accuracy", {}).get("reasons", []) + r["grad_accuracy"]["reasons"]
                L.append(head + f"| {n} | ok | {fmt_time(t['median'])} | {fmt_time(t['p10'])}–{fmt_time(t['p90'])} | "
                         f"{r['tflops']:.3g} | {fmt_bytes(r.get('peak_allocated_bytes'))} | "
                         f"{'baseline' if n == EAGER else _times(r.get('speedup_vs_eager'))} | "
                         f"{'baseline' if n == BASELINE else _times(r.get('speedup'))} | {_e(r['error']['max_abs'])} | "
                         f"{errs} | {'pass' if not bad else _cell('FAIL: ' + '; '.join(bad))} |")
    L.append("")
    return L
