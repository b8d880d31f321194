"""What an HF ``config.json`` means to Megatron: architecture detection and TransformerConfig arguments.

Supported: Qwen3 dense (Nemotron-Cascade's bases, Qwen3-8B/14B), Qwen2 / Qwen2.5 (the reward model's base,
Qwen2.5-72B-Instruct, §4.2) and Llama (SmolLM2). The Megatron side is
described as plain keyword dictionaries so this module imports no megatron; ``actor/megatron.py`` turns
them into a ``TransformerConfig`` and a ``GPTModel``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_cascade.config import ConfigError
from nemo_cascade.convert.table import Geometry
from nemo_cascade.errors import CascadeError

@dataclass(frozen=True)
class ArchFacts:
    """What one architecture's attention looks like beyond the shared dense RMSNorm / SwiGLU / RoPE decoder."""

    causal_lm: str
    sequence_classification: str
    """The HF class of a reward model (paper §4.2: backbone + linear head on the last token)."""
    qk_norm: bool
    """Per-head RMSNorm on q and k before RoPE (Qwen3)."""
    qkv_bias: bool
    """Biases on the q, k and v projections, none on o_proj (Qwen2: transformers' Qwen2Attention builds them
    with ``bias=True`` whatever the config says; vLLM's qwen2 loads them)."""


ARCHS = {
    "qwen3": ArchFacts("Qwen3ForCausalLM", "Qwen3ForSequenceClassification", qk_norm=True, qkv_bias=False),
    # §4.2: the RM's base is Qwen2.5-72B-Instruct, whose config.json says Qwen2ForCausalLM.
    "qwen2": ArchFacts("Qwen2ForCausalLM", "Qwen2ForSequenceClassification", qk_norm=False, qkv_bias=True),
    "llama": ArchFacts("LlamaForCausalLM", "LlamaForSequenceClassification", qk_norm=False, qkv_bias=False),
}
SEQUENCE_CLASSIFICATION = {arch: f.sequence_classification for arch, f in ARCHS.items()}
ARCHITECTURES = {**{f.causal_lm: arch for arch, f in ARCHS.items()},
                 **{cls: arch for arch, cls in SEQUENCE_CLASSIFICATION.items()}}


class ModelFilesError(CascadeError, ValueError):
    """A model folder that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class HFModelSpec:
    """The facts about an HF checkpoint that conversion and model building need."""

    arch: str
    hf_architecture: str
    vocab_size: int
    hidden_size: int
    ffn_hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tied_embeddings: bool
    attention_bias: bool
    raw: dict
    yarn: tuple[float, int] | None = None
    """YaRN rope scaling as ``(factor, original_max_position_embeddings)`` (paper App. B: factor 2 or 3 over
    Qwen3's 32768), None for plain RoPE."""

    @property
    def qk_norm(self) -> bool:
        return ARCHS[self.arch].qk_norm

    @property
    def qkv_bias(self) -> bool:
        return ARCHS[self.arch].qkv_bias

    @property
    def geometry(self) -> Geometry:
        return Geometry(self.hidden_size, self.num_attention_heads, self.num_key_value_heads, self.head_dim)


def read_hf_config(model_dir: str | Path) -> HFModelSpec:
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ModelFilesError(f"{path}: no such file (expected an HF model folder with config.json)")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ModelFilesError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    return spec_from_dict(raw, str(path))


def spec_from_dict(raw: dict, where: str = "config.json") -> HFModelSpec:
    archs = raw.get("architectures") or []
    known = [a for a in archs if a in ARCHITECTURES]
    if not known:
        raise ModelFilesError(
            f"{where}: architectures {archs} not supported; expected one of {sorted(ARCHITECTURES)}")
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        rope = raw.get("rope_parameters") or {}
        spec = HFModelSpec(
            arch=ARCHITECTURES[known[0]],
            hf_architecture=known[0],
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            ffn_hidden_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=float(raw.get("rope_theta", rope.get("rope_theta", 10000.0))),
            max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
            tied_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=bool(raw.get("attention_bias", False)),
            raw=raw,
            yarn=_yarn(raw, where),
        )
    except KeyError as e:
        raise ModelFilesError(f"{where}: missing field {e.args[0]!r}") from None
    if spec.attention_bias and spec.arch != "qwen2":  # Qwen2 ignores the field (its biases are fixed, see ARCHS)
        raise ModelFilesError(f"{where}: attention_bias=true is not supported for {spec.hf_architecture} "
                              f"(it adds q/k/v and o_proj biases; only Qwen2's q/k/v biases are implemented)")
    _refuse_sliding_window(raw, spec.num_layers, where)
    if spec.num_attention_heads % spec.num_key_value_heads:
        raise ModelFilesError(f"{where}: num_attention_heads must be a multiple of num_key_value_heads")
    return spec


def _refuse_sliding_window(raw: dict, num_layers: int, where: str) -> None:
    """Qwen2/Qwen3 configs may ask for sliding-window attention; the actor computes full causal attention only,
    so such a model would silently get other outputs than transformers and vLLM. transformers' rule
    (Qwen2Config/Qwen3Config ``__post_init__``): ``layer_types`` when given, else layer i slides iff
    ``use_sliding_window`` and ``sliding_window`` is set and ``i >= max_window_layers``. Qwen2.5-72B-Instruct has
    ``use_sliding_window: false``, so it passes."""
    types = raw.get("layer_types")
    if types is not None:
        field, sliding = "layer_types", [i for i, t in enumerate(types) if t == "sliding_attention"]
    elif raw.get("use_sliding_window") and raw.get("sliding_window") is not None:
        # 28: max_window_layers' default in both config classes
        field, sliding = "use_sliding_window=true", list(range(int(raw.get("max_window_layers", 28)), num_layers))
    else:
        field, sliding = "", []
    if sliding:
        raise ModelFilesError(f"{where}: {field} asks for sliding-window attention on {len(sliding)} of "
                              f"{num_layers} layers, which is not supported (only full causal attention)")


YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0}
"""The YaRN constants transformers and Megatron share by default; other values have no Megatron field here."""


def _yarn(raw: dict, where: str) -> tuple[float, int] | None:
    """The config's rope scaling (``rope_scaling``, or transformers 5's ``rope_parameters``): None for plain
    RoPE, ``(factor, original_max_position_embeddings)`` for YaRN; any other scaling is an error, because the
    actor would silently compute other positions than transformers and vLLM."""
    scaling = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if kind == "default":
        return None
    if kind != "yarn":
        raise ModelFilesError(f"{where}: rope scaling {kind!r} is not supported (plain RoPE or yarn)")
    odd = {k: scaling[k] for k, v in YARN_DEFAULTS.items() if k in scaling and float(scaling[k]) != v}
    if odd or scaling.get("attention_factor") is not None or scaling.get("truncate") is False:
        raise ModelFilesError(f"{where}: yarn settings {odd or 'attention_factor/truncate'} are not supported "
                              f"(only factor and original_max_position_embeddings)")
    original = scaling.get("original_max_position_embeddings") or raw.get("max_position_embeddings")
    return float(scaling["factor"]), int(original)


def yarn_config_attributes(spec: HFModelSpec) -> dict[str, Any]:
    """Attributes GPTModel reads from the TransformerConfig for ``position_embedding_type="yarn"`` (megatron-core
    keeps them on its MLA config class only, so the actor sets them on the plain one). mscale 1 / mscale_all_dim 0
    is transformers' default attention factor 0.1·ln(factor) + 1."""
    if spec.yarn is None:
        return {}
    factor, original = spec.yarn
    return dict(yarn_rotary_scaling_factor=factor, yarn_original_max_position_embeddings=original,
                yarn_beta_fast=YARN_DEFAULTS["beta_fast"], yarn_beta_slow=YARN_DEFAULTS["beta_slow"],
                yarn_mscale=1.0, yarn_mscale_all_dim=0.0, yarn_correction_range_round_to_int=True)


def with_yarn(raw: dict, factor: float, original: int = 32768) -> dict:
    """``raw`` (a config.json) with YaRN rope scaling: paper App. B evaluates with factor 2 (8B) or 3 (14B) over
    Qwen3's native 32768 positions; max_position_embeddings becomes factor × original."""
    out = {k: v for k, v in raw.items() if k not in ("rope_scaling", "rope_parameters")}
    rope = {"rope_type": "yarn", "factor": float(factor), "original_max_position_embeddings": int(original)}
    theta = raw.get("rope_theta", (raw.get("rope_parameters") or {}).get("rope_theta"))
    out["rope_scaling"] = {**rope, **({"rope_theta": theta} if theta is not None else {})}
    out["max_position_embeddings"] = int(factor * original)
    return out


def with_recipe_yarn(raw: dict, factor: float) -> dict:
    """The config a cascade trains and serves with ``model.yarn_factor``: YaRN ``factor`` over the model's native
    positions (a config that already scales keeps its ``original_max_position_embeddings``); ``raw`` unchanged for
    factor 0. App. B: factor 2 over Qwen3's 32768 positions, so 40–60K-token requests fit."""
    if not factor:
        return raw
    scaling = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    scaled = (scaling.get("rope_type") or scaling.get("type")) == "yarn"
    native = int(scaling.get("original_max_position_embeddings") or 0) if scaled else 0
    return with_yarn(raw, factor, native or int(raw["max_position_embeddings"]))


def is_reward_model(spec: HFModelSpec) -> bool:
    return spec.hf_architecture in SEQUENCE_CLASSIFICATION.values()


def reward_model_config(raw: dict, pad_token_id: int) -> dict:
    """The ``config.json`` of a reward model exported from a causal-LM backbone's config ``raw``.

    ``*ForSequenceClassification`` with one label (the BT score); no LM head, so nothing is tied;
    ``pad_token_id`` set because transformers reads the score at the last non-pad token of each row (and
    refuses batches without one). vLLM's pooling runner reads the last token of each request, the same
    position for any input that does not end in the pad token.
    """
    spec = spec_from_dict(raw)
    out = {k: v for k, v in raw.items() if k not in ("num_labels", "id2label", "label2id", "problem_type")}
    out.update(architectures=[SEQUENCE_CLASSIFICATION[spec.arch]], id2label={"0": "LABEL_0"},
               label2id={"LABEL_0": 0}, tie_word_embeddings=False, pad_token_id=int(pad_token_id))
    return out


def check_parallel(spec: HFModelSpec, tp: int, pp: int, where: str = "parallel") -> None:
    """Shapes that a TP×PP layout must divide; raise a one-line ConfigError naming the field otherwise."""
    for name, value in (("num_key_value_heads", spec.num_key_value_heads), ("vocab_size", spec.vocab_size),
                        ("intermediate_size", spec.ffn_hidden_size)):
        if value % tp:
            raise ConfigError(f"{where}.tp={tp} must divide the model's {name}={value}")
    if spec.num_layers % pp:
        raise ConfigError(f"{where}.pp={pp} must divide the model's num_hidden_layers={spec.num_layers}")


def transformer_config_kwargs(spec: HFModelSpec, tp: int, pp: int, bf16: bool) -> dict[str, Any]:
    """Keyword arguments for megatron.core.transformer.TransformerConfig reproducing the HF model.

    Kernel fusions are not set here: they depend on the machine (CUDA, TE, apex), so the actor's plan sets
    them (actor/precision.fusion_kwargs); TransformerConfig's defaults leave them off.
    """
    import torch  # local: keeps this module importable without torch for config tooling

    dtype = torch.bfloat16 if bf16 else torch.float32
    return dict(
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        ffn_hidden_size=spec.ffn_hidden_size,
        num_attention_heads=spec.num_attention_heads,
        num_query_groups=spec.num_key_value_heads,
        kv_channels=spec.head_dim,
        layernorm_epsilon=spec.rms_norm_eps,
        normalization="RMSNorm",
        gated_linear_unit=True,
        add_bias_linear=False,
        add_qkv_bias=spec.qkv_bias,
        qk_layernorm=spec.qk_norm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        persist_layer_norm=False,  # apex's persistent LayerNorm kernel: neither spec's RMSNorm uses it
        attention_softmax_in_fp32=True,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=bf16,
        # The GRPO/SFT loss functions return (sum, count); Megatron divides the reduced gradient by the
        # global count over microbatches and data-parallel ranks — the paper's token-level mean (§4.1.2).
        calculate_per_token_loss=True,
    )


def gpt_model_kwargs(spec: HFModelSpec) -> dict[str, Any]:
    """Keyword arguments for megatron.core.models.gpt.GPTModel (besides config/spec/pre/post_process)."""
    return dict(
        vocab_size=spec.vocab_size,
        max_sequence_length=spec.max_position_embeddings,
        position_embedding_type="yarn" if spec.yarn else "rope",
        rotary_base=int(spec.rope_theta),
        rotary_percent=1.0,
        share_embeddings_and_output_weights=spec.tied_embeddings,
        parallel_output=True,
    )
