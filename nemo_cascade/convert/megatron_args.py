"""What a model's shape (convert/shape.py, read from an HF ``config.json``) means to Megatron: the
keyword arguments of ``TransformerConfig`` and ``GPTModel``, YaRN's attributes, and the shapes a
TP × PP layout must divide.
 Supported: Qwen3 dense (Nemotron-Cascade's bases, Qwen3-8B/14B), Qwen2 / Qwen2.5 (the reward
model's base, Qwen2.5-72B-Instruct, §4.2) and Llama (SmolLM2). The Megatron side is described as
plain keyword dictionaries so this module imports no megatron; ``actor/megatron.py`` turns them into
a ``TransformerConfig`` and a ``GPTModel``.
"""
from __future__ import annotations

from typing import Any

from nemo_cascade.config import ConfigError
from nemo_cascade.convert.shape import DEFAULT_POSITIONS, YARN_DEFAULTS, ModelShape


def yarn_config_attributes(shape: ModelShape) -> dict[str, Any]:
    """Attributes GPTModel reads from the TransformerConfig for ``position_embedding_type="yarn"``
    (megatron-core keeps them on its MLA config class only, so the actor sets them on the plain
    one). mscale 1 / mscale_all_dim 0 is transformers' default attention factor 0.1·ln(factor) +
    1."""
    if shape.yarn is None:
        return {}
    factor, original = shape.yarn
    return dict(yarn_rotary_scaling_factor=factor, yarn_original_max_position_embeddings=original,
                yarn_beta_fast=YARN_DEFAULTS["beta_fast"],
                yarn_beta_slow=YARN_DEFAULTS["beta_slow"],
                yarn_mscale=1.0, yarn_mscale_all_dim=0.0, yarn_correction_range_round_to_int=True)


def check_parallel(shape: ModelShape, tp: int, pp: int, where: str = "parallel") -> None:
    """Shapes that a TP×PP layout must divide; raise a one-line ConfigError naming the field
    otherwise."""
    for name, value in (("num_key_value_heads", shape.num_key_value_heads),
                        ("vocab_size", shape.vocab_size),
                        ("intermediate_size", shape.ffn_hidden_size)):
        if value % tp:
            raise ConfigError(f"{where}.tp={tp} must divide the model's {name}={value}")
    if shape.num_layers % pp:
        raise ConfigError(f"{where}.pp={pp} must divide the model's "
                          f"num_hidden_layers={shape.num_layers}")


def transformer_config_kwargs(shape: ModelShape, tp: int, pp: int, bf16: bool) -> dict[str, Any]:
    """Keyword arguments for megatron.core.transformer.TransformerConfig reproducing the HF model.

    Kernel fusions are not set here: they depend on the machine (CUDA, TE, apex), so the actor's
    plan sets them (actor/precision.fusion_kwargs); TransformerConfig's defaults leave them off.
    """
    import torch  # local: keeps this module importable without torch for config tooling

    dtype = torch.bfloat16 if bf16 else torch.float32
    return dict(
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_attention_heads,
        num_query_groups=shape.num_key_value_heads,
        kv_channels=shape.head_dim,
        layernorm_epsilon=shape.rms_norm_eps,
        normalization="RMSNorm",
        gated_linear_unit=True,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,
        qk_layernorm=shape.qk_norm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        # apex's persistent LayerNorm kernel: neither spec's RMSNorm uses it
        persist_layer_norm=False,
        # Megatron's unfused attention with bf16 scores: torch's softmax kernels (CPU and CUDA)
        # accumulate in fp32 and round once, so skipping Megatron's fp32 copies of the [b, heads, s,
        # s] scores leaves the forward bit-identical; the backward reads the bf16 probabilities, as
        # Megatron's fused softmax kernel does.
        attention_softmax_in_fp32=False,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=bf16,
        # The GRPO/SFT loss functions return (sum, count); Megatron divides the reduced gradient by
        # the global count over microbatches and data-parallel ranks — the paper's token-level mean
        # (§4.1.2).
        calculate_per_token_loss=True,
    )


def gpt_model_kwargs(shape: ModelShape) -> dict[str, Any]:
    """Keyword arguments for megatron.core.models.gpt.GPTModel (besides
    config/spec/pre/post_process)."""
    return dict(
        vocab_size=shape.vocab_size,
        max_sequence_length=shape.max_position_embeddings or DEFAULT_POSITIONS,
        position_embedding_type="yarn" if shape.yarn else "rope",
        rotary_base=int(shape.rope_theta),
        rotary_percent=1.0,
        share_embeddings_and_output_weights=shape.tied_embeddings,
        parallel_output=True,
    )


__all__ = ["yarn_config_attributes", "check_parallel", "transformer_config_kwargs",
           "gpt_model_kwargs"]
