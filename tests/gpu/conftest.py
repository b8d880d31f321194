"""GPU tier: every test here needs CUDA (and most need Transformer Engine); without them each one is
skipped with the reason, so `python -m pytest tests/gpu -q` is safe anywhere. See
tests/gpu/README.md."""
from __future__ import annotations

import pytest
import torch


def te_version() -> str | None:
    """transformer_engine's version where CUDA exists and it imports, else None (never imported on
    CPU)."""
    from nemo_cascade.actor.precision import probe

    return probe().te_version


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(scope="session")
def te():
    """Skip unless Transformer Engine is usable here; its version otherwise."""
    version = te_version() if torch.cuda.is_available() else None
    if version is None:
        pytest.skip("needs transformer_engine (pip install the gpu extra)")
    return version


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A random Qwen3 whose shapes suit FP8 GEMMs (every dim a multiple of 128, head_dim 64) and
    TP=2 / CP=2: 2 layers, 4 heads, 2 KV groups, untied LM head (so both output-layer paths are used
    across the tier)."""
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny_gpu"), vocab_size=512, arch="qwen3",
                              seed=11, tie_word_embeddings=False, hidden_size=256,
                              intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=64, max_position_embeddings=4096)


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory):
    """The same shapes as ``tiny`` as a Qwen2 (the RM's base architecture, §4.2:
    Qwen2.5-72B-Instruct): q/k/v biases (random, non-zero; tiny_models.py), no q/k norm. head_dim =
    hidden / heads, as Qwen2's config implies."""
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny_qwen2_gpu"), vocab_size=512,
                              arch="qwen2", seed=11, tie_word_embeddings=False, hidden_size=256,
                              intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=64, max_position_embeddings=4096)
