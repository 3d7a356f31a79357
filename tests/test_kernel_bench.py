"""The kernel benchmark's matrices, metrics, acceptance check and receipt (no timing here)."""

from __future__ import annotations

import json

import pytest

from iomodel.errors import IomodelError
from kernels import benchmark as bk


def test_prefill_matrix_is_the_issue_matrix():
    shapes = bk.prefill_matrix()
    assert len(shapes) == 6 * 2 * 2 * 2  # seqlens x HEAD_DIMs x dtypes x causal
    assert {s.batch * s.seqlen for s in shapes} == {16384}
    assert {s.seqlen for s in shapes} == {512, 1024, 2048, 4096, 8192, 16384}
    assert {s.heads for s in shapes} == {16} and {s.head_dim for s in shapes} == {64, 128}
    with pytest.raises(IomodelError, match="does not divide"):
        bk.prefill_matrix(seqlens=(3000,))


def test_flops_and_bytes_by_hand():
    s = bk.PrefillShape(batch=4, heads=16, seqlen=4096, head_dim=128, causal=True, dtype="bf16")
    assert s.flops == 4 * 4 * 16 * 4096 * 4096 * 128 * 0.5  # 2.199e12 FLOPs
    assert s.math_score_bytes == 4 * 16 * 4096 * 4096 * 4  # 4 GiB of fp32 scores
    d = bk.DecodeShape(batch=1, heads=32, kv_heads=8, seqlen_k=8192, head_dim=128, dtype="bf16")
    # Q + O: 2 * 1 * 32 * 1 * 128 * 2 = 16384 B; K + V: 2 * 1 * 8 * 8192 * 128 * 2 = 33554432 B
    assert d.bytes(2) == 16384 + 33554432
    assert len(bk.decode_matrix()) == 4 * 5


def _entry(seqlen, d, cudnn, flash, causal=False):
    return {"shape": {"batch": 16384 // seqlen, "heads": 16, "seqlen": seqlen, "head_dim": d, "causal": causal,
                      "dtype": "bf16"},
            "results": {"triton": {"status": "ran", "tflops": 500.0, "config": {"path": "prefill-tma", "block_m": 128,
                                                                                "block_n": 64, "num_warps": 8,
                                                                                "num_stages": 3}},
                        "sdpa-cudnn": {"status": "ran", "tflops": 500.0 / cudnn} if cudnn else
                        {"status": "refused: RuntimeError: No available kernel"},
                        "sdpa-flash": {"status": "ran", "tflops": 500.0 / flash},
                        "sdpa-math": {"status": "skipped: MATH would materialise 16 GiB"}},
            "ratios": {"sdpa-cudnn": cudnn, "sdpa-flash": flash, "sdpa-efficient": None, "sdpa-math": None}}


def _decode(kv, frac):
    return {"shape": {"batch": 1, "heads": 32, "kv_heads": 8, "seqlen_k": kv, "head_dim": 128, "dtype": "bf16",
                      "seqlen_q": 1},
            "copy": {"bandwidth_Bps": 4e12},
            "results": {"triton": {"status": "ran", "bandwidth_Bps": 4e12 * frac, "fraction_of_copy": frac,
                                   "config": {"num_splits": 32}}},
            "ratios": {}}


def test_acceptance_checks_only_the_target_shapes():
    receipt = {"prefill": [_entry(4096, 128, 0.95, 1.5), _entry(1024, 128, 0.5, 0.5), _entry(4096, 64, 0.5, 0.5)],
               "decode": [_decode(8192, 0.75), _decode(4096, 0.1)]}
    acc = bk.acceptance(receipt)
    assert acc["passed"] is True
    assert len(acc["prefill"]) == 1 and len(acc["decode"]) == 1  # N < 2k, d = 64 and KV < 8k are not targets
    receipt["prefill"].append(_entry(8192, 128, 0.85, 1.5, causal=True))
    assert bk.acceptance(receipt)["passed"] is False
    receipt["prefill"][-1] = _entry(8192, 128, None, 1.5)  # cuDNN refused: the target is not met
    assert bk.acceptance(receipt)["passed"] is False
    receipt["prefill"].pop()
    receipt["decode"].append(_decode(131072, 0.69))
    acc = bk.acceptance(receipt)
    assert acc["passed"] is False and [r["pass"] for r in acc["decode"]] == [True, False]
    assert bk.acceptance({"prefill": [], "decode": []})["passed"] is False  # nothing measured passes nothing


def test_receipt_json_and_markdown(tmp_path):
    receipt = {"command": "iomodel bench-kernel --receipt x", "date": "2026-11-29T00:00:00+00:00",
               "environment": {"device": "NVIDIA H200", "sm": "9.0", "num_sms": 132, "torch": "2.11", "triton": "3.6.0",
                               "cuda": "12.8", "cudnn": 91000, "driver": "570.00"},
               "timing": "do_bench median", "flop_convention": "4 B H N N d", "prefill": [_entry(4096, 128, 0.95, 1.5)],
               "decode": [_decode(8192, 0.75)]}
    receipt["acceptance"] = bk.acceptance(receipt)
    jp, mp = bk.write_receipt(receipt, tmp_path / "sub" / "bench.json")
    assert (jp.name, mp.name) == ("bench.json", "bench.md")
    assert json.loads(jp.read_text())["acceptance"]["passed"] is True
    md = mp.read_text()
    assert "NVIDIA H200" in md and "driver 570.00" in md
    assert "| 4 | 4096 | 128 | bf16 | False | 500.0 | 333.3 |" in md  # ours 500, FLASH 500 / 1.5
    assert "sdpa-math: skipped: MATH would materialise 16 GiB" in md
    assert "**PASSED**" in md
    assert [str(p) for p in bk.receipt_paths("out/run")] == ["out/run.json", "out/run.md"]


def test_parse_helpers():
    assert bk.parse_ints("512, 8k,16K", "--seqlens") == (512, 8192, 16384)
    assert bk.parse_names("fp16,bf16", ("fp16", "bf16"), "--dtypes") == ("fp16", "bf16")
    for bad in ("8q", "0", ""):
        with pytest.raises(IomodelError):
            bk.parse_ints(bad, "--seqlens")
    with pytest.raises(IomodelError, match="--dtypes"):
        bk.parse_names("fp8", ("fp16", "bf16"), "--dtypes")


def test_cli_without_a_gpu_exits_2_with_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this checks the no-GPU message")
    from iomodel.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench-kernel", "--receipt", "/tmp/never", "--seqlens", "2k", "--no-decode"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "CUDA GPU" in err and len(err.splitlines()) == 1


def test_cli_bad_input_exits_2(capsys):
    from iomodel.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench-kernel", "--receipt", "/tmp/never", "--seqlens", "3000"])
    assert info.value.code == 2
    assert "does not divide" in capsys.readouterr().err
