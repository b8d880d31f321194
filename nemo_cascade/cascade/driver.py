"""The cascade: stages in order, each starting from the previous policy stage's weights (paper
§4.1), with the forgetting gate after every stage (§4.1.1) and exact resume.

Owns the run directory (docs/architecture.md): ``config.json`` (resolved), ``manifest.json``
(lineage, cascade/lineage.py), ``base/eval.json``, ``stages/<k>-<name>/{metrics.jsonl, eval.json,
checkpoint/, data_state.json, hf/}``, ``report.md``, ``report.png`` (written through the caller's
``report`` hook: the report is tooling, which the core never imports); and the components every
stage shares: the one actor, the one rollout engine, the reward-model servers of the cascade's own
RMs.

Resume: a finished stage (manifest status ``done``) is skipped and its ``hf/`` export is the next
stage's start; a stage that was running continues from its newest checkpoint (weights, optimizer,
scheduler, RNG, data position) under the config it started with — so on CPU an interrupted run ends
with the same bits as an uninterrupted one (tests/integration/test_resume.py).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from nemo_cascade import checkpoint, weight_sync
from nemo_cascade.runtime import ranks, stop_request
from nemo_cascade.cascade.base_model import prepare_base_model
from nemo_cascade.runtime.console import events
from nemo_cascade import config
from nemo_cascade.data.loader import pad_id
from nemo_cascade.runtime.faults import crash_point
from nemo_cascade.cascade.forgetting import Gate, GateStop
from nemo_cascade.cascade.lineage import Manifest, stage_status
from nemo_cascade.cascade.preflight import (check_cascade, check_endpoints, check_tokenizer,
                                            data_fingerprint, stages_to_run)
from nemo_cascade.cascade.repair import (flagged_domains, insert, inserted_repairs, inserts_after,
                                         repair_for, with_possible_repairs)
from nemo_cascade.runtime.deadline import Deadline, job_end_time
from nemo_cascade.cascade.saves import Saves
from nemo_cascade.cascade.rm_server import RMServerSizer
from nemo_cascade.cascade.served_rms import OwnRewardModels
from nemo_cascade.cascade.stage import StageContext, run_grpo, run_reward_model, run_sft
from nemo_cascade.cascade.stage_data import policy_data
from nemo_cascade.cascade.stage_selection import (check_selection, discard_for_retrain,
                                                  recorded_stages, run_dir, stage_dir)
from nemo_cascade.runtime.step_rollouts import StepRollouts
from nemo_cascade.cascade.teachers import Teachers, resolve
from nemo_cascade.actor import cpu, process_groups
from nemo_cascade.actor.megatron import MegatronActor
from nemo_cascade.actor.reward_model import RewardModelActor
from nemo_cascade.cascade.metrics import MetricsLog
from nemo_cascade.convert.export import export_hf, export_reward_model
from nemo_cascade.data.preference import load_preference_pairs
from nemo_cascade.data.rm_input import rm_chat_template
from nemo_cascade.data.tokenizer import set_chat_template
from nemo_cascade.rollout.vllm import RolloutEngine

log = logging.getLogger(__name__)


def hands_on_policy(stage: config.Stage) -> bool:
    """Whether a finished stage's weights are the next stage's starting policy. Policy stages (SFT,
    GRPO) hand on; a reward model does not — it scores later stages (§4.2–4.3), and the stage after
    it continues from the last *policy* stage's checkpoint."""
    return stage.kind != "reward_model"


def run_cascade(cfg: config.Cascade, only_stage: str | None = None, retrain: bool = False,
                report: Callable[[Path], None] | None = None,
                size_rm_server: RMServerSizer | None = None) -> Path:
    """Run every stage not yet done (or one, by name) in order; returns the run directory. Raises
    GateStop when the forgetting gate ends the cascade. ``retrain`` (with ``only_stage``): see
    :func:`check_selection`. ``report`` is called on rank 0 with the run folder after every stage's
    gate and when the gate stops the run. ``size_rm_server``: the planner's share of rank 0's GPU
    for the cascade's own reward-model server (``rm_server.py``); needed on a GPU when there is
    one. Both are the tooling's, which the core never imports."""
    cfg = recorded_stages(cfg)  # with the repair stages an earlier invocation's gate inserted
    data_hashes = check_cascade(cfg)  # the whole cascade is validated before anything trains
    check_selection(cfg, only_stage, retrain)
    # Served models answer before anything long runs (the base evaluation takes hours at paper
    # scale).
    check_endpoints(stages_to_run(cfg, stage_status(run_dir(cfg))[0], only_stage))
    # Every rank joins the process group before anything is written: until then each rank takes
    # itself for rank 0, and two ranks building the base model into one folder replace it under each
    # other's reads.
    process_groups.init_distributed(cfg.parallel.collective_timeout_minutes)
    out = run_dir(cfg)
    if ranks.is_main():
        if retrain:
            discard_for_retrain(cfg, only_stage)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(config.dumps(cfg))
    ranks.barrier()  # the others read the run folder after rank 0 has discarded and written
    run = CascadeRun(cfg, prepare_base_model(cfg, out), data_hashes, report, size_rm_server)
    try:
        run.evaluate_base()
        k = 0
        while k < len(run.cfg.stages):  # the gate may insert a repair stage after stage k
            stage = run.cfg.stages[k]
            # a stage's steps watch for it themselves
            _stop_if_requested(out, f"before stage {stage.name}")
            if run.runs_now(stage, only_stage):
                if stage.kind == "reward_model":
                    run.train_reward_model(k, stage)
                else:
                    run.train_policy(k, stage)
            else:
                run.skip(k, stage)
            if not run.manifest.gated(stage.name):  # trained now, or killed between done and judged
                _stop_if_requested(out, f"before the gate after stage {stage.name}")
                run.gate_after(k, stage)
            k += 1
    finally:
        run.close()
    return out


def _stop_if_requested(out: Path, where: str) -> None:
    """End the run here if a stop was requested (runtime/stop_request.py); rank 0 looks, every rank
    stops."""
    if ranks.from_main(stop_request.requested(out)):
        raise stop_request.StopRequested(f"stopped on request ({stop_request.reason(out)}) "
                                         f"{where}; run the same command again to continue")


class CascadeRun:
    """One execution of a cascade: the shared actor / engine / RM servers and the stage
    hand-offs."""

    def __init__(self, cfg: config.Cascade, base: str, data_hashes: dict[str, list[str]],
                 report: Callable[[Path], None] | None = None,
                 size_rm_server: RMServerSizer | None = None):
        from transformers import AutoTokenizer

        self.cfg, self.base, self.out = cfg, base, run_dir(cfg)
        self.report = report
        self.tokenizer = AutoTokenizer.from_pretrained(base)
        self.manifest = Manifest(cfg, self.out / "manifest.json", base, data_hashes)
        done = [stage_dir(cfg, k) for k, s in enumerate(cfg.stages) if self.manifest.done(s.name)]
        check_tokenizer(self.tokenizer, base, done)
        if self.manifest.data["stopped"]:
            if cfg.gate.on_regression == "stop":
                raise config.ConfigError(f"{self.manifest.path}: the forgetting gate stopped this "
                                         f"cascade ({self.manifest.data['stopped']}); re-run with "
                                         "gate.on_regression=warn to go on")
            log.warning("continuing a cascade the forgetting gate stopped (%s)",
                        self.manifest.data["stopped"])
            self.manifest.stop("")
        self.reward_models = OwnRewardModels(cfg, self.out, size_rm_server)
        self.gate = Gate(cfg, self.tokenizer)
        self.deadline = Deadline(ranks.from_main(job_end_time() if ranks.is_main() else None),
                                 cfg.stop_margin_seconds)
        events.info("time limit: %s", self.deadline.describe(os.environ.get("STOP_GRACE", "")))
        self.actor = MegatronActor(base, cfg.parallel, cfg.model.dtype, seed=cfg.seed,
                                   transformer_impl=cfg.model.transformer_impl, fp8=cfg.model.fp8)
        self.engine, self.weights_from = None, base
        self.rows: list[Path] = [self.out / "base"]  # forgetting-matrix rows, in order

    # ---------------------------------------------------------------------------------- stage order
    def runs_now(self, stage: config.Stage, only_stage: str | None) -> bool:
        """Whether the stage trains in this invocation: every unfinished one, or with ``--stage``
        the one it names and the repair stage the gate inserts after that one."""
        repairs = inserted_repairs(self.manifest.data)
        return not self.manifest.done(stage.name) and (
            not only_stage or stage.name in (only_stage, repairs.get(only_stage)))

    def skip(self, k: int, stage: config.Stage) -> None:
        """Pass over stage k; a finished one still hands on what it made (its policy and gate row,
        or its reward model) and has its checkpoints cleaned up."""
        done = self.manifest.done(stage.name)
        if done:
            sdir = stage_dir(self.cfg, k)
            if hands_on_policy(stage):
                self.weights_from = str(sdir / "hf")
                # else gate_after adds the row
                if stage.evaluate and self.manifest.gated(stage.name):
                    self.rows.append(sdir)
            else:
                self.reward_models.add(stage.name, sdir / "hf")
            self._clean_up(k, stage)
        events.info("stage %s: %s", stage.name, "skipped (done)" if done else "not selected")

    def _begin(self, k: int, stage: config.Stage) -> tuple[Path, Saves, int]:
        """Resume or (re)start stage k's directory; returns it, its checkpoint policy and the first
        step."""
        sdir = stage_dir(self.cfg, k)
        self.manifest.check_resumable(stage)
        running = self.manifest.status(stage.name) == "running"
        resume = checkpoint.newest_intact(sdir / "checkpoint") if running else None
        if ranks.is_main():
            sdir.mkdir(parents=True, exist_ok=True)
            if resume is None:
                shutil.rmtree(sdir / "checkpoint", ignore_errors=True)
            if not running:  # a first start or a restart: earlier groups had other weights
                shutil.rmtree(sdir / "rollouts", ignore_errors=True)
        ranks.barrier()
        self.manifest.update(stage.name, status="running", started=time.time(),
                             parent=self.weights_from,
                             config_sha256=self.manifest.config_hash(stage),
                             resumed_from=str(resume or ""),
                             steps=stage.steps)
        identity = f"{self.manifest.config_hash(stage)}/seed{stage.rollout.seed}"
        rollouts = (StepRollouts(sdir / "rollouts", identity, self.cfg.rollout_checkpoint_seconds)
                    if config.samples_on_policy(stage) else None)
        saves = Saves(sdir / "checkpoint", stage.checkpoint_every, self.cfg.keep_checkpoints,
                      resume,
                      every_minutes=self.cfg.checkpoint_every_minutes, run_dir=self.out,
                      deadline=self.deadline,
                      rollouts=rollouts)
        if resume:
            events.info("stage %s: resumed at step %d of %d (%s)", stage.name, _step_of(resume) + 1,
                        stage.steps,
                        resume)
        else:
            events.info("stage %s: started (%d steps, %s)", stage.name, stage.steps, stage.kind)
        return sdir, saves, _step_of(resume) + 1 if resume else 0

    def _finish(self, k: int, stage: config.Stage, sdir: Path, started: float,
                data_state: dict | None) -> None:
        """Record the stage as done (its gate still to run), then clean up after it. A next stage
        that carries this stage's optimizer gets its final state saved first, so that if it is
        interrupted before its own first checkpoint it restarts with the same Adam moments."""
        if self._carried(k):
            checkpoint.save(sdir / "checkpoint", stage.steps - 1, self.actor, {"data": data_state},
                            keep=1)
        if ranks.is_main() and data_state is not None:
            (sdir / "data_state.json").write_text(json.dumps(data_state))
        self.manifest.update(stage.name, status="done", seconds=round(time.time() - started, 1),
                             hf=str(sdir / "hf"), gated=False)
        events.info("stage %s: done in %.0f s (%s)", stage.name, time.time() - started, sdir / "hf")
        crash_point("stage.done")
        self._clean_up(k, stage)

    def _carried(self, k: int) -> bool:
        return k + 1 < len(self.cfg.stages) and self.cfg.stages[k + 1].boundary.optimizer == "carry"

    def _clean_up(self, k: int, stage: config.Stage) -> None:
        """A done stage's mid-stage checkpoints go (its hf/ export supersedes them), but not the
        final state a next stage carries; and the state this stage carried from the one before is no
        longer needed. Only after the manifest says done (a kill before leaves a resumable stage),
        and again when a resumed run skips the stage (a kill after leaves the clean-up to it)."""
        if ranks.is_main():
            shutil.rmtree(stage_dir(self.cfg, k) / "rollouts", ignore_errors=True)
            if not self._carried(k):
                shutil.rmtree(stage_dir(self.cfg, k) / "checkpoint", ignore_errors=True)
            if k and stage.boundary.optimizer == "carry":
                shutil.rmtree(stage_dir(self.cfg, k - 1) / "checkpoint", ignore_errors=True)
        ranks.barrier()

    # ---------------------------------------------------------------------------------- stage kinds
    def train_policy(self, k: int, stage: config.Stage) -> None:
        """SFT or GRPO on the shared actor, from the last policy stage's export (§4.1)."""

        cfg, started = self.cfg, time.time()
        self._load_policy()
        stage, rows = policy_data(self.cfg, stage, self.tokenizer)
        sdir, saves, start = self._begin(k, stage)
        self._configure_optimizer(k, stage)
        log_ = MetricsLog(sdir, stage.name, stage.steps, cfg.wandb, cfg.name, start_step=start)
        ctx = StageContext(self.actor, None, pad_id(self.tokenizer), sdir, log_, saves,
                           self._continued_data(k, stage))
        if stage.kind == "sft":
            data_state = run_sft(ctx, stage, rows)
        else:
            teachers = self._teachers(k, stage) if stage.kind == "distill" else None
            ctx.engine = self._engine()
            data_state = run_grpo(ctx, self.reward_models.served(stage), rows, teachers)
        export_hf(self.actor, sdir / "hf", self.base)
        if ranks.is_main():  # the export chats the way the cascade trained it (§3.1.2)
            set_chat_template(sdir / "hf", cfg.chat_style)
        self.weights_from = self.actor.hf_path = str(sdir / "hf")
        self._finish(k, stage, sdir, started, data_state)

    def _teachers(self, k: int, stage: config.Stage) -> Teachers:
        """Stage ``k``'s teachers, from the gate rows before it (``best``), the base, earlier
        stages' exports or folders, loaded into the actor; recorded in the manifest."""
        rows = [(r, self.base if r == self.out / "base" else str(r / "hf")) for r in self.rows]
        folders = {s.name: stage_dir(self.cfg, j) for j, s in enumerate(self.cfg.stages[:k])}
        chosen = resolve(stage, rows, folders, self.base)
        teachers = Teachers(self.actor, chosen, self.actor.hf_path,
                            f"stages.{stage.name}.distill.teachers")
        self.manifest.update(stage.name, teachers=teachers.describe())
        events.info("stage %s: %d teacher(s), %.1f MB of frozen weights per rank", stage.name,
                    len(set(teachers.name_of.values())), teachers.bytes / 1e6)
        return teachers

    def train_reward_model(self, k: int, stage: config.Stage) -> None:
        """A Bradley–Terry RM (§4.2) from the current policy's weights (its LM head replaced by a
        scalar head), exported as an HF *ForSequenceClassification folder that vLLM serves for later
        stages."""

        started = time.time()
        pairs = load_preference_pairs(stage.data, self.tokenizer, stage.mode, self.cfg.chat_style)
        stage = config.with_epoch_steps(stage, len(pairs))  # §4.2: one epoch over the pairs
        events.info("%s", config.epochs_line(stage, len(pairs)))
        # free the policy's Adam state while the RM trains
        self.actor.optimizer = self.actor.scheduler = None
        sdir, saves, start = self._begin(k, stage)
        m = self.cfg.model
        rm = RewardModelActor(self.weights_from, self.cfg.parallel, m.dtype, seed=self.cfg.seed,
                              transformer_impl=m.transformer_impl, fp8=m.fp8)
        rm.configure_optimizer(stage.actor, stage.steps)
        log_ = MetricsLog(sdir, stage.name, stage.steps, self.cfg.wandb, self.cfg.name,
                          start_step=start)
        run_reward_model(StageContext(rm, None, pad_id(self.tokenizer), sdir, log_, saves), stage,
                         pairs)
        # its chat template: the rendering its pairs were trained with (data/rm_input.py), not the
        # base's
        export_reward_model(rm, sdir / "hf", self.weights_from, pad_id(self.tokenizer),
                            rm_chat_template(stage.mode, self.cfg.chat_style))
        self.reward_models.add(stage.name, sdir / "hf")
        self._finish(k, stage, sdir, started, None)

    def _configure_optimizer(self, k: int, stage: config.Stage) -> None:
        """A fresh optimizer, or (``boundary.optimizer = carry``) the previous stage's: still in
        memory when that stage ran in this process, else restored from the final state it kept (see
        ``_finish``)."""
        carry = stage.boundary.optimizer == "carry"
        in_memory = carry and self.actor.optimizer is not None
        self.actor.configure_optimizer(stage.actor, stage.steps, carry=in_memory)
        if carry and not in_memory:
            kept = checkpoint.newest_intact(stage_dir(self.cfg, k - 1) / "checkpoint")
            if kept is None:
                raise config.ConfigError(f"stages.{stage.name}.boundary.optimizer: 'carry' needs "
                                         f"stage {self.cfg.stages[k - 1].name}'s optimizer state, "
                                         "which this run does not have (it finished before "
                                         "carrying was configured, or its kept state is damaged); "
                                         "re-run that stage or use reset")
            checkpoint.load(kept, self.actor, schedule=False)

    def _load_policy(self) -> None:
        """Hand-off: the actor takes the last policy stage's export (or the base) if it holds other
        weights."""
        if self.weights_from != self.actor.hf_path:
            self.actor.load_hf(self.weights_from)
            self.actor.hf_path = self.weights_from

    def _continued_data(self, k: int, stage: config.Stage) -> dict | None:
        """``boundary.data = continue``: the data position the previous stage of the same kind ended
        at."""
        if stage.boundary.data != "continue":
            return None
        j = max(i for i in range(k) if self.cfg.stages[i].kind == stage.kind)
        path = stage_dir(self.cfg, j) / "data_state.json"
        if not path.is_file():
            raise config.ConfigError(f"stages.{stage.name}.boundary.data: 'continue' needs {path}; "
                                     f"run stage {self.cfg.stages[j].name} first")
        return json.loads(path.read_text())

    # --------------------------------------------------------------------------------- shared parts
    def _engine(self):
        """The colocated rollout engine, built once, sized for the longest GRPO request and gate
        suite."""
        if self.engine is None:

            # with any repair stage the gate may insert later (gate.on_regression=repair)
            stages = with_possible_repairs(self.cfg).stages
            grpo = [s for s in stages if config.samples_on_policy(s)]
            # With a length curriculum, its longest phase (§4.5.2).
            need = [s.rollout.max_prompt_tokens + config.longest_response(s) for s in grpo]
            rollout = grpo[0].rollout if grpo else config.Rollout()
            self.engine = RolloutEngine(self.base, rollout,
                                        config.engine_dtype(self.cfg.model, rollout),
                                        seed=self.cfg.seed,
                                        distributed=ranks.world()[1] > 1,
                                        max_model_len=max(need + [self.gate.context_tokens()]),
                                        around_generate=cpu.suspended)
        return self.engine

    # ------------------------------------------------------------------------------------ the gate
    def evaluate_base(self) -> None:
        base_row = self.out / "base"
        if (not self.gate.enabled or not self.cfg.gate.evaluate_base
                or (base_row / "eval.json").is_file()):
            return

        weight_sync.push(self.actor, self._engine())  # the actor holds the base weights here
        self._evaluate_row(base_row, self.base, self.cfg.gate.reward_model_url)
        events.info("base: evaluated (%s)", base_row / "eval.json")
        self.engine.sleep()  # the first stage (SFT) trains next

    def gate_after(self, k: int, stage: config.Stage) -> None:
        """Evaluate the stage's policy on every suite and compare with the rows before (§4.1.1)."""
        if self.gate.enabled and not stage.evaluate:
            # A first part of one paper stage (swe before swe_24k, T20): no row and no verdict; the
            # next evaluated stage is compared with the rows before it. A GRPO stage ends with its
            # engine awake, and the next stage may train before it generates.
            events.info("stage %s: no forgetting gate (evaluate = false)", stage.name)
            if config.samples_on_policy(stage):
                self.engine.sleep()
        elif self.gate.enabled:
            rm = self.reward_models.latest
            self._load_policy()
            weight_sync.push(self.actor, self._engine())
            row, found = self._policy_row(k), []
            if stage.kind == "reward_model":  # fill the RM-scored column of the policy row before
                if row is not None and (row / "eval.json").is_file():
                    self._evaluate_row(row, self.weights_from, self.reward_models.url(rm), True)
            else:
                sdir = stage_dir(self.cfg, k)
                rm_url = self.reward_models.url(rm) if rm else self.cfg.gate.reward_model_url
                self._evaluate_row(sdir, str(sdir / "hf"), rm_url)
                found = self._judge(k, stage, sdir)
                self.rows.append(sdir)
            # The next stage may train before it generates (SFT, an RM): give the GPU back to the
            # actor. A GRPO stage's first weight push wakes the engine.
            self.engine.sleep()
            action = self.cfg.gate.on_regression
            events.info("stage %s: gated, %s", stage.name,
                        f"{len(found)} regression(s) (gate.on_regression={action})"
                        if found else "no regression")
        self.manifest.update(stage.name, gated=True)
        self._report()

    def _evaluate_row(self, row: Path, weights: str, rm_url: str = "",
                      only_pairwise: bool = False) -> None:
        self.gate.evaluate_row(self.engine, row, weights, rm_url, only_pairwise, self.out,
                               self.deadline)

    def _policy_row(self, k: int) -> Path | None:
        """The matrix row of the policy that stage k starts from (the last policy stage before it,
        or the base); None when that stage ran without the gate (``evaluate = false``): no row holds
        its scores."""
        before = [j for j in range(k) if hands_on_policy(self.cfg.stages[j])]
        if not before:
            return self.out / "base"
        return stage_dir(self.cfg, before[-1]) if self.cfg.stages[before[-1]].evaluate else None

    def _judge(self, k: int, stage: config.Stage, sdir: Path) -> list:
        found = self.gate.check([r for r in self.rows if (r / "eval.json").is_file()], sdir)
        action = self.cfg.gate.on_regression
        verdict = {"rule": self.cfg.gate.rule, "action": action,
                   "regressions": [str(r) for r in found], "flagged": [asdict(r) for r in found]}
        for r in found:
            events.warning("stage %s: regression: %s", stage.name, r)
        repair = None
        if found and inserts_after(self.cfg, k):
            domains = flagged_domains(sdir, found)
            started = [s.name for s in self.cfg.stages[k + 1:]
                       if self.manifest.status(s.name) != "pending"]
            repair, why_not = repair_for(self.cfg, k, domains, started)
            if repair is None:
                events.warning("stage %s: no repair stage inserted (%s)", stage.name, why_not)
            else:
                events.warning("stage %s: inserted stage %s (distill: %s)", stage.name,
                               repair.name, ", ".join(repair.distill.teachers))
                verdict["repair"] = {"stage": repair.name, "domains": domains}
        self._place_repair(k, repair)
        self.manifest.update(stage.name, gate=verdict)
        if found and action == "stop":
            self.manifest.update(stage.name, gated=True)
            reason = f"after stage {stage.name}: " + "; ".join(str(r) for r in found)
            self.manifest.stop(reason)
            self._report()
            raise GateStop(reason)
        return found

    def _place_repair(self, k: int, repair: config.Stage | None) -> None:
        """Stage k followed by ``repair`` (or by no repair, withdrawing one an earlier verdict on k
        inserted) in the stage list, the manifest and config.json."""
        cfg = insert(self.cfg, k, repair)
        withdrawn = set(self.cfg.stages) - set(cfg.stages) - {repair}
        if cfg == self.cfg or any(self.manifest.status(s.name) != "pending" for s in withdrawn):
            return  # nothing to change, or a repair that has started stays
        self.cfg = config.validate(cfg)
        added = {}
        if repair is not None:
            hashes = [data_fingerprint(d, f"stages.{repair.name}")
                      for d in (repair.data, *repair.extra_data)]
            added[repair.name] = {"status": "pending", "kind": repair.kind, "data_sha256": hashes}
        self.manifest.set_stages([s.name for s in cfg.stages], added)
        if ranks.is_main():
            (self.out / "config.json").write_text(config.dumps(cfg))

    def _report(self) -> None:
        if self.report is not None and ranks.is_main():
            self.report(self.out)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
        self.reward_models.close()


def _step_of(ckpt: Path) -> int:
    """The step a checkpoint folder (``step_000012``) was saved after."""
    return int(ckpt.name.split("_")[-1])


__all__ = ["run_cascade", "run_dir", "stage_dir", "hands_on_policy", "check_selection",
           "discard_for_retrain",
           "CascadeRun", "GateStop"]
