"""HF-style ``config.json`` files and the bundled presets (``worksheets/presets/*.json``).

:func:`load_config` reads the attention fields of a model's config into an
:class:`AttentionConfig`, whose :meth:`AttentionConfig.layer` gives a :class:`LayerSpec`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.jsonvalues import describe as _kind, read_json
from iomodel.spec.dtypes import DTYPES, canonical_dtype
from iomodel.spec.layer import LayerSpec

#: Folder that holds the bundled real-layer presets (one HF-style config.json per model).
PRESETS_DIR = Path(__file__).resolve().parents[2] / "worksheets" / "presets"


def list_presets() -> list[str]:
    """Names of the bundled presets (file stems under ``worksheets/presets``)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_path(name: str) -> Path:
    """Path of a bundled preset's config.json.

    Raises:
        IomodelError: no preset of that name.
    """
    path = PRESETS_DIR / f"{name}.json"
    if name not in list_presets():  # a name, not a path ('../x' would reach outside the presets)
        raise IomodelError(
            f"unknown preset {name!r}: use one of {', '.join(list_presets())}, or --config PATH"
        )
    return path


#: The published spellings of each attention field, first match wins (HF ``transformers``
#: configuration classes: Llama/Mistral/Qwen ``num_key_value_heads``, GPT-2/GPT-J/BigCode
#: ``n_head``/``n_embd``, Falcon ``num_kv_heads``/``n_head_kv`` with
#: ``new_decoder_architecture``, MPT ``n_heads``/``d_model``/``attn_config.kv_n_heads``,
#: ChatGLM ``kv_channels``/``multi_query_group_num``, T5 ``num_heads``/``d_kv``, BLOOM ``n_embed``,
#: BART/Whisper/Marian ``encoder_attention_heads``: HF's ``attribute_map`` reads it as
#: ``num_attention_heads``; XGLM and Kosmos-2's text model ``attention_heads`` (``XGLMConfig.attribute_map``),
#: Kosmos-2's ``embed_dim`` (``Kosmos2TextConfig``); Step-3 ``num_attention_groups`` (``Step3p5Config`` maps it to
#: ``num_key_value_heads``); DistilBERT and Meta's own ``params.json`` ``dim``; Moonshine
#: ``encoder_num_attention_heads``/``encoder_num_key_value_heads`` and ProphetNet ``num_encoder_attention_heads``
#: (their ``attribute_map``); CogVLM2 ``num_multi_query_heads`` (``VisionExpertAttention`` splits its fused QKV
#: projection into that many K and V heads).
HEADS_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads", "attention_heads",
              "encoder_num_attention_heads", "num_encoder_attention_heads")
KV_HEADS_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_head", "n_kv_heads", "num_attention_groups",
                 "encoder_num_key_value_heads", "num_multi_query_heads")
HEAD_DIM_KEYS = ("head_dim", "kv_channels", "d_kv", "attention_head_dim", "hidden_size_per_head")  # last: PLaMo-2
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "n_embed", "dim", "emb_dim", "embed_dim")
LAYERS_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "max_source_positions",
                "max_encoder_position_embeddings",  # LED: its encoder's 16,384 (the decoder's: DECODER_CONTEXT_KEYS)
                "model_max_length")  # the last: Baichuan2-13B's file gives its context only there
#: A field of relative position buckets (T5, mT5, UMT5): no absolute context limit, so ``n_positions`` is not one.
RELATIVE_POSITION_KEY = "relative_attention_num_buckets"
DTYPE_KEYS = ("torch_dtype", "dtype")
#: Sub-objects that hold the language model's fields in multimodal configs (Gemma-3,
#: Llama-4, LLaVA: ``text_config``; InternVL: ``llm_config``; DeepSeek-VL: ``language_config``).
NESTED_KEYS = ("text_config", "llm_config", "language_config")
#: Sub-objects one level further out that hold such a config (Qwen2.5-Omni: ``thinker_config.text_config``).
OUTER_NESTED_KEYS = ("thinker_config",)
#: Sub-objects of an encoder-decoder config that hold its encoder's and its decoder's fields where the top level
#: has none (HF ``T5GemmaConfig``: ``encoder``/``decoder``; ``EncoderDecoderConfig``): the encoder's are read.
ENCODER_KEY, DECODER_KEY = "encoder", "decoder"
#: The advice an encoder-decoder's bidirectional note ends with (``AttentionConfig.bidirectional_source``); a decode
#: step, already the decoder's causal layer, says its note without it (``iomodel.spec.resolve``).
DECODER_CAUSAL_HINT = "(the decoder's is causal: pass --causal for it)"
#: ``model_type`` of RoBERTa-style encoders, whose position ids start at ``pad_token_id + 1`` (HF
#: ``create_position_ids_from_input_ids``): XLM-R's ``max_position_embeddings`` 514 holds 512 tokens.
PADDING_OFFSET_MODEL_TYPES = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                              "data2vec-text", "longformer", "xmod", "mpnet", "layoutlmv3")
#: ``model_type`` of DETR's family (HF ``DetrConfig``, ``ConditionalDetrConfig``, ``DabDetrConfig``,
#: ``TableTransformerConfig``, ``RTDetrConfig``, ``DFineConfig``): a bidirectional encoder over image features and
#: a decoder that runs its ``num_queries`` object queries in one pass, unmasked, with no KV cache (no decode step).
DETR_MODEL_TYPES = ("detr", "conditional_detr", "dab-detr", "table-transformer", "rt_detr", "rt_detr_v2", "d_fine")
#: ``model_type`` whose ``num_decoder_layers`` is not a seq2seq decoder (Funnel's full-length upsampling blocks, no
#: cross-attention): not an encoder-decoder.
NOT_SEQ2SEQ_MODEL_TYPES = ("funnel",)
#: An encoder-decoder's decoder context (Whisper's ``max_target_positions``, LED's ``max_decoder_position_embeddings``).
DECODER_CONTEXT_KEYS = ("max_target_positions", "max_decoder_position_embeddings")
#: Sub-objects of another tower (an image or audio encoder with its own heads), named in a note, not modelled.
TOWER_KEYS = ("vision_config", "audio_config", "speech_config")
#: A second causal decoder beside the language model (Qwen2.5-Omni's and Qwen3-Omni's speech talker): noted.
TALKER_KEY = "talker_config"
#: Every field the attention layer is read from (a nested config that disagrees on one is noted; the dtype's own note
#: says which level's is read).
ATTENTION_KEYS = frozenset(HEADS_KEYS + KV_HEADS_KEYS + HEAD_DIM_KEYS + HIDDEN_KEYS + ("sliding_window",))
#: The language model's own fields: where a nested config (``text_config`` ...) is read, a wrapper's top-level value of
#: one of these that the nested config does not name is not the language model's (HF transformers builds the text
#: config from the nested dict and its class defaults; MusicFlamingo's top-level ``head_dim`` 1280 is its audio rotary's,
#: its Qwen2 text_config's is 3584 / 28 = 128; its top-level max_position_embeddings is its audio rope_theta). The dtype
#: is inherited (:data:`DTYPE_KEYS`); MLA's fields are not listed (a top-level ``kv_lora_rank`` keeps the refusal).
TEXT_MODEL_KEYS = frozenset(HEADS_KEYS + KV_HEADS_KEYS + HEAD_DIM_KEYS + HIDDEN_KEYS + LAYERS_KEYS + (
    "sliding_window", "sliding_window_pattern", "sliding_window_size", "sliding_window_layout", "use_sliding_window",
    "max_window_layers", "layer_types", "attention_chunk_size", "no_rope_layers", "attention_window", "window_size",
    "local_attention", "attention_k_eq_v", "global_head_dim", "num_global_key_value_heads") + CONTEXT_KEYS)

#: Fields that change the bytes moved and that the model cannot represent: refused, named.
UNMODELLED: dict[str, str] = {
    "kv_lora_rank": "multi-head latent attention (DeepSeek-V2/V3 MLA) caches one compressed latent per token, "
                    "not per-head K and V",
    "q_lora_rank": "multi-head latent attention (DeepSeek-V2/V3 MLA) projects queries through a low-rank latent",
    "qk_rope_head_dim": "multi-head latent attention gives queries and keys a decoupled RoPE part of another width",
    "v_head_dim": "values of another head dimension than queries and keys",
    "blocksparse_block_size": "block-sparse attention (Phi-3-small) reads only the key blocks of its sparsity "
                              "pattern on most layers, not every key",
    "dense_attention_every_n_layers": "layers that alternate between dense and block-sparse attention (Phi-3-small) "
                                      "move different bytes",
    "num_key_value_heads_per_layer": "KV heads that differ from layer to layer (DeciLM): no one layer stands for "
                                     "the model",
    "block_configs": "layers of different shapes, some without attention (NVIDIA Nemotron-NAS block_configs)",
    "true_hidden_size": "attention on a bottleneck width (MobileBERT's true_hidden_size), not hidden_size",
    "attention_other_setting": "layers with another head count (Step-3.5's sliding-window layers, "
                               "attention_other_setting): no one layer stands for the model",
    "num_query_heads": "query and KV heads that differ from layer to layer (OpenELM's num_query_heads and "
                       "num_kv_heads lists): no one layer stands for the model",
    "attn_layers": "Reformer's LSH and chunked local attention (attn_layers) attend to hash buckets and chunks, "
                   "not to every key",
    "num_swa_attention_heads": "sliding-window layers with another head count (Baichuan-M1's "
                               "num_swa_attention_heads): no one layer stands for the model",
    "num_global_tokens": "Pegasus-X's block-local attention with global tokens (blocks of block_size tokens attend "
                         "among themselves and to num_global_tokens global tokens), not to every key",
    "indexer_n_heads": "a learned indexer that keeps each query's top indexer_budget keys on the full-attention layers "
                       "(Qwen's QSA, HF configuration_qwen4_exp.py: setting indexer_n_heads enables it), not every key",
    "index_topk": "DeepSeek Sparse Attention (DeepSeek-V3.2: a lightning indexer keeps each query's top index_topk "
                  "keys), not every key",
    "mb_per_layer": "SambaY's decoder-hybrid-decoder layout (Phi-4-mini-flash's mb_per_layer: Mamba layers, "
                    "sliding-window and global differential attention, two softmax maps per head, and cross-decoder "
                    "layers that read one shared KV cache)",
}
#: :data:`UNMODELLED` fields of multi-head latent attention, which a config may carry switched off
#: (DeepSeek-OCR: ``use_mla`` false, the MLA widths 0 or null): then they are not refused.
MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim")
#: Fields that change the bytes of the layer modelled here and that the model leaves out: read, and said in a note.
CHANGES_BYTES_NOTED: dict[str, str] = {
    "relative_attention_num_buckets": "a relative position bias (T5, MPNet): an (H, N, N) bias added to the scores, "
                                      "which the eager baseline reads and writes and a fused kernel must compute; "
                                      "not counted here",
    "relative_attention": "DeBERTa's disentangled attention: two more score terms (content-to-position, "
                          "position-to-content) of N x N per head; not counted here",
    "has_relative_attention_bias": "a 1D relative position bias (LayoutLMv3): an (H, N, N) bias added to the "
                                   "scores; not counted here",
    "has_spatial_attention_bias": "a 2D spatial (layout) position bias (LayoutLMv3): an (H, N, N) bias added to the "
                                  "scores; not counted here",
    "num_memory_tokens": "memory (meta) tokens prepended to every sequence (Hymba): K and V hold that many more rows "
                         "than the sequence; pass --seqlen-k N + that count for the layer",
}
#: ``model_type`` of families without attention layers (state-space and recurrent models): their
#: ``num_heads``/``head_dim`` are not attention heads, so no attention layer is invented for them.
NO_ATTENTION_MODEL_TYPES = ("falcon_mamba", "mamba", "mamba2", "rwkv", "rwkv5", "rwkv6", "rwkv7", "xlstm",
                            # flash-linear-attention's model types (linear attention and recurrences, no softmax)
                            "delta_net", "gated_deltanet", "gla", "hgrn", "hgrn2", "retnet")
#: Field values (not mere presence) that change the bytes and that the model cannot represent.
UNMODELLED_VALUES: dict[tuple[str, str], str] = {
    ("attention_type", "block_sparse"): "block-sparse attention (BigBird) reads only the key blocks of its pattern",
    ("encoder_attention_type", "transient-global"): "LongT5's transient-global attention (local windows of "
                                                    "local_radius keys each side plus one summary token per "
                                                    "global_block_size tokens), not every key",
}
#: ``model_type`` of families whose attention is not softmax over every key (approximations): refused, named.
UNMODELLED_MODEL_TYPES: dict[str, str] = {
    "nystromformer": "Nystromformer's Nystrom approximation (landmark queries and keys) of the softmax",
    "yoso": "YOSO's LSH-based Bernoulli sampling approximation of attention",
    "mra": "MRA's multi-resolution (block-sparse) approximation of attention",
    # multi-scale deformable attention (HF modeling_deformable_detr.MultiscaleDeformableAttention): each query samples
    # n_levels x n_points keys a head at learned offsets (bilinear), with no QK^T over the keys
    "deformable_detr": "Deformable DETR's multi-scale deformable attention (each query samples a few points a level "
                       "and head at learned offsets, no QK^T)",
    "deta": "DETA's multi-scale deformable attention (each query samples a few points a level and head, no QK^T)",
    "grounding-dino": "Grounding DINO's multi-scale deformable attention in its image encoder and decoder (each query "
                      "samples a few points a level and head, no QK^T); its BERT text tower is a separate model",
    "mm-grounding-dino": "MM Grounding DINO's multi-scale deformable attention (each query samples a few points a "
                         "level and head, no QK^T); its BERT text tower is a separate model",
}
#: ``LongT5Config``'s ``local_radius`` for a file that leaves it out (``encoder_attention_type`` "local": each query
#: sees the keys with |i − j| < local_radius + 1, ``modeling_longt5.LongT5LocalAttention``).
LONGT5_LOCAL_RADIUS = 127
#: ``model_type`` of encoder-only families, whose self-attention is bidirectional (HF ``transformers``
#: model names; a config with ``"is_decoder": true`` is the causal decoder variant and stays causal).
ENCODER_MODEL_TYPES = ("albert", "bert", "big_bird", "camembert", "data2vec-text", "deberta", "deberta-v2",
                       "distilbert", "electra", "ernie", "longformer", "megatron-bert", "mobilebert", "modernbert",
                       "mpnet", "nomic_bert", "roberta", "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl",
                       "xlnet",
                       # vision and audio encoders (patches or frames attend to one another both ways)
                       "audio-spectrogram-transformer", "beit", "clip_vision_model", "data2vec-audio",
                       "data2vec-vision", "deit", "dinov2", "dinov2_with_registers", "hubert", "ijepa", "sew", "sew-d",
                       "siglip", "siglip2", "siglip2_text_model", "siglip2_vision_model", "siglip_text_model",
                       "siglip_vision_model", "unispeech", "unispeech-sat", "videomae", "vit", "vit_mae", "vit_msn",
                       "vivit", "wav2vec2", "wav2vec2-bert", "wav2vec2-conformer", "wavlm", "yolos",
                       # ViTs with windowed layers (SamVisionConfig, VitDetConfig: noted, _windowed_vit_note)
                       "sam_vision_model", "sam_hq_vision_model", "vitdet",
                       # embedding encoders with their own code (Alibaba-NLP gte-*-v1.5: "new"; Snowflake arctic-embed
                       # v2: "gte") and DINOv3's ViT
                       "new", "gte", "dinov3_vit", "neobert",
                       # XLM's masked-LM checkpoints (their "causal": false says so too)
                       "xlm", "flaubert",
                       # more text and document encoders (HF masked-LM families; a file may name no architecture)
                       "convbert", "layoutlm", "layoutlmv2", "layoutlmv3", "lilt", "markuplm", "squeezebert",
                       "roformer", "rembert", "canine", "esm", "funnel", "ibert", "xmod", "luke", "bros", "tapas",
                       # decoders made bidirectional for embeddings (NV-Embed-v2's bidir_mistral, NVIDIA's
                       # llama_bidirec retrievers: is_causal = False)
                       "bidir_mistral", "llama_bidirec")
#: ``model_type`` of families iomodel knows as causal decoders although their ``architectures`` may name no decoder
#: head (``ChatGLMModel``, ``CLIPTextModel``: CLIP's text tower is causal; ``Qwen2_5OmniModel``).
KNOWN_DECODER_MODEL_TYPES = ("chatglm", "glm", "glm4", "clip", "clip_text_model", "qwen2_5_omni",
                             "qwen2_5_omni_thinker", "qwen2_5_omni_text",
                             # decoder families whose checkpoints may carry a non-LM head (reward models:
                             # *ForSequenceClassification) or none (*Model)
                             "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                             "gemma3", "gemma3_text", "phi", "phi3", "falcon", "gpt2", "gpt_neox", "gptj", "gpt_bigcode",
                             "mpt", "starcoder2", "olmo", "olmo2", "cohere", "cohere2", "deepseek_v2", "deepseek_v3",
                             "internlm2", "granite", "exaone", "exaone4", "stablelm",
                             # families with their own reading here (hybrids, windows, MoE decoders) whose files may
                             # name no architectures
                             "gpt_oss", "olmo3", "olmoe", "dbrx", "nemotron", "nemotron_h", "jamba", "bamba",
                             "granitemoe", "granitemoehybrid", "minimax", "lfm2", "qwen3_next", "falcon_h1", "zamba",
                             "zamba2", "plamo2", "recurrent_gemma", "mllama", "llama4", "llama4_text", "gemma3n",
                             "gemma3n_text", "gemma4", "gemma4_text", "phimoe", "smollm3", "apertus", "arcee",
                             "seed_oss", "ernie4_5", "ernie4_5_moe", "glm4_moe", "hunyuan_v1_dense",
                             "hunyuan_v1_moe", "cohere2", "jetmoe", "bailing_moe_linear", "afmoe", "starcoder2")
#: ``architectures`` name parts that say a model generates text left to right (a causal decoder): a config whose
#: ``architectures`` name none of them and whose family iomodel does not know is modelled causal with a note.
DECODER_ARCHITECTURE_PARTS = ("CausalLM", "LMHead", "ConditionalGeneration", "ImageTextToText", "Seq2SeqLM",
                              "Vision2Seq")
#: ``model_type`` of families whose prefix (image and prompt tokens) attends both ways (a prefix-LM), then causal.
PREFIX_LM_MODEL_TYPES = ("paligemma",)
#: Field that makes a decoder family's self-attention bidirectional (HF ``Gemma3TextConfig``: EmbeddingGemma, a
#: boolean; ``Gemma4TextConfig``: ``"all"`` or ``"vision"``, and the model sets ``is_causal =
#: use_bidirectional_attention != "all"``).
BIDIRECTIONAL_FLAG = "use_bidirectional_attention"
#: The string values of :data:`BIDIRECTIONAL_FLAG` (``Gemma4TextConfig``: ``Literal["all", "vision"] | None``):
#: ``"all"`` makes every token attend both ways; ``"vision"`` only an image's tokens, among themselves.
BIDIRECTIONAL_VALUES = ("all", "vision")
#: Defaults of HF ``transformers`` configuration classes, by ``model_type``: a published file that leaves a field
#: out gets the class default, as ``transformers`` reads it (Gemma-3-4B's text_config gives neither heads nor
#: HEAD_DIM; LLaVA-1.5's ``text_config`` is ``{"model_type": "llama"}`` and a vocabulary). Where a family's class
#: has no HEAD_DIM default (Llama, Mistral, Mixtral, Qwen2), HEAD_DIM is never filled: it is hidden_size / heads,
#: the class rule, so a file giving 40 heads and hidden_size 5120 gets 128. KV heads not filled are the query heads.
#: Source: the ``__init__`` defaults of ``GemmaConfig``, ``Gemma2Config``, ``Gemma3TextConfig``,
#: ``Gemma4TextConfig``, ``Qwen3Config``, ``LlamaConfig``, ``MistralConfig``, ``MixtralConfig``, ``Qwen2Config`` and
#: ``Starcoder2Config``.
FAMILY_DEFAULTS: dict[str, tuple[str, dict[str, int]]] = {
    "gemma": ("GemmaConfig", {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256}),
    "gemma2": ("Gemma2Config", {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}),
    "gemma3_text": ("Gemma3TextConfig", {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}),
    "gemma4_text": ("Gemma4TextConfig", {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}),
    "qwen3": ("Qwen3Config", {"num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128}),
    "llama": ("LlamaConfig", {"num_attention_heads": 32, "hidden_size": 4096}),
    "mistral": ("MistralConfig", {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}),
    "mixtral": ("MixtralConfig", {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}),
    "qwen2": ("Qwen2Config", {"num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 4096}),
    "jetmoe": ("JetMoeConfig", {"num_key_value_heads": 16, "kv_channels": 128}),  # its kv_channels; heads: _jetmoe_heads
    "starcoder2": ("Starcoder2Config", {"num_attention_heads": 24, "num_key_value_heads": 2, "hidden_size": 3072}),
}
#: Configuration classes of :data:`FAMILY_DEFAULTS` that read a null ``num_key_value_heads`` as the query heads
#: (``if num_key_value_heads is None: num_key_value_heads = num_attention_heads`` in their ``__init__``).
KV_NULL_IS_HEADS = ("LlamaConfig", "MistralConfig", "MixtralConfig", "Qwen2Config", "Qwen3Config")
#: Configuration classes whose ``multi_query`` defaults to True, by ``model_type``: a file that leaves the field out
#: (or null) is multi-query, one K/V head, as transformers reads it. FalconAttention reads ``num_kv_heads`` only under
#: ``new_decoder_architecture`` (read first); with ``multi_query=False`` alone it projects K/V on every head.
#: Source: the ``__init__`` defaults of HF ``FalconConfig`` and ``GPTBigCodeConfig``, and of Falcon-7B's own
#: ``configuration_RW.py`` ``RWConfig``.
MULTI_QUERY_DEFAULT = {"falcon": "FalconConfig", "RefinedWebModel": "RWConfig", "gpt_bigcode": "GPTBigCodeConfig"}
#: ``JetMoeConfig``'s experts per token for a file that leaves ``num_experts_per_tok`` out: its mixture of attention
#: heads runs that many experts of ``num_key_value_heads`` query heads each on one K/V
#: (``num_attention_heads = num_key_value_heads * num_experts_per_tok``; HEAD_DIM ``kv_channels``).
JETMOE_EXPERTS_PER_TOKEN = 2
# Gemma3Config builds Gemma3TextConfig(**text_config) (Gemma4Config: Gemma4TextConfig): a text_config without its
# own model_type gets these too
FAMILY_DEFAULTS["gemma3"] = FAMILY_DEFAULTS["gemma3_text"]
FAMILY_DEFAULTS["gemma4"] = FAMILY_DEFAULTS["gemma4_text"]
#: The ``model_type`` a multimodal wrapper's configuration class gives a nested ``text_config`` that names none
#: (``text_config["model_type"] = text_config.get("model_type", ...)`` in HF ``LlavaConfig``, ``LlavaNextConfig``,
#: ``LlavaNextVideoConfig``, ``VipLlavaConfig``: ``"llama"``; ``LlavaOnevisionConfig``, ``InternVLConfig``:
#: ``"qwen2"``; ``PaliGemmaConfig``: ``"gemma"``; ``Idefics2Config``, ``Mistral3Config``: ``"mistral"``), so the
#: language model's family defaults (:data:`FAMILY_DEFAULTS`, :data:`DEFAULT_SLIDING_WINDOW`) are that family's,
#: not the wrapper's.
TEXT_CONFIG_MODEL_TYPE: dict[str, str] = {"llava": "llama", "llava_next": "llama", "llava_next_video": "llama",
                                          "vipllava": "llama", "llava_onevision": "qwen2", "internvl": "qwen2",
                                          "paligemma": "gemma", "idefics2": "mistral", "mistral3": "mistral"}
#: The published spellings of each field :data:`FAMILY_DEFAULTS` fills.
_DEFAULTED_SPELLINGS = {"num_attention_heads": HEADS_KEYS, "num_key_value_heads": KV_HEADS_KEYS,
                        "head_dim": HEAD_DIM_KEYS, "kv_channels": HEAD_DIM_KEYS, "hidden_size": HIDDEN_KEYS}
#: The field diffusers writes into every model config it saves (``ConfigMixin``): a diffusion transformer or UNet,
#: whose self-attention (joint over text and image tokens in FLUX and SD3) takes no causal mask.
DIFFUSERS_MARK = "_diffusers_version"
#: Suffix of encoder-only ``architectures`` (masked language models are bidirectional).
ENCODER_ARCHITECTURE_SUFFIX = "ForMaskedLM"
#: ``model_type`` of families whose attention always uses ALiBi, without an ``alibi`` field (BLOOM).
ALIBI_MODEL_TYPES = ("bloom",)
#: ``(model_type, hidden_size)`` of models whose own code adds a materialised ALiBi bias, ``[heads, N, N]`` in the
#: model's dtype, to the scores: Baichuan-13B and Baichuan2-13B (``modeling_baichuan.py``: ``_gen_alibi_mask``, the
#: bias added to the attention scores or passed as xformers' ``attn_bias``); their 7B models use RoPE.
MATERIALISED_ALIBI = (("baichuan", 5120),)
#: ``model_type`` of Gemma-3's language model, whose published config.json files give ``sliding_window``
#: without ``sliding_window_pattern``: HF ``Gemma3TextConfig`` defaults it to
#: :data:`GEMMA3_SLIDING_WINDOW_PATTERN` (every 6th layer global, the other five slide).
GEMMA3_MODEL_TYPES = ("gemma3", "gemma3_text")
GEMMA3_SLIDING_WINDOW_PATTERN = 6
#: ``model_type`` of Gemma-4's language model, whose full-attention layers have another geometry than its
#: sliding-window layers (HF ``Gemma4TextAttention``: HEAD_DIM ``global_head_dim``; KV heads
#: ``num_global_key_value_heads`` under ``attention_k_eq_v``).
GEMMA4_MODEL_TYPES = ("gemma4", "gemma4_text")
#: ``Gemma4TextConfig``'s ``global_head_dim`` for a file that leaves the field out (a ``null`` falls back to
#: ``head_dim``, as ``Gemma4TextAttention`` reads it).
GEMMA4_GLOBAL_HEAD_DIM = 512
#: ``Gemma4TextConfig``'s layout for a file without ``layer_types``: every :data:`GEMMA4_SLIDING_WINDOW_PATTERN`-th
#: layer full (``sliding_window_pattern = 6  # by default 5:1``) over ``num_hidden_layers`` (default
#: :data:`GEMMA4_NUM_LAYERS`), and the last layer always full ("Last layer must use `full_attention`": a list whose
#: last entry is not is mended so).
GEMMA4_SLIDING_WINDOW_PATTERN = 6
GEMMA4_NUM_LAYERS = 30
#: Encoder-decoder families whose encoder's bidirectional sliding window reaches W − 1 keys each side (HF
#: ``modeling_t5gemma.sliding_window_bidirectional_mask_function``: |q − k| < W), not W // 2 as Gemma-3's
#: ``use_bidirectional_attention`` halves it.
FULL_REACH_BIDIRECTIONAL_WINDOW_MODEL_TYPES = ("t5gemma",)
#: ``sliding_window`` of families whose HF configuration class defaults it, for a file that leaves it out
#: (``Gemma2Config`` and ``Gemma3TextConfig``: 4096; PaliGemma-2's gemma2 text_config gives none).
#: ``MistralConfig``: 4096 too (a ``null`` turns it off, as Mistral-7B-v0.2's files write it); ``Gemma4TextConfig``:
#: 512.
DEFAULT_SLIDING_WINDOW: dict[str, tuple[str, int]] = {"gemma2": ("Gemma2Config", 4096),
                                                       "gemma3": ("Gemma3TextConfig", 4096),
                                                       "gemma3_text": ("Gemma3TextConfig", 4096),
                                                       "mistral": ("MistralConfig", 4096),
                                                       "gemma4": ("Gemma4TextConfig", 512),
                                                       "afmoe": ("AfmoeConfig", 1024),
                                                       "gemma4_text": ("Gemma4TextConfig", 512),
                                                       "gpt_oss": ("GptOssConfig", 128),
                                                       "olmo3": ("Olmo3Config", 4096),
                                                       "cohere2": ("Cohere2Config", 4096)}
#: HF ``AfmoeConfig``'s defaults that decide its layer types where a file gives no ``layer_types`` (its default
#: ``sliding_window``, 1024, is in :data:`DEFAULT_SLIDING_WINDOW`).
AFMOE_DEFAULTS = {"global_attn_every_n_layers": 4, "num_hidden_layers": 32}
#: The end of every MLA refusal: what iomodel cannot do and why no flag stands in for it.
MLA_UNMODELLED = ("which iomodel does not model and no flag expresses (its K/V bytes would be wrong): --heads/--kv-heads/"
                  "--head-dim without a config model an ordinary MHA/GQA layer, not this model's attention")
#: Families whose HF configuration class defaults ``kv_lora_rank`` to 512 (MLA) where a file leaves it out.
MLA_DEFAULT_RANK = {"deepseek_v2": "DeepseekV2Config", "deepseek_v3": "DeepseekV3Config"}
#: HF ``JambaConfig``'s defaults of its attention layout (layer i is attention where i % period == offset).
JAMBA_DEFAULTS = {"attn_layer_period": 8, "attn_layer_offset": 4}
#: Families whose HF configuration class derives ``layer_types`` where a file gives none, by ``model_type``: (class,
#: n): layer i slides unless (i + 1) % n == 0 (``GptOssConfig``: every other layer from layer 0; ``Olmo3Config``: three
#: of every four; ``Cohere2Config``: its default ``sliding_window_pattern`` of 4, where the file gives no pattern).
DERIVED_LAYER_TYPES = {"gpt_oss": ("GptOssConfig", 2), "olmo3": ("Olmo3Config", 4), "cohere2": ("Cohere2Config", 4)}


def _every_nth_full(every: int, layers: int) -> list[str]:
    """The ``layer_types`` HF classes derive from a period (GptOssConfig, Olmo3Config, Cohere2Config, AfmoeConfig;
    Gemma4TextConfig, which also makes the last layer full):
    layer i slides unless (i + 1) % ``every`` == 0 (every ``every``-th layer full attention)."""
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]


#: HF ``Llama4TextConfig``'s defaults: ``attention_chunk_size`` (a file that leaves it out is chunked at this many
#: tokens) and ``no_rope_layer_interval`` (every n-th layer is NoPE and global, the others RoPE and chunked, where
#: ``no_rope_layers`` is absent or empty).
LLAMA4_DEFAULTS = {"attention_chunk_size": 8192, "no_rope_layer_interval": 4}
#: The ``sliding_window`` default of the Qwen2 families' configuration classes (``Qwen2Config``, ``Qwen2MoeConfig``,
#: ``Qwen3Config``, ``Qwen3MoeConfig``, the Qwen2-VL text configs: 4096), taken where ``use_sliding_window`` is true
#: and the file leaves the size out.
QWEN2_DEFAULT_SLIDING_WINDOW = 4096
#: Families whose HF configuration class turns ``sliding_window`` off unless ``use_sliding_window`` is true, by
#: ``model_type`` (``use_sliding_window`` defaults to False; ``self.sliding_window = sliding_window if
#: self.use_sliding_window else None``): a file that leaves the flag out has no window.
SLIDING_WINDOW_OFF_BY_DEFAULT: dict[str, str] = {
    "qwen2": "Qwen2Config", "qwen2_moe": "Qwen2MoeConfig", "qwen3": "Qwen3Config", "qwen3_moe": "Qwen3MoeConfig",
    "qwen2_vl": "Qwen2VLConfig", "qwen2_vl_text": "Qwen2VLTextConfig", "qwen2_5_vl": "Qwen2_5_VLConfig",
    "qwen2_5_vl_text": "Qwen2_5_VLTextConfig"}
#: Families whose HF configuration class has a ``sliding_window`` but no ``use_sliding_window`` (a file's stray flag is
#: ignored, as transformers ignores it, and said), by ``model_type``. Any other family's false flag turns the window
#: off (the Qwen2 families, Qwen2.5-Omni's text config: ``sliding_window = None`` unless the flag is true).
SLIDING_WINDOW_FLAG_UNREAD: dict[str, str] = {
    "mistral": "MistralConfig", "mixtral": "MixtralConfig", "starcoder2": "Starcoder2Config", "phi3": "Phi3Config",
    "gemma2": "Gemma2Config", "gemma3_text": "Gemma3TextConfig", "cohere2": "Cohere2Config", "gpt_oss": "GptOssConfig"}
#: How HF transformers (5.x) picks the sliding layers from ``max_window_layers`` where ``use_sliding_window`` is true
#: and the file gives no ``layer_types``, by ``model_type``: (configuration class, its default ``max_window_layers``,
#: rule). ``from``: layers i >= max_window_layers slide (``Qwen2Config``: "the first max_window_layers layers use full
#: attention"; the Qwen2-VL text configs); ``even_below``: even layers i < max_window_layers slide
#: (``Qwen2MoeConfig.__post_init__``); ``all``: every layer, whatever ``max_window_layers`` says (``Qwen3MoeConfig``
#: has none). A family not listed with ``max_window_layers`` in its file takes ``from``.
MAX_WINDOW_LAYERS_RULES: dict[str, tuple[str, int, str]] = {
    "qwen2": ("Qwen2Config", 28, "from"), "qwen2_moe": ("Qwen2MoeConfig", 28, "even_below"),
    "qwen3": ("Qwen3Config", 28, "from"), "qwen3_moe": ("Qwen3MoeConfig", 0, "all"),
    "qwen2_vl": ("Qwen2VLConfig", 80, "from"), "qwen2_vl_text": ("Qwen2VLTextConfig", 80, "from"),
    "qwen2_5_vl": ("Qwen2_5_VLConfig", 80, "from"), "qwen2_5_vl_text": ("Qwen2_5_VLTextConfig", 80, "from")}
#: ``torch_dtype`` spellings of a 32-bit float checkpoint (a note says it is modelled at 4 bytes an element).
FP32_NAMES = ("float32", "float", "fp32", "torch.float32")
#: Families whose attention runs on twice the hidden size (HF ``ZambaConfig``/``Zamba2Config``:
#: ``attention_hidden_size = 2·hidden_size``, ``attention_head_dim = 2·hidden_size / num_attention_heads``;
#: their ``kv_channels`` is hidden_size / heads, not the attention's head dimension).
DOUBLE_WIDTH_ATTENTION_MODEL_TYPES = ("zamba", "zamba2")
#: Layer kinds of a ``layer_types`` list that are not softmax attention (hybrids: Granite-4.0-H ``mamba``,
#: Qwen3-Next ``linear_attention``): they move no attention traffic, and the worksheet models the attention layers.
NON_ATTENTION_LAYER_TYPES = ("mamba", "mamba2", "linear_attention", "conv", "recurrent", "ssm")
#: ``layer_types`` spellings of a full softmax-attention layer (``attention``: Granite-4.0-H).
FULL_ATTENTION_LAYER_TYPES = ("full_attention", "attention")
#: Fields that change no HBM bytes: accepted, and named in the worksheet's notes.
NO_BYTES: dict[str, str] = {
    "attn_logit_softcapping": "soft-capping of the attention scores (tanh; Gemma-2) changes arithmetic, not bytes",
    "query_pre_attn_scalar": "a custom score scale (Gemma) changes sm_scale, not bytes",
    "alibi": "ALiBi position biases are computed from the head index in the kernel: no tensor moves",
    "logit_scale": "a score scale changes sm_scale, not bytes",
}


@dataclass(frozen=True)
class AttentionConfig:
    """The attention-relevant fields of a HF-style ``config.json``.

    Units: counts of heads and elements; dtype canonical name; window in tokens.

    ``causal_default`` is False when the model's self-attention is bidirectional
    (:func:`_bidirectional`: ``"is_encoder_decoder": true`` (T5, BART: the encoder's
    self-attention), a ``model_type`` in :data:`ENCODER_MODEL_TYPES` (BERT, RoBERTa, ...)
    without ``"is_decoder": true``, or an ``architectures`` name ending in
    :data:`ENCODER_ARCHITECTURE_SUFFIX`); ``bidirectional_source`` says which.

    ``full_kv_heads`` and ``full_head_dim`` are the KV heads and HEAD_DIM of the model's full-attention layers
    where they differ from ``kv_heads``/``head_dim`` (Gemma-4: HF ``Gemma4TextAttention``), else None;
    :meth:`full_geometry` gives them. ``window_each_side`` is the keys each side of the diagonal that a
    bidirectional sliding window reaches where that is not ``window // 2`` (T5Gemma's encoder: W − 1).
    """

    name: str
    heads: int  # num_attention_heads (n_head for GPT-2)
    kv_heads: int  # num_key_value_heads (defaults to heads: multi-head attention)
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    dtype: str  # torch_dtype
    num_layers: int | None = None  # num_hidden_layers (n_layer), for per-model totals
    max_position_embeddings: int | None = None
    #: How :attr:`max_position_embeddings` was derived where it is not a context field as the file gives it (RoPE
    #: scaling, a padding offset), in words; "" otherwise.
    context_source: str = ""
    #: An encoder-decoder's decoder context (``max_target_positions``: Whisper's 448), the limit of a decode step.
    decoder_context: int | None = None
    decoder_context_key: str = "max_target_positions"  # the field it was read from (LED: max_decoder_position_embeddings)
    #: An encoder-decoder's decoder layer count (``decoder_layers``, T5's ``num_decoder_layers``: Whisper-large-v3-turbo's
    #: 4 against its encoder's 32), the layers a decode step runs; None where the file gives none.
    decoder_layers: int | None = None
    #: A sequence-to-sequence file (``is_encoder_decoder``, a decoder layer count or a decoder context; Funnel's
    #: upsampling blocks are not one): its decoder's layers are :meth:`runs_decoder`'s.
    encoder_decoder: bool = False
    source: str = ""  # path the config was read from
    extra: dict[str, Any] = field(default_factory=dict)
    window: int | None = None  # tokens of a sliding window or attention chunk (None: every layer is full)
    window_kind: str = ""  # "sliding-window" or "chunked" (Llama-4 attention_chunk_size)
    window_layers: str = ""  # which layers use it, in words ("all 32 layers", "29 of 34 layers (...)")
    notes: tuple[str, ...] = ()  # fields read that change no bytes, one sentence each
    causal_default: bool = True  # whether the model's self-attention is causal (see bidirectional_source)
    bidirectional_source: str = ""  # the field that makes it bidirectional, in words ("" when causal)
    attention_dropout: float = 0.0  # attention_dropout / attention_probs_dropout_prob (training only)
    dense_up_to: int | None = None  # tokens up to which long-context sparse attention stays dense (None: always)
    sparse_what: str = ""  # that sparse attention, in words
    full_kv_heads: int | None = None  # KV heads of the full-attention layers where they differ (Gemma-4), else None
    full_head_dim: int | None = None  # HEAD_DIM of the full-attention layers where it differs (Gemma-4), else None
    window_each_side: int | None = None  # keys each side of a bidirectional sliding window (None: window // 2)
    #: An encoder-decoder whose encoder's attention is not its decoder's (LED's ``attention_window``, LongT5's
    #: ``encoder_attention_type``, BigBird-Pegasus's ``block_sparse``; their decoders run plain causal attention,
    #: HF ``LEDDecoderAttention``, ``LongT5Attention``, ``BigBirdPegasusDecoderAttention``): that encoder attention in
    #: words, "" otherwise. A decoder layer (:meth:`runs_decoder`) drops :attr:`window` and :attr:`encoder_refusal`.
    encoder_attention: str = ""
    #: Why the encoder's layer cannot be modelled (block-sparse, transient-global attention): raised for an encoder
    #: layer only (iomodel.spec.resolve), None where it can.
    encoder_refusal: str | None = None
    #: Why the model has no decode step (DETR's decoder: its object queries in one pass, no KV cache), None where it
    #: has one; raised for ``--phase decode`` (iomodel.spec.resolve).
    decode_refusal: str | None = None

    def for_decoder(self) -> "AttentionConfig":
        """This config as its decoder's layers run (:attr:`encoder_attention` gone: no window, no refusal), with a
        note saying so; itself where the encoder's attention is the decoder's too. Raises nothing."""
        if not self.encoder_attention:
            return self
        return replace(self, window=None, window_kind="", window_layers="", encoder_refusal=None, encoder_attention="",
                       notes=self.notes + (f"{self.encoder_attention} is the encoder's: the decoder's self-attention "
                                           "modelled here is plain causal attention over every earlier key.",))

    def full_geometry(self) -> tuple[int, int] | None:
        """(KV heads, HEAD_DIM) of the model's full-attention layers, counts of heads and elements per head, where
        they differ from :attr:`kv_heads`/:attr:`head_dim` (Gemma-4's ``num_global_key_value_heads`` under
        ``attention_k_eq_v`` and ``global_head_dim``, HF ``Gemma4TextAttention``); None where every layer has the
        same. Raises nothing."""
        if self.full_kv_heads is None and self.full_head_dim is None:
            return None
        return self.full_kv_heads or self.kv_heads, self.full_head_dim or self.head_dim

    def check_dense(self, seqlen_q: int, seqlen_k: int) -> None:
        """Refuse lengths past which the model's long-context attention is sparse (:attr:`dense_up_to`).

        Raises:
            IomodelError: a length exceeds :attr:`dense_up_to`.
        """
        n = max(int(seqlen_q), int(seqlen_k))
        if self.dense_up_to is not None and n > self.dense_up_to:
            raise IomodelError(f"{self.source or self.name}: past {self.dense_up_to:,} tokens the model runs "
                               f"{self.sparse_what}, which iomodel does not model ({n:,} tokens asked): use --seqlen "
                               f"{self.dense_up_to} or less, or pass the sizes with --heads/--kv-heads/--head-dim "
                               "instead of a config to model dense attention at that length")

    def runs_decoder(self, phase: str, causal: bool) -> bool:
        """Whether a layer of this encoder-decoder file (:attr:`encoder_decoder`) is its decoder's self-attention: a
        decode step, or a causal layer where the file's default is its bidirectional encoder (the ``--causal`` its
        note advises). Its context is then :attr:`decoder_context` and its layer count :attr:`decoder_layers`.
        Raises nothing."""
        return self.encoder_decoder and (phase == "decode" or (causal and not self.causal_default))

    def window_words(self) -> str:
        """:attr:`window` in words: ``"4,096 tokens"``, or ``"64 tokens each side"`` for a bidirectional local window
        (ModernBERT's ``local_attention`` of 128, Longformer's ``attention_window``: :attr:`window` is half the span)."""
        return f"{self.window:,} tokens" + (" each side" if "half the span each side" in self.window_kind else "")

    def _chunks_advice(self, n_q: int, n_k: int, spec: Any = None) -> str:
        """What to run instead of one dense layer past a chunk (:meth:`check_seqlen`): the chunks of a square
        forward prefill as a ragged batch (``spec``'s batch times each), the last chunk's keys where every query
        sits in it (bottom-right: a decode step), else each chunk as its own layer. Raises nothing."""
        w = int(self.window)
        own = (n_k - 1) % w + 1  # keys of the last chunk
        each = "model each chunk as its own layer (--seqlen-q/--seqlen-k: its queries and keys, --window none)"
        if spec is None or spec.backward:
            return each + (" (a training step's chunks: one causal layer of each length)" if spec is not None else "")
        if n_q == n_k and spec.phase == "prefill":
            k, r = divmod(n_q, w)
            b = spec.batch
            return (f"each chunk attends within itself, a ragged batch of its chunks: --seqlens "
                    f"'{w}*{k * b}{f',{r}*{b}' if r and b > 1 else f',{r}' if r else ''}' --window none (in place of "
                    "--batch and --seqlen: a sequence of the batch each)")
        if n_q <= own and (spec.phase == "decode" or spec.causal_align == "bottom-right"):
            cmd = f"--seqlen {own}" if spec.phase == "decode" else f"--seqlen-q {n_q} --seqlen-k {own}"
            who = "a decode query sees" if n_q == 1 else f"its {n_q:,} queries (all in the last chunk) see"
            return f"{who} the {own:,} key{'s' if own != 1 else ''} of the last chunk: model that with {cmd} --window none"
        return each

    def check_seqlen(self, seqlen_q: int, seqlen_k: int, ragged: bool = False, spec: Any = None) -> None:
        """Refuse lengths at which a sliding window or attention chunk would mask keys.

        A sliding window of W tokens, or chunks of W tokens, equal full attention while
        every query sees every key, i.e. while max(seqlen_q, seqlen_k) <= W; beyond that
        the traffic differs and iomodel does not model it yet (``--window`` states a layer's band instead:
        the caller then does not ask). ``ragged``: the lengths are a ragged batch's longest (the advice names
        the sequences, not ``--seqlen``); ``spec``: the layer asked for (its phase, batch, pass and alignment shape
        a chunked layer's advice, :meth:`_chunks_advice`).

        Raises:
            IomodelError: the config has such layers and a length exceeds W.
        """
        n = max(int(seqlen_q), int(seqlen_k))
        each_side = "half the span each side" in self.window_kind  # ModernBERT: keys within window of the query
        reach = None if self.window is None else self.window + (1 if each_side else 0)  # longest length it hides none
        if reach is not None and n > reach:
            shorter = (f"keep every sequence of --seqlens at {reach:,} tokens or fewer" if ragged
                       else f"use --seqlen {reach} or less")
            masks = (f"{self.source or self.name}: {self.window_kind} attention ({self.window_words()} on "
                     f"{self.window_layers}) masks keys at {n:,} tokens, which")
            if each_side:  # the band the layer has, on both sides (the generic L,R advice leaves the user to work it)
                raise IomodelError(
                    f"{masks} one dense layer does not model: pass --window {self.window},{self.window} for those "
                    f"layers (each query sees the keys within {self.window:,} of it), --window none for the global "
                    f"ones, or {shorter}")
            if self.window_kind == "chunked" and not ragged:  # chunks attend within themselves: not a band
                raise IomodelError(
                    f"{masks} one dense layer does not model: {self._chunks_advice(int(seqlen_q), int(seqlen_k), spec)}"
                    "; or --window none for a full-attention layer (a --window band is not a chunk)")
            raise IomodelError(
                f"{masks} iomodel does not model: {shorter}, or pass --window for the layer to model (none: a "
                "full-attention layer; L,R: a band of L keys left and R right of the diagonal)")

    def layer(
        self,
        *,
        batch: int = 1,
        seqlen_q: int,
        seqlen_k: int | None = None,
        dtype: str | None = None,
        causal: bool = True,
        causal_align: str = "top-left",
        phase: str = "prefill",
        backward: bool = False,
    ) -> LayerSpec:
        """The :class:`LayerSpec` of one attention call of this model: a layer with its window where the
        config has one (up to the window's length), else a full-attention layer, with the full layers' sizes
        where they differ (:meth:`full_geometry`).

        Raises:
            IomodelError: a bad size (see :class:`LayerSpec`), or a length beyond the
                model's sliding window (:meth:`check_seqlen`).
        """
        self.check_seqlen(seqlen_q, seqlen_q if seqlen_k is None else seqlen_k)
        kv_heads, head_dim = (self.full_geometry() if self.window is None else None) or (self.kv_heads, self.head_dim)
        return LayerSpec(
            batch=batch,
            heads=self.heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            seqlen_q=seqlen_q,
            seqlen_k=seqlen_q if seqlen_k is None else seqlen_k,
            dtype=dtype or self.dtype,
            causal=causal,
            causal_align=causal_align,  # type: ignore[arg-type]
            phase=phase,  # type: ignore[arg-type]
            backward=backward,
            name=self.name,
        )


class _Fields:
    """The fields of one config (nested ``text_config`` merged over the top level; where neither gives heads, an
    ``encoder`` sub-object's: T5Gemma, ``EncoderDecoderModel``), read with one-line errors that name the file and the
    field."""

    def __init__(self, cfg: dict[str, Any], where: str) -> None:
        self.where = where
        self.cfg = dict(cfg)
        self.top_model_type = cfg.get("model_type")  # the checkpoint's family (a nested config's may differ)
        self.hybrid = ""  # a note: the layers of layer_types that are not attention (set by _window)
        self.defaulted_window = ""  # a note: the family's default sliding window was used (set by _window)
        self.towers: list[str] = []  # other towers' sub-configs with attention heads (vision_config ...), not modelled
        self.window_note = ""  # a note on a per-layer window list (set by _window)
        self.defaulted_layer_types = ""  # a note: Gemma-4's default layout or its last layer made full (_window)
        self.overridden: list[str] = []  # attention fields the nested config gives differently from the top level
        self.dropped: list[str] = []  # the wrapper's top-level language-model fields the nested config does not name
        self.dtype_note = ""  # a note: the nested and top-level dtypes differ (the top level's is read)
        self.context_source = ""  # how the context was derived where not a context field as given (_context)
        self.decoder: dict[str, Any] | None = None  # the decoder's sub-config where the encoder's fields are read
        self.encoder_read = False  # the attention fields are an ``encoder`` sub-object's (T5Gemma)
        self.text_model_type = ""  # a note: the wrapper's default model_type of its text_config (LLaVA: llama)
        self.jetmoe = ""  # a note: JetMoE's query heads from its KV heads and experts per token (_jetmoe_heads)
        self.kv_note = ""  # a note: KV heads from a family's own field (PLaMo n_shared_head; _kv_heads)
        self.nested_decoder = False  # the nested config read says "is_decoder": true (Pix2Struct's text_config)
        self.decoder_read = False  # the fields are a 'decoder' sub-object's, with no encoder holding heads (MusicGen)
        for outer in OUTER_NESTED_KEYS:  # Qwen2.5-Omni: the language model's config one level further in
            sub = cfg.get(outer)
            if isinstance(sub, dict) and any(isinstance(sub.get(k), dict) for k in NESTED_KEYS):
                # the language model's config and the towers beside it (Qwen2.5-Omni's vision and audio encoders)
                cfg = {**cfg, **{k: v for k, v in sub.items() if k in NESTED_KEYS or k in TOWER_KEYS}}
                where = f"{where} ({outer})"
                break
        for key in NESTED_KEYS:
            sub = cfg.get(key)
            if sub is None:
                continue
            if not isinstance(sub, dict):
                raise IomodelError(f"{where}: '{key}' must be a JSON object, got {_kind(sub)}: fix the file")
            given = sub  # as the file gives it, nulls included
            # a nested null dtype keeps the top level's (CLIP); a nested null language-model field is null (HF: the
            # text config's own None), not the wrapper's value
            sub = {k: v for k, v in sub.items() if v is not None or k not in cfg or k in TEXT_MODEL_KEYS}
            self.overridden = sorted(k for k, v in sub.items() if k in cfg and cfg[k] != v and k in ATTENTION_KEYS
                                     and v is not None)
            if key == "text_config" and sub.get("model_type") is None and self.top_model_type in TEXT_CONFIG_MODEL_TYPE:
                sub["model_type"] = TEXT_CONFIG_MODEL_TYPE[self.top_model_type]  # as the wrapper's class reads it
                self.text_model_type = (f"the text_config gives no 'model_type': {sub['model_type']!r}, the one HF "
                                        f"transformers' {self.top_model_type!r} configuration gives it, so that "
                                        "family's defaults apply.")
            self.nested_decoder = sub.get("is_decoder") is True  # Pix2Struct's text_config: the causal decoder
            self.dropped = sorted(k for k in cfg if k in TEXT_MODEL_KEYS and given.get(k) is None and cfg[k] is not None)
            for k in self.dropped:  # not the language model's (MusicFlamingo's audio head_dim): transformers builds
                del self.cfg[k]  # the text config from the nested dict and its class defaults
            # the dtype: the top level's first (transformers' dtype="auto" and vLLM read the root config), the
            # nested one where the top level gives none; said where they differ
            top_key = next((k for k in DTYPE_KEYS if cfg.get(k) is not None), None)
            sub_key = next((k for k in DTYPE_KEYS if sub.get(k) is not None), None)
            if top_key is not None:
                if sub_key is not None and sub[sub_key] != cfg[top_key]:
                    self.dtype_note = (f"the nested config gives {sub_key} {sub[sub_key]!r} and the top level "
                                       f"{top_key} {cfg[top_key]!r}: the top level's is used, as transformers "
                                       "(dtype='auto') and vLLM read it; pass --dtype for the other.")
                sub = {k: v for k, v in sub.items() if k not in DTYPE_KEYS}
            self.cfg.update(sub)  # the language model's fields win; top-level torch_dtype stays if absent there
            self.where = f"{where} ({key})"
            break
        # another tower with heads, nested (LLaVA) or beside top-level text fields (Qwen2-VL's vision_config)
        self.towers = sorted(k for k in TOWER_KEYS
                             if isinstance(cfg.get(k), dict) and any(h in cfg[k] for h in HEADS_KEYS))
        self.tower_source = cfg  # where the towers' sub-configs are (the thinker's, for Qwen2.5-Omni)
        enc = cfg.get(ENCODER_KEY)
        if self.key_of(HEADS_KEYS) is None and isinstance(enc, dict) and any(enc.get(h) is not None
                                                                             for h in HEADS_KEYS):
            # T5Gemma, EncoderDecoderModel: the attention fields are the encoder's and the decoder's only
            self.cfg.update({k: v for k, v in enc.items() if v is not None or k not in self.cfg})  # top dtype stays
            self.where = f"{self.where} ({ENCODER_KEY})"
            self.encoder_read = True
            dec = cfg.get(DECODER_KEY)
            self.decoder = dec if isinstance(dec, dict) else None
        dec = cfg.get(DECODER_KEY)
        if self.key_of(HEADS_KEYS) is None and not self.encoder_read and isinstance(dec, dict) and any(
                dec.get(h) is not None for h in HEADS_KEYS):
            # MusicGen: a decoder-only language model in 'decoder', its text encoder and audio codec beside it
            self.cfg.update({k: v for k, v in dec.items() if v is not None or k not in self.cfg})  # top dtype stays
            self.where = f"{self.where} ({DECODER_KEY})"
            self.nested_decoder = True  # causal: the decoder's self-attention
            self.decoder_read = True

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def key_of(self, keys: tuple[str, ...]) -> str | None:
        """The first of ``keys`` present (a ``null`` value counts as absent: HF's default)."""
        return next((k for k in keys if self.cfg.get(k) is not None), None)

    def int_(self, keys: tuple[str, ...], required: str | None = None) -> int | None:
        """The positive integer under the first of ``keys``; ``required`` is the hint when none is given."""
        key = self.key_of(keys)
        if key is None:
            if required is not None:
                null = next((k for k in keys if k in self.cfg), None)
                got = f"'{null}' is null" if null else f"no '{keys[0]}' field" + (
                    f" (nor {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else "")
                raise IomodelError(f"{self.where}: {got}: {required}")
            return None
        return self.int_at(key, self.cfg[key])

    def int_at(self, key: str, value: Any) -> int:
        if isinstance(value, list):  # Swin's heads per stage, OpenELM's per layer
            raise IomodelError(f"{self.where}: '{key}' is a JSON array ({len(value)} value{'s' * (len(value) != 1)}: "
                               "one per stage or layer), so no one layer stands for the model: pass the sizes with "
                               "--heads/--kv-heads/--head-dim instead of a config to model one layer")
        if isinstance(value, float) and math.isfinite(value) and value == int(value) and value > 0:
            # a count written as a float (1e30, 32.0): HF writes integers; refused rather than read
            raise IomodelError(f"{self.where}: '{key}' must be a positive integer, got {value!r} (a JSON number "
                               "with a fraction or an exponent): write it as an integer")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value) or value <= 0:
            raise IomodelError(f"{self.where}: '{key}' must be a positive integer, got {_kind(value)}: fix the file")
        return int(value)

    def flag(self, key: str) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise IomodelError(f"{self.where}: '{key}' must be true or false, got {_kind(value)}: fix the file")
        return value


def _refuse_mamba_ssm(f: _Fields) -> None:
    """Refuse a mamba-ssm config (``d_model``, ``n_layer``, ``ssm_cfg``; no ``model_type``) in words that fit it: a
    pure state-space model has no attention; a hybrid's attention sizes are in ``attn_cfg`` (``num_heads``,
    ``head_dim``, ``num_heads_kv``) on the layers of ``attn_layer_idx``, which the flags can carry.

    Raises:
        IomodelError: always (one line).
    """
    attn = f.cfg.get("attn_cfg")
    if isinstance(attn, dict) and attn.get("num_heads") is not None:
        layers = f.cfg.get("attn_layer_idx")
        where = f" on layers {layers}" if isinstance(layers, list) else ""
        sizes = {flag: f.int_at(f"attn_cfg.{key}", attn[key]) for key, flag in
                 (("num_heads", "--heads"), ("num_heads_kv", "--kv-heads"), ("head_dim", "--head-dim"))
                 if attn.get(key) is not None}  # each a positive integer, else one line
        flags = " ".join(f"{flag} {n}" for flag, n in sizes.items())
        raise IomodelError(f"{f.where}: a mamba-ssm hybrid ('ssm_cfg'): its attention is in 'attn_cfg'{where}, which "
                           f"iomodel does not read: pass {flags} (and --dtype) instead of the config")
    raise IomodelError(f"{f.where}: a mamba-ssm config ('ssm_cfg', no attention heads): a state-space model has no "
                       "attention layers, so there is no attention traffic to model; pass the sizes with --heads/"
                       "--kv-heads/--head-dim instead of a config to model an attention layer")


def _kv_heads(f: _Fields, heads: int) -> int:
    """KV heads the way each family states them (HF modelling code of each; PLaMo and StripedHyena from their
    own modelling code, which ignores the file's ``num_key_value_heads``: :attr:`_Fields.kv_note` says so)."""
    model_type = f.cfg.get("model_type")
    if model_type == "plamo" and heads:  # pfnet modeling_plamo.py (and mlx-lm plamo.py): k_num_heads =
        shared = f.int_(("n_shared_head",)) or 8  # ceil(num_attention_heads / n_shared_head), PlamoConfig default 8
        kv = -(-heads // shared)
        f.kv_note = (f"model_type 'plamo': {kv} KV heads = ceil({heads} query heads / n_shared_head {shared}) "
                     "(modeling_plamo.py), whatever 'num_key_value_heads' says.")
        return kv
    if model_type == "stripedhyena" and heads:  # togethercomputer StripedHyena AttentionBlock: num_heads_kv =
        groups = f.int_(("proj_groups",)) or 1  # num_attention_heads // proj_groups (StripedHyenaConfig default 1)
        if heads % groups:
            raise IomodelError(f"{f.where}: num_attention_heads ({heads}) is not divisible by proj_groups ({groups}), "
                               "the GQA groups of StripedHyena's attention: fix the file or pass --heads/--kv-heads")
        f.kv_note = (f"model_type 'stripedhyena': {heads // groups} KV heads = {heads} query heads / proj_groups "
                     f"{groups} (its AttentionBlock).")
        return heads // groups
    if f.flag("multi_query_attention"):  # ChatGLM2/3, GLM-4
        return f.int_(("multi_query_group_num",), "give the KV groups of multi_query_attention")
    if f.flag("new_decoder_architecture"):  # Falcon-40B/180B
        return f.int_(("num_kv_heads", "n_head_kv"), "give the KV heads of new_decoder_architecture")
    if f.flag("group_query_attention"):  # CodeShell (modeling_codeshell.py: kv_heads = num_query_groups)
        return f.int_(("num_query_groups",), "give the KV groups of group_query_attention")
    if f.flag("multi_query"):  # Falcon-7B, GPT-BigCode/StarCoder: one K/V head
        return 1
    if model_type in MULTI_QUERY_DEFAULT and f.cfg.get("multi_query") is None:
        f.kv_note = (f"model_type {model_type!r} without 'multi_query': 1 KV head, as transformers reads it "
                     f"({MULTI_QUERY_DEFAULT[model_type]}'s default multi_query=True).")
        return 1
    if model_type in ("falcon", "RefinedWebModel") and f.cfg.get("multi_query") is False:
        # without new_decoder_architecture (read above) FalconAttention projects Q, K and V on all heads
        # (3 x hidden_size), whatever num_kv_heads says: a file giving fewer K/V heads is one transformers fails on
        kv = f.int_(KV_HEADS_KEYS)
        if kv is not None and kv != heads:
            raise IomodelError(f"{f.where}: model_type {model_type!r} with multi_query false and no "
                               f"new_decoder_architecture projects K and V on all {heads} heads (FalconAttention's "
                               f"3 x hidden_size QKV), so '{f.key_of(KV_HEADS_KEYS)}' = {kv} contradicts it "
                               "(transformers fails on this file): fix the file or pass --kv-heads")
        return heads
    if f.cfg.get("attention_head_type") == "multiquery":  # SantaCoder (its own GPT-2 code): one K/V head
        return 1
    attn = f.cfg.get("attn_config")
    if isinstance(attn, dict) and attn.get("attn_type") == "multiquery_attention":  # MPT (llm-foundry) MQA
        return 1
    if isinstance(attn, dict) and attn.get("kv_n_heads") is not None:  # MPT with GQA
        return f.int_at("attn_config.kv_n_heads", attn["kv_n_heads"])
    kv = f.int_(KV_HEADS_KEYS)
    return heads if kv is None else kv


def _bidirectional(f: _Fields) -> str:
    """Why the model's self-attention is bidirectional, in words; "" when it is causal (a decoder).

    Rules, first match wins: a nested config read (``text_config``) that says ``"is_decoder": true`` is causal
    (Pix2Struct: an encoder-decoder whose text_config is its decoder); ``"is_encoder_decoder": true`` (T5, BART,
    Whisper: the encoder's
    self-attention sees every token; their decoder's is causal); the fields read from an ``encoder``
    sub-object (T5Gemma); ``"is_decoder": true`` is causal; ``"use_bidirectional_attention"``
    true (EmbeddingGemma, HF ``Gemma3TextConfig``) or ``"all"`` (HF ``Gemma4TextAttention``: ``is_causal =
    use_bidirectional_attention != "all"``; ``"vision"`` is causal, :func:`_bidirectional_value`); a ``model_type``
    in :data:`ENCODER_MODEL_TYPES` (text, vision and audio encoders); an ``architectures`` entry
    ending in :data:`ENCODER_ARCHITECTURE_SUFFIX` (``BertForMaskedLM``); a diffusers model (:data:`DIFFUSERS_MARK`, in a
    file that names no ``model_type`` or ``architectures``).

    Raises:
        IomodelError: ``is_encoder_decoder`` or ``is_decoder`` is not a boolean, ``use_bidirectional_attention``
            is none of true, false, null, "all", "vision", or ``architectures`` is not a list of strings.
    """
    if f.nested_decoder:  # Pix2Struct: the top level is an encoder-decoder, the fields read are its decoder's
        return ""
    if f.cfg.get("model_type") in DETR_MODEL_TYPES:  # before is_encoder_decoder: its decoder is not causal
        queries = f.int_(("num_queries",))
        return (f"model_type {f.cfg['model_type']!r}: an encoder over the image's feature map and a decoder over "
                f"{f'{queries} ' if queries else ''}object queries, both bidirectional (the decoder runs its queries in "
                "one pass: no mask, no KV cache)")
    if f.flag("is_encoder_decoder"):
        return f"'is_encoder_decoder' = true: the encoder's self-attention is bidirectional {DECODER_CAUSAL_HINT}"
    if f.encoder_read:
        return f"the fields of '{ENCODER_KEY}': the encoder's self-attention is bidirectional {DECODER_CAUSAL_HINT}"
    if f.flag("is_decoder"):
        return ""
    both_ways = _bidirectional_value(f)
    if both_ways is True:
        return f"'{BIDIRECTIONAL_FLAG}' = true: the self-attention is bidirectional (an embedding model)"
    if both_ways == "all":
        return (f"'{BIDIRECTIONAL_FLAG}' = 'all': the self-attention is bidirectional (HF transformers' "
                "Gemma4TextAttention: is_causal = use_bidirectional_attention != 'all')")
    if f.has("causal") and not f.flag("causal"):  # XLM, FlauBERT (a non-boolean value is one error line)
        return "'causal' = false: the self-attention is bidirectional"
    if f.has(DIFFUSERS_MARK) and f.cfg.get("model_type") is None and f.cfg.get("architectures") is None:
        # diffusers writes its version into every model config it saves (FLUX, SD3, EasyAnimate), which name no
        # model_type or architectures; a transformers config that carries the field too keeps its family's rules
        return (f"'{DIFFUSERS_MARK}' = {f.cfg[DIFFUSERS_MARK]!r}"
                + (f" ('_class_name' {f.cfg['_class_name']!r})" if isinstance(f.cfg.get("_class_name"), str) else "")
                + ": a diffusers model, whose attention over its image (and text) tokens has no causal mask")
    model_type = f.cfg.get("model_type")
    if isinstance(model_type, str) and model_type in ENCODER_MODEL_TYPES:
        return f"'model_type' = {model_type!r}: an encoder, whose self-attention is bidirectional"
    archs = f.cfg.get("architectures")
    if archs is None:
        return ""
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise IomodelError(f"{f.where}: 'architectures' must be a list of strings, got {_kind(archs)}: fix the file")
    enc = next((a for a in archs if a.endswith(ENCODER_ARCHITECTURE_SUFFIX)), None)
    if enc is not None:
        return f"'architectures' names {enc!r}: a masked language model, whose self-attention is bidirectional"
    return ""


def _bidirectional_value(f: _Fields) -> bool | str | None:
    """``use_bidirectional_attention`` as the file gives it: true/false (HF ``Gemma3TextConfig``), "all" or "vision"
    (HF ``Gemma4TextConfig``: ``Literal["all", "vision"] | None``), or None (absent or null).

    Raises:
        IomodelError: any other value (one line naming the allowed ones).
    """
    value = f.cfg.get(BIDIRECTIONAL_FLAG)
    if value is None or isinstance(value, bool) or value in BIDIRECTIONAL_VALUES:
        return value
    raise IomodelError(f"{f.where}: '{BIDIRECTIONAL_FLAG}' must be true, false, null, \"all\" or \"vision\" (HF "
                       f"Gemma3TextConfig, Gemma4TextConfig), got {_kind(value)}: fix the file")


def _family_defaults(f: _Fields) -> list[str]:
    """Fill the fields a family's HF configuration class defaults (:data:`FAMILY_DEFAULTS`) where the file leaves
    them out, in place; the names filled, in the table's order.

    Raises:
        IomodelError: the file gives one of them as null (HF's class keeps None: the model cannot be built).
    """
    family = FAMILY_DEFAULTS.get(f.cfg.get("model_type")) if isinstance(f.cfg.get("model_type"), str) else None
    if family is None:
        return []
    filled = []
    for key, value in family[1].items():
        if f.key_of(_DEFAULTED_SPELLINGS[key]) is None:
            given_null = next((k for k in _DEFAULTED_SPELLINGS[key] if k in f.cfg), None)
            if given_null is not None and key == "num_key_value_heads" and family[0] in KV_NULL_IS_HEADS:
                continue  # `if num_key_value_heads is None: num_key_value_heads = num_attention_heads`: MHA
            if given_null is not None:  # HF passes the null to the class, which keeps None: no default applies
                raise IomodelError(f"{f.where}: '{given_null}' is null, which HF transformers' {family[0]} keeps as "
                                   f"None (its default {value} applies only where the key is left out): give the "
                                   "value, or leave the key out for the default")
            f.cfg[key] = value
            filled.append(key)
    return filled


def _jetmoe_heads(f: _Fields, defaulted: list[str]) -> None:
    """JetMoE's query heads, in place, where the file gives no ``num_attention_heads``: HF ``JetMoeConfig`` sets
    ``num_attention_heads = num_key_value_heads * num_experts_per_tok`` (the experts of its mixture of attention heads
    that a token runs, :data:`JETMOE_EXPERTS_PER_TOKEN` by default, each with ``num_key_value_heads`` query heads on
    one K/V of HEAD_DIM ``kv_channels``), not hidden_size / HEAD_DIM; a GPT-style ``n_head`` beside it is not what
    the model reads. Sets :attr:`_Fields.jetmoe` to the note that says so.

    Raises:
        IomodelError: ``num_key_value_heads`` or ``num_experts_per_tok`` is not a positive integer.
    """
    if f.cfg.get("model_type") != "jetmoe" or f.has("num_attention_heads"):
        return
    kv = f.int_(("num_key_value_heads",))
    top_k = f.int_(("num_experts_per_tok",))
    said = "num_experts_per_tok" if top_k is not None else "JetMoeConfig's default num_experts_per_tok"
    top_k = top_k or JETMOE_EXPERTS_PER_TOKEN
    f.cfg["num_attention_heads"] = kv * top_k
    ignored = [k for k in HEADS_KEYS[1:] if f.has(k)]
    f.jetmoe = (f"model_type 'jetmoe': {kv * top_k} query heads = num_key_value_heads {kv}"
                + (" (the class default)" if "num_key_value_heads" in defaulted else "")
                + f" x {said} {top_k} (HF transformers' JetMoeConfig: a token runs {top_k} attention experts of "
                f"{kv} query heads each on one K/V)"
                + (f"; {', '.join(repr(k) for k in ignored)} is not what the model reads" if ignored else "") + ".")


def _full_layers(f: _Fields, heads: int, kv_heads: int, head_dim: int, *, kv_flag: bool,
                 head_dim_flag: bool) -> tuple[int | None, int | None, tuple[str, ...]]:
    """The KV heads and HEAD_DIM (counts of heads and elements per head) of Gemma-4's full-attention layers where they
    differ from its sliding-window layers', and the notes that say so.

    Rule (HF ``transformers`` ``Gemma4TextAttention``, modeling_gemma4.py): a layer slides when its ``layer_types``
    entry is ``sliding_attention``; the others have HEAD_DIM ``global_head_dim`` (``Gemma4TextConfig`` gives 512,
    :data:`GEMMA4_GLOBAL_HEAD_DIM`, to a file that leaves it out; a null falls back to ``head_dim``) and, under
    ``attention_k_eq_v`` (``use_alternative_attention = attention_k_eq_v and not is_sliding``),
    ``num_global_key_value_heads`` KV heads (when not null), whose values are the keys' projection (``v_proj`` is
    None). Read for ``model_type`` gemma4/gemma4_text and for any file giving ``global_head_dim`` or
    ``num_global_key_value_heads``. ``heads``, ``kv_heads``, ``head_dim``: the values in effect; ``kv_flag``,
    ``head_dim_flag``: those came from --kv-heads/--head-dim, which set every layer's value, the full layers' too
    (said in a note).

    Returns:
        ``(full_kv_heads, full_head_dim, notes)``: each None where it equals the sliding layers' or a flag gives it.

    Raises:
        IomodelError: ``global_head_dim`` or ``num_global_key_value_heads`` is not a positive integer,
            ``attention_k_eq_v`` not a boolean, or the query heads are not divisible by the full layers' KV heads.
    """
    model_type = f.cfg.get("model_type")
    gemma4 = model_type in GEMMA4_MODEL_TYPES
    if not gemma4 and not f.has("global_head_dim") and not f.has("num_global_key_value_heads"):
        return None, None, ()
    if f.has("global_head_dim"):
        full_d, d_said = f.int_(("global_head_dim",)), "global_head_dim"
    elif gemma4 and "global_head_dim" not in f.cfg:
        full_d, d_said = GEMMA4_GLOBAL_HEAD_DIM, "Gemma4TextConfig's default global_head_dim"
    else:  # null: Gemma4TextAttention falls back to head_dim
        full_d, d_said = None, ""
    k_eq_v = f.flag("attention_k_eq_v")
    global_kv = f.int_(("num_global_key_value_heads",))
    full_kv = global_kv if k_eq_v else None
    file_kv = _kv_heads(f, heads) if kv_flag else kv_heads  # the file's sliding-window layers'
    file_d = (f.int_(HEAD_DIM_KEYS) or head_dim) if head_dim_flag else head_dim
    differ_kv, differ_d = full_kv is not None and full_kv != file_kv, full_d is not None and full_d != file_d
    notes: tuple[str, ...] = ()
    if global_kv is not None and not k_eq_v and global_kv != file_kv:
        notes += (f"'num_global_key_value_heads' = {global_kv} is not read: HF transformers' Gemma4TextAttention uses "
                  "it only under attention_k_eq_v (false here), so the full-attention layers have "
                  f"num_key_value_heads = {file_kv} KV heads.",)
    if not (differ_kv or differ_d):
        return None, None, notes
    if differ_kv and not kv_flag and heads % full_kv:
        raise IomodelError(f"{f.where}: num_attention_heads ({heads}) is not divisible by num_global_key_value_heads "
                           f"({full_kv}), the full-attention layers' KV heads: fix the file or pass --kv-heads")
    types = f.cfg.get("layer_types")
    which = "the full-attention layers"
    if isinstance(types, list):
        which += f" ({sum(t in FULL_ATTENTION_LAYER_TYPES for t in types)} of {len(types)}, layer_types)"
    full = [f"{full_kv} KV heads (num_global_key_value_heads, with attention_k_eq_v)"] * differ_kv + \
        [f"HEAD_DIM {full_d} ({d_said})"] * differ_d
    sliding = [f"{file_kv} KV heads"] * differ_kv + [f"HEAD_DIM {file_d}"] * differ_d
    note = (f"{which} have {' and '.join(full)}, the sliding-window layers {' and '.join(sliding)} (HF transformers' "
            "Gemma4TextAttention)")
    if k_eq_v:
        note += ("; on the full layers the values are the keys' projection (attention_k_eq_v: v_proj is None), yet "
                 "the attention call still reads a V tensor of K's shape, whose bytes are counted")
    notes += (note + ".",)
    if differ_d and d_said != "global_head_dim" and not head_dim_flag:
        notes += (f"the file gives no 'global_head_dim': {full_d}, the default of HF transformers' Gemma4TextConfig "
                  f"(model_type {model_type!r}), as transformers reads the file.",)
    flagged = [f"--kv-heads {kv_heads} (the file's {full_kv})"] * (differ_kv and kv_flag) + \
        [f"--head-dim {head_dim} (the file's {full_d})"] * (differ_d and head_dim_flag)
    if flagged:
        notes += (f"{' and '.join(flagged)} set{'s' * (len(flagged) == 1)} every layer's value, the full-attention "
                  "layers' too.",)
    return (full_kv if differ_kv and not kv_flag else None, full_d if differ_d and not head_dim_flag else None,
            notes)


def _decoder_note(f: _Fields) -> str:
    """A note where the attention fields were read from an ``encoder`` sub-object (T5Gemma, HF
    ``EncoderDecoderConfig``): the encoder's self-attention is the layer modelled, and the decoder's causal
    self-attention needs its own sizes (counts of heads, elements per head), named where the ``decoder`` sub-object
    gives them; "" otherwise. Raises nothing: a decoder it cannot read gets the flags' names instead."""
    if f.decoder_read:
        return (f"'{DECODER_KEY}' holds the attention fields (the top level gives no heads and no '{ENCODER_KEY}' "
                "does): the decoder's causal self-attention is the layer modelled; other sub-configs (a text encoder, "
                "an audio codec) are not.")
    if not f.encoder_read:
        return ""
    # a decoder's own heads first (TrOCR's decoder sub-config: decoder_attention_heads 16, no num_attention_heads)
    got = (_sub_sizes(f.decoder, f"{f.where} ({DECODER_KEY})", heads_keys=("decoder_attention_heads",) + HEADS_KEYS)
           if f.decoder is not None else None)
    sizes = ""
    if got is not None and got[2] is not None:
        heads, kv, head_dim = got
        sizes = f"{heads} heads, {kv} KV heads, HEAD_DIM {head_dim}: pass --causal --heads {heads} " \
                f"--kv-heads {kv} --head-dim {head_dim} to model it"
    return (f"'{ENCODER_KEY}' and '{DECODER_KEY}' hold the attention fields (an encoder-decoder whose top level gives "
            "no heads): the encoder's are read, whose self-attention is bidirectional; the decoder's self-attention "
            f"is causal ({sizes or 'pass --causal with its --heads/--kv-heads/--head-dim to model it'}).")


def _sub_sizes(sub: dict[str, Any], where: str, width_keys: tuple[str, ...] = HIDDEN_KEYS,
               heads_keys: tuple[str, ...] = HEADS_KEYS) -> tuple[int, int, int | None] | None:
    """(heads, KV heads, HEAD_DIM) of a sub-config (another tower, an encoder-decoder's decoder), read as a config's
    own fields are (:func:`_kv_heads`; HEAD_DIM from :data:`HEAD_DIM_KEYS`, else the first of ``width_keys`` / heads,
    None where neither gives it); None where it gives no heads or a field cannot be read (a note only: raises
    nothing)."""
    try:
        d = _Fields(sub, where)
        heads = d.int_(heads_keys)
        if heads is None:
            return None
        head_dim = d.int_(HEAD_DIM_KEYS)
        hidden = d.int_(width_keys) if head_dim is None else None
        if head_dim is None and hidden is not None and hidden % heads == 0:
            head_dim = hidden // heads
        return heads, _kv_heads(d, heads), head_dim
    except IomodelError:
        return None


def _tower_sizes(cfg: dict[str, Any], key: str) -> str:
    """``key`` (a tower's sub-config, e.g. ``vision_config``) with its heads and HEAD_DIM where it gives them
    (:func:`_sub_sizes`), e.g. ``"vision_config (16 heads, HEAD_DIM 64)"``; just ``key`` where they cannot be read.
    Raises nothing."""
    # a tower's own width first: Qwen2-VL's vision_config gives embed_dim 1280 (its attention) and hidden_size 3584
    # (the language model's, which its merger projects to)
    got = _sub_sizes(cfg[key], key, ("embed_dim",) + HIDDEN_KEYS) if isinstance(cfg.get(key), dict) else None
    if got is None:
        return key
    heads, _, d = got
    return f"{key} ({heads} heads" + (f", HEAD_DIM {d})" if d is not None else ")")


def _which_layers(indices: list[int], total: int | None = None) -> str:
    """The layer indices (0-based) as text: runs of consecutive layers as ``a–b``, a stride as
    ``a, a+s, …, z`` (step s), a long irregular list of ``total`` layers by the few it leaves out
    (``all but layers 5, 11, 17``), else the list; e.g. ``layers 0, 2, …, 40 (every 2nd from 0)``."""
    if total and len(indices) > 12 and len(indices) < total:
        rest = [i for i in range(total) if i not in set(indices)]
        if len(rest) <= 12:
            return "all but " + _which_layers(rest)
    if not indices:
        return "no layer"
    if len(indices) == 1:
        return f"layer {indices[0]}"
    steps = {b - a for a, b in zip(indices, indices[1:])}
    if steps == {1}:
        return f"layers {indices[0]}–{indices[-1]}"
    if len(steps) == 1 and len(indices) > 3:
        step = steps.pop()
        nth = "th" if step % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(step % 10, "th")
        return f"layers {indices[0]}, {indices[1]}, …, {indices[-1]} (every {step}{nth} from {indices[0]})"
    if len(indices) <= 12:
        return "layers " + ", ".join(map(str, indices))
    return "layers " + ", ".join(map(str, indices[:6])) + ", …, " + ", ".join(map(str, indices[-3:]))


def _local_window(f: _Fields, total: int | None) -> tuple[int, str, str] | None:
    """Local attention under its other published names, as the keys each query row can reach
    on one side (so the window covers every key while max(seqlen_q, seqlen_k) <= it): GPT-Neo
    ``window_size`` with ``attention_types`` (causal), RecurrentGemma ``attention_window_size``
    (causal), ModernBERT ``local_attention`` (bidirectional: half the span on each side) with
    ``global_attn_every_n_layers``, Longformer ``attention_window`` (bidirectional, per layer)."""
    of = f" of {total} layers" if total else " layers"
    types = f.cfg.get("attention_types")
    if types is not None and f.cfg.get("model_type") in (None, "gpt_neo") and not (
            isinstance(types, list) and types and all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], list) and e[0]
                and all(k in ("global", "local") for k in e[0])
                and isinstance(e[1], int) and not isinstance(e[1], bool) and e[1] > 0 for e in types)):
        raise IomodelError(f"{f.where}: 'attention_types' must be a list of [[kinds], repeats] entries, the kinds "
                           "\"global\" or \"local\" (GPT-Neo: [[[\"global\", \"local\"], 12]]), got "
                           f"{_kind(types)}: fix the file")
    if f.has("window_size") and isinstance(types, list):  # GPT-Neo: [[["global", "local"], 12]]
        kinds = [k for entry in types if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int)
                 for _ in range(entry[1]) for k in (entry[0] if isinstance(entry[0], list) else [])]
        if total and len(kinds) != total:  # HF GPTNeoConfig raises where the layers and the types differ
            raise IomodelError(f"{f.where}: 'attention_types' gives {len(kinds)} layers' kinds for {total} layers: "
                               "make its repeats add up to the layers: fix the file")
        n = kinds.count("local")
        if n:
            return f.int_(("window_size",)), "local", (f"{n} of {len(kinds)} layers (attention_types): "
                                                       + _which_layers([i for i, k in enumerate(kinds) if k == "local"]))
    if f.cfg.get("encoder_attention_type") == "local":  # LongT5: |i - j| < local_radius + 1 (LongT5LocalAttention)
        radius = f.int_(("local_radius",)) or LONGT5_LOCAL_RADIUS
        return radius + 1, f"local (bidirectional, {radius} keys each side)", "every encoder layer (LongT5 local)"
    if f.has("attention_window_size"):  # RecurrentGemma: the attention blocks of block_types
        where = ("the attention blocks (block_types)" if f.has("block_types") or f.cfg.get("model_type") ==
                 "recurrent_gemma" else
                 "the attention layers ('attention_window_size')")
        return f.int_(("attention_window_size",)), "local", where
    if f.has("local_attention") and f.cfg.get("model_type") == "modernbert-decoder":
        # HF ModernBertDecoderConfig: sliding_window = local_attention // 2, causal (q - k < that: its layers'
        # sliding_window mask), on the layers that are not global (every global_attn_every_n_layers-th from 0)
        every = f.int_(("global_attn_every_n_layers",))
        if every == 1:
            return None
        layers = (f"{total - -(-total // every)}{of}" if total and every else "its local layers")
        # an ordinary causal sliding window (HF masks it so), as the same model's layer_types file reads; which layers
        # are global differs between transformers versions (i % n == 0 or (i + 1) % n == 0): the count, not the list
        return max(1, f.int_(("local_attention",)) // 2), "sliding-window", \
            layers + (f" (global_attn_every_n_layers {every}; local_attention // 2)" if every else "")
    if f.has("local_attention"):  # ModernBERT: a span of local_attention tokens centred on the query
        every = f.int_(("global_attn_every_n_layers",))
        if every == 1:  # every layer global: no local attention
            return None
        layers = (f"{total - -(-total // every)}{of}" if total and every else "its local layers")  # 0, every, ... global
        return max(1, f.int_(("local_attention",)) // 2), "local (bidirectional, half the span each side)", \
            layers + (f" (global_attn_every_n_layers {every})" if every else "")
    win = f.cfg.get("attention_window")
    if win == []:
        raise IomodelError(f"{f.where}: 'attention_window' is an empty JSON array: give a span (tokens), one per "
                           "layer: fix the file")
    if win is not None:  # Longformer: a span per layer, centred on the query
        spans = win if isinstance(win, list) else [win]
        spans = [f.int_at("attention_window", w) for w in spans]
        return max(1, max(spans) // 2), "local (bidirectional, half the span each side)", f"all{of.replace(' of', '')}" \
            if not total else f"all {total} layers"
    return None


def _window(f: _Fields, num_layers: int | None) -> tuple[int | None, str, str]:
    """The local-attention window (tokens), its kind and which layers use it, from
    ``layer_types`` (transformers >= 4.53), Gemma's patterns, Qwen2's
    ``use_sliding_window``/``max_window_layers``, Llama-4's ``attention_chunk_size``, or a
    plain ``sliding_window`` (Mistral-7B-v0.1, Phi-3: every layer)."""
    total = num_layers
    of = f" of {total} layers" if total else " layers"
    windows = f.cfg.get("sliding_window")
    if isinstance(windows, list):  # Mistral params.json: a window per layer, the list repeated over the layers
        if not windows:
            raise IomodelError(f"{f.where}: 'sliding_window' is an empty JSON array: give a window (tokens), one per "
                               "layer, or null: fix the file")
        sizes = [f.int_at("sliding_window", w) for w in windows]
        n = total or len(sizes)
        w_min = min(sizes)
        on = [i for i in range(n) if sizes[i % len(sizes)] == w_min]
        others = sorted(set(sizes) - {w_min})
        if others:
            f.window_note = (f"'sliding_window' = {windows!r}: a window per layer, repeated; the other layers' "
                             f"window{'s' * (len(others) > 1)} ({', '.join(f'{o:,}' for o in others)} tokens) "
                             "counted as full attention, which holds while the sequence fits them.")
        return w_min, "sliding-window", f"{len(on)}{of} (the sliding_window list): " + _which_layers(on, total)
    layout = f.cfg.get("sliding_window_layout")
    if f.has("sliding_window_size") and isinstance(layout, list):  # SmallThinker: 1 = a sliding-window layer
        if not all(v in (0, 1) for v in layout):
            raise IomodelError(f"{f.where}: 'sliding_window_layout' must list 0 (global) or 1 (sliding window) per "
                               "layer: fix the file")
        on = [i for i, v in enumerate(layout) if v == 1]
        if not on:
            return None, "", ""
        return (f.int_(("sliding_window_size",)), "sliding-window",
                f"{len(on)} of {len(layout)} layers (sliding_window_layout): " + _which_layers(on, len(layout)))
    glob = f.cfg.get("global_attn_idx")
    if isinstance(glob, list) and f.has("sliding_window") and total:  # Hymba: all but these layers slide
        if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in glob):
            raise IomodelError(f"{f.where}: 'global_attn_idx' must list layer indices (whole numbers from 0): "
                               "fix the file")
        on = [i for i in range(total) if i not in set(glob)]
        return (f.int_(("sliding_window",)), "sliding-window",
                f"{len(on)}{of} (all but global_attn_idx): " + _which_layers(on, total))
    model_type = f.cfg.get("model_type") if isinstance(f.cfg.get("model_type"), str) else None
    raw = f.cfg.get("sliding_window")
    if raw == 0 and not isinstance(raw, bool) and not f.flag("use_sliding_window") and (
            "use_sliding_window" in f.cfg or model_type in SLIDING_WINDOW_OFF_BY_DEFAULT):
        # HF Qwen2MoeConfig (transformers 5) saves sliding_window = 0 when use_sliding_window is false: no window
        f.cfg["sliding_window"] = None
    window = f.int_(("sliding_window",))
    if (window is None and "sliding_window" not in f.cfg and model_type in SLIDING_WINDOW_OFF_BY_DEFAULT
            and f.flag("use_sliding_window")):  # the flag on, the size left out: the class default (4096)
        cls, window = SLIDING_WINDOW_OFF_BY_DEFAULT[model_type], QWEN2_DEFAULT_SLIDING_WINDOW
        f.defaulted_window = (f"the file gives no 'sliding_window': {window}, the default of HF transformers' {cls} "
                              f"(model_type {model_type!r}), as transformers reads the file.")
    if window is None and "sliding_window" not in f.cfg and model_type in DEFAULT_SLIDING_WINDOW:
        cls, window = DEFAULT_SLIDING_WINDOW[model_type]  # absent (not null: null turns it off), as transformers reads
        f.defaulted_window = (f"the file gives no 'sliding_window': {window}, the default of HF transformers' {cls} "
                              f"(model_type {model_type!r}), as transformers reads the file.")
    chunk = f.int_(("attention_chunk_size",))
    if chunk is None and "attention_chunk_size" not in f.cfg and model_type == "llama4_text":
        chunk = LLAMA4_DEFAULTS["attention_chunk_size"]  # absent (not null), as Llama4TextConfig reads the file
        f.defaulted_window = (f"the file gives no 'attention_chunk_size': {chunk}, the default of HF transformers' "
                              "Llama4TextConfig, as transformers reads the file.")
    types = f.cfg.get("layer_types")
    types_label = "layer_types"
    if (types is None and model_type in DERIVED_LAYER_TYPES and window is not None
            and total and not (model_type == "cohere2" and f.has("sliding_window_pattern"))):
        cls, every = DERIVED_LAYER_TYPES[model_type]  # as the class's __init__ derives them
        types = _every_nth_full(every, total)
        types_label = f"the layer_types {cls} derives"
        nth = {2: "other", 3: "3rd"}.get(every, f"{every}th")
        f.window_note = (f"model_type {model_type!r} without 'layer_types': every {nth} layer full attention, the "
                         f"others sliding-window, as HF transformers' {cls} derives them"
                         + (" (its default sliding_window_pattern 4)." if model_type == "cohere2" else "."))
    if model_type in SLIDING_WINDOW_OFF_BY_DEFAULT and not f.flag("use_sliding_window") and window is not None:
        # HF sets sliding_window = None unless use_sliding_window, whatever layer_types says: no layer slides (said
        # where the flag is left out: the class default decides; a file saying false is plain)
        if "use_sliding_window" not in f.cfg:
            f.window_note = (f"'sliding_window' = {window} with 'use_sliding_window' left out (default false): no "
                             f"window, as HF transformers' {SLIDING_WINDOW_OFF_BY_DEFAULT[model_type]} reads the file "
                             "(it sets sliding_window to None unless use_sliding_window is true).")
        return None, "", ""
    if model_type in GEMMA4_MODEL_TYPES and (types is not None or window is not None):  # a null window: none slide
        types = _gemma4_layer_types(f, types, total)
    if model_type == "afmoe" and types is None:  # HF AfmoeConfig: layer i slides unless (i + 1) % n == 0
        if "global_attn_every_n_layers" in f.cfg and f.cfg["global_attn_every_n_layers"] is None:
            raise IomodelError(f"{f.where}: 'global_attn_every_n_layers' is null: AfmoeConfig derives its layer types "
                               "from it (every n-th layer full attention): give a whole number or drop it (default "
                               f"{AFMOE_DEFAULTS['global_attn_every_n_layers']}): fix the file")
        every = f.int_(("global_attn_every_n_layers",)) or AFMOE_DEFAULTS["global_attn_every_n_layers"]
        n_layers = total or AFMOE_DEFAULTS["num_hidden_layers"]
        types = _every_nth_full(every, n_layers)
        said = [f"global_attn_every_n_layers {every}" + ("" if f.has("global_attn_every_n_layers") else " (default)")]
        if not total:
            said.append(f"num_hidden_layers {n_layers} (default)")
        f.window_note = (f"model_type 'afmoe' without 'layer_types': every {every}th layer full attention, the others "
                         f"sliding-window, as HF transformers' AfmoeConfig derives them ({', '.join(said)}).")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise IomodelError(f"{f.where}: 'layer_types' must be a list of strings: fix the file")
        known = {*FULL_ATTENTION_LAYER_TYPES, "sliding_attention", "chunked_attention"}
        odd = sorted(set(types) - known - set(NON_ATTENTION_LAYER_TYPES))
        if odd:
            raise IomodelError(f"{f.where}: layer_types {odd} are not layer kinds iomodel knows (attention: "
                               f"{', '.join(sorted(known))}; without attention: {', '.join(NON_ATTENTION_LAYER_TYPES)}"
                               "), so it cannot say what those layers move: pass the sizes with --heads/--kv-heads/"
                               "--head-dim instead of a config to model a softmax-attention layer")
        if not set(types) & known:
            raise IomodelError(f"{f.where}: layer_types has no attention layer ({', '.join(sorted(set(types)))}): "
                               "there is no attention traffic to model; pass the sizes with --heads/--kv-heads/"
                               "--head-dim instead of a config to model an attention layer")
        attention = [t for t in types if t in known]
        if total is not None and len(types) != total:  # newer transformers refuse such a file; said, the list read
            f.window_note = (f"'layer_types' lists {len(types)} layers and 'num_hidden_layers' says {total}: the list is "
                             "read (recent transformers refuse such a file): fix one of them.")
        if len(attention) < len(types):  # a hybrid: the attention layers are modelled, the others move none of it
            f.hybrid = (f"layer_types: {len(attention)} of {len(types)} layers are softmax attention ("
                        + _which_layers([i for i, t in enumerate(types) if t in known], len(types))
                        + f"); the other {len(types) - len(attention)} ("
                        + ", ".join(sorted(set(types) - known)) + ") move no attention traffic: this worksheet "
                        "models one attention layer.")
        slide_name = "sliding-window"
        if window is None and f.has("local_attention"):  # ModernBERT saved by transformers 5: local_attention's span
            window, slide_name = max(1, f.int_(("local_attention",)) // 2), "local (bidirectional, half the span each side)"
        for kind, name, w, key in (("chunked_attention", "chunked", chunk, "attention_chunk_size"),
                                   ("sliding_attention", slide_name, window, "sliding_window")):
            n = types.count(kind)
            if n:
                if w is None:
                    raise IomodelError(f"{f.where}: layer_types names {kind} but '{key}' is missing: fix the file")
                return w, name, (f"{n} of {len(types)} layers ({types_label}): "
                                 + _which_layers([i for i, t in enumerate(types) if t == kind], len(types)))
        return None, "", ""
    local = _local_window(f, total)
    if local is not None:
        return local
    if chunk is not None:  # Llama-4: layers with RoPE are chunked, every no_rope_layer_interval-th is global
        rope = f.cfg.get("no_rope_layers")
        if rope is not None and not isinstance(rope, list):
            raise IomodelError(f"{f.where}: 'no_rope_layers' must be a list of 1 (a RoPE, chunked layer) or 0 (NoPE, "
                               f"global) per layer, got {_kind(rope)}: fix the file")
        if rope and total:
            rope = rope[:total]  # HF indexes it by layer: entries past num_hidden_layers are never read
        if rope:  # Llama4TextConfig: 1 = the layer uses RoPE (and is chunked)
            if not all(v in (0, 1) and not isinstance(v, bool) for v in rope):
                raise IomodelError(f"{f.where}: 'no_rope_layers' must list 1 (a RoPE, chunked layer) or 0 (NoPE, "
                                   "global) per layer: fix the file")
            on = [i for i, v in enumerate(rope) if v == 1]
            if not on:
                f.defaulted_window = ""  # no layer chunked: the default chunk size is not used
                return None, "", ""
            return chunk, "chunked", (f"{len(on)} of {len(rope)} layers (no_rope_layers): "
                                      + _which_layers(on, len(rope)))
        every = f.int_(("no_rope_layer_interval",)) or LLAMA4_DEFAULTS["no_rope_layer_interval"]
        if every == 1:  # every layer NoPE and global
            f.defaulted_window = ""
            return None, "", ""
        return chunk, "chunked", (f"{every - 1} of every {every} layers" if not total else
                                  f"{sum(1 for i in range(total) if (i + 1) % every)}{of}") + \
            f" (Llama-4 interleaved RoPE/NoPE, no_rope_layer_interval {every})" + (
                ": " + _which_layers([i for i in range(total) if (i + 1) % every], total) if total else "")
    mpt = f.cfg.get("attn_config") if model_type == "mpt" else None
    if window is None and isinstance(mpt, dict) and mpt.get("sliding_window_size") not in (None, -1):
        # llm-foundry's MPT: flash-attn window_size = (s, s), so a query sees the s keys before it and itself
        size = f.int_at("attn_config.sliding_window_size", mpt["sliding_window_size"])
        return size + 1, "sliding-window", (f"every layer{f' of {total}' if total else ''} (attn_config."
                                            f"sliding_window_size = {size}: llm-foundry passes flash-attn "
                                            f"window_size = ({size}, {size}), the {size} keys before each query "
                                            "and its own)")
    if window is None:
        return None, "", ""
    if "use_sliding_window" in f.cfg and not f.flag("use_sliding_window"):
        if model_type not in SLIDING_WINDOW_FLAG_UNREAD:
            return None, "", ""  # Qwen2 (and a family not known to ignore it): the window is declared but off
    raw_pattern = f.cfg.get("sliding_window_pattern")
    if isinstance(raw_pattern, str):  # EXAONE-4.0: "LLLG", one letter a layer, repeated (L local, G global)
        if not raw_pattern or set(raw_pattern) - {"L", "G"}:
            raise IomodelError(f"{f.where}: 'sliding_window_pattern' = {raw_pattern!r}: a pattern string holds L "
                               "(sliding-window layer) and G (global layer) only: fix the file")
        if "L" not in raw_pattern:
            return None, "", ""
        n = total or len(raw_pattern)
        local = [i for i in range(n) if raw_pattern[i % len(raw_pattern)] == "L"]
        return window, "sliding-window", (f"{len(local)}{of}" if total else f"{raw_pattern.count('L')} of every "
                                          f"{len(raw_pattern)} layers") + f" (sliding_window_pattern {raw_pattern!r})" \
            + (": " + _which_layers(local, total) if total else "")
    pattern, said = f.int_(("sliding_window_pattern",)), "sliding_window_pattern"
    if pattern is None and f.cfg.get("model_type") in GEMMA3_MODEL_TYPES:  # the published files omit it
        pattern, said = GEMMA3_SLIDING_WINDOW_PATTERN, "Gemma-3's default sliding_window_pattern"
    if pattern == 1:  # every layer is global: the window applies to none
        return None, "", ""
    if pattern is not None:  # Gemma-3: every pattern-th layer is global
        return window, "sliding-window", (f"{total - total // pattern}{of}" if total else
                                          f"all but every {pattern}th layer") + f" ({said} {pattern})" + \
            (": all but " + _which_layers([i for i in range(total) if (i + 1) % pattern == 0]) if total else "")
    if f.cfg.get("model_type") == "gemma2":  # Gemma-2: even layers slide
        return window, "sliding-window", (f"{(total + 1) // 2}{of}" if total else "every other layer") + \
            " (Gemma-2 alternation)" + (": " + _which_layers(list(range(0, total, 2))) if total else "")
    every = f"all {total} layers" if total else "every layer"
    if model_type in SLIDING_WINDOW_FLAG_UNREAD:  # its class reads neither field: the window on every layer
        if f.has("max_window_layers") or "use_sliding_window" in f.cfg:
            present = [k for k in ("use_sliding_window", "max_window_layers") if k in f.cfg]
            f.window_note = (" and ".join(f"'{k}' = {json.dumps(f.cfg[k])}" for k in present) + " "
                             + ("is" if len(present) == 1 else "are") + f" not read for model_type {model_type!r} "
                             f"(HF transformers' {SLIDING_WINDOW_FLAG_UNREAD[model_type]} has no such field): its "
                             "'sliding_window' applies.")
        return window, "sliding-window", every
    rule = MAX_WINDOW_LAYERS_RULES.get(model_type)
    if rule is not None and rule[2] == "all":  # Qwen3-MoE: no max_window_layers field, every layer slides
        return window, "sliding-window", every + (f" ({rule[0]} reads no max_window_layers)"
                                                  if f.has("max_window_layers") else "")
    if f.flag("use_sliding_window") and (f.has("max_window_layers") or rule):
        cls, default, kind = rule or ("", 0, "from")  # Qwen2: layers from max_window_layers on
        given = "max_window_layers" in f.cfg
        mwl = f.cfg.get("max_window_layers")
        # 0: every layer (HF: i >= 0); null: HF's class compares layer indices with None (a TypeError), so refused
        if given and (isinstance(mwl, bool) or not isinstance(mwl, int) or mwl < 0):
            raise IomodelError(f"{f.where}: 'max_window_layers' must be a whole number, 0 or more (0: every layer "
                               f"slides; leave it out for {cls or 'the class'}'s default), got {_kind(mwl)}: "
                               "fix the file")
        first = mwl if given else default
        said = "max_window_layers" if given else f"{cls}'s default max_window_layers {default}: the file gives none"
        if kind == "even_below":  # Qwen2MoeConfig: the even layers below max_window_layers
            if total is None:
                return window, "sliding-window", f"the even layers below {first} ({said}, as {cls} derives them)"
            on = [i for i in range(min(first, total)) if i % 2 == 0]
            if not on:
                return None, "", ""
            return window, "sliding-window", f"{len(on)}{of} (the even layers below {first}: {said}, as {cls} " \
                f"derives them): " + _which_layers(on, total)
        if total is not None and first >= total:
            f.window_note = (f"'use_sliding_window' true but no layer slides: {said}"
                             + (f" = {first}" if given else "") + f", and HF transformers' {cls or 'Qwen2Config'} "
                             f"slides layers {first} and up, of {total}.")
            return None, "", ""
        return window, "sliding-window", (f"{total - first}{of}" if total else f"layers {first} and up") + \
            f" ({said})" + (": " + _which_layers(list(range(first, total))) if total else "")
    return window, "sliding-window", every


def _gemma4_layer_types(f: _Fields, types: Any, total: int | None) -> Any:
    """Gemma-4's ``layer_types`` as HF ``Gemma4TextConfig.__post_init__`` makes them: absent or null, every
    :data:`GEMMA4_SLIDING_WINDOW_PATTERN`-th of ``num_hidden_layers`` layers (:data:`GEMMA4_NUM_LAYERS` by default)
    full and the others sliding; in either case the last layer full. Written back into the fields (so the full
    layers' geometry counts them) with :attr:`_Fields.defaulted_layer_types` saying what was filled or mended; any
    other value is returned as given (checked by the caller)."""
    if types is None:
        n = total or GEMMA4_NUM_LAYERS
        types = _every_nth_full(GEMMA4_SLIDING_WINDOW_PATTERN, n)
        types[-1] = "full_attention"
        f.defaulted_layer_types = (f"the file gives no 'layer_types': every {GEMMA4_SLIDING_WINDOW_PATTERN}th of "
                                   f"{n} layers{'' if total else ' (the class default)'} and the last one full, the "
                                   "others sliding, the default of HF transformers' Gemma4TextConfig, as transformers "
                                   "reads the file.")
    elif isinstance(types, list) and types and types[-1] != "full_attention" \
            and types[-1] in ("sliding_attention", "chunked_attention", "attention"):
        types = [*types[:-1], "full_attention"]
        f.defaulted_layer_types = (f"'layer_types' ends on {f.cfg['layer_types'][-1]!r}: HF transformers' "
                                   "Gemma4TextConfig makes the last layer full_attention (\"Last layer must use "
                                   "`full_attention`\"), and so does this worksheet.")
    else:
        return types
    f.cfg["layer_types"] = types
    return types


def _layer_indices(f: _Fields, key: str, total: int | None) -> list[int]:
    """The layer indices a hybrid's ``key`` lists (Bamba's ``attn_layer_indices``, LFM2's ``full_attn_idxs``,
    StripedHyena's ``attn_layer_idxs``, Zamba's ``hybrid_layer_ids``), ascending. Raises IomodelError (one line)
    unless it is a non-empty list of distinct whole numbers from 0 to ``total`` - 1 (``total`` None: from 0)."""
    ids = f.cfg.get(key)
    if (not isinstance(ids, list) or not ids
            or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 or (total and i >= total) for i in ids)
            or len(set(ids)) != len(ids)):
        raise IomodelError(f"{f.where}: '{key}' must be a non-empty list of distinct layer indices "
                           f"from 0{f' to {total - 1}' if total else ''}, got "
                           f"{ids if isinstance(ids, list) and len(ids) <= 12 else _kind(ids)}: fix the file")
    return sorted(ids)


def _hybrid_note(f: _Fields, total: int | None) -> str:
    """A note on the attention layers of a hybrid whose layout is not a ``layer_types`` list: Jamba
    (``attn_layer_period``/``attn_layer_offset``), Bamba (``attn_layer_indices``), Nemotron-H
    (``hybrid_override_pattern``, ``*`` an attention layer), MiniMax-Text-01 (``attn_type_list``, 1 softmax),
    LFM2 (``full_attn_idxs``), StripedHyena (``attn_layer_idxs``), Qwen3-Next (``full_attention_interval``: layer i
    full where (i + 1) % n == 0, HF ``Qwen3NextConfig``), Ring-linear (``bailing_moe_linear``'s
    ``layer_group_size``: the last layer of each group, vLLM ``is_linear_layer``), PLaMo-2 (``mamba_step``: vLLM
    ``plamo2.py is_mamba``), RecurrentGemma (``block_types``, repeated over the layers), Zamba/Zamba2 (``hybrid_layer_ids``,
    else ``layers_block_type``'s ``hybrid`` entries: the layers that run its shared attention block, HF
    ``Zamba2Config``); "" for none of these."""
    cfg = f.cfg
    attention: list[int] | None = None
    said = ""
    model_type = cfg.get("model_type")
    # the layouts below are read strictly (a wrong type or value is one line: IomodelError from f.int_/f.flag)
    jamba = JAMBA_DEFAULTS if model_type == "jamba" else {}  # HF JambaConfig's defaults where the file leaves them out
    period = f.int_(("attn_layer_period",)) or jamba.get("attn_layer_period")
    offset = cfg.get("attn_layer_offset")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset < 0):
        raise IomodelError(f"{f.where}: 'attn_layer_offset' must be a whole number from 0, got {_kind(offset)}: fix the "
                           "file")
    if period and total:
        offset = jamba.get("attn_layer_offset", 0) if offset is None else offset
        defaulted = [k for k in ("attn_layer_period", "attn_layer_offset") if cfg.get(k) is None and k in jamba]
        attention, said = [i for i in range(total) if i % period == offset], "attn_layer_period/offset" + (
            f" ({' and '.join(defaulted)}: JambaConfig's default{'s' * (len(defaulted) > 1)})" if defaulted else "")
    interval = f.int_(("full_attention_interval",))  # Qwen3-Next without layer_types (HF Qwen3NextConfig: layer i
    if interval and total:  # is full attention where (i + 1) % n == 0)
        attention, said = [i for i in range(total) if (i + 1) % interval == 0], "full_attention_interval"
    group = f.int_(("layer_group_size",)) if model_type == "bailing_moe_linear" else None  # Ring-linear (vLLM
    if attention is None and group and total:  # is_linear_layer): softmax attention ends each group
        attention, said = [i for i in range(total) if (i + 1) % group == 0], "layer_group_size"
    step = f.int_(("mamba_step",)) if model_type == "plamo2" else None  # PLaMo-2 (vLLM plamo2.py is_mamba):
    if step is not None and step < 2:  # attention where i % step == step // 2, or only the last layer when the
        raise IomodelError(f"{f.where}: 'mamba_step' must be 2 or more (PLaMo-2's is_mamba asserts it), got {step}: "
                           "fix the file")  # model is that short
    if attention is None and step and total and (not f.has("mamba_enabled") or f.flag("mamba_enabled")):
        attention = ([total - 1] if total <= step // 2 else [i for i in range(total) if i % step == step // 2])
        said = "mamba_step"
    blocks = cfg.get("block_types")  # RecurrentGemma: the pattern repeats over the layers (HF default below)
    if blocks is not None and not (isinstance(blocks, list) and blocks and all(isinstance(b, str) for b in blocks)):
        raise IomodelError(f"{f.where}: 'block_types' must be a non-empty list of block names (\"recurrent\", "
                           f"\"attention\"), got {'an empty list' if blocks == [] else _kind(blocks)}: fix the file")
    if blocks is None and model_type == "recurrent_gemma":
        blocks = ["recurrent", "recurrent", "attention"]  # HF RecurrentGemmaConfig's default block_types
    if attention is None and blocks and total:
        attention, said = [i for i in range(total) if blocks[i % len(blocks)] == "attention"], "block_types"
    for key in ("attn_layer_indices", "full_attn_idxs", "attn_layer_idxs"):  # Bamba, LFM2, StripedHyena
        if attention is None and cfg.get(key) is not None:
            attention, said = _layer_indices(f, key, total), key
    if attention is None and model_type in DOUBLE_WIDTH_ATTENTION_MODEL_TYPES:  # Zamba/Zamba2: the shared attention
        ids, kinds_ = cfg.get("hybrid_layer_ids"), cfg.get("layers_block_type")  # block runs at the "hybrid" layers
        if ids is not None:
            attention = _layer_indices(f, "hybrid_layer_ids", total)
            said = "hybrid_layer_ids (the layers that run the shared attention block)"
        elif isinstance(kinds_, list) and kinds_ and all(isinstance(b, str) for b in kinds_):
            attention, total = [i for i, b in enumerate(kinds_) if b == "hybrid"], len(kinds_)
            said = "layers_block_type ('hybrid': the layers that run the shared attention block)"
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None and not (isinstance(pattern, str) and pattern):
        raise IomodelError(f"{f.where}: 'hybrid_override_pattern' must be a non-empty string of layer kinds (\"M\" "
                           f"Mamba, \"*\" attention, \"-\" MLP), got {_kind(pattern)}: fix the file")
    if pattern and total and len(pattern) != total:  # HF NemotronHConfig asserts one kind a layer
        raise IomodelError(f"{f.where}: 'hybrid_override_pattern' has {len(pattern)} layer kinds for {total} layers: "
                           "give one a layer: fix the file")
    if attention is None and pattern:
        attention, said, total = [i for i, c in enumerate(pattern) if c == "*"], "hybrid_override_pattern", len(pattern)
    # Nemotron-H saved by transformers 5: full_attention among mamba/mlp (Zamba's own layers_block_type names "hybrid"
    # blocks, which hold its shared attention: not this list's meaning, so it is read for Nemotron-H only)
    block_list = cfg.get("layers_block_type") if model_type == "nemotron_h" else None
    if block_list is not None and not (isinstance(block_list, list) and block_list
                                       and all(isinstance(b, str) for b in block_list)):
        raise IomodelError(f"{f.where}: 'layers_block_type' must be a non-empty list of block names (\"mamba\", "
                           f"\"attention\", ...), got {_kind(block_list)}: fix the file")
    if attention is None and block_list is not None:
        attention, said, total = ([i for i, b in enumerate(block_list) if b in ("attention", "full_attention")],
                                  "layers_block_type", len(block_list))
    kinds = cfg.get("attn_type_list")
    if kinds is not None and not (isinstance(kinds, list) and kinds
                                  and all(k in (0, 1) and not isinstance(k, (bool, float)) for k in kinds)):
        raise IomodelError(f"{f.where}: 'attn_type_list' must be a non-empty list of 0 (linear attention) and 1 "
                           f"(softmax attention), one a layer, got "
                           f"{kinds if isinstance(kinds, list) and len(kinds) <= 12 else _kind(kinds)}: fix the file")
    if kinds is not None and total and len(kinds) != total:
        raise IomodelError(f"{f.where}: 'attn_type_list' has {len(kinds)} entries for {total} layers: give one a "
                           "layer: fix the file")
    if attention is None and kinds:
        attention, said, total = [i for i, k in enumerate(kinds) if k == 1], "attn_type_list (1: softmax)", len(kinds)
    if attention is not None and not attention:
        raise IomodelError(f"{f.where}: {said} gives no softmax-attention layer among the model's "
                           f"{f'{total} ' if total else ''}layers: there is no attention traffic to model; pass the sizes with "
                           "--heads/--kv-heads/--head-dim instead of a config to model an attention layer")
    if attention is None or not total or len(attention) >= total:
        return ""
    return (f"{said}: {len(attention)} of {total} layers are softmax attention ({_which_layers(attention, total)}); "
            "the others (state-space, linear attention or convolution) move no attention traffic: this worksheet "
            "models one attention layer.")


def _context(f: _Fields) -> tuple[int | None, str]:
    """The model's context (tokens; None where it has none: relative positions) and a note where RoPE scaling
    extends it past the file's ``max_position_embeddings``: vLLM's derived max_model_len
    (``vllm/config.py`` ``_get_and_verify_max_len``): a ``rope_scaling`` (transformers 5: ``rope_parameters``) whose
    type is not ``su``, ``longrope``, ``llama3`` or ``default`` multiplies the context by its ``factor``, YaRN's
    ``original_max_position_embeddings`` by it (Qwen3 with YaRN x4: 32,768 x 4 = 131,072 where the file says 40,960).

    Raises:
        IomodelError: a scaling factor that is not a positive number, or a YaRN original context that is not a
            positive whole number.
    """
    if f.has(RELATIVE_POSITION_KEY):
        return None, ""
    context = f.int_(CONTEXT_KEYS)
    given = f.key_of(CONTEXT_KEYS)
    if given not in (None, CONTEXT_KEYS[0]):  # Whisper's max_source_positions: named as the file names it
        f.context_source = given
    if context is not None and f.cfg.get("model_type") in PADDING_OFFSET_MODEL_TYPES:
        pad = f.cfg.get("pad_token_id", 1)  # RobertaConfig's default 1
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < context - 1:
            raise IomodelError(f"{f.where}: 'pad_token_id' must be a whole number from 0 to {context - 2} (its "
                               f"positions start after it), got {_kind(pad)}: fix the file")
        f.context_source = f"max_position_embeddings {context:,} less the padding offset {pad + 1}"
        return context - pad - 1, (f"model_type {f.cfg['model_type']!r} numbers positions from pad_token_id + 1 = "
                                   f"{pad + 1} (HF create_position_ids_from_input_ids): of max_position_embeddings "
                                   f"{context:,}, {context - pad - 1:,} positions hold tokens; the context check uses "
                                   "that.")
    key = next((k for k in ("rope_scaling", "rope_parameters") if isinstance(f.cfg.get(k), dict)), None)
    rope = f.cfg.get(key) if key else None
    kind = (rope.get("rope_type") or rope.get("type")) if rope else None
    if kind is not None and not isinstance(kind, str):
        raise IomodelError(f"{f.where}: '{key}.rope_type' must be a name (\"yarn\", \"linear\", ...), got {_kind(kind)}: "
                           "fix the file")
    # vLLM: Gemma-3's max_position_embeddings is already scaled (its NOTE; Gemma-4 read alike)
    scaled_already = any(isinstance(t, str) and ("gemma3" in t or "gemma4" in t)
                         for t in (f.cfg.get("model_type"), f.top_model_type))
    if context is None or rope is None or kind in (None, "default", "su", "longrope", "llama3") or scaled_already:
        return context, ""
    factor = rope.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise IomodelError(f"{f.where}: '{key}.factor' must be a positive number, got {_kind(factor)}: fix the file")
    base, said = context, f"{context:,}"
    if kind == "yarn" and rope.get("original_max_position_embeddings") is not None:
        base = rope["original_max_position_embeddings"]
        if isinstance(base, bool) or not isinstance(base, int) or base <= 0:
            raise IomodelError(f"{f.where}: '{key}.original_max_position_embeddings' must be a positive whole number, "
                               f"got {_kind(base)}: fix the file")
        said = f"original_max_position_embeddings {base:,}"
    if not math.isfinite(base * factor) or base * factor > 2**40:
        raise IomodelError(f"{f.where}: '{key}' scales the context to {base * factor:g} tokens, past any model's: fix "
                           "its factor or original_max_position_embeddings")
    scaled = int(base * factor)
    if scaled <= context:
        return context, ""
    f.context_source = f"{key} {kind!r} x {factor:g} of {said}"
    return scaled, (f"{key} {kind!r} x {factor:g}: a context of {scaled:,} tokens ({said} x {factor:g}, as vLLM derives "
                    f"its max_model_len), past the file's {context:,}; the context check uses {scaled:,}.")


def _windowed_vit_note(f: _Fields, total: int | None) -> str:
    """A note for a ViT whose layers attend within square windows of patches but for a few global ones (HF
    ``SamVisionConfig``: ``window_size``, ``global_attn_indexes``; ``VitDetConfig``: ``window_size``,
    ``window_block_indices`` the windowed ones): the layer modelled is a global one. "" otherwise.

    Raises:
        IomodelError: an index list that is not distinct layers of the model (:func:`_layer_indices`), or a
            ``window_size`` that is not a positive integer.
    """
    if f.cfg.get("global_attn_indexes") is None and f.cfg.get("window_block_indices") is None:
        return ""
    size = f.int_(("window_size",))  # a malformed window: one error line
    if size is None:
        return ""
    if f.cfg.get("global_attn_indexes") is not None and total:
        glob = _layer_indices(f, "global_attn_indexes", total)  # one error line where it is not layers of the model
        which = f"the {total - len(glob)} layers not in global_attn_indexes {glob}"
    elif f.cfg.get("window_block_indices") is not None:
        which = f"the layers in window_block_indices {_layer_indices(f, 'window_block_indices', total)}"
    else:
        return ""
    return (f"window_size {size}: {which} attend within windows of {size} x {size} patches ({size * size} tokens, "
            f"each window its own sequence: model one with --no-causal --seqlen {size * size} and the batch times the "
            "windows); the others attend to every patch, as modelled here" +
            ("; use_rel_pos adds a decomposed relative position term to the scores, not counted here." if
             f.cfg.get("use_rel_pos") else "."))


def _causal_guess_note(f: _Fields) -> tuple[str, ...]:
    """A note where the causal mask is a guess: ``architectures`` is given but names no decoder head
    (:data:`DECODER_ARCHITECTURE_PARTS`) and the file has no ``is_decoder`` (an encoder iomodel does not know would
    be modelled causal: half its bytes and FLOPs); a prefix-LM family (:data:`PREFIX_LM_MODEL_TYPES`)."""
    model_type = f.cfg.get("model_type")
    prefix_lm = next((t for t in (f.top_model_type, model_type) if t in PREFIX_LM_MODEL_TYPES), None)
    if prefix_lm is not None:
        return (f"model_type {prefix_lm!r} is a prefix-LM: its image and prompt tokens attend both ways and the "
                "answer's causally; modelled causal (pass --no-causal for the prefix alone).",)
    if model_type == "chatglm" and f.flag("position_encoding_2d"):  # ChatGLM-6B v1 (v2/3 drop the field)
        return ("ChatGLM-6B (v1, 'position_encoding_2d'): a prefix-LM, whose get_masks lets the whole prompt attend "
                "both ways and the answer causally (modeling_chatglm.py); modelled causal, so a prompt's prefill is "
                "about half its work here: pass --no-causal for the prompt's prefill.",)
    archs = f.cfg.get("architectures")
    if archs is None and model_type is None and f.top_model_type is None and not f.flag("is_decoder"):
        return ("the file names no 'model_type' and no 'architectures': modelled causal, as a decoder; if this "
                "model's self-attention is bidirectional (an encoder, an embedding or a diffusion model), pass "
                "--no-causal.",)
    if f.flag("is_decoder") or model_type in KNOWN_DECODER_MODEL_TYPES or f.top_model_type in KNOWN_DECODER_MODEL_TYPES:
        return ()
    if not isinstance(archs, list) or not archs:  # SamVisionConfig saves model_type and no architectures
        return (f"the file names no 'architectures' and model_type {model_type!r} is not a family iomodel knows as a "
                "decoder or an encoder: modelled causal, as a decoder; if this model's self-attention is bidirectional "
                "(an encoder, a vision or embedding model), pass --no-causal.",)
    if any(isinstance(a, str) and part in a for a in archs for part in DECODER_ARCHITECTURE_PARTS):
        return ()
    return (f"'architectures' = {archs!r} names no decoder head ({', '.join(DECODER_ARCHITECTURE_PARTS)}) and "
            f"model_type {model_type!r} is not a family iomodel knows as an encoder: modelled causal, as a decoder; "
            "if this model's self-attention is bidirectional (an encoder or embedding model), pass --no-causal.",)


def _unmodelled_notes(f: _Fields) -> tuple[str, ...]:
    """Notes on fields that change the bytes of a real deployment but not of the attention call modelled here: a KV
    cache stored in 8 bits (``quantization_config.kv_cache_scheme``, compressed-tensors; ``kv_cache_quant_algo``,
    ModelOpt)."""
    q = f.cfg.get("quantization_config")
    if not isinstance(q, dict):
        return ()
    scheme, algo = q.get("kv_cache_scheme"), q.get("kv_cache_quant_algo")
    if isinstance(scheme, dict) or isinstance(algo, str):
        bits = scheme.get("num_bits") if isinstance(scheme, dict) else None
        said = (f"quantization_config.kv_cache_scheme ({bits}-bit {scheme.get('type', '')})".replace(" )", ")")
                if isinstance(scheme, dict) else f"quantization_config.kv_cache_quant_algo = {algo!r}")
        return (f"{said}: the checkpoint stores its KV cache quantized, which this worksheet does not model: K and V "
                "are counted at the layer's dtype (an 8-bit cache reads half their bytes); --dtype fp8_e4m3 with "
                "--block-m and --block-n (no bundled kernel runs 8 bits) counts every tensor in 8 bits, Q and O "
                "included.",)
    return ()


def _dropout(f: _Fields) -> float:
    """The attention dropout probability (``attention_dropout``, ``attention_probs_dropout_prob``,
    ``attn_pdrop``), 0 where none is given or it is not a number in [0, 1)."""
    for key in ("attention_dropout", "attention_probs_dropout_prob", "attn_pdrop"):
        v = f.cfg.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1:
            return float(v)
    return 0.0


def _sparse_beyond(f: _Fields) -> tuple[int | None, str]:
    """(tokens up to which the attention is dense, what replaces it beyond) for long-context sparse attention;
    (None, "") otherwise:

    * MiniCPM4's InfLLM v2 (``sparse_config.dense_len``): sparse from ``dense_len`` keys on (its modeling code and
      sglang's MiniCPM backend branch on ``length >= dense_len``), so dense up to ``dense_len - 1``;
    * Qwen2.5-1M's dual chunk attention (``dual_chunk_attention_config``): chunks of ``chunk_size - local_size``
      tokens (vLLM's DualChunkFlashAttention and DualChunkRotaryEmbedding, ``chunk_len``; the chunk index of L keys
      is (L - 1) // chunk_len), so dense up to ``chunk_size - local_size`` (``chunk_size`` where no ``local_size``).
    """
    sub = f.cfg.get("sparse_config")
    if isinstance(sub, dict) and sub.get("dense_len") is not None:
        return f.int_at("sparse_config.dense_len", sub["dense_len"]) - 1, (
            "InfLLM v2 sparse attention (MiniCPM4's sparse_config: from dense_len keys on, each query reads its top-k "
            "key blocks)")
    if sub is not None and not isinstance(sub, dict):
        raise IomodelError(f"{f.where}: 'sparse_config' must be a JSON object, got {_kind(sub)}: fix the file")
    sub = f.cfg.get("dual_chunk_attention_config")
    if isinstance(sub, dict) and sub.get("chunk_size") is not None:
        chunk = f.int_at("dual_chunk_attention_config.chunk_size", sub["chunk_size"])
        local = (f.int_at("dual_chunk_attention_config.local_size", sub["local_size"])
                 if sub.get("local_size") is not None else 0)
        if local >= chunk:
            raise IomodelError(f"{f.where}: 'dual_chunk_attention_config.local_size' ({local}) must be below its "
                               f"chunk_size ({chunk}): fix the file")
        return chunk - local, ("dual chunk attention (Qwen2.5-1M's dual_chunk_attention_config: chunks of chunk_size "
                               "- local_size tokens, intra-, successive- and inter-chunk attention)")
    if sub is not None and not isinstance(sub, dict):
        raise IomodelError(f"{f.where}: 'dual_chunk_attention_config' must be a JSON object, got {_kind(sub)}: fix "
                           "the file")
    return None, ""


def config_file(path: str | Path) -> Path:
    """The ``config.json`` that ``--config PATH`` names: PATH itself, or ``PATH/config.json`` where PATH is a model's
    folder (a snapshot) holding one. Raises nothing (:func:`load_config` refuses what it cannot read)."""
    path = Path(path)
    try:
        return path / "config.json" if path.is_dir() and (path / "config.json").is_file() else path
    except OSError:  # a name too long, a loop of links: the reader says it in one line
        return path


def load_config(path: str | Path, dtype: str | None = None, *, heads: int | None = None,
                kv_heads: int | None = None, head_dim: int | None = None) -> AttentionConfig:
    """Read the attention fields of a HF-style ``config.json`` (``path``: the file, or a model folder holding one).

    Reads the query heads (``num_attention_heads``, GPT-style ``n_head``, MPT ``n_heads``),
    the KV heads (``num_key_value_heads``, Falcon ``multi_query`` = one head or
    ``num_kv_heads`` with ``new_decoder_architecture``, ChatGLM ``multi_query_group_num``,
    MPT ``attn_config.kv_n_heads``; default: the query heads), ``head_dim`` (or
    ``kv_channels``, ``d_kv``; else ``hidden_size``/``n_embd``/``d_model`` / heads),
    ``torch_dtype`` (or ``dtype``), the layers and context length, from the top level or a
    nested ``text_config`` (Gemma-3, Llama-4), or, where neither gives heads, an ``encoder``
    sub-object (T5Gemma, ``EncoderDecoderModel``: the decoder's sizes are named in a note). Gemma-4's
    full-attention layers' own KV heads and HEAD_DIM (:func:`_full_layers`, HF ``Gemma4TextAttention``) are
    read into ``full_kv_heads``/``full_head_dim``. The keyword arguments are the command-line
    flags: a field they give is taken from them and not read from the file. Sliding
    windows and attention chunks are read (``sliding_window`` with ``layer_types``, Gemma's
    patterns, Qwen2's ``use_sliding_window``, ``attention_chunk_size``) and refused later
    only at lengths they mask
    (:meth:`AttentionConfig.check_seqlen`). Fields in :data:`NO_BYTES` are named in
    ``notes``. Encoders are read as bidirectional (``causal_default``, :func:`_bidirectional`).
    Family rules, each said in a note: a wrapper's ``text_config`` without ``model_type`` reads as the family its HF
    class gives it (:data:`TEXT_CONFIG_MODEL_TYPE`); JetMoE's heads are KV heads x experts per token
    (:func:`_jetmoe_heads`); ConvBERT runs ``num_attention_heads // head_ratio`` heads; ``pad_head_dim_to_multiple_of``
    (Moonshine) pads HEAD_DIM; Gemma-4's default ``layer_types`` (:func:`_gemma4_layer_types`); Baichuan-13B's
    materialised ALiBi bias and a CogVLM file without ``num_multi_query_heads`` are said.

    Raises:
        IomodelError: the file is missing or not a JSON object; a field is missing, null,
            a boolean, a string, a fraction, out of range or not positive; the hidden size
            is not divisible by the heads; the dtype is missing or unsupported; heads not
            divisible by KV heads; a field in :data:`UNMODELLED` (MLA, block-sparse attention, per-layer
            heads, LSH attention) is set; a count is a JSON array (heads per stage or layer) and no flag
            replaces it; ``layer_types`` names a kind iomodel does not know, or no attention layer; a
            ``sliding_window_pattern`` string with letters other than L and G; ``use_bidirectional_attention``
            other than true, false, null, "all", "vision"; an 8-bit float ``torch_dtype`` read from a file
            with a ``quantization_config`` (the weights' storage format, not the attention's dtype: pass
            --dtype): each with one sentence naming the file and the field. Notes (``AttentionConfig.notes``)
            say where a value is a family default (heads, hidden size, HEAD_DIM, sliding window, Gemma-4's
            ``global_head_dim``), a hybrid's attention layers, Zamba's doubled attention width, Gemma-4's
            full-attention geometry, an encoder read from an ``encoder`` sub-object, a quantized KV cache, a
            prefix-LM, ``use_bidirectional_attention: "vision"`` (modelled causal), and a causal mask assumed for
            an unknown family whose ``architectures`` name no decoder head; long-context sparse attention is
            refused past its dense length by :meth:`AttentionConfig.check_dense`.
    """
    path = config_file(path)
    cfg = read_json(path, "config file", "pass --config a HF-style config.json (or a model folder holding one)",
                    "fix the file")
    if not isinstance(cfg, dict):
        raise IomodelError(f"config file {str(path)!r} must hold a JSON object: fix the file")
    f = _Fields(cfg, str(path))
    if f.cfg.get("model_type") is not None and not isinstance(f.cfg["model_type"], str):  # the families key on it
        raise IomodelError(f"{f.where}: 'model_type' must be a family name such as \"llama\", got "
                           f"{_kind(f.cfg['model_type'])}: fix the file")
    name = path.stem if path.name != "config.json" else (path.parent.name or path.resolve().parent.name or "config")
    if f.cfg.get("model_type") in NO_ATTENTION_MODEL_TYPES:
        raise IomodelError(f"{f.where}: model_type {f.cfg['model_type']!r} has no attention layers (a state-space or "
                           "recurrent model): there is no attention traffic to model; pass the sizes with --heads/"
                           "--kv-heads/--head-dim instead of a config to model an attention layer")
    unmodelled = next((t for t in (f.cfg.get("model_type"), f.top_model_type) if isinstance(t, str)
                       and t in UNMODELLED_MODEL_TYPES), None)  # Grounding DINO: its text_config is BERT's
    if unmodelled is not None:
        raise IomodelError(f"{f.where}: model_type {unmodelled!r}: "
                           f"{UNMODELLED_MODEL_TYPES[unmodelled]}, which iomodel does not model (it models "
                           "softmax over every visible key): pass the sizes with --heads/--kv-heads/--head-dim instead "
                           "of a config to model exact attention")
    encoder_decoder = (f.flag("is_encoder_decoder") or f.key_of(("decoder_layers", "num_decoder_layers")) is not None
                       or f.key_of(DECODER_CONTEXT_KEYS) is not None) \
        and f.cfg.get("model_type") not in NOT_SEQ2SEQ_MODEL_TYPES
    encoder_refusal, encoder_attention = None, ""
    for (key, value), what in UNMODELLED_VALUES.items():
        if f.cfg.get(key) == value:
            refusal = (f"{f.where}: '{key}' = {value!r}: {what}, which iomodel does not model: pass the sizes with "
                       "--heads/--kv-heads/--head-dim instead of a config to model full attention")
            if not encoder_decoder:
                raise IomodelError(refusal)
            # BigBird-Pegasus, LongT5: the encoder's attention; the decoder's is plain (a decode step, --causal)
            encoder_refusal = refusal + " (or --phase decode / --causal for the decoder's layers, plain attention)"
            encoder_attention = f"'{key}' = {value!r}"
    mla_off = f.cfg.get("use_mla") is False  # DeepSeek-OCR: MLA fields present, switched off
    if (f.cfg.get("model_type") in MLA_DEFAULT_RANK and "kv_lora_rank" not in f.cfg and not mla_off):
        cls = MLA_DEFAULT_RANK[f.cfg["model_type"]]
        raise IomodelError(f"{f.where}: no 'kv_lora_rank': HF transformers' {cls} defaults it to 512, multi-head latent "
                           f"attention (DeepSeek-V2/V3 MLA), {MLA_UNMODELLED}")
    for key, what in UNMODELLED.items():
        if key in MLA_KEYS and (mla_off or f.cfg.get(key) == 0):
            continue
        if f.has(key):
            if key in MLA_KEYS:
                raise IomodelError(f"{f.where}: '{key}' = {f.cfg[key]!r}: {what}, {MLA_UNMODELLED}")
            raise IomodelError(f"{f.where}: '{key}' = {f.cfg[key]!r}: {what}, which iomodel does not model "
                               "(its K/V bytes would be wrong): pass the sizes with --heads/--kv-heads/--head-dim "
                               "instead of a config to model an ordinary layer")
    sparse = f.cfg.get("sparse_attention_config")  # MiniMax-M3: top-k key blocks a query on its sparse layers
    if sparse is not None and not (isinstance(sparse, dict) and isinstance(sparse.get("use_sparse_attention", False),
                                                                            bool)):
        raise IomodelError(f"{f.where}: 'sparse_attention_config' must be an object whose use_sparse_attention is true "
                           f"or false, got {_kind(sparse) if not isinstance(sparse, dict) else 'use_sparse_attention = ' + repr(sparse.get('use_sparse_attention'))}"
                           ": fix the file")
    if isinstance(sparse, dict) and sparse.get("use_sparse_attention") is True:
        raise IomodelError(f"{f.where}: 'sparse_attention_config' has use_sparse_attention true: block-sparse "
                           "attention (MiniMax-M3: each query reads its top sparse_topk_blocks key blocks of "
                           "sparse_block_size keys and a local block on the layers sparse_attention_freq marks), not "
                           "every key, which iomodel does not model (its K/V bytes would be wrong): pass the sizes "
                           "with --heads/--kv-heads/--head-dim instead of a config to model an ordinary layer")
    defaulted = _family_defaults(f)
    if heads is None:
        _jetmoe_heads(f, defaulted)
    if heads is None and f.key_of(HEADS_KEYS) is None and isinstance(f.cfg.get("ssm_cfg"), dict):
        _refuse_mamba_ssm(f)
    heads_key = f.key_of(HEADS_KEYS)
    if heads is not None and heads_key is not None and isinstance(f.cfg[heads_key], list):
        file_heads = None  # per stage or layer in the file (Swin): the flag names the layer
    else:
        file_heads = f.int_(HEADS_KEYS, None if heads is not None else "add it or pass --heads")
    n_heads = heads if heads is not None else file_heads
    n_kv = kv_heads if kv_heads is not None else _kv_heads(f, n_heads)
    head_dim_flag = head_dim
    double = f.cfg.get("model_type") in DOUBLE_WIDTH_ATTENTION_MODEL_TYPES
    if head_dim is None and double:  # Zamba/Zamba2: attention on 2·hidden_size; kv_channels is not its head dim
        head_dim = f.int_(("attention_head_dim",))
        if head_dim is None:
            hidden = f.int_(HIDDEN_KEYS, "add 'attention_head_dim' or 'hidden_size', or pass --head-dim")
            per = file_heads or n_heads
            if (2 * hidden) % per:
                raise IomodelError(f"{f.where}: 2·hidden_size {2 * hidden} (Zamba's attention width) is not "
                                   f"divisible by {per} heads: give 'attention_head_dim' or pass --head-dim")
            head_dim = 2 * hidden // per
    if head_dim is None:
        head_dim = f.int_(HEAD_DIM_KEYS)
    if head_dim is None:
        hidden = f.int_(HIDDEN_KEYS, "add 'head_dim' or 'hidden_size', or pass --head-dim")
        per = file_heads or n_heads
        if hidden % per:
            raise IomodelError(f"{f.where}: hidden_size {hidden} is not divisible by {per} heads: "
                               "give 'head_dim' or pass --head-dim")
        head_dim = hidden // per
    shape_notes: tuple[str, ...] = ()
    if heads is None and f.cfg.get("model_type") == "convbert" and f.has("head_ratio"):
        # ConvBertSelfAttention: num_attention_heads // head_ratio heads (at least 1) of hidden_size /
        # num_attention_heads; the rest of the width is a span-based convolution
        ratio = f.int_(("head_ratio",))
        attn_heads = max(1, n_heads // ratio)
        if kv_heads is None and n_kv == n_heads:
            n_kv = attn_heads
        shape_notes += (f"'head_ratio' = {ratio}: {attn_heads} attention heads of HEAD_DIM {head_dim} (HF transformers' "
                        f"ConvBertSelfAttention: num_attention_heads {n_heads} // head_ratio; the other half of the "
                        "width is a span-based convolution, which moves no attention traffic).",)
        n_heads = attn_heads
    if head_dim_flag is None and f.has("pad_head_dim_to_multiple_of"):
        # Moonshine: q, k and v padded with zeros to a multiple of this before the attention call
        multiple = f.int_(("pad_head_dim_to_multiple_of",))
        padded = -(-head_dim // multiple) * multiple
        if padded != head_dim:
            shape_notes += (f"'pad_head_dim_to_multiple_of' = {multiple}: HEAD_DIM {head_dim} padded to {padded} "
                            "before the attention call (HF transformers' MoonshineAttention pads q, k and v), so the "
                            "kernel moves that many elements per head.",)
            head_dim = padded
    dtype_key = None
    if dtype is None:
        key = dtype_key = f.key_of(DTYPE_KEYS)
        if key is None:
            qc = f.cfg.get("quantization_config")
            quant = (" (its quantization_config gives the weights' format, not the attention's Q, K and V: pass "
                     "their dtype, e.g. --dtype bf16)") if isinstance(qc, dict) and not any(
                k in qc for k in ("kv_cache_scheme", "kv_cache_quant_algo")) else ""
            raise IomodelError(f"{f.where}: no 'torch_dtype' field (transformers' default is float32; a model's "
                               f"own code may choose another): add it or pass --dtype{quant}")
        dtype = f.cfg[key]
        if not isinstance(dtype, str):
            raise IomodelError(f"{f.where}: '{key}' must be a dtype name such as \"bfloat16\", got {_kind(dtype)}: "
                               "fix the file or pass --dtype")
    if n_heads % n_kv:
        raise IomodelError(f"{f.where}: num_attention_heads ({n_heads}) is not divisible by num_key_value_heads "
                           f"({n_kv}): fix the file or pass --heads/--kv-heads")
    num_layers = f.int_(LAYERS_KEYS)
    window, kind, layers = _window(f, num_layers)
    if encoder_decoder and window is not None and not encoder_attention and (
            f.cfg.get("model_type") == "led" or f.cfg.get("encoder_attention_type") == "local"):
        encoder_attention = ("'attention_window' (LED's local attention)" if f.cfg.get("model_type") == "led" else
                             "'encoder_attention_type' = 'local' (LongT5's local attention)")
    full_kv, full_d, full_notes = _full_layers(f, n_heads, n_kv, head_dim, kv_flag=kv_heads is not None,
                                               head_dim_flag=head_dim_flag is not None)
    notes = tuple(f"'{k}' = {f.cfg[k]!r}: {why}." for k, why in NO_BYTES.items()
                  if f.has(k) and f.cfg[k] is not False)
    used = {"num_attention_heads": heads is None, "num_key_value_heads": kv_heads is None,
            "head_dim": head_dim_flag is None}
    # hidden_size is used where HEAD_DIM is hidden_size / heads (no flag, no head_dim field)
    used["hidden_size"] = head_dim_flag is None and f.key_of(HEAD_DIM_KEYS) is None
    used["kv_channels"] = used["head_dim"]  # JetMoE's HEAD_DIM field
    filled = [k for k in defaulted if used.get(k)]
    if filled:
        cls, _ = FAMILY_DEFAULTS[f.cfg["model_type"]]
        notes += (f"the file gives no {', '.join(repr(k) for k in filled)}: "
                  f"{', '.join(f'{k} = {f.cfg[k]}' for k in filled)}, the defaults of HF transformers' {cls} "
                  f"(model_type {f.cfg['model_type']!r}), as transformers reads the file"
                  + (f" (HEAD_DIM = hidden_size / heads = {head_dim})" if "hidden_size" in filled else "")
                  + (f"; it gives no 'num_key_value_heads' either: KV heads = the query heads = {n_kv}, the class "
                     "rule" if "num_key_value_heads" not in filled and kv_heads is None and f.key_of(KV_HEADS_KEYS)
                     is None and n_kv == n_heads else "")
                  + "; pass --heads/--kv-heads/--head-dim to change them.",)
    attn = f.cfg.get("attn_config")
    if (f.cfg.get("model_type") in ALIBI_MODEL_TYPES and not f.has("alibi")) or (
            isinstance(attn, dict) and attn.get("alibi") is True):  # MPT: attn_config.alibi
        notes += (f"model_type {f.cfg['model_type']!r} uses ALiBi position biases, computed from the head index in the "
                  "kernel: no tensor moves.",)
    if (f.cfg.get("model_type"), f.cfg.get("hidden_size")) in MATERIALISED_ALIBI:
        notes += (f"model_type {f.cfg['model_type']!r} with hidden_size {f.cfg['hidden_size']} (Baichuan-13B, "
                  "Baichuan2-13B) uses ALiBi, and its own code adds a materialised bias of [heads, N, N] elements in "
                  "the model's dtype to the scores (modeling_baichuan.py, _gen_alibi_mask): that code's eager chain "
                  "reads heads x seqlen_q x seqlen_k x element bytes more per layer than the baseline here counts; a "
                  "kernel that computes ALiBi from the head index (FlashAttention's alibi_slopes) moves no bias.",)
    blocks = f.cfg.get("block_sizes") if f.cfg.get("model_type") == "funnel" else None
    if blocks is not None and not (isinstance(blocks, list) and blocks and all(
            isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in blocks)):
        raise IomodelError(f"{f.where}: 'block_sizes' must be a non-empty list of positive layer counts, one a block "
                           f"(Funnel: [6, 6, 6]), got {_kind(blocks)}: fix the file")
    if blocks is not None and len(blocks) > 1:
        # HF FunnelEncoder: each block after the first starts by pooling the sequence to half (its first layer's
        # queries only with pool_q_only, keys at the previous length)
        notes += (f"'block_sizes' {blocks} (Funnel): block b (from 0) runs at seqlen / 2^b after pooling, so the layer modelled "
                  f"(the full length) is the first block's {blocks[0]} of {sum(blocks)} layers; model block b's with "
                  "--seqlen N / 2^b (the first layer of each later block: --seqlen-q N / 2^b --seqlen-k N / 2^(b-1) "
                  "--no-causal under pool_q_only).",)
    if f.has("cross_attention_layers"):  # Mllama: those layers have no self-attention (MllamaCrossAttentionDecoderLayer)
        count = ""
        if f.cfg.get("model_type") in ("mllama", "mllama_text_model"):  # read strictly where its meaning is known
            cross = _layer_indices(f, "cross_attention_layers", num_layers)
            count = f" ({len(cross)} of {num_layers} layers: {_which_layers(cross, num_layers)})" if num_layers else ""
        notes += (f"'cross_attention_layers'{count}: those layers attend to another sequence (image tokens) with "
                  "another key length and no causal mask, and run no self-attention; this worksheet models the "
                  "self-attention layers.",)
    if f.overridden:
        notes += (f"the nested config gives {', '.join(f.overridden)} differently from the top level: the nested "
                  "(language model) values are used.",)
    if f.dropped:
        notes += (f"the top level gives {', '.join(f.dropped)}, which the nested language-model config does not "
                  "(absent or null): not used, as HF transformers builds the text config from the nested one and its "
                  "class defaults (a wrapper's own field, or a copy the text model does not read).",)
    if f.dtype_note:
        notes += (f.dtype_note,)
    if double and head_dim_flag is None:
        notes += (f"model_type {f.cfg['model_type']!r} attends on twice the hidden size (HF transformers' "
                  f"Zamba2Config: attention_head_dim = 2·hidden_size / num_attention_heads = {head_dim}); a hybrid "
                  "whose Mamba layers move no attention traffic: this worksheet models one attention block.",)
    notes += shape_notes
    archs = f.cfg.get("architectures")
    if isinstance(archs, list) and "CogVLMForCausalLM" in archs and kv_heads is None \
            and f.key_of(KV_HEADS_KEYS) is None:
        notes += (f"CogVLMForCausalLM without 'num_multi_query_heads': KV heads = the query heads = {n_kv} (CogVLM "
                  "v1); CogVLM2's own configuration_cogvlm.py defaults it to 8 (GQA), so pass --kv-heads 8 for a "
                  "CogVLM2 checkpoint whose file leaves it out.",)
    notes += tuple(n for n in (f.text_model_type, f.jetmoe, f.kv_note, f.hybrid or _hybrid_note(f, num_layers),
                               _windowed_vit_note(f, num_layers),
                               f.defaulted_window,
                               f.defaulted_layer_types, f.window_note) if n)
    notes += full_notes
    notes += tuple(n for n in (_decoder_note(f),) if n)
    if not (dtype_key is None and canonical_dtype(dtype).startswith("fp8")):  # --dtype fp8: K and V are 8-bit now
        notes += _unmodelled_notes(f)
    notes += tuple(f"'{k}' = {f.cfg[k]!r}: {why}." for k, why in CHANGES_BYTES_NOTED.items()
                   if f.has(k) and f.cfg[k] is not False)
    pet = f.cfg.get("position_embedding_type")
    if pet in ("relative_key", "relative_key_query"):
        notes += (f"'position_embedding_type' = {pet!r}: relative position scores (an N x N x d term per head in "
                  "the eager code) added to the attention scores; not counted here.",)
    if pet == "alibi":  # Jais
        notes += ("'position_embedding_type' = 'alibi': ALiBi position biases are computed from the head index in "
                  "the kernel: no tensor moves.",)
    if f.towers:
        notes += (f"{', '.join(_tower_sizes(f.tower_source, k) for k in f.towers)}: another tower of this model (an image or "
                  "audio encoder with its own heads, whose self-attention is bidirectional) is not modelled here; pass "
                  "its sizes with --heads/--kv-heads/--head-dim and --no-causal to model it.",)
    talker = f.tower_source.get(TALKER_KEY)  # Qwen2.5-Omni / Qwen3-Omni: a second causal decoder (speech tokens)
    if isinstance(talker, dict):
        inner = talker.get("text_config")  # Qwen3-Omni nests the talker's language model once more
        src = talker if any(talker.get(h) is not None for h in HEADS_KEYS) or not isinstance(inner, dict) else inner
        got = _sub_sizes(src, TALKER_KEY)
        sizes = (f" ({got[0]} heads, {got[1]} KV heads" + (f", HEAD_DIM {got[2]})" if got[2] is not None else ")")
                 if got is not None else "")
        flags = (f"--heads {got[0]} --kv-heads {got[1]} --head-dim {got[2]}" if got is not None and got[2] is not None
                 else "its --heads/--kv-heads/--head-dim")
        notes += (f"'{TALKER_KEY}'{sizes}: a second causal decoder of this model (the talker, which turns the "
                  f"language model's output into speech tokens) with its own layers and KV cache, not modelled here; "
                  f"pass {flags} (without --config) to model one of its layers.",)
    if dtype_key is not None:  # read from the file: say which field, and that --dtype overrides it
        try:
            raw_dtype, dtype = dtype, canonical_dtype(dtype)
        except IomodelError:
            raise IomodelError(f"{f.where}: '{dtype_key}' = {dtype!r} is an unsupported dtype (iomodel models "
                               f"{', '.join(DTYPES)}): pass --dtype") from None
        if DTYPES[dtype] == 1 and isinstance(f.cfg.get("quantization_config"), dict):
            # FP8 checkpoints (DeepSeek-V3, Llama FP8, Qwen3-FP8): the weights are stored in 8 bits; the attention
            # runs on the activations, in their dtype
            raise IomodelError(f"{f.where}: '{dtype_key}' = {raw_dtype!r} with a 'quantization_config' is the "
                               "weights' storage format, not the attention's dtype (it runs in the activations' "
                               "dtype): pass --dtype bf16 (the activations' dtype), or --dtype fp8_e4m3 to model FP8 "
                               "attention on purpose")
    if f.has("decoder_attention_heads"):
        f.int_(("decoder_attention_heads",))  # a malformed count: one error line (it was only echoed in the note)
    if f.has("decoder_attention_heads") and f.cfg.get("decoder_attention_heads") != n_heads and heads is None:
        notes += (f"'decoder_attention_heads' = {f.cfg['decoder_attention_heads']!r} differs from the encoder's "
                  f"{n_heads} heads read here: pass --heads for the decoder's layers.",)
    bidir = _bidirectional(f)
    if not bidir:
        notes += _causal_guess_note(f)
    if _bidirectional_value(f) == "vision" and not bidir:
        notes += (f"'{BIDIRECTIONAL_FLAG}' = 'vision': an image's tokens attend both ways among themselves and the "
                  "text causally (HF transformers' Gemma4TextAttention: is_causal = use_bidirectional_attention != "
                  "'all'); modelled causal (pass --no-causal with an image's token count as --seqlen to model one "
                  "image's block).",)
    each_side = None  # T5Gemma's encoder: |q − k| < W, W − 1 keys each side (not W // 2)
    if bidir and window is not None and kind == "sliding-window" and f.encoder_read \
            and f.top_model_type in FULL_REACH_BIDIRECTIONAL_WINDOW_MODEL_TYPES:
        each_side = window - 1
    dense_up_to, sparse_what = _sparse_beyond(f)
    if dtype_key is not None and f.cfg[dtype_key] in FP32_NAMES:  # the checkpoint's storage type, as the attention's
        notes += (f"'{dtype_key}' = {f.cfg[dtype_key]!r}: the checkpoint is stored in 32 bits, and the attention is modelled at 4 "
                  "bytes an element; inference engines usually run such a checkpoint in 16 bits (vLLM's --dtype auto "
                  "casts float32 to 16 bits): pass --dtype bf16 or fp16 to model that.",)
    if f.cfg.get("model_type") == "gpt_oss":
        notes += ("model_type 'gpt_oss': each head adds a learned sink logit to its softmax denominator (attention "
                  "sinks, a weight of H values, not a config field); the modelled kernel has none: its K/V, Q and O "
                  "bytes are the same.",)
    context, context_note = _context(f)
    if context_note:
        notes += (context_note,)
    return AttentionConfig(name, n_heads, n_kv, head_dim, canonical_dtype(dtype), num_layers,
                           max_position_embeddings=context, context_source=f.context_source,
                           decoder_context=f.int_(DECODER_CONTEXT_KEYS),
                           decoder_context_key=f.key_of(DECODER_CONTEXT_KEYS) or DECODER_CONTEXT_KEYS[0],
                           decoder_layers=f.int_(("decoder_layers", "num_decoder_layers")) if encoder_decoder else None,
                           encoder_decoder=encoder_decoder,
                           source=str(path), window=window,
                           window_kind=kind, window_layers=layers, notes=notes, causal_default=not bidir,
                           bidirectional_source=bidir, dense_up_to=dense_up_to, sparse_what=sparse_what,
                           attention_dropout=_dropout(f), full_kv_heads=full_kv, full_head_dim=full_d,
                           window_each_side=each_side, encoder_attention=encoder_attention,
                           encoder_refusal=encoder_refusal,
                           decode_refusal=(f"{f.where}: {bidir}: there is no decode step to model; model its decoder's "
                                           f"self-attention with --no-causal --seqlen "
                                           f"{f.int_(('num_queries',)) or '<num_queries>'}"
                                           if f.cfg.get("model_type") in DETR_MODEL_TYPES else None))


def load_preset(name: str, dtype: str | None = None) -> AttentionConfig:
    """Load a bundled preset by name (see :func:`list_presets`).

    Raises:
        IomodelError: unknown preset name (the message lists the known ones).
    """
    cfg = load_config(preset_path(name), dtype=dtype)
    return replace(cfg, name=name)
