"""Benchmark receipts: the end-to-end estimate, the policy check, JSON and Markdown.

A receipt is the JSON dictionary :func:`iomodel.bench.harness.run_bench` returns. Its
keys, in order: ``schema``, ``command``, ``date``, ``device`` (what ran it), ``policy``
(declared before any result), ``matrix``, ``timing`` (method), ``backends`` (available or
not, with the reason), ``buckets`` (per shape: ``results[backend]`` with ``status``,
``reasons``, ``ran``/``ops``/``kernels``, ``time_s`` (median and spread, seconds),
``samples_s``, ``peak_allocated_bytes``, ``error`` (against float64), ``accuracy``,
``speedup``; per bucket: ``summary`` with counts, fallbacks and the decision),
``downstream``, ``end_to_end``, ``verdict``.

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

from iomodel.bench.backends import BASELINE, TITLES
from iomodel.bench.policy import Policy, Tolerance, accuracy_verdict, drift_limits, load_policy
from iomodel.errors import IomodelError


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
    recon = None
    if decision and decision["prefill_call_s"] > 0 and decision["decode_calls_s"] > 0 and base["decode_calls_s"] > 0:
        s_p = base["prefill_call_s"] / decision["prefill_call_s"]
        s_d = base["decode_calls_s"] / decision["decode_calls_s"]
        share = base["prefill_share"]
        amdahl = 1.0 / (share / s_p + (1 - share) / s_d)
        decision["speedup"] = base["request_s"] / decision["request_s"]
        recon = (f"request speedup {decision['speedup']:.3g}x = 1 / ({share:.3f} / {s_p:.3g} + {1 - share:.3f} / {s_d:.3g}) "
                 f"= {amdahl:.3g}x: the prefill kernel speedup {s_p:.3g}x weighs {share:.1%} of the baseline request's "
                 f"attention time, the decode speedup {s_d:.3g}x the other {1 - share:.1%}")
    for n, p in paths.items():
        p["speedup"] = base["request_s"] / p["request_s"]
    return {
        "workload": wl,
        "batch": {"prefill": pb["shapes"][0]["shape"]["batch"], "decode": db["shapes"][0]["shape"]["batch"]},
        "paths": paths,
        "decision": decision,
        "reconciliation": recon,
        "extrapolated": extrap_any,
        "method": ("layers x (prefill(prompt_len) + sum of decode(prompt_len + t) for t < output_len); prefill "
                   "interpolated in log-log over the prefill bucket's seqlen, decode linearly over the decode "
                   "bucket's seqlen_k; attention kernels only, at each bucket's batch size"),
    }


# ------------------------------------------------------------------------------------
# Policy check
# ------------------------------------------------------------------------------------


def check_receipt(receipt: dict[str, Any], policy: Policy | None = None) -> list[str]:
    """Every way the receipt breaks its declared policy; empty when it passes.

    Recomputes from raw numbers: medians from ``samples_s``; per-shape speedups as baseline
    median / fused median; accuracy verdicts from the error statistics with the bundled
    policy's tolerance; the per-bucket decision (best geometric-mean speedup among fused
    backends that ran every shape within the accuracy policy) against the policy's minimum
    speedup for the device and bucket; the downstream logits bounds.

    Args:
        receipt: a receipt dictionary (e.g. ``json.load`` of a ``bench-*.json``).
        policy: the policy to hold it to; default: the bundled policy of the receipt's
            declared version.

    Returns:
        One sentence per violation.
    """
    out: list[str] = []
    if receipt.get("schema") != "iomodel-bench-receipt/1":
        return [f"unknown receipt schema {receipt.get('schema')!r}: expected iomodel-bench-receipt/1"]
    declared = receipt.get("policy", {})
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
            bv = accuracy_verdict(base["error"], None, tol)
            if not bv["pass"]:
                out.append(f"{where} {BASELINE}: {'; '.join(bv['reasons'])}")
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
                per_backend.setdefault(key, []).append(bmed / _median(r))
        need = policy.min_speedup(device, name)
        cands = {k: math.exp(sum(math.log(x) for x in xs) / len(xs))
                 for k, xs in per_backend.items() if ok_all.get(k) and len(xs) == len(b["shapes"])}
        if not cands:
            if need > 0:
                out.append(f"bucket {name!r}: no fused backend ran every shape within the accuracy policy, "
                           f"so the required {need:g}x speedup is not shown")
            continue
        best = max(cands, key=cands.get)
        if cands[best] < need:
            out.append(f"bucket {name!r}: best fused backend {best} is {cands[best]:.3g}x the baseline "
                       f"(geometric mean), below the policy's {need:g}x for {device}")
        claimed = b.get("summary", {}).get("decision", {}).get("backend")
        if claimed != best:
            out.append(f"bucket {name!r}: receipt names {claimed} as the decision but the numbers make it {best}")
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
    return out


# ------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------


def load_receipt(path: str | Path) -> dict[str, Any]:
    """Read a receipt JSON file.

    Raises:
        IomodelError: missing file or invalid JSON.
    """
    p = Path(path)
    if not p.is_file():
        raise IomodelError(f"receipt {str(p)!r} does not exist: pass a bench-*.json written by iomodel bench")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise IomodelError(f"receipt {p} is not valid JSON ({exc}): re-run iomodel bench") from None


def json_safe(obj: Any) -> Any:
    """A copy of ``obj`` in which non-finite floats are the strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_receipt(receipt: dict[str, Any], json_path: str | Path, md_path: str | Path | None = None) -> tuple[Path, Path]:
    """Write the receipt as JSON and its Markdown rendering (default: same stem, ``.md``).

    Returns:
        ``(json_path, md_path)``.
    """
    jp = Path(json_path)
    mp = Path(md_path) if md_path else jp.with_suffix(".md")
    jp.parent.mkdir(parents=True, exist_ok=True)
    safe = json_safe(receipt)
    jp.write_text(json.dumps(safe, indent=1, allow_nan=False) + "\n")
    mp.write_text(render_markdown(safe))
    return jp, mp


# ------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------


def fmt_time(s: float | None) -> str:
    """Seconds as a short string with a unit (ns, µs, ms, s)."""
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_bytes(b: int | None) -> str:
    """Bytes as KiB/MiB/GiB."""
    if b is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b} B"


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


def render_markdown(receipt: dict[str, Any]) -> str:
    """The receipt as Markdown: header, declared policy, Signal → Decision → Proof, details, backend log.

    Returns:
        The document text.
    """
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
    w("Error = |O − O64| against a float64 reference. A fused backend passes when every element is within "
      "atol + rtol·|O64| and its max and p99 errors are ≤ k × the baseline's own (max, p99) error + ε.")
    w("")
    w("| dtype | atol | rtol | k | ε | rationale |")
    w("|---|---|---|---|---|---|")
    for dt, t in pol["tolerance"].items():
        w(f"| {dt} | {t['atol']:g} | {t['rtol']:g} | {t['k']:g} | {t['eps']:g} | {_cell(t.get('rationale', ''))} |")
    sp = pol["speedup"].get(dev["kind"], {})
    w("")
    w(f"Minimum speedup of the chosen fused backend on {dev['kind']}: default {sp.get('default')}×"
      + "".join(f"; `{k}` {v}×" for k, v in sp.get("buckets", {}).items()) + f". {sp.get('rationale', '')}")
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
        d = b["summary"]["decision"]
        per = b["summary"]["backends"]
        signal = f"{b['signal']} (traffic weight {b['weight']:.0%})"
        if d["backend"]:
            r0 = next(s["results"][d["backend"]] for s in b["shapes"])
            ran = _evidence(r0)
            errs = [float(s["results"][d["backend"]]["error"]["max_abs"]) for s in b["shapes"]]
            lims = [float(x) for s in b["shapes"]
                    if (x := s["results"][d["backend"]]["accuracy"]["limits"].get("max_abs")) is not None]
            mem = d.get("memory_ratio")
            decision = (f"use {TITLES.get(d['backend'], d['backend'])} (fused and tiled: no seqlen_q × seqlen_k "
                        "scores in memory)")
            proof = (f"{d['speedup']:.2f}× faster (geomean of {len(b['shapes'])} shape{'s' if len(b['shapes']) != 1 else ''}; policy ≥ {d['min_speedup']:g}×)"
                     + (f", {_pct(mem)} of baseline peak memory" if mem is not None else "")
                     + f"; max error {max(errs):.2g} (limit {min(lims):.2g}); ran `{ran}`")
        else:
            decision = "keep SDPA MATH (baseline)"
            why = [f"{n}: {v['unsupported']} refused, {v['error']} errors" + ("" if v["drift_pass"] in (None, True) else ", drift")
                   for n, v in per.items()]
            proof = "no fused backend ran every shape within policy (" + "; ".join(why) + ")"
        w(f"| {_cell(signal)} | {_cell(decision)} | {_cell(proof)} |")
    e2e = receipt.get("end_to_end")
    if e2e and e2e.get("decision"):
        wl, dd, bb = e2e["workload"], e2e["decision"], e2e["paths"][BASELINE]
        w(f"| request: {wl['prompt_len']}-token prompt, {wl['output_len']} output tokens, {wl['layers']} layers "
          f"(prefill batch {e2e['batch']['prefill']}, decode batch {e2e['batch']['decode']}) | prefill on "
          f"{dd['prefill_backend']}, decode on {dd['decode_backend']} | attention per request "
          f"{fmt_time(bb['request_s'])} → {fmt_time(dd['request_s'])} ({dd['speedup']:.2f}×); prefill share "
          f"{bb['prefill_share']:.0%} → {dd['prefill_share']:.0%} |")
    ws = [(b["weight"], b["summary"]["decision"]["speedup"]) for b in receipt["buckets"]]
    if all(s for _, s in ws):
        g = math.exp(sum(wt * math.log(s) for wt, s in ws) / sum(wt for wt, _ in ws))
        w(f"| all buckets, traffic-weighted | per-bucket decisions above | {g:.2f}× (weighted geometric mean) |")
    w("")
    if e2e:
        w("## Prefill and decode: from kernel time to request time")
        w("")
        w(f"Method: {e2e['method']}." + (" Some points are extrapolated beyond the measured sizes." if e2e.get("extrapolated") else ""))
        w("")
        w("| path | prefill call | Σ decode calls | TTFT (attention) | per output token (attention) | request (attention) | prefill share | speedup |")
        w("|---|---|---|---|---|---|---|---|")
        rows = list(e2e["paths"].items()) + ([("decision", e2e["decision"])] if e2e.get("decision") else [])
        for n, p in rows:
            label = n if n != "decision" else f"decision ({p['prefill_backend']} / {p['decode_backend']})"
            w(f"| {label} | {fmt_time(p['prefill_call_s'])} | {fmt_time(p['decode_calls_s'])} | {fmt_time(p['ttft_attention_s'])} | "
              f"{fmt_time(p['per_output_token_s'])} | {fmt_time(p['request_s'])} | {p['prefill_share']:.1%} | {p.get('speedup', 1):.2f}× |")
        if e2e.get("reconciliation"):
            w("")
            w(f"Reconciliation: {e2e['reconciliation']}.")
        w("")
    w("## Per shape")
    w("")
    w("| bucket | shape | mask | backend | status | ran | median | p10–p90 | per token | speedup | peak allocated | memory vs baseline | max err | p99 err | limit (max) | verdict |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b in receipt["buckets"]:
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
        reasons: dict[tuple[str, str], int] = {}
        ops: dict[str, set[str]] = {}
        for s in b["shapes"]:
            for n, r in s["results"].items():
                if r.get("status") == "ok":
                    ops.setdefault(n, set()).update(r.get("ops", []))
                    ops[n].update(r.get("kernels", [])[:3])
                for x in r.get("reasons", []) if r.get("status") != "ok" else []:
                    if x:
                        reasons[(n, x)] = reasons.get((n, x), 0) + 1
        for n, names in ops.items():
            w(f"- `{n}` ops/kernels seen: " + ", ".join(f"`{_cell(x)}`" for x in sorted(names)))
        for (n, x), c in reasons.items():
            w(f"- `{n}` refused ×{c}: {_cell(x)}")
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
