"""A gate row's finished work, kept so that a job that ends in the middle of the row does not start it again.

The 8B gate's response budget is hundreds of millions of tokens: one row can outlast a job. So each chunk of a
suite's items is written, scored, to ``ROW/eval_partial/`` as soon as it is done (``SUITE/rank{r}-{first}.jsonl``,
the part format of step_rollouts.py), and a whole suite's result once the suite is done (``SUITE.json``). A
requeued job finds them: a done suite is taken as it is, a suite in progress generates only its chunks with no
part — with the seeds the chunk always has (keyed by the suite and its first item), so the finished row equals
an uninterrupted one. ``eval.json`` is written at the end of the row and the folder removed.

Every part names what it was computed from: the model's weight files (names, sizes, modification times), the
suite's decoding, data, verifier settings and the world size. A part of another model or settings is set aside
with one log line and its chunk evaluated again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from .. import ranks
from ..files import read_json, write_text_atomically
from ..step_rollouts import read_part, set_aside, write_part
from ..types import Prompt, PromptGroup

FOLDER = "eval_partial"
log = logging.getLogger(__name__)


def model_identity(weights: str | Path) -> str:
    """What tells one model's weights from another's without reading them: each weight file's name, size and
    modification time (a re-exported model has new files)."""
    folder = Path(weights)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []
    stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return hashlib.sha256(json.dumps([str(folder.resolve()), stats]).encode()).hexdigest()[:20]


class RowProgress:
    """The finished chunks and suites of the row in ``out_dir`` for the model at ``weights``."""

    def __init__(self, out_dir: str | Path, weights: str | Path):
        self.folder = Path(out_dir) / FOLDER
        self.model = model_identity(weights)
        self.rank, self.world = ranks.world()

    def _identity(self, suite: str, settings: dict) -> str:
        blob = json.dumps({"model": self.model, "settings": settings}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    # -------------------------------------------------------------------------------------- chunks
    def chunk(self, suite: str, settings: dict, first: int, prompts: list[Prompt], samples: int
              ) -> list[PromptGroup] | None:
        """The saved groups of the chunk that starts at item ``first`` (``prompts`` its prompts), or None."""
        path = self._chunk_path(suite, first)
        if not path.is_file():
            return None
        try:
            groups = read_part(path, self._expected(suite, settings, first), prompts, samples)
            if sorted(groups) != list(range(len(prompts))):
                raise ValueError(f"holds {len(groups)} of the chunk's {len(prompts)} items")
        except (OSError, ValueError, KeyError, TypeError) as e:
            set_aside(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return None
        return [groups[i] for i in range(len(prompts))]

    def save_chunk(self, suite: str, settings: dict, first: int, groups: list[PromptGroup]) -> None:
        write_part(self._chunk_path(suite, first), self._expected(suite, settings, first), dict(enumerate(groups)))

    def _expected(self, suite: str, settings: dict, first: int) -> dict:
        return {"suite": suite, "first": first, "rank": self.rank, "world": self.world,
                "identity": self._identity(suite, settings)}

    def _chunk_path(self, suite: str, first: int) -> Path:
        return self.folder / suite / f"rank{self.rank:05d}-{first:07d}.jsonl"

    # -------------------------------------------------------------------------------------- suites
    def suite(self, suite: str, settings: dict) -> dict | None:
        """A done suite's result (``SuiteResult.to_json``) for this model and settings, else None."""
        path = self.folder / f"{suite}.json"
        if not path.is_file():
            return None
        try:
            saved = read_json(path, "a gate suite's result")
        except Exception as e:  # a damaged file is work to redo, not an error
            log.warning("gate: not using %s: %s; the suite is evaluated again", path, e)
            return None
        if saved.get("identity") != self._identity(suite, settings):
            log.warning("gate: not using %s: computed for another model or settings; evaluated again", path)
            return None
        return saved["result"]

    def save_suite(self, suite: str, settings: dict, result: dict) -> None:
        if ranks.is_main():
            write_text_atomically(self.folder / f"{suite}.json",
                                  json.dumps({"identity": self._identity(suite, settings), "result": result}))

    def remove(self) -> None:
        """The row's eval.json is written: nothing here is needed any more (rank 0 removes it)."""
        if ranks.is_main():
            shutil.rmtree(self.folder, ignore_errors=True)
