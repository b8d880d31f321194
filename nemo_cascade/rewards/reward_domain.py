"""What a reward domain is: one :class:`RewardDomain` object holding everything the project does per
domain.

A domain (``math``, ``ifeval``, ``code``, ``swe``, ``rlhf``; docs/rewards.md) used to be spread over
a dozen name switches; now each domain module ends with ``DOMAIN = RewardDomain(...)`` and
:mod:`.domains` collects them in ``DOMAINS``. Every caller reads the object: the loader (row
adapter, prompt phrasing), data loading (label checks), a GRPO stage (batched verdicts, code-switch
defaults, batch metrics) and evaluation (settings, records, suite metrics, report notes). Adding a
domain is one module defining its ``DOMAIN`` (docs/rewards.md "Adding a reward domain").

This module imports no domain, so the domain modules can import it without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..config import Data, Reward
from ..types import PromptGroup

RewardFn = Callable[[str, Any], float]
"""``(response, label) -> reward`` with default settings, for one-off use."""
BatchVerdicts = Callable[[Sequence[str], Sequence[Any]], tuple[list[float], list[dict]]]
"""(responses, labels) → (one reward per response, one details dict per response)."""
RowAdapter = Callable[..., tuple[Optional[list[dict]], Any]]
"""``(row, where)`` — or ``(row, where, budget)`` when ``RewardDomain.prompt_budget`` — → ``(prompt
messages, label)``; ``data.schemas.SchemaError`` (one line naming ``where``) for a row that fits no
schema."""
LabelCheck = Callable[[Any], None]
"""A label → None, or a one-line ValueError naming what was expected."""


def without_details(batch_fn: Callable[[Sequence[str],
                                        Sequence[Any]], list[float]]) -> BatchVerdicts:
    """A batch verifier that returns rewards only, as :data:`BatchVerdicts` with empty details."""
    return lambda responses, labels: (batch_fn(responses, labels), [{} for _ in responses])


def shares(values: Sequence[str], prefix: str) -> dict[str, float]:
    """``{prefix/value: share of values}``, sorted by value (outcome shares of a batch or a
    suite)."""
    return {f"{prefix}/{v}": values.count(v) / len(values) for v in sorted(set(values))}


@dataclass(frozen=True)
class RewardDomain:
    """One reward domain: its data, its verdicts and how they are reported. Only ``name``,
    ``adapt``, ``validate_label`` and ``verdicts`` are required; every other field's default is
    "nothing special"."""

    name: str
    """The key in ``rewards.DOMAINS``, ``Stage.domain``, ``Data.domain``, ``Prompt.domain`` and
    ``Suite.domain``; listed in ``config.REWARD_DOMAINS`` too (``rewards.register`` adds it), so
    configs validate without importing the verifiers."""
    adapt: RowAdapter
    """A row of the domain's RL data (the released datasets' fields) → ``(messages, label)``
    (``data.schemas.adapt`` calls it; a row with a ``label`` field never reaches it)."""
    validate_label: LabelCheck
    """The label check of data loading and evaluation suites (docs/rewards.md: one label shape per
    domain)."""
    verdicts: Callable[[Reward], BatchVerdicts]
    """A stage's reward settings → its batched verifier (built once per :class:`~.scoring.Scorer`; a
    missing sandbox or an unreachable server raises here, never on model output)."""
    reward: Optional[RewardFn] = None
    """The verifier with default settings (``rewards.REWARDS``); None when it needs a server
    (rlhf)."""
    training_validator: Optional[Callable[[Data, str], LabelCheck]] = None
    """``(Data, config path) → label check`` for a source a stage *trains* on, when it is stricter
    than ``validate_label`` (IF-RL: IFBench test ids only with ``Data.allow_eval_instructions``,
    §4.4.2)."""
    code_switch_penalty: Any = None
    """``Reward.code_switch_penalty="auto"``: the paper's penalty for this stage (a float,
    ``"batch_min_minus_10"`` or None = no penalty)."""
    code_switch_rule: str = "prompt_language"
    """``Reward.code_switch_rule="auto"``: the paper's rule (``language.CODE_SWITCH_RULES``)."""
    prompt_budget: bool = False
    """The adapter builds the prompt for the stage's prompt limit and takes the loader's
    ``PromptBudget`` as a third argument (SWE §4.7.1); it may return ``(None, None)`` for a row that
    fits no prompt (dropped)."""
    phrase: Optional[Callable[[list[dict], Data], list[dict]]] = None
    """Loaded prompt messages → the messages trained on (math: the suites' request for a boxed
    answer)."""
    group_bonus: Optional[Callable[[Reward], Optional[Callable[[list[PromptGroup]], None]]]] = None
    """Settings → None or a function adjusting scored groups' rewards in place, per group (IF-RL's
    reward-model bonus, §4.4.2)."""
    sandbox: bool = False
    """Scoring runs model output as programs under ``Reward.sandbox`` (preflight and doctor check
    bubblewrap before a stage or gate suite of the domain runs)."""
    servers: tuple[str, ...] = ()
    """``Reward`` fields naming served models the domain scores with (probed before the stages
    run)."""
    batch_metrics: Optional[Callable[[list[dict]], dict[str, float]]] = None
    """The verdict details of the domain's samples in a batch → metrics logged every step."""
    eval_options: tuple[str, ...] = ()
    """``EvalSettings`` fields that reach this domain's ``Reward`` when a suite is evaluated (an
    empty one keeps the suite's value); the others keep the suite's."""
    eval_requires: tuple[str, str] = ("", "")
    """``(EvalSettings field, what to pass)``: a suite of this domain cannot run without that field
    set."""
    check_eval_reward: Optional[LabelCheck] = None
    """Resolved eval ``Reward`` → None, or a ValueError naming the option (before any model
    loads)."""
    record_label: bool = False
    """Evaluation records keep each item's label (the reference answer, the instructions)."""
    eval_record: Optional[Callable[[dict, Any, list[str]], None]] = None
    """``(record, label, responses)``: add the domain's per-sample findings to an evaluation
    record."""
    eval_metrics: Optional[Callable[[list[dict]], dict]] = None
    """A suite's records → the domain's metrics beside the headline numbers."""
    report_notes: Optional[Callable[[dict], list[str]]] = None
    """A suite's metrics → notes for the eval.md table."""


__all__ = ["RewardDomain", "RewardFn", "BatchVerdicts", "RowAdapter", "LabelCheck",
           "without_details", "shares"]
