"""CPU sketch (issue 12): why the causal dQ kernel's grid order left L2 at 128k tokens and its reverse order did not.

Not the L2 model (whose waves are lock-step and nearly blind to the order, docs/l2-calibration.md, "The dQ kernel's
tile order"): a check of the reading given there. Programs start when one of W slots frees (W = 132, one dQ program
per SM at HEAD_DIM 128), each lasts its key blocks (causal: 2·(t + 1) blocks of 64 keys for query tile t of 128
rows, one time unit a block), and a program reads key block b of its KV head at start + b. For sampled re-reads of
a block, the distance is the distinct (KV head, block) K/V bytes all running programs touch since the block's
previous read (the fully associative LRU's stack distance); a re-read past the H200's measured read capacity
(31.1 MiB, docs/l2-calibration.md, "Read capacity") misses.

    python benchmarks/dq_start_gap_sketch.py --seqlen 65536 131072

Layer: the long-train probe's (B 1, 32 query heads on 8 KV heads, HEAD_DIM 128, bf16, causal top-left). Prints, per
order and length, the median and 90th percentile of the sampled distances (MiB) and the fraction past the capacity.
"""

from __future__ import annotations

import heapq

import numpy as np

from iomodel.paths import argument_error, one_line_parser

H, G, HEAD_DIM, WIDTH, BLOCK_M, BLOCK_N, W = 32, 4, 128, 2, 128, 64, 132
READ_CAPACITY_MIB = 31.1


def start_times(seqlen: int, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(KV head, key blocks, start time) per program in launch order: grid (T_r, H), tiles fastest; ``order``
    forward (tile t = program index) or reverse (T_r − 1 − index)."""
    t_r = seqlen // BLOCK_M
    tiles = np.arange(t_r) if order == "forward" else np.arange(t_r)[::-1]
    kv = np.repeat(np.arange(H) // G, t_r)
    blocks = np.tile((tiles + 1) * BLOCK_M // BLOCK_N, H)
    slots = [0] * W
    starts = np.empty(len(kv), dtype=np.int64)
    for p, nb in enumerate(blocks):
        starts[p] = heapq.heappop(slots)
        heapq.heappush(slots, int(starts[p] + nb))
    return kv, blocks, starts


def distances(seqlen: int, order: str, samples: int, seed: int = 0) -> np.ndarray:
    """Stack distances (MiB) of ``samples`` re-reads drawn from the middle half of the launch."""
    kv, nb, st = start_times(seqlen, order)
    rng = np.random.default_rng(seed)
    block_bytes = BLOCK_N * HEAD_DIM * WIDTH * 2  # K and V
    out = []
    for _ in range(100 * samples):  # draws whose block no earlier program read are skipped
        if len(out) == samples:
            break
        p = int(rng.integers(len(kv) // 4, 3 * len(kv) // 4))
        b = int(rng.integers(0, nb[p]))
        t1 = st[p] + b
        same = (kv == kv[p]) & (nb > b)
        earlier = st[same] + b
        earlier = earlier[earlier < t1]
        if not len(earlier):
            continue
        t0 = earlier.max()
        lo = np.clip(t0 - st + 1, 0, nb)
        hi = np.clip(t1 - st - 1, -1, nb - 1)
        run = np.where(hi >= lo)[0]
        touched = {(int(kv[q]), int(x)) for q in run for x in range(int(lo[q]), int(hi[q]) + 1)}
        out.append(len(touched) * block_bytes / 2**20)
    return np.array(out)


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, nargs="+", default=[65536, 131072], help="tokens (multiples of 128)")
    ap.add_argument("--samples", type=int, default=300)
    args = ap.parse_args()
    if any(n < BLOCK_M or n % BLOCK_M for n in args.seqlen) or args.samples < 1:
        argument_error(f"--seqlen must be positive multiples of {BLOCK_M} and --samples at least 1")
    for n in args.seqlen:
        for order in ("forward", "reverse"):
            d = distances(n, order, args.samples)
            if not len(d):
                print(f"{order:8s} {n:7d} tokens: no re-read drawn (every sampled block read once)")
                continue
            print(f"{order:8s} {n:7d} tokens: re-read distance median {np.median(d):5.1f} MiB, p90 "
                  f"{np.percentile(d, 90):5.1f} MiB, past {READ_CAPACITY_MIB} MiB: {(d > READ_CAPACITY_MIB).mean():.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
