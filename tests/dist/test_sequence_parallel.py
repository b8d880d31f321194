"""Sequence parallelism (Megatron SP over the TP group) changes where activations live, not the math: at TP=2,
``parallel.sequence_parallel=True`` gives the same per-token log-probs, GRPO losses and grad norms, packed-SFT
loss, and reward-model scores and losses as TP=2 without it (torchrun, gloo, local layer spec on CPU)."""
import json
from pathlib import Path

import numpy as np
import pytest

from tests.launch import torchrun

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("sp_worker.py")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    model = make_tiny_hf_model(tmp_path_factory.mktemp("tiny"), vocab_size=256, arch="qwen3",
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    out = tmp_path_factory.mktemp("sp") / "result.json"
    proc = torchrun(WORKER, 2, model, out, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text())


def test_sequence_parallel_marks_the_norms(result):
    """Under SP the input/pre-MLP/final norms see a sequence shard: their weights must be flagged so Megatron
    sums their gradients over the TP group (without SP nothing is flagged)."""
    assert result["sp=False"]["policy"]["sp_params"] == []
    flagged = result["sp=True"]["policy"]["sp_params"]
    assert "decoder.final_layernorm.weight" in flagged
    assert {n.split(".", 3)[-1] for n in flagged if n.startswith("decoder.layers.")} >= {
        "input_layernorm.weight", "pre_mlp_layernorm.weight"}


def test_policy_matches_without_sequence_parallel(result):
    ref, sp = result["sp=False"]["policy"], result["sp=True"]["policy"]
    np.testing.assert_allclose(sp["initial"], ref["initial"], atol=1e-5)
    np.testing.assert_allclose(sp["loss"], ref["loss"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sp["grad_norm"], ref["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(sp["final"], ref["final"], atol=1e-5)
    assert len(set(np.round(ref["loss"], 9))) > 1, "losses must change across steps"
    assert len(ref["initial"][0]) == 23, "odd length: SP pads to a multiple of TP and must give T positions back"


def test_packed_sft_matches_without_sequence_parallel(result):
    ref, sp = result["sp=False"]["policy"], result["sp=True"]["policy"]
    assert ref["sft_T"] % 2 == 1, "odd packed width: exercises the padding of packed rows and their mask"
    np.testing.assert_allclose(sp["sft_loss"], ref["sft_loss"], rtol=1e-6)
    np.testing.assert_allclose(sp["sft_grad_norm"], ref["sft_grad_norm"], rtol=1e-5)


def test_reward_model_matches_without_sequence_parallel(result):
    ref, sp = result["sp=False"]["rm"], result["sp=True"]["rm"]
    np.testing.assert_allclose(sp["scores"], ref["scores"], atol=1e-5)
    np.testing.assert_allclose(sp["loss"], ref["loss"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sp["grad_norm"], ref["grad_norm"], rtol=1e-5)
