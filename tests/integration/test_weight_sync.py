"""Weight sync parity: after a training step and a push, and again after a second, vLLM's log-probs
equal the actor's (fp32, within rounding: tests/tolerance.py), with a TP=1 actor and engine, and a
TP=2 actor pushing into a vLLM engine sharded over the same two ranks
(rollout.tensor_parallel_size=2: each rank sends full tensors, vLLM's loaders keep their shard); and
a TP=1 Qwen2 (its q/k/v biases reach vLLM's fused qkv_proj); and an fp32 actor pushing into a bf16
engine (``rollout.dtype=bfloat16``): the push converts every tensor, the engine serves bf16 weights,
and its log-probs match the actor's within bf16's precision; and a compiled CPU engine
(``rollout.compile=on``), whose compiled graph must run the kernels the push rebuilt, not the ones
it was compiled with."""
import json
from pathlib import Path

import pytest
import torch

from tests.launch import torchrun
from tests.tolerance import Net, assert_within

pytestmark = pytest.mark.integration
PROMPT = 40  # sync_worker.py scores 28 tokens after a 12-token prompt


def assert_synced(model_dir, result: dict, what: str) -> None:
    """vLLM's fp32 forward against the actor's on the same weights: only the order of the sums
    differs."""
    assert_within(result["max_diff"], torch.float32,
                  Net.of(model_dir, PROMPT).forward_terms(), what=what)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    out = tmp_path_factory.mktemp("tiny")
    tok = build_tiny_tokenizer(out)
    return make_tiny_hf_model(out, vocab_size=len(tok), arch="qwen3", num_attention_heads=4,
                              num_key_value_heads=2)


@pytest.fixture(scope="module")
def tiny_qwen2(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    # §4.2: the RM's base is Qwen2.5-72B-Instruct (Qwen2); random non-zero q/k/v biases
    # (tiny_models.py) that the push must deliver into vLLM's fused qkv_proj.
    out = tmp_path_factory.mktemp("qwen2")
    tok = build_tiny_tokenizer(out)
    return make_tiny_hf_model(out, vocab_size=len(tok), arch="qwen2", tie_word_embeddings=False,
                              hidden_size=128, num_attention_heads=4, num_key_value_heads=2)


@pytest.mark.parametrize("model,nproc,tp,engine_tp", [("tiny_model", 1, 1, 1),
                                                      ("tiny_model", 2, 2, 2),
                                                      ("tiny_qwen2", 1, 1, 1)],
                         ids=["tp1", "tp2-engine-tp2", "qwen2-tp1"])
def test_vllm_matches_actor_after_push(request, tmp_path, model, nproc, tp, engine_tp):
    out = tmp_path / "sync.json"
    proc = torchrun(Path(__file__).with_name("sync_worker.py"), nproc,
                    request.getfixturevalue(model), out, tp, engine_tp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for rank, r in enumerate(json.loads(out.read_text())):
        assert r["moved"] > 1e-2, (
            f"rank {rank}: training did not change the log-probs; the test would be vacuous")
        assert r["moved_again"] > 1e-2, f"rank {rank}: the second step did not change the log-probs"
        assert_synced(request.getfixturevalue(model), r, f"vLLM vs the actor, {model} rank {rank}")
        assert r["tensors"] > 10


def test_fp32_actor_into_bf16_engine(tmp_path, tiny_model):
    out = tmp_path / "sync.json"
    proc = torchrun(
        Path(__file__).with_name("sync_worker.py"), 1, tiny_model, out, 1, 1, "bfloat16")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    (r,) = json.loads(out.read_text())
    assert set(r["weight_dtypes"]) == {"bfloat16"}, r["weight_dtypes"]
    # bf16 keeps 8 mantissa bits: each weight and each op's output is rounded once (sums accumulate
    # in fp32), so the log-probs agree to bf16's bound over those roundings — and the training step
    # moved them by far more, so a push that left the old weights would fail
    assert_within(r["max_diff"], torch.bfloat16,
                  Net.of(tiny_model, PROMPT).roundings(), what="bf16 engine vs the actor")
    assert r["moved"] > 10 * r["max_diff"] and r["moved_again"] > 10 * r["max_diff"], r
    # vLLM's per-tensor dtype warning, filtered
    assert "Attempted to load weight" not in proc.stdout + proc.stderr


def test_compiled_engine_follows_the_push(tmp_path, tiny_model):
    out = tmp_path / "sync.json"
    proc = torchrun(
        Path(__file__).with_name("sync_worker.py"), 1, tiny_model, out, 1, 1, "float32", "on")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    (r,) = json.loads(out.read_text())
    assert r["moved"] > 1e-2, r
    assert_synced(tiny_model, r, "the compiled engine vs the actor")
