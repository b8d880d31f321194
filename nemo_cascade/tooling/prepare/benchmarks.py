"""``nemo-cascade data prepare-eval NAME|all --out data/benchmarks``: the paper's benchmarks the
repository does not ship (LiveCodeBench v5 / v6, GPQA-Diamond, MMLU-Pro, ArenaHard), from the Hub.

Each file keeps its benchmark's own field layout, so the suites read it as the benchmark defines it
(``evaluate/paper_benchmarks.py``): LiveCodeBench rows of one release within the version's
contest-date window, GPQA's CSV records as JSON lines, MMLU-Pro's test split, ArenaHard v0.1's
questions joined with the baseline's (gpt-4-0314) answers. Every row written is checked by its
suite's own row check; a malformed one is one line naming its file and field (``--max-bad-rows N``
skips and counts up to N). Files are written atomically; ``OUT/manifest.json`` records rows, drops,
sha256, the sources with their revisions and the suite's data version (release, window, subset).
The training sets' de-duplication and decontamination do not apply: these files are test sets.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from nemo_cascade.evaluate.paper_benchmarks import (BENCHMARKS, LCB_V5, LCB_V6, ROW_ITEMS, Window,
                                                    contest_date)
from nemo_cascade.evaluate.suites import get_suite
from nemo_cascade.runtime.files import replaced_atomically, write_text_atomically
from nemo_cascade.tooling.prepare.run import MANIFEST, read_manifest
from nemo_cascade.tooling.prepare.sources import (Bad, Drop, PrepareError, Source, locate, per_row,
                                                  stream)
from nemo_cascade.tooling.prepare.stages import Part, checked_names

LCB = "livecodebench/code_generation_lite"
LCB_RELEASES = {"release_v5": tuple(f"test{k}.jsonl" for k in ("", 2, 3, 4, 5)),
                "release_v6": tuple(f"test{k}.jsonl" for k in ("", 2, 3, 4, 5, 6))}
"""A release is its own file and those of every release before it (the dataset's loading script)."""
ARENA = "lmarena-ai/arena-hard-auto"
ARENA_QUESTIONS = "data/arena-hard-v0.1/question.jsonl"
ARENA_BASELINE = "data/arena-hard-v0.1/model_answer/gpt-4-0314.jsonl"


@dataclass(frozen=True)
class Benchmark:
    suite: str
    """The suite that reads the file; the file's path under ``--out`` is its default data's."""
    parts: tuple[Part, ...]

    @property
    def path(self) -> str:
        return get_suite(self.suite).default_data().relative_to(BENCHMARKS).as_posix()


def in_window(window: Window):
    """Converter: a LiveCodeBench row as it is, or ``Drop("outside_window")``."""
    def keep(row: dict, where: str):
        inside = window.start <= contest_date(row, where) < window.end
        return row if inside else Drop("outside_window")
    return per_row(keep)


def _lcb(suite: str, window: Window) -> Benchmark:
    source = Source(LCB, split="test", paths=LCB_RELEASES[window.release])
    return Benchmark(suite, (Part(source, in_window(window)),))


def _as_is(rows):
    return rows


def _text(value, where: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: expected {what} (a non-empty string)")
    return value


def _first_turn(turns) -> Optional[str]:
    ok = isinstance(turns, list) and turns and isinstance(turns[0], dict)
    return turns[0].get("content") if ok else None


def arena_question(row: dict, where: str) -> dict:
    """A question row (``uid`` + ``prompt``, or the first release's ``question_id`` + ``turns``)."""
    prompt = row.get("prompt") if "prompt" in row else _first_turn(row.get("turns"))
    return {"uid": _text(row.get("uid", row.get("question_id")), where, "field 'uid'"),
            "category": row.get("category", ""), "cluster": row.get("cluster", ""),
            "prompt": _text(prompt, where, "field 'prompt'")}


def arena_answer(row: dict, where: str) -> tuple[str, str, str]:
    """``(uid, model, answer)`` of a model-answer row (``messages`` with ``{"answer"}`` content, or
    the first release's ``choices[0].turns[0].content``)."""
    try:
        if "messages" in row:
            content = row["messages"][-1]["content"]
            answer = content.get("answer") if isinstance(content, dict) else content
        else:
            answer = row["choices"][0]["turns"][0]["content"]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"{where}: expected field 'messages' or 'choices' holding the answer"
                         ) from None
    return (_text(row.get("uid", row.get("question_id")), where, "field 'uid'"),
            _text(row.get("model", row.get("model_id")), where, "field 'model'"),
            _text(answer, where, "an answer"))


def arena_rows(rows) -> Iterator:
    """Converter of the question file and the baseline's answers (in any order): one row per
    question with its baseline answer, in question order; a question without one is a bad row."""
    questions, answers = [], {}
    for where, row in rows:
        try:
            if isinstance(row, Bad):
                yield where, row
            elif "model" in row or "model_id" in row:
                uid, model, answer = arena_answer(row, where)
                answers[uid] = (model, answer)
            else:
                questions.append((where, arena_question(row, where)))
        except ValueError as e:
            yield where, Bad(str(e))
    for where, q in questions:
        if q["uid"] not in answers:
            yield where, Bad(f"{where}: question {q['uid']} has no answer in {ARENA_BASELINE}")
            continue
        model, answer = answers[q["uid"]]
        yield where, {**q, "baseline_model": model, "baseline": answer}


BENCHMARK_FILES: dict[str, tuple[Benchmark, ...]] = {
    "livecodebench": (_lcb("lcb-v5", LCB_V5), _lcb("lcb-v6", LCB_V6)),
    "gpqa-diamond": (Benchmark("gpqa-diamond", (
        Part(Source("Idavidrein/gpqa", paths=("gpqa_diamond.csv",)), _as_is),)),),
    "mmlu-pro": (Benchmark("mmlu-pro", (
        Part(Source("TIGER-Lab/MMLU-Pro", split="test"), _as_is),)),),
    "arena-hard": (Benchmark("arena-hard", (
        Part(Source(ARENA, paths=(ARENA_QUESTIONS, ARENA_BASELINE)), arena_rows),)),),
}
"""``data prepare-eval NAME`` → its files. GPQA is gated: accept its terms on the Hub first."""


def benchmark_names(spec: str) -> list[str]:
    return checked_names(spec, BENCHMARK_FILES, "data prepare-eval", "benchmark")


@dataclass
class _File:
    """What one benchmark file got so far."""
    max_bad_rows: int
    rows: int = 0
    bad: int = 0
    first_bad: str = ""
    dropped: dict = field(default_factory=dict)
    sha: Any = field(default_factory=hashlib.sha256)

    def bad_row(self, message: str) -> None:
        self.bad += 1
        self.first_bad = self.first_bad or message
        if self.bad > self.max_bad_rows:
            more = f" (--max-bad-rows={self.max_bad_rows})" if self.max_bad_rows else ""
            raise PrepareError(message + more)


def _kept(suite: str, where: str, row, got: _File) -> bool:
    """Whether a converted row is written: a Drop is counted, and so is a bad row (or one the
    suite's row check refuses)."""
    if isinstance(row, Drop):
        got.dropped[row.reason] = got.dropped.get(row.reason, 0) + 1
        return False
    if not isinstance(row, Bad):
        try:
            if ROW_ITEMS[suite](row, where, 0) is not None:
                return True
            row = Bad(f"{where}: not an item of suite {suite}")
        except ValueError as e:
            row = Bad(str(e))
    got.bad_row(row.message)
    return False


def _write_part(part: Part, suite: str, source_dir: Optional[Path], f, got: _File) -> dict:
    files, revision = locate(part.source, source_dir)
    read = 0
    for where, row in part.convert(stream(files)):
        read += 1
        if _kept(suite, where, row, got):
            data = (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()
            f.write(data)
            got.sha.update(data)
            got.rows += 1
    return {"dataset": part.source.dataset, "split": part.source.split, "revision": revision,
            "files": [str(p) for p in files], "rows_read": read}


def write_benchmark(bench: Benchmark, out: Path, source_dir: Optional[Path],
                    max_bad_rows: int) -> dict:
    """Write one benchmark file (atomically) and return its manifest entry."""
    got = _File(max_bad_rows)
    with replaced_atomically(out / bench.path) as tmp, open(tmp, "wb") as f:
        sources = [_write_part(part, bench.suite, source_dir, f, got) for part in bench.parts]
        if got.rows == 0:  # before the rename: an empty file never replaces a good one
            raise PrepareError(f"{bench.path}: no rows left (dropped: {got.dropped or 'none'})")
    return {"path": bench.path, "suite": bench.suite,
            "version": get_suite(bench.suite).data_version, "rows": got.rows,
            "sha256": got.sha.hexdigest(), "sources": sources,
            "bytes": (out / bench.path).stat().st_size, "dropped": got.dropped,
            "bad_rows": got.bad, "first_bad_row": got.first_bad}


def prepare_benchmarks(spec: str, out: Path, *, source_dir: Optional[Path] = None,
                       max_bad_rows: int = 0) -> tuple[dict, list[str]]:
    """Write the files of the benchmarks ``spec`` names into ``out``; returns the manifest and
    their paths."""
    names = benchmark_names(spec)
    if max_bad_rows < 0:
        raise PrepareError(f"--max-bad-rows: expected an integer >= 0, got {max_bad_rows}")
    if source_dir is not None and not Path(source_dir).is_dir():
        raise PrepareError(f"--source-dir {source_dir}: no such folder")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest, paths = read_manifest(out), []
    for bench in (b for name in names for b in BENCHMARK_FILES[name]):
        manifest["files"][bench.path] = write_benchmark(bench, out, source_dir, max_bad_rows)
        write_text_atomically(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        paths.append(bench.path)
    return manifest, paths


__all__ = ["BENCHMARK_FILES", "Benchmark", "LCB_RELEASES", "in_window", "arena_question",
           "arena_answer", "arena_rows", "benchmark_names", "write_benchmark", "prepare_benchmarks"]
