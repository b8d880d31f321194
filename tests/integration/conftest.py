"""Shared fixtures for integration tests: a tiny Qwen3 HF folder (config, weights, tokenizer) built
offline."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# vLLM reads this at engine start; the rollout engine forces it too, this only covers direct vLLM
# use.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def build_tiny_qwen3(out_dir: str | os.PathLike, *, seed: int = 0) -> Path:
    """A tiny random Qwen3ForCausalLM (fp32, tied embeddings, head_dim 32) plus the project's tiny
    tokenizer.

    The embeddings are drawn with std 0.1 instead of HF's 0.02: next-token entropy ≈ 3 nats instead
    of ≈ log(vocab), so temperature and top-k visibly change the sampling distribution in the
    tests."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from nemo_cascade.tooling.demo_data.tiny_tokenizer import (EOS_TOKEN, PAD_TOKEN,
                                                               build_tiny_tokenizer)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(out)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=32, max_position_embeddings=512, tie_word_embeddings=True,
                      eos_token_id=tok.convert_tokens_to_ids(EOS_TOKEN),
                      pad_token_id=tok.convert_tokens_to_ids(PAD_TOKEN), bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).to(torch.float32).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 0.1)
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="session")
def tiny_rm_server(tmp_path_factory):
    """One ``vllm serve`` of the tiny random Bradley–Terry RM (``_remote_helpers``) for every module
    that needs it (test_remote_rewards, test_resume): start-up dominates those modules on CPU. It is
    *launched* here, not waited for — a module calls ``wait_ready()``, after launching its own
    servers, so that they load together."""
    from nemo_cascade.rewards.serve import process_group_alive
    from tests.integration._remote_helpers import tiny_reward_model_server

    server = tiny_reward_model_server(tmp_path_factory.mktemp("tiny_rm"))
    try:
        yield server.launch()
    finally:
        pid = server.proc.pid if server.proc is not None else None
        server.stop()
    assert pid is None or not process_group_alive(pid), (
        "the RM server's process group outlived stop()")
