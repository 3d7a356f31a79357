"""Real public ``config.json`` files (attention fields only, copied from their published
files) read right or refused with one line: issue 10's "inputs from the wild"."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iomodel.errors import IomodelError
from iomodel.spec.config import load_config

GEMMA2_9B = {"model_type": "gemma2", "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
             "hidden_size": 3584, "num_hidden_layers": 42, "sliding_window": 4096,
             "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256,
             "max_position_embeddings": 8192, "torch_dtype": "float32"}

#: Phi-3-small's attention fields (block-sparse on every other layer).
PHI3_SMALL = {"model_type": "phi3small", "architectures": ["Phi3SmallForCausalLM"], "blocksparse_block_size": 64,
              "blocksparse_num_local_blocks": 16, "blocksparse_vert_stride": 8, "dense_attention_every_n_layers": 2,
              "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "num_hidden_layers": 32,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
#: Encoders: BERT (bidirectional) and T5 (encoder-decoder; its encoder's self-attention is bidirectional).
BERT_BASE = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "num_attention_heads": 12,
             "hidden_size": 768, "num_hidden_layers": 12, "max_position_embeddings": 512, "torch_dtype": "float32"}
T5_SMALL = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "is_encoder_decoder": True,
            "num_heads": 8, "d_model": 512, "d_kv": 64, "num_layers": 6, "torch_dtype": "float32"}

#: (model, fields, dtype flag, expected (H, H_kv, HEAD_DIM), window (tokens, kind, layers) or None, refusal or None)
REAL = [
    ("openai-community/gpt2", {"model_type": "gpt2", "n_head": 12, "n_embd": 768, "n_layer": 12, "n_positions": 1024},
     "fp32", (12, 12, 64), None, None),
    ("openai-community/gpt2 (no dtype, no flag)", {"model_type": "gpt2", "n_head": 12, "n_embd": 768, "n_layer": 12},
     None, None, None, "no 'torch_dtype' field (transformers' default is float32; a model's own code may choose another): add it or pass --dtype"),
    ("tiiuae/falcon-7b", {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "multi_query": True,
                          "new_decoder_architecture": False, "num_hidden_layers": 32, "parallel_attn": True,
                          "alibi": False, "torch_dtype": "bfloat16"},
     None, (71, 1, 64), None, None),
    ("tiiuae/falcon-40b", {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_kv_heads": 8,
                           "new_decoder_architecture": True, "num_hidden_layers": 60, "alibi": False,
                           "torch_dtype": "bfloat16"},
     None, (128, 8, 64), None, None),
    ("bigcode/starcoder", {"model_type": "gpt_bigcode", "n_head": 48, "n_embd": 6144, "n_layer": 40,
                           "n_positions": 8192, "multi_query": True, "torch_dtype": "float32"},
     None, (48, 1, 128), None, None),
    ("THUDM/chatglm3-6b", {"model_type": "chatglm", "num_attention_heads": 32, "hidden_size": 4096, "kv_channels": 128,
                           "multi_query_attention": True, "multi_query_group_num": 2, "num_layers": 28,
                           "seq_length": 8192, "torch_dtype": "float16"},
     None, (32, 2, 128), None, None),
    ("mosaicml/mpt-7b", {"model_type": "mpt", "n_heads": 32, "d_model": 4096, "n_layers": 32, "max_seq_len": 2048,
                         "attn_config": {"alibi": True, "attn_type": "multihead_attention"}, "torch_dtype": "bfloat16"},
     None, (32, 32, 128), None, None),
    ("EleutherAI/gpt-j-6b", {"model_type": "gptj", "n_head": 16, "n_embd": 4096, "n_layer": 28, "n_positions": 2048,
                             "rotary_dim": 64, "torch_dtype": "float32"},
     None, (16, 16, 256), None, None),
    ("meta-llama/Llama-2-70b-hf", {"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8,
                                   "hidden_size": 8192, "num_hidden_layers": 80, "max_position_embeddings": 4096,
                                   "torch_dtype": "float16"},
     None, (64, 8, 128), None, None),
    ("Qwen/Qwen3-8B", {"model_type": "qwen3", "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                       "hidden_size": 4096, "num_hidden_layers": 36, "sliding_window": None,
                       "use_sliding_window": False, "max_window_layers": 36, "torch_dtype": "bfloat16"},
     None, (32, 8, 128), None, None),
    ("Qwen/Qwen2.5-7B", {"model_type": "qwen2", "num_attention_heads": 28, "num_key_value_heads": 4,
                         "hidden_size": 3584, "num_hidden_layers": 28, "sliding_window": 131072,
                         "use_sliding_window": False, "max_window_layers": 28, "torch_dtype": "bfloat16"},
     None, (28, 4, 128), None, None),
    ("mistralai/Mistral-7B-v0.1", {"model_type": "mistral", "num_attention_heads": 32, "num_key_value_heads": 8,
                                   "hidden_size": 4096, "num_hidden_layers": 32, "sliding_window": 4096,
                                   "max_position_embeddings": 32768, "torch_dtype": "bfloat16"},
     None, (32, 8, 128), (4096, "sliding-window", "all 32 layers"), None),
    ("microsoft/Phi-3-mini-4k-instruct", {"model_type": "phi3", "num_attention_heads": 32, "num_key_value_heads": 32,
                                          "hidden_size": 3072, "num_hidden_layers": 32, "sliding_window": 2047,
                                          "max_position_embeddings": 4096, "torch_dtype": "bfloat16"},
     None, (32, 32, 96), (2047, "sliding-window", "all 32 layers"), None),
    ("google/gemma-2-9b", GEMMA2_9B,
     None, (16, 8, 256), (4096, "sliding-window", "21 of 42 layers (Gemma-2 alternation): layers 0, 2, …, 40 (every 2nd from 0)"), None),
    ("google/gemma-3-4b-it", {"model_type": "gemma3", "torch_dtype": "bfloat16",  # as published: no heads, no head_dim
                              "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                                              "intermediate_size": 10240, "num_hidden_layers": 34,
                                              "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                                              "sliding_window": 1024}},
     None, (8, 4, 256), (1024, "sliding-window", "29 of 34 layers (Gemma-3's default sliding_window_pattern 6): all but layers 5, 11, …, 29 (every 6th from 5)"), None),
    ("google/gemma-3-12b-it", {"model_type": "gemma3", "torch_dtype": "bfloat16",  # no head_dim: 3840/16 is not it
                               "text_config": {"model_type": "gemma3_text", "hidden_size": 3840,
                                               "num_attention_heads": 16, "num_key_value_heads": 8,
                                               "num_hidden_layers": 48, "sliding_window": 1024}},
     None, (16, 8, 256), (1024, "sliding-window", "40 of 48 layers (Gemma-3's default sliding_window_pattern 6): all but layers 5, 11, …, 47 (every 6th from 5)"), None),
    ("Qwen/Qwen3-4B (head_dim left out)", {"model_type": "qwen3", "num_attention_heads": 32, "num_key_value_heads": 8,
                                           "hidden_size": 2560, "num_hidden_layers": 36, "torch_dtype": "bfloat16"},
     None, (32, 8, 128), None, None),
    ("facebook/dinov2-base", {"architectures": ["Dinov2Model"], "model_type": "dinov2", "hidden_size": 768,
                              "num_attention_heads": 12, "num_hidden_layers": 12, "torch_dtype": "float32"},
     None, (12, 12, 64), None, None),
    ("meta-llama/Llama-4-Scout-17B-16E", {"model_type": "llama4", "torch_dtype": "bfloat16",
                                          "text_config": {"model_type": "llama4_text", "num_attention_heads": 40,
                                                          "num_key_value_heads": 8, "head_dim": 128,
                                                          "hidden_size": 5120, "num_hidden_layers": 48,
                                                          "attention_chunk_size": 8192,
                                                          "max_position_embeddings": 10485760}},
     None, (40, 8, 128), (8192, "chunked", "36 of 48 layers (Llama-4 interleaved RoPE/NoPE, no_rope_layer_interval 4): all but layers 3, 7, …, 47 (every 4th from 3)"), None),
    ("openai/gpt-oss-20b", {"model_type": "gpt_oss", "num_attention_heads": 64, "num_key_value_heads": 8,
                            "head_dim": 64, "hidden_size": 2880, "num_hidden_layers": 24, "sliding_window": 128,
                            "layer_types": ["sliding_attention", "full_attention"] * 12, "torch_dtype": "bfloat16"},
     None, (64, 8, 64), (128, "sliding-window", "12 of 24 layers (layer_types): layers 0, 2, …, 22 (every 2nd from 0)"), None),
    ("deepseek-ai/DeepSeek-V2-Lite", {"model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16,
                                      "num_key_value_heads": 16, "kv_lora_rank": 512, "q_lora_rank": None,
                                      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                                      "torch_dtype": "bfloat16"},
     None, None, None, "'kv_lora_rank' = 512: multi-head latent attention"),
    ("deepseek-ai/DeepSeek-V3", {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                                 "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
                                 "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                                 "torch_dtype": "bfloat16"},
     None, None, None, "'kv_lora_rank' = 512: multi-head latent attention"),
    ("microsoft/Phi-3-small-8k-instruct", PHI3_SMALL,
     None, None, None, "'blocksparse_block_size' = 64: block-sparse attention (Phi-3-small)"),
    ("google-bert/bert-base-uncased", BERT_BASE, None, (12, 12, 64), None, None),
    ("google-t5/t5-small", T5_SMALL, None, (8, 8, 64), None, None),
]


def _write(tmp_path, fields, name="config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(fields))
    return p


@pytest.mark.parametrize("model, fields, dtype, shape, window, refusal", REAL, ids=[r[0] for r in REAL])
def test_real_configs(tmp_path, model, fields, dtype, shape, window, refusal):
    path = _write(tmp_path, fields)
    if refusal is not None:
        with pytest.raises(IomodelError, match=None) as exc:
            load_config(path, dtype=dtype)
        assert refusal in str(exc.value) and "\n" not in str(exc.value)
        return
    cfg = load_config(path, dtype=dtype)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == shape
    assert (cfg.window, cfg.window_kind, cfg.window_layers) == (window or (None, "", ""))


def test_falcon_7b_decode_kv_cache_is_one_head(tmp_path):
    """Falcon-7B is multi-query: the KV cache of one layer at 8k is 2 * 8192 * 64 * 2 B, not 71 times that."""
    cfg = load_config(_write(tmp_path, REAL[2][1]))
    spec = cfg.layer(seqlen_q=1, seqlen_k=8192, phase="decode", causal_align="bottom-right")
    assert 2 * spec.kv_heads * spec.seqlen_k * spec.head_dim * spec.width == 2 * 8192 * 64 * 2


def test_window_refused_only_where_it_masks(tmp_path):
    cfg = load_config(_write(tmp_path, REAL[11][1]))  # Mistral-7B-v0.1, window 4096
    assert cfg.layer(seqlen_q=4096).seqlen_k == 4096  # the window covers every key: full attention exactly
    with pytest.raises(IomodelError, match=r"sliding-window attention \(4,096 tokens on all 32 layers\) masks keys "
                                           r"at 8,192 tokens"):
        cfg.layer(seqlen_q=8192)


def test_no_bytes_fields_are_noted(tmp_path):
    cfg = load_config(_write(tmp_path, GEMMA2_9B))
    assert cfg.notes == (
        "'attn_logit_softcapping' = 50.0: soft-capping of the attention scores (tanh; Gemma-2) changes arithmetic, "
        "not bytes.",
        "'query_pre_attn_scalar' = 256: a custom score scale (Gemma) changes sm_scale, not bytes.",
        "'torch_dtype' = 'float32': the checkpoint is stored in 32 bits, and the attention is modelled at 4 bytes an "
        "element; inference engines usually run such a checkpoint in 16 bits (vLLM's --dtype auto casts float32 to "
        "16 bits): pass --dtype bf16 or fp16 to model that.",
    )


def test_flags_apply_before_the_file_is_checked(tmp_path):
    path = _write(tmp_path, {"text_config": {"num_key_value_heads": 4, "head_dim": 64}, "torch_dtype": "bfloat16"})
    with pytest.raises(IomodelError, match=r"\(text_config\): no 'num_attention_heads' field .*: add it or pass --heads"):
        load_config(path)
    cfg = load_config(path, heads=16)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.dtype) == (16, 4, 64, "bf16")
    bad_dtype = _write(tmp_path, {"n_head": 12, "n_embd": 768, "torch_dtype": 5}, "bad.json")
    assert load_config(bad_dtype, dtype="fp32").dtype == "fp32"  # the flag wins; the file's field is not read


@pytest.mark.parametrize("value, shown", [(True, "the boolean true"), ("32", "the string '32'"),
                                          (None, "is null"), (1e400, "inf (not a finite number)"), (12.5, "12.5"),
                                          (0, "0"), (-8, "-8"), ([32], "a JSON array"), ({"a": 1}, "a JSON object")])
def test_value_types_where_a_number_belongs(tmp_path, value, shown):
    path = tmp_path / "config.json"
    text = json.dumps({"num_attention_heads": 0, "hidden_size": 4096, "torch_dtype": "float16"})
    path.write_text(text.replace('"num_attention_heads": 0', f'"num_attention_heads": {"1e400" if value == 1e400 else json.dumps(value)}'))
    with pytest.raises(IomodelError) as exc:
        load_config(path)
    msg = str(exc.value)
    assert "num_attention_heads" in msg and shown in msg and "\n" not in msg


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
                    | st.text(max_size=8), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                    max_leaves=6)
KEYS = st.sampled_from(["num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "multi_query",
                        "new_decoder_architecture", "head_dim", "hidden_size", "torch_dtype", "sliding_window",
                        "layer_types", "use_sliding_window", "sliding_window_pattern", "text_config",
                        "num_hidden_layers", "max_position_embeddings", "kv_lora_rank", "attention_chunk_size",
                        "multi_query_attention", "multi_query_group_num", "attn_config", "max_window_layers",
                        "use_bidirectional_attention", "global_head_dim", "num_global_key_value_heads",
                        "attention_k_eq_v", "encoder", "decoder", "quantization_config", "attention_heads",
                        "embed_dim"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=8), st.sampled_from([None, "bf16"]))
def test_any_json_is_read_or_refused_in_one_line(tmp_path_factory, fields, dtype):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(fields))
    try:
        cfg = load_config(path, dtype=dtype)
    except IomodelError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert cfg.heads > 0 and cfg.kv_heads > 0 and cfg.heads % cfg.kv_heads == 0 and cfg.head_dim > 0
    full = cfg.full_geometry()
    assert full is None or (cfg.heads % full[0] == 0 and full[1] > 0)
    assert cfg.window is None or (cfg.window > 0 and cfg.window_kind)
    assert not math.isnan(cfg.head_dim)


def _refusal(path) -> str:
    """The one-line refusal of the config at ``path``."""
    with pytest.raises(IomodelError) as exc:
        load_config(path)
    return str(exc.value)


def test_phi3_small_is_refused_naming_the_field(tmp_path):
    fields = {"blocksparse_block_size": 64, "dense_attention_every_n_layers": 2, "num_attention_heads": 32,
              "num_key_value_heads": 8, "hidden_size": 4096, "num_hidden_layers": 32, "torch_dtype": "bfloat16"}
    path = _write(tmp_path, fields)
    assert _refusal(path) == (
        f"{path}: 'blocksparse_block_size' = 64: block-sparse attention (Phi-3-small) reads only the key blocks of its "
        "sparsity pattern on most layers, not every key, which iomodel does not model (its K/V bytes would be wrong): "
        "pass the sizes with --heads/--kv-heads/--head-dim instead of a config to model an ordinary layer")
    del fields["blocksparse_block_size"]
    with pytest.raises(IomodelError, match="'dense_attention_every_n_layers' = 2: layers that alternate"):
        load_config(_write(tmp_path, fields))


@pytest.mark.parametrize("fields, source", [
    (BERT_BASE, "'model_type' = 'bert': an encoder, whose self-attention is bidirectional"),
    ({**BERT_BASE, "model_type": "custom"}, "'architectures' names 'BertForMaskedLM': a masked language model"),
    (T5_SMALL, "'is_encoder_decoder' = true: the encoder's self-attention is bidirectional"),
])
def test_encoders_are_bidirectional_by_default(tmp_path, fields, source):
    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, fields)
    cfg = load_config(path)
    assert cfg.causal_default is False and cfg.bidirectional_source.startswith(source)
    lay = resolve_layer(config=path, seqlen=512)
    assert lay.spec.causal is False
    assert [n for n in lay.notes if "causal" in n] == [
        f"{cfg.bidirectional_source}: modelled without a causal mask; pass --causal to model a causal layer."]
    assert "--no-causal" in lay.command()
    forced = resolve_layer(config=path, seqlen=512, causal=True)  # the flag still wins, and no note
    assert forced.spec.causal is True and not any("causal mask" in n for n in forced.notes)
    assert resolve_layer(config=path, seqlen=512, phase="decode").spec.causal is True  # a decoder's step


def test_decoders_stay_causal(tmp_path):
    from iomodel.spec.resolve import resolve_layer

    for fields in (REAL[0][1] | {"torch_dtype": "float32"}, {**BERT_BASE, "is_decoder": True}):
        cfg = load_config(_write(tmp_path, fields))
        assert cfg.causal_default is True and cfg.bidirectional_source == ""
    lay = resolve_layer(config=_write(tmp_path, REAL[0][1] | {"torch_dtype": "float32"}), seqlen=512)
    assert lay.spec.causal is True and not any("causal mask" in n for n in lay.notes)


def test_linear_attention_layers_say_what_to_change(tmp_path):
    """Only linear-attention layers: no attention traffic, refused; a kind iomodel does not know: refused, naming the
    kinds it knows; a hybrid (Qwen3-Next: 3 linear-attention layers to 1 full): the full layers modelled, said."""
    path = _write(tmp_path, {"layer_types": ["linear_attention"], "num_attention_heads": 32, "hidden_size": 4096,
                             "torch_dtype": "bfloat16"})
    assert _refusal(path) == (
        f"{path}: layer_types has no attention layer (linear_attention): there is no attention traffic to model; "
        "pass the sizes with --heads/--kv-heads/--head-dim instead of a config to model an attention layer")
    path = _write(tmp_path, {"layer_types": ["retention", "full_attention"], "num_attention_heads": 32,
                             "hidden_size": 4096, "torch_dtype": "bfloat16"})
    assert _refusal(path) == (
        f"{path}: layer_types ['retention'] are not layer kinds iomodel knows (attention: attention, chunked_attention, "
        "full_attention, sliding_attention; without attention: mamba, mamba2, linear_attention, conv, recurrent, "
        "ssm), so it cannot say what those layers move: pass the sizes with --heads/--kv-heads/--head-dim instead of "
        "a config to model a softmax-attention layer")
    path = _write(tmp_path, {"layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_hidden_layers": 4,
                             "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                             "hidden_size": 2048, "torch_dtype": "bfloat16"})
    cfg = load_config(path)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (16, 2, 256, None)
    assert ("layer_types: 1 of 4 layers are softmax attention (layer 3); the other 3 (linear_attention) move no "
            "attention traffic: this worksheet models one attention layer.") in cfg.notes



def test_window_note_names_the_layers_of_an_irregular_layer_types_list(tmp_path):
    """A layer_types list (newer HF Gemma-3 configs) whose full-attention layers are few: the note
    names those, not an elided list of the sliding ones (34 layers, full at 5, 11, 17, 23, 29)."""
    from iomodel.spec.config import load_config

    types = ["full_attention" if i in (5, 11, 17, 23, 29) else "sliding_attention" for i in range(34)]
    types[33] = "full_attention"  # irregular: no stride
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3_text", "num_attention_heads": 8, "num_key_value_heads": 4,
                                "head_dim": 256, "hidden_size": 2560, "num_hidden_layers": 34,
                                "sliding_window": 1024, "layer_types": types, "torch_dtype": "bfloat16"}))
    cfg = load_config(path)
    assert cfg.window_layers == "28 of 34 layers (layer_types): all but layers 5, 11, 17, 23, 29, 33"


def test_family_defaults_fill_what_the_published_file_leaves_out_and_say_so(tmp_path):
    """Gemma-3-4B's text_config gives neither heads nor KV heads nor head_dim: transformers' Gemma3TextConfig
    defaults (8, 4, 256) are what the model runs, not 2560/8 = 320 nor KV heads = heads; the note names them."""
    fields = next(r[1] for r in REAL if r[0] == "google/gemma-3-4b-it")
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (8, 4, 256)
    (note,) = [n for n in cfg.notes if "Gemma3TextConfig" in n]
    assert note.startswith("the file gives no 'num_attention_heads', 'num_key_value_heads', 'head_dim': "
                           "num_attention_heads = 8, num_key_value_heads = 4, head_dim = 256, the defaults of HF "
                           "transformers' Gemma3TextConfig (model_type 'gemma3_text')")
    # a flag replaces a default, and the note no longer names it
    cfg = load_config(_write(tmp_path, fields), heads=16, kv_heads=8)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (16, 8, 256)
    assert [n for n in cfg.notes if "Gemma3TextConfig" in n][0].startswith("the file gives no 'head_dim': head_dim = 256")
    # the layer's Q bytes follow: 16 heads · 1,024 rows · 256 · 2 B (within the 1,024-token window)
    spec = cfg.layer(seqlen_q=1024)
    assert spec.heads * spec.seqlen_q * spec.head_dim * spec.width == 16 * 1024 * 256 * 2


@pytest.mark.parametrize("fields, why", [
    ({"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12}, "'model_type' = 'vit': an encoder"),
    ({"model_type": "hubert", "hidden_size": 1024, "num_attention_heads": 16}, "'model_type' = 'hubert': an encoder"),
    ({"model_type": "siglip_vision_model", "hidden_size": 1152, "num_attention_heads": 16},
     "'model_type' = 'siglip_vision_model': an encoder"),
    ({"model_type": "gemma3_text", "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 256,
      "hidden_size": 768, "use_bidirectional_attention": True},
     "'use_bidirectional_attention' = true: the self-attention is bidirectional"),
])
def test_vision_audio_and_embedding_encoders_are_bidirectional(tmp_path, fields, why):
    cfg = load_config(_write(tmp_path, {**fields, "torch_dtype": "float32"}))
    assert not cfg.causal_default and cfg.bidirectional_source.startswith(why)


def test_a_bidirectional_sliding_window_reaches_both_ways(tmp_path):
    """EmbeddingGemma (use_bidirectional_attention, sliding_window 512): transformers' Gemma3TextConfig sets the
    window to 512 // 2 + 1 = 257 and masks |q − k| < 257 (modular_gemma3.py: "due to fa we set exclusive bounds";
    _bidirectional_window_overlay), so the band is 256 keys each side of the diagonal, not a causal 511 to the left
    (a reviewer found the first version's 511 each side)."""
    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, {"model_type": "gemma3_text", "num_attention_heads": 3, "num_key_value_heads": 1,
                             "head_dim": 256, "hidden_size": 768, "num_hidden_layers": 24, "sliding_window": 512,
                             "use_bidirectional_attention": True, "torch_dtype": "float32"})
    lay = resolve_layer(config=path, seqlen=2048)
    assert (lay.spec.causal, lay.spec.window_left, lay.spec.window_right) == (False, 256, 256)
    assert any("bidirectional: modelled as one of those layers (keys with |q − k| < 257: 256 tokens each side" in n
               for n in lay.notes)
    # an explicit --no-causal keeps the encoder's note (the Reproduce line gives it)
    again = resolve_layer(config=path, seqlen=2048, causal=False)
    assert again.notes == lay.notes and again.spec == lay.spec


def test_more_encoders_and_a_nested_gemma3_config_without_model_type(tmp_path):
    """siglip2, unispeech-sat, sew, the audio spectrogram transformer and VideoMAE are bidirectional; Gemma3Config
    builds Gemma3TextConfig(**text_config), so a text_config without its own model_type takes its defaults too; a
    ModernBERT whose every layer is global has no local window."""
    for mt in ("siglip2", "siglip2_vision_model", "unispeech-sat", "sew", "audio-spectrogram-transformer", "videomae"):
        cfg = load_config(_write(tmp_path, {"model_type": mt, "hidden_size": 768, "num_attention_heads": 12,
                                            "torch_dtype": "float32"}))
        assert not cfg.causal_default, mt
    cfg = load_config(_write(tmp_path, {"model_type": "gemma3", "torch_dtype": "bfloat16",
                                        "text_config": {"hidden_size": 2560, "num_hidden_layers": 34}}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (8, 4, 256)
    cfg = load_config(_write(tmp_path, {"model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12,
                                        "num_hidden_layers": 22, "global_attn_every_n_layers": 1,
                                        "local_attention": 128, "torch_dtype": "float32"}))
    assert cfg.window is None


def test_modernbert_global_layers_are_every_nth_from_layer_0(tmp_path):
    """ModernBERT: layer i is global when i % global_attn_every_n_layers == 0, so 22 layers every 3 have 8
    global layers (0, 3, ..., 21) and 14 local ones."""
    cfg = load_config(_write(tmp_path, {"model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12,
                                        "num_hidden_layers": 22, "global_attn_every_n_layers": 3,
                                        "local_attention": 128, "torch_dtype": "float32"}))
    assert cfg.window_layers == "14 of 22 layers (global_attn_every_n_layers 3)"


def test_window_flag_states_the_layer_of_a_chunked_or_local_config(tmp_path):
    """--window models the layer asked for where the config's chunked or local attention would be refused at that
    length (Llama-4's full-attention layers: --window none), with a note; the ragged refusal's advice names the
    sequences, not --seqlen."""
    from iomodel.spec.resolve import resolve_layer

    fields = next(r[1] for r in REAL if r[0] == "meta-llama/Llama-4-Scout-17B-16E")
    path = _write(tmp_path, fields)
    lay = resolve_layer(config=path, phase="decode", seqlen=131072, window="none")
    assert lay.spec.window_left is None and lay.spec.seqlen_k == 131072
    assert any("chunked attention of 8,192 tokens on 36 of 48 layers" in n and "--window none models the layer"
               in n for n in lay.notes)
    with pytest.raises(IomodelError) as exc:
        resolve_layer(config=path, seqlens="10000,100")
    assert "keep every sequence of --seqlens at 8,192 tokens or fewer" in str(exc.value)
    assert "use --seqlen" not in str(exc.value)


def test_a_window_pattern_of_one_leaves_every_layer_global(tmp_path):
    cfg = load_config(_write(tmp_path, {"model_type": "gemma3_text", "num_attention_heads": 32,
                                        "num_key_value_heads": 8, "hidden_size": 4096, "num_hidden_layers": 26,
                                        "sliding_window": 512, "sliding_window_pattern": 1,
                                        "torch_dtype": "bfloat16"}))
    assert cfg.window is None


@pytest.mark.parametrize("value", [1e30, 32.0])
def test_a_count_written_as_a_float_is_refused(tmp_path, value):
    path = _write(tmp_path, {"num_attention_heads": value, "hidden_size": 4096, "torch_dtype": "bfloat16"})
    with pytest.raises(IomodelError) as exc:
        load_config(path)
    assert "'num_attention_heads' must be a positive integer, got" in str(exc.value)
    assert "write it as an integer" in str(exc.value) and "\n" not in str(exc.value)


def test_context_limits_of_encoder_decoders(tmp_path):
    """Whisper's encoder holds max_source_positions frames (1,500): read as its context limit; T5's n_positions is
    not a limit (relative position buckets), so no context note is made for it."""
    whisper = load_config(_write(tmp_path, {"model_type": "whisper", "is_encoder_decoder": True,
                                            "encoder_attention_heads": 20, "d_model": 1280,
                                            "max_source_positions": 1500, "max_target_positions": 448,
                                            "torch_dtype": "float16"}))
    assert whisper.max_position_embeddings == 1500
    t5 = load_config(_write(tmp_path, {**T5_SMALL, "n_positions": 512, "relative_attention_num_buckets": 32}))
    assert t5.max_position_embeddings is None


@pytest.mark.parametrize("model, extra", [
    ("meta-llama/Llama-4-Scout-17B-16E", ["--seqlen", "4096"]),  # within the chunk: no --window none added
    ("meta-llama/Llama-4-Scout-17B-16E", ["--phase", "decode", "--seqlen", "131072", "--window", "none"]),
    ("google/gemma-3-4b-it", ["--seqlen", "4096"]),
    ("google/gemma-3-4b-it", ["--seqlen", "4096", "--window", "1023"]),  # the config's own window, given
    ("google-bert/bert-base-uncased", ["--seqlen", "512"]),  # the encoder's note survives --no-causal
    ("facebook/dinov2-base", ["--seqlen", "1370"]),
])
def test_the_reproduce_line_of_a_config_regenerates_the_same_worksheet(tmp_path, capsys, model, extra):
    """A reviewer found notes that changed when the Reproduce line was run (bytes equal): an added --window none
    note for Llama-4 within its chunk, the encoder note dropped by --no-causal, the window note reworded by the
    config's own window given as --window."""
    import shlex

    from test_cli_errors import run_cli

    fields = next(r[1] for r in REAL if r[0] == model)
    path = _write(tmp_path, {**fields, "torch_dtype": fields.get("torch_dtype", "float32")})
    code, first, err = run_cli(capsys, ["worksheet", "--config", str(path), *extra])
    assert code == 0, err
    line = next(x for x in first.splitlines() if x.startswith("Reproduce: `"))
    code, second, err = run_cli(capsys, shlex.split(line[len("Reproduce: `"):-1])[1:])
    assert code == 0, err
    assert second == first


#: Configs a fresh user tried on 2026-12-05 that were read wrong without a word, or refused unhelpfully (attention
#: fields as published: SantaCoder, Zamba2-7B, DINOv3, Swin, OpenELM, DistilBERT, Reformer as copied from their
#: config.json files; Step-3 from transformers' Step3p5Config; gte-v1.5, PaliGemma-2, Qwen2.5-Omni, MiniCPM4,
#: Qwen2.5-1M, the FP8-KV Llama and EXAONE-4.0's pattern string from their model cards and configuration code).
WILD_2 = [
    ("bigcode/santacoder", {"model_type": "gpt2", "architectures": ["GPT2LMHeadCustomModel"],
                            "attention_head_type": "multiquery", "n_head": 16, "n_embd": 2048, "n_layer": 24,
                            "torch_dtype": "float32"}, (16, 1, 128)),
    ("stepfun-ai/step3 (text)", {"text_config": {"model_type": "step3_text", "hidden_size": 7168,
                                                 "num_attention_heads": 64, "num_attention_groups": 1, "head_dim": 256,
                                                 "torch_dtype": "bfloat16"}}, (64, 1, 256)),
    ("Zyphra/Zamba2-7B", {"model_type": "zamba2", "architectures": ["Zamba2ForCausalLM"], "hidden_size": 3584,
                          "kv_channels": 112, "num_attention_heads": 32, "torch_dtype": "bfloat16"}, (32, 32, 224)),
    ("Meta params.json style (dim, n_heads, n_kv_heads)", {"dim": 4096, "n_heads": 32, "n_kv_heads": 8,
                                                           "n_layers": 32, "torch_dtype": "bfloat16"}, (32, 8, 128)),
    ("distilbert-base-uncased", {"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"], "dim": 768,
                                 "n_heads": 12, "n_layers": 6, "torch_dtype": "float32"}, (12, 12, 64)),
    ("Qwen/Qwen2.5-Omni-7B (thinker_config.text_config)",
     {"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
      "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                         "text_config": {"model_type": "qwen2_5_omni_text", "hidden_size": 3584,
                                         "num_attention_heads": 28, "num_key_value_heads": 4}},
      "talker_config": {"hidden_size": 896, "num_attention_heads": 12, "num_key_value_heads": 4}}, (28, 4, 128)),
]


@pytest.mark.parametrize("model, fields, shape", WILD_2, ids=[w[0] for w in WILD_2])
def test_more_wild_configs_read_their_heads(tmp_path, model, fields, shape):
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == shape
    if model.startswith("Zyphra"):
        assert any("attention_head_dim = 2·hidden_size / num_attention_heads = 224" in n for n in cfg.notes)


@pytest.mark.parametrize("fields, needle", [
    ({"model_type": "rwkv7", "num_heads": 32, "head_dim": 64, "hidden_size": 2048, "torch_dtype": "bfloat16"},
     "model_type 'rwkv7' has no attention layers"),
    ({"model_type": "swin", "num_heads": [3, 6, 12, 24], "hidden_size": 768, "window_size": 7, "torch_dtype": "float32"},
     "'num_heads' is a JSON array (4 values: one per stage or layer), so no one layer stands for the model"),
    ({"model_type": "openelm", "num_query_heads": [16, 20], "num_kv_heads": [4, 5], "head_dim": 64, "model_dim": 2048,
      "torch_dtype": "bfloat16"}, "query and KV heads that differ from layer to layer (OpenELM"),
    ({"model_type": "reformer", "attn_layers": ["local", "lsh"], "num_attention_heads": 2, "attention_head_size": 64,
      "hidden_size": 256, "torch_dtype": "float32"}, "Reformer's LSH and chunked local attention"),
    ({"model_type": "step3p5", "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128,
      "attention_other_setting": {"num_attention_heads": 96}, "torch_dtype": "bfloat16"},
     "layers with another head count (Step-3.5's sliding-window layers"),
    ({"model_type": "exaone4", "num_attention_heads": 8, "hidden_size": 1024, "sliding_window": 4096,
      "sliding_window_pattern": "LLXG", "torch_dtype": "bfloat16"}, "a pattern string holds L (sliding-window layer) "
                                                                    "and G (global layer) only"),
])
def test_more_wild_configs_are_refused_in_one_line(tmp_path, fields, needle):
    msg = _refusal(_write(tmp_path, fields))
    assert needle in msg and "\n" not in msg and ("--heads" in msg or "fix the file" in msg), msg


def test_swin_with_the_flags_models_the_layer_the_flags_name(tmp_path):
    path = _write(tmp_path, {"model_type": "swin", "num_heads": [3, 6, 12, 24], "hidden_size": 768,
                             "torch_dtype": "float32"})
    cfg = load_config(path, heads=3, kv_heads=3, head_dim=32)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (3, 3, 32)


def test_encoders_known_since_and_the_causal_guess_is_said(tmp_path):
    """gte-v1.5 ("new"), arctic-embed v2 ("gte") and DINOv3 are encoders; a config whose architectures name no
    decoder head and whose family iomodel does not know is modelled causal with a note saying so; a decoder head
    (SantaCoder's GPT2LMHeadCustomModel) or none at all gets no note."""
    for model_type, arch in (("new", "NewModel"), ("gte", "GteModel"), ("dinov3_vit", "DINOv3ViTModel")):
        cfg = load_config(_write(tmp_path, {"model_type": model_type, "architectures": [arch],
                                            "num_attention_heads": 12, "hidden_size": 768, "torch_dtype": "float32"}))
        assert not cfg.causal_default and f"'model_type' = {model_type!r}: an encoder" in cfg.bidirectional_source
    cfg = load_config(_write(tmp_path, {"model_type": "acme_embed", "architectures": ["AcmeModel"],
                                        "num_attention_heads": 12, "hidden_size": 768, "torch_dtype": "float32"}))
    assert cfg.causal_default and any("names no decoder head" in n and "pass --no-causal" in n for n in cfg.notes)
    for arch in (["GPT2LMHeadCustomModel"], ["LlamaForCausalLM"], None):
        fields = {"model_type": "acme", "num_attention_heads": 12, "hidden_size": 768, "torch_dtype": "float32"}
        if arch:
            fields["architectures"] = arch
        assert not any("decoder head" in n for n in load_config(_write(tmp_path, fields)).notes)


def test_hybrid_layer_types_model_the_attention_layers_and_say_so(tmp_path):
    """Granite-4.0-H spells a full-attention layer 'attention' between Mamba layers."""
    cfg = load_config(_write(tmp_path, {"model_type": "granitemoehybrid", "num_hidden_layers": 8,
                                        "layer_types": ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"],
                                        "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512,
                                        "torch_dtype": "bfloat16"}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (8, 8, 64, None)
    assert ("layer_types: 2 of 8 layers are softmax attention (layers 3, 7); the other 6 (mamba) move no attention "
            "traffic: this worksheet models one attention layer.") in cfg.notes


def test_exaone_pattern_string_and_the_gemma2_default_window(tmp_path):
    cfg = load_config(_write(tmp_path, {"model_type": "exaone4", "num_hidden_layers": 8, "num_attention_heads": 40,
                                        "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 4096,
                                        "sliding_window_pattern": "LLLG", "torch_dtype": "bfloat16"}))
    assert (cfg.window, cfg.window_kind) == (4096, "sliding-window")
    assert cfg.window_layers == "6 of 8 layers (sliding_window_pattern 'LLLG'): layers 0, 1, 2, 4, 5, 6"
    # PaliGemma-2: a gemma2 text_config with no sliding_window gets Gemma2Config's 4096 on the even layers, said;
    # the prefix-LM is said too
    cfg = load_config(_write(tmp_path, {"model_type": "paligemma", "torch_dtype": "bfloat16",
                                        "architectures": ["PaliGemmaForConditionalGeneration"],
                                        "text_config": {"model_type": "gemma2", "num_hidden_layers": 26,
                                                        "num_attention_heads": 8, "num_key_value_heads": 4,
                                                        "head_dim": 256, "hidden_size": 2304}}))
    assert (cfg.window, cfg.window_layers.split(":")[0]) == (4096, "13 of 26 layers (Gemma-2 alternation)")
    assert any("no 'sliding_window': 4096, the default of HF transformers' Gemma2Config" in n for n in cfg.notes)
    assert any("model_type 'paligemma' is a prefix-LM" in n for n in cfg.notes)
    # sliding_window null turns it off (as transformers reads null), no default
    assert load_config(_write(tmp_path, {"model_type": "gemma2", "sliding_window": None, "num_attention_heads": 8,
                                         "num_key_value_heads": 4, "head_dim": 256,
                                         "torch_dtype": "bfloat16"})).window is None


def test_quantized_kv_cache_is_said_and_sparse_long_context_is_refused_past_its_dense_length(tmp_path):
    from iomodel.spec.resolve import resolve_layer

    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_attention_heads": 32,
             "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, {**llama, "quantization_config": {
        "quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}}))
    assert any(n.startswith("quantization_config.kv_cache_scheme (8-bit float): the checkpoint stores its KV cache "
                            "quantized") for n in cfg.notes)
    path = _write(tmp_path, {**llama, "sparse_config": {"dense_len": 8192, "topk": 64, "block_size": 64}})
    # dense below dense_len: MiniCPM4's code runs sparse from length >= dense_len (a fresh user, 2026-12-07: 8,192
    # was modelled dense)
    assert resolve_layer(config=path, seqlen=8191).spec.seqlen_k == 8191
    for n in (8192, 16384):
        with pytest.raises(IomodelError) as exc:
            resolve_layer(config=path, seqlen=n)
        assert ("past 8,191 tokens the model runs InfLLM v2 sparse attention" in str(exc.value)
                and "use --seqlen 8191 or less" in str(exc.value))
    # Qwen2.5-1M: chunks of chunk_size - local_size = 253,952 tokens (vLLM's chunk_len): one chunk is dense
    path = _write(tmp_path, {**llama, "dual_chunk_attention_config": {"chunk_size": 262144, "local_size": 8192}})
    assert resolve_layer(config=path, seqlen=253952).spec.seqlen_k == 253952
    for n in (253953, 262144):
        with pytest.raises(IomodelError, match="past 253,952 tokens the model runs dual chunk attention"):
            resolve_layer(config=path, seqlen=n)


def test_third_round_of_wild_configs(tmp_path):
    """A second fresh user's finds (2026-12-05): MLA fields switched off are not refused (DeepSeek-OCR); per-layer
    window layouts (SmallThinker, Hymba, a params.json window list); hybrids' attention layers said (Jamba, Bamba,
    Nemotron-H, MiniMax-Text-01, LFM2); NeoBERT and XLM are encoders; a nested null dtype keeps the top level's
    (CLIP), whose vision tower is said; relative position terms, ALiBi by position_embedding_type and attention
    dropout in training are said."""
    from iomodel.spec.resolve import resolve_layer

    def read(fields, **kw):
        return load_config(_write(tmp_path, fields), **kw)

    ocr = read({"model_type": "deepseek_vl_v2", "torch_dtype": "bfloat16", "language_config": {
        "hidden_size": 1280, "num_attention_heads": 10, "use_mla": False, "kv_lora_rank": None, "q_lora_rank": None,
        "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0}})
    assert (ocr.heads, ocr.kv_heads, ocr.head_dim) == (10, 10, 128)
    assert "multi-head latent attention" in _refusal(_write(tmp_path, {
        "num_attention_heads": 16, "hidden_size": 2048, "kv_lora_rank": 512, "torch_dtype": "bfloat16"}))
    small = read({"model_type": "smallthinker", "num_attention_heads": 28, "num_key_value_heads": 4,
                  "hidden_size": 3584, "num_hidden_layers": 8, "sliding_window_size": 4096,
                  "sliding_window_layout": [0, 1, 1, 1, 0, 1, 1, 1], "torch_dtype": "bfloat16"})
    assert (small.window, small.window_layers) == (4096, "6 of 8 layers (sliding_window_layout): layers 1, 2, 3, 5, 6, 7")
    hymba = read({"model_type": "hymba", "num_attention_heads": 25, "num_key_value_heads": 5, "hidden_size": 1600,
                  "num_hidden_layers": 32, "global_attn_idx": [0, 15, 31], "sliding_window": 1024,
                  "num_memory_tokens": 128, "torch_dtype": "bfloat16"})
    assert (hymba.window, hymba.window_layers) == (1024, "29 of 32 layers (all but global_attn_idx): all but layers "
                                                         "0, 15, 31")
    assert any(n.startswith("'num_memory_tokens' = 128: memory (meta) tokens prepended") for n in hymba.notes)
    mistral = read({"dim": 4096, "n_heads": 32, "n_kv_heads": 8, "n_layers": 8,
                    "sliding_window": [131072, 32768, 32768, 32768]}, dtype="bf16")
    assert (mistral.window, mistral.window_layers) == (32768, "6 of 8 layers (the sliding_window list): layers 1, 2, "
                                                              "3, 5, 6, 7")
    for fields, said in [({"attn_layer_period": 8, "attn_layer_offset": 4, "num_hidden_layers": 32},
                          "attn_layer_period/offset: 4 of 32 layers are softmax attention"),
                         ({"attn_layer_indices": [9, 18, 27], "num_hidden_layers": 32},
                          "attn_layer_indices: 3 of 32 layers are softmax attention (layers 9, 18, 27)"),
                         ({"hybrid_override_pattern": "M-M*-M-M*"}, "hybrid_override_pattern: 2 of 9 layers"),
                         ({"attn_type_list": [0, 0, 0, 1] * 2}, "attn_type_list (1: softmax): 2 of 8 layers"),
                         ({"full_attn_idxs": [2, 5], "num_hidden_layers": 16}, "full_attn_idxs: 2 of 16 layers")]:
        cfg = read({"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                    "torch_dtype": "bfloat16", **fields})
        assert any(n.startswith(said) for n in cfg.notes), (said, cfg.notes)
    for fields in ({"model_type": "neobert", "architectures": ["NeoBERTLMHead"]},
                   {"model_type": "flaubert", "causal": False, "emb_dim": 768},
                   {"model_type": "acme", "causal": False}):
        cfg = read({"num_attention_heads": 12, "hidden_size": 768, "torch_dtype": "float32", **fields})
        assert not cfg.causal_default and cfg.head_dim == 64
    clip = read({"model_type": "clip", "torch_dtype": "float32",
                 "text_config": {"model_type": "clip_text_model", "torch_dtype": None, "hidden_size": 768,
                                 "num_attention_heads": 12, "architectures": None},
                 "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "num_attention_heads": 16}})
    assert (clip.heads, clip.head_dim, clip.dtype, clip.causal_default) == (12, 64, "fp32", True)
    assert any(n.startswith("vision_config (16 heads, HEAD_DIM 64): another tower of this model") for n in clip.notes)
    assert not any("differently from the top level" in n or "decoder head" in n for n in clip.notes)
    for fields, said in [({"relative_attention_num_buckets": 32}, "a relative position bias (T5, MPNet)"),
                         ({"relative_attention": True}, "DeBERTa's disentangled attention"),
                         ({"position_embedding_type": "relative_key_query"}, "relative position scores"),
                         ({"position_embedding_type": "alibi"}, "ALiBi position biases")]:
        cfg = read({"num_attention_heads": 12, "hidden_size": 768, "torch_dtype": "float32", **fields})
        assert any(said in n for n in cfg.notes), (said, cfg.notes)
    path = _write(tmp_path, {"model_type": "bert", "num_attention_heads": 12, "hidden_size": 768,
                             "attention_probs_dropout_prob": 0.1, "torch_dtype": "float32"})
    assert any("attention dropout p = 0.1" in n for n in resolve_layer(config=path, seqlen=512, passes="fwd+bwd").notes)
    assert not any("dropout" in n for n in resolve_layer(config=path, seqlen=512).notes)  # inference: no dropout
    assert "Baichuan-M1's num_swa_attention_heads" in _refusal(_write(tmp_path, {
        "num_attention_heads": 20, "num_swa_attention_heads": 40, "hidden_size": 5120, "torch_dtype": "bfloat16"}))


def test_a_reward_model_of_a_known_decoder_family_gets_no_causal_guess_note(tmp_path):
    cfg = load_config(_write(tmp_path, {"model_type": "llama", "architectures": ["LlamaForSequenceClassification"],
                                        "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                                        "torch_dtype": "bfloat16"}))
    assert cfg.causal_default and not any("decoder head" in n for n in cfg.notes)


#: google/gemma-4-31B-it's attention fields (text_config as published: 60 layers, 5 sliding to 1 full, head_dim 256
#: and global_head_dim 512, 16 KV heads and 4 global KV heads under attention_k_eq_v).
GEMMA4_31B = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 60,
                              "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4,
                              "head_dim": 256, "global_head_dim": 512, "attention_k_eq_v": True,
                              "sliding_window": 1024, "max_position_embeddings": 262144,
                              "layer_types": ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                              for i in range(60)]},
              "vision_config": {"model_type": "gemma4_vision", "hidden_size": 1152, "num_attention_heads": 16}}


def test_gemma4_full_attention_layers_have_their_own_kv_heads_and_head_dim(tmp_path, capsys):
    """A third fresh user's finding (Gemma-4): HF Gemma4TextAttention gives the full-attention layers HEAD_DIM
    global_head_dim and, under attention_k_eq_v, num_global_key_value_heads KV heads; iomodel read H_kv 16 and
    HEAD_DIM 256 for them, silently. A sliding layer is the default and says the full ones differ; --window none
    models a full one with H_kv 4 and HEAD_DIM 512, which the bundled kernel refuses in one line."""
    import shlex

    from test_cli_errors import assert_one_line_error, run_cli

    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, GEMMA4_31B)
    cfg = load_config(path)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (32, 16, 256, 1024)
    assert (cfg.full_kv_heads, cfg.full_head_dim, cfg.full_geometry()) == (4, 512, (4, 512))
    assert ("the full-attention layers (10 of 60, layer_types) have 4 KV heads (num_global_key_value_heads, with "
            "attention_k_eq_v) and HEAD_DIM 512 (global_head_dim), the sliding-window layers 16 KV heads and HEAD_DIM "
            "256 (HF transformers' Gemma4TextAttention); on the full layers the values are the keys' projection "
            "(attention_k_eq_v: v_proj is None), yet the attention call still reads a V tensor of K's shape, whose "
            "bytes are counted.") in cfg.notes
    sliding = resolve_layer(config=path, seqlen=4096)
    assert (sliding.spec.kv_heads, sliding.spec.head_dim, sliding.spec.window_left) == (16, 256, 1023)
    assert (f"{path}: a sliding-window layer is modelled (H_kv 16, HEAD_DIM 256); pass --window none to model a "
            "full-attention layer with its own sizes.") in sliding.notes
    full = resolve_layer(config=path, seqlen=4096, window="none", block_m=64, block_n=32)
    s = full.spec
    assert (s.heads, s.kv_heads, s.head_dim, s.window_left) == (32, 4, 512, None)
    assert 2 * s.kv_heads * s.seqlen_k * s.head_dim * s.width == 2 * 4 * 4096 * 512 * 2  # K and V: 32 MiB
    assert (f"{path}: a full-attention layer is modelled (--window none), with the full layers' own H_kv 4 (not 16) "
            "and HEAD_DIM 512 (not 256), as HF transformers' Gemma4TextAttention builds them.") in full.notes
    assert full.tiling_source.endswith("(no bundled kernel runs this layer: HEAD_DIM 512 is above the kernel's "
                                       "maximum of 256)")
    # the bundled kernel refuses HEAD_DIM 512: one line naming where 512 came from, never a traceback
    assert_one_line_error(capsys, ["worksheet", "--config", str(path), "--seqlen", "4096", "--window", "none"],
                          "the full-attention layer asked for has HEAD_DIM 512 (global_head_dim): no bundled kernel "
                          "runs this layer", "give --block-m and --block-n")
    # the Reproduce line of the full layer regenerates it (the same sizes, notes and bytes)
    code, first, err = run_cli(capsys, ["worksheet", "--config", str(path), "--seqlen", "4096", "--window", "none",
                                        "--block-m", "64", "--block-n", "32"])
    assert code == 0, err
    line = next(x for x in first.splitlines() if x.startswith("Reproduce: `"))
    assert "--window none" in line and "--kv-heads" not in line
    code, second, err = run_cli(capsys, shlex.split(line[len("Reproduce: `"):-1])[1:])
    assert code == 0 and second == first, err
    # a flag sets every layer's value, the full layers' too, and the note says what it replaces
    flagged = resolve_layer(config=path, seqlen=4096, window="none", kv_heads=8, block_m=64, block_n=32)
    assert (flagged.spec.kv_heads, flagged.spec.head_dim) == (8, 512)
    assert "--kv-heads 8 (the file's 4) sets every layer's value, the full-attention layers' too." in flagged.notes
    both = resolve_layer(config=path, seqlen=4096, window="none", kv_heads=16, head_dim=256)
    assert (both.spec.kv_heads, both.spec.head_dim) == (16, 256)
    assert not any("a full-attention layer is modelled" in n for n in both.notes)


def test_gemma4_class_defaults_and_every_layer_full(tmp_path):
    """Gemma4TextConfig gives global_head_dim 512 to a file that leaves it out (said), a null falls back to head_dim;
    num_global_key_value_heads is read only under attention_k_eq_v (said where it would differ); a config whose every
    layer is full models the full layers' sizes without --window none."""
    from iomodel.spec.resolve import resolve_layer

    text = {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "hidden_size": 2560,
            "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "sliding_window": 512, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
            "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, text))
    assert (cfg.kv_heads, cfg.head_dim, cfg.full_geometry()) == (2, 256, (2, 512))
    assert ("the file gives no 'global_head_dim': 512, the default of HF transformers' Gemma4TextConfig (model_type "
            "'gemma4_text'), as transformers reads the file.") in cfg.notes
    assert load_config(_write(tmp_path, {**text, "global_head_dim": None})).full_geometry() is None
    no_k_eq_v = load_config(_write(tmp_path, {**text, "global_head_dim": 256, "num_global_key_value_heads": 1}))
    assert no_k_eq_v.full_geometry() is None
    assert any(n.startswith("'num_global_key_value_heads' = 1 is not read: HF transformers' Gemma4TextAttention uses "
                            "it only under attention_k_eq_v") for n in no_k_eq_v.notes)
    all_full = _write(tmp_path, {**text, "attention_k_eq_v": True, "num_global_key_value_heads": 1,
                                 "global_head_dim": 128, "layer_types": ["full_attention"] * 6})
    cfg = load_config(all_full)
    assert (cfg.window, cfg.full_geometry()) == (None, (1, 128))
    spec = cfg.layer(seqlen_q=2048)
    assert (spec.kv_heads, spec.head_dim) == (1, 128)
    lay = resolve_layer(config=all_full, seqlen=2048)
    assert (lay.spec.heads, lay.spec.kv_heads, lay.spec.head_dim) == (8, 1, 128)
    assert any("a full-attention layer is modelled (no layer slides), with the full layers' own H_kv 1 (not 2) and "
               "HEAD_DIM 128 (not 256)" in n for n in lay.notes)
    with pytest.raises(IomodelError, match=r"num_attention_heads \(8\) is not divisible by num_global_key_value_heads "
                                           r"\(3\), the full-attention layers' KV heads"):
        load_config(_write(tmp_path, {**text, "attention_k_eq_v": True, "num_global_key_value_heads": 3}))


def test_phi4_flash_sambay_is_refused_by_field(tmp_path):
    """microsoft/Phi-4-mini-flash-reasoning (phi4flash, SambaY): Mamba, differential attention and cross-decoder
    layers sharing one KV cache; iomodel read it as an ordinary sliding-window model (H 40, H_kv 20, d 64)."""
    path = _write(tmp_path, {"architectures": ["Phi4FlashForCausalLM"], "model_type": "phi4flash",
                             "hidden_size": 2560, "num_attention_heads": 40, "num_key_value_heads": 20,
                             "num_hidden_layers": 32, "mb_per_layer": 2, "sliding_window": 512,
                             "max_position_embeddings": 262144, "torch_dtype": "bfloat16"})
    msg = _refusal(path)
    assert msg.startswith(f"{path}: 'mb_per_layer' = 2: SambaY's decoder-hybrid-decoder layout (Phi-4-mini-flash's "
                          "mb_per_layer: Mamba layers, sliding-window and global differential attention, two softmax "
                          "maps per head, and cross-decoder layers that read one shared KV cache), which iomodel does "
                          "not model")
    assert "\n" not in msg and "--heads/--kv-heads/--head-dim" in msg


def test_use_bidirectional_attention_strings(tmp_path):
    """Gemma4TextConfig's use_bidirectional_attention is "all", "vision" or null (is_causal = value != "all"): "all"
    is bidirectional (with the W // 2 + 1 window rule, as true), "vision" causal with a note, null and false causal,
    anything else one line naming the allowed values (it was refused as "must be true or false")."""
    from iomodel.spec.resolve import resolve_layer

    base = {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "global_head_dim": 256, "num_hidden_layers": 6, "sliding_window": 512,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention"], "torch_dtype": "bfloat16"}
    path = _write(tmp_path, {**base, "use_bidirectional_attention": "all"})
    cfg = load_config(path)
    assert not cfg.causal_default and cfg.bidirectional_source.startswith(
        "'use_bidirectional_attention' = 'all': the self-attention is bidirectional")
    lay = resolve_layer(config=path, seqlen=2048)
    assert (lay.spec.causal, lay.spec.window_left, lay.spec.window_right) == (False, 256, 256)
    assert resolve_layer(config=_write(tmp_path, {**base, "use_bidirectional_attention": True}),
                         seqlen=2048).spec == lay.spec
    vision = load_config(_write(tmp_path, {**base, "use_bidirectional_attention": "vision"}))
    assert vision.causal_default and vision.bidirectional_source == ""
    assert any(n.startswith("'use_bidirectional_attention' = 'vision': an image's tokens attend both ways among "
                            "themselves and the text causally") and "modelled causal" in n for n in vision.notes)
    for value in (None, False):
        cfg = load_config(_write(tmp_path, {**base, "use_bidirectional_attention": value}))
        assert cfg.causal_default and not any("use_bidirectional_attention" in n for n in cfg.notes)
    msg = _refusal(_write(tmp_path, {**base, "use_bidirectional_attention": "both"}))
    assert ("'use_bidirectional_attention' must be true, false, null, \"all\" or \"vision\" (HF Gemma3TextConfig, "
            "Gemma4TextConfig), got the string 'both': fix the file") in msg and "\n" not in msg


#: Multimodal configs whose text_config relies on its class's defaults (LLaVA-1.5's as published; the others' fields
#: as their model cards and HF configuration classes give them): (model, fields, (H, H_kv, HEAD_DIM), window, note).
CLASS_DEFAULTS = [
    ("llava-hf/llava-1.5-7b-hf",
     {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "torch_dtype": "float16",
      "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
                      "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05,
                      "torch_dtype": "float16", "vocab_size": 32064},
      "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "num_attention_heads": 16}},
     (32, 32, 128), None,
     "the file gives no 'num_attention_heads', 'hidden_size': num_attention_heads = 32, hidden_size = 4096, the "
     "defaults of HF transformers' LlamaConfig (model_type 'llama'), as transformers reads the file (HEAD_DIM = "
     "hidden_size / heads = 128); it gives no 'num_key_value_heads' either: KV heads = the query heads = 32, the "
     "class rule"),
    ("llava-hf/llava-v1.6-mistral-7b-hf",
     {"architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next", "torch_dtype": "float16",
      "text_config": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "num_key_value_heads": 8,
                      "intermediate_size": 14336, "sliding_window": None, "torch_dtype": "bfloat16"}},
     (32, 8, 128), None, "hidden_size = 4096, the defaults of HF transformers' MistralConfig"),
    ("a mistral text_config without sliding_window",
     {"model_type": "llava", "torch_dtype": "bfloat16", "text_config": {"model_type": "mistral",
                                                                        "num_hidden_layers": 32}},
     (32, 8, 128), 4096, "the file gives no 'sliding_window': 4096, the default of HF transformers' MistralConfig"),
    ("a mixtral text_config", {"model_type": "llava", "torch_dtype": "bfloat16",
                               "text_config": {"model_type": "mixtral"}},
     (32, 8, 128), None, "the defaults of HF transformers' MixtralConfig"),
    ("Qwen/Qwen2-Audio-7B", {"architectures": ["Qwen2AudioForConditionalGeneration"], "model_type": "qwen2_audio",
                             "torch_dtype": "bfloat16",
                             "audio_config": {"model_type": "qwen2_audio_encoder", "d_model": 1280,
                                              "encoder_attention_heads": 20},
                             "text_config": {"model_type": "qwen2", "intermediate_size": 11008,
                                             "max_position_embeddings": 8192, "vocab_size": 156032}},
     (32, 32, 128), None, "num_key_value_heads = 32, hidden_size = 4096, the defaults of HF transformers' Qwen2Config"),
    ("a llama text_config with 40 heads and hidden_size 5120 (HEAD_DIM is never filled)",
     {"model_type": "llava", "torch_dtype": "float16",
      "text_config": {"model_type": "llama", "num_attention_heads": 40, "hidden_size": 5120}},
     (40, 40, 128), None, None),
]


@pytest.mark.parametrize("model, fields, shape, window, note", CLASS_DEFAULTS, ids=[c[0] for c in CLASS_DEFAULTS])
def test_nested_text_configs_get_their_class_defaults(tmp_path, model, fields, shape, window, note):
    """LLaVA-1.5, LLaVA-NeXT-Mistral and Qwen2-Audio publish text_configs that rely on LlamaConfig/MistralConfig/
    Qwen2Config defaults (Idefics2's and Pixtral's mistral text_configs take the MistralConfig row): refused before
    as having no heads. HEAD_DIM is hidden_size / heads, never a filled default."""
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (*shape, window)
    if note is None:
        assert not any("the defaults of HF transformers'" in n for n in cfg.notes)
    else:
        assert any(note in n for n in cfg.notes), cfg.notes
    if model == "llava-hf/llava-1.5-7b-hf":
        assert cfg.dtype == "fp16" and any(n.startswith("vision_config (16 heads, HEAD_DIM 64): another tower")
                                           for n in cfg.notes)


def test_encoder_decoder_fields_under_encoder_and_decoder(tmp_path):
    """T5Gemma (and EncoderDecoderModel) give their attention fields only under 'encoder'/'decoder' (refused before
    as having no heads): the encoder's are read, bidirectional, the decoder's sizes named; T5Gemma's encoder masks
    |q − k| < W (modeling_t5gemma), so its sliding window reaches W − 1 keys each side, not W // 2; the top-level
    torch_dtype stays where the encoder gives none."""
    from iomodel.spec.resolve import resolve_layer

    module = {"model_type": "t5_gemma_module", "hidden_size": 2304, "num_attention_heads": 8,
              "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 26, "sliding_window": 4096,
              "layer_types": ["sliding_attention", "full_attention"] * 13, "query_pre_attn_scalar": 256}
    path = _write(tmp_path, {"architectures": ["T5GemmaForConditionalGeneration"], "model_type": "t5gemma",
                             "is_encoder_decoder": True, "torch_dtype": "bfloat16", "encoder": module,
                             "decoder": {**module, "num_attention_heads": 16, "num_key_value_heads": 8}})
    cfg = load_config(path)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.dtype, cfg.causal_default) == (8, 4, 256, "bf16", False)
    assert (cfg.window, cfg.window_each_side) == (4096, 4095)
    assert ("'encoder' and 'decoder' hold the attention fields (an encoder-decoder whose top level gives no heads): "
            "the encoder's are read, whose self-attention is bidirectional; the decoder's self-attention is causal (16 "
            "heads, 8 KV heads, HEAD_DIM 256: pass --causal --heads 16 --kv-heads 8 --head-dim 256 to model it).") \
        in cfg.notes
    lay = resolve_layer(config=path, seqlen=8192)
    assert (lay.spec.causal, lay.spec.window_left, lay.spec.window_right) == (False, 4095, 4095)
    assert any("(keys with |q − k| < 4,096: 4,095 tokens each side of the diagonal" in n for n in lay.notes)
    assert resolve_layer(config=path, seqlen=8192, window="4095,4095").notes == lay.notes  # its Reproduce line
    # EncoderDecoderModel (BERT to BERT): no is_encoder_decoder needed for the encoder to be bidirectional
    bert = {"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12}
    cfg = load_config(_write(tmp_path, {"architectures": ["EncoderDecoderModel"], "model_type": "encoder-decoder",
                                        "torch_dtype": "float32", "encoder": bert,
                                        "decoder": {**bert, "is_decoder": True, "add_cross_attention": True}}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.dtype, cfg.causal_default) == (12, 12, 64, "fp32", False)
    assert cfg.bidirectional_source.startswith("the fields of 'encoder': the encoder's self-attention is bidirectional")
    # a top level with heads is read as before: the encoder is not looked at
    cfg = load_config(_write(tmp_path, {**T5_SMALL, "encoder": {"num_heads": 99}}))
    assert (cfg.heads, cfg.head_dim) == (8, 64)


def test_xglm_and_kosmos2_attention_heads_and_embed_dim(tmp_path):
    """XGLMConfig.attribute_map reads attention_heads as num_attention_heads; Kosmos-2's text config gives
    attention_heads and embed_dim (refused before as having no heads)."""
    xglm = load_config(_write(tmp_path, {"architectures": ["XGLMForCausalLM"], "model_type": "xglm",
                                         "attention_heads": 16, "d_model": 1024, "num_layers": 24,
                                         "torch_dtype": "float32"}))
    assert (xglm.heads, xglm.kv_heads, xglm.head_dim, xglm.num_layers) == (16, 16, 64, 24)
    kosmos = load_config(_write(tmp_path, {"architectures": ["Kosmos2ForConditionalGeneration"],
                                           "model_type": "kosmos-2", "torch_dtype": "float32",
                                           "text_config": {"model_type": "kosmos_2_text_model", "attention_heads": 32,
                                                           "embed_dim": 2048, "layers": 24},
                                           "vision_config": {"hidden_size": 1024, "num_attention_heads": 16}}))
    assert (kosmos.heads, kosmos.kv_heads, kosmos.head_dim) == (32, 32, 64)


def test_fp8_weights_are_not_the_attention_dtype(tmp_path):
    """An FP8 checkpoint's torch_dtype float8_e4m3fn with a quantization_config is its weights' storage format: the
    attention runs in the activations' dtype. Refused in one line unless --dtype says which (it was modelled as FP8
    attention, then refused by the kernel for the dtype)."""
    fields = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
              "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "float8_e4m3fn",
              "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    path = _write(tmp_path, fields)
    assert _refusal(path) == (
        f"{path}: 'torch_dtype' = 'float8_e4m3fn' with a 'quantization_config' is the weights' storage format, not the "
        "attention's dtype (it runs in the activations' dtype): pass --dtype bf16 (the activations' dtype), or --dtype "
        "fp8_e4m3 to model FP8 attention on purpose")
    assert load_config(path, dtype="bf16").dtype == "bf16"
    assert load_config(path, dtype="fp8_e4m3").dtype == "fp8_e4m3"
    del fields["quantization_config"]  # no quantization_config: the file's fp8 is read as the dtype, as before
    assert load_config(_write(tmp_path, fields)).dtype == "fp8_e4m3"


def test_another_tower_is_said_for_top_level_text_fields_too(tmp_path):
    """Qwen2-VL gives its text fields at the top level and a vision_config with num_heads: the vision tower is said,
    as for a nested text_config (it was said only there)."""
    cfg = load_config(_write(tmp_path, {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
                                        "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                                        "torch_dtype": "bfloat16",
                                        "vision_config": {"depth": 32, "embed_dim": 1280, "num_heads": 16}}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (28, 4, 128)
    # the tower's sizes: HEAD_DIM = embed_dim / num_heads = 1280 / 16
    assert ("vision_config (16 heads, HEAD_DIM 80): another tower of this model (an image or audio encoder with its "
            "own heads, whose self-attention is bidirectional) is not modelled here; pass its sizes with "
            "--heads/--kv-heads/--head-dim and --no-causal to model it.") in cfg.notes


def test_a_wrappers_text_config_without_model_type_gets_the_wrappers_default_family(tmp_path):
    """LLaVA-1.5-7B's text_config names no model_type; HF LlavaConfig reads it as "llama" (LlamaConfig: 32 heads,
    hidden_size 4096, KV heads = heads). iomodel kept the wrapper's 'llava', knew no defaults and refused the file for
    its missing heads; LLaVA-OneVision's reads as qwen2, Idefics2's as mistral (whose class window is 4096)."""
    text = {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
            "max_position_embeddings": 4096, "vocab_size": 32064}
    cfg = load_config(_write(tmp_path, {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
                                        "torch_dtype": "float16", "text_config": text,
                                        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024,
                                                          "num_attention_heads": 16}}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (32, 32, 4096 // 32, None)
    assert ("the text_config gives no 'model_type': 'llama', the one HF transformers' 'llava' configuration gives it, "
            "so that family's defaults apply.") in cfg.notes
    one = load_config(_write(tmp_path, {"model_type": "llava_onevision", "torch_dtype": "bfloat16",
                                        "text_config": {"hidden_size": 3584, "num_attention_heads": 28,
                                                        "num_key_value_heads": 4}}))
    assert (one.heads, one.kv_heads, one.head_dim) == (28, 4, 128)  # qwen2: no class window
    idefics2 = load_config(_write(tmp_path, {"model_type": "idefics2", "torch_dtype": "bfloat16",
                                             "text_config": {"vocab_size": 32003}}))
    # MistralConfig: 32 heads on 8, hidden_size 4096, sliding_window 4096 on every layer
    assert (idefics2.heads, idefics2.kv_heads, idefics2.head_dim, idefics2.window) == (32, 8, 128, 4096)
    # a text_config that names its family keeps it; an unknown wrapper's is not guessed
    named = load_config(_write(tmp_path, {"model_type": "llava", "torch_dtype": "float16",
                                          "text_config": {"model_type": "mistral", "vocab_size": 32000}}))
    assert (named.kv_heads, named.window) == (8, 4096) and not any("gives no 'model_type'" in n for n in named.notes)
    assert "add it or pass --heads" in _refusal(_write(tmp_path, {"model_type": "someone_vlm", "torch_dtype": "bf16",
                                                                   "text_config": {"vocab_size": 32000}}))


def test_jetmoe_query_heads_are_kv_heads_times_experts_per_token(tmp_path):
    """JetMoE's mixture of attention heads: HF JetMoeConfig sets num_attention_heads = num_key_value_heads x
    num_experts_per_tok (16 x 2 = 32 query heads on 16 KV heads of HEAD_DIM kv_channels 128). A file without
    num_attention_heads was read as 16 heads (n_head) or refused; Q and O were half their bytes."""
    fields = {"architectures": ["JetMoEForCausalLM"], "model_type": "jetmoe", "hidden_size": 2048, "n_head": 16,
              "num_key_value_heads": 16, "kv_channels": 128, "num_experts_per_tok": 2, "num_local_experts": 8,
              "num_hidden_layers": 24, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (32, 16, 128)
    assert ("model_type 'jetmoe': 32 query heads = num_key_value_heads 16 x num_experts_per_tok 2 (HF transformers' "
            "JetMoeConfig: a token runs 2 attention experts of 16 query heads each on one K/V); 'n_head' is not what "
            "the model reads.") in cfg.notes
    spec = cfg.layer(seqlen_q=1024)
    assert spec.heads * spec.seqlen_q * spec.head_dim * spec.width == 32 * 1024 * 128 * 2  # Q: 8 MiB, not 4
    # the class defaults: 16 KV heads, kv_channels 128, two experts a token
    bare = load_config(_write(tmp_path, {"model_type": "jetmoe", "torch_dtype": "bfloat16", "num_experts_per_tok": 4}))
    assert (bare.heads, bare.kv_heads, bare.head_dim) == (64, 16, 128)
    # a file's own num_attention_heads is what transformers reads; --heads replaces it with no JetMoE note
    assert load_config(_write(tmp_path, {**fields, "num_attention_heads": 32})).heads == 32
    flagged = load_config(_write(tmp_path, fields), heads=48)
    assert flagged.heads == 48 and not any("jetmoe" in n for n in flagged.notes)


def test_gemma4_default_layout_and_window(tmp_path):
    """Gemma4TextConfig gives a file without layer_types every 6th layer full and the last one full (29 of 35
    sliding), and sliding_window 512 to a file without it; a layer_types list ending on a sliding layer has its last
    layer made full. iomodel read every layer as full attention (no window) or every layer as sliding."""
    base = {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "global_head_dim": 256, "num_hidden_layers": 35, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, base))
    assert (cfg.window, cfg.window_kind) == (512, "sliding-window")
    assert cfg.window_layers == "29 of 35 layers (layer_types): all but layers 5, 11, 17, 23, 29, 34"
    assert ("the file gives no 'layer_types': every 6th of 35 layers and the last one full, the others sliding, the "
            "default of HF transformers' Gemma4TextConfig, as transformers reads the file.") in cfg.notes
    assert ("the file gives no 'sliding_window': 512, the default of HF transformers' Gemma4TextConfig (model_type "
            "'gemma4_text'), as transformers reads the file.") in cfg.notes
    # the full layers' count follows the default layout (6 of 35, with global_head_dim's default 512)
    wide = load_config(_write(tmp_path, {k: v for k, v in base.items() if k != "global_head_dim"}))
    assert any(n.startswith("the full-attention layers (6 of 35, layer_types) have HEAD_DIM 512") for n in wide.notes)
    # no num_hidden_layers: the class's 30
    assert load_config(_write(tmp_path, {k: v for k, v in base.items() if k != "num_hidden_layers"})).window_layers \
        == "25 of 30 layers (layer_types): all but layers 5, 11, …, 29 (every 6th from 5)"
    mended = load_config(_write(tmp_path, {**base, "num_hidden_layers": 4, "sliding_window": 1024,
                                           "layer_types": ["sliding_attention"] * 4}))
    assert (mended.window, mended.window_layers) == (1024, "3 of 4 layers (layer_types): layers 0–2")
    assert ("'layer_types' ends on 'sliding_attention': HF transformers' Gemma4TextConfig makes the last layer "
            "full_attention (\"Last layer must use `full_attention`\"), and so does this worksheet.") in mended.notes
    # a sliding_window of null turns it off, as before
    assert load_config(_write(tmp_path, {**base, "sliding_window": None})).window is None


def test_baichuan_13b_materialised_alibi_is_said(tmp_path):
    """Baichuan-13B/Baichuan2-13B (hidden_size 5120) add a materialised [heads, N, N] ALiBi bias to the scores in
    their own code; the eager baseline here does not count it, and the worksheet now says so (it said nothing). The
    7B models (RoPE) get no such note."""
    fields = {"architectures": ["BaichuanForCausalLM"], "model_type": "baichuan", "hidden_size": 5120,
              "num_attention_heads": 40, "num_hidden_layers": 40, "model_max_length": 4096, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (40, 40, 128)
    assert any(n.startswith("model_type 'baichuan' with hidden_size 5120 (Baichuan-13B, Baichuan2-13B) uses ALiBi, "
                            "and its own code adds a materialised bias of [heads, N, N] elements") for n in cfg.notes)
    seven = load_config(_write(tmp_path, {**fields, "hidden_size": 4096, "num_attention_heads": 32}))
    assert not any("ALiBi" in n for n in seven.notes)


def test_fifth_round_kv_heads_under_other_names(tmp_path):
    """A fifth fresh user's findings, KV heads: CodeShell's group_query_attention with num_query_groups (its
    modeling_codeshell.py: kv_heads = num_query_groups) was read as 32 KV heads, 1.6x the K/V bytes; CogVLM2's
    num_multi_query_heads was not read; Moonshine's encoder_num_attention_heads and ProphetNet's
    num_encoder_attention_heads (their attribute_map's num_attention_heads) were refused as missing."""
    codeshell = {"architectures": ["CodeShellForCausalLM"], "model_type": "kclgpt", "group_query_attention": True,
                 "num_query_groups": 8, "n_embd": 4096, "n_head": 32, "n_layer": 42, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, codeshell))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (32, 8, 128)
    assert "give the KV groups of group_query_attention" in _refusal(
        _write(tmp_path, {k: v for k, v in codeshell.items() if k != "num_query_groups"}))
    cog = {"architectures": ["CogVLMForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
           "torch_dtype": "bfloat16"}
    assert load_config(_write(tmp_path, {**cog, "num_multi_query_heads": 8})).kv_heads == 8
    bare = load_config(_write(tmp_path, cog))
    assert bare.kv_heads == 32 and ("CogVLMForCausalLM without 'num_multi_query_heads': KV heads = the query heads = "
                                    "32 (CogVLM v1); CogVLM2's own configuration_cogvlm.py defaults it to 8 (GQA), so "
                                    "pass --kv-heads 8 for a CogVLM2 checkpoint whose file leaves it out.") in bare.notes
    prophet = load_config(_write(tmp_path, {"model_type": "prophetnet", "is_encoder_decoder": True,
                                            "num_encoder_attention_heads": 16, "hidden_size": 1024,
                                            "torch_dtype": "float32"}))
    assert (prophet.heads, prophet.kv_heads, prophet.head_dim, prophet.causal_default) == (16, 16, 64, False)


def test_fifth_round_shapes_moonshine_padding_and_convbert_heads(tmp_path):
    """Moonshine pads HEAD_DIM 416 / 8 = 52 to 56 (pad_head_dim_to_multiple_of, MoonshineAttention pads q, k, v)
    before the attention call: Q/K/V/O were 7 % low. ConvBERT's attention runs num_attention_heads // head_ratio heads
    (6 of 64) and is an encoder: it was read as 12 causal heads, 2x the bytes."""
    moon = {"architectures": ["MoonshineForConditionalGeneration"], "model_type": "moonshine",
            "is_encoder_decoder": True, "hidden_size": 416, "encoder_num_attention_heads": 8,
            "encoder_num_key_value_heads": 8, "decoder_num_attention_heads": 8, "pad_head_dim_to_multiple_of": 8,
            "dtype": "float32"}
    cfg = load_config(_write(tmp_path, moon))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal_default) == (8, 8, 56, False)
    assert ("'pad_head_dim_to_multiple_of' = 8: HEAD_DIM 52 padded to 56 before the attention call (HF transformers' "
            "MoonshineAttention pads q, k and v), so the kernel moves that many elements per head.") in cfg.notes
    assert load_config(_write(tmp_path, moon), head_dim=52).head_dim == 52  # a flag is taken as given
    assert load_config(_write(tmp_path, {**moon, "pad_head_dim_to_multiple_of": 4})).head_dim == 52  # already a multiple
    conv = {"architectures": ["ConvBertModel"], "model_type": "convbert", "hidden_size": 768,
            "num_attention_heads": 12, "head_ratio": 2, "torch_dtype": "float32"}
    cfg = load_config(_write(tmp_path, conv))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal_default) == (6, 6, 64, False)
    assert cfg.notes[0].startswith("'head_ratio' = 2: 6 attention heads of HEAD_DIM 64 (HF transformers' "
                                   "ConvBertSelfAttention: num_attention_heads 12 // head_ratio")
    assert load_config(_write(tmp_path, {**conv, "head_ratio": 24})).heads == 1  # at least one head, as HF
    assert load_config(_write(tmp_path, conv), heads=12).heads == 12


def test_fifth_round_causal_or_not(tmp_path):
    """LayoutLMv3 (no architectures in the file) and other encoders were modelled causal; NV-Embed-v2's
    bidir_mistral causal with a hedge; Pix2Struct's text_config, its decoder (is_decoder true), bidirectional because
    the top level is an encoder-decoder. LayoutLMv3's relative and spatial biases are said."""
    lay = load_config(_write(tmp_path, {"model_type": "layoutlmv3", "hidden_size": 768, "num_attention_heads": 12,
                                        "has_relative_attention_bias": True, "has_spatial_attention_bias": True,
                                        "torch_dtype": "float32"}))
    assert not lay.causal_default and lay.bidirectional_source.startswith("'model_type' = 'layoutlmv3': an encoder")
    assert any(n.startswith("'has_spatial_attention_bias' = True: a 2D spatial (layout) position bias") for n in lay.notes)
    emb = load_config(_write(tmp_path, {"model_type": "nvembed", "torch_dtype": "float16",
                                        "text_config": {"model_type": "bidir_mistral", "hidden_size": 4096,
                                                        "num_attention_heads": 32, "num_key_value_heads": 8}}))
    assert not emb.causal_default
    pix = load_config(_write(tmp_path, {"architectures": ["Pix2StructForConditionalGeneration"],
                                        "model_type": "pix2struct", "is_encoder_decoder": True,
                                        "torch_dtype": "float32",
                                        "text_config": {"model_type": "pix2struct_text_model", "d_kv": 64,
                                                        "hidden_size": 768, "num_heads": 12, "is_decoder": True},
                                        "vision_config": {"hidden_size": 768, "num_attention_heads": 12}}))
    assert (pix.heads, pix.head_dim, pix.causal_default) == (12, 64, True)
    t5 = load_config(_write(tmp_path, {"model_type": "t5", "is_encoder_decoder": True, "num_heads": 8, "d_kv": 64,
                                       "d_model": 512, "torch_dtype": "float32"}))
    assert not t5.causal_default  # the top level's encoder, as before


def test_fifth_round_local_and_approximate_attention(tmp_path):
    """LongT5's local encoder attention (|i - j| < local_radius + 1) and Pegasus-X's block-local attention with
    global tokens were modelled as full attention at any length; transient-global and Pegasus-X are refused by field,
    LongT5 local is a local window refused past its length like ModernBERT's; the Nystrom, YOSO and MRA
    approximations are refused by model_type."""
    from iomodel.spec.resolve import resolve_layer

    longt5 = {"architectures": ["LongT5ForConditionalGeneration"], "model_type": "longt5", "is_encoder_decoder": True,
              "d_kv": 64, "d_model": 768, "num_heads": 12, "encoder_attention_type": "local", "local_radius": 127,
              "global_block_size": 16, "relative_attention_num_buckets": 32, "torch_dtype": "float32"}
    path = _write(tmp_path, longt5)
    cfg = load_config(path)
    assert (cfg.window, cfg.window_kind, cfg.window_layers, cfg.causal_default) == \
        (128, "local (bidirectional, 127 keys each side)", "every encoder layer (LongT5 local)", False)
    assert resolve_layer(config=path, seqlen=128).spec.seqlen_q == 128  # within the window: every key is seen
    with pytest.raises(IomodelError, match=r"local \(bidirectional, 127 keys each side\) attention \(128 tokens on "
                                           r"every encoder layer \(LongT5 local\)\) masks keys at 4,096 tokens"):
        resolve_layer(config=path, seqlen=4096)
    # transient-global: the encoder's layer is refused (since 2026-12-07 when the layer is resolved: the decoder's
    # layers run plain attention, tests/test_config_wild.py test_an_encoder_only_attention_does_not_refuse_the_decoder)
    with pytest.raises(IomodelError) as exc:
        resolve_layer(config=_write(tmp_path, {**longt5, "encoder_attention_type": "transient-global"}), seqlen=1024)
    assert str(exc.value).startswith(f"{tmp_path / 'config.json'}: 'encoder_attention_type' = 'transient-global': "
                                     "LongT5's transient-global attention")
    assert "Pegasus-X's block-local attention with global tokens" in _refusal(
        _write(tmp_path, {"model_type": "pegasus_x", "is_encoder_decoder": True, "num_attention_heads": 16,
                          "d_model": 1024, "block_size": 512, "num_global_tokens": 32, "torch_dtype": "float32"}))
    for model_type, what in (("nystromformer", "Nystrom approximation"), ("yoso", "LSH-based"), ("mra", "multi-resolution")):
        msg = _refusal(_write(tmp_path, {"model_type": model_type, "num_attention_heads": 12, "hidden_size": 768,
                                         "torch_dtype": "float32"}))
        assert what in msg and "which iomodel does not model" in msg and "\n" not in msg


def test_layer_types_of_another_length_than_the_layers_is_said(tmp_path):
    """A re-check's finding: layer_types of 10 entries beside num_hidden_layers 35 said "9 of 10 layers" and nothing
    of the mismatch (recent transformers refuse such a file)."""
    cfg = load_config(_write(tmp_path, {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 2,
                                        "head_dim": 256, "global_head_dim": 256, "num_hidden_layers": 35,
                                        "sliding_window": 512, "torch_dtype": "bfloat16",
                                        "layer_types": ["sliding_attention"] * 9 + ["full_attention"]}))
    assert cfg.window_layers == "9 of 10 layers (layer_types): layers 0–8"
    assert ("'layer_types' lists 10 layers and 'num_hidden_layers' says 35: the list is read (recent transformers "
            "refuse such a file): fix one of them.") in cfg.notes


def test_plamo_and_stripedhyena_kv_heads_come_from_their_own_fields(tmp_path):
    """A fresh user's sixth round: PLaMo-13B's file says num_key_value_heads 40, but its code runs
    ceil(40 / n_shared_head 8) = 5 KV heads (pfnet modeling_plamo.py; mlx-lm and llama.cpp read it the same way);
    StripedHyena's attention blocks run num_attention_heads // proj_groups KV heads. Both were read as MHA: K and V
    8x and 4x their bytes."""
    plamo = {"model_type": "plamo", "architectures": ["PlamoForCausalLM"], "hidden_size": 5120,
             "num_attention_heads": 40, "num_key_value_heads": 40, "n_shared_head": 8, "num_hidden_layers": 40,
             "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, plamo))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (40, 5, 128)
    assert ("model_type 'plamo': 5 KV heads = ceil(40 query heads / n_shared_head 8) (modeling_plamo.py), whatever "
            "'num_key_value_heads' says.") in cfg.notes
    assert load_config(_write(tmp_path, {**plamo, "n_shared_head": 5})).kv_heads == 8  # ceil(40 / 5)
    assert load_config(_write(tmp_path, plamo), kv_heads=40).kv_heads == 40  # a flag still wins, with no note
    hyena = {"model_type": "stripedhyena", "architectures": ["StripedHyenaModelForCausalLM"], "hidden_size": 4096,
             "num_attention_heads": 32, "proj_groups": 4, "num_layers": 32, "attn_layer_idxs": [8, 16, 24],
             "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, hyena))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (32, 8, 128)
    assert any(n.startswith("attn_layer_idxs: 3 of 32 layers are softmax attention (layers 8, 16, 24)")
               for n in cfg.notes)
    assert load_config(_write(tmp_path, {**hyena, "proj_groups": 1})).kv_heads == 32  # Evo-1: MHA


@pytest.mark.parametrize("fields, said", [
    ({"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 4},
     "full_attention_interval: 12 of 48 layers are softmax attention (layers 3, 7, "),
    ({"model_type": "bailing_moe_linear", "num_hidden_layers": 20, "layer_group_size": 5},
     "layer_group_size: 4 of 20 layers are softmax attention (layers 4, 9, "),
    ({"model_type": "recurrent_gemma", "num_hidden_layers": 26, "block_types": ["recurrent", "recurrent", "attention"]},
     "block_types: 8 of 26 layers are softmax attention (layers 2, 5, "),
])
def test_hybrids_without_layer_types_say_which_layers_are_attention(tmp_path, fields, said):
    """Qwen3-Next written with full_attention_interval alone (HF Qwen3NextConfig: layer i is full attention where
    (i + 1) % n == 0), Ring-linear's layer_group_size (the last layer of each group, vLLM is_linear_layer) and
    RecurrentGemma's repeating block_types: every layer was counted as attention without a word."""
    base = {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128,
            "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, {**base, **fields}))
    assert any(n.startswith(said) for n in cfg.notes), cfg.notes


def test_chatglm_6b_v1_is_said_to_be_a_prefix_lm(tmp_path):
    """ChatGLM-6B (v1) lets the whole prompt attend both ways (modeling_chatglm.py get_masks): its prefill was
    modelled causal without a word, about half its work. ChatGLM2/3 (no position_encoding_2d) are causal."""
    v1 = {"model_type": "chatglm", "architectures": ["ChatGLMModel"], "hidden_size": 4096, "num_attention_heads": 32,
          "num_layers": 28, "position_encoding_2d": True, "torch_dtype": "float16"}
    cfg = load_config(_write(tmp_path, v1))
    assert cfg.causal_default and any(n.startswith("ChatGLM-6B (v1, 'position_encoding_2d'): a prefix-LM") for n in cfg.notes)
    v2 = {**{k: v for k, v in v1.items() if k != "position_encoding_2d"}, "multi_query_attention": True,
          "multi_query_group_num": 2}
    cfg = load_config(_write(tmp_path, v2))
    assert cfg.kv_heads == 2 and not any("prefix-LM" in n for n in cfg.notes)


def test_mamba_ssm_configs_are_refused_in_their_own_words(tmp_path):
    """mamba-ssm's own config files (d_model, n_layer, ssm_cfg, no model_type) were told to add num_attention_heads:
    a pure state-space model has no attention; a hybrid's attention sizes are in attn_cfg, which the refusal turns
    into flags."""
    pure = {"d_model": 2560, "n_layer": 64, "vocab_size": 50277, "ssm_cfg": {}, "rms_norm": True}
    assert "a state-space model has no attention layers" in _refusal(_write(tmp_path, pure))
    hybrid = {**pure, "ssm_cfg": {"layer": "Mamba2"}, "attn_layer_idx": [9, 18, 27, 36, 45, 56],
              "attn_cfg": {"causal": True, "head_dim": 128, "num_heads": 30, "out_proj_bias": False}}
    line = _refusal(_write(tmp_path, hybrid))
    assert "its attention is in 'attn_cfg' on layers [9, 18, 27, 36, 45, 56]" in line
    assert "pass --heads 30 --head-dim 128 (and --dtype)" in line


def test_plamo2_says_its_attention_layers_and_reads_its_head_dim(tmp_path):
    """PLaMo-2: mamba_step 2 makes every other layer Mamba (vLLM plamo2.py is_mamba: attention where
    i % mamba_step == mamba_step // 2), said in a note; its head dim is hidden_size_per_head; its window refusal no
    longer names RecurrentGemma's block_types."""
    fields = {"model_type": "plamo2", "architectures": ["Plamo2ForCausalLM"], "hidden_size": 2048,
              "num_attention_heads": 32, "num_key_value_heads": 4, "hidden_size_per_head": 128, "num_hidden_layers": 16,
              "mamba_step": 2, "mamba_enabled": True, "attention_window_size": 2048, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (32, 4, 128)
    assert any(n.startswith("mamba_step: 8 of 16 layers are softmax attention (layers 1, 3, ") for n in cfg.notes)
    assert cfg.window == 2048 and "attention layers ('attention_window_size')" in cfg.window_layers
    assert not any(n.startswith("mamba_step") for n in load_config(
        _write(tmp_path, {**fields, "mamba_enabled": False})).notes)


def test_a_decoder_sub_config_without_an_encoder_one_is_read(tmp_path):
    """MusicGen keeps its language model in 'decoder' (a causal decoder of 16 heads) beside 'text_encoder' and
    'audio_encoder': it was refused for a missing num_attention_heads with no word of the sub-config."""
    fields = {"model_type": "musicgen", "architectures": ["MusicgenForConditionalGeneration"], "is_encoder_decoder": True,
              "torch_dtype": "float32",
              "decoder": {"model_type": "musicgen_decoder", "hidden_size": 1024, "num_attention_heads": 16,
                          "num_hidden_layers": 24, "ffn_dim": 4096},
              "text_encoder": {"model_type": "t5", "d_model": 768, "num_heads": 12, "d_kv": 64},
              "audio_encoder": {"model_type": "encodec"}}
    cfg = load_config(_write(tmp_path, fields))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.dtype, cfg.causal_default) == (16, 16, 64, "fp32", True)
    assert any(n.startswith("'decoder' holds the attention fields") for n in cfg.notes)


@pytest.mark.parametrize("fields, said", [
    ({"model_type": "stripedhyena", "proj_groups": 5}, "num_attention_heads (32) is not divisible by proj_groups (5)"),
    ({"model_type": "stripedhyena", "proj_groups": True}, "'proj_groups' must be a positive integer, got the boolean"),
    ({"model_type": "plamo", "n_shared_head": float("nan")}, "'n_shared_head' must be a positive integer, got nan"),
    ({"model_type": "qwen3_next", "full_attention_interval": "4"}, "'full_attention_interval' must be a positive "
                                                                   "integer, got the string '4'"),
    ({"model_type": "qwen3_next", "full_attention_interval": -4}, "'full_attention_interval' must be a positive "
                                                                  "integer, got -4"),
    ({"model_type": "bailing_moe_linear", "layer_group_size": 0}, "'layer_group_size' must be a positive integer"),
    ({"model_type": "recurrent_gemma", "block_types": "attention"}, "'block_types' must be a non-empty list of block "
                                                                    "names"),
    ({"model_type": "recurrent_gemma", "block_types": []}, "got an empty list"),
    ({"model_type": "plamo2", "mamba_step": 1}, "'mamba_step' must be 2 or more"),
    ({"model_type": "plamo2", "mamba_step": "2"}, "'mamba_step' must be a positive integer, got the string '2'"),
    ({"model_type": "plamo2", "mamba_step": 2, "mamba_enabled": "yes"}, "'mamba_enabled' must be true or false"),
    ({"model_type": "chatglm", "position_encoding_2d": "yes"}, "'position_encoding_2d' must be true or false"),
])
def test_the_sixth_rounds_fields_refuse_wrong_values_in_one_line(tmp_path, fields, said):
    """The layout and head fields read since the sixth round were ignored when mistyped (no note, MHA, every layer
    attention): a wrong type, NaN, a negative or an impossible value is one line naming the field."""
    base = {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **fields}))  # NaN as JSON writes it
    line = _refusal(path)
    assert said in line and "\n" not in line


def test_a_mamba_ssm_hybrids_attn_cfg_sizes_are_checked(tmp_path):
    fields = {"d_model": 2560, "n_layer": 64, "ssm_cfg": {}, "attn_cfg": {"num_heads": "x", "head_dim": 128}}
    assert "'attn_cfg.num_heads' must be a positive integer, got the string 'x'" in _refusal(_write(tmp_path, fields))
    fields["attn_cfg"] = {"num_heads": 30, "num_heads_kv": 6, "head_dim": 128}
    assert "pass --heads 30 --kv-heads 6 --head-dim 128 (and --dtype)" in _refusal(_write(tmp_path, fields))


def test_falcon_and_bigcode_without_multi_query_are_multi_query_as_transformers_reads_them(tmp_path):
    """HF FalconConfig defaults multi_query=True and FalconAttention uses num_kv_heads only under
    new_decoder_architecture or multi_query=False: a falcon file that leaves multi_query out has 1 KV head (said in a
    note), even beside num_kv_heads; multi_query false projects K/V on every head (a file saying fewer is refused in
    one line: transformers fails on it), and new_decoder_architecture keeps its num_kv_heads. Falcon-7B's own RWConfig (model_type RefinedWebModel) defaults
    multi_query=True too, and so does GPTBigCodeConfig. A fresh user found the first read as 71 KV heads, without a
    word."""
    base = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, base, "a.json"))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (71, 1, 64)
    assert any("without 'multi_query': 1 KV head" in n for n in cfg.notes)
    assert load_config(_write(tmp_path, {**base, "num_kv_heads": 71}, "b.json")).kv_heads == 1
    assert load_config(_write(tmp_path, {**base, "multi_query": False}, "c.json")).kv_heads == 71
    with pytest.raises(IomodelError, match=r"multi_query false and no new_decoder_architecture projects K and V on all "
                                           r"71 heads .* 'num_kv_heads' = 1 contradicts it .*pass --kv-heads"):
        load_config(_write(tmp_path, {**base, "multi_query": False, "num_kv_heads": 1}, "d.json"))
    assert load_config(_write(tmp_path, {**base, "multi_query": False, "num_kv_heads": 1}, "d.json"), kv_heads=1).kv_heads == 1
    big = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_kv_heads": 8,
           "new_decoder_architecture": True, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, big, "e.json"))
    assert cfg.kv_heads == 8 and not any("multi_query" in n for n in cfg.notes)
    rw = {"model_type": "RefinedWebModel", "hidden_size": 4544, "n_head": 71, "torch_dtype": "bfloat16"}
    assert load_config(_write(tmp_path, rw, "f.json")).kv_heads == 1  # Falcon-7B's own RWConfig: multi_query=True
    assert load_config(_write(tmp_path, {**rw, "multi_query": False}, "g.json")).kv_heads == 71
    rw40 = {"model_type": "RefinedWeb", "hidden_size": 8192, "n_head": 128, "n_head_kv": 8, "torch_dtype": "bfloat16"}
    assert load_config(_write(tmp_path, rw40, "h.json")).kv_heads == 8  # Falcon-40B's RWConfig: n_head_kv
    bigcode = {"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, bigcode, "i.json"))  # GPTBigCodeConfig: multi_query=True too
    assert (cfg.kv_heads, cfg.head_dim) == (1, 128) and any("GPTBigCodeConfig's default" in n for n in cfg.notes)
    assert load_config(_write(tmp_path, {**bigcode, "multi_query": False}, "j.json")).kv_heads == 48


def test_starcoder2_without_kv_heads_gets_its_class_default(tmp_path):
    """Starcoder2Config defaults num_key_value_heads to 2 (not the query heads): a starcoder2 file without the field is
    GQA 24/2 at HEAD_DIM 3072/24 = 128, and a note names the defaulted field."""
    cfg = load_config(_write(tmp_path, {"model_type": "starcoder2", "num_attention_heads": 24, "hidden_size": 3072,
                                        "torch_dtype": "bfloat16"}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (24, 2, 128)
    assert any("Starcoder2Config" in n and "num_key_value_heads" in n for n in cfg.notes)


def test_fourth_round_of_wild_configs(tmp_path):
    """A fresh audit of configs from the wild (twenty-first session, 2026-12-07), each read right or refused in one
    line where it was read silently wrong before. Attention fields of: MiniMax-M3's text_config (rebuilt from the
    published field list, transformers configuration_minimax_m3_vl.py: sparse on layers 3-59), Qwen4-Exp's
    (a port's verbatim copy; transformers configuration_qwen4_exp.py: ``indexer_n_heads`` enables QSA), diffusers'
    FLUX.1-dev and EasyAnimate-V5.1 transformer configs (no model_type, no architectures), a Qwen2 text_config whose
    default-False ``use_sliding_window`` was dropped, Trinity-Nano (afmoe) without ``layer_types``, and a Jamba file
    whose 3 layers hold no attention layer (attn_layer_offset 4 of period 8)."""
    sparse = {"model_type": "minimax_m3_vl_text", "architectures": ["MiniMaxM3SparseForCausalLM"], "hidden_size": 6144,
              "num_hidden_layers": 60, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
              "torch_dtype": "bfloat16", "sparse_attention_config": {
                  "use_sparse_attention": True, "sparse_topk_blocks": 16, "sparse_block_size": 128,
                  "sparse_attention_freq": [0, 0, 0] + [1] * 57}}
    assert "'sparse_attention_config' has use_sparse_attention true: block-sparse attention" in _refusal(
        _write(tmp_path, sparse))
    sparse["sparse_attention_config"]["use_sparse_attention"] = False  # switched off: an ordinary layer
    assert (load_config(_write(tmp_path, sparse)).heads, load_config(_write(tmp_path, sparse)).kv_heads) == (64, 4)
    qsa = {"model_type": "qwen4_exp_text", "dtype": "bfloat16", "head_dim": 256, "hidden_size": 2560,
           "num_attention_heads": 24, "num_key_value_heads": 2, "num_hidden_layers": 48, "indexer_n_heads": 4,
           "indexer_budget": 2048}
    assert "'indexer_n_heads' = 4: a learned indexer" in _refusal(_write(tmp_path, qsa))
    for fields, shape in (({"_class_name": "FluxTransformer2DModel", "_diffusers_version": "0.30.0.dev0",
                            "attention_head_dim": 128, "num_attention_heads": 24, "num_layers": 19}, (24, 24, 128)),
                          ({"_class_name": "EasyAnimateTransformer3DModel", "_diffusers_version": "0.31.0",
                            "attention_head_dim": 64, "num_attention_heads": 48, "num_layers": 36}, (48, 48, 64))):
        cfg = load_config(_write(tmp_path, fields), dtype="bf16")
        assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == shape
        assert not cfg.causal_default and cfg.bidirectional_source == (
            f"'_diffusers_version' = {fields['_diffusers_version']!r} ('_class_name' {fields['_class_name']!r}): a "
            "diffusers model, whose attention over its image (and text) tokens has no causal mask")
    qwen2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
             "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "max_window_layers": 28,
             "sliding_window": 131072, "torch_dtype": "bfloat16"}
    cfg = load_config(_write(tmp_path, {"model_type": "llava_onevision", "text_config": qwen2}))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.window) == (28, 4, 128, None)
    assert any(n.startswith("'sliding_window' = 131072 with 'use_sliding_window' left out (default false): no window, "
                            "as HF transformers' Qwen2Config reads the file") for n in cfg.notes)
    # the flag decides whatever layer_types says (HF: sliding_window = None unless use_sliding_window), and a
    # transformers config carrying diffusers' field keeps its family's causal mask
    types = {**qwen2, "model_type": "qwen3", "num_hidden_layers": 4, "layer_types": ["full_attention"] * 2
             + ["sliding_attention"] * 2, "_diffusers_version": "0.30.0"}
    cfg = load_config(_write(tmp_path, types))
    assert (cfg.window, cfg.causal_default) == (None, True)
    assert load_config(_write(tmp_path, {**types, "use_sliding_window": True})).window == 131072
    on = load_config(_write(tmp_path, {**qwen2, "use_sliding_window": True, "max_window_layers": 14}))
    assert on.window == 131072 and on.window_layers.startswith("14 of 28")  # on when said: layers 14-27 slide
    afmoe = {"model_type": "afmoe", "architectures": ["AfmoeForCausalLM"], "dtype": "bfloat16", "head_dim": 128,
             "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 56,
             "global_attn_every_n_layers": 4, "sliding_window": 2048}
    cfg = load_config(_write(tmp_path, afmoe))
    assert (cfg.window, cfg.window_kind) == (2048, "sliding-window")
    assert cfg.window_layers.startswith("42 of 56 layers (layer_types): layers 0, 1, 2, 4, 5, 6, ")  # 3, 7, ... full
    bare = {k: v for k, v in afmoe.items() if k not in ("num_hidden_layers", "sliding_window",
                                                        "global_attn_every_n_layers")}
    cfg = load_config(_write(tmp_path, bare))  # AfmoeConfig's defaults: 32 layers, every 4th full, window 1024
    assert (cfg.window, cfg.window_layers[:24]) == (1024, "24 of 32 layers (layer_t")
    assert "'global_attn_every_n_layers' is null" in _refusal(_write(tmp_path, {**afmoe,
                                                                                 "global_attn_every_n_layers": None}))
    for bad in ({"use_sparse_attention": "true"}, [1]):  # read as dense before: now one line
        assert "'sparse_attention_config' must be an object whose use_sparse_attention is true or false" in _refusal(
            _write(tmp_path, {**sparse, "sparse_attention_config": bad}))
    jamba = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "attn_layer_offset": 4,
             "attn_layer_period": 8, "hidden_size": 4096, "num_attention_heads": 16, "num_key_value_heads": 8,
             "num_hidden_layers": 3, "torch_dtype": "bfloat16", "sliding_window": None}
    assert ("attn_layer_period/offset gives no softmax-attention layer among the model's 3 layers: there is no "
            "attention traffic to model") in _refusal(_write(tmp_path, jamba))
    assert load_config(_write(tmp_path, {**jamba, "num_hidden_layers": 8})).heads == 16  # layer 4 is attention


def test_a_config_window_wider_than_the_keys_is_no_window(tmp_path):
    """Phi-3-mini-128k's config gives a sliding window of 262,144 tokens over 131,072 positions: at 8,192 tokens it
    hides no key, yet it was modelled as a windowed layer (a baseline mask read, no K/V-stationary algorithm; a fresh
    user's finding, twenty-third session). Now the same layer as no window, said, with a Reproduce line that gives
    it again; past 262,144 keys the window binds and is modelled; a paged decode inside it is no longer refused."""
    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.layer import window_masks_nothing
    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
                             "num_key_value_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 131072,
                             "sliding_window": 262144, "torch_dtype": "bfloat16"})
    lay = resolve_layer(config=path, seqlen=8192)
    assert (lay.spec.window_left, lay.spec.window_right, lay.window_inert) == (None, None, True)
    assert any("at 8,192 queries and 8,192 keys it hides no key the mask shows" in n for n in lay.notes)
    assert "--window" not in lay.command()
    plain = resolve_layer(heads=32, kv_heads=32, head_dim=96, seqlen=8192, dtype="bf16")
    assert (make_worksheet(lay).to_dict()["algorithms"].keys() == make_worksheet(plain).to_dict()["algorithms"].keys())
    long = resolve_layer(config=path, seqlen=300_000)
    assert (long.spec.window_left, long.window_inert) == (262_143, False)
    assert resolve_layer(config=path, phase="decode", seqlen=4096, page_size=16).spec.page_size == 16
    # the rule: the first row's left edge and the last row's right reach outside the keys (top-left offset 0)
    assert window_masks_nothing(True, 8191, None, 8192, 8192, 0) and not window_masks_nothing(True, 8190, None, 8192,
                                                                                                 8192, 0)
    assert window_masks_nothing(False, 8191, 8191, 8192, 8192, 0)
    assert not window_masks_nothing(False, 8191, 8190, 8192, 8192, 0)
    assert window_masks_nothing(True, 65535, None, 1, 65536, 65535)  # decode, bottom-right: the whole cache
    # non-causal bottom-right: the alignment decides whether the window binds, so the Reproduce line keeps it (a
    # reviewer's finding: the line dropped it and a re-run, top-left, modelled a window)
    mistral = _write(tmp_path, {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                                "num_key_value_heads": 8, "num_hidden_layers": 32, "sliding_window": 4096,
                                "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}, "m.json")
    br = resolve_layer(config=mistral, seqlen_q=8192, seqlen_k=4096, causal=False, causal_align="bottom-right")
    assert br.window_inert and "--no-causal --causal-align bottom-right" in br.command()
    assert not resolve_layer(config=mistral, seqlen_q=8192, seqlen_k=4096, causal=False,
                             causal_align="top-left").window_inert


def test_a_wrapper_s_top_level_fields_are_not_the_language_model_s(tmp_path):
    """MusicFlamingo as transformers 5 saves it: the top level's head_dim 1280 is its audio rotary's; its Qwen2
    text_config gives none, so HEAD_DIM is 3584 / 28 = 128 (was 1280: ten times the K/V bytes; a fresh user's finding,
    twenty-fourth session), said, as is its top-level max_position_embeddings. A nested null language-model field is
    null (no window), not the wrapper's value; a top-level MLA field keeps its refusal. The dtype is the top level's
    first, under either spelling (transformers' dtype="auto" and vLLM read the root; a reviewer's finding: the nested
    one had won), said where the nested one differs."""
    path = _write(tmp_path, {"model_type": "musicflamingo", "dtype": "bfloat16", "head_dim": 1280,
                             "audio_config": {"model_type": "audioflamingo3_encoder", "num_attention_heads": 20,
                                              "hidden_size": 1280},
                             "text_config": {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
                                             "num_key_value_heads": 4, "num_hidden_layers": 28, "dtype": None}})
    cfg = load_config(path)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.dtype) == (28, 4, 128, "bf16")
    assert any(n.startswith("the top level gives head_dim, which the nested language-model config does not")
               for n in cfg.notes)
    mixed = _write(tmp_path, {"model_type": "qwen3_vl", "torch_dtype": "float32",
                              "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096,
                                              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                                              "num_hidden_layers": 36, "dtype": "bfloat16"}}, "m.json")
    cfg = load_config(mixed)
    assert cfg.dtype == "fp32"
    assert ("the nested config gives dtype 'bfloat16' and the top level torch_dtype 'float32': the top level's is "
            "used, as transformers (dtype='auto') and vLLM read it; pass --dtype for the other.") in cfg.notes
    same = load_config(_write(tmp_path, {"model_type": "blip-2", "torch_dtype": "float32", "text_config": {
        "model_type": "opt", "num_attention_heads": 32, "hidden_size": 2560, "torch_dtype": "float16"}}, "b.json"))
    assert same.dtype == "fp32"
    nested_only = load_config(_write(tmp_path, {"model_type": "qwen3_vl", "text_config": {
        "model_type": "qwen3_vl_text", "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
        "dtype": "bfloat16"}}, "n.json"))
    assert nested_only.dtype == "bf16"
    off = load_config(_write(tmp_path, {"model_type": "llava_next", "torch_dtype": "bfloat16", "sliding_window": 4096,
                                        "text_config": {"model_type": "mistral", "hidden_size": 4096,
                                                        "num_attention_heads": 32, "num_key_value_heads": 8,
                                                        "sliding_window": None}}, "o.json"))
    assert off.window is None and not any("the default of" in n for n in off.notes)
    with pytest.raises(IomodelError, match="'kv_lora_rank' = 512"):
        load_config(_write(tmp_path, {"model_type": "kimi_vl", "torch_dtype": "bfloat16", "kv_lora_rank": 512,
                                      "text_config": {"model_type": "deepseek_v3", "num_attention_heads": 16,
                                                      "hidden_size": 2048, "kv_lora_rank": 512}}, "k.json"))
    with pytest.raises(IomodelError, match="no 'kv_lora_rank': HF transformers' DeepseekV3Config defaults it to 512"):
        load_config(_write(tmp_path, {"model_type": "deepseek_v3", "num_attention_heads": 16, "hidden_size": 2048,
                                      "torch_dtype": "bfloat16"}, "d.json"))
    mf = load_config(_write(tmp_path, {"model_type": "musicflamingo", "dtype": "bfloat16",
                                       "max_position_embeddings": 1200, "text_config": {
                                           "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
                                           "num_key_value_heads": 4}}, "mf.json"))
    assert mf.max_position_embeddings != 1200


def test_layouts_the_hf_classes_derive_where_the_file_gives_none(tmp_path):
    """Fields a family's HF class fills in by default (a fresh user's findings, twenty-fourth session): Llama-4's
    attention_chunk_size 8192 and no_rope_layer_interval 4, an explicit no_rope_layers list, GPT-OSS's and OLMo-3's
    layer_types, Cohere2's sliding_window_pattern 4; Qwen2-MoE saved with sliding_window 0 (use_sliding_window false)
    and ModernBERT saved with layer_types and local_attention, both read as their original files are."""
    llama4 = {"model_type": "llama4", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "llama4_text", "num_attention_heads": 40, "num_key_value_heads": 8,
                              "head_dim": 128, "hidden_size": 5120, "num_hidden_layers": 48, "no_rope_layers": []}}
    cfg = load_config(_write(tmp_path, llama4, "l0.json"))
    assert (cfg.window, cfg.window_kind) == (8192, "chunked") and cfg.window_layers.startswith("36 of 48 layers")
    assert ("the file gives no 'attention_chunk_size': 8192, the default of HF transformers' Llama4TextConfig, as "
            "transformers reads the file.") in cfg.notes
    explicit = {**llama4, "text_config": {**llama4["text_config"], "attention_chunk_size": 8192,
                                          "no_rope_layers": [1] * 47 + [0]}}
    assert load_config(_write(tmp_path, explicit, "l1.json")).window_layers == \
        "47 of 48 layers (no_rope_layers): all but layer 47"
    longer = {**llama4, "text_config": {**llama4["text_config"], "num_hidden_layers": 4,
                                        "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0]}}
    assert load_config(_write(tmp_path, longer, "l3.json")).window_layers.startswith("3 of 4 layers (no_rope_layers)")
    nope = load_config(_write(tmp_path, {**llama4, "text_config": {**llama4["text_config"],
                                                                   "no_rope_layer_interval": 1}}, "l4.json"))
    assert nope.window is None and not any("attention_chunk_size" in n for n in nope.notes)
    every2 = {**llama4, "text_config": {**llama4["text_config"], "no_rope_layer_interval": 2}}
    assert load_config(_write(tmp_path, every2, "l2.json")).window_layers.startswith(
        "24 of 48 layers (Llama-4 interleaved RoPE/NoPE, no_rope_layer_interval 2): layers 0, 2")
    for fields, layers in (
            ({"model_type": "gpt_oss", "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
              "hidden_size": 2880, "num_hidden_layers": 36, "sliding_window": 128},
             "18 of 36 layers (the layer_types GptOssConfig derives)"),
            ({"model_type": "gpt_oss", "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
              "hidden_size": 2880, "num_hidden_layers": 24, "layer_types": None},  # null, and the class's window 128
             "12 of 24 layers (the layer_types GptOssConfig derives)"),
            ({"model_type": "olmo3", "num_attention_heads": 32, "hidden_size": 4096, "num_hidden_layers": 32,
              "sliding_window": 4096}, "24 of 32 layers (the layer_types Olmo3Config derives)"),
            ({"model_type": "cohere2", "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "num_hidden_layers": 32, "sliding_window": 4096}, "24 of 32 layers (the layer_types Cohere2Config derives)")):
        cfg = load_config(_write(tmp_path, {**fields, "torch_dtype": "bfloat16"}, "d.json"))
        assert cfg.window_layers.startswith(layers), fields["model_type"]
        assert any("without 'layer_types'" in n and "derives them" in n for n in cfg.notes)
    qwen2_moe = {"model_type": "qwen2_moe", "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584,
                 "num_hidden_layers": 28, "sliding_window": 0, "use_sliding_window": False, "torch_dtype": "bfloat16"}
    assert load_config(_write(tmp_path, qwen2_moe, "q.json")).window is None
    with pytest.raises(IomodelError, match="'sliding_window' must be a positive integer, got 0"):
        load_config(_write(tmp_path, {**qwen2_moe, "use_sliding_window": True}, "q1.json"))
    bert = {"model_type": "modernbert", "num_attention_heads": 12, "hidden_size": 768, "num_hidden_layers": 22,
            "global_attn_every_n_layers": 3, "local_attention": 128, "torch_dtype": "float32"}
    original = load_config(_write(tmp_path, bert, "b0.json"))
    resaved = load_config(_write(tmp_path, {**bert, "layer_types": [
        "full_attention" if i % 3 == 0 else "sliding_attention" for i in range(22)]}, "b1.json"))
    assert (original.window, original.window_kind) == (resaved.window, resaved.window_kind) == (
        64, "local (bidirectional, half the span each side)")
    assert resaved.window_layers.startswith("14 of 22 layers (layer_types)")


def test_a_top_left_chunk_over_a_longer_cache_and_an_inert_chunk_are_said(tmp_path):
    """Fewer queries than keys under the prefill's default top-left alignment: the keys no query sees are said with the
    flag for a chunked prefill (bottom-right; a fresh user's finding, the worksheet 18x apart between the two); none
    where the lengths are equal or bottom-right. Llama-4's chunked layers at lengths inside the chunk are said to be
    full attention there."""
    from iomodel.spec.resolve import resolve_layer

    def said(lay):
        return [n for n in lay.notes if "seen by no query" in n]

    lay = resolve_layer(heads=16, kv_heads=8, head_dim=128, seqlen_q=512, seqlen_k=8192, dtype="bf16")
    assert said(lay) == ["causal top-left (PyTorch is_causal, the prefill default) with fewer queries than keys: query "
                         "row m sees keys n <= m, so the last 7,680 of 8,192 keys are seen by no query. A chunk of new "
                         "queries over a longer KV cache (chunked prefill, prefix caching: FlashAttention >= 2.1, "
                         "vLLM) aligns bottom-right: pass --causal-align bottom-right for that layer."]
    assert not said(resolve_layer(heads=16, kv_heads=8, head_dim=128, seqlen_q=512, seqlen_k=8192, dtype="bf16",
                                  causal_align="bottom-right"))
    assert not said(resolve_layer(heads=16, kv_heads=8, head_dim=128, seqlen=8192, dtype="bf16"))
    ragged = resolve_layer(heads=16, kv_heads=8, head_dim=128, seqlens="512:8192,300", dtype="bf16")
    assert "(1 sequence of the batch; the first, 512 over 8,192)" in said(ragged)[0]
    fields = next(r[1] for r in REAL if r[0] == "meta-llama/Llama-4-Scout-17B-16E")
    lay = resolve_layer(config=_write(tmp_path, fields), seqlen=4096)
    assert any("chunked attention of 8,192 tokens on 36 of 48 layers" in n and "at 4,096 queries and 4,096 keys it "
               "hides no key the mask shows" in n for n in lay.notes)


def test_mla_and_quantized_checkpoints_are_refused_with_what_to_do(tmp_path):
    """MLA cannot be given by flags (the refusal says so); a checkpoint without torch_dtype but with a
    quantization_config (GPT-OSS's mxfp4) is told the activations' dtype to pass."""
    with pytest.raises(IomodelError, match="no flag expresses .* not this model's attention$"):
        load_config(_write(tmp_path, {"model_type": "deepseek_v3", "num_attention_heads": 128, "hidden_size": 7168,
                                      "kv_lora_rank": 512, "torch_dtype": "bfloat16"}))
    with pytest.raises(IomodelError, match=r"gives the weights' format, not the attention's Q, K and V: pass their "
                                           r"dtype, e\.g\. --dtype bf16\)$"):
        load_config(_write(tmp_path, {"model_type": "gpt_oss", "num_attention_heads": 64, "num_key_value_heads": 8,
                                      "head_dim": 64, "hidden_size": 2880, "num_hidden_layers": 36,
                                      "layer_types": ["sliding_attention", "full_attention"] * 18,
                                      "sliding_window": 128, "quantization_config": {"quant_method": "mxfp4"}},
                           "q.json"))


def test_jamba_defaults_and_nemotron_h_saved_by_transformers_5_say_their_attention_layers(tmp_path):
    """Jamba without attn_layer_offset (or period) takes JambaConfig's defaults, 8 and 4: attention on layers 4, 12,
    20, 28 of 32 (was 0, 8, 16, 24, or no note); Nemotron-H as transformers 5 saves it (``layers_block_type``, not
    ``hybrid_override_pattern``) says the same four layers of 52 as the original file."""
    jamba = {"model_type": "jamba", "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
             "num_hidden_layers": 32, "torch_dtype": "bfloat16"}
    for extra in ({}, {"attn_layer_period": 8}):
        cfg = load_config(_write(tmp_path, {**jamba, **extra}))
        assert any("4 of 32 layers are softmax attention (layers 4, 12, …, 28 (every 8th from 4))" in n
                   and "JambaConfig's default" in n for n in cfg.notes)
    pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    names = {"M": "linear_attention", "-": "mlp", "*": "full_attention"}
    base = {"model_type": "nemotron_h", "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "hidden_size": 4096, "num_hidden_layers": 52, "torch_dtype": "bfloat16"}
    said = []
    for fields in ({"hybrid_override_pattern": pattern}, {"layers_block_type": [names[c] for c in pattern]}):
        cfg = load_config(_write(tmp_path, {**base, **fields}, "n.json"))
        said.append(next(n.split(": ", 1)[1] for n in cfg.notes if "softmax attention" in n))
    assert said[0] == said[1] and said[0].startswith("4 of 52 layers are softmax attention (layers 7, 18, …, 40")


@pytest.mark.parametrize("fields, said", [
    ({"model_type": "jamba", "attn_layer_period": "8"}, "'attn_layer_period' must be a positive integer, got the string"),
    ({"model_type": "jamba", "attn_layer_period": -8}, "'attn_layer_period' must be a positive integer, got -8"),
    ({"model_type": "jamba", "attn_layer_offset": "4"}, "'attn_layer_offset' must be a whole number from 0, got the string"),
    ({"model_type": "jamba", "attn_layer_offset": -1}, "'attn_layer_offset' must be a whole number from 0, got -1"),
    ({"model_type": "nemotron_h", "layers_block_type": ["mamba", 3]}, "'layers_block_type' must be a non-empty list"),
    ({"model_type": "nemotron_h", "layers_block_type": "mamba"}, "'layers_block_type' must be a non-empty list"),
    ({"model_type": "llama4_text", "no_rope_layers": "x"}, "'no_rope_layers' must be a list of 1"),
])
def test_the_derived_layouts_fields_refuse_wrong_types_in_one_line(tmp_path, fields, said):
    """The layout fields read since the twenty-fourth session were silently ignored when of the wrong type (a string
    period, a negative one, a string no_rope_layers, a list with a number among block names)."""
    base = {"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
            "num_hidden_layers": 32, "torch_dtype": "bfloat16"}
    with pytest.raises(IomodelError, match=said) as exc:
        load_config(_write(tmp_path, {**base, **fields}))
    assert "\n" not in str(exc.value)


def test_zamba2_s_layers_block_type_is_not_read_as_nemotron_h_s(tmp_path):
    """Zamba2's layers_block_type names 'hybrid' blocks (its shared attention); read as Nemotron-H's list it had no
    attention layer and the file was refused (a regression of this session's Nemotron-H reading, found on review)."""
    cfg = load_config(_write(tmp_path, {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32,
                                        "num_key_value_heads": 32, "num_hidden_layers": 6, "torch_dtype": "bfloat16",
                                        "layers_block_type": ["mamba", "mamba", "hybrid"] * 2}))
    assert (cfg.heads, cfg.head_dim) == (32, 160)
    for bad in ([6, 99], [6, 6], [-1], [], ["6"], 5):  # a fresh user: out of range, repeated or empty ids were read
        with pytest.raises(IomodelError, match="'hybrid_layer_ids' must be a non-empty list of distinct layer indices "
                                               "from 0 to 53"):
            load_config(_write(tmp_path, {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32,
                                          "num_hidden_layers": 54, "torch_dtype": "bfloat16", "hybrid_layer_ids": bad}))
    # the hybrid layers are its attention layers, said (a fresh user, 2026-12-07: the worksheet said nothing of them)
    assert "layers_block_type ('hybrid': the layers that run the shared attention block): 2 of 6 layers are softmax " \
           "attention (layers 2, 5)" in " ".join(cfg.notes)
    ids = load_config(_write(tmp_path, {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32,
                                        "num_hidden_layers": 54, "torch_dtype": "bfloat16",
                                        "hybrid_layer_ids": [6, 12, 18, 24, 30, 36, 42, 47, 51]}))
    assert "hybrid_layer_ids (the layers that run the shared attention block): 9 of 54 layers are softmax attention" \
        in " ".join(ids.notes)


def test_every_hybrid_s_list_of_attention_layers_is_read_strictly(tmp_path):
    """Bamba's attn_layer_indices, LFM2's full_attn_idxs and StripedHyena's attn_layer_idxs are checked as Zamba's
    hybrid_layer_ids are (they dropped a non-integer id silently and took out-of-range or repeated ones: a string id
    '9' made 2 of 32 layers attention where the file says 3); null stays absent."""
    base = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
            "torch_dtype": "bfloat16"}
    for key in ("attn_layer_indices", "full_attn_idxs", "attn_layer_idxs"):
        for bad in ([9, "18", 27], [9, 32], [9, 9], [-1], [], [1.5], "9,18", True):
            with pytest.raises(IomodelError, match=f"'{key}' must be a non-empty list of distinct layer indices from 0 "
                                                   "to 31, got"):
                load_config(_write(tmp_path, {**base, key: bad}))
        cfg = load_config(_write(tmp_path, {**base, key: [27, 9, 18]}))
        assert f"{key}: 3 of 32 layers are softmax attention (layers 9, 18, 27)" in " ".join(cfg.notes)
    assert not any("softmax attention" in n for n in load_config(_write(tmp_path, {**base, "full_attn_idxs": None})).notes)
    # Nemotron-H's pattern and MiniMax's attn_type_list: a wrong type was taken for no hybrid layout at all
    for bad in ("", 5, ["M", "*"]):
        with pytest.raises(IomodelError, match="'hybrid_override_pattern' must be a non-empty string of layer kinds"):
            load_config(_write(tmp_path, {**base, "hybrid_override_pattern": bad}))
    for bad in ([], [0, 2], [0, "1"], [0, True], [0, 1.0], "0101"):
        with pytest.raises(IomodelError, match="'attn_type_list' must be a non-empty list of 0 .linear attention. and 1"):
            load_config(_write(tmp_path, {**base, "attn_type_list": bad}))
    four = {**base, "num_hidden_layers": 4}
    assert "hybrid_override_pattern: 2 of 4 layers are softmax attention" in " ".join(
        load_config(_write(tmp_path, {**four, "hybrid_override_pattern": "M*-*"})).notes)
    assert "attn_type_list (1: softmax): 1 of 4 layers are softmax attention" in " ".join(
        load_config(_write(tmp_path, {**four, "attn_type_list": [0, 0, 0, 1]})).notes)
    # one kind a layer (HF NemotronHConfig asserts it; a reviewer, 2026-12-07: 4 kinds for 32 layers said "2 of 4")
    with pytest.raises(IomodelError, match="'hybrid_override_pattern' has 4 layer kinds for 32 layers"):
        load_config(_write(tmp_path, {**base, "hybrid_override_pattern": "M*-*"}))
    with pytest.raises(IomodelError, match="'attn_type_list' has 4 entries for 32 layers"):
        load_config(_write(tmp_path, {**base, "attn_type_list": [0, 0, 0, 1]}))
    with pytest.raises(IomodelError, match="'attention_types' gives 22 layers' kinds for 24 layers"):
        load_config(_write(tmp_path, {"model_type": "gpt_neo", "hidden_size": 2048, "num_heads": 16, "num_layers": 24,
                                      "window_size": 256, "attention_types": [[["global", "local"], 11]],
                                      "torch_dtype": "float32"}))


def test_a_bidirectional_local_window_is_said_as_tokens_each_side(tmp_path):
    """ModernBERT's local_attention 128 is 64 keys each side of the query: the refusal says "64 tokens each side",
    not "64 tokens" (a reader takes that for the span); a causal sliding window keeps "N tokens"."""
    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, {"model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12,
                             "num_hidden_layers": 22, "global_attn_every_n_layers": 3, "local_attention": 128,
                             "torch_dtype": "float32"})
    cfg = load_config(path)
    assert (cfg.window, cfg.window_words()) == (64, "64 tokens each side")
    with pytest.raises(IomodelError, match=r"attention \(64 tokens each side on 14 of 22 layers"):
        resolve_layer(config=path, seqlen=4096)
    lay = resolve_layer(config=path, seqlen=64)
    assert any("attention of 64 tokens each side on 14 of 22 layers" in n for n in lay.notes)
    mistral = load_config(_write(tmp_path, {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                                            "num_key_value_heads": 8, "sliding_window": 4096, "torch_dtype": "bfloat16"},
                                           "m.json"))
    assert mistral.window_words() == "4,096 tokens"


def test_qwen2_sliding_layers_follow_the_class_defaults_and_other_families_ignore_the_flag(tmp_path):
    """A fresh user's silent misreads (2026-12-07): a Qwen2 file with use_sliding_window true and no
    max_window_layers slid every layer (HF Qwen2Config defaults max_window_layers to 28 and slides layers 28 and up:
    none of 28); Qwen2-MoE slides the even layers below max_window_layers (Qwen2MoeConfig.__post_init__); a stray
    use_sliding_window false on a family whose class does not read it (Mistral) dropped the window."""
    qwen2 = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
             "num_hidden_layers": 28, "torch_dtype": "bfloat16", "use_sliding_window": True, "sliding_window": 4096}
    cfg = load_config(_write(tmp_path, qwen2))
    assert cfg.window is None
    assert "'use_sliding_window' true but no layer slides: Qwen2Config's default max_window_layers 28: the file " \
           "gives none, and HF transformers' Qwen2Config slides layers 28 and up, of 28." in cfg.notes
    cfg = load_config(_write(tmp_path, {**qwen2, "num_hidden_layers": 48}))
    assert cfg.window == 4096 and cfg.window_layers.startswith(
        "20 of 48 layers (Qwen2Config's default max_window_layers 28: the file gives none): layers 28")
    moe = load_config(_write(tmp_path, {**qwen2, "model_type": "qwen2_moe", "num_hidden_layers": 48}))
    assert moe.window == 4096 and moe.window_layers.startswith(
        "14 of 48 layers (the even layers below 28: Qwen2MoeConfig's default max_window_layers 28: the file gives "
        "none, as Qwen2MoeConfig derives them): layers 0, 2,")
    moe = load_config(_write(tmp_path, {**qwen2, "model_type": "qwen2_moe", "max_window_layers": 5}))
    assert moe.window_layers.startswith("3 of 28 layers (the even layers below 5: max_window_layers")
    mistral = {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_hidden_layers": 32, "torch_dtype": "bfloat16", "sliding_window": 4096}
    assert load_config(_write(tmp_path, {**mistral, "use_sliding_window": False})).window == 4096
    assert "'use_sliding_window' = false is not read for model_type 'mistral' (HF transformers' MistralConfig has no " \
           "such field): its 'sliding_window' applies." in load_config(
               _write(tmp_path, {**mistral, "use_sliding_window": False})).notes
    assert load_config(_write(tmp_path, {**mistral, "model_type": "qwen2", "use_sliding_window": False})).window is None
    # nor max_window_layers (a reviewer: layers 16-31 slid), and a family not known to ignore the flag takes it as
    # said (Qwen2.5-Omni's text config: sliding_window = None unless use_sliding_window)
    on = load_config(_write(tmp_path, {**mistral, "use_sliding_window": True, "max_window_layers": 16}))
    assert on.window == 4096 and on.window_layers.startswith("all 32 layers")
    assert load_config(_write(tmp_path, {**mistral, "model_type": "qwen2_5_omni_text",
                                         "use_sliding_window": False})).window is None
    # Qwen3 as Qwen2 (default 28), Qwen3-MoE every layer (its class reads no max_window_layers), 0: every layer
    q3 = load_config(_write(tmp_path, {**qwen2, "model_type": "qwen3", "num_hidden_layers": 36}))
    assert q3.window_layers.startswith("8 of 36 layers (Qwen3Config's default max_window_layers 28")
    q3m = load_config(_write(tmp_path, {**qwen2, "model_type": "qwen3_moe", "num_hidden_layers": 48,
                                        "max_window_layers": 48}))
    assert q3m.window == 4096 and q3m.window_layers == "all 48 layers (Qwen3MoeConfig reads no max_window_layers)"
    assert load_config(_write(tmp_path, {**qwen2, "max_window_layers": 0})).window_layers.startswith("28 of 28 layers")
    # a negative count: one line that says 0 is allowed (it said "a positive integer" though 0 is taken)
    for bad, said in ((-3, "-3"), (None, "null"), (3.0, "3.0"), (True, "the boolean true")):
        with pytest.raises(IomodelError, match=r"'max_window_layers' must be a whole number, 0 or more \(0: every "
                                               r"layer slides; leave it out for Qwen2Config's default\), got "
                                               + said + ": fix the file"):
            load_config(_write(tmp_path, {**qwen2, "max_window_layers": bad}))
    # past the layers: no layer slides, said (a fresh user: silent where a default past them was said)
    none = load_config(_write(tmp_path, {**qwen2, "max_window_layers": 100}))
    assert none.window is None and "'use_sliding_window' true but no layer slides: max_window_layers = 100, and HF " \
        "transformers' Qwen2Config slides layers 100 and up, of 28." in none.notes
    # the flag on and the size left out: the class default, said
    bare = load_config(_write(tmp_path, {k: v for k, v in {**qwen2, "num_hidden_layers": 48}.items()
                                         if k != "sliding_window"}))
    assert bare.window == 4096 and any(n.startswith("the file gives no 'sliding_window': 4096, the default of HF "
                                                    "transformers' Qwen2Config") for n in bare.notes)


def test_a_vision_towers_head_dim_is_its_own_width_over_its_heads(tmp_path):
    """Qwen2-VL's vision_config gives embed_dim 1280 (its attention: 16 heads of 80) and hidden_size 3584 (the
    language model's width): the note said HEAD_DIM 224."""
    vl = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
          "num_hidden_layers": 28, "torch_dtype": "bfloat16",
          "vision_config": {"embed_dim": 1280, "num_heads": 16, "hidden_size": 3584, "depth": 32}}
    assert any(n.startswith("vision_config (16 heads, HEAD_DIM 80): another tower") for n in
               load_config(_write(tmp_path, vl)).notes)


def test_notes_on_an_fp32_checkpoint_sinks_and_an_8_bit_kv_cache(tmp_path):
    """Gemma-2's published file says float32 (modelled at 4 bytes, 3.9x a served layer's bytes, with nothing said);
    GPT-OSS's sinks; an 8-bit KV cache's note advised --dtype fp8_e4m3 alone, which the bundled kernel refuses."""
    gemma2 = {"model_type": "gemma2", "hidden_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 256, "num_hidden_layers": 42, "torch_dtype": "float32", "sliding_window": 4096}
    cfg = load_config(_write(tmp_path, gemma2))
    assert cfg.dtype == "fp32"
    assert any(n.startswith("'torch_dtype' = 'float32': the checkpoint is stored in 32 bits, and the attention is "
                            "modelled at 4 bytes an element") and "pass --dtype bf16 or fp16" in n for n in cfg.notes)
    assert not any("32 bits" in n for n in load_config(_write(tmp_path, {**gemma2, "torch_dtype": "bfloat16"})).notes)
    oss = {"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
           "head_dim": 64, "num_hidden_layers": 24, "torch_dtype": "bfloat16", "sliding_window": 128}
    assert any(n.startswith("model_type 'gpt_oss': each head adds a learned sink logit") for n in
               load_config(_write(tmp_path, oss)).notes)
    fp8 = {**oss, "model_type": "llama", "sliding_window": None,
           "quantization_config": {"kv_cache_scheme": {"num_bits": 8, "type": "float"}}}
    note = next(n for n in load_config(_write(tmp_path, fp8)).notes if "kv_cache_scheme" in n)
    assert "--dtype fp8_e4m3 with --block-m and --block-n (no bundled kernel runs 8 bits)" in note
    # passed, the note's advice is taken: it is not repeated beside 8-bit K and V (a fresh user, 2026-12-07)
    assert not any("kv_cache_scheme" in n for n in load_config(_write(tmp_path, fp8), dtype="fp8_e4m3").notes)


@pytest.mark.parametrize("argv, fragment", [
    (["--seqlen", "20000"], "a ragged batch of its chunks: --seqlens '8192*2,3616' --window none"),
    (["--phase", "decode", "--seqlen", "40000"], "a decode query sees the 7,232 keys of the last chunk: model that "
                                                  "with --seqlen 7232 --window none"),
    (["--phase", "decode", "--seqlen", "16384"], "sees the 8,192 keys of the last chunk"),
    (["--phase", "decode", "--seqlen", "40961"], "a decode query sees the 1 key of the last chunk"),
    (["--seqlen", "20000", "--batch", "4"], "--seqlens '8192*8,3616*4' --window none (in place of --batch and --seqlen"),
    (["--seqlen-q", "100", "--seqlen-k", "20000", "--causal-align", "bottom-right"],
     "its 100 queries (all in the last chunk) see the 3,616 keys of the last chunk: model that with --seqlen-q 100 "
     "--seqlen-k 3616 --window none"),
    (["--seqlen-q", "100", "--seqlen-k", "20000"], "model each chunk as its own layer (--seqlen-q/--seqlen-k"),
    (["--seqlen", "20000", "--pass", "fwd+bwd"], "(a training step's chunks: one causal layer of each length)"),
])
def test_a_chunked_layer_past_its_chunk_is_refused_with_the_chunks_not_a_band(capsys, tmp_path, argv, fragment):
    """Llama-4's chunked attention past 8,192 tokens: the refusal used to suggest --window L,R (a band, 49 % more
    bytes than the chunks at 16k); it now gives the chunks as a ragged batch, or a decode query's own chunk."""
    from test_cli_errors import assert_one_line_error

    l4 = {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
          "head_dim": 128, "num_hidden_layers": 48, "torch_dtype": "bfloat16", "attention_chunk_size": 8192}
    line = assert_one_line_error(capsys, ["worksheet", "--config", str(_write(tmp_path, l4)), *argv], fragment)
    assert "a --window band is not a chunk" in line and "L,R: a band" not in line


def test_a_model_folder_reads_its_config_json_and_minus_o_cannot_replace_it(capsys, tmp_path):
    """--config MODEL_DIR (a snapshot folder) reads MODEL_DIR/config.json (was refused as a folder); -o naming that
    file is refused as the input it is; a folder without one is still one clear line."""
    from test_cli_errors import assert_one_line_error, run_cli

    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    fields = {"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "num_hidden_layers": 36, "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(fields))
    cfg = load_config(folder)
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.name) == (32, 8, 128, "Qwen3-8B")
    code, out, _ = run_cli(capsys, ["worksheet", "--config", str(folder), "--seqlen", "1024"])
    assert code == 0 and "Qwen3-8B" in out
    assert_one_line_error(capsys, ["worksheet", "--config", str(folder), "-o", str(folder / "config.json")],
                          "is the --config file this command reads")
    assert json.loads((folder / "config.json").read_text()) == fields
    assert_one_line_error(capsys, ["worksheet", "--config", str(tmp_path)], "is a folder: pass --config")


def test_the_worksheet_json_says_which_layers_of_a_config_it_models(capsys, tmp_path):
    """For scripts: a model with mixed layers (GPT-OSS: a 128-token window on 12 of 24) says in the JSON which kind of
    layer the worksheet is (a fresh user: only the notes said it)."""
    from test_cli_errors import run_cli

    oss = {"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
           "head_dim": 64, "num_hidden_layers": 24, "torch_dtype": "bfloat16", "sliding_window": 128}
    path = str(_write(tmp_path, oss))
    got = {}
    for extra, key in (([], "window"), (["--window", "none"], "full"), (["--seqlen", "100"], "inert")):
        code, out, _ = run_cli(capsys, ["worksheet", "--config", path, "--format", "json", *extra])
        assert code == 0
        got[key] = json.loads(out)["worksheet"]["config_layers"]
    assert got["window"] == {"num_layers": 24, "layer_stack": None, "window_kind": "sliding-window", "window_tokens": 128,
                             "window_layers": "12 of 24 layers (the layer_types GptOssConfig derives): layers 0, 2, "
                                              "…, 22 (every 2nd from 0)", "modelled": "window"}
    assert (got["full"]["modelled"], got["inert"]["modelled"]) == ("full attention", "full attention, the window inert")
    code, out, _ = run_cli(capsys, ["worksheet", "--heads", "8", "--format", "json"])
    assert code == 0 and json.loads(out)["worksheet"]["config_layers"]["modelled"] == "full attention"


def test_a_bidirectional_local_window_binds_past_its_reach_and_says_its_band(capsys, tmp_path):
    """ModernBERT's local_attention 128: each query sees the keys within 64 of it (HF: distance <= local_attention //
    2), so nothing is masked up to 65 tokens (was refused at 65), and the refusal gives the band (--window 64,64)
    instead of the generic L,R advice. Baichuan2-13B gives its context only as model_max_length (no note before)."""
    from iomodel.spec.resolve import resolve_layer
    from test_cli_errors import assert_one_line_error

    mb = _write(tmp_path, {"model_type": "modernbert", "hidden_size": 1024, "num_attention_heads": 16,
                           "num_hidden_layers": 28, "global_attn_every_n_layers": 3, "local_attention": 128,
                           "torch_dtype": "float32", "max_position_embeddings": 8192})
    assert resolve_layer(config=mb, seqlen=65).spec.seqlen_q == 65
    line = assert_one_line_error(capsys, ["worksheet", "--config", str(mb), "--seqlen", "66"], "masks keys at 66 tokens")
    assert "pass --window 64,64 for those layers (each query sees the keys within 64 of it), --window none for the " \
           "global ones, or use --seqlen 65 or less" in line
    assert resolve_layer(config=mb, seqlen=8192, window="64,64").spec.window_left == 64
    baichuan = {"model_type": "baichuan", "hidden_size": 5120, "num_attention_heads": 40, "num_hidden_layers": 40,
                "model_max_length": 4096, "torch_dtype": "bfloat16"}
    lay = resolve_layer(config=_write(tmp_path, baichuan, "b.json"), seqlen=8192)
    assert any("exceeds the model's context window" in n and "4,096" in n for n in lay.notes), lay.notes


def test_a_decode_of_an_encoder_config_says_what_it_models(tmp_path):
    """BERT has no KV cache: --phase decode modelled a causal decode with the encoder's note gone (a fresh user,
    2026-12-07); it is said now."""
    from iomodel.spec.resolve import resolve_layer

    bert = _write(tmp_path, {"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
                             "num_hidden_layers": 12, "torch_dtype": "float32", "max_position_embeddings": 512})
    lay = resolve_layer(config=bert, phase="decode", seqlen=512)
    assert "'model_type' = 'bert': an encoder, whose self-attention is bidirectional: a decode step is a causal " \
           "decoder's (an encoder keeps no KV cache): modelled as a causal KV-cache decode of these sizes." in lay.notes
    assert not any("decode step" in n for n in resolve_layer(config=bert, seqlen=512).notes)


def test_config_layers_of_a_ragged_batch_and_of_a_chunk_the_layer_does_not_outgrow(capsys, tmp_path):
    """A fresh user: the ragged worksheet's JSON had no config_layers, and a chunked layer within its chunk said
    'full attention' where a sliding window says 'the window inert'."""
    from test_cli_errors import run_cli

    l4 = {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
          "head_dim": 128, "num_hidden_layers": 48, "torch_dtype": "bfloat16", "attention_chunk_size": 8192}
    path = str(_write(tmp_path, l4))
    for extra in (["--seqlen", "4096"], ["--seqlens", "8192*2,3616", "--window", "none"]):
        code, out, _ = run_cli(capsys, ["worksheet", "--config", path, "--format", "json", *extra])
        assert code == 0
        got = json.loads(out)["worksheet"]["config_layers"]
        assert (got["window_kind"], got["window_tokens"], got["modelled"]) == (
            "chunked", 8192, "full attention, the window inert"), (extra, got)


def test_a_vision_encoder_decoders_decoder_sizes_are_named(tmp_path):
    """TrOCR: the decoder sub-config gives decoder_attention_heads (16) and d_model (1024), not num_attention_heads;
    the note named no sizes, and a decode modelled the ViT encoder's 12 heads without a word (a fresh user,
    2026-12-07). The decoder's sizes are named now, and a decode says what it models."""
    from iomodel.spec.resolve import resolve_layer

    trocr = _write(tmp_path, {
        "model_type": "vision-encoder-decoder", "is_encoder_decoder": True, "torch_dtype": "float16",
        "encoder": {"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12},
        "decoder": {"model_type": "trocr", "d_model": 1024, "decoder_attention_heads": 16, "decoder_layers": 12}})
    lay = resolve_layer(config=trocr, phase="decode", seqlen=512)
    assert any("the decoder's self-attention is causal (16 heads, 16 KV heads, HEAD_DIM 64: pass --causal --heads 16 "
               "--kv-heads 16 --head-dim 64 to model it)" in n for n in lay.notes)
    assert any("a decode step is a causal decoder's (an encoder keeps no KV cache)" in n for n in lay.notes)
    dec = resolve_layer(config=trocr, phase="decode", seqlen=512, heads=16, kv_heads=16, head_dim=64)
    assert (dec.spec.heads, dec.spec.head_dim) == (16, 64)


def test_mpt_llm_foundry_sliding_window_is_read(tmp_path):
    """llm-foundry's MPT sets ``attn_config.sliding_window_size`` (default -1, off) and passes flash-attn
    ``window_size = (s, s)``: a query sees the s keys before it and itself (it was dropped silently: round 4's
    leftover). -1 is no window; another non-positive size is one error line."""
    from iomodel.errors import IomodelError
    from iomodel.spec.resolve import resolve_layer

    base = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32, "max_seq_len": 8192,
            "torch_dtype": "bfloat16"}
    lay = resolve_layer(config=_write(tmp_path, {**base, "attn_config": {"sliding_window_size": 1024}}), seqlen=4096)
    assert (lay.spec.window_left, lay.spec.window_right) == (1024, None) and lay.spec.causal
    assert any("attn_config.sliding_window_size = 1024" in n for n in lay.notes)
    off = resolve_layer(config=_write(tmp_path, {**base, "attn_config": {"sliding_window_size": -1}}), seqlen=4096)
    assert off.spec.window_left is None
    with pytest.raises(IomodelError, match="'attn_config.sliding_window_size' must be a positive integer, got -5"):
        resolve_layer(config=_write(tmp_path, {**base, "attn_config": {"sliding_window_size": -5}}), seqlen=4096)


def test_an_encoder_decoders_decode_note_does_not_ask_for_causal(tmp_path):
    """A decode step of an encoder-decoder is already the decoder's causal layer: its note said "pass --causal for it"
    all the same (round 4's leftover). The prefill's note keeps the advice."""
    from iomodel.spec.resolve import resolve_layer

    whisper = _write(tmp_path, {"model_type": "whisper", "is_encoder_decoder": True, "d_model": 1280,
                                "encoder_attention_heads": 20, "decoder_attention_heads": 20, "encoder_layers": 32,
                                "decoder_layers": 4, "max_source_positions": 1500, "max_target_positions": 448,
                                "torch_dtype": "float16"})
    dec = resolve_layer(config=whisper, phase="decode", seqlen=400)
    note = next(n for n in dec.notes if n.startswith("'is_encoder_decoder' = true"))
    assert note == ("'is_encoder_decoder' = true: the encoder's self-attention is bidirectional: a decode step is a "
                    "causal decoder's (an encoder keeps no KV cache): modelled as a causal KV-cache decode of these "
                    "sizes.")
    pre = resolve_layer(config=whisper, seqlen=400)
    assert any("(the decoder's is causal: pass --causal for it): modelled without a causal mask" in n
               for n in pre.notes)


def test_a_decode_of_an_encoder_decoder_is_held_to_the_decoders_context(tmp_path):
    """Whisper: max_source_positions 1500 (the encoder's frames), max_target_positions 448 (the decoder's tokens):
    a decode at 1,000 keys said nothing (a fresh user, 2026-12-07)."""
    from iomodel.spec.resolve import resolve_layer

    wh = _write(tmp_path, {"model_type": "whisper", "d_model": 1280, "encoder_attention_heads": 20,
                           "decoder_attention_heads": 20, "encoder_layers": 32, "decoder_layers": 32,
                           "max_source_positions": 1500, "max_target_positions": 448, "torch_dtype": "float16",
                           "is_encoder_decoder": True})
    assert any("exceeds the model's context window (max_target_positions = 448, the decoder's)" in n
               for n in resolve_layer(config=wh, phase="decode", seqlen=1000).notes)
    assert not any("context window" in n for n in resolve_layer(config=wh, phase="decode", seqlen=400).notes)
    assert any("(max_source_positions = 1,500)" in n for n in resolve_layer(config=wh, seqlen=2000).notes)
    # the decoder's prefill (--causal, as the note advises) is the decoder's too: held to its 448 tokens
    assert any("(max_target_positions = 448, the decoder's)" in n
               for n in resolve_layer(config=wh, seqlen=1000, causal=True).notes)


def test_a_decoder_layer_of_an_encoder_decoder_says_its_cross_attention(tmp_path):
    """Whisper's decoder layers also attend to the encoder's 1,500 frames (cross-attention): a decode step or a
    causal (decoder) prefill of the file said nothing of it (lead of 2026-12-07); the note gives the sizes to model it
    without the file (whose context check is the decoder's 448); the encoder's own layer gets no such note. T5
    (relative positions, no context): the encoder's length is the input's."""
    from iomodel.spec.resolve import resolve_layer

    wh = _write(tmp_path, {"model_type": "whisper", "d_model": 1280, "encoder_attention_heads": 20,
                           "decoder_attention_heads": 20, "encoder_layers": 32, "decoder_layers": 4,
                           "max_source_positions": 1500, "max_target_positions": 448, "torch_dtype": "float16",
                           "is_encoder_decoder": True})

    def cross(**kw):
        return [n for n in resolve_layer(config=wh, **kw).notes if "cross-attention" in n]

    (dec,) = cross(phase="decode", seqlen=400)
    assert "(up to 1500 positions, the encoder's context)" in dec
    assert dec.endswith("--heads 20 --kv-heads 20 --head-dim 64 --dtype fp16 --phase decode --seqlen-k 1500.")
    (pre,) = cross(seqlen=300, causal=True)
    assert pre.endswith("--dtype fp16 --no-causal --seqlen-q 300 --seqlen-k 1500.")
    assert cross(seqlen=1500) == []
    t5 = _write(tmp_path, {"model_type": "t5", "d_model": 512, "d_kv": 64, "num_heads": 8, "num_layers": 6,
                           "num_decoder_layers": 6, "relative_attention_num_buckets": 32, "is_encoder_decoder": True,
                           "torch_dtype": "float32"})
    (t5n,) = [n for n in resolve_layer(config=t5, phase="decode", seqlen=100).notes if "cross-attention" in n]
    assert "(as long as the encoder's input)" in t5n and t5n.endswith("--phase decode --seqlen-k N_enc.")


@pytest.mark.parametrize("value", [["llama"], {"a": 1}, 5, True])
def test_a_model_type_that_is_not_a_name_is_one_line(capsys, tmp_path, value):
    """A list model_type raised TypeError (unhashable) from the family lookups: a traceback."""
    from test_cli_errors import assert_one_line_error

    path = _write(tmp_path, {"model_type": value, "hidden_size": 64, "num_attention_heads": 4,
                             "torch_dtype": "bfloat16", "sliding_window": 16})
    assert_one_line_error(capsys, ["worksheet", "--config", str(path)], "'model_type' must be a family name")


def test_a_decode_of_an_encoder_decoder_counts_the_decoders_layers(tmp_path):
    """Whisper-large-v3-turbo: 32 encoder layers (num_hidden_layers, encoder_layers) and 4 decoder layers: the
    worksheet JSON's config_layers said 32 for a decode step (a fresh user, 2026-12-07); a decode runs the decoder's
    4, a prefill keeps the file's count."""
    import json as _json

    from iomodel.report.worksheet import make_worksheet
    from iomodel.spec.resolve import resolve_layer

    wh = _write(tmp_path, {"model_type": "whisper", "d_model": 1280, "encoder_attention_heads": 20,
                           "decoder_attention_heads": 20, "encoder_layers": 32, "decoder_layers": 4,
                           "num_hidden_layers": 32, "max_source_positions": 1500, "max_target_positions": 448,
                           "torch_dtype": "float16", "is_encoder_decoder": True})
    assert load_config(wh).decoder_layers == 4 and load_config(wh).num_layers == 32

    def layers(**kw):
        doc = _json.loads(make_worksheet(resolve_layer(config=wh, **kw)).to_json())
        got = doc["worksheet"]["config_layers"]
        return got["num_layers"], got["layer_stack"]

    assert layers(phase="decode", seqlen=400) == (4, "decoder")
    assert layers(seqlen=1500) == (32, None)
    assert layers(seqlen=400, causal=True) == (4, "decoder")  # the decoder's prefill, as the note advises (--causal)


def test_the_towers_inside_an_omni_thinker_are_noted(tmp_path):
    """Qwen2.5-Omni keeps its vision and audio encoders beside the language model inside thinker_config: they were
    not named (a fresh user, 2026-12-07), where Qwen2-VL's top-level vision_config is."""
    omni = {"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
            "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                               "text_config": {"model_type": "qwen2_5_omni_text", "hidden_size": 3584,
                                               "num_attention_heads": 28, "num_key_value_heads": 4},
                               "vision_config": {"embed_dim": 1280, "num_heads": 16, "hidden_size": 3584},
                               "audio_config": {"d_model": 1280, "encoder_attention_heads": 20}}}
    cfg = load_config(_write(tmp_path, omni))
    assert (cfg.heads, cfg.kv_heads, cfg.head_dim) == (28, 4, 128)
    note = next(n for n in cfg.notes if "another tower of this model" in n)
    assert note.startswith("audio_config (20 heads, HEAD_DIM 64), vision_config (16 heads, HEAD_DIM 80): another tower")
    assert not any("talker" in n for n in cfg.notes)
    # its speech talker, a second causal decoder beside the thinker (Qwen2.5-Omni-7B's config.json: 12 heads, 4 KV
    # heads, head_dim 128 on hidden_size 896), was not named (lead of 2026-12-07); Qwen3-Omni nests its text_config
    talker = {"model_type": "qwen2_5_omni_talker", "hidden_size": 896, "num_attention_heads": 12,
              "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 24}
    for given in (talker, {"text_config": talker}):
        (said,) = [n for n in load_config(_write(tmp_path, {**omni, "talker_config": given})).notes if "talker" in n]
        assert said.startswith("'talker_config' (12 heads, 4 KV heads, HEAD_DIM 128): a second causal decoder")
        assert "pass --heads 12 --kv-heads 4 --head-dim 128 (without --config)" in said
    (bare,) = [n for n in load_config(_write(tmp_path, {**omni, "talker_config": {"hidden_size": 896}})).notes
               if "talker" in n]
    assert bare.startswith("'talker_config': a second causal decoder") and "pass its --heads/--kv-heads/--head-dim" in bare


def test_round_four_of_config_files_from_the_wild(tmp_path):
    """A fresh user's fourth round (2026-12-07, twenty-eighth session): each was read silently wrong, refused wrongly
    or accepted malformed."""
    from iomodel.spec.resolve import resolve_layer

    # Deformable DETR and Grounding DINO: multi-scale deformable attention (no QK^T) was modelled as dense attention
    with pytest.raises(IomodelError, match="model_type 'deformable_detr': Deformable DETR's multi-scale deformable"):
        load_config(_write(tmp_path, {"model_type": "deformable_detr", "d_model": 256, "encoder_attention_heads": 8,
                                      "decoder_attention_heads": 8, "encoder_layers": 6, "decoder_layers": 6,
                                      "is_encoder_decoder": True, "torch_dtype": "float32"}))
    with pytest.raises(IomodelError, match="model_type 'grounding-dino': Grounding DINO's"):  # its BERT text_config
        load_config(_write(tmp_path, {"model_type": "grounding-dino", "d_model": 256, "torch_dtype": "float32",
                                      "text_config": {"model_type": "bert", "hidden_size": 768,
                                                      "num_attention_heads": 12}}))
    # SAM's ViT (SamVisionConfig saves no architectures): modelled causal with no note; now an encoder, its windows said
    sam = load_config(_write(tmp_path, {"model_type": "sam_vision_model", "hidden_size": 768, "num_attention_heads": 12,
                                        "num_hidden_layers": 12, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11],
                                        "use_rel_pos": True, "torch_dtype": "float32"}))
    assert not sam.causal_default
    assert any(n.startswith("window_size 14: the 8 layers not in global_attn_indexes [2, 5, 8, 11] attend within "
                            "windows of 14 x 14 patches (196 tokens") for n in sam.notes)
    # a family iomodel does not know, without architectures: modelled causal, now said
    foo = load_config(_write(tmp_path, {"model_type": "foo_encoder", "hidden_size": 768, "num_attention_heads": 12,
                                        "torch_dtype": "bfloat16"}))
    assert foo.causal_default and any("names no 'architectures' and model_type 'foo_encoder' is not a family" in n
                                      for n in foo.notes)
    # an explicit null count was filled with the class default (HF keeps None: the model cannot be built)
    for key in ("num_attention_heads", "head_dim"):
        with pytest.raises(IomodelError, match=f"'{key}' is null, which HF transformers' GemmaConfig keeps as None"):
            load_config(_write(tmp_path, {"model_type": "gemma", "hidden_size": 3072, "torch_dtype": "bfloat16",
                                          "num_attention_heads": 16, "head_dim": 256, key: None}))
    with pytest.raises(IomodelError, match="'hidden_size' is null, which HF transformers' LlamaConfig keeps as None"):
        load_config(_write(tmp_path, {"model_type": "llama", "hidden_size": None, "num_attention_heads": 32,
                                      "torch_dtype": "bfloat16"}))
    # YaRN extends the context as vLLM derives it (Qwen3: 32,768 x 4), where the file's 40,960 was the limit
    qwen3 = _write(tmp_path, {"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
                              "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 32768}, "torch_dtype": "bfloat16"})
    assert load_config(qwen3).max_position_embeddings == 131072
    assert not any("context window" in n for n in resolve_layer(config=qwen3, phase="decode", seqlen=131072).notes)
    assert any("(rope_scaling 'yarn' x 4 of original_max_position_embeddings 32,768 = 131,072)" in n
               for n in resolve_layer(config=qwen3, phase="decode", seqlen=140000).notes)
    llama3 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "torch_dtype": "bfloat16"}
    assert load_config(_write(tmp_path, llama3)).max_position_embeddings == 131072  # llama3: the file's context
    with pytest.raises(IomodelError, match="'rope_scaling.factor' must be a positive number"):
        load_config(_write(tmp_path, {**llama3, "rope_scaling": {"rope_type": "linear", "factor": "4"}}))
    # malformed fields that were accepted
    with pytest.raises(IomodelError, match="'causal' must be true or false, got the string 'false'"):
        load_config(_write(tmp_path, {"model_type": "xlm", "causal": "false", "emb_dim": 1024, "n_heads": 8,
                                      "torch_dtype": "float32"}))
    for bad in ("8", 0):
        with pytest.raises(IomodelError, match="'decoder_attention_heads' must be a positive integer"):
            load_config(_write(tmp_path, {"model_type": "bart", "d_model": 1024, "encoder_attention_heads": 16,
                                          "decoder_attention_heads": bad, "torch_dtype": "float32"}))
    for bad in ("global", [[["global", "foo"], 16]], [[["global", "local"], 0]]):
        with pytest.raises(IomodelError, match="'attention_types' must be a list of .+kinds., repeats. entries"):
            load_config(_write(tmp_path, {"model_type": "gpt_neo", "hidden_size": 2048, "num_heads": 16,
                                          "num_layers": 24, "window_size": 256, "attention_types": bad,
                                          "torch_dtype": "float32"}))


@pytest.mark.parametrize("fields, encoder_only", [
    ({"model_type": "led", "attention_window": [1024] * 6, "max_encoder_position_embeddings": 16384,
      "max_decoder_position_embeddings": 1024}, "'attention_window' (LED's local attention)"),
    ({"model_type": "bigbird_pegasus", "attention_type": "block_sparse", "max_position_embeddings": 4096},
     "'attention_type' = 'block_sparse'"),
    ({"model_type": "longt5", "encoder_attention_type": "transient-global", "num_decoder_layers": 6},
     "'encoder_attention_type' = 'transient-global'"),
    ({"model_type": "longt5", "encoder_attention_type": "local", "num_decoder_layers": 6},
     "'encoder_attention_type' = 'local' (LongT5's local attention)"),
])
def test_an_encoder_only_attention_does_not_refuse_the_decoder(tmp_path, fields, encoder_only):
    """LED's local windows, BigBird-Pegasus's block-sparse and LongT5's local and transient-global attention are their
    encoders'; their decoders run plain causal attention (HF LEDDecoderAttention, BigBirdPegasusDecoderAttention,
    LongT5Attention), which a decode step or --causal refused or windowed (a fresh user, 2026-12-07). The encoder's
    layer keeps its refusal or window."""
    from iomodel.spec.resolve import resolve_layer

    path = _write(tmp_path, {"d_model": 768, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
                             "num_heads": 12, "d_kv": 64, "encoder_layers": 6, "decoder_layers": 6,
                             "is_encoder_decoder": True, "torch_dtype": "float32", **fields})
    for kw in (dict(phase="decode", seqlen=800), dict(seqlen=800, causal=True)):
        layer = resolve_layer(config=path, **kw)
        assert layer.spec.causal and layer.spec.window_left is None
        assert any(n.startswith(f"{encoder_only} is the encoder's: the decoder's self-attention modelled here is plain "
                                "causal attention") for n in layer.config.notes)
    with pytest.raises(IomodelError, match="(which iomodel does not model: pass the sizes|masks keys at 4,096 tokens)"):
        resolve_layer(config=path, seqlen=4096)  # the encoder's layer: refused, or past its local window
    if fields["model_type"] == "led":  # its decoder's context is max_decoder_position_embeddings, its encoder's 16,384
        assert any("(max_decoder_position_embeddings = 1,024, the decoder's)" in n
                   for n in resolve_layer(config=path, phase="decode", seqlen=2000).notes)
        assert any("(max_encoder_position_embeddings = 16,384)" in n
                   for n in resolve_layer(config=path, seqlen=20000, window="none").notes)


def test_round_four_decoders_detr_positions_and_cross_attention_layers(tmp_path):
    """More of the fourth round (2026-12-07): ModernBERT-decoder's local layers are a causal window of
    local_attention // 2 (HF ModernBertDecoderConfig), not ModernBERT's bidirectional half-span (65 tokens was said to
    hide nothing); DETR's decoder runs its object queries in one pass (no causal mask, no decode step); XLM-R's 514
    positions hold 512 tokens; Mllama's cross-attention layers are counted."""
    from iomodel.spec.resolve import resolve_layer

    mbd = _write(tmp_path, {"model_type": "modernbert-decoder", "architectures": ["ModernBertDecoderForCausalLM"],
                            "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 22,
                            "local_attention": 128, "global_attn_every_n_layers": 3, "torch_dtype": "bfloat16"})
    cfg = load_config(mbd)
    assert (cfg.window, cfg.window_kind, cfg.causal_default) == (64, "sliding-window", True)
    assert cfg.window_layers.startswith("14 of 22 layers (global_attn_every_n_layers 3")
    assert resolve_layer(config=mbd, seqlen=64).spec.window_left is None  # q - k < 64 everywhere: nothing hidden
    assert resolve_layer(config=mbd, seqlen=65).spec.window_left == 63  # as its layer_types file is read (review)
    assert resolve_layer(config=mbd, seqlen=4096).spec.window_left == 63
    detr = _write(tmp_path, {"model_type": "detr", "architectures": ["DetrForObjectDetection"], "d_model": 256,
                             "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_layers": 6,
                             "decoder_layers": 6, "num_queries": 100, "is_encoder_decoder": True,
                             "torch_dtype": "float32"})
    assert not load_config(detr).causal_default
    assert "decoder over 100 object queries, both bidirectional" in load_config(detr).bidirectional_source
    with pytest.raises(IomodelError, match="there is no decode step to model; model its decoder's self-attention with "
                                           "--no-causal --seqlen 100"):
        resolve_layer(config=detr, phase="decode", seqlen=100)
    xlmr = _write(tmp_path, {"model_type": "xlm-roberta", "hidden_size": 1024, "num_attention_heads": 16,
                             "max_position_embeddings": 514, "pad_token_id": 1, "torch_dtype": "float32"})
    assert load_config(xlmr).max_position_embeddings == 512
    assert not any("context window" in n for n in resolve_layer(config=xlmr, seqlen=512).notes)
    assert any("(max_position_embeddings 514 less the padding offset 2 = 512)" in n
               for n in resolve_layer(config=xlmr, seqlen=513).notes)
    mllama = {"model_type": "mllama", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "mllama_text_model", "hidden_size": 4096, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "num_hidden_layers": 40,
                              "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}}
    note = next(n for n in load_config(_write(tmp_path, mllama)).notes if n.startswith("'cross_attention_layers'"))
    assert note.startswith("'cross_attention_layers' (8 of 40 layers: layers 3, 8, …, 38 (every 5th from 3)): ")
    for bad in ("3,8", [3, 99], [3, 3]):
        with pytest.raises(IomodelError, match="'cross_attention_layers' must be a non-empty list of distinct layer"):
            load_config(_write(tmp_path, {**mllama, "text_config": {**mllama["text_config"],
                                                                    "cross_attention_layers": bad}}))


def test_a_causal_window_made_two_sided_by_no_causal_says_so(tmp_path):
    """--no-causal on a causal sliding-window model keeps the window's left reach and every key to the right (HBM reads
    about 3x the causal layer's at 16k tokens): the note said only "4,095 tokens left" (a fresh user, 2026-12-07);
    wav2vec2-conformer and wav2vec2-bert are audio encoders (modelled causal with a note before)."""
    from iomodel.spec.resolve import resolve_layer

    mistral = _write(tmp_path, {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                                "num_key_value_heads": 8, "sliding_window": 4096, "torch_dtype": "bfloat16"})
    two = resolve_layer(config=mistral, seqlen=16384, causal=False)
    assert (two.spec.window_left, two.spec.window_right) == (4095, None)
    assert any("with --no-causal every key right of the diagonal too" in n for n in two.notes)
    assert not any("right of the diagonal too" in n for n in resolve_layer(config=mistral, seqlen=16384).notes)
    for model_type in ("wav2vec2-conformer", "wav2vec2-bert"):
        assert not load_config(_write(tmp_path, {"model_type": model_type, "hidden_size": 1024,
                                                 "num_attention_heads": 16, "torch_dtype": "float32"})).causal_default
    funnel = load_config(_write(tmp_path, {"model_type": "funnel", "block_sizes": [6, 6, 6], "d_model": 768,
                                           "n_head": 12, "d_head": 64, "pool_q_only": True, "torch_dtype": "float32"}))
    assert any(n.startswith("'block_sizes' [6, 6, 6] (Funnel): block b (from 0) runs at seqlen / 2^b after pooling, so "
                            "the layer modelled (the full length) is the first block's 6 of 18 layers") for n in funnel.notes)


def test_round_four_review_findings(tmp_path):
    """A reviewer's findings on the fourth round's changes (2026-12-07): Gemma-3's context is already scaled (vLLM skips
    its rope factor); a null num_key_value_heads is the query heads in Llama/Mistral/Mixtral/Qwen2/Qwen3 (their
    __init__ says so) but kept None by Gemma's class; an absurd scaling is one line, not an OverflowError; an
    is_encoder_decoder file without a decoder count still has decoder layers (the refusal's own advice was refused);
    SAM's global_attn_indexes are checked against its layers; Funnel's num_decoder_layers is not a seq2seq decoder;
    a cross_attention_layers count of another family stays a note."""
    from iomodel.spec.resolve import resolve_layer

    gemma3 = {"model_type": "gemma3", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
                              "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
                              "rope_scaling": {"rope_type": "linear", "factor": 8.0}}}
    assert load_config(_write(tmp_path, gemma3)).max_position_embeddings == 131072
    for model_type, heads in (("qwen2", 28), ("mistral", 32), ("llama", 32), ("qwen3", 32), ("mixtral", 32)):
        cfg = load_config(_write(tmp_path, {"model_type": model_type, "hidden_size": 128 * heads,
                                            "num_attention_heads": heads, "num_key_value_heads": None,
                                            "torch_dtype": "bfloat16"}))
        assert cfg.kv_heads == heads
    with pytest.raises(IomodelError, match="'num_key_value_heads' is null, which HF transformers' GemmaConfig keeps"):
        load_config(_write(tmp_path, {"model_type": "gemma", "hidden_size": 3072, "num_attention_heads": 16,
                                      "num_key_value_heads": None, "head_dim": 256, "torch_dtype": "bfloat16"}))
    base = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 8192,
            "torch_dtype": "bfloat16"}
    with pytest.raises(IomodelError, match="'rope_scaling' scales the context to 8.192e\\+311|scales the context to inf"):
        load_config(_write(tmp_path, {**base, "rope_scaling": {"type": "linear", "factor": 1e308}}))
    with pytest.raises(IomodelError, match="'rope_scaling.rope_type' must be a name"):
        load_config(_write(tmp_path, {**base, "rope_scaling": {"type": ["yarn"], "factor": 2}}))
    bbp = _write(tmp_path, {"model_type": "bigbird_pegasus", "d_model": 1024, "encoder_attention_heads": 16,
                            "decoder_attention_heads": 16, "attention_type": "block_sparse", "is_encoder_decoder": True,
                            "torch_dtype": "float32"})
    assert resolve_layer(config=bbp, phase="decode", seqlen=100).spec.causal
    with pytest.raises(IomodelError, match="'global_attn_indexes' must be a non-empty list of distinct layer indices "
                                           "from 0 to 1"):
        load_config(_write(tmp_path, {"model_type": "sam_vision_model", "hidden_size": 768, "num_attention_heads": 12,
                                      "num_hidden_layers": 2, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11],
                                      "torch_dtype": "float32"}))
    funnel = _write(tmp_path, {"model_type": "funnel", "block_sizes": [4, 4, 4], "num_decoder_layers": 2,
                               "d_model": 768, "n_head": 12, "d_head": 64, "torch_dtype": "float32"})
    assert not load_config(funnel).encoder_decoder and load_config(funnel).decoder_layers is None
    assert not any("cross-attention" in n for n in resolve_layer(config=funnel, phase="decode", seqlen=100).notes)
    other = load_config(_write(tmp_path, {**base, "model_type": "custom_vlm", "cross_attention_layers": 1}))
    assert any(n.startswith("'cross_attention_layers': those layers attend") for n in other.notes)
    with pytest.raises(IomodelError, match="'attention_window' is an empty JSON array"):
        load_config(_write(tmp_path, {"model_type": "led", "d_model": 768, "encoder_attention_heads": 12,
                                      "attention_window": [], "torch_dtype": "float32"}))


@pytest.mark.parametrize("fields, message", [
    ({"model_type": "xlm-roberta", "max_position_embeddings": 514, "pad_token_id": "1"}, "'pad_token_id' must be a whole"),
    ({"model_type": "xlm-roberta", "max_position_embeddings": 514, "pad_token_id": None}, "'pad_token_id' must be a whole"),
    ({"model_type": "xlm-roberta", "max_position_embeddings": 514, "pad_token_id": -1}, "'pad_token_id' must be a whole"),
    ({"model_type": "funnel", "block_sizes": [6, "6"]}, "'block_sizes' must be a non-empty list of positive layer"),
    ({"model_type": "funnel", "block_sizes": []}, "'block_sizes' must be a non-empty list of positive layer"),
    ({"model_type": "sam_vision_model", "num_hidden_layers": 12, "window_size": "14", "global_attn_indexes": [2, 5]},
     "'window_size' must be a positive integer"),
    ({"model_type": "sam_vision_model", "num_hidden_layers": 12, "window_size": float("nan"),
      "global_attn_indexes": [2, 5]}, "'window_size' must be a positive integer"),
])
def test_round_four_fields_are_read_strictly(tmp_path, capsys, fields, message):
    """The fields the fourth round reads (padding offset, Funnel's blocks, SAM's window) were skipped silently when
    malformed (a last read of the change, 2026-12-07): one error line, exit 2, no file written."""
    from test_cli_errors import assert_one_line_error

    path = _write(tmp_path, {"hidden_size": 768, "num_attention_heads": 12, "torch_dtype": "float32", **fields})
    with pytest.raises(IomodelError, match=message):
        load_config(path)
    out = tmp_path / "out.json"
    assert_one_line_error(capsys, ["worksheet", "--config", str(path), "-o", str(out)], message)
    assert not out.exists()
