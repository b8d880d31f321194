"""The cascade: stages in order, each starting from the previous policy stage's weights (paper §4.1), with
the forgetting gate after every stage (§4.1.1) and exact resume.

Owns the run directory (DESIGN.md): ``config.json`` (resolved), ``manifest.json`` (lineage, lineage.py),
``base/eval.json``, ``stages/<k>-<name>/{metrics.jsonl, eval.json, checkpoint/, data_state.json, hf/}``,
``report.md``, ``report.png``; and the components every stage shares: the one actor, the one rollout engine,
the reward-model servers of the cascade's own RMs.

Resume: a finished stage (manifest status ``done``) is skipped and its ``hf/`` export is the next stage's
start; a stage that was running continues from its newest checkpoint (weights, optimizer, scheduler, RNG, data
position) under the config it started with — so on CPU an interrupted run ends with the same bits as an
uninterrupted one (tests/integration/test_resume.py).
"""
from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

from nemo_cascade import checkpoint, ranks
from nemo_cascade import config as C
from nemo_cascade.data.loader import pad_id
from nemo_cascade.forgetting import Gate, GateStop
from nemo_cascade.lineage import Manifest, config_hash
from nemo_cascade.preflight import check_cascade, check_tokenizer
from nemo_cascade.stage import Saves, StageContext, run_grpo, run_reward_model, run_sft

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

    out = run_dir(cfg) / "base_model"
    if ranks.is_main() and not (out / "config.json").is_file():
        tmp = out.with_name("base_model.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        BUILDERS[cfg.model.build](tmp, seed=cfg.seed)
        tmp.rename(out)
    ranks.barrier()
    return str(out)


def hands_on_policy(stage: C.Stage) -> bool:
    """Whether a finished stage's weights are the next stage's starting policy. Policy stages (SFT, GRPO)
    hand on; a reward model does not — it scores later stages (§4.2–4.3), and the stage after it continues
    from the last *policy* stage's checkpoint."""
    return stage.kind != "reward_model"


def run_cascade(cfg: C.Cascade, only_stage: str | None = None) -> Path:
    """Run every stage not yet done (or one, by name) in order; returns the run directory. Raises GateStop
    when the forgetting gate ends the cascade."""
    data_hashes = check_cascade(cfg)  # the whole cascade is validated before anything trains
    out = run_dir(cfg)
    if ranks.is_main():
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(C.dumps(cfg))
    run = CascadeRun(cfg, prepare_base_model(cfg), data_hashes)
    try:
        run.evaluate_base()
        for k, stage in enumerate(cfg.stages):
            if not run.selected(k, stage, only_stage):
                continue
            if stage.kind == "reward_model":
                run.train_reward_model(k, stage)
            else:
                run.train_policy(k, stage)
            run.gate_after(k, stage)
    finally:
        run.close()
    return out


class CascadeRun:
    """One execution of a cascade: the shared actor / engine / RM servers and the stage hand-offs."""

    def __init__(self, cfg: C.Cascade, base: str, data_hashes: dict[str, list[str]]):
        from transformers import AutoTokenizer

        from nemo_cascade.actor.megatron import MegatronActor

        self.cfg, self.base, self.out = cfg, base, run_dir(cfg)
        self.tokenizer = AutoTokenizer.from_pretrained(base)
        self.manifest = Manifest(cfg, self.out / "manifest.json", base, data_hashes)
        done = [stage_dir(cfg, k) for k, s in enumerate(cfg.stages) if self.manifest.done(s.name)]
        check_tokenizer(self.tokenizer, base, done)
        if self.manifest.data["stopped"]:
            if cfg.gate.on_regression == "stop":
                raise C.ConfigError(f"{self.manifest.path}: the forgetting gate stopped this cascade "
                                    f"({self.manifest.data['stopped']}); re-run with gate.on_regression=warn to go on")
            log.warning("continuing a cascade the forgetting gate stopped (%s)", self.manifest.data["stopped"])
            self.manifest.stop("")
        self.gate = Gate(cfg, self.tokenizer)
        self.actor = MegatronActor(base, cfg.parallel, cfg.model.dtype, seed=cfg.seed,
                                   transformer_impl=cfg.model.transformer_impl, fp8=cfg.model.fp8)
        self.engine, self.weights_from = None, base
        self.rows: list[Path] = [self.out / "base"]  # forgetting-matrix rows, in order
        self.reward_models: dict[str, Path] = {}     # reward_model stage → its HF export
        self.servers: dict[str, object] = {}         # reward_model stage → VLLMServer (rank 0)
        self.urls: dict[str, str] = {}

    # ------------------------------------------------------------------------------------ stage order
    def selected(self, k: int, stage: C.Stage, only_stage: str | None) -> bool:
        """Whether stage k runs now; a finished stage that is skipped still hands on what it made."""
        done = self.manifest.done(stage.name)
        if only_stage == stage.name or (not only_stage and not done):
            return True
        if done:
            sdir = stage_dir(self.cfg, k)
            if hands_on_policy(stage):
                self.weights_from = str(sdir / "hf")
                self.rows.append(sdir)
            else:
                self.reward_models[stage.name] = sdir / "hf"
        log.info("stage %s: %s", stage.name, "skipped (done)" if done else "not selected")
        return False

    def _begin(self, k: int, stage: C.Stage) -> tuple[Path, Saves, int]:
        """Resume or (re)start stage k's directory; returns it, its checkpoint policy and the first step."""
        sdir = stage_dir(self.cfg, k)
        self.manifest.check_resumable(stage)
        resume = checkpoint.latest(sdir / "checkpoint") if self.manifest.status(stage.name) == "running" else None
        if ranks.is_main():
            sdir.mkdir(parents=True, exist_ok=True)
            if resume is None:
                shutil.rmtree(sdir / "checkpoint", ignore_errors=True)
            _keep_metrics_before(sdir / "metrics.jsonl", _step_of(resume) + 1 if resume else 0)
        ranks.barrier()
        self.manifest.update(stage.name, status="running", started=time.time(), parent=self.weights_from,
                             config_sha256=config_hash(stage), resumed_from=str(resume or ""))
        saves = Saves(sdir / "checkpoint", stage.checkpoint_every, self.cfg.keep_checkpoints, resume)
        return sdir, saves, _step_of(resume) + 1 if resume else 0

    def _finish(self, k: int, stage: C.Stage, sdir: Path, started: float, data_state: dict | None) -> None:
        """Record the stage as done. Its mid-stage checkpoints go (the hf/ export supersedes them) — unless the
        next stage carries this stage's optimizer: then its final state is kept, so that a next stage that is
        interrupted before its own first checkpoint restarts with the same Adam moments."""
        carried = k + 1 < len(self.cfg.stages) and self.cfg.stages[k + 1].boundary.optimizer == "carry"
        if carried:
            checkpoint.save(sdir / "checkpoint", stage.steps - 1, self.actor, {"data": data_state}, keep=1)
        if ranks.is_main():
            if data_state is not None:
                (sdir / "data_state.json").write_text(json.dumps(data_state))
            if not carried:
                shutil.rmtree(sdir / "checkpoint", ignore_errors=True)
            if k and stage.boundary.optimizer == "carry":  # the state this stage carried is no longer needed
                shutil.rmtree(stage_dir(self.cfg, k - 1) / "checkpoint", ignore_errors=True)
        self.manifest.update(stage.name, status="done", seconds=round(time.time() - started, 1),
                             hf=str(sdir / "hf"))

    # ------------------------------------------------------------------------------------ stage kinds
    def train_policy(self, k: int, stage: C.Stage) -> None:
        """SFT or GRPO on the shared actor, from the last policy stage's export (§4.1)."""
        from nemo_cascade.convert.export import export_hf
        from nemo_cascade.data.loader import load_prompts, load_sft_examples
        from nemo_cascade.data.tokenizer import set_chat_template
        from nemo_cascade.metrics import MetricsLog
        from nemo_cascade.rewards import VALIDATORS

        cfg, started = self.cfg, time.time()
        self._load_policy()
        sdir, saves, start = self._begin(k, stage)
        self._configure_optimizer(k, stage)
        log_ = MetricsLog(sdir, stage.name, stage.steps, cfg.wandb, cfg.name, start_step=start)
        ctx = StageContext(self.actor, None, pad_id(self.tokenizer), sdir, log_, saves, self._continued_data(k, stage))
        if stage.kind == "sft":
            examples = [e for d in (stage.data, *stage.extra_data)
                        for e in load_sft_examples(d, self.tokenizer, stage.mode, stage.sft_max_tokens, cfg.chat_style)]
            data_state = run_sft(ctx, stage, examples)
        else:
            prompts = load_prompts(stage.data, self.tokenizer, stage.mode, stage.domain,
                                   stage.rollout.max_prompt_tokens, cfg.chat_style, VALIDATORS.get(stage.domain))
            ctx.engine = self._engine()
            data_state = run_grpo(ctx, self._with_served_rm(stage), prompts)
        export_hf(self.actor, sdir / "hf", self.base)
        if ranks.is_main():  # the export chats the way the cascade trained it (§3.1.2)
            set_chat_template(sdir / "hf", cfg.chat_style)
        self.weights_from = self.actor.hf_path = str(sdir / "hf")
        self._finish(k, stage, sdir, started, data_state)

    def train_reward_model(self, k: int, stage: C.Stage) -> None:
        """A Bradley–Terry RM (§4.2) from the current policy's weights (its LM head replaced by a scalar head),
        exported as an HF *ForSequenceClassification folder that vLLM serves for later stages."""
        from functools import partial

        from nemo_cascade.actor.reward_model import RewardModelActor
        from nemo_cascade.convert.arch import reward_model_config
        from nemo_cascade.convert.export import export_hf
        from nemo_cascade.data.preference import load_preference_pairs
        from nemo_cascade.metrics import MetricsLog

        started = time.time()
        pairs = load_preference_pairs(stage.data, self.tokenizer, stage.mode, self.cfg.chat_style)
        self.actor.optimizer = self.actor.scheduler = None  # free the policy's Adam state while the RM trains
        sdir, saves, start = self._begin(k, stage)
        m = self.cfg.model
        rm = RewardModelActor(self.weights_from, self.cfg.parallel, m.dtype, seed=self.cfg.seed,
                              transformer_impl=m.transformer_impl, fp8=m.fp8)
        rm.configure_optimizer(stage.actor, stage.steps)
        log_ = MetricsLog(sdir, stage.name, stage.steps, self.cfg.wandb, self.cfg.name, start_step=start)
        run_reward_model(StageContext(rm, None, pad_id(self.tokenizer), sdir, log_, saves), stage, pairs)
        export_hf(rm, sdir / "hf", self.weights_from,
                  config_fn=partial(reward_model_config, pad_token_id=pad_id(self.tokenizer)))
        self.reward_models[stage.name] = sdir / "hf"
        self._finish(k, stage, sdir, started, None)

    def _configure_optimizer(self, k: int, stage: C.Stage) -> None:
        """A fresh optimizer, or (``boundary.optimizer = carry``) the previous stage's: still in memory when
        that stage ran in this process, else restored from the final state it kept (see ``_finish``)."""
        carry = stage.boundary.optimizer == "carry"
        in_memory = carry and self.actor.optimizer is not None
        self.actor.configure_optimizer(stage.actor, stage.steps, carry=in_memory)
        if carry and not in_memory:
            kept = checkpoint.latest(stage_dir(self.cfg, k - 1) / "checkpoint")
            if kept is None:
                raise C.ConfigError(f"stages.{stage.name}.boundary.optimizer: 'carry' needs stage "
                                    f"{self.cfg.stages[k - 1].name}'s optimizer state, which this run does not have "
                                    f"(it finished before carrying was configured); re-run that stage or use reset")
            checkpoint.load(kept, self.actor, schedule=False)

    def _load_policy(self) -> None:
        """Hand-off: the actor takes the last policy stage's export (or the base) if it holds other weights."""
        if self.weights_from != self.actor.hf_path:
            self.actor.load_hf(self.weights_from)
            self.actor.hf_path = self.weights_from

    def _continued_data(self, k: int, stage: C.Stage) -> dict | None:
        """``boundary.data = continue``: the data position the previous stage of the same kind ended at."""
        if stage.boundary.data != "continue":
            return None
        j = max(i for i in range(k) if self.cfg.stages[i].kind == stage.kind)
        path = stage_dir(self.cfg, j) / "data_state.json"
        if not path.is_file():
            raise C.ConfigError(f"stages.{stage.name}.boundary.data: 'continue' needs {path}; run stage "
                                f"{self.cfg.stages[j].name} first")
        return json.loads(path.read_text())

    # ------------------------------------------------------------------------------------ shared parts
    def _engine(self):
        """The colocated rollout engine, built once, sized for the longest GRPO request and gate suite."""
        if self.engine is None:
            from nemo_cascade.actor import cpu
            from nemo_cascade.rollout.vllm import RolloutEngine

            grpo = [s for s in self.cfg.stages if s.kind == "grpo"]
            # With a length curriculum, its longest phase (§4.5.2).
            need = [s.rollout.max_prompt_tokens + max(p.max_response_tokens for p in C.length_phases(s)) for s in grpo]
            rollout = grpo[0].rollout if grpo else C.Rollout()
            self.engine = RolloutEngine(self.base, rollout, self.cfg.model.dtype, seed=self.cfg.seed,
                                        distributed=ranks.world()[1] > 1,
                                        max_model_len=max(need + [self.gate.context_tokens()]),
                                        around_generate=cpu.suspended)
        return self.engine

    def _rm_url(self, name: str) -> str:
        """The URL of the cascade's own reward model ``name``, serving it (rank 0) on first use."""
        if name not in self.urls:
            from nemo_cascade.rewards.serve import VLLMServer, is_vllm_cpu

            url = ""
            if ranks.is_main():
                path = self.reward_models[name]
                server = VLLMServer(path, runner="pooling", log_path=path.parent / "server.log",
                                    single_engine_process=is_vllm_cpu())
                self.servers[name] = server
                url = server.start().url
                log.info("serving reward model %s at %s (%.0f s to start)", name, url, server.start_seconds)
            self.urls[name] = ranks.from_main(url)
        return self.urls[name]

    def _with_served_rm(self, stage: C.Stage) -> C.Stage:
        if not stage.reward.reward_model_stage:
            return stage
        url = self._rm_url(stage.reward.reward_model_stage)
        return replace(stage, reward=replace(stage.reward, reward_model_url=url, reward_model_stage=""))

    # ------------------------------------------------------------------------------------ the gate
    def evaluate_base(self) -> None:
        base_row = self.out / "base"
        if not self.gate.enabled or not self.cfg.gate.evaluate_base or (base_row / "eval.json").is_file():
            return
        from nemo_cascade import weight_sync

        weight_sync.push(self.actor, self._engine())  # the actor holds the base weights here
        self.gate.evaluate(self.engine, base_row, self.base)
        self.engine.sleep()  # the first stage (SFT) trains next

    def gate_after(self, k: int, stage: C.Stage) -> None:
        """Evaluate the stage's policy on every suite and compare with the rows before (§4.1.1)."""
        from nemo_cascade import weight_sync

        if self.gate.enabled:
            rm = list(self.reward_models)[-1] if self.reward_models else ""
            self._load_policy()
            weight_sync.push(self.actor, self._engine())
            if stage.kind == "reward_model":  # fill the RM-scored column of the policy row before
                if (self.rows[-1] / "eval.json").is_file():
                    self.gate.evaluate(self.engine, self.rows[-1], self.weights_from, self._rm_url(rm), True)
            else:
                sdir = stage_dir(self.cfg, k)
                self.gate.evaluate(self.engine, sdir, str(sdir / "hf"), self._rm_url(rm) if rm else "")
                self._judge(stage, sdir)
                self.rows.append(sdir)
            # The next stage may train before it generates (SFT, an RM): give the GPU back to the actor. A GRPO
            # stage's first weight push wakes the engine.
            self.engine.sleep()
        self._report()

    def _judge(self, stage: C.Stage, sdir: Path) -> None:
        found = self.gate.check([r for r in self.rows if (r / "eval.json").is_file()], sdir)
        action = self.cfg.gate.on_regression
        self.manifest.update(stage.name, gate={"regressions": [str(r) for r in found], "action": action})
        for r in found:
            log.warning("forgetting gate after %s: %s", stage.name, r)
        if found and action == "stop":
            reason = f"after stage {stage.name}: " + "; ".join(str(r) for r in found)
            self.manifest.stop(reason)
            self._report()
            raise GateStop(reason)

    def _report(self) -> None:
        if ranks.is_main():
            from nemo_cascade.evaluate.cascade_report import build_report

            build_report(self.out)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
        for server in self.servers.values():
            server.stop()


def _step_of(ckpt: Path) -> int:
    """The step a checkpoint folder (``step_000012``) was saved after."""
    return int(ckpt.name.split("_")[-1])


def _keep_metrics_before(path: Path, step: int) -> None:
    """A resumed stage re-logs from ``step``: drop the lines the interrupted run wrote from there on."""
    if not path.is_file():
        return
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] < step]
    path.write_text("".join(ln + "\n" for ln in lines))


__all__ = ["run_cascade", "run_dir", "stage_dir", "prepare_base_model", "hands_on_policy", "CascadeRun", "GateStop"]
