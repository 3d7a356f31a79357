"""Interpreter-counted traffic: toy kernels with hand-computed bytes, and the bundled kernel
against the model's SRAM_fill rows (exact equality, issue 4 acceptance: >= 20 shapes)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton.jit decorates the toy kernels

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from iomodel.errors import IomodelError  # noqa: E402
from iomodel.spec.hardware import get_hardware  # noqa: E402
from iomodel.measure.interpret import OUTSIDE, TrafficCounter, require_interpreter  # noqa: E402
from iomodel.spec import LayerSpec  # noqa: E402

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

if os.environ.get("TRITON_INTERPRET") != "1":  # pragma: no cover - a GPU session without the interpreter
    pytest.skip("these tests run Triton's interpreter (TRITON_INTERPRET=1)", allow_module_level=True)


@triton.jit
def _scale_copy(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, x * 2, mask=offs < n)


@triton.jit
def _tile_rows(X, Y, n_rows, stride, BM: tl.constexpr, D: tl.constexpr):
    """Each program loads a (BM, D) tile twice (re-reads count twice) and stores it once."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    m = (rows < n_rows)[:, None]
    x = tl.load(X + rows[:, None] * stride + cols[None, :], mask=m)
    x2 = tl.load(X + rows[:, None] * stride + cols[None, :], mask=m)
    tl.store(Y + rows[:, None] * stride + cols[None, :], x + x2, mask=m)


@triton.jit
def _block_ptr_copy(X, Y, n, BLOCK: tl.constexpr):
    px = tl.make_block_ptr(X, (n,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    py = tl.make_block_ptr(Y, (n,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    tl.store(py, tl.load(px, boundary_check=(0,)), boundary_check=(0,))


@triton.jit
def _atomic_sum(X, OUT, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.atomic_add(OUT + tl.arange(0, BLOCK), x, mask=offs < n)


@triton.jit
def _two_args(A, B, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs, mask=offs < n)
    tl.store(B + offs, a, mask=offs < n)


def test_masked_copy_counts_mask_true_elements_times_width():
    x = torch.randn(100, dtype=torch.float16)
    y = torch.empty_like(x)
    with TrafficCounter(per_program=True) as c:
        _scale_copy[(4,)](x, y, 100, BLOCK=32)
    assert c.kernels() == ["_scale_copy"]
    assert c.launches[0].grid == (4, 1, 1)
    arg = c.by_argument()
    assert (arg["X"].read_bytes, arg["X"].write_bytes) == (200, 0)  # 100 fp16 elements, not 128
    assert (arg["Y"].read_bytes, arg["Y"].write_bytes) == (0, 200)
    assert c.launches[0].programs[(3, 0, 0)]["X"].read_elements == 4  # 100 - 3*32
    assert torch.equal(y, x * 2)


def test_rereads_count_twice_and_views_of_one_buffer_are_told_apart():
    buf = torch.randn(2, 10, 8, dtype=torch.float32)  # one allocation, two views
    x, y = buf[0], buf[1]
    with TrafficCounter() as c:
        _tile_rows[(3,)](x, y, 10, 8, BM=4, D=8)
    arg = c.by_argument()
    assert arg["X"].read_bytes == 2 * 10 * 8 * 4  # loaded twice
    assert arg["Y"].write_bytes == 10 * 8 * 4
    assert "Y" not in arg or arg["Y"].read_bytes == 0
    named = c.by_tensor({"x": x, "y": y})
    assert (named["x"].read_bytes, named["x"].write_bytes) == (640, 0)
    assert (named["y"].read_bytes, named["y"].write_bytes) == (0, 320)


def test_block_pointer_boundary_check_and_atomics():
    x = torch.arange(70, dtype=torch.float32)
    y = torch.zeros(70)
    out = torch.zeros(32)
    with TrafficCounter() as c:
        _block_ptr_copy[(3,)](x, y, 70, BLOCK=32)
        _atomic_sum[(3,)](x, out, 70, BLOCK=32)
    first = c.by_argument("_block_ptr_copy")
    assert first["X"].read_bytes == 280 and first["Y"].write_bytes == 280
    second = c.by_argument("_atomic_sum")
    assert second["OUT"].atomic_bytes == 70 * 4
    assert second["OUT"].read_bytes == second["OUT"].write_bytes == 70 * 4


def test_empty_mask_moves_nothing_and_counters_restore_the_interpreter():
    from triton.runtime import interpreter as interp

    before = interp.InterpreterBuilder.create_masked_load
    a, b = torch.ones(8), torch.zeros(8)
    with TrafficCounter() as c:
        _two_args[(1,)](a, b, 0, BLOCK=8)
    assert c.by_argument() == {}
    assert interp.InterpreterBuilder.create_masked_load is before
    with pytest.raises(IomodelError, match="nest"):
        with TrafficCounter():
            with TrafficCounter():
                pass


def test_require_interpreter_accepts_interpreted_kernels():
    require_interpreter(_scale_copy, _tile_rows)


def test_outside_key_is_reserved():
    assert OUTSIDE.startswith("<")


# ----------------------------------------------------------------------------------
# The bundled kernel: interpreter counts == model SRAM_fill rows, exactly.
# ----------------------------------------------------------------------------------

H200 = get_hardware("H200")

#: (B, H, H_kv, d, N_q, N_k, dtype, causal, align) — tiny shapes covering the contract:
#: ragged tails (N not a multiple of BLOCK_M = 32 / BLOCK_N = 16), causal both alignments
#: with N_q < N_k and N_q > N_k (rows that see no key), GQA and MQA, HEAD_DIM not a power of
#: two, decode with one and several splits, causal decode.
SHAPES = [
    (1, 2, 2, 16, 32, 32, "fp16", False, "top-left"),
    (2, 2, 2, 16, 33, 47, "fp16", False, "top-left"),
    (1, 2, 2, 32, 70, 70, "bf16", True, "top-left"),
    (1, 2, 2, 32, 70, 70, "bf16", True, "bottom-right"),
    (1, 2, 1, 16, 40, 100, "fp16", True, "top-left"),
    (1, 2, 1, 16, 40, 100, "fp16", True, "bottom-right"),
    (1, 2, 2, 16, 100, 40, "fp16", True, "top-left"),
    (1, 2, 2, 16, 100, 40, "fp16", True, "bottom-right"),
    (1, 4, 2, 16, 50, 50, "fp16", False, "top-left"),
    (2, 4, 1, 24, 21, 9, "fp32", True, "bottom-right"),
    (1, 8, 2, 16, 64, 17, "bf16", True, "top-left"),
    (1, 3, 3, 40, 18, 5, "fp16", False, "top-left"),
    (1, 4, 4, 16, 17, 200, "fp16", True, "bottom-right"),
    # decode (N_q <= 16): split-KV over INTERPRETER_NUM_SMS = 4 SMs
    (1, 2, 2, 16, 1, 100, "fp16", False, "top-left"),
    (2, 8, 2, 16, 1, 300, "fp16", False, "top-left"),
    (1, 8, 1, 32, 4, 257, "bf16", True, "bottom-right"),
    (1, 4, 2, 16, 3, 3, "fp16", True, "top-left"),
    (3, 4, 4, 16, 16, 65, "fp32", True, "bottom-right"),
    (1, 16, 2, 16, 2, 130, "fp16", False, "top-left"),
    (1, 2, 1, 16, 16, 10, "fp16", True, "top-left"),
    (1, 4, 1, 16, 5, 1, "fp16", False, "top-left"),
]


def _spec(B, H, H_kv, d, N_q, N_k, dtype, causal, align):
    return LayerSpec(B, H, H_kv, d, N_q, N_k, dtype, causal=causal, causal_align=align,
                     phase="decode" if N_q <= 16 else "prefill")


def _model_sram_fill(spec, tiling):
    from iomodel.traffic import predict

    rows = predict(spec, tiling, H200).algorithms["tiled"].rows
    out: dict[str, list[int]] = {}
    for r in rows:
        if r.level == "SRAM_fill":
            acc = out.setdefault(r.tensor, [0, 0])
            acc[0] += r.read_bytes
            acc[1] += r.write_bytes
    return {k: tuple(v) for k, v in out.items() if v != [0, 0]}


def _counted(counts):
    return {k: (v.read_bytes, v.write_bytes) for k, v in counts.items() if (v.read_bytes, v.write_bytes) != (0, 0)}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_interpreter_counts_equal_model_sram_fill(shape):
    from iomodel.measure.interpret import count_flash_attention

    spec = _spec(*shape)
    counts, cfg, counter = count_flash_attention(spec, seed=1)
    assert OUTSIDE not in counts  # every byte lies in a kernel argument
    assert _counted(counts) == _model_sram_fill(spec, cfg.tiling())
    if spec.phase == "decode" and cfg.num_splits > 1:  # the fused split-KV decode: one launch
        assert cfg.fused_combine and counter.kernels() == ["_attn_decode"]


def test_decode_shapes_cover_split_and_no_split():
    from kernels.heuristics import INTERPRETER_NUM_SMS, INTERPRETER_SMEM_PER_SM, decode_config

    splits = set()
    for s in SHAPES:
        if s[4] <= 16:
            B, H, H_kv, d, N_q, N_k = s[:6]
            cfg = decode_config(batch=B, heads=H, kv_heads=H_kv, seqlen_q=N_q, seqlen_k=N_k, head_dim=d,
                                num_sms=INTERPRETER_NUM_SMS, dtype=s[6], smem_per_sm=INTERPRETER_SMEM_PER_SM,
                                interpreter=True)
            splits.add(cfg.num_splits > 1)
    assert splits == {True, False}
    assert len(SHAPES) >= 20


def test_tma_path_moves_the_same_bytes_in_the_interpreter():
    from iomodel.measure.interpret import count_flash_attention

    spec = _spec(1, 2, 1, 32, 40, 72, "fp16", True, "bottom-right")
    counts, cfg, counter = count_flash_attention(spec, seed=2, path="prefill-tma")
    assert counter.kernels() == ["_attn_fwd_tma"]
    assert _counted(counts) == _model_sram_fill(spec, cfg.tiling())
