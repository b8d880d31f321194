"""Rollout checkpoints: the scored groups of an unfinished GRPO step, kept so that a stop loses no
generation.
At the paper's response lengths one code-RL step can outlast a 4-hour job; a checkpoint after the
step would never be reached. So every rank writes its groups to the stage folder as they finish
(scored, or generated when scoring waits for the whole batch), at most every ``flush_seconds``, and
all of them at the end of each generation round. A resumed step finds them and generates only the
prompts that have none, with the seeds the whole batch would have used
(``RolloutEngine.generate(positions=...)``) and the weights the step began with (the checkpoint
after the step before), so on CPU it equals an uninterrupted step bit for bit.
Layout: ``rollouts/step_{step:06d}/rank{r:05d}-round{k:02d}-{part:05d}.jsonl``. A part's first line
is its header (step, round, rank, world, the run's identity, the number of groups and the sha256 of
the lines after it); each further line is one group with its place in the rank's share of the round.
Parts are written whole and renamed into place (files.py), later parts override earlier ones'
groups. A part that does not belong — another step, round, world size or identity (config and seed),
a prompt that is not the one at its place, a damaged file — is set aside with one log line naming it
and why, and its groups are generated again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import threading
import time
from pathlib import Path

from nemo_cascade.runtime import ranks
from nemo_cascade.runtime.files import replaced_atomically
from nemo_cascade.types import Prompt, PromptGroup

FORMAT = 1
_STEP = re.compile(r"step_(\d{6})$")
_PART = re.compile(r"rank(\d{5})-round(\d{2})-(\d{5})\.jsonl$")
log = logging.getLogger(__name__)


def prompt_digest(prompt: Prompt) -> str:
    """What ties a saved group to its prompt: the sha256 of the prompt's token ids (and its uid,
    for logs)."""
    return hashlib.sha256(json.dumps(prompt.prompt_tokens).encode()).hexdigest()[:16]


def _encode(index: int, group: PromptGroup) -> str:
    return json.dumps(
        {
            "index": index,
            "uid": group.prompt.uid,
            "prompt": prompt_digest(group.prompt),
            "tokens": group.response_tokens_G_T,
            "logprobs": group.rollout_logprobs_G_T,
            "finish": group.finish_reason_G,
            "text": group.response_text_G,
            "rewards": group.rewards_G,
            "details": group.reward_details_G,
            "verdicts": group.verdicts_G,
        }
    )


def _decode(line: str, prompts: list[Prompt], group_size: int) -> tuple[int, PromptGroup]:
    """One saved group, bound to the live prompt at its place; ValueError if it is not that
    prompt's."""
    row = json.loads(line)
    index = row["index"]
    if not 0 <= index < len(prompts) or row["prompt"] != prompt_digest(prompts[index]):
        raise ValueError(
            f"group {index} ({row['uid']!r}) is not the prompt at that place of this round"
        )
    if len(row["tokens"]) != group_size:
        raise ValueError(
            f"group {index} has {len(row['tokens'])} samples, the stage samples {group_size}"
        )
    return index, PromptGroup(
        prompt=prompts[index],
        response_tokens_G_T=row["tokens"],
        rollout_logprobs_G_T=row["logprobs"],
        finish_reason_G=row["finish"],
        response_text_G=row["text"],
        rewards_G=row["rewards"],
        reward_details_G=row["details"],
        verdicts_G=row.get("verdicts", []),  # parts saved before verdicts were kept have none
    )


def write_part(path: Path, header: dict, groups: dict[int, PromptGroup]) -> None:
    """Write ``groups`` (by place) as one part file, whole or not at all: ``header`` (what they
    belong to), the format, their number and the sha256 of their lines, then one line per group."""
    body = "".join(_encode(i, g) + "\n" for i, g in sorted(groups.items()))
    head = {
        "format": FORMAT,
        **header,
        "groups": len(groups),
        "sha256": hashlib.sha256(body.encode()).hexdigest(),
    }
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps(head) + "\n" + body)


def read_part(
    path: Path, expected: dict, prompts: list[Prompt], group_size: int
) -> dict[int, PromptGroup]:
    """The groups of the part file ``path`` by place, bound to ``prompts``; ValueError (one line:
    why) if its header differs from ``expected`` or it is damaged, KeyError/TypeError if it is
    not a part at all."""
    header_line, _, body = path.read_text().partition("\n")
    header = json.loads(header_line)
    for key, want in {"format": FORMAT, **expected}.items():
        if header.get(key) != want:
            raise ValueError(f"written with {key}={header.get(key)!r}, this run has {want!r}")
    if hashlib.sha256(body.encode()).hexdigest() != header["sha256"]:
        raise ValueError("damaged: its groups do not match the sha256 in its header (truncated?)")
    lines = body.splitlines()
    if len(lines) != header["groups"]:
        raise ValueError(f"damaged: {len(lines)} groups, its header says {header['groups']}")
    return dict(_decode(line, prompts, group_size) for line in lines)


def set_aside(path: Path, why: str) -> None:
    """Keep a part that does not belong out of every later read, without deleting what a user may
    inspect."""
    log.warning("rollouts: not using %s: %s; its groups are generated again", path, why)
    path.replace(path.with_name(path.name + ".unused"))


class StepRollouts:
    """One stage's rollout checkpoints under ``root`` (``stage_dir/rollouts``). ``identity``
    names what the groups were sampled under (the stage's config hash, its sampling seed): saved
    groups of another identity are not used. ``flush_seconds``: the longest a finished group
    waits in memory (0: written at once)."""

    def __init__(self, root: str | Path, identity: str, flush_seconds: float):
        self.root, self.identity, self.flush_seconds = Path(root), identity, flush_seconds
        self.rank, self.world = ranks.world()
        self._lock = threading.Lock()
        self._pending: dict[int, PromptGroup] = {}
        self._step = self._round = self._parts = 0
        self._flushed_at = time.monotonic()
        self._scored: set[int] = set()  # places of the open round whose scored group is on disk
        self._timer: threading.Timer | None = (
            None  # writes what waits once flush_seconds have passed
        )

    # ------------------------------------------------------------------------------------------
    # resume
    def begin(self, step: int) -> None:
        """The stage (re)starts at ``step`` (collective): saved rollouts of any other step are
        removed — those of later steps were sampled by weights this run will compute again — and
        this step's are kept."""
        if ranks.is_main() and self.root.is_dir():
            for folder in sorted(self.root.iterdir()):
                m = _STEP.match(folder.name)
                if m and int(m.group(1)) != step:
                    log.info("rollouts: removing %s (the stage resumes at step %d)", folder, step)
                    shutil.rmtree(folder, ignore_errors=True)
        ranks.barrier()

    def saved(
        self, step: int, round_: int, prompts: list[Prompt], group_size: int
    ) -> dict[int, PromptGroup]:
        """This rank's saved groups of ``round_`` of ``step`` by their place in ``prompts`` (its
        share of the round); parts that do not belong are set aside with a log line. Also opens
        the round for :meth:`keep`."""
        self._open(step, round_)
        found: dict[int, PromptGroup] = {}
        folder = self._folder(step)
        for path in sorted(folder.glob(f"rank{self.rank:05d}-round{round_:02d}-*.jsonl")):
            try:
                found.update(self._read(path, step, round_, prompts, group_size))
            except (OSError, ValueError, KeyError, TypeError) as e:
                set_aside(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
            self._parts = max(self._parts, int(_PART.match(path.name).group(3)) + 1)
        self._scored = {i for i, group in found.items() if group.rewards_G}
        if found:
            log.info(
                "rollouts: step %d round %d: %d of %d groups of rank %d loaded from %s",
                step,
                round_,
                len(found),
                len(prompts),
                self.rank,
                folder,
            )
        return found

    def _read(
        self, path: Path, step: int, round_: int, prompts: list[Prompt], group_size: int
    ) -> dict:
        expected = {
            "step": step,
            "round": round_,
            "rank": self.rank,
            "world": self.world,
            "identity": self.identity,
        }
        return read_part(path, expected, prompts, group_size)

    # ------------------------------------------------------------------------------------------
    # saving
    def _open(self, step: int, round_: int) -> None:
        with self._lock:
            self._step, self._round, self._parts, self._pending, self._scored = (
                step,
                round_,
                0,
                {},
                set(),
            )
            # nothing to write: resets the clock and stops a timer of the round before
            self._write_pending()

    def keep(self, index: int, group: PromptGroup) -> None:
        """A finished group at ``index`` of this rank's share of the open round (thread-safe:
        scoring threads call it); written with the others kept since the last write once
        ``flush_seconds`` have passed."""
        with self._lock:
            if (
                index in self._scored
            ):  # end_round wrote it already (a scoring thread's late callback)
                return
            self._pending[index] = group
            waited = time.monotonic() - self._flushed_at
            if waited >= self.flush_seconds:
                self._write_aside()
            elif (
                self._timer is None
            ):  # no later group may come for long: a timer writes this one in time
                self._timer = threading.Timer(self.flush_seconds - waited, self._flush_aside)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write every kept group not yet written (before a stop)."""
        with self._lock:
            self._write_pending()

    def _flush_aside(self) -> None:
        with self._lock:
            self._write_aside()

    def _write_aside(self) -> None:
        """A write on a scoring thread or the timer's: an error there (a full disk) would only be
        logged with its traceback, so the groups stay pending and the round's end, on the main
        thread, writes them again and raises what it meets."""
        try:
            self._write_pending()
        except Exception as e:  # noqa: BLE001 - end_round's write meets it again, and raises
            log.info("rollouts: a part is written again at the round's end: %s", e)

    def end_round(self, groups: dict[int, PromptGroup]) -> None:
        """The open round is generated and scored (``groups``: this rank's, by place): write
        every group whose scored form is not on disk yet, so that a stop during the update finds
        the whole batch."""
        with self._lock:
            self._pending.update({i: g for i, g in groups.items() if i not in self._scored})
            self._write_pending()

    def _write_pending(self) -> None:
        self._flushed_at = time.monotonic()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        header = {
            "step": self._step,
            "round": self._round,
            "rank": self.rank,
            "world": self.world,
            "identity": self.identity,
        }
        name = f"rank{self.rank:05d}-round{self._round:02d}-{self._parts:05d}.jsonl"
        write_part(self._folder(self._step) / name, header, self._pending)
        self._parts += 1
        self._scored |= {i for i, g in self._pending.items() if g.rewards_G}
        self._pending = {}

    def remove_through(self, step: int) -> None:
        """A checkpoint after ``step`` is written: the saved rollouts of that step and earlier
        ones are not needed by any resume (rank 0 removes them; every rank's writes for them
        ended with their round)."""
        if ranks.is_main() and self.root.is_dir():
            for folder in self.root.iterdir():
                m = _STEP.match(folder.name)
                if m and int(m.group(1)) <= step:
                    shutil.rmtree(folder, ignore_errors=True)

    def _folder(self, step: int) -> Path:
        return self.root / f"step_{step:06d}"
