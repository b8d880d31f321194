"""Helpers for test_remote_rewards: tiny reward model and judge folders, and transformers' reference
scores."""
from __future__ import annotations

import os
from pathlib import Path

SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32, max_position_embeddings=1024)
"""vLLM's CPU attention needs head_dim >= 32 (docs/install.md)."""
RM_MAX_LEN = 256
"""The reward model's served context: small, so one test can overflow it cheaply."""
JUDGE_MAX_LEN = 2048
"""The judge's served context: the SWE judge prompt of App. C.2's elements (~1,550 tiny-tokenizer
tokens for the end-to-end test's case) fits whole."""


def build_tiny_reward_model(out_dir: Path, seed: int = 0) -> Path:
    """A random ``Qwen3ForSequenceClassification`` (num_labels=1: a Bradley–Terry head) with the
    project's tiny tokenizer (cascade1 chat template). The score head is drawn wide (std 0.5) so
    that logits are O(1) and differ between inputs: a 1e-4 comparison then means something."""
    import torch
    import transformers

    from nemo_cascade.tooling.demo_data.tiny_tokenizer import (EOS_TOKEN, PAD_TOKEN,
                                                               build_tiny_tokenizer)

    tok = build_tiny_tokenizer(out_dir)
    cfg = transformers.Qwen3Config(vocab_size=len(tok), num_labels=1, tie_word_embeddings=False,
                                   pad_token_id=tok.convert_tokens_to_ids(PAD_TOKEN),
                                   eos_token_id=tok.convert_tokens_to_ids(EOS_TOKEN),
                                   bos_token_id=None, **SIZES)
    torch.manual_seed(seed)
    model = transformers.Qwen3ForSequenceClassification(cfg).float().eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 0.5)
        model.score.weight.normal_(0.0, 0.5)
    model.save_pretrained(out_dir)
    return out_dir


def session_token() -> str:
    """The token of the servers tests start (tests/conftest.py sets it; bench/reliability.py runs
    without pytest): clients find it in their environment, and so do the runs they start."""
    import secrets

    from nemo_cascade.runtime.server_token import TOKEN_ENV

    return os.environ.setdefault(TOKEN_ENV, secrets.token_urlsafe(16))


def tiny_reward_model_server(folder: Path):
    """A ``VLLMServer`` (not launched) of a tiny reward model built in ``folder``: the session's
    shared RM (conftest.py ``tiny_rm_server``) and bench/reliability.py's."""
    from nemo_cascade.rewards.serve import VLLMServer

    path = build_tiny_reward_model(folder)
    return VLLMServer(path, runner="pooling", max_model_len=RM_MAX_LEN,
                      log_path=path.parent / "rm.log", single_engine_process=True,
                      token=session_token())


def build_tiny_judge(out_dir: Path, seed: int = 1) -> Path:
    """A random tiny ``Qwen3ForCausalLM`` (the tiny_models.py builder) with the project's tiny
    tokenizer. Its (tied) embeddings are redrawn wide (std 0.5): with the default 0.02 the
    next-token distribution is nearly uniform whatever the context, and reading P(YES) at the wrong
    position would go unnoticed."""
    import torch
    import transformers

    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer(out_dir)
    # the judge prompt is longer than the RM's inputs
    sizes = {**SIZES, "max_position_embeddings": JUDGE_MAX_LEN}
    make_tiny_hf_model(out_dir, vocab_size=len(tok), seed=seed, **sizes)
    model = transformers.AutoModelForCausalLM.from_pretrained(out_dir, dtype="float32")
    torch.manual_seed(seed)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 0.5)
    model.save_pretrained(out_dir, safe_serialization=True)
    return out_dir


def hf_reward_scores(model, token_id_lists: list[list[int]]) -> list[float]:
    """transformers' raw logit of the reward head for each token sequence (no padding, one at a
    time)."""
    import torch

    with torch.no_grad():
        return [model(input_ids=torch.tensor([ids])).logits[0, 0].item() for ids in token_id_lists]


def hf_logprob_of(model, prompt_ids: list[int], continuation: list[int]) -> float:
    """log P(continuation | prompt) under transformers' causal LM (sum of the per-token
    log-softmax)."""
    import torch

    ids = torch.tensor([prompt_ids + continuation])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    n = len(prompt_ids)
    return sum(logp[n - 1 + k, t].item() for k, t in enumerate(continuation))
