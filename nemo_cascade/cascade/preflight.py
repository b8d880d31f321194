"""Whole-cascade validation before anything trains: every check that needs files, run once for all
stages.

A cascade is hours to weeks of compute; a stage that finds out at its start that its data file is
missing, its reward server was never configured, or the sandbox cannot run is a wasted night.
:func:`check_cascade` runs in the launching process (``nemo-cascade run``) and again in the job
before the actor is built, and raises ``ConfigError`` with one line naming the field or file. It
also returns each stage's data fingerprint for the lineage manifest.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import zlib
from dataclasses import replace
from pathlib import Path
import re

from nemo_cascade import config
from nemo_cascade.convert.shape import load_config_json, DEFAULT_POSITIONS, read_hf_config
from nemo_cascade.data.tokenizer import tokenizer_digest
from nemo_cascade.runtime.files import file_sha256
from nemo_cascade.cascade.base_model import BUILDERS
from nemo_cascade.convert.hf_config import with_recipe_yarn
from nemo_cascade.convert.megatron_args import check_parallel
from nemo_cascade.data import generated
from nemo_cascade.data.generated import REGISTERED_BY, is_generated
from nemo_cascade.data.loader import DataError
from nemo_cascade.data.rows import read_jsonl
from nemo_cascade.data.schemas import RefusedRow
from nemo_cascade.evaluate.suites import EvalError, get_suite, load_items
from nemo_cascade.rewards import adapt_row, get_domain, sandbox, training_validator
from nemo_cascade.rewards.domains import DOMAINS
from nemo_cascade.rewards.endpoints import EndpointError, probe
from nemo_cascade.rewards.ifeval import EVALUATION_ONLY
from nemo_cascade.rewards.remote import JudgeClient, RewardModelClient
from nemo_cascade.rewards.serve import is_vllm_cpu
from nemo_cascade.rollout.engine_dtype import check_cpu_engine_dtype, cpu_actor_dtype_warning

log = logging.getLogger(__name__)

CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")
"""The ChatML control tokens every template of data.chat relies on; each must be one token of the
vocabulary."""


def data_fingerprint(data: config.Data, where: str) -> str:
    """sha256 of what a Data section reads: the file's bytes, or a synthetic / benchmark set's
    generated rows (generators are deterministic in split/size/seed, so the rows are the data).
    Missing files and unknown sets raise."""

    h = hashlib.sha256()
    if generated.is_generated(data.source):
        try:
            rows = generated.rows(data)
        except DataError as e:
            raise config.ConfigError(f"{where}.data.source: {e}") from None
        h.update(json.dumps(rows, sort_keys=True, default=str).encode())
        return h.hexdigest()
    path = Path(data.source)
    if not path.is_file():
        raise config.ConfigError(f"{where}.data.source: {path}: no such file")
    return file_sha256(path)


def check_model(cfg: config.Cascade) -> None:
    """The base model: a known tiny shape, or an HF folder whose shapes fit the parallel layout and
    vLLM."""

    if cfg.model.build:

        if not BUILDERS:  # a process that registered none: say who registers them, not "one of []"
            raise config.ConfigError(f"model.build: unknown shape {cfg.model.build!r}; no model "
                                     f"builders are registered in this process ({REGISTERED_BY})")
        if cfg.model.build not in BUILDERS:
            raise config.ConfigError(f"model.build: unknown shape {cfg.model.build!r}; expected "
                                     f"one of {sorted(BUILDERS)}")
    m = cfg.model
    if m.hf_path and m.made_by and not Path(m.hf_path, "config.json").is_file():
        raise config.ConfigError(
            f"model.hf_path: {m.hf_path} is not there, and it is no release: run {m.made_by} "
            f"(which trains it first), or set model.hf_path to your own checkpoint")
    if cfg.model.hf_path:
        shape = read_hf_config(cfg.model.hf_path)
        # the run trains and serves a view with YaRN (base_model.prepare_base_model)
        if cfg.model.yarn_factor:
            raw = load_config_json(Path(cfg.model.hf_path) / "config.json")
            longest = with_recipe_yarn(raw, cfg.model.yarn_factor)["max_position_embeddings"]
            shape = replace(shape, max_position_embeddings=longest)
        check_parallel(shape, cfg.parallel.tp, cfg.parallel.pp)
        if any(config.samples_on_policy(s) for s in cfg.stages) and shape.head_dim < 32:
            raise config.ConfigError(f"{cfg.model.hf_path}/config.json: head_dim {shape.head_dim} "
                                     "< 32, which vLLM's CPU attention rejects; use a model "
                                     "with head_dim >= 32")
        for s in cfg.stages:  # a training request is never cut short by the model's length
            if not config.samples_on_policy(s):
                continue
            need = s.rollout.max_prompt_tokens + config.longest_response(s)
            positions = shape.max_position_embeddings or DEFAULT_POSITIONS  # what the actor builds
            if need > positions:
                raise config.ConfigError(
                    f"stages.{s.name}.rollout: max_prompt_tokens + max_response_tokens = {need} "
                    f"exceeds the model's {positions} positions ({cfg.model.hf_path}/config.json "
                    "max_position_embeddings); shorten them, or set model.yarn_factor (App. B: "
                    "factor 2 over 32768 positions)")


def check_stage_needs(cfg: config.Cascade) -> None:
    """What stages need beyond data: a sandbox for code rewards, an RM for pairwise gate suites."""
    for s in cfg.stages:
        sandboxed = any(DOMAINS[d].sandbox for d in config.stage_domains(s))  # names validated
        if config.samples_on_policy(s) and sandboxed and s.reward.sandbox == "bwrap":
            try:  # a code stage must not find out after loading a model
                sandbox.check_available()
            except sandbox.SandboxUnavailable as e:
                raise config.ConfigError(f"stages.{s.name}.reward.sandbox: {e}") from None
    if cfg.gate.suites:

        for name in cfg.gate.suites:
            try:
                suite = get_suite(name)
                required, what = get_domain(suite.domain).eval_requires
                if required == "judge_url" and not cfg.gate.judge_url:  # arena-hard (the RM: below)
                    raise config.ConfigError(f"gate.suites: {name} needs {what.split(' (')[0]}: "
                                             f"set gate.judge_url")
                load_items(suite, limit=cfg.gate.limit)
            except EvalError as e:
                raise config.ConfigError(f"gate.suites: {e}") from None
            if (suite.pairwise and not cfg.gate.reward_model_url
                    and not any(s.kind == "reward_model" for s in cfg.stages)):
                raise config.ConfigError(
                    f"gate.suites: {name} is scored by a reward model, but the cascade has no "
                    f"reward_model stage and gate.reward_model_url is empty")


def check_instruction_taxonomy(cfg: config.Cascade) -> None:
    """IF-RL prompt files hold no IFBench *test* instruction id unless their source allows it
    (§4.4.2: IF-RL trains on IFEval and IFBench-Train; ``Data.allow_eval_instructions``). The loader
    refuses such a row when the stage starts; found here, it stops the cascade before its first
    stage rather than days later.

    A file none of whose bytes spell a test id is passed without parsing. Otherwise its rows are
    read as the loader reads them and the first refused one is named; rows that fit no schema are
    left to the loader, which counts them against ``Data.max_bad_rows`` when the stage starts.
    """

    spelled = re.compile("|".join(re.escape(i) for i in sorted(EVALUATION_ONLY)).encode())
    for s in cfg.stages:
        if not config.samples_on_policy(s):
            continue
        for j, (data, domain) in enumerate(config.prompt_sources(s)):
            path = Path(data.source)
            where = f"stages.{s.name}." + ("data" if j == 0 else f"extra_data.{j - 1}")
            if domain != "ifeval" or data.allow_eval_instructions or is_generated(data.source):
                continue
            if path.suffix != ".parquet":
                # unreadable: read_jsonl names it below
                with contextlib.suppress(OSError, EOFError, zlib.error):
                    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
                        if not spelled.search(f.read()):
                            continue
            validate = training_validator(domain, data, where)
            try:
                rows = read_jsonl(path, data.size, bad=[])
            except DataError as e:
                raise config.ConfigError(f"{where}.source: {e}") from None
            for line, row in rows:
                try:
                    validate(adapt_row(domain, row, f"{path}:{line}")[1])
                except RefusedRow as e:
                    raise config.ConfigError(f"{path}:{line}: {e}") from None
                except ValueError:
                    continue  # malformed: the loader's to count or refuse (Data.max_bad_rows)


SERVER_WAIT_S = 60.0
"""How long a configured server may take to answer ``/health`` at the start of a run: a server that
is up answers at once; a placeholder or dead URL should not cost more than a minute."""
URL_FILE_WAIT_S = 600.0
"""How long a ``file:`` URL's file may take to appear: the server job may still be loading its
model."""


def stages_to_run(cfg: config.Cascade, status: dict[str, str],
                  only_stage: str | None = None) -> list[config.Stage]:
    """The stages this run will train: ``only_stage`` (even when done: ``--retrain``), else every
    stage not done."""
    if only_stage:
        return [s for s in cfg.stages if s.name == only_stage]
    return [s for s in cfg.stages if status.get(s.name) != "done"]


def served_endpoints(stage: config.Stage) -> list[tuple[str, str]]:
    """``(Reward field, URL or file:PATH)`` of the served models a GRPO stage scores with."""
    rw = stage.reward
    if not config.samples_on_policy(stage):
        return []
    fields = {f for d in config.stage_domains(stage) for f in DOMAINS[d].servers}
    if rw.if_rm_bonus:  # IF-RL's reward-model bonus (§4.4.2)
        fields.add("reward_model_url")
    return [(f, getattr(rw, f)) for f in ("reward_model_url", "judge_url") if f in fields
            and getattr(rw, f)]


def check_endpoints(stages: list[config.Stage], *, wait: float | None = None,
                    file_wait: float | None = None,
                    poll: float = 2.0) -> dict[str, str]:
    """Every served model the stages score with answers ``/health`` (a ``file:`` URL's file waited
    for first), so that a placeholder or unreachable URL fails before the hours of the base
    evaluation and the stages before it, not after. Returns ``{URL or file:PATH: URL}``; ConfigError
    (one line naming the field) otherwise."""

    expect = {"reward_model_url": RewardModelClient.EXPECT, "judge_url": JudgeClient.EXPECT}
    reached: dict[str, str] = {}
    wait = SERVER_WAIT_S if wait is None else wait
    file_wait = URL_FILE_WAIT_S if file_wait is None else file_wait
    for s in stages:
        for field, spec in served_endpoints(s):
            if spec in reached:
                continue
            try:
                reached[spec] = probe(spec, expect[field], wait=wait, file_wait=file_wait,
                                      poll=poll)
            except (EndpointError, ValueError) as e:
                raise config.ConfigError(f"stages.{s.name}.reward.{field}: {e}") from None
    return reached


def check_tokenizer(tokenizer, model_dir: str | Path, finished_stage_dirs: list[Path]) -> None:
    """The tokenizer fits the model (every id has an embedding row, the chat tokens are single
    tokens), and a finished stage's exported checkpoint carries the same tokenizer as the base — a
    resumed cascade whose base was swapped would otherwise hand a stage weights trained on other
    token ids."""
    model_cfg = load_config_json(Path(model_dir) / "config.json")
    vocab = model_cfg.get("vocab_size") or model_cfg.get("text_config", {}).get("vocab_size")
    if vocab is not None and len(tokenizer) > vocab:
        raise config.ConfigError(f"{model_dir}: the tokenizer has {len(tokenizer)} tokens but the "
                                 f"model's vocab_size is {vocab}; expected a tokenizer no larger "
                                 "than the embedding")
    for token in CHAT_TOKENS:
        if len(tokenizer.encode(token, add_special_tokens=False)) != 1:
            raise config.ConfigError(f"{model_dir}: {token} is not a single token of the "
                                     "tokenizer; the chat template (ChatML, §3.1.2) needs it")
    base = tokenizer_digest(Path(model_dir))
    for stage_dir in finished_stage_dirs:
        theirs = tokenizer_digest(stage_dir / "hf")
        if base and theirs and theirs != base:
            raise config.ConfigError(f"{stage_dir / 'hf'}: its tokenizer differs from the base "
                                     f"model's ({model_dir}); expected the same tokenizer through "
                                     "the whole cascade")


def check_inputs_exist(cfg: config.Cascade) -> None:
    """Every stage's data files, all at once: one line naming each missing one and, when a later
    stage has a released checkpoint (``Stage.released_after``), the recipe that starts after the
    missing ones."""
    missing, last = [], -1
    for k, s in enumerate(cfg.stages):
        for j, d in enumerate((s.data, *s.extra_data)):
            if not is_generated(d.source) and not Path(d.source).is_file():
                field = "data" if j == 0 else f"extra_data.{j - 1}"
                missing.append(f"stages.{s.name}.{field}.source: {d.source}: no such file")
                last = k
    if not missing:
        return
    way = next((s for s in cfg.stages[last:] if s.released_after), None)
    hint = (f"stage {way.name} has a released checkpoint: `nemo-cascade run {way.released_after}` "
            "starts after it and needs none of these" if way
            else "docs/recipes.md (Data) says where each file comes from")
    count = f"{len(missing)} input files missing: " if len(missing) > 1 else ""
    raise config.ConfigError(f"{count}{', '.join(missing)}; {hint}")


def check_cascade(cfg: config.Cascade) -> dict[str, list[str]]:
    """Every file-level check of every stage; returns ``stage name → data fingerprints`` (data, then
    extra_data) for the manifest. Raises ConfigError (one line) on the first problem."""
    config.validate(cfg)
    check_model(cfg)
    check_inputs_exist(cfg)
    fingerprints = {}
    for s in cfg.stages:
        where = f"stages.{s.name}"
        fingerprints[s.name] = [data_fingerprint(d, where) for d in (s.data, *s.extra_data)]
    check_instruction_taxonomy(cfg)
    check_stage_needs(cfg)

    # bf16 sampling needs a CPU with bf16 instructions; bf16 training is only slow without them
    on_cpu = is_vllm_cpu()
    check_cpu_engine_dtype(cfg, on_cpu=on_cpu)
    slow_actor = cpu_actor_dtype_warning(cfg, on_cpu=on_cpu)
    if slow_actor:
        log.warning(slow_actor)
    return fingerprints


__all__ = ["check_cascade", "check_inputs_exist", "check_model",
           "check_stage_needs",
           "check_tokenizer", "data_fingerprint", "CHAT_TOKENS", "check_endpoints",
           "served_endpoints",
           "stages_to_run", "check_instruction_taxonomy"]
