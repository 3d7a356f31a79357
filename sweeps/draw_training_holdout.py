"""Draw a training hold-out sweep for the H200 from a seed, before anything in it is measured (issue 11, item 5).

The hold-outs before this one were drawn by throwaway scripts whose rules their headers state; this script keeps the
rules and the seed in the repository, so that anyone can draw the same sweep again and check that nothing was picked
after a measurement:

    python sweeps/draw_training_holdout.py --seed 2026120509 --name h200-train-holdout9 > sweeps/h200-train-holdout9.toml

Rules (each draw in this order, from ``random.Random(seed)``):

* a model from :data:`MODELS` (attention layers of published models: heads, KV heads, HEAD_DIM from their
  ``config.json``), uniformly;
* a mask: causal top-left (60 %), a chunked-prefill step (causal bottom-right, N_q of 512 or 1000 query rows after
  N_k - N_q cached keys, 15 %), or non-causal (25 %);
* a length from :data:`LENGTHS` (the key length of a chunked-prefill step), then a batch from 1, 2, 4 with
  B·N_k at most :data:`MAX_TOKENS`; 30 % of lengths are made ragged (minus 1-127 tokens);
* a dtype, bf16 or fp16.

A drawn step that repeats a step of a sweep already committed (the same id: batch, heads, KV heads, HEAD_DIM, dtype,
lengths, mask), or an earlier draw, takes a ragged length instead (its comment says so). Output: the TOML on stdout.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: (name, heads, KV heads, HEAD_DIM) of attention layers of published models (their config.json files)
MODELS = (
    ("Llama-2-7B", 32, 32, 128), ("Llama-2-13B", 40, 40, 128), ("Mistral-7B", 32, 8, 128),
    ("Llama-3-8B", 32, 8, 128), ("Llama-3-70B", 64, 8, 128), ("Qwen2.5-14B", 40, 8, 128),
    ("Qwen2-72B", 64, 8, 128), ("Yi-34B", 56, 8, 128), ("Phi-3-medium", 40, 10, 128),
    ("StarCoder2-15B", 48, 4, 128), ("InternLM2-20B", 48, 8, 128), ("Qwen2-1.5B", 12, 2, 128),
    ("Pythia-1.4B", 16, 16, 128), ("Qwen3-8B", 32, 8, 128),
    ("GPT-2-medium", 16, 16, 64), ("Llama-3.2-1B", 32, 8, 64), ("Qwen2.5-0.5B", 14, 2, 64),
    ("TinyLlama-1.1B", 32, 4, 64), ("Falcon-7B", 71, 1, 64),
    ("Gemma-7B", 16, 16, 256), ("Gemma-2-9B", 16, 8, 256), ("Phi-2", 32, 32, 80), ("Phi-3-mini", 32, 32, 96),
)
#: key lengths drawn (tokens)
LENGTHS = (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
#: the most tokens (B·N_k) of one step: the sweep's kernels stay within about 10 s of ncu replay each
MAX_TOKENS = 16384

HEADER = """# iomodel validate sweep: {title} for one H200 (issue 11, item 5).
# Shapes drawn {date} by sweeps/draw_training_holdout.py --seed {seed} and committed BEFORE any of them was measured,
# AFTER the last change to the kernels and model it tests (commit {base}). None of these steps repeats a step of a
# sweep committed before it (tests/test_reconcile_train_holdout.py checks it).
# Role: VALIDATION of the DRAM level of the bundled training step (forward, preprocess, dK/dV, dQ and the group-split
# reduction): the launcher picks the tiles, the group split S, the dK/dV loop order and the forward's launch, as a
# user's call does. Steps past 12k causal tokens with a GQA group are the class the worksheet marks "NOT A
# PREDICTION" for the dK/dV reads (docs/l2-calibration.md); they are kept as drawn and counted.
#   python3 -m iomodel.measure.driver sweeps/{name}.toml $OUT/ncu-{name}-<date>.json --budget-s 540
# {count} bundled-kernel training steps.
name = "{name}"
hardware = "H200"
description = "{description}"

[ncu]
metrics = [
  "gpu__time_duration.sum",
  "dram__bytes_read.sum",
  "dram__bytes_write.sum",
  "lts__t_bytes.sum",
  "lts__t_sectors_srcunit_tex_op_read.sum",
  "lts__t_sectors_srcunit_tex_op_write.sum",
  "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
  "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
  "lts__t_sectors_op_read.sum",
  "lts__t_sectors_op_write.sum",
  "lts__t_sectors_srcunit_ltcfabric.sum",
  "l1tex__m_xbar2l1tex_read_bytes.sum",
  "l1tex__m_l1tex2xbar_write_bytes.sum",
  "l1tex__m_xbar2l1tex_read_sectors.sum",
  "l1tex__m_l1tex2xbar_write_sectors.sum",
  "launch__grid_size",
  "launch__registers_per_thread",
  "launch__occupancy_limit_blocks",
  "launch__occupancy_limit_registers",
  "launch__occupancy_limit_shared_mem",
  "launch__occupancy_limit_warps",
]
batch_size = 8
cache_control = "all"
dram_pass = true
clock_control = "none"

[l2_model]
l2_fraction = 0.5
l2_source = "auto"

[defaults]
batch = 1
impls = ["tiled"]
pass = "fwd+bwd"
"""


def draw(seed: int, count: int, taken: set[str]) -> list[tuple[str, dict]]:
    """``count`` steps ``(comment, shape table)`` drawn by the module's rules from ``random.Random(seed)``, none of
    whose ids is in ``taken`` (ids as :class:`iomodel.measure.sweep.SweepShape` writes them)."""
    from iomodel.measure.sweep import parse_sweep

    rng = random.Random(seed)
    steps: list[tuple[str, dict]] = []
    while len(steps) < count:
        name, heads, kv_heads, d = rng.choice(MODELS)
        u = rng.random()
        mask = "top-left" if u < 0.60 else ("bottom-right" if u < 0.75 else "none")
        n_k = rng.choice(LENGTHS)
        batch = rng.choice([b for b in (1, 2, 4) if b * n_k <= MAX_TOKENS])
        if rng.random() < 0.30:
            n_k -= rng.randint(1, 127)
        dtype = rng.choice(("bf16", "fp16"))
        shape = dict(batch=batch, heads=heads, kv_heads=kv_heads, head_dim=d, dtype=dtype, causal=mask != "none",
                     causal_align="bottom-right" if mask == "bottom-right" else "top-left")
        if mask == "bottom-right":
            shape.update(seqlen_q=rng.choice((512, 1000)), seqlen_k=n_k)
        else:
            shape["seqlen"] = n_k
        comment = name
        for _ in range(128):
            sid = _id(parse_sweep, shape)
            if sid not in taken:
                break
            key = "seqlen_k" if "seqlen_k" in shape else "seqlen"
            comment = f"{name}; drawn as {shape[key]}, a step of an earlier sweep"
            shape[key] -= rng.randint(1, 127)
        taken.add(sid)
        steps.append((comment, shape))
    return steps


def _id(parse_sweep, shape: dict) -> str:
    """The step id the sweep parser gives ``shape`` (a bundled training step)."""
    sweep = parse_sweep({"name": "draw", "hardware": "H200", "defaults": {"impls": ["tiled"], "pass": "fwd+bwd"},
                         "shape": [shape]})
    return sweep.shapes[0].id


def committed_ids(sweeps: Path) -> set[str]:
    """The step ids of every ``h200-*.toml`` sweep in ``sweeps``."""
    from iomodel.measure.sweep import load_sweep

    return {s.id for p in sorted(sweeps.glob("h200-*.toml")) for s in load_sweep(p).shapes}


def toml_of(steps: list[tuple[str, dict]]) -> str:
    """The ``[[shape]]`` tables of ``steps``, one per step with its comment."""
    out = []
    for comment, shape in steps:
        out.append(f"\n[[shape]]  # {comment}")
        for k, v in shape.items():
            out.append(f"{k} = " + ("true" if v is True else "false" if v is False
                                      else f'"{v}"' if isinstance(v, str) else str(v)))
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--name", required=True, help="the sweep's name (h200-...)")
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--date", required=True, help="the day of the draw (YYYY-MM-DD)")
    ap.add_argument("--base", required=True, help="the commit of the last kernel or model change the sweep tests")
    ap.add_argument("--title", default="TRAINING HOLD-OUT")
    args = ap.parse_args()
    if args.count < 1:
        ap.error("--count must be at least 1")
    sweeps = Path(__file__).resolve().parent
    steps = draw(args.seed, args.count, committed_ids(sweeps) - committed_ids_of(sweeps, args.name))
    description = f"Training hold-out: {args.count} steps of real models' layers drawn by seed {args.seed} (validation)."
    sys.stdout.write(HEADER.format(title=args.title, date=args.date, seed=args.seed, base=args.base, name=args.name,
                                   count=args.count, description=description) + toml_of(steps))
    return 0


def committed_ids_of(sweeps: Path, name: str) -> set[str]:
    """The ids of sweep ``name`` itself when it is already written (so that drawing it again gives the same steps)."""
    from iomodel.measure.sweep import load_sweep

    path = sweeps / f"{name}.toml"
    return {s.id for s in load_sweep(path).shapes} if path.exists() else set()


if __name__ == "__main__":
    raise SystemExit(main())
