"""Fuzz tier, config: random ``KEY=VALUE`` overrides, mutated config.json documents and recipe specs
end as a one-line ConfigError or a config whose every field has its type (finite floats, safe names)
— never another exception (docs/architecture.md, "Contracts": one clear line on bad input)."""
from __future__ import annotations

import json
import re
import typing
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.config.checks import check_types

from .fuzz_budget import fuzz, one_line, ran

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20
TINY = load_recipe(str(ROOT / "recipes" / "tiny.py") + ":math_only")


def _paths(cls, prefix: str = "") -> list[str]:
    """Every dotted field path of a config section (sections recursed, lists of sections not)."""
    out = []
    for f in fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        if is_dataclass(tp):
            out += _paths(tp, f"{prefix}{f.name}.")
        elif f.name != "stages":
            out.append(prefix + f.name)
    return out


STAGE_FIELDS = _paths(config.Stage)
KEYS = ([k for k in _paths(config.Cascade)]
        + [f"stages.{s}.{k}" for s in ("math", "sft", "0", "1", "*") for k in STAGE_FIELDS])
TRICKY_VALUES = [
    "", "nan", "NaN", "inf", "-inf", "1e999", "-0", "0", "1", "-1", "2", "0.5", "true", "false",
    "none", "null", "None", "yes", "filter", "zero", "think", "half", "grpo", "sft", "reward_model",
    "bwrap", "unsafe", "cosine", "1:2", "1:2:zero", "70:40960:zero:T0.8", "1:2:T0", "1:2:Tnan",
    ",,,", "a=b", "9" * 5000, "1" * 400 + ".5", "²", "٣", "\x00", "é", "\u2028", "../..", "a/b",
    ".", "(", "(?P<x>", "(.+)", "####\\s*(.+)", "gsm8k", "answer_is", "batch_min_minus_10",
    "-1e309", " 1 ", "0x10", "1_000", "+5", "∞"]
values = st.one_of(st.sampled_from(TRICKY_VALUES), st.text(max_size=30), st.integers().map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
real_keys = st.sampled_from(KEYS)
keys = st.one_of(
    real_keys,
    st.sampled_from(KEYS).flatmap(lambda k: st.text(max_size=8).map(lambda extra: f"{k}.{extra}")),
    st.lists(st.text(max_size=10), min_size=1, max_size=4).map(".".join),
    st.sampled_from([
        "stages", "stages.*", "stages.9", "stages.²", "stages.٣.steps", "stages..steps",
        "stages.math.", "parallel", "model.build.x", "seed.x", ".", "", "stages.*.data",
        "gate.tolerance", "stages.math.length_curriculum", "stages.sft.extra_data"]))
pairs = st.tuples(keys, values).map("=".join)
overrides = st.one_of(
    # real fields, odd values
    st.lists(st.tuples(real_keys, values).map("=".join), min_size=1, max_size=2),
    # anything on the command line
    st.lists(st.one_of(pairs, st.text(max_size=20)), min_size=1, max_size=2))


def _assert_clean_config(cfg: config.Cascade) -> None:
    check_types(cfg)  # every field has its annotated type; floats are finite
    doc = json.dumps(config.to_dict(cfg), allow_nan=False)  # config.json cannot carry a NaN
    assert config.from_dict(config.Cascade, json.loads(doc)) == cfg


@fuzz("config.apply_overrides")
@given(overrides)
def test_random_overrides_end_in_one_line_or_a_clean_config(items):
    ran("config.apply_overrides")
    try:
        cfg = apply_overrides(TINY, items)
    except config.ConfigError as e:
        message = str(e)
        assert one_line(message) and ": " in message, message
        return
    _assert_clean_config(cfg)


def test_override_fixes_found_by_fuzzing():
    """Each of these once ended in a NaN config, a traceback or a run directory outside runs/."""
    cases = {
        "stages.math.rollout.temperature=nan": "stages.math.rollout.temperature: "
                                               "expected a finite number",
        "stages.math.actor.lr=nan": "stages.math.actor.lr: expected a finite number",
        "stages.math.reward.verify_timeout_s=inf": "verify_timeout_s: expected a finite number",
        "stages.math.reward.code_switch_penalty=-inf": "code_switch_penalty: "
                                                       "expected a finite number",
        # '²'.isdigit() but int('²') raises ValueError
        "stages.².steps=3": "stages.².steps: no stage '²'",
        "name=../../elsewhere": "name: expected 1-128 characters",
        "stages.math.name=a/b": "stages.1.name: expected 1-128 characters",
        "stages.math.reward.answer_pattern=(": "stages.math.reward.answer_pattern: not a regex",
        "stages.math.reward.answer_pattern=Final": "answer_pattern: the regex needs a group",
        "a\nb=1": "'a\\nb': unknown key",
    }
    for item, message in cases.items():
        ran("config.apply_overrides")
        with pytest.raises(config.ConfigError) as e:
            apply_overrides(TINY, [item])
        assert message in str(e.value) and one_line(str(e.value)), (item, str(e.value))
    ok = apply_overrides(
        TINY, ["stages.math.reward.answer_pattern=gsm8k", "name=run-1.b", "stages.١.actor.lr=0.5"])
    assert ok.name == "run-1.b" and ok.stages[1].actor.lr == 0.5  # '١' is a decimal digit: stage 1


def test_named_answer_patterns_mirror_the_math_verifier():
    from nemo_cascade.config.stage_checks import NAMED_ANSWER_PATTERNS
    from nemo_cascade.rewards.math import ANSWER_PATTERNS

    assert set(NAMED_ANSWER_PATTERNS) == set(ANSWER_PATTERNS)


# ------------------------------------------------------------------ config.json (from_dict)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
              st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def _leaf_paths(doc, prefix=()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaf_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _leaf_paths(v, (*prefix, i))
    return out


BASE_DOC = config.to_dict(replace(TINY, stages=(*TINY.stages[:1], replace(
    TINY.stages[-1], length_curriculum=(config.LengthPhase(TINY.stages[-1].steps, 64),)))))
DOC_PATHS = _leaf_paths(BASE_DOC)


@st.composite
def mutated_docs(draw):
    doc = json.loads(json.dumps(BASE_DOC))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(DOC_PATHS))
        parent, node = None, doc
        try:
            for step in path:
                parent, node = node, node[step]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed it
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            doc = draw(json_values) if action == "replace" else doc
        elif action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=6))] = draw(json_values)
    return doc


@fuzz("config.from_dict")
@given(mutated_docs())
def test_mutated_config_json_ends_in_one_line_or_a_typed_config(doc):
    ran("config.from_dict")
    try:
        cfg = config.from_dict(config.Cascade, doc)
    except config.ConfigError as e:
        assert one_line(str(e)), str(e)
        return
    check_types(cfg)


def test_from_dict_fixes_found_by_fuzzing():
    doc = json.loads(json.dumps(BASE_DOC))
    cases = [
        (lambda d: d.update(parallel=3),
         "parallel: expected an object of Parallel fields, got int"),
        (lambda d: d.update(stages={"a": 1}), "stages: expected a list, got dict"),
        (lambda d: d.update(seed="7"), "seed: expected an integer, got str '7'"),
        (lambda d: d["stages"][1]["rollout"].update(temperature=float("nan")),
         "stages.1.rollout.temperature: expected a finite number"),
        (lambda d: d["stages"][1].update(length_curriculum=[{}]),
         "stages.1.length_curriculum.0: missing key(s) ['steps', 'max_response_tokens']"),
        (lambda d: d["stages"][1]["grpo"].update(overlong="drop"),
         "stages.1.grpo.overlong: expected one of"),
        (lambda d: d["gate"].update(suites="aime"), "gate.suites: expected a list, got str"),
    ]
    for mutate, message in cases:
        ran("config.from_dict")
        bad = json.loads(json.dumps(doc))
        mutate(bad)
        with pytest.raises(config.ConfigError) as e:
            config.from_dict(config.Cascade, bad)
        assert message in str(e.value) and one_line(str(e.value)), (message, str(e.value))


# ------------------------------------------------------------------ recipe specs

_RECIPE_FILES = {
    "returns_none.py": "def recipe():\n    return None\n",
    "needs_args.py": "def recipe(scale):\n    return scale\n",
    "not_callable.py": "recipe = 3\n",
    "good.py": f"from nemo_cascade.tooling.cli import load_recipe\n\ndef recipe():\n"
               f"    return load_recipe({str(ROOT / 'recipes' / 'tiny.py')!r} + ':math_only')\n",
}
spec_text = st.text(st.sampled_from(list("abc_.:/ \x00é²-")), max_size=12)


@fuzz("config.load_recipe")
@given(spec=st.one_of(
    st.sampled_from(["", ":", ".", "..x", ".:f", "a..b", "/:x", "json:dumps", "os.path:sep",
                     "x.py\x00", "\x00.py", "math:pi", "json:loads"]),
    spec_text.map(lambda s: "zz_fuzz_no_such_module" + s),
    spec_text.map(lambda s: "." + s),
    spec_text.map(lambda s: s + ".py"),
    st.tuples(st.sampled_from(sorted(_RECIPE_FILES)),
              st.sampled_from(["", ":recipe", ":nope", ":", ":__name__"])
              ).map(lambda t: f"@{t[0]}{t[1]}")))
def test_recipe_specs_end_in_one_line_or_a_cascade(tmp_path_factory, spec):
    ran("config.load_recipe")
    if spec.startswith("@"):
        folder = tmp_path_factory.getbasetemp() / "fuzz_recipes"
        folder.mkdir(exist_ok=True)
        for name, text in _RECIPE_FILES.items():
            (folder / name).write_text(text)
        spec = str(folder / spec[1:])
    try:
        cfg = load_recipe(spec)
    except config.ConfigError as e:
        assert one_line(str(e)) and str(e).startswith("recipe "), str(e)
        return
    assert isinstance(cfg, config.Cascade)


def test_recipe_spec_fixes_found_by_fuzzing():
    for spec, message in [("", "expected recipes/NAME.py"), (".", "expected recipes/NAME.py"),
                          ("..x:f", "expected recipes/NAME.py"),
                          ("json:dumps", "dumps() needs arguments")]:
        ran("config.load_recipe")
        with pytest.raises(config.ConfigError, match=re.escape(message)):
            load_recipe(spec)


@pytest.mark.parametrize("key", [
    "seed", "stages.math.rollout.temperature", "name", "stages.math.data.source", "gate.tolerance",
    "stages.math.length_curriculum", "stages.math.grpo.overlong",
    "stages.math.reward.answer_pattern", "wandb"])
def test_megabyte_override_values_end_in_a_short_line_or_a_clean_config(key):
    ran("config.apply_overrides")
    for value in ("9" * MB, "é" * MB, "(" * MB):
        try:
            cfg = apply_overrides(TINY, [f"{key}={value}"])
        except config.ConfigError as e:
            assert one_line(str(e)) and len(str(e)) < 1000, str(e)[:300]
        else:
            _assert_clean_config(cfg)
