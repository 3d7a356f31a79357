"""One statement of what the bundled kernel runs, read by the kernel and by the worksheet.

For every reason the kernel refuses a layer (``iomodel.schedule.capabilities``), the
worksheet either refuses it with that same reason (exit 2, one line) or, given explicit
BLOCK_M and BLOCK_N, models them under the plain statement that no bundled kernel runs
the layer; and the kernel (CPU tensors, Triton's interpreter) refuses the same layer with
exactly the same sentence.
"""

from __future__ import annotations

from types import SimpleNamespace

import json

import pytest

torch = pytest.importorskip("torch")
fa = pytest.importorskip("kernels.flash_attention")

from iomodel.errors import IomodelError  # noqa: E402
from iomodel.report.worksheet import make_worksheet, resolve_layer  # noqa: E402
from iomodel.schedule import capabilities as cap  # noqa: E402
from iomodel.schedule.tiles import DECODE_MAX_SEQLEN_Q, head_dim_padded  # noqa: E402
from iomodel.spec import LayerSpec, torch_dtype  # noqa: E402
from kernels.heuristics import KernelConfig  # noqa: E402

from test_cli_errors import assert_one_line_error  # noqa: E402


def _qkv(*, H=2, N_q=20, N_k=20, d=32, dtype="fp16"):
    t = torch_dtype(dtype) if dtype != "fp64" else torch.float64
    q = torch.zeros(1, H, N_q, d).to(t)  # (B, H, N_q, d)
    k = torch.zeros(1, H, N_k, d).to(t)  # (B, H_kv, N_k, d)
    return q, k, torch.zeros_like(k)


#: One case per refusal reason of the kernel: (id, worksheet options, kernel call options).
LAYER_REFUSALS = [
    ("head_dim_257", dict(heads=16, kv_heads=16, head_dim=257, seqlen=2048, dtype="fp16"),
     dict(d=257, dtype="fp16"), {}),
    ("head_dim_512", dict(heads=8, kv_heads=2, head_dim=512, seqlen=4096, dtype="bf16"),
     dict(d=512, dtype="bf16"), {}),
    ("fp8_e4m3", dict(heads=8, kv_heads=8, head_dim=128, seqlen=1024, dtype="fp8_e4m3"),
     dict(d=128, dtype="fp8_e4m3"), {}),
    ("fp8_e5m2", dict(heads=8, kv_heads=8, head_dim=64, seqlen=1024, dtype="fp8_e5m2"),
     dict(d=64, dtype="fp8_e5m2"), {}),
    ("decode_seqlen_q", dict(heads=8, kv_heads=2, head_dim=64, dtype="bf16", phase="decode",
                             seqlen_q=DECODE_MAX_SEQLEN_Q + 1, seqlen_k=4096),
     dict(N_q=DECODE_MAX_SEQLEN_Q + 1, N_k=64, d=64, dtype="bf16"), {"path": "decode-split-kv"}),
]


def _cli_args(opts: dict) -> list[str]:
    args = ["worksheet"]
    for key, val in opts.items():
        args += [f"--{key.replace('_', '-')}", str(val)]
    return args


def _spec(opts: dict) -> LayerSpec:
    o = dict(opts)
    n = o.pop("seqlen", None)
    phase = o.pop("phase", "prefill")
    nq, nk = o.pop("seqlen_q", n), o.pop("seqlen_k", n)
    return LayerSpec(batch=1, seqlen_q=nq, seqlen_k=nk, phase=phase, causal=True, **o)


@pytest.mark.parametrize("case,opts,tensors,call", LAYER_REFUSALS, ids=[c[0] for c in LAYER_REFUSALS])
def test_worksheet_and_kernel_refuse_a_layer_with_one_reason(capsys, case, opts, tensors, call):
    reason = cap.kernel_refusal(_spec(opts))
    assert reason is not None
    # the worksheet: exit 2, one line carrying the kernel's reason
    line = assert_one_line_error(capsys, _cli_args(opts), reason)
    assert "bundled kernel's" not in line
    # the kernel: the same layer (CPU tensors, interpreter), the same sentence
    with pytest.raises(IomodelError) as info:
        fa.flash_attention(*_qkv(**tensors), causal=True, **call)
    assert str(info.value) == reason


@pytest.mark.parametrize("case,opts,tensors,call", LAYER_REFUSALS, ids=[c[0] for c in LAYER_REFUSALS])
def test_explicit_tiles_are_never_labelled_the_bundled_kernels(case, opts, tensors, call):
    reason = cap.kernel_refusal(_spec(opts))
    if cap.decode_refusal(_spec(opts)) is not None:
        # the decode model is the kernel's contract: refused whatever the tiles
        with pytest.raises(IomodelError) as info:
            make_worksheet(resolve_layer(**opts, block_m=64, block_n=32))
        assert str(info.value) == reason
        return
    lay = resolve_layer(**opts, block_m=64, block_n=32)
    assert (lay.tiling.block_m, lay.tiling.block_n) == (64, 32)
    assert f"no bundled kernel runs this layer: {reason.split(': use ')[0]}" in lay.tiling_source
    assert "bundled kernel's" not in lay.tiling_source
    ws = make_worksheet(lay)
    tiles_row = dict(ws.header_items())["tiles"]
    assert "no bundled kernel runs this layer" in tiles_row and "bundled kernel's" not in tiles_row
    assert ws.to_dict()["worksheet"]["tiling_source"] == lay.tiling_source
    if ws.l2_aware is not None:
        assert "no bundled kernel runs this layer" in ws.l2_aware.config_source


def test_the_cases_cover_every_refusal_reason():
    """A new check in LAYER_CHECKS must get a case above."""
    fired = {check for _, opts, _, _ in LAYER_REFUSALS for check in cap.LAYER_CHECKS if check(_spec(opts))}
    assert fired == set(cap.LAYER_CHECKS)


def test_the_kernel_refuses_fp64_with_the_dtype_reason():
    with pytest.raises(IomodelError) as info:
        fa.flash_attention(*_qkv(dtype="fp64"))
    assert str(info.value) == cap.dtype_refusal(SimpleNamespace(dtype="fp64"))
    assert str(info.value).startswith("dtype fp64 is not one the bundled kernel runs")


def test_a_layer_the_kernel_runs_has_no_refusal():
    assert cap.kernel_refusal(LayerSpec(1, 32, 8, 128, 8192, 8192, "bf16")) is None
    assert cap.kernel_refusal(LayerSpec(1, 32, 8, 256, 1, 8192, "fp32", phase="decode")) is None
    lay = resolve_layer(heads=16, kv_heads=16, head_dim=256, seqlen=2048, dtype="fp16")
    assert "the bundled kernel's first autotune candidate" in lay.tiling_source


#: TMA refusals: (dtype, HEAD_DIM, aligned); the worksheet (contiguous tensors) models the
#: pointer path there, and the kernel refuses a forced TMA path with the same sentence.
TMA_REFUSALS = [("fp32", 128, True), ("bf16", 96, True), ("fp16", 8, True), ("bf16", 128, False)]


@pytest.mark.parametrize("dtype,d,aligned", TMA_REFUSALS)
def test_tma_refusals_are_one_decision(dtype, d, aligned):
    reason = cap.tma_refusal(dtype, d, aligned)
    assert reason is not None and "prefill-tma" in reason
    # the one path decision: pointer loads on sm_90 for these inputs
    assert cap.prefill_path(dtype, d, cap.TMA_SM_MAJOR, aligned, causal=False) == "prefill"
    if aligned:  # the worksheet assumes contiguous tensors
        lay = resolve_layer(heads=4, kv_heads=4, head_dim=d, seqlen=1024, dtype=dtype, hardware="H200")
        assert "for the prefill path" in lay.tiling_source
    q, k, v = _qkv(d=d, dtype=dtype)
    if not aligned:  # a last-dim stride of 2: no tensor descriptor can describe it
        q, k, v = (torch.zeros(*t.shape[:-1], 2 * d, dtype=t.dtype)[..., ::2] for t in (q, k, v))
    with pytest.raises(IomodelError) as info:
        fa.flash_attention(q, k, v, path="prefill-tma")
    assert str(info.value) == reason


def test_tma_accepts_what_the_kernel_runs_on_it():
    for dtype in cap.TMA_DTYPES:
        for d in (16, 32, 64, 128, 256):
            assert d == head_dim_padded(d) and cap.tma_refusal(dtype, d) is None
            for causal in (False, True):
                assert cap.prefill_path(dtype, d, 9, causal=causal) == (
                    "prefill-gluon" if causal in cap.GLUON_AUTO.get(d, ()) else "prefill-tma")
            assert cap.prefill_path(dtype, d, 9, use_gluon=False, causal=False) == "prefill-tma"
            assert cap.prefill_path(dtype, d, 8, causal=False) == "prefill"
            assert cap.prefill_path(dtype, d, None, causal=False) == "prefill"
            assert cap.prefill_path(dtype, d, 9, use_tma=False, causal=False) == "prefill"


@pytest.mark.parametrize("name,value", [("block_m", 8), ("block_n", 24), ("block_n", 512), ("block_m", "64")])
def test_block_size_refusals_are_the_kernels(name, value):
    reason = cap.block_size_refusal(name, value)
    assert reason is not None
    cfg = KernelConfig(**{"block_m": 32, "block_n": 16, name: value}, num_warps=4, num_stages=1, path="prefill")
    with pytest.raises(IomodelError) as info:
        fa.flash_attention(*_qkv(), config=cfg)
    assert str(info.value) == reason
    assert cap.block_size_refusal(name, 64) is None


@pytest.mark.parametrize("extra", [["--block-m", "8", "--block-n", "64"], ["--block-m", "512", "--block-n", "64"],
                                   ["--phase", "decode", "--block-n", "8"]])
def test_tiles_the_launcher_refuses_are_never_the_bundled_kernels(capsys, extra):
    """Tiles outside the launcher's block sizes (powers of two in 16..256) are modelled under the
    statement that no bundled kernel runs them (a fresh probe of issue 9 found them labelled otherwise)."""
    from iomodel.cli import main

    try:
        main(["worksheet", "--format", "json", *extra])
    except SystemExit as e:
        assert e.code in (0, None)
    src = json.loads(capsys.readouterr().out)["worksheet"]["tiling_source"]
    assert "no bundled kernel runs these tiles (config.block_" in src and "bundled kernel's" not in src
