"""Shared helpers for integration tests: a tiny Qwen3 HF folder (config, weights, tokenizer) built offline."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# A test (or an earlier import) may already have set these; vLLM reads them at engine start.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 4,
    "What is 2 + 3? The answer is 5. What is 7 * 6? The answer is 42.",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n",
    "Solve for x: 3x + 1 = 10, so x = 3. Please reason step by step.",
    "A tiny model for tests. It writes random text, numbers 0123456789 and symbols ()[]{}<>.",
]


def _build_tokenizer(out_dir: Path, vocab_size: int):
    """A byte-level BPE with ChatML specials; its size is the model's vocab size (no out-of-vocab samples)."""
    try:  # the project's own builder, once it exists
        from nemo_cascade.data.tokenizer import build_tiny_tokenizer  # type: ignore

    except ImportError:
        build_tiny_tokenizer = None
    if build_tiny_tokenizer is not None:
        from transformers import AutoTokenizer

        build_tiny_tokenizer(str(out_dir))
        return AutoTokenizer.from_pretrained(str(out_dir))
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(str(out_dir))
    return fast


def build_tiny_qwen3(out_dir: str | os.PathLike, *, head_dim: int = 32, seed: int = 0, vocab_size: int = 320):
    """Write a tiny random Qwen3ForCausalLM (fp32, tied embeddings) plus tokenizer to `out_dir`; return the dir."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = _build_tokenizer(out, vocab_size)
    cfg = Qwen3Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim, max_position_embeddings=512,
        tie_word_embeddings=True, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).to(torch.float32).eval()
    # Random init (std 0.02) gives near-uniform next-token distributions; sharpen them so that sampling,
    # temperature and top-k visibly matter in the tests.
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 1.0)
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))
