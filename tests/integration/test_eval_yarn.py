"""App. B's YaRN on real vLLM engines (CPU): an evaluation engine started for a suite's factor
serves the tiny Qwen3 with YaRN rotary embeddings over its native positions and accepts a context
beyond them, and ``evaluate_checkpoint`` starts one engine per factor, each suite recording the
factor it was served with."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("vllm")

from nemo_cascade.evaluate import EvalSettings  # noqa: E402
from nemo_cascade.tooling.standalone import evaluate_checkpoint  # noqa: E402
from nemo_cascade.tooling.standalone import build_engine  # noqa: E402

NATIVE = 512
"""The tiny Qwen3's max_position_embeddings (tests/integration/conftest.py), plain RoPE."""


def _rotary(model):
    rotary = model.model.layers[0].self_attn.rotary_emb
    return type(rotary).__name__, float(getattr(rotary, "scaling_factor", 1.0))


def test_an_engine_started_for_yarn_3_serves_it(tiny_qwen3_dir):
    """vLLM would refuse a 1536-token context on a 512-position model; with the suite's factor 3 it
    builds YaRN rotary embeddings over the 512 native positions (the 14B's SWE-bench setting, App.
    B, scaled down)."""
    engine = build_engine(tiny_qwen3_dir, 3 * NATIVE, kv_cache_gib=0.25, yarn_factor=3.0)
    try:
        hf = engine.llm.llm_engine.model_config.hf_config
        assert hf.rope_parameters["rope_type"] == "yarn" and hf.rope_parameters["factor"] == 3.0
        assert hf.rope_parameters["original_max_position_embeddings"] == NATIVE
        assert (engine.max_model_len, engine.yarn_factor) == (3 * NATIVE, 3.0)
        assert engine.llm.apply_model(_rotary) == [("YaRNScalingRotaryEmbedding", 3.0)]
    finally:
        engine.shutdown()


def test_evaluate_checkpoint_starts_one_engine_per_factor(tiny_qwen3_dir, tmp_path):
    """tiny-math (no YaRN) and GSM8K (App. B: YaRN 2) need two engines; each suite records the
    factor its engine served and that engine's context (at most the positions the factor gives)."""
    results, path = evaluate_checkpoint(
        tiny_qwen3_dir, ["tiny-math", "gsm8k"],
        EvalSettings(limit=1, samples=1, max_tokens=4, progress=False), out_dir=tmp_path,
        kv_cache_gib=0.25)
    served = {
        name: (r.decoding["yarn_factor"], r.decoding["engine_yarn_factor"])
        for name, r in results.items()}
    assert served == {"tiny-math": (1.0, 1.0), "gsm8k": (2.0, 2.0)}
    assert results["tiny-math"].decoding["max_model_len"] <= NATIVE
    assert results["gsm8k"].decoding["max_model_len"] <= 2 * NATIVE
    written = json.loads(path.read_text())["suites"]
    assert {n: s["decoding"]["engine_yarn_factor"] for n, s in written.items()
            } == {"tiny-math": 1.0, "gsm8k": 2.0}
