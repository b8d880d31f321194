"""ArenaHard's judge-scored win rate against a baseline answer (paper T1, T2: ArenaHard 1.0, no
style control).

Arena-Hard-Auto v0.1 (github.com/lmarena/arena-hard-auto, Apache-2.0) as its code defines it:

- **Two games per answer.** The judge compares the model's answer with the baseline's twice:
  game 1 with the baseline as assistant A and the model as B, game 2 swapped (position bias
  cancels).
- **Judge prompt.** v0.1's system prompt (:data:`SYSTEM_PROMPT`: answer the question yourself,
  compare, end with one verdict label) and user template (:data:`PROMPT_TEMPLATE`), greedy
  (temperature 0), up to 4096 tokens (:data:`JUDGE_MAX_TOKENS`).
- **Verdict** (:func:`parse_verdict`): the labels ``[[X]]`` in the judgment. None: the judge is
  asked once more, in the same conversation, to "continue your judgment and finish by outputting
  a final verdict label" (two attempts in all) and the joined text is read again. Two different
  labels: no verdict. One label: the verdict if it is one of ``A>>B``, ``A>B``, ``A=B``,
  ``B>A``, ``B>>A``; anything else is no verdict.
- **Battles** (:func:`battles`): a game's verdict is one battle for the model, 1 won, ½ tie,
  0 lost; a strong verdict (``>>``) counts as three battles (v0.1's ``WEIGHT = 3``). A game
  without a verdict is left out.
- **Score** (:func:`pooled_score`): the mean over every battle of every answer. ArenaHard fits a
  Bradley–Terry model to the battles and reports the model's win probability against the
  baseline; with two players and no regularisation the fit's win probability *is* this mean
  (a tie half a win).

A sample's reward is the mean of its own battles (0.5 when neither game has a verdict: neither
won nor lost, and left out of the pooled score), so a suite's avg@K weighs every answer alike
while the pooled score weighs strong verdicts three times; eval.json carries both
(docs/evaluation.md).

The judge reads the answer after ``</think>``; a thinking response that never closed it has no
answer, and the judge sees an empty one. Label (docs/rewards.md): ``{"prompt": str, "baseline":
str}``. The judge is any OpenAI-compatible chat server (``Reward.judge_url``: ``vllm serve
JUDGE``), asked through :class:`~.http_endpoint.HttpEndpoint` (retries, ``file:`` URLs, one-line
errors). It sends no API key and names no model, so a hosted judge (the paper's
GPT-4-Turbo-2024-04-09) needs a local proxy that adds both.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence

from ..config import Reward
from ..data.chat import split_thinking
from ..data.schemas import SchemaError
from .http_endpoint import HttpEndpoint, RewardServerError
from .reward_domain import BatchVerdicts, RewardDomain

SYSTEM_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two "
    "AI assistants to the user prompt displayed below. You will be given assistant A's answer "
    "and assistant B's answer. Your job is to evaluate which assistant's answer is "
    "better.\n\nBegin your evaluation by generating your own answer to the prompt. You must "
    "provide your answers before judging any answers.\n\nWhen evaluating the assistants' "
    "answers, compare both assistants' answers with your answer. You must identify and correct "
    "any mistakes or inaccurate information.\n\nThen consider if the assistant's answers are "
    "helpful, relevant, and concise. Helpful means the answer correctly responds to the prompt "
    "or follows the instructions. Note when user prompt has any ambiguity or more than one "
    "interpretation, it is more helpful and appropriate to ask for clarifications or more "
    "information from the user than providing an answer based on assumptions. Relevant means "
    "all parts of the response closely connect or are appropriate to what is being asked. "
    "Concise means the response is clear and not verbose or excessive.\n\nThen consider the "
    "creativity and novelty of the assistant's answers when needed. Finally, identify any "
    "missing important information in the assistants' answers that would be beneficial to "
    "include when responding to the user prompt.\n\nAfter providing your explanation, you must "
    "output only one of the following choices as your final verdict with a label:\n\n1. "
    "Assistant A is significantly better: [[A>>B]]\n2. Assistant A is slightly better: "
    "[[A>B]]\n3. Tie, relatively the same: [[A=B]]\n4. Assistant B is slightly better: "
    "[[B>A]]\n5. Assistant B is significantly better: [[B>>A]]\n\nExample output: \"My final "
    "verdict is tie: [[A=B]]\".")
"""Arena-Hard-Auto v0.1's judge system prompt (config/judge_config.yaml), verbatim."""
PROMPT_TEMPLATE = ("<|User Prompt|>\n{question}\n\n"
                   "<|The Start of Assistant A's Answer|>\n{answer_a}\n"
                   "<|The End of Assistant A's Answer|>\n\n"
                   "<|The Start of Assistant B's Answer|>\n{answer_b}\n"
                   "<|The End of Assistant B's Answer|>")
"""v0.1's user turn: the question, then A's and B's answers."""
CONTINUE = "continue your judgment and finish by outputting a final verdict label"
"""v0.1's second attempt, asked when the first judgment holds no label."""
JUDGE_ATTEMPTS = 2
JUDGE_MAX_TOKENS = 4096
STRONG_WEIGHT = 3
"""A strong verdict (``A>>B``, ``B>>A``) counts as this many battles (v0.1's ``WEIGHT``)."""
VERDICTS = {"A>>B": (1.0, STRONG_WEIGHT), "A>B": (1.0, 1), "A=B": (0.5, 1), "B>A": (0.0, 1),
            "B>>A": (0.0, STRONG_WEIGHT)}
"""Label → (outcome for assistant A, battles)."""
_LABEL = re.compile(r"\[\[([AB<>=]+)\]\]")


def parse_verdict(judgment: str) -> tuple[Optional[str], bool]:
    """``(label, ask_again)`` of a judgment, by the module docstring's rule."""
    found = {m for m in _LABEL.findall(judgment) if m}
    if not found:
        return None, True
    if len(found) > 1:
        return None, False
    label = found.pop()
    return (label if label in VERDICTS else None), False


def battles(label: Optional[str], model_is_a: bool) -> list[float]:
    """The model's battle outcomes in one game (1 won, ½ tie, 0 lost; a strong verdict three
    times); none without a verdict."""
    if label not in VERDICTS:
        return []
    outcome, weight = VERDICTS[label]
    return [outcome if model_is_a else 1.0 - outcome] * weight


def game_battles(verdicts: Sequence[Optional[str]]) -> list[float]:
    """The battles of one answer's two games: game 1 with the baseline as A, game 2 the model."""
    first, second = verdicts
    return battles(first, model_is_a=False) + battles(second, model_is_a=True)


def sample_score(verdicts: Sequence[Optional[str]]) -> Optional[float]:
    """The mean of one answer's battles; None when neither game has a verdict."""
    out = game_battles(verdicts)
    return sum(out) / len(out) if out else None


def pooled_score(all_verdicts: Sequence[Sequence[Optional[str]]]) -> Optional[float]:
    """ArenaHard's score: the mean over every battle of every answer (None: no verdict at all)."""
    out = [b for verdicts in all_verdicts for b in game_battles(verdicts)]
    return sum(out) / len(out) if out else None


def judge_messages(question: str, answer_a: str, answer_b: str) -> list[dict]:
    user = PROMPT_TEMPLATE.format(question=question, answer_a=answer_a, answer_b=answer_b)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


class ChatJudge:
    """A judge LM behind an OpenAI-compatible ``/v1/chat/completions`` route, greedy,
    ``concurrency`` games in flight."""

    EXPECT = "a judge LM behind an OpenAI-compatible chat route (vllm serve JUDGE)"

    def __init__(self, url: str, *, max_tokens: int = JUDGE_MAX_TOKENS, concurrency: int = 8,
                 **http):
        self.http = HttpEndpoint(url, expect=self.EXPECT, **http)
        self.max_tokens, self.concurrency = max_tokens, max(1, concurrency)

    def reply(self, messages: list[dict]) -> str:
        payload = {"messages": messages, "temperature": 0.0, "max_tokens": self.max_tokens}
        answer = self.http.post("/v1/chat/completions", payload)
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str):
            raise RewardServerError(f"{self.http.base_url}/v1/chat/completions: malformed "
                                    "answer: expected choices[0].message.content, got "
                                    f"{str(answer)[:200]!r}")
        return text

    def verdict(self, messages: list[dict]) -> tuple[Optional[str], str]:
        """``(label, judgment)`` of one game, asking once more when the judgment has no label."""
        conversation, judgment = list(messages), ""
        for _ in range(JUDGE_ATTEMPTS):
            text = self.reply(conversation)
            judgment += "\n" + text
            label, again = parse_verdict(judgment)
            if not again:
                return label, judgment
            conversation += [{"role": "assistant", "content": text},
                             {"role": "user", "content": CONTINUE}]
        return None, judgment

    def verdicts(self, games: list[list[dict]]) -> list[tuple[Optional[str], str]]:
        with ThreadPoolExecutor(min(self.concurrency, max(1, len(games)))) as pool:
            return list(pool.map(self.verdict, games))


def judged_answer(response: str) -> str:
    """What the judge reads: the answer after ``</think>``; empty when the thinking never ended."""
    _, answer, terminated = split_thinking(response if isinstance(response, str) else "")
    return answer.strip() if terminated else ""


def score_against_baseline(judge: ChatJudge, responses: Sequence[str], labels: Sequence[dict]
                           ) -> tuple[list[float], list[dict]]:
    """Per response: its reward (:func:`sample_score`, 0.5 unjudged) and its games' verdicts and
    judgments."""
    games = []
    for response, label in zip(responses, labels):
        answer = judged_answer(response)
        games += [judge_messages(label["prompt"], label["baseline"], answer),
                  judge_messages(label["prompt"], answer, label["baseline"])]
    found = judge.verdicts(games)
    rewards, details = [], []
    for k in range(len(responses)):
        (first, j1), (second, j2) = found[2 * k], found[2 * k + 1]
        score = sample_score((first, second))
        rewards.append(0.5 if score is None else score)
        details.append({"verdicts": [first, second], "judgments": [j1, j2]})
    return rewards, details


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """The judge at ``Reward.judge_url`` (``workers`` games in flight, 8 by default)."""
    judge = ChatJudge(settings.judge_url, concurrency=settings.workers or 8)
    return lambda responses, labels: score_against_baseline(judge, responses, labels)


def validate_label(label: Any) -> None:
    """A one-line ValueError unless ``label`` is ``{"prompt": str, "baseline": str}``."""
    if not isinstance(label, dict):
        raise ValueError("arena label: expected a dict with 'prompt' and 'baseline', got "
                         f"{type(label).__name__}")
    for key in ("prompt", "baseline"):
        if not isinstance(label.get(key), str) or not label[key].strip():
            raise ValueError(f"arena label: {key!r} must be a non-empty string, "
                             f"got {label.get(key)!r:.40}")


def adapt(row: dict, where: str) -> tuple[list[dict], dict]:
    """Rows with ``prompt`` (the question) and ``baseline`` (the answer to beat)."""
    label = {"prompt": row.get("prompt"), "baseline": row.get("baseline")}
    try:
        validate_label(label)
    except ValueError as e:
        raise SchemaError(f"{where}: {e}") from None
    return [{"role": "user", "content": label["prompt"]}], label


def _values_are_scores(record: dict, label: Any, responses: list[str]) -> None:
    """A sample's value is its reward (won 1, tie ½, lost 0, or between), not 1 for a full win
    only."""
    record["values"] = [float(s) for s in record["scores"]]


def _metrics(records: list[dict]) -> dict:
    verdicts = [d["verdicts"] for r in records if not r["too_long"] for d in r["details"]]
    return {"arena_hard_score": pooled_score(verdicts),
            "games_without_verdict": sum(v not in VERDICTS for pair in verdicts for v in pair)}


def _notes(m: dict) -> list[str]:
    if m.get("arena_hard_score") is None:
        return []
    return [f"ArenaHard score {100 * m['arena_hard_score']:.1f} (battles pooled; "
            f"{m['games_without_verdict']} games without a verdict)"]


DOMAIN = RewardDomain(
    "arena", adapt, validate_label, batch_verdicts, servers=("judge_url",),
    eval_options=("judge_url",),
    eval_requires=("judge_url", "a judge LM behind an OpenAI-compatible chat route "
                                "(--judge-url URL)"),
    eval_record=_values_are_scores, eval_metrics=_metrics, report_notes=_notes)
"""ArenaHard (paper T1, T2): a judge's pairwise verdicts against the baseline answer, in both
orders."""


__all__ = ["DOMAIN", "SYSTEM_PROMPT", "PROMPT_TEMPLATE", "CONTINUE", "VERDICTS", "STRONG_WEIGHT",
           "parse_verdict", "battles", "game_battles", "sample_score", "pooled_score",
           "judge_messages", "ChatJudge", "judged_answer", "score_against_baseline",
           "batch_verdicts", "validate_label", "adapt"]
