"""The benchmark harness: every backend on identical seeded tensors, timed fairly, checked against float64.

For each shape of a :class:`~iomodel.bench.matrix.ShapeMatrix` the harness

1. makes Q, K, V (and the key-padding mask of a padded batch) once, from a seed;
2. computes the float64 reference output (:func:`iomodel.bench.inputs.reference_output`);
3. probes every available backend once with warnings captured: a refusal is recorded as
   ``unsupported`` with PyTorch's own reasons (never replaced by another backend);
4. records which SDPA backend PyTorch picks when nothing is pinned (``auto``);
5. profiles each backend that ran once (ATen ops, CUDA kernels, peak allocated bytes);
6. times the backends interleaved (:func:`iomodel.bench.timing.time_interleaved`):
   ``warmup`` untimed calls each, then ``reps`` rounds in which every backend runs once,
   the order rotating each round.

A training bucket (``pass = "fwd+bwd"``) runs the same steps on one training step per call
(:func:`iomodel.bench.backends.training_step`: forward, then ``torch.autograd.grad(o, (q, k,
v), dO)`` with a seeded dO), on every device alike (only the clock differs), and adds:

* the eager chain in the input dtype (``eager``) as a second baseline, run first; its
  result is kept apart (``shape["eager"]``) so the forward policy's "fused vs MATH" rules
  never apply to it;
* the gradient errors of dQ, dK, dV against float64 (:func:`iomodel.bench.inputs.reference_gradients`)
  with the policy's gradient rule relative to the eager chain's own errors
  (``grad_error``, ``grad_accuracy``);
* per result the speedup against both baselines (``speedup`` over SDPA MATH as in every
  bucket, ``speedup_vs_eager``) and the step's TFLOP/s (``tflops``, FLOPs = 3.5 x
  4·B·H·HEAD_DIM·visible pairs, :meth:`iomodel.bench.matrix.Bucket.flops`). The peak memory
  is that of the whole step.

The result is the receipt dictionary (:mod:`iomodel.bench.receipt` renders and checks it).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import time
from typing import Any, Callable

from iomodel.bench.backends import (AUTO, BASELINE, EAGER, SDPA_BACKENDS, Backend, KernelRefusal, attention_call,
                                    available_backends, eager_backend, training_step)
from iomodel.bench.downstream import downstream_check
from iomodel.bench.environment import check_device, environment
from iomodel.bench.inputs import check_memory, make_inputs, reference_gradients, reference_output, shape_seed
from iomodel.bench.matrix import Bucket, ShapeMatrix
from iomodel.bench.policy import GRADIENTS, Policy, accuracy_verdict, drift_limits, error_stats, gradient_verdict
from iomodel.bench.telemetry import probe_call, profile_call
from iomodel.bench.timing import CPU_MIN_SAMPLE_S, CUDA_SPIN_CYCLES, spread, time_interleaved
from iomodel.errors import IomodelError

RECEIPT_SCHEMA = "iomodel-bench-receipt/1"

#: Progress hook: ``progress(description, done, total)`` with done/total counted in steps
#: (one step per shape, one for the downstream check).
Progress = Callable[[str, int, int], None]


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


class GradientCheck:
    """The float64 gradients of one training shape, and each backend's errors against them.

    The gradient baseline (the eager chain, :data:`~iomodel.bench.backends.EAGER`) must be
    checked first: every later result is held to ``k x`` its errors ``+ eps`` per tensor.
    """

    def __init__(self, inp: Any, tol: Any) -> None:
        import torch

        with torch.no_grad():
            self.ref = reference_gradients(inp)  # (dq, dk, dv) float64
        self.tol = tol
        self.base: dict[str, Any] | None = None
        self.base_grads: tuple[Any, ...] = ()

    def check(self, name: str, grads: tuple[Any, Any, Any]) -> dict[str, Any]:
        """``{"grad_error": {tensor: error_stats}, "grad_accuracy": verdict}`` of one backend's gradients."""
        refs = self.base_grads if (self.tol.elementwise and name != EAGER and self.base_grads) else (None,) * 3
        stats = {g: error_stats(x, r, self.tol, reference=rb) for g, x, r, rb in zip(GRADIENTS, grads, self.ref, refs)}
        if name == EAGER:
            self.base = stats
            self.base_grads = tuple(x.detach() for x in grads)  # the v3 rule's per-element reference
            return {"grad_error": stats, "grad_accuracy": gradient_verdict(stats, None, self.tol)}
        if self.base is None:
            return {"grad_error": stats, "grad_accuracy": {"pass": False, "limits": {}, "reasons": [
                "no gradient baseline (eager) result to compare with"]}}
        return {"grad_error": stats, "grad_accuracy": gradient_verdict(stats, self.base, self.tol)}


def training_backends(backends: list[Backend]) -> list[Backend]:
    """The backends of a training bucket: the eager chain first (the gradient baseline), then ``backends``."""
    return [eager_backend(), *backends]


def _both_baselines(results: dict[str, dict[str, Any]], eager: dict[str, Any], flops: int) -> None:
    """Add ``speedup_vs_eager`` (eager median / median) and ``tflops`` (FLOPs / median / 1e12) in place."""
    emed = eager["time_s"]["median"] if eager.get("status") == "ok" else None
    for res in (*results.values(), eager):
        if res.get("status") == "ok" and "time_s" in res:
            med = res["time_s"]["median"]
            res["tflops"] = flops / med / 1e12
            if res is not eager:
                res["speedup_vs_eager"] = emed / med if emed else None


def run_shape(bucket: Bucket, index: int, matrix: ShapeMatrix, device: str, policy: Policy,
              backends: list[Backend], warmup: int, reps: int,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Benchmark every available backend on one shape (see the module docstring for the steps).

    Args:
        backends: for a training bucket, :func:`training_backends` (the eager chain first).

    Returns:
        The shape's receipt entry: ``{"shape", "label", "seed", "mask", "useful_tokens", "auto",
        "results": {backend: {...}}}`` with times in seconds and memory in bytes; a training
        bucket's also has ``"flops"`` (of one step) and ``"eager"`` (the eager chain's result).
    """
    import torch

    shape = bucket.shapes[index]
    seed = shape_seed(matrix.seed, bucket.name, index)
    inp = make_inputs(bucket, shape, seed, device)
    with torch.no_grad():
        ref = reference_output(bucket, shape, inp, max_score_bytes=(1 << 30) if device == "cuda" else (64 << 20))
    tol = policy.tol(bucket.dtype)
    grads = GradientCheck(inp, policy.grad_tol(bucket.dtype)) if bucket.training else None
    results: dict[str, dict[str, Any]] = {}
    calls: dict[str, Callable[[], Any]] = {}
    base_stats = None
    base_out = None  # SDPA MATH's output: the per-element reference of the v3 rule
    for be in backends:
        if not be.available:
            continue
        if progress:
            progress(f"{bucket.name} {shape.label()} · probe {be.name}")
        res: dict[str, Any] = {"status": "ok"}
        try:
            fn = be.make_call(inp)
        except KernelRefusal as exc:
            results[be.name] = {"status": "unsupported", "reasons": [str(exc)], "warnings": []}
            continue
        if grads is not None:
            fn = training_step(fn, inp)
        pr = probe_call(fn, backend=be.name if be.name in SDPA_BACKENDS else None,
                        refusal_types=(*be.refusal_types, KernelRefusal))
        if pr.output is None:
            status = "unsupported" if pr.refused else "error"
            results[be.name] = {"status": status, "reasons": pr.reasons if pr.refused else [pr.error],
                                "warnings": pr.warnings}
            if device == "cuda":
                torch.cuda.empty_cache()
            continue
        res["warnings"] = pr.warnings
        baseline = be.role == "baseline"  # SDPA MATH, and the eager chain of a training bucket
        out = pr.output[0] if grads is not None else pr.output
        if tol.elementwise:  # v3: each element against k x MATH's own error there + the floor
            stats = error_stats(out, ref, tol, inp.valid_rows, reference=None if baseline else base_out)
        else:
            limit = drift_limits(base_stats, tol)["max_abs"] if (base_stats and not baseline) else None
            stats = error_stats(out, ref, tol, inp.valid_rows, limit_max=limit)
        if be.name == BASELINE:
            base_out = out.detach()
        if grads is not None:
            res.update(grads.check(be.name, pr.output[1:]))
        del pr, out
        if be.name == BASELINE:
            base_stats = stats
        res["error"] = stats
        if baseline or base_stats is not None:
            res["accuracy"] = accuracy_verdict(stats, None if baseline else base_stats, tol)
        else:  # the baseline refused or failed: a fused result cannot be held to "k x baseline"
            res["accuracy"] = {"pass": False, "limits": {}, "reasons": ["no baseline result to compare with"]}
        tel = profile_call(fn, device)
        res.update(tel.to_dict())
        if be.describe is not None:
            try:
                res["config"] = be.describe(inp)
            except Exception as exc:  # the configuration is a courtesy; the timing stands without it
                res["config"] = {"unavailable": f"{type(exc).__name__}: {str(exc)[:200]}"}
        if be.name in SDPA_BACKENDS and tel.ran != be.name:
            res["status"] = "error"
            res["reasons"] = [f"pinned {be.name} but the profiler saw {tel.ran or 'no SDPA op'} ({', '.join(tel.ops)})"]
        results[be.name] = res
        if res["status"] == "ok":
            calls[be.name] = fn
    # What PyTorch runs when nothing is pinned (profiled once; not timed).
    auto_fn = attention_call(AUTO, inp)
    ap = probe_call(auto_fn)
    if ap.output is None:
        auto = {"ran": None, "ops": [], "reasons": ap.reasons or [ap.error]}
    else:
        tel = profile_call(auto_fn, device)
        auto = {"ran": tel.ran, "op": tel.op, "ops": tel.ops, "kernels": tel.kernels}
    del ap, ref, base_out
    if progress:
        progress(f"{bucket.name} {shape.label()} · timing {len(calls)} backends × {reps}")
    timed = time_interleaved(calls, device, warmup, reps, matrix.l2_flush_bytes)
    tokens = shape.useful_tokens(bucket.phase)
    eager = results.pop(EAGER, None)  # the second baseline of a training bucket: kept apart, see the module docstring
    base = results.get(BASELINE, {})
    for name, t in timed.items():
        res = eager if name == EAGER else results[name]
        res["time_s"] = spread(t["samples_s"])
        res["samples_s"] = t["samples_s"]
        res["inner"] = t["inner"]
        med = res["time_s"]["median"]
        if bucket.phase == "prefill":
            res["per_request_s"] = med  # every request of the batch completes with the call
            res["per_token_s"] = med / tokens  # amortised over the useful (unpadded) query tokens
        else:
            res["per_token_s"] = med / shape.seqlen_q  # inter-token latency share of one layer
            if matrix.workload:
                res["per_request_s"] = med * matrix.workload.output_len / shape.seqlen_q
    if base.get("status") == "ok":
        bmed, bmem = base["time_s"]["median"], base.get("peak_allocated_bytes")
        for name, res in results.items():
            if res.get("status") == "ok" and name != BASELINE:
                res["speedup"] = bmed / res["time_s"]["median"]
                pm = res.get("peak_allocated_bytes")
                res["memory_ratio"] = (pm / bmem) if (pm is not None and bmem) else None
    if device == "cuda":
        torch.cuda.empty_cache()
    entry = {
        "shape": shape.to_dict(),
        "label": shape.label(),
        "seed": seed,
        "mask": inp.mask_kind,
        "useful_tokens": tokens,
        "useful_fraction": tokens / (shape.batch * shape.seqlen_q),
        "auto": auto,
        "results": results,
    }
    if grads is not None:
        flops = bucket.flops(shape)
        eager = eager or {"status": "error", "reasons": ["the eager chain was not run"]}
        _both_baselines(results, eager, flops)
        entry.update(flops=flops, eager=eager)
    return entry


def summarize_bucket(bucket: Bucket, shapes: list[dict[str, Any]], backends: list[Backend], device: str,
                     policy: Policy) -> dict[str, Any]:
    """Per-bucket summary: counts, geometric-mean speedup and memory ratio per backend, the decision.

    The decision is the fused backend with the highest geometric-mean speedup among those
    that ran every shape of the bucket within the accuracy policy; none when no fused
    backend did (the baseline is then kept). ``decision["min_speedup"]`` is the policy's
    floor; a bucket the policy exempts also gets ``decision["no_floor"]``, the policy's reason.
    """
    per: dict[str, Any] = {}
    for be in backends:
        if not be.available or be.role == "baseline":
            continue
        rs = [s["results"].get(be.name, {}) for s in shapes]
        counts = {st: sum(1 for r in rs if r.get("status") == st) for st in ("ok", "unsupported", "error")}
        ok = [r for r in rs if r.get("status") == "ok"]
        per[be.name] = {
            **counts,
            "drift_pass": all(r.get("accuracy", {}).get("pass") for r in ok) if ok else None,
            "speedup_geomean": _geomean([r.get("speedup") for r in ok]),
            "memory_ratio_geomean": _geomean([r.get("memory_ratio") for r in ok]),
            "max_abs_error": max((float(r["error"]["max_abs"]) for r in ok), default=None),
        }
        if bucket.training:  # a backend whose gradients break the policy is never the decision
            per[be.name]["drift_pass"] = per[be.name]["drift_pass"] and all(r["grad_accuracy"]["pass"] for r in ok)
            per[be.name]["speedup_vs_eager_geomean"] = _geomean([r.get("speedup_vs_eager") for r in ok])
    auto_hist: dict[str, int] = {}
    for s in shapes:
        k = s["auto"].get("ran") or "none"
        auto_hist[k] = auto_hist.get(k, 0) + 1
    refusals = {n: v["unsupported"] for n, v in per.items() if v["unsupported"]}
    cands = [(v["speedup_geomean"], n) for n, v in per.items()
             if v["ok"] == len(shapes) and v["drift_pass"] and v["speedup_geomean"] is not None]
    minimum = policy.min_speedup(device, bucket.name)
    if cands:
        sp, name = max(cands)
        decision = {"backend": name, "speedup": sp, "memory_ratio": per[name]["memory_ratio_geomean"],
                    "min_speedup": minimum}
    else:
        decision = {"backend": None, "speedup": None, "memory_ratio": None, "min_speedup": minimum}
    reason = policy.no_floor_reason(device, bucket.name)
    if reason is not None:  # the receipt repeats why the policy claims no speedup here (policy v3 on)
        decision["no_floor"] = reason
    if bucket.training:
        decision["speedup_vs_eager"] = per[decision["backend"]]["speedup_vs_eager_geomean"] if cands else None
    return {
        "backends": per,
        "auto_dispatch": auto_hist,
        "fallbacks": {"auto_to_math": auto_hist.get("sdpa-math", 0), "refused": refusals,
                      "refused_total": sum(refusals.values())},
        "decision": decision,
    }


def run_bench(matrix: ShapeMatrix, device: str, policy: Policy, *, reps: int | None = None,
              warmup: int | None = None, progress: Progress | None = None, command: str = "",
              downstream: bool = True) -> dict[str, Any]:
    """Run the whole matrix on ``device`` and return the receipt dictionary.

    Args:
        matrix: the shape matrix.
        device: ``"cpu"`` or ``"cuda"``.
        policy: the tolerance and speedup policy (declared in the receipt before the results).
        reps, warmup: override the matrix's timing settings.
        progress: ``progress(description, done, total)`` before each step (a progress bar hook).
        command: the command line, recorded in the receipt.
        downstream: run the downstream logits check.

    Returns:
        The receipt (JSON-serialisable); see :mod:`iomodel.bench.receipt` for its fields.

    Raises:
        IomodelError: bad device, a shape that cannot fit the device's memory (:func:`check_memory`), or the
            policy lacks a tolerance for a bucket's dtype or a speedup section for the device.
    """
    import torch

    from iomodel.bench.receipt import check_receipt, end_to_end

    check_device(device)
    check_memory(matrix.buckets, device)
    for b in matrix.buckets:
        policy.tol(b.dtype)
        if b.training:
            policy.grad_tol(b.dtype)
    policy.min_speedup(device, matrix.buckets[0].name)
    reps = matrix.reps if reps is None else reps
    warmup = matrix.warmup if warmup is None else warmup
    if reps < 3:
        raise IomodelError(f"reps must be at least 3 for a median and spread, got {reps}: raise --reps")
    started = time.perf_counter()
    backends = available_backends(device)
    training = any(b.training for b in matrix.buckets)
    listed = training_backends(backends) if training else backends
    receipt: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "command": command,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": environment(device),
        "policy": policy.to_dict(),
        "matrix": matrix.to_dict(),
        "timing": {
            "warmup": warmup, "reps": reps, "interleaved": True,
            "method": ("CUDA events around one call, after zeroing an L2 flush buffer of "
                       f"{matrix.l2_flush_bytes:,} B (cold L2) and a GPU spin of at least {CUDA_SPIN_CYCLES} cycles and "
                       "at least 2x the call's host enqueue time + 50 us (per backend) that hides host "
                       "launch time; device time of the call's kernels") if device == "cuda" else
                      ("time.perf_counter around synchronous CPU calls; a sample repeats the call until it "
                       f"lasts >= {CPU_MIN_SAMPLE_S * 1e3:g} ms"),
            "statistic": "median of per-call sample times; spread p10/p90, IQR, min/max",
            "memory": "peak bytes allocated during one call above what was allocated before it (not bytes moved)",
            **({"training_step": "a fwd+bwd bucket's call is one training step: o = the backend's forward, then "
                                 "torch.autograd.grad(o, (q, k, v), dO) with a seeded dO; time and peak memory are "
                                 "those of the whole step"} if training else {}),
        },
        "backends": {be.name: be.to_dict() for be in listed},
        "buckets": [],
    }
    torch.manual_seed(matrix.seed)
    total = sum(len(b.shapes) for b in matrix.buckets) + int(downstream)
    done = 0

    def step(desc: str) -> None:
        if progress:
            progress(desc, done, total)

    for bucket in matrix.buckets:
        shapes = []
        bes = training_backends(backends) if bucket.training else backends
        for i in range(len(bucket.shapes)):
            try:
                shapes.append(run_shape(bucket, i, matrix, device, policy, bes, warmup, reps, step))
            except Exception as exc:  # e.g. the float64 reference does not fit: record it in the receipt, go on
                shp = bucket.shapes[i]
                shapes.append({"shape": shp.to_dict(), "label": shp.label(), "seed": shape_seed(matrix.seed, bucket.name, i),
                               "mask": "", "useful_tokens": shp.useful_tokens(bucket.phase), "useful_fraction": None,
                               "auto": {"ran": None, "ops": []},
                               "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}",
                               "results": {}})
                if device == "cuda":
                    torch.cuda.empty_cache()
            done += 1
            step(f"{bucket.name} {bucket.shapes[i].label()} done")
        receipt["buckets"].append({**{k: v for k, v in bucket.to_dict().items() if k != "shapes"},
                                   "signal": bucket.signal(), "shapes": shapes,
                                   "summary": summarize_bucket(bucket, shapes, bes, device, policy)})
    receipt["downstream"] = None  # not run (downstream=False): said, so a receipt without the key is incomplete
    if downstream:
        step("downstream logits check")
        receipt["downstream"] = {
            "config": {k: v for k, v in policy.data["downstream"].items()},
            "results": {dt: downstream_check(policy.downstream, dt, backends, device, seed=matrix.seed)
                        for dt in sorted({b.dtype for b in matrix.buckets})},
        }
        done += 1
        step("downstream logits check done")
    receipt["end_to_end"] = end_to_end(receipt)
    receipt["elapsed_s"] = time.perf_counter() - started
    if hasattr(os, "getloadavg"):
        receipt["device"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    violations = check_receipt(receipt, policy)
    receipt["verdict"] = {"pass": not violations, "violations": violations,
                          "policy_version": policy.version}
    return receipt
