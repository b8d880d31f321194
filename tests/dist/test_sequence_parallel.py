"""Sequence parallelism (Megatron SP over the TP group) changes where activations live, not the
math: at TP=2, ``parallel.sequence_parallel=True`` gives the same per-token log-probs, GRPO losses
and grad norms, packed-SFT loss, and reward-model scores and losses as TP=2 without it (torchrun,
gloo, local layer spec on CPU)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.launch import torchrun
from tests.tolerance import Net, assert_close, assert_training_close

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
    # sp_worker.py: rows of 23 tokens
    return {**json.loads(out.read_text()), "net": Net.of(model, 23)}


# SP splits the norms' gradient sums over the TP group and gathers activations in another order: the
# bounds are tests/tolerance.py's for the additions on each number's path (6 rows of 23 tokens, 3
# GRPO steps).
TOKENS, STEPS = 6 * 23, 3


def test_sequence_parallel_marks_the_norms(result):
    """Under SP the input/pre-MLP/final norms see a sequence shard: their weights must be flagged so
    Megatron sums their gradients over the TP group (without SP nothing is flagged)."""
    assert result["sp=False"]["policy"]["sp_params"] == []
    flagged = result["sp=True"]["policy"]["sp_params"]
    assert "decoder.final_layernorm.weight" in flagged
    assert {n.split(".", 3)[-1] for n in flagged if n.startswith("decoder.layers.")} >= {
        "input_layernorm.weight", "pre_mlp_layernorm.weight"}


def test_policy_matches_without_sequence_parallel(result):
    ref, sp, net = result["sp=False"]["policy"], result["sp=True"]["policy"], result["net"]
    assert_close(sp["initial"], ref["initial"], torch.float32, net.forward_terms(),
                 what="initial log-probs")
    assert_training_close(sp, ref, net, TOKENS, "GRPO")
    assert_close(sp["final"], ref["final"], torch.float32, net.terms_after(STEPS, TOKENS),
                 what="final log-probs")
    assert len(set(np.round(ref["loss"], 9))) > 1, "losses must change across steps"
    assert len(ref["initial"][0]) == 23, (
        "odd length: SP pads to a multiple of TP and must give T positions back")


def test_packed_sft_matches_without_sequence_parallel(result):
    ref, sp = result["sp=False"]["policy"], result["sp=True"]["policy"]
    assert ref["sft_T"] % 2 == 1, (
        "odd packed width: exercises the padding of packed rows and their mask")
    sft = {"loss": ref["sft_loss"], "grad_norm": ref["sft_grad_norm"]}
    assert_training_close({"loss": sp["sft_loss"], "grad_norm": sp["sft_grad_norm"]}, sft,
                          result["net"], 4 * ref["sft_T"], "packed SFT",
                          after=STEPS)  # 4 packed rows, after the GRPO steps


def test_reward_model_matches_without_sequence_parallel(result):
    ref, sp, net = result["sp=False"]["rm"], result["sp=True"]["rm"], result["net"]
    assert_close(sp["scores"], ref["scores"], torch.float32, net.forward_terms(), what="RM scores")
    assert_training_close(sp, ref, net, 8 * 15, "RM")  # 4 pairs: 8 rows of at most 15 tokens
