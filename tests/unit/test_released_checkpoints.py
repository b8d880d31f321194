"""Starting the 8B cascade from a released intermediate checkpoint, and preflight naming every
missing input with the recipe that avoids it."""
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.cascade.preflight import check_inputs_exist

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "nemotron_cascade_8b.py"


@pytest.mark.parametrize("fn,model,first", [("from_rlhf", "RLHF", "if_ifeval"),
                                            ("from_if_rl", "IFRL", "math"),
                                            ("from_math_rl", "MathRL", "code"),
                                            ("from_code_rl", "CodeRL", "swe")])
def test_each_released_checkpoint_has_a_recipe_with_the_later_stages(fn, model, first, monkeypatch):
    monkeypatch.setenv("NEMO_CASCADE_MODELS", "/ckpts")
    full, later = load_recipe(str(RECIPE)), load_recipe(f"{RECIPE}:{fn}")
    names = [s.name for s in full.stages]
    assert [s.name for s in later.stages] == names[names.index(first):]
    assert later.model.hf_path == f"/ckpts/Nemotron-Cascade-8B-{model}"
    assert later.name.startswith("nemotron-cascade-8b-from-") and later.gate.evaluate_base
    # the stages themselves are the full recipe's, unchanged
    assert later.stages == full.stages[names.index(first):]


def test_preflight_names_every_missing_file_and_the_recipe_that_avoids_them(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_CASCADE_DATA", str(tmp_path))
    cfg = load_recipe(str(RECIPE))
    # everything present but RLHF's prompts and code RL's problems (never released)
    for s in cfg.stages:
        if s.name not in ("rlhf", "code"):
            Path(s.data.source).parent.mkdir(parents=True, exist_ok=True)
            Path(s.data.source).write_text("{}\n")
    with pytest.raises(config.ConfigError) as e:
        check_inputs_exist(cfg)
    message = str(e.value)
    assert "\n" not in message and message.startswith("2 input files missing: ")
    assert "stages.rlhf.data.source" in message and "stages.code.data.source" in message
    assert "nemo-cascade run recipes/nemotron_cascade_8b.py:from_code_rl" in message
    only_rlhf = apply_overrides(cfg, [f"stages.code.data.source={tmp_path / 'rlhf-x.jsonl'}"])
    Path(tmp_path / "rlhf-x.jsonl").write_text("{}\n")
    with pytest.raises(config.ConfigError, match=r"recipes/nemotron_cascade_8b.py:from_rlhf"):
        check_inputs_exist(only_rlhf)


def test_without_a_released_checkpoint_the_hint_is_the_data_docs(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_CASCADE_DATA", str(tmp_path))
    cfg = load_recipe(str(ROOT / "recipes" / "nemotron_cascade_14b_thinking.py"))
    with pytest.raises(config.ConfigError) as e:
        check_inputs_exist(cfg)
    assert (f"{len(cfg.stages)} input files missing" in str(e.value)
            and "docs/recipes.md (Data)" in str(e.value))
