"""The driver of ``nemo-cascade data prepare``: every output file of the chosen stages, streamed
from its sources through conversion, the loaders' own schema checks, de-duplication and
decontamination into a file written atomically, with its entry in ``manifest.json``.

Manifest (``OUT/manifest.json``, rewritten atomically after each file): per file its rows, sha256
and bytes, the sources (dataset, subset, split, revision when downloaded, files, rows read), rows
dropped per reason (``decontaminated:<eval set>``, ``duplicate``, ``in_sft_set``, ``tie``, ``math``,
...), bad rows skipped, and per kind extra counts (SFT ``modes``: the thinking / non-thinking split;
code ``call_based``); an RL file's ``sft_disjoint``: the SFT files its prompts were kept apart from
(:mod:`.disjoint`, §4.1.2); and the evaluation sets the index was built from. Resuming: a file whose
entry has the same fingerprint (sources and their files, the index, an RL file's SFT files and
pass-rate files, this code's version) and whose sha256 still matches is skipped, so an interrupted
``all`` goes on where it stopped.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from nemo_cascade.data.loader import DataError
from nemo_cascade.data.sft_rows import parse_sft_row
from nemo_cascade.data.preference import parse_row
from nemo_cascade.runtime.files import file_sha256
from nemo_cascade.runtime.files import replaced_atomically, write_text_atomically
from nemo_cascade.tooling.prepare.code_sources import check_call_based, is_call_based
from nemo_cascade.tooling.prepare.decontam import EvalIndex, normalised
from nemo_cascade.tooling.prepare.difficulty import DROPS, DifficultyFilter
from nemo_cascade.tooling.prepare.disjoint import RL_KINDS, SftPrompts, sft_prompts
from nemo_cascade.tooling.prepare.released import sft_mode
from nemo_cascade.tooling.prepare.sources import (Bad, Drop, PrepareError, Source, count_rows,
                                                  locate, stream)
from nemo_cascade.tooling.prepare.stages import Output
from nemo_cascade.rewards import VALIDATORS, adapt_row
from nemo_cascade.runtime import console

log = logging.getLogger(__name__)

VERSION = 2
"""Bumped when a conversion changes what a file holds: older manifest entries are then redone (2:
tool calls and results kept as chat turns)."""
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Generated:
    """A source that is produced rather than downloaded (App. C.1's synthetic pairs)."""
    dataset: str
    revision: str
    """What produced it (models, settings): recorded and part of the fingerprint."""
    rows: Callable[[], Iterator]
    subset: str = ""
    split: str = ""

    @property
    def label(self) -> str:
        return self.dataset


@dataclass
class Settings:
    out: Path
    source_dir: Optional[Path] = None
    max_bad_rows: int = 0
    force: bool = False
    progress: Optional[bool] = None
    """Progress per source (console.progress: a bar on a terminal, plain lines in a file); None =
    on a terminal only."""
    difficulty: Optional[DifficultyFilter] = None
    """§4.6.1's difficulty filter of the code RL file (:mod:`.difficulty`); None = not applied."""


@dataclass
class _Counts:
    rows: int = 0
    bad: int = 0
    first_bad: str = ""
    dropped: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def count(self, key: str, sub: Optional[str] = None) -> None:
        if sub is None:
            self.extra[key] = self.extra.get(key, 0) + 1
        else:
            bucket = self.extra.setdefault(key, {})
            bucket[sub] = bucket.get(sub, 0) + 1


# ------------------------------------------------------------------------------------ checking rows

def _user_texts(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


def check_row(kind: str, row: dict, where: str) -> tuple[list[str], Any]:
    """Run the loader's own check of ``kind`` on a row about to be written (ValueError if it fails)
    and return ``(prompt texts to decontaminate, label)``."""
    if kind == "sft":
        messages, _ = parse_sft_row(row, where)
        return _user_texts(messages), None
    if kind == "pairs":
        messages, chosen, rejected = parse_row(row, where)
        return _user_texts(messages), (chosen, rejected)
    if kind == "code" and is_call_based(row):
        check_call_based(row, where)
        return [row["question"]], row["input_output"]

    messages, label = adapt_row(kind, row, where)
    try:
        VALIDATORS[kind](label)
    except ValueError as e:
        raise DataError(f"{where}: {e}") from None
    if kind == "swe":  # the issue, not the files the prompt quotes (no benchmark text is code)
        return [label["problem_statement"]], label
    return _user_texts(messages), label


def _dedup_key(mode: str, texts: list[str], label: Any) -> Optional[bytes]:
    if not mode:
        return None
    key = "\n".join(normalised(t) for t in texts)
    if mode == "row":
        key += "\n" + json.dumps(label, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


# -------------------------------------------------------------------------------------------- files

def read_manifest(out: Path) -> dict:
    path = out / MANIFEST
    if not path.is_file():
        return {"files": {}}
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PrepareError(
            f"{path}: not JSON ({e}); remove it to prepare every file again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise PrepareError(
            f"{path}: expected an object with 'files'; remove it to prepare every file again")
    return manifest


def _located(output: Output,
             source_dir: Optional[Path]) -> list[tuple[Any, list[Path], Optional[str]]]:
    out = []
    for part in output.parts:
        if isinstance(part.source, Generated):
            out.append((part, [], part.source.revision))
        else:
            files, revision = locate(part.source, source_dir)
            out.append((part, files, revision))
    return out


def _fingerprint(output: Output, located, index: EvalIndex, filters: dict) -> str:
    parts = [[p.source.dataset, p.source.subset, p.source.split, revision,
              [[f.name, f.stat().st_size] for f in files]] for p, files, revision in located]
    key = json.dumps({"version": VERSION, "path": output.path, "kind": output.kind,
                      "dedup": output.dedup, "parts": parts, "index": index.digest(), **filters},
                     sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _up_to_date(out: Path, entry: Optional[dict], fingerprint: str) -> bool:
    path = out / entry["path"] if entry else None
    return bool(entry and entry.get("fingerprint") == fingerprint and path.is_file()
                and file_sha256(path) == entry.get("sha256"))


def _rows_of(part, files: list[Path]) -> Iterator:
    return part.source.rows() if isinstance(part.source, Generated) else stream(files)


def _filters(output: Output, sft: Optional[SftPrompts], settings: Settings) -> dict:
    """The digests of what filters an RL file beyond its sources (the SFT prompts, code's pass
    rates): part of its fingerprint; empty for the other files."""
    out = {"sft": sft.digest()} if sft is not None else {}
    if output.kind == "code" and settings.difficulty is not None:
        out["difficulty"] = settings.difficulty.digest()
    return out


def _drop_reason(output: Output, texts: list[str], label: Any, seen: set, index: EvalIndex,
                 sft: Optional[SftPrompts], settings: Settings, counts: _Counts) -> Optional[str]:
    """Why a well-formed row is left out: a duplicate, a prompt of an evaluation set, of an SFT set
    (RL files, §4.1.2), or of the wrong difficulty (code, §4.6.1); None to keep it."""
    key = _dedup_key(output.dedup, texts, label)
    if key is not None:
        if key in seen:
            return "duplicate"
        seen.add(key)
    leak = index.match(texts)
    if leak is not None:
        return f"decontaminated:{leak}"
    if sft is not None and sft.holds(output.kind, texts):
        return "in_sft_set"
    if output.kind == "code" and settings.difficulty is not None:
        reason, missing = settings.difficulty.verdicts(texts)
        for which in missing:
            counts.count("difficulty_not_measured", which)
        return reason
    return None


def _kept(output: Output, part, where: str, row, counts: _Counts, seen: set, index: EvalIndex,
          settings: Settings, sft: Optional[SftPrompts] = None) -> bool:
    """Whether a converted row goes into the file. A ``Drop``, a bad row (``Bad``, or one the
    loader's own check refuses; more than ``--max-bad-rows`` of them stop with the first one's
    line) and a row :func:`_drop_reason` leaves out are counted in ``counts``; a kept row is
    counted per SFT mode, call-based code and source."""
    if isinstance(row, Drop):
        counts.drop(row.reason)
        return False
    if not isinstance(row, Bad):
        try:
            texts, label = check_row(output.kind, row, where)
        except ValueError as e:
            row = Bad(str(e) if str(e).startswith(where) else f"{where}: {e}")
    if isinstance(row, Bad):
        counts.bad += 1
        counts.first_bad = counts.first_bad or row.message
        if counts.bad > settings.max_bad_rows:
            more = f" (--max-bad-rows={settings.max_bad_rows})" if settings.max_bad_rows else ""
            raise PrepareError(row.message + more)
        return False
    reason = _drop_reason(output, texts, label, seen, index, sft, settings, counts)
    if reason is not None:
        counts.drop(reason)
        return False
    if output.kind == "sft":
        counts.count("modes", sft_mode(row))
    elif output.kind == "code" and is_call_based(row):
        counts.count("call_based")
    counts.count("rows_per_source", part.source.label)
    return True


def _nothing_left(output: Output, located, counts: _Counts, sft: Optional[SftPrompts]) -> str:
    """The one-line error of a file whose every row was left out."""
    labels = ", ".join(p.source.label for p, _, _ in located)
    inside = counts.dropped.get("in_sft_set", 0)
    if sft is not None and inside:
        return (f"{output.path}: every prompt of {labels} left is a prompt of the SFT sets "
                f"prepared in this --out ({inside} in {', '.join(sft.files)}; RL prompts must be "
                f"disjoint from SFT prompts, §4.1.2) (dropped: {counts.dropped})")
    return f"{output.path}: no rows left from {labels} (dropped: {counts.dropped or 'none'})"


def _filter_record(output: Output, sft: Optional[SftPrompts], settings: Settings) -> dict:
    """What an RL file was filtered by, for its manifest entry: the SFT files, code's pass rates."""
    out = {"sft_disjoint": dict(sft.files)} if sft is not None else {}
    if output.kind == "code" and settings.difficulty is not None:
        out["difficulty"] = {r: getattr(settings.difficulty, r).path for r in DROPS
                             if getattr(settings.difficulty, r) is not None}
    return out


def write_output(stage: str, output: Output, settings: Settings, index: EvalIndex, located,
                 fingerprint: str, sft: Optional[SftPrompts] = None) -> dict:
    """Write one output file (atomically) and return its manifest entry. ``sft``: an RL file's SFT
    prompts, which its rows must not repeat (§4.1.2)."""
    counts, seen, sources = _Counts(), set(), []
    target = settings.out / output.path
    sha = hashlib.sha256()
    with replaced_atomically(target) as tmp, open(tmp, "wb") as f:
        for part, files, revision in located:
            read = 0
            shown = console.stream().isatty() if settings.progress is None else settings.progress
            total = count_rows(files) if files else None
            bar = console.progress(total, f"{output.path} <- {part.source.label}", "row",
                                   disable=not shown)
            for where, row in part.convert(_rows_of(part, files)):
                read += 1
                bar.update(1)
                if not _kept(output, part, where, row, counts, seen, index, settings, sft):
                    continue
                data = (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()
                f.write(data)
                sha.update(data)
                counts.rows += 1
            bar.close()
            sources.append({"dataset": part.source.dataset, "subset": part.source.subset,
                            "split": part.source.split, "revision": revision,
                            "files": [str(p) for p in files], "rows_read": read})
        if counts.rows == 0:  # before the rename: an empty file never replaces a good one
            raise PrepareError(_nothing_left(output, located, counts, sft))
    if counts.bad:
        log.warning("%s: skipped %d bad rows (--max-bad-rows=%d); first: %s", output.path,
                    counts.bad, settings.max_bad_rows, counts.first_bad)
    return {"stage": stage, "path": output.path, "kind": output.kind, "rows": counts.rows,
            "sha256": sha.hexdigest(), "bytes": target.stat().st_size, "fingerprint": fingerprint,
            "sources": sources, "dropped": dict(sorted(counts.dropped.items())),
            "bad_rows": counts.bad, "first_bad_row": counts.first_bad, **counts.extra,
            **_filter_record(output, sft, settings)}


def prepare(stages: dict[str, tuple[Output, ...]], settings: Settings, index: EvalIndex) -> dict:
    """Prepare every output of ``stages`` (name → outputs) into ``settings.out``; returns the
    manifest."""
    settings.out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(settings.out)
    manifest["decontamination"] = {"n": 9, "eval_sets": index.stats}
    sft = None  # the SFT prompts, read once for every RL file while the SFT files stay the same
    for stage, outputs in stages.items():
        for output in outputs:
            rl = output.kind in RL_KINDS
            sft = sft_prompts(settings.out, manifest, sft) if rl else sft
            located = _located(output, settings.source_dir)
            filters = _filters(output, sft if rl else None, settings)
            fingerprint = _fingerprint(output, located, index, filters)
            entry = manifest["files"].get(output.path)
            if not settings.force and _up_to_date(settings.out, entry, fingerprint):
                log.info("%s: up to date (%d rows), skipped", output.path, entry["rows"])
                continue
            entry = write_output(stage, output, settings, index, located, fingerprint,
                                 sft if rl else None)
            manifest["files"][output.path] = entry
            write_text_atomically(settings.out / MANIFEST,
                                  json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            log.info("%s: %d rows; dropped %s", output.path, entry["rows"],
                     entry["dropped"] or "none")
    write_text_atomically(settings.out / MANIFEST,
                          json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def summary(manifest: dict, paths: list[str]) -> str:
    """One line per output file: rows, drops, sha256 prefix."""
    lines = []
    for path in paths:
        e = manifest["files"][path]
        dropped = ", ".join(f"{k} {v}" for k, v in e["dropped"].items()) or "none"
        lines.append(f"{path}: {e['rows']} rows (dropped: {dropped}; bad rows: {e['bad_rows']}) "
                     f"sha256 {e['sha256'][:12]}")
    return "\n".join(lines)


__all__ = ["Generated", "Settings", "prepare", "write_output", "check_row", "read_manifest",
           "summary", "VERSION", "MANIFEST", "Source"]
