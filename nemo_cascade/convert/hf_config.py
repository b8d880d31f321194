"""An HF ``config.json`` changed for a run: YaRN rope scaling (paper App. B) and the config of a
reward model exported from a causal-LM backbone (§4.2). Plain dictionaries in and out, like the
reader (convert/shape.py) they build on; nothing here imports torch or megatron.
"""
from __future__ import annotations

from nemo_cascade.convert.shape import SEQUENCE_CLASSIFICATION, ModelShape, shape_from_dict


def with_yarn(raw: dict, factor: float, original: int = 32768) -> dict:
    """``raw`` (a config.json) with YaRN rope scaling: paper App. B evaluates with factor 2 (8B) or
    3 (14B) over Qwen3's native 32768 positions; max_position_embeddings becomes factor ×
    original."""
    out = {k: v for k, v in raw.items() if k not in ("rope_scaling", "rope_parameters")}
    rope = {"rope_type": "yarn", "factor": float(factor),
            "original_max_position_embeddings": int(original)}
    theta = raw.get("rope_theta", (raw.get("rope_parameters") or {}).get("rope_theta"))
    out["rope_scaling"] = {**rope, **({"rope_theta": theta} if theta is not None else {})}
    out["max_position_embeddings"] = int(factor * original)
    return out


def with_recipe_yarn(raw: dict, factor: float) -> dict:
    """The config a cascade trains and serves with ``model.yarn_factor``: YaRN ``factor`` over the
    model's native positions (a config that already scales keeps its
    ``original_max_position_embeddings``); ``raw`` unchanged for factor 0. App. B: factor 2 over
    Qwen3's 32768 positions, so 40–60K-token requests fit."""
    if not factor:
        return raw
    scaling = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    scaled = (scaling.get("rope_type") or scaling.get("type")) == "yarn"
    native = int(scaling.get("original_max_position_embeddings") or 0) if scaled else 0
    return with_yarn(raw, factor, native or int(raw["max_position_embeddings"]))


def is_reward_model(shape: ModelShape) -> bool:
    return shape.hf_architecture in SEQUENCE_CLASSIFICATION.values()


def reward_model_config(raw: dict, pad_token_id: int) -> dict:
    """The ``config.json`` of a reward model exported from a causal-LM backbone's config ``raw``.

    ``*ForSequenceClassification`` with one label (the BT score); no LM head, so nothing is tied;
    ``pad_token_id`` set because transformers reads the score at the last non-pad token of each row
    (and refuses batches without one). vLLM's pooling runner reads the last token of each request,
    the same position for any input that does not end in the pad token.
    """
    shape = shape_from_dict(raw)
    labels = ("num_labels", "id2label", "label2id", "problem_type")
    out = {k: v for k, v in raw.items() if k not in labels}
    out.update(architectures=[SEQUENCE_CLASSIFICATION[shape.arch]], id2label={"0": "LABEL_0"},
               label2id={"LABEL_0": 0}, tie_word_embeddings=False, pad_token_id=int(pad_token_id))
    return out


__all__ = ["with_yarn", "with_recipe_yarn", "is_reward_model", "reward_model_config"]
