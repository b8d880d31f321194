"""Validation of a whole :class:`~.schema.Cascade`: the values that types cannot express (ranges,
stage hand-offs, the engine, the gate; one stage's own sections are stage_checks.py's). Every
failure is one :class:`~.schema.ConfigError` line naming the field."""
from __future__ import annotations

import math
import re
import typing
from dataclasses import fields, is_dataclass
from typing import Any, Literal, Optional

from .derived import engine_dtype, samples_on_policy, stage_domains, teacher_sources
from .gate import Gate
from .schema import STAGE_KINDS, Cascade, ConfigError, Model, Parallel, Stage, literal_values
from .stage_checks import (at_least, validate_data, validate_grpo, validate_length,
                           validate_reward_model)

TRANSFORMER_IMPLS = literal_values(Model, "transformer_impl")
FP8_RECIPES = literal_values(Model, "fp8")
RECOMPUTE = literal_values(Parallel, "recompute")
MAX_COLLECTIVE_TIMEOUT_MINUTES = 7 * 24 * 60
"""A week: longer than any rollout, and far below what ``datetime.timedelta`` (the process groups'
timeout) holds."""


def type_problem(value: Any, tp: Any) -> Optional[str]:
    """What ``value`` should have been for the annotation ``tp`` (the schema's: bool, int, float,
    str, Literal, Optional, tuple[X, ...] and sections), or None if it fits. Floats must be finite:
    a NaN temperature or learning rate passes every ``<``/``>`` range check and poisons the run."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        return None if isinstance(value, str) and value in choices else f"one of {list(choices)}"
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        if value is None or type_problem(value, inner) is None:
            return None
        return f"None or {_describe(inner)}"
    if origin is tuple:
        item = typing.get_args(tp)[0]
        ok = isinstance(value, tuple) and all(type_problem(v, item) is None for v in value)
        return None if ok else f"a tuple of {_describe(item)}"
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a number"
        return None if math.isfinite(value) else "a finite number"
    if tp is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if isinstance(tp, type):
        return None if isinstance(value, tp) else _describe(tp)
    return None


def _describe(tp: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def check_types(obj: Any, where: str = "") -> None:
    """Every field of the config tree ``obj`` has its annotated type (recipes are Python, so nothing
    else guarantees it); ConfigError naming the first field that does not."""
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value, name = getattr(obj, f.name), f"{where}.{f.name}".lstrip(".")
        problem = type_problem(value, hints[f.name])
        if problem:
            raise ConfigError(f"{name}: expected {problem}, got {type(value).__name__} "
                              f"{value!r:.80}")
        if is_dataclass(value):
            check_types(value, name)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if is_dataclass(item):
                    label = item.name or i if isinstance(item, Stage) else i
                    check_types(item, f"{name}.{label}")


def validate(cfg: Cascade, world_size: Optional[int] = None) -> Cascade:
    """Check values that types cannot express, and the types (:func:`check_types`); raise
    ConfigError with the offending field."""
    if not isinstance(cfg, Cascade):
        raise ConfigError("config: expected a nemo_cascade.config.Cascade, got "
                          f"{type(cfg).__name__}")
    try:
        _validate_values(cfg, world_size)
    except TypeError:  # a comparison met a value of the wrong type: name its field
        check_types(cfg)
        raise
    check_types(cfg)  # what no comparison touched: a NaN, a string in a flag
    return cfg


def _validate_values(cfg: Cascade, world_size: Optional[int]) -> None:
    p = cfg.parallel
    validate_parallel_settings(cfg.model, p)
    if world_size is not None and world_size != p.tp * p.pp * p.cp * p.dp:
        # cp named only when it is used
        sizes = ("tp", "pp", "cp", "dp") if p.cp > 1 else ("tp", "pp", "dp")
        raise ConfigError(f"parallel: {' × '.join(sizes)} = "
                          f"{'×'.join(str(getattr(p, n)) for n in sizes)} must equal the world "
                          f"size {world_size}")
    if bool(cfg.model.hf_path) == bool(cfg.model.build):
        raise ConfigError("model: set exactly one of model.hf_path (an HF folder) and model.build "
                          "(a tiny shape)")
    if not cfg.stages:
        raise ConfigError("stages: a cascade needs at least one stage")
    _check_name(cfg.name, "name", dots=True)
    for i in range(len(cfg.stages)):
        _validate_stage(cfg, i)
    _validate_engine(cfg)
    _validate_gate(cfg.gate, cfg.stages)
    at_least("keep_checkpoints", cfg.keep_checkpoints, 1)
    at_least("checkpoint_every_minutes", cfg.checkpoint_every_minutes, 0, "0 = by steps only")
    at_least("rollout_checkpoint_seconds", cfg.rollout_checkpoint_seconds, 0,
             "0 = every group as it finishes")
    at_least("stop_margin_seconds", cfg.stop_margin_seconds, 0, "seconds before the job's end")


def _validate_stage(cfg: Cascade, i: int) -> None:
    """Stage ``i``: its name and kind, its own sections (stage_checks.py), and what it asks of the
    cascade around it (hand-off, thinking modes, teachers, the parallel layout)."""
    s, p, names = cfg.stages[i], cfg.parallel, [stage.name for stage in cfg.stages]
    if s.name:
        _check_name(s.name, f"stages.{i}.name", dots=False)
    if not s.name or names.count(s.name) > 1:
        raise ConfigError(f"stages.{s.name or i}.name: every stage needs a unique non-empty "
                          f"name, got {names!r:.200}")
    where = f"stages.{s.name}"
    if s.kind not in STAGE_KINDS:
        raise ConfigError(f"{where}.kind: unknown stage kind {s.kind!r:.80}; expected one of "
                          f"{list(STAGE_KINDS)}")
    _validate_handoff(cfg, i, where)
    validate_length(s, where)
    validate_data(s, where)
    if s.mode == "half" and cfg.chat_style == "chatml":
        raise ConfigError(f"{where}.mode: 'half' alternates thinking modes (§4.3.2); "
                          "chat_style=chatml has none")
    if s.mode == "half" and not samples_on_policy(s):
        raise ConfigError(f"{where}.mode: 'half' splits GRPO batches (§4.3.2); a {s.kind} "
                          "stage needs think or no_think")
    if samples_on_policy(s):
        validate_grpo(s, p, where)
    if s.kind == "distill":
        _validate_distill(cfg, i, where)
    elif s.distill.teachers:
        raise ConfigError(f"{where}.distill.teachers: only a distill stage has teachers; "
                          f"this is a {s.kind} stage (set kind=distill, or leave it empty)")
    if s.kind == "reward_model":
        validate_reward_model(s, p, where)
    if p.cp > 1 and not samples_on_policy(s):
        # SFT rows are packed (per-example attention masks) and the RM reads each row's last
        # token: both need the whole sequence on one rank; the actor splits sequences over CP
        # ranks only for GRPO batches.
        raise ConfigError(f"{where}.kind: parallel.cp={p.cp} splits every sequence over ranks, "
                          f"which the actor supports for grpo stages only, not {s.kind} (set "
                          "parallel.cp=1)")
    at_least(f"{where}.actor.lr", s.actor.lr, 0)
    at_least(f"{where}.actor.lr_decay_steps", s.actor.lr_decay_steps, 0,
             "0 = the stage's steps")


def _validate_distill(cfg: Cascade, i: int, where: str) -> None:
    """One teacher per domain of the stage's prompts, each from a source that can exist when the
    stage starts: ``best`` / ``base``, an earlier policy stage, or a folder (checked then)."""
    s = cfg.stages[i]
    d, domains = s.distill, stage_domains(s)
    teachers = teacher_sources(s)
    for item in d.teachers:
        domain, sep, source = item.partition("=")
        if not sep or not source or domain not in domains:
            raise ConfigError(f"{where}.distill.teachers: {item!r:.80} is not DOMAIN=SOURCE for a "
                              f"domain of the stage's prompts {list(domains)}")
    missing = [x for x in domains if x not in teachers]
    if missing or len(teachers) != len(d.teachers):
        raise ConfigError(f"{where}.distill.teachers: expected exactly one DOMAIN=SOURCE for each "
                          f"of {list(domains)}, got {list(d.teachers)}")
    earlier = [e.name for e in cfg.stages[:i] if e.kind != "reward_model"]
    for domain, source in teachers.items():
        named = source not in ("best", "base") and "/" not in source
        if named and source not in earlier:
            raise ConfigError(f"{where}.distill.teachers: {domain}={source}: expected best, base, "
                              f"an earlier policy stage {earlier} or a folder path")
        if source == "best" and not cfg.gate.suites:
            raise ConfigError(f"{where}.distill.teachers: {domain}=best picks the gate row that "
                              f"scored highest on the domain's suites; the gate has no suites")
    at_least(f"{where}.distill.reward_weight", d.reward_weight, 0, "0 = pure distillation")
    if not 0 < d.ratio_low <= 1 <= d.ratio_high:
        raise ConfigError(f"{where}.distill: expected 0 < ratio_low <= 1 <= ratio_high, got "
                          f"[{d.ratio_low}, {d.ratio_high}]")


_NAME_CHARS = re.compile(r"[\w.-]+")
MAX_NAME_CHARS = 128


def _check_name(name: str, where: str, dots: bool) -> None:
    """The run's and each stage's name is one directory name of the run
    (``runs/<name>/stages/<k>-<name>``): letters, digits, ``_`` and ``-`` (and ``.`` in the run's
    name, not alone or first); a stage's name is also a key of ``stages.NAME.field=value``
    overrides, which split at dots."""
    ok = (0 < len(name) <= MAX_NAME_CHARS and _NAME_CHARS.fullmatch(name) is not None
          and not name.startswith(".")
          and (dots or "." not in name))
    if not ok:
        allowed = "letters, digits, '_', '-'" + (" and '.' (not first)" if dots else "")
        raise ConfigError(f"{where}: expected 1-{MAX_NAME_CHARS} characters of {allowed} (it names "
                          f"a directory), got {name!r:.80}")


def _validate_engine(cfg: Cascade) -> None:
    """One rollout engine serves every stage (built from the first GRPO stage's rollout): its layout
    must be the same in all of them, and its TP groups must tile the world."""
    p = cfg.parallel
    grpo = [s for s in cfg.stages if samples_on_policy(s)]
    for s in grpo:
        t = s.rollout.tensor_parallel_size
        if t < 1 or (p.tp * p.pp * p.cp * p.dp) % t:
            raise ConfigError(f"stages.{s.name}.rollout.tensor_parallel_size: expected a divisor "
                              f"of the world size {p.tp * p.pp * p.cp * p.dp} (parallel tp × pp × "
                              f"cp × dp), got {t}")
        if t != grpo[0].rollout.tensor_parallel_size:
            raise ConfigError(f"stages.{s.name}.rollout.tensor_parallel_size: {t} differs from "
                              f"stage {grpo[0].name}'s {grpo[0].rollout.tensor_parallel_size}; one "
                              "engine serves every stage")
        if engine_dtype(cfg.model, s.rollout) != engine_dtype(cfg.model, grpo[0].rollout):
            raise ConfigError(f"stages.{s.name}.rollout.dtype: {s.rollout.dtype} differs from "
                              f"stage {grpo[0].name}'s {grpo[0].rollout.dtype} (model.dtype "
                              f"{cfg.model.dtype}); one engine serves every stage")
        if s.rollout.compile != grpo[0].rollout.compile:
            raise ConfigError(f"stages.{s.name}.rollout.compile: {s.rollout.compile} differs from "
                              f"stage {grpo[0].name}'s {grpo[0].rollout.compile}; one engine "
                              "serves every stage")


def validate_parallel_settings(m: Model, p: Parallel) -> None:
    """The layout and precision rules that hold on any machine (actor/precision.py adds the
    machine's: CUDA, TE, compute capability). One ConfigError line naming the field."""
    for name in ("tp", "pp", "cp", "dp", "micro_batch_size"):
        if getattr(p, name) < 1:
            raise ConfigError(f"parallel.{name}: expected an integer >= 1, got {getattr(p, name)}")
    if p.sequence_parallel and p.tp == 1:
        raise ConfigError("parallel.sequence_parallel: needs parallel.tp > 1 (it shards the "
                          "sequence over the tensor-parallel ranks), got tp=1")
    if p.overlap_param_gather and not p.distributed_optimizer:
        raise ConfigError("parallel.overlap_param_gather: needs "
                          "parallel.distributed_optimizer=true (only the distributed optimizer "
                          "all-gathers parameters after its step)")
    if p.overlap_param_gather and not p.overlap_grad_reduce:
        raise ConfigError("parallel.overlap_param_gather: needs parallel.overlap_grad_reduce=true "
                          "(as in Megatron-LM, which asserts the same)")
    if not 0 < p.collective_timeout_minutes <= MAX_COLLECTIVE_TIMEOUT_MINUTES:  # also refuses NaN
        raise ConfigError(f"parallel.collective_timeout_minutes: expected minutes in (0, "
                          f"{MAX_COLLECTIVE_TIMEOUT_MINUTES}], got "
                          f"{p.collective_timeout_minutes!r:.80}")
    if not (0 <= p.stall_minutes < p.collective_timeout_minutes):  # also refuses NaN
        raise ConfigError(f"parallel.stall_minutes: expected minutes in [0, "
                          f"parallel.collective_timeout_minutes = "
                          f"{p.collective_timeout_minutes:g}) "
                          f"(the collective's timeout would end a stalled run first, naming "
                          f"nothing; 0 = no watchdog), got {p.stall_minutes!r:.80}")
    if p.recompute not in RECOMPUTE:
        raise ConfigError(f"parallel.recompute: expected one of {list(RECOMPUTE)}, got "
                          f"{p.recompute!r:.80}")
    if m.transformer_impl not in TRANSFORMER_IMPLS:
        raise ConfigError(f"model.transformer_impl: expected one of {list(TRANSFORMER_IMPLS)}, "
                          f"got {m.transformer_impl!r:.80}")
    if m.fp8 not in FP8_RECIPES:
        raise ConfigError(f"model.fp8: expected one of {list(FP8_RECIPES)}, got {m.fp8!r:.80}")
    if m.fp8 != "none" and m.transformer_impl == "local":
        raise ConfigError(f"model.fp8={m.fp8}: FP8 runs through Transformer Engine layers; "
                          "model.transformer_impl='local' cannot use it (set auto or "
                          "transformer_engine)")
    if p.cp > 1 and m.transformer_impl == "local":
        raise ConfigError(f"parallel.cp={p.cp}: context parallelism runs inside Transformer "
                          "Engine's attention; model.transformer_impl='local' cannot use it (set "
                          "auto or transformer_engine)")


def _validate_handoff(cfg: Cascade, i: int, where: str) -> None:
    """What a stage takes from earlier stages: its checkpoint cadence, the data-position hand-over,
    a served reward model, an SFT mixture."""
    s = cfg.stages[i]
    at_least(f"{where}.checkpoint_every", s.checkpoint_every, 0, "0 = no mid-stage checkpoints")
    if s.extra_data and s.kind == "reward_model":
        raise ConfigError(f"{where}.extra_data: sft and grpo stages mix sources; a reward_model "
                          "stage reads data")
    for j, d in enumerate(s.extra_data):
        if not d.source:
            raise ConfigError(f"{where}.extra_data.{j}.source: expected a file path, "
                              "synthetic:NAME or benchmark:NAME")
    if s.boundary.data == "continue":
        before = [p for p in cfg.stages[:i] if p.kind == s.kind]
        if not before or (before[-1].data, before[-1].extra_data) != (s.data, s.extra_data):
            raise ConfigError(f"{where}.boundary.data: 'continue' needs an earlier {s.kind} stage "
                              "with the same data")
    if s.boundary.optimizer == "carry":
        prev = cfg.stages[i - 1] if i else None
        if prev is None or prev.kind == "reward_model" or s.kind == "reward_model":
            raise ConfigError(f"{where}.boundary.optimizer: 'carry' needs a policy stage right "
                              "before this policy stage (a reward model trains its own optimizer)")
        # the scheduler sets lr and wd
        fixed = ("adam_beta1", "adam_beta2", "adam_eps", "clip_grad")
        changed = [f for f in fixed if getattr(prev.actor, f) != getattr(s.actor, f)]
        if changed:
            raise ConfigError(f"{where}.boundary.optimizer: 'carry' keeps the optimizer, so "
                              f"actor.{changed[0]} must equal stage {prev.name}'s")
    rm_stage = s.reward.reward_model_stage
    earlier = [p.name for p in cfg.stages[:i] if p.kind == "reward_model"]
    if rm_stage and rm_stage not in earlier:
        raise ConfigError(f"{where}.reward.reward_model_stage: {rm_stage!r:.80} is not an earlier "
                          f"reward_model stage; those are {earlier}")


def _validate_gate(g: Gate, stages) -> None:
    if min(g.samples, g.max_tokens, g.limit) < 0:
        raise ConfigError("gate: samples, max_tokens and limit must be >= 0 (0 = the suite's "
                          "default)")
    at_least("gate.chunk_items", g.chunk_items, 1)
    if g.reward_model_url and any(s.kind == "reward_model" for s in stages):
        raise ConfigError("gate.reward_model_url: the cascade trains a reward_model stage, whose "
                          "RM scores the gate's pairwise suites; leave gate.reward_model_url empty")
    if g.min_drop < 0 or g.sigmas < 0:
        raise ConfigError("gate: min_drop and sigmas must be >= 0")
    if not 0 < g.alpha < 1:
        raise ConfigError(f"gate.alpha: {g.alpha} is not a significance level in (0, 1)")
    if g.on_regression == "repair":
        _validate_repair(g, stages)
    for name, what, kind, least in (("tolerance", "DROP", float, 0), ("yarn", "FACTOR", float, 1),
                                    ("max_input_tokens", "TOKENS", int, 0)):
        for item in getattr(g, name):
            suite, sep, value = item.partition("=")
            try:
                ok = bool(sep) and suite in g.suites and kind(value) >= least
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(f"gate.{name}: expected SUITE={what} with SUITE one of "
                                  f"gate.suites {list(g.suites)} and {what} a {kind.__name__} >= "
                                  f"{least}, got {item!r:.80}")


def _validate_repair(g: Gate, stages) -> None:
    """``on_regression = repair`` distils from the gate's rows after a GRPO stage it flags: it needs
    suites (the rows) and a GRPO stage with a row before it to repair."""
    if not g.suites:
        raise ConfigError("gate.on_regression: 'repair' pulls flagged domains back toward their "
                          "best gate rows; the gate has no suites (set gate.suites)")
    rows = [i + 1 for i, s in enumerate(stages) if s.kind != "reward_model" and s.evaluate]
    first_row = 0 if g.evaluate_base else min(rows, default=len(stages))
    if not any(s.kind == "grpo" and i >= first_row for i, s in enumerate(stages)):
        raise ConfigError("gate.on_regression: 'repair' repairs a GRPO stage from the gate rows "
                          "before it; no GRPO stage here has an earlier row to repair from")
    at_least("gate.repair.steps", g.repair.steps, 1)
    at_least("gate.repair.lr", g.repair.lr, 0, "0 = the flagged stage's actor.lr")
    at_least("gate.repair.reward_weight", g.repair.reward_weight, 0, "0 = pure distillation")


