"""A distill stage's teachers: which checkpoint teaches each domain, held in the actor as frozen
weights, and their log-probabilities on a rollout batch (docs/distill.md)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from nemo_cascade import config
from nemo_cascade.convert.shape import ModelFilesError, read_hf_config
from nemo_cascade.data.tokenizer import tokenizer_digest
from nemo_cascade.evaluate.eval_output import read_eval

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Teacher:
    domain: str
    source: str
    """As the recipe names it: ``best``, ``base``, a stage name or a folder."""
    folder: Path
    """The HF folder whose weights teach."""
    row: str = ""
    """The gate row it was chosen from (``best``), else empty."""


def domain_scores(row: Path, domain: str) -> float | None:
    """The mean avg@K of ``domain``'s suites in the row folder's eval.json; None without those
    suites."""
    suites = read_eval(row / "eval.json")["suites"].values()
    mine = [
        r["metrics"][f"avg@{r['decoding']['samples']}"] for r in suites if r["domain"] == domain
    ]
    return sum(mine) / len(mine) if mine else None


def best_row(rows: list[tuple[Path, str]], domain: str, where: str) -> tuple[Path, str]:
    """``(row folder, weights folder)`` of the row that scored highest on ``domain``'s suites (the
    earliest of equals: the least trained checkpoint with that score). ``rows`` is the matrix so
    far."""
    scored = [
        (score, k)
        for k, (row, _) in enumerate(rows)
        if (row / "eval.json").is_file() and (score := domain_scores(row, domain)) is not None
    ]
    if not scored:
        raise config.ConfigError(
            f"{where}: {domain}=best needs a gate row with a {domain} suite before "
            f"this stage; the rows so far ({[r.name for r, _ in rows]}) have none"
        )
    best = max(scored, key=lambda e: (e[0], -e[1]))[1]
    return rows[best]


def resolve(
    stage: config.Stage, rows: list[tuple[Path, str]], stage_folders: dict[str, Path], base: str
) -> list[Teacher]:
    """The teacher of each domain of ``stage``: ``rows`` are the gate rows before it with the
    weights each evaluated (base first), ``stage_folders`` the earlier stages' folders by name."""
    where = f"stages.{stage.name}.distill.teachers"
    out = []
    for domain, source in config.teacher_sources(stage).items():
        if source == "best":
            row, folder = best_row(rows, domain, where)
            out.append(Teacher(domain, source, Path(folder), row.name))
        elif source == "base":
            out.append(Teacher(domain, source, Path(base)))
        elif source in stage_folders:
            out.append(Teacher(domain, source, stage_folders[source] / "hf"))
        else:
            out.append(Teacher(domain, source, Path(source)))
    return out


def check_teacher(teacher: Teacher, student: str, where: str) -> None:
    """One line (ConfigError) unless the teacher's folder is a whole export with the student's shape
    and tokenizer: its log-probs must be over the same vocabulary, token for token."""
    folder = teacher.folder
    if not (folder / "config.json").is_file():
        raise config.ConfigError(
            f"{where}: {teacher.domain}={teacher.source}: {folder} holds no "
            f"config.json; expected a finished HF export"
        )
    try:
        theirs, mine = read_hf_config(folder), read_hf_config(student)
    except ModelFilesError as e:
        raise config.ConfigError(f"{where}: {teacher.domain}={teacher.source}: {e}") from None
    if theirs != mine:
        differs = [
            f.name
            for f in fields(mine)
            if f.compare and getattr(theirs, f.name) != getattr(mine, f.name)
        ]
        raise config.ConfigError(
            f"{where}: {teacher.domain}={teacher.source}: {folder} differs from the "
            f"student in {differs}; expected the student's shape and vocabulary"
        )
    if tokenizer_digest(folder) != tokenizer_digest(Path(student)):
        raise config.ConfigError(
            f"{where}: {teacher.domain}={teacher.source}: {folder}'s tokenizer "
            f"differs from the student's; expected the same token ids"
        )


class Teachers:
    """The teachers of one distill stage, loaded into ``actor`` as frozen weights (one copy
    each)."""

    def __init__(self, actor, teachers: list[Teacher], student: str, where: str):
        self.actor, self.by_domain = actor, {t.domain: t for t in teachers}
        self.bytes = 0
        loaded: dict[Path, str] = {}  # a folder teaching several domains is loaded once
        self.name_of: dict[str, str] = {}
        for t in teachers:
            if t.folder not in loaded:
                check_teacher(t, student, where)
                loaded[t.folder] = f"teacher:{t.domain}"
                self.bytes += actor.load_teacher(loaded[t.folder], str(t.folder))
            self.name_of[t.domain] = loaded[t.folder]
            log.info(
                "%s: %s taught by %s%s",
                where,
                t.domain,
                t.folder,
                f" (row {t.row})" if t.row else "",
            )

    def logprobs(self, batch, temperature: float) -> torch.Tensor:
        """``[B, T]``: at each position of a kept sequence, the log-prob of its token under its
        domain's teacher (at the sampling temperature, as the student's); 0 elsewhere. Each teacher
        runs the rows that hold its domain's sequences."""
        out = torch.zeros_like(batch.rollout_logprobs_B_T)
        index = batch.sequence_B_T
        for name in dict.fromkeys(self.name_of.values()):
            taught = [s for s, d in enumerate(batch.domains_S) if self.name_of[d] == name]
            if not taught:
                continue
            mine_B_T = torch.isin(index, torch.tensor(taught))
            rows = mine_B_T.any(dim=1).nonzero().flatten()
            layout = {k: v[rows] for k, v in batch.layout().items()}
            with self.actor.weights_of(name):
                lp = self.actor.logprobs(batch.tokens_B_T[rows], temperature, layout)
            out[rows] = torch.where(mine_B_T[rows], lp.to(out.dtype), out[rows])
        return out

    def describe(self) -> dict:
        """What the manifest records: domain → folder (and the row ``best`` chose)."""
        return {
            d: {"source": t.source, "folder": str(t.folder), **({"row": t.row} if t.row else {})}
            for d, t in self.by_domain.items()
        }


__all__ = ["Teacher", "Teachers", "resolve", "best_row", "domain_scores", "check_teacher"]
