"""Running suites: prompts through the project's vLLM rollout engine, responses through the training
rewards.

Two entry points:

- :func:`evaluate` — the API the cascade's forgetting gate calls: an engine that already serves the
  weights to test (the colocated training engine after a stage), a tokenizer, suite names,
  :class:`EvalSettings`. Under torchrun every rank takes a contiguous share of each suite's items,
  generates and scores it with its own engine, and all ranks receive every record
  (``ranks.gather_shares``).
- :func:`evaluate_checkpoint` — a checkpoint on disk (an HF folder or a run's stage directory):
  builds the engine (and, for the RLHF suite, optionally starts the reward-model server), runs,
  writes ``eval.json``, ``eval.md`` and ``eval.svg`` (:mod:`.eval_output`). ``nemo-cascade eval``
  calls it.

Generation is ``rollout.vllm.RolloutEngine.generate`` (the training path: same sampler, same
processed logprobs, same detokenisation) with the paper's evaluation decoding (App. B: T=0.6, top-p
0.95, K samples per item); scoring is ``rewards.Scorer(domain, Reward)`` — the verifiers training
uses, batched. Nothing here re-implements a verifier: IFEval's loose and instruction-level numbers
come from ``rewards.ifeval.per_instruction``, the RLHF win rate from scoring the reference answers
with the same ``rewards.rlhf.RLHFReward``.

Seeds: a chunk of items is one ``generate`` call whose request seeds derive from
``EvalSettings.seed``, the suite name and the chunk's first item (``RolloutEngine`` adds the rank
and the prompt's place in the call), so a run is reproducible for a fixed ``chunk_items`` and world
size. A prompt that does not fit the engine's context (``len(prompt) >= max_model_len``) or exceeds
the suite's input limit (App. B: SWE-bench 32K / 64K) is not generated: its K samples score 0 and
are counted as ``too_long`` in the results, never dropped silently.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .. import config, types
from ..data.chat import STYLES, render
from . import estimators
from ..runtime.files import file_sha256
from .suites import EvalError, Item, Suite, get_suite, load_items
from ..rewards import Scorer
from ..rewards.domains import get_domain
from ..rewards.math import GRADERS
from ..rewards.remote import RewardModelClient
from ..rewards.rlhf import RLHFReward
from ..runtime.stop_request import GenerationStopped

log = logging.getLogger(__name__)

TEMPLATES = (*STYLES, "model")
"""Prompt templates: the project's chat templates (``data.chat.render``, the one training uses;
cascade1 adds `` /think`` / `` /no_think`` to each user turn, §3.1.2; chatml is plain ChatML) or the
model's own ``chat_template`` ("model")."""


@dataclass(frozen=True)
class EvalSettings:
    """How to run the suites; ``None`` = the suite's default (``suites.SUITES``)."""

    samples: Optional[int] = None
    """K, samples per item."""
    max_tokens: Optional[int] = None
    """Response budget per sample (tokens); the engine's context may cut it shorter."""
    temperature: float = 0.6
    """Paper App. B."""
    top_p: float = 0.95
    """Paper App. B."""
    top_k: int = -1
    mode: Optional[str] = None
    """``think`` / ``no_think`` for every suite (default: per suite, the unified model's modes of
    T2: IFEval non-thinking, the rest thinking). Thinking-only models: ``think`` (App. B, T1/T8)."""
    yarn: Mapping[str, float] = field(default_factory=dict)
    """Suite name → YaRN factor replacing the suite's (App. B: 2; the 14B's SWE-bench 3; 1 =
    none)."""
    max_input_tokens: Mapping[str, int] = field(default_factory=dict)
    """Suite name → longest prompt generated, replacing the suite's (App. B: SWE-bench 32K, the
    14B's 64K; 0 = only the engine's context)."""
    template: str = "cascade1"
    limit: int = 0
    """Evaluate only the first N items of each suite (0 = all)."""
    seed: int = 0
    data: Mapping[str, str] = field(default_factory=dict)
    """Suite name → data file replacing the suite's default."""
    reward_model_url: str = ""
    """The served Bradley–Terry reward model for the RLHF suite (rewards/remote.py)."""
    judge_url: str = ""
    """SWE: a served judge for Eq. 2's partial-credit grade; empty = lexical grade. The suite's
    headline metric (equal to the golden change) does not depend on it. ArenaHard: the pairwise
    judge (required)."""
    answer_pattern: Optional[str] = None
    """Math suites: where the final answer is (``config.Reward.answer_pattern``): None = the last
    ``\\boxed{}`` as in training (§4.5); ``answer_is`` ("the answer is 42"), ``gsm8k`` ("#### 42")
    or a regex for models not trained to box their answer."""
    math_grader: str = "math_verify"
    """Math suites: ``math_verify`` or the AceMath-style ``rule`` grader
    (``config.Reward.math_grader``, §4.5)."""
    sandbox: str = "bwrap"
    """Code suites: run programs under bubblewrap (``unsafe``: unsandboxed, trusted code only)."""
    workers: int = 0
    """Verifier processes / sandbox runs in flight (0 = the available cores)."""
    chunk_items: int = 64
    """Items per ``generate`` call (one progress-bar step each)."""
    progress: bool = True


@dataclass(frozen=True)
class Decoding:
    """The resolved decoding of one suite run, as written to eval.json."""

    temperature: float
    top_p: float
    top_k: int
    samples: int
    max_tokens: int
    mode: str
    template: str
    seed: int
    max_model_len: int = 0
    """The engine's context (prompt + response tokens); 0 until an engine is known."""
    yarn_factor: float = 1.0
    """The suite's YaRN factor (App. B): the engine that evaluates it should serve the model with
    it."""
    max_input_tokens: int = 0
    """Longer prompts are not generated (``too_long``); 0 = only the engine's context limits
    them."""
    engine_yarn_factor: float = 0.0
    """The YaRN factor the engine served the model with (1: none); 0 until an engine is known. It
    differs from ``yarn_factor`` only on an engine that was not built for the suite (the cascade's
    colocated one)."""


@dataclass
class Prepared:
    """A suite's items rendered and tokenised for one model."""

    suite: Suite
    decoding: Decoding
    items: list[Item]
    prompts: list[types.Prompt]
    data_path: Path


@dataclass
class SuiteResult:
    """One suite's outcome: ``metrics`` (headline numbers), ``records`` (one per item), the config
    behind it."""

    suite: str
    domain: str
    metric: str
    decoding: dict
    data: dict
    metrics: dict
    records: list[dict]
    seconds: dict
    reward: dict = field(default_factory=dict)
    """The verifier settings (``config.Reward``) the samples were scored with."""

    @property
    def score(self) -> float:
        """The headline number: avg@K of the suite's per-sample values."""
        return self.metrics[f"avg@{self.decoding['samples']}"]

    def to_json(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------- preparing

def decoding_for(suite: Suite, settings: EvalSettings) -> Decoding:
    samples = suite.samples if settings.samples is None else settings.samples
    max_tokens = suite.max_tokens if settings.max_tokens is None else settings.max_tokens
    mode = settings.mode or suite.mode
    yarn = float(settings.yarn.get(suite.name, suite.yarn_factor))
    max_input = settings.max_input_tokens.get(suite.name, suite.max_input_tokens)
    if not yarn >= 1:
        raise EvalError(f"--yarn {suite.name}={yarn:g}: expected a YaRN factor >= 1 (1 = none)")
    if not isinstance(max_input, int) or isinstance(max_input, bool) or max_input < 0:
        raise EvalError(f"--max-input-tokens {suite.name}={max_input}: expected an integer >= 0 (0 "
                        "= no limit)")
    if samples < 1:
        raise EvalError(f"--samples: expected an integer >= 1, got {samples}")
    if max_tokens < 1:
        raise EvalError(f"--max-tokens: expected an integer >= 1, got {max_tokens}")
    if mode not in ("think", "no_think"):
        raise EvalError(f"--mode: expected think or no_think, got {mode!r}")
    if settings.template not in TEMPLATES:
        raise EvalError(f"--template: expected one of {list(TEMPLATES)}, got {settings.template!r}")
    if settings.temperature <= 0 or not 0 < settings.top_p <= 1:
        raise EvalError("decoding: expected temperature > 0 and top_p in (0, 1], got "
                        f"{settings.temperature}, {settings.top_p}")
    return Decoding(settings.temperature, settings.top_p, settings.top_k, samples, max_tokens, mode,
                    settings.template, settings.seed, yarn_factor=yarn, max_input_tokens=max_input)


def check_settings(suites: Sequence[str], settings: EvalSettings) -> None:
    """Every user mistake in ``settings`` for these suites, as an EvalError, before any model or
    data loads."""
    for name in suites:
        suite = get_suite(name)
        decoding_for(suite, settings)
        reward = _reward_settings(suite, settings)
        check = _domain(suite).check_eval_reward
        if check is not None:
            try:
                check(reward)
            except ValueError as e:
                raise EvalError(str(e)) from None
    for option, overrides in (("--yarn", settings.yarn),
                              ("--max-input-tokens", settings.max_input_tokens)):
        for name in overrides:
            try:
                get_suite(name)
            except EvalError as e:
                raise EvalError(f"{option} {name}=...: {e}") from None

    if settings.math_grader not in GRADERS:
        raise EvalError(f"--math-grader: expected one of {list(GRADERS)}, got "
                        f"{settings.math_grader!r}")
    if settings.limit < 0 or settings.chunk_items < 1:
        raise EvalError(f"limit must be >= 0 and chunk_items >= 1, got {settings.limit}, "
                        f"{settings.chunk_items}")


def render_prompt(messages: Sequence[dict], decoding: Decoding, tokenizer) -> list[int]:
    """Token ids of the templated conversation with the generation prompt (no BOS/EOS added on top:
    the template holds every control token, as in ``data.loader``)."""
    if decoding.template == "model":
        text = tokenizer.apply_chat_template(list(messages), tokenize=False,
                                             add_generation_prompt=True)
    else:
        text = render(messages, decoding.mode, decoding.template)
    return list(tokenizer.encode(text, add_special_tokens=False))


def prepare(name: str, settings: EvalSettings, tokenizer) -> Prepared:
    """Load, render and tokenise one suite's items."""
    suite = get_suite(name)
    path = settings.data.get(name)
    check_settings([name], settings)
    decoding = decoding_for(suite, settings)
    items, data_path = load_items(suite, Path(path) if path else None, settings.limit)
    prompts = [types.Prompt(prompt_tokens=render_prompt(item.messages, decoding, tokenizer),
                            domain=suite.domain,
                            label=item.label, mode=decoding.mode, uid=item.uid) for item in items]
    return Prepared(suite, decoding, items, prompts, data_path)


# ------------------------------------------------------------------------------------------ running

def _domain(suite: Suite):
    """The suite's :class:`~nemo_cascade.rewards.RewardDomain` (suites are checked against the
    registry in tests, so a suite naming no domain is a programming error)."""
    return get_domain(suite.domain)


def _reward_settings(suite: Suite, settings: EvalSettings) -> config.Reward:
    """The suite's verifier settings with the run's: sandbox and workers for every suite, and the
    options its domain reads (``RewardDomain.eval_options``; an empty one keeps the suite's). Server
    URLs reach only the domains that use them."""
    domain = _domain(suite)
    required, what = domain.eval_requires
    if required and not getattr(settings, required):
        raise EvalError(f"suite {suite.name}: needs {what}")
    options = {name: getattr(settings, name)
               or getattr(suite.reward, name) for name in domain.eval_options}
    return replace(suite.reward, sandbox=settings.sandbox, workers=settings.workers,
                   **{"reward_model_url": "", "judge_url": "", **options})


def _chunk_key(suite: str, start: int) -> int:
    return int.from_bytes(hashlib.sha256(f"eval/{suite}/{start}".encode()).digest()[:4],
                          "little") >> 1


def fits_input(prompt_tokens: int, decoding: Decoding, max_model_len: int) -> bool:
    """Whether a prompt is generated: shorter than the engine's context and no longer than the
    suite's input limit (App. B: SWE-bench 32K / 64K); otherwise its samples score 0 as
    ``too_long``."""
    limit = decoding.max_input_tokens
    return prompt_tokens < max_model_len and (not limit or prompt_tokens <= limit)


class GateStopped(Exception):
    """A stop became due during a gate row (``run_suite``'s ``should_stop``); its finished chunks
    are saved."""


def _chunk(engine, prep: Prepared, chunk: list[int], sampling: config.Rollout, keep, should_stop
           ) -> tuple[dict[int, types.PromptGroup], bool]:
    """One chunk's groups by place (``keep``'s saved ones and the rest generated, each kept as it
    finishes), and whether a stop ended its generation."""
    prompts = [prep.prompts[i] for i in chunk]
    saved = keep.saved(chunk[0], 0, prompts, prep.decoding.samples) if keep and chunk else {}
    todo = [i for i in range(len(prompts)) if i not in saved]
    on_group = (lambda j, group: keep.keep(todo[j], group)) if keep and chunk else None
    try:
        out = engine.generate([prompts[i] for i in todo], prep.decoding.samples, sampling,
                              step=_chunk_key(prep.suite.name, chunk[0]) if chunk else 0,
                              positions=todo,
                              on_group=on_group, should_stop=should_stop)
    except GenerationStopped:
        if keep:
            keep.flush()
        return {}, True
    return {**saved, **dict(zip(todo, out))}, False


def _generate_and_score(engine, prep: Prepared, indices: list[int], scorer, settings: EvalSettings,
                        timings: dict, keep=None, should_stop=None) -> dict[int, types.PromptGroup]:
    """Groups for the items at ``indices`` that fit the engine (generated in chunks, scored per
    chunk). With ``keep`` (a ``StepRollouts`` of the suite, row_progress.py) each group is kept as
    it finishes and a chunk's groups saved by an earlier job are read instead of generated;
    ``should_stop()`` ends generation between engine steps and chunks, every rank raising
    :class:`GateStopped` together."""
    from ..runtime import console, ranks

    d = prep.decoding
    sampling = config.Rollout(temperature=d.temperature, top_p=d.top_p, top_k=d.top_k,
                              max_prompt_tokens=engine.max_model_len,
                              max_response_tokens=d.max_tokens, seed=d.seed)
    fits = [i for i in indices if fits_input(len(prep.prompts[i].prompt_tokens), d,
                                             engine.max_model_len)]
    groups: dict[int, types.PromptGroup] = {}
    bar = console.progress(len(indices), f"{prep.suite.name} K={d.samples}", "item",
                           disable=not (settings.progress and ranks.is_main()))
    bar.update(len(indices) - len(fits))  # too long: nothing to generate
    step = max(1, settings.chunk_items)
    chunks = [fits[start:start + step] for start in range(0, len(fits), step)]
    # Every rank makes as many calls as the rank with the most chunks: with engine TP, generate is
    # collective over the ranks sharing an engine, so a rank with fewer (or saved) chunks takes part
    # with nothing of its own.
    for k in range(ranks.most_over_ranks(len(chunks))):
        if should_stop is not None and any(ranks.gather_objects(should_stop())):
            bar.close()
            raise GateStopped(f"suite {prep.suite.name}, after {len(groups)} of its {len(fits)} "
                              "items here")
        chunk = chunks[k] if k < len(chunks) else []
        t0 = time.perf_counter()
        done, stopped = _chunk(engine, prep, chunk, sampling, keep, should_stop)
        t1 = time.perf_counter()
        # a stop inside some rank's chunk: the finished items are kept
        if any(ranks.gather_objects(stopped)):
            bar.close()
            raise GateStopped(f"suite {prep.suite.name}, in the chunk at item "
                              f"{chunk[0] if chunk else '-'}")
        unscored = [g for g in done.values() if not g.rewards_G]
        if unscored:
            scorer.score(unscored)
        if keep and chunk:
            keep.end_round(done)
        timings["generate"] += t1 - t0
        timings["score"] += time.perf_counter() - t1
        groups.update((chunk[i], g) for i, g in done.items())
        bar.update(len(chunk))
    bar.close()
    return groups


def _record(prep: Prepared, i: int, group: Optional[types.PromptGroup]) -> dict:
    item, k = prep.items[i], prep.decoding.samples
    rec: dict[str, Any] = {"uid": item.uid, "prompt": item.messages[-1]["content"],
                           "prompt_tokens": len(prep.prompts[i].prompt_tokens)}
    domain = _domain(prep.suite)
    if domain.record_label:
        rec["label"] = item.label
    if group is None:
        rec.update(too_long=True, responses=[""] * k, scores=[None] * k, values=[0.0] * k,
                   correct=[False] * k,
                   finish_reasons=["prompt_too_long"] * k, response_tokens=[0] * k)
        return rec
    rec.update(too_long=False, responses=group.response_text_G, scores=group.rewards_G,
               finish_reasons=list(group.finish_reason_G),
               response_tokens=[len(t) for t in group.response_tokens_G_T])
    rec["details"] = group.reward_details_G
    # a sample is correct iff it earns the full reward (1; SWE: equal to golden)
    if not prep.suite.pairwise:
        rec["correct"] = [s >= 1.0 for s in group.rewards_G]
        rec["values"] = [float(c) for c in rec["correct"]]
    if domain.eval_record is not None:  # e.g. ifeval: per-instruction strict and loose verdicts
        domain.eval_record(rec, item.label, group.response_text_G)
    return rec


def _add_pairwise(prep: Prepared, indices: list[int], records: list[dict],
                  settings: EvalSettings) -> None:
    """RLHF proxy: score each item's reference answer once with the same reward model and client,
    then a win / tie / loss per sample (:func:`metrics.pairwise_outcome`)."""

    todo = [(rec, prep.items[i]) for i, rec in zip(indices, records) if not rec["too_long"]]
    reward = RLHFReward(RewardModelClient(settings.reward_model_url))
    ref_scores = (reward.batch([item.reference for _, item in todo],
                               [item.label for _, item in todo]) if todo else [])
    for (rec, _), ref in zip(todo, ref_scores):
        rec["reference_score"] = ref
        rec["values"] = [estimators.pairwise_outcome(s, ref) for s in rec["scores"]]
        rec["correct"] = [v == 1.0 for v in rec["values"]]
        rec["bt_win_prob"] = [estimators.bt_preference(s, ref) for s in rec["scores"]]


def run_suite(engine, prep: Prepared, settings: EvalSettings, progress=None,
              should_stop=None) -> SuiteResult:
    """Generate, score and summarise one prepared suite with ``engine`` (this rank's share; all
    ranks get every record). ``progress`` (a ``row_progress.RowProgress``) keeps and reuses finished
    chunks; ``should_stop`` ends the suite between chunks with :class:`GateStopped`."""
    from ..runtime import ranks

    reward_settings = _reward_settings(prep.suite, settings)
    scorer = Scorer(prep.suite.domain, reward_settings)
    timings = {"generate": 0.0, "score": 0.0}
    t0 = time.perf_counter()
    decoding = asdict(replace(prep.decoding, max_model_len=engine.max_model_len,
                              engine_yarn_factor=float(engine.yarn_factor)))
    data = {"path": str(prep.data_path), "sha256": file_sha256(prep.data_path),
            "items": len(prep.items),
            "limit": settings.limit}
    if prep.suite.data_version:  # the benchmark's release / subset / date window
        data["version"] = prep.suite.data_version
    keep = None
    if progress is not None:
        keep = progress.chunks(prep.suite.name, {
            "decoding": decoding, "data": data, "reward": asdict(reward_settings),
            "chunk_items": settings.chunk_items})
    mine = ranks.my_share(list(range(len(prep.items))))
    groups = _generate_and_score(engine, prep, mine, scorer, settings, timings, keep, should_stop)
    records = [_record(prep, i, groups.get(i)) for i in mine]
    if prep.suite.pairwise:
        t1 = time.perf_counter()
        _add_pairwise(prep, mine, records, settings)
        timings["score"] += time.perf_counter() - t1
    records = ranks.gather_shares(records)
    timings["total"] = time.perf_counter() - t0
    return SuiteResult(prep.suite.name, prep.suite.domain, prep.suite.metric, decoding, data,
                       suite_metrics(prep.suite, records), records,
                       {k: round(v, 3) for k, v in timings.items()},
                       asdict(reward_settings))


def suite_metrics(suite: Suite, records: list[dict]) -> dict:
    """Headline numbers (:func:`metrics.summarize`) plus what the domain adds: IFEval/IFBench
    prompt- and instruction-level strict/loose accuracy and per-instruction pass rates, SWE Eq. 2
    outcome shares (``RewardDomain.eval_metrics``), RLHF Bradley–Terry preference; and for every
    suite the mean reward, truncation and length statistics."""
    out = estimators.summarize([r["values"] for r in records], [r["correct"] for r in records])
    out["too_long"] = sum(r["too_long"] for r in records)
    if suite.pairwise:
        out["win_rate"] = out[f"avg@{len(records[0]['values'])}"]
    domain_metrics = _domain(suite).eval_metrics
    if domain_metrics is not None:
        out.update(domain_metrics(records))
    samples = [(r, j) for r in records if not r["too_long"] for j in range(len(r["scores"]))]
    if not samples:  # every prompt too long: nothing was generated, so there is nothing to average
        out.update(mean_reward=None, truncated=None, mean_response_tokens=None)
        return out
    n = len(samples)
    out["mean_reward"] = sum(r["scores"][j] for r, j in samples) / n
    out["truncated"] = sum(r["finish_reasons"][j] == "length" for r, j in samples) / n
    out["mean_response_tokens"] = sum(r["response_tokens"][j] for r, j in samples) / n
    if suite.pairwise:
        out["bt_win_prob"] = sum(r["bt_win_prob"][j] for r, j in samples) / n
        scored = [r["reference_score"] for r in records if not r["too_long"]]
        out["mean_reference_score"] = sum(scored) / max(len(scored), 1)
    return out


def evaluate(engine, tokenizer, suites: Sequence[str], settings: EvalSettings = EvalSettings()
             ) -> dict[str, SuiteResult]:
    """Run ``suites`` with an engine that already holds the weights to test (the forgetting-gate
    API)."""
    return {name: run_suite(engine, prepare(name, settings, tokenizer),
                            settings) for name in suites}


def context_needed(prepared: Sequence[Prepared]) -> int:
    """Tokens of context the suites need: the longest prompt each generates (within its input limit,
    App. B) plus its response budget, the largest over suites (0 for none)."""
    def longest(prep: Prepared) -> int:
        limit = prep.decoding.max_input_tokens
        return max((n for n in (len(p.prompt_tokens) for p in prep.prompts) if not limit
                    or n <= limit), default=0)

    return max((longest(prep) + prep.decoding.max_tokens for prep in prepared), default=0)


__all__ = ["EvalSettings", "Decoding", "Prepared", "SuiteResult", "TEMPLATES", "prepare",
           "run_suite", "evaluate",
           "GateStopped",
           "suite_metrics", "decoding_for", "render_prompt", "check_settings", "fits_input",
           "context_needed"]
