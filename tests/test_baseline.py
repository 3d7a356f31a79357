"""The eager baseline runs exactly the op chain the traffic model counts (api agreement).

Every aten op that moves data is recorded with ``TorchDispatchMode``; views (which move no
bytes) are dropped. The expected chains are written out from the agreement in
``kernels/baseline.py``'s docstring, step by step.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from iomodel.errors import IomodelError
from kernels.baseline import eager_attention, eager_attention_with_lse
from kernels.reference import reference_attention

VIEWS = {"unsqueeze", "expand", "view", "transpose", "_unsafe_view", "slice", "alias", "t", "select"}


class OpLog(TorchDispatchMode):
    """Records (op name, output dtype) of every aten op that is not a view."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, torch.dtype | None]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in VIEWS:
            self.ops.append((name, out.dtype if isinstance(out, torch.Tensor) else None))
        return out


def _qkv(H=4, H_kv=2, N_q=5, N_k=7, d=8, dtype=torch.float16):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, H, N_q, d, generator=g).to(dtype), torch.randn(1, H_kv, N_k, d, generator=g).to(dtype),
            torch.randn(1, H_kv, N_k, d, generator=g).to(dtype))


def _chain(fn, *args, **kwargs):
    with OpLog() as log:
        fn(*args, **kwargs)
    return log.ops


F16, F32, B8 = torch.float16, torch.float32, torch.bool


def test_chain_gqa_full_same_dtype():
    # 1. repeat_interleave K, V (one copy each); 3. S = Q K^T; 4. S * scale; 6. softmax; 7. P V
    assert _chain(eager_attention, *_qkv()) == [
        ("clone", F16), ("clone", F16), ("bmm", F16), ("mul", F16), ("_softmax", F16), ("bmm", F16)]


def test_chain_mha_causal_with_fp32_scores():
    # no GQA step; 2. three upcasts; 5. ones, tril, ~mask, masked_fill; 7. P V then O.to(fp16)
    assert _chain(eager_attention, *_qkv(H_kv=4), causal=True, score_dtype="fp32") == [
        ("_to_copy", F32), ("_to_copy", F32), ("_to_copy", F32), ("bmm", F32), ("mul", F32),
        ("ones", B8), ("tril", B8), ("bitwise_not", B8), ("masked_fill", F32), ("_softmax", F32),
        ("bmm", F32), ("_to_copy", F16)]


def test_chain_empty_rows_add_one_masked_fill():
    # bottom-right with N_q = 9 > N_k = 7: rows 0, 1 see no key -> one extra masked_fill on P
    ops = _chain(eager_attention, *_qkv(N_q=9), causal=True, causal_align="bottom-right")
    assert ops == [("clone", F16), ("clone", F16), ("bmm", F16), ("mul", F16), ("ones", B8), ("tril", B8),
                   ("bitwise_not", B8), ("masked_fill", F16), ("_softmax", F16), ("masked_fill", F16), ("bmm", F16)]
    # the same shape top-left has no empty row: no extra op
    ops_tl = _chain(eager_attention, *_qkv(N_q=9), causal=True, causal_align="top-left")
    assert [o for o, _ in ops_tl].count("masked_fill") == 1


def test_chain_with_lse_adds_logsumexp_and_a_cast_for_half_scores():
    ops = _chain(eager_attention_with_lse, *_qkv(H_kv=4))
    assert ops[-2:] == [("logsumexp", F16), ("_to_copy", F32)]
    ops32 = _chain(eager_attention_with_lse, *_qkv(H_kv=4), score_dtype=torch.float32)
    assert ops32[-1] == ("logsumexp", F32)


@pytest.mark.parametrize("causal,align", [(False, "top-left"), (True, "top-left"), (True, "bottom-right")])
def test_fp32_baseline_matches_reference(causal, align):
    q, k, v = _qkv(N_q=9, N_k=7, dtype=torch.float32)
    o, lse = eager_attention_with_lse(q, k, v, causal, align)
    ro, rl = reference_attention(q, k, v, causal, align)
    torch.testing.assert_close(o.double(), ro, rtol=0, atol=1e-5)
    torch.testing.assert_close(lse.double(), rl, rtol=0, atol=1e-5)


def test_empty_rows_are_zero_not_nan():
    q, k, v = _qkv(N_q=9, N_k=7, dtype=torch.float32)
    o, lse = eager_attention_with_lse(q, k, v, True, "bottom-right")
    assert (o[:, :, :2] == 0).all() and not torch.isnan(o).any()
    assert (lse[:, :, :2] == -math.inf).all()


def test_sm_scale_default_is_one_over_sqrt_d():
    q, k, v = _qkv(H_kv=4, d=16, dtype=torch.float32)
    torch.testing.assert_close(eager_attention(q, k, v), eager_attention(q, k, v, sm_scale=0.25))


def test_bad_score_dtype():
    with pytest.raises(IomodelError, match="score_dtype"):
        eager_attention(*_qkv(), score_dtype="int8")


def test_fp8_inputs_are_upcast_to_bf16_as_the_model_counts():
    """PyTorch has no matmul or softmax for float8 tensors, so the eager chain upcasts fp8 inputs to bf16
    (``iomodel.spec.dtypes.EAGER_SCORE_DTYPE``; a fresh user found the fp8 baseline modelled as a chain torch cannot
    run, 2026-12-06). The chain: GQA copies in fp8, three upcasts, the bf16 chain, O cast back to fp8; its values
    equal the fp64 reference on the fp8 values within bf16 and fp8 rounding."""
    E4 = torch.float8_e4m3fn
    q, k, v = _qkv(dtype=E4)
    assert _chain(eager_attention, q, k, v) == [
        ("clone", E4), ("clone", E4), ("_to_copy", torch.bfloat16), ("_to_copy", torch.bfloat16),
        ("_to_copy", torch.bfloat16), ("bmm", torch.bfloat16), ("mul", torch.bfloat16), ("_softmax", torch.bfloat16),
        ("bmm", torch.bfloat16), ("_to_copy", E4)]
    o = eager_attention(q, k, v, causal=True, causal_align="bottom-right")
    ro, _ = reference_attention(q.double(), k.double(), v.double(), True, "bottom-right")
    assert o.dtype == E4
    torch.testing.assert_close(o.double(), ro, rtol=0.07, atol=0.02)  # fp8 e4m3 keeps 3 mantissa bits: 2^-4 relative


def test_fp8_baseline_bytes_by_hand():
    """B 1, H 2 (MHA), N 128, HEAD_DIM 64, fp8, forward: 16,384 elements of Q, K, V and O, 32,768 scores.
    Reads: the three fp8 inputs (3 x 16,384), Q and K in bf16 (65,536), S for the scale and the softmax (2 x 65,536),
    P and V in bf16 (98,304), O in bf16 for the cast back (32,768): 376,832 bytes. Writes: the bf16 copies
    (3 x 32,768), S twice and P (3 x 65,536), O in bf16 (32,768) and in fp8 (16,384): 344,064 bytes."""
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import get_hardware
    from iomodel.traffic.model import predict

    base = predict(LayerSpec(1, 2, 2, 64, 128, 128, dtype="fp8_e4m3"), Tiling(block_m=64, block_n=64),
                   get_hardware("H200")).algorithms["baseline"]
    assert (base.hbm_read_bytes, base.hbm_write_bytes) == (376_832, 344_064)
    assert base.hbm_read_bytes == 3 * 16_384 + 65_536 + 2 * 65_536 + 98_304 + 32_768
    assert base.hbm_write_bytes == 3 * 32_768 + 3 * 65_536 + 32_768 + 16_384
    assert {r.dtype for r in base.rows if r.tensor in ("S", "P")} == {"bf16"}


def test_fp8_gqa_training_step_is_refused_by_model_and_kernel_and_mha_runs():
    """The eager GQA backward sums dK and dV over each group in the input dtype; torch has no float8 sum (a
    reviewer's finding, 2026-12-06), so the model and the chain refuse it in one line; an fp8 MHA step runs and its
    roofline peak is bf16's, where its matmuls run."""
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import get_hardware
    from iomodel.traffic.model import predict

    hw = get_hardware("H200")
    with pytest.raises(IomodelError, match=r"^the eager baseline cannot run a GQA training step in fp8_e4m3: .* "
                                           r"group of 4 query heads .*: model the training step in bf16 or fp16"):
        predict(LayerSpec(1, 8, 2, 64, 128, 128, dtype="fp8_e4m3", backward=True), Tiling(block_m=64, block_n=64), hw)
    q, k, v = (t.requires_grad_() for t in _qkv(dtype=torch.float8_e4m3fn))
    with pytest.raises(IomodelError, match="cannot run a GQA training step in fp8_e4m3"):
        eager_attention(q, k, v)
    mha = predict(LayerSpec(1, 2, 2, 64, 128, 128, dtype="fp8_e4m3", backward=True), Tiling(block_m=64, block_n=64), hw)
    assert mha.algorithms["baseline"].peak_flops == hw.flops_for("bf16") < hw.flops_for("fp8_e4m3")
    fwd = predict(LayerSpec(1, 2, 2, 64, 128, 128, dtype="fp8_e4m3"), Tiling(block_m=64, block_n=64), hw)
    assert fwd.algorithms["baseline"].peak_flops == hw.flops_for("bf16")
    assert fwd.algorithms["tiled"].peak_flops == hw.flops_for("fp8_e4m3")
