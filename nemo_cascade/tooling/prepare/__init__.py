"""``nemo-cascade data prepare STAGE|all --out DIR``: the files the Nemotron-Cascade recipes read,
from the released Nemotron-Cascade sets and, for what was not released, from the public sets the
paper names.

Per stage (:data:`.stages.STAGES`; docs/recipes.md "## Data"): download (or read from
``--source-dir``) → convert to the recipe's row shape → check every row with the loader that will
read it (``data.loader``, ``data.schemas`` + the domain's label validator, ``data.preference``) →
de-duplicate (RL prompt sets) → decontaminate against every evaluation set the project ships (exact
text or a shared word 9-gram, §3.3; :mod:`.decontam`) → leave out RL prompts of the SFT files
prepared in the same folder (§4.1.2; :mod:`.disjoint`) and, given pass rates, code problems of the
wrong difficulty (§4.6.1; :mod:`.difficulty`) → write atomically, with ``manifest.json`` (rows,
drops per reason, sha256, sources and revisions). Modules: :mod:`.sources` (finding and streaming
files), :mod:`.released` (Cascade SFT / IF / math / SWE rows), :mod:`.helpsteer` (RM pairs and RLHF
prompts, §4.2, §4.3.1), :mod:`.code_sources` (TACO / APPS / DeepCoder, §4.6.1), :mod:`.disjoint` and
:mod:`.difficulty` (above), :mod:`.offtopic` (App. C.1 synthetic pairs), :mod:`.run` (the driver).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from nemo_cascade.tooling.prepare.decontam import build_index
from nemo_cascade.tooling.prepare.run import Generated, Settings, prepare, summary
from nemo_cascade.tooling.prepare.sources import PrepareError
from nemo_cascade.tooling.prepare.stages import STAGES, Part, stage_names, with_extra_part
from nemo_cascade.tooling.prepare.difficulty import DifficultyFilter, PassRates
from nemo_cascade.tooling.prepare.offtopic import OffTopicPairs


def _difficulty(stages: dict, always_solved: Optional[Path], never_solved: Optional[Path]):
    """§4.6.1's filter from the pass-rate files given (None when neither is)."""
    if always_solved is None and never_solved is None:
        return None
    if "rl-code" not in stages:
        raise PrepareError("--drop-always-solved / --drop-never-solved: the pass rates filter the "
                           "'rl-code' stage; prepare rl-code (or all)")

    files = (always_solved, never_solved)
    return DifficultyFilter(*(PassRates.read(Path(p)) if p is not None else None for p in files))


def prepare_command(
    spec: str,
    out: Path,
    *,
    source_dir: Optional[Path] = None,
    max_bad_rows: int = 0,
    force: bool = False,
    generator=None,
    progress: Optional[bool] = None,
    always_solved: Optional[Path] = None,
    never_solved: Optional[Path] = None,
) -> tuple[dict, list[str]]:
    """Prepare the stages ``spec`` names into ``out``; returns the manifest and the paths written or
    checked. ``generator``: :class:`.offtopic.GeneratorSettings` — adds App. C.1's synthetic pairs
    to the RM's file. ``always_solved`` / ``never_solved``: pass-rate files of §4.6.1's weaker /
    stronger reference model (:mod:`.difficulty`), filtering the code RL file."""
    names = stage_names(spec)
    if max_bad_rows < 0:
        raise PrepareError(f"--max-bad-rows: expected an integer >= 0, got {max_bad_rows}")
    if source_dir is not None and not Path(source_dir).is_dir():
        raise PrepareError(f"--source-dir {source_dir}: no such folder")
    taken = next((p for p in (Path(out), *Path(out).parents) if p.exists()), None)
    if taken is not None and not taken.is_dir():
        raise PrepareError(
            f"--out {out}: {taken} is a file; expected a folder (it is created if missing)")
    stages = {n: STAGES[n] for n in names}
    if generator is not None:
        if "rm" not in stages:
            raise PrepareError(
                "--generator-url: the synthetic pairs belong to the 'rm' stage; prepare rm (or all)"
            )

        pairs = OffTopicPairs(generator, source_dir, Path(out) / ".work" / "rm-offtopic.jsonl")
        part = Part(Generated("synthetic:off-topic", generator.revision, pairs.rows),
                    lambda rows: rows)
        stages["rm"] = tuple(with_extra_part(o, part) for o in stages["rm"])
    difficulty = _difficulty(stages, always_solved, never_solved)
    index = build_index()
    settings = Settings(Path(out), Path(source_dir) if source_dir else None, max_bad_rows, force,
                        progress, difficulty)
    manifest = prepare(stages, settings, index)
    return manifest, [o.path for n in names for o in stages[n]]


__all__ = ["prepare_command", "summary", "PrepareError", "STAGES"]
