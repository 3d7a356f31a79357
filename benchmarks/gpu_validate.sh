#!/usr/bin/env bash
# Issue 4 receipt: profile the bundled kernel (and the eager chain) on a sweep file under
# Nsight Compute on one H200, then reconcile on the spot.
#
#   OUT=/some/dir bash benchmarks/gpu_validate.sh [SWEEP.toml] [--impl tiled] [--budget-s 420]
#
# SWEEP defaults to sweeps/h200-holdout4.toml (the latest hold-out: acceptance evidence);
# sweeps/h200.toml is the calibration sweep. Its `name` gives the file names.
# Writes at most two files under $OUT (default ./out):
#   $OUT/ncu-<name>-<date>.json        the measurement (commit it as receipts/ncu-<name>-<date>.json)
#   $OUT/reconcile-<name>-<date>.md    the reconciliation report (needs sympy, typer and rich)
# and prints the within-tolerance table last. Everything after the measurement is a pure-CPU
# step: `iomodel reconcile receipts/ncu-h200-<date>.json --plot-dir plots` redoes it anywhere.
#
# The measurement itself needs only torch, triton, numpy and Nsight Compute (no typer, sympy
# or rich): it runs `python -m iomodel.measure.driver`, one ncu process per batch of 12
# shapes, saving after every batch; --budget-s (default 420 s) stops it in time for the whole
# script to stay under 8 minutes (unfinished shapes are recorded as not run).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
DATE="$(date -u +%Y-%m-%d)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

budget=420
sweep="sweeps/h200-holdout4.toml"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget-s) budget="$2"; shift 2 ;;
    *.toml) sweep="$1"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ -f "$sweep" ]] || { echo "error: sweep file $sweep not found: pass e.g. sweeps/h200-holdout.toml" >&2; exit 2; }
NAME="$(sed -n 's/^name *= *"\(.*\)".*/\1/p' "$sweep" | head -n 1)"
NAME="${NAME:-$(basename "$sweep" .toml)}"
RESULT="$OUT/ncu-$NAME-$DATE.json"
REPORT="$OUT/reconcile-$NAME-$DATE.md"

echo "== environment"
"$PY" - <<'PY'
import shutil, sys
try:
    import torch, triton
except ImportError as exc:
    sys.exit(f"error: {exc}: the measurement needs torch and triton")
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}, "
      f"CUDA {torch.version.cuda}, GPU {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
print("ncu:", shutil.which("ncu") or "not on PATH (trying /usr/local/cuda/bin/ncu)")
PY
if ! command -v ncu >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/ncu ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

echo "== profiling $sweep (budget ${budget} s) -> $RESULT"
"$PY" -m iomodel.measure.driver "$sweep" "$RESULT" --budget-s "$budget" ${args[@]+"${args[@]}"}

echo "== reconciling"
if "$PY" -c "import sympy, typer, rich" 2>/dev/null; then
  "$PY" -m iomodel.cli reconcile "$RESULT" --markdown "$REPORT" >/dev/null || true
  echo
  "$PY" - "$RESULT" <<'PY'
import sys
from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile
rec = reconcile(Measurement.load(sys.argv[1]))
for r, bad in rec.outside():
    print(f"outside: {r.id} ({', '.join(bad)}): {r.explanation()[:150]}")
print(f"L2 level compared with: {sorted({r.l2_metric for r in rec.rows if r.l2_metric})}")
print(f"{'impl':14s} {'level':6s} {'dir':6s} {'within':>8s} {'fraction':>9s} {'tol':>5s}")
for s in rec.summary():
    print(f"{s['impl']:14s} {s['level']:6s} {s['which']:6s} {s['within']:>3d}/{s['shapes']:<4d} {s['fraction']:>9.0%} "
          f"{s['tolerance']:>5.0%}")
PY
else
  echo "sympy/typer/rich missing here: reconcile later with  iomodel reconcile $RESULT"
  "$PY" - "$RESULT" <<'PY'
import sys
from iomodel.measure.driver import summary_lines
from iomodel.measure.records import Measurement
print("\n".join(summary_lines(Measurement.load(sys.argv[1]))))
PY
fi
