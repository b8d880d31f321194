"""The forgetting gate's settings (docs/cascade.md, "The forgetting gate"): which suites it scores
after every stage, how a regression is judged, and what it does then, the repair stage it may
insert included. A section of :class:`~.schema.Cascade`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Repair:
    """The distill stage the gate inserts after a GRPO stage whose row it flags
    (``gate.on_regression = repair``): the flagged domains learn from their best earlier rows, the
    stage's own domains from the stage's export, on prompts of all of them (docs/distill.md)."""
    steps: int = 10
    """Optimizer steps of the inserted stage (Nemotron-Cascade 2's MOPD: 40–50 at its scale)."""
    lr: float = 0.0
    """Its learning rate; 0 = the flagged stage's ``actor.lr``."""
    reward_weight: float = 0.0
    """``Distill.reward_weight`` of the inserted stage; 0 = pure distillation."""


@dataclass(frozen=True)
class Gate:
    """The forgetting gate (§4.1.1, T2/T4–T8): the same eval suites after every stage, a stage ×
    benchmark matrix, and a per-benchmark regression tolerance (evaluate/stage_scores.py)."""
    suites: tuple[str, ...] = ()
    """Suites of nemo_cascade.evaluate.suites; empty = no evaluation between stages."""
    samples: int = 0
    """K per item; 0 = the suite's default (paper App. B)."""
    max_tokens: int = 0
    """Response budget; 0 = the suite's default, cut to the engine's context."""
    limit: int = 0
    """First N items of each suite; 0 = all."""
    temperature: float = 0.6
    """App. B."""
    top_p: float = 0.95
    """App. B."""
    evaluate_base: bool = True
    """Also evaluate the starting model, so the first stage has a row to be compared with."""
    min_drop: float = 0.02
    """The smallest drop below a suite's best earlier score that counts as a regression, under
    either rule; the paper's largest per-stage drops are 2–4 points (Tables 2, 4–8)."""
    rule: Literal["paired", "unpaired"] = "paired"
    """paired: the drop on the items both rows scored, significant at ``alpha`` by exact McNemar
    (one 0/1 sample per item) or a paired bootstrap (avg@k, k > 1); unpaired: a drop beyond
    ``sigmas`` standard errors of the two scores (docs/evaluation.md, "The gate's rule")."""
    alpha: float = 0.05
    """Significance level of the paired rule."""
    sigmas: float = 2.0
    """Standard errors a drop must exceed under the unpaired rule."""
    tolerance: tuple[str, ...] = ()
    """Per-benchmark ``SUITE=DROP`` overrides of min_drop, e.g. ``("aime25=0.05",)``."""
    on_regression: Literal["warn", "stop", "repair"] = "warn"
    """warn: log and record it in the manifest and report; stop: end the cascade after that stage;
    repair: after a GRPO stage, insert a distill stage that pulls the flagged domains back toward
    their best rows (``repair``; docs/distill.md, "Repair on demand")."""
    repair: Repair = field(default_factory=Repair)
    """The stage ``on_regression = repair`` inserts."""
    mode: Literal["suite", "think", "no_think"] = "suite"
    """Thinking mode of the suites: ``suite`` = each suite's own, the modes T2 reports for the
    unified model (IFEval non-thinking, the rest thinking); ``think`` = every suite in thinking
    mode, as the thinking-only models are evaluated (App. B; T1, T8)."""
    yarn: tuple[str, ...] = ()
    """Per-suite ``SUITE=FACTOR`` overrides of the suite's YaRN factor (App. B: 2 for every
    benchmark; the 14B's SWE-bench 3). ``nemo-cascade eval`` starts an engine per factor; the
    cascade's colocated engine serves the rope the actor trains with, and eval.json records the
    factor each suite got (docs/evaluation.md)."""
    max_input_tokens: tuple[str, ...] = ()
    """Per-suite ``SUITE=TOKENS`` overrides of the suite's longest generated prompt (App. B:
    SWE-bench 32K for the 8B, 64K for the 14B)."""
    reward_model_url: str = ""
    """A served reward model (a URL or ``file:URLFILE``) that scores the pairwise suites (``rlhf``)
    of a cascade that trains no reward_model stage, e.g. the 72B RM of §4.3 behind
    slurm/serve_model.sh; empty = those suites wait for the cascade's own RM."""
    judge_url: str = ""
    """A served chat model (a URL or ``file:URLFILE``) that judges the gate's ``arena-hard`` suite
    against its baseline answers (ArenaHard, T1–T2, App. B: the paper's judge is GPT-4-Turbo);
    required when the gate names that suite."""
    chunk_items: int = 64
    """Items of a suite generated and scored together. A row's results are kept chunk by chunk and
    a stop waits for at most one chunk's scoring; scores are reproducible for a fixed value (a seed
    per chunk)."""


__all__ = ["Gate", "Repair"]
