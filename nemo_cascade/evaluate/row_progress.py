"""A gate row's finished work, kept so that a job that ends in the middle of the row does not start
it again.
The 8B gate's response budget is hundreds of millions of tokens: one row, even one chunk of items,
can outlast a job. So each item's group of samples is written to ``ROW/eval_partial/SUITE/`` as it
finishes (the rollout checkpoints of step_rollouts.py, a chunk standing for a step), the chunk's
groups again once scored, and a whole suite's result once the suite is done (``SUITE.json``). A
requeued job finds them: a done suite is taken as it is, a chunk in progress generates only its
items with no group — with the seeds of their places in the chunk (keyed by the suite and its first
item), so the finished row equals an uninterrupted one. ``eval.json`` is written at the end of the
row and the folder removed.
Every part names what it was computed from: the model's weight files (names, sizes, modification
times), the suite's decoding, data, verifier settings and the world size. A part of another model or
settings is set aside with one log line and its chunk evaluated again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from ..runtime import ranks
from ..errors import CascadeError
from ..runtime.files import read_json, write_text_atomically
from ..runtime.step_rollouts import StepRollouts

FOLDER = "eval_partial"
log = logging.getLogger(__name__)


def model_identity(weights: str | Path) -> str:
    """What tells one model's weights from another's without reading them: each weight file's
    name, size and modification time (a re-exported model has new files)."""
    folder = Path(weights)
    files = (
        sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
        if folder.is_dir()
        else []
    )
    stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return hashlib.sha256(json.dumps([str(folder.resolve()), stats]).encode()).hexdigest()[:20]


class RowProgress:
    """The finished chunks and suites of the row in ``out_dir`` for the model at ``weights``."""

    def __init__(self, out_dir: str | Path, weights: str | Path, flush_seconds: float = 60.0):
        self.folder = Path(out_dir) / FOLDER
        self.model = model_identity(weights)
        self.flush_seconds = flush_seconds

    def _identity(self, suite: str, settings: dict) -> str:
        blob = json.dumps({"model": self.model, "settings": settings}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    # -------------------------------------------------------------------------------------- chunks
    def chunks(self, suite: str, settings: dict) -> StepRollouts:
        """The suite's chunk store: a chunk's groups by their place, kept as they finish
        (``keep``), the whole chunk scored at its end (``end_round``); a chunk is a "step"
        numbered by its first item, round 0."""
        return StepRollouts(
            self.folder / suite, self._identity(suite, settings), self.flush_seconds
        )

    # -------------------------------------------------------------------------------------- suites
    def suite(self, suite: str, settings: dict) -> dict | None:
        """A done suite's result (``SuiteResult.to_json``) for this model and settings, or None."""
        path = self.folder / f"{suite}.json"
        if not path.is_file():
            return None
        try:
            saved = read_json(path, "a gate suite's result")
        except CascadeError as e:  # a damaged file is work to redo, not an error
            log.warning("gate: not using %s: %s; the suite is evaluated again", path, e)
            return None
        if saved.get("identity") != self._identity(suite, settings):
            log.warning(
                "gate: not using %s: computed for another model or settings; evaluated again", path
            )
            return None
        return saved["result"]

    def save_suite(self, suite: str, settings: dict, result: dict) -> None:
        if ranks.is_main():
            write_text_atomically(
                self.folder / f"{suite}.json",
                json.dumps({"identity": self._identity(suite, settings), "result": result}),
            )

    def remove(self) -> None:
        """The row's eval.json is written: nothing here is needed any more (rank 0 removes it)."""
        if ranks.is_main():
            shutil.rmtree(self.folder, ignore_errors=True)
