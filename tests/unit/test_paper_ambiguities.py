"""docs/recipes.md "Ambiguities, decided": every choice is one setting away from the other reading.

Each row's last column names a recipe and one override (two where a stage's length changes unit);
applied, the cascade still validates and the named value changes — so the table cannot name a
setting that does not exist or that the recipe already has.
"""
import re
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "recipes.md").read_text()
    section = text.split("## Ambiguities, decided", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("question", "---") or set(cells[0]) <= {"-"}:
            continue
        found = re.fullmatch(r"`([^`]+)` `([^`]+)`.*", cells[4])
        assert found, f"row {cells[0]!r}: last column must be `RECIPE` `OVERRIDE`, got {cells[4]!r}"
        rows.append((cells[0], found.group(1), found.group(2)))
    return rows


ROWS = _rows()


def _value(cfg: config.Cascade, path: str):
    head, *attrs = path.split(".")
    value = cfg
    if head == "stages":
        value, attrs = config.stage_by_name(cfg, attrs[0]), attrs[1:]
    else:
        attrs = [head, *attrs]
    for a in attrs:
        value = getattr(value, a)
    return value


def test_the_section_lists_the_known_ambiguities():
    questions = " ".join(q for q, _, _ in ROWS)
    for topic in ("horizon", "first IF-RL sub-stage", "second SWE RL stage", "code RL temperature",
                  "truncated sample's group", "length phase ends", "refills",
                  "SWE-bench evaluation"):
        assert topic in questions, topic


@pytest.mark.parametrize("question,recipe,override", ROWS, ids=[q[:40] for q, _, _ in ROWS])
def test_the_other_reading_is_one_valid_override_away(question, recipe, override):
    cfg = load_recipe(str(ROOT / recipe))
    overrides = override.split(" ")  # a length given in epochs instead of steps takes two
    path, value = overrides[-1].split("=", 1)
    changed = config.validate(apply_overrides(cfg, overrides))
    assert _value(changed, path) != _value(cfg, path), (
        f"{question}: the recipe already has {override}")
