"""The tolerance and speedup policy, declared as data before any result, and its arithmetic.

The policy file (bundled: ``iomodel/bench/policies/policy-v<N>.toml``) declares per dtype

* ``atol``, ``rtol``: every element must satisfy ``|O - O64| <= atol + rtol * |O64|``
  (``torch.testing.assert_close`` form, against the float64 reference O64);
* ``k``, ``eps``: a fused backend's max and 99th-percentile absolute error against float64
  must not exceed ``k x`` the baseline's own (max, p99) error against float64 ``+ eps``;

a downstream bound on the logits of a small attention block, and per device and bucket the
minimum speedup of the chosen fused backend over the baseline. From version 2 it also declares
per dtype the gradient rule of training buckets (``[gradient.<dtype>]``: ``k``, ``eps``):
each of dQ, dK, dV must have max and p99 absolute errors against the float64 gradients of
at most ``k x`` the gradient baseline's own (max, p99) error ``+ eps`` (no element-wise
allclose rule: gradient magnitudes grow with how many rows see a key). Each number carries its
rationale in the file. The kernel-speed targets (``policies/kernel-speed-v<N>.toml``, the
bars of issue 3) are read by :func:`load_targets`. :func:`error_stats` and :func:`accuracy_verdict` are the arithmetic
the harness and the receipt check share.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from iomodel.errors import IomodelError

POLICIES_DIR = Path(__file__).resolve().parent / "policies"
#: The policy version new receipts are made under.
CURRENT_POLICY_VERSION = 1
#: The kernel-speed targets version new kernel-speed receipts are evaluated under.
CURRENT_TARGETS_VERSION = 1
#: How many pathological rows a result lists (the count is always complete).
MAX_LISTED_ROWS = 8


@dataclass(frozen=True)
class Tolerance:
    """Accuracy thresholds of one dtype (absolute errors in output units; k dimensionless).

    ``atol`` and ``rtol`` are None for a gradient tolerance, which has no element-wise rule.
    """

    dtype: str
    atol: float | None
    rtol: float | None
    k: float
    eps: float
    rationale: str = ""

    def limit(self, baseline_error: float) -> float:
        """The largest error allowed where the baseline's own error is ``baseline_error``:
        ``k x baseline_error + eps`` (output units)."""
        return self.k * baseline_error + self.eps


@dataclass(frozen=True)
class DownstreamPolicy:
    """The small attention block whose logits a fused backend must reproduce (see :mod:`iomodel.bench.downstream`)."""

    batch: int
    seqlen: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    causal: bool
    bound: dict[str, float]  # dtype -> max |logit - logit64|
    rationale: str = ""


@dataclass(frozen=True)
class Policy:
    """A parsed policy file."""

    version: int
    tolerance: dict[str, Tolerance]
    downstream: DownstreamPolicy
    speedup: dict[str, dict[str, Any]]  # device -> {"default": x, "buckets": {name: x}, "rationale": str}
    data: dict[str, Any] = field(default_factory=dict)  # the file as parsed, for the receipt
    path: str = ""
    sha256: str = ""
    gradient: dict[str, Tolerance] = field(default_factory=dict)  # dtype -> gradient rule (policy v2 on)

    def grad_tol(self, dtype: str) -> Tolerance:
        """The gradient tolerance of ``dtype`` (training buckets; ``atol``/``rtol`` None).

        Raises:
            IomodelError: the policy declares none for this dtype (policy v1 declares none at all).
        """
        if dtype not in self.gradient:
            raise IomodelError(f"policy v{self.version} declares no gradient tolerance for {dtype}, which a fwd+bwd "
                               f"bucket needs: use a policy that has [gradient.{dtype}] (policy v2: --policy "
                               f"{policy_path(2)})")
        return self.gradient[dtype]

    def tol(self, dtype: str) -> Tolerance:
        """The tolerance of ``dtype``.

        Raises:
            IomodelError: the policy declares none for this dtype.
        """
        if dtype not in self.tolerance:
            raise IomodelError(f"policy v{self.version} declares no tolerance for {dtype}: add [tolerance.{dtype}]")
        return self.tolerance[dtype]

    def min_speedup(self, device: str, bucket: str) -> float:
        """Minimum speedup (baseline time / fused time, dimensionless) for a bucket on a device.

        Raises:
            IomodelError: the policy has no ``[speedup.<device>]`` section.
        """
        if device not in self.speedup:
            raise IomodelError(f"policy v{self.version} declares no speedup for device {device!r}: add [speedup.{device}]")
        sec = self.speedup[device]
        return float(sec.get("buckets", {}).get(bucket, sec["default"]))

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "path": self.path, "sha256": self.sha256, **self.data}


def policy_path(version: int = CURRENT_POLICY_VERSION) -> Path:
    return POLICIES_DIR / f"policy-v{version}.toml"


def load_policy(source: int | str | Path = CURRENT_POLICY_VERSION) -> Policy:
    """Read a policy: a bundled version number or a TOML path.

    Raises:
        IomodelError: missing file, invalid TOML (with line and column), or a missing field.
    """
    path = policy_path(source) if isinstance(source, int) else Path(source)
    data, raw = _read_toml(path)
    try:
        tol = {
            dt: Tolerance(dt, float(t["atol"]), float(t["rtol"]), float(t["k"]), float(t["eps"]), str(t.get("rationale", "")))
            for dt, t in data["tolerance"].items()
        }
        ds = data["downstream"]
        down = DownstreamPolicy(
            batch=int(ds["batch"]), seqlen=int(ds["seqlen"]), heads=int(ds["heads"]), kv_heads=int(ds["kv_heads"]),
            head_dim=int(ds["head_dim"]), vocab=int(ds["vocab"]), causal=bool(ds["causal"]),
            bound={k: float(v) for k, v in ds["bound"].items()}, rationale=str(ds.get("rationale", "")),
        )
        grad = {dt: Tolerance(dt, None, None, float(t["k"]), float(t["eps"]), str(t.get("rationale", "")))
                for dt, t in data.get("gradient", {}).items()}
        speedup = {dev: dict(sec) for dev, sec in data["speedup"].items()}
        for dev, sec in speedup.items():
            float(sec["default"])
        version = int(data["version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IomodelError(f"{path}: policy field {exc} is missing or malformed: see policy-v1.toml for the schema") from None
    return Policy(version=version, tolerance=tol, downstream=down, speedup=speedup, data=data, path=str(path),
                  sha256=hashlib.sha256(raw).hexdigest(), gradient=grad)


@dataclass(frozen=True)
class SpeedTargets:
    """The kernel-speed acceptance bars (``policies/kernel-speed-v<N>.toml``; ratios dimensionless).

    Receipts store :meth:`to_dict` (the keys below, ``rationale`` aside) under ``acceptance.targets``.
    """

    version: int
    vs_cudnn: float  # prefill TFLOP/s >= vs_cudnn x SDPA CUDNN_ATTENTION ...
    vs_flash: float  # ... and >= vs_flash x SDPA FLASH_ATTENTION ...
    min_seqlen: int  # ... at seqlen >= min_seqlen ...
    head_dim: int  # ... and HEAD_DIM = head_dim
    decode_fraction: float  # decode bandwidth >= decode_fraction x the copy bandwidth ...
    decode_min_kv: int  # ... at seqlen_k >= decode_min_kv
    rationale: str = ""
    path: str = ""
    sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"vs_cudnn": self.vs_cudnn, "vs_flash": self.vs_flash, "min_seqlen": self.min_seqlen,
                "head_dim": self.head_dim, "decode_fraction": self.decode_fraction,
                "decode_min_kv": self.decode_min_kv}


def load_targets(source: int | str | Path = CURRENT_TARGETS_VERSION) -> SpeedTargets:
    """Read kernel-speed targets: a bundled version number or a TOML path.

    Raises:
        IomodelError: missing file, invalid TOML, or a missing or malformed field.
    """
    path = POLICIES_DIR / f"kernel-speed-v{source}.toml" if isinstance(source, int) else Path(source)
    data, raw = _read_toml(path)
    try:
        t = data["targets"]
        return SpeedTargets(version=int(data["version"]), vs_cudnn=float(t["vs_cudnn"]), vs_flash=float(t["vs_flash"]),
                            min_seqlen=int(t["min_seqlen"]), head_dim=int(t["head_dim"]),
                            decode_fraction=float(t["decode_fraction"]), decode_min_kv=int(t["decode_min_kv"]),
                            rationale=str(t.get("rationale", "")), path=str(path),
                            sha256=hashlib.sha256(raw).hexdigest())
    except (KeyError, TypeError, ValueError) as exc:
        raise IomodelError(f"{path}: target field {exc} is missing or malformed: see kernel-speed-v1.toml for "
                           "the schema") from None


def _read_toml(path: Path) -> tuple[dict[str, Any], bytes]:
    """The parsed TOML of a policy file and its bytes.

    Raises:
        IomodelError: missing file or invalid TOML (with line and column).
    """
    if not path.is_file():
        raise IomodelError(f"policy {str(path)!r} does not exist: pass a policy TOML file or a bundled version")
    raw = path.read_bytes()
    try:
        return tomllib.loads(raw.decode("utf-8")), raw
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise IomodelError(f"{path}: invalid TOML: {exc}: fix the file at that line") from None


# ------------------------------------------------------------------------------------
# Error arithmetic
# ------------------------------------------------------------------------------------


def error_stats(out, ref, tol: Tolerance, valid_rows=None, limit_max: float | None = None) -> dict[str, Any]:
    """Absolute error of ``out`` against the float64 reference, with pathological rows.

    Args:
        out: backend output ``(B, H, seqlen_q, HEAD_DIM)`` (any float dtype).
        ref: float64 reference of the same shape.
        tol: the dtype's tolerance (its ``atol``/``rtol`` give the per-element allclose limit; a
            gradient tolerance has none, and ``allclose_violations`` is then 0).
        valid_rows: boolean ``(B, seqlen_q)``; rows that are False (padding) are left out.
        limit_max: a row whose max error exceeds this is pathological (None: only
            allclose violations and non-finite values make a row pathological).

    Returns:
        ``{"max_abs", "p99_abs", "mean_abs", "max_rel", "allclose_violations", "elements",
        "nonfinite", "pathological_rows": {"count", "rows": [{"batch","head","row","max_abs"}]}}``;
        errors in output units; ``max_rel = max |O - O64| / max |O64|``. ``p99_abs`` is the
        99th percentile (nearest rank) of the per-element absolute errors.
    """
    import torch

    err = (out.to(torch.float64) - ref).abs()  # (B, H, N_q, d)
    nonfinite = ~torch.isfinite(out)
    err = torch.where(nonfinite, torch.full_like(err, math.inf), err)
    if tol.atol is None:  # a gradient tolerance: no element-wise rule
        viol = torch.zeros_like(err, dtype=torch.bool)
    else:
        viol = err > (tol.atol + tol.rtol * ref.abs())
    if valid_rows is not None:
        keep = valid_rows[:, None, :, None].expand_as(err)  # (B, H, N_q, d)
        err_sel, viol_sel, ref_sel = err[keep], viol & keep, ref[keep]
        nonfinite = nonfinite & keep
    else:
        err_sel, viol_sel, ref_sel = err.flatten(), viol, ref.flatten()
    n = err_sel.numel()
    rank = max(1, math.ceil(0.99 * n))
    p99 = float(err_sel.kthvalue(rank).values) if n else 0.0
    row_err = err.amax(dim=-1)  # (B, H, N_q)
    row_bad = viol_sel.any(dim=-1)
    if limit_max is not None:
        row_bad = row_bad | (row_err > limit_max)
    if valid_rows is not None:
        row_bad = row_bad & valid_rows[:, None, :]
    idx = row_bad.nonzero()
    listed = []
    if len(idx):
        errs = row_err[row_bad]
        order = torch.argsort(errs, descending=True)[:MAX_LISTED_ROWS]
        for o in order.tolist():
            b, h, m = (int(x) for x in idx[o])
            listed.append({"batch": b, "head": h, "row": m, "max_abs": _f(float(errs[o]))})
    ref_max = float(ref_sel.abs().max()) if n else 0.0
    max_abs = float(err_sel.max()) if n else 0.0
    return {
        "max_abs": _f(max_abs),
        "p99_abs": _f(p99),
        "mean_abs": _f(float(err_sel[torch.isfinite(err_sel)].mean()) if n else 0.0),
        "max_rel": _f(max_abs / ref_max) if ref_max > 0 else None,
        "allclose_violations": int(viol_sel.sum()),
        "elements": int(n),
        "nonfinite": int(nonfinite.sum()),
        "pathological_rows": {"count": int(len(idx)), "rows": listed},
    }


def _f(x: float) -> float | str:
    """JSON-safe float: infinities and NaN become strings."""
    return x if math.isfinite(x) else str(x)


def _num(x: Any) -> float:
    """A float from a JSON value (``"inf"``/``"nan"`` strings included)."""
    return float(x)


#: Relative tolerance between a stored number (a speedup, a TFLOP/s) and the same number
#: recomputed from the samples: float rounding only (a different summation order on another
#: machine moves the 15th digit).
RECOMPUTE_REL_TOL = 1e-9


def same_number(stored: Any, recomputed: float | None) -> bool:
    """Whether a stored number equals its recomputation up to :data:`RECOMPUTE_REL_TOL` (both None counts)."""
    if recomputed is None or stored is None:
        return stored is None and recomputed is None
    try:
        return math.isclose(float(stored), recomputed, rel_tol=RECOMPUTE_REL_TOL)
    except (TypeError, ValueError):
        return False


def drift_limits(baseline: dict[str, Any], tol: Tolerance) -> dict[str, float]:
    """The limits a fused backend's errors must stay under: ``k x baseline error + eps``.

    Args:
        baseline: the baseline's :func:`error_stats` (``max_abs``, ``p99_abs``).
        tol: the dtype's tolerance.

    Returns:
        ``{"max_abs": k*base_max + eps, "p99_abs": k*base_p99 + eps}`` (output units).
    """
    return {key: tol.limit(_num(baseline[key])) for key in ("max_abs", "p99_abs")}


def accuracy_verdict(stats: dict[str, Any], baseline: dict[str, Any] | None, tol: Tolerance) -> dict[str, Any]:
    """Whether one result's errors are within policy, and every reason when not.

    Args:
        stats: the backend's :func:`error_stats`.
        baseline: the baseline's :func:`error_stats` on the same inputs (None for the baseline itself,
            which is held to the allclose rule only).
        tol: the dtype's tolerance.

    Returns:
        ``{"pass": bool, "limits": {...}, "reasons": [str, ...]}``.
    """
    reasons = []
    limits: dict[str, float] = {"atol": tol.atol, "rtol": tol.rtol}
    if stats["nonfinite"]:
        reasons.append(f"{stats['nonfinite']} non-finite output elements")
    if stats["allclose_violations"]:
        reasons.append(
            f"{stats['allclose_violations']} of {stats['elements']} elements exceed atol {tol.atol:g} + rtol {tol.rtol:g} x |O64|"
        )
    if baseline is not None:
        lim = drift_limits(baseline, tol)
        limits.update({"max_abs": lim["max_abs"], "p99_abs": lim["p99_abs"]})
        for key, label in (("max_abs", "max"), ("p99_abs", "p99")):
            if _num(stats[key]) > lim[key]:
                reasons.append(
                    f"{label} error {_num(stats[key]):.3g} > {tol.k:g} x baseline {_num(baseline[key]):.3g} + {tol.eps:g} = {lim[key]:.3g}"
                )
    return {"pass": not reasons, "limits": limits, "reasons": reasons}


#: The gradients a training bucket checks, in the order ``torch.autograd.grad`` returns them.
GRADIENTS = ("dq", "dk", "dv")


def gradient_verdict(stats: dict[str, dict[str, Any]], baseline: dict[str, dict[str, Any]] | None,
                     tol: Tolerance) -> dict[str, Any]:
    """Whether one result's gradients are within the policy's gradient rule, per tensor.

    Args:
        stats: ``{"dq", "dk", "dv"}`` -> that gradient's :func:`error_stats` against float64.
        baseline: the gradient baseline's (the eager chain's) stats on the same inputs, or None
            for the gradient baseline itself (then only non-finite values fail).
        tol: the dtype's gradient tolerance (:meth:`Policy.grad_tol`).

    Returns:
        ``{"pass": bool, "limits": {tensor: {"max_abs", "p99_abs"}}, "reasons": ["dq: ...", ...]}``;
        each tensor's limits are :func:`drift_limits` of the baseline's errors (gradient units).
    """
    reasons: list[str] = []
    limits: dict[str, Any] = {}
    for g in GRADIENTS:
        v = accuracy_verdict(stats[g], None if baseline is None else baseline[g], tol)
        reasons += [f"{g}: {r}" for r in v["reasons"]]
        limits[g] = {k: v["limits"][k] for k in ("max_abs", "p99_abs") if k in v["limits"]}
    return {"pass": not reasons, "limits": limits, "reasons": reasons}
