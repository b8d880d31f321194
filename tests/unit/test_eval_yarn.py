"""Evaluation as paper App. B sets it up, decided without an engine: the YaRN factor and input limit
each suite gets (2 for every benchmark; SWE-bench input 32K, the 14B's 64K with YaRN 3), the
``hf_overrides`` an engine is started with for a factor, one engine per factor, prompts over the
input limit counted as too long, a run's gate settings reaching ``nemo-cascade eval`` on its stage
directory, and ``eval --help`` listing every suite. The engines themselves start in
tests/integration/test_eval_yarn.py."""
from __future__ import annotations

import json
import runpy
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import main
from nemo_cascade.convert.hf_config import with_yarn
from nemo_cascade.evaluate import EvalError, EvalSettings, get_suite, prepare
from nemo_cascade.evaluate.runner import context_needed, decoding_for, fits_input
from nemo_cascade.tooling.standalone import run_gate, with_run_gate, yarn_groups
from nemo_cascade.evaluate.suites import SUITES
from nemo_cascade.tooling.demo_data.tiny_suites import TINY_SUITES
from nemo_cascade.cascade.forgetting import Gate
from nemo_cascade.rollout import engine_start as ES

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "max_position_embeddings": 32768,
         "rope_theta": 1000000.0, "rope_scaling": None, "hidden_size": 4096,
         "num_attention_heads": 32}
"""The rope part of a Qwen3-8B config.json: 32768 native positions, plain RoPE."""


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("yarn_tok"))


def _recipe(name: str, fn: str = "recipe") -> config.Cascade:
    return runpy.run_path(str(ROOT / "recipes" / f"{name}.py"))[fn]()


# ---------------------------------------------------------------------------------------- per suite

def test_every_paper_suite_defaults_to_yarn_2_and_swe_to_32k_input():
    """App. B: YaRN factor 2 over the native positions for every benchmark; SWE-bench input 32K (the
    8B's)."""
    for name, suite in SUITES.items():
        d = decoding_for(suite, EvalSettings())
        assert d.yarn_factor == 2.0, name
        assert d.max_input_tokens == (32768 if name == "swe" else 0), name
    assert all(s.yarn_factor == 1.0 for s in TINY_SUITES), "tiny suites: the tiny model's own RoPE"
    d = decoding_for(get_suite("swe"),
                     EvalSettings(yarn={"swe": 3.0}, max_input_tokens={"swe": 65536}))
    assert (d.yarn_factor, d.max_input_tokens) == (3.0, 65536)


@pytest.mark.parametrize("settings, expected", [
    (EvalSettings(yarn={"gsm8k": 0.5}), "--yarn gsm8k=0.5: expected a YaRN factor >= 1 (1 = none)"),
    (EvalSettings(max_input_tokens={"gsm8k": -1}),
     "--max-input-tokens gsm8k=-1: expected an integer >= 0"),
])
def test_bad_yarn_or_input_limit_is_one_line(settings, expected):
    with pytest.raises(EvalError) as err:
        decoding_for(get_suite("gsm8k"), settings)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_prompts_over_the_input_limit_are_too_long_and_do_not_size_the_engine(tok):
    prep = prepare("gsm8k", EvalSettings(limit=4, max_tokens=10), tok)
    lengths = sorted(len(p.prompt_tokens) for p in prep.prompts)
    limited = replace(prep, decoding=replace(prep.decoding, max_input_tokens=lengths[-2]))
    assert (fits_input(lengths[-2], limited.decoding, 10**6)
            and not fits_input(lengths[-1], limited.decoding, 10**6))
    assert not fits_input(lengths[0], limited.decoding, lengths[0]), (
        "the engine's context still bounds it")
    assert context_needed([prep]) == lengths[-1] + 10
    assert context_needed([limited]) == lengths[-2] + 10, "the longest prompt that is generated"


# --------------------------------------------------------------------------------- engine arguments

def test_yarn_overrides_rescale_a_plain_rope_config():
    """The engine-start arguments for factor 2 / 3 over Qwen3's 32768 positions (App. B): vLLM reads
    YaRN's max_position_embeddings as already scaled and takes rope_parameters whole (rope_theta
    kept)."""
    where = Path("m/config.json")
    assert ES.yarn_overrides(ES.served_shape(QWEN3), 2, where) == {
        "max_position_embeddings": 65536,
        "rope_parameters": {"rope_type": "yarn", "factor": 2.0,
                            "original_max_position_embeddings": 32768, "rope_theta": 1000000.0}}
    three = ES.yarn_overrides(ES.served_shape(QWEN3), 3, where)
    assert three["max_position_embeddings"] == 98304 and three["rope_parameters"]["factor"] == 3.0
    assert ES.yarn_overrides(ES.served_shape(QWEN3), 1, where) == {}, (
        "factor 1: config.json as it is")
    served = ES.with_overrides(ES.served_shape(QWEN3), three)
    assert ((ES.yarn_factor(served), ES.native_positions(served), ES.model_positions(served))
            == (3.0, 32768, 98304))


def test_yarn_overrides_of_a_release_config_scale_from_its_native_positions():
    """A release config.json already carries YaRN ×2 (``convert to-hf``, model.yarn_factor): the
    14B's SWE-bench run rescales to ×3 over the same 32768 native positions, not over the scaled
    65536; ×1 undoes it."""
    release = ES.served_shape(with_yarn(QWEN3, 2.0))
    where = Path("m/config.json")
    assert ES.yarn_factor(release) == 2.0 and ES.native_positions(release) == 32768
    assert ES.yarn_overrides(release, 2, where) == {}
    three = ES.yarn_overrides(release, 3, where)
    assert three["max_position_embeddings"] == 98304
    assert three["rope_parameters"]["original_max_position_embeddings"] == 32768
    plain = ES.yarn_overrides(release, 1, where)
    assert plain == {"max_position_embeddings": 32768,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}
    assert ES.yarn_factor(ES.with_overrides(release, plain)) == 1.0


@pytest.mark.parametrize("hf, factor, expected", [
    ({**QWEN3, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 2,
     "its rope type is 'llama3'"),
    ({"rope_theta": 1e4}, 2, "it names no positions"),
    (QWEN3, 0.5, "expected >= 1"),
])
def test_configs_that_cannot_be_rescaled_are_one_line(hf, factor, expected):
    with pytest.raises(ValueError) as err:
        ES.yarn_overrides(ES.served_shape(hf), factor, Path("m/config.json"))
    assert expected in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------------------- per recipe

@pytest.mark.parametrize("recipe, engines", [
    ("nemotron_cascade_8b",
     [(2.0, ["ifeval", "ifbench", "aime24", "aime25", "humaneval", "mbpp", "swe"])]),
    ("nemotron_cascade_8b_thinking",
     [(2.0, ["ifeval", "ifbench", "aime24", "aime25", "humaneval", "mbpp", "swe"])]),
    ("nemotron_cascade_14b_thinking",
     [(2.0, ["ifeval", "ifbench", "aime24", "aime25", "humaneval", "mbpp"]), (3.0, ["swe"])]),
])
def test_each_recipes_suites_get_their_engines(tok, recipe, engines):
    """App. B: every suite of a recipe's gate on one YaRN-2 engine, but the 14B's SWE-bench on a
    YaRN-3 engine of its own (64K input); the grouping ``nemo-cascade eval`` starts its engines
    by."""
    cfg = _recipe(recipe)
    settings = replace(Gate.settings_for(cfg), limit=1)
    prepared = [prepare(name, settings, tok) for name in cfg.gate.suites]
    assert [(f, [p.suite.name for p in group]) for f, group in yarn_groups(prepared)] == engines
    swe = next(p for p in prepared if p.suite.name == "swe")
    assert swe.decoding.max_input_tokens == (65536 if "14b" in recipe else 32768)


def test_a_stage_directory_is_evaluated_with_its_runs_gate_settings(tmp_path):
    """``nemo-cascade eval runs/<name>/stages/<k>-<stage>`` of the 14B run: thinking mode
    everywhere, SWE-bench at YaRN 3 with 64K input, unless the command line says otherwise."""
    run = tmp_path / "runs" / "14b"
    stage = run / "stages" / "5-swe"
    stage.mkdir(parents=True)
    (run / "config.json").write_text(config.dumps(_recipe("nemotron_cascade_14b_thinking")))
    gate = run_gate(stage)
    settings = with_run_gate(EvalSettings(), gate)
    assert ((settings.mode, dict(settings.yarn), dict(settings.max_input_tokens))
            == ("think", {"swe": 3.0}, {"swe": 65536}))
    mine = with_run_gate(EvalSettings(mode="no_think", yarn={"swe": 2.0}), gate)
    assert (mine.mode, mine.yarn["swe"], mine.max_input_tokens["swe"]) == ("no_think", 2.0, 65536)
    assert run_gate(None) is None and run_gate(tmp_path / "elsewhere" / "stage") is None
    (run / "config.json").write_text(json.dumps({"gate": {"yarn": ["swe"]}}))
    with pytest.raises(EvalError, match=r"config.json: unreadable run config"):
        run_gate(stage)


# ----------------------------------------------------------------------------------- config and CLI

@pytest.mark.parametrize("gate, expected", [
    (config.Gate(suites=("swe",), yarn=("swe=0.5",)),
     "gate.yarn: expected SUITE=FACTOR with SUITE one of gate.suites"),
    (config.Gate(suites=("swe",), yarn=("gsm8k=2",)), "gate.yarn: expected SUITE=FACTOR"),
    (config.Gate(suites=("swe",), max_input_tokens=("swe=lots",)),
     "gate.max_input_tokens: expected SUITE=TOKENS"),
    (config.Gate(suites=("swe",), mode="fast"), "gate.mode"),
])
def test_bad_gate_settings_are_one_config_error(gate, expected):
    tiny = _recipe("tiny")
    assert config.validate(tiny) is tiny
    with pytest.raises(config.ConfigError) as err:
        config.validate(replace(tiny, gate=gate))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_gate_settings_take_overrides():
    tiny = replace(_recipe("tiny"), gate=config.Gate(suites=("swe", "ifeval")))
    cfg = apply_overrides(tiny,
                          ["gate.mode=think", "gate.yarn=swe=3", "gate.max_input_tokens=swe=65536"])
    assert ((cfg.gate.mode, cfg.gate.yarn, cfg.gate.max_input_tokens)
            == ("think", ("swe=3",), ("swe=65536",)))
    assert config.validate(cfg) is cfg


@pytest.mark.parametrize("argv, expected", [
    (["--yarn", "swe"], "--yarn swe: expected SUITE=VALUE with a float >= 1"),
    (["--yarn", "swe=0"], "--yarn swe=0: expected SUITE=VALUE with a float >= 1"),
    (["--yarn", "nope=2"], "--suite nope: unknown suite"),
    (["--max-input-tokens", "swe=1.5"],
     "--max-input-tokens swe=1.5: expected SUITE=VALUE with a int >= 0"),
])
def test_bad_yarn_options_are_one_line(capsys, hf_folder, argv, expected):
    assert main(["eval", str(hf_folder), "--suite", "swe", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err


def test_eval_help_lists_every_suite_on_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = capsys.readouterr().out.partition("\nsuites (")[2]
    for name, suite in {**SUITES, **{s.name: s for s in TINY_SUITES}}.items():
        lines = [line for line in out.splitlines() if line.startswith(f"  {name}: ")]
        assert len(lines) == 1, name
        assert suite.description in lines[0] and f"[{suite.mode}, K={suite.samples}," in lines[0]
