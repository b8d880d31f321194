"""The cascade: stages in order, each starting from the previous stage's weights (paper §4.1).

Owns the run directory (``runs/<name>/``: resolved ``config.json``, ``manifest.json`` with per-stage status,
``stages/<k>-<name>/{metrics.jsonl, hf/}``), the one actor and the one rollout engine shared by all stages.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from nemo_cascade import config as C
from nemo_cascade import ranks
from nemo_cascade.data.loader import pad_id
from nemo_cascade.provenance import git_state, versions
from nemo_cascade.stage import StageContext, run_grpo, run_reward_model, run_sft

log = logging.getLogger(__name__)


def run_dir(cfg: C.Cascade) -> Path:
    return Path(cfg.run_root) / cfg.name


def stage_dir(cfg: C.Cascade, index: int) -> Path:
    return run_dir(cfg) / "stages" / f"{index}-{cfg.stages[index].name}"


def prepare_base_model(cfg: C.Cascade) -> str:
    """The HF folder the cascade starts from: the given one, or a tiny model built once into the run dir."""
    if cfg.model.hf_path:
        return cfg.model.hf_path
    from nemo_cascade.convert.tiny import BUILDERS

    if cfg.model.build not in BUILDERS:
        raise C.ConfigError(f"model.build: unknown shape {cfg.model.build!r}; expected one of {sorted(BUILDERS)}")
    out = run_dir(cfg) / "base_model"
    if ranks.is_main() and not (out / "config.json").is_file():
        tmp = out.with_name("base_model.tmp")
        BUILDERS[cfg.model.build](tmp, seed=cfg.seed)
        tmp.rename(out)
    ranks.barrier()
    return str(out)


class Manifest:
    """``manifest.json``: lineage (git SHA, versions, seed, base model) and the status of every stage.

    An existing manifest is read back, so a re-run knows which stages finished (and where their weights are).
    """

    def __init__(self, cfg: C.Cascade, base_model: str):
        self.path = run_dir(cfg) / "manifest.json"
        old = json.loads(self.path.read_text()) if self.path.is_file() else {}
        stages = {s.name: old.get("stages", {}).get(s.name, {"status": "pending"}) for s in cfg.stages}
        self.data = {"name": cfg.name, "git_sha": git_state().get("sha", ""), "versions": versions(), "seed": cfg.seed,
                     "base_model": base_model, "world_size": ranks.world()[1], "stages": stages}

    def done(self, stage: str) -> bool:
        return self.data["stages"][stage].get("status") == "done"

    def update(self, stage: str, **fields) -> None:
        self.data["stages"][stage].update(fields)
        if ranks.is_main():
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=2))
            os.replace(tmp, self.path)


def run_cascade(cfg: C.Cascade, only_stage: str | None = None) -> Path:
    """Run every stage (or one, by name) in order; returns the run directory."""
    from transformers import AutoTokenizer

    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.convert.export import export_hf
    from nemo_cascade.data.loader import load_prompts, load_sft_examples
    from nemo_cascade.metrics import MetricsLog
    from nemo_cascade.rewards import VALIDATORS

    out = run_dir(cfg)
    if ranks.is_main():
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(C.dumps(cfg))
    base = prepare_base_model(cfg)
    tokenizer = AutoTokenizer.from_pretrained(base)
    actor = MegatronActor(base, cfg.parallel, cfg.model.dtype, seed=cfg.seed)
    manifest = Manifest(cfg, base)
    engine, weights_from = None, base
    for k, stage in enumerate(cfg.stages):
        sdir = stage_dir(cfg, k)
        if (only_stage and stage.name != only_stage) or (not only_stage and manifest.done(stage.name)):
            if manifest.done(stage.name) and hands_on_policy(stage):  # the next stage starts from these weights
                weights_from = str(sdir / "hf")
            log.info("stage %s: %s", stage.name, "skipped (done)" if manifest.done(stage.name) else "not selected")
            continue
        if stage.kind == "reward_model":
            actor.optimizer = actor.scheduler = None  # free the policy's Adam state; the next policy stage
            _reward_model_stage(cfg, stage, sdir, weights_from, tokenizer, manifest)  # configures a fresh one
            continue
        if weights_from != actor.hf_path:  # hand-off: stage k starts from the last policy stage's checkpoint
            actor.load_hf(weights_from)
            actor.hf_path = weights_from
        if ranks.is_main():
            sdir.mkdir(parents=True, exist_ok=True)
            (sdir / "metrics.jsonl").unlink(missing_ok=True)
        started = time.time()
        manifest.update(stage.name, status="running", started=started, parent=weights_from)
        actor.configure_optimizer(stage.actor, stage.steps)
        metrics = MetricsLog(sdir, stage.name, stage.steps, cfg.wandb, cfg.name)
        if stage.kind == "sft":
            examples = load_sft_examples(stage.data, tokenizer, stage.mode, stage.sft_max_tokens, cfg.chat_style)
            run_sft(StageContext(actor, None, pad_id(tokenizer), sdir, metrics), stage, examples)
        else:
            prompts = load_prompts(stage.data, tokenizer, stage.mode, stage.domain, stage.rollout.max_prompt_tokens,
                                   cfg.chat_style, validate_label=VALIDATORS.get(stage.domain))
            engine = engine or _build_engine(cfg, base, cpu)
            run_grpo(StageContext(actor, engine, pad_id(tokenizer), sdir, metrics), stage, prompts)
        export_hf(actor, sdir / "hf", base)
        weights_from = actor.hf_path = str(sdir / "hf")
        manifest.update(stage.name, status="done", seconds=round(time.time() - started, 1), hf=weights_from)
    if engine is not None:
        engine.shutdown()
    return out


def hands_on_policy(stage: C.Stage) -> bool:
    """Whether a finished stage's weights are the next stage's starting policy. Policy stages (SFT, GRPO)
    hand on; a reward model does not — it scores later stages (§4.2–4.3), and the stage after it continues
    from the last *policy* stage's checkpoint."""
    return stage.kind != "reward_model"


def _reward_model_stage(cfg: C.Cascade, stage: C.Stage, sdir: Path, weights_from: str, tokenizer,
                        manifest: Manifest) -> None:
    """Train a Bradley–Terry RM (§4.2) from the current policy's weights (its LM head dropped, a new scalar
    head) and export it to ``sdir/hf`` as an HF *ForSequenceClassification folder (servable by vLLM)."""
    from functools import partial

    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.convert.arch import reward_model_config
    from nemo_cascade.convert.export import export_hf
    from nemo_cascade.data.preference import load_preference_pairs
    from nemo_cascade.metrics import MetricsLog

    pairs = load_preference_pairs(stage.data, tokenizer, stage.mode, cfg.chat_style)
    if ranks.is_main():
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / "metrics.jsonl").unlink(missing_ok=True)
    started = time.time()
    manifest.update(stage.name, status="running", started=started, parent=weights_from, kind=stage.kind)
    rm = RewardModelActor(weights_from, cfg.parallel, cfg.model.dtype, seed=cfg.seed)
    rm.configure_optimizer(stage.actor, stage.steps)
    metrics = MetricsLog(sdir, stage.name, stage.steps, cfg.wandb, cfg.name)
    run_reward_model(StageContext(rm, None, pad_id(tokenizer), sdir, metrics), stage, pairs)
    export_hf(rm, sdir / "hf", weights_from, config_fn=partial(reward_model_config, pad_token_id=pad_id(tokenizer)))
    manifest.update(stage.name, status="done", seconds=round(time.time() - started, 1), hf=str(sdir / "hf"))


def _build_engine(cfg: C.Cascade, base: str, cpu_compat):
    from nemo_cascade.rollout.vllm import RolloutEngine

    grpo_stages = [s for s in cfg.stages if s.kind == "grpo"]
    # Sized once for the longest request of any stage — with a length curriculum, its longest phase (§4.5.2).
    max_len = max(s.rollout.max_prompt_tokens + max(p.max_response_tokens for p in C.length_phases(s))
                  for s in grpo_stages)
    return RolloutEngine(base, grpo_stages[0].rollout, cfg.model.dtype, seed=cfg.seed,
                         distributed=ranks.world()[1] > 1, max_model_len=max_len,
                         around_generate=cpu_compat.suspended)
