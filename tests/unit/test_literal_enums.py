"""Enum values are declared once, in a ``Literal`` annotation: the constants and checks that list
allowed values derive from it (config.literal_values / typing.get_args), and no second list of the
same strings is left."""
from __future__ import annotations

import ast
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.config import checks, stage_checks
from nemo_cascade.config.schema import literal_values
from nemo_cascade.data import chat
from nemo_cascade.rewards import language
from nemo_cascade.rewards import math as math_reward

PKG = Path(__file__).resolve().parents[2] / "nemo_cascade"


def _config_literals() -> set[frozenset[str]]:
    """The value sets of every Literal field of the config tree."""
    found, todo = set(), [config.Cascade]
    while todo:
        cls = todo.pop()
        for name, tp in typing.get_type_hints(cls).items():
            if typing.get_origin(tp) is typing.Literal:
                found.add(frozenset(typing.get_args(tp)))
            for arg in (tp, *typing.get_args(tp)):
                if is_dataclass(arg):
                    todo.append(arg)
    return found


@pytest.mark.parametrize("constant,cls,name", [
    (config.STAGE_KINDS, config.Stage, "kind"),
    (checks.TRANSFORMER_IMPLS, config.Model, "transformer_impl"),
    (checks.FP8_RECIPES, config.Model, "fp8"),
    (checks.RECOMPUTE, config.Parallel, "recompute"),
    (stage_checks.OVERLONG, config.LengthPhase, "overlong"),
    (math_reward.GRADERS, config.Reward, "math_grader"),
    (chat.STYLES, config.Cascade, "chat_style"),
])
def test_constants_equal_their_fields_literal(constant, cls, name):
    assert (constant == typing.get_args(typing.get_type_hints(cls)[name])
            == literal_values(cls, name))


def test_module_literals_and_their_tuples_agree():
    assert chat.STYLES == typing.get_args(chat.Style)
    assert language.CODE_SWITCH_RULES == typing.get_args(language.CodeSwitchRule)
    assert ({"auto", *language.CODE_SWITCH_RULES}
            == set(literal_values(config.Reward, "code_switch_rule")))


def _string_collections(path: Path):
    """Tuples, lists and sets of two or more string constants outside ``Literal[...]``
    subscripts."""
    tree = ast.parse(path.read_text())
    inside_literal = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript)
                and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal"):
            inside_literal.update(id(n) for n in ast.walk(node.slice))
    for node in ast.walk(tree):
        if (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in inside_literal
                and len(node.elts) >= 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                        for e in node.elts)):
            yield node.lineno, frozenset(e.value for e in node.elts)


@pytest.mark.parametrize("rel", ["config/schema.py", "config/gate.py", "config/data.py",
                                 "config/checks.py",
                                 "config/stage_checks.py",
                                 "config/serialize.py", "rewards/math.py",
                                 "data/chat.py", "rewards/language.py", "tooling/cli.py",
                                 "tooling/cli_parser.py", "tooling/overrides.py"])
def test_no_second_declaration_of_a_config_literal(rel):
    literals = _config_literals() | {frozenset(typing.get_args(chat.Style)),
                                     frozenset(typing.get_args(language.CodeSwitchRule))}
    again = [(line, sorted(values)) for line, values in _string_collections(PKG / rel)
             if values in literals]
    assert not again, (f"nemo_cascade/{rel} lists a Literal's values again "
                       f"(derive them with literal_values): {again}")
