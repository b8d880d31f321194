"""Which stages a run trains, and where they live: the run and stage folders, ``run --stage NAME``
(only after every earlier stage is done) and ``--retrain`` (discarding a done stage and the later
ones).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from nemo_cascade import checkpoint, config
from nemo_cascade.cascade.lineage import read_manifest, reset_stages, stage_status
from nemo_cascade.cascade.repair import inserted_repairs, with_recorded_repairs

log = logging.getLogger(__name__)


def run_dir(cfg: config.Cascade) -> Path:
    return Path(cfg.run_root) / cfg.name


def stage_dir(cfg: config.Cascade, index: int) -> Path:
    return run_dir(cfg) / "stages" / f"{index}-{cfg.stages[index].name}"


def recorded_stages(cfg: config.Cascade) -> config.Cascade:
    """``cfg`` with the repair stages the gate inserted in the run folder's earlier invocations
    (``gate.on_regression = repair``; the run's manifest records them): the stages the run has."""
    manifest = read_manifest(run_dir(cfg) / "manifest.json", missing_ok=True)
    return with_recorded_repairs(cfg, manifest)


def check_selection(cfg: config.Cascade, only_stage: str | None, retrain: bool = False) -> None:
    """``run --stage NAME`` trains NAME from the earlier stages' exports. Refused, with one line:
    before every earlier stage is done (there is nothing to start from), and when NAME is done
    already — training it again replaces the weights the later stages' lineage starts from, so it
    takes ``--retrain``, which discards NAME's outputs and every later stage's
    (:func:`discard_for_retrain`)."""
    if not only_stage:
        if retrain:
            raise config.ConfigError("--retrain: name the stage to train again with --stage NAME")
        return
    config.stage_by_name(cfg, only_stage)  # an unknown name: one line
    names = [s.name for s in cfg.stages]
    k = names.index(only_stage)
    manifest = run_dir(cfg) / "manifest.json"
    status = stage_status(run_dir(cfg))[0]
    missing = [n for n in names[:k] if status.get(n) != "done"]
    if missing:
        raise config.ConfigError(
            f"--stage {only_stage}: earlier stage(s) {', '.join(missing)} not done in {manifest}; "
            f"run without --stage to train every stage not yet done"
        )
    if status.get(only_stage) != "done":
        return
    repair = inserted_repairs(read_manifest(manifest, missing_ok=True)).get(only_stage)
    if repair and status.get(repair) != "done" and not retrain:
        return  # the repair stage the gate inserted after it runs now (run_cascade)
    later = [n for n in names[k + 1 :] if status.get(n, "pending") != "pending"]
    if not retrain:
        also = (
            f" and the later stage(s) {', '.join(later)}, whose lineage starts from it,"
            if later
            else ""
        )
        raise config.ConfigError(
            f"--stage {only_stage}: already done ({stage_dir(cfg, k) / 'hf'}, {manifest}); "
            f"add --retrain to discard its outputs{also} and train it again"
        )
    stage = cfg.stages[k]
    if (
        k
        and stage.boundary.optimizer == "carry"
        and checkpoint.latest(stage_dir(cfg, k - 1) / "checkpoint") is None
    ):
        raise config.ConfigError(
            f"--stage {only_stage} --retrain: it starts from stage {names[k - 1]}'s optimizer "
            f"state (boundary.optimizer=carry), which was removed when {only_stage} finished; "
            f"retrain {names[k - 1]} first (--stage {names[k - 1]} --retrain) or set "
            f"stages.{only_stage}.boundary.optimizer=reset"
        )


def discard_for_retrain(cfg: config.Cascade, name: str) -> list[str]:
    """``--retrain``: when stage ``name`` is done, delete its directory and every later stage's and
    mark them pending in the manifest (the gate's stop, which came after one of them, is lifted);
    returns the stages discarded. Nothing happens to a stage that is not done — so a requeued job
    that repeats ``--retrain`` resumes the retraining instead of discarding it again. Rank 0
    only."""
    status = stage_status(run_dir(cfg))[0]
    if status.get(name) != "done":
        return []
    k = [s.name for s in cfg.stages].index(name)
    gone = [s.name for s in cfg.stages[k:]]
    for j in range(k, len(cfg.stages)):
        shutil.rmtree(stage_dir(cfg, j), ignore_errors=True)
    reset_stages(run_dir(cfg) / "manifest.json", gone)
    log.warning("--retrain: discarded stage(s) %s of %s", ", ".join(gone), run_dir(cfg))
    return gone


__all__ = ["run_dir", "stage_dir", "check_selection", "discard_for_retrain"]
