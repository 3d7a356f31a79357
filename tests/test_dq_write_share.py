"""DQ_WRITE_SHARE: the fitted L2 weight of the bytes the ``_bwd_dq`` kernel stores (iomodel/cache/params.py;
docs/l2-calibration.md, "The dQ kernel's write-back"). The training step gives it to ``_bwd_dq`` alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iomodel.cache.params import DQ_WRITE_SHARE, L2Params
from iomodel.cache.predict import kernel_l2, predict_training_step
from iomodel.errors import IomodelError
from iomodel.schedule.grid import dq_waves
from iomodel.spec.layer import LayerSpec, Tiling

H200 = dict(l2_bytes=60 * 2**20, num_sms=132)


def _spec():
    return LayerSpec(batch=1, heads=32, kv_heads=8, head_dim=128, seqlen_q=4096, seqlen_k=4096, dtype="bf16",
                     causal=True, backward=True)


def _tiling():
    return Tiling(block_m=128, block_n=128, bwd_block_m=64, bwd_block_n=128, dq_block_m=128, dq_block_n=64)


def test_share_is_the_fitted_value_and_validated():
    assert DQ_WRITE_SHARE == 0.25
    assert L2Params(**H200).write_share == 0.5  # the forward's: l2_fraction
    assert L2Params(**H200, stored_share=0.25).write_share == 0.25
    for bad in (0.0, -0.5, 1.5, float("nan"), "0.5", True):
        with pytest.raises(IomodelError, match="stored_share must be in"):
            L2Params(**H200, stored_share=bad)


def test_training_step_gives_the_share_to_dq_alone():
    spec, tiling, params = _spec(), _tiling(), L2Params(**H200, programs_per_sm=1)
    step = predict_training_step(spec, tiling, params)
    by = {k.name: k for k in step.kernels}
    dq_fitted = kernel_l2("_bwd_dq", spec, tiling, replace(params, stored_share=DQ_WRITE_SHARE), dq_waves)
    dq_forward_share = kernel_l2("_bwd_dq", spec, tiling, params, dq_waves)
    assert by["_bwd_dq"].hbm_write == dq_fitted.hbm_write
    assert by["_bwd_dq"].hbm_read == dq_fitted.hbm_read
    # more of dQ stays dirty at the end with the lighter share: fewer bytes written back
    assert sum(dq_fitted.hbm_write.values()) < sum(dq_forward_share.hbm_write.values())
    # the stored bytes are the same either way: B*H*N_q*d*2 of dQ
    assert sum(by["_bwd_dq"].requested_write.values()) == 32 * 4096 * 128 * 2
    assert any("DQ_WRITE_SHARE" in a for a in step.assumptions)


def test_an_explicit_share_overrides_the_fitted_one():
    spec, tiling = _spec(), _tiling()
    params = L2Params(**H200, programs_per_sm=1, stored_share=0.5)
    step = predict_training_step(spec, tiling, params)
    dq = [k for k in step.kernels if k.name == "_bwd_dq"][0]
    assert dq.hbm_write == kernel_l2("_bwd_dq", spec, tiling, params, dq_waves).hbm_write
    assert not any("DQ_WRITE_SHARE" in a for a in step.assumptions)


def test_l2_params_refuse_non_numbers_in_one_line():
    for field in ("l2_bytes", "num_sms", "programs_per_sm", "l2_fraction"):
        kw = dict(H200, **{field: "x"})
        with pytest.raises(IomodelError, match=f"{field} must be a number"):
            L2Params(**kw)
