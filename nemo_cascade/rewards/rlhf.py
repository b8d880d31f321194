"""The RLHF reward: a served Bradley–Terry reward model's score of the final answer in its
conversation.

Paper §4.3.2: the reward is the RM score of the answer only — the text after ``</think>`` — so the
policy is not rewarded for how its reasoning reads; a thinking response that never closed its
``</think>`` is scored **whole** (thinking included), which the RM scores low, and so penalises
unfinished responses without a special case. The RM (paper §4.2: Qwen2.5-72B-Instruct + a linear
head, BT loss) is queried through :class:`nemo_cascade.rewards.remote.RewardModelClient`: the
label's conversation plus the answer as the final assistant turn, rendered as the RM's training
pairs were (``data.rm_input``). No reward shaping (paper §4.3: none with the 72B RM). The RLHF
code-switch penalty (batch min − 10) is applied by the language-mixing module, not here.

Label (docs/rewards.md): ``{"prompt": str}`` or ``{"messages": [{"role", "content"}, ...]}`` — the
conversation the answer replies to, ending with a user turn. :func:`validate_label` checks it at
data-loading time; the reward functions never raise on the response text (a server failure raises
:class:`~nemo_cascade.rewards.http_endpoint.RewardServerError`: that is infrastructure, not model
output).
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from ..config import Reward
from ..data.chat import split_thinking
from ..data.schemas import adapt_rlhf
from .language import BATCH_MIN_MINUS_10
from .remote import RewardModelClient
from .reward_domain import BatchVerdicts, RewardDomain, without_details

_ROLES = ("system", "user", "assistant")


class ConversationScorer(Protocol):
    """What the reward needs from a reward-model client (``RewardModelClient`` is one)."""

    def score_conversations(self, conversations: Sequence[Sequence[dict]]) -> list[float]: ...


def validate_label(label: Any) -> None:
    """Raise a one-line ValueError unless ``label`` is ``{"prompt": str}`` or ``{"messages":
    [...]}`` (exactly one of the two; other keys are ignored) whose messages have a known role and
    string content and end with a user turn."""
    if not isinstance(label, dict):
        raise ValueError("rlhf label: expected a dict with 'prompt' or 'messages', got "
                         f"{type(label).__name__}")
    if ("prompt" in label) == ("messages" in label):
        raise ValueError("rlhf label: expected exactly one of 'prompt' or 'messages', got keys "
                         f"{sorted(label)}")
    if "prompt" in label:
        if not isinstance(label["prompt"], str):
            raise ValueError("rlhf label: 'prompt' must be a string, got "
                             f"{type(label['prompt']).__name__}")
        return
    messages = label["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("rlhf label: 'messages' must be a non-empty list of {role, content} dicts")
    for i, m in enumerate(messages):
        if (not isinstance(m, dict) or m.get("role") not in _ROLES
                or not isinstance(m.get("content"), str)):
            raise ValueError(f"rlhf label: messages[{i}] must be {{'role': one of {list(_ROLES)}, "
                             f"'content': str}}, got {m!r:.120}")
    if messages[-1]["role"] != "user":
        raise ValueError("rlhf label: the conversation must end with a user turn, got "
                         f"{messages[-1]['role']!r}")


def scored_text(response: str) -> str:
    """What the RM sees of a response: the answer after ``</think>`` (stripped) for a finished
    thinking response, the whole response when its thinking never ended (paper §4.3.2), a plain
    response as is."""
    _, answer, terminated = split_thinking(response)
    if not terminated:
        return response
    return answer.strip()


def rlhf_conversation(response: str, label: dict) -> list[dict]:
    """The conversation the RM scores: the label's turns (role and content only) + the scored
    answer."""
    if "messages" in label:
        turns = [{"role": m["role"], "content": m["content"]} for m in label["messages"]]
    else:
        turns = [{"role": "user", "content": label["prompt"]}]
    return turns + [{"role": "assistant", "content": scored_text(response)}]


def rlhf_reward_batch(responses: Sequence[str], labels: Sequence[dict],
                      client: ConversationScorer) -> list[float]:
    """RM scores (raw BT logits) of ``responses[i]`` replying to ``labels[i]``, sent as batched
    requests."""
    if len(responses) != len(labels):
        raise ValueError(f"rlhf_reward_batch: {len(responses)} responses for {len(labels)} labels")
    conversations = [rlhf_conversation(r if isinstance(r, str) else str(r), label)
                     for r, label in zip(responses, labels)]
    return [float(s) for s in client.score_conversations(conversations)]


class RLHFReward:
    """``REWARDS["rlhf"]``-style callable bound to a reward-model client: ``reward(response,
    label)`` for one sample, ``reward.batch(responses, labels)`` for a rollout batch (one round of
    batched requests)."""

    def __init__(self, client: ConversationScorer):
        self.client = client

    def __call__(self, response: str, label: dict) -> float:
        return self.batch([response], [label])[0]

    def batch(self, responses: Sequence[str], labels: Sequence[dict]) -> list[float]:
        return rlhf_reward_batch(responses, labels, self.client)


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """The served reward model at ``Reward.reward_model_url``."""
    return without_details(RLHFReward(RewardModelClient(settings.reward_model_url)).batch)


DOMAIN = RewardDomain(
    "rlhf", adapt_rlhf, validate_label, batch_verdicts,
    code_switch_penalty=BATCH_MIN_MINUS_10,      # §4.3.2
    code_switch_rule="english_prompt_only",      # §4.3.2: "when the prompt is purely in English"
    servers=("reward_model_url",), eval_options=("reward_model_url",),
    eval_requires=("reward_model_url",
                   "a served reward model (--reward-model-url URL, or --reward-model HF_FOLDER to "
                                       "start one)"))
"""The RLHF domain (§4.3): a served Bradley–Terry reward model's score of the final answer."""


__all__ = ["DOMAIN", "batch_verdicts", "validate_label", "scored_text", "rlhf_conversation",
           "rlhf_reward_batch",
           "RLHFReward", "ConversationScorer"]
