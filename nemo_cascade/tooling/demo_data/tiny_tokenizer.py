"""The tiny tokenizer: a small byte-level BPE trained offline, in milliseconds, for the tiny CPU
recipe.

It is saved as a Hugging Face ``PreTrainedTokenizerFast`` folder carrying the cascade1 chat
template, so the actor, vLLM and ``transformers.AutoTokenizer`` all read the same files. Design
choices, each for a reason:

- byte-level (Qwen2/3 pre-tokenizer regex + ByteLevel): any string round-trips, no unknown tokens;
- digits are split one per token (the ``\\p{N}`` rule of the Qwen2 regex), so arithmetic is a
  per-digit task a tiny model can learn instead of a lookup over multi-digit tokens;
- ``<|im_start|>`` / ``<|im_end|>`` / ``<|endoftext|>`` are special (skipped when decoding, like
  Qwen3), while ``<think>`` / ``</think>`` are single *non-special* tokens: vLLM detokenises with
  ``skip_special_tokens=True``, and the verifiers must still see the thinking markers (§3.1.2);
- no normaliser, so ``decode(encode(x)) == x`` for every string.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional

from nemo_cascade.convert.shape import load_config_json
from nemo_cascade.data.chat import JINJA_TEMPLATE, render
from nemo_cascade.data.generated import sft_pairs
from nemo_cascade.data.tokenizer import set_chat_template

from .arithmetic import arithmetic
from .synthetic_domains import DOMAIN_TASKS

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Control tokens; ids 0, 1, 2 in this order. ``<|endoftext|>`` is the pad token, ``<|im_end|>`` the
EOS."""
THINK_TOKENS = ("<think>", "</think>")
"""Single tokens that stay in decoded text (not special)."""
PAD_TOKEN, EOS_TOKEN = "<|endoftext|>", "<|im_end|>"

# Qwen2/Qwen3's pre-tokenizer pattern: letters, single digits, punctuation runs, newlines, spaces.
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def default_corpus() -> list[str]:
    """Texts the tiny tokenizer is trained on: every synthetic arithmetic prompt (both modes, both
    splits) and its SFT responses, so the merges fit the tiny recipe's data."""
    texts = []
    for split in ("train", "test"):
        rows = arithmetic(split, 0, seed=0)
        for mode in ("no_think", "think"):
            for messages, response in sft_pairs(rows, mode):
                texts.append(render(messages, mode) + response + EOS_TOKEN + "\n")
    return texts


TINY_CASCADE_SETS = ("if_arithmetic", "code_arithmetic", "bugfix_arithmetic")
"""The synthetic sets of recipes/tiny.py besides arithmetic."""


def cascade_corpus() -> list[str]:
    """:func:`default_corpus` plus the train splits of the other synthetic domains (IF, code,
    bug-fix) as prompts and responses in both modes — the texts the whole tiny cascade tokenises."""
    texts = default_corpus()
    # not every registered set: adding one must not change this tokenizer
    for name in TINY_CASCADE_SETS:
        rows = DOMAIN_TASKS[name]("train", 0, 0)
        for mode in ("no_think", "think"):
            for messages, response in sft_pairs(rows, mode):
                texts.append(render(messages, mode) + response + EOS_TOKEN + "\n")
    return texts


CORPORA = {"arithmetic": default_corpus, "cascade": cascade_corpus}


def _train(corpus: Iterable[str], vocab_size: int):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    # After training so they are whole tokens in encode() but never produced by merges.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    return tok


def build_tiny_tokenizer(out_dir: str | os.PathLike, corpus_texts: Optional[Iterable[str]] = None,
                         vocab_size: int = 512):
    """Train the tiny byte-level BPE on ``corpus_texts`` (default: :func:`default_corpus`) and save
    an HF tokenizer folder (``tokenizer.json``, ``tokenizer_config.json`` with the cascade1 chat
    template) at ``out_dir``. Deterministic: the same corpus and vocab_size give byte-identical
    files. Returns the ``PreTrainedTokenizerFast`` (``AutoTokenizer.from_pretrained(out_dir)`` loads
    the same)."""
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS) + len(THINK_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 byte tokens plus specials")
    texts = list(corpus_texts) if corpus_texts is not None else default_corpus()
    tok = _train(texts, vocab_size - len(THINK_TOKENS))
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        chat_template=JINJA_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
        padding_side="left",
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(out))
    _pin_chat_template(out)
    return hf


def _pin_chat_template(out: Path) -> None:
    """The cascade1 template (see :func:`set_chat_template`), and the class by its portable name
    (transformers 5 writes its alias ``TokenizersBackend``, unknown to transformers 4)."""
    set_chat_template(out, "cascade1")
    cfg_path = out / "tokenizer_config.json"
    cfg = load_config_json(cfg_path)
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


__all__ = [
    "build_tiny_tokenizer", "default_corpus", "cascade_corpus", "CORPORA", "SPECIAL_TOKENS",
    "THINK_TOKENS", "PAD_TOKEN", "EOS_TOKEN", "PRETOKENIZE_REGEX", "TINY_CASCADE_SETS"]
