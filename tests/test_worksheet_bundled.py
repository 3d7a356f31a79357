"""The bundled worksheets under worksheets/ are current (regenerated in memory and compared)."""

from __future__ import annotations

import json

import pytest

from iomodel.spec import dtype_width, list_presets
from iomodel.report.worksheet import BUNDLED_CASES, REGENERATE_COMMAND, WORKSHEETS_DIR, bundled_worksheets


@pytest.fixture(scope="module")
def files():
    return bundled_worksheets()


def test_bundled_worksheets_are_current(files):
    stale = [str(p.relative_to(WORKSHEETS_DIR.parent)) for p, text in files.items()
             if not p.is_file() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"{len(stale)} bundled worksheets are stale (e.g. {stale[:3]}): run {REGENERATE_COMMAND}"


def test_bundled_set(files):
    presets = list_presets()
    assert {"gpt2-medium", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b"} <= set(presets)
    # md + json per case, the index, and the Fig. 2 layer (md + json on the A100 and the H200, its README)
    assert len(files) == 2 * len(presets) * len(BUNDLED_CASES) + 1 + 5
    cases = {c.name: c for c in BUNDLED_CASES}
    for name, want in (("prefill-2k", (2048, 2048, "top-left", "prefill")),
                       ("prefill-8k", (8192, 8192, "top-left", "prefill")),
                       ("prefill-32k", (32768, 32768, "top-left", "prefill")),
                       ("decode-8k", (1, 8192, "bottom-right", "decode")),
                       ("decode-128k", (1, 131072, "bottom-right", "decode"))):
        c = cases[name]
        assert (c.seqlen_q, c.seqlen_k, c.causal_align, c.phase) == want
    d = json.loads(files[WORKSHEETS_DIR / "llama-3-70b" / "decode-128k.json"])
    s = d["spec"]
    assert (s["batch"], s["seqlen_q"], s["seqlen_k"], s["causal"], s["causal_align"], s["phase"]) == \
        (1, 1, 131072, True, "bottom-right", "decode")
    assert d["hardware"]["name"] == "H200" and d["worksheet"]["units_check"]["ok"]
    assert "kernels/heuristics.py" in d["worksheet"]["tiling_source"]
    # Llama-3-70B decode: K and V (1, 8, 131072, 128) bf16 = 256 MiB each, Q read and O written once,
    # (1, 64, 1, 128) bf16 = 16 KiB each
    assert d["compulsory_bytes"] == 2 * 8 * 131072 * 128 * 2 + 2 * 64 * 128 * 2 == 536_903_680
    # gpt2-medium has 1,024 positions: its 2k worksheet says the length exceeds the context window
    md = files[WORKSHEETS_DIR / "gpt2-medium" / "prefill-2k.md"]
    assert "exceeds the model's context window (n_positions = 1,024)" in md


def test_worksheet_json_schema(files):
    """The README's schema: the keys every consumer may rely on."""
    for path, text in files.items():
        if path.suffix != ".json":
            continue
        d = json.loads(text)
        for key in ("spec", "tiling", "hardware", "assumptions", "compulsory_bytes", "flops", "algorithms",
                    "ratio_baseline_vs_tiled", "worksheet"):
            assert key in d, (path, key)
        assert {"baseline", "tiled"} <= set(d["algorithms"])
        for name, a in d["algorithms"].items():
            for key in ("hbm", "allocated_bytes", "flops", "intensity_flop_per_byte", "roofline_time_s", "bound",
                        "rows"):
                assert key in a, (path, name, key)
            assert a["hbm"]["bytes"] == a["hbm"]["read_bytes"] + a["hbm"]["write_bytes"]
            assert a["hbm"]["read_bytes"] == sum(r["read_bytes"] for r in a["rows"] if r["level"] == "HBM")
            for r in a["rows"]:
                assert set(r) >= {"tensor", "step", "level", "shape", "dtype", "width_bytes", "elements", "reads",
                                  "read_bytes", "write_bytes", "read_formula", "write_formula", "note"}
        assert "read_bytes" in d["algorithms"]["tiled"]["sram_fill"]
        assert "ratio_vs_tiled" in d["algorithms"]["baseline"]
        # every allocation is reported apart from the traffic: Q, K, V, O in the layer's dtype, LSE in fp32,
        # and for split-KV decode the fp32 partials O_PART (splits, B, H, N_q, d) and LSE_PART (splits, B, H, N_q)
        s, t = d["spec"], d["tiling"]
        width = dtype_width(s["dtype"])
        q = s["batch"] * s["heads"] * s["seqlen_q"]  # query rows of all heads
        kv = s["batch"] * s["kv_heads"] * s["seqlen_k"]
        want = (2 * q + 2 * kv) * s["head_dim"] * width + 4 * q
        if s["phase"] == "decode" and t["num_splits"] > 1:
            want += t["num_splits"] * q * (s["head_dim"] + 1) * 4
            if t["fused_combine"]:  # the fused decode's int32 counter per group of P query heads
                want += 4 * s["batch"] * s["heads"] // t["heads_per_program"]
        if s["pass"] == "fwd+bwd":  # dO, dQ, dK, dV in the layer's dtype and Delta = rowsum(dO * O) in fp32
            want += (2 * q + 2 * kv) * s["head_dim"] * width + 4 * q
        assert d["algorithms"]["tiled"]["allocated_bytes"] == want, path
