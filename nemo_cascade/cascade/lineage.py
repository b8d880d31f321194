"""``manifest.json``: where every stage's weights came from and what made them.

Lineage (paper §4.1: each stage starts from the previous stage's checkpoint) is what makes a cascade
auditable: the git SHA and package versions of the code, the seed, the base model, and per stage its
status, parent checkpoint, the sha256 of its resolved config and of its data, its exported
checkpoint, and the forgetting gate's verdict. A re-run reads the manifest back: finished stages are
skipped, a running one is resumed — but only with the config it started with; ``run --stage NAME
--retrain`` resets a finished stage and the ones after it (stage_selection.discard_for_retrain). The
manifest records the config schema version the run was created with (``config.SCHEMA_VERSION``; none
recorded: 1), and its hashes are computed under that version, so fields added to the config since do
not block a resume while they hold their defaults (config/versions.py).
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import MISSING, Field, fields, is_dataclass
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.runtime import ranks
from nemo_cascade.config.versions import added_after
from nemo_cascade.runtime.files import read_json, write_text_atomically
from nemo_cascade.runtime.provenance import git_state, versions

log = logging.getLogger(__name__)


ENDPOINTS = ("reward_model_url", "judge_url")
"""Where a served model is reached, not what it computes: a requeued Slurm job serves the same RM on
another host, and the stage must still resume (docs/launch.md). Left out of the hashes."""

AFTER_TRAINING = ("evaluate", "checkpoint_every_minutes", "rollout_checkpoint_seconds",
                  "stop_margin_seconds", "released_after", "made_by")
"""What the cascade does around training (``Stage.evaluate``: the gate;
``Cascade.checkpoint_every_minutes``, ``rollout_checkpoint_seconds`` and ``stop_margin_seconds``:
when state is saved; ``Stage.released_after``, ``Model.made_by``: hints preflight gives), not what
the stages train: changing any of them for an interrupted run must not stop it from resuming. Left
out of the hashes."""

PATIENCE = ("collective_timeout_minutes", "stall_minutes")
"""How long ranks wait for each other (``Parallel.collective_timeout_minutes``) or for a rank to
advance (``Parallel.stall_minutes``), not what they compute: a run aborted by a timeout must
resume with a longer one. Left out of the hashes."""

HOW_READ = ("cache",)
"""How a data file is read (``Data.cache``: the tokenized cache or the whole file in memory), not
what is read: the same tokens either way (tests/unit/test_sft_loading.py), so switching it must not
block a resume. Left out of the hashes."""


def config_hash(obj, schema_version: int = config.SCHEMA_VERSION) -> str:
    """sha256 of a config section's canonical JSON (a stage, or the whole cascade), without
    :data:`ENDPOINTS`, :data:`AFTER_TRAINING`, :data:`PATIENCE` and :data:`HOW_READ`, and without
    the fields added after ``schema_version`` (``config.FIELDS_ADDED``) while they hold their
    defaults: a manifest's hashes are computed under the version it was created with, so a stage it
    recorded before a field existed still resumes."""
    return hashlib.sha256(json.dumps(_canonical(obj, schema_version),
                                     sort_keys=True).encode()).hexdigest()


def _canonical(obj, schema_version: int = config.SCHEMA_VERSION):
    """``config.to_dict(obj)`` less the fields :func:`config_hash` leaves out under
    ``schema_version``."""
    if is_dataclass(obj):
        later = added_after(schema_version).get(type(obj).__name__, ())
        return {f.name: _canonical(getattr(obj, f.name), schema_version) for f in fields(obj)
                if f.name not in ENDPOINTS + AFTER_TRAINING + PATIENCE + HOW_READ
                and not (f.name in later and getattr(obj, f.name) == _default(f))}
    if isinstance(obj, tuple):
        return [_canonical(v, schema_version) for v in obj]
    return obj


def _default(f: Field):
    """A field's default value, also for a section (``default_factory``: ``Stage.distill``)."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


class Manifest:
    """The run's manifest; only rank 0 writes it (atomically), every rank reads the same
    decisions."""

    def __init__(self, cfg: config.Cascade, path: Path, base_model: str,
                 data_hashes: dict[str, list[str]]):
        self.path = path
        new = not path.is_file()
        old = read_manifest(path, missing_ok=True)
        # The version the run was created with, kept on every rewrite: its stored stage hashes were
        # computed under it. Only a new run folder records the current one.
        self.schema_version = (config.SCHEMA_VERSION if new
                               else config.schema_version_of(old, str(path)))
        known = old.get("stages", {})
        stages = {s.name: known.get(s.name, {"status": "pending"}) for s in cfg.stages}
        for s in cfg.stages:
            entry = stages[s.name]
            entry.update(kind=s.kind, config_sha256=entry.get("config_sha256") or "")
            # a finished stage keeps the hashes of the data it trained on
            if entry.get("status") != "done":
                entry["data_sha256"] = data_hashes.get(s.name, [])
            elif entry.get("data_sha256") != data_hashes.get(s.name, entry.get("data_sha256")):
                log.warning("stage %s: its data changed since it finished; keeping its checkpoint",
                            s.name)
        self.data = {"schema_version": self.schema_version, "name": cfg.name,
                     "git_sha": git_state().get("sha", ""),
                     "versions": versions(), "seed": cfg.seed, "base_model": base_model,
                     "config_sha256": self.config_hash(cfg), "world_size": ranks.world()[1],
                     "stages": stages,
                     "stopped": old.get("stopped", "")}
        self._write()

    def config_hash(self, section) -> str:
        """:func:`config_hash` under this manifest's schema version: the hash to record for a stage
        and to compare with the recorded one."""
        return config_hash(section, self.schema_version)

    def status(self, stage: str) -> str:
        return self.data["stages"][stage].get("status", "pending")

    def done(self, stage: str) -> bool:
        return self.status(stage) == "done"

    def gated(self, stage: str) -> bool:
        """Whether a done stage has been through the forgetting gate (manifests written before this
        flag: yes)."""
        return self.data["stages"][stage].get("gated", True) is not False

    def check_resumable(self, stage: config.Stage) -> None:
        """A stage that was running continues only under the config it started with: resuming a
        checkpoint with another LR schedule, data or batch size silently trains a model no config
        describes."""
        entry = self.data["stages"][stage.name]
        status, saved = entry.get("status"), entry.get("config_sha256")
        if status not in ("running", "done") or saved in ("", self.config_hash(stage)):
            return
        if status == "running":
            raise config.ConfigError(
                f"stages.{stage.name}: its config changed since the interrupted run started it "
                f"(manifest config_sha256 {entry['config_sha256'][:12]}); restore that config or "
                f"delete {self.path.parent / 'stages'}/*-{stage.name} to start it over")
        log.warning("stage %s: finished under a different config; keeping its checkpoint",
                    stage.name)

    def set_stages(self, order: list[str], added: dict[str, dict]) -> None:
        """The stage entries in ``order`` (the names as the stages now run): kept ones as they are,
        ``added`` ones new, the rest dropped. The gate inserts or withdraws a repair stage
        (``gate.on_regression = repair``) before it has started."""
        stages = self.data["stages"]
        self.data["stages"] = {name: stages.get(name) or {"config_sha256": "", **added[name]}
                               for name in order}
        self._write()

    def update(self, stage: str, **fields) -> None:
        self.data["stages"][stage].update(fields)
        self._write()

    def stop(self, reason: str) -> None:
        self.data["stopped"] = reason
        self._write()

    def _write(self) -> None:
        if ranks.is_main():
            _write_json(self.path, self.data)


def _write_json(path: Path, data: dict) -> None:
    """Atomically: a reader (another rank, a launch task polling the status) sees the old file or
    the new one."""
    write_text_atomically(path, json.dumps(data, indent=2))


def read_manifest(path: Path, *, missing_ok: bool = False) -> dict:
    """The one reader of a run's manifest.json (``{}`` for a missing one if ``missing_ok``: before
    the first stage starts); a one-line ConfigError when it is missing, not JSON or not an
    object."""
    return read_json(path, "the run's manifest", missing_ok=missing_ok, error=config.ConfigError,
                     hint="restore or delete it")


def stage_status(run_dir: str | Path) -> tuple[dict[str, str], str]:
    """Per-stage status from a run's manifest.json ({} before the first stage starts) and its stop
    reason."""
    path = Path(run_dir) / "manifest.json"
    try:
        data = read_manifest(path, missing_ok=True)
    # replaced this instant on a filesystem without atomic rename: read again
    except config.ConfigError:
        time.sleep(0.5)
        data = read_manifest(path, missing_ok=True)
    statuses = {k: v.get("status", "pending") for k, v in data.get("stages", {}).items()}
    return statuses, data.get("stopped", "")


def reset_stages(path: Path, names: list[str]) -> None:
    """Mark stages pending again, forgetting their lineage (parent, hashes, export, gate verdict):
    their outputs were discarded to train them again. The gate's stop is lifted — it came after one
    of them."""
    data = read_manifest(path)
    for name in names:
        data["stages"][name] = {"status": "pending"}
    data["stopped"] = ""
    _write_json(path, data)


__all__ = ["Manifest", "config_hash", "read_manifest", "stage_status", "reset_stages"]
