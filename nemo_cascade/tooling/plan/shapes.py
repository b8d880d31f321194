"""Model shapes for the memory plan: named presets, an HF ``config.json``, or a size in a model
folder's name."""
from __future__ import annotations

import re
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.convert.shape import (ARCHITECTURES, ModelShape, any_shape_from_dict,
                                        load_config_json, shape_from_dict)

PRESETS = {
    # huggingface.co/Qwen/Qwen3-8B config.json
    "qwen3-8b": ModelShape("Qwen3-8B", hidden_size=4096, ffn_hidden_size=12288,
                           num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                           vocab_size=151936, num_layers=36),
    # huggingface.co/Qwen/Qwen3-14B config.json
    "qwen3-14b": ModelShape("Qwen3-14B", hidden_size=5120, ffn_hidden_size=17408,
                            num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                            vocab_size=151936, num_layers=40),
    # huggingface.co/Qwen/Qwen2.5-72B-Instruct config.json (Qwen2ForCausalLM: q/k/v biases, no
    # q/k norm)
    "qwen2.5-72b": ModelShape("Qwen2.5-72B", hidden_size=8192, ffn_hidden_size=29568,
                              num_attention_heads=64, num_key_value_heads=8, head_dim=128,
                              vocab_size=152064, num_layers=80, qk_norm=False, qkv_bias=True,
                              hf_architecture="Qwen2ForCausalLM"),
    # tooling/demo_data/tiny_models.py's build_tiny_qwen3 (vocab: the in-code tokenizer's size,
    # at most 1024)
    "tiny-qwen3": ModelShape("tiny Qwen3", hidden_size=128, ffn_hidden_size=384,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                             vocab_size=1024, num_layers=4, tied_embeddings=True),
}
"""Named shapes: convert/shape.py's ModelShape, the type a config.json is read into (parameter
counts included)."""
SIZE_PRESETS = {"8": "qwen3-8b", "14": "qwen3-14b", "72": "qwen2.5-72b"}
"""A size in a model folder's name ('…-14B-…') → the preset of that size (the paper's bases, §1 and
§4.2)."""
_SIZE = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])", re.IGNORECASE)


def shape_from_config(raw: dict, where: str = "config.json") -> tuple[ModelShape, str]:
    """The shape in an HF ``config.json``, and a note when the actor cannot load its architecture
    (its standard fields are read anyway, for the estimate)."""
    archs = raw.get("architectures") or []
    if any(a in ARCHITECTURES for a in archs):
        return shape_from_dict(raw, where), ""
    shape = any_shape_from_dict(raw, where)
    return shape, unsupported_note(shape)


def unsupported_note(shape: ModelShape) -> str:
    if shape.hf_architecture in ARCHITECTURES:
        return ""
    return (f"{shape.hf_architecture} is not an architecture the actor loads (convert/shape.py: "
            f"{', '.join(sorted(ARCHITECTURES))}): the estimate is for its shape only")


def resolve_shape(model: config.Model, shape: str | None = None) -> tuple[ModelShape, str]:
    """``(shape, where it came from)``: ``--shape`` when given; else ``model.hf_path``'s
    config.json; else, when that folder does not exist here, the preset whose size its name carries
    ('8B', '14B', '72B')."""
    if shape:
        if shape.lower() not in PRESETS:
            raise config.ConfigError(f"--shape {shape}: unknown shape; expected one of "
                                     f"{sorted(PRESETS)}")
        return _with_note(PRESETS[shape.lower()], f"preset {shape.lower()} (--shape)")
    if model.build:
        if model.build.startswith("tiny-qwen3"):
            return PRESETS["tiny-qwen3"], f"preset tiny-qwen3 (model.build={model.build})"
        raise config.ConfigError(f"model.build={model.build}: no shape preset for it; pass --shape "
                                 f"NAME (one of {sorted(PRESETS)})")
    folder = Path(model.hf_path)
    if folder.exists():
        path = folder / "config.json"
        model_shape, note = shape_from_config(load_config_json(path), str(path))
        return model_shape, str(path) + (f"; {note}" if note else "")
    sizes = {m.group(1) for m in _SIZE.finditer(folder.name)}
    known = {SIZE_PRESETS[s] for s in sizes if s in SIZE_PRESETS}
    if len(known) != 1:
        why = f"sizes {sorted(sizes)} in its name" if sizes else "no size in its name"
        raise config.ConfigError(f"model.hf_path {model.hf_path}: no such folder here and {why} to "
                                 "pick a preset from; pass --shape NAME (one of "
                                 f"{sorted(PRESETS)})")
    name = known.pop()
    size = next(s for s in sizes if SIZE_PRESETS.get(s) == name)
    return _with_note(PRESETS[name], f"preset {name}, inferred from '{size}B' in the name of "
                                     f"{model.hf_path} (no such folder here)")


def _with_note(shape: ModelShape, source: str) -> tuple[ModelShape, str]:
    note = unsupported_note(shape)
    return shape, source + (f"; {note}" if note else "")



__all__ = ["PRESETS", "SIZE_PRESETS", "shape_from_config", "unsupported_note",
           "resolve_shape"]
