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

From version 3 (the default) one element-wise rule replaces rules 1 and 2, for outputs and
gradients alike (``[tolerance.<dtype>]`` and ``[gradient.<dtype>]``: ``k``, ``floor``): every
element of a fused backend's result must satisfy

    |O - O64| <= k x |O_ref - O64| + floor x u x max|O64|

where ``O_ref`` is the reference backend's result on the same inputs (SDPA MATH for outputs,
the eager chain for gradients), ``u = torch.finfo(dtype).eps / 2`` the unit roundoff of the
benchmark dtype and ``max|O64|`` the largest magnitude of the float64 result over the checked
elements (:func:`elementwise_floor`). The absolute term exists because the reference can be
exact at an element by chance (its error there is 0), and exactness must not be demanded of
another correct summation order: one rounding to the output dtype alone moves an element by up
to one ulp, at most ``2u |x|`` (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., Sec. 2.1, Theorem 2.2). Version 3 also requires every bucket's minimum speedup to be
> 0 or a stated reason (``[speedup.<device>.no_floor]``).
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
from iomodel.paths import toml_loads

POLICIES_DIR = Path(__file__).resolve().parent / "policies"
#: The policy version new receipts are made under.
CURRENT_POLICY_VERSION = 3
#: The first policy version with the element-wise rule and mandatory speed floors.
ELEMENTWISE_POLICY_VERSION = 3
#: The kernel-speed targets version new kernel-speed receipts are evaluated under.
CURRENT_TARGETS_VERSION = 1
#: How many pathological rows a result lists (the count is always complete).
MAX_LISTED_ROWS = 8


@dataclass(frozen=True)
class Tolerance:
    """Accuracy thresholds of one dtype (absolute errors in output units; k dimensionless).

    Policies v1/v2: ``atol``/``rtol`` (None for a gradient tolerance, which has no
    element-wise rule there) and the aggregate rule ``k x baseline (max, p99) + eps``.
    Policy v3: ``floor`` is set (``atol``, ``rtol``, ``eps`` are None) and the one
    element-wise rule of the module docstring applies: ``k x |O_ref - O64| + floor x u x max|O64|``.
    """

    dtype: str
    atol: float | None
    rtol: float | None
    k: float
    eps: float | None
    rationale: str = ""
    floor: float | None = None  # v3: the absolute term in units of u x max|O64| (dimensionless)

    @property
    def elementwise(self) -> bool:
        """Whether this is a v3 tolerance (the one element-wise rule relative to the reference backend)."""
        return self.floor is not None

    def limit(self, baseline_error: float) -> float:
        """The largest error allowed where the baseline's own error is ``baseline_error``:
        ``k x baseline_error + eps`` (output units; policies v1/v2 only).

        Raises:
            IomodelError: a v3 (element-wise) tolerance, whose limit is per element.
        """
        if self.eps is None:
            raise IomodelError(f"the {self.dtype} tolerance is element-wise (policy v3): its limit is per element, "
                               "k x |O_ref - O64| + floor x u x max|O64| (error_stats with reference=)")
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

        0.0 for a bucket that the policy exempts with a reason (:meth:`no_floor_reason`, v3 on);
        a v3 policy has no other floor of 0 (:func:`load_policy` refuses it).

        Raises:
            IomodelError: the policy has no ``[speedup.<device>]`` section.
        """
        if device not in self.speedup:
            raise IomodelError(f"policy v{self.version} declares no speedup for device {device!r}: add [speedup.{device}]")
        sec = self.speedup[device]
        if bucket in sec.get("no_floor", {}):
            return 0.0
        return float(sec.get("buckets", {}).get(bucket, sec["default"]))

    def no_floor_reason(self, device: str, bucket: str) -> str | None:
        """Why ``bucket`` has no minimum speedup on ``device`` (``[speedup.<device>.no_floor]``,
        policy v3 on), or None when it has a real floor (> 0)."""
        return self.speedup.get(device, {}).get("no_floor", {}).get(bucket)

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
        version = int(data["version"])
        if version >= ELEMENTWISE_POLICY_VERSION:
            tol = {dt: _elementwise_tol(dt, t) for dt, t in data["tolerance"].items()}
        else:
            tol = {
                dt: Tolerance(dt, float(t["atol"]), float(t["rtol"]), float(t["k"]), float(t["eps"]),
                              str(t.get("rationale", "")))
                for dt, t in data["tolerance"].items()
            }
        ds = data["downstream"]
        down = DownstreamPolicy(
            batch=int(ds["batch"]), seqlen=int(ds["seqlen"]), heads=int(ds["heads"]), kv_heads=int(ds["kv_heads"]),
            head_dim=int(ds["head_dim"]), vocab=int(ds["vocab"]), causal=bool(ds["causal"]),
            bound={k: float(v) for k, v in ds["bound"].items()}, rationale=str(ds.get("rationale", "")),
        )
        if version >= ELEMENTWISE_POLICY_VERSION:
            grad = {dt: _elementwise_tol(dt, t) for dt, t in data.get("gradient", {}).items()}
        else:
            grad = {dt: Tolerance(dt, None, None, float(t["k"]), float(t["eps"]), str(t.get("rationale", "")))
                    for dt, t in data.get("gradient", {}).items()}
        speedup = {dev: dict(sec) for dev, sec in data["speedup"].items()}
        for dev, sec in speedup.items():
            float(sec["default"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IomodelError(f"{path}: policy field {exc} is missing or malformed: see policy-v{CURRENT_POLICY_VERSION}"
                           ".toml for the schema") from None
    if version >= ELEMENTWISE_POLICY_VERSION:
        _check_floors(path, speedup)
    return Policy(version=version, tolerance=tol, downstream=down, speedup=speedup, data=data, path=str(path),
                  sha256=hashlib.sha256(raw).hexdigest(), gradient=grad)


def _elementwise_tol(dtype: str, t: dict[str, Any]) -> Tolerance:
    """A v3 tolerance from its TOML table (``k`` >= 1, ``floor`` > 0, both finite).

    Raises:
        KeyError, ValueError: a field missing or out of range (load_policy turns them into one line).
    """
    k, floor = float(t["k"]), float(t["floor"])
    if not (math.isfinite(k) and k >= 1):
        raise ValueError(f"k = {t['k']!r} (must be a finite number >= 1)")
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"floor = {t['floor']!r} (must be a finite number > 0: exactness must not be demanded)")
    return Tolerance(dtype, None, None, k, None, str(t.get("rationale", "")), floor=floor)


def _check_floors(path: Path, speedup: dict[str, dict[str, Any]]) -> None:
    """Policy v3: every minimum speedup is > 0, or the bucket is in ``no_floor`` with a reason, never both.

    Raises:
        IomodelError: a floor <= 0 (or not a number) without a reason, a reason that is empty,
            or a bucket with both a floor and a reason.
    """
    for dev, sec in speedup.items():
        reasons = sec.get("no_floor", {})
        if not isinstance(reasons, dict):
            raise IomodelError(f"{path}: [speedup.{dev}.no_floor] must be a table of bucket = \"reason\"")
        floors = {"default": sec["default"], **sec.get("buckets", {})}
        for name, x in floors.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not (math.isfinite(x) and x > 0):
                raise IomodelError(f"{path}: [speedup.{dev}] {name} = {x!r}: a minimum speedup must be a number > 0 "
                                   f"(a floor of 0 cannot fail); to claim none, drop it and give the reason in "
                                   f"[speedup.{dev}.no_floor]")
            if name in reasons:
                raise IomodelError(f"{path}: bucket {name!r} has both a floor ({x}) and a no_floor reason in "
                                   f"[speedup.{dev}]: keep one")
        for name, why in reasons.items():
            if not isinstance(why, str) or not why.strip():
                raise IomodelError(f"{path}: [speedup.{dev}.no_floor] {name!r} needs a non-empty reason string")


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
        return toml_loads(tomllib.loads, raw.decode("utf-8")), raw
    except ValueError as exc:  # TOMLDecodeError, UnicodeDecodeError, nesting too deep
        raise IomodelError(f"{path}: invalid TOML: {exc}: fix the file at that line") from None


# ------------------------------------------------------------------------------------
# Error arithmetic
# ------------------------------------------------------------------------------------


def unit_roundoff(dtype: str) -> float:
    """The unit roundoff ``u = torch.finfo(dtype).eps / 2`` of a benchmark dtype (``fp16`` -> 2^-11).

    Round-to-nearest moves a value x by at most ``u |x|`` (Higham 2002, Theorem 2.2).

    Raises:
        IomodelError: a dtype iomodel does not model (:func:`iomodel.spec.dtypes.torch_dtype`).
    """
    import torch

    from iomodel.spec.dtypes import torch_dtype

    return float(torch.finfo(torch_dtype(dtype)).eps) / 2


def elementwise_floor(tol: Tolerance, scale: float) -> float:
    """The absolute term of the v3 rule: ``floor x u x scale`` (output units).

    Args:
        tol: a v3 tolerance (``floor`` set); its ``dtype`` gives u (:func:`unit_roundoff`).
        scale: ``max |O64|`` over the checked elements (output units).

    Raises:
        IomodelError: ``tol`` is a v1/v2 tolerance (no ``floor``).
    """
    if tol.floor is None:
        raise IomodelError(f"the {tol.dtype} tolerance has no element-wise floor (policy v1/v2): use policy "
                           f"v{ELEMENTWISE_POLICY_VERSION} or later")
    return tol.floor * unit_roundoff(tol.dtype) * scale


def error_stats(out, ref, tol: Tolerance, valid_rows=None, limit_max: float | None = None,
                reference=None) -> dict[str, Any]:
    """Absolute error of ``out`` against the float64 reference, with pathological rows.

    Args:
        out: backend output ``(B, H, seqlen_q, HEAD_DIM)`` (any float dtype; or a gradient of
            any shape, with ``valid_rows`` None).
        ref: float64 reference of the same shape.
        tol: the dtype's tolerance. v1/v2: its ``atol``/``rtol`` give the per-element allclose
            limit (a gradient tolerance has none, and ``allclose_violations`` is then 0).
            v3 (``tol.elementwise``): each element's limit is
            ``k x |reference - ref| + floor x u x max|ref|`` (module docstring).
        valid_rows: boolean ``(B, seqlen_q)``; rows that are False (padding) are left out.
        limit_max: a row whose max error exceeds this is pathological (None: only
            allclose violations and non-finite values make a row pathological; v1/v2).
        reference: v3 only: the reference backend's result on the same inputs (same shape;
            SDPA MATH for outputs, the eager chain for gradients). None for the reference
            itself, whose own rule is vacuous: only non-finite values fail it.

    Returns:
        ``{"max_abs", "p99_abs", "mean_abs", "max_rel", "elements", "nonfinite",
        "pathological_rows": {"count", "rows": [{"batch","head","row","max_abs"}]}}`` plus,
        v1/v2, ``"allclose_violations"``; v3, ``"scale"`` (max |O64|), ``"abs_floor"``
        (floor x u x scale) and, when ``reference`` is given, ``"element_violations"`` (count of
        elements above their limit) and ``"worst_ratio"`` (max error / limit over the
        elements, dimensionless: <= 1 passes). Errors in output units;
        ``max_rel = max |O - O64| / max |O64|``; ``p99_abs`` is the 99th percentile (nearest
        rank) of the per-element absolute errors.
    """
    import torch

    err = (out.to(torch.float64) - ref).abs()  # (B, H, N_q, d)
    nonfinite = ~torch.isfinite(out)
    err = torch.where(nonfinite, torch.full_like(err, math.inf), err)
    extra: dict[str, Any] = {}
    if tol.elementwise:
        keep0 = (valid_rows[:, None, :, None].expand_as(err) if valid_rows is not None
                 else torch.ones_like(err, dtype=torch.bool))
        scale = float(ref.abs()[keep0].max()) if keep0.any() else 0.0
        tau = elementwise_floor(tol, scale)
        extra = {"scale": _f(scale), "abs_floor": _f(tau)}
        if reference is None:
            viol = torch.zeros_like(err, dtype=torch.bool)
        else:
            ref_err = (reference.to(torch.float64) - ref).abs()
            ref_err = torch.where(torch.isfinite(ref_err), ref_err, torch.zeros_like(ref_err))  # no credit for inf/nan
            bound = tol.k * ref_err + tau  # (B, H, N_q, d), output units
            viol = ~(err <= bound)
            ratio = err / bound
            worst = float(ratio[keep0].max()) if keep0.any() else 0.0
            extra.update(element_violations=int((viol & keep0).sum()), worst_ratio=_f(worst))
    elif tol.atol is None:  # a v2 gradient tolerance: no element-wise rule
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
    stats = {
        "max_abs": _f(max_abs),
        "p99_abs": _f(p99),
        "mean_abs": _f(float(err_sel[torch.isfinite(err_sel)].mean()) if n else 0.0),
        "max_rel": _f(max_abs / ref_max) if ref_max > 0 else None,
        "elements": int(n),
        "nonfinite": int(nonfinite.sum()),
        "pathological_rows": {"count": int(len(idx)), "rows": listed},
    }
    if not tol.elementwise:
        stats["allclose_violations"] = int(viol_sel.sum())
    return {**stats, **extra}


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

    Under a v3 tolerance (``tol.elementwise``) the verdict reads the element-wise counts that
    :func:`error_stats` recorded with ``reference=`` (a receipt keeps statistics, not tensors):
    a fused result fails on any ``element_violations`` (or when none were recorded) and on a
    stored ``abs_floor`` that is not ``floor x u x scale`` recomputed; the reference backend
    itself (``baseline`` None) fails only on non-finite values. ``limits`` is then
    ``{"k", "floor", "abs_floor"}``.

    Returns:
        ``{"pass": bool, "limits": {...}, "reasons": [str, ...]}``.
    """
    reasons = []
    if stats["nonfinite"]:
        reasons.append(f"{stats['nonfinite']} non-finite output elements")
    if tol.elementwise:
        tau = elementwise_floor(tol, _num(stats.get("scale", "nan")))
        limits_e: dict[str, Any] = {"k": tol.k, "floor": tol.floor, "abs_floor": tau}
        if not same_number(stats.get("abs_floor"), tau):
            reasons.append(f"stored absolute floor {stats.get('abs_floor')} is not floor {tol.floor:g} x u "
                           f"{unit_roundoff(tol.dtype):.3g} x max|O64| {stats.get('scale')} = {tau:.6g}")
        if baseline is not None:
            nv = stats.get("element_violations")
            if nv is None:
                reasons.append("no element-wise check against the reference backend was recorded")
            elif nv:
                reasons.append(f"{nv} of {stats['elements']} elements exceed {tol.k:g} x |O_ref - O64| + "
                               f"{tol.floor:g} x u x max|O64| = {tau:.3g} (worst element at "
                               f"{_num(stats.get('worst_ratio', 'nan')):.3g}x its limit)")
        return {"pass": not reasons, "limits": limits_e, "reasons": reasons}
    limits: dict[str, float] = {"atol": tol.atol, "rtol": tol.rtol}
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
        each tensor's limits are :func:`drift_limits` of the baseline's errors (gradient units);
        under a v3 tolerance each tensor's limits are ``{"abs_floor"}`` and the verdict is
        :func:`accuracy_verdict`'s element-wise one (the stats made with ``reference=`` the
        eager chain's gradient).
    """
    reasons: list[str] = []
    limits: dict[str, Any] = {}
    keys = ("abs_floor",) if tol.elementwise else ("max_abs", "p99_abs")
    for g in GRADIENTS:
        v = accuracy_verdict(stats[g], None if baseline is None else baseline[g], tol)
        reasons += [f"{g}: {r}" for r in v["reasons"]]
        limits[g] = {k: v["limits"][k] for k in keys if k in v["limits"]}
    return {"pass": not reasons, "limits": limits, "reasons": reasons}
