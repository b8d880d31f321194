"""From a stage's reward settings to rewards on rollout groups.

:class:`Scorer` is what a GRPO stage calls: it builds the domain's batched verifier from
``config.Reward`` once, then ``scorer.score(groups)`` fills every group's ``rewards_G`` (and
``reward_details_G``, the verdicts behind each reward) with one batched call, so slow verifiers run
in parallel (paper §4.6: asynchronous verification). Each rank scores its own share of the prompts;
what needs the whole rollout batch — the code-switch penalty, whose RLHF form is "batch minimum −
10" (§4.3.2), and the batch's reward metrics — runs after the shares are gathered
(``scorer.penalize_code_switching``, :func:`reward_metrics`).
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Callable, Sequence

from ..config import Reward
from ..runtime.stop_request import GenerationStopped
from ..types import PromptGroup
from . import language
from .domains import DOMAINS, get_domain
from .reward_domain import BatchVerdicts
from .workers import num_cores


def resolve_code_switch_penalty(domain: str, setting: str) -> language.CodeSwitchPenalty:
    """The penalty a ``Reward.code_switch_penalty`` string stands for in ``domain`` (``auto``: the
    domain's ``RewardDomain.code_switch_penalty``, the paper's per-stage value: §4.3.2, §4.5, §4.6 /
    T19)."""
    if setting == "auto":
        return DOMAINS[domain].code_switch_penalty if domain in DOMAINS else None
    if setting == "none":
        return None
    if setting == language.BATCH_MIN_MINUS_10:
        return setting
    return float(setting)


def resolve_code_switch_rule(domain: str, setting: str) -> str:
    """The rule (:data:`language.CODE_SWITCH_RULES`) a ``Reward.code_switch_rule`` string stands for
    in ``domain`` (``auto``: the domain's ``RewardDomain.code_switch_rule``; the prompt-language
    rule for one it does not know)."""
    if setting != "auto":
        return setting
    return DOMAINS[domain].code_switch_rule if domain in DOMAINS else "prompt_language"


def _batch_verdicts(domain: str, settings: Reward) -> BatchVerdicts:
    try:
        spec = get_domain(domain)
    except ValueError:
        raise ValueError(f"no verifier for reward domain {domain!r}") from None
    return spec.verdicts(settings)


class _RoundPenalty:
    """What both scorers do to a whole round once every rank's groups are gathered."""

    settings: Reward

    def penalize_code_switching(self, groups: list[PromptGroup]) -> int:
        """The stage's code-switch penalty (``Reward.code_switch_*``) on a gathered round, in
        place: batch-level, as its RLHF form is "batch minimum − 10" (§4.3.2). Returns how many
        samples were flagged (:func:`penalize_code_switching`)."""
        rw = self.settings
        return penalize_code_switching(groups, rw.code_switch_penalty, rw.code_switch_rule,
                                       rw.code_switch_script)


class Scorer(_RoundPenalty):
    """One stage's rewards: ``Scorer(domain, settings).score(groups)``. Setup errors (a missing
    sandbox, an unreachable reward server) raise; model output never does."""

    def __init__(self, domain: str, settings: Reward = Reward()):
        self.domain, self.settings = domain, settings
        self._verdicts = _batch_verdicts(domain, settings)
        bonus = DOMAINS[domain].group_bonus
        self._bonus = bonus(settings) if bonus else None

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
        if self._bonus is not None:
            self._bonus(groups)
        return groups


class MixedScorer(_RoundPenalty):
    """Several domains' :class:`Scorer` behind one ``score``: each group is judged by the verifier
    of its prompt's domain (``Prompt.domain``) — a GRPO stage that mixes domains in one run
    (``Stage.extra_data``)."""

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
                raise ValueError(f"a prompt of domain {domain!r} in a stage scoring "
                                 f"{sorted(self.scorers)}")
            self.scorers[domain].score(some)
        return groups


def stage_scorer(domains: Sequence[str], settings: Reward = Reward()) -> Scorer | MixedScorer:
    """What a GRPO stage scores with: its one domain's :class:`Scorer`, or a :class:`MixedScorer`
    over several."""
    return Scorer(domains[0], settings) if len(domains) == 1 else MixedScorer(domains, settings)


STOP_LOOK_SECONDS = 1.0
"""How often :meth:`ScoreAsFinished.finish` asks whether to stop while it waits for scores."""


class ScoreAsFinished:
    """Rewards computed while the batch is still generating: the engine hands each group over as
    soon as its samples are done (``RolloutEngine.generate(on_group=...)``) and a thread pool scores
    it, so slow verifiers — code sandboxes, a reward or judge server — overlap with generation
    instead of following it. This is the asynchronous reward computation of the paper's code RL
    (§4.6.2: 1172 s → 416 s of verification per batch in verl); ``Reward.score_while_generating``
    turns it off (then every group is scored after generation).

    Scores are the verifiers' own, so they do not depend on when a group was scored. Threads: enough
    groups at once that the verifier's own parallelism (``Reward.workers``, each group's samples
    side by side) stays about the same as when scoring the whole batch together.

        with ScoreAsFinished(scorer, enabled, group_size) as scoring:
            groups = engine.generate(prompts, G, on_group=scoring.on_group)
            scoring.finish(groups)   # waits for the groups in flight, scores any not yet scored
    """

    def __init__(self, scorer: Scorer | MixedScorer, enabled: bool, group_size: int,
                 keep: Callable[[int, PromptGroup], None] | None = None):
        self.scorer, self._keep = scorer, keep
        threads = max(1, (scorer.settings.workers or num_cores()) // max(group_size, 1))
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="score") if enabled else None
        self._in_flight: dict[int, Future] = {}

    @property
    def on_group(self) -> Callable[[int, PromptGroup], None] | None:
        """The engine's callback; None when scoring waits for the whole batch and no group is
        kept."""
        return self._submit if self._pool or self._keep else None

    def _submit(self, index: int, group: PromptGroup) -> None:
        """``keep(index, group)`` (rollout checkpoints, runtime/step_rollouts.py) once the group is
        scored — or at once, unscored, when scoring waits for the batch."""
        if self._pool is None:
            self._keep(index, group)
            return
        self._in_flight[index] = future = self._pool.submit(self.scorer.score, [group])
        if self._keep is not None:
            future.add_done_callback(lambda f: not f.cancelled() and f.exception() is None
                                     and self._keep(index, group))

    def finish(self, groups: list[PromptGroup],
               should_stop: Callable[[], bool] | None = None) -> list[PromptGroup]:
        """Every group scored (in place; also returned): waits for those in flight — re-raising what
        their scoring raised, e.g. ``RewardServerError`` — and scores the rest in one batch. While
        it waits it asks ``should_stop()`` every second: once it says yes, ``GenerationStopped``
        (the groups scored by then went to ``keep``)."""
        pending = set(self._in_flight.values())
        while pending:
            done, pending = wait(pending, timeout=STOP_LOOK_SECONDS, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()
            if pending and should_stop is not None and should_stop():
                raise GenerationStopped("scoring stopped on a stop request")
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
    """The stage's ``Reward.code_switch_penalty`` applied to a gathered batch: each domain's groups
    together with that domain's penalty and rule (``auto``: the paper's per-stage values and rules,
    which a mixed-domain batch keeps per domain; ``script`` is ``Reward.code_switch_script``).
    Returns how many samples were flagged."""
    by_domain: dict[str, list[PromptGroup]] = defaultdict(list)
    for group in groups:
        by_domain[group.prompt.domain].append(group)
    return sum(apply_code_switch_penalty(some, resolve_code_switch_penalty(domain, setting),
                                         resolve_code_switch_rule(domain, rule), script)
               for domain, some in by_domain.items())


def code_switch_flags(groups: list[PromptGroup], rule: str = "prompt_language",
                      script: str = "latin") -> list[bool]:
    """Whether each sample of ``groups`` (in order) is code-switched under ``rule``: its group's
    prompt (``Prompt.user_text``) is read once for the scripts its replies may use
    (:func:`language.reply_scripts`)."""
    flags: list[bool] = []
    for group in groups:
        scripts = language.reply_scripts(group.prompt.user_text, rule, script)
        flags += [scripts is not None
                  and language.is_code_switched(text, scripts) for text in group.response_text_G]
    return flags


def apply_code_switch_penalty(groups: list[PromptGroup], penalty: language.CodeSwitchPenalty,
                              rule: str = "prompt_language", script: str = "latin") -> int:
    """Replace the reward of every code-switched sample of the whole batch (under ``rule``,
    :func:`code_switch_flags`) by ``penalty`` (in place); returns how many were flagged. Run on the
    gathered batch: ``batch_min_minus_10`` takes the minimum over it."""
    flags = code_switch_flags(groups, rule, script)
    if penalty is None or not any(flags):
        return sum(flags)
    rewards = language.apply_code_switch_penalty([r for g in groups for r in g.rewards_G], flags,
                                                 penalty)
    start = 0
    for group in groups:
        group.rewards_G = rewards[start:start + group.group_size]
        start += group.group_size
    return sum(flags)


def reward_metrics(groups: list[PromptGroup]) -> dict[str, float]:
    """Batch metrics from the verdicts: each domain's ``RewardDomain.batch_metrics`` over its
    samples' details (``answer_found`` rate for math, ``if_pass/<instruction id>`` pass rates for
    ifeval — the per-instruction report of §4.4 —, ``swe/<outcome>`` shares for swe: which branch of
    Eq. 2, §4.7) and, in a mixed-domain batch, ``reward_mean/<domain>`` and ``prompts/<domain>``."""
    out: dict[str, float] = {}
    domains = sorted({g.prompt.domain for g in groups})
    for domain in domains:
        some = [g for g in groups if g.prompt.domain == domain]
        metrics = DOMAINS[domain].batch_metrics if domain in DOMAINS else None
        if metrics is not None:
            out.update(metrics([d for g in some for d in g.reward_details_G]))
        # a mixed-domain batch: how each domain fares (and how much of the batch it is)
        if len(domains) > 1:
            rewards = [r for g in some for r in g.rewards_G]
            out[f"reward_mean/{domain}"] = sum(rewards) / len(rewards)
            out[f"prompts/{domain}"] = len(some)
    return out


__all__ = ["Scorer", "MixedScorer", "stage_scorer", "ScoreAsFinished", "penalize_code_switching",
           "apply_code_switch_penalty", "code_switch_flags", "reward_metrics",
           "resolve_code_switch_penalty",
           "resolve_code_switch_rule", "BatchVerdicts"]
