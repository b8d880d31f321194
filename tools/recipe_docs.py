"""Writes the recipe tables of docs/recipes.md from the recipes; ``--check`` only says whether they
are current.

    .venv/bin/python tools/recipe_docs.py [--check]

Each table lies in a generated region; everything outside the regions (prose, the data and
environment tables, the memory plans) is left as written. A region names what it shows:

    <!-- generated from recipes/X.py:recipe,with_sft (cascade fields) by tools/recipe_docs.py; edit
    the recipe --> <!-- generated from recipes/X.py:with_sft (stage fields) by tools/recipe_docs.py;
    edit the recipe -->
    | field | ... | source |
    ...

    <!-- end generated -->

A cascade table has a column per recipe function, a stage table a column per stage of one function.
The rows, in order, and their "source" column are the recipe module's ``CASCADE_SOURCES`` /
``STAGE_SOURCES`` (field path → citation); the values are read from the built cascades, with the
``NEMO_CASCADE_*`` environment at its defaults. A stage cell is ``—`` where the field does not apply
to the stage (see :func:`shown`), and a value there that is not the default is an error rather than
a hidden setting. A new row is one line in the recipe's sources; a field to show only in the stages
that use it also gets a line in ``SHOWN``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import runpy
import sys
from dataclasses import is_dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Callable

from nemo_cascade import config

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "recipes.md"
COMMAND = "python tools/recipe_docs.py"
K = 1024

START = re.compile(
    r"<!-- generated from (?P<path>[^\s:]+):(?P<functions>[\w,]+) "
    r"\((?P<kind>cascade|stage) fields\) "
    r"by tools/recipe_docs\.py; edit the recipe -->")
END = "<!-- end generated -->"
SOURCES = {"cascade": "CASCADE_SOURCES", "stage": "STAGE_SOURCES"}


class RecipeDocError(ValueError):
    """A region the generator cannot fill: a bad marker, a missing recipe or function, a row naming
    no field."""


def _get(obj: Any, path: str) -> Any:
    return reduce(getattr, path.split("."), obj)


def _changed(stage: config.Stage, path: str) -> bool:
    return _get(stage, path) != _get(config.Stage(kind=stage.kind), path)


SHOWN: dict[str, Callable[[config.Stage, str], bool]] = {
    # Fields a stage table shows only where a recipe uses them; a field not listed here has a value
    # in every stage whose kind reads it (see `shown`).
    "length_curriculum": _changed,
    # it refills the dropped groups
    "grpo.refill_max_rounds": lambda s, _: s.grpo.drop_zero_variance_groups,
    "grpo.epoch_filter": _changed,
    # re-admission is part of the epoch filter
    "grpo.readmit_unsolved": lambda s, _: s.grpo.epoch_filter,
    "grpo.readmit_solved": lambda s, _: s.grpo.epoch_filter,
    "reward.if_rm_bonus": lambda s, _: s.domain == "ifeval",
    "boundary.optimizer": _changed,
    "boundary.data": _changed,
    "checkpoint_every": _changed,
    "evaluate": _changed,  # the few stages that skip the gate
    "data.min_prompt_tokens": _changed,
    "data.keep_mode": lambda s, _: s.kind == "sft",  # the SFT rows kept; RL prompts have no answer
}


def kinds_reading(path: str) -> tuple[str, ...] | None:
    """The stage kinds that read a field (None: every kind). Rewards, rollouts and GRPO settings are
    GRPO's."""
    head = path.split(".")[0]
    if head in ("domain", "grpo", "rollout", "reward", "length_curriculum"):
        return ("grpo",)
    if head.startswith("sft_"):
        return ("sft",)
    if head == "epochs":
        return ("sft", "reward_model")
    if head.startswith("rm_"):
        return ("reward_model",)
    return None


def shown(stage: config.Stage, path: str) -> bool:
    kinds = kinds_reading(path)
    if kinds is not None and stage.kind not in kinds:
        return False
    rule = SHOWN.get(path)
    return rule is None or rule(stage, path)


def text(value: Any) -> str:
    """A value as a command-line override writes it (``true``, ``2e-6``, ``a,b``,
    ``190:24576:filter``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return re.sub(r"e([+-])0+(\d)", r"e\1\2", repr(value))  # 2e-06 → 2e-6
    if isinstance(value, tuple):
        return ",".join(text(v) for v in value)
    # STEPS:TOKENS:OVERLONG[:T<temperature>] (config/overrides.py)
    if isinstance(value, config.LengthPhase):
        out = f"{value.steps}:{value.max_response_tokens}:{value.overlong}"
        return out if value.temperature is None else f"{out}:T{text(value.temperature)}"
    if is_dataclass(value):
        raise RecipeDocError(f"no table form for a {type(value).__name__}")
    return str(value)


def cell(value: Any, path: str) -> str:
    out = f"`{text(value)}`"
    if path.endswith("_tokens") and type(value) is int and value and value % K == 0:
        out += f" {value // K}K"  # the paper's "K" (1024 tokens) beside the exact count
    return out


def _value(obj: Any, path: str, where: str) -> Any:
    try:
        value = _get(obj, path)
    except AttributeError:
        raise RecipeDocError(
            f"{where}: row {path!r} names no field of {type(obj).__name__}") from None
    if is_dataclass(value):
        raise RecipeDocError(f"{where}: row {path!r} is a section; name one of its fields")
    return value


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def cascade_table(cascades: dict[str, config.Cascade], sources: dict[str, str],
                  where: str) -> list[str]:
    rows = [[f"`{path}`", *(cell(_value(c, path, where), path) for c in cascades.values()), source]
            for path, source in sources.items()]
    return _table(["field", *(f"`{fn}()`" for fn in cascades), "source"], rows)


def stage_table(cfg: config.Cascade, sources: dict[str, str], where: str) -> list[str]:
    rows = []
    for path, source in sources.items():
        cells = []
        for stage in cfg.stages:
            value = _value(stage, path, where)
            if shown(stage, path):
                cells.append(cell(value, path))
            elif value == _get(config.Stage(kind=stage.kind), path):
                cells.append("—")
            else:  # "—" says "the default": never hide a value the recipe sets
                raise RecipeDocError(
                    f"{where}: stage {stage.name!r} sets {path} = {value!r}, which its table would "
                    f"show as —; change tools/recipe_docs.py SHOWN")
        rows.append([f"`{path}`", *cells, source])
    return _table(["field", *(f"`{s.name}`" for s in cfg.stages), "source"], rows)


@contextlib.contextmanager
def default_environment():
    """The recipes read NEMO_CASCADE_* (model and data folders, server URLs) when called: the docs
    show defaults."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("NEMO_CASCADE_")}
    try:
        yield
    finally:
        os.environ.update(saved)


class Recipes:
    """Recipe modules by path, each run once."""

    def __init__(self, root: Path):
        self.root, self.modules = root, {}

    def module(self, path: str) -> dict[str, Any]:
        if path not in self.modules:
            file = self.root / path
            if not file.is_file():
                raise RecipeDocError(f"{path}: no such recipe")
            self.modules[path] = runpy.run_path(str(file))
        return self.modules[path]

    def cascade(self, path: str, fn: str) -> config.Cascade:
        module = self.module(path)
        if not callable(module.get(fn)):
            raise RecipeDocError(f"{path}: no function {fn}()")
        cfg = module[fn]()
        if not isinstance(cfg, config.Cascade):
            raise RecipeDocError(f"{path}: {fn}() returned {type(cfg).__name__}, not a Cascade")
        return cfg

    def sources(self, path: str, kind: str) -> dict[str, str]:
        sources = self.module(path).get(SOURCES[kind])
        if not isinstance(sources, dict) or not sources:
            raise RecipeDocError(
                f"{path}: no {SOURCES[kind]} (field path → citation, one per table row)")
        return sources


def regions(doc: str) -> list[tuple[re.Match, int, int]]:
    """``(marker, first line, end-marker line)`` of every generated region, by line index."""
    lines, out, start = doc.split("\n"), [], None
    for i, line in enumerate(lines):
        if line.startswith("<!-- generated"):
            m = START.fullmatch(line)
            if m is None:
                raise RecipeDocError(
                    f"line {i + 1}: a generated-region marker in another form than {START.pattern}")
            if start is not None:
                raise RecipeDocError(
                    f"line {i + 1}: a region starts before the one at line {start[1] + 1} ends")
            start = (m, i)
        elif line == END:
            if start is None:
                raise RecipeDocError(f"line {i + 1}: {END} without a region to end")
            out.append((*start, i))
            start = None
    if start is not None:
        raise RecipeDocError(f"line {start[1] + 1}: a region without {END}")
    return out


def render(doc: str, root: Path = ROOT) -> str:
    """``doc`` with every generated region's table rewritten from the recipes under ``root``."""
    lines, recipes, out, done = doc.split("\n"), Recipes(root), [], 0
    with default_environment():
        for m, first, last in regions(doc):
            path, kind, functions = m["path"], m["kind"], m["functions"].split(",")
            where = f"line {first + 1} ({path})"
            sources = recipes.sources(path, kind)
            if kind == "cascade":
                table = cascade_table({fn: recipes.cascade(path, fn) for fn in functions}, sources,
                                      where)
            elif len(functions) != 1:
                raise RecipeDocError(
                    f"{where}: a stage table shows one function's stages, not {functions}")
            else:
                table = stage_table(recipes.cascade(path, functions[0]), sources, where)
            # a blank line ends the table before the end marker
            out += lines[done:first + 1] + table + [""]
            done = last
    return "\n".join(out + lines[done:])


def main(argv: list[str] | None = None, doc: Path = DOC) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the doc differs from the recipes")
    args = parser.parse_args(argv)
    current = doc.read_text()
    try:
        wanted = render(current)
    except RecipeDocError as e:
        print(f"error: {doc}: {e}", file=sys.stderr)
        return 2
    if wanted == current:
        return 0
    if args.check:
        print(f"{doc} is out of date with the recipes: run `{COMMAND}`", file=sys.stderr)
        return 1
    doc.write_text(wanted)
    print(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
