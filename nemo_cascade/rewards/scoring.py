"""From a stage's reward settings to rewards on rollout groups.

:class:`Scorer` is what a GRPO stage calls: it builds the domain's batched verifier from ``config.Reward``
once, then ``scorer.score(groups)`` fills every group's ``rewards_G`` (and ``reward_details_G``, the verdicts
behind each reward) with one batched call, so slow verifiers run in parallel (paper §4.6: asynchronous
verification). Each rank scores its own share of the prompts; what needs the whole rollout batch — the
code-switch penalty, whose RLHF form is "batch minimum − 10" (§4.3.2), and the batch's reward metrics — runs
after the shares are gathered (:func:`apply_code_switch_penalty`, :func:`reward_metrics`).
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Sequence

from ..config import Reward
from ..types import PromptGroup
from . import code, language, rlhf, swe
from .ifeval import if_reward_with_rm, per_instruction
from .math import MathVerifier
from .remote import JudgeClient, RewardModelClient
from .workers import num_cores

BatchVerdicts = Callable[[Sequence[str], Sequence[Any]], tuple[list[float], list[dict]]]
"""(responses, labels) → (one reward per response, one details dict per response)."""

AUTO_CODE_SWITCH_PENALTY: dict[str, language.CodeSwitchPenalty] = {
    "math": -1.0,                                # §4.5: "−1 for code-switching"
    "code": 0.0,                                 # §4.6 / T19: 0, because −1 hurt
    "rlhf": language.BATCH_MIN_MINUS_10,         # §4.3.2
}
"""``code_switch_penalty="auto"``: the paper's per-stage values (§4.3.2, §4.5, §4.6 / T19); the paper sets none
for IF-RL and SWE RL."""

AUTO_CODE_SWITCH_RULE: dict[str, str] = {
    "rlhf": "english_prompt_only",               # §4.3.2: "when the prompt is purely in English"
    "math": "prompt_language",                   # §4.5.2: "different from the original prompt's language"
}
"""``code_switch_rule="auto"``: the paper's rule per domain; every other domain (code, whose penalty is 0 by
T19, and IF / SWE, which the paper gives none) takes math's, the one that reads the prompt's language."""


def resolve_code_switch_penalty(domain: str, setting: str) -> language.CodeSwitchPenalty:
    """The penalty a ``Reward.code_switch_penalty`` string stands for in ``domain``."""
    if setting == "auto":
        return AUTO_CODE_SWITCH_PENALTY.get(domain)
    if setting == "none":
        return None
    if setting == language.BATCH_MIN_MINUS_10:
        return setting
    return float(setting)


def resolve_code_switch_rule(domain: str, setting: str) -> str:
    """The rule (:data:`language.CODE_SWITCH_RULES`) a ``Reward.code_switch_rule`` string stands for in ``domain``."""
    return AUTO_CODE_SWITCH_RULE.get(domain, "prompt_language") if setting == "auto" else setting


def _without_details(batch_fn: Callable[[Sequence[str], Sequence[Any]], list[float]]) -> BatchVerdicts:
    return lambda responses, labels: (batch_fn(responses, labels), [{} for _ in responses])


def _math(settings: Reward) -> BatchVerdicts:
    verifier = MathVerifier(settings.answer_pattern, settings.verify_timeout_s, settings.workers or None,
                            settings.math_grader)

    def verdicts(responses, labels):
        details = [{"answer_found": verifier.extract_answer(r) is not None} for r in responses]
        return verifier.reward_batch(responses, labels), details
    return verdicts


def _ifeval(responses: Sequence[str], labels: Sequence[Any]) -> tuple[list[float], list[dict]]:
    """R_IF = 1 iff every instruction passes (strict verdicts, §4.4); details keep each instruction's verdict
    for the per-instruction pass rates."""
    scores, details = [], []
    for response, label in zip(responses, labels):
        verdicts = per_instruction(response, label)
        scores.append(1.0 if all(verdicts) else 0.0)
        details.append({"instructions": dict(zip(label["instruction_id_list"], verdicts))})
    return scores, details


def _batch_verdicts(domain: str, settings: Reward) -> BatchVerdicts:
    if domain == "math":
        return _math(settings)
    if domain == "ifeval":
        return _ifeval
    if domain == "code":
        return _without_details(partial(code.reward_batch, workers=settings.workers or None,
                                        unsafe=settings.sandbox == "unsafe"))
    if domain == "rlhf":
        return _without_details(rlhf.RLHFReward(RewardModelClient(settings.reward_model_url)).batch)
    if domain == "swe":  # Eq. 2's "otherwise" case: the judge's P("YES") if a server is set, else lexical
        grader = (swe.JudgeGrader(JudgeClient(settings.judge_url, reasoning_tokens=settings.judge_reasoning_tokens))
                  if settings.judge_url else None)
        return swe.SWEReward(grader).verdicts
    raise ValueError(f"no verifier for reward domain {domain!r}")


class Scorer:
    """One stage's rewards: ``Scorer(domain, settings).score(groups)``. Setup errors (a missing sandbox, an
    unreachable reward server) raise; model output never does."""

    def __init__(self, domain: str, settings: Reward = Reward()):
        self.domain, self.settings = domain, settings
        self._verdicts = _batch_verdicts(domain, settings)
        self._rm = None
        if domain == "ifeval" and settings.if_rm_bonus:
            self._rm = rlhf.RLHFReward(RewardModelClient(settings.reward_model_url))

    def score(self, groups: list[PromptGroup]) -> list[PromptGroup]:
        """Fill ``rewards_G`` and ``reward_details_G`` of every group (in place; also returned)."""
        responses, labels = [], []
        for i, group in enumerate(groups):
            if len(group.response_text_G) != group.group_size:
                raise ValueError(f"groups[{i}]: {len(group.response_text_G)} response texts for "
                                 f"{group.group_size} samples; detokenise before scoring")
            responses += group.response_text_G
            labels += [group.label] * group.group_size
        scores, details = self._verdicts(responses, labels) if responses else ([], [])
        start = 0
        for group in groups:
            end = start + group.group_size
            group.rewards_G = [float(s) for s in scores[start:end]]
            group.reward_details_G = details[start:end]
            start = end
        if self._rm is not None:
            self._add_rm_bonus(groups)
        return groups

    def _add_rm_bonus(self, groups: list[PromptGroup]) -> None:
        """§4.4.2, thinking models: R_IF + sigmoid(group-normalised RM score) where R_IF = 1. Only groups with a
        passing sample ask the reward model; the others stay all 0."""
        todo = [g for g in groups if any(r == 1.0 for r in g.rewards_G)]
        if not todo:
            return
        responses = [text for g in todo for text in g.response_text_G]
        labels = [{"prompt": g.label["prompt"]} for g in todo for _ in range(g.group_size)]
        rm_scores = self._rm.batch(responses, labels)
        start = 0
        for group in todo:
            end = start + group.group_size
            group.rewards_G = if_reward_with_rm(group.rewards_G, rm_scores[start:end])
            start = end


class MixedScorer:
    """Several domains' :class:`Scorer` behind one ``score``: each group is judged by the verifier of its prompt's
    domain (``Prompt.domain``) — a GRPO stage that mixes domains in one run (``Stage.extra_data``)."""

    def __init__(self, domains: Sequence[str], settings: Reward = Reward()):
        self.settings = settings
        self.scorers = {domain: Scorer(domain, settings) for domain in domains}

    def score(self, groups: list[PromptGroup]) -> list[PromptGroup]:
        """Fill every group's rewards (in place; also returned), one batched call per domain."""
        by_domain: dict[str, list[PromptGroup]] = defaultdict(list)
        for group in groups:
            by_domain[group.prompt.domain].append(group)
        for domain, some in by_domain.items():
            if domain not in self.scorers:
                raise ValueError(f"a prompt of domain {domain!r} in a stage scoring {sorted(self.scorers)}")
            self.scorers[domain].score(some)
        return groups


def stage_scorer(domains: Sequence[str], settings: Reward = Reward()) -> Scorer | MixedScorer:
    """What a GRPO stage scores with: its one domain's :class:`Scorer`, or a :class:`MixedScorer` over several."""
    return Scorer(domains[0], settings) if len(domains) == 1 else MixedScorer(domains, settings)


class ScoreAsFinished:
    """Rewards computed while the batch is still generating: the engine hands each group over as soon as its
    samples are done (``RolloutEngine.generate(on_group=...)``) and a thread pool scores it, so slow verifiers —
    code sandboxes, a reward or judge server — overlap with generation instead of following it. This is the
    asynchronous reward computation of the paper's code RL (§4.6.2: 1172 s → 416 s of verification per batch in
    verl); ``Reward.score_while_generating`` turns it off (then every group is scored after generation).

    Scores are the verifiers' own, so they do not depend on when a group was scored. Threads: enough groups at
    once that the verifier's own parallelism (``Reward.workers``, each group's samples side by side) stays
    about the same as when scoring the whole batch together.

        with ScoreAsFinished(scorer, enabled, group_size) as scoring:
            groups = engine.generate(prompts, G, on_group=scoring.on_group)
            scoring.finish(groups)   # waits for the groups in flight, scores any not yet scored
    """

    def __init__(self, scorer: Scorer | MixedScorer, enabled: bool, group_size: int):
        self.scorer = scorer
        threads = max(1, (scorer.settings.workers or num_cores()) // max(group_size, 1))
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="score") if enabled else None
        self._in_flight: dict[int, Future] = {}

    @property
    def on_group(self) -> Callable[[int, PromptGroup], None] | None:
        """The engine's callback; None when scoring waits for the whole batch."""
        return self._submit if self._pool else None

    def _submit(self, index: int, group: PromptGroup) -> None:
        self._in_flight[index] = self._pool.submit(self.scorer.score, [group])

    def finish(self, groups: list[PromptGroup]) -> list[PromptGroup]:
        """Every group scored (in place; also returned): waits for those in flight — re-raising what their scoring
        raised, e.g. ``RewardServerError`` — and scores the rest in one batch."""
        for future in self._in_flight.values():
            future.result()
        rest = [g for i, g in enumerate(groups) if i not in self._in_flight]
        if rest:
            self.scorer.score(rest)
        return groups

    def __enter__(self) -> "ScoreAsFinished":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool:  # after an error elsewhere: drop what has not started, let what runs end
            self._pool.shutdown(wait=True, cancel_futures=True)


def penalize_code_switching(groups: list[PromptGroup], setting: str, rule: str = "auto",
                            script: str = "latin") -> int:
    """The stage's ``Reward.code_switch_penalty`` applied to a gathered batch: each domain's groups together
    with that domain's penalty and rule (``auto``: the paper's per-stage values and rules, which a mixed-domain
    batch keeps per domain; ``script`` is ``Reward.code_switch_script``). Returns how many samples were
    flagged."""
    by_domain: dict[str, list[PromptGroup]] = defaultdict(list)
    for group in groups:
        by_domain[group.prompt.domain].append(group)
    return sum(apply_code_switch_penalty(some, resolve_code_switch_penalty(domain, setting),
                                         resolve_code_switch_rule(domain, rule), script)
               for domain, some in by_domain.items())


def code_switch_flags(groups: list[PromptGroup], rule: str = "prompt_language", script: str = "latin") -> list[bool]:
    """Whether each sample of ``groups`` (in order) is code-switched under ``rule``: its group's prompt
    (``Prompt.user_text``) is read once for the scripts its replies may use (:func:`language.reply_scripts`)."""
    flags: list[bool] = []
    for group in groups:
        scripts = language.reply_scripts(group.prompt.user_text, rule, script)
        flags += [scripts is not None and language.is_code_switched(text, scripts) for text in group.response_text_G]
    return flags


def apply_code_switch_penalty(groups: list[PromptGroup], penalty: language.CodeSwitchPenalty,
                              rule: str = "prompt_language", script: str = "latin") -> int:
    """Replace the reward of every code-switched sample of the whole batch (under ``rule``, :func:`code_switch_flags`)
    by ``penalty`` (in place); returns how many were flagged. Run on the gathered batch: ``batch_min_minus_10``
    takes the minimum over it."""
    flags = code_switch_flags(groups, rule, script)
    if penalty is None or not any(flags):
        return sum(flags)
    rewards = language.apply_code_switch_penalty([r for g in groups for r in g.rewards_G], flags, penalty)
    start = 0
    for group in groups:
        group.rewards_G = rewards[start:start + group.group_size]
        start += group.group_size
    return sum(flags)


def reward_metrics(groups: list[PromptGroup]) -> dict[str, float]:
    """Batch metrics from the verdicts: ``answer_found`` rate (math), ``if_pass/<instruction id>`` pass rates
    (ifeval: the per-instruction report of §4.4), ``swe/<outcome>`` shares (which branch of Eq. 2, §4.7) and, in
    a mixed-domain batch, ``reward_mean/<domain>`` and ``prompts/<domain>``."""
    found: list[bool] = []
    outcomes: list[str] = []
    passed: dict[str, list[bool]] = defaultdict(list)
    for group in groups:
        for details in group.reward_details_G:
            if "answer_found" in details:
                found.append(details["answer_found"])
            for iid, ok in details.get("instructions", {}).items():
                passed[iid].append(ok)
            if "outcome" in details:
                outcomes.append(details["outcome"])
    out = {f"if_pass/{iid}": sum(v) / len(v) for iid, v in sorted(passed.items())}
    domains = sorted({g.prompt.domain for g in groups})
    if len(domains) > 1:  # a mixed-domain batch: how each domain fares (and how much of the batch it is)
        for domain in domains:
            rewards = [r for g in groups if g.prompt.domain == domain for r in g.rewards_G]
            out[f"reward_mean/{domain}"] = sum(rewards) / len(rewards)
            out[f"prompts/{domain}"] = sum(g.prompt.domain == domain for g in groups)
    out.update({f"swe/{o}": outcomes.count(o) / len(outcomes) for o in sorted(set(outcomes))})
    if found:
        out["answer_found"] = sum(found) / len(found)
    return out


__all__ = ["Scorer", "MixedScorer", "stage_scorer", "ScoreAsFinished", "penalize_code_switching",
           "apply_code_switch_penalty", "code_switch_flags", "reward_metrics", "resolve_code_switch_penalty",
           "resolve_code_switch_rule", "AUTO_CODE_SWITCH_PENALTY", "AUTO_CODE_SWITCH_RULE"]
