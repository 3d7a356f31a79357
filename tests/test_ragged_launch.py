"""One varlen launch through one L2 (issue 13): predict_ragged_launch against a hand count.

The layer: 2 sequences, each batch-1, H = H_kv = 1, HEAD_DIM 16, fp16, N_q = N_k = 16, one
16x16 tile: a program reads Q, K, V (512 B each) and writes O (512 B) and LSE (64 B, fp32):
2,112 B per sequence. L2: fully associative LRU of 2,500 B (l2_fraction 1, writes weigh as
reads), one program at a time (1 SM x 1 program), so each sequence is one wave.

Alone, a sequence fits: nothing is written back during its kernel (sum of batch-1 estimates:
0 B). In one launch the second sequence's 2,112 B push out the first's lines oldest first,
streamed items partly (Access.whole False): Q2 evicts 124 B of Q1 (2,112 + 512 - 2,500), K2 the
other 388 B of Q1 and 124 B of K1, V2 388 B of K1 and 124 B of V1, O2 388 B of V1 and 124 B of O1
(dirty: 124 B written), LSE2 64 B more of O1 (64 B written): 188 B written back, 836 B of O and
128 B of LSE still dirty at the end.
"""

from __future__ import annotations

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_ragged_launch, predict_tiled
from iomodel.errors import IomodelError
from iomodel.spec import LayerSpec, Tiling

SEQ = LayerSpec(batch=1, heads=1, kv_heads=1, head_dim=16, seqlen_q=16, seqlen_k=16, dtype="fp16")
TILES = Tiling(block_m=16, block_n=16)
L2 = L2Params(l2_bytes=2500, num_sms=1, programs_per_sm=1, l2_fraction=1.0, write_once=False, ways=None)


def test_one_launch_writes_back_what_the_next_sequence_pushes_out():
    k = predict_ragged_launch([SEQ, SEQ], TILES, L2)
    assert k.hbm_read == {"Q": 1024, "K": 1024, "V": 1024}
    assert k.hbm_write == {"O": 188}
    assert k.dirty_at_end == {"O": 836, "LSE": 128}
    assert k.waves == 2
    assert predict_tiled(SEQ, TILES, L2).hbm_write_bytes == 0  # the old estimate: 2 x 0 B


def test_one_sequence_is_the_dense_batch_1_kernel():
    k = predict_ragged_launch([SEQ], TILES, L2)
    one = predict_tiled(SEQ, TILES, L2)
    assert sum(k.hbm_read.values()) == one.hbm_read_bytes == 1536
    assert sum(k.hbm_write.values()) == one.hbm_write_bytes == 0


@pytest.mark.parametrize("seqs, what", [([], "at least one sequence"),
                                        ([SEQ.with_(backward=True)], "prefill forward only")])
def test_bad_input_is_one_line(seqs, what):
    with pytest.raises(IomodelError, match=what):
        predict_ragged_launch(seqs, TILES, L2)
